#include "runtime/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vqserve {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr uint64_t kMaxArrayElements = 1ull << 28;
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;

// a bounds-checked little-endian cursor over the mapped file.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  bool Read(void* out, size_t n) {
    if (n > size_ - pos_) return false;
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
    return true;
  }
  template <typename T>
  bool Get(T* v) { return Read(v, sizeof(T)); }
  bool GetString(std::string* s) {
    uint64_t n;
    if (!Get(&n) || n > kMaxStringBytes || n > size_ - pos_) return false;
    s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// the fewest bytes one value of `type` takes in the file (arrays: element type and count).
uint64_t MinValueBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16: case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32: case GgufValueType::kInt32: case GgufValueType::kFloat32: return 4;
    case GgufValueType::kArray: return 12;
    default: return 8;  // 64-bit numbers; strings (their length)
  }
}

bool ReadValue(Reader& r, GgufValueType type, int depth, GgufValue* out, std::string* err) {
  out->type = type;
  switch (type) {
    case GgufValueType::kUint8: { uint8_t v; if (!r.Get(&v)) break; out->data = uint64_t{v}; return true; }
    case GgufValueType::kInt8: { int8_t v; if (!r.Get(&v)) break; out->data = int64_t{v}; return true; }
    case GgufValueType::kUint16: { uint16_t v; if (!r.Get(&v)) break; out->data = uint64_t{v}; return true; }
    case GgufValueType::kInt16: { int16_t v; if (!r.Get(&v)) break; out->data = int64_t{v}; return true; }
    case GgufValueType::kUint32: { uint32_t v; if (!r.Get(&v)) break; out->data = uint64_t{v}; return true; }
    case GgufValueType::kInt32: { int32_t v; if (!r.Get(&v)) break; out->data = int64_t{v}; return true; }
    case GgufValueType::kUint64: { uint64_t v; if (!r.Get(&v)) break; out->data = v; return true; }
    case GgufValueType::kInt64: { int64_t v; if (!r.Get(&v)) break; out->data = v; return true; }
    case GgufValueType::kFloat32: { float v; if (!r.Get(&v)) break; out->data = double{v}; return true; }
    case GgufValueType::kFloat64: { double v; if (!r.Get(&v)) break; out->data = v; return true; }
    case GgufValueType::kBool: {
      uint8_t v;
      if (!r.Get(&v)) break;
      if (v > 1) { *err = "bool value not 0 or 1"; return false; }
      out->data = v == 1;
      return true;
    }
    case GgufValueType::kString: {
      std::string s;
      if (!r.GetString(&s)) break;
      out->data = std::move(s);
      return true;
    }
    case GgufValueType::kArray: {
      if (depth >= kMaxArrayDepth) { *err = "arrays nested too deep"; return false; }
      uint32_t elem;
      uint64_t n;
      if (!r.Get(&elem) || !r.Get(&n)) break;
      if (elem > static_cast<uint32_t>(GgufValueType::kFloat64)) {
        *err = absl::StrCat("unknown array element type ", elem);
        return false;
      }
      if (n > kMaxArrayElements) { *err = "array too long"; return false; }
      out->array_type = static_cast<GgufValueType>(elem);
      // the count must fit the bytes left, before anything is allocated for it.
      if (n > r.remaining() / MinValueBytes(out->array_type)) {
        *err = absl::StrCat("array of ", n, " elements is longer than the file (truncated?)");
        return false;
      }
      std::vector<GgufValue> items(n);
      for (uint64_t i = 0; i < n; ++i) {
        if (!ReadValue(r, out->array_type, depth + 1, &items[i], err)) return false;
      }
      out->data = std::move(items);
      return true;
    }
    default:
      *err = absl::StrCat("unknown metadata value type ", static_cast<uint32_t>(type));
      return false;
  }
  *err = "truncated metadata";
  return false;
}

// `s` with control characters escaped (\n, \xHH): names read from the file stay on one line.
std::string OneLine(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (u < 0x20 || u == 0x7f) out += absl::StrFormat("\\x%02x", u);
    else out += c;
  }
  return out;
}

}  // namespace

bool GgufValue::is_number() const {
  return type != GgufValueType::kString && type != GgufValueType::kArray;
}

int64_t GgufValue::AsInt() const {
  if (auto* u = std::get_if<uint64_t>(&data)) return static_cast<int64_t>(*u);
  if (auto* i = std::get_if<int64_t>(&data)) return *i;
  if (auto* d = std::get_if<double>(&data)) {
    // saturate: a float outside int64's range (or nan) must not reach the conversion.
    if (std::isnan(*d)) return 0;
    if (*d >= 0x1p63) return std::numeric_limits<int64_t>::max();
    if (*d < -0x1p63) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(*d);
  }
  if (auto* b = std::get_if<bool>(&data)) return *b ? 1 : 0;
  return 0;
}

double GgufValue::AsDouble() const {
  if (auto* d = std::get_if<double>(&data)) return *d;
  return static_cast<double>(AsInt());
}

