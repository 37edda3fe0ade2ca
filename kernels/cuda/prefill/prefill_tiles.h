#ifndef VQSERVE_KERNELS_CUDA_PREFILL_PREFILL_TILES_H_
#define VQSERVE_KERNELS_CUDA_PREFILL_PREFILL_TILES_H_

// query tiles of a multi-token step for the tensor-core prefill kernel (tiled_prefill.cuh):
// runs of at most kPrefillTileTokens consecutive new tokens of one sequence whose queries all
// see the same coded prefix, CodedTokens(p + 1) of runtime/kv/kv_cache.h. host code only.

#include <cstdint>
#include <vector>

namespace vqserve::cuda {

inline constexpr int kPrefillTileTokens = 32;  // query tokens of a tile, key tokens of a page

// CodedTokens() of runtime/kv/kv_cache.h: tokens in pages once n tokens are cached.
inline int PrefillCodedTokens(int residual, int page, int n) {
  return n < residual + page ? 0 : ((n - residual) / page) * page;
}

// sequence j's new tokens are step tokens first[j] .. first[j] + num_new[j] - 1, at positions
// num_cached[j] ... returns (first step token, count) pairs, in step-token order.
inline std::vector<int32_t> PlanPrefillTiles(const std::vector<int32_t>& first,
                                             const std::vector<int32_t>& num_cached,
                                             const std::vector<int32_t>& num_new, int residual,
                                             int page) {
  std::vector<int32_t> tiles;
  for (size_t j = 0; j < first.size(); ++j) {
    int start = 0;
    for (int i = 1; i <= num_new[j]; ++i) {
      const int p = num_cached[j] + i;  // position of token i, plus one
      if (i == num_new[j] || i - start == kPrefillTileTokens ||
          PrefillCodedTokens(residual, page, p + 1) != PrefillCodedTokens(residual, page, p)) {
        tiles.push_back(first[j] + start);
        tiles.push_back(i - start);
        start = i;
      }
    }
  }
  return tiles;
}

// key splits of the tensor-core kernel (PagedKvStep::prefill_work): a split takes at least
// kMinKeyTilesPerSplit key tiles, at most kMaxPrefillSplits splits a tile, and splits are added
// up to kPrefillBlocksPerSm blocks a sm (measured at the 8B shape, 512-token chunks behind 2K-32K
// tokens: 128 blocks were 1.09-1.27x faster in 2 splits and 1.18-1.52x in 4; behind none, 16
// key tiles, 2 splits were 0.85x).
inline constexpr int kMaxPrefillSplits = 8;
inline constexpr int kMinKeyTilesPerSplit = 16;
inline constexpr int kPrefillBlocksPerSm = 4;

// the key splits of the last tensor-core prefill launch on this host thread (benchmarks print
// them).
inline int& LastTiledPrefillSplits() {
  thread_local int splits = 0;
  return splits;
}

// floats of prefill_work for `splits` partials of every (step token, query head): the
// unnormalized output rows, then (max, sum) pairs.
inline int64_t PrefillWorkFloats(int num_tokens, int num_heads, int head_dim, int splits) {
  return static_cast<int64_t>(splits) * num_tokens * num_heads * (head_dim + 2);
}

// splits for `blocks` blocks (query tiles x head groups) on `sms` sms when the longest sequence
// spans max_key_tiles key tiles: as many as keep the grid within kPrefillBlocksPerSm blocks a
// sm, so that a step of few query tiles still fills the gpu, none below kMinKeyTilesPerSplit.
inline int PrefillKeySplits(int blocks, int sms, int max_key_tiles) {
  if (blocks <= 0) return 1;
  int s = kPrefillBlocksPerSm * sms / blocks;
  if (s > max_key_tiles / kMinKeyTilesPerSplit) s = max_key_tiles / kMinKeyTilesPerSplit;
  if (s > kMaxPrefillSplits) s = kMaxPrefillSplits;
  return s < 1 ? 1 : s;
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_PREFILL_PREFILL_TILES_H_
