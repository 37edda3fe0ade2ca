#include "tools/vqserve/eval_metrics.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "kernels/cpu/half_convert.h"
#include "runtime/kv/paged_kv_cache.h"

namespace vqserve::cli {

double PerplexityResult::perplexity() const {
  return predictions > 0 ? std::exp(nll_sum / predictions) : 0.0;
}

namespace {

// a one-sequence cache big enough for `tokens` tokens, with its block table.
struct OneSeqCache {
  std::unique_ptr<KvCache> cache;
  std::vector<int32_t> table;
};
OneSeqCache MakeCache(const CacheFactory& factory, int tokens) {
  OneSeqCache c;
  c.cache = factory(tokens);
  c.table.resize(c.cache->num_pages());
  for (size_t i = 0; i < c.table.size(); ++i) c.table[i] = static_cast<int32_t>(i);
  return c;
}

// feeds ids through the model in chunks; logits of the last token (or of all when all=true).
void Feed(LlamaModel& model, OneSeqCache& c, const std::vector<int32_t>& ids, int start, int n,
          bool all, std::vector<float>* logits) {
  ForwardSeq fs;
  fs.tokens = std::span<const int32_t>(ids.data() + start, n);
  fs.cache = c.cache.get();
  fs.kv.slot = 0;
  fs.kv.block_table = c.table.data();
  fs.kv.num_blocks = static_cast<int>(c.table.size());
  fs.kv.num_cached = start;
  fs.want_logits = true;
  fs.want_all_logits = all;
  logits->clear();
  model.Forward({&fs, 1}, logits);
}

int ArgMax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

}  // namespace

CacheFactory HostCacheFactory(CodecFactory codec, int sink_tokens) {
  return [codec = std::move(codec), sink_tokens](int tokens) -> std::unique_ptr<KvCache> {
    std::unique_ptr<KvCodec> c = codec();
    KvCacheSpec probe;
    probe.page_tokens = c->page_tokens();
    probe.residual_tokens = c->residual_tokens();
    const int pages = PagesForTokens(probe, tokens) + 1;
    return MakePagedKvCache(std::move(c), pages, 1, sink_tokens);
  };
}

std::vector<EvalWindow> SpreadWindows(const std::vector<size_t>& text_tokens, int ctx,
                                      int per_text) {
  std::vector<EvalWindow> out;
  const size_t span = static_cast<size_t>(ctx - 1);
  for (size_t t = 0; t < text_tokens.size(); ++t) {
    if (text_tokens[t] < span || per_text <= 0) continue;
    const size_t fit = text_tokens[t] / span;  // non-overlapping windows that fit
    const size_t n = std::min<size_t>(per_text, fit);
    // n windows evenly spread: the gaps between them share the tokens left over.
    const size_t spare = text_tokens[t] - n * span;
    for (size_t w = 0; w < n; ++w) {
      const size_t gap = n > 1 ? spare * w / (n - 1) : 0;
      out.push_back({static_cast<int>(t), w * span + gap});
    }
  }
  return out;
}

std::vector<PerplexityResult> WindowNll(LlamaModel& model, const CacheFactory& cache,
                                        const std::vector<std::vector<int32_t>>& texts,
                                        const std::vector<EvalWindow>& windows, int ctx,
                                        int chunk, const EvalProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<PerplexityResult> out;
  const int vocab = model.config().vocab_size;
  std::vector<float> logits;
  int64_t fed = 0;
  for (const EvalWindow& w : windows) {
    const std::vector<int32_t>& ids = texts[w.text];
    PerplexityResult r;
    std::vector<int32_t> win;
    win.push_back(model.tokenizer().bos_id());
    win.insert(win.end(), ids.begin() + w.begin, ids.begin() + w.begin + ctx - 1);
    OneSeqCache c = MakeCache(cache, ctx);
    for (int start = 0; start < ctx; start += chunk) {
      const int n = std::min(chunk, ctx - start);
      Feed(model, c, win, start, n, true, &logits);
      for (int i = 0; i < n; ++i) {
        const int pos = start + i;
        if (pos + 1 >= ctx) break;
        const float* l = logits.data() + static_cast<size_t>(i) * vocab;
        const float mx = *std::max_element(l, l + vocab);
        double sum = 0;
        for (int j = 0; j < vocab; ++j) sum += std::exp(static_cast<double>(l[j]) - mx);
        r.nll_sum += std::log(sum) + mx - l[win[pos + 1]];
        r.predictions++;
      }
    }
    fed += ctx;
    out.push_back(r);
    if (progress) {
      progress(static_cast<int>(out.size()), static_cast<int>(windows.size()), fed,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  return out;
}

PerplexityResult WindowPerplexity(LlamaModel& model, const CodecFactory& codec,
                                  const std::vector<int32_t>& ids, int ctx, int windows,
                                  int chunk, int sink_tokens) {
  std::vector<EvalWindow> ws;
  for (int w = 0; w < windows; ++w) {
    const size_t begin = static_cast<size_t>(w) * (ctx - 1);
    if (begin + ctx - 1 > ids.size()) break;
    ws.push_back({0, begin});
  }
  PerplexityResult total;
  for (const PerplexityResult& r :
       WindowNll(model, HostCacheFactory(codec, sink_tokens), {ids}, ws, ctx, chunk)) {
    total.nll_sum += r.nll_sum;
    total.predictions += r.predictions;
  }
  return total;
}

// ---- statistics ----

namespace {
// the continued fraction of the incomplete beta function (modified Lentz).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-16;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < kEps) break;
  }
  return h;
}
}  // namespace

double RegularizedIncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double lbt = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
                     b * std::log1p(-x);
  const double bt = std::exp(lbt);
  if (x < (a + 1) / (a + b + 2)) return bt * BetaContinuedFraction(a, b, x) / a;
  return 1 - bt * BetaContinuedFraction(b, a, 1 - x) / b;
}

double StudentTQuantile(double p, double dof) {
  if (p <= 0) return -std::numeric_limits<double>::infinity();
  if (p >= 1) return std::numeric_limits<double>::infinity();
  if (p < 0.5) return -StudentTQuantile(1 - p, dof);
  if (p == 0.5) return 0;
  // the upper tail P(T > t): 0.5 I_{dof/(dof+t^2)}(dof/2, 1/2), or 0.5 erfc(t/sqrt 2) for the
  // normal; decreasing in t, so bisect (on the tail, which keeps precision for p near 1).
  auto tail = [dof](double t) {
    if (dof <= 0) return 0.5 * std::erfc(t / std::sqrt(2.0));
    return 0.5 * RegularizedIncompleteBeta(dof / 2, 0.5, dof / (dof + t * t));
  };
  const double want = 1 - p;
  double lo = 0, hi = 1;
  while (tail(hi) > want && hi < 1e300) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-15 * std::max(1.0, hi); ++i) {
    const double mid = 0.5 * (lo + hi);
    (tail(mid) > want ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

MeanInterval MeanWithTInterval(const std::vector<double>& x, double level) {
  MeanInterval m;
  m.n = static_cast<int>(x.size());
  m.level = level;
  if (x.empty()) return m;
  double sum = 0;
  for (double v : x) sum += v;
  m.mean = sum / m.n;
  m.lo = m.hi = m.mean;
  if (m.n < 2) return m;
  double ss = 0;
  for (double v : x) ss += (v - m.mean) * (v - m.mean);
  m.sd = std::sqrt(ss / (m.n - 1));
  m.se = m.sd / std::sqrt(static_cast<double>(m.n));
  const double t = StudentTQuantile(0.5 + level / 2, m.n - 1);
  m.lo = m.mean - t * m.se;
  m.hi = m.mean + t * m.se;
  return m;
}

std::vector<double> RelativePerplexityDeltaPct(const std::vector<PerplexityResult>& codec,
                                               const std::vector<PerplexityResult>& base) {
  std::vector<double> d;
  for (size_t i = 0; i < codec.size() && i < base.size(); ++i) {
    if (codec[i].predictions == 0 || base[i].predictions == 0) continue;
    const double diff = codec[i].nll_sum / codec[i].predictions - base[i].nll_sum / base[i].predictions;
    d.push_back(100.0 * std::expm1(diff));
  }
  return d;
}

void WilsonInterval(int successes, int n, double z, double* lo, double* hi) {
  if (n <= 0) {
    *lo = 0;
    *hi = 1;
    return;
  }
  const double p = static_cast<double>(successes) / n, z2 = z * z;
  const double denom = 1 + z2 / n;
  const double centre = (p + z2 / (2.0 * n)) / denom;
  const double half = z * std::sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / denom;
  // at 0 (or n) successes the bound is exactly 0 (or 1); rounding must not move it.
  *lo = successes == 0 ? 0.0 : std::max(0.0, centre - half);
  *hi = successes == n ? 1.0 : std::min(1.0, centre + half);
}

CodecErrors MeasureCodecErrors(const KvCodec& codec, const CalibrationRecorder& rec,
                               int query_samples) {
  const KvShape& s = codec.shape();
  const int P = codec.page_tokens(), R = codec.residual_tokens();
  const int row = s.num_kv_heads * s.head_dim, qrow = s.num_heads * s.head_dim;
  KvCacheSpec spec;
  spec.page_tokens = P;
  spec.residual_tokens = R;
  double kn = 0, kd = 0, vn = 0, vd = 0, attn = 0;
  int64_t attn_n = 0;
  for (int l = 0; l < s.num_layers; ++l) {
    const LayerSamples& ls = rec.data().layers[l];
    const std::vector<float>& q = rec.queries(l);
    const int T = ls.num_tokens;
    const int pages = T / P;
    // the cache codes fp16-rounded values: round the inputs the same way.
    std::vector<uint16_t> h(static_cast<size_t>(T) * row);
    std::vector<float> k16(h.size()), v16(h.size());
    cpu::FloatToHalfRow(ls.k_rope.data(), h.data(), h.size());
    cpu::HalfToFloatRow(h.data(), k16.data(), h.size());
    cpu::FloatToHalfRow(ls.v.data(), h.data(), h.size());
    cpu::HalfToFloatRow(h.data(), v16.data(), h.size());
    const std::vector<float>& kin = codec.needs_pre_rope_keys() ? ls.k_pre_rope : k16;
    std::vector<float> kin16 = kin;
    if (codec.needs_pre_rope_keys()) {
      cpu::FloatToHalfRow(kin.data(), h.data(), h.size());
      cpu::HalfToFloatRow(h.data(), kin16.data(), h.size());
    }
    std::vector<std::vector<uint8_t>> store(pages, std::vector<uint8_t>(codec.LayerPageBytes()));
    std::vector<const uint8_t*> ptrs(pages);
    std::vector<float> dk(static_cast<size_t>(P) * row), dv(dk.size());
    for (int j = 0; j < pages; ++j) {
      const size_t off = static_cast<size_t>(j) * P * row;
      codec.EncodePage(l, j * P, kin16.data() + off, v16.data() + off, store[j].data());
      ptrs[j] = store[j].data();
      codec.DecodePage(l, j * P, store[j].data(), dk.data(), dv.data());
      for (size_t i = 0; i < dk.size(); ++i) {
        const double a = ls.k_rope[off + i], b = ls.v[off + i];
        kn += (dk[i] - a) * (dk[i] - a);
        kd += a * a;
        vn += (dv[i] - b) * (dv[i] - b);
        vd += b * b;
      }
    }
    if (q.size() < static_cast<size_t>(T) * qrow) continue;
    // attention of sampled late positions: coded pages + fp16 residual vs exact fp32.
    std::vector<float> m(s.num_heads), lsum(s.num_heads), acc(qrow), out(qrow);
    for (int i = 0; i < query_samples; ++i) {
      const int pos = T - 1 - i * std::max(1, T / (2 * query_samples));
      if (pos < 0) break;
      const int n = pos + 1;
      const int coded = std::min(CodedTokens(spec, n), pages * P);
      std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
      std::fill(lsum.begin(), lsum.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      SoftmaxState st{m.data(), lsum.data(), acc.data()};
      const float* qp = q.data() + static_cast<size_t>(pos) * qrow;
      codec.AttendPages(l, ptrs.data(), coded, qp, pos, &st);
      AttendDense(s, qp, k16.data() + static_cast<size_t>(coded) * row,
                  v16.data() + static_cast<size_t>(coded) * row, n - coded, &st);
      FinishSoftmax(s, st, out.data());
      const int group = s.num_heads / s.num_kv_heads;
      for (int qh = 0; qh < s.num_heads; ++qh) {
        const int hk = qh / group;
        std::vector<double> sc(n), o(s.head_dim, 0.0);
        double mx = -1e300, sum = 0;
        for (int t = 0; t < n; ++t) {
          double d = 0;
          for (int e = 0; e < s.head_dim; ++e) {
            d += double(qp[qh * s.head_dim + e]) * ls.k_rope[(size_t(t) * s.num_kv_heads + hk) * s.head_dim + e];
          }
          sc[t] = d / std::sqrt(double(s.head_dim));
          mx = std::max(mx, sc[t]);
        }
        for (int t = 0; t < n; ++t) {
          double p = std::exp(sc[t] - mx);
          sum += p;
          for (int e = 0; e < s.head_dim; ++e) o[e] += p * ls.v[(size_t(t) * s.num_kv_heads + hk) * s.head_dim + e];
        }
        double num = 0, den = 0;
        for (int e = 0; e < s.head_dim; ++e) {
          const double ref = o[e] / sum, got = out[qh * s.head_dim + e];
          num += (got - ref) * (got - ref);
          den += ref * ref;
        }
        attn += std::sqrt(num / std::max(den, 1e-30));
        attn_n++;
      }
    }
  }
  CodecErrors e;
  e.k_rel = kd > 0 ? std::sqrt(kn / kd) : 0;
  e.v_rel = vd > 0 ? std::sqrt(vn / vd) : 0;
  e.attn_rel = attn_n > 0 ? attn / attn_n : 0;
  return e;
}

bool PasskeyAnswerCorrect(const std::string& answer, const std::string& key) {
  const size_t begin = answer.find_first_of("0123456789");
  if (begin == std::string::npos) return false;
  const size_t end = answer.find_first_not_of("0123456789", begin);
  return answer.substr(begin, end == std::string::npos ? std::string::npos : end - begin) == key;
}

std::vector<double> SpreadDepths(int trials) {
  std::vector<double> d;
  for (int i = 0; i < trials; ++i) d.push_back((i + 0.5) / trials);
  return d;
}

std::string PasskeyKey(uint64_t seed, int length, int trial) {
  // splitmix64 of the three: the same key for a (length, trial) whatever else is run.
  uint64_t z = seed ^ (static_cast<uint64_t>(length) << 20) ^ static_cast<uint64_t>(trial);
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return absl::StrFormat("%05d", static_cast<int>(10000 + z % 90000));
}

std::vector<PasskeyTrial> RunPasskey(LlamaModel& model, const CacheFactory& cache,
                                     const std::vector<int>& lengths,
                                     const std::vector<double>& depths, uint64_t seed,
                                     const EvalProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer& tok = model.tokenizer();
  const std::string intro =
      "There is a pass key hidden inside a lot of irrelevant text. Find it and remember it. "
      "I will quiz you about the pass key.\n";
  const std::string filler =
      " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
  const int filler_tokens = static_cast<int>(tok.Encode(filler, false, false).size());
  std::vector<PasskeyTrial> trials;
  std::vector<float> logits;
  const int vocab = model.config().vocab_size;
  const int total = static_cast<int>(lengths.size() * depths.size());
  int64_t fed = 0;
  for (int length : lengths) {
    for (size_t di = 0; di < depths.size(); ++di) {
      const double depth = depths[di];
      PasskeyTrial t;
      t.target = length;
      t.depth = depth;
      t.key = PasskeyKey(seed, length, static_cast<int>(di));
      const std::string needle =
          absl::StrFormat(" The pass key is %s. Remember it. %s is the pass key.", t.key, t.key);
      const std::string question = "\nWhat is the pass key? The pass key is";
      const int fixed = static_cast<int>(tok.Encode(intro + needle + question, true, false).size());
      const int reps = std::max(1, (length - fixed) / filler_tokens);
      const int before = static_cast<int>(std::lround(reps * depth));
      std::string text = intro;
      for (int i = 0; i < before; ++i) text += filler;
      text += needle;
      for (int i = before; i < reps; ++i) text += filler;
      text += question;
      std::vector<int32_t> ids = tok.Encode(text, true, false);
      const int n = static_cast<int>(ids.size());
      OneSeqCache c = MakeCache(cache, n + 16);
      for (int start = 0; start < n; start += 512) {
        Feed(model, c, ids, start, std::min(512, n - start), false, &logits);
      }
      std::vector<int32_t> answer;
      for (int step = 0; step < 8; ++step) {
        int next = ArgMax(logits.data() + logits.size() - vocab, vocab);
        answer.push_back(next);
        if (tok.IsEndOfGeneration(next)) break;
        ids.push_back(next);
        Feed(model, c, ids, static_cast<int>(ids.size()) - 1, 1, false, &logits);
      }
      t.answer = tok.Decode(answer);
      t.length = n;
      t.correct = PasskeyAnswerCorrect(t.answer, t.key);
      trials.push_back(t);
      fed += static_cast<int64_t>(ids.size());
      if (progress) {
        progress(static_cast<int>(trials.size()), total, fed,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  }
  return trials;
}

std::vector<PasskeyTrial> RunPasskey(LlamaModel& model, const CodecFactory& codec,
                                     const std::vector<int>& lengths,
                                     const std::vector<double>& depths, uint64_t seed,
                                     int sink_tokens) {
  return RunPasskey(model, HostCacheFactory(codec, sink_tokens), lengths, depths, seed);
}

}  // namespace vqserve::cli
