#include "server/request_validation.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/tokenizer/utf8.h"

namespace vqserve {
namespace {

absl::Status Invalid(const std::string& field, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

}  // namespace

absl::Status CheckUtf8(const std::string& field, std::string_view value) {
  const size_t bad = FindInvalidUtf8(value);
  if (bad == std::string_view::npos) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": invalid UTF-8 at byte ", bad));
}

absl::StatusOr<std::vector<int32_t>> PromptTokens(const v1::GenerateRequest& request,
                                                  const Tokenizer& tokenizer, int vocab_size) {
  std::vector<int32_t> ids;
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText:
      if (request.text().empty()) return Invalid("text", "empty prompt");
      if (absl::Status st = CheckUtf8("text", request.text()); !st.ok()) return st;
      ids = tokenizer.Encode(request.text(), /*add_bos=*/true, /*parse_special=*/false);
      break;
    case v1::GenerateRequest::kTokenIds: {
      const auto& given = request.token_ids().ids();
      if (given.empty()) return Invalid("token_ids", "empty prompt");
      for (int i = 0; i < given.size(); ++i) {
        if (given[i] < 0 || given[i] >= vocab_size) {
          return Invalid("token_ids", absl::StrCat("id ", given[i], " at index ", i,
                                                   " is outside the vocabulary [0, ",
                                                   vocab_size, ")"));
        }
      }
      ids.assign(given.begin(), given.end());
      break;
    }
    case v1::GenerateRequest::kChat: {
      const auto& msgs = request.chat().messages();
      if (msgs.empty()) return Invalid("chat.messages", "empty prompt");
      std::vector<ChatMessage> chat;
      for (int i = 0; i < msgs.size(); ++i) {
        const auto& m = msgs[i];
        const std::string field = absl::StrCat("chat.messages[", i, "]");
        if (absl::Status st = CheckUtf8(field + ".role", m.role()); !st.ok()) return st;
        if (absl::Status st = CheckUtf8(field + ".content", m.content()); !st.ok()) return st;
        if (m.role() != "system" && m.role() != "user" && m.role() != "assistant") {
          return Invalid(field + ".role", "must be system, user or assistant");
        }
        chat.push_back({m.role(), m.content()});
      }
      std::string text = tokenizer.ApplyChatTemplate(chat, /*add_generation_prompt=*/true);
      ids = tokenizer.Encode(text, /*add_bos=*/false, /*parse_special=*/true);
      break;
    }
    default:
      return Invalid("prompt", "empty prompt (set text, token_ids or chat)");
  }
  if (ids.empty()) return Invalid("prompt", "empty prompt after tokenization");
  return ids;
}

absl::StatusOr<EngineRequest> ValidateRequest(const v1::GenerateRequest& request,
                                              const Tokenizer& tokenizer,
                                              const RequestLimits& limits) {
  EngineRequest out;
  // cheap checks first, so bad sampling fields never cost a tokenization.
  SamplingParams& sp = out.sampling;
  sp.temperature = request.has_temperature() ? request.temperature() : 1.0f;
  if (!std::isfinite(sp.temperature) || sp.temperature < 0) {
    return Invalid("temperature", "must be >= 0");
  }
  sp.top_p = request.has_top_p() ? request.top_p() : 1.0f;
  if (!(sp.top_p > 0.0f && sp.top_p <= 1.0f)) return Invalid("top_p", "must be in (0, 1]");
  sp.top_k = request.has_top_k() ? request.top_k() : 0;
  if (sp.top_k < 0) return Invalid("top_k", "must be >= 0");
  sp.min_p = request.has_min_p() ? request.min_p() : 0.0f;
  if (!(sp.min_p >= 0.0f && sp.min_p <= 1.0f)) return Invalid("min_p", "must be in [0, 1]");
  sp.repetition_penalty = request.has_repetition_penalty() ? request.repetition_penalty() : 1.0f;
  if (!(sp.repetition_penalty > 0.0f) || !std::isfinite(sp.repetition_penalty)) {
    return Invalid("repetition_penalty", "must be > 0");
  }
  if (request.has_seed()) {
    sp.seed = request.seed();
  } else {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    sp.seed = rng();
  }
  if (request.logprobs() < 0 || request.logprobs() > limits.max_logprobs) {
    return Invalid("logprobs", absl::StrCat("must be in [0, ", limits.max_logprobs, "]"));
  }
  sp.logprobs = request.logprobs();

  if (request.stop_size() > limits.max_stop_strings) {
    return Invalid("stop", absl::StrCat("at most ", limits.max_stop_strings, " stop strings"));
  }
  for (int i = 0; i < request.stop_size(); ++i) {
    const std::string& s = request.stop(i);
    std::string field = absl::StrCat("stop[", i, "]");
    if (s.empty()) return Invalid(field, "empty stop string");
    if (static_cast<int>(s.size()) > limits.max_stop_length) return Invalid(field, "too long");
    if (absl::Status st = CheckUtf8(field, s); !st.ok()) return st;
    out.stop.push_back(s);
  }
  for (int i = 0; i < request.stop_token_ids_size(); ++i) {
    int32_t id = request.stop_token_ids(i);
    if (id < 0 || id >= limits.vocab_size) {
      return Invalid(absl::StrCat("stop_token_ids[", i, "]"), "outside the vocabulary");
    }
    out.stop_token_ids.push_back(id);
  }
  out.ignore_eos = request.ignore_eos();
  out.priority = request.priority();

  if (absl::Status st = CheckUtf8("request_id", request.request_id()); !st.ok()) return st;
  if (request.request_id().size() > 256) return Invalid("request_id", "longer than 256 bytes");
  out.request_id = request.request_id();

  if (absl::Status st = CheckUtf8("kv_codec", request.kv_codec()); !st.ok()) return st;
  out.codec = request.kv_codec().empty() ? limits.default_codec : request.kv_codec();
  auto it = std::find(limits.codecs.begin(), limits.codecs.end(), out.codec);
  if (it == limits.codecs.end()) {
    return Invalid("kv_codec", absl::StrCat("unknown codec '", out.codec, "' (served: ",
                                            absl::StrJoin(limits.codecs, ", "), ")"));
  }
  out.pool = static_cast<int>(it - limits.codecs.begin());

  if (request.has_max_tokens() && request.max_tokens() <= 0) {
    return Invalid("max_tokens", "must be >= 1");
  }
  if (request.has_max_tokens() && request.max_tokens() >= limits.max_model_len) {
    return Invalid("max_tokens", absl::StrCat("must be below the context length ",
                                              limits.max_model_len));
  }

  absl::StatusOr<std::vector<int32_t>> ids = PromptTokens(request, tokenizer, limits.vocab_size);
  if (!ids.ok()) return ids.status();
  out.prompt = std::move(*ids);
  const int n = static_cast<int>(out.prompt.size());
  if (n >= limits.max_model_len) {
    return Invalid("prompt", absl::StrCat(n, " tokens do not fit the context length ",
                                          limits.max_model_len,
                                          " (one completion token must fit)"));
  }
  if (request.has_max_tokens()) {
    if (n + request.max_tokens() > limits.max_model_len) {
      return Invalid("max_tokens", absl::StrCat("prompt (", n, " tokens) + max_tokens (",
                                                request.max_tokens(), ") exceed the context length ",
                                                limits.max_model_len));
    }
    out.max_new_tokens = request.max_tokens();
  } else {
    out.max_new_tokens = std::min(limits.default_max_tokens, limits.max_model_len - n);
  }
  return out;
}

}  // namespace vqserve
