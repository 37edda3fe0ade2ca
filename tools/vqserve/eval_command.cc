// `vqserve eval`: perplexity with the kv cache in one or more codecs against fp16 on the same
// windows (paired: per-window relative perplexity change, its standard error and a t
// interval), bytes per token, reconstruction and attention errors, and passkey retrieval;
// text or --json (one line per codec) on stdout, progress on stderr. The fp16 baseline is
// computed once per run (or read from --baseline-file) whatever the number of codecs.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/calibration/calibration_recorder.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/kv/codebook_file.h"
#include "runtime/kv/codec_factory.h"
#include "runtime/kv/fp16_codec.h"
#include "runtime/kv/paged_kv_cache.h"
#include "runtime/model/llama_model.h"
#include "tools/vqserve/command.h"
#include "tools/vqserve/eval_metrics.h"

namespace vqserve::cli {
namespace {

constexpr char kUsage[] =
    "usage: vqserve eval --model M --text FILE[,FILE...] --codec C[@FILE.vqcb][,C2...]\n"
    "         [--codebooks FILE.vqcb[,FILE...]] [--device cpu|cuda] [--ctx N]\n"
    "         [--windows N (per text)] [--chunk N] [--no-baseline] [--baseline-file F]\n"
    "         [--passkey-lengths 1024,2048 | --no-passkey] [--passkey-depths 0.1,0.5,0.9 |\n"
    "          --passkey-trials N (depths (i+0.5)/N)] [--passkey-only] [--no-errors]\n"
    "         [--error-tokens N] [--sink-tokens N (default 32; 0: code the first page too)]\n"
    "         [--threads N] [--json]\n"
    "  several codecs share one fp16 baseline (the same windows and passkey trials); a codec's\n"
    "  codebooks are its @FILE, else the --codebooks file calibrated for it (or the only one).\n"
    "  --baseline-file F: fp16 windows and trials found in F are reused, new ones appended.\n";

struct EvalFlags {
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::vector<std::string> texts, codecs;
  std::string codebooks, device = "cpu", baseline_file;
  int ctx = 2048, windows = 2, chunk = 512, threads = 0, error_tokens = 1024;
  int sink_tokens = 32;  // oldest tokens kept fp16, as `vqserve serve` does by default
  bool baseline = true, passkey = true, json = false, errors = true;
  bool passkey_only = false;  // skip perplexity and errors
  std::vector<int> passkey_lengths = {1024, 2048};
  std::vector<double> passkey_depths = {0.1, 0.5, 0.9};
};

bool ParseFlags(int argc, char** argv, EvalFlags* f) {
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      f->json = true;
    } else if (a == "--no-baseline") {
      f->baseline = false;
    } else if (a == "--no-passkey") {
      f->passkey = false;
    } else if (a == "--no-errors") {
      f->errors = false;
    } else if (a == "--passkey-only") {
      f->passkey_only = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stderr);
      std::exit(0);
    } else if (i + 1 < argc &&
               (a == "--model" || a == "--text" || a == "--codec" || a == "--codebooks" ||
                a == "--ctx" || a == "--windows" || a == "--chunk" || a == "--threads" ||
                a == "--passkey-lengths" || a == "--passkey-depths" ||
                a == "--passkey-trials" || a == "--error-tokens" || a == "--sink-tokens" ||
                a == "--device" || a == "--baseline-file")) {
      const std::string v = argv[++i];
      if (a == "--model") f->model = v;
      if (a == "--text") f->texts = absl::StrSplit(v, ',', absl::SkipEmpty());
      if (a == "--codec") f->codecs = absl::StrSplit(v, ',', absl::SkipEmpty());
      if (a == "--codebooks") f->codebooks = v;
      if (a == "--device") f->device = v;
      if (a == "--baseline-file") f->baseline_file = v;
      if (a == "--ctx") f->ctx = std::atoi(v.c_str());
      if (a == "--windows") f->windows = std::atoi(v.c_str());
      if (a == "--chunk") f->chunk = std::atoi(v.c_str());
      if (a == "--threads") f->threads = std::atoi(v.c_str());
      if (a == "--error-tokens") f->error_tokens = std::atoi(v.c_str());
      if (a == "--sink-tokens") f->sink_tokens = std::atoi(v.c_str());
      if (a == "--passkey-trials") f->passkey_depths = SpreadDepths(std::atoi(v.c_str()));
      if (a == "--passkey-lengths") {
        f->passkey_lengths.clear();
        for (auto p : absl::StrSplit(v, ',')) {
          int x;
          if (absl::SimpleAtoi(p, &x)) f->passkey_lengths.push_back(x);
        }
      }
      if (a == "--passkey-depths") {
        f->passkey_depths.clear();
        for (auto p : absl::StrSplit(v, ',')) {
          double x;
          if (absl::SimpleAtod(p, &x)) f->passkey_depths.push_back(x);
        }
      }
    } else {
      std::fprintf(stderr, "vqserve eval: bad flag '%s'\n%s", a.c_str(), kUsage);
      return false;
    }
  }
  if (f->texts.empty() || f->codecs.empty()) {
    std::fprintf(stderr, "vqserve eval: --text and --codec are required\n%s", kUsage);
    return false;
  }
  if (f->device != "cpu" && f->device != "cuda") {
    std::fprintf(stderr, "vqserve eval: --device must be cpu or cuda\n");
    return false;
  }
  return f->ctx >= 64 && f->windows > 0 && f->chunk > 0 && !f->passkey_depths.empty();
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "vqserve eval: %s\n", std::string(s.message()).c_str());
  return 1;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    const unsigned char u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u < 0x80) out += ch;  // ascii only: keeps the json valid
    if (u == '\n') out += "\\n";
    if (u >= 0x80) out += '?';
  }
  return out;
}

