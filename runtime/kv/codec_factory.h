#ifndef VQSERVE_RUNTIME_KV_CODEC_FACTORY_H_
#define VQSERVE_RUNTIME_KV_CODEC_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/kv/codebook_file.h"
#include "runtime/kv/kv_codec.h"

namespace vqserve {

// builds the codec `name` for `shape`: "fp16", "kivi-k2v2", "kivi-k4v4", "vecinfer-kXvY[...]",
// "commvq-2", "commvq-1". vecinfer and commvq need `codebooks` calibrated for the same codec
// name and kv shape; errors are one line.
absl::StatusOr<std::unique_ptr<KvCodec>> MakeCodec(const std::string& name, const KvShape& shape,
                                                   const CodebookFile* codebooks);

// true when `name` needs a codebook artifact.
bool CodecNeedsCodebooks(const std::string& name);

// the named configurations this build supports (vecinfer ablation suffixes not listed).
std::vector<std::string> KnownCodecs();

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_CODEC_FACTORY_H_
