// vecinfer decode attention, head_dim 64, 2-bit keys (sub-vectors of 4), 1-bit values (sub-vectors of 8).
#include "kernels/cuda/vecinfer_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchVecInferDecode<64, 4, 8, 1>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
template std::string LaunchVecInferDecode<64, 4, 8, 2>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
template std::string LaunchVecInferDecode<64, 4, 8, 4>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
template std::string LaunchVecInferDecode<64, 4, 8, 8>(const DecodeAttentionParams&, int, int,
                                                        cudaStream_t);
}  // namespace vqserve::cuda
