// the .vqcb reader on arbitrary bytes; the first byte may ask to fix the checksum so that the
// fuzzer gets past it, and a parsed artifact must serialize back to the same bytes and build
// (or refuse) its codec without crashing.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/fuzz_util.h"
#include "runtime/kv/codebook_file.h"
#include "runtime/kv/codec_factory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool fix_checksum = data[0] & 1;
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (fix_checksum && bytes.size() >= 16) {
    uint64_t h = vqserve::Hash64(std::string_view(bytes).substr(0, bytes.size() - 8));
    std::memcpy(bytes.data() + bytes.size() - 8, &h, 8);
  }
  auto parsed = vqserve::CodebookFile::Parse(bytes, "fuzz.vqcb");
  if (!parsed.ok()) {
    const std::string msg(parsed.status().message());
    FUZZ_CHECK(msg.rfind("fuzz.vqcb: ", 0) == 0, "error does not name the file");
    FUZZ_CHECK(msg.find('\n') == std::string::npos, "error is not one line");
    return 0;
  }
  FUZZ_CHECK(parsed->Serialize() == bytes, "parse then serialize changes the bytes");
  vqserve::ModelIdentity small{"fuzz", 2, 1, 2, 64, 0};
  (void)parsed->CheckModel(small, "fuzz.vqcb");
  // the shape the artifact claims, bounded so that a codec stays small.
  const vqserve::ModelIdentity& m = parsed->model;
  if (m.num_layers > 0 && m.num_layers <= 4 && m.num_kv_heads > 0 && m.num_kv_heads <= 4 &&
      m.num_heads > 0 && m.num_heads <= 16 && m.head_dim > 0 && m.head_dim <= 256) {
    auto codec = vqserve::MakeCodec(parsed->codec, m.kv_shape(), &*parsed);
    if (!codec.ok()) {
      FUZZ_CHECK(std::string(codec.status().message()).find('\n') == std::string::npos,
                 "codec error is not one line");
    }
  }
  return 0;
}
