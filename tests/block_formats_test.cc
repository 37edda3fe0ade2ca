// the gpu's resident weight formats (kernels/cuda/weights/block_formats.h, compiled here for the
// host) dequantize every chunk of random rows to the values of the cpu's Dequantize
// (runtime/gguf, itself checked against gguf-py). runs without a gpu.
#include <algorithm>
#include <cmath>
#include <cstdint>
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

}  // namespace
}  // namespace vqserve
