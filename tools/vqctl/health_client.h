// client helpers shared by vqctl and the tests: grpc.health.v1 checks and status-code names.
#ifndef VQSERVE_TOOLS_VQCTL_HEALTH_CLIENT_H_
#define VQSERVE_TOOLS_VQCTL_HEALTH_CLIENT_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "proto/health.grpc.pb.h"

namespace vqserve {

// the name of a grpc status code ("INVALID_ARGUMENT", ...).
inline const char* StatusCodeName(grpc::StatusCode code) {
  static const char* kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                 "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                                 "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  int c = static_cast<int>(code);
  return c >= 0 && c <= 16 ? kNames[c] : "UNKNOWN";
}

// asks grpc.health.v1.Health/Check for `service` ("" = the whole server); *status gets the
// serving status name (SERVING, NOT_SERVING, ...).
inline grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                grpc::ClientContext* ctx, const std::string& service,
                                std::string* status) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status st = stub->Check(ctx, req, &resp);
  if (st.ok()) *status = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
  return st;
}

}  // namespace vqserve

#endif  // VQSERVE_TOOLS_VQCTL_HEALTH_CLIENT_H_
