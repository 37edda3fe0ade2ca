#ifndef VQSERVE_RUNTIME_KV_CODEBOOK_FILE_H_
#define VQSERVE_RUNTIME_KV_CODEBOOK_FILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/kv/kv_cache.h"

namespace vqserve {

// which model an artifact was calibrated on.
struct ModelIdentity {
  std::string name;
  int num_layers = 0;
  int num_kv_heads = 0;
  int num_heads = 0;
  int head_dim = 0;
  uint64_t metadata_hash = 0;  // Hash64 over every gguf metadata key and value

  // identity of the model in `file` (hyper-parameters from its config keys).
  static absl::StatusOr<ModelIdentity> FromGguf(const GgufFile& file);
  KvShape kv_shape() const { return KvShape{num_layers, num_kv_heads, num_heads, head_dim}; }
};

// our 64-bit checksum (multiply-rotate over 8-byte words with a final avalanche).
uint64_t Hash64(std::string_view bytes, uint64_t seed = 0);

// a .vqcb artifact: magic "VQCB", format version, model identity, codec name and parameters,
// named binary blobs, and a trailing Hash64 of every preceding byte.
struct CodebookFile {
  static constexpr uint32_t kVersion = 1;

  ModelIdentity model;
  std::string codec;                          // e.g. "vecinfer-k2v2"
  std::map<std::string, std::string> params;  // calibration settings, informational
  std::map<std::string, std::string> blobs;   // codec constants

  std::string Serialize() const;
  // parses bytes; errors are one line naming `path` and the problem.
  static absl::StatusOr<CodebookFile> Parse(std::string_view bytes, const std::string& path);
  absl::Status Save(const std::string& path) const;
  static absl::StatusOr<CodebookFile> Load(const std::string& path);
  // refuses an artifact calibrated on another model: one line naming `path` and the mismatch.
  absl::Status CheckModel(const ModelIdentity& expected, const std::string& path) const;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_CODEBOOK_FILE_H_
