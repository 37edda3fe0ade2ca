#include "scheduler/kv_arena.h"

#include <algorithm>

#include "scheduler/check.h"

namespace vqserve {

KvArena::KvArena(int num_chunks, size_t chunk_bytes)
    : chunk_bytes_(chunk_bytes), owner_(std::max(num_chunks, 0), -1) {
  VQ_SCHED_CHECK(chunk_bytes >= 1);
  for (int i = num_chunks - 1; i >= 0; --i) free_.push_back(i);
}

int KvArena::Take(int user) {
  VQ_SCHED_CHECK(user >= 0);
  if (free_.empty()) return -1;
  const int c = free_.back();
  free_.pop_back();
  owner_[c] = user;
  return c;
}

void KvArena::Give(int chunk) {
  VQ_SCHED_CHECK(chunk >= 0 && chunk < num_chunks() && owner_[chunk] >= 0);
  owner_[chunk] = -1;
  // keep the stack sorted descending so the lowest chunk is reused first (less spread).
  free_.insert(std::upper_bound(free_.begin(), free_.end(), chunk, std::greater<int32_t>()),
               chunk);
}

UnitPool::UnitPool(KvArena* arena, int user, size_t unit_bytes)
    : arena_(arena), user_(user), unit_bytes_(unit_bytes) {
  VQ_SCHED_CHECK(arena != nullptr && unit_bytes >= 1);
  const int chunks = arena->num_chunks();
  min_per_chunk_ = chunks > 0 ? INT32_MAX : 0;
  for (int c = 0; c < chunks; ++c) {
    const int n = std::max(0, EndUnit(c) - FirstUnit(c));
    min_per_chunk_ = std::min(min_per_chunk_, n);
    capacity_ += n;
    id_bound_ = std::max(id_bound_, EndUnit(c));
  }
  free_by_chunk_.resize(chunks);
  held_by_chunk_.assign(chunks, 0);
  owner_.assign(id_bound_, -1);
}

int UnitPool::FirstUnit(int chunk) const {
  const size_t start = arena_->chunk_bytes() * chunk;
  return static_cast<int>((start + unit_bytes_ - 1) / unit_bytes_);
}

int UnitPool::EndUnit(int chunk) const {
  return static_cast<int>(arena_->chunk_bytes() * (chunk + 1) / unit_bytes_);
}

int UnitPool::ChunksFor(int n) const {
  const int missing = n - free_in_chunks_;
  if (missing <= 0) return 0;
  if (min_per_chunk_ <= 0) return INT32_MAX / 2;
  return (missing + min_per_chunk_ - 1) / min_per_chunk_;
}

int UnitPool::available() const {
  return free_in_chunks_ + arena_->chunks_free() * min_per_chunk_;
}

int UnitPool::chunks_held() const {
  int n = 0;
  for (int c = 0; c < arena_->num_chunks(); ++c) n += arena_->owner(c) == user_;
  return n;
}

int UnitPool::Take(int64_t owner) {
  // the fullest chunk with a free unit, so that lightly used chunks drain and go back.
  int best = -1;
  for (int c = 0; c < static_cast<int>(free_by_chunk_.size()); ++c) {
    if (free_by_chunk_[c].empty()) continue;
    if (best < 0 || held_by_chunk_[c] > held_by_chunk_[best]) best = c;
  }
  if (best < 0) {
    best = arena_->Take(user_);
    if (best < 0) return -1;
    for (int u = EndUnit(best) - 1; u >= FirstUnit(best); --u) free_by_chunk_[best].push_back(u);
    free_in_chunks_ += static_cast<int>(free_by_chunk_[best].size());
    if (free_by_chunk_[best].empty()) {  // a chunk too small for one unit
      arena_->Give(best);
      return -1;
    }
  }
  const int unit = free_by_chunk_[best].back();
  free_by_chunk_[best].pop_back();
  --free_in_chunks_;
  ++held_by_chunk_[best];
  ++held_;
  owner_[unit] = owner;
  return unit;
}

void UnitPool::Free(int unit) {
  VQ_SCHED_CHECK(unit >= 0 && unit < id_bound_ && owner_[unit] >= 0);
  owner_[unit] = -1;
  const int c = static_cast<int>(unit_bytes_ * unit / arena_->chunk_bytes());
  VQ_SCHED_CHECK(arena_->owner(c) == user_ && held_by_chunk_[c] > 0);
  free_by_chunk_[c].push_back(unit);
  ++free_in_chunks_;
  --held_by_chunk_[c];
  --held_;
  if (held_by_chunk_[c] == 0) {
    free_in_chunks_ -= static_cast<int>(free_by_chunk_[c].size());
    free_by_chunk_[c].clear();
    arena_->Give(c);
  }
}

void UnitPool::SetOwner(int unit, int64_t owner) {
  VQ_SCHED_CHECK(unit >= 0 && unit < id_bound_ && owner_[unit] >= 0 && owner >= 0);
  owner_[unit] = owner;
}

int64_t UnitPool::owner(int unit) const {
  return unit >= 0 && unit < id_bound_ ? owner_[unit] : -1;
}

}  // namespace vqserve
