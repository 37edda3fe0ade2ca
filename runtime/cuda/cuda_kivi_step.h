#ifndef VQSERVE_RUNTIME_CUDA_CUDA_KIVI_STEP_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_KIVI_STEP_H_

// the kivi side of one CudaLlamaModel step over a kivi CudaKvCache. the flushes, sink and gathers
// come from a CudaCodedStep; per layer the gathered pages are encoded by the gpu kivi encoder
// (bit-exact with KiviCodec), and attention reads codes + fp16 with the cpu cache's semantics
// (runtime/kv/paged_kv_cache.h): the fused kivi decode kernel when every sequence has one new
// token, else the multi-token kernel.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/kv_step/paged_kv_step.h"
#include "runtime/cuda/cuda_coded_step.h"
#include "runtime/cuda/cuda_kv_cache.h"

namespace vqserve {

// stores layer `layer`'s new keys and values and writes attention into `att`.
// qkv: (num_tokens, q | k | v) fp32 after rope, rows of qkv_stride floats, q (num_heads, D)
// then k and v (num_kv_heads, D); att: (num_tokens, num_heads, D) rows of att_stride.
// decode: every sequence has one new token; `dp` then carries the fp16 fields the model set
// (q, out, strides, pages, tables, lengths, ring, workspace). `coded` holds this step's plan.
// empty string on success.
// dp (the model's fields, as for CudaKiviLayer) completed with layer `layer`'s kivi and sink
// fields: what CudaKiviLayer's decode launch takes.
cuda::DecodeAttentionParams KiviDecodeParams(const CudaKvCache& cache, int layer,
                                             const CudaCodedStep& coded,
                                             cuda::DecodeAttentionParams dp);

std::string CudaKiviLayer(const CudaKvCache& cache, int layer, const CudaCodedStep& coded,
                          const cuda::PagedKvStep& step, const float* qkv, int64_t qkv_stride,
                          int num_heads, float* att, int64_t att_stride, bool decode,
                          cuda::DecodeAttentionParams dp, cudaStream_t stream);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_KIVI_STEP_H_
