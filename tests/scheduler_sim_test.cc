// randomized scheduler runs: a tiny simulated model drives Schedule -> forward -> Postprocess ->
// Release over hundreds of sequences with random arrivals and aborts, and every step is
// checked against the scheduler's contract.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "gtest/gtest.h"
#include "scheduler/page_allocator.h"
#include "scheduler/scheduler.h"

namespace vqserve {
namespace {

PagePoolConfig Pool(const char* codec, int pages, int slots, int page_tokens, int residual) {
  PagePoolConfig c;
  c.codec = codec;
  c.num_pages = pages;
  c.num_slots = slots;
  c.page_tokens = page_tokens;
  c.residual_tokens = residual;
  return c;
}

// the "model": the token sampled at position p of sequence id; a recompute must reproduce it.
int32_t ModelToken(int64_t id, int position) {
  return static_cast<int32_t>((id * 2654435761u + position * 40503u) % 49152);
}

struct SimConfig {
  SchedulerConfig sched;
  std::vector<PagePoolConfig> pools;
  std::vector<int> pool_weights;  // relative share of sequences per pool
  int num_seqs = 300;
  int max_prompt = 60;
  int max_new = 40;
  int num_priorities = 3;
  double arrivals_per_step = 2.0;  // mean; all at step 0 when <= 0
  double abort_prob = 0.0;         // per live sequence per step
  uint32_t seed = 1;
  int max_steps = 200000;
};

struct SimResult {
  int completed = 0;
  int aborted = 0;
  int steps = 0;
  int64_t preemptions = 0;
  int max_seq_preemptions = 0;  // most times one sequence was preempted
  int64_t tokens_fed = 0;
  int64_t useful_tokens = 0;  // tokens each completed sequence needed fed once
  std::vector<int64_t> preempted_pool_count;
  std::vector<int> max_queue_steps;  // per pool: longest wait from Add to first admission
};

struct Track {
  std::shared_ptr<Sequence> seq;
  int fed_since_reset = 0;
  int added_step = 0;
  bool admitted_once = false;
};

class Sim {
 public:
  explicit Sim(const SimConfig& c) : c_(c), s_(c.sched, c.pools), rng_(c.seed) {
    result_.preempted_pool_count.assign(c.pools.size(), 0);
    result_.max_queue_steps.assign(c.pools.size(), 0);
  }

  SimResult Run() {
    while (next_id_ < c_.num_seqs || !live_.empty()) {
      if (result_.steps++ >= c_.max_steps) {
        ADD_FAILURE() << "no progress after " << c_.max_steps << " steps; live " << live_.size();
        break;
      }
      Arrivals();
      StepOnce();
      if (::testing::Test::HasFailure()) return result_;
    }
    for (size_t p = 0; p < c_.pools.size(); ++p) {
      EXPECT_EQ(s_.pages_free(p), s_.pages_total(p)) << "pool " << p;
      EXPECT_EQ(s_.slots_free(p), s_.slots_total(p)) << "pool " << p;
    }
    EXPECT_EQ(s_.num_waiting() + s_.num_running(), 0);
    EXPECT_EQ(result_.completed + result_.aborted, c_.num_seqs);
    result_.preemptions = s_.num_preemptions();
    std::printf("sim: %d steps, %d completed, %d aborted, %lld preemptions (at most %d of one sequence), fed %lld tokens "
                "for %lld useful, longest queue wait per pool:",
                result_.steps, result_.completed, result_.aborted,
                static_cast<long long>(result_.preemptions), result_.max_seq_preemptions,
                static_cast<long long>(result_.tokens_fed),
                static_cast<long long>(result_.useful_tokens));
    for (int w : result_.max_queue_steps) std::printf(" %d", w);
    std::printf("\n");
    return result_;
  }

