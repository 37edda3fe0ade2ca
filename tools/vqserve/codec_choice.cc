#include "tools/vqserve/codec_choice.h"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/kv/codebook_file.h"
#include "runtime/kv/codec_factory.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/gguf/gguf_file.h"

namespace vqserve::cli {
namespace {

using Books = std::map<std::string, CodebookFile>;

// the artifacts of `codebooks_paths` by codec name, each checked against the model.
absl::StatusOr<std::shared_ptr<const Books>> LoadBooks(const std::string& model_path,
                                                       const std::string& codebooks_paths) {
  auto books = std::make_shared<Books>();
  if (codebooks_paths.empty()) return books;
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
  return books;
}

// the artifact of `name` (null for codecs without codebooks), or an error naming --codebooks.
absl::StatusOr<const CodebookFile*> BookFor(const Books& books, const std::string& name) {
  if (!CodecNeedsCodebooks(name)) return nullptr;
  auto it = books.find(name);
  if (it == books.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv codec ", name, " needs codebooks: pass --codebooks FILE.vqcb calibrated for it "
        "(vqserve calibrate)"));
  }
  return &it->second;
}

}  // namespace

absl::StatusOr<CodecMaker> MakeCodecMaker(const std::string& model_path, const KvShape& shape,
                                          const std::string& codebooks_paths) {
  absl::StatusOr<std::shared_ptr<const Books>> books = LoadBooks(model_path, codebooks_paths);
  if (!books.ok()) return books.status();
  return CodecMaker([shape, books = *books](const std::string& name)
                        -> absl::StatusOr<std::unique_ptr<KvCodec>> {
    absl::StatusOr<const CodebookFile*> book = BookFor(*books, name);
    if (!book.ok()) return book.status();
    return MakeCodec(name, shape, *book);
  });
}

absl::StatusOr<KvCacheMakers> MakeKvCacheMakers(const std::string& model_path,
                                                const KvShape& shape,
                                                const std::string& codebooks_paths,
                                                const std::string& device, int sink_tokens) {
  if (device == "cpu") {
    absl::StatusOr<CodecMaker> codecs = MakeCodecMaker(model_path, shape, codebooks_paths);
    if (!codecs.ok()) return codecs.status();
    return HostKvCacheMakers(std::move(*codecs), sink_tokens);
  }
  if (device != "cuda") return absl::InvalidArgumentError("--device must be cpu or cuda");
  absl::StatusOr<std::shared_ptr<const Books>> books = LoadBooks(model_path, codebooks_paths);
  if (!books.ok()) return books.status();
  KvCacheMakers m;
  m.probe = [shape, books = *books, sink_tokens](const std::string& name, int num_pages,
                                                 int num_slots)
      -> absl::StatusOr<std::unique_ptr<KvCache>> {
    absl::StatusOr<const CodebookFile*> book = BookFor(*books, name);
    if (!book.ok()) return book.status();
    return MakeCudaKvCacheOf(name, shape, *book, num_pages, num_slots, sink_tokens);
  };
  m.memory = [](size_t bytes) { return MakeCudaKvMemory(bytes); };
  m.over = [shape, books = *books, sink_tokens](const std::string& name,
                                                std::shared_ptr<const KvMemory> memory)
      -> absl::StatusOr<std::unique_ptr<KvCache>> {
    absl::StatusOr<const CodebookFile*> book = BookFor(*books, name);
    if (!book.ok()) return book.status();
    return MakeCudaKvCacheOver(name, shape, *book, std::move(memory), sink_tokens);
  };
  return m;
}

}  // namespace vqserve::cli
