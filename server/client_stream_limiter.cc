#include "server/client_stream_limiter.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vqserve {

absl::Status ClientStreamLimiter::Acquire(const std::string& client, const std::string& label) {
  if (max_streams_ <= 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  int& n = open_[client];
  if (n >= max_streams_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("max_streams_per_client: ", label, " has ", n,
                     " streams open (limit ", max_streams_, ", --max-streams-per-client)"));
  }
  ++n;
  return absl::OkStatus();
}

void ClientStreamLimiter::Release(const std::string& client) {
  if (max_streams_ <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(client);
  if (it == open_.end()) return;
  if (--it->second <= 0) open_.erase(it);
}

int ClientStreamLimiter::open(const std::string& client) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(client);
  return it == open_.end() ? 0 : it->second;
}

std::string PeerHost(const std::string& peer) {
  const bool v4 = absl::StartsWith(peer, "ipv4:");
  const bool v6 = absl::StartsWith(peer, "ipv6:");
  if (!v4 && !v6) return peer;
  // the port follows the last ':' (ipv6 hosts are bracketed, so their colons come before it).
  size_t colon = peer.rfind(':');
  if (colon == std::string::npos || colon < 5) return peer;
  if (v6 && peer[colon - 1] != ']') return peer;
  return peer.substr(0, colon);
}

}  // namespace vqserve
