// run-time dispatch of decode attention: validates the params, picks heads per block and the
// split count, and turns (format, head_dim, sub-vector sizes, heads per block) into template
// constants in one switch.
#include "kernels/cuda/decode_attention.h"

#include <string>

#include "kernels/cuda/commvq_decode_layout.cuh"
#include "kernels/cuda/commvq_warp_decode.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/decode_attention_common.cuh"
#include "kernels/cuda/decode_attention_instances.h"
#include "kernels/cuda/decode_splits.h"
#include "kernels/cuda/fp16_staged_decode.h"
#include "kernels/cuda/kivi_staged_decode.h"
#include "kernels/cuda/vecinfer_half_books.h"

namespace vqserve::cuda {
namespace {

int SmCount() {
  static int count = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      return 132;
    }
    return n;
  }();
  return count;
}

// largest divisor of group that is <= limit.
int HeadsPerBlock(int group, int limit) {
  for (int hb = limit < group ? limit : group; hb > 1; --hb) {
    if (group % hb == 0) return hb;
  }
  return 1;
}
int PowerOfTwoAtLeast(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

// vecinfer params the lut and tensor-core kernels take: 8-bit codes with (k, v) sub-vectors
// (2,2) (4,4) (8,8) or (4,8); the rest runs the generic kernel.
bool VecInferLutShape(const DecodeAttentionParams& p) {
  const int dk = p.vq_k_sub_dim, dv = p.vq_v_sub_dim;
  return p.vq_k_code_bits == 8 && p.vq_v_code_bits == 8 &&
         ((dk == dv && (dk == 2 || dk == 4 || dk == 8)) || (dk == 4 && dv == 8));
}

// the shapes the v8 kernel takes (vecinfer_v8_decode.cu; VecInferTakesHalfBooks), and of those
// the (8, 8) and (4, 8)-dim sub-vectors, which run v8's lean page loop.
bool VecInferV8Shape(const DecodeAttentionParams& p) {
  return VecInferTakesHalfBooks(p.head_dim, p.vq_k_sub_dim, p.vq_v_sub_dim, p.vq_k_code_bits, p.vq_v_code_bits);
}
bool VecInferSub8V8Shape(const DecodeAttentionParams& p) { return VecInferV8Shape(p) && p.vq_v_sub_dim == 8; }
// v8 runs that take <= 4 heads per block where the lut kernel takes 8: the shapes above, and
// head_dim 64 with more than 4 query heads per kv head (two head groups); at versions 0 and >= 6
// (the default since runS12a / runS13a-b checked them on the device).
bool VecInferV8FourHeadShape(const DecodeAttentionParams& p) {
  const bool d64 = p.head_dim == 64 && VecInferV8Shape(p) && p.vq_v_sub_dim == 4;
  return (p.vecinfer_version == 0 || p.vecinfer_version >= 6) && (VecInferSub8V8Shape(p) || d64);
}

// heads per block for a format: the vecinfer lut (256 x Mk x HBP floats) stays <= 128 KB (v8z's
// shapes: <= 4 heads); commvq takes the most heads (<= 8) whose books, histograms and tiles fit
// in shared memory.
int HeadsPerBlockFor(KvPageFormat f, const DecodeAttentionParams& p) {
  const int group = p.num_heads / p.num_kv_heads;
  int limit = 8;
  if (f == KvPageFormat::kCommVq && UsesCommVqWarp(p)) limit = kCommVqWarpMaxHeads;
  if (f == KvPageFormat::kCommVq && !UsesCommVqWarp(p)) {
    while (limit > 1 && CvqLayout(limit, p.commvq_key_rounds, p.commvq_value_rounds).total >
                            static_cast<size_t>(kCvqSmemLimit)) {
      limit /= 2;
    }
  }
  if (f == KvPageFormat::kFp16 && UsesFp16Staged(p)) limit = kFp16StagedMaxHeads;
  if (f == KvPageFormat::kVecInfer && VecInferLutShape(p)) {
    const int mk = p.head_dim / p.vq_k_sub_dim;
    limit = 128 / mk < 8 ? 128 / mk : 8;
    if (VecInferV8FourHeadShape(p)) limit = 4;
  }
  return HeadsPerBlock(group, limit);
}

template <int D>
std::string DispatchDense(bool kivi, const DecodeAttentionParams& p, int hb, int splits,
                          cudaStream_t s) {
  switch (PowerOfTwoAtLeast(hb)) {
    case 1:
      return kivi ? LaunchPagedDenseDecode<D, 1, true>(p, hb, splits, s)
                  : LaunchPagedDenseDecode<D, 1, false>(p, hb, splits, s);
    case 2:
      return kivi ? LaunchPagedDenseDecode<D, 2, true>(p, hb, splits, s)
                  : LaunchPagedDenseDecode<D, 2, false>(p, hb, splits, s);
    case 4:
      return kivi ? LaunchPagedDenseDecode<D, 4, true>(p, hb, splits, s)
                  : LaunchPagedDenseDecode<D, 4, false>(p, hb, splits, s);
    case 8:
      return kivi ? LaunchPagedDenseDecode<D, 8, true>(p, hb, splits, s)
                  : LaunchPagedDenseDecode<D, 8, false>(p, hb, splits, s);
  }
  return "decode attention: unsupported heads per block";
}

template <int D, int DK, int DV>
std::string DispatchVecInferHeads(const DecodeAttentionParams& p, int hb, int splits,
                                  cudaStream_t s) {
  constexpr int kMaxHbp = 128 / (D / DK) < 8 ? 128 / (D / DK) : 8;
  const int hbp = PowerOfTwoAtLeast(hb);
  if (hbp == 1) return LaunchVecInferDecode<D, DK, DV, 1>(p, hb, splits, s);
  if (hbp == 2 && kMaxHbp >= 2) return LaunchVecInferDecode<D, DK, DV, (kMaxHbp >= 2 ? 2 : 1)>(p, hb, splits, s);
  if (hbp == 4 && kMaxHbp >= 4) return LaunchVecInferDecode<D, DK, DV, (kMaxHbp >= 4 ? 4 : 1)>(p, hb, splits, s);
  if (hbp == 8 && kMaxHbp >= 8) return LaunchVecInferDecode<D, DK, DV, (kMaxHbp >= 8 ? 8 : 1)>(p, hb, splits, s);
  return "vecinfer decode: unsupported heads per block";
}

// the tensor-core vecinfer kernel that vecinfer_version 0 runs: 3 = v6, 4 = v7, 5 = v7r, 6 = v8,
// 7 = v8q, 8 = v8z. v8z: 137.3 vs 169.9 us for v8 at 16 x 32K, 50.2 vs 57.5 at 1 x 128K, 259.9
// vs 330.7 at 32 x 32K (runS10e); at head_dim 64 v8z's lazy max runs on v8's value gathers.
constexpr int kDefaultVecInferMma = 8;

template <int D>
std::string DispatchVecInfer(const DecodeAttentionParams& p, int hb, int splits, cudaStream_t s) {
  const int dk = p.vq_k_sub_dim, dv = p.vq_v_sub_dim;
  if (!VecInferLutShape(p)) return LaunchVecInferGenericDecode(p, hb, splits, s);
  // vecinfer_version: 0 default (kDefaultVecInferMma), 1 v4 lut, 2 v5 mma keys, 3 v6, 4 v7,
  // 5 v7r (v7 with routed value gathers), 6 v8 (v7's loop, cheaper book build and residual),
  // 7 v8q (v8 with the quad value gathers), 8 v8z (v8q with the lean page loop). the kernels
  // below read the resolved version from q.
  DecodeAttentionParams q = p;
  q.vecinfer_version = p.vecinfer_version != 0 ? p.vecinfer_version : kDefaultVecInferMma;
  const int v = q.vecinfer_version;
  if (D == 128 && dk == 4 && dv == 4 && hb <= 4 && v != 1) {
    if (v >= 6) return LaunchVecInferV8Decode(q, hb, splits, s);
    if (v >= 4) return LaunchVecInferMma7Decode(q, hb, splits, s);
    return LaunchVecInferMmaDecode(q, hb, splits, s);
  }
  // head_dim 64: v8 (with v8z's lean loop for version 8, the default; v4 for versions 1..5).
  // end to end on the SmolLM2-135M shape at 16 x 32K v8 took a decode step from 7.0 to 3.9 ms
  // (runS8g, runS9c). more than 4 query heads per kv head: two head groups (VecInferV8FourHeadShape).
  if (D == 64 && dk == 4 && dv == 4 && hb <= 4 && v >= 6) return LaunchVecInferV8Decode(q, hb, splits, s);
  // (8, 8) and (4, 8) (vecinfer-k1v1, -k2v1): the lean loop at versions 0 and >= 6 (v8z's at
  // head_dim 128).
  if (VecInferV8FourHeadShape(p) && VecInferSub8V8Shape(p) && hb <= 4) return LaunchVecInferV8Decode(q, hb, splits, s);
  if (dk == 2 && dv == 2) return DispatchVecInferHeads<D, 2, 2>(p, hb, splits, s);
  if (dk == 4 && dv == 4) return DispatchVecInferHeads<D, 4, 4>(p, hb, splits, s);
  if (dk == 8 && dv == 8) return DispatchVecInferHeads<D, 8, 8>(p, hb, splits, s);
  return DispatchVecInferHeads<D, 4, 8>(p, hb, splits, s);
}

template <int D>
std::string DispatchCommVq(const DecodeAttentionParams& p, int hb, int splits, cudaStream_t s) {
  switch (PowerOfTwoAtLeast(hb)) {
    case 1:
      return LaunchCommVqDecode<D, 1>(p, hb, splits, s);
    case 2:
      return LaunchCommVqDecode<D, 2>(p, hb, splits, s);
    case 4:
      return LaunchCommVqDecode<D, 4>(p, hb, splits, s);
    case 8:
      return LaunchCommVqDecode<D, 8>(p, hb, splits, s);
  }
  return "commvq decode: unsupported heads per block";
}

std::string Validate(KvPageFormat f, const DecodeAttentionParams& p) {
  if (p.head_dim != 64 && p.head_dim != 128) return "decode attention: head_dim must be 64 or 128";
  if (p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    return "decode attention: num_heads must be a multiple of num_kv_heads";
  }
  if (p.page_tokens != 32) return "decode attention: page_tokens must be 32";
  if (p.batch <= 0) return "decode attention: empty batch";
  if (p.q == nullptr || p.out == nullptr || p.workspace == nullptr || p.coded_lens == nullptr) {
    return "decode attention: q, out, workspace and coded_lens are required";
  }
  if (p.res_lens != nullptr && (p.res_k == nullptr || p.res_v == nullptr || p.slots == nullptr ||
                                p.res_ring_tokens <= 0)) {
    return "decode attention: a residual ring needs res_k, res_v, slots and res_ring_tokens";
  }
  if (p.num_splits < 0 || p.num_splits > kMaxDecodeSplits) return "decode attention: bad num_splits";
  if (p.sink_lens != nullptr && (p.sink_k == nullptr || p.sink_v == nullptr || p.slots == nullptr)) {
    return "decode attention: a sink needs sink_k, sink_v and slots";
  }
  if (f == KvPageFormat::kKivi && p.kivi_bits != 2 && p.kivi_bits != 4) {
    return "kivi decode: bits must be 2 or 4";
  }
  if (f == KvPageFormat::kVecInfer &&
      (p.q_tilde == nullptr || p.vq_k_codebook == nullptr || p.vq_v_codebook == nullptr)) {
    return "vecinfer decode: q_tilde and both codebooks are required";
  }
  if (f == KvPageFormat::kVecInfer &&
      ((p.vq_k_code_bits != 8 && p.vq_k_code_bits != 12) ||
       (p.vq_v_code_bits != 8 && p.vq_v_code_bits != 12))) {
    return "vecinfer decode: codes of 8 or 12 bits";
  }
  if (f == KvPageFormat::kCommVq) {
    if (p.vq_k_codebook == nullptr || p.vq_v_codebook == nullptr) {
      return "commvq decode: both codebooks are required";
    }
    if (p.commvq_key_rounds < 1 || p.commvq_value_rounds < 1 || p.commvq_value_rounds > 16) {
      return "commvq decode: key rounds must be >= 1 and value rounds in 1 .. 16";
    }
    if (CvqLayout(1, p.commvq_key_rounds, p.commvq_value_rounds).total >
            static_cast<size_t>(kCvqSmemLimit) ||
        kCvqTilePages * CvqChunksPerPage(p.commvq_key_rounds, p.commvq_value_rounds) >
            kCvqIdsPerThread * kCvqThreads) {
      return "commvq decode: too many key rounds for shared memory (" +
             std::to_string(p.commvq_key_rounds) + ")";
    }
  }
  return "";
}

}  // namespace

