// commvq pre-rope ring appends and multi-token attention (see commvq_kv_step.h).
#include "kernels/cuda/kv_step/commvq_kv_step.h"

#include <cuda_fp16.h>

#include "kernels/cuda/common/code12.cuh"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/prefill/tiled_prefill.cuh"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 128;

// grid (num_tokens), kThreads threads over the H * D elements of a row.
__global__ void PreRopeRingAppendKernel(const PagedKvStep s, const float* k, int64_t token_stride,
                                        uint16_t* ring) {
  const int t = blockIdx.x, b = s.tok_seq[t], pos = s.tok_pos[t];
  if (pos < s.coded_after[b]) return;
  const int row = s.num_kv_heads * s.head_dim;
  const int64_t dst = s.slots[b] * s.ring_slot_stride + static_cast<int64_t>(pos % s.ring_tokens) * row;
  for (int i = threadIdx.x; i < row; i += kThreads) {
    ring[dst + i] = __half_as_ushort(__float2half_rn(k[t * token_stride + i]));
  }
}

// a coded commvq token for CodedPrefillKernel: lane dims i = lane + 32 e; pair i / 2's
// position-free reconstruction s * sum_r (zeta_{r,A} + i zeta_{r,B}) rotated by
// exp(i pos theta_{i/2}); the value dim as the sum of its rounds' centroid entries.
struct CommVqReader {
  static constexpr bool kTakesPosition = true;
  CommVqLayerCodec c;
  int num_kv_heads, head_dim, page_tokens, group_pairs;
  __device__ void Token(const uint8_t* slice, int kvh, int pos, const float* qc, int lane, int per,
                        float* dot, float* vals) const {
    const int D = head_dim, H = num_kv_heads, P = page_tokens, jj = pos % P;
    const int R = c.key_rounds, RV = c.value_rounds, G = D / 2 / group_pairs, M = D / 8;
    const float s = __half2float(reinterpret_cast<const __half*>(slice)[kvh * P + jj]);
    const uint8_t* kcodes = slice + 2 * H * P;
    const uint8_t* vcodes = kcodes + 3 * H * G * R * P / 2;
    const float* kb = c.key_books + kvh * c.key_head_stride;
    const float* vb = c.value_books + kvh * c.value_head_stride;
    float d = 0.0f;
    for (int e = 0; e < per; ++e) {
      const int i = lane + 32 * e, jp = i / 2, gi = jp / group_pairs;
      float x = 0.0f, y = 0.0f;
      for (int r = 0; r < R; ++r) {
        const int code = Code12(kcodes + ((kvh * G + gi) * R + r) * (3 * P / 2), jj);
        const float* ea = kb + (static_cast<int64_t>(r) * 64 + (code & 63)) * D + 2 * jp;
        const float* eb = kb + (static_cast<int64_t>(r) * 64 + (code >> 6)) * D + 2 * jp;
        x += ea[0] - eb[1];
        y += ea[1] + eb[0];
      }
      double sn, cs;
      sincos(static_cast<double>(pos) * static_cast<double>(c.rope_freqs[jp]), &sn, &cs);
      const double kx = x * cs - y * sn, ky = x * sn + y * cs;
      d += qc[e] * s * static_cast<float>((i & 1) ? ky : kx);
      const int m = i / 8;
      float val = 0.0f;
      for (int r = 0; r < RV; ++r) {
        const int code = vcodes[((kvh * RV + r) * M + m) * P + jj];
        val += vb[((static_cast<int64_t>(r) * M + m) * 256 + code) * 8 + i % 8];
      }
      vals[e] = val;
    }
    *dot = d;
  }
  // dims d0 .. d0 + 7 (pairs d0 / 2 .. + 3) of the key at position pos, rotated as Token
  // rotates it (the angle reduced in float64, then sine and cosine in fp32), and of the value
  // (tiled_prefill.cuh), rounded to fp16.
  __device__ void Chunk(const uint8_t* slice, int kvh, int pos, int d0, uint4* k, uint4* v) const {
    const int D = head_dim, H = num_kv_heads, P = page_tokens, jj = pos % P;
    const int R = c.key_rounds, RV = c.value_rounds, G = D / 2 / group_pairs, M = D / 8;
    const int jp0 = d0 / 2, gi = jp0 / group_pairs, m = d0 / 8;
    const float s = __half2float(reinterpret_cast<const __half*>(slice)[kvh * P + jj]);
    const uint8_t* kcodes = slice + 2 * H * P;
    const uint8_t* vcodes = kcodes + 3 * H * G * R * P / 2;
    const float* kb = c.key_books + kvh * c.key_head_stride;
    const float* vb = c.value_books + kvh * c.value_head_stride;
    float x[4] = {0.0f, 0.0f, 0.0f, 0.0f}, y[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int r = 0; r < R; ++r) {
      const int code = Code12(kcodes + ((kvh * G + gi) * R + r) * (3 * P / 2), jj);
      const float4* ea = reinterpret_cast<const float4*>(
          kb + (static_cast<int64_t>(r) * 64 + (code & 63)) * D + d0);
      const float4* eb = reinterpret_cast<const float4*>(
          kb + (static_cast<int64_t>(r) * 64 + (code >> 6)) * D + d0);
      const float4 a0 = __ldg(ea), a1 = __ldg(ea + 1), b0 = __ldg(eb), b1 = __ldg(eb + 1);
      x[0] += a0.x - b0.y, y[0] += a0.y + b0.x;
      x[1] += a0.z - b0.w, y[1] += a0.w + b0.z;
      x[2] += a1.x - b1.y, y[2] += a1.y + b1.x;
      x[3] += a1.z - b1.w, y[3] += a1.w + b1.z;
    }
    float kx[8];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const double ang = static_cast<double>(pos) * static_cast<double>(c.rope_freqs[jp0 + q]);
      const double turns = rint(ang * 0.15915494309189535);  // whole turns of 2 pi
      float sn, cs;
      sincosf(static_cast<float>(fma(-turns, 6.283185307179586, ang)), &sn, &cs);
      kx[2 * q] = s * (x[q] * cs - y[q] * sn);
      kx[2 * q + 1] = s * (x[q] * sn + y[q] * cs);
    }
    float vx[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int r = 0; r < RV; ++r) {
      const int code = vcodes[((kvh * RV + r) * M + m) * P + jj];
      const float4* e = reinterpret_cast<const float4*>(
          vb + ((static_cast<int64_t>(r) * M + m) * 256 + code) * 8);
      const float4 u = __ldg(e), w = __ldg(e + 1);
      vx[0] += u.x, vx[1] += u.y, vx[2] += u.z, vx[3] += u.w;
      vx[4] += w.x, vx[5] += w.y, vx[6] += w.z, vx[7] += w.w;
    }
    *k = tiled::PackHalf8(kx);
    *v = tiled::PackHalf8(vx);
  }
};

