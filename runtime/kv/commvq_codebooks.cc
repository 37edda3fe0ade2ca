#include "runtime/kv/commvq_codebooks.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"

namespace vqserve {
namespace {

constexpr char kMagic[4] = {'C', 'V', 'Q', 'B'};
constexpr uint32_t kVersion = 1;
constexpr int kHeaderWords = 12;  // u32 words after the magic, rope_theta included

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }

uint32_t GetU32(std::string_view blob, size_t offset) {
  uint32_t v;
  std::memcpy(&v, blob.data() + offset, 4);
  return v;
}

}  // namespace

int CommVqGroupPairs(int head_dim) {
  int pairs = head_dim / 2;
  for (int g = std::min(pairs, kCommVqMaxGroupPairs); g >= 1; --g) {
    if (pairs % g == 0) return g;
  }
  return 0;
}

absl::StatusOr<CommVqCodebooks> CommVqCodebooks::Create(const KvShape& shape, float rope_theta,
                                                        int key_rounds, int value_rounds) {
  if (shape.num_layers <= 0 || shape.num_kv_heads <= 0 || shape.head_dim <= 0 ||
      shape.num_heads <= 0 || shape.num_heads % shape.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "commvq: bad kv shape (layers %d, kv heads %d, heads %d, head_dim %d)", shape.num_layers,
        shape.num_kv_heads, shape.num_heads, shape.head_dim));
  }
  if (shape.head_dim % kCommVqValueSubdim != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "commvq: head_dim %d is not a multiple of %d", shape.head_dim, kCommVqValueSubdim));
  }
  if (key_rounds < 1 || key_rounds > 64 || value_rounds < 1 || value_rounds > 16) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "commvq: rounds out of range (key %d in 1..64, value %d in 1..16)", key_rounds,
        value_rounds));
  }
  if (!(rope_theta > 0.0f) || !std::isfinite(rope_theta)) {
    return absl::InvalidArgumentError(absl::StrFormat("commvq: bad rope theta %g", rope_theta));
  }
  CommVqCodebooks b;
  b.shape_ = shape;
  b.rope_theta_ = rope_theta;
  b.key_rounds_ = key_rounds;
  b.value_rounds_ = value_rounds;
  b.group_pairs_ = CommVqGroupPairs(shape.head_dim);
  size_t heads = size_t{1} * shape.num_layers * shape.num_kv_heads;
  b.key_books_.assign(heads * key_rounds * b.key_book_floats(), 0.0f);
  b.value_books_.assign(heads * value_rounds * b.value_book_floats(), 0.0f);
  return b;
}

size_t CommVqCodebooks::KeyIndex(int layer, int head, int round) const {
  return ((size_t{1} * layer * shape_.num_kv_heads + head) * key_rounds_ + round) *
         key_book_floats();
}

size_t CommVqCodebooks::ValueIndex(int layer, int head, int round) const {
  return ((size_t{1} * layer * shape_.num_kv_heads + head) * value_rounds_ + round) *
         value_book_floats();
}

const float* CommVqCodebooks::key_book(int layer, int head, int round) const {
  return key_books_.data() + KeyIndex(layer, head, round);
}
float* CommVqCodebooks::mutable_key_book(int layer, int head, int round) {
  return key_books_.data() + KeyIndex(layer, head, round);
}
const float* CommVqCodebooks::value_book(int layer, int head, int round) const {
  return value_books_.data() + ValueIndex(layer, head, round);
}
float* CommVqCodebooks::mutable_value_book(int layer, int head, int round) {
  return value_books_.data() + ValueIndex(layer, head, round);
}

