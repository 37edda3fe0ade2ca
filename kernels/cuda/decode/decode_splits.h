#ifndef VQSERVE_KERNELS_CUDA_DECODE_DECODE_SPLITS_H_
#define VQSERVE_KERNELS_CUDA_DECODE_DECODE_SPLITS_H_

// the split-kv count of decode kernels whose blocks stay resident for their whole split (the
// vecinfer lut / tensor-core kernels, the staged fp16 and kivi ones): a host-side cost model,
// no cuda. used by ChooseDecodeSplits (decode_attention.cu).

namespace vqserve::cuda {

// throughput of an sm that runs one block of a kernel made for two resident blocks, relative
// to two (the staged kernels hide their copies' latency with the second block): an assumed
// figure, as are the callers' fixed shares, not a fitted one.
inline constexpr double kLoneBlockRate = 0.6;

// time of the busiest sm (in token units) when each of `blocks` (b, head group) blocks is cut
// into s splits of len / s tokens, plus `fixed_tokens` of per-block work (book build, merge),
// on `sms` sms holding up to `per_sm` blocks at once: ceil(blocks s / sms) blocks land on it,
// run at the full rate with per_sm resident together, at kLoneBlockRate alone on a
// two-per-sm kernel.
inline double BusiestSmTime(int blocks, int sms, int per_sm, int len, int fixed_tokens, int s) {
  const long long n = (static_cast<long long>(blocks) * s + sms - 1) / sms;
  const double rate = per_sm > 1 && n < per_sm ? kLoneBlockRate : 1.0;
  return static_cast<double>(n) * (static_cast<double>(len) / s + fixed_tokens) / rate;
}

// a count the model must beat by this share before it replaces the fill-one-wave rule.
inline constexpr double kMinSplitGain = 0.2;

// the split count in [1, max_splits]: the fill-one-wave rule (as many splits as fit one wave of
// sms * per_sm blocks, rounded down, while the blocks fill less than 4/5 of it; else one),
// measured on the benchmark grid, unless the s with the least BusiestSmTime (the smaller on
// ties) is kMinSplitGain faster. that happens past one wave: at 17 sequences of the
// Llama-3.1-8B shape the rule's one split puts two blocks after each other on 4 of 132 sms
// (twice the time of 16 sequences).
inline int WholeWaveSplits(int blocks, int sms, int per_sm, int len, int fixed_tokens, int max_splits) {
  if (blocks <= 0 || sms <= 0) return 1;
  const int top = max_splits > 1 ? max_splits : 1;
  const int target = sms * per_sm;
  int rule = blocks * 5 < target * 4 ? target / blocks : 1;
  rule = rule < 1 ? 1 : rule > top ? top : rule;
  int best = rule;
  double best_t = BusiestSmTime(blocks, sms, per_sm, len, fixed_tokens, rule);
  const double rule_t = best_t;
  for (int s = 1; s <= top; ++s) {
    const double t = BusiestSmTime(blocks, sms, per_sm, len, fixed_tokens, s);
    if (t < best_t * (1.0 - 1e-9)) {
      best = s;
      best_t = t;
    }
  }
  return best_t <= (1.0 - kMinSplitGain) * rule_t ? best : rule;
}

// the sink + residual ring on a split of its own. with one split a vecinfer lut block attends
// the ring in series with its pages (before or after them). when the blocks leave an sm free
// for each (blocks * 2 <= sms) and there is a ring, a second split runs it beside them: the tensor-core kernel's
// split ranges give the last split the ring and, below ~1.5K coded tokens, no pages
// (V8SplitRange). one split comes only from few coded tokens there (max_splits 1): with more,
// the fill-one-wave rule already splits.
inline int WithRingSplit(int splits, int blocks, int sms, bool has_ring) {
  return splits == 1 && has_ring && blocks > 0 && blocks * 2 <= sms ? 2 : splits;
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_DECODE_SPLITS_H_
