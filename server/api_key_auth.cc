#include "server/api_key_auth.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vqserve {

absl::StatusOr<ApiKeyAuth> ApiKeyAuth::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open api keys file"));
  std::set<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    std::string key(absl::StripAsciiWhitespace(line));
    if (key.empty() || key[0] == '#') continue;
    keys.insert(key);
  }
  if (keys.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no api keys"));
  return ApiKeyAuth(std::move(keys));
}

grpc::Status ApiKeyAuth::Check(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  if (keys_.empty()) return grpc::Status::OK;
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing authorization metadata");
  }
  std::string value(it->second.data(), it->second.size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.size() <= kBearer.size() || value.compare(0, kBearer.size(), kBearer) != 0) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "authorization must be 'Bearer <api key>'");
  }
  if (!keys_.count(value.substr(kBearer.size()))) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid api key");
  }
  return grpc::Status::OK;
}

std::string ApiKeyAuth::PresentedKey(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) {
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return "";
  std::string value(it->second.data(), it->second.size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.size() <= kBearer.size() || value.compare(0, kBearer.size(), kBearer) != 0) return "";
  return value.substr(kBearer.size());
}

}  // namespace vqserve
