#include "server/request_stream.h"

#include <utility>

namespace vqserve {

void RequestStream::Push(const v1::GenerateResponse& delta) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (!pending_) {
      pending_.emplace();
      pending_->set_request_id(request_id_);
    } else {
      ++coalesced_;
    }
    pending_->mutable_token_ids()->MergeFrom(delta.token_ids());
    pending_->mutable_text()->append(delta.text());
    pending_->mutable_logprobs()->MergeFrom(delta.logprobs());
  }
  Notify();
}

void RequestStream::Finish(v1::FinishReason reason, const v1::Usage& usage) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (!pending_) {
      pending_.emplace();
      pending_->set_request_id(request_id_);
    }
    pending_->set_finish_reason(reason);
    *pending_->mutable_usage() = usage;
    finished_ = true;
  }
  Notify();
}

void RequestStream::Fail(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    pending_.reset();
    status_ = status;
    finished_ = true;
  }
  Notify();
}

RequestStream::Take RequestStream::TakeNext(v1::GenerateResponse* msg, absl::Status* status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_) {
    *msg = std::move(*pending_);
    pending_.reset();
    return Take::kMessage;
  }
  if (finished_) {
    final_taken_ = true;
    *status = status_;
    return Take::kDone;
  }
  return Take::kNone;
}

void RequestStream::SetListener(std::function<void()> listener) {
  std::lock_guard<std::mutex> lock(listener_mu_);
  listener_ = std::move(listener);
}

bool RequestStream::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

int64_t RequestStream::coalesced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return coalesced_;
}

void RequestStream::Notify() {
  std::lock_guard<std::mutex> lock(listener_mu_);
  if (listener_) listener_();
}

}  // namespace vqserve
