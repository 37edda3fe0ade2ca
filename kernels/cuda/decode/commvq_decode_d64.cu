// commvq decode attention, head_dim 64, 1 .. 8 query heads per block.
#include "kernels/cuda/decode/commvq_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchCommVqDecode<64, 1>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchCommVqDecode<64, 2>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchCommVqDecode<64, 4>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchCommVqDecode<64, 8>(const DecodeAttentionParams&, int, int, cudaStream_t);
}  // namespace vqserve::cuda
