#include "tests/util/test_server.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "runtime/kv/codebook_file.h"
#include "runtime/kv/codec_factory.h"
#include "runtime/kv/paged_kv_cache.h"
#include "server/kv_pools.h"
#include "tests/test_paths.h"

namespace vqserve::testing {

LlamaModel* SharedDefaultModel() {
  static LlamaModel* model = [] () -> LlamaModel* {
    std::string path = DefaultModelPath();
    if (path.empty()) return nullptr;
    // the production path: q8-activation matmuls for every step size, so a sequence's
    // logits do not depend on what shares its step (see llama_model_test).
    auto m = LlamaModel::Load(path);
    if (!m.ok()) return nullptr;
    return m->release();
  }();
  return model;
}

std::string CodebookPath(const std::string& codec) {
  for (const std::string& dir : {std::string(VQSERVE_TEST_VQCB_DIR), SourceDir() + "/data/vqcb"}) {
    std::string path = dir + "/" + codec + ".vqcb";
    if (std::filesystem::exists(path)) return path;
  }
  return "";
}

bool CodecAvailable(const std::string& codec) {
  return !CodecNeedsCodebooks(codec) || !CodebookPath(codec).empty();
}

TestServer::TestServer(TestServerConfig config) {
  LlamaModel* model = SharedDefaultModel();
  metrics_ = std::make_unique<ServerMetrics>(registry_);
  // codecs with codebooks use the artifact CodebookPath finds.
  CodecMaker make_codec = [model](const std::string& codec)
      -> absl::StatusOr<std::unique_ptr<KvCodec>> {
    std::unique_ptr<CodebookFile> book;
    if (CodecNeedsCodebooks(codec)) {
      const std::string path = CodebookPath(codec);
      absl::StatusOr<CodebookFile> loaded = absl::NotFoundError(
          "no " + codec + ".vqcb in " + VQSERVE_TEST_VQCB_DIR + " or data/vqcb");
      if (!path.empty()) loaded = CodebookFile::Load(path);
      if (!loaded.ok()) {
        std::fprintf(stderr, "TestServer: codebooks of %s: %s\n", codec.c_str(),
                     std::string(loaded.status().message()).c_str());
        std::abort();
      }
      book = std::make_unique<CodebookFile>(std::move(*loaded));
    }
    return MakeCodec(codec, model->kv_shape(), book.get());
  };
  std::vector<std::unique_ptr<KvCache>> caches;
  EngineOptions eo;
  if (config.kv_memory > 0) {
    std::vector<std::string> names;
    for (const auto& [codec, pages] : config.pools) names.push_back(codec);
    absl::StatusOr<KvPools> pools =
        MakeKvPools(names, HostKvCacheMakers(make_codec), config.kv_memory);
    if (!pools.ok()) {
      std::fprintf(stderr, "TestServer: %s\n", std::string(pools.status().message()).c_str());
      std::abort();
    }
    caches = std::move(pools->caches);
    eo.shared_memory = pools->memory;
    eo.kv_memory_bytes = config.kv_memory;
  } else {
    for (const auto& [codec, pages] : config.pools) {
      auto c = make_codec(codec);
      if (!c.ok()) std::abort();
      caches.push_back(MakePagedKvCache(std::move(*c), pages, config.num_slots));
    }
  }
  eo.scheduler = config.scheduler;
  eo.default_codec = config.pools[0].first;
  engine_ = std::make_unique<Engine>(model, std::move(caches), eo, metrics_.get());
  if (config.start_engine) engine_->Start();
  config.server.host = "127.0.0.1";
  config.server.port = 0;
  auto s = InferenceServer::Start(engine_.get(), metrics_.get(), std::move(config.server));
  if (!s.ok()) std::abort();
  server_ = std::move(*s);
}

void TestServer::StartEngine() { engine_->Start(); }

TestServer::~TestServer() {
  server_.reset();
  engine_.reset();
}

std::shared_ptr<grpc::Channel> TestServer::Channel() const {
  return grpc::CreateChannel(target(), grpc::InsecureChannelCredentials());
}

std::unique_ptr<v1::Inference::Stub> TestServer::Stub() const {
  return v1::Inference::NewStub(Channel());
}

bool TestServer::WaitAllFree() const {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    EngineSnapshot s = engine_->Snapshot();
    bool free = s.num_active == 0 && s.memory_in_use == 0;
    for (const auto& p : s.pools) free = free && p.pages_in_use == 0 && p.slots_in_use == 0;
    if (free) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

StreamResult RunGenerate(v1::Inference::Stub* stub, const v1::GenerateRequest& request,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  StreamResult r;
  grpc::ClientContext ctx;
  for (const auto& [k, v] : metadata) ctx.AddMetadata(k, v);
  // generous: a loaded 2-core ci machine runs several server tests at once; under tsan
  // (5-15x slower) six preempting streams took longer than 300 s.
#if defined(__SANITIZE_THREAD__)
  constexpr int kDeadlineSeconds = 1800;
#else
  constexpr int kDeadlineSeconds = 300;
#endif
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(kDeadlineSeconds));
  auto reader = stub->Generate(&ctx, request);
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
    ++r.num_messages;
    r.token_ids.insert(r.token_ids.end(), msg.token_ids().begin(), msg.token_ids().end());
    r.text += msg.text();
    if (msg.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      r.finish_reason = msg.finish_reason();
      r.usage = msg.usage();
    }
  }
  r.status = reader->Finish();
  return r;
}

v1::GenerateRequest GreedyRequest(const std::string& text, int max_tokens,
                                  const std::string& codec, bool ignore_eos) {
  v1::GenerateRequest req;
  req.set_text(text);
  req.set_temperature(0);
  req.set_max_tokens(max_tokens);
  req.set_ignore_eos(ignore_eos);
  if (!codec.empty()) req.set_kv_codec(codec);
  return req;
}

}  // namespace vqserve::testing
