// a GenerateRequest parsed from arbitrary bytes through the server's validation (the default
// model's tokenizer and limits like the engine's): refusals are INVALID_ARGUMENT with a one-line
// utf-8 message; an accepted request fits the context and its ids the vocabulary.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "proto/vqserve.pb.h"
#include "runtime/tokenizer/utf8.h"
#include "server/request_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vqserve::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  const vqserve::Tokenizer& tok = vqserve::fuzz::LoadTokenizer(vqserve::fuzz::kBpeModel);
  vqserve::RequestLimits limits;
  limits.max_model_len = 2048;
  limits.vocab_size = tok.vocab_size();
  limits.codecs = {"vecinfer-k2v2", "fp16", "kivi-k2v2"};
  limits.default_codec = "vecinfer-k2v2";
  auto out = vqserve::ValidateRequest(request, tok, limits);
  if (!out.ok()) {
    const std::string msg(out.status().message());
    FUZZ_CHECK(out.status().code() == absl::StatusCode::kInvalidArgument, msg.c_str());
    FUZZ_CHECK(vqserve::FindInvalidUtf8(msg) == std::string_view::npos, "message not utf-8");
    return 0;
  }
  const int n = static_cast<int>(out->prompt.size());
  FUZZ_CHECK(n > 0, "empty prompt accepted");
  FUZZ_CHECK(out->max_new_tokens >= 1, "no completion token");
  FUZZ_CHECK(n + out->max_new_tokens <= limits.max_model_len, "request exceeds the context");
  for (int32_t id : out->prompt) FUZZ_CHECK(id >= 0 && id < limits.vocab_size, "prompt id");
  for (int32_t id : out->stop_token_ids) FUZZ_CHECK(id >= 0 && id < limits.vocab_size, "stop id");
  FUZZ_CHECK(out->pool >= 0 && out->pool < static_cast<int>(limits.codecs.size()), "pool");
  FUZZ_CHECK(limits.codecs[out->pool] == out->codec, "pool and codec disagree");
  return 0;
}
