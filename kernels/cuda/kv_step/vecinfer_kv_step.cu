// vecinfer query transform and multi-token attention (see vecinfer_kv_step.h).
#include "kernels/cuda/kv_step/vecinfer_kv_step.h"

#include <cuda_fp16.h>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/prefill/tiled_prefill.cuh"
#include "kernels/cuda/common/vecinfer_codes.cuh"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 128;

// one warp per (token, head): lane l holds elements l + 32 e, e < E = D / 32, of q * lambda;
// butterflies of len < 32 pair lanes l and l ^ len (shuffles), longer ones pair registers.
// each butterfly is the same a + b, a - b as QueryTransformKernel's, so the output bits are
// equal. grid (n, ceil(num_heads / kWarpsPerBlock)), kThreads threads.
constexpr int kWarpsPerBlock = kThreads / 32;
template <int E>
__global__ void QueryTransformWarpKernel(const float* q, int64_t q_stride, int num_heads, int group,
                                         const VecInferLayerCodec c, float* out) {
  constexpr int D = 32 * E;
  const int t = blockIdx.x, lane = threadIdx.x & 31;
  const int h = blockIdx.y * kWarpsPerBlock + (threadIdx.x >> 5);
  if (h >= num_heads) return;
  const float* lam = c.lambda + static_cast<int64_t>(h / group) * D;
  const int64_t base = t * q_stride + static_cast<int64_t>(h) * D;
  float x[E];
#pragma unroll
  for (int e = 0; e < E; ++e) x[e] = q[base + lane + 32 * e] * lam[lane + 32 * e];
  if (c.hadamard) {
#pragma unroll
    for (int len = 1; len < 32; len <<= 1) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float other = __shfl_xor_sync(0xffffffffu, x[e], len);
        x[e] = (lane & len) ? other - x[e] : x[e] + other;
      }
    }
#pragma unroll
    for (int l = 1; l < E; l <<= 1) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        if (e & l) continue;
        const float a = x[e], b = x[e + l];
        x[e] = a + b;
        x[e + l] = a - b;
      }
    }
  }
  const float norm = c.hadamard ? rsqrtf(static_cast<float>(D)) : 1.0f;
#pragma unroll
  for (int e = 0; e < E; ++e) out[base + lane + 32 * e] = x[e] * norm;
}

// any power-of-two head_dim (the warp kernel takes 32 .. 256). grid (n, num_heads), kThreads
// threads; x: head_dim floats of dynamic smem.
__global__ void QueryTransformKernel(const float* q, int64_t q_stride, int num_heads, int group,
                                     int D, const VecInferLayerCodec c, float* out) {
  extern __shared__ float x[];
  const int t = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const float* lam = c.lambda + static_cast<int64_t>(h / group) * D;
  const int64_t base = t * q_stride + static_cast<int64_t>(h) * D;
  for (int i = tid; i < D; i += kThreads) x[i] = q[base + i] * lam[i];
  if (c.hadamard) {
    for (int len = 1; len < D; len <<= 1) {
      __syncthreads();
      for (int idx = tid; idx < D / 2; idx += kThreads) {
        const int i = (idx / len) * 2 * len + idx % len;
        const float a = x[i], bb = x[i + len];
        x[i] = a + bb;
        x[i + len] = a - bb;
      }
    }
  }
  __syncthreads();
  const float norm = c.hadamard ? rsqrtf(static_cast<float>(D)) : 1.0f;
  for (int i = tid; i < D; i += kThreads) out[base + i] = x[i] * norm;
}

// -pca keys: q~ = T^-1 q, out[j] = sum_i inverse_t[i][j] q[i]. grid (n, num_heads), D threads;
// q: D floats of dynamic smem.
__global__ void PcaQueryKernel(const float* q, int64_t q_stride, int group, int D,
                               const float* inverse_t, float* out) {
  extern __shared__ float qs[];
  const int t = blockIdx.x, h = blockIdx.y, j = threadIdx.x;
  const int64_t base = t * q_stride + static_cast<int64_t>(h) * D;
  qs[j] = q[base + j];
  __syncthreads();
  const float* inv = inverse_t + static_cast<int64_t>(h / group) * D * D;
  float s = 0.0f;
#pragma unroll 16
  for (int i = 0; i < D; ++i) s = fmaf(inv[i * D + j], qs[i], s);  // 16 loads in flight
  out[base + j] = s;
}

