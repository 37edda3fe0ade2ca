#ifndef VQSERVE_RUNTIME_CUDA_CUDA_BACKEND_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_BACKEND_H_

// the cuda backend as the rest of vqserve sees it: the same entry points whether or not this
// build has it. vqserve_runtime_cuda (built only where nvcc is found) implements them; without
// it, cuda_backend_unavailable.cc answers every call with "built without the cuda backend".

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/kv/codebook_file.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/model/llama_model.h"

namespace vqserve {

// true when this build has the cuda backend and a cuda device is present; else false with
// the reason in *why.
bool CudaDeviceAvailable(std::string* why);

// how the gpu holds a gguf's weight matrices: kFp16 dequantizes every tensor to fp16 at load
// (cublas; the default while it is the faster); kBlocks keeps q8_0, q4_0, q4_1, q4_k, q5_k and
// q6_k tensors in their block format (about a quarter of the memory; fused
// dequantize-and-multiply kernels, slower today: docs/performance.md; other types as fp16).
enum class CudaWeights { kBlocks, kFp16 };

// loads `path` onto the current cuda device. the model's Forward takes batches whose
// sequences all use one cache of MakeCudaKvCacheOf and returns host logits, as the cpu
// model's. errors name the file and the problem, or say that cuda is unavailable.
absl::StatusOr<std::unique_ptr<LlamaModel>> LoadCudaLlamaModel(
    const std::string& path, CudaWeights weights = CudaWeights::kFp16);

// ok when the cuda runtime can hold codec `name` ("fp16", "kivi-k2v2", "kivi-k4v4", every
// vecinfer width, "commvq-2", "commvq-1") for kv heads of `head_dim` (64 or 128; 0: not
// checked); else one line saying which codecs it holds. needs no device.
absl::Status CudaKvCodecSupported(const std::string& name, int head_dim = 0);

// the device cache of codec `name` for `shape` (codebooks: the artifact calibrated for it, or
// null), with the attention sink of PagedKvCache (`sink_tokens` rounded down to pages).
absl::StatusOr<std::unique_ptr<KvCache>> MakeCudaKvCacheOf(const std::string& name,
                                                           const KvShape& shape,
                                                           const CodebookFile* codebooks,
                                                           int num_pages, int num_slots,
                                                           int sink_tokens = 0);
// the same over `memory` (from MakeCudaKvMemory, shared by the caches of every served codec).
absl::StatusOr<std::unique_ptr<KvCache>> MakeCudaKvCacheOver(
    const std::string& name, const KvShape& shape, const CodebookFile* codebooks,
    std::shared_ptr<const KvMemory> memory, int sink_tokens = 0);
// `bytes` of device memory for the caches to share.
absl::StatusOr<std::shared_ptr<KvMemory>> MakeCudaKvMemory(size_t bytes);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_BACKEND_H_
