#ifndef VQSERVE_SCHEDULER_PREFIX_CACHE_H_
#define VQSERVE_SCHEDULER_PREFIX_CACHE_H_

#include <cstdint>
#include <list>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace vqserve {

// hash of a full page of tokens and everything before it: `parent` is the hash of the tokens
// before the page (0 for the first page).
uint64_t BlockHash(uint64_t parent, const int32_t* tokens, int page_tokens);

// the prefix index of one pool (one codec): full, flushed pages keyed by their BlockHash (the
// page's tokens are kept and compared too, so a hash collision never matches), and, for codecs
// with an fp16 residual ring, snapshots of a sequence's ring at a page boundary keyed by the
// hash of every token before it. pages are reference-counted by the sequences whose block
// tables hold them; unreferenced pages and every snapshot are evictable, least recently used
// first (a hit touches a chain's pages from its last to its first, so a prefix's first page is
// evicted after the pages that extend it). knows ids only; the allocator owns the memory.
class PrefixCache {
 public:
  // `clock` orders evictions across the caches that share it (one per scheduler).
  PrefixCache(int page_tokens, uint64_t* clock) : page_tokens_(page_tokens), clock_(clock) {}

  // the page cached for the block with hash `h`, parent `parent` and these tokens; -1 if none.
  int FindPage(uint64_t h, uint64_t parent, const int32_t* tokens) const;
  // the snapshot slot cached for the boundary after the tokens of hash `h`; -1 if none.
  int FindSnapshot(uint64_t h) const;
  // registers `page` (held by one sequence: refcount 1) for block `h`; false when the block is
  // cached already (the caller keeps its page private).
  bool AddPage(uint64_t h, uint64_t parent, const int32_t* tokens, int page);
  // registers a snapshot slot for boundary `h`; false when one is cached already.
  bool AddSnapshot(uint64_t h, int slot);
  bool IsCachedPage(int page) const { return by_page_.contains(page); }
  // one more sequence holds the cached page (leaves the eviction list).
  void Ref(int page);
  // one sequence let go of the cached page (the last one puts it on the eviction list).
  void Unref(int page);
  int refcount(int page) const;
  // a pinned snapshot is not evictable until unpinned (then most recently used).
  void PinSnapshot(uint64_t h);
  void UnpinSnapshot(uint64_t h);

  // the least recently used evictable entry, removed from the index: a page (is_page) or a
  // snapshot slot; false when nothing is evictable.
  bool EvictOne(int* unit, bool* is_page);
  bool HasEvictable() const { return !lru_.empty(); }
  // the use time of the least recently used evictable entry (UINT64_MAX when none).
  uint64_t oldest_tick() const;
  int num_pages() const { return static_cast<int>(by_page_.size()); }
  int num_snapshots() const { return static_cast<int>(snapshots_.size()); }
  // cached pages no sequence holds.
  int num_evictable_pages() const { return evictable_pages_; }
  // every cached page and snapshot slot id.
  std::vector<int> pages() const;
  std::vector<int> snapshot_slots() const;

 private:
  struct Lru {
    bool is_page;
    uint64_t hash;
    uint64_t tick;
  };
  struct PageEntry {
    int page;
    uint64_t parent;
    std::vector<int32_t> tokens;
    int refs = 0;
    std::list<Lru>::iterator lru;  // valid while refs == 0
  };
  struct SnapshotEntry {
    int slot;
    std::list<Lru>::iterator lru;  // valid while pins == 0
    int pins = 0;
  };

  int page_tokens_;
  uint64_t* clock_;
  absl::flat_hash_map<uint64_t, PageEntry> blocks_;
  absl::flat_hash_map<int, uint64_t> by_page_;
  absl::flat_hash_map<uint64_t, SnapshotEntry> snapshots_;
  std::list<Lru> lru_;  // front: least recently used
  int evictable_pages_ = 0;
};

}  // namespace vqserve

#endif  // VQSERVE_SCHEDULER_PREFIX_CACHE_H_
