#ifndef VQSERVE_RUNTIME_CUDA_CUDA_COMMVQ_STEP_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_COMMVQ_STEP_H_

// the commvq side of one CudaLlamaModel step over a commvq CudaKvCache. commvq codes keys before
// rope, so, as PagedKvCache does, the cache keeps a third ring of pre-rope keys; the flushes, sink
// and gathers come from a CudaCodedStep (the gather reading that ring and the step's pre-rope
// rows); per layer the gathered pages are encoded, and attention reads codes + fp16 with the cpu
// cache's semantics (runtime/kv/paged_kv_cache.h): the fused commvq decode kernel when every
// sequence has one new token (the sink shifting the coded positions), else the multi-token kernel.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/kv_step/paged_kv_step.h"
#include "runtime/cuda/cuda_coded_step.h"
#include "runtime/cuda/cuda_kv_cache.h"

namespace vqserve {

class CudaCommVqStep {
 public:
  // stores layer `layer`'s new keys and values and writes attention into `att`.
  // qkv: (num_tokens, q | k | v) fp32 after rope, rows of qkv_stride floats, q (num_heads, D)
  // then k and v (num_kv_heads, D); kv_pre: (num_tokens, k | v) fp32 before rope, rows of
  // 2 * num_kv_heads * D floats; att: (num_tokens, num_heads, D) rows of att_stride.
  // decode: every sequence has one new token; `dp` then carries the fields the model set
  // (q, out, strides, pages, tables, lengths, ring, workspace). `coded` holds this step's plan.
  // empty string on success.
  // dp (the model's fields, as for Layer) completed with layer `layer`'s commvq and sink
  // fields: what Layer's decode launch takes.
  static cuda::DecodeAttentionParams DecodeParams(const CudaKvCache& cache, int layer,
                                                  const CudaCodedStep& coded,
                                                  cuda::DecodeAttentionParams dp);

  std::string Layer(const CudaKvCache& cache, int layer, const CudaCodedStep& coded,
                    const cuda::PagedKvStep& step, const float* qkv, int64_t qkv_stride,
                    const float* kv_pre, int num_heads, float* att, int64_t att_stride,
                    bool decode, cuda::DecodeAttentionParams dp, cudaStream_t stream);

 private:
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_COMMVQ_STEP_H_
