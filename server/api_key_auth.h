// optional api keys: a call must carry `authorization: Bearer <key>` with a configured key.
#ifndef VQSERVE_SERVER_API_KEY_AUTH_H_
#define VQSERVE_SERVER_API_KEY_AUTH_H_

#include <map>
#include <set>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace vqserve {

class ApiKeyAuth {
 public:
  ApiKeyAuth() = default;  // no keys: every call passes
  explicit ApiKeyAuth(std::set<std::string> keys) : keys_(std::move(keys)) {}
  // one key per line; blank lines and lines starting with '#' are skipped.
  static absl::StatusOr<ApiKeyAuth> FromFile(const std::string& path);

  bool enabled() const { return !keys_.empty(); }
  // OK, or UNAUTHENTICATED when keys are configured and the metadata lacks a valid one.
  grpc::Status Check(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;
  // the key a call presents ("Bearer <key>"), empty when none; meaningful after Check passed.
  static std::string PresentedKey(
      const std::multimap<grpc::string_ref, grpc::string_ref>& metadata);

 private:
  std::set<std::string> keys_;
};

}  // namespace vqserve

#endif  // VQSERVE_SERVER_API_KEY_AUTH_H_
