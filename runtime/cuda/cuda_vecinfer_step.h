#ifndef VQSERVE_RUNTIME_CUDA_CUDA_VECINFER_STEP_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_VECINFER_STEP_H_

// the vecinfer side of one CudaLlamaModel step over a vecinfer CudaKvCache. the flushes, sink and
// gathers come from a CudaCodedStep; per layer the gathered pages are encoded, and attention reads
// codes + fp16 with the cpu cache's semantics (runtime/kv/paged_kv_cache.h): the fused decode
// kernel when every sequence has one new token, else the multi-token kernel.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/kv_step/paged_kv_step.h"
#include "runtime/cuda/cuda_coded_step.h"
#include "runtime/cuda/cuda_device_array.h"
#include "runtime/cuda/cuda_kv_cache.h"

namespace vqserve {

class CudaVecInferStep {
 public:
  // stores layer `layer`'s new keys and values and writes attention into `att`.
  // qkv: (num_tokens, q | k | v) fp32 after rope, rows of qkv_stride floats, q (num_heads, D)
  // then k and v (num_kv_heads, D); att: (num_tokens, num_heads, D) rows of att_stride.
  // decode: every sequence has one new token; `dp` then carries the fp16 fields the model set
  // (q, out, strides, pages, tables, lengths, ring, workspace). `coded` holds this step's plan.
  // empty string on success.
  std::string Layer(const CudaKvCache& cache, int layer, const CudaCodedStep& coded,
                    const cuda::PagedKvStep& step, const float* qkv, int64_t qkv_stride,
                    int num_heads, float* att, int64_t att_stride, bool decode,
                    cuda::DecodeAttentionParams dp, cudaStream_t stream);

  // dp (the model's fields, as for Layer) completed with layer `layer`'s vecinfer and sink
  // fields: what Layer's decode launch takes (q_tilde as grown by the last Layer).
  cuda::DecodeAttentionParams DecodeParams(const CudaKvCache& cache, int layer,
                                           const CudaCodedStep& coded,
                                           cuda::DecodeAttentionParams dp) const;

  // the query buffer the step's launches write (part of a cuda graph key; grown by Layer).
  const float* q_tilde() const { return q_tilde_.data(); }
  // the -pca lut scratch the decode launches write (graph key too; grown by Layer).
  const uint16_t* pca_lut() const { return pca_lut_.data(); }

 private:
  DeviceArray<float> q_tilde_;
  DeviceArray<uint16_t> pca_lut_;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_VECINFER_STEP_H_