int64_t GgufTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", OneLine(what)));
  };
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < 24) {
    ::close(fd);
    return fail(absl::StrCat("file too small for a gguf header (", size, " bytes)"));
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return fail(absl::StrCat("mmap failed: ", std::strerror(errno)));

  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = size;
  const uint8_t* base = static_cast<const uint8_t*>(map);
  Reader r(base, size);

  uint32_t magic;
  r.Get(&magic);
  if (magic != kMagic) return fail("bad magic (not a gguf file)");
  r.Get(&file->version_);
  if (file->version_ != 2 && file->version_ != 3) {
    return fail(absl::StrCat("unsupported gguf version ", file->version_, " (need 2 or 3)"));
  }
  uint64_t n_tensors, n_kv;
  if (!r.Get(&n_tensors) || !r.Get(&n_kv)) return fail("truncated header");
  if (n_tensors > (size / 24) || n_kv > (size / 12)) {
    return fail(absl::StrCat(n_tensors, " tensors and ", n_kv,
                             " metadata keys cannot fit in the file's ", size, " bytes (truncated?)"));
  }

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    uint32_t type;
    if (!r.GetString(&key) || !r.Get(&type)) return fail(absl::StrCat("truncated metadata key ", i));
    GgufValue value;
    std::string err;
    if (!ReadValue(r, static_cast<GgufValueType>(type), 0, &value, &err)) {
      return fail(absl::StrCat("metadata '", key, "': ", err));
    }
    if (!file->metadata_.emplace(key, std::move(value)).second) {
      return fail(absl::StrCat("duplicate metadata key '", key, "'"));
    }
  }
  if (const GgufValue* a = file->Find("general.alignment")) {
    int64_t al = a->is_number() ? a->AsInt() : 0;
    if (al <= 0 || (al & (al - 1)) != 0) return fail("general.alignment is not a power of two");
    file->alignment_ = static_cast<uint64_t>(al);
  }

  file->tensors_.resize(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor& t = file->tensors_[i];
    uint32_t n_dims, type;
    if (!r.GetString(&t.name) || !r.Get(&n_dims)) return fail(absl::StrCat("truncated tensor info ", i));
    if (n_dims == 0 || n_dims > kMaxDims) return fail(absl::StrCat("tensor '", t.name, "': bad dimension count ", n_dims));
    t.dims.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t v;
      if (!r.Get(&v)) return fail(absl::StrCat("truncated tensor info '", t.name, "'"));
      if (v == 0 || v > (1ull << 40)) return fail(absl::StrCat("tensor '", t.name, "': bad dimension ", v));
      t.dims[d] = static_cast<int64_t>(v);
    }
    if (!r.Get(&type) || !r.Get(&t.offset)) return fail(absl::StrCat("truncated tensor info '", t.name, "'"));
    GgmlTypeTraits tr = GetTypeTraits(type);
    if (tr.block_size == 0) return fail(absl::StrCat("tensor '", t.name, "': unsupported type ", type));
    t.type = static_cast<GgmlType>(type);
    int64_t n = 1;
    for (int64_t d : t.dims) {
      if (n > std::numeric_limits<int64_t>::max() / d) return fail(absl::StrCat("tensor '", t.name, "': too many elements"));
      n *= d;
    }
    if (t.dims[0] % tr.block_size != 0) {
      return fail(absl::StrCat("tensor '", t.name, "': row of ", t.dims[0], " not a multiple of the ", tr.name, " block"));
    }
    t.nbytes = TensorBytes(t.type, n);
    if (!file->tensor_index_.emplace(t.name, i).second) return fail(absl::StrCat("duplicate tensor '", t.name, "'"));
  }
  uint64_t data_start = (r.pos() + file->alignment_ - 1) / file->alignment_ * file->alignment_;
  if (data_start > size) return fail("data section starts past the end of the file");
  for (GgufTensor& t : file->tensors_) {
    if (t.offset % file->alignment_ != 0) return fail(absl::StrCat("tensor '", t.name, "': misaligned offset"));
    if (t.offset > size - data_start || t.nbytes > size - data_start - t.offset) {
      return fail(absl::StrCat("tensor '", t.name, "': data past the end of the file (truncated?)"));
    }
    t.data = base + data_start + t.offset;
  }
  return file;
}

GgufFile::~GgufFile() {
  if (map_ != nullptr) munmap(map_, map_size_);
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

int64_t GgufFile::GetInt(const std::string& key, int64_t def) const {
  const GgufValue* v = Find(key);
  return v != nullptr && v->is_number() ? v->AsInt() : def;
}

double GgufFile::GetFloat(const std::string& key, double def) const {
  const GgufValue* v = Find(key);
  return v != nullptr && v->is_number() ? v->AsDouble() : def;
}

std::string GgufFile::GetString(const std::string& key, const std::string& def) const {
  const GgufValue* v = Find(key);
  return v != nullptr && v->type == GgufValueType::kString ? v->AsString() : def;
}

const GgufTensor* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<std::vector<float>> GgufFile::ReadTensorF32(const std::string& name) const {
  const GgufTensor* t = FindTensor(name);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat(path_, ": missing tensor '", name, "'"));
  GgmlTypeTraits tr = GetTypeTraits(static_cast<uint32_t>(t->type));
  if (!tr.can_dequantize) {
    return absl::UnimplementedError(absl::StrCat(path_, ": tensor '", name, "' has type ", tr.name, ", which vqserve cannot dequantize"));
  }
  std::vector<float> out(t->num_elements());
  Dequantize(t->type, t->data, out.data(), t->num_elements());
  return out;
}

}  // namespace vqserve
