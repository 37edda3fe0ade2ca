// kivi multi-token attention (see kivi_kv_step.h).
#include "kernels/cuda/kv_step/kivi_kv_step.h"

#include <cuda_fp16.h>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/prefill/tiled_prefill.cuh"

namespace vqserve::cuda {
namespace {

// a coded kivi token for CodedPrefillKernel: key dim d = Kmin[d] + Kscale[d] * code, value dim
// d = Vmin[g] + Vscale[g] * code (g = d / 32), read from the page slice's packed codes.
struct KiviReader {
  int bits, num_kv_heads, head_dim;
  __device__ static float Hf(const uint8_t* p, int64_t i) {
    return __half2float(reinterpret_cast<const __half*>(p)[i]);
  }
  __device__ static int Code(const uint8_t* codes, int i, int bits) {
    const int bit = i * bits;
    return (codes[bit >> 3] >> (bit & 7)) & ((1 << bits) - 1);
  }
  // the page slice's parts (docs/kv_formats.md): headers, k codes, and token jj's v code row of
  // kv head kvh.
  struct Parts {
    const uint8_t *kmin, *kscale, *vmin, *vscale, *kcode, *vrow;
  };
  __device__ Parts Split(const uint8_t* slice, int kvh, int jj) const {
    constexpr int P = 32;
    const int H = num_kv_heads, D = head_dim, ng = D / 32;
    Parts t;
    t.kmin = slice;
    t.kscale = t.kmin + 2 * H * D;
    t.vmin = t.kscale + 2 * H * D;
    t.vscale = t.vmin + 2 * H * P * ng;
    t.kcode = t.vscale + 2 * H * P * ng;
    t.vrow = t.kcode + static_cast<int64_t>(H) * D * P * bits / 8 +
             (static_cast<int64_t>(kvh) * P + jj) * D * bits / 8;
    return t;
  }
  __device__ void Token(const uint8_t* slice, int kvh, int jj, const float* qc, int lane, int per,
                        float* dot, float* vals) const {
    constexpr int P = 32;
    const int D = head_dim, ng = D / 32;
    const Parts t = Split(slice, kvh, jj);
    const uint8_t *kmin = t.kmin, *kscale = t.kscale, *vmin = t.vmin, *vscale = t.vscale;
    const uint8_t *kcode = t.kcode, *vrow = t.vrow;
    const int64_t at = (static_cast<int64_t>(kvh) * P + jj) * ng;
    float d = 0.0f;
    for (int e = 0; e < per; ++e) {
      const int i = lane + 32 * e, c = kvh * D + i;
      const int kq = Code(kcode + static_cast<int64_t>(c) * P * bits / 8, jj, bits);
      d += qc[e] * (Hf(kmin, c) + Hf(kscale, c) * static_cast<float>(kq));
      const int vq = Code(vrow, i, bits);
      vals[e] = Hf(vmin, at + i / 32) + Hf(vscale, at + i / 32) * static_cast<float>(vq);
    }
    *dot = d;
  }
  // dims d0 .. d0 + 7 of token jj's key and value (tiled_prefill.cuh), rounded to fp16.
  __device__ void Chunk(const uint8_t* slice, int kvh, int jj, int d0, uint4* k, uint4* v) const {
    constexpr int P = 32;
    const int D = head_dim, ng = D / 32;
    const Parts t = Split(slice, kvh, jj);
    const uint8_t *kmin = t.kmin, *kscale = t.kscale, *vmin = t.vmin, *vscale = t.vscale;
    const uint8_t *kcode = t.kcode, *vrow = t.vrow;
    const int64_t at = (static_cast<int64_t>(kvh) * P + jj) * ng + d0 / 32;
    const float v0 = Hf(vmin, at), vs = Hf(vscale, at);
    float kx[8], vx[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int i = d0 + e, ch = kvh * D + i;
      const int kq = Code(kcode + static_cast<int64_t>(ch) * P * bits / 8, jj, bits);
      kx[e] = Hf(kmin, ch) + Hf(kscale, ch) * static_cast<float>(kq);
      vx[e] = v0 + vs * static_cast<float>(Code(vrow, i, bits));
    }
    *k = tiled::PackHalf8(kx);
    *v = tiled::PackHalf8(vx);
  }
};

}  // namespace

std::string LaunchKiviPrefillAttention(const PagedKvStep& step, int bits, int residual_tokens,
                                       const float* q, int64_t q_stride, const float* k,
                                       const float* v, int64_t kv_stride,
                                       const int32_t* seq_tok_start, float* out,
                                       int64_t out_stride, int num_heads, float scale,
                                       cudaStream_t stream) {
  std::string err = CodedPrefillShapeError(step, num_heads, "kivi prefill attention");
  if (!err.empty()) return err;
  if (bits != 2 && bits != 4) return "kivi prefill attention: bits must be 2 or 4";
  if (step.page_tokens != 32) return "kivi prefill attention: pages of 32 tokens";
  const KiviReader rd{bits, step.num_kv_heads, step.head_dim};
  VQ_CUDA_RETURN_IF_ERROR(LaunchPrefill(step, rd, residual_tokens, q, q, q_stride, k, v,
                                        kv_stride, seq_tok_start, out, out_stride, num_heads,
                                        scale, stream));
  return "";
}

}  // namespace vqserve::cuda