size_t DecodeWorkspaceFloats(int batch, int num_heads, int head_dim) {
  return static_cast<size_t>(batch) * num_heads * kWorkspaceSlots * (head_dim + 2);
}

int ChooseDecodeSplits(KvPageFormat f, const DecodeAttentionParams& p) {
  if (p.num_splits > 0) return p.num_splits;
  const int hb = HeadsPerBlockFor(f, p);
  const int blocks = p.batch * p.num_kv_heads * (p.num_heads / p.num_kv_heads / hb);
  if (f == KvPageFormat::kCommVq && UsesCommVqWarp(p)) {
    // one block per sm for its whole split: fill one wave (the short residual blocks of the
    // extra column free their sms for any page blocks left over).
    const int sm_blocks = blocks * CommVqWarpBlocks(p);
    int s = sm_blocks * 5 < SmCount() * 4 ? SmCount() / sm_blocks : 1;
    const int tiles = (p.max_coded_len + kSplitAlign - 1) / kSplitAlign;
    if (s > tiles / 2) s = tiles / 2;
    if (s > kMaxDecodeSplits) s = kMaxDecodeSplits;
    return s < 1 ? 1 : s;
  }
  if (f == KvPageFormat::kCommVq) {
    // commvq: clusters of head_dim / 32 blocks, smem-bound: fill the sms once, >= 2 tiles a split.
    const int cluster_blocks = blocks * CvqClusterSize(p.head_dim);
    int s = cluster_blocks * 5 < SmCount() * 4 ? SmCount() / cluster_blocks : 1;
    const int tiles = (p.max_coded_len + kSplitAlign - 1) / kSplitAlign;
    if (s > tiles / 2) s = tiles / 2;
    if (s > kMaxDecodeSplits) s = kMaxDecodeSplits;
    return s < 1 ? 1 : s;
  }
  const bool staged_fp16 = f == KvPageFormat::kFp16 && UsesFp16Staged(p);
  const bool staged_kivi = f == KvPageFormat::kKivi && UsesKiviStaged(p);
  const bool vq_lut = f == KvPageFormat::kVecInfer && VecInferLutShape(p);
  const int per_sm = vq_lut        ? 1
                     : staged_fp16 ? kFp16StagedBlocksPerSm
                     : staged_kivi ? kKiviStagedBlocksPerSm
                                   : 2;
  const int target = SmCount() * per_sm;
  const int tiles = (p.max_coded_len + kSplitAlign - 1) / kSplitAlign;
  const int max_by_len = tiles / 2 > 1 ? tiles / 2 : 1;  // at least two tiles per split
  const int max_splits = max_by_len < kMaxDecodeSplits ? max_by_len : kMaxDecodeSplits;
  // lut vecinfer and staged fp16 / kivi blocks stay resident for their whole split: the cost
  // model of decode_splits.h (a vecinfer block's book build and merge weigh ~2K tokens).
  if (vq_lut || staged_fp16 || staged_kivi) {
    const int s = WholeWaveSplits(blocks, SmCount(), per_sm, p.max_coded_len, vq_lut ? 2048 : 128, max_splits);
    // (the staged kivi kernel gives the ring a block column of its own at any split count.)
    return vq_lut ? WithRingSplit(s, blocks, SmCount(), p.res_lens != nullptr || p.sink_lens != nullptr) : s;
  }
  int splits = 1;
  if (blocks * 5 < target * 4) splits = (target + blocks - 1) / blocks;
  if (splits > max_splits) splits = max_splits;
  return splits < 1 ? 1 : splits;
}

