// the vqserve.v1.Inference service on grpc's callback api: one write reactor per Generate call.
#ifndef VQSERVE_SERVER_GRPC_SERVICE_H_
#define VQSERVE_SERVER_GRPC_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/vqserve.grpc.pb.h"
#include "server/api_key_auth.h"
#include "server/client_stream_limiter.h"
#include "server/engine.h"
#include "server/server_metrics.h"

namespace vqserve {

// absl status -> grpc status (same codes, same message).
grpc::Status ToGrpcStatus(const absl::Status& status);

// per-call limits of a deployment (flags of `vqserve serve`).
struct CallLimits {
  int max_streams_per_client = 0;                         // <= 0: no bound
  absl::Duration max_request_time = absl::InfiniteDuration();  // server cap on a Generate call
};

class InferenceService final : public v1::Inference::CallbackService {
 public:
  // engine, auth and metrics (may be null) must outlive the service.
  InferenceService(Engine* engine, const ApiKeyAuth* auth, ServerMetrics* metrics,
                   CallLimits limits = {})
      : engine_(engine),
        auth_(auth),
        metrics_(metrics),
        limits_(limits),
        streams_(limits.max_streams_per_client) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const v1::AbortRequest* request,
                                  v1::AbortResponse* response) override;

  // the per-client stream bound (open counts, for tests).
  const ClientStreamLimiter& streams() const { return streams_; }

 private:
  grpc::Status Authorize(grpc::CallbackServerContext* context) const;
  void CountError(const grpc::Status& status) const;
  // the client a call belongs to: its api key when keys are on, else its peer host.
  std::string ClientOf(grpc::CallbackServerContext* context, std::string* label) const;
  // the earlier of the client's grpc deadline and the server's cap.
  Deadline DeadlineOf(grpc::CallbackServerContext* context) const;

  Engine* engine_;
  const ApiKeyAuth* auth_;
  ServerMetrics* metrics_;
  CallLimits limits_;
  ClientStreamLimiter streams_;
};

}  // namespace vqserve

#endif  // VQSERVE_SERVER_GRPC_SERVICE_H_
