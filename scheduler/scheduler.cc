// policy, per step (iteration-level continuous batching):
//  1. decodes: running sequences with one token left to feed, most important first (higher
//     priority, then older), one token each. when a decode needs a page and the pool has none,
//     a running sequence of the same pool is preempted by recompute: the least important one
//     that is less important than the decode, not yet scheduled this step and holding pages;
//     when there is none, the decode itself. a preempted sequence frees its pages and slot,
//     restarts at num_computed = 0 (keeping its generated tokens) and goes to the front of the
//     waiting queue.
//  2. running prefills: sequences admitted earlier whose prompt (or recompute) is not done get
//     the next chunk, cut by the token budget and by the pages free.
//  3. admission, only in a step without preemption (no thrash loop): waiting sequences in
//     queue order (priority, then fifo) while max_num_seqs and the token budget allow. a
//     sequence is admitted when its pool has a slot and pages for its whole prefill on top of
//     what admitted prefills still need, plus a watermark when the pool already runs sequences.
//     with prefix caching, a sequence whose prompt shares more with a running sequence's than
//     the cache holds, and which that sequence has not computed yet, waits for it (skipped, not
//     blocking others): requests with one system prompt arriving together compute it once,
//     and the rest start from the cache a few steps later.
//     when pools share one memory (SharedKvMemory) the check is in chunks of that memory over
//     every pool's outstanding pages, and a victim for a decode may be of any pool (its own
//     first). fairness: a sequence that does not fit blocks every later one that draws on the
//     same memory (no overtaking: with shared memory no codec's requests pass another's), so
//     each waits only for those ahead of it, which finish within max_model_len steps.
#include "scheduler/scheduler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "scheduler/check.h"
#include "scheduler/page_allocator.h"
#include "scheduler/waiting_queue.h"

namespace vqserve {

struct Scheduler::Impl {
  struct Held {
    std::shared_ptr<Sequence> seq;
    int64_t order = 0;  // Add order; breaks arrival ties
  };
  // one running sequence's state within a Schedule call.
  struct Candidate {
    Sequence* seq;
    int64_t order;
    bool scheduled = false;
    bool preempted = false;
  };

  SchedulerConfig config;
  std::unique_ptr<KvArena> shared;  // the one memory of every pool, when shared
  std::vector<PageAllocator> allocators;
  absl::flat_hash_map<int64_t, Held> held;          // added and not yet released
  WaitingQueue waiting;
  std::vector<Sequence*> running;                   // admitted: each holds a slot
  std::vector<std::shared_ptr<Sequence>> released;  // kept alive until the next Schedule
  int64_t next_order = 0;
  int64_t num_preemptions = 0;
  uint64_t clock = 0;  // prefix caches' use times
  int64_t prefix_queries = 0, prefix_hits = 0;
  std::vector<std::pair<int, uint64_t>> pinned;  // (pool, snapshot) restored this step

  // evicts the least recently used prefix-cache entry among the pools that draw on `arena`;
  // false when none is evictable.
  bool Evict(const KvArena* arena) {
    int best = -1;
    for (size_t q = 0; q < allocators.size(); ++q) {
      const PageAllocator& a = allocators[q];
      if (a.page_arena() != arena && a.slot_arena() != arena) continue;
      if (a.oldest_evictable() == UINT64_MAX) continue;
      if (best < 0 || a.oldest_evictable() < allocators[best].oldest_evictable()) {
        best = static_cast<int>(q);
      }
    }
    return best >= 0 && allocators[best].EvictOne();
  }

  int WatermarkPages(int pool) const {
    int n = allocators[pool].pages_total();
    if (n == 0 || config.watermark <= 0) return 0;
    return std::max(1, static_cast<int>(std::ceil(config.watermark * n)));
  }

  void Preempt(Sequence* seq, ScheduleOutput* out) {
    allocators[seq->pool].Free(seq);
    seq->num_computed = 0;
    seq->status = SequenceStatus::kWaiting;
    ++seq->num_preemptions;
    ++num_preemptions;
    waiting.PushFront(seq);
    out->preempted.push_back(seq->id);
  }

