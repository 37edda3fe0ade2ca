#include "runtime/kv/codec_factory.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/kv/commvq_codebooks.h"
#include "runtime/kv/commvq_codec.h"
#include "runtime/kv/fp16_codec.h"
#include "runtime/kv/kivi_codec.h"
#include "runtime/kv/vecinfer_codec.h"

namespace vqserve {

bool CodecNeedsCodebooks(const std::string& name) {
  return absl::StartsWith(name, "vecinfer-") || absl::StartsWith(name, "commvq-");
}

std::vector<std::string> KnownCodecs() {
  return {"fp16",           "kivi-k2v2",         "kivi-k4v4",     "vecinfer-k4v4",
          "vecinfer-k3v3",  "vecinfer-k4v2",     "vecinfer-k2v2", "vecinfer-k1.5v1.5",
          "vecinfer-k2v1",  "vecinfer-k1v1",     "commvq-2",      "commvq-1"};
}

namespace {

// an error that may quote names read from an artifact, made one line: control bytes as \xHH.
absl::Status OneLine(const absl::Status& st) {
  std::string out;
  for (unsigned char c : st.message()) {
    if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out += static_cast<char>(c);
    }
  }
  return absl::Status(st.code(), out);
}

absl::StatusOr<std::unique_ptr<KvCodec>> MakeCodecUnchecked(const std::string& name, const KvShape& shape,
                                                            const CodebookFile* codebooks) {
  if (name == "fp16") return MakeFp16Codec(shape);
  if (name == "kivi-k2v2" || name == "kivi-k4v4") {
    if (shape.head_dim % 32 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": head_dim ", shape.head_dim, " is not a multiple of 32"));
    }
    return MakeKiviCodec(shape, name == "kivi-k2v2" ? 2 : 4);
  }
  if (!CodecNeedsCodebooks(name)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown codec '", name, "' (known: ",
                                                   absl::StrJoin(KnownCodecs(), ", "), ")"));
  }
  if (codebooks == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": needs a codebook artifact (--codebooks)"));
  }
  if (codebooks->codec != name) {
    return absl::InvalidArgumentError(
        absl::StrCat("codebooks were calibrated for codec '", codebooks->codec, "', not '", name, "'"));
  }
  KvShape cs = codebooks->model.kv_shape();
  if (cs.num_layers != shape.num_layers || cs.num_kv_heads != shape.num_kv_heads ||
      cs.num_heads != shape.num_heads || cs.head_dim != shape.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "codebooks are for ", cs.num_layers, " layers x ", cs.num_kv_heads, " kv heads x head_dim ",
        cs.head_dim, ", the model has ", shape.num_layers, " x ", shape.num_kv_heads, " x ",
        shape.head_dim));
  }
  if (absl::StartsWith(name, "vecinfer-")) {
    auto opts = VecInferOptionsForName(name);
    if (!opts.ok()) return opts.status();
    auto cb = VecInferCodebooks::FromBlobs(shape, *opts, codebooks->blobs);
    if (!cb.ok()) return cb.status();
    return MakeVecInferCodec(std::make_shared<const VecInferCodebooks>(std::move(*cb)));
  }
  auto opts = CommVqOptionsForName(name, shape);
  if (!opts.ok()) return opts.status();
  auto it = codebooks->blobs.find("commvq");
  if (it == codebooks->blobs.end()) return absl::InvalidArgumentError("commvq artifact lacks blob 'commvq'");
  auto books = CommVqCodebooks::Deserialize(it->second);
  if (!books.ok()) return books.status();
  absl::Status st = CheckCommVqCodec(shape, *books, opts->key_rounds, opts->value_rounds);
  if (!st.ok()) return st;
  return MakeCommVqCodec(shape, std::make_shared<const CommVqCodebooks>(std::move(*books)),
                         opts->key_rounds, opts->value_rounds);
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvCodec>> MakeCodec(const std::string& name, const KvShape& shape,
                                                   const CodebookFile* codebooks) {
  auto codec = MakeCodecUnchecked(name, shape, codebooks);
  if (!codec.ok()) return OneLine(codec.status());
  return codec;
}

}  // namespace vqserve
