// build/bin/vqctl: a command-line client of vqserve (generate, health, model-info, tokenize).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "proto/vqserve.grpc.pb.h"
#include "tools/vqctl/health_client.h"

namespace {

constexpr char kUsage[] =
    "usage: vqctl [--target host:port] [--tls-ca FILE] [--api-key KEY] [--timeout S] COMMAND\n"
    "commands:\n"
    "  generate [--prompt TEXT | --chat TEXT] [--max-tokens N] [--temperature T] [--top-p P]\n"
    "           [--top-k K] [--min-p P] [--seed S] [--repetition-penalty R] [--stop STR]...\n"
    "           [--codec C] [--priority N] [--logprobs N] [--ignore-eos] [--usage]\n"
    "  health       grpc.health.v1 status of the server\n"
    "  model-info   model, kv codecs and capacity\n"
    "  tokenize --prompt TEXT\n";

struct Global {
  std::string target = "127.0.0.1:50051";
  std::string tls_ca;
  std::string api_key;
  double timeout_s = 600;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "vqctl: %s: cannot open\n", path.c_str());
    std::exit(2);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::shared_ptr<grpc::Channel> Connect(const Global& g) {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (!g.tls_ca.empty()) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadFile(g.tls_ca);
    creds = grpc::SslCredentials(o);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  return grpc::CreateChannel(g.target, creds);
}

void Prepare(const Global& g, grpc::ClientContext* ctx) {
  if (!g.api_key.empty()) ctx->AddMetadata("authorization", "Bearer " + g.api_key);
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(g.timeout_s * 1000)));
}

int Report(const grpc::Status& st) {
  if (st.ok()) return 0;
  std::fprintf(stderr, "vqctl: %s: %s\n", vqserve::StatusCodeName(st.error_code()),
               st.error_message().c_str());
  return 1;
}

const char* ReasonName(vqserve::v1::FinishReason r) {
  switch (r) {
    case vqserve::v1::FINISH_REASON_LENGTH: return "length";
    case vqserve::v1::FINISH_REASON_STOP: return "stop";
    case vqserve::v1::FINISH_REASON_EOS: return "eos";
    case vqserve::v1::FINISH_REASON_ABORT: return "abort";
    default: return "unspecified";
  }
}

int Generate(const Global& g, int argc, char** argv) {
  vqserve::v1::GenerateRequest req;
  bool show_usage = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ignore-eos") { req.set_ignore_eos(true); continue; }
    if (a == "--usage") { show_usage = true; continue; }
    if (i + 1 >= argc) { std::fprintf(stderr, "vqctl: %s needs a value\n", a.c_str()); return 2; }
    std::string v = argv[++i];
    double d = 0;
    int64_t n = 0;
    bool ok = true;
    if (a == "--prompt") req.set_text(v);
    else if (a == "--chat") {
      auto* m = req.mutable_chat()->add_messages();
      m->set_role("user");
      m->set_content(v);
    } else if (a == "--max-tokens") { ok = absl::SimpleAtoi(v, &n); req.set_max_tokens(n); }
    else if (a == "--temperature") { ok = absl::SimpleAtod(v, &d); req.set_temperature(d); }
    else if (a == "--top-p") { ok = absl::SimpleAtod(v, &d); req.set_top_p(d); }
    else if (a == "--top-k") { ok = absl::SimpleAtoi(v, &n); req.set_top_k(n); }
    else if (a == "--min-p") { ok = absl::SimpleAtod(v, &d); req.set_min_p(d); }
    else if (a == "--seed") { ok = absl::SimpleAtoi(v, &n); req.set_seed(n); }
    else if (a == "--repetition-penalty") { ok = absl::SimpleAtod(v, &d); req.set_repetition_penalty(d); }
    else if (a == "--stop") req.add_stop(v);
    else if (a == "--codec") req.set_kv_codec(v);
    else if (a == "--priority") { ok = absl::SimpleAtoi(v, &n); req.set_priority(n); }
    else if (a == "--logprobs") { ok = absl::SimpleAtoi(v, &n); req.set_logprobs(n); }
    else if (a == "--request-id") req.set_request_id(v);
    else { std::fprintf(stderr, "vqctl generate: unknown flag %s\n%s", a.c_str(), kUsage); return 2; }
    if (!ok) { std::fprintf(stderr, "vqctl: bad value '%s' for %s\n", v.c_str(), a.c_str()); return 2; }
  }
  auto stub = vqserve::v1::Inference::NewStub(Connect(g));
  grpc::ClientContext ctx;
  Prepare(g, &ctx);
  auto reader = stub->Generate(&ctx, req);
  vqserve::v1::GenerateResponse msg;
  vqserve::v1::GenerateResponse last;
  while (reader->Read(&msg)) {
    std::fwrite(msg.text().data(), 1, msg.text().size(), stdout);
    std::fflush(stdout);
    if (msg.finish_reason() != vqserve::v1::FINISH_REASON_UNSPECIFIED) last = msg;
  }
  std::fputc('\n', stdout);
  grpc::Status st = reader->Finish();
  if (st.ok() && show_usage) {
    const auto& u = last.usage();
    std::fprintf(stderr,
                 "[%s] finish=%s prompt=%d (cached %d) completion=%d kv_codec=%s kv_bytes=%lld "
                 "compression=%.2fx preemptions=%d\n",
                 last.request_id().c_str(), ReasonName(last.finish_reason()), u.prompt_tokens(),
                 u.cached_prompt_tokens(), u.completion_tokens(), u.kv_codec().c_str(),
                 static_cast<long long>(u.kv_bytes()), u.kv_compression_ratio(),
                 u.num_preemptions());
  }
  return Report(st);
}

