// prefix caching end to end on the cpu: a real server over one shared kv memory answers prompts
// that share a long prefix with the same greedy tokens with the prefix cache on as with it off,
// for fp16 (pages only) and for coded caches with an fp16 residual ring (pages and a ring
// snapshot), and reports the cached prompt tokens in Usage and /metrics.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/prerequisite.h"
#include "tests/util/test_server.h"

namespace vqserve::testing {
namespace {

constexpr int kCheckpoint = 128;

std::vector<int32_t> Encode(const std::string& text, bool bos) {
  return SharedDefaultModel()->tokenizer().Encode(text, bos, false);
}

// a shared prefix of about 400 tokens and three prompts: two extend all of it, one half of it.
std::vector<std::vector<int32_t>> Prompts() {
  std::string text;
  const char* kFacts[] = {"A lighthouse keeper trims the wick at dusk. ",
                          "Bread rises because yeast makes carbon dioxide. ",
                          "The moon keeps one face toward the earth. ",
                          "Rain falls when droplets grow too heavy to float. "};
  std::vector<int32_t> prefix = Encode("", true);
  for (int i = 0; static_cast<int>(prefix.size()) < 400; ++i) {
    text += kFacts[i % 4];
    prefix = Encode(text, true);
  }
  prefix.resize(400);
  std::vector<std::vector<int32_t>> out;
  for (const char* q : {"\nQuestion: why does bread rise? Answer:",
                        "\nQuestion: what does the keeper do at dusk? Answer:"}) {
    std::vector<int32_t> p = prefix, s = Encode(q, false);
    p.insert(p.end(), s.begin(), s.end());
    out.push_back(p);
  }
  std::vector<int32_t> half(prefix.begin(), prefix.begin() + 200), s = Encode(
      "\nQuestion: which face of the moon do we see? Answer:", false);
  half.insert(half.end(), s.begin(), s.end());
  out.push_back(half);
  return out;
}

StreamResult Serve(TestServer& server, const std::vector<int32_t>& prompt,
                   const std::string& codec) {
  v1::GenerateRequest req = GreedyRequest("", 12, codec);
  req.clear_text();
  for (int32_t id : prompt) req.mutable_token_ids()->add_ids(id);
  auto stub = server.Stub();
  return RunGenerate(stub.get(), req);
}

TEST(PrefixCacheServer, GreedyOutputsEqualWithAndWithoutTheCache) {
  if (SharedDefaultModel() == nullptr) VQ_SKIP_UNLESS_CI << "default model missing";
  std::vector<std::string> codecs = {"fp16", "kivi-k2v2"};
  if (CodecAvailable("vecinfer-k2v2")) codecs.push_back("vecinfer-k2v2");
  const std::vector<std::vector<int32_t>> prompts = Prompts();
  for (const std::string& codec : codecs) {
    SCOPED_TRACE(codec);
    std::vector<StreamResult> with, without;
    for (bool cache : {true, false}) {
      TestServerConfig cfg;
      cfg.pools = {{codec, 0}};
      cfg.kv_memory = size_t{96} << 20;
      cfg.scheduler.max_num_seqs = 4;
      cfg.scheduler.prefix_cache = cache;
      cfg.scheduler.prefix_checkpoint_tokens = kCheckpoint;
      TestServer server(cfg);
      for (const auto& p : prompts) {
        StreamResult r = Serve(server, p, codec);
        ASSERT_TRUE(r.status.ok()) << r.status.error_message();
        (cache ? with : without).push_back(r);
      }
      EXPECT_TRUE(server.WaitAllFree());
      if (cache) {
        const double hits = server.metrics().prefix_cache_hits_total().Get().Value();
        const double queries = server.metrics().prefix_cache_queries_total().Get().Value();
        EXPECT_GT(hits, 0);
        EXPECT_GE(queries, 3 * 200.0);
      }
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(with[i].token_ids, without[i].token_ids) << "prompt " << i;
      EXPECT_EQ(without[i].usage.cached_prompt_tokens(), 0);
    }
    // the first prompt computes everything; the second takes the shared 400 tokens' last
    // boundary from the cache (fp16: any page; ring codecs: a checkpoint), the third 200's.
    const bool ring = codec != "fp16";
    EXPECT_EQ(with[0].usage.cached_prompt_tokens(), 0);
    EXPECT_EQ(with[1].usage.cached_prompt_tokens(), 384);
    EXPECT_EQ(with[2].usage.cached_prompt_tokens(), ring ? 128 : 192);
  }
}

}  // namespace
}  // namespace vqserve::testing
