// vecinfer decode attention, head_dim 128, 4-bit keys (sub-vectors of 2), 4-bit values (sub-vectors of 2).
#include "kernels/cuda/decode/vecinfer_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchVecInferDecode<128, 2, 2, 1>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
template std::string LaunchVecInferDecode<128, 2, 2, 2>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
}  // namespace vqserve::cuda
