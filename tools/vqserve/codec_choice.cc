#include "tools/vqserve/codec_choice.h"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/codebook_file.h"
#include "runtime/codec_factory.h"
#include "runtime/gguf_file.h"

namespace vqserve::cli {

absl::StatusOr<CodecMaker> MakeCodecMaker(const std::string& model_path, const KvShape& shape,
                                          const std::string& codebooks_paths) {
  auto books = std::make_shared<std::map<std::string, CodebookFile>>();
  if (!codebooks_paths.empty()) {
    absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(model_path);
    if (!gguf.ok()) return gguf.status();
    absl::StatusOr<ModelIdentity> identity = ModelIdentity::FromGguf(**gguf);
    if (!identity.ok()) return identity.status();
    for (absl::string_view p : absl::StrSplit(codebooks_paths, ',', absl::SkipEmpty())) {
      std::string path(p);
      absl::StatusOr<CodebookFile> book = CodebookFile::Load(path);
      if (!book.ok()) return book.status();
      absl::Status st = book->CheckModel(*identity, path);
      if (!st.ok()) return st;
      std::string codec = book->codec;
      (*books)[codec] = std::move(*book);
    }
  }
  return CodecMaker([shape, books](const std::string& name)
                        -> absl::StatusOr<std::unique_ptr<KvCodec>> {
    const CodebookFile* book = nullptr;
    if (CodecNeedsCodebooks(name)) {
      auto it = books->find(name);
      if (it == books->end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kv codec ", name, " needs codebooks: pass --codebooks FILE.vqcb calibrated for it "
            "(vqserve calibrate)"));
      }
      book = &it->second;
    }
    return MakeCodec(name, shape, book);
  });
}

}  // namespace vqserve::cli
