// `vqserve serve`: loads the model, sizes the kv pools, starts the engine, the grpc server and
// the /metrics endpoint, and drains on SIGTERM / SIGINT.
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/model/llama_model.h"
#include "server/engine.h"
#include "server/inference_server.h"
#include "server/kv_pools.h"
#include "server/metrics_http.h"
#include "server/metrics_registry.h"
#include "server/server_metrics.h"
#include "tools/vqserve/codec_choice.h"
#include "tools/vqserve/command.h"
#include "tools/vqserve/gpu_weights_flag.h"

namespace vqserve::cli {
namespace {

constexpr char kUsage[] =
    "usage: vqserve serve --model PATH [--device cpu|cuda] [--host H] [--port P]\n"
    "         [--metrics-port P (0: any, -1: off)] [--kv-codec C] [--kv-codecs C1,C2,...]\n"
    "         [--codebooks FILE] [--kv-memory BYTES (suffix K/M/G)] [--drain-timeout S]\n"
    "         [--kv-sink-tokens N (first tokens kept fp16, rounded down to pages; default 32)]\n"
    "         [--tls-cert F --tls-key F] [--api-keys-file F] [--max-num-seqs N]\n"
    "         [--max-batched-tokens N] [--max-model-len N] [--max-waiting N]\n"
    "         [--default-max-tokens N] [--threads N]\n"
    "         [--max-streams-per-client N (0: no bound; the client is its api key, else its\n"
    "           address)] [--max-request-seconds S (0: none)] [--max-request-bytes BYTES]\n"
    "         [--no-prefix-cache] [--prefix-checkpoint-tokens N (default 1024)]\n"
    "         [--gpu-weights blocks|fp16 (cuda: quantized tensors kept in their gguf blocks,\n"
    "           the default, or dequantized to fp16 at load)]\n";

struct ServeFlags {
  std::string model;
  std::string device = "cpu";
  std::string gpu_weights;  // empty: blocks on cuda (ParseGpuWeights)
  std::string host = "0.0.0.0";
  int port = 50051;
  int metrics_port = 9464;
  std::string kv_codec = "fp16";
  std::string kv_codecs;
  std::string codebooks;
  int kv_sink_tokens = -1;  // -1: the device's default
  size_t kv_memory = size_t{512} << 20;
  double drain_timeout = 30;
  std::string tls_cert, tls_key, api_keys_file;
  int max_num_seqs = 32;
  int max_batched_tokens = 512;
  int max_model_len = 0;
  int max_waiting = 1024;
  int default_max_tokens = 256;
  int threads = 0;
  int max_streams_per_client = 0;
  double max_request_seconds = 0;
  size_t max_request_bytes = size_t{4} << 20;
  bool prefix_cache = true;
  int prefix_checkpoint_tokens = 1024;
};

bool ParseBytes(const std::string& s, size_t* out) {
  if (s.empty()) return false;
  size_t mult = 1;
  std::string num = s;
  char last = s.back();
  if (last == 'K' || last == 'k') mult = size_t{1} << 10;
  if (last == 'M' || last == 'm') mult = size_t{1} << 20;
  if (last == 'G' || last == 'g') mult = size_t{1} << 30;
  if (mult != 1) num.pop_back();
  uint64_t v = 0;
  if (!absl::SimpleAtoi(num, &v)) return false;
  *out = static_cast<size_t>(v) * mult;
  return true;
}

// parses argv into flags; prints the problem and returns false on bad input.
bool ParseFlags(int argc, char** argv, ServeFlags* f) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (a == "--no-prefix-cache") {
      f->prefix_cache = false;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "vqserve serve: %s needs a value\n%s", a.c_str(), kUsage);
      return false;
    }
    std::string v = argv[++i];
    bool ok = true;
    if (a == "--model") f->model = v;
    else if (a == "--device") f->device = v;
    else if (a == "--gpu-weights") f->gpu_weights = v;
    else if (a == "--host") f->host = v;
    else if (a == "--port") ok = absl::SimpleAtoi(v, &f->port);
    else if (a == "--metrics-port") ok = absl::SimpleAtoi(v, &f->metrics_port);
    else if (a == "--kv-codec") f->kv_codec = v;
    else if (a == "--kv-codecs") f->kv_codecs = v;
    else if (a == "--codebooks") f->codebooks = v;
    else if (a == "--kv-sink-tokens")
      ok = absl::SimpleAtoi(v, &f->kv_sink_tokens) && f->kv_sink_tokens >= 0;
    else if (a == "--kv-memory") ok = ParseBytes(v, &f->kv_memory);
    else if (a == "--drain-timeout") ok = absl::SimpleAtod(v, &f->drain_timeout);
    else if (a == "--tls-cert") f->tls_cert = v;
    else if (a == "--tls-key") f->tls_key = v;
    else if (a == "--api-keys-file") f->api_keys_file = v;
    else if (a == "--max-num-seqs") ok = absl::SimpleAtoi(v, &f->max_num_seqs);
    else if (a == "--max-batched-tokens") ok = absl::SimpleAtoi(v, &f->max_batched_tokens);
    else if (a == "--max-model-len") ok = absl::SimpleAtoi(v, &f->max_model_len);
    else if (a == "--max-waiting") ok = absl::SimpleAtoi(v, &f->max_waiting);
    else if (a == "--default-max-tokens") ok = absl::SimpleAtoi(v, &f->default_max_tokens);
    else if (a == "--threads") ok = absl::SimpleAtoi(v, &f->threads);
    else if (a == "--max-streams-per-client")
      ok = absl::SimpleAtoi(v, &f->max_streams_per_client) && f->max_streams_per_client >= 0;
    else if (a == "--max-request-seconds")
      ok = absl::SimpleAtod(v, &f->max_request_seconds) && f->max_request_seconds >= 0;
    else if (a == "--max-request-bytes")
      ok = ParseBytes(v, &f->max_request_bytes) && f->max_request_bytes > 0 &&
           f->max_request_bytes <= (size_t{1} << 30);
    else if (a == "--prefix-checkpoint-tokens")
      ok = absl::SimpleAtoi(v, &f->prefix_checkpoint_tokens) && f->prefix_checkpoint_tokens >= 1;
    else {
      std::fprintf(stderr, "vqserve serve: unknown flag %s\n%s", a.c_str(), kUsage);
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "vqserve serve: bad value '%s' for %s\n", v.c_str(), a.c_str());
      return false;
    }
  }
  if (f->model.empty()) {
    std::fprintf(stderr, "vqserve serve: --model is required\n%s", kUsage);
    return false;
  }
  if (f->tls_cert.empty() != f->tls_key.empty()) {
    std::fprintf(stderr, "vqserve serve: --tls-cert and --tls-key go together\n");
    return false;
  }
  return true;
}

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t n = write(g_signal_pipe[1], &b, 1);
  (void)n;
}

