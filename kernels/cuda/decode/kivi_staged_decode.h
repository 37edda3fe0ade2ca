#ifndef VQSERVE_KERNELS_CUDA_DECODE_KIVI_STAGED_DECODE_H_
#define VQSERVE_KERNELS_CUDA_DECODE_KIVI_STAGED_DECODE_H_

// decode attention over kivi pages (docs/kv_formats.md "kivi-kBvB", B = 2 or 4) that stages
// each warp's pages in shared memory with asynchronous copies, dequantizes the codes to fp16 in
// registers and runs q.k and p.v on the tensor cores; the kivi default of LaunchDecodeAttention.

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/decode/decode_attention.h"

namespace vqserve::cuda {

// blocks of the staged kivi kernel one sm holds (its register and shared-memory bound).
inline constexpr int kKiviStagedBlocksPerSm = 2;

// whether LaunchDecodeAttention runs the staged kernel for kivi pages: 32-token pages,
// head_dim 64 / 128, 2 / 4 bits, 16-byte aligned layer slices (else the element-wise kernel of
// paged_dense_decode.cuh).
bool UsesKiviStaged(const DecodeAttentionParams& p);

// writes the split partials (blocks x < num_splits: pages; x == num_splits: residual ring and
// sink) of `hb` (<= 8) query heads per block; the caller runs the split combine. empty string
// on success.
std::string LaunchKiviStagedDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream);

// the launcher of one (head_dim, bits) instance (kivi_staged_decode_d64.cu / _d128.cu).
template <int D, int B>
std::string LaunchKiviStagedFor(const DecodeAttentionParams& p, int hb, int num_splits,
                                cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_KIVI_STAGED_DECODE_H_
