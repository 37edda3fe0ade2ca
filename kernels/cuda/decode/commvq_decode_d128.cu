// commvq decode attention, head_dim 128, 1 .. 8 query heads per block.
#include "kernels/cuda/decode/commvq_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchCommVqDecode<128, 1>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchCommVqDecode<128, 2>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchCommVqDecode<128, 4>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchCommVqDecode<128, 8>(const DecodeAttentionParams&, int, int, cudaStream_t);
}  // namespace vqserve::cuda
