#include "tests/util/gguf_writer.h"

#include <cstring>
#include <fstream>

namespace vqserve::testing {

void GgufWriter::Key(const std::string& key, GgufValueType type) {
  PutString(key);
  Put(static_cast<uint32_t>(type));
  ++num_kv_;
}

void GgufWriter::PutString(const std::string& s) {
  Put(static_cast<uint64_t>(s.size()));
  kv_.insert(kv_.end(), s.begin(), s.end());
}

void GgufWriter::AddUint32(const std::string& k, uint32_t v) { Key(k, GgufValueType::kUint32); Put(v); }
void GgufWriter::AddInt32(const std::string& k, int32_t v) { Key(k, GgufValueType::kInt32); Put(v); }
void GgufWriter::AddUint64(const std::string& k, uint64_t v) { Key(k, GgufValueType::kUint64); Put(v); }
void GgufWriter::AddFloat32(const std::string& k, float v) { Key(k, GgufValueType::kFloat32); Put(v); }
void GgufWriter::AddFloat64(const std::string& k, double v) { Key(k, GgufValueType::kFloat64); Put(v); }
void GgufWriter::AddBool(const std::string& k, bool v) { Key(k, GgufValueType::kBool); Put(static_cast<uint8_t>(v)); }
void GgufWriter::AddString(const std::string& k, const std::string& v) { Key(k, GgufValueType::kString); PutString(v); }

void GgufWriter::AddStringArray(const std::string& k, const std::vector<std::string>& v) {
  Key(k, GgufValueType::kArray);
  Put(static_cast<uint32_t>(GgufValueType::kString));
  Put(static_cast<uint64_t>(v.size()));
  for (const auto& s : v) PutString(s);
}

void GgufWriter::AddInt32Array(const std::string& k, const std::vector<int32_t>& v) {
  Key(k, GgufValueType::kArray);
  Put(static_cast<uint32_t>(GgufValueType::kInt32));
  Put(static_cast<uint64_t>(v.size()));
  for (int32_t x : v) Put(x);
}

void GgufWriter::AddFloat32Array(const std::string& k, const std::vector<float>& v) {
  Key(k, GgufValueType::kArray);
  Put(static_cast<uint32_t>(GgufValueType::kFloat32));
  Put(static_cast<uint64_t>(v.size()));
  for (float x : v) Put(x);
}

void GgufWriter::AddNestedArray(const std::string& k, const std::vector<std::vector<uint8_t>>& v) {
  Key(k, GgufValueType::kArray);
  Put(static_cast<uint32_t>(GgufValueType::kArray));
  Put(static_cast<uint64_t>(v.size()));
  for (const auto& inner : v) {
    Put(static_cast<uint32_t>(GgufValueType::kUint8));
    Put(static_cast<uint64_t>(inner.size()));
    for (uint8_t x : inner) Put(x);
  }
}

void GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> dims, GgmlType type,
                           std::vector<uint8_t> bytes) {
  tensors_.push_back({name, std::move(dims), type, std::move(bytes)});
}

std::vector<uint8_t> GgufWriter::Bytes() const {
  std::vector<uint8_t> out;
  auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  uint32_t magic = 0x46554747;
  uint64_t n_tensors = tensors_.size();
  put(&magic, 4);
  put(&version_, 4);
  put(&n_tensors, 8);
  put(&num_kv_, 8);
  out.insert(out.end(), kv_.begin(), kv_.end());
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor& t : tensors_) {
    uint64_t len = t.name.size();
    put(&len, 8);
    put(t.name.data(), len);
    uint32_t nd = static_cast<uint32_t>(t.dims.size());
    put(&nd, 4);
    for (int64_t d : t.dims) { uint64_t u = static_cast<uint64_t>(d); put(&u, 8); }
    uint32_t type = static_cast<uint32_t>(t.type);
    put(&type, 4);
    put(&offset, 8);
    offsets.push_back(offset);
    offset += (t.bytes.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  size_t data_start = out.size();
  out.resize(data_start + offset, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    std::memcpy(out.data() + data_start + offsets[i], tensors_[i].bytes.data(), tensors_[i].bytes.size());
  }
  return out;
}

void GgufWriter::WriteFile(const std::string& path) const {
  std::vector<uint8_t> b = Bytes();
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

}  // namespace vqserve::testing
