// prefix caching in the scheduler: which pages a sequence shares, the ring snapshots and their
// restores, reference counts, eviction order, and that a shared page is never below a
// sequence's write frontier (Scheduler::CheckInvariants checks it every step here).
#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/prefix_cache.h"
#include "scheduler/scheduler.h"

namespace vqserve {
namespace {

PagePoolConfig Pool(int page_tokens, int residual, size_t page_bytes = 512,
                    size_t slot_bytes = 4096) {
  PagePoolConfig p;
  p.codec = "test";
  p.page_tokens = page_tokens;
  p.residual_tokens = residual;
  p.page_bytes = page_bytes;
  p.slot_bytes = slot_bytes;
  return p;
}

SchedulerConfig Config(int checkpoint = 64) {
  SchedulerConfig c;
  c.max_num_seqs = 8;
  c.max_batched_tokens = 1000;
  c.max_model_len = 4096;
  c.watermark = 0;
  c.prefix_cache = true;
  c.prefix_checkpoint_tokens = checkpoint;
  return c;
}

std::shared_ptr<Sequence> Seq(int64_t id, std::vector<int32_t> prompt, int max_new) {
  auto s = std::make_shared<Sequence>();
  s->id = id;
  s->arrival_us = id;
  s->tokens = std::move(prompt);
  s->num_prompt_tokens = static_cast<int>(s->tokens.size());
  s->max_new_tokens = max_new;
  return s;
}

std::vector<int32_t> Tokens(int n, int seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % 5000);
  return t;
}

// one step: schedules, "computes" (sampled token 7), releases the finished ones; returns the
// output, the restores and the snapshots of the step.
struct Step {
  ScheduleOutput out;
  std::vector<SlotCopy> snapshots;
};
Step RunStep(Scheduler& s) {
  Step st;
  st.out = s.Schedule();
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  std::vector<int32_t> sampled;
  for (const ScheduledSeq& x : st.out.seqs) {
    if (x.samples) sampled.push_back(7);
  }
  st.snapshots = s.Postprocess(st.out, sampled);
  std::vector<int64_t> done;
  for (const ScheduledSeq& x : st.out.seqs) {
    if (x.seq->status == SequenceStatus::kFinished) done.push_back(x.seq->id);
  }
  for (int64_t id : done) s.Release(id);
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  return st;
}

void RunToEnd(Scheduler& s, std::vector<Step>* steps = nullptr) {
  for (int i = 0; i < 10000 && (s.num_running() > 0 || s.num_waiting() > 0); ++i) {
    Step st = RunStep(s);
    if (steps) steps->push_back(std::move(st));
  }
}

TEST(BlockHash, CoversThePageAndEverythingBefore) {
  std::vector<int32_t> a = Tokens(64, 1), b = a;
  b[3] ^= 1;
  const uint64_t a0 = BlockHash(0, a.data(), 32), b0 = BlockHash(0, b.data(), 32);
  EXPECT_NE(a0, b0);
  // the same second page after different first pages hashes differently.
  EXPECT_NE(BlockHash(a0, a.data() + 32, 32), BlockHash(b0, a.data() + 32, 32));
  EXPECT_EQ(BlockHash(a0, a.data() + 32, 32), BlockHash(a0, b.data() + 32, 32));
}

TEST(PrefixCache, WithoutARingAnyCachedPageBoundaryIsAHit) {
  Scheduler s(Config(), {Pool(16, 0)}, SharedKvMemory{16, 8192});
  std::vector<int32_t> shared = Tokens(100, 1);
  ASSERT_TRUE(s.Add(Seq(1, shared, 4)).ok());
  RunToEnd(s);
  EXPECT_EQ(s.prefix_cached_pages(0), 6);  // the 6 full pages of 100 + 4 - 1 computed tokens
  // a prompt sharing 90 tokens: 5 full pages (80 tokens) come from the cache.
  std::vector<int32_t> p2(shared.begin(), shared.begin() + 90);
  for (int32_t t : Tokens(30, 2)) p2.push_back(t);
  auto b = Seq(2, p2, 4);
  ASSERT_TRUE(s.Add(b).ok());
  Step st = RunStep(s);
  ASSERT_EQ(st.out.seqs.size(), 1u);
  EXPECT_EQ(b->num_cached_tokens, 80);
  EXPECT_EQ(st.out.seqs[0].num_new_tokens, 120 - 80);  // only the rest is computed
  EXPECT_TRUE(st.out.restores.empty());                // no ring to restore
  EXPECT_EQ(s.prefix_hits(), 80);
  RunToEnd(s);
}

TEST(PrefixCache, WithARingOnlyCheckpointsWithASnapshotAreHits) {
  // pages of 16, a ring of 32, checkpoints every 64 tokens.
  Scheduler s(Config(64), {Pool(16, 32)}, SharedKvMemory{32, 8192});
  std::vector<int32_t> shared = Tokens(200, 3);
  auto a = Seq(1, shared, 2);
  ASSERT_TRUE(s.Add(a).ok());
  std::vector<Step> steps;
  RunToEnd(s, &steps);
  // the prefill was cut at 64, 128 and 192, and a snapshot taken at each.
  std::vector<int> chunks;
  int snapshots = 0;
  for (const Step& st : steps) {
    for (const ScheduledSeq& x : st.out.seqs) chunks.push_back(x.num_new_tokens);
    snapshots += static_cast<int>(st.snapshots.size());
  }
  EXPECT_EQ(std::vector<int>(chunks.begin(), chunks.begin() + 4), (std::vector<int>{64, 64, 64, 8}));
  EXPECT_EQ(snapshots, 3);
  EXPECT_EQ(s.prefix_snapshots(0), 3);
  // a prompt sharing 150 tokens resumes at 128: (128 - 32) / 16 = 6 pages and the ring of 128.
  std::vector<int32_t> p2(shared.begin(), shared.begin() + 150);
  for (int32_t t : Tokens(40, 4)) p2.push_back(t);
  auto b = Seq(2, p2, 2);
  ASSERT_TRUE(s.Add(b).ok());
  Step st = RunStep(s);
  EXPECT_EQ(b->num_cached_tokens, 128);
  ASSERT_EQ(st.out.restores.size(), 1u);
  EXPECT_EQ(st.out.restores[0].to, b->slot);
  EXPECT_EQ(st.out.seqs[0].num_new_tokens, 190 - 128);
  RunToEnd(s);
  // every page and ring is free of sequences; what remains is the cache's, and evictable.
  EXPECT_EQ(s.slots_used(0), s.prefix_snapshots(0));
  EXPECT_EQ(s.pages_used(0), s.prefix_evictable_pages(0));
}

TEST(PrefixCache, ASequenceWaitsForASharedPrefixBeingComputed) {
  // no ring: b shares 100 tokens with a and arrives with it; a unrelated c does not wait.
  Scheduler s(Config(), {Pool(16, 0)}, SharedKvMemory{16, 8192});
  std::vector<int32_t> shared = Tokens(100, 7), pa = shared, pb = shared;
  for (int32_t t : Tokens(20, 8)) pa.push_back(t);
  for (int32_t t : Tokens(20, 9)) pb.push_back(t);
  auto a = Seq(1, pa, 2), b = Seq(2, pb, 2), c = Seq(3, Tokens(50, 10), 2);
  for (const auto& q : {a, b, c}) ASSERT_TRUE(s.Add(q).ok());
  Step st = RunStep(s);
  ASSERT_EQ(st.out.seqs.size(), 2u);  // a and c; b waits for a's pages
  EXPECT_EQ(st.out.seqs[0].seq, a.get());
  EXPECT_EQ(st.out.seqs[1].seq, c.get());
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  st = RunStep(s);
  // b starts from the 6 full pages (96 tokens) a computed, and computes its other 24.
  EXPECT_EQ(b->num_cached_tokens, 96);
  bool fed = false;
  for (const ScheduledSeq& x : st.out.seqs) {
    if (x.seq == b.get()) {
      fed = true;
      EXPECT_EQ(x.num_new_tokens, 120 - 96);
    }
  }
  EXPECT_TRUE(fed);
  EXPECT_EQ(s.prefix_hits(), 96);
  RunToEnd(s);
  EXPECT_EQ(b->num_generated(), 2);
}

TEST(PrefixCache, WithARingASequenceWaitsForTheSharedCheckpoint) {
  // pages of 16, a ring of 32, checkpoints every 64: b shares 150 tokens with a, so it waits
  // while a computes [0, 64) and [64, 128), then resumes at a's snapshot at 128.
  Scheduler s(Config(64), {Pool(16, 32)}, SharedKvMemory{32, 8192});
  std::vector<int32_t> shared = Tokens(150, 11), pa = shared, pb = shared;
  for (int32_t t : Tokens(40, 12)) pa.push_back(t);
  for (int32_t t : Tokens(40, 13)) pb.push_back(t);
  auto a = Seq(1, pa, 2), b = Seq(2, pb, 2);
  ASSERT_TRUE(s.Add(a).ok());
  ASSERT_TRUE(s.Add(b).ok());
  for (int step = 0; step < 2; ++step) {
    Step st = RunStep(s);
    ASSERT_EQ(st.out.seqs.size(), 1u) << "step " << step;
    EXPECT_EQ(st.out.seqs[0].seq, a.get());
    EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  }
  Step st = RunStep(s);
  EXPECT_EQ(b->num_cached_tokens, 128);
  ASSERT_EQ(st.out.restores.size(), 1u);
  EXPECT_EQ(st.out.restores[0].to, b->slot);
  RunToEnd(s);
  EXPECT_EQ(b->num_generated(), 2);
  EXPECT_EQ(s.slots_used(0), s.prefix_snapshots(0));
  EXPECT_EQ(s.pages_used(0), s.prefix_evictable_pages(0));
}

TEST(PrefixCache, SharedPagesAreReferenceCountedAndEvictedWhenMemoryIsNeeded) {
  // 6 chunks of 4 pages (2 KiB) or of 2 slots: a hit shares pages with a running sequence,
  // and a sequence that needs the memory evicts the unreferenced cache.
  Scheduler s(Config(), {Pool(16, 0, 512, 1024)}, SharedKvMemory{6, 2048});
  std::vector<int32_t> shared = Tokens(64, 5);
  auto a = Seq(1, shared, 40);
  ASSERT_TRUE(s.Add(a).ok());
  RunStep(s);  // a: 64 prompt tokens computed, 4 pages
  std::vector<int32_t> p2 = shared;
  p2.push_back(9);
  auto b = Seq(2, p2, 2);
  ASSERT_TRUE(s.Add(b).ok());
  RunStep(s);
  EXPECT_EQ(b->num_cached_tokens, 64);
  EXPECT_EQ(b->block_table, std::vector<int32_t>(a->block_table.begin(), a->block_table.begin() + 4));
  RunToEnd(s);
  EXPECT_EQ(s.prefix_evictable_pages(0), s.pages_used(0));
  const int cached = s.prefix_cached_pages(0);
  EXPECT_GE(cached, 4);
  // a long unrelated sequence needs all the memory: the cache is evicted, nothing fails.
  auto c = Seq(3, Tokens(16 * 19, 6), 4);
  ASSERT_TRUE(s.Add(c).ok());
  RunToEnd(s);
  EXPECT_EQ(c->num_generated(), 4);
  EXPECT_LT(s.prefix_cached_pages(0) - 19, cached);
}

TEST(PrefixCache, RandomTrafficKeepsTheInvariants) {
  // shared prefixes, preemptions and evictions over a tight memory, two codecs (one with a
  // ring); CheckInvariants runs before and after every step.
  std::mt19937 rng(11);
  Scheduler s(Config(64), {Pool(16, 0, 1024, 512), Pool(16, 32, 256, 2048)},
              SharedKvMemory{24, 4096});
  std::vector<std::vector<int32_t>> prefixes = {Tokens(150, 20), Tokens(300, 21)};
  int64_t id = 1;
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 8; ++i) {
      std::vector<int32_t> p = prefixes[rng() % 2];
      p.resize(40 + rng() % p.size());
      for (int32_t t : Tokens(1 + static_cast<int>(rng() % 40), 100 + static_cast<int>(id))) {
        p.push_back(t);
      }
      auto q = Seq(id++, p, 1 + static_cast<int>(rng() % 60));
      q->pool = static_cast<int>(rng() % 2);
      ASSERT_TRUE(s.Add(q).ok());
    }
    RunToEnd(s);
  }
  EXPECT_GT(s.prefix_hits(), 0);
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(s.pages_used(p), s.prefix_evictable_pages(p));
    EXPECT_EQ(s.slots_used(p), s.prefix_snapshots(p));
  }
}

}  // namespace
}  // namespace vqserve
