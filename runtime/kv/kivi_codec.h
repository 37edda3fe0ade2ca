#ifndef VQSERVE_RUNTIME_KV_KIVI_CODEC_H_
#define VQSERVE_RUNTIME_KV_KIVI_CODEC_H_

#include <memory>

#include "runtime/kv/kv_codec.h"

namespace vqserve {

// kivi scalar quantization at `bits` (2 or 4) for keys and values: keys per channel over the
// page's 32 tokens, values per token in groups of 32 channels, asymmetric min/max with fp16
// min and scale. head_dim must be a multiple of 32. layout in docs/kv_formats.md.
std::unique_ptr<KvCodec> MakeKiviCodec(const KvShape& shape, int bits);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_KIVI_CODEC_H_
