#include "tests/util/metrics_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace vqserve::testing {

void PopulateAllMetrics(ServerMetrics& m) {
  m.SetCacheConfig(32, "fp16", 128);
  m.SetCacheConfig(32, "vecinfer-2b", 128);
  m.SetRequestsRunning(5);
  m.SetRequestsWaiting(2);
  m.SetKvState("fp16", 3.0e6, 3.0e6, 900, 1024);
  m.SetKvState("vecinfer-2b", 1.5e6, 12.0e6, 3000, 4096);
  m.SetKvMemory(64.0e6, 4.5e6);
  m.AddPrefixCache(2048, 1024);
  m.SetPrefixCacheBytes("vecinfer-2b", 1.0e6);
  m.IncPreemptions(3);
  m.AddPromptTokens(1234);
  m.AddGenerationTokens(567);
  for (double s : {0.02, 0.05, 0.3}) m.ObserveTtft(s);
  for (double s : {0.008, 0.011, 0.02, 0.09}) m.ObserveInterToken(s);
  for (double s : {0.7, 2.2}) m.ObserveE2e(s);
  for (double s : {0.0, 0.15}) m.ObserveQueueTime(s);
  for (std::string_view phase : kEngineStepPhases) m.ObserveEngineStep(phase, 0.004);
  for (const char* r : {"length", "stop", "eos", "abort"}) m.IncSuccess(r);
  for (const char* c : {"INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED"}) {
    m.IncError(c);
  }
}

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to 127.0.0.1:", port));
  }
  std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return absl::UnavailableError("short send");
  }
  std::string raw;
  std::array<char, 8192> buf;
  for (ssize_t n; (n = recv(fd, buf.data(), buf.size(), 0)) > 0;) raw.append(buf.data(), n);
  close(fd);
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return absl::DataLossError("no http header end");
  HttpResponse out;
  std::istringstream head(raw.substr(0, head_end));
  std::string line, version;
  std::getline(head, line);
  std::istringstream(line) >> version >> out.status;
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string lower = line;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.rfind("content-type:", 0) == 0) {
      out.content_type = line.substr(13);
      while (!out.content_type.empty() && out.content_type[0] == ' ') out.content_type.erase(0, 1);
    }
  }
  out.body = raw.substr(head_end + 4);
  return out;
}

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.output.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::set<std::string> SampleNames(const std::string& exposition) {
  std::set<std::string> names;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find_first_of("{ ")));
  }
  return names;
}

}  // namespace vqserve::testing