  // index of the victim that makes room for run[i]: see the policy above (its own pool
  // first, then any pool whose pages share its memory).
  size_t PickVictim(const std::vector<Candidate>& run, size_t i) const {
    const int pool = run[i].seq->pool;
    for (bool same : {true, false}) {
      for (size_t j = run.size(); j-- > i + 1;) {
        const Candidate& c = run[j];
        if (c.scheduled || c.preempted || c.seq->block_table.empty()) continue;
        const bool mine = c.seq->pool == pool;
        if (same != mine) continue;
        if (!mine && allocators[c.seq->pool].page_arena() != allocators[pool].page_arena()) {
          continue;
        }
        return j;
      }
    }
    return i;
  }

  // whether pool p can take `pages` more pages (and a slot) on top of the pages every pool
  // sharing its memory still owes its admitted prefills (`outstanding`).
  bool Fits(int p, int pages, bool slot, const std::vector<int>& outstanding) const {
    const PageAllocator& a = allocators[p];
    KvArena* arena = a.page_arena();
    int chunks = 0;
    for (size_t q = 0; q < allocators.size(); ++q) {
      if (allocators[q].page_arena() != arena) continue;
      chunks += allocators[q].PageChunksFor(outstanding[q] + (static_cast<int>(q) == p ? pages : 0));
    }
    if (slot) {
      if (a.slot_arena() == arena) {
        chunks += a.SlotChunksFor(1);
      } else if (a.SlotChunksFor(1) > a.slot_arena()->chunks_free()) {
        return false;
      }
    }
    return chunks <= arena->chunks_free();
  }

  void Feed(Candidate& c, int n, ScheduleOutput* out) {
    Sequence* seq = c.seq;
    std::optional<PagePlan> plan = allocators[seq->pool].Plan(*seq, n);
    VQ_SCHED_CHECK(plan.has_value());
    allocators[seq->pool].Apply(seq, *plan);
    out->seqs.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
    c.scheduled = true;
  }

