#ifndef VQSERVE_RUNTIME_GGUF_GGUF_FILE_H_
#define VQSERVE_RUNTIME_GGUF_GGUF_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/gguf/ggml_type.h"

namespace vqserve {

// metadata value types of gguf v3.
enum class GgufValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

// one metadata value; arrays hold their elements (all of one type).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GgufValue>> data;
  GgufValueType array_type = GgufValueType::kUint8;  // element type when type == kArray

  bool is_number() const;
  // numeric value as int64 / double (bools as 0/1, floats truncated and saturated, nan 0);
  // undefined for strings and arrays.
  int64_t AsInt() const;
  double AsDouble() const;
  const std::string& AsString() const { return std::get<std::string>(data); }
  const std::vector<GgufValue>& AsArray() const { return std::get<std::vector<GgufValue>>(data); }
};

// one tensor: dims in gguf order (dims[0] is the contiguous one), data points into the mapping.
struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // relative to the data section
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t num_elements() const;
};

// a memory-mapped gguf v2/v3 file. every read is bounds-checked at open time.
class GgufFile {
 public:
  // opens and validates `path`; errors are one line naming the file and the problem.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  // metadata lookup; nullptr when absent.
  const GgufValue* Find(const std::string& key) const;
  // typed lookups with a default for absent keys.
  int64_t GetInt(const std::string& key, int64_t def) const;
  double GetFloat(const std::string& key, double def) const;
  std::string GetString(const std::string& key, const std::string& def) const;
  // tensor by name; nullptr when absent.
  const GgufTensor* FindTensor(const std::string& name) const;
  // the tensor dequantized to fp32 (row-major, dims[0] contiguous).
  absl::StatusOr<std::vector<float>> ReadTensorF32(const std::string& name) const;

 private:
  GgufFile() = default;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_GGUF_GGUF_FILE_H_
