// one kv memory shared by every codec's pool: the arena's units never overlap, memory moves
// between codecs in chunks, admission reasons in chunks over every pool, and the fairness
// policy (no overtaking across codecs) holds.
#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/kv_arena.h"
#include "scheduler/page_allocator.h"
#include "scheduler/scheduler.h"

namespace vqserve {
namespace {

TEST(KvArena, UnitsOfDifferentPoolsNeverShareAByte) {
  KvArena arena(12, 1000);
  UnitPool a(&arena, 0, 300), b(&arena, 1, 170), c(&arena, 2, 450);
  std::mt19937 rng(7);
  std::vector<std::pair<UnitPool*, int>> held;
  for (int step = 0; step < 3000; ++step) {
    UnitPool* pool = std::vector<UnitPool*>{&a, &b, &c}[rng() % 3];
    if (rng() % 3 != 0) {
      const int u = pool->Take(step);
      if (u >= 0) held.push_back({pool, u});
    } else if (!held.empty()) {
      const size_t i = rng() % held.size();
      held[i].first->Free(held[i].second);
      held.erase(held.begin() + i);
    }
    // the byte ranges of every held unit are disjoint and inside the arena.
    std::vector<std::pair<size_t, size_t>> ranges;
    for (const auto& [p, u] : held) {
      ranges.push_back({p->unit_bytes() * u, p->unit_bytes() * (u + 1)});
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 0; i < ranges.size(); ++i) {
      ASSERT_LE(ranges[i].second, arena.total_bytes());
      if (i > 0) ASSERT_LE(ranges[i - 1].second, ranges[i].first) << "step " << step;
    }
    ASSERT_EQ(a.chunks_held() + b.chunks_held() + c.chunks_held() + arena.chunks_free(), 12);
  }
  for (const auto& [p, u] : held) p->Free(u);
  EXPECT_EQ(arena.chunks_free(), 12);  // every chunk went back
}

TEST(KvArena, AChunkGoesBackWhenItsLastUnitIsFreed) {
  KvArena arena(2, 1000);
  UnitPool a(&arena, 0, 250), b(&arena, 1, 500);
  std::vector<int> units;
  for (int i = 0; i < 8; ++i) units.push_back(a.Take(1));  // a takes both chunks
  EXPECT_EQ(arena.chunks_free(), 0);
  EXPECT_EQ(b.Take(2), -1);
  for (int i = 0; i < 4; ++i) a.Free(units[i]);  // the first chunk empties
  EXPECT_EQ(arena.chunks_free(), 1);
  EXPECT_GE(b.Take(2), 0);  // and serves the other codec
}

PagePoolConfig SharedPool(const char* codec, size_t page_bytes, size_t slot_bytes,
                          int page_tokens, int residual) {
  PagePoolConfig p;
  p.codec = codec;
  p.page_tokens = page_tokens;
  p.residual_tokens = residual;
  p.page_bytes = page_bytes;
  p.slot_bytes = slot_bytes;
  return p;
}

std::shared_ptr<Sequence> Seq(int64_t id, int pool, int prompt, int max_new, int64_t t) {
  auto s = std::make_shared<Sequence>();
  s->id = id;
  s->pool = pool;
  s->arrival_us = t;
  s->tokens.assign(prompt, 1);
  s->num_prompt_tokens = prompt;
  s->max_new_tokens = max_new;
  return s;
}

// runs the scheduler to the end, returning ids in the order they were first scheduled.
std::vector<int64_t> RunAll(Scheduler& s, int max_steps = 10000) {
  std::vector<int64_t> order;
  std::set<int64_t> seen;
  for (int step = 0; step < max_steps && (s.num_waiting() > 0 || s.num_running() > 0); ++step) {
    ScheduleOutput out = s.Schedule();
    EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
    std::vector<int32_t> sampled;
    std::vector<int64_t> done;
    for (const ScheduledSeq& x : out.seqs) {
      if (seen.insert(x.seq->id).second) order.push_back(x.seq->id);
      if (x.samples) sampled.push_back(1);
    }
    s.Postprocess(out, sampled);
    for (const ScheduledSeq& x : out.seqs) {
      if (x.seq->status == SequenceStatus::kFinished) done.push_back(x.seq->id);
    }
    for (int64_t id : done) s.Release(id);
  }
  return order;
}

SchedulerConfig Config() {
  SchedulerConfig c;
  c.max_num_seqs = 16;
  c.max_batched_tokens = 256;
  c.max_model_len = 16384;
  c.watermark = 0;
  return c;
}

TEST(SharedKvMemory, OneCodecMayUseEveryFreeChunk) {
  // a "fp16" pool (4 KiB pages) and a "coded" one (512 B pages), 16 chunks of 16 KiB.
  Scheduler s(Config(), {SharedPool("fp16", 4096, 2048, 16, 0), SharedPool("coded", 512, 8192, 16, 32)},
              SharedKvMemory{16, 16384});
  // alone, the fp16 pool can hold pages in every chunk but the one its slot takes.
  EXPECT_EQ(s.pages_total(0), 16 * 4);
  EXPECT_EQ(s.pages_total(1), 16 * 32);
  // a sequence of 15 chunks of fp16 pages (60 pages of 16 tokens) fits.
  ASSERT_TRUE(s.Add(Seq(1, 0, 60 * 16 - 8, 8, 0)).ok());
  ScheduleOutput out = s.Schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(s.shared_bytes_free(), 16384u * 16 - s.bytes_lent(0));
  RunAll(s);
  EXPECT_EQ(s.shared_bytes_free(), 16384u * 16);
  // then the coded pool takes the same memory: 15 chunks of its pages.
  ASSERT_TRUE(s.Add(Seq(2, 1, 15 * 32 * 16 - 8, 8, 1)).ok());
  RunAll(s);
  EXPECT_EQ(s.shared_bytes_free(), 16384u * 16);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SharedKvMemory, NoCodecOvertakesAnotherThatWaits) {
  // fairness: a long coded request waits for memory held by fp16 requests; fp16 requests that
  // arrive after it are not admitted before it, however small.
  Scheduler s(Config(), {SharedPool("fp16", 4096, 2048, 16, 0), SharedPool("coded", 512, 8192, 16, 32)},
              SharedKvMemory{8, 16384});
  int64_t id = 1, t = 0;
  // three fp16 requests of 4 + 4 pages (one chunk each at first, two at the end) and their
  // slots (one chunk).
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.Add(Seq(id++, 0, 4 * 16, 64, t++)).ok());
  const int64_t big = id++;
  // 190 pages (6 chunks) and a slot chunk: 7 of the 8.
  ASSERT_TRUE(s.Add(Seq(big, 1, 6 * 32 * 16, 8, t++)).ok());
  std::vector<int64_t> later;
  for (int i = 0; i < 6; ++i) {
    later.push_back(id);
    ASSERT_TRUE(s.Add(Seq(id++, 0, 20, 4, t++)).ok());
  }
  std::vector<int64_t> order = RunAll(s);
  auto pos = [&](int64_t x) { return std::find(order.begin(), order.end(), x) - order.begin(); };
  ASSERT_LT(pos(big), static_cast<long>(order.size())) << "the coded request never ran";
  for (int64_t x : later) EXPECT_LT(pos(big), pos(x)) << "request " << x << " overtook";
  EXPECT_EQ(s.shared_bytes_free(), 16384u * 8);
}

TEST(SharedKvMemory, DecodesPreemptAcrossCodecsAndEverythingFinishes) {
  // random mixed traffic over a tight memory: every request finishes (preempted ones recompute)
  // and every chunk is free at the end.
  std::mt19937 rng(3);
  Scheduler s(Config(), {SharedPool("fp16", 4096, 2048, 16, 0), SharedPool("coded", 512, 8192, 16, 32),
                         SharedPool("other", 1024, 4096, 16, 16)},
              SharedKvMemory{10, 16384});
  int64_t t = 0;
  for (int64_t id = 1; id <= 60; ++id) {
    const int pool = static_cast<int>(rng() % 3);
    ASSERT_TRUE(s.Add(Seq(id, pool, 20 + static_cast<int>(rng() % 300),
                          1 + static_cast<int>(rng() % 200), t++))
                    .ok());
  }
  RunAll(s, 100000);
  EXPECT_EQ(s.num_waiting(), 0);
  EXPECT_EQ(s.num_running(), 0);
  EXPECT_EQ(s.shared_bytes_free(), 16384u * 10);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

}  // namespace
}  // namespace vqserve
