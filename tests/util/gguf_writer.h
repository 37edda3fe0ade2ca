#ifndef VQSERVE_TESTS_UTIL_GGUF_WRITER_H_
#define VQSERVE_TESTS_UTIL_GGUF_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/gguf/gguf_file.h"

namespace vqserve::testing {

// builds small gguf v3 files in memory for tests (metadata of any type, raw tensors).
class GgufWriter {
 public:
  void AddUint32(const std::string& key, uint32_t v);
  void AddInt32(const std::string& key, int32_t v);
  void AddUint64(const std::string& key, uint64_t v);
  void AddFloat32(const std::string& key, float v);
  void AddFloat64(const std::string& key, double v);
  void AddBool(const std::string& key, bool v);
  void AddString(const std::string& key, const std::string& v);
  void AddStringArray(const std::string& key, const std::vector<std::string>& v);
  void AddInt32Array(const std::string& key, const std::vector<int32_t>& v);
  void AddFloat32Array(const std::string& key, const std::vector<float>& v);
  // an array of arrays of uint8 (nested arrays are legal gguf).
  void AddNestedArray(const std::string& key, const std::vector<std::vector<uint8_t>>& v);
  // a tensor with raw bytes of `type`; dims in gguf order.
  void AddTensor(const std::string& name, std::vector<int64_t> dims, GgmlType type,
                 std::vector<uint8_t> bytes);
  void set_version(uint32_t v) { version_ = v; }
  void set_alignment(uint32_t a) { alignment_ = a; }

  std::vector<uint8_t> Bytes() const;
  // writes Bytes() to `path`.
  void WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    GgmlType type;
    std::vector<uint8_t> bytes;
  };
  void Key(const std::string& key, GgufValueType type);
  template <typename T>
  void Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    kv_.insert(kv_.end(), p, p + sizeof(T));
  }
  void PutString(const std::string& s);

  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
  uint64_t num_kv_ = 0;
  std::vector<uint8_t> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_GGUF_WRITER_H_
