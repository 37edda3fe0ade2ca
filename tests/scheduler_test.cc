// deterministic scheduler cases: validation, chunked prefill, decode-first batching, priority,
// preemption victim order, release. the randomized runs are in scheduler_sim_test.cc.
#include "scheduler/scheduler.h"

#include <algorithm>
#include <memory>

#include "gtest/gtest.h"

namespace vqserve {
namespace {

PagePoolConfig Pool(int pages, int slots, int page_tokens, int residual) {
  PagePoolConfig c;
  c.codec = "test";
  c.num_pages = pages;
  c.num_slots = slots;
  c.page_tokens = page_tokens;
  c.residual_tokens = residual;
  return c;
}

std::shared_ptr<Sequence> Seq(int64_t id, int prompt, int max_new, int priority = 0,
                              int pool = 0, int64_t arrival = -1) {
  auto s = std::make_shared<Sequence>();
  s->id = id;
  s->priority = priority;
  s->pool = pool;
  s->arrival_us = arrival < 0 ? id : arrival;
  for (int i = 0; i < prompt; ++i) s->tokens.push_back(static_cast<int32_t>(id * 1000 + i));
  s->num_prompt_tokens = prompt;
  s->max_new_tokens = max_new;
  return s;
}

// the "model": the token sampled at position p of sequence id.
int32_t ModelToken(int64_t id, int position) { return static_cast<int32_t>(id * 7 + position); }

// one engine step: schedule, "forward", postprocess.
ScheduleOutput Step(Scheduler& s) {
  ScheduleOutput out = s.Schedule();
  std::vector<int32_t> sampled;
  for (const ScheduledSeq& q : out.seqs) {
    if (q.samples) sampled.push_back(ModelToken(q.seq->id, q.seq->num_tokens()));
  }
  s.Postprocess(out, sampled);
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  return out;
}

const ScheduledSeq* Find(const ScheduleOutput& out, int64_t id) {
  for (const ScheduledSeq& q : out.seqs) {
    if (q.seq->id == id) return &q;
  }
  return nullptr;
}

TEST(SchedulerAdd, ValidatesAndNamesTheField) {
  SchedulerConfig cfg;
  cfg.max_model_len = 100;
  cfg.max_waiting = 2;
  Scheduler s(cfg, {Pool(4, 2, 8, 16), Pool(0, 2, 8, 16)});
  auto expect = [&](std::shared_ptr<Sequence> seq, absl::StatusCode code, const char* word) {
    absl::Status st = s.Add(seq);
    EXPECT_EQ(st.code(), code) << st;
    EXPECT_NE(st.message().find(word), std::string::npos) << st;
  };
  expect(nullptr, absl::StatusCode::kInvalidArgument, "null");
  expect(Seq(1, 5, 5, 0, 2), absl::StatusCode::kInvalidArgument, "pool");
  expect(Seq(1, 5, 5, 0, -1), absl::StatusCode::kInvalidArgument, "pool");
  expect(Seq(1, 0, 5), absl::StatusCode::kInvalidArgument, "prompt");
  auto bad_count = Seq(1, 5, 5);
  bad_count->num_prompt_tokens = 4;
  expect(bad_count, absl::StatusCode::kInvalidArgument, "num_prompt_tokens");
  expect(Seq(1, 5, 0), absl::StatusCode::kInvalidArgument, "max_new_tokens");
  expect(Seq(1, 90, 11), absl::StatusCode::kInvalidArgument, "max_model_len");
  // 16 residual + 4 pages of 8: 48 tokens need 4 pages (fit), 56 need 5 (never fit).
  EXPECT_TRUE(s.Add(Seq(10, 40, 8)).ok());
  expect(Seq(11, 40, 16), absl::StatusCode::kInvalidArgument, "pages");
  expect(Seq(12, 1, 1, 0, 1), absl::StatusCode::kOk, "");  // needs no page in a 0-page pool
  expect(Seq(13, 1, 1), absl::StatusCode::kResourceExhausted, "queue");
  expect(Seq(10, 1, 1), absl::StatusCode::kAlreadyExists, "id");
  EXPECT_EQ(s.num_waiting(), 2);
  Step(s);  // both admitted: the queue has room again
  EXPECT_EQ(s.num_waiting(), 0);
  EXPECT_TRUE(s.Add(Seq(13, 1, 1)).ok());
}

TEST(Scheduler, ChunkedPrefillFeedsTheWholePromptThenDecodes) {
  SchedulerConfig cfg;
  cfg.max_batched_tokens = 100;
  Scheduler s(cfg, {Pool(64, 4, 8, 16)});
  auto seq = Seq(1, 250, 3);
  ASSERT_TRUE(s.Add(seq).ok());
  std::vector<int> fed;
  std::vector<bool> samples;
  while (seq->status != SequenceStatus::kFinished) {
    ScheduleOutput out = Step(s);
    ASSERT_EQ(out.seqs.size(), 1u);
    fed.push_back(out.seqs[0].num_new_tokens);
    samples.push_back(out.seqs[0].samples);
  }
  EXPECT_EQ(fed, (std::vector<int>{100, 100, 50, 1, 1}));
  EXPECT_EQ(samples, (std::vector<bool>{false, false, true, true, true}));
  EXPECT_EQ(seq->num_generated(), 3);
  for (int p = 250; p < 253; ++p) EXPECT_EQ(seq->tokens[p], ModelToken(1, p));
  // max_new_tokens reached: never scheduled again; pages stay readable until Release.
  EXPECT_EQ(s.num_running(), 0);
  EXPECT_EQ(seq->block_table.size(), 29u);  // 252 cached tokens: (252 - 16) / 8 pages
  EXPECT_TRUE(Step(s).empty());
  s.Release(1);
  EXPECT_EQ(s.Find(1), nullptr);
  EXPECT_EQ(s.pages_free(0), 64);
  EXPECT_EQ(s.slots_free(0), 4);
}

TEST(Scheduler, DecodesComeFirstAndShareTheBudget) {
  SchedulerConfig cfg;
  cfg.max_batched_tokens = 64;
  Scheduler s(cfg, {Pool(64, 8, 8, 16)});
  ASSERT_TRUE(s.Add(Seq(1, 10, 50)).ok());
  ASSERT_TRUE(s.Add(Seq(2, 20, 50)).ok());
  Step(s);  // both prompts in one step
  ASSERT_TRUE(s.Add(Seq(3, 200, 5)).ok());
  ScheduleOutput out = Step(s);
  ASSERT_EQ(out.seqs.size(), 3u);
  EXPECT_EQ(out.seqs[0].num_new_tokens, 1);
  EXPECT_EQ(out.seqs[1].num_new_tokens, 1);
  EXPECT_EQ(out.seqs[2].seq->id, 3);
  EXPECT_EQ(out.seqs[2].num_new_tokens, 62);
  EXPECT_FALSE(out.seqs[2].samples);
  out = Step(s);  // the running prefill continues after the decodes
  EXPECT_EQ(out.seqs[2].seq->id, 3);
  EXPECT_EQ(out.seqs[2].num_new_tokens, 62);
}

TEST(Scheduler, AdmitsByPriorityThenFifo) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 1;
  Scheduler s(cfg, {Pool(16, 4, 8, 16)});
  int64_t ids[] = {1, 2, 3, 4, 5};
  int prios[] = {0, 5, 0, 5, 9};
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.Add(Seq(ids[i], 4, 2, prios[i])).ok());
  std::vector<int64_t> order;
  for (int step = 0; step < 100 && order.size() < 5; ++step) {
    ScheduleOutput out = Step(s);
    ASSERT_LE(out.seqs.size(), 1u);
    for (const ScheduledSeq& q : out.seqs) {
      if (q.seq->num_computed == q.num_new_tokens && q.num_new_tokens == 4) {
        order.push_back(q.seq->id);
      }
      if (q.seq->status == SequenceStatus::kFinished) s.Release(q.seq->id);
    }
  }
  EXPECT_EQ(order, (std::vector<int64_t>{5, 2, 4, 1, 3}));
}

