#include "runtime/cuda/cuda_commvq_step.h"

#include <cmath>

#include "kernels/cuda/encode/commvq_encode.h"
#include "kernels/cuda/kv_step/commvq_kv_step.h"
#include "kernels/cuda/kv_step/ring_kv_step.h"

namespace vqserve {
namespace {

// layer `layer`'s slice of the cache's commvq constants.
cuda::CommVqLayerCodec LayerCodec(const CudaKvCache& cache, int layer) {
  const CudaCommVqConstants& c = cache.commvq();
  const int64_t H = cache.shape().num_kv_heads;
  cuda::CommVqLayerCodec lc;
  lc.key_books = c.key_books + layer * H * c.key_head_stride;
  lc.value_books = c.value_books + layer * H * c.value_head_stride;
  lc.key_head_stride = c.key_head_stride;
  lc.value_head_stride = c.value_head_stride;
  lc.key_rounds = c.key_rounds;
  lc.value_rounds = c.value_rounds;
  lc.rope_freqs = c.rope_freqs;
  return lc;
}

}  // namespace

cuda::DecodeAttentionParams CudaCommVqStep::DecodeParams(const CudaKvCache& cache, int layer,
                                                         const CudaCodedStep& coded,
                                                         cuda::DecodeAttentionParams dp) {
  const cuda::CommVqLayerCodec codec = LayerCodec(cache, layer);
  dp.vq_k_codebook = codec.key_books;
  dp.vq_v_codebook = codec.value_books;
  dp.vq_k_codebook_head_stride = codec.key_head_stride;
  dp.vq_v_codebook_head_stride = codec.value_head_stride;
  dp.commvq_key_rounds = codec.key_rounds;
  dp.commvq_value_rounds = codec.value_rounds;
  dp.rope_theta = cache.commvq().rope_theta;
  coded.SetDecodeSink(cache, layer, &dp);
  return dp;
}

std::string CudaCommVqStep::Layer(const CudaKvCache& cache, int layer, const CudaCodedStep& coded,
                                  const cuda::PagedKvStep& step, const float* qkv,
                                  int64_t qkv_stride, const float* kv_pre, int num_heads,
                                  float* att, int64_t att_stride, bool decode,
                                  cuda::DecodeAttentionParams dp, cudaStream_t stream) {
  const KvShape& s = cache.shape();
  const int D = s.head_dim, H = s.num_kv_heads;
  const int64_t kvd = static_cast<int64_t>(H) * D;
  const float* q = qkv;
  const float* k = qkv + static_cast<int64_t>(num_heads) * D;
  const float* v = k + kvd;
  const cuda::CommVqLayerCodec codec = LayerCodec(cache, layer);
  uint16_t* ring_pre = cache.ring(layer, 2);
  // 1. sink rows (after rope), then the pages due this step gathered from the pre-rope ring and
  // the step's pre-rope rows, and encoded.
  std::string err = coded.SinkAppend(step, k, v, qkv_stride, stream);
  if (!err.empty()) return err;
  if (coded.flush_count() > 0) {
    cuda::PagedKvStep pre = step;
    pre.ring_k = ring_pre;
    err = coded.Gather(pre, kv_pre, kv_pre + kvd, 2 * kvd, stream);
    if (!err.empty()) return err;
    cuda::CommVqEncodeParams ep;
    ep.k = coded.staged_k(0);
    ep.v = coded.staged_v(0);
    ep.key_books = codec.key_books;
    ep.value_books = codec.value_books;
    ep.key_head_stride = codec.key_head_stride;
    ep.value_head_stride = codec.value_head_stride;
    ep.key_rounds = codec.key_rounds;
    ep.value_rounds = codec.value_rounds;
    ep.num_kv_heads = H;
    ep.head_dim = D;
    ep.dst = step.pages + step.layer_offset;
    err = cuda::LaunchCommVqEncodePages(ep, coded.flush_page_ids(), step.page_stride,
                                        coded.flush_count(), stream);
    if (!err.empty()) return err;
  }
  // 2. attention, then the ring appends (k, v after rope; k before rope).
  if (decode) {
    if (err = cuda::LaunchRingAppend(step, k, v, qkv_stride, stream); !err.empty()) return err;
    err = cuda::LaunchDecodeAttention(cuda::KvPageFormat::kCommVq,
                                      DecodeParams(cache, layer, coded, dp), stream);
  } else {
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    err = cuda::LaunchCommVqPrefillAttention(step, codec, cache.spec().residual_tokens, q,
                                             qkv_stride, k, v, qkv_stride, coded.seq_tok_start(),
                                             att, att_stride, num_heads, scale, stream);
    if (err.empty()) err = cuda::LaunchRingAppend(step, k, v, qkv_stride, stream);
  }
  if (!err.empty()) return err;
  return cuda::LaunchPreRopeRingAppend(step, kv_pre, 2 * kvd, ring_pre, stream);
}

}  // namespace vqserve