  void ScheduleRunning(ScheduleOutput* out, int* budget);
  void Admit(ScheduleOutput* out, int* budget);
  // a running sequence of seq's pool has still to compute more of seq's prompt than the
  // `cached` tokens the cache holds: admitted now, seq would compute the same pages again.
  bool AwaitsSharedPrefix(Sequence* seq, int cached) {
    const PageAllocator& alloc = allocators[seq->pool];
    for (const Sequence* r : running) {
      // a decoding sequence has computed every token it could share: only prefills count
      // (few a step: the token budget), so the hashes are compared against few sequences.
      if (r->pool != seq->pool || r->num_tokens() - r->num_computed <= 1) continue;
      const int shared = alloc.SharedPrefixTokens(seq, *r);
      if (shared > cached && r->num_computed < shared) return true;
    }
    return false;
  }
  // leaves the running set for good; pages and slot stay until Release.
  void Finish(Sequence* seq);
};

void Scheduler::Impl::ScheduleRunning(ScheduleOutput* out, int* budget) {
  std::vector<Candidate> run;
  run.reserve(running.size());
  for (Sequence* seq : running) run.push_back({seq, held.at(seq->id).order});
  std::sort(run.begin(), run.end(), [](const Candidate& a, const Candidate& b) {
    if (a.seq->priority != b.seq->priority) return a.seq->priority > b.seq->priority;
    if (a.seq->arrival_us != b.seq->arrival_us) return a.seq->arrival_us < b.seq->arrival_us;
    return a.order < b.order;
  });

  // pass 1: decodes.
  for (size_t i = 0; i < run.size() && *budget > 0; ++i) {
    Candidate& c = run[i];
    if (c.preempted || c.seq->num_tokens() - c.seq->num_computed != 1) continue;
    PageAllocator& alloc = allocators[c.seq->pool];
    while (!c.preempted && !alloc.Plan(*c.seq, 1).has_value()) {
      if (Evict(alloc.page_arena())) continue;
      size_t v = PickVictim(run, i);
      run[v].preempted = true;
      Preempt(run[v].seq, out);
    }
    if (c.preempted) continue;
    Feed(c, 1, out);
    *budget -= 1;
  }
  // pass 2: chunks of unfinished prefills.
  for (size_t i = 0; i < run.size() && *budget > 0; ++i) {
    Candidate& c = run[i];
    if (c.preempted || c.scheduled) continue;
    int remaining = c.seq->num_tokens() - c.seq->num_computed;
    if (remaining < 2) continue;
    PageAllocator& alloc = allocators[c.seq->pool];
    int want = std::min({remaining, *budget,
                         alloc.NextCheckpoint(c.seq->num_computed) - c.seq->num_computed});
    int n = alloc.FittableTokens(*c.seq, want);
    while (n < want && Evict(alloc.page_arena())) n = alloc.FittableTokens(*c.seq, want);
    while (n == 0 && !c.preempted) {
      size_t v = PickVictim(run, i);
      run[v].preempted = true;
      Preempt(run[v].seq, out);
      n = alloc.FittableTokens(*c.seq, want);
    }
    if (c.preempted) continue;
    Feed(c, n, out);
    *budget -= n;
  }
  running.clear();
  for (const Candidate& c : run) {
    if (!c.preempted) running.push_back(c.seq);
  }
}

void Scheduler::Impl::Admit(ScheduleOutput* out, int* budget) {
  const int num_pools = static_cast<int>(allocators.size());
  std::vector<int> outstanding(num_pools, 0);  // pages admitted prefills still need
  std::vector<int> running_in_pool(num_pools, 0);
  for (Sequence* seq : running) {
    outstanding[seq->pool] += allocators[seq->pool].PagesMissing(*seq, seq->num_tokens());
    ++running_in_pool[seq->pool];
  }
  std::vector<const KvArena*> blocked;  // memories whose first waiting sequence did not fit
  std::vector<int64_t> admitted;
  for (const WaitingQueue::Entry& e : waiting) {
    if (*budget <= 0) break;
    if (static_cast<int>(running.size()) >= config.max_num_seqs) break;
    Sequence* seq = e.seq;
    const int p = seq->pool;
    PageAllocator& alloc = allocators[p];
    if (std::find(blocked.begin(), blocked.end(), alloc.page_arena()) != blocked.end()) continue;
    PrefixHit hit;
    if (alloc.prefix_cache_enabled()) {
      hit = alloc.FindPrefix(seq);
      if (AwaitsSharedPrefix(seq, hit.tokens)) continue;
      alloc.HoldPrefix(hit);  // not evicted while this admission makes room
    }
    int need = PagesForTokens(alloc.config(), seq->num_tokens()) - static_cast<int>(hit.pages.size());
    int reserve = running_in_pool[p] > 0 ? WatermarkPages(p) : 0;
    bool fits = Fits(p, need + reserve, /*slot=*/true, outstanding);
    while (!fits && Evict(alloc.page_arena())) fits = Fits(p, need + reserve, true, outstanding);
    if (!fits) {
      if (alloc.prefix_cache_enabled()) alloc.DropPrefix(hit);
      blocked.push_back(alloc.page_arena());
      continue;
    }
    seq->num_cached_tokens = 0;
    if (alloc.prefix_cache_enabled()) {
      prefix_queries += seq->num_tokens();
      prefix_hits += hit.tokens;
      if (hit.tokens > 0) alloc.ApplyPrefix(seq, hit);
    }
    Candidate c{seq, 0};
    int n = std::min({seq->num_tokens() - seq->num_computed, *budget,
                      alloc.NextCheckpoint(seq->num_computed) - seq->num_computed});
    Feed(c, n, out);
    *budget -= n;
    if (hit.snapshot >= 0) {  // the ring at hit.tokens, into the slot Feed gave it
      out->restores.push_back({p, hit.snapshot, seq->slot});
      pinned.push_back({p, hit.snapshot_hash});
    }
    seq->status = SequenceStatus::kRunning;
    running.push_back(seq);
    outstanding[p] += alloc.PagesMissing(*seq, seq->num_tokens());
    ++running_in_pool[p];
    admitted.push_back(seq->id);
  }
  for (int64_t id : admitted) waiting.Remove(id);
}

void Scheduler::Impl::Finish(Sequence* seq) {
  seq->status = SequenceStatus::kFinished;
  running.erase(std::remove(running.begin(), running.end(), seq), running.end());
}

Scheduler::Scheduler(const SchedulerConfig& config, std::vector<PagePoolConfig> pools)
    : config_(config), pools_(std::move(pools)), impl_(std::make_shared<Impl>()) {
  VQ_SCHED_CHECK(config.max_num_seqs >= 1 && config.max_batched_tokens >= 1);
  VQ_SCHED_CHECK(config.max_model_len >= 1 && config.max_waiting >= 0);
  impl_->config = config_;
  for (const PagePoolConfig& pool : pools_) impl_->allocators.emplace_back(pool);
  if (config.prefix_cache) {
    for (auto& a : impl_->allocators) {
      a.EnablePrefixCache(config.prefix_checkpoint_tokens, &impl_->clock);
    }
  }
}

Scheduler::Scheduler(const SchedulerConfig& config, std::vector<PagePoolConfig> pools,
                     const SharedKvMemory& memory)
    : config_(config), pools_(std::move(pools)), impl_(std::make_shared<Impl>()) {
  VQ_SCHED_CHECK(config.max_num_seqs >= 1 && config.max_batched_tokens >= 1);
  VQ_SCHED_CHECK(config.max_model_len >= 1 && config.max_waiting >= 0);
  impl_->config = config_;
  impl_->shared = std::make_unique<KvArena>(memory.num_chunks, memory.chunk_bytes);
  for (size_t i = 0; i < pools_.size(); ++i) {
    VQ_SCHED_CHECK(pools_[i].page_bytes >= 1 && pools_[i].slot_bytes >= 1);
    impl_->allocators.emplace_back(pools_[i], impl_->shared.get(), impl_->shared.get(),
                                   static_cast<int>(i));
    pools_[i] = impl_->allocators.back().config();  // num_pages, num_slots: the id bounds
    if (config.prefix_cache) {
      impl_->allocators.back().EnablePrefixCache(config.prefix_checkpoint_tokens, &impl_->clock);
    }
  }
}

absl::Status Scheduler::Add(std::shared_ptr<Sequence> seq) {
  if (seq == nullptr) return absl::InvalidArgumentError("sequence is null");
  const int num_pools = static_cast<int>(pools_.size());
  if (seq->pool < 0 || seq->pool >= num_pools) {
    return absl::InvalidArgumentError(
        absl::StrCat("pool: ", seq->pool, " is not a kv pool index in [0, ", num_pools, ")"));
  }
  if (seq->tokens.empty()) return absl::InvalidArgumentError("prompt: is empty");
  if (seq->num_prompt_tokens != seq->num_tokens()) {
    return absl::InvalidArgumentError(absl::StrCat("num_prompt_tokens: ", seq->num_prompt_tokens,
                                                   " but the prompt has ", seq->num_tokens(),
                                                   " tokens"));
  }
  if (seq->max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens: ", seq->max_new_tokens, " is below 1"));
  }
  const int64_t total = static_cast<int64_t>(seq->num_prompt_tokens) + seq->max_new_tokens;
  if (total > config_.max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_new_tokens: prompt (", seq->num_prompt_tokens, " tokens) + max_new_tokens (",
        seq->max_new_tokens, ") exceeds max_model_len ", config_.max_model_len));
  }
  const PagePoolConfig& pool = pools_[seq->pool];
  const PageAllocator& alloc = impl_->allocators[seq->pool];
  const int pages = PagesForTokens(pool, static_cast<int>(total));
  const int page_room = alloc.MaxPagesWithSlot();
  if (pages > page_room || alloc.slots_total() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_new_tokens: prompt + max_new_tokens = ", total, " tokens need ", pages,
        " kv pages and a slot; pool '", pool.codec, "' has room for ", page_room,
        " pages and ", alloc.slots_total(), " slots"));
  }
  if (impl_->held.contains(seq->id)) {
    return absl::AlreadyExistsError(absl::StrCat("id: sequence ", seq->id, " is queued"));
  }
  if (impl_->waiting.size() >= config_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("waiting queue is full (", config_.max_waiting, " sequences)"));
  }
  seq->num_computed = 0;
  seq->block_table.clear();
  seq->slot = -1;
  seq->status = SequenceStatus::kWaiting;
  const int64_t id = seq->id;
  impl_->waiting.PushBack(seq.get());
  impl_->held.emplace(id, Impl::Held{std::move(seq), impl_->next_order++});
  return absl::OkStatus();
}

