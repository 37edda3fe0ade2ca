#include "kernels/cpu/embedding.h"

#include <cstring>

namespace vqserve::cpu {

void EmbeddingLookup(const float* table, int dim, const int32_t* ids, int n, float* out) {
  for (int t = 0; t < n; ++t) {
    std::memcpy(out + static_cast<long>(t) * dim, table + static_cast<long>(ids[t]) * dim,
                sizeof(float) * dim);
  }
}

}  // namespace vqserve::cpu