static_assert(ReaderTakesPosition<CommVqReader>::value, "commvq keys rotate with their position");

}  // namespace

std::string LaunchPreRopeRingAppend(const PagedKvStep& step, const float* k_pre,
                                    int64_t token_stride, uint16_t* ring_pre,
                                    cudaStream_t stream) {
  if (step.num_tokens <= 0) return "";
  if (ring_pre == nullptr) return "pre-rope ring append: no ring";
  PreRopeRingAppendKernel<<<step.num_tokens, kThreads, 0, stream>>>(step, k_pre, token_stride,
                                                                   ring_pre);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchCommVqPrefillAttention(const PagedKvStep& step, const CommVqLayerCodec& codec,
                                         int residual_tokens, const float* q, int64_t q_stride,
                                         const float* k, const float* v, int64_t kv_stride,
                                         const int32_t* seq_tok_start, float* out,
                                         int64_t out_stride, int num_heads, float scale,
                                         cudaStream_t stream) {
  std::string err = CodedPrefillShapeError(step, num_heads, "commvq prefill attention");
  if (!err.empty()) return err;
  if (step.head_dim != 64 && step.head_dim != 128) {
    return "commvq prefill attention: head_dim must be 64 or 128";
  }
  if (codec.key_books == nullptr || codec.value_books == nullptr || codec.rope_freqs == nullptr ||
      codec.key_rounds < 1 || codec.value_rounds < 1) {
    return "commvq prefill attention: missing books";
  }
  // pairs per key code: the largest divisor of D / 2 that is <= 64 (D / 2 for D = 64, 128).
  const CommVqReader rd{codec, step.num_kv_heads, step.head_dim, step.page_tokens,
                        step.head_dim / 2};
  VQ_CUDA_RETURN_IF_ERROR(LaunchPrefill(step, rd, residual_tokens, q, q, q_stride, k, v,
                                        kv_stride, seq_tok_start, out, out_stride, num_heads,
                                        scale, stream));
  return "";
}

}  // namespace vqserve::cuda