 private:
  void Arrivals() {
    int n = c_.arrivals_per_step <= 0
                ? c_.num_seqs
                : std::poisson_distribution<int>(c_.arrivals_per_step)(rng_);
    for (int i = 0; i < n && next_id_ < c_.num_seqs; ++i) {
      auto seq = std::make_shared<Sequence>();
      seq->id = next_id_;
      seq->priority = static_cast<int>(rng_() % c_.num_priorities);
      std::discrete_distribution<int> pick(c_.pool_weights.begin(), c_.pool_weights.end());
      seq->pool = pick(rng_);
      seq->arrival_us = result_.steps * 1000 + i;
      int prompt = 1 + static_cast<int>(rng_() % c_.max_prompt);
      for (int t = 0; t < prompt; ++t) seq->tokens.push_back(ModelToken(-seq->id - 1, t));
      seq->num_prompt_tokens = prompt;
      seq->max_new_tokens = 1 + static_cast<int>(rng_() % c_.max_new);
      absl::Status st = s_.Add(seq);
      if (absl::IsResourceExhausted(st)) break;  // queue full: arrives again later
      ASSERT_TRUE(st.ok()) << st;
      live_[seq->id] = Track{seq, 0, result_.steps, false};
      ++next_id_;
    }
  }

  void StepOnce() {
    std::map<int64_t, SequenceStatus> before;
    for (auto& [id, t] : live_) before[id] = t.seq->status;
    ScheduleOutput out = s_.Schedule();
    CheckBatch(out, before);
    if (::testing::Test::HasFailure()) return;

    std::vector<int32_t> sampled;
    for (const ScheduledSeq& q : out.seqs) {
      if (q.samples) sampled.push_back(ModelToken(q.seq->id, q.seq->num_tokens()));
    }
    // a client cancels while the forward step runs: its result must be dropped.
    std::set<int64_t> cancelled;
    for (const ScheduledSeq& q : out.seqs) {
      if (Chance(c_.abort_prob)) cancelled.insert(q.seq->id);
    }
    for (int64_t id : cancelled) Abort(id);
    s_.Postprocess(out, sampled);
    for (const ScheduledSeq& q : out.seqs) {
      auto it = live_.find(q.seq->id);
      if (it == live_.end()) continue;
      it->second.fed_since_reset += q.num_new_tokens;
      result_.tokens_fed += q.num_new_tokens;
      const Sequence& seq = *q.seq;
      if (q.samples) {
        // the sampled token is appended and is the only one not yet in the cache.
        ASSERT_EQ(seq.num_computed, seq.num_tokens() - 1);
        ASSERT_EQ(seq.tokens.back(), ModelToken(seq.id, seq.num_tokens() - 1));
      } else {
        ASSERT_LE(seq.num_computed, seq.num_tokens() - 1);
      }
    }
    ASSERT_TRUE(s_.CheckInvariants().ok()) << s_.CheckInvariants();
    // finished sequences are released; random aborts hit waiting and running ones.
    std::vector<int64_t> finished, aborts;
    for (auto& [id, t] : live_) {
      if (t.seq->status == SequenceStatus::kFinished) {
        finished.push_back(id);
      } else if (Chance(c_.abort_prob)) {
        aborts.push_back(id);
      }
    }
    for (int64_t id : finished) Complete(id);
    for (int64_t id : aborts) Abort(id);
    ASSERT_TRUE(s_.CheckInvariants().ok()) << s_.CheckInvariants();
  }

