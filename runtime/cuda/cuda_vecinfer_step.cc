#include "runtime/cuda/cuda_vecinfer_step.h"

#include <cmath>

#include "kernels/cuda/encode/vecinfer_encode.h"
#include "kernels/cuda/kv_step/ring_kv_step.h"
#include "kernels/cuda/kv_step/vecinfer_kv_step.h"

namespace vqserve {
namespace {

// layer `layer`'s slice of the cache's vecinfer constants.
cuda::VecInferLayerCodec LayerCodec(const CudaKvCache& cache, int layer) {
  const CudaVecInferConstants& c = cache.vecinfer();
  const KvShape& s = cache.shape();
  const int64_t H = s.num_kv_heads, D = s.head_dim, g = c.per_head ? H : 1;
  const bool pca = c.k_transform != nullptr;
  const int64_t gk = pca ? H : g;             // -pca key books are per kv head
  const int64_t k_head = D << c.k_code_bits;  // (D / k_sub_dim, 2^bits, k_sub_dim)
  const int64_t v_head = D << c.v_code_bits;
  cuda::VecInferLayerCodec lc;
  lc.lambda = c.lambda + layer * H * D;
  lc.hadamard = c.hadamard;
  lc.k_codebook = c.k_centroids + layer * gk * k_head;
  lc.v_codebook = c.v_centroids + layer * g * v_head;
  if (pca) {
    lc.k_transform = c.k_transform + layer * H * D * D;
    lc.k_inverse_t = c.k_inverse_t + layer * H * D * D;
    lc.k_dims = c.k_dims + layer * H * c.k_codes;
    lc.k_dim_map = c.k_dim_map + layer * H * D;
  }
  lc.k_codebook_head_stride = gk > 1 ? k_head : 0;
  lc.v_codebook_head_stride = c.per_head ? v_head : 0;
  lc.k_sub_dim = c.k_sub_dim;
  lc.v_sub_dim = c.v_sub_dim;
  lc.k_codes = c.k_codes;
  lc.k_code_bits = c.k_code_bits;
  lc.v_code_bits = c.v_code_bits;
  return lc;
}

}  // namespace

cuda::DecodeAttentionParams CudaVecInferStep::DecodeParams(const CudaKvCache& cache, int layer,
                                                           const CudaCodedStep& coded,
                                                           cuda::DecodeAttentionParams dp) const {
  const cuda::VecInferLayerCodec codec = LayerCodec(cache, layer);
  dp.q_tilde = q_tilde_.data();
  dp.vq_k_codebook = codec.k_codebook;
  dp.vq_v_codebook = codec.v_codebook;
  dp.vq_k_codebook_head_stride = codec.k_codebook_head_stride;
  dp.vq_v_codebook_head_stride = codec.v_codebook_head_stride;
  dp.vq_k_sub_dim = codec.k_sub_dim;
  dp.vq_v_sub_dim = codec.v_sub_dim;
  dp.vq_k_codes = codec.k_codes;
  dp.vq_k_code_bits = codec.k_code_bits;
  dp.vq_v_code_bits = codec.v_code_bits;
  const CudaVecInferConstants& vc = cache.vecinfer();
  if (vc.v_centroids_f16 != nullptr) {  // the fp16 books: same offsets as the fp32 books
    dp.vq_v_codebook_f16 = vc.v_centroids_f16 + (codec.v_codebook - vc.v_centroids);
  }
  if (vc.k_centroids_f16 != nullptr) {
    dp.vq_k_codebook_f16 = vc.k_centroids_f16 + (codec.k_codebook - vc.k_centroids);
  }
  dp.vq_k_dims = codec.k_dims;  // -pca keys: the decode launch builds the lut in pca_lut_ first
  dp.vq_pca_lut = codec.k_dims != nullptr ? pca_lut_.data() : nullptr;
  coded.SetDecodeSink(cache, layer, &dp);
  return dp;
}

std::string CudaVecInferStep::Layer(const CudaKvCache& cache, int layer,
                                    const CudaCodedStep& coded, const cuda::PagedKvStep& step,
                                    const float* qkv, int64_t qkv_stride, int num_heads,
                                    float* att, int64_t att_stride, bool decode,
                                    cuda::DecodeAttentionParams dp, cudaStream_t stream) {
  const KvShape& s = cache.shape();
  const int D = s.head_dim, H = s.num_kv_heads, n = step.num_tokens;
  const float* q = qkv;
  const float* k = qkv + static_cast<int64_t>(num_heads) * D;
  const float* v = k + static_cast<int64_t>(H) * D;
  const cuda::VecInferLayerCodec codec = LayerCodec(cache, layer);
  // 1. sink rows, then the pages due this step: gathered (ring before this step's writes, new
  // rows) and encoded.
  std::string err = coded.SinkAndGather(step, k, v, qkv_stride, stream);
  if (!err.empty()) return err;
  if (coded.flush_count() > 0) {  // every page due, in one launch
    cuda::VecInferEncodeParams ep;
    ep.k = coded.staged_k(0);
    ep.v = coded.staged_v(0);
    ep.lambda = codec.lambda;
    ep.hadamard = codec.hadamard;
    ep.k_codebook = codec.k_codebook;
    ep.v_codebook = codec.v_codebook;
    ep.k_codebook_head_stride = codec.k_codebook_head_stride;
    ep.v_codebook_head_stride = codec.v_codebook_head_stride;
    ep.k_sub_dim = codec.k_sub_dim;
    ep.v_sub_dim = codec.v_sub_dim;
    ep.k_code_bits = codec.k_code_bits;
    ep.v_code_bits = codec.v_code_bits;
    ep.k_transform = codec.k_transform;
    ep.k_dims = codec.k_dims;
    ep.k_codes = codec.k_codes;
    ep.num_kv_heads = H;
    ep.head_dim = D;
    ep.dst = step.pages + step.layer_offset;
    err = cuda::LaunchVecInferEncodePages(ep, coded.flush_page_ids(), step.page_stride,
                                          coded.flush_count(), stream);
    if (!err.empty()) return err;
  }
  // 2. q~ = H (q * lambda), laid out as q.
  q_tilde_.Reserve(static_cast<size_t>(n) * qkv_stride);
  err = cuda::LaunchVecInferQueryTransform(q, qkv_stride, n, num_heads, H, D, codec,
                                           q_tilde_.data(), stream);
  if (!err.empty()) return err;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  if (decode) {
    if (codec.k_dims != nullptr) {
      pca_lut_.Reserve(cuda::VecInferPcaLutBytes(n, num_heads, codec.k_codes) / sizeof(uint16_t));
    }
    // 3. ring append, then the fused decode kernel over codes + ring.
    if (err = cuda::LaunchRingAppend(step, k, v, qkv_stride, stream); !err.empty()) return err;
    return cuda::LaunchDecodeAttention(cuda::KvPageFormat::kVecInfer,
                                       DecodeParams(cache, layer, coded, dp), stream);
  }
  // 3. attention over codes, old ring rows and new rows, then the ring append.
  err = cuda::LaunchVecInferPrefillAttention(step, codec, cache.spec().residual_tokens, q,
                                             q_tilde_.data(), qkv_stride, k, v, qkv_stride,
                                             coded.seq_tok_start(), att, att_stride, num_heads,
                                             scale, stream);
  if (!err.empty()) return err;
  return cuda::LaunchRingAppend(step, k, v, qkv_stride, stream);
}

}  // namespace vqserve
