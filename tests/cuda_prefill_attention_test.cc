// the tensor-core prefill kernel (kernels/cuda/prefill/tiled_prefill.cuh) against the reference
// kernels (one warp per token and head, fp32; coded_prefill.cuh, prefill_attention.cu) on the
// same random step, for every page format, head_dim 64 and 128 and groups of 1, 3, 4 and 8
// query heads per kv head; fp16 pages also against float64. sequences start and end inside
// pages, cross the residual window's and the sink's edges and take up to 33 query tiles; the
// tiled kernel runs with the launcher's key splits, with one and with three.
// skips itself where there is no cuda device.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/prefill/prefill_tiles.h"
#include "tests/util/prefill_case.h"
#include "tests/util/cuda_device.h"

namespace vqserve {
namespace {

struct FormatCase {
  const char* name;
  testing::PrefillFormat format;
  int kivi_bits, dk, dv;
};

const FormatCase kFormats[] = {
    {"fp16", testing::PrefillFormat::kFp16, 2, 4, 4},
    {"kivi2", testing::PrefillFormat::kKivi, 2, 4, 4},
    {"kivi4", testing::PrefillFormat::kKivi, 4, 4, 4},
    {"vecinfer_k2v2", testing::PrefillFormat::kVecInfer, 2, 4, 4},
    {"vecinfer_k1v1", testing::PrefillFormat::kVecInfer, 2, 8, 8},
    {"vecinfer_k4v2", testing::PrefillFormat::kVecInfer, 2, 2, 4},
    {"commvq", testing::PrefillFormat::kCommVq, 2, 4, 4},
};

// (cached, new) per sequence: a first chunk, chunks across the residual edge (160 = 128 + 32)
// and page edges, one token, and a long chunk behind a long prefix.
const std::vector<std::pair<int, int>> kSeqs = {{0, 37},  {100, 100}, {31, 33},
                                                {500, 1}, {700, 300}, {0, 1}};

class CudaPrefillAttentionTest
    : public ::testing::TestWithParam<std::tuple<FormatCase, int /*head_dim*/, int /*group*/>> {};

TEST_P(CudaPrefillAttentionTest, TiledEqualsReference) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  const auto [fc, head_dim, group] = GetParam();
  for (int sink : {0, 32}) {
    if (fc.format == testing::PrefillFormat::kFp16 && sink > 0) continue;
    testing::PrefillCaseSpec s;
    s.format = fc.format;
    s.num_kv_heads = 2;
    s.num_heads = 2 * group;
    s.head_dim = head_dim;
    s.seqs = kSeqs;
    s.sink_tokens = sink;
    s.kivi_bits = fc.kivi_bits;
    s.vq_k_sub_dim = fc.dk;
    s.vq_v_sub_dim = fc.dv;
    s.seed = 7 + head_dim + 3 * group + sink;
    testing::DevicePrefillCase c(s);
    ASSERT_EQ(c.Launch(false), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> ref = c.Output();
    for (int splits : {0, 1, 3}) {  // key splits: 0 = the launcher's choice
      ASSERT_EQ(c.Launch(true, splits), "");
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> got = c.Output();
      const testing::PrefillError e = testing::ComparePrefill(got, ref, head_dim);
      const std::string what = std::string(fc.name) + " D=" + std::to_string(head_dim) +
                               " G=" + std::to_string(group) + " sink=" + std::to_string(sink) +
                               " splits=" + std::to_string(splits);
      EXPECT_EQ(e.nonfinite, 0) << what;  // every row written (the output was poisoned with NaN)
      EXPECT_LE(e.rel_l2, 2e-3) << what;
      EXPECT_LE(e.worst_row, 1e-2) << what;
      if (fc.format == testing::PrefillFormat::kFp16) {
        const std::vector<double> exact = c.Fp16Reference();
        EXPECT_LE(testing::ComparePrefill(got, exact, head_dim).rel_l2, 2e-3) << what;
        EXPECT_LE(testing::ComparePrefill(ref, exact, head_dim).rel_l2, 1e-5) << what;
      }
      std::printf("%-14s D=%3d G=%d sink=%2d tiles=%d splits=%d: rel %.2e worst row %.2e\n",
                  fc.name, head_dim, group, sink, c.num_tiles(), splits, e.rel_l2, e.worst_row);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaPrefillAttentionTest,
                         ::testing::Combine(::testing::ValuesIn(kFormats),
                                            ::testing::Values(64, 128),
                                            ::testing::Values(1, 3, 4, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_d" +
                                  std::to_string(std::get<1>(info.param)) + "_g" +
                                  std::to_string(std::get<2>(info.param));
                         });

// the query tiles: runs of <= 32 tokens of one sequence, each inside one coded-prefix run, that
// cover every step token once, in order (no device needed).
TEST(PrefillTilesTest, CoverTheStepInRunsOfOneCodedPrefix) {
  for (int residual : {0, 128}) {
    const std::vector<int32_t> first = {0, 300, 301}, cached = {0, 159, 1000}, fresh = {300, 1, 77};
    const std::vector<int32_t> tiles = cuda::PlanPrefillTiles(first, cached, fresh, residual, 32);
    int next = 0, seq = 0;
    for (size_t i = 0; i < tiles.size(); i += 2) {
      const int t0 = tiles[i], n = tiles[i + 1];
      EXPECT_EQ(t0, next);
      EXPECT_GE(n, 1);
      EXPECT_LE(n, cuda::kPrefillTileTokens);
      while (seq + 1 < 3 && t0 >= first[seq + 1]) ++seq;
      EXPECT_LE(t0 + n, first[seq] + fresh[seq]) << "a tile stays in one sequence";
      const int p0 = cached[seq] + t0 - first[seq];
      for (int p = p0; p < p0 + n; ++p) {
        EXPECT_EQ(cuda::PrefillCodedTokens(residual, 32, p + 1),
                  cuda::PrefillCodedTokens(residual, 32, p0 + 1));
      }
      next = t0 + n;
    }
    EXPECT_EQ(next, 378);
  }
}

// the key splits keep the grid within 4 blocks a sm, with >= 16 key tiles a split, at most 8
// (no device needed).
TEST(PrefillTilesTest, KeySplitsFillTheSms) {
  EXPECT_EQ(cuda::PrefillKeySplits(128, 132, 1008), 4);  // 8B shape, 512 tokens behind 32K
  EXPECT_EQ(cuda::PrefillKeySplits(24, 132, 1008), cuda::kMaxPrefillSplits);  // SmolLM2 shape
  EXPECT_EQ(cuda::PrefillKeySplits(24, 132, 40), 2);    // 40 key tiles: two splits of >= 16
  EXPECT_EQ(cuda::PrefillKeySplits(128, 132, 16), 1);   // a first chunk: one split
  EXPECT_EQ(cuda::PrefillKeySplits(600, 132, 1008), 1);  // more than 4 blocks a sm already
  EXPECT_EQ(cuda::PrefillKeySplits(0, 132, 1008), 1);
  // 2 splits of 512 tokens x 32 heads: 128-float output rows (4194304 floats), then (max, sum)
  // pairs (65536 floats), worked out by hand.
  EXPECT_EQ(cuda::PrefillWorkFloats(512, 32, 128, 2), 4259840);
}

}  // namespace
}  // namespace vqserve