// key codes a token and head (VecInferLayerCodec::k_codes).
__device__ __forceinline__ int KeyCodes(const VecInferLayerCodec& c, int D) {
  return c.k_codes > 0 ? c.k_codes : D / c.k_sub_dim;
}

// element i of the key that code row `codes` selects from kv head kvh's -pca books (c.k_dim_map).
__device__ __forceinline__ float PcaKeyElem(const VecInferLayerCodec& c, const float* book, const uint8_t* codes,
                                            int kvh, int D, int i) {
  const int e = __ldg(c.k_dim_map + kvh * D + i);
  const int m = e & 0xff, j = (e >> 8) & 0xff, size = e >> 16;
  return __ldg(book + ((static_cast<int64_t>(i - j) << c.k_code_bits) + VecInferCode(codes, m, c.k_code_bits) * size + j));
}

// a coded vecinfer token for CodedPrefillKernel: its key and value read as their centroids'
// entries for this lane's dims (codes only, no dequantized buffer); qc is q~.
struct VecInferReader {
  VecInferLayerCodec c;
  int num_kv_heads, head_dim, page_tokens;
  __device__ void Token(const uint8_t* slice, int kvh, int jj, const float* qc, int lane, int per,
                        float* dot, float* vals) const {
    const int D = head_dim, H = num_kv_heads, P = page_tokens;
    const int dk = c.k_sub_dim, dv = c.v_sub_dim, kb = c.k_code_bits, vb = c.v_code_bits;
    const int krow = VecInferRowBytes(KeyCodes(c, D), kb), vrow = VecInferRowBytes(D / dv, vb);
    const float* ck = c.k_codebook + kvh * c.k_codebook_head_stride;
    const float* cv = c.v_codebook + kvh * c.v_codebook_head_stride;
    const uint8_t* kc = slice + (static_cast<int64_t>(kvh) * P + jj) * krow;
    const uint8_t* vc =
        slice + static_cast<int64_t>(H) * P * krow + (static_cast<int64_t>(kvh) * P + jj) * vrow;
    float d = 0.0f;
    for (int e = 0; e < per; ++e) {
      const int i = lane + 32 * e;
      const int km = i / dk, vm = i / dv;
      d += qc[e] * (c.k_dim_map != nullptr
                        ? PcaKeyElem(c, ck, kc, kvh, D, i)
                        : ck[((static_cast<int64_t>(km) << kb) + VecInferCode(kc, km, kb)) * dk + i % dk]);
      vals[e] = cv[((static_cast<int64_t>(vm) << vb) + VecInferCode(vc, vm, vb)) * dv + i % dv];
    }
    *dot = d;
  }
  // dims d0 .. d0 + 7 of token jj's k~ and v (tiled_prefill.cuh): the centroid rows of the
  // sub-vectors that cover them, rounded to fp16.
  __device__ void Chunk(const uint8_t* slice, int kvh, int jj, int d0, uint4* k, uint4* v) const {
    const int D = head_dim, H = num_kv_heads, P = page_tokens;
    const int krow = VecInferRowBytes(KeyCodes(c, D), c.k_code_bits);
    const int vrow = VecInferRowBytes(D / c.v_sub_dim, c.v_code_bits);
    const uint8_t* kc = slice + (static_cast<int64_t>(kvh) * P + jj) * krow;
    const uint8_t* vc =
        slice + static_cast<int64_t>(H) * P * krow + (static_cast<int64_t>(kvh) * P + jj) * vrow;
    float x[8];
    const float* ck = c.k_codebook + kvh * c.k_codebook_head_stride;
    if (c.k_dim_map != nullptr) {
      for (int e = 0; e < 8; ++e) x[e] = PcaKeyElem(c, ck, kc, kvh, D, d0 + e);
    } else {
      Rows(ck, kc, c.k_sub_dim, c.k_code_bits, d0, x);
    }
    *k = tiled::PackHalf8(x);
    Rows(c.v_codebook + kvh * c.v_codebook_head_stride, vc, c.v_sub_dim, c.v_code_bits, d0, x);
    *v = tiled::PackHalf8(x);
  }
  // x = dims d0 .. d0 + 7 of the vector that code row `codes` selects from `book`
  // (D / dsub, 2^bits, dsub); dsub 2, 4 or 8 divides 8.
  __device__ static void Rows(const float* book, const uint8_t* codes, int dsub, int bits, int d0,
                              float (&x)[8]) {
    for (int e = 0; e < 8; e += dsub) {
      const int m = (d0 + e) / dsub;
      const float* r =
          book + ((static_cast<int64_t>(m) << bits) + VecInferCode(codes, m, bits)) * dsub;
      if (dsub == 2) {
        const float2 u = __ldg(reinterpret_cast<const float2*>(r));
        x[e] = u.x, x[e + 1] = u.y;
      } else {
        const float4 u = __ldg(reinterpret_cast<const float4*>(r));
        x[e] = u.x, x[e + 1] = u.y, x[e + 2] = u.z, x[e + 3] = u.w;
        if (dsub == 8) {
          const float4 w = __ldg(reinterpret_cast<const float4*>(r) + 1);
          x[e + 4] = w.x, x[e + 5] = w.y, x[e + 6] = w.z, x[e + 7] = w.w;
        }
      }
    }
  }
};

}  // namespace

