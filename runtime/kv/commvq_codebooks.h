#ifndef VQSERVE_RUNTIME_KV_COMMVQ_CODEBOOKS_H_
#define VQSERVE_RUNTIME_KV_COMMVQ_CODEBOOKS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/kv/kv_cache.h"

namespace vqserve {

// fixed sizes of the commvq format (docs/kv_formats.md, "commvq-R").
inline constexpr int kCommVqKeyEntries = 64;       // 2x2 commutative entries per pair and round
inline constexpr int kCommVqKeyCodeBits = 12;      // a code selects (A, B): A + 64 * B
inline constexpr int kCommVqValueEntries = 256;    // k-means centroids per sub-vector and round
inline constexpr int kCommVqValueSubdim = 8;       // value sub-vector dims (1 bit/element/round)
inline constexpr int kCommVqMaxGroupPairs = 64;    // rope pairs sharing one key code, at most

// pairs per key code for head_dim `head_dim`: the largest divisor of head_dim/2 that is <= 64.
int CommVqGroupPairs(int head_dim);

// trained codebooks of every layer and kv head: rope-commutative key codebooks and residual
// k-means value codebooks, plus the rope base the keys are rotated with.
//
// key entry (layer l, head h, round r, entry e, pair j) is the 2x2 matrix [[x, y], [-y, x]];
// key_book(l, h, r) is (64 entries, head_dim/2 pairs, 2 = x, y).
// value_book(l, h, r) is (head_dim/8 sub-vectors, 256 centroids, 8 dims).
class CommVqCodebooks {
 public:
  CommVqCodebooks() = default;
  // zero-filled books; fails on a shape commvq cannot code (head_dim not a multiple of 8).
  static absl::StatusOr<CommVqCodebooks> Create(const KvShape& shape, float rope_theta,
                                                int key_rounds, int value_rounds);

  const KvShape& shape() const { return shape_; }
  float rope_theta() const { return rope_theta_; }
  int key_rounds() const { return key_rounds_; }
  int value_rounds() const { return value_rounds_; }
  int group_pairs() const { return group_pairs_; }
  int groups_per_head() const { return shape_.head_dim / 2 / group_pairs_; }
  int value_subvectors() const { return shape_.head_dim / kCommVqValueSubdim; }

  // floats of one key book (one layer, head, round) and of one value book.
  size_t key_book_floats() const { return size_t{kCommVqKeyEntries} * shape_.head_dim; }
  size_t value_book_floats() const {
    return size_t{kCommVqValueEntries} * shape_.head_dim;
  }
  const float* key_book(int layer, int head, int round) const;
  float* mutable_key_book(int layer, int head, int round);
  const float* value_book(int layer, int head, int round) const;
  float* mutable_value_book(int layer, int head, int round);

  // versioned, checksummed little-endian blob (layout in docs/kv_formats.md).
  std::string Serialize() const;
  // refuses a blob with a bad magic, version, size, shape or checksum.
  static absl::StatusOr<CommVqCodebooks> Deserialize(std::string_view blob);

 private:
  size_t KeyIndex(int layer, int head, int round) const;
  size_t ValueIndex(int layer, int head, int round) const;

  KvShape shape_;
  float rope_theta_ = 10000.0f;
  int key_rounds_ = 0;
  int value_rounds_ = 0;
  int group_pairs_ = 0;
  std::vector<float> key_books_;    // (layers, kv heads, key rounds, 64, head_dim/2, 2)
  std::vector<float> value_books_;  // (layers, kv heads, value rounds, head_dim/8, 256, 8)
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_COMMVQ_CODEBOOKS_H_
