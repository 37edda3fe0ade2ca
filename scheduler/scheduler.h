#ifndef VQSERVE_SCHEDULER_SCHEDULER_H_
#define VQSERVE_SCHEDULER_SCHEDULER_H_

#include <cstdint>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/sequence.h"

namespace vqserve {

struct SchedulerConfig {
  int max_num_seqs = 64;          // running sequences at most
  int max_batched_tokens = 512;   // tokens per step (prefill chunks + decodes)
  int max_model_len = 8192;       // prompt + max_new_tokens at most
  int max_waiting = 1024;         // queue bound; Add beyond it is refused
  // fraction of a pool's pages kept free when admitting into a pool that already runs
  // sequences (at least one page unless <= 0); room for running decodes to grow without preemption.
  double watermark = 0.01;
  // prefix caching (prefix_cache.h): a waiting sequence starts from the longest cached prefix of
  // its tokens; codecs with an fp16 residual ring resume only at multiples of
  // prefix_checkpoint_tokens (a multiple of the page), where prefills are cut and the ring is
  // snapshot.
  bool prefix_cache = false;  // `vqserve serve` turns it on (--no-prefix-cache: off)
  int prefix_checkpoint_tokens = 1024;
};

// one kv page pool (one per codec): its geometry, and its unit sizes when it shares memory.
struct PagePoolConfig {
  std::string codec;
  int num_pages = 0;         // pages of its own (ignored when memory is shared)
  int num_slots = 0;         // residual rings of its own (ignored when memory is shared)
  int page_tokens = 32;
  int residual_tokens = 128;
  size_t page_bytes = 0;     // one page, all layers (shared memory only)
  size_t slot_bytes = 0;     // one residual ring with its sink (shared memory only)
};

// one kv memory budget for every pool: `num_chunks` chunks of `chunk_bytes` that any pool
// borrows for its pages or residual rings and returns when they empty (kv_arena.h).
struct SharedKvMemory {
  int num_chunks = 0;
  size_t chunk_bytes = 0;
};

// one sequence's share of a step.
struct ScheduledSeq {
  Sequence* seq = nullptr;
  int num_new_tokens = 0;    // tokens fed this step, from seq->num_computed
  bool samples = false;      // the chunk reaches the last token: a new token is sampled
};

// a residual ring copied from one slot to another of a pool: a prefix hit's snapshot into the
// sequence's slot before the step, or a sequence's ring into a snapshot after it.
struct SlotCopy {
  int pool = 0;
  int from = -1;
  int to = -1;
};

struct ScheduleOutput {
  std::vector<ScheduledSeq> seqs;
  std::vector<SlotCopy> restores;  // to do before the step's forward pass
  std::vector<int64_t> preempted;  // ids preempted (by recompute) during this step
  bool empty() const { return seqs.empty(); }
};

// continuous batching at iteration level over paged kv (see scheduler.cc for the policy).
// not thread-safe: one engine thread drives it.
class Scheduler {
 public:
  // every pool with its own pages and slots (config.num_pages, num_slots).
  Scheduler(const SchedulerConfig& config, std::vector<PagePoolConfig> pools);
  // every pool over one shared memory: a sequence of any pool may use any free chunk.
  Scheduler(const SchedulerConfig& config, std::vector<PagePoolConfig> pools,
            const SharedKvMemory& memory);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // checks limits (max_model_len, pool index, pages a full sequence needs ≤ pool size,
  // queue bound) and queues the sequence; the scheduler keeps the pointer until Release.
  // errors: InvalidArgument naming the field ("pool:", "prompt:", "num_prompt_tokens:",
  // "max_new_tokens:"), AlreadyExists for a held id, ResourceExhausted when the queue is full.
  // resets num_computed, block_table, slot and status.
  absl::Status Add(std::shared_ptr<Sequence> seq);
  // picks this step's batch: running decodes first, then waiting prefills (chunked) under the
  // token budget; preempts by recompute (lowest priority, then newest) when pages run out.
  ScheduleOutput Schedule();
  // after the forward step: advances num_computed; appends `sampled[i]` to each sequence that
  // sampled (in the order of out.seqs with samples == true). a sequence that reaches
  // max_new_tokens becomes kFinished and is never scheduled again; its pages and slot stay
  // (readable for usage) until the caller Releases it. sequences released since Schedule are
  // skipped (their sampled entry is ignored).
  // returns the ring snapshots to copy now (before the next forward pass and before any
  // Release), when prefix caching is on.
  std::vector<SlotCopy> Postprocess(const ScheduleOutput& out,
                                    const std::vector<int32_t>& sampled);
  // finishes or aborts a sequence wherever it is; frees its pages and slot at once. unknown ids
  // are ignored. the sequence object is kept alive until the next Schedule call.
  void Release(int64_t id);

  int num_waiting() const;
  int num_running() const;
  int pages_free(int pool) const;
  int pages_total(int pool) const;
  int slots_free(int pool) const;
  int slots_total(int pool) const;
  int slots_used(int pool) const;
  // bytes of kv memory lent to `pool` (whole chunks) and held by its sequences (pages, rings).
  size_t bytes_lent(int pool) const;
  size_t bytes_held(int pool) const;
  // bytes of the shared memory (0 with private pools) and of its free chunks.
  size_t shared_bytes_total() const;
  size_t shared_bytes_free() const;
  // the sequence with this id while the scheduler holds it (until Release), else null.
  const Sequence* Find(int64_t id) const;
  // allocator invariants (free + used == total); every held page and slot belongs to a running
  // or finished-unreleased sequence whose block table covers its cached tokens; waiting ones
  // hold nothing. for tests and debug builds.
  absl::Status CheckInvariants() const;
  int64_t num_preemptions() const { return num_preemptions_; }
  // prefix cache: prompt tokens looked up at admissions and those found (counters), pages and
  // snapshots cached in `pool`.
  int64_t prefix_queries() const;
  int64_t prefix_hits() const;
  int prefix_cached_pages(int pool) const;
  int prefix_snapshots(int pool) const;
  // cached pages no sequence holds (evictable).
  int prefix_evictable_pages(int pool) const;
  int pages_used(int pool) const;
  const std::vector<PagePoolConfig>& pools() const { return pools_; }

 private:
  // filled in by scheduler.cc
  SchedulerConfig config_;
  std::vector<PagePoolConfig> pools_;
  int64_t num_preemptions_ = 0;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace vqserve

#endif  // VQSERVE_SCHEDULER_SCHEDULER_H_
