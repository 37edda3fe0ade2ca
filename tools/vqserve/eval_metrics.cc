#include "tools/vqserve/eval_metrics.h"

#include <algorithm>
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

// a one-sequence paged cache big enough for `tokens` tokens, with its block table.
struct OneSeqCache {
  std::unique_ptr<PagedKvCache> cache;
  std::vector<int32_t> table;
};
OneSeqCache MakeCache(std::unique_ptr<KvCodec> codec, int tokens, int sink_tokens) {
  KvCacheSpec probe;
  probe.page_tokens = codec->page_tokens();
  probe.residual_tokens = codec->residual_tokens();
  const int pages = PagesForTokens(probe, tokens) + 1;
  OneSeqCache c;
  c.cache = MakePagedKvCache(std::move(codec), pages, 1, sink_tokens);
  c.table.resize(pages);
  for (int i = 0; i < pages; ++i) c.table[i] = i;
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

PerplexityResult WindowPerplexity(LlamaModel& model, const CodecFactory& codec,
                                  const std::vector<int32_t>& ids, int ctx, int windows,
                                  int chunk, int sink_tokens) {
  PerplexityResult r;
  const int vocab = model.config().vocab_size;
  std::vector<float> logits;
  for (int w = 0; w < windows; ++w) {
    const size_t begin = static_cast<size_t>(w) * (ctx - 1);
    if (begin + ctx - 1 > ids.size()) break;
    std::vector<int32_t> win;
    win.push_back(model.tokenizer().bos_id());
    win.insert(win.end(), ids.begin() + begin, ids.begin() + begin + ctx - 1);
    OneSeqCache c = MakeCache(codec(), ctx, sink_tokens);
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
  }
  return r;
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

std::vector<PasskeyTrial> RunPasskey(LlamaModel& model, const CodecFactory& codec,
                                     const std::vector<int>& lengths,
                                     const std::vector<double>& depths, uint64_t seed,
                                     int sink_tokens) {
  const Tokenizer& tok = model.tokenizer();
  const std::string intro =
      "There is a pass key hidden inside a lot of irrelevant text. Find it and remember it. "
      "I will quiz you about the pass key.\n";
  const std::string filler =
      " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
  const int filler_tokens = static_cast<int>(tok.Encode(filler, false, false).size());
  std::vector<PasskeyTrial> trials;
  uint64_t state = seed;
  std::vector<float> logits;
  const int vocab = model.config().vocab_size;
  for (int length : lengths) {
    for (double depth : depths) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      PasskeyTrial t;
      t.length = length;
      t.depth = depth;
      t.key = absl::StrFormat("%05d", static_cast<int>(10000 + (state >> 33) % 90000));
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
      OneSeqCache c = MakeCache(codec(), n + 16, sink_tokens);
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
    }
  }
  return trials;
}

}  // namespace vqserve::cli
