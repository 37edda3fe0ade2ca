#ifndef VQSERVE_KERNELS_CUDA_DECODE_PAGED_DENSE_DECODE_CUH_
#define VQSERVE_KERNELS_CUDA_DECODE_PAGED_DENSE_DECODE_CUH_

// decode kernel for page formats read element-wise (fp16 baseline, kivi): grid
// (splits + 1, kv heads x head groups, batch); block x < splits folds its split of the coded
// pages, block x == splits folds the residual ring.

#include <string>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/dense_attention.cuh"

namespace vqserve::cuda {

// q (batch, num_heads, D) fp32; pages: fp16 K[H][32][D], V[H][32][D] or kivi slices; ring
// (slots, ring, H, D) fp16; writes workspace partials (batch, num_heads, splits + 1, D + 2).
template <int D, int HBP, bool kKivi>
__global__ void __launch_bounds__(kDecodeThreads) PagedDenseDecodeKernel(
    const DecodeAttentionParams p, int hb, int num_splits) {
  extern __shared__ float4 dense_smem4[];
  auto source = [&p](int b, int kvh) {
    const uint8_t* base = p.pages + p.layer_offset;
    const int32_t* table = p.block_tables + b * p.block_table_stride;
    if constexpr (kKivi) {
      return KiviPageSource<D>{base, p.page_stride, table, p.num_kv_heads, kvh, p.kivi_bits};
    } else {
      return Fp16PageSource<D>{base, p.page_stride, table, p.num_kv_heads, kvh};
    }
  };
  DenseDecodeBlock<D, HBP>(p, hb, num_splits, reinterpret_cast<float*>(dense_smem4), source);
}

// launches the kernel above (instantiated per head_dim in fp16_decode_d*.cu / kivi_decode_d*.cu).
template <int D, int HBP, bool kKivi>
std::string LaunchPagedDenseDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream) {
  const int group = p.num_heads / p.num_kv_heads;
  dim3 grid(num_splits + 1, p.num_kv_heads * (group / hb), p.batch);
  const size_t smem = DenseSmem<D, HBP>::kFloats * sizeof(float);
  PagedDenseDecodeKernel<D, HBP, kKivi><<<grid, kDecodeThreads, smem, stream>>>(p, hb, num_splits);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_PAGED_DENSE_DECODE_CUH_
