#ifndef VQSERVE_SCHEDULER_PAGE_ALLOCATOR_H_
#define VQSERVE_SCHEDULER_PAGE_ALLOCATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/kv_arena.h"
#include "scheduler/prefix_cache.h"
#include "scheduler/scheduler.h"
#include "scheduler/sequence.h"

namespace vqserve {

// pages a sequence of `num_tokens` tokens holds under the residual-window policy: the newest
// residual_tokens stay in the sequence's fp16 ring, and whole pages are flushed to codes once
// residual + page tokens are buffered (the scheduler's copy of runtime/kv/kv_cache.h's rule).
int PagesForTokens(const PagePoolConfig& pool, int num_tokens);
// largest token count whose pages fit in `num_pages` pages.
int MaxTokensForPages(const PagePoolConfig& pool, int num_pages);

// the longest cached prefix of a sequence's tokens (PageAllocator::FindPrefix).
struct PrefixHit {
  int tokens = 0;                // tokens the sequence starts from (a multiple of the page)
  std::vector<int32_t> pages;    // its first blocks: PagesForTokens(tokens) cached pages
  int snapshot = -1;             // slot holding the residual ring at `tokens` (codecs with one)
  uint64_t snapshot_hash = 0;
};

// what one Apply hands a sequence: pages appended to its block table and maybe a slot.
struct PagePlan {
  int new_pages = 0;
  bool new_slot = false;
};

// the pages and residual slots of one pool. Plan is const and says whether (and what) a
// sequence needs to cache `new_tokens` more tokens; Apply commits a fresh plan; Free returns
// everything the sequence holds. page and slot ids are 0-based and unique within the pool.
// pages and slots come from arenas (kv_arena.h): the pool's own ones (one unit per chunk,
// config.num_pages and num_slots) or arenas shared with other pools, in which a page of this
// pool lives at byte id * page_bytes and a slot at id * slot_bytes.
class PageAllocator {
 public:
  // a pool with its own arenas of config.num_pages pages and config.num_slots slots.
  explicit PageAllocator(const PagePoolConfig& config);
  // a pool over shared arenas (may be one and the same): `user` tags its chunks (pages as
  // 2 * user, slots as 2 * user + 1), config.page_bytes and slot_bytes size its units.
  PageAllocator(const PagePoolConfig& config, KvArena* page_arena, KvArena* slot_arena, int user);
  PageAllocator(PageAllocator&&) = default;

  // what `seq` needs to hold num_computed + new_tokens tokens; nullopt when the pool lacks it.
  std::optional<PagePlan> Plan(const Sequence& seq, int new_tokens) const;
  // commits a plan made by Plan for this sequence with no allocation in between.
  void Apply(Sequence* seq, const PagePlan& plan);
  // returns the sequence's pages and slot to the pool; its block table is cleared, slot = -1.
  // pages in the prefix cache stay there (unreferenced, last block first: evicted first).
  void Free(Sequence* seq);

  // prefix caching (prefix_cache.h), off until enabled. `checkpoint_tokens` (a multiple of the
  // page) is where codecs with a residual ring snapshot it; `clock` orders evictions.
  void EnablePrefixCache(int checkpoint_tokens, uint64_t* clock);
  bool prefix_cache_enabled() const { return prefix_ != nullptr; }
  const PrefixCache* prefix_cache() const { return prefix_.get(); }
  // the next position after `pos` where a prefill chunk should end for a snapshot (INT32_MAX
  // when none: no cache, or no residual ring).
  int NextCheckpoint(int pos) const;
  // the longest cached prefix of seq's tokens that leaves at least one token to compute:
  // pages of every block it covers and, with a residual ring, a snapshot at its end (so the
  // sequence's state is exactly the one computing those tokens would give). fills
  // seq->block_hashes as needed.
  PrefixHit FindPrefix(Sequence* seq) const;
  // tokens of seq's prompt that `other` computing its own would put in the cache as a hit for
  // seq: their common full blocks (hash and tokens equal; other's hashed at its admission),
  // down to a checkpoint with a ring, leaving seq a token to compute; 0 when none.
  int SharedPrefixTokens(Sequence* seq, const Sequence& other) const;
  // pins a hit (its pages referenced, its snapshot not evictable) / undoes that.
  void HoldPrefix(const PrefixHit& hit);
  void DropPrefix(const PrefixHit& hit);
  // the snapshot of a restored hit becomes evictable again (after the step copied it).
  void UnpinSnapshot(uint64_t h) { prefix_->UnpinSnapshot(h); }
  // a waiting sequence starts from a held hit: its block table and num_computed.
  void ApplyPrefix(Sequence* seq, const PrefixHit& hit);
  // after a step: offers seq's newly flushed full pages to the cache and, at a checkpoint,
  // takes a slot for a snapshot of its ring (returned; the caller copies seq->slot into it),
  // else returns -1.
  int RegisterPrefix(Sequence* seq);
  // evicts the least recently used unreferenced entry (its unit goes back to the pool).
  bool EvictOne();
  uint64_t oldest_evictable() const {
    return prefix_ ? prefix_->oldest_tick() : UINT64_MAX;
  }
  bool IsCachedPage(int page) const { return prefix_ && prefix_->IsCachedPage(page); }

  // pages `seq` still lacks to hold `num_tokens` tokens (0 when it has them).
  int PagesMissing(const Sequence& seq, int num_tokens) const;
  // largest n <= want such that Plan(seq, n) succeeds for pages (slot aside); 0 when none.
  int FittableTokens(const Sequence& seq, int want) const;
  // chunks the arenas must still lend for `pages` more pages and `slots` more slots.
  int PageChunksFor(int pages) const { return pages_.ChunksFor(pages); }
  int SlotChunksFor(int slots) const { return slots_.ChunksFor(slots); }
  // pages one sequence can hold beside its slot when it has the memory to itself.
  int MaxPagesWithSlot() const;
  KvArena* page_arena() const { return page_arena_; }
  KvArena* slot_arena() const { return slot_arena_; }

  const PagePoolConfig& config() const { return config_; }
  // pages it could hold with every free chunk of its arena; total: with the whole arena.
  int pages_total() const { return pages_.capacity(); }
  int pages_free() const { return pages_.available(); }
  int pages_used() const { return pages_.held(); }
  int slots_total() const { return slots_.capacity(); }
  int slots_free() const { return slots_.available(); }
  int slots_used() const { return slots_.held(); }
  // bytes of the arena lent to this pool (whole chunks) and held by sequences (units).
  size_t bytes_lent() const;
  size_t bytes_held() const;

  // held + free units agree with the owners, chunks with the arena.
  absl::Status CheckInvariants() const;
  // sequence id that holds `page` (-1 when free).
  int64_t page_owner(int page) const { return pages_.owner(page); }
  // sequence id that holds `slot` (-1 when free).
  int64_t slot_owner(int slot) const { return slots_.owner(slot); }

 private:
  PagePoolConfig config_;
  std::unique_ptr<KvArena> own_pages_, own_slots_;  // private arenas, when not shared
  KvArena* page_arena_;
  KvArena* slot_arena_;
  UnitPool pages_;
  UnitPool slots_;
  std::unique_ptr<PrefixCache> prefix_;
  int checkpoint_tokens_ = 0;
};

}  // namespace vqserve

#endif  // VQSERVE_SCHEDULER_PAGE_ALLOCATOR_H_
