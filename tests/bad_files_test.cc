// the real `vqserve serve` refuses bad model and codebook files at start-up: a non-zero exit
// (no signal), and exactly one stderr line naming the file and the problem.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/gguf/gguf_file.h"
#include "runtime/kv/codebook_file.h"
#include "tests/test_paths.h"
#include "tests/util/prerequisite.h"

extern char** environ;

namespace vqserve {
namespace {

struct Outcome {
  bool exited = false;    // exited by itself (not by a signal, not killed on the deadline)
  int exit_code = -1;
  int signal = 0;
  std::string err;        // everything written to stderr
};

// runs `args` with stdout discarded and stderr captured; killed after `deadline_s`.
Outcome RunProgram(const std::vector<std::string>& args, int deadline_s = 180) {
  Outcome out;
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  EXPECT_EQ(rc, 0) << "cannot start " << args[0] << ": " << std::strerror(rc);
  if (rc != 0) {
    close(fds[0]);
    return out;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);
  bool killed = false;
  char buf[4096];
  while (true) {
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, 200);
    if (ready > 0) {
      const ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n <= 0) break;
      out.err.append(buf, n);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      killed = true;
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  out.exited = !killed && WIFEXITED(status);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  out.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return out;
}

std::string VqserveBinary() { return testing::BinaryDir() + "/bin/vqserve"; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
  ASSERT_TRUE(out.good()) << path;
}

class BadFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::DefaultModelPath();
    if (model_.empty()) VQ_SKIP_UNLESS_CI << "default model missing (scripts/setup)";
    ASSERT_EQ(access(VqserveBinary().c_str(), X_OK), 0) << VqserveBinary();
    dir_ = testing::BinaryDir() + "/bad_files_test";
    ASSERT_EQ(system(("mkdir -p '" + dir_ + "'").c_str()), 0);
  }

  // `vqserve serve` refuses to start: non-zero exit, one stderr line with `path` and `problem`.
  void ExpectRefused(const std::vector<std::string>& extra, const std::string& path,
                     const std::string& problem) {
    std::vector<std::string> args = {VqserveBinary(), "serve", "--host", "127.0.0.1", "--port", "0",
                                     "--metrics-port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    Outcome o = RunProgram(args);
    EXPECT_TRUE(o.exited) << "signal " << o.signal << ", stderr: " << o.err;
    EXPECT_NE(o.exit_code, 0) << o.err;
    ASSERT_FALSE(o.err.empty());
    EXPECT_EQ(o.err.back(), '\n') << o.err;
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << "more than one stderr line:\n" << o.err;
    EXPECT_NE(o.err.find(path), std::string::npos) << "does not name " << path << ": " << o.err;
    EXPECT_NE(o.err.find(problem), std::string::npos) << "does not say '" << problem << "': " << o.err;
  }

  void ExpectModelRefused(const std::string& path, const std::string& problem) {
    ExpectRefused({"--model", path}, path, problem);
  }

  // a codebook file for `--kv-codec vecinfer-k2v2` with the default model.
  void ExpectCodebookRefused(const std::string& path, const std::string& problem) {
    ExpectRefused({"--model", model_, "--kv-codec", "vecinfer-k2v2", "--codebooks", path}, path,
                  problem);
  }

  ModelIdentity DefaultIdentity() {
    auto gguf = GgufFile::Open(model_);
    EXPECT_TRUE(gguf.ok()) << gguf.status();
    auto id = ModelIdentity::FromGguf(**gguf);
    EXPECT_TRUE(id.ok()) << id.status();
    return *id;
  }

  // a well-formed vecinfer-k2v2 artifact for `model` (blobs are checked only after the model).
  static CodebookFile Artifact(const ModelIdentity& model) {
    CodebookFile f;
    f.model = model;
    f.codec = "vecinfer-k2v2";
    f.params = {{"iterations", "2"}};
    f.blobs = {{"lambda", std::string(4096, '\1')}};
    return f;
  }

  std::string model_;
  std::string dir_;
};

TEST_F(BadFilesTest, TruncatedGgufInTheTensorData) {
  const std::string bytes = ReadAll(model_);
  const std::string path = dir_ + "/truncated_data.gguf";
  WriteAll(path, bytes.substr(0, bytes.size() / 2));
  ExpectModelRefused(path, "past the end of the file (truncated?)");
}

TEST_F(BadFilesTest, TruncatedGgufInTheMetadata) {
  const std::string path = dir_ + "/truncated_metadata.gguf";
  WriteAll(path, ReadAll(model_).substr(0, 4096));
  ExpectModelRefused(path, "(truncated?)");
}

TEST_F(BadFilesTest, BitFlippedGgufVersion) {
  std::string bytes = ReadAll(model_);
  bytes[4] ^= 0x04;  // version 3 -> 7
  const std::string path = dir_ + "/flipped_version.gguf";
  WriteAll(path, bytes);
  ExpectModelRefused(path, "unsupported gguf version 7");
}

TEST_F(BadFilesTest, BitFlippedGgufKeyLength) {
  std::string bytes = ReadAll(model_);
  bytes[24 + 7] ^= 0x80;  // the high bit of the first metadata key's length
  const std::string path = dir_ + "/flipped_key_length.gguf";
  WriteAll(path, bytes);
  ExpectModelRefused(path, "truncated metadata key 0");
}

TEST_F(BadFilesTest, WrongArchitectureGguf) {
  std::string bytes = ReadAll(model_);
  // general.architecture: type string (8), length 5, "llama" -> "gemma".
  std::string key = "general.architecture";
  key += std::string("\x08\0\0\0\x05\0\0\0\0\0\0\0", 12) + "llama";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at + key.size() - 5, 5, "gemma");
  const std::string path = dir_ + "/gemma.gguf";
  WriteAll(path, bytes);
  ExpectModelRefused(path, "unsupported architecture 'gemma'");
}

TEST_F(BadFilesTest, CodebookOfAnotherModelShape) {
  const std::string path = dir_ + "/other_shape.vqcb";
  ASSERT_TRUE(Artifact(ModelIdentity{"other-llama", 2, 1, 2, 64, 7}).Save(path).ok());
  ExpectCodebookRefused(path, "calibrated for other-llama");
}

TEST_F(BadFilesTest, CodebookOfAnotherModelSameShape) {
  ModelIdentity other = DefaultIdentity();
  other.metadata_hash ^= 1;  // e.g. a fine-tune of the same architecture
  const std::string path = dir_ + "/other_model.vqcb";
  ASSERT_TRUE(Artifact(other).Save(path).ok());
  ExpectCodebookRefused(path, "calibrated for another model");
}

TEST_F(BadFilesTest, TruncatedCodebook) {
  const std::string bytes = Artifact(DefaultIdentity()).Serialize();
  const std::string path = dir_ + "/truncated.vqcb";
  WriteAll(path, bytes.substr(0, bytes.size() / 2));
  ExpectCodebookRefused(path, "checksum mismatch (file corrupt or truncated)");
  const std::string tiny = dir_ + "/truncated_header.vqcb";
  WriteAll(tiny, bytes.substr(0, 10));
  ExpectCodebookRefused(tiny, "truncated (10 bytes)");
}

TEST_F(BadFilesTest, CodebookOfUnknownVersion) {
  std::string bytes = Artifact(DefaultIdentity()).Serialize();
  bytes[4] = 2;  // format version 1 -> 2
  const std::string path = dir_ + "/version2.vqcb";
  WriteAll(path, bytes);
  ExpectCodebookRefused(path, "unsupported artifact version 2");
}

}  // namespace
}  // namespace vqserve
