#ifndef VQSERVE_SCHEDULER_SCHEDULER_H_
#define VQSERVE_SCHEDULER_SCHEDULER_H_

#include <cstdint>
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
};

// one kv page pool (one per codec): page geometry only, no bytes.
struct PagePoolConfig {
  std::string codec;
  int num_pages = 0;
  int num_slots = 0;         // residual rings
  int page_tokens = 32;
  int residual_tokens = 128;
};

// one sequence's share of a step.
struct ScheduledSeq {
  Sequence* seq = nullptr;
  int num_new_tokens = 0;    // tokens fed this step, from seq->num_computed
  bool samples = false;      // the chunk reaches the last token: a new token is sampled
};

struct ScheduleOutput {
  std::vector<ScheduledSeq> seqs;
  std::vector<int64_t> preempted;  // ids preempted (by recompute) during this step
  bool empty() const { return seqs.empty(); }
};

// continuous batching at iteration level over paged kv (see scheduler.cc for the policy).
// not thread-safe: one engine thread drives it.
class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, std::vector<PagePoolConfig> pools);
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
  void Postprocess(const ScheduleOutput& out, const std::vector<int32_t>& sampled);
  // finishes or aborts a sequence wherever it is; frees its pages and slot at once. unknown ids
  // are ignored. the sequence object is kept alive until the next Schedule call.
  void Release(int64_t id);

  int num_waiting() const;
  int num_running() const;
  int pages_free(int pool) const;
  int pages_total(int pool) const;
  int slots_free(int pool) const;
  int slots_total(int pool) const;
  // the sequence with this id while the scheduler holds it (until Release), else null.
  const Sequence* Find(int64_t id) const;
  // allocator invariants (free + used == total); every held page and slot belongs to a running
  // or finished-unreleased sequence whose block table covers its cached tokens; waiting ones
  // hold nothing. for tests and debug builds.
  absl::Status CheckInvariants() const;
  int64_t num_preemptions() const { return num_preemptions_; }
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
