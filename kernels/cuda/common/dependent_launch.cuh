#ifndef VQSERVE_KERNELS_CUDA_COMMON_DEPENDENT_LAUNCH_CUH_
#define VQSERVE_KERNELS_CUDA_COMMON_DEPENDENT_LAUNCH_CUH_

// programmatic dependent launch (sm_90): a kernel launched by LaunchAfterPrevious may start
// while the kernel ahead of it on the stream is still running (its launch and prologue overlap
// that kernel's tail, in cuda graphs too). such a kernel must call GridDependencyWait() in
// every thread before it reads anything earlier kernels wrote or writes anything they read;
// work independent of them (loading weights) may come first. without the attribute the wait
// returns at once.

#include <cuda_runtime_api.h>

#include <utility>

namespace vqserve::cuda {

// returns once the kernel ahead has completed and its writes are visible.
__device__ __forceinline__ void GridDependencyWait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
// lets the kernel behind this one be scheduled before this grid exits.
__device__ __forceinline__ void LaunchDependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization.
template <class... Params, class... Args>
cudaError_t LaunchAfterPrevious(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_COMMON_DEPENDENT_LAUNCH_CUH_