std::string JsonDoubles(const std::vector<double>& x) {
  std::vector<std::string> parts;
  for (double v : x) parts.push_back(absl::StrFormat("%.9g", v));
  return absl::StrCat("[", absl::StrJoin(parts, ","), "]");
}

std::string JsonInterval(const MeanInterval& m) {
  return absl::StrFormat(
      "{\"n\":%d,\"mean\":%.6f,\"sd\":%.6f,\"se\":%.6f,\"lo\":%.6f,\"hi\":%.6f,\"level\":%g}", m.n,
      m.mean, m.sd, m.se, m.lo, m.hi, m.level);
}

// the fp16 baseline of a run: per-window nll and passkey trials, optionally kept in a file
// ("window TEXT BEGIN CTX CHUNK PREDICTIONS NLL_SUM" and
//  "passkey TARGET DEPTH KEY LENGTH CORRECT" lines) so that later runs reuse them.
struct BaselineStore {
  std::map<std::string, PerplexityResult> windows;
  std::map<std::string, PasskeyTrial> trials;
  static std::string WindowKey(const std::string& text, size_t begin, int ctx, int chunk) {
    return absl::StrCat(text, " ", begin, " ", ctx, " ", chunk);
  }
  static std::string TrialKey(int target, double depth, const std::string& key) {
    return absl::StrFormat("%d %.9g %s", target, depth, key);
  }
  void Load(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() == 7 && f[0] == "window") {
        PerplexityResult r;
        size_t begin;
        int ctx, chunk;
        int64_t pred;
        if (absl::SimpleAtoi(f[2], &begin) && absl::SimpleAtoi(f[3], &ctx) &&
            absl::SimpleAtoi(f[4], &chunk) && absl::SimpleAtoi(f[5], &pred) &&
            absl::SimpleAtod(f[6], &r.nll_sum)) {
          r.predictions = pred;
          windows[WindowKey(f[1], begin, ctx, chunk)] = r;
        }
      } else if (f.size() == 6 && f[0] == "passkey") {
        PasskeyTrial t;
        if (absl::SimpleAtoi(f[1], &t.target) && absl::SimpleAtod(f[2], &t.depth) &&
            absl::SimpleAtoi(f[4], &t.length)) {
          t.key = f[3];
          t.correct = f[5] == "1";
          trials[TrialKey(t.target, t.depth, t.key)] = t;
        }
      }
    }
  }
};

