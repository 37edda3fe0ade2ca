// the split-kv choice of the whole-wave decode kernels (kernels/cuda/decode/decode_splits.h): on the
// benchmark grid it picks what the fill-one-wave rule picked, and at the batch sizes where that
// rule ran blocks after each other on a few sms it splits finer.
#include "kernels/cuda/decode/decode_splits.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace vqserve::cuda {
namespace {

constexpr int kSms = 132;  // the H200's

// the rule before decode_splits.h, for whole-wave kernels: fill one wave of sms * per_sm
// blocks (round down) when the blocks fill less than 4/5 of it, else one split.
int EarlierRule(int blocks, int per_sm, int max_splits) {
  const int target = kSms * per_sm;
  int s = blocks * 5 < target * 4 ? target / blocks : 1;
  return std::clamp(s, 1, max_splits);
}

int MaxSplits(int len) { return std::clamp((len + 127) / 128 / 2, 1, 32); }

double BusiestSm(int blocks, int per_sm, int len, int fixed, int s) {
  return BusiestSmTime(blocks, kSms, per_sm, len, fixed, s);
}

struct Kind {
  const char* name;
  int per_sm, fixed;
};
constexpr Kind kKinds[] = {{"vecinfer v8", 1, 2048}, {"staged fp16 / kivi", 2, 128}};

TEST(DecodeSplitsTest, BenchmarkGridKeepsTheEarlierCounts) {
  for (const Kind& k : kKinds) {
    {  // the llama-3.1-8b shape of attention_bench (8 kv heads, one block each)
      const int kv_blocks = 8;
      for (int batch : {1, 8, 16, 32}) {
        for (int len : {8192, 32768, 131072}) {
          const int blocks = batch * kv_blocks;
          EXPECT_EQ(WholeWaveSplits(blocks, kSms, k.per_sm, len, k.fixed, MaxSplits(len)),
                    EarlierRule(blocks, k.per_sm, MaxSplits(len)))
              << k.name << " blocks " << blocks << " len " << len;
        }
      }
    }
  }
}

TEST(DecodeSplitsTest, BatchesPastOneWaveSplitFiner) {
  const int len = 32768;
  for (const Kind& k : kKinds) {
    const double at16 = BusiestSm(16 * 8, k.per_sm, len, k.fixed,
                                  WholeWaveSplits(16 * 8, kSms, k.per_sm, len, k.fixed, MaxSplits(len)));
    for (int batch : {17, 18, 20, 24}) {
      const int blocks = batch * 8;
      const int s = WholeWaveSplits(blocks, kSms, k.per_sm, len, k.fixed, MaxSplits(len));
      const int before = EarlierRule(blocks, k.per_sm, MaxSplits(len));
      EXPECT_GT(s, before) << k.name << " batch " << batch;
      // within 1.6x of 16 sequences' time (the fill-one-wave rule: 2x)
      EXPECT_LE(BusiestSm(blocks, k.per_sm, len, k.fixed, s), 1.6 * at16) << k.name << " batch " << batch;
      EXPECT_GE(BusiestSm(blocks, k.per_sm, len, k.fixed, before), 1.9 * at16) << k.name << " batch " << batch;
    }
  }
}

// cases worked out by hand from the model's description (busiest sm: ceil(blocks s / 132)
// blocks of len / s + fixed tokens each), so that the test does not reuse BusiestSmTime.
TEST(DecodeSplitsTest, HandWorkedCases) {
  // one sequence of the 8b shape (8 blocks), 8192 tokens, one block a sm: the rule fills the
  // wave, 132 / 8 = 16 splits (1 block a sm: 512 + 2048 = 2560); 17+ splits put 2 blocks on
  // some sm (2 x (482 + 2048) = 5060): 16.
  EXPECT_EQ(WholeWaveSplits(8, kSms, 1, 8192, 2048, 32), 16);
  // 17 sequences (136 blocks), 32768 tokens: the rule gives 1 split (136 x 5 >= 132 x 4), 2
  // blocks on 4 sms: 2 x 34816 = 69632. s = 2: 3 x 18432 = 55296; 3: 4 x 12971 = 51883;
  // 4: 5 x 10240 = 51200; 5: 6 x 8602 = 51610; 6: 7 x 7509 = 52565; 8: 9 x 6144 = 55296. the
  // least, 4, is 26% faster than the rule's (more than the 20% asked): 4.
  EXPECT_EQ(WholeWaveSplits(136, kSms, 1, 32768, 2048, 32), 4);
  // 16 sequences (128 blocks): one wave, 1 block a sm at 1 split: 34816; s = 2 puts 2 blocks on
  // 124 sms: 2 x 18432 = 36864, slower: the rule's 1 stays.
  EXPECT_EQ(WholeWaveSplits(128, kSms, 1, 32768, 2048, 32), 1);
}

TEST(DecodeSplitsTest, StaysWithinItsBounds) {
  EXPECT_EQ(WholeWaveSplits(0, kSms, 1, 4096, 2048, 32), 1);
  EXPECT_EQ(WholeWaveSplits(8, kSms, 1, 4096, 2048, 1), 1);
  for (int blocks = 1; blocks <= 600; blocks += 7) {
    for (int max_splits : {1, 3, 16, 32}) {
      const int s = WholeWaveSplits(blocks, kSms, 2, 65536, 128, max_splits);
      EXPECT_GE(s, 1);
      EXPECT_LE(s, max_splits);
    }
  }
}

TEST(DecodeSplitsTest, RingGetsItsOwnSplitWhereSmsAreFree) {
  // few coded tokens (max_splits 1): one split, then the ring's split beside it while every
  // block has an sm of its own to spare.
  for (int blocks : {1, 8, 48, 64, 66}) {
    const int s = WholeWaveSplits(blocks, kSms, 1, 128, 2048, MaxSplits(128));
    EXPECT_EQ(s, 1) << blocks;
    EXPECT_EQ(WithRingSplit(s, blocks, kSms, true), 2) << blocks;
    EXPECT_EQ(WithRingSplit(s, blocks, kSms, false), 1) << blocks;  // no ring: nothing to move
  }
  for (int blocks : {67, 128, 256}) {  // past half the sms the ring stays in the block
    EXPECT_EQ(WithRingSplit(1, blocks, kSms, true), 1) << blocks;
  }
  for (int splits : {2, 3, 16}) EXPECT_EQ(WithRingSplit(splits, 8, kSms, true), splits);
  EXPECT_EQ(WithRingSplit(1, 0, kSms, true), 1);
}

}  // namespace
}  // namespace vqserve::cuda
