// the -pca key lut of the vecinfer tensor-core decode kernel (decode_attention_instances.h):
// key sub-vectors of varying size (vecinfer_codec.h -pca) cannot be built by its per-lane
// 4-dim lut loop, so this kernel builds the same image in global memory and the decode kernel
// copies it (vecinfer_mma_decode.cu).
//
// grid (kv heads x head groups, batch, lut row entries), 256 threads: thread c writes entry
// (c, m) of its block's lut for sub-vector m = blockIdx.z, zeros for the row's padding m >= Mk
// (short chains, and enough blocks for one sequence at 128K: the first version, a block for
// every sub-vector, made -pca decode ~27 us slower than k2v2 there).
// smem: the sub-vector's query dims of the block's 4 heads (0 past hb), pre-scaled by scale *
// log2(e).

#include <cuda_fp16.h>

#include <string>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/mma_ops.cuh"
#include "kernels/cuda/decode/decode_attention_instances.h"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 256;  // one per code

__global__ void VecInferPcaLutKernel(const DecodeAttentionParams p, int hb, int mk) {
  __shared__ float q_s[4][128];
  const int b = blockIdx.y, m = blockIdx.z, row = VecInferPcaLutRow(mk);
  const int group = p.num_heads / p.num_kv_heads, per_kv = group / hb;
  const int kvh = blockIdx.x / per_kv, h0 = kvh * group + (blockIdx.x % per_kv) * hb;
  const int c = threadIdx.x;
  uint2* out = reinterpret_cast<uint2*>(p.vq_pca_lut) + ((static_cast<int64_t>(b) * gridDim.x + blockIdx.x) * 256 + c) * row;
  if (m >= mk) {  // the row's padding: zeros, so that a code byte past the token's codes adds 0
    out[m] = make_uint2(0u, 0u);
    return;
  }
  const int32_t* dims = p.vq_k_dims + kvh * mk;
  int off = 0;
  for (int i = 0; i < m; ++i) off += __ldg(dims + i);
  const int d = __ldg(dims + m);
  const float qs = p.scale * 1.4426950408889634f;  // scores in log2 units, as the kernel's build
  for (int e = threadIdx.x; e < 4 * d; e += kThreads) {
    const int h = e / d, j = e % d;
    q_s[h][j] = h < hb ? p.q_tilde[b * p.q_batch_stride + (h0 + h) * p.q_head_stride + off + j] * qs : 0.0f;
  }
  __syncthreads();
  const float* r = p.vq_k_codebook + kvh * p.vq_k_codebook_head_stride + static_cast<int64_t>(off) * 256 + c * d;
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int j = 0; j < d; ++j) {
    const float x = __ldg(r + j);
#pragma unroll
    for (int h = 0; h < 4; ++h) s[h] = fmaf(q_s[h][j], x, s[h]);
  }
  out[m] = make_uint2(PackHalf2(s[0], s[1]), PackHalf2(s[2], s[3]));
}

}  // namespace

std::string LaunchVecInferPcaLut(const DecodeAttentionParams& p, int hb, cudaStream_t stream) {
  if (p.head_dim > 128 || p.vq_k_code_bits != 8 || hb < 1 || hb > 4 || p.vq_pca_lut == nullptr) {
    return "vecinfer -pca lut: head_dim <= 128, 8-bit key codes, <= 4 heads a block and a lut scratch";
  }
  const int group = p.num_heads / p.num_kv_heads;
  const int mk = VecInferKeyCodes(p);
  VecInferPcaLutKernel<<<dim3(p.num_kv_heads * (group / hb), p.batch, VecInferPcaLutRow(mk)), kThreads, 0, stream>>>(
      p, hb, mk);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

size_t VecInferPcaLutBytes(int batch, int num_heads, int k_codes) {
  return static_cast<size_t>(batch) * num_heads * 256 * VecInferPcaLutRow(k_codes) * 4 * sizeof(__half);
}

}  // namespace vqserve::cuda
