// checks a GenerateRequest against the model and the deployment and turns it into what the
// engine runs; every refusal is INVALID_ARGUMENT naming the field.
#ifndef VQSERVE_SERVER_REQUEST_VALIDATION_H_
#define VQSERVE_SERVER_REQUEST_VALIDATION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/vqserve.pb.h"
#include "runtime/model/sampler.h"
#include "runtime/tokenizer/tokenizer.h"

namespace vqserve {

// what a request may ask for in this deployment.
struct RequestLimits {
  int max_model_len = 8192;              // prompt + completion tokens
  int vocab_size = 0;
  std::vector<std::string> codecs;       // kv codecs served (pool order)
  std::string default_codec;
  int default_max_tokens = 256;
  int max_logprobs = 20;
  int max_stop_strings = 16;
  int max_stop_length = 256;
};

// a validated, tokenized request.
struct EngineRequest {
  std::string request_id;
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_new_tokens = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int priority = 0;
  int pool = 0;           // index into RequestLimits::codecs
  std::string codec;
};

// ok when `value` is well-formed utf-8 (no overlongs, surrogates or values past U+10FFFF);
// else INVALID_ARGUMENT "<field>: invalid UTF-8 at byte <offset>". the api's request text
// fields are proto `bytes`, so this check (not the protobuf parser) refuses bad text.
absl::Status CheckUtf8(const std::string& field, std::string_view value);

// the prompt's token ids (text with bos when the model wants it, chat through its template,
// or the ids as given); INVALID_ARGUMENT naming the field when malformed.
absl::StatusOr<std::vector<int32_t>> PromptTokens(const v1::GenerateRequest& request,
                                                  const Tokenizer& tokenizer, int vocab_size);

// validates everything and tokenizes the prompt.
absl::StatusOr<EngineRequest> ValidateRequest(const v1::GenerateRequest& request,
                                              const Tokenizer& tokenizer,
                                              const RequestLimits& limits);

}  // namespace vqserve

#endif  // VQSERVE_SERVER_REQUEST_VALIDATION_H_
