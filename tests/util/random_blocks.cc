#include "tests/util/random_blocks.h"

#include <cstring>

namespace vqserve::testing {

std::vector<uint8_t> RandomBlockRows(GgmlType type, int64_t rows, int64_t cols,
                                     std::mt19937& rng) {
  const GgmlTypeTraits t = GetTypeTraits(static_cast<uint32_t>(type));
  std::vector<uint8_t> b(TensorBytes(type, rows * cols));
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  auto put = [&](size_t at) {
    const uint16_t h = FloatToHalf(u(rng));
    std::memcpy(&b[at], &h, 2);
  };
  for (size_t blk = 0; blk < b.size() / t.type_size; ++blk) {
    const size_t at = blk * t.type_size;
    if (type == GgmlType::kQ6_K) {
      put(at + 208);
    } else {
      put(at);
      if (type != GgmlType::kQ8_0 && type != GgmlType::kQ4_0) put(at + 2);  // the min
    }
  }
  return b;
}

}  // namespace vqserve::testing
