#include "scheduler/page_allocator.h"

#include <random>
#include <set>

#include "gtest/gtest.h"
#include "runtime/kv/kv_cache.h"

namespace vqserve {
namespace {

// reference: feeds tokens one by one into a residual ring and flushes the oldest page whenever
// residual + page tokens are buffered; returns the pages written.
int SimulatedPages(int residual, int page, int num_tokens) {
  int buffered = 0, pages = 0;
  for (int t = 0; t < num_tokens; ++t) {
    ++buffered;
    if (buffered == residual + page) {
      buffered -= page;
      ++pages;
    }
  }
  return pages;
}

PagePoolConfig Pool(int pages, int slots, int page_tokens, int residual) {
  PagePoolConfig c;
  c.codec = "test";
  c.num_pages = pages;
  c.num_slots = slots;
  c.page_tokens = page_tokens;
  c.residual_tokens = residual;
  return c;
}

Sequence Seq(int64_t id, int num_computed) {
  Sequence s;
  s.id = id;
  s.num_computed = num_computed;
  return s;
}

TEST(PagesForTokens, MatchesRingSimulation) {
  for (int residual : {0, 1, 7, 32, 128}) {
    for (int page : {1, 3, 16, 32}) {
      PagePoolConfig pool = Pool(0, 0, page, residual);
      for (int n = 0; n <= 400; ++n) {
        ASSERT_EQ(PagesForTokens(pool, n), SimulatedPages(residual, page, n))
            << "residual " << residual << " page " << page << " n " << n;
      }
    }
  }
}

// the scheduler's copy of the rule must agree with the one the kv cache stores by.
TEST(PagesForTokens, AgreesWithTheRuntimeKvCacheRule) {
  for (int residual : {0, 16, 128}) {
    for (int page : {8, 32, 64}) {
      KvCacheSpec spec;
      spec.page_tokens = page;
      spec.residual_tokens = residual;
      PagePoolConfig pool = Pool(0, 0, page, residual);
      for (int n = 0; n <= 1000; ++n) {
        ASSERT_EQ(PagesForTokens(pool, n), vqserve::PagesForTokens(spec, n)) << n;
      }
    }
  }
}

TEST(PagesForTokens, MaxTokensForPagesIsTheLargestFit) {
  for (int residual : {0, 5, 128}) {
    for (int page : {1, 4, 32}) {
      PagePoolConfig pool = Pool(0, 0, page, residual);
      for (int p = 0; p <= 12; ++p) {
        int best = -1;
        for (int t = 0; t <= residual + 20 * page; ++t) {
          if (SimulatedPages(residual, page, t) <= p) best = t;
        }
        EXPECT_EQ(MaxTokensForPages(pool, p), best) << residual << " " << page << " " << p;
      }
    }
  }
}

TEST(PageAllocator, PlanIsConstAndApplyCommits) {
  PageAllocator alloc(Pool(10, 2, 4, 8));
  Sequence s = Seq(7, 0);
  std::optional<PagePlan> plan = alloc.Plan(s, 20);  // 20 tokens: (20 - 8) / 4 = 3 pages
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->new_pages, 3);
  EXPECT_TRUE(plan->new_slot);
  EXPECT_EQ(alloc.pages_free(), 10);
  EXPECT_EQ(alloc.slots_free(), 2);
  alloc.Apply(&s, *plan);
  EXPECT_EQ(s.block_table.size(), 3u);
  EXPECT_GE(s.slot, 0);
  EXPECT_EQ(alloc.pages_free(), 7);
  EXPECT_EQ(alloc.slots_free(), 1);
  for (int32_t page : s.block_table) EXPECT_EQ(alloc.page_owner(page), 7);
  EXPECT_EQ(alloc.slot_owner(s.slot), 7);
  // next step: 20 computed, 3 more tokens stay within 3 pages; 4 more need a fourth.
  s.num_computed = 20;
  EXPECT_EQ(alloc.Plan(s, 3)->new_pages, 0);
  EXPECT_FALSE(alloc.Plan(s, 3)->new_slot);
  EXPECT_EQ(alloc.Plan(s, 4)->new_pages, 1);
  EXPECT_TRUE(alloc.CheckInvariants().ok());
  alloc.Free(&s);
  EXPECT_TRUE(s.block_table.empty());
  EXPECT_EQ(s.slot, -1);
  EXPECT_EQ(alloc.pages_free(), 10);
  EXPECT_EQ(alloc.slots_free(), 2);
  EXPECT_TRUE(alloc.CheckInvariants().ok());
}

TEST(PageAllocator, PlanFailsWithoutPagesOrSlot) {
  PageAllocator alloc(Pool(2, 1, 4, 0));
  Sequence a = Seq(1, 0), b = Seq(2, 0);
  EXPECT_FALSE(alloc.Plan(a, 12).has_value());  // 3 pages > 2
  alloc.Apply(&a, *alloc.Plan(a, 8));
  EXPECT_EQ(alloc.pages_free(), 0);
  EXPECT_FALSE(alloc.Plan(b, 1).has_value());  // no slot left, though no page is needed
  alloc.Free(&a);
  EXPECT_TRUE(alloc.Plan(b, 1).has_value());
}

TEST(PageAllocator, ZeroPagesWhileInResidualWindow) {
  PageAllocator alloc(Pool(4, 1, 32, 128));
  Sequence s = Seq(1, 0);
  EXPECT_EQ(alloc.Plan(s, 159)->new_pages, 0);
  EXPECT_EQ(alloc.Plan(s, 160)->new_pages, 1);
}

TEST(PageAllocator, FittableTokensMatchesPlanSearch) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    int page = 1 + rng() % 8, residual = rng() % 20, pages = rng() % 10;
    PageAllocator alloc(Pool(pages + 3, 2, page, residual));
    Sequence other = Seq(99, 0);
    alloc.Apply(&other, *alloc.Plan(other, MaxTokensForPages(alloc.config(), 3)));
    Sequence s = Seq(1, 0);
    int start = rng() % (residual + 4 * page + 1);
    std::optional<PagePlan> plan = alloc.Plan(s, start);
    if (!plan) continue;
    alloc.Apply(&s, *plan);
    s.num_computed = start;
    int want = rng() % 200;
    int brute = 0;
    for (int n = 1; n <= want; ++n) {
      if (alloc.Plan(s, n).has_value()) brute = n;
    }
    EXPECT_EQ(alloc.FittableTokens(s, want), brute) << "trial " << trial;
  }
}

