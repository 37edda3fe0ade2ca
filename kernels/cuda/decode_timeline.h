#ifndef VQSERVE_KERNELS_CUDA_DECODE_TIMELINE_H_
#define VQSERVE_KERNELS_CUDA_DECODE_TIMELINE_H_

// benchmarks only: the layout of DecodeAttentionParams::bench_timeline, where the v8 decode
// kernel and the split combine write per-block %globaltimer stamps (ns). block n of the decode
// grid (n = x + gridDim.x (y + gridDim.y z)) owns u64s [n * kTimelineDecodeStride, + stride):
// stamps kStamp* below, then kTimelineWarpBase + w = the time warp w left its page loop, then
// kTimelineSmid = the sm it ran on. combine block n owns [kTimelineCombineBase + 4 n, + 4):
// entry, after its grid-dependency wait, exit.

namespace vqserve::cuda {

inline constexpr int kTimelineDecodeStride = 32, kTimelineMaxDecodeBlocks = 4096;
inline constexpr int kStampEntry = 0, kStampRingFirst = 1, kStampBooks = 2, kStampPages = 3,
                     kStampMerge = 4, kStampEnd = 5, kTimelineWarpBase = 8, kTimelineSmid = 24;
// inside the sink + ring step (block_residual.cuh): sources known, all chunks done, the slices
// parked for the final sum.
inline constexpr int kStampRingMeta = 25, kStampRingLoop = 26, kStampRingSync = 27;
// in the first chunk of the ring step: scores parked, probabilities made.
inline constexpr int kStampRingScores = 28, kStampRingProbs = 29;
// clock64 of thread 0 at the decode block's entry and exit (the sm clock = cycles / ns).
inline constexpr int kClockEntry = 30, kClockEnd = 31;
inline constexpr int kTimelineCombineBase = kTimelineDecodeStride * kTimelineMaxDecodeBlocks;
inline constexpr int kTimelineMaxCombineBlocks = 8192;
inline constexpr int kTimelineWords = kTimelineCombineBase + 4 * kTimelineMaxCombineBlocks;

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_TIMELINE_H_