// pool of 6 pages of 4 tokens, no residual: three 8-token prompts fill it; at 12 tokens each
// decode needs a third page.
class PreemptionTest : public ::testing::Test {
 protected:
  PreemptionTest() : s_(Config(), {Pool(6, 8, 4, 0), Pool(100, 8, 4, 0)}) {}
  static SchedulerConfig Config() {
    SchedulerConfig cfg;
    cfg.watermark = 0;
    return cfg;
  }
  Scheduler s_;
};

TEST_F(PreemptionTest, VictimIsLowestPriorityThenNewest) {
  auto old_low = Seq(1, 8, 5, /*priority=*/0, 0, /*arrival=*/100);
  auto new_low = Seq(2, 8, 5, 0, 0, 200);
  auto new_high = Seq(3, 8, 5, 1, 0, 300);
  for (auto& q : {old_low, new_low, new_high}) ASSERT_TRUE(s_.Add(q).ok());
  Step(s_);
  EXPECT_EQ(s_.pages_free(0), 0);
  EXPECT_EQ(s_.num_running(), 3);
  auto queued = Seq(4, 8, 5, 0, 0, 50);  // older than all, but added later: queued behind
  auto other_pool = Seq(5, 8, 5, 0, 1, 60);
  ScheduleOutput out;
  for (int step = 0; step < 3; ++step) {
    out = Step(s_);
    EXPECT_TRUE(out.preempted.empty());
    if (step == 2) {  // add in the step before the preemption
      ASSERT_TRUE(s_.Add(queued).ok());
      ASSERT_TRUE(s_.Add(other_pool).ok());
    }
  }
  ASSERT_EQ(old_low->num_computed, 11);
  out = Step(s_);
  ASSERT_EQ(out.preempted, (std::vector<int64_t>{2}));
  EXPECT_EQ(s_.num_preemptions(), 1);
  EXPECT_EQ(new_low->status, SequenceStatus::kWaiting);
  EXPECT_EQ(new_low->num_computed, 0);
  EXPECT_TRUE(new_low->block_table.empty());
  EXPECT_EQ(new_low->slot, -1);
  EXPECT_EQ(new_low->num_tokens(), 8 + 4);  // generated tokens kept for the recompute
  EXPECT_EQ(new_low->num_preemptions, 1);
  ASSERT_NE(Find(out, 1), nullptr);
  ASSERT_NE(Find(out, 3), nullptr);
  // 1 and 3 reached max_new_tokens in that step; Release gives their pages back.
  EXPECT_EQ(old_low->status, SequenceStatus::kFinished);
  EXPECT_EQ(new_high->status, SequenceStatus::kFinished);
  EXPECT_EQ(s_.pages_free(0), 0);
  s_.Release(1);
  s_.Release(3);
  EXPECT_EQ(s_.pages_free(0), 6);
  // nothing is admitted in a step that preempted, not even into the roomy pool.
  EXPECT_EQ(Find(out, 5), nullptr);
  EXPECT_EQ(other_pool->status, SequenceStatus::kWaiting);
  // then the preempted sequence is admitted before the queued one.
  std::vector<int64_t> admitted;
  for (int step = 0; step < 50 && s_.num_waiting() + s_.num_running() > 0; ++step) {
    out = Step(s_);
    for (const ScheduledSeq& q : out.seqs) {
      if (q.seq->num_computed == q.num_new_tokens) admitted.push_back(q.seq->id);
      if (q.seq->status == SequenceStatus::kFinished) s_.Release(q.seq->id);
    }
  }
  EXPECT_EQ(admitted, (std::vector<int64_t>{2, 4, 5}));
  // the recompute re-fed prompt + generated and sampled the next token.
  ASSERT_EQ(new_low->num_generated(), 5);
  for (int p = 8; p < 13; ++p) EXPECT_EQ(new_low->tokens[p], ModelToken(2, p));
  EXPECT_EQ(s_.pages_free(0), 6);
  EXPECT_EQ(s_.slots_free(0), 8);
}