  void CheckBatch(const ScheduleOutput& out, const std::map<int64_t, SequenceStatus>& before) {
    const SchedulerConfig& cfg = c_.sched;
    ASSERT_TRUE(s_.CheckInvariants().ok()) << s_.CheckInvariants();
    ASSERT_LE(s_.num_running(), cfg.max_num_seqs);
    ASSERT_LE(static_cast<int>(out.seqs.size()), cfg.max_num_seqs);
    int total = 0;
    std::set<int64_t> seen;
    bool in_decode_prefix = true;
    for (const ScheduledSeq& q : out.seqs) {
      const Sequence& seq = *q.seq;
      ASSERT_TRUE(seen.insert(seq.id).second) << "sequence " << seq.id << " scheduled twice";
      ASSERT_GE(q.num_new_tokens, 1);
      ASSERT_LE(seq.num_computed + q.num_new_tokens, seq.num_tokens());
      ASSERT_EQ(q.samples, seq.num_computed + q.num_new_tokens == seq.num_tokens());
      ASSERT_EQ(seq.status, SequenceStatus::kRunning);
      ASSERT_GE(seq.slot, 0);
      ASSERT_GE(static_cast<int>(seq.block_table.size()),
                PagesForTokens(c_.pools[seq.pool], seq.num_computed + q.num_new_tokens));
      bool was_waiting = before.at(seq.id) == SequenceStatus::kWaiting;
      bool decode = !was_waiting && seq.num_tokens() - seq.num_computed == 1;
      ASSERT_TRUE(!decode || in_decode_prefix) << "a decode after a prefill chunk";
      if (!decode) in_decode_prefix = false;
      if (was_waiting) {
        ASSERT_EQ(seq.num_computed, 0);
        ASSERT_TRUE(out.preempted.empty()) << "admitted in a step that preempted";
        Track& t = live_.at(seq.id);
        if (!t.admitted_once) {
          t.admitted_once = true;
          int& m = result_.max_queue_steps[seq.pool];
          m = std::max(m, result_.steps - t.added_step);
        }
        // no waiting sequence of higher priority in the same pool was passed over.
        for (auto& [id, other] : live_) {
          const Sequence& w = *other.seq;
          if (before.at(id) == SequenceStatus::kWaiting && w.status == SequenceStatus::kWaiting &&
              w.pool == seq.pool) {
            ASSERT_LE(w.priority, seq.priority) << "sequence " << id << " passed over";
          }
        }
      }
      total += q.num_new_tokens;
    }
    ASSERT_LE(total, cfg.max_batched_tokens);
    // a running decode is left out only when the budget is spent.
    for (auto& [id, t] : live_) {
      const Sequence& seq = *t.seq;
      if (before.at(id) == SequenceStatus::kRunning && seq.status == SequenceStatus::kRunning &&
          !seen.contains(id) && seq.num_tokens() - seq.num_computed == 1) {
        ASSERT_EQ(total, cfg.max_batched_tokens) << "decode " << id << " skipped";
      }
    }
    for (int64_t id : out.preempted) {
      const Track& t = live_.at(id);
      ASSERT_FALSE(seen.contains(id));
      ASSERT_EQ(before.at(id), SequenceStatus::kRunning);
      ASSERT_EQ(t.seq->status, SequenceStatus::kWaiting);
      ASSERT_EQ(t.seq->num_computed, 0);
      ASSERT_TRUE(t.seq->block_table.empty());
      ASSERT_EQ(t.seq->slot, -1);
      live_.at(id).fed_since_reset = 0;
      ++result_.preempted_pool_count[t.seq->pool];
    }
  }

  void Complete(int64_t id) {
    const Sequence& seq = *live_.at(id).seq;
    ASSERT_EQ(seq.num_generated(), seq.max_new_tokens);
    ASSERT_GE(seq.slot, 0);  // held until Release
    // chunked prefill fed each token exactly once since the last reset; the last sampled
    // token is never fed.
    ASSERT_EQ(live_.at(id).fed_since_reset, seq.num_tokens() - 1);
    for (int p = seq.num_prompt_tokens; p < seq.num_tokens(); ++p) {
      ASSERT_EQ(seq.tokens[p], ModelToken(id, p)) << "sequence " << id << " position " << p;
    }
    result_.useful_tokens += seq.num_tokens() - 1;
    result_.max_seq_preemptions = std::max(result_.max_seq_preemptions, seq.num_preemptions);
    ++result_.completed;
    s_.Release(id);
    EXPECT_EQ(s_.Find(id), nullptr);
    ASSERT_TRUE(seq.block_table.empty());
    ASSERT_EQ(seq.slot, -1);
    live_.erase(id);
  }

  void Abort(int64_t id) {
    auto it = live_.find(id);
    if (it == live_.end()) return;
    std::shared_ptr<Sequence> seq = it->second.seq;
    s_.Release(id);
    ASSERT_TRUE(seq->block_table.empty());
    ASSERT_EQ(seq->slot, -1);
    ++result_.aborted;
    live_.erase(it);
  }

