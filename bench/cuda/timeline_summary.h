#ifndef VQSERVE_BENCH_CUDA_TIMELINE_SUMMARY_H_
#define VQSERVE_BENCH_CUDA_TIMELINE_SUMMARY_H_

// prints where one decode launch's time went, from the per-block %globaltimer stamps of
// DecodeAttentionParams::bench_timeline (kernels/cuda/decode_timeline.h): each phase's median
// and maximum over the decode blocks, and the spread of block starts and ends and of the
// combine's blocks, all in us from the first decode block's entry.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/cuda/decode_timeline.h"

namespace vqserve::bench {

inline void PrintTimeline(const std::vector<unsigned long long>& tl, int decode_blocks, int combine_blocks,
                          bool ring_first) {
  using namespace vqserve::cuda;
  decode_blocks = std::min(decode_blocks, kTimelineMaxDecodeBlocks);
  combine_blocks = std::min(combine_blocks, kTimelineMaxCombineBlocks);
  auto at = [&](int blk, int i) { return tl[static_cast<size_t>(blk) * kTimelineDecodeStride + i]; };
  unsigned long long t0 = ~0ull;
  for (int n = 0; n < decode_blocks; ++n) t0 = std::min(t0, at(n, kStampEntry));
  struct Row {
    const char* name;
    std::vector<double> v;
  };
  std::vector<Row> rows = {{"entry (from first)", {}}, {"ring first", {}}, {"books + copy wait", {}},
                           {"pages, warp 0", {}},      {"pages, slowest warp", {}}, {"warp spread", {}},
                           {"merge", {}},              {"ring last + end", {}},     {"exit (from first)", {}}};
  std::vector<Row> ring_rows = {{"ring: sources", {}},      {"ring: chunks", {}},
                                {"ring: park slices", {}},  {"ring: sum (+sync)", {}},
                                {"ring chunk 1: loads+scores", {}}, {"ring chunk 1: probs", {}},
                                {"ring chunk 1: p.v", {}},     {"sm clock (GHz)", {}}};
  auto us = [](unsigned long long a, unsigned long long b) { return (static_cast<double>(a) - b) * 1e-3; };
  for (int n = 0; n < decode_blocks; ++n) {
    unsigned long long wmax = 0, wmin = ~0ull;
    for (int w = 0; w < 16; ++w) {
      const unsigned long long t = at(n, kTimelineWarpBase + w);
      if (t == 0) continue;
      wmax = std::max(wmax, t);
      wmin = std::min(wmin, t);
    }
    const bool coded = at(n, kStampBooks) != 0;
    const unsigned long long ring = ring_first && coded ? at(n, kStampRingFirst) : at(n, kStampEntry);
    rows[0].v.push_back(us(at(n, kStampEntry), t0));
    if (ring_first && coded) rows[1].v.push_back(us(ring, at(n, kStampEntry)));
    if (coded) {
      rows[2].v.push_back(us(at(n, kStampBooks), ring));
      rows[3].v.push_back(us(at(n, kStampPages), at(n, kStampBooks)));
      rows[4].v.push_back(us(wmax, at(n, kStampBooks)));
      rows[5].v.push_back(us(wmax, wmin));
      rows[6].v.push_back(us(at(n, kStampMerge), wmax));
      rows[7].v.push_back(us(at(n, kStampEnd), at(n, kStampMerge)));
    }
    rows[8].v.push_back(us(at(n, kStampEnd), t0));
    if (at(n, kClockEnd) > at(n, kClockEntry) && at(n, kStampEnd) > at(n, kStampEntry)) {
      ring_rows[7].v.push_back(static_cast<double>(at(n, kClockEnd) - at(n, kClockEntry)) /
                               static_cast<double>(at(n, kStampEnd) - at(n, kStampEntry)));
    }
    if (at(n, kStampRingMeta) != 0) {  // this block ran the ring: its steps
      const bool first = ring_first && coded;
      const unsigned long long merge = at(n, kStampMerge) != 0 ? at(n, kStampMerge) : at(n, kStampEntry);
      const unsigned long long start = first ? at(n, kStampEntry) : merge;
      const unsigned long long stop = first ? at(n, kStampRingFirst) : at(n, kStampEnd);
      ring_rows[0].v.push_back(us(at(n, kStampRingMeta), start));
      ring_rows[1].v.push_back(us(at(n, kStampRingLoop), at(n, kStampRingMeta)));
      ring_rows[4].v.push_back(us(at(n, kStampRingScores), at(n, kStampRingMeta)));
      ring_rows[5].v.push_back(us(at(n, kStampRingProbs), at(n, kStampRingScores)));
      ring_rows[6].v.push_back(us(at(n, kStampRingLoop), at(n, kStampRingProbs)));
      ring_rows[2].v.push_back(us(at(n, kStampRingSync), at(n, kStampRingLoop)));
      ring_rows[3].v.push_back(us(stop, at(n, kStampRingSync)));
    }
  }
  rows.insert(rows.end(), ring_rows.begin(), ring_rows.end());
  std::vector<double> centry, cwait, cexit;
  for (int n = 0; n < combine_blocks; ++n) {
    const size_t w = kTimelineCombineBase + 4 * static_cast<size_t>(n);
    centry.push_back(us(tl[w], t0));
    cwait.push_back(us(tl[w + 1], t0));
    cexit.push_back(us(tl[w + 2], t0));
  }
  rows.push_back({"combine entry (from first)", centry});
  rows.push_back({"combine after wait", cwait});
  rows.push_back({"combine exit (from first)", cexit});
  std::printf("    timeline (us)                min   median      max\n");
  for (Row& r : rows) {
    if (r.v.empty()) continue;
    std::sort(r.v.begin(), r.v.end());
    std::printf("    %-26s %7.2f %8.2f %8.2f\n", r.name, r.v.front(), r.v[r.v.size() / 2], r.v.back());
  }
}

}  // namespace vqserve::bench

#endif  // VQSERVE_BENCH_CUDA_TIMELINE_SUMMARY_H_
