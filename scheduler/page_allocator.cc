#include "scheduler/page_allocator.h"

#include <algorithm>
#include <climits>

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

PageAllocator::PageAllocator(const PagePoolConfig& config)
    : config_(config),
      own_pages_(std::make_unique<KvArena>(config.num_pages, 1)),
      own_slots_(std::make_unique<KvArena>(config.num_slots, 1)),
      page_arena_(own_pages_.get()),
      slot_arena_(own_slots_.get()),
      pages_(page_arena_, 0, 1),
      slots_(slot_arena_, 1, 1) {
  VQ_SCHED_CHECK(config.page_tokens >= 1);
  VQ_SCHED_CHECK(config.residual_tokens >= 0);
  VQ_SCHED_CHECK(config.num_pages >= 0 && config.num_slots >= 0);
}

PageAllocator::PageAllocator(const PagePoolConfig& config, KvArena* page_arena,
                             KvArena* slot_arena, int user)
    : config_(config),
      page_arena_(page_arena),
      slot_arena_(slot_arena),
      pages_(page_arena, 2 * user, config.page_bytes),
      slots_(slot_arena, 2 * user + 1, config.slot_bytes) {
  VQ_SCHED_CHECK(config.page_tokens >= 1);
  VQ_SCHED_CHECK(config.residual_tokens >= 0);
  config_.num_pages = pages_.id_bound();
  config_.num_slots = slots_.id_bound();
}

int PageAllocator::PagesMissing(const Sequence& seq, int num_tokens) const {
  int need = PagesForTokens(config_, num_tokens);
  return std::max(0, need - static_cast<int>(seq.block_table.size()));
}

std::optional<PagePlan> PageAllocator::Plan(const Sequence& seq, int new_tokens) const {
  PagePlan plan;
  plan.new_pages = PagesMissing(seq, seq.num_computed + new_tokens);
  plan.new_slot = seq.slot < 0;
  const int page_chunks = pages_.ChunksFor(plan.new_pages);
  const int slot_chunks = plan.new_slot ? slots_.ChunksFor(1) : 0;
  if (page_arena_ == slot_arena_) {
    if (page_chunks + slot_chunks > page_arena_->chunks_free()) return std::nullopt;
  } else if (page_chunks > page_arena_->chunks_free() ||
             slot_chunks > slot_arena_->chunks_free()) {
    return std::nullopt;
  }
  return plan;
}

void PageAllocator::Apply(Sequence* seq, const PagePlan& plan) {
  VQ_SCHED_CHECK(plan.new_pages >= 0);
  if (plan.new_slot) {
    VQ_SCHED_CHECK(seq->slot < 0);
    seq->slot = slots_.Take(seq->id);
    VQ_SCHED_CHECK(seq->slot >= 0);
  }
  for (int i = 0; i < plan.new_pages; ++i) {
    const int page = pages_.Take(seq->id);
    VQ_SCHED_CHECK(page >= 0);
    seq->block_table.push_back(page);
  }
}

void PageAllocator::Free(Sequence* seq) {
  for (auto it = seq->block_table.rbegin(); it != seq->block_table.rend(); ++it) {
    const int32_t page = *it;
    if (IsCachedPage(page)) {
      prefix_->Unref(page);
      continue;
    }
    VQ_SCHED_CHECK(pages_.owner(page) == seq->id);
    pages_.Free(page);
  }
  seq->block_table.clear();
  seq->prefix_blocks = 0;
  if (seq->slot >= 0) {
    VQ_SCHED_CHECK(slots_.owner(seq->slot) == seq->id);
    slots_.Free(seq->slot);
    seq->slot = -1;
  }
}

int PageAllocator::FittableTokens(const Sequence& seq, int want) const {
  int held = static_cast<int>(seq.block_table.size());
  int max_total = MaxTokensForPages(config_, held + pages_free());
  return std::clamp(max_total - seq.num_computed, 0, std::max(want, 0));
}

namespace {
// owner of the units the prefix cache holds.
constexpr int64_t kCacheOwner = INT64_MAX;

// fills seq->block_hashes for its first `blocks` full pages.
void HashBlocks(Sequence* seq, int blocks, int page_tokens) {
  auto& h = seq->block_hashes;
  while (static_cast<int>(h.size()) < blocks) {
    const size_t b = h.size();
    h.push_back(BlockHash(b == 0 ? 0 : h[b - 1], seq->tokens.data() + b * page_tokens,
                          page_tokens));
  }
}
}  // namespace

void PageAllocator::EnablePrefixCache(int checkpoint_tokens, uint64_t* clock) {
  const int p = config_.page_tokens;
  checkpoint_tokens_ = std::max(p, checkpoint_tokens / p * p);
  prefix_ = std::make_unique<PrefixCache>(p, clock);
}

int PageAllocator::NextCheckpoint(int pos) const {
  if (!prefix_ || config_.residual_tokens == 0) return INT32_MAX;
  return (pos / checkpoint_tokens_ + 1) * checkpoint_tokens_;
}