  bool Chance(double p) {
    return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p;
  }

  SimConfig c_;
  Scheduler s_;
  std::mt19937 rng_;
  std::map<int64_t, Track> live_;
  int64_t next_id_ = 0;
  SimResult result_;
};

SimConfig MixedPools(uint32_t seed) {
  SimConfig c;
  c.seed = seed;
  c.sched.max_num_seqs = 12;
  c.sched.max_batched_tokens = 64;
  c.sched.max_model_len = 128;
  c.sched.max_waiting = 40;
  // a coded pool with a residual window, an fp16-like pool, a pool short of slots.
  c.pools = {Pool("kivi", 30, 8, 4, 8), Pool("fp16", 40, 16, 8, 0), Pool("vq", 200, 2, 16, 16)};
  c.pool_weights = {3, 3, 1};
  return c;
}

class SchedulerSim : public ::testing::TestWithParam<uint32_t> {};

TEST_P(SchedulerSim, RandomLoadWithAbortsCompletesAndReturnsEveryPage) {
  SimConfig c = MixedPools(GetParam());
  c.abort_prob = 0.004;
  SimResult r = Sim(c).Run();
  EXPECT_GT(r.completed, c.num_seqs / 2);
  EXPECT_GT(r.aborted, 0);
  EXPECT_GT(r.preemptions, 0) << "the load should be tight enough to preempt";
}

TEST_P(SchedulerSim, RandomLoadWithoutAbortsCompletesEverySequence) {
  SimConfig c = MixedPools(GetParam() + 100);
  SimResult r = Sim(c).Run();
  EXPECT_EQ(r.completed, c.num_seqs);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SchedulerSim, ::testing::Values(1u, 2u, 3u, 4u));

TEST(SchedulerSimThrash, FarTooLittleKvQueuesInsteadOfThrashing) {
  SimConfig c;
  c.sched.max_num_seqs = 32;
  c.sched.max_batched_tokens = 256;
  c.sched.max_model_len = 64;
  c.num_seqs = 150;
  c.max_prompt = 40;
  c.max_new = 24;
  c.arrivals_per_step = 0;  // all at once
  // 16 pages of 4 tokens after a 4-token window: one long sequence nearly fills the pool.
  c.pools = {Pool("tiny", 16, 32, 4, 4)};
  c.pool_weights = {1};
  SimResult r = Sim(c).Run();
  EXPECT_EQ(r.completed, c.num_seqs);
  // each preemption re-feeds one sequence; bounded well below one per sequence.
  EXPECT_LE(r.preemptions, c.num_seqs / 2) << "preemptions " << r.preemptions;
  EXPECT_LE(r.max_seq_preemptions, 4);
  EXPECT_LE(r.tokens_fed, r.useful_tokens * 3 / 2)
      << "fed " << r.tokens_fed << " useful " << r.useful_tokens;
}

TEST(SchedulerSimPools, APoolOutOfKvDoesNotStallAnother) {
  SimConfig c;
  c.sched.max_num_seqs = 64;
  c.sched.max_batched_tokens = 256;
  c.sched.max_model_len = 96;
  c.num_seqs = 300;
  c.max_prompt = 60;
  c.max_new = 30;
  c.arrivals_per_step = 3;
  c.pools = {Pool("starved", 24, 64, 4, 4), Pool("roomy", 4000, 64, 4, 4)};
  c.pool_weights = {1, 1};
  SimResult r = Sim(c).Run();
  EXPECT_EQ(r.completed, c.num_seqs);
  EXPECT_GT(r.preempted_pool_count[0], 0);
  EXPECT_EQ(r.preempted_pool_count[1], 0);
  EXPECT_LE(r.max_queue_steps[1], 3) << "starved pool wait " << r.max_queue_steps[0];
  EXPECT_GT(r.max_queue_steps[0], 10);
}

}  // namespace
}  // namespace vqserve