int ModelInfo(const Global& g) {
  auto stub = vqserve::v1::Inference::NewStub(Connect(g));
  grpc::ClientContext ctx;
  Prepare(g, &ctx);
  vqserve::v1::ModelInfo info;
  grpc::Status st = stub->GetModelInfo(&ctx, {}, &info);
  if (!st.ok()) return Report(st);
  std::printf("model %s (%s): %d layers, hidden %d, %d heads / %d kv heads, head_dim %d, "
              "vocab %d, context %d, device %s\n",
              info.model_name().c_str(), info.architecture().c_str(), info.num_layers(),
              info.hidden_size(), info.num_heads(), info.num_kv_heads(), info.head_dim(),
              info.vocab_size(), info.context_length(), info.device().c_str());
  std::printf("kv memory %lld bytes (shared by every codec: %lld, %lld free, chunks of %lld), "
              "max_num_seqs %d, max_batched_tokens %d, default codec %s\n",
              static_cast<long long>(info.kv_memory_bytes()),
              static_cast<long long>(info.kv_memory_shared_bytes()),
              static_cast<long long>(info.kv_memory_free_bytes()),
              static_cast<long long>(info.kv_chunk_bytes()), info.max_num_seqs(),
              info.max_batched_tokens(), info.default_kv_codec().c_str());
  // pages, slots and cap_tokens: what the codec could hold with all the shared memory.
  std::printf("%-16s %8s %6s %9s %10s %8s %6s %12s %8s %12s %5s\n", "codec", "bits/val", "page",
              "residual", "page_bytes", "pages", "slots", "cap_tokens", "ratio", "used_bytes",
              "seqs");
  for (const auto& c : info.codecs()) {
    std::printf("%-16s %8.2f %6d %9d %10lld %8d %6d %12lld %7.2fx %12lld %5d\n",
                c.name().c_str(), c.bits_per_value(), c.page_tokens(), c.residual_tokens(),
                static_cast<long long>(c.page_bytes()), c.num_pages(), c.num_slots(),
                static_cast<long long>(c.kv_capacity_tokens()), c.compression_ratio(),
                static_cast<long long>(c.kv_memory_used_bytes()), c.num_sequences());
  }
  return 0;
}

int Tokenize(const Global& g, int argc, char** argv) {
  vqserve::v1::TokenizeRequest req;
  for (int i = 0; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--prompt") req.set_text(argv[i + 1]);
  }
  auto stub = vqserve::v1::Inference::NewStub(Connect(g));
  grpc::ClientContext ctx;
  Prepare(g, &ctx);
  vqserve::v1::TokenizeResponse resp;
  grpc::Status st = stub->Tokenize(&ctx, req, &resp);
  if (!st.ok()) return Report(st);
  for (int i = 0; i < resp.token_ids_size(); ++i) {
    std::printf("%d\t%s\n", resp.token_ids(i), resp.token_bytes(i).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Global g;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) break;
    if (a == "--help") { std::fputs(kUsage, stdout); return 0; }
    if (i + 1 >= argc) { std::fprintf(stderr, "vqctl: %s needs a value\n", a.c_str()); return 2; }
    std::string v = argv[++i];
    if (a == "--target") g.target = v;
    else if (a == "--tls-ca") g.tls_ca = v;
    else if (a == "--api-key") g.api_key = v;
    else if (a == "--timeout") absl::SimpleAtod(v, &g.timeout_s);
    else { std::fprintf(stderr, "vqctl: unknown flag %s\n%s", a.c_str(), kUsage); return 2; }
  }
  if (i >= argc) { std::fputs(kUsage, stderr); return 2; }
  std::string cmd = argv[i];
  int rest_argc = argc - i - 1;
  char** rest = argv + i + 1;
  if (cmd == "generate") return Generate(g, rest_argc, rest);
  if (cmd == "model-info") return ModelInfo(g);
  if (cmd == "tokenize") return Tokenize(g, rest_argc, rest);
  if (cmd == "health") {
    grpc::ClientContext ctx;
    Prepare(g, &ctx);
    std::string status;
    grpc::Status st = vqserve::CheckHealth(Connect(g), &ctx, "", &status);
    if (!st.ok()) return Report(st);
    std::printf("%s\n", status.c_str());
    return status == "SERVING" ? 0 : 1;
  }
  std::fprintf(stderr, "vqctl: unknown command %s\n%s", cmd.c_str(), kUsage);
  return 2;
}
