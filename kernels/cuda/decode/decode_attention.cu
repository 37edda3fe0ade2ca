// run-time dispatch of decode attention: validates the params, picks heads per block and the
// split count, and turns (format, head_dim, sub-vector sizes, heads per block) into template
// constants in one switch.
#include "kernels/cuda/decode/decode_attention.h"

#include <string>

#include "kernels/cuda/decode/commvq_decode_layout.cuh"
#include "kernels/cuda/decode/commvq_warp_decode.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/decode/decode_attention_common.cuh"
#include "kernels/cuda/decode/decode_attention_instances.h"
#include "kernels/cuda/decode/decode_splits.h"
#include "kernels/cuda/decode/fp16_staged_decode.h"
#include "kernels/cuda/decode/kivi_staged_decode.h"
#include "kernels/cuda/common/vecinfer_half_books.h"

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

// the shapes the tensor-core kernel takes (vecinfer_mma_decode.cu; VecInferTakesHalfBooks):
// <= 4 query heads per block (a kv head with more runs as several head groups).
bool VecInferMmaShape(const DecodeAttentionParams& p) {
  return VecInferTakesHalfBooks(p.head_dim, p.vq_k_sub_dim, p.vq_v_sub_dim, p.vq_k_code_bits,
                                p.vq_v_code_bits);
}

// heads per block for a format: the vecinfer lut (256 x Mk x HBP floats) stays <= 128 KB (the
// tensor-core kernel's shapes: <= 4 heads); commvq takes the most heads (<= 8) whose books, histograms and tiles fit
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
  if (f == KvPageFormat::kFp16) limit = kFp16StagedMaxHeads;
  if (f == KvPageFormat::kVecInfer && VecInferLutShape(p)) {
    const int mk = VecInferKeyCodes(p);
    limit = 128 / mk < 8 ? 128 / mk : 8;
    if (VecInferMmaShape(p)) limit = 4;
  }
  return HeadsPerBlock(group, limit);
}

// kivi pages the staged kernel does not take (unaligned layer slices).
template <int D>
std::string DispatchKiviDense(const DecodeAttentionParams& p, int hb, int splits, cudaStream_t s) {
  switch (PowerOfTwoAtLeast(hb)) {
    case 1:
      return LaunchPagedDenseDecode<D, 1, true>(p, hb, splits, s);
    case 2:
      return LaunchPagedDenseDecode<D, 2, true>(p, hb, splits, s);
    case 4:
      return LaunchPagedDenseDecode<D, 4, true>(p, hb, splits, s);
    case 8:
      return LaunchPagedDenseDecode<D, 8, true>(p, hb, splits, s);
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

// vecinfer: the tensor-core kernel for its shapes, the lut kernel for 8-bit codes of 2-dim
// sub-vectors (vecinfer-k4v4), the generic kernel for the rest (12-bit codes).
template <int D>
std::string DispatchVecInfer(const DecodeAttentionParams& p, int hb, int splits, cudaStream_t s) {
  if (p.vq_k_dims != nullptr) {  // -pca keys: the lut first (Validate: the tensor-core shapes)
    if (std::string err = LaunchVecInferPcaLut(p, hb, s); !err.empty()) return err;
    return LaunchVecInferMmaDecode(p, hb, splits, s);
  }
  if (VecInferMmaShape(p) && hb <= 4) return LaunchVecInferMmaDecode(p, hb, splits, s);
  if (p.vq_k_code_bits == 8 && p.vq_v_code_bits == 8 && p.vq_k_sub_dim == 2 &&
      p.vq_v_sub_dim == 2) {
    return DispatchVecInferHeads<D, 2, 2>(p, hb, splits, s);
  }
  return LaunchVecInferGenericDecode(p, hb, splits, s);
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
  const bool var_k = f == KvPageFormat::kVecInfer && p.vq_k_sub_dim > 0 &&
                     VecInferKeyCodes(p) != p.head_dim / p.vq_k_sub_dim;
  if (f == KvPageFormat::kVecInfer && p.vq_k_dims != nullptr &&
      (!VecInferMmaShape(p) || HeadsPerBlockFor(f, p) > 4 || p.vq_pca_lut == nullptr ||
       (var_k && !VecInferMmaVarKeyCodes(p)))) {
    return "vecinfer decode: -pca keys need the tensor-core kernel's shapes (head_dim 64 or 128, "
           "8-bit codes of (4, 4), (8, 8) or (4, 8) dims; or 17 to 32 key codes at head_dim 64, 33 "
           "to 40 at 128, with 4-dim values) and a lut scratch";
  }
  if (f == KvPageFormat::kVecInfer && p.vq_k_dims == nullptr && var_k) {
    return "vecinfer decode: vq_k_codes other than head_dim / vq_k_sub_dim need -pca keys";
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
  const bool staged_fp16 = f == KvPageFormat::kFp16;
  const bool staged_kivi = f == KvPageFormat::kKivi && UsesKiviStaged(p);
  const bool vq_lut = f == KvPageFormat::kVecInfer && VecInferLutShape(p);
  const int per_sm = vq_lut        ? 1
                     : staged_fp16 ? Fp16StagedBlocksPerSm(p.head_dim)
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
      err = LaunchFp16StagedDecode(p, hb, splits, stream);
      break;
    case KvPageFormat::kKivi:
      if (UsesKiviStaged(p)) {
        err = LaunchKiviStagedDecode(p, hb, splits, stream);
      } else {
        err = p.head_dim == 64 ? DispatchKiviDense<64>(p, hb, splits, stream)
                               : DispatchKiviDense<128>(p, hb, splits, stream);
      }
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