ScheduleOutput Scheduler::Schedule() {
  impl_->released.clear();
  ScheduleOutput out;
  int budget = config_.max_batched_tokens;
  impl_->ScheduleRunning(&out, &budget);
  if (out.preempted.empty()) impl_->Admit(&out, &budget);
  num_preemptions_ = impl_->num_preemptions;
  return out;
}

std::vector<SlotCopy> Scheduler::Postprocess(const ScheduleOutput& out,
                                             const std::vector<int32_t>& sampled) {
  std::vector<SlotCopy> snapshots;
  for (const auto& [pool, h] : impl_->pinned) impl_->allocators[pool].UnpinSnapshot(h);
  impl_->pinned.clear();
  size_t k = 0;
  for (const ScheduledSeq& s : out.seqs) {
    int32_t token = 0;
    if (s.samples) {
      VQ_SCHED_CHECK(k < sampled.size());
      token = sampled[k++];
    }
    // released since Schedule: the object is alive (see released) but no longer ours.
    auto it = impl_->held.find(s.seq->id);
    if (it == impl_->held.end() || it->second.seq.get() != s.seq) continue;
    Sequence* seq = s.seq;
    if (seq->status != SequenceStatus::kRunning) continue;
    seq->num_computed += s.num_new_tokens;
    VQ_SCHED_CHECK(seq->num_computed <= seq->num_tokens());
    if (s.samples) seq->tokens.push_back(token);
    const int slot = impl_->allocators[seq->pool].RegisterPrefix(seq);
    if (slot >= 0) snapshots.push_back({seq->pool, seq->slot, slot});
    if (seq->num_generated() >= seq->max_new_tokens) impl_->Finish(seq);
  }
  VQ_SCHED_CHECK(k == sampled.size());
  return snapshots;
}

