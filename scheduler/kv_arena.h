#ifndef VQSERVE_SCHEDULER_KV_ARENA_H_
#define VQSERVE_SCHEDULER_KV_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vqserve {

// the kv memory of the pools that share it, as the scheduler sees it: `num_chunks` chunks of
// `chunk_bytes` bytes, each free or lent to one user (a pool's pages or its residual rings).
// chunks are the unit by which memory moves between codecs: a user takes one when it has no
// free unit left and gives it back as soon as none of its units in it is held.
class KvArena {
 public:
  KvArena(int num_chunks, size_t chunk_bytes);

  // a free chunk lent to `user` (>= 0), or -1 when none is free.
  int Take(int user);
  // returns a chunk lent earlier.
  void Give(int chunk);

  int num_chunks() const { return static_cast<int>(owner_.size()); }
  size_t chunk_bytes() const { return chunk_bytes_; }
  size_t total_bytes() const { return chunk_bytes_ * owner_.size(); }
  int chunks_free() const { return static_cast<int>(free_.size()); }
  int owner(int chunk) const { return owner_[chunk]; }

 private:
  size_t chunk_bytes_;
  std::vector<int> owner_;    // per chunk: user or -1
  std::vector<int32_t> free_;  // stack; the lowest chunk is handed out first
};

// the units (pages or residual rings) of one pool over an arena. unit i lives at byte
// i * unit_bytes of the arena (the runtime cache addresses it there) and is usable while it lies
// wholly inside a chunk lent to this pool, so units of different pools never overlap.
class UnitPool {
 public:
  // `user`: this pool's tag in the arena.
  UnitPool(KvArena* arena, int user, size_t unit_bytes);

  // a unit for `owner` (a sequence id), taking a chunk when needed; -1 when the arena is full.
  int Take(int64_t owner);
  // returns a held unit; its chunk goes back to the arena when it holds no other unit.
  void Free(int unit);
  // hands a held unit to another owner.
  void SetOwner(int unit, int64_t owner);

  // units every chunk holds at least (the planning unit of a fresh chunk).
  int units_per_chunk() const { return min_per_chunk_; }
  // free units in chunks already lent to this pool.
  int free_in_chunks() const { return free_in_chunks_; }
  // chunks this pool needs from the arena to hand out `n` more units.
  int ChunksFor(int n) const;
  // units it can hand out now: free ones in its chunks plus those of every free chunk.
  int available() const;
  // units it could hold with the whole arena.
  int capacity() const { return capacity_; }
  int held() const { return held_; }
  // highest unit id + 1 (the runtime cache's unit count).
  int id_bound() const { return id_bound_; }
  int64_t owner(int unit) const;
  size_t unit_bytes() const { return unit_bytes_; }
  int chunks_held() const;

 private:
  int FirstUnit(int chunk) const;
  int EndUnit(int chunk) const;

  KvArena* arena_;
  int user_;
  size_t unit_bytes_;
  int min_per_chunk_ = 0;
  int capacity_ = 0;
  int id_bound_ = 0;
  int held_ = 0;
  int free_in_chunks_ = 0;
  std::vector<std::vector<int32_t>> free_by_chunk_;  // per chunk lent to us: free units (stack)
  std::vector<int> held_by_chunk_;
  std::vector<int64_t> owner_;  // per unit id: owning sequence or -1
};

}  // namespace vqserve

#endif  // VQSERVE_SCHEDULER_KV_ARENA_H_
