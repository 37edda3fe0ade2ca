#ifndef VQSERVE_RUNTIME_CUDA_CUDA_CODED_STEP_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_CODED_STEP_H_

// the codec-independent part of one CudaLlamaModel step over a coded CudaKvCache (vecinfer, kivi,
// commvq): the page flushes of the step, planned on the host as PagedKvCache does them (pages
// inside the attention sink are never encoded); per layer the sink append and the gather of the
// pages due into fp32 staging for the codec's encode kernel; and the sink's fields of the fused
// decode kernel's params.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/kv_step/paged_kv_step.h"
#include "runtime/cuda/cuda_device_array.h"
#include "runtime/cuda/cuda_kv_cache.h"

namespace vqserve {

class CudaCodedStep {
 public:
  // plans the step: sequence j has num_new[j] new tokens after num_cached[j] cached ones, its
  // step tokens follow those of sequences 0 .. j-1, and its page ids are row j of `tables`
  // (stride entries each). uploads the plan on `stream`.
  void Plan(const CudaKvCache& cache, const std::vector<int32_t>& num_cached,
            const std::vector<int32_t>& num_new, const std::vector<int32_t>& tables, int stride,
            cudaStream_t stream);

  // layer step.layer_offset's sink rows for the new tokens (k, v: (num_tokens, H, D) fp32 rows
  // of kv_stride floats; no launch when none of them lands in the sink), then the pages due
  // gathered into staged_k / staged_v. call before the encode, the attention and the ring
  // append of the layer. empty string on success.
  std::string SinkAndGather(const cuda::PagedKvStep& step, const float* k, const float* v,
                            int64_t kv_stride, cudaStream_t stream) const;
  // the two halves of SinkAndGather, for codecs that code other keys than the sink holds
  // (commvq: the gather reads the pre-rope ring through step.ring_k and pre-rope rows k).
  std::string SinkAppend(const cuda::PagedKvStep& step, const float* k, const float* v,
                         int64_t kv_stride, cudaStream_t stream) const;
  std::string Gather(const cuda::PagedKvStep& step, const float* k, const float* v,
                     int64_t kv_stride, cudaStream_t stream) const;

  int flush_count() const { return static_cast<int>(page_ids_.size()); }
  // (num flushes) page id of each flush in device memory, as the batched encoders take them
  // (page i's layer slice at pages + layer offset + id * page_bytes).
  const int32_t* flush_page_ids() const { return meta_.data() + 3 * flush_count() + 3 * batch_; }
  // flush f's gathered page: (page_tokens, H, D) fp32 of fp16-rounded values.
  const float* staged_k(int f) const { return stage_k_.data() + page_floats_ * f; }
  const float* staged_v(int f) const { return stage_v_.data() + page_floats_ * f; }
  // (batch) step token index of each sequence's first new token, in device memory.
  const int32_t* seq_tok_start() const { return meta_.data() + 3 * flush_count(); }

  // points dp's coded range past the sink (block tables from the sink's end, coded_lens and
  // max_coded_len of the coded tokens after it) and sets its sink fields for `layer`; nothing
  // when the cache has no sink. dp's block_tables must be the plan's tables.
  void SetDecodeSink(const CudaKvCache& cache, int layer, cuda::DecodeAttentionParams* dp) const;

  // appends what the step's launches take from the plan (sizes and device pointers) to a cuda
  // graph key (runtime/cuda/cuda_graph_cache.h).
  void AppendGraphKey(std::vector<int64_t>* key) const;

 private:
  int batch_ = 0;
  int sink_tokens_ = 0, page_tokens_ = 32, max_coded_after_sink_ = 0;
  bool sink_writes_ = false;  // some new token's position is inside the sink
  size_t page_floats_ = 0;
  std::vector<int32_t> page_ids_;  // (num flushes) page id of each flush
  // flushes (count, 3), step token starts (batch), coded tokens after the sink (batch), sink
  // tokens held (batch), page ids (count).
  DeviceArray<int32_t> meta_;
  DeviceArray<float> stage_k_, stage_v_;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_CODED_STEP_H_
