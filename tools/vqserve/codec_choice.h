// how `vqserve serve` turns a codec name into a codec and a kv cache: built-in codecs need
// nothing; vecinfer and commvq take their codebooks from the .vqcb files given with --codebooks.
#ifndef VQSERVE_TOOLS_VQSERVE_CODEC_CHOICE_H_
#define VQSERVE_TOOLS_VQSERVE_CODEC_CHOICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/kv/kv_cache.h"
#include "server/kv_pools.h"

namespace vqserve::cli {

// a codec maker for the model at `model_path`; `codebooks_paths` is a comma-separated list of
// .vqcb files (may be empty), each checked against the model and matched by codec name.
absl::StatusOr<CodecMaker> MakeCodecMaker(const std::string& model_path, const KvShape& shape,
                                          const std::string& codebooks_paths);

// kv cache makers with the same codebooks: PagedKvCache in host memory for device "cpu",
// CudaKvCache on the current cuda device for "cuda"; both keep the first `sink_tokens` tokens
// (rounded down to pages) of each sequence in fp16.
absl::StatusOr<KvCacheMakers> MakeKvCacheMakers(const std::string& model_path,
                                                const KvShape& shape,
                                                const std::string& codebooks_paths,
                                                const std::string& device, int sink_tokens);

}  // namespace vqserve::cli

#endif  // VQSERVE_TOOLS_VQSERVE_CODEC_CHOICE_H_