// one codec of the run: its name, codebooks and (label) the entry it came from.
struct CodecEntry {
  std::string entry, name, books_path;
  const CodebookFile* books = nullptr;
};

int RunEval(int argc, char** argv) {
  EvalFlags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  auto gguf = GgufFile::Open(flags.model);
  if (!gguf.ok()) return Fail(gguf.status());
  auto identity = ModelIdentity::FromGguf(**gguf);
  if (!identity.ok()) return Fail(identity.status());
  gguf->reset();

  // codebooks: every file of --codebooks and of the entries' @FILE, each checked once.
  std::map<std::string, CodebookFile> loaded_books;
  auto load_book = [&](const std::string& path) -> absl::StatusOr<const CodebookFile*> {
    auto it = loaded_books.find(path);
    if (it != loaded_books.end()) return &it->second;
    auto f = CodebookFile::Load(path);
    if (!f.ok()) return f.status();
    if (auto st = f->CheckModel(*identity, path); !st.ok()) return st;
    return &(loaded_books[path] = std::move(*f));
  };
  std::vector<std::string> book_paths = absl::StrSplit(flags.codebooks, ',', absl::SkipEmpty());
  for (const std::string& p : book_paths) {
    if (auto b = load_book(p); !b.ok()) return Fail(b.status());
  }
  std::vector<CodecEntry> entries;
  for (const std::string& e : flags.codecs) {
    CodecEntry c;
    c.entry = e;
    const size_t at = e.find('@');
    c.name = e.substr(0, at);
    if (at != std::string::npos) {
      c.books_path = e.substr(at + 1);
      auto b = load_book(c.books_path);
      if (!b.ok()) return Fail(b.status());
      c.books = *b;
    } else if (book_paths.size() == 1) {
      c.books_path = book_paths[0];
      c.books = &loaded_books[book_paths[0]];
    } else {
      for (const std::string& p : book_paths) {
        if (loaded_books[p].codec == c.name) {
          c.books_path = p;
          c.books = &loaded_books[p];
        }
      }
    }
    if (c.name == "fp16" && flags.baseline) continue;  // the baseline itself
    entries.push_back(c);
  }

  const bool cuda = flags.device == "cuda";
  LoadOptions load;
  load.num_threads = flags.threads;
  auto loaded = cuda ? LoadCudaLlamaModel(flags.model) : LlamaModel::Load(flags.model, load);
  if (!loaded.ok()) return Fail(loaded.status());
  LlamaModel& model = **loaded;
  const KvShape shape = model.kv_shape();
  for (const CodecEntry& e : entries) {
    auto probe = MakeCodec(e.name, shape, e.books);
    if (!probe.ok()) return Fail(probe.status());
    if (cuda) {
      if (auto st = CudaKvCodecSupported(e.name, shape.head_dim); !st.ok()) return Fail(st);
    }
  }
  // the one-sequence cache of a codec: PagedKvCache on the cpu, the device cache for cuda
  // (pages as for fp16, which bounds every codec's, as `vqserve generate` sizes them).
  auto cache_factory = [&](const std::string& name, const CodebookFile* books,
                           int sink) -> CacheFactory {
    if (!cuda) {
      return HostCacheFactory([name, books, &shape] { return *MakeCodec(name, shape, books); },
                              sink);
    }
    return [name, books, sink, &shape](int tokens) -> std::unique_ptr<KvCache> {
      KvCacheSpec fp16;
      fp16.page_tokens = MakeFp16Codec(shape)->page_tokens();
      fp16.residual_tokens = 0;
      const int pages = PagesForTokens(fp16, tokens) + 1;
      auto made = MakeCudaKvCacheOf(name, shape, books, pages, 1, sink);
      if (!made.ok()) {
        std::fprintf(stderr, "vqserve eval: %s\n", std::string(made.status().message()).c_str());
        std::exit(1);
      }
      return std::move(*made);
    };
  };

  // texts and windows.
  std::vector<std::vector<int32_t>> texts;
  std::vector<size_t> text_tokens;
  for (const std::string& path : flags.texts) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Fail(absl::NotFoundError(absl::StrCat(path, ": cannot open text")));
    std::stringstream ss;
    ss << in.rdbuf();
    texts.push_back(model.tokenizer().Encode(ss.str(), false, false));
    text_tokens.push_back(texts.back().size());
    if (texts.back().size() < static_cast<size_t>(flags.ctx)) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "%s: %d tokens, fewer than --ctx %d", path, texts.back().size(), flags.ctx)));
    }
  }
  const std::vector<EvalWindow> windows = SpreadWindows(text_tokens, flags.ctx, flags.windows);
  std::fprintf(stderr, "eval: %zu windows of %d tokens from %zu texts (%s), %zu codecs%s (%.1fs)\n",
               windows.size(), flags.ctx, texts.size(),
               absl::StrJoin(text_tokens, "+").c_str(), entries.size(),
               flags.baseline ? " + fp16 baseline" : "", seconds());
  auto progress = [&](const std::string& what) {
    return [&, what](int done, int total, int64_t tokens, double s) {
      std::fprintf(stderr, "eval: %s %d/%d, %lld tokens in %.1fs (%.1f tokens/s)\n", what.c_str(),
                   done, total, static_cast<long long>(tokens), s, s > 0 ? tokens / s : 0.0);
    };
  };

  // the fp16 baseline, once for every codec.
  BaselineStore store;
  if (!flags.baseline_file.empty()) store.Load(flags.baseline_file);
  std::vector<PerplexityResult> base_windows;
  std::vector<PasskeyTrial> base_trials;
  const bool run_passkey = flags.passkey || flags.passkey_only;
  double base_seconds = 0;
  if (flags.baseline) {
    const double tb = seconds();
    CacheFactory fp16 = cache_factory("fp16", nullptr, 0);
    if (!flags.passkey_only) {
      std::vector<EvalWindow> missing;
      for (const EvalWindow& w : windows) {
        const std::string k = BaselineStore::WindowKey(flags.texts[w.text], w.begin, flags.ctx,
                                                       flags.chunk);
        if (!store.windows.count(k)) missing.push_back(w);
      }
      if (!missing.empty()) {
        // one window at a time, each kept in the baseline file as soon as it is done.
        std::ofstream out;
        if (!flags.baseline_file.empty()) out.open(flags.baseline_file, std::ios::app);
        const double tw = seconds();
        for (size_t i = 0; i < missing.size(); ++i) {
          const EvalWindow& w = missing[i];
          const PerplexityResult r =
              WindowNll(model, fp16, texts, {w}, flags.ctx, flags.chunk).front();
          store.windows[BaselineStore::WindowKey(flags.texts[w.text], w.begin, flags.ctx,
                                                 flags.chunk)] = r;
          if (out.is_open()) {
            out << absl::StrFormat("window %s %d %d %d %d %.17g\n", flags.texts[w.text], w.begin,
                                   flags.ctx, flags.chunk, r.predictions, r.nll_sum);
            out.flush();
          }
          progress("fp16 window")(static_cast<int>(i + 1), static_cast<int>(missing.size()),
                                  static_cast<int64_t>(i + 1) * flags.ctx, seconds() - tw);
        }
      } else {
        std::fprintf(stderr, "eval: fp16 windows from %s\n", flags.baseline_file.c_str());
      }
      for (const EvalWindow& w : windows) {
        base_windows.push_back(store.windows[BaselineStore::WindowKey(
            flags.texts[w.text], w.begin, flags.ctx, flags.chunk)]);
      }
    }
    if (run_passkey) {
      std::vector<int> missing_lengths;
      for (int len : flags.passkey_lengths) {
        for (size_t d = 0; d < flags.passkey_depths.size(); ++d) {
          if (!store.trials.count(BaselineStore::TrialKey(
                  len, flags.passkey_depths[d], PasskeyKey(20261129, len, static_cast<int>(d))))) {
            missing_lengths.push_back(len);
            break;
          }
        }
      }
      if (!missing_lengths.empty()) {
        auto got = RunPasskey(model, fp16, missing_lengths, flags.passkey_depths, 20261129,
                              progress("fp16 passkey"));
        std::ofstream out;
        if (!flags.baseline_file.empty()) out.open(flags.baseline_file, std::ios::app);
        for (const PasskeyTrial& t : got) {
          store.trials[BaselineStore::TrialKey(t.target, t.depth, t.key)] = t;
          if (out.is_open()) {
            out << absl::StrFormat("passkey %d %.9g %s %d %d\n", t.target, t.depth, t.key,
                                   t.length, t.correct ? 1 : 0);
          }
        }
      }
      for (int len : flags.passkey_lengths) {
        for (size_t d = 0; d < flags.passkey_depths.size(); ++d) {
          base_trials.push_back(store.trials[BaselineStore::TrialKey(
              len, flags.passkey_depths[d], PasskeyKey(20261129, len, static_cast<int>(d)))]);
        }
      }
    }
    base_seconds = seconds() - tb;
  }

  // errors on k/v/q recorded over the start of the first text (on the cpu model).
  std::optional<CalibrationRecorder> rec;
  if (flags.errors && !flags.passkey_only && !entries.empty()) {
    std::unique_ptr<LlamaModel> cpu_model;
    LlamaModel* m = &model;
    if (cuda) {
      auto l = LlamaModel::Load(flags.model, load);
      if (!l.ok()) return Fail(l.status());
      cpu_model = std::move(*l);
      m = cpu_model.get();
    }
    const std::vector<int32_t>& ids = texts[0];
    const int err_tokens = std::min<int>(flags.error_tokens, static_cast<int>(ids.size()));
    rec.emplace(shape, m->config().rope_theta, err_tokens, 1, true);
    std::vector<int32_t> seq;
    seq.push_back(m->tokenizer().bos_id());
    seq.insert(seq.end(), ids.begin(), ids.begin() + err_tokens - 1);
    std::vector<float> logits;
    for (int start = 0; start < err_tokens; start += flags.chunk) {
      ForwardSeq fs;
      const int n = std::min(flags.chunk, err_tokens - start);
      fs.tokens = std::span<const int32_t>(seq.data() + start, n);
      fs.cache = &*rec;
      fs.kv.slot = 0;
      fs.kv.num_cached = start;
      fs.want_logits = false;
      m->Forward({&fs, 1}, &logits);
    }
  }

  const double fp16_bpt = 2.0 * 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim;
  std::vector<int> window_text;
  for (const EvalWindow& w : windows) window_text.push_back(w.text);
  auto pooled = [](const std::vector<PerplexityResult>& rs) {
    PerplexityResult p;
    for (const auto& r : rs) {
      p.nll_sum += r.nll_sum;
      p.predictions += r.predictions;
    }
    return p;
  };
  auto mean_nll = [](const std::vector<PerplexityResult>& rs) {
    std::vector<double> x;
    for (const auto& r : rs) x.push_back(r.predictions ? r.nll_sum / r.predictions : 0.0);
    return x;
  };
  auto trials_json = [&](const std::vector<PasskeyTrial>& trials) {
    std::string tj;
    for (size_t i = 0; i < trials.size(); ++i) {
      const PasskeyTrial& t = trials[i];
      const std::string base =
          i < base_trials.size() ? (base_trials[i].correct ? ",\"fp16_correct\":true"
                                                           : ",\"fp16_correct\":false")
                                 : "";
      absl::StrAppend(&tj, tj.empty() ? "" : ",",
                      absl::StrFormat("{\"target\":%d,\"tokens\":%d,\"depth\":%g,\"key\":\"%s\","
                                      "\"answer\":\"%s\",\"correct\":%s%s}",
                                      t.target, t.length, t.depth, t.key, JsonEscape(t.answer),
                                      t.correct ? "true" : "false", base));
    }
    return tj;
  };
  const std::string texts_json =
      absl::StrCat("[\"", absl::StrJoin(flags.texts, "\",\""), "\"]");

  // the fp16 line (when the baseline ran), then one line per codec.
  if (flags.baseline && flags.json) {
    const PerplexityResult bp = pooled(base_windows);
    int correct = 0;
    for (const auto& t : base_trials) correct += t.correct;
    absl::PrintF(
        "{\"codec\":\"fp16\",\"entry\":\"fp16\",\"device\":\"%s\",\"texts\":%s,\"ctx\":%d,"
        "\"windows\":%d,\"windows_per_text\":%d,\"predictions\":%lld,\"perplexity\":%.6f,"
        "\"fp16_perplexity\":%.6f,\"delta_ppl_pct\":0,\"bytes_per_token\":%.2f,"
        "\"fp16_bytes_per_token\":%.2f,\"compression\":1,\"bits_per_element\":16,"
        "\"window_text\":[%s],\"window_nll\":%s,\"passkey_accuracy\":%.4f,\"passkey\":[%s],"
        "\"seconds\":%.1f}\n",
        flags.device, texts_json, flags.ctx, static_cast<int>(windows.size()), flags.windows,
        static_cast<long long>(bp.predictions), bp.perplexity(), bp.perplexity(), fp16_bpt,
        fp16_bpt, absl::StrJoin(window_text, ","), JsonDoubles(mean_nll(base_windows)),
        base_trials.empty() ? 0.0 : double(correct) / base_trials.size(),
        trials_json(base_trials), base_seconds);
    std::fflush(stdout);
  }

  for (const CodecEntry& e : entries) {
    const double tc = seconds();
    auto probe = MakeCodec(e.name, shape, e.books);
    const KvCodec& c = **probe;
    const double bpt = static_cast<double>(c.LayerPageBytes()) * shape.num_layers / c.page_tokens();
    const double bits_per_element =
        bpt * 8 / (2.0 * shape.num_layers * shape.num_kv_heads * shape.head_dim);
    CacheFactory factory = cache_factory(e.name, e.books, flags.sink_tokens);
    std::vector<PerplexityResult> cw;
    CodecErrors err;
    if (!flags.passkey_only) {
      cw = WindowNll(model, factory, texts, windows, flags.ctx, flags.chunk,
                     progress(e.entry + " window"));
      if (rec) {
        err = MeasureCodecErrors(c, *rec, 8);
        std::fprintf(stderr, "eval: %s errors k %.4f v %.4f attention %.4f (%.1fs)\n",
                     e.entry.c_str(), err.k_rel, err.v_rel, err.attn_rel, seconds());
      }
    }
    std::vector<PasskeyTrial> trials;
    if (run_passkey) {
      trials = RunPasskey(model, factory, flags.passkey_lengths, flags.passkey_depths, 20261129,
                          progress(e.entry + " passkey"));
    }
    int correct = 0;
    for (const auto& t : trials) correct += t.correct;
    const double passkey_acc = trials.empty() ? 0.0 : double(correct) / trials.size();
    const PerplexityResult cp = pooled(cw), bp = pooled(base_windows);
    const double base = bp.perplexity();
    const double dppl = base > 0 ? 100.0 * (cp.perplexity() - base) / base : 0.0;
    // paired per-window deltas, overall and per text.
    const std::vector<double> deltas = RelativePerplexityDeltaPct(cw, base_windows);
    const MeanInterval all = MeanWithTInterval(deltas);
    std::vector<std::string> per_text;
    for (size_t t = 0; t < texts.size(); ++t) {
      std::vector<double> d;
      for (size_t i = 0; i < deltas.size(); ++i) {
        if (windows[i].text == static_cast<int>(t)) d.push_back(deltas[i]);
      }
      per_text.push_back(JsonInterval(MeanWithTInterval(d)));
    }
    const int sink = c.residual_tokens() > 0
                         ? flags.sink_tokens / c.page_tokens() * c.page_tokens()
                         : 0;
    const double secs = seconds() - tc;
    if (flags.json) {
      absl::PrintF(
          "{\"codec\":\"%s\",\"entry\":\"%s\",\"codebooks\":\"%s\",\"device\":\"%s\","
          "\"texts\":%s,\"ctx\":%d,\"windows\":%d,\"windows_per_text\":%d,\"predictions\":%lld,"
          "\"perplexity\":%.6f,\"fp16_perplexity\":%.6f,\"delta_ppl_pct\":%.4f,"
          "\"delta_pct\":%s,\"delta_pct_by_text\":[%s],\"window_text\":[%s],"
          "\"window_nll\":%s,\"fp16_window_nll\":%s,"
          "\"bytes_per_token\":%.2f,\"fp16_bytes_per_token\":%.2f,\"compression\":%.3f,"
          "\"bits_per_element\":%.4f,\"fixed_bytes\":%zu,\"residual_tokens\":%d,"
          "\"sink_tokens\":%d,"
          "\"k_rel_error\":%.6f,\"v_rel_error\":%.6f,\"attn_rel_error\":%.6f,"
          "\"passkey_accuracy\":%.4f,\"passkey\":[%s],\"seconds\":%.1f}\n",
          e.name, e.entry, e.books_path, flags.device, texts_json, flags.ctx,
          static_cast<int>(windows.size()), flags.windows, static_cast<long long>(cp.predictions),
          cp.perplexity(), base, dppl, JsonInterval(all), absl::StrJoin(per_text, ","),
          absl::StrJoin(window_text, ","), JsonDoubles(mean_nll(cw)),
          JsonDoubles(mean_nll(base_windows)), bpt, fp16_bpt, fp16_bpt / bpt, bits_per_element,
          c.FixedBytes(), c.residual_tokens(), sink, err.k_rel, err.v_rel, err.attn_rel,
          passkey_acc, trials_json(trials), secs);
      std::fflush(stdout);
    } else {
      absl::PrintF("codec %s\nperplexity %.4f (fp16 %.4f, pooled delta %+.2f%%) over %d windows "
                   "of %d tokens\n",
                   e.entry, cp.perplexity(), base, dppl, static_cast<int>(windows.size()),
                   flags.ctx);
      if (all.n > 0) {
        absl::PrintF("per-window delta %+.3f%% (se %.3f, 95%% t interval %+.3f .. %+.3f, n %d)\n",
                     all.mean, all.se, all.lo, all.hi, all.n);
      }
      std::printf("kv bytes/token %.1f (fp16 %.0f), compression %.2fx, %.3f bits/element, "
                  "residual %d and sink %d fp16 tokens, codebooks %zu bytes\n",
                  bpt, fp16_bpt, fp16_bpt / bpt, bits_per_element, c.residual_tokens(), sink,
                  c.FixedBytes());
      std::printf("reconstruction error k %.4f v %.4f, attention output error %.4f\n", err.k_rel,
                  err.v_rel, err.attn_rel);
      for (size_t i = 0; i < trials.size(); ++i) {
        const PasskeyTrial& t = trials[i];
        std::printf("passkey %5d tokens depth %.2f key %s -> '%s' %s%s\n", t.length, t.depth,
                    t.key.c_str(), t.answer.c_str(), t.correct ? "ok" : "MISS",
                    i < base_trials.size() ? (base_trials[i].correct ? " (fp16 ok)" : " (fp16 MISS)")
                                           : "");
      }
      if (!trials.empty()) std::printf("passkey accuracy %d/%zu\n", correct, trials.size());
      std::fflush(stdout);
    }
    std::fprintf(stderr, "eval: %s done in %.1fs\n", e.entry.c_str(), secs);
  }
  if (!flags.json && flags.baseline) {
    const PerplexityResult bp = pooled(base_windows);
    int correct = 0;
    for (const auto& t : base_trials) correct += t.correct;
    std::printf("fp16 perplexity %.4f over %d windows (%.1fs)", bp.perplexity(),
                static_cast<int>(base_windows.size()), base_seconds);
    if (!base_trials.empty()) std::printf(", passkey %d/%zu", correct, base_trials.size());
    std::printf("\n");
  }
  return 0;
}

CommandRegistrar kRegister("eval", "perplexity, errors and passkey retrieval of kv codecs",
                           RunEval);

}  // namespace
}  // namespace vqserve::cli
