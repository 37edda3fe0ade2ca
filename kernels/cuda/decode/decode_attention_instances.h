#ifndef VQSERVE_KERNELS_CUDA_DECODE_DECODE_ATTENTION_INSTANCES_H_
#define VQSERVE_KERNELS_CUDA_DECODE_DECODE_ATTENTION_INSTANCES_H_

// launchers of every instantiated decode kernel (defined in the *_decode_d*.cu files) and of
// the split combine; the dispatcher in decode_attention.cu picks one at run time.

#include <string>

#include "kernels/cuda/decode/decode_attention.h"

namespace vqserve::cuda {

// kivi pages (kKivi true) element-wise, HBP >= hb query heads per block (kivi_decode_d*.cu).
template <int D, int HBP, bool kKivi>
std::string LaunchPagedDenseDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream);

// vecinfer pages with DK / DV dims per key / value sub-vector, lut in shared memory
// (vecinfer_decode_d*_k4v4.cu: DK = DV = 2).
template <int D, int DK, int DV, int HBP>
std::string LaunchVecInferDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                 cudaStream_t stream);

// vecinfer pages, head_dim 128 or 64, 8-bit codes of (4, 4), (8, 8) or (4, 8)-dim (key,
// value) sub-vectors, hb <= 4, on the tensor cores (vecinfer_mma_decode.cu).
std::string LaunchVecInferMmaDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                    cudaStream_t stream);

// vecinfer -pca keys: p.vq_pca_lut <- the fp16 lut of every block of the tensor-core kernel
// (grid (*, kv heads x head groups, batch)), the image that kernel otherwise builds in shared
// memory: block (b, y)'s [256 codes][R][4 heads] at + (b * gridDim.y + y) * 256 * R * 4 halves,
// R = VecInferPcaLutRow(Mk), entries m >= Mk zero (vecinfer_pca_lut.cu).
std::string LaunchVecInferPcaLut(const DecodeAttentionParams& p, int hb, cudaStream_t stream);

// vecinfer pages of any code width (8 or 12 bits) and sub-vector sizes (2, 4, 8), read
// element-wise with centroids from global memory (vecinfer_generic_decode.cu).
std::string LaunchVecInferGenericDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                        cudaStream_t stream);

// commvq pages, HBP >= hb query heads per block (commvq_decode_d*.cu).
template <int D, int HBP>
std::string LaunchCommVqDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                               cudaStream_t stream);

// out (b, h, :) = merge of the num_splits + 1 workspace partials of (b, h).
std::string LaunchSplitCombine(const DecodeAttentionParams& p, int num_splits, cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_DECODE_ATTENTION_INSTANCES_H_
