// the bounded hand-off of one request's output from the engine thread to its grpc reactor.
#ifndef VQSERVE_SERVER_REQUEST_STREAM_H_
#define VQSERVE_SERVER_REQUEST_STREAM_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "proto/vqserve.pb.h"

namespace vqserve {

// the engine pushes deltas without ever blocking; pending deltas coalesce into one message,
// so the buffer is one message however slowly the client reads. the reader takes them.
class RequestStream {
 public:
  enum class Take { kNone, kMessage, kDone };

  RequestStream(int64_t id, std::string request_id)
      : id_(id), request_id_(std::move(request_id)) {}

  int64_t id() const { return id_; }
  const std::string& request_id() const { return request_id_; }

  // engine side: appends tokens/text/logprobs to the pending message.
  void Push(const v1::GenerateResponse& delta);
  // engine side: the final message (finish_reason, usage); no pushes after it.
  void Finish(v1::FinishReason reason, const v1::Usage& usage);
  // engine side: ends the call with an error status and no further messages.
  void Fail(const absl::Status& status);

  // reader side: moves pending output into `msg` (kMessage), or reports the end (kDone with
  // `status`) once everything was taken, or kNone.
  Take TakeNext(v1::GenerateResponse* msg, absl::Status* status);

  // reader side: called (from the engine thread, without locks held) after new output;
  // cleared before the reader goes away. setting waits for a running call to return.
  void SetListener(std::function<void()> listener);

  // the client went away; the engine aborts the request at its next step.
  void MarkCancelled() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  bool done() const;
  // messages coalesced so far (a slow-reader signal, for tests and metrics).
  int64_t coalesced() const;

 private:
  void Notify();

  const int64_t id_;
  const std::string request_id_;
  mutable std::mutex mu_;
  std::optional<v1::GenerateResponse> pending_;
  bool finished_ = false;      // final message queued or failure set
  bool final_taken_ = false;
  absl::Status status_;
  int64_t coalesced_ = 0;
  std::atomic<bool> cancelled_{false};
  std::mutex listener_mu_;
  std::function<void()> listener_;
};

}  // namespace vqserve

#endif  // VQSERVE_SERVER_REQUEST_STREAM_H_
