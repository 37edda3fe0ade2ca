#include "runtime/kv/codebook_file.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vqserve {

namespace {

constexpr char kMagic[4] = {'V', 'Q', 'C', 'B'};
constexpr uint64_t kP1 = 0x9e3779b185ebca87ULL;
constexpr uint64_t kP2 = 0xc2b2ae3d27d4eb4fULL;
constexpr uint64_t kP3 = 0x165667b19e3779f9ULL;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
void PutStr(std::string* out, std::string_view s) {
  PutU64(out, s.size());
  out->append(s);
}

// bounds-checked little-endian reader.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool U32(uint32_t* v) { return Raw(v, 4); }
  bool U64(uint64_t* v) { return Raw(v, 8); }
  bool Str(std::string* s) {
    uint64_t n;
    if (!U64(&n) || n > b_.size() - pos_) return false;
    s->assign(b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  bool Raw(void* v, size_t n) {
    if (b_.size() - pos_ < n) return false;
    std::memcpy(v, b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  std::string_view b_;
  size_t pos_ = 0;
};

void HashValue(const GgufValue& v, std::string* out) {
  PutU32(out, static_cast<uint32_t>(v.type));
  switch (v.type) {
    case GgufValueType::kString:
      PutStr(out, v.AsString());
      break;
    case GgufValueType::kArray:
      PutU64(out, v.AsArray().size());
      for (const GgufValue& e : v.AsArray()) HashValue(e, out);
      break;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: {
      double d = v.AsDouble();
      out->append(reinterpret_cast<const char*>(&d), 8);
      break;
    }
    default:
      PutU64(out, static_cast<uint64_t>(v.AsInt()));
  }
}

}  // namespace

uint64_t Hash64(std::string_view bytes, uint64_t seed) {
  uint64_t h = seed ^ (bytes.size() * kP1);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h ^= Rotl(w * kP2, 31) * kP1;
    h = Rotl(h, 27) * kP1 + kP3;
  }
  uint64_t tail = 0;
  for (size_t j = 0; i + j < bytes.size(); ++j) {
    tail |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i + j])) << (8 * j);
  }
  h ^= Rotl(tail * kP2, 31) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

absl::StatusOr<ModelIdentity> ModelIdentity::FromGguf(const GgufFile& file) {
  ModelIdentity id;
  std::string arch = file.GetString("general.architecture", "");
  id.name = file.GetString("general.name", arch);
  auto num = [&](const std::string& key) -> int64_t {
    const GgufValue* v = file.Find(absl::StrCat(arch, ".", key));
    return v && v->is_number() ? v->AsInt() : 0;
  };
  id.num_layers = static_cast<int>(num("block_count"));
  id.num_heads = static_cast<int>(num("attention.head_count"));
  id.num_kv_heads = static_cast<int>(num("attention.head_count_kv"));
  if (id.num_kv_heads == 0) id.num_kv_heads = id.num_heads;
  int64_t embd = num("embedding_length");
  id.head_dim = static_cast<int>(num("attention.key_length"));
  if (id.head_dim == 0 && id.num_heads > 0) id.head_dim = static_cast<int>(embd / id.num_heads);
  if (id.num_layers <= 0 || id.num_heads <= 0 || id.head_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path(), ": missing layer/head counts for the model identity"));
  }
  std::string all;
  for (const auto& [key, value] : file.metadata()) {
    PutStr(&all, key);
    HashValue(value, &all);
  }
  id.metadata_hash = Hash64(all);
  return id;
}

std::string CodebookFile::Serialize() const {
  std::string out(kMagic, 4);
  PutU32(&out, kVersion);
  PutStr(&out, model.name);
  PutU32(&out, model.num_layers);
  PutU32(&out, model.num_kv_heads);
  PutU32(&out, model.num_heads);
  PutU32(&out, model.head_dim);
  PutU64(&out, model.metadata_hash);
  PutStr(&out, codec);
  PutU32(&out, params.size());
  for (const auto& [k, v] : params) {
    PutStr(&out, k);
    PutStr(&out, v);
  }
  PutU32(&out, blobs.size());
  for (const auto& [k, v] : blobs) {
    PutStr(&out, k);
    PutStr(&out, v);
  }
  PutU64(&out, Hash64(out));
  return out;
}

