// ForwardByCache (runtime/model/forward_by_cache.h): a batch mixing kv caches runs as one sub-step per
// cache, and the logit rows come back in batch order (want_logits, want_all_logits, no logits,
// no new tokens), as one step over the batch would give them.
#include "runtime/model/forward_by_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

namespace vqserve {
namespace {

constexpr int kVocab = 3;

// stand-ins for two caches: ForwardByCache only compares the pointers.
KvCache* FakeCache(uintptr_t id) { return reinterpret_cast<KvCache*>(id * 64); }

// a step's rows: token t of a sequence gives the row (t, t, t), in the order a model would.
void FakeStep(std::span<const ForwardSeq> batch, std::vector<float>* logits) {
  for (const ForwardSeq& s : batch) {
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      if (s.want_all_logits || (s.want_logits && i + 1 == s.tokens.size())) {
        logits->insert(logits->end(), kVocab, static_cast<float>(s.tokens[i]));
      }
    }
  }
}

TEST(ForwardByCacheTest, MixedCachesGiveRowsInBatchOrder) {
  const std::vector<int32_t> a = {1, 2}, b = {3}, c = {4, 5, 6}, d = {7}, none;
  std::vector<ForwardSeq> batch(5);
  batch[0].tokens = a, batch[0].cache = FakeCache(1);
  batch[1].tokens = b, batch[1].cache = FakeCache(2);
  batch[2].tokens = c, batch[2].cache = FakeCache(1), batch[2].want_all_logits = true;
  batch[3].tokens = none, batch[3].cache = FakeCache(2);
  batch[4].tokens = d, batch[4].cache = FakeCache(2), batch[4].want_logits = false;
  std::vector<float> want = {-1}, got = {-1};  // rows are appended after what is there
  FakeStep(batch, &want);
  int calls = 0;
  ForwardByCache(batch, kVocab, &got,
                 [&](std::span<const ForwardSeq> one, std::vector<float>* out) {
                   ++calls;
                   for (const ForwardSeq& s : one) EXPECT_EQ(s.cache, one[0].cache);
                   FakeStep(one, out);
                 });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(got, want);
}

TEST(ForwardByCacheTest, OneCacheIsOneCall) {
  const std::vector<int32_t> a = {1, 2}, b = {3};
  std::vector<ForwardSeq> batch(2);
  batch[0].tokens = a, batch[0].cache = FakeCache(1);
  batch[1].tokens = b, batch[1].cache = FakeCache(1);
  std::vector<float> got;
  int calls = 0;
  ForwardByCache(batch, kVocab, &got,
                 [&](std::span<const ForwardSeq> one, std::vector<float>* out) {
                   ++calls;
                   EXPECT_EQ(one.size(), 2u);
                   FakeStep(one, out);
                 });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(got, (std::vector<float>{2, 2, 2, 3, 3, 3}));
}

}  // namespace
}  // namespace vqserve
