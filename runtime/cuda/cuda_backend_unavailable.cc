// the cuda backend's entry points in a build without nvcc: each says so.

#include "runtime/cuda/cuda_backend.h"

namespace vqserve {

namespace {
constexpr char kNoCuda[] =
    "this vqserve was built without the cuda backend (nvcc was not found at configure time)";
}  // namespace

bool CudaDeviceAvailable(std::string* why) {
  if (why != nullptr) *why = kNoCuda;
  return false;
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LoadCudaLlamaModel(const std::string&, CudaWeights) {
  return absl::UnimplementedError(kNoCuda);
}

absl::Status CudaKvCodecSupported(const std::string&, int) {
  return absl::UnimplementedError(kNoCuda);
}

absl::StatusOr<std::unique_ptr<KvCache>> MakeCudaKvCacheOf(const std::string&, const KvShape&,
                                                           const CodebookFile*, int, int, int) {
  return absl::UnimplementedError(kNoCuda);
}

absl::StatusOr<std::unique_ptr<KvCache>> MakeCudaKvCacheOver(const std::string&, const KvShape&,
                                                             const CodebookFile*,
                                                             std::shared_ptr<const KvMemory>,
                                                             int) {
  return absl::UnimplementedError(kNoCuda);
}

absl::StatusOr<std::shared_ptr<KvMemory>> MakeCudaKvMemory(size_t) {
  return absl::UnimplementedError(kNoCuda);
}

}  // namespace vqserve