TEST(PageAllocator, RandomAllocFreeKeepsInvariants) {
  std::mt19937 rng(11);
  PageAllocator alloc(Pool(64, 12, 4, 6));
  std::vector<Sequence> seqs(16);
  for (int i = 0; i < 16; ++i) seqs[i] = Seq(i, 0);
  for (int step = 0; step < 5000; ++step) {
    Sequence& s = seqs[rng() % seqs.size()];
    if (rng() % 4 == 0) {
      alloc.Free(&s);
      s.num_computed = 0;
    } else {
      int n = 1 + rng() % 20;
      if (std::optional<PagePlan> plan = alloc.Plan(s, n)) {
        alloc.Apply(&s, *plan);
        s.num_computed += n;
        ASSERT_GE(static_cast<int>(s.block_table.size()),
                  SimulatedPages(6, 4, s.num_computed));
      }
    }
    ASSERT_TRUE(alloc.CheckInvariants().ok()) << alloc.CheckInvariants();
    std::set<int32_t> pages, slots;
    int held = 0;
    for (const Sequence& q : seqs) {
      held += static_cast<int>(q.block_table.size());
      pages.insert(q.block_table.begin(), q.block_table.end());
      if (q.slot >= 0) {
        ASSERT_TRUE(slots.insert(q.slot).second);
      }
    }
    ASSERT_EQ(static_cast<int>(pages.size()), held);  // no page in two tables
    ASSERT_EQ(held + alloc.pages_free(), alloc.pages_total());
  }
  for (Sequence& s : seqs) alloc.Free(&s);
  EXPECT_EQ(alloc.pages_free(), 64);
  EXPECT_EQ(alloc.slots_free(), 12);
}

TEST(PageAllocatorDeathTest, StalePlanAborts) {
  PageAllocator alloc(Pool(2, 2, 4, 0));
  Sequence a = Seq(1, 0), b = Seq(2, 0);
  PagePlan pa = *alloc.Plan(a, 8);
  PagePlan pb = *alloc.Plan(b, 8);
  alloc.Apply(&a, pa);
  EXPECT_DEATH(alloc.Apply(&b, pb), "scheduler check failed");
}

}  // namespace
}  // namespace vqserve
