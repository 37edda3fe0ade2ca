// fp16 paged baseline decode attention, head_dim 128.
#include "kernels/cuda/paged_dense_decode.cuh"

namespace vqserve::cuda {
template std::string LaunchPagedDenseDecode<128, 1, false>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<128, 2, false>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<128, 4, false>(const DecodeAttentionParams&, int, int, cudaStream_t);
template std::string LaunchPagedDenseDecode<128, 8, false>(const DecodeAttentionParams&, int, int, cudaStream_t);
}  // namespace vqserve::cuda
