#include "runtime/cuda/cuda_kivi_step.h"

#include <cmath>

#include "kernels/cuda/encode/kivi_encode.h"
#include "kernels/cuda/kv_step/kivi_kv_step.h"
#include "kernels/cuda/kv_step/ring_kv_step.h"

namespace vqserve {

cuda::DecodeAttentionParams KiviDecodeParams(const CudaKvCache& cache, int layer,
                                             const CudaCodedStep& coded,
                                             cuda::DecodeAttentionParams dp) {
  dp.kivi_bits = cache.kivi_bits();
  coded.SetDecodeSink(cache, layer, &dp);
  return dp;
}

std::string CudaKiviLayer(const CudaKvCache& cache, int layer, const CudaCodedStep& coded,
                          const cuda::PagedKvStep& step, const float* qkv, int64_t qkv_stride,
                          int num_heads, float* att, int64_t att_stride, bool decode,
                          cuda::DecodeAttentionParams dp, cudaStream_t stream) {
  const KvShape& s = cache.shape();
  const int D = s.head_dim, H = s.num_kv_heads;
  const float* q = qkv;
  const float* k = qkv + static_cast<int64_t>(num_heads) * D;
  const float* v = k + static_cast<int64_t>(H) * D;
  // 1. sink rows, then the pages due this step: gathered and encoded.
  std::string err = coded.SinkAndGather(step, k, v, qkv_stride, stream);
  if (!err.empty()) return err;
  if (coded.flush_count() > 0) {  // every page due, in one launch
    cuda::KiviEncodeParams ep;
    ep.k = coded.staged_k(0);
    ep.v = coded.staged_v(0);
    ep.bits = cache.kivi_bits();
    ep.num_kv_heads = H;
    ep.head_dim = D;
    ep.dst = step.pages + step.layer_offset;
    err = cuda::LaunchKiviEncodePages(ep, coded.flush_page_ids(), step.page_stride,
                                      coded.flush_count(), stream);
    if (!err.empty()) return err;
  }
  if (decode) {
    // 2. ring append, then the fused kivi decode kernel over sink + codes + ring.
    if (err = cuda::LaunchRingAppend(step, k, v, qkv_stride, stream); !err.empty()) return err;
    return cuda::LaunchDecodeAttention(cuda::KvPageFormat::kKivi,
                                       KiviDecodeParams(cache, layer, coded, dp), stream);
  }
  // 2. attention over sink, codes, old ring rows and new rows, then the ring append.
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  err = cuda::LaunchKiviPrefillAttention(step, cache.kivi_bits(), cache.spec().residual_tokens, q,
                                         qkv_stride, k, v, qkv_stride, coded.seq_tok_start(), att,
                                         att_stride, num_heads, scale, stream);
  if (!err.empty()) return err;
  return cuda::LaunchRingAppend(step, k, v, qkv_stride, stream);
}

}  // namespace vqserve