int Fail(const absl::Status& st) {
  std::fprintf(stderr, "vqserve serve: %s\n", std::string(st.message()).c_str());
  return 1;
}

int RunServe(int argc, char** argv) {
  ServeFlags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  if (flags.device != "cpu" && flags.device != "cuda") {
    std::fprintf(stderr, "vqserve serve: --device must be cpu or cuda\n");
    return 2;
  }
  CudaWeights gpu_weights = CudaWeights::kFp16;
  if (const std::string why = ParseGpuWeights(flags.gpu_weights, flags.device, &gpu_weights);
      !why.empty()) {
    std::fprintf(stderr, "vqserve serve: %s\n", why.c_str());
    return 2;
  }
  std::vector<std::string> codecs = {flags.kv_codec};
  for (absl::string_view c : absl::StrSplit(flags.kv_codecs, ',', absl::SkipEmpty())) {
    std::string name(c);
    if (std::find(codecs.begin(), codecs.end(), name) == codecs.end()) codecs.push_back(name);
  }
  const bool cuda = flags.device == "cuda";
  if (cuda) {
    // bad combinations fail here, before the model loads, naming the flag.
    std::string why;
    if (!CudaDeviceAvailable(&why)) {
      std::fprintf(stderr, "vqserve serve: --device cuda: %s\n", why.c_str());
      return 2;
    }
    for (size_t i = 0; i < codecs.size(); ++i) {
      if (absl::Status st = CudaKvCodecSupported(codecs[i]); !st.ok()) {
        std::fprintf(stderr, "vqserve serve: %s with --device cuda: %s\n",
                     i == 0 ? "--kv-codec" : "--kv-codecs", std::string(st.message()).c_str());
        return 2;
      }
    }
  }
  // SIGTERM / SIGINT wake the main thread through a pipe, whichever thread receives them
  // (libraries start threads before main, so blocking the signals is not enough).
  if (pipe(g_signal_pipe) != 0) return Fail(absl::InternalError("cannot create signal pipe"));
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  LoadOptions load;
  load.num_threads = flags.threads;
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      cuda ? LoadCudaLlamaModel(flags.model, gpu_weights) : LlamaModel::Load(flags.model, load);
  if (!model.ok()) return Fail(model.status());

  // the attention sink (PagedKvCache, CudaKvCache): one page of fp16 tokens per sequence.
  const int sink = flags.kv_sink_tokens >= 0 ? flags.kv_sink_tokens : 32;
  absl::StatusOr<KvCacheMakers> maker =
      MakeKvCacheMakers(flags.model, (*model)->kv_shape(), flags.codebooks, flags.device, sink);
  if (!maker.ok()) return Fail(maker.status());
  absl::StatusOr<KvPools> pools = MakeKvPools(codecs, *maker, flags.kv_memory);
  if (!pools.ok()) return Fail(pools.status());

  MetricsRegistry registry;
  ServerMetrics metrics(registry);
  EngineOptions eo;
  eo.scheduler.max_num_seqs = flags.max_num_seqs;
  eo.scheduler.max_batched_tokens = flags.max_batched_tokens;
  eo.scheduler.max_model_len =
      flags.max_model_len > 0 ? flags.max_model_len : (*model)->config().context_length;
  eo.scheduler.max_waiting = flags.max_waiting;
  eo.scheduler.prefix_cache = flags.prefix_cache;
  eo.scheduler.prefix_checkpoint_tokens = flags.prefix_checkpoint_tokens;
  eo.default_codec = flags.kv_codec;
  eo.default_max_tokens = flags.default_max_tokens;
  eo.kv_memory_bytes = flags.kv_memory;
  eo.device = flags.device;
  eo.shared_memory = pools->memory;
  Engine engine(model->get(), std::move(pools->caches), eo, &metrics);
  engine.Start();

  std::unique_ptr<MetricsHttpServer> http;
  if (flags.metrics_port >= 0) {
    http = std::make_unique<MetricsHttpServer>(registry);
    absl::Status st = http->Start(flags.host, flags.metrics_port);
    if (!st.ok()) return Fail(st);
  }
  ServerOptions so;
  so.host = flags.host;
  so.port = flags.port;
  so.max_request_bytes = static_cast<int>(flags.max_request_bytes);
  so.limits.max_streams_per_client = flags.max_streams_per_client;
  if (flags.max_request_seconds > 0) {
    so.limits.max_request_time = absl::Seconds(flags.max_request_seconds);
  }
  if (!flags.tls_cert.empty()) {
    absl::StatusOr<std::string> cert = ReadFileToString(flags.tls_cert);
    if (!cert.ok()) return Fail(cert.status());
    absl::StatusOr<std::string> key = ReadFileToString(flags.tls_key);
    if (!key.ok()) return Fail(key.status());
    so.tls_cert_pem = *cert;
    so.tls_key_pem = *key;
  }
  if (!flags.api_keys_file.empty()) {
    absl::StatusOr<ApiKeyAuth> auth = ApiKeyAuth::FromFile(flags.api_keys_file);
    if (!auth.ok()) return Fail(auth.status());
    so.auth = std::move(*auth);
  }
  absl::StatusOr<std::unique_ptr<InferenceServer>> server =
      InferenceServer::Start(&engine, &metrics, std::move(so));
  if (!server.ok()) return Fail(server.status());

  std::string pool_list;
  const v1::ModelInfo info = engine.ModelInfo();
  for (const auto& p : info.codecs()) {
    pool_list += " " + p.name();
  }
  std::printf("vqserve: serving %s on %s:%d (%s, kv codecs:%s sharing %zu chunks of %zu bytes, "
              "sink %d, prefix cache %s)%s; metrics on %s\n",
              (*model)->config().name.c_str(), flags.host.c_str(), (*server)->port(),
              flags.device.c_str(), pool_list.c_str(), static_cast<size_t>(pools->memory.num_chunks),
              pools->memory.chunk_bytes, sink, flags.prefix_cache ? "on" : "off",
              flags.tls_cert.empty() ? "" : " with tls",
              http ? (flags.host + ":" + std::to_string(http->port()) + "/metrics").c_str()
                   : "off");
  std::fflush(stdout);

  unsigned char sig_byte = 0;
  while (read(g_signal_pipe[0], &sig_byte, 1) < 0 && errno == EINTR) {
  }
  int sig = sig_byte;
  std::printf("vqserve: signal %d, draining (up to %.0f s)\n", sig, flags.drain_timeout);
  std::fflush(stdout);
  int aborted = (*server)->Drain(absl::Seconds(flags.drain_timeout));
  engine.Stop();
  if (http) http->Stop();
  std::printf("vqserve: drained (%d requests aborted at the timeout); bye\n", aborted);
  return 0;
}

const CommandRegistrar kServe("serve", "serve the model over grpc (streaming generation)",
                              RunServe);

}  // namespace
}  // namespace vqserve::cli
