// commvq page encode (see commvq_encode.h). the arithmetic follows runtime/kv/commvq_codec.cc and
// runtime/kv/commvq_math.cc step for step (explicitly rounded intrinsics, so --use_fast_math does
// not change it): the avx2 dot products' lane order, sequential fmas of the projections, the
// argmin's lowest index on ties. codes then equal the cpu's bit for bit.
#include "kernels/cuda/encode/commvq_encode.h"

#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/common/cuda_check.h"

namespace vqserve::cuda {
namespace {

constexpr int kP = 32;          // page tokens
constexpr int kE = 64;          // entries per key book round
constexpr int kCodes = kE * kE;  // (A, B) candidates
constexpr int kKeyThreads = 256;
constexpr int kArgminLanes = kKeyThreads / kP;  // threads per token in the argmin

// where page f of a launch goes: dst + ids[f] * bytes (ids in device memory).
struct PageIds {
  const int32_t* ids;
  int64_t bytes;
};

// the cpu's avx2 Dot (runtime/kv/commvq_math.cc) of n floats, n a multiple of 16: lanes l of two
// 8-wide fma accumulators over elements i + l and i + 8 + l, added lane-wise, then the
// horizontal sum (l, l + 4), (0, 2) + (1, 3). el(k, &a, &b) yields element k of both inputs.
template <class El>
__device__ float AvxOrderDot(int n, El el) {
  float acc0[8], acc1[8];
#pragma unroll
  for (int l = 0; l < 8; ++l) acc0[l] = acc1[l] = 0.0f;
  for (int i = 0; i + 16 <= n; i += 16) {
#pragma unroll
    for (int l = 0; l < 8; ++l) {
      float a, b;
      el(i + l, &a, &b);
      acc0[l] = __fmaf_rn(a, b, acc0[l]);
      el(i + 8 + l, &a, &b);
      acc1[l] = __fmaf_rn(a, b, acc1[l]);
    }
  }
#pragma unroll
  for (int l = 0; l < 8; ++l) acc0[l] = __fadd_rn(acc0[l], acc1[l]);
  float s[4];
#pragma unroll
  for (int l = 0; l < 4; ++l) s[l] = __fadd_rn(acc0[l], acc0[l + 4]);
  return __fadd_rn(__fadd_rn(s[0], s[2]), __fadd_rn(s[1], s[3]));
}

// keys of one (page, kv head, pair group): grid (pages, H, groups), kKeyThreads threads.
// smem (floats): ent [64][2g + 1] (this round's entries over the group, padded rows),
// base [4096], norms [64], z [32][2g], two_u [32][128], inv [32]; codes [32] u32.
__global__ void __launch_bounds__(kKeyThreads) CommVqEncodeKeysKernel(const CommVqEncodeParams p,
                                                                     const PageIds pages) {
  extern __shared__ float smem[];
  const int f = blockIdx.x, h = blockIdx.y, gi = blockIdx.z, tid = threadIdx.x;
  const int D = p.head_dim, H = p.num_kv_heads, half = D / 2, G = gridDim.z, g = half / G;
  const int w = 2 * g, stride = w + 1, R = p.key_rounds;
  float* ent = smem;
  float* base = ent + kE * stride;
  float* norms = base + kCodes;
  float* z = norms + kE;
  float* two_u = z + kP * w;
  float* inv = two_u + kP * 2 * kE;
  uint32_t* codes = reinterpret_cast<uint32_t*>(inv + kP);
  uint8_t* slice = p.dst + pages.ids[f] * pages.bytes;
  const float* kpage = p.k + static_cast<int64_t>(f) * kP * H * D;

  // per-token norm in float64 (sequential, as the cpu), its fp16 scale and the fp32 reciprocal.
  if (tid < kP) {
    const float* kt = kpage + (static_cast<int64_t>(tid) * H + h) * D;
    double ss = 0.0;
    for (int d = 0; d < D; ++d) ss = __dadd_rn(ss, __dmul_rn(kt[d], kt[d]));
    const float norm = static_cast<float>(fmin(__dsqrt_rn(ss), 65504.0));
    const __half hs = __float2half_rn(norm);
    const float s = __half2float(hs);
    inv[tid] = s > 0.0f ? __frcp_rn(s) : 0.0f;
    if (gi == 0) reinterpret_cast<__half*>(slice)[h * kP + tid] = hs;
  }
  __syncthreads();
  for (int i = tid; i < kP * w; i += kKeyThreads) {
    const int t = i / w, e = i % w;
    z[i] = __fmul_rn(kpage[(static_cast<int64_t>(t) * H + h) * D + gi * w + e], inv[t]);
  }
  const float* books = p.key_books + h * p.key_head_stride;
  const int64_t kcodes = int64_t{2} * H * kP;
  for (int r = 0; r < R; ++r) {
    // this round's entries over the group's pairs: ent[a][2j], ent[a][2j + 1] = x, y of pair
    // gi * g + j.
    const float* book = books + static_cast<int64_t>(r) * kE * D + gi * w;
    __syncthreads();  // the previous round's readers of ent / two_u are done
    for (int i = tid; i < kE * w; i += kKeyThreads) ent[(i / w) * stride + i % w] = book[(i / w) * D + i % w];
    __syncthreads();
    if (tid < kE) {
      const float* ea = ent + tid * stride;
      norms[tid] = AvxOrderDot(w, [&](int k, float* a, float* b) { *a = ea[k]; *b = ea[k]; });
    }
    // projections u[t][A] = <z, (x_A, y_A)>, u[t][64 + B] = <z, (-y_B, x_B)>: sequential fmas.
    for (int o = tid; o < kP * 2 * kE; o += kKeyThreads) {
      const int t = o / (2 * kE), col = o % (2 * kE), e = col % kE;
      const float* zt = z + t * w;
      const float* ee = ent + e * stride;
      float acc = 0.0f;
      if (col < kE) {
        for (int k = 0; k < w; ++k) acc = __fmaf_rn(zt[k], ee[k], acc);
      } else {
        for (int k = 0; k < w; k += 2) {
          acc = __fmaf_rn(zt[k], -ee[k + 1], acc);
          acc = __fmaf_rn(zt[k + 1], ee[k], acc);
        }
      }
      two_u[o] = __fmul_rn(2.0f, acc);
    }
    __syncthreads();
    // |zeta_A + i zeta_B|^2 = |zeta_A|^2 + |zeta_B|^2 + 2 <perp_A, ent_B>, perp = (y, -x).
    for (int c = tid; c < kCodes; c += kKeyThreads) {
      const int a = c % kE, b = c / kE;
      const float* ea = ent + a * stride;
      const float* eb = ent + b * stride;
      const float d = AvxOrderDot(w, [&](int k, float* x, float* y) {
        *x = (k & 1) ? -ea[k - 1] : ea[k + 1];
        *y = eb[k];
      });
      base[c] = __fadd_rn(__fadd_rn(norms[a], norms[b]), __fmul_rn(2.0f, d));
    }
    __syncthreads();
    // argmin over the 4096 codes of base - 2 u[A] - 2 u[64 + B], lowest index on ties:
    // kArgminLanes threads per token, thread `sub` scanning A = sub + kArgminLanes k in order.
    {
      const int t = tid / kArgminLanes, sub = tid % kArgminLanes;
      const float* tu = two_u + t * 2 * kE;
      float best = INFINITY;
      int best_c = 0;
      for (int b = 0; b < kE; ++b) {
        const float ub = tu[kE + b];
        for (int a = sub; a < kE; a += kArgminLanes) {
          const float e = __fsub_rn(__fsub_rn(base[a + kE * b], tu[a]), ub);
          if (e < best) {
            best = e;
            best_c = a + kE * b;
          }
        }
      }
#pragma unroll
      for (int o = kArgminLanes / 2; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int oc = __shfl_xor_sync(0xffffffffu, best_c, o);
        if (ob < best || (ob == best && oc < best_c)) {
          best = ob;
          best_c = oc;
        }
      }
      if (sub == 0) codes[t] = static_cast<uint32_t>(best_c);
    }
    __syncthreads();
    // remainder: z -= centre(code) = (x_A - y_B, y_A + x_B) per pair.
    for (int i = tid; i < kP * g; i += kKeyThreads) {
      const int t = i / g, j = i % g, c = static_cast<int>(codes[t]);
      const float* ea = ent + (c % kE) * stride;
      const float* eb = ent + (c / kE) * stride;
      float* zt = z + t * w + 2 * j;
      zt[0] = __fsub_rn(zt[0], __fsub_rn(ea[2 * j], eb[2 * j + 1]));
      zt[1] = __fsub_rn(zt[1], __fadd_rn(ea[2 * j + 1], eb[2 * j]));
    }
    if (tid < kP / 2) {  // tokens 2 tid, 2 tid + 1 in 3 bytes
      const uint32_t c0 = codes[2 * tid], c1 = codes[2 * tid + 1];
      uint8_t* d = slice + kcodes + ((static_cast<int64_t>(h) * G + gi) * R + r) * (kP * 3 / 2) + 3 * tid;
      d[0] = static_cast<uint8_t>(c0 & 0xff);
      d[1] = static_cast<uint8_t>((c0 >> 8) | ((c1 & 0xf) << 4));
      d[2] = static_cast<uint8_t>(c1 >> 4);
    }
  }
}

// values of one (page, kv head): grid (pages, H), 32 * (D / 8) threads, thread (m, t) coding
// token t's sub-vector m over the value rounds (squared l2 summed as the cpu's avx2 lanes).
__global__ void CommVqEncodeValuesKernel(const CommVqEncodeParams p, const PageIds pages,
                                         int groups) {
  const int f = blockIdx.x, h = blockIdx.y, t = threadIdx.x % kP, m = threadIdx.x / kP;
  const int D = p.head_dim, H = p.num_kv_heads, M = D / 8, RV = p.value_rounds;
  const float* vt = p.v + ((static_cast<int64_t>(f) * kP + t) * H + h) * D + 8 * m;
  float x[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) x[e] = vt[e];
  uint8_t* slice = p.dst + pages.ids[f] * pages.bytes;
  const int64_t vcodes = int64_t{2} * H * kP + int64_t{3} * H * groups * p.key_rounds * kP / 2;
  const float* books = p.value_books + h * p.value_head_stride;
  for (int r = 0; r < RV; ++r) {
    const float* cents = books + (static_cast<int64_t>(r) * M + m) * 256 * 8;
    int best = 0;
    float best_d = INFINITY;
    for (int c = 0; c < 256; ++c) {
      float sq[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float d = __fsub_rn(__ldg(cents + 8 * c + e), x[e]);
        sq[e] = __fmul_rn(d, d);
      }
      float s[4];
#pragma unroll
      for (int l = 0; l < 4; ++l) s[l] = __fadd_rn(sq[l], sq[l + 4]);
      const float dist = __fadd_rn(__fadd_rn(s[0], s[2]), __fadd_rn(s[1], s[3]));
      if (dist < best_d) {
        best_d = dist;
        best = c;
      }
    }
    slice[vcodes + ((static_cast<int64_t>(h) * RV + r) * M + m) * kP + t] = static_cast<uint8_t>(best);
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = __fsub_rn(x[e], cents[8 * best + e]);
  }
}

// largest divisor of head_dim / 2 that is <= 64 (runtime/kv/commvq_codebooks.h CommVqGroupPairs).
int GroupPairs(int head_dim) {
  int g = std::min(64, head_dim / 2);
  while (g > 1 && (head_dim / 2) % g != 0) --g;
  return g;
}

}  // namespace

std::string LaunchCommVqEncodePages(const CommVqEncodeParams& p, const int32_t* page_ids,
                                    int64_t page_bytes, int count, cudaStream_t stream) {
  const int D = p.head_dim;
  if (D != 64 && D != 128) return "commvq encode: head_dim must be 64 or 128";
  if (p.k == nullptr || p.v == nullptr || p.key_books == nullptr || p.value_books == nullptr ||
      p.dst == nullptr || p.num_kv_heads <= 0 || p.key_rounds < 1 || p.value_rounds < 1 ||
      (page_ids == nullptr && count > 0)) {
    return "commvq encode: missing inputs";
  }
  if (count <= 0) return "";
  const int g = GroupPairs(D), groups = D / 2 / g, w = 2 * g;
  const size_t key_smem = sizeof(float) * (kE * (w + 1) + kCodes + kE + kP * w + kP * 2 * kE + kP) +
                          sizeof(uint32_t) * kP;
  static size_t configured = 0;
  if (key_smem > configured) {
    VQ_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        CommVqEncodeKeysKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(key_smem)));
    configured = key_smem;
  }
  const PageIds pages{page_ids, page_bytes};
  CommVqEncodeKeysKernel<<<dim3(count, p.num_kv_heads, groups), kKeyThreads, key_smem, stream>>>(
      p, pages);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  CommVqEncodeValuesKernel<<<dim3(count, p.num_kv_heads), kP * (D / 8), 0, stream>>>(p, pages,
                                                                                   groups);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda
