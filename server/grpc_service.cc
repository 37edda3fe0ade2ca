#include "server/grpc_service.h"

#include <chrono>
#include <functional>
#include <mutex>

#include "absl/strings/str_cat.h"

#include "server/request_validation.h"

namespace vqserve {
namespace {

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    default: return "UNKNOWN";
  }
}

// streams one request's output: one write in flight, the next started from OnWriteDone or
// from the engine's listener; Finish exactly once; OnDone deletes. `on_end` (the client's
// stream slot) runs once, before Finish, so the client sees its status after the slot is free.
class GenerateReactor : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  GenerateReactor(Engine* engine, std::shared_ptr<RequestStream> stream,
                  std::function<void()> on_end)
      : engine_(engine), stream_(std::move(stream)), on_end_(std::move(on_end)) {
    stream_->SetListener([this] { Pump(); });
    Pump();
  }
  // a call refused before it reached the engine.
  explicit GenerateReactor(const grpc::Status& status) : engine_(nullptr) {
    finished_ = true;
    Finish(status);
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) cancelled_ = true;
    }
    if (!ok) engine_->Cancel(stream_->id());
    Pump();
  }

  void OnCancel() override {
    if (stream_ == nullptr) return;
    stream_->MarkCancelled();
    engine_->Cancel(stream_->id());
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    Pump();
  }

  void OnDone() override {
    RunOnEnd();
    if (stream_ != nullptr) {
      stream_->SetListener(nullptr);
      if (!stream_->done()) {
        stream_->MarkCancelled();
        engine_->Cancel(stream_->id());
      }
    }
    delete this;
  }

 private:
  // starts the next write or the finish when nothing is in flight; never blocks.
  void Pump() {
    enum { kNothing, kWrite, kFinish } action = kNothing;
    grpc::Status status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_ || writing_) return;
      if (cancelled_) {
        finished_ = true;
        action = kFinish;
        status = grpc::Status(grpc::StatusCode::CANCELLED, "request cancelled");
      } else {
        absl::Status st;
        switch (stream_->TakeNext(&msg_, &st)) {
          case RequestStream::Take::kMessage:
            writing_ = true;
            action = kWrite;
            break;
          case RequestStream::Take::kDone:
            finished_ = true;
            action = kFinish;
            status = ToGrpcStatus(st);
            break;
          case RequestStream::Take::kNone:
            break;
        }
      }
    }
    if (action == kWrite) StartWrite(&msg_);
    if (action == kFinish) {
      RunOnEnd();
      Finish(status);
    }
  }

  void RunOnEnd() {
    std::function<void()> f;
    {
      std::lock_guard<std::mutex> lock(mu_);
      f.swap(on_end_);
    }
    if (f) f();
  }

  Engine* engine_;
  std::shared_ptr<RequestStream> stream_;
  std::function<void()> on_end_;  // guarded by mu_
  std::mutex mu_;
  bool writing_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  v1::GenerateResponse msg_;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::Status InferenceService::Authorize(grpc::CallbackServerContext* context) const {
  if (auth_ == nullptr) return grpc::Status::OK;
  return auth_->Check(context->client_metadata());
}

void InferenceService::CountError(const grpc::Status& status) const {
  if (metrics_ != nullptr && !status.ok()) metrics_->IncError(CodeName(status.error_code()));
}

std::string InferenceService::ClientOf(grpc::CallbackServerContext* context,
                                       std::string* label) const {
  if (auth_ != nullptr && auth_->enabled()) {
    *label = "this api key";
    return "key:" + ApiKeyAuth::PresentedKey(context->client_metadata());
  }
  std::string host = PeerHost(context->peer());
  *label = "client " + host;
  return "peer:" + host;
}

Deadline InferenceService::DeadlineOf(grpc::CallbackServerContext* context) const {
  Deadline d;
  if (limits_.max_request_time != absl::InfiniteDuration()) {
    d.at = absl::Now() + limits_.max_request_time;
    d.source = absl::StrCat("the server's limit of ",
                            absl::ToDoubleSeconds(limits_.max_request_time),
                            " s a request (--max-request-seconds)");
  }
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    absl::Time client = absl::FromChrono(context->deadline());
    if (client < d.at) {
      d.at = client;
      d.source = "the client's deadline";
    }
  }
  return d;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* InferenceService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  grpc::Status auth = Authorize(context);
  if (!auth.ok()) {
    CountError(auth);
    return new GenerateReactor(auth);
  }
  if (context->deadline() <= std::chrono::system_clock::now()) {
    grpc::Status st(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed before admission");
    CountError(st);
    return new GenerateReactor(st);
  }
  std::string label;
  const std::string client = ClientOf(context, &label);
  if (absl::Status slot = streams_.Acquire(client, label); !slot.ok()) {
    grpc::Status st = ToGrpcStatus(slot);
    CountError(st);
    return new GenerateReactor(st);
  }
  absl::StatusOr<std::shared_ptr<RequestStream>> stream =
      engine_->Submit(*request, DeadlineOf(context));
  if (!stream.ok()) {
    streams_.Release(client);
    grpc::Status st = ToGrpcStatus(stream.status());
    CountError(st);
    return new GenerateReactor(st);
  }
  return new GenerateReactor(engine_, std::move(*stream),
                             [this, client] { streams_.Release(client); });
}

grpc::ServerUnaryReactor* InferenceService::GetModelInfo(grpc::CallbackServerContext* context,
                                                         const v1::GetModelInfoRequest* request,
                                                         v1::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status st = Authorize(context);
  if (st.ok()) *response = engine_->ModelInfo();
  CountError(st);
  reactor->Finish(st);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* context,
                                                     const v1::TokenizeRequest* request,
                                                     v1::TokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status st = Authorize(context);
  if (st.ok()) {
    v1::GenerateRequest as_generate;
    if (request->has_chat()) {
      *as_generate.mutable_chat() = request->chat();
    } else {
      as_generate.set_text(request->text());
    }
    const Tokenizer& tok = engine_->tokenizer();
    absl::StatusOr<std::vector<int32_t>> ids =
        PromptTokens(as_generate, tok, engine_->limits().vocab_size);
    if (ids.ok()) {
      for (int32_t id : *ids) {
        response->add_token_ids(id);
        response->add_token_bytes(tok.TokenBytes(id));
      }
    } else {
      st = ToGrpcStatus(ids.status());
    }
  }
  CountError(st);
  reactor->Finish(st);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Abort(grpc::CallbackServerContext* context,
                                                  const v1::AbortRequest* request,
                                                  v1::AbortResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status st = Authorize(context);
  if (st.ok()) st = ToGrpcStatus(CheckUtf8("request_id", request->request_id()));
  if (st.ok()) response->set_found(engine_->Abort(request->request_id()));
  CountError(st);
  reactor->Finish(st);
  return reactor;
}

}  // namespace vqserve
