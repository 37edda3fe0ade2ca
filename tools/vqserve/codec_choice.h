// how `vqserve serve` turns a codec name into a codec: codecs without codebooks are built in;
// the others come from the codebooks file.
#ifndef VQSERVE_TOOLS_VQSERVE_CODEC_CHOICE_H_
#define VQSERVE_TOOLS_VQSERVE_CODEC_CHOICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/kv_cache.h"
#include "server/kv_pools.h"

namespace vqserve::cli {

// a codec maker for `shape`; `codebooks_path` may be empty (then only built-in codecs work).
absl::StatusOr<CodecMaker> MakeCodecMaker(const KvShape& shape, const std::string& codebooks_path);

}  // namespace vqserve::cli

#endif  // VQSERVE_TOOLS_VQSERVE_CODEC_CHOICE_H_