absl::StatusOr<CodebookFile> CodebookFile::Parse(std::string_view bytes, const std::string& path) {
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(path, ": ", why));
  };
  if (bytes.size() < 4 || std::memcmp(bytes.data(), kMagic, 4) != 0) {
    return bad("not a vqserve codebook artifact (bad magic)");
  }
  if (bytes.size() < 4 + 4 + 8) return bad(absl::StrCat("truncated (", bytes.size(), " bytes)"));
  uint32_t version;
  std::memcpy(&version, bytes.data() + 4, 4);
  if (version != kVersion) {
    return bad(absl::StrFormat("unsupported artifact version %d (this build reads %d)", version, kVersion));
  }
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  std::string_view body = bytes.substr(0, bytes.size() - 8);
  if (Hash64(body) != stored) return bad("checksum mismatch (file corrupt or truncated)");
  Reader r(body.substr(8));
  CodebookFile f;
  uint32_t layers, kv, heads, dim, n;
  if (!r.Str(&f.model.name) || !r.U32(&layers) || !r.U32(&kv) || !r.U32(&heads) || !r.U32(&dim) ||
      !r.U64(&f.model.metadata_hash) || !r.Str(&f.codec) || !r.U32(&n)) {
    return bad("truncated header");
  }
  f.model.num_layers = layers;
  f.model.num_kv_heads = kv;
  f.model.num_heads = heads;
  f.model.head_dim = dim;
  // keys come in strictly increasing order (Serialize writes the maps in order): a repeated or
  // out-of-order key is refused rather than silently dropped or reordered.
  auto in_order = [&](const std::map<std::string, std::string>& m, const std::string& k,
                      const char* what) -> std::string {
    if (m.empty() || m.rbegin()->first < k) return "";
    return absl::StrCat(what, " keys ", m.count(k) ? "repeat" : "out of order at", " '",
                        absl::CHexEscape(k.substr(0, 64)), "'");
  };
  for (uint32_t i = 0; i < n; ++i) {
    std::string k, v;
    if (!r.Str(&k) || !r.Str(&v)) return bad("truncated parameters");
    if (std::string why = in_order(f.params, k, "parameter"); !why.empty()) return bad(why);
    f.params[k] = v;
  }
  if (!r.U32(&n)) return bad("truncated blob table");
  for (uint32_t i = 0; i < n; ++i) {
    std::string k, v;
    if (!r.Str(&k) || !r.Str(&v)) return bad("truncated blob");
    if (std::string why = in_order(f.blobs, k, "blob"); !why.empty()) return bad(why);
    f.blobs[k] = std::move(v);
  }
  if (r.pos() + 8 != body.size()) return bad("trailing bytes after the blobs");
  return f;
}

absl::Status CodebookFile::Save(const std::string& path) const {
  std::string bytes = Serialize();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  out.write(bytes.data(), bytes.size());
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::StatusOr<CodebookFile> CodebookFile::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open codebook artifact"));
  std::stringstream ss;
  ss << in.rdbuf();
  return Parse(ss.str(), path);
}

absl::Status CodebookFile::CheckModel(const ModelIdentity& e, const std::string& path) const {
  const ModelIdentity& m = model;
  if (m.num_layers != e.num_layers || m.num_kv_heads != e.num_kv_heads ||
      m.num_heads != e.num_heads || m.head_dim != e.head_dim) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: calibrated for %s (%d layers, %d kv heads, %d heads, head_dim %d), model is %s "
        "(%d layers, %d kv heads, %d heads, head_dim %d)",
        path, m.name, m.num_layers, m.num_kv_heads, m.num_heads, m.head_dim, e.name, e.num_layers,
        e.num_kv_heads, e.num_heads, e.head_dim));
  }
  if (m.metadata_hash != e.metadata_hash || m.name != e.name) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: calibrated for another model ('%s', metadata hash %016x; loaded '%s', %016x)", path,
        m.name, m.metadata_hash, e.name, e.metadata_hash));
  }
  return absl::OkStatus();
}

}  // namespace vqserve
