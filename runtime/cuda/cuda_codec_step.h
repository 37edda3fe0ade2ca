#ifndef VQSERVE_RUNTIME_CUDA_CUDA_CODEC_STEP_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_CODEC_STEP_H_

// one kv codec's part of a CudaLlamaModel step over a CudaKvCache of its page format: plan the
// step's page flushes on the host, then per layer encode / append the new keys and values and
// attend (the fused decode kernel when every sequence has one new token, else the prefill
// kernels). the model runs the same sequence of calls for every codec; MakeCudaCodecStep
// picks the implementation for a format (fp16, kivi, vecinfer, commvq).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/kv_step/paged_kv_step.h"
#include "kernels/kv_page_format.h"
#include "runtime/cuda/cuda_kv_cache.h"

namespace vqserve {

// the host plan of a step: sequence j has num_new[j] new tokens after num_cached[j] cached
// ones, its step tokens follow those of sequences 0 .. j-1, its page ids are row j of `tables`
// (stride entries each); max_flush bounds the tokens any sequence flushes.
struct CudaStepPlan {
  std::vector<int32_t> num_cached, num_new, tables;
  int stride = 1;
  int max_flush = 0;
};

// one layer's inputs and outputs. qkv: (num_tokens, q | k | v) fp32 after rope, rows of
// qkv_stride floats, q (num_heads, D) then k and v (num_kv_heads, D); kv_pre: (num_tokens,
// k | v) fp32 before rope (codecs whose spec needs pre-rope keys; else null); att:
// (num_tokens, num_heads, D) rows of att_stride. step carries the layer's page, ring and sink
// pointers; decode: every sequence has one new token, and dp then carries the fields the model
// set (q, out, strides, pages, tables, lengths, ring, workspace, layer offset).
struct CudaLayerIo {
  const cuda::PagedKvStep* step = nullptr;
  const float* qkv = nullptr;
  int64_t qkv_stride = 0;
  const float* kv_pre = nullptr;
  int num_heads = 0;
  float* att = nullptr;
  int64_t att_stride = 0;
  float scale = 0.0f;
  bool decode = false;
  cuda::DecodeAttentionParams dp;
};

class CudaCodecStep {
 public:
  virtual ~CudaCodecStep() = default;
  // plans the step's page flushes and uploads the plan on `stream`; before any Layer.
  virtual void Plan(const CudaKvCache& cache, const CudaStepPlan& plan, cudaStream_t stream) = 0;
  // layer `layer`: stores the new keys and values and writes attention into io.att. empty
  // string on success.
  virtual std::string Layer(const CudaKvCache& cache, int layer, const CudaLayerIo& io,
                            cudaStream_t stream) = 0;
  // the split count of the decode launch for dp (the model's fields; part of a graph key).
  virtual int DecodeSplits(const CudaKvCache& cache,
                           const cuda::DecodeAttentionParams& dp) const = 0;
  // appends what the step's launches bake in beyond the model's own buffers (plan sizes,
  // device pointers) to a cuda graph key.
  virtual void AppendGraphKey(std::vector<int64_t>* key) const = 0;
};

// the step of `format`'s caches.
std::unique_ptr<CudaCodecStep> MakeCudaCodecStep(KvPageFormat format);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_CODEC_STEP_H_
