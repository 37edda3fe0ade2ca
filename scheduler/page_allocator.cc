#include "scheduler/page_allocator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/kv/page_flush.h"
#include "scheduler/check.h"

namespace vqserve {

int PagesForTokens(const PagePoolConfig& pool, int num_tokens) {
  return CodedTokenCount(num_tokens, pool.residual_tokens, pool.page_tokens) / pool.page_tokens;
}

int MaxTokensForPages(const PagePoolConfig& pool, int num_pages) {
  // PagesForTokens(t) <= p  <=>  t < residual + (p + 1) * page.
  int64_t t = static_cast<int64_t>(pool.residual_tokens) +
              static_cast<int64_t>(num_pages + 1) * pool.page_tokens - 1;
  return static_cast<int>(std::min<int64_t>(t, INT32_MAX));
}

PageAllocator::PageAllocator(const PagePoolConfig& config) : config_(config) {
  VQ_SCHED_CHECK(config.page_tokens >= 1);
  VQ_SCHED_CHECK(config.residual_tokens >= 0);
  VQ_SCHED_CHECK(config.num_pages >= 0 && config.num_slots >= 0);
  // stacks hand out the lowest ids first.
  for (int i = config.num_pages - 1; i >= 0; --i) free_pages_.push_back(i);
  for (int i = config.num_slots - 1; i >= 0; --i) free_slots_.push_back(i);
  page_owner_.assign(config.num_pages, -1);
  slot_owner_.assign(config.num_slots, -1);
}

int PageAllocator::PagesMissing(const Sequence& seq, int num_tokens) const {
  int need = PagesForTokens(config_, num_tokens);
  return std::max(0, need - static_cast<int>(seq.block_table.size()));
}

std::optional<PagePlan> PageAllocator::Plan(const Sequence& seq, int new_tokens) const {
  PagePlan plan;
  plan.new_pages = PagesMissing(seq, seq.num_computed + new_tokens);
  plan.new_slot = seq.slot < 0;
  if (plan.new_pages > pages_free()) return std::nullopt;
  if (plan.new_slot && slots_free() == 0) return std::nullopt;
  return plan;
}

void PageAllocator::Apply(Sequence* seq, const PagePlan& plan) {
  VQ_SCHED_CHECK(plan.new_pages >= 0 && plan.new_pages <= pages_free());
  if (plan.new_slot) {
    VQ_SCHED_CHECK(seq->slot < 0 && !free_slots_.empty());
    seq->slot = free_slots_.back();
    free_slots_.pop_back();
    slot_owner_[seq->slot] = seq->id;
  }
  for (int i = 0; i < plan.new_pages; ++i) {
    int32_t page = free_pages_.back();
    free_pages_.pop_back();
    page_owner_[page] = seq->id;
    seq->block_table.push_back(page);
  }
}

void PageAllocator::Free(Sequence* seq) {
  for (int32_t page : seq->block_table) {
    VQ_SCHED_CHECK(page >= 0 && page < pages_total() && page_owner_[page] == seq->id);
    page_owner_[page] = -1;
    free_pages_.push_back(page);
  }
  seq->block_table.clear();
  if (seq->slot >= 0) {
    VQ_SCHED_CHECK(seq->slot < slots_total() && slot_owner_[seq->slot] == seq->id);
    slot_owner_[seq->slot] = -1;
    free_slots_.push_back(seq->slot);
    seq->slot = -1;
  }
}

int PageAllocator::FittableTokens(const Sequence& seq, int want) const {
  int held = static_cast<int>(seq.block_table.size());
  int max_total = MaxTokensForPages(config_, held + pages_free());
  return std::clamp(max_total - seq.num_computed, 0, std::max(want, 0));
}

absl::Status PageAllocator::CheckInvariants() const {
  std::vector<bool> seen(pages_total(), false);
  for (int32_t page : free_pages_) {
    if (page < 0 || page >= pages_total() || seen[page]) {
      return absl::InternalError(absl::StrCat("page ", page, " bad or twice in the free list"));
    }
    if (page_owner_[page] != -1) {
      return absl::InternalError(absl::StrCat("free page ", page, " has an owner"));
    }
    seen[page] = true;
  }
  int owned = static_cast<int>(
      std::count_if(page_owner_.begin(), page_owner_.end(), [](int64_t o) { return o >= 0; }));
  if (owned + pages_free() != pages_total()) {
    return absl::InternalError(absl::StrCat("pages: free ", pages_free(), " + used ", owned,
                                            " != total ", pages_total()));
  }
  std::vector<bool> seen_slot(slots_total(), false);
  for (int32_t slot : free_slots_) {
    if (slot < 0 || slot >= slots_total() || seen_slot[slot] || slot_owner_[slot] != -1) {
      return absl::InternalError(absl::StrCat("slot ", slot, " bad in the free list"));
    }
    seen_slot[slot] = true;
  }
  int owned_slots = static_cast<int>(
      std::count_if(slot_owner_.begin(), slot_owner_.end(), [](int64_t o) { return o >= 0; }));
  if (owned_slots + slots_free() != slots_total()) {
    return absl::InternalError(absl::StrCat("slots: free ", slots_free(), " + used ",
                                            owned_slots, " != total ", slots_total()));
  }
  return absl::OkStatus();
}

}  // namespace vqserve
