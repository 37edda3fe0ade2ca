#ifndef VQSERVE_KERNELS_CPU_EMBEDDING_H_
#define VQSERVE_KERNELS_CPU_EMBEDDING_H_

#include <cstdint>

namespace vqserve::cpu {

// out[t] = table[ids[t]]. table is (vocab, dim), ids is (n), out is (n, dim).
// ids must lie in [0, vocab).
void EmbeddingLookup(const float* table, int dim, const int32_t* ids, int n, float* out);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_EMBEDDING_H_