TEST_F(PreemptionTest, SameSizedSequencesPreemptTheNewest) {
  // arrival, not Add order, says which is newest: id 1 arrived last.
  for (int64_t id = 1; id <= 3; ++id) ASSERT_TRUE(s_.Add(Seq(id, 8, 5, 0, 0, 10 - id)).ok());
  for (int step = 0; step < 4; ++step) Step(s_);
  ScheduleOutput out = Step(s_);
  EXPECT_EQ(out.preempted, (std::vector<int64_t>{1}));
}

TEST(Scheduler, ReleaseFreesAtOnceWhereverTheSequenceIs) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 2;
  cfg.max_batched_tokens = 16;
  Scheduler s(cfg, {Pool(20, 4, 4, 4)});
  auto a = Seq(1, 40, 5), b = Seq(2, 40, 5), c = Seq(3, 40, 5);
  for (auto& q : {a, b, c}) ASSERT_TRUE(s.Add(q).ok());
  Step(s);  // a gets 16 tokens
  EXPECT_LT(s.pages_free(0), 20);
  s.Release(3);  // waiting
  EXPECT_EQ(s.num_waiting(), 1);
  s.Release(1);  // running, mid-prefill
  EXPECT_EQ(s.pages_free(0), 20);
  EXPECT_EQ(s.slots_free(0), 4);
  EXPECT_EQ(a->status, SequenceStatus::kFinished);
  EXPECT_TRUE(a->block_table.empty());
  s.Release(1);   // twice: ignored
  s.Release(77);  // unknown: ignored
  EXPECT_TRUE(s.CheckInvariants().ok());
  // released between Schedule and Postprocess: its result is dropped, the others' kept.
  ASSERT_TRUE(s.Add(Seq(4, 2, 5)).ok());
  for (int i = 0; i < 3; ++i) Step(s);  // b is prefilled (40 tokens); 4 admitted and decoding
  ScheduleOutput out = s.Schedule();
  ASSERT_EQ(out.seqs.size(), 2u);
  ASSERT_TRUE(out.seqs[0].samples && out.seqs[1].samples);
  int64_t gone = out.seqs[0].seq->id, kept = out.seqs[1].seq->id;
  const Sequence* kept_seq = s.Find(kept);
  int kept_tokens = kept_seq->num_tokens();
  s.Release(gone);
  s.Postprocess(out, {111, 222});
  EXPECT_EQ(kept_seq->num_tokens(), kept_tokens + 1);
  EXPECT_EQ(kept_seq->tokens.back(), 222);
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  s.Release(kept);
  EXPECT_EQ(s.pages_free(0), 20);
  EXPECT_EQ(s.slots_free(0), 4);
  EXPECT_EQ(s.num_running() + s.num_waiting(), 0);
}

TEST(Scheduler, MaxNumSeqsAndSlotsBoundTheBatch) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 3;
  Scheduler s(cfg, {Pool(100, 2, 4, 4), Pool(100, 10, 4, 4)});
  for (int64_t id = 1; id <= 6; ++id) ASSERT_TRUE(s.Add(Seq(id, 4, 3, 0, id <= 3 ? 0 : 1)).ok());
  ScheduleOutput out = Step(s);
  // pool 0 has 2 slots: ids 1, 2 run; 3 waits for a slot, 4 (pool 1) fills the third place.
  ASSERT_EQ(out.seqs.size(), 3u);
  EXPECT_NE(Find(out, 1), nullptr);
  EXPECT_NE(Find(out, 2), nullptr);
  EXPECT_NE(Find(out, 4), nullptr);
  EXPECT_EQ(s.slots_free(0), 0);
}

}  // namespace
}  // namespace vqserve
