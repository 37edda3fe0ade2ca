#ifndef VQSERVE_TESTS_UTIL_RANDOM_BLOCKS_H_
#define VQSERVE_TESTS_UTIL_RANDOM_BLOCKS_H_

// random matrices of ggml blocks for the weight-format tests.

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/gguf/ggml_type.h"

namespace vqserve::testing {

// a (rows, cols) matrix of `type` blocks: random bytes, every block's fp16 scale fields (d, and
// the min where the type has one) uniform in [-0.1, 0.1].
std::vector<uint8_t> RandomBlockRows(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_RANDOM_BLOCKS_H_