std::string CommVqCodebooks::Serialize() const {
  std::string out(kMagic, 4);
  PutU32(&out, kVersion);
  PutU32(&out, shape_.num_layers);
  PutU32(&out, shape_.num_kv_heads);
  PutU32(&out, shape_.num_heads);
  PutU32(&out, shape_.head_dim);
  PutU32(&out, group_pairs_);
  PutU32(&out, key_rounds_);
  PutU32(&out, value_rounds_);
  PutU32(&out, kCommVqKeyEntries);
  PutU32(&out, kCommVqValueEntries);
  PutU32(&out, kCommVqValueSubdim);
  uint32_t theta_bits;
  std::memcpy(&theta_bits, &rope_theta_, 4);
  PutU32(&out, theta_bits);
  out.append(reinterpret_cast<const char*>(key_books_.data()), key_books_.size() * 4);
  out.append(reinterpret_cast<const char*>(value_books_.data()), value_books_.size() * 4);
  uint64_t sum = Fnv1a64(out);
  out.append(reinterpret_cast<const char*>(&sum), 8);
  return out;
}

absl::StatusOr<CommVqCodebooks> CommVqCodebooks::Deserialize(std::string_view blob) {
  const size_t header = 4 + 4 * kHeaderWords;
  if (blob.size() < header + 8 || std::memcmp(blob.data(), kMagic, 4) != 0) {
    return absl::DataLossError("commvq codebooks: not a commvq codebook blob (bad magic or size)");
  }
  uint32_t version = GetU32(blob, 4);
  if (version != kVersion) {
    return absl::DataLossError(
        absl::StrFormat("commvq codebooks: version %u, expected %u", version, kVersion));
  }
  uint64_t stored;
  std::memcpy(&stored, blob.data() + blob.size() - 8, 8);
  if (stored != Fnv1a64(blob.substr(0, blob.size() - 8))) {
    return absl::DataLossError("commvq codebooks: checksum mismatch (corrupt blob)");
  }
  KvShape shape;
  shape.num_layers = static_cast<int>(GetU32(blob, 8));
  shape.num_kv_heads = static_cast<int>(GetU32(blob, 12));
  shape.num_heads = static_cast<int>(GetU32(blob, 16));
  shape.head_dim = static_cast<int>(GetU32(blob, 20));
  uint32_t group_pairs = GetU32(blob, 24);
  int key_rounds = static_cast<int>(GetU32(blob, 28));
  int value_rounds = static_cast<int>(GetU32(blob, 32));
  if (GetU32(blob, 36) != kCommVqKeyEntries || GetU32(blob, 40) != kCommVqValueEntries ||
      GetU32(blob, 44) != kCommVqValueSubdim) {
    return absl::DataLossError("commvq codebooks: unsupported entry counts");
  }
  float theta;
  uint32_t theta_bits = GetU32(blob, 48);
  std::memcpy(&theta, &theta_bits, 4);
  if (shape.num_layers > 4096 || shape.num_kv_heads > 4096 || shape.head_dim > 4096 ||
      shape.num_heads > 65536) {
    return absl::DataLossError("commvq codebooks: implausible shape");
  }
  absl::StatusOr<CommVqCodebooks> books =
      Create(shape, theta, key_rounds, value_rounds);
  if (!books.ok()) {
    return absl::DataLossError("commvq codebooks: " + std::string(books.status().message()));
  }
  if (static_cast<int>(group_pairs) != books->group_pairs_) {
    return absl::DataLossError("commvq codebooks: group size does not match head_dim");
  }
  size_t key_bytes = books->key_books_.size() * 4;
  size_t value_bytes = books->value_books_.size() * 4;
  if (blob.size() != header + key_bytes + value_bytes + 8) {
    return absl::DataLossError(absl::StrFormat(
        "commvq codebooks: %u bytes, expected %u for the stored shape", blob.size(),
        header + key_bytes + value_bytes + 8));
  }
  std::memcpy(books->key_books_.data(), blob.data() + header, key_bytes);
  std::memcpy(books->value_books_.data(), blob.data() + header + key_bytes, value_bytes);
  for (float f : books->key_books_) {
    if (!std::isfinite(f)) return absl::DataLossError("commvq codebooks: non-finite key entry");
  }
  for (float f : books->value_books_) {
    if (!std::isfinite(f)) return absl::DataLossError("commvq codebooks: non-finite value entry");
  }
  return books;
}

}  // namespace vqserve
