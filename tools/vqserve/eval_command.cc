// `vqserve eval`: perplexity with the kv cache in a codec (and fp16 for delta), bytes per token,
// reconstruction and attention errors, and passkey retrieval; text or --json on stdout.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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
#include "runtime/kv/codebook_file.h"
#include "runtime/kv/codec_factory.h"
#include "runtime/kv/fp16_codec.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "tools/vqserve/command.h"
#include "tools/vqserve/eval_metrics.h"

namespace vqserve::cli {
namespace {

constexpr char kUsage[] =
    "usage: vqserve eval --model M --text FILE --codec C [--codebooks FILE.vqcb] [--ctx N]\n"
    "         [--windows N] [--chunk N] [--baseline-ppl X | --no-baseline]\n"
    "         [--passkey-lengths 1024,2048 | --no-passkey] [--passkey-depths 0.1,0.5,0.9]\n"
    "         [--passkey-only]\n"
    "         [--error-tokens N] [--sink-tokens N (default 32; 0: code the first page too)]\n"
    "         [--threads N] [--json]\n";

struct EvalFlags {
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string text, codec, codebooks;
  int ctx = 2048, windows = 2, chunk = 512, threads = 0, error_tokens = 1024;
  int sink_tokens = 32;  // oldest tokens kept fp16, as `vqserve serve` does by default
  std::optional<double> baseline_ppl;
  bool baseline = true, passkey = true, json = false;
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
    } else if (a == "--passkey-only") {
      f->passkey_only = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stderr);
      std::exit(0);
    } else if (i + 1 < argc &&
               (a == "--model" || a == "--text" || a == "--codec" || a == "--codebooks" ||
                a == "--ctx" || a == "--windows" || a == "--chunk" || a == "--threads" ||
                a == "--baseline-ppl" || a == "--passkey-lengths" || a == "--passkey-depths" ||
                a == "--error-tokens" || a == "--sink-tokens")) {
      const std::string v = argv[++i];
      if (a == "--model") f->model = v;
      if (a == "--text") f->text = v;
      if (a == "--codec") f->codec = v;
      if (a == "--codebooks") f->codebooks = v;
      if (a == "--ctx") f->ctx = std::atoi(v.c_str());
      if (a == "--windows") f->windows = std::atoi(v.c_str());
      if (a == "--chunk") f->chunk = std::atoi(v.c_str());
      if (a == "--threads") f->threads = std::atoi(v.c_str());
      if (a == "--error-tokens") f->error_tokens = std::atoi(v.c_str());
      if (a == "--sink-tokens") f->sink_tokens = std::atoi(v.c_str());
      if (a == "--baseline-ppl") f->baseline_ppl = std::strtod(v.c_str(), nullptr);
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
  if (f->text.empty() || f->codec.empty()) {
    std::fprintf(stderr, "vqserve eval: --text and --codec are required\n%s", kUsage);
    return false;
  }
  return f->ctx >= 64 && f->windows > 0 && f->chunk > 0;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "vqserve eval: %s\n", std::string(s.message()).c_str());
  return 1;
}

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
  std::optional<CodebookFile> books;
  if (!flags.codebooks.empty()) {
    auto f = CodebookFile::Load(flags.codebooks);
    if (!f.ok()) return Fail(f.status());
    if (auto st = f->CheckModel(*identity, flags.codebooks); !st.ok()) return Fail(st);
    books = std::move(*f);
  }
  LoadOptions load;
  load.num_threads = flags.threads;
  auto loaded = LlamaModel::Load(flags.model, load);
  if (!loaded.ok()) return Fail(loaded.status());
  LlamaModel& model = **loaded;
  const KvShape shape = model.kv_shape();
  const CodebookFile* cb = books ? &*books : nullptr;
  auto probe = MakeCodec(flags.codec, shape, cb);
  if (!probe.ok()) return Fail(probe.status());
  CodecFactory codec = [&] { return *MakeCodec(flags.codec, shape, cb); };
  CodecFactory fp16 = [&] { return MakeFp16Codec(shape); };

  std::ifstream in(flags.text, std::ios::binary);
  if (!in) return Fail(absl::NotFoundError(absl::StrCat(flags.text, ": cannot open text")));
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<int32_t> ids = model.tokenizer().Encode(ss.str(), false, false);
  if (ids.size() < static_cast<size_t>(flags.ctx)) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("%s: %d tokens, fewer than --ctx %d", flags.text, ids.size(), flags.ctx)));
  }

  // memory accounting.
  const KvCodec& c = **probe;
  const double fp16_bpt = 2.0 * 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim;
  const double bpt = static_cast<double>(c.LayerPageBytes()) * shape.num_layers / c.page_tokens();
  const double bits_per_element = bpt * 8 / (2.0 * shape.num_layers * shape.num_kv_heads * shape.head_dim);

  PerplexityResult ppl;
  double base = flags.baseline_ppl.value_or(0), dppl = 0;
  CodecErrors err;
  if (!flags.passkey_only) {
    ppl = WindowPerplexity(model, codec, ids, flags.ctx, flags.windows, flags.chunk,
                           flags.sink_tokens);
    std::fprintf(stderr, "eval: %s perplexity %.4f over %lld predictions (%.1fs)\n", flags.codec.c_str(),
                 ppl.perplexity(), static_cast<long long>(ppl.predictions), seconds());
    if (!flags.baseline_ppl && flags.baseline) {
      base = WindowPerplexity(model, fp16, ids, flags.ctx, flags.windows, flags.chunk, 0)
                 .perplexity();
      std::fprintf(stderr, "eval: fp16 perplexity %.4f (%.1fs)\n", base, seconds());
    }
    dppl = base > 0 ? 100.0 * (ppl.perplexity() - base) / base : 0.0;

    // errors on k/v/q recorded over the start of the text.
    const int err_tokens = std::min<int>(flags.error_tokens, static_cast<int>(ids.size()));
    CalibrationRecorder rec(shape, model.config().rope_theta, err_tokens, 1, true);
    {
      std::vector<int32_t> seq;
      seq.push_back(model.tokenizer().bos_id());
      seq.insert(seq.end(), ids.begin(), ids.begin() + err_tokens - 1);
      std::vector<float> logits;
      for (int start = 0; start < err_tokens; start += flags.chunk) {
        ForwardSeq fs;
        const int n = std::min(flags.chunk, err_tokens - start);
        fs.tokens = std::span<const int32_t>(seq.data() + start, n);
        fs.cache = &rec;
        fs.kv.slot = 0;
        fs.kv.num_cached = start;
        fs.want_logits = false;
        model.Forward({&fs, 1}, &logits);
      }
    }
    err = MeasureCodecErrors(c, rec, 8);
    std::fprintf(stderr, "eval: errors k %.4f v %.4f attention %.4f (%.1fs)\n", err.k_rel, err.v_rel,
                 err.attn_rel, seconds());
  }

  std::vector<PasskeyTrial> trials;
  if (flags.passkey || flags.passkey_only) {
    trials = RunPasskey(model, codec, flags.passkey_lengths, flags.passkey_depths, 20261129,
                        flags.sink_tokens);
  }
  int correct = 0;
  for (const auto& t : trials) correct += t.correct;
  const double passkey_acc = trials.empty() ? 0.0 : double(correct) / trials.size();

  // what PagedKvCache keeps as the fp16 sink (nothing for codecs without a residual window).
  const int sink = c.residual_tokens() > 0 ? flags.sink_tokens / c.page_tokens() * c.page_tokens()
                                           : 0;
  if (flags.json) {
    std::string tj;  // the trials as a json array body
    for (const auto& t : trials) {
      std::string ans;
      for (char ch : t.answer) {
        if (ch == '"' || ch == '\\') ans += '\\';
        const unsigned char u = static_cast<unsigned char>(ch);
        if (u >= 0x20 && u < 0x80) ans += ch;  // ascii only: keeps the json valid
        if (u >= 0x80) ans += '?';
      }
      absl::StrAppend(&tj, tj.empty() ? "" : ",",
                      absl::StrFormat("{\"tokens\":%d,\"depth\":%g,\"key\":\"%s\",\"answer\":\"%s\",\"correct\":%s}",
                                      t.length, t.depth, t.key, ans, t.correct ? "true" : "false"));
    }
    absl::PrintF(
        "{\"codec\":\"%s\",\"codebooks\":\"%s\",\"ctx\":%d,\"windows\":%d,\"predictions\":%lld,"
        "\"perplexity\":%.6f,\"fp16_perplexity\":%.6f,\"delta_ppl_pct\":%.4f,"
        "\"bytes_per_token\":%.2f,\"fp16_bytes_per_token\":%.2f,\"compression\":%.3f,"
        "\"bits_per_element\":%.4f,\"fixed_bytes\":%zu,\"residual_tokens\":%d,"
        "\"sink_tokens\":%d,"
        "\"k_rel_error\":%.6f,\"v_rel_error\":%.6f,\"attn_rel_error\":%.6f,"
        "\"passkey_accuracy\":%.4f,\"passkey\":[%s],\"seconds\":%.1f}\n",
        flags.codec, flags.codebooks, flags.ctx, flags.windows, static_cast<long long>(ppl.predictions),
        ppl.perplexity(), base, dppl, bpt, fp16_bpt, fp16_bpt / bpt, bits_per_element, c.FixedBytes(),
        c.residual_tokens(), sink, err.k_rel, err.v_rel, err.attn_rel, passkey_acc, tj, seconds());
  } else {
    absl::PrintF("codec %s\nperplexity %.4f (fp16 %.4f, delta %+.2f%%) over %d windows of %d tokens\n",
                flags.codec.c_str(), ppl.perplexity(), base, dppl, flags.windows, flags.ctx);
    std::printf("kv bytes/token %.1f (fp16 %.0f), compression %.2fx, %.3f bits/element, "
                "residual %d and sink %d fp16 tokens, codebooks %zu bytes\n",
                bpt, fp16_bpt, fp16_bpt / bpt, bits_per_element, c.residual_tokens(), sink,
                c.FixedBytes());
    std::printf("reconstruction error k %.4f v %.4f, attention output error %.4f\n", err.k_rel,
                err.v_rel, err.attn_rel);
    for (const auto& t : trials) {
      std::printf("passkey %5d tokens depth %.2f key %s -> '%s' %s\n", t.length, t.depth,
                  t.key.c_str(), t.answer.c_str(), t.correct ? "ok" : "MISS");
    }
    if (!trials.empty()) std::printf("passkey accuracy %d/%zu\n", correct, trials.size());
  }
  return 0;
}

CommandRegistrar kRegister("eval", "perplexity, errors and passkey retrieval of a kv codec",
                           RunEval);

}  // namespace
}  // namespace vqserve::cli
