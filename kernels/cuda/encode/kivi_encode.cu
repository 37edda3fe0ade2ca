// kivi page encoding on the gpu (see kivi_encode.h).
#include "kernels/cuda/encode/kivi_encode.h"

#include <cuda_fp16.h>

#include "kernels/cuda/common/cuda_check.h"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kGroup = 32;  // tokens per key group (the page), channels per value group

// quantizes the 32 values x[i * stride] as runtime/kv/kivi_codec.cc QuantizeGroup does (the same
// comparisons, fp16 roundings and correctly rounded divisions, whatever --use_fast_math says):
// writes the fp16 min and scale and the 32 * bits / 8 code bytes.
__device__ void QuantizeGroup32(const float* x, int64_t stride, int bits, __half* min_out,
                                __half* scale_out, uint8_t* codes) {
  float lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < kGroup; ++i) {
    const float xi = x[i * stride];
    lo = xi < lo ? xi : lo;  // std::min(lo, xi)
    hi = hi < xi ? xi : hi;  // std::max(hi, xi)
  }
  const int levels = (1 << bits) - 1;
  const __half mn_h = __float2half_rn(lo);
  const __half sc_h = __float2half_rn(__fdiv_rn(__fsub_rn(hi, lo), static_cast<float>(levels)));
  *min_out = mn_h;
  *scale_out = sc_h;
  const float mn = __half2float(mn_h), sc = __half2float(sc_h);
  uint32_t word[4] = {0, 0, 0, 0};  // 32 codes of <= 4 bits
  for (int i = 0; i < kGroup; ++i) {
    int c = sc > 0.0f ? static_cast<int>(roundf(__fdiv_rn(__fsub_rn(x[i * stride], mn), sc))) : 0;
    c = c < 0 ? 0 : (c > levels ? levels : c);
    const int bit = i * bits;
    word[bit >> 5] |= static_cast<uint32_t>(c) << (bit & 31);
  }
  for (int w = 0; w < bits; ++w) {  // 32 * bits bits = `bits` words, little-endian bytes
    for (int byte = 0; byte < 4; ++byte) codes[4 * w + byte] = (word[w] >> (8 * byte)) & 0xffu;
  }
}

// grid (num_kv_heads, pages), kThreads threads: first a thread per key channel, then per
// (token, value group). page y reads rows at p.k / p.v + y * 32 * H * D and writes at p.dst +
// page_ids[y] * page_bytes (p.dst itself when page_ids is null).
__global__ void KiviEncodeKernel(KiviEncodeParams p, const int32_t* page_ids, int64_t page_bytes) {
  const int h = blockIdx.x, H = p.num_kv_heads, D = p.head_dim, ng = D / kGroup;
  const int64_t row = static_cast<int64_t>(H) * D;
  if (page_ids != nullptr) {
    p.k += blockIdx.y * kGroup * row;
    p.v += blockIdx.y * kGroup * row;
    p.dst += page_ids[blockIdx.y] * page_bytes;
  }
  __half* kmin = reinterpret_cast<__half*>(p.dst);
  __half* kscale = kmin + H * D;
  __half* vmin = kscale + H * D;
  __half* vscale = vmin + H * kGroup * ng;
  uint8_t* kcode = reinterpret_cast<uint8_t*>(vscale + H * kGroup * ng);
  uint8_t* vcode = kcode + static_cast<int64_t>(H) * D * kGroup * p.bits / 8;
  for (int c = threadIdx.x; c < D; c += kThreads) {
    const int hc = h * D + c;
    QuantizeGroup32(p.k + hc, row, p.bits, &kmin[hc], &kscale[hc],
                    kcode + static_cast<int64_t>(hc) * kGroup * p.bits / 8);
  }
  for (int idx = threadIdx.x; idx < kGroup * ng; idx += kThreads) {
    const int t = idx / ng, g = idx % ng, at = (h * kGroup + t) * ng + g;
    QuantizeGroup32(p.v + t * row + h * D + g * kGroup, 1, p.bits, &vmin[at], &vscale[at],
                    vcode + (static_cast<int64_t>(h) * kGroup + t) * D * p.bits / 8 +
                        g * kGroup * p.bits / 8);
  }
}

}  // namespace

int64_t KiviLayerPageBytes(int bits, int num_kv_heads, int head_dim) {
  const int64_t H = num_kv_heads, D = head_dim, P = kGroup, ng = D / kGroup;
  return 4 * H * D + 4 * H * P * ng + H * D * P * bits / 8 + H * P * D * bits / 8;
}

namespace {

std::string Launch(const KiviEncodeParams& p, const int32_t* page_ids, int64_t page_bytes,
                   int count, cudaStream_t stream) {
  if (p.bits != 2 && p.bits != 4) return "kivi encode: bits must be 2 or 4";
  if (p.head_dim <= 0 || p.head_dim % kGroup != 0 || p.num_kv_heads <= 0) {
    return "kivi encode: head_dim must be a multiple of 32";
  }
  constexpr int kMaxGridY = 65535;
  const int64_t page_floats = static_cast<int64_t>(kGroup) * p.num_kv_heads * p.head_dim;
  for (int first = 0; first < count; first += kMaxGridY) {
    KiviEncodeParams chunk = p;
    chunk.k += first * page_floats;
    chunk.v += first * page_floats;
    const int n = count - first < kMaxGridY ? count - first : kMaxGridY;
    KiviEncodeKernel<<<dim3(p.num_kv_heads, n), kThreads, 0, stream>>>(
        chunk, page_ids == nullptr ? nullptr : page_ids + first, page_bytes);
    VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return "";
}

}  // namespace

std::string LaunchKiviEncodePage(const KiviEncodeParams& p, cudaStream_t stream) {
  return Launch(p, nullptr, 0, 1, stream);
}

std::string LaunchKiviEncodePages(const KiviEncodeParams& p, const int32_t* page_ids,
                                  int64_t page_bytes, int count, cudaStream_t stream) {
  if (page_ids == nullptr && count > 0) return "kivi encode: page ids are required";
  return Launch(p, page_ids, page_bytes, count, stream);
}

}  // namespace vqserve::cuda
