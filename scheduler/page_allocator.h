#ifndef VQSERVE_SCHEDULER_PAGE_ALLOCATOR_H_
#define VQSERVE_SCHEDULER_PAGE_ALLOCATOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/scheduler.h"
#include "scheduler/sequence.h"

namespace vqserve {

// pages a sequence of `num_tokens` tokens holds under the residual-window policy: the newest
// residual_tokens stay in the sequence's fp16 ring, and whole pages are flushed to codes once
// residual + page tokens are buffered (the scheduler's copy of runtime/kv/kv_cache.h's rule).
int PagesForTokens(const PagePoolConfig& pool, int num_tokens);
// largest token count whose pages fit in `num_pages` pages.
int MaxTokensForPages(const PagePoolConfig& pool, int num_pages);

// what one Apply hands a sequence: pages appended to its block table and maybe a slot.
struct PagePlan {
  int new_pages = 0;
  bool new_slot = false;
};

// the pages and residual slots of one pool. Plan is const and says whether (and what) a
// sequence needs to cache `new_tokens` more tokens; Apply commits a fresh plan; Free returns
// everything the sequence holds. page and slot ids are 0-based and unique within the pool.
class PageAllocator {
 public:
  explicit PageAllocator(const PagePoolConfig& config);

  // what `seq` needs to hold num_computed + new_tokens tokens; nullopt when the pool lacks it.
  std::optional<PagePlan> Plan(const Sequence& seq, int new_tokens) const;
  // commits a plan made by Plan for this sequence with no allocation in between.
  void Apply(Sequence* seq, const PagePlan& plan);
  // returns the sequence's pages and slot to the pool; its block table is cleared, slot = -1.
  void Free(Sequence* seq);

  // pages `seq` still lacks to hold `num_tokens` tokens (0 when it has them).
  int PagesMissing(const Sequence& seq, int num_tokens) const;
  // largest n <= want such that Plan(seq, n) succeeds for pages (slot aside); 0 when none.
  int FittableTokens(const Sequence& seq, int want) const;

  const PagePoolConfig& config() const { return config_; }
  int pages_total() const { return config_.num_pages; }
  int pages_free() const { return static_cast<int>(free_pages_.size()); }
  int pages_used() const { return pages_total() - pages_free(); }
  int slots_total() const { return config_.num_slots; }
  int slots_free() const { return static_cast<int>(free_slots_.size()); }

  // free + used == total for pages and slots, free lists hold no duplicates, owners agree.
  absl::Status CheckInvariants() const;
  // sequence id that holds `page` (-1 when free).
  int64_t page_owner(int page) const { return page_owner_[page]; }
  // sequence id that holds `slot` (-1 when free).
  int64_t slot_owner(int slot) const { return slot_owner_[slot]; }

 private:
  PagePoolConfig config_;
  std::vector<int32_t> free_pages_;  // stack; top is handed out next
  std::vector<int32_t> free_slots_;
  std::vector<int64_t> page_owner_;  // per page: owning sequence id or -1
  std::vector<int64_t> slot_owner_;
};

}  // namespace vqserve

#endif  // VQSERVE_SCHEDULER_PAGE_ALLOCATOR_H_
