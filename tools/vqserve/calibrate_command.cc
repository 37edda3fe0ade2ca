// `vqserve calibrate`: runs the model over calibration text, records k/v per layer and writes a
// .vqcb artifact of trained codebooks (vecinfer, commvq) or of the model identity (kivi).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/calibration/calibration_recorder.h"
#include "runtime/model/llama_weights.h"
#include "runtime/kv/codebook_file.h"
#include "runtime/kv/commvq_codec.h"
#include "runtime/calibration/commvq_trainer.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/model/llama_model.h"
#include "runtime/calibration/vecinfer_trainer.h"
#include "tools/vqserve/command.h"

namespace vqserve::cli {
namespace {

constexpr char kUsage[] =
    "usage: vqserve calibrate --model M --text FILE --codec vecinfer|commvq|kivi\n"
    "         --k-bits B --v-bits B -o FILE.vqcb [--tokens N] [--seq-len N] [--seed S]\n"
    "         [--iterations N] [--no-smooth] [--no-hadamard] [--per-head] [--threads N]\n"
    "         [--pca-keys (vecinfer: keys in score-whitened principal axes, sub-vectors sized\n"
    "          by their variance, books per kv head; in place of smoothing and hadamard; --k-bits\n"
    "          then any width of whole 8-bit codes, head_dim * bits / 8 of them: 2.375 -> 19)]\n"
    "         [--max-samples N (vecinfer: rows each codebook trains on, a seeded subsample;\n"
    "          default 32 a centroid, at most 32768)]\n";

struct CalibrateFlags {
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string text, codec, out;
  float k_bits = 2, v_bits = 2;
  int tokens = 8192;   // calibration tokens per layer
  int seq_len = 512;   // tokens per calibration sequence
  uint64_t seed = 1;
  int iterations = 30;
  int64_t max_samples = 0;  // 0: the trainer's default
  bool smoothing = true, hadamard = true, per_head = false, pca_keys = false;
  int threads = 0;
};

bool ParseFlags(int argc, char** argv, CalibrateFlags* f) {
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto need = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "vqserve calibrate: %s needs a value\n", a.c_str());
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "--no-smooth") {
      f->smoothing = false;
    } else if (a == "--no-hadamard") {
      f->hadamard = false;
    } else if (a == "--per-head") {
      f->per_head = true;
    } else if (a == "--pca-keys") {
      f->pca_keys = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stderr);
      std::exit(0);
    } else if (a == "--model" || a == "--text" || a == "--codec" || a == "-o" || a == "--k-bits" ||
               a == "--v-bits" || a == "--tokens" || a == "--seq-len" || a == "--seed" ||
               a == "--iterations" || a == "--threads" || a == "--max-samples") {
      const char* v = need();
      if (!v) return false;
      if (a == "--model") f->model = v;
      if (a == "--text") f->text = v;
      if (a == "--codec") f->codec = v;
      if (a == "-o") f->out = v;
      if (a == "--k-bits") f->k_bits = std::strtof(v, nullptr);
      if (a == "--v-bits") f->v_bits = std::strtof(v, nullptr);
      if (a == "--tokens") f->tokens = std::atoi(v);
      if (a == "--seq-len") f->seq_len = std::atoi(v);
      if (a == "--seed") f->seed = std::strtoull(v, nullptr, 10);
      if (a == "--iterations") f->iterations = std::atoi(v);
      if (a == "--threads") f->threads = std::atoi(v);
      if (a == "--max-samples") f->max_samples = std::atoll(v);
    } else {
      std::fprintf(stderr, "vqserve calibrate: unknown flag '%s'\n%s", a.c_str(), kUsage);
      return false;
    }
  }
  if (f->text.empty() || f->codec.empty() || f->out.empty()) {
    std::fprintf(stderr, "vqserve calibrate: --text, --codec and -o are required\n%s", kUsage);
    return false;
  }
  if (f->codec != "vecinfer" && f->codec != "commvq" && f->codec != "kivi") {
    std::fprintf(stderr, "vqserve calibrate: --codec must be vecinfer, commvq or kivi\n");
    return false;
  }
  if (f->tokens <= 0 || f->seq_len <= 0 || f->max_samples < 0) {
    std::fprintf(stderr,
                 "vqserve calibrate: --tokens and --seq-len must be positive, --max-samples 0 "
                 "or more\n");
    return false;
  }
  return true;
}

void Progress(const std::string& line) { std::fprintf(stderr, "calibrate: %s\n", line.c_str()); }

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "vqserve calibrate: %s\n", std::string(s.message()).c_str());
  return 1;
}

