#include "tools/vqserve/codec_choice.h"

#include "absl/strings/str_cat.h"

namespace vqserve::cli {

absl::StatusOr<CodecMaker> MakeCodecMaker(const KvShape& shape,
                                          const std::string& codebooks_path) {
  if (!codebooks_path.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        codebooks_path, ": codebook files are not wired into serve yet (codec factory pending)"));
  }
  return CodecMaker([shape](const std::string& name) { return MakeBuiltinCodec(name, shape); });
}

}  // namespace vqserve::cli