void Scheduler::Release(int64_t id) {
  auto it = impl_->held.find(id);
  if (it == impl_->held.end()) return;
  std::shared_ptr<Sequence> seq = std::move(it->second.seq);
  impl_->held.erase(it);
  if (!impl_->waiting.Remove(id)) impl_->Finish(seq.get());
  impl_->allocators[seq->pool].Free(seq.get());
  impl_->released.push_back(std::move(seq));
}

int Scheduler::num_waiting() const { return impl_->waiting.size(); }
int Scheduler::num_running() const { return static_cast<int>(impl_->running.size()); }
int Scheduler::pages_free(int pool) const { return impl_->allocators[pool].pages_free(); }
int Scheduler::pages_total(int pool) const { return impl_->allocators[pool].pages_total(); }
int Scheduler::slots_free(int pool) const { return impl_->allocators[pool].slots_free(); }
int Scheduler::slots_total(int pool) const { return impl_->allocators[pool].slots_total(); }
int64_t Scheduler::prefix_queries() const { return impl_->prefix_queries; }
int64_t Scheduler::prefix_hits() const { return impl_->prefix_hits; }
int Scheduler::prefix_cached_pages(int pool) const {
  const PrefixCache* c = impl_->allocators[pool].prefix_cache();
  return c ? c->num_pages() : 0;
}
int Scheduler::prefix_evictable_pages(int pool) const {
  const PrefixCache* c = impl_->allocators[pool].prefix_cache();
  return c ? c->num_evictable_pages() : 0;
}
int Scheduler::pages_used(int pool) const { return impl_->allocators[pool].pages_used(); }
int Scheduler::prefix_snapshots(int pool) const {
  const PrefixCache* c = impl_->allocators[pool].prefix_cache();
  return c ? c->num_snapshots() : 0;
}
int Scheduler::slots_used(int pool) const { return impl_->allocators[pool].slots_used(); }
size_t Scheduler::bytes_lent(int pool) const { return impl_->allocators[pool].bytes_lent(); }
size_t Scheduler::bytes_held(int pool) const { return impl_->allocators[pool].bytes_held(); }
size_t Scheduler::shared_bytes_total() const {
  return impl_->shared ? impl_->shared->total_bytes() : 0;
}
size_t Scheduler::shared_bytes_free() const {
  return impl_->shared ? impl_->shared->chunk_bytes() * impl_->shared->chunks_free() : 0;
}