int RunCalibrate(int argc, char** argv) {
  CalibrateFlags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };

  // the artifact's codec name and settings.
  CodebookFile file;
  VecInferOptions vopts;
  CommVqOptions copts;
  if (flags.codec == "kivi") {
    if (flags.k_bits != flags.v_bits || (flags.k_bits != 2 && flags.k_bits != 4)) {
      std::fprintf(stderr, "vqserve calibrate: kivi needs --k-bits = --v-bits = 2 or 4\n");
      return 2;
    }
    file.codec = absl::StrFormat("kivi-k%dv%d", int(flags.k_bits), int(flags.v_bits));
  } else if (flags.codec == "vecinfer") {
    vopts.k_bits = flags.k_bits;
    vopts.v_bits = flags.v_bits;
    vopts.smoothing = flags.smoothing;
    vopts.hadamard = flags.hadamard;
    vopts.per_head = flags.per_head;
    vopts.key_pca = flags.pca_keys;
    vopts.iterations = flags.iterations;
    vopts.max_samples = flags.max_samples;
    vopts.seed = flags.seed;
    vopts.num_threads = flags.threads > 0 ? flags.threads : 0;
    file.codec = VecInferCodecName(vopts);
    // the name's parser holds the option rules (widths, -pca: no -nosmooth/-nohadamard); the
    // trainer checks the widths against the model's head_dim.
    if (auto o = VecInferOptionsForName(file.codec); !o.ok()) return Fail(o.status());
  }

  auto gguf = GgufFile::Open(flags.model);
  if (!gguf.ok()) return Fail(gguf.status());
  auto identity = ModelIdentity::FromGguf(**gguf);
  if (!identity.ok()) return Fail(identity.status());
  file.model = *identity;
  gguf->reset();
  LoadOptions load;
  load.num_threads = flags.threads;
  auto model = LlamaModel::Load(flags.model, load);
  if (!model.ok()) return Fail(model.status());
  LlamaModel& m = **model;
  const KvShape shape = m.kv_shape();
  if (flags.codec == "vecinfer") {  // widths against this model's head_dim, before the forward pass
    auto k = VecInferSideGeometry(vopts.k_bits, vopts.key_pca, shape.head_dim);
    if (!k.ok()) return Fail(k.status());
    auto v = VecInferSideGeometry(vopts.v_bits, false, shape.head_dim);
    if (!v.ok()) return Fail(v.status());
  }

  if (flags.codec == "commvq") {
    if (flags.k_bits != flags.v_bits) {
      std::fprintf(stderr, "vqserve calibrate: commvq uses one bit budget (--k-bits = --v-bits)\n");
      return 2;
    }
    file.codec = absl::StrFormat("commvq-%g", flags.k_bits);
    auto o = CommVqOptionsForName(file.codec, shape);
    if (!o.ok()) return Fail(o.status());
    copts = *o;
    copts.seed = flags.seed;
    if (flags.threads > 0) copts.num_threads = flags.threads;
  }
  file.params = {{"text", flags.text},
                 {"tokens", absl::StrCat(flags.tokens)},
                 {"seq_len", absl::StrCat(flags.seq_len)},
                 {"seed", absl::StrCat(flags.seed)},
                 {"iterations", absl::StrCat(flags.iterations)}};
  if (flags.max_samples > 0) file.params["max_samples"] = absl::StrCat(flags.max_samples);

  if (flags.codec != "kivi") {
    std::ifstream in(flags.text, std::ios::binary);
    if (!in) return Fail(absl::NotFoundError(absl::StrCat(flags.text, ": cannot open text")));
    std::stringstream ss;
    ss << in.rdbuf();
    std::vector<int32_t> ids = m.tokenizer().Encode(ss.str(), /*add_bos=*/false, false);
    const int usable = std::min<int>(flags.tokens, static_cast<int>(ids.size()));
    if (usable < flags.seq_len) {
      return Fail(absl::InvalidArgumentError(
          absl::StrFormat("%s: only %d tokens, need at least %d", flags.text, ids.size(), flags.seq_len)));
    }
    Progress(absl::StrFormat("%s: %d tokens in the text, recording %d in sequences of %d", flags.text,
                             ids.size(), usable, flags.seq_len));
    CalibrationRecorder recorder(shape, m.config().rope_theta, usable, /*num_slots=*/1,
                                 /*record_queries=*/false, /*record_query_moments=*/vopts.key_pca);
    std::vector<float> logits;
    for (int start = 0; start + flags.seq_len <= usable; start += flags.seq_len) {
      std::vector<int32_t> seq_ids;
      seq_ids.push_back(m.tokenizer().bos_id());
      seq_ids.insert(seq_ids.end(), ids.begin() + start, ids.begin() + start + flags.seq_len - 1);
      ForwardSeq fs;
      fs.tokens = seq_ids;
      fs.cache = &recorder;
      fs.kv.slot = 0;
      fs.kv.num_cached = 0;
      fs.want_logits = false;
      m.Forward({&fs, 1}, &logits);
      Progress(absl::StrFormat("forward %d/%d tokens (%.1fs)", start + flags.seq_len, usable, seconds()));
    }
    CalibrationData data = recorder.TakeData();
    if (vopts.key_pca) {
      auto reopened = GgufFile::Open(flags.model);
      if (!reopened.ok()) return Fail(reopened.status());
      auto freqs = LlamaRopeFrequencies(m.config(), **reopened);
      if (!freqs.ok()) return Fail(freqs.status());
      data.rope_freqs = *freqs;
      data.context_length = m.config().context_length;
      file.params["rope_positions"] = absl::StrCat(data.context_length);
    }
    if (flags.codec == "vecinfer") {
      auto cb = TrainVecInfer(data, vopts, Progress);
      if (!cb.ok()) return Fail(cb.status());
      file.blobs = cb->ToBlobs();
    } else {
      auto books = TrainCommVq(data, copts, Progress);
      if (!books.ok()) return Fail(books.status());
      file.blobs["commvq"] = books->Serialize();
    }
  }
  absl::Status st = file.Save(flags.out);
  if (!st.ok()) return Fail(st);
  Progress(absl::StrFormat("wrote %s (codec %s, %.1fs)", flags.out, file.codec, seconds()));
  return 0;
}

CommandRegistrar kRegister("calibrate", "train kv codebooks on text and write a .vqcb artifact",
                           RunCalibrate);

}  // namespace
}  // namespace vqserve::cli
