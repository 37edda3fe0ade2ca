// vecinfer decode attention for the code widths and sub-vector shapes the lut and tensor-core
// kernels do not take: 12-bit codes (3 and 1.5 bits per element: 4096 centroids, too many for
// shared memory) and the 8-bit pairs outside (2,2) (4,4) (8,8) (4,8). keys and values are read
// element-wise as their centroids' entries straight from global memory (the books of a layer,
// <= 2 MB, stay in l2); nothing is dequantized to a buffer. grid (splits + 1, kv heads x head
// groups, batch); block x < splits folds its split of the coded pages against q~, block x ==
// splits folds the attention sink and the residual ring against q.
#include <string>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/decode/decode_attention_instances.h"
#include "kernels/cuda/common/dense_attention.cuh"
#include "kernels/cuda/common/vecinfer_codes.cuh"

namespace vqserve::cuda {
namespace {

// vecinfer page slices: Kcodes[H][32] rows of Mk codes, then Vcodes[H][32] rows of Mv codes;
// this kv head's centroids k (Mk, 2^kbits, dk) and v (Mv, 2^vbits, dv) fp32.
template <int D>
struct VecInferPageSource {
  const uint8_t* base;  // pages + layer_offset
  int64_t page_stride;
  const int32_t* table;
  const float* ck;
  const float* cv;
  int num_kv_heads, kvh, dk, dv, kbits, vbits;
  __device__ const uint8_t* Slice(int t) const { return base + table[t >> 5] * page_stride; }
  // k[0 .. N) = transformed key dims d0 .. d0+N of token t.
  template <int N>
  __device__ void LoadK(int t, int d0, float* k) const {
    const uint8_t* row =
        Slice(t) + (static_cast<int64_t>(kvh) * 32 + (t & 31)) * VecInferRowBytes(D / dk, kbits);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int d = d0 + i, m = d / dk;
      const int64_t entry = (static_cast<int64_t>(m) << kbits) + VecInferCode(row, m, kbits);
      k[i] = __ldg(ck + entry * dk + d % dk);
    }
  }
  // value dims d0, d0+1 (d0 even: one sub-vector) of token t.
  __device__ float2 LoadV2(int t, int d0) const {
    const int m = d0 / dv;
    const uint8_t* row = Slice(t) +
                         static_cast<int64_t>(num_kv_heads) * 32 * VecInferRowBytes(D / dk, kbits) +
                         (static_cast<int64_t>(kvh) * 32 + (t & 31)) * VecInferRowBytes(D / dv, vbits);
    const int64_t entry = (static_cast<int64_t>(m) << vbits) + VecInferCode(row, m, vbits);
    const float* c = cv + entry * dv + d0 % dv;
    return make_float2(__ldg(c), __ldg(c + 1));
  }
};

// q~ (batch, num_heads, D) fp32 for the codes, q for the sink and ring; pages per
// docs/kv_formats.md; writes workspace partials (batch, num_heads, splits + 1, D + 2).
template <int D, int HBP>
__global__ void __launch_bounds__(kDecodeThreads) VecInferGenericDecodeKernel(
    const DecodeAttentionParams p, int hb, int num_splits) {
  extern __shared__ float4 generic_smem4[];
  auto source = [&p](int b, int kvh) {
    return VecInferPageSource<D>{p.pages + p.layer_offset,
                                 p.page_stride,
                                 p.block_tables + b * p.block_table_stride,
                                 p.vq_k_codebook + kvh * p.vq_k_codebook_head_stride,
                                 p.vq_v_codebook + kvh * p.vq_v_codebook_head_stride,
                                 p.num_kv_heads,
                                 kvh,
                                 p.vq_k_sub_dim,
                                 p.vq_v_sub_dim,
                                 p.vq_k_code_bits,
                                 p.vq_v_code_bits};
  };
  DenseDecodeBlock<D, HBP>(p, hb, num_splits, reinterpret_cast<float*>(generic_smem4), source,
                           p.q_tilde);
}

template <int D, int HBP>
std::string Launch(const DecodeAttentionParams& p, int hb, int num_splits, cudaStream_t stream) {
  const int group = p.num_heads / p.num_kv_heads;
  dim3 grid(num_splits + 1, p.num_kv_heads * (group / hb), p.batch);
  const size_t smem = DenseSmem<D, HBP>::kFloats * sizeof(float);
  VecInferGenericDecodeKernel<D, HBP><<<grid, kDecodeThreads, smem, stream>>>(p, hb, num_splits);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

template <int D>
std::string LaunchHeads(const DecodeAttentionParams& p, int hb, int num_splits,
                        cudaStream_t stream) {
  if (hb <= 1) return Launch<D, 1>(p, hb, num_splits, stream);
  if (hb <= 2) return Launch<D, 2>(p, hb, num_splits, stream);
  if (hb <= 4) return Launch<D, 4>(p, hb, num_splits, stream);
  if (hb <= 8) return Launch<D, 8>(p, hb, num_splits, stream);
  return "vecinfer decode: at most 8 heads per block";
}

}  // namespace

std::string LaunchVecInferGenericDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                        cudaStream_t stream) {
  for (int d : {p.vq_k_sub_dim, p.vq_v_sub_dim}) {
    if (d != 2 && d != 4 && d != 8) return "vecinfer decode: sub-vectors of 2, 4 or 8 dims";
  }
  for (int bits : {p.vq_k_code_bits, p.vq_v_code_bits}) {
    if (bits != 8 && bits != 12) return "vecinfer decode: codes of 8 or 12 bits";
  }
  return p.head_dim == 64 ? LaunchHeads<64>(p, hb, num_splits, stream)
                          : LaunchHeads<128>(p, hb, num_splits, stream);
}

}  // namespace vqserve::cuda
