#ifndef VQSERVE_RUNTIME_CUDA_VECINFER_STEP_H_
#define VQSERVE_RUNTIME_CUDA_VECINFER_STEP_H_

// the vecinfer side of one CudaLlamaModel step over a vecinfer CudaKvCache (include only where
// VQSERVE_WITH_CUDA is set). per step the page flushes are planned on the host; per layer the
// pages due are gathered from the ring and the step's rows and encoded, and attention reads
// codes + fp16 with the cpu cache's semantics (runtime/paged_kv_cache.h): the fused decode
// kernel when every sequence has one new token, else the multi-token kernel.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/paged_kv_step.h"
#include "runtime/cuda_device_array.h"
#include "runtime/cuda_kv_cache.h"

namespace vqserve {

class CudaVecInferStep {
 public:
  // plans the step: sequence j has num_new[j] new tokens after num_cached[j] cached ones, its
  // step tokens follow those of sequences 0 .. j-1, and its page ids are row j of `tables`
  // (stride entries each). uploads the plan on `stream`.
  void Plan(const CudaKvCache& cache, const std::vector<int32_t>& num_cached,
            const std::vector<int32_t>& num_new, const std::vector<int32_t>& tables, int stride,
            cudaStream_t stream);

  // stores layer `layer`'s new keys and values and writes attention into `att`.
  // qkv: (num_tokens, q | k | v) fp32 after rope, rows of qkv_stride floats, q (num_heads, D)
  // then k and v (num_kv_heads, D); att: (num_tokens, num_heads, D) rows of att_stride.
  // decode: every sequence has one new token; `dp` then carries the fp16 fields the model set
  // (q, out, strides, pages, tables, lengths, ring, workspace). empty string on success.
  std::string Layer(const CudaKvCache& cache, int layer, const cuda::PagedKvStep& step,
                    const float* qkv, int64_t qkv_stride, int num_heads, float* att,
                    int64_t att_stride, bool decode, cuda::DecodeAttentionParams dp,
                    cudaStream_t stream);

 private:
  int batch_ = 0;
  std::vector<int32_t> page_ids_;  // (num flushes) page id of each flush
  DeviceArray<int32_t> meta_;      // flushes (count, 3) then step token starts (batch)
  DeviceArray<float> stage_k_, stage_v_, q_tilde_;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_VECINFER_STEP_H_