PrefixHit PageAllocator::FindPrefix(Sequence* seq) const {
  PrefixHit hit;
  if (!prefix_) return hit;
  const int p = config_.page_tokens, r = config_.residual_tokens;
  const int blocks = (seq->num_tokens() - 1) / p;  // full blocks leaving a token to compute
  HashBlocks(seq, blocks, p);
  // the cached run of blocks from the first.
  std::vector<int32_t> run;
  for (int b = 0; b < blocks; ++b) {
    const int page = prefix_->FindPage(seq->block_hashes[b], b == 0 ? 0 : seq->block_hashes[b - 1],
                                       seq->tokens.data() + static_cast<size_t>(b) * p);
    if (page < 0) break;
    run.push_back(page);
  }
  if (r == 0) {  // no ring: the pages are the whole state at any page boundary.
    hit.tokens = static_cast<int>(run.size()) * p;
    hit.pages = std::move(run);
    return hit;
  }
  // with a ring: a checkpoint whose snapshot is cached and whose coded pages are all cached.
  for (int m = checkpoint_tokens_; m <= blocks * p; m += checkpoint_tokens_) {
    const int need = PagesForTokens(config_, m);
    if (need > static_cast<int>(run.size())) break;
    const uint64_t h = seq->block_hashes[m / p - 1];
    const int slot = prefix_->FindSnapshot(h);
    if (slot < 0) continue;
    hit.tokens = m;
    hit.pages.assign(run.begin(), run.begin() + need);
    hit.snapshot = slot;
    hit.snapshot_hash = h;
  }
  return hit;
}

int PageAllocator::SharedPrefixTokens(Sequence* seq, const Sequence& other) const {
  if (!prefix_) return 0;
  const int p = config_.page_tokens;
  const int blocks = (seq->num_tokens() - 1) / p;
  HashBlocks(seq, blocks, p);
  const int n = std::min(blocks, static_cast<int>(other.block_hashes.size()));
  int common = 0;
  while (common < n && seq->block_hashes[common] == other.block_hashes[common] &&
         std::equal(seq->tokens.begin() + common * p, seq->tokens.begin() + (common + 1) * p,
                    other.tokens.begin() + common * p)) {
    ++common;
  }
  const int tokens = common * p;
  return config_.residual_tokens > 0 ? tokens - tokens % checkpoint_tokens_ : tokens;
}

void PageAllocator::HoldPrefix(const PrefixHit& hit) {
  for (int32_t page : hit.pages) prefix_->Ref(page);
  if (hit.snapshot >= 0) prefix_->PinSnapshot(hit.snapshot_hash);
}

void PageAllocator::DropPrefix(const PrefixHit& hit) {
  for (auto it = hit.pages.rbegin(); it != hit.pages.rend(); ++it) prefix_->Unref(*it);
  if (hit.snapshot >= 0) prefix_->UnpinSnapshot(hit.snapshot_hash);
}

void PageAllocator::ApplyPrefix(Sequence* seq, const PrefixHit& hit) {
  VQ_SCHED_CHECK(seq->block_table.empty() && seq->num_computed == 0);
  seq->block_table = hit.pages;
  seq->num_computed = hit.tokens;
  seq->prefix_blocks = static_cast<int>(hit.pages.size());
  seq->num_cached_tokens = std::min(hit.tokens, seq->num_prompt_tokens);
}

int PageAllocator::RegisterPrefix(Sequence* seq) {
  if (!prefix_) return -1;
  const int p = config_.page_tokens;
  // full pages already flushed to codes (never written again: shareable).
  const int flushed = PagesForTokens(config_, seq->num_computed);
  HashBlocks(seq, seq->num_computed / p, p);
  for (int b = seq->prefix_blocks; b < flushed; ++b) {
    const int32_t page = seq->block_table[b];
    if (prefix_->IsCachedPage(page)) continue;
    if (prefix_->AddPage(seq->block_hashes[b], b == 0 ? 0 : seq->block_hashes[b - 1],
                         seq->tokens.data() + static_cast<size_t>(b) * p, page)) {
      pages_.SetOwner(page, kCacheOwner);
    }
  }
  seq->prefix_blocks = std::max(seq->prefix_blocks, flushed);
  // a snapshot of the ring at a checkpoint (the tokens before it are all computed).
  const int n = seq->num_computed;
  if (config_.residual_tokens == 0 || n == 0 || n % checkpoint_tokens_ != 0) return -1;
  const uint64_t h = seq->block_hashes[n / p - 1];
  if (prefix_->FindSnapshot(h) >= 0) return -1;
  const int slot = slots_.Take(kCacheOwner);  // free memory only: no eviction for a snapshot
  if (slot < 0) return -1;
  prefix_->AddSnapshot(h, slot);
  return slot;
}

bool PageAllocator::EvictOne() {
  int unit = -1;
  bool is_page = false;
  if (!prefix_ || !prefix_->EvictOne(&unit, &is_page)) return false;
  if (is_page) {
    pages_.Free(unit);
  } else {
    slots_.Free(unit);
  }
  return true;
}

int PageAllocator::MaxPagesWithSlot() const {
  if (page_arena_ != slot_arena_) return pages_total();
  return std::max(0, page_arena_->num_chunks() - 1) * pages_.units_per_chunk();
}

size_t PageAllocator::bytes_lent() const {
  return page_arena_->chunk_bytes() * pages_.chunks_held() +
         slot_arena_->chunk_bytes() * slots_.chunks_held();
}

size_t PageAllocator::bytes_held() const {
  return pages_.unit_bytes() * pages_.held() + slots_.unit_bytes() * slots_.held();
}

absl::Status PageAllocator::CheckInvariants() const {
  for (const UnitPool* pool : {&pages_, &slots_}) {
    int owned = 0;
    for (int u = 0; u < pool->id_bound(); ++u) owned += pool->owner(u) >= 0;
    if (owned != pool->held()) {
      return absl::InternalError(absl::StrCat(pool == &pages_ ? "pages" : "slots", ": ", owned,
                                              " owned but ", pool->held(), " held"));
    }
    if (pool->free_in_chunks() < 0 || pool->held() > pool->capacity()) {
      return absl::InternalError("units: held beyond capacity");
    }
  }
  return absl::OkStatus();
}

}  // namespace vqserve
