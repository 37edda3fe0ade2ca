// the gguf reader on arbitrary bytes: open, then everything start-up reads from the file
// (model config, model identity, tokenizer vocabulary, small tensors dequantized).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/kv/codebook_file.h"
#include "runtime/model/model_config.h"
#include "runtime/tokenizer/tokenizer.h"

namespace vqserve {
namespace {

void Exercise(const GgufFile& file) {
  for (const GgufTensor& t : file.tensors()) {
    FUZZ_CHECK(t.data != nullptr, "tensor without data");
    // open() promised the bytes lie inside the mapping: touch the first and the last.
    if (t.nbytes > 0) {
      volatile uint8_t first = t.data[0];
      volatile uint8_t last = t.data[t.nbytes - 1];
      (void)first;
      (void)last;
    }
    if (t.num_elements() <= (1 << 16)) {
      auto values = file.ReadTensorF32(t.name);
      if (values.ok()) FUZZ_CHECK(static_cast<int64_t>(values->size()) == t.num_elements(), "size");
    }
  }
  (void)ModelConfig::FromGguf(file);
  (void)ModelIdentity::FromGguf(file);
  auto tok = Tokenizer::FromGguf(file);
  if (tok.ok()) {
    std::vector<int32_t> ids = (*tok)->Encode("Hello world <|im_start|> 123", true, true);
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < (*tok)->vocab_size(), "id outside vocab");
    (void)(*tok)->Decode(ids);
    (void)(*tok)->ApplyChatTemplate({{"user", "hi"}}, true);
  }
}

}  // namespace
}  // namespace vqserve

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // the reader maps a path: give it an in-memory file.
  static int fd = memfd_create("fuzz.gguf", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::abort();
  }
  auto file = vqserve::GgufFile::Open(path);
  if (!file.ok()) {
    const std::string msg(file.status().message());
    FUZZ_CHECK(msg.rfind(path + ": ", 0) == 0, "error does not name the file");
    FUZZ_CHECK(msg.find('\n') == std::string::npos, "error is not one line");
    return 0;
  }
  vqserve::Exercise(**file);
  return 0;
}
