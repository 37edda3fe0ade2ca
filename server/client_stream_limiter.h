// a bound on the Generate streams one client holds open at once (`--max-streams-per-client`).
// a client is its api key when keys are configured, else its peer address without the port.
#ifndef VQSERVE_SERVER_CLIENT_STREAM_LIMITER_H_
#define VQSERVE_SERVER_CLIENT_STREAM_LIMITER_H_

#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace vqserve {

class ClientStreamLimiter {
 public:
  // max_streams <= 0: no bound (Acquire always succeeds and counts nothing).
  explicit ClientStreamLimiter(int max_streams) : max_streams_(max_streams) {}

  // takes one of `client`'s slots; RESOURCE_EXHAUSTED naming the limit when it holds them all.
  // `label` names the client in the message (never the api key itself).
  absl::Status Acquire(const std::string& client, const std::string& label);
  // gives back a slot taken by Acquire.
  void Release(const std::string& client);

  int max_streams() const { return max_streams_; }
  // streams `client` holds now (for tests).
  int open(const std::string& client) const;

 private:
  const int max_streams_;
  mutable std::mutex mu_;
  std::map<std::string, int> open_;  // clients with at least one stream
};

// "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7", "ipv6:[::1]:5" -> "ipv6:[::1]"; others unchanged.
std::string PeerHost(const std::string& peer);

}  // namespace vqserve

#endif  // VQSERVE_SERVER_CLIENT_STREAM_LIMITER_H_