const Sequence* Scheduler::Find(int64_t id) const {
  auto it = impl_->held.find(id);
  return it == impl_->held.end() ? nullptr : it->second.seq.get();
}

absl::Status Scheduler::CheckInvariants() const {
  const Impl& m = *impl_;
  std::vector<int> pages_held(m.allocators.size(), 0), slots_held(m.allocators.size(), 0);
  std::vector<absl::flat_hash_map<int, int>> refs(m.allocators.size());
  int num_running = 0, num_waiting = 0;
  for (const auto& [id, h] : m.held) {
    const Sequence& seq = *h.seq;
    const PageAllocator& alloc = m.allocators[seq.pool];
    if (seq.status == SequenceStatus::kWaiting) {
      if (!seq.block_table.empty() || seq.slot >= 0) {
        return absl::InternalError(absl::StrCat("waiting sequence ", id, " holds kv"));
      }
      if (!m.waiting.Contains(id)) {
        return absl::InternalError(absl::StrCat("waiting sequence ", id, " is not queued"));
      }
      ++num_waiting;
      continue;
    }
    // running, or finished and not yet released: both hold a slot.
    if (seq.status == SequenceStatus::kRunning) ++num_running;
    if (seq.slot < 0 || alloc.slot_owner(seq.slot) != id) {
      return absl::InternalError(absl::StrCat("running sequence ", id, " lacks its slot"));
    }
    const int flushed = PagesForTokens(alloc.config(), seq.num_computed);
    for (size_t b = 0; b < seq.block_table.size(); ++b) {
      const int32_t page = seq.block_table[b];
      if (alloc.IsCachedPage(page)) {
        // a shared page is never written: it lies below the sequence's flush frontier.
        if (static_cast<int>(b) >= flushed) {
          return absl::InternalError(absl::StrCat("sequence ", id, " holds cached page ", page,
                                                  " at block ", b, " it may still write"));
        }
        ++refs[seq.pool][page];
      } else if (alloc.page_owner(page) != id) {
        return absl::InternalError(absl::StrCat("sequence ", id, " page ", page, " not owned"));
      } else {
        ++pages_held[seq.pool];
      }
    }
    if (static_cast<int>(seq.block_table.size()) <
        PagesForTokens(alloc.config(), seq.num_computed)) {
      return absl::InternalError(absl::StrCat("sequence ", id, " has too few pages"));
    }
    ++slots_held[seq.pool];
  }
  // every cached page: as many references as sequences hold it; cached units are used.
  for (size_t p = 0; p < m.allocators.size(); ++p) {
    const PrefixCache* cache = m.allocators[p].prefix_cache();
    if (cache == nullptr) continue;
    for (int page : cache->pages()) {
      const int counted = refs[p].contains(page) ? refs[p].at(page) : 0;
      if (counted != cache->refcount(page)) {
        return absl::InternalError(absl::StrCat("pool ", p, " cached page ", page, " has ",
                                                cache->refcount(page), " references, ",
                                                counted, " held"));
      }
    }
    pages_held[p] += cache->num_pages();
    slots_held[p] += cache->num_snapshots();
  }
  if (num_waiting != m.waiting.size()) {
    return absl::InternalError(absl::StrCat("queue holds ", m.waiting.size(), " sequences; ",
                                            num_waiting, " are waiting"));
  }
  if (num_running != static_cast<int>(m.running.size()) ||
      num_running > m.config.max_num_seqs) {
    return absl::InternalError(absl::StrCat("running list has ", m.running.size(),
                                            " sequences; ", num_running, " are running"));
  }
  for (size_t p = 0; p < m.allocators.size(); ++p) {
    const PageAllocator& alloc = m.allocators[p];
    if (absl::Status s = alloc.CheckInvariants(); !s.ok()) return s;
    if (pages_held[p] != alloc.pages_used() || slots_held[p] != alloc.slots_used()) {
      return absl::InternalError(absl::StrCat("pool ", p, ": sequences and the prefix cache hold ",
                                              pages_held[p], " pages and ", slots_held[p],
                                              " slots but ", alloc.pages_used(), " and ",
                                              alloc.slots_used(), " are used"));
    }
  }
  return absl::OkStatus();
}

}  // namespace vqserve
