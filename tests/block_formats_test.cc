// the gpu's resident weight formats (kernels/cuda/weights/block_formats.h, compiled here for the
// host) dequantize every chunk of random rows to the values of the cpu's Dequantize
// (runtime/gguf, itself checked against gguf-py), both through Dequant8 and through the gemv's
// 32-element vectors as integer runs (LoadVec + RunInts: the gemvs' quants and factors), which
// must cover every element of a row once.
// runs without a gpu.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/weights/block_formats.h"
#include "runtime/gguf/ggml_type.h"
#include "tests/util/random_blocks.h"

namespace vqserve {
namespace {

using cuda::BlockFormat;

TEST(BlockFormatsTest, Dequant8MatchesCpuDequantize) {
  std::mt19937 rng(28);
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0,
                            GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  for (GgmlType type : types) {
    const auto f = static_cast<BlockFormat>(static_cast<int>(type));
    ASSERT_TRUE(cuda::IsBlockFormat(static_cast<int>(type)));
    const GgmlTypeTraits t = GetTypeTraits(static_cast<uint32_t>(type));
    const int rows = 3, cols = 512;
    EXPECT_EQ(cuda::BlockElements(f), t.block_size) << t.name;
    EXPECT_EQ(size_t(cuda::BlockRowBytes(f, cols)), TensorBytes(type, cols)) << t.name;
    const std::vector<uint8_t> b = testing::RandomBlockRows(type, rows, cols, rng);
    std::vector<float> want(size_t(rows) * cols);
    Dequantize(type, b.data(), want.data(), int64_t{rows} * cols);
    for (int r = 0; r < rows; ++r) {
      const uint8_t* row = b.data() + r * cuda::BlockRowBytes(f, cols);
      for (int c = 0; c < cols / 8; ++c) {
        float got[8];
        cuda::Dequant8Of(f, row, c, got);
        for (int i = 0; i < 8; ++i) {
          const float w = want[size_t(r) * cols + 8 * c + i];
          ASSERT_NEAR(got[i], w, 1e-6 * std::max(1.0f, std::fabs(w)))
              << t.name << " row " << r << " element " << 8 * c + i;
        }
      }
    }
  }
  EXPECT_FALSE(cuda::IsBlockFormat(static_cast<int>(GgmlType::kQ5_0)));
  EXPECT_FALSE(cuda::IsBlockFormat(static_cast<int>(GgmlType::kF16)));
}

template <BlockFormat F>
void CheckVectors(GgmlType type, std::mt19937& rng) {
  const GgmlTypeTraits t = GetTypeTraits(static_cast<uint32_t>(type));
  // 1536 columns: 6 k-quant super-blocks, so q6_k's 210-byte blocks start at both 4-aligned
  // and 2-aligned addresses (Load16<2>'s two paths), as do q8_0's and q4_0's.
  const int rows = 3, cols = 1536;
  const std::vector<uint8_t> b = testing::RandomBlockRows(type, rows, cols, rng);
  std::vector<float> want(size_t(rows) * cols);
  Dequantize(type, b.data(), want.data(), int64_t{rows} * cols);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* row = b.data() + r * cuda::BlockRowBytes(F, cols);
    std::vector<int> seen(cols, 0);
    // the vectors as 16-element integer runs (the gemvs): a q + b is the element.
    for (int v = 0; v < cols / 32; ++v) {
      const cuda::RawVec q = cuda::LoadVec<F>(row, v);
      for (int run = 0; run < 2; ++run) {
        const cuda::IntRun ir = cuda::RunInts<F>(q, v, run);
        const int e = cuda::VecPartStart<F>(v, 2 * run);
        ASSERT_TRUE(e >= 0 && e + 16 <= cols && e % 16 == 0) << t.name << " vector " << v;
        for (int i = 0; i < 16; ++i) {
          ++seen[e + i];
          const int qi = static_cast<int8_t>(ir.q[i / 4] >> (8 * (i % 4)));
          if (F != BlockFormat::kQ8_0) {
            ASSERT_TRUE(qi >= 0 && qi < 64) << t.name;
          }
          const float w = want[size_t(r) * cols + e + i];
          const double got = double(ir.a) * qi + ir.b;
          ASSERT_NEAR(got, w, 1e-6 * std::max({1.0, std::fabs(got), std::fabs(double(ir.b))}))
              << t.name << " row " << r << " vector " << v << " run " << run << " element "
              << e + i;
        }
      }
    }
    for (int e = 0; e < cols; ++e) ASSERT_EQ(seen[e], 1) << t.name << " element " << e;
  }
}

TEST(BlockFormatsTest, VectorsCoverRowsAndMatchCpuDequantize) {
  std::mt19937 rng(29);
  CheckVectors<BlockFormat::kQ4_0>(GgmlType::kQ4_0, rng);
  CheckVectors<BlockFormat::kQ4_1>(GgmlType::kQ4_1, rng);
  CheckVectors<BlockFormat::kQ8_0>(GgmlType::kQ8_0, rng);
  CheckVectors<BlockFormat::kQ4_K>(GgmlType::kQ4_K, rng);
  CheckVectors<BlockFormat::kQ5_K>(GgmlType::kQ5_K, rng);
  CheckVectors<BlockFormat::kQ6_K>(GgmlType::kQ6_K, rng);
}

// the 2-byte-aligned load at every offset of a buffer: the bytes themselves.
TEST(BlockFormatsTest, Load16AtTwoByteAlignment) {
  alignas(16) uint8_t buf[64];
  for (int i = 0; i < 64; ++i) buf[i] = static_cast<uint8_t>(7 * i + 3);
  for (int off = 2; off + 16 <= 62; off += 2) {
    uint32_t got[4];
    cuda::Load16<2>(buf + off, got);
    EXPECT_EQ(std::memcmp(got, buf + off, 16), 0) << "offset " << off;
  }
}

}  // namespace
}  // namespace vqserve