std::string LaunchVecInferQueryTransform(const float* q, int64_t q_stride, int n, int num_heads,
                                         int num_kv_heads, int head_dim,
                                         const VecInferLayerCodec& codec, float* out,
                                         cudaStream_t stream) {
  const int D = head_dim;
  if (D <= 0 || D > 256 || (D & (D - 1)) != 0) {
    return "vecinfer query transform: head_dim must be a power of two <= 256";
  }
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0) {
    return "vecinfer query transform: num_heads must be a multiple of num_kv_heads";
  }
  if (n <= 0) return "";
  const int group = num_heads / num_kv_heads;
  if (codec.k_inverse_t != nullptr) {
    PcaQueryKernel<<<dim3(n, num_heads), D, D * sizeof(float), stream>>>(q, q_stride, group, D,
                                                                         codec.k_inverse_t, out);
    VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return "";
  }
  const dim3 warp_grid(n, (num_heads + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const auto warps = [&](auto kernel) {
    kernel<<<warp_grid, kThreads, 0, stream>>>(q, q_stride, num_heads, group, codec, out);
  };
  switch (D) {
    case 32:
      warps(QueryTransformWarpKernel<1>);
      break;
    case 64:
      warps(QueryTransformWarpKernel<2>);
      break;
    case 128:
      warps(QueryTransformWarpKernel<4>);
      break;
    case 256:
      warps(QueryTransformWarpKernel<8>);
      break;
    default:
      QueryTransformKernel<<<dim3(n, num_heads), kThreads, D * sizeof(float), stream>>>(
          q, q_stride, num_heads, group, D, codec, out);
  }
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchVecInferPrefillAttention(const PagedKvStep& step, const VecInferLayerCodec& codec,
                                           int residual_tokens, const float* q,
                                           const float* q_tilde, int64_t q_stride,
                                           const float* k, const float* v, int64_t kv_stride,
                                           const int32_t* seq_tok_start, float* out,
                                           int64_t out_stride, int num_heads, float scale,
                                           cudaStream_t stream) {
  std::string err = CodedPrefillShapeError(step, num_heads, "vecinfer prefill attention");
  if (!err.empty()) return err;
  for (int d : {codec.k_sub_dim, codec.v_sub_dim}) {
    if (d != 2 && d != 4 && d != 8) return "vecinfer prefill attention: sub-vectors of 2, 4 or 8";
  }
  for (int bits : {codec.k_code_bits, codec.v_code_bits}) {
    if (bits != 8 && bits != 12) return "vecinfer prefill attention: codes of 8 or 12 bits";
  }
  const VecInferReader rd{codec, step.num_kv_heads, step.head_dim, step.page_tokens};
  VQ_CUDA_RETURN_IF_ERROR(LaunchPrefill(step, rd, residual_tokens, q, q_tilde, q_stride, k, v,
                                        kv_stride, seq_tok_start, out, out_stride, num_heads,
                                        scale, stream));
  return "";
}

}  // namespace vqserve::cuda