std::string LaunchDecodeAttention(KvPageFormat f, const DecodeAttentionParams& p,
                                  cudaStream_t stream) {
  std::string err = Validate(f, p);
  if (!err.empty()) return err;
  const int hb = HeadsPerBlockFor(f, p);
  const int splits = ChooseDecodeSplits(f, p);
  switch (f) {
    case KvPageFormat::kFp16:
      if (UsesFp16Staged(p)) {
        err = LaunchFp16StagedDecode(p, hb, splits, stream);
        break;
      }
      [[fallthrough]];
    case KvPageFormat::kKivi:
      if (f == KvPageFormat::kKivi && UsesKiviStaged(p)) {
        err = LaunchKiviStagedDecode(p, hb, splits, stream);
        break;
      }
      err = p.head_dim == 64 ? DispatchDense<64>(f == KvPageFormat::kKivi, p, hb, splits, stream)
                             : DispatchDense<128>(f == KvPageFormat::kKivi, p, hb, splits, stream);
      break;
    case KvPageFormat::kVecInfer:
      err = p.head_dim == 64 ? DispatchVecInfer<64>(p, hb, splits, stream)
                             : DispatchVecInfer<128>(p, hb, splits, stream);
      break;
    case KvPageFormat::kCommVq:
      if (UsesCommVqWarp(p)) {
        err = LaunchCommVqWarpDecode(p, hb, splits, stream);
        break;
      }
      err = p.head_dim == 64 ? DispatchCommVq<64>(p, hb, splits, stream)
                             : DispatchCommVq<128>(p, hb, splits, stream);
      break;
  }
  if (!err.empty()) return err;
  return LaunchSplitCombine(p, splits, stream);
}

}  // namespace vqserve::cuda
