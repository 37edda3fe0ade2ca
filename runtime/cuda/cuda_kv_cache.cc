#include "runtime/cuda/cuda_kv_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/kv/codec_factory.h"
#include "runtime/kv/commvq_codec.h"
#include "runtime/kv/commvq_math.h"
#include "runtime/kv/fp16_codec.h"
#include "runtime/kv/kivi_codec.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda/common/vecinfer_half_books.h"
#include "kernels/cuda/decode/decode_attention.h"

namespace vqserve {

namespace {
constexpr char kCudaCodecs[] =
    "fp16, kivi-k2v2, kivi-k4v4, vecinfer-kXvY for X, Y in 4, 3, 2, 1.5, 1 "
    "(with any of the -nosmooth, -nohadamard, -perhead suffixes; -pca for k2v2, k2v1 and k1v1, "
    "and for kXv2 with 17 to 32 key codes at head_dim 64 (X in 2.125 .. 4 in steps of 0.125), "
    "33 to 40 at 128 (X in 2.0625 .. 2.5 in steps of 0.0625)), "
    "commvq-2, commvq-1";

// the key side of a vecinfer codec on the gpu: its PqSpec, and with -pca keys (Mk codes of
// calibrated sizes) the sub_dim that stands in for Mk in the kernels' shape checks (8 for D / 8
// codes, else 4), refused unless the tensor-core kernel takes Mk (D / 4, D / 8, or with 4-dim
// values 17 .. 32 at head_dim 64, 33 .. 40 at 128).
struct CudaKeySide {
  PqSpec spec;
  int codes = 0;
};
absl::StatusOr<CudaKeySide> CudaKeySideFor(const VecInferOptions& o, int head_dim) {
  const int D = head_dim;
  if (!o.key_pca) {
    absl::StatusOr<PqSpec> k = PqSpecForBits(o.k_bits);
    if (!k.ok()) return k.status();
    return CudaKeySide{*k, D / k->sub_dim};
  }
  absl::StatusOr<VecInferSide> g = VecInferSideGeometry(o.k_bits, true, D);
  absl::StatusOr<PqSpec> v = PqSpecForBits(o.v_bits);
  if (!g.ok()) return g.status();
  if (!v.ok()) return v.status();
  const int mk = g->subvectors;
  const bool var = cuda::VecInferMmaTakesKeyCodes(D, mk) && v->sub_dim == 4 && v->code_bits == 8;
  if (mk != D / 4 && mk != D / 8 && !var) {
    return absl::InvalidArgumentError(absl::StrCat("-pca keys of ", mk, " codes at head_dim ", D));
  }
  PqSpec k;
  k.sub_dim = mk == D / 8 ? 8 : 4;
  k.code_bits = 8;
  return CudaKeySide{k, mk};
}
}  // namespace

absl::Status CudaKvCodecSupported(const std::string& name, int head_dim) {
  if (head_dim != 0 && head_dim != 64 && head_dim != 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cuda runtime needs head_dim 64 or 128, the model has ", head_dim));
  }
  if (name == "fp16" || name == "kivi-k2v2" || name == "kivi-k4v4" || name == "commvq-2" ||
      name == "commvq-1") {
    return absl::OkStatus();
  }
  bool ok = false;
  if (absl::StartsWith(name, "vecinfer-")) {
    const int D = head_dim == 0 ? 64 : head_dim;
    absl::StatusOr<VecInferOptions> o = VecInferOptionsForName(name);
    absl::StatusOr<CudaKeySide> k = o.ok() ? CudaKeySideFor(*o, D) : o.status();
    absl::StatusOr<PqSpec> v = o.ok() ? PqSpecForBits(o->v_bits) : o.status();
    ok = k.ok() && v.ok();  // every width: the decode dispatch picks the kernel
    // -pca keys: the tensor-core kernel's widths (its lut is built outside it).
    if (ok && o->key_pca) {
      ok = cuda::VecInferTakesHalfBooks(D, k->spec.sub_dim, v->sub_dim, k->spec.code_bits, v->code_bits);
    }
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("kv codec '", name, "' cannot be held by the "
                                                 "cuda runtime, which holds ", kCudaCodecs));
}

CudaKvCache::~CudaKvCache() {
  if (owns_ && pages_ != nullptr) cudaFree(pages_);
  if (owns_ && slots_ != nullptr) cudaFree(slots_);
  if (constants_ != nullptr) cudaFree(constants_);
  if (half_books_ != nullptr) cudaFree(half_books_);
}

uint16_t* CudaKvCache::ring(int layer, int which) const {
  if (which >= ring_arrays_) return nullptr;
  const int64_t array = ring_layer_elems_ / ring_arrays_;
  return reinterpret_cast<uint16_t*>(slots_) + ring_layer_elems_ * layer + array * which;
}

uint16_t* CudaKvCache::sink(int layer, int which) const {
  if (sink_layer_elems_ == 0) return nullptr;
  return reinterpret_cast<uint16_t*>(slots_) + ring_layer_elems_ * shape_.num_layers +
         sink_layer_elems_ * layer + sink_layer_elems_ / 2 * which;
}

void CudaKvCache::CopySlot(int from, int to) {
  if (from < 0 || from >= num_slots_ || to < 0 || to >= num_slots_) {
    std::fprintf(stderr, "CudaKvCache: slot out of range\n");
    std::abort();
  }
  if (from == to) return;
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) {
    e = cudaMemcpy(slots_ + spec_.slot_bytes * to, slots_ + spec_.slot_bytes * from,
                   spec_.slot_bytes, cudaMemcpyDeviceToDevice);
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CudaKvCache: slot copy: %s\n", cudaGetErrorString(e));
    std::abort();
  }
}

absl::Status CudaKvCache::Allocate() {
  const size_t page_total = spec_.page_bytes * static_cast<size_t>(num_pages_);
  const size_t slot_total = spec_.slot_bytes * static_cast<size_t>(num_slots_);
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, page_total > 0 ? page_total : 1); e != cudaSuccess) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda kv cache: ", page_total, " bytes of pages: ", cudaGetErrorString(e)));
  }
  pages_ = static_cast<uint8_t*>(p);
  if (cudaError_t e = cudaMalloc(&p, slot_total > 0 ? slot_total : 1); e != cudaSuccess) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda kv cache: ", slot_total, " bytes of rings: ", cudaGetErrorString(e)));
  }
  slots_ = static_cast<uint8_t*>(p);
  return absl::OkStatus();
}

absl::Status CudaKvCache::UseMemory(std::shared_ptr<const KvMemory> memory) {
  if (memory == nullptr || memory->device != KvDevice::kCuda) {
    return absl::InvalidArgumentError("cuda kv cache: shared memory must be device memory");
  }
  if (owns_) {
    if (pages_ != nullptr) cudaFree(pages_);
    if (slots_ != nullptr) cudaFree(slots_);
  }
  owns_ = false;
  memory_ = std::move(memory);
  pages_ = memory_->base;
  slots_ = memory_->base;
  num_pages_ = static_cast<int>(memory_->bytes / spec_.page_bytes);
  num_slots_ = static_cast<int>(memory_->bytes / spec_.slot_bytes);
  return absl::OkStatus();
}

void CudaKvCache::InitSpec(const KvCodec& codec, const KvShape& shape, int num_pages,
                           int num_slots, int sink_tokens) {
  shape_ = shape;
  num_pages_ = num_pages;
  num_slots_ = num_slots;
  spec_.codec = codec.name();
  spec_.page_tokens = codec.page_tokens();
  spec_.residual_tokens = codec.residual_tokens();
  spec_.needs_pre_rope_keys = codec.needs_pre_rope_keys();
  spec_.sink_tokens = spec_.residual_tokens > 0
                          ? std::max(0, sink_tokens) / spec_.page_tokens * spec_.page_tokens
                          : 0;
  ring_tokens_ = spec_.residual_tokens + spec_.page_tokens;
  layer_page_bytes_ = codec.LayerPageBytes();
  ring_arrays_ = spec_.needs_pre_rope_keys ? 3 : 2;
  ring_layer_elems_ = int64_t{ring_arrays_} * ring_tokens_ * shape.num_kv_heads * shape.head_dim;
  spec_.page_bytes = layer_page_bytes_ * shape.num_layers;
  sink_layer_elems_ = int64_t{2} * spec_.sink_tokens * shape.num_kv_heads * shape.head_dim;
  spec_.slot_bytes = (ring_layer_elems_ + sink_layer_elems_) * sizeof(uint16_t) * shape.num_layers;
  ring_slot_stride_ = static_cast<int64_t>(spec_.slot_bytes / sizeof(uint16_t));
  sink_slot_stride_ = ring_slot_stride_;
  spec_.fixed_bytes = codec.FixedBytes();
  spec_.bytes_per_token = static_cast<double>(spec_.page_bytes) / spec_.page_tokens;
}

absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaKvCache(const KvShape& shape, int num_pages,
                                                            int num_slots) {
  std::unique_ptr<KvCodec> codec = MakeFp16Codec(shape);
  std::unique_ptr<CudaKvCache> c(new CudaKvCache());
  c->InitSpec(*codec, shape, num_pages, num_slots);
  if (absl::Status st = c->Allocate(); !st.ok()) return st;
  return c;
}

absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaKiviKvCache(const KvShape& shape, int bits,
                                                                int num_pages, int num_slots,
                                                                int sink_tokens) {
  if (bits != 2 && bits != 4) return absl::InvalidArgumentError("cuda kivi cache: bits 2 or 4");
  if (absl::Status st = CudaKvCodecSupported("kivi-k2v2", shape.head_dim); !st.ok()) return st;
  std::unique_ptr<KvCodec> codec = MakeKiviCodec(shape, bits);
  std::unique_ptr<CudaKvCache> c(new CudaKvCache());
  c->format_ = KvPageFormat::kKivi;
  c->kivi_bits_ = bits;
  c->InitSpec(*codec, shape, num_pages, num_slots, sink_tokens);
  if (c->spec_.page_tokens != 32) return absl::InternalError("cuda kivi cache: pages of 32");
  if (absl::Status st = c->Allocate(); !st.ok()) return st;
  return c;
}

namespace {

// -pca keys: adds (mean T) to every key centroid of `all` (lambda, then the key books), then
// appends k_transform, the transposes of k_inverse, and the int32 bits of k_dims and of the dim
// map (CudaVecInferConstants).
void AppendPcaConstants(const VecInferCodebooks& cb, int mk, std::vector<float>* all) {
  const int D = cb.shape.head_dim, H = cb.shape.num_kv_heads;
  const size_t heads = static_cast<size_t>(cb.shape.num_layers) * H;
  std::vector<int32_t> ints(cb.k_dims.begin(), cb.k_dims.end());  // then the dim maps (heads, D)
  std::vector<float> inverse_t(heads * D * D), zero(D, 0.0f), shift(D);
  for (size_t at = 0; at < heads; ++at) {
    // the codec's own transform of a zero key: (0 - mean) T, the negated shift.
    PcaTransformKey(cb, static_cast<int>(at / H), static_cast<int>(at % H), zero.data(), shift.data());
    for (float& x : shift) x = -x;
    float* book = all->data() + cb.lambda.size() + at * (static_cast<size_t>(D) << 8);
    const int32_t* dims = cb.k_dims.data() + at * mk;
    for (int m = 0, off = 0; m < mk; off += dims[m], ++m) {
      for (int c = 0; c < 256; ++c) {
        for (int j = 0; j < dims[m]; ++j) book[(static_cast<size_t>(off) << 8) + c * dims[m] + j] += shift[off + j];
      }
      for (int j = 0; j < dims[m]; ++j) ints.push_back(m | j << 8 | dims[m] << 16);
    }
    const float* inv = cb.k_inverse.data() + at * D * D;
    for (int i = 0; i < D; ++i) {
      for (int j = 0; j < D; ++j) inverse_t[at * D * D + i * D + j] = inv[j * D + i];
    }
  }
  all->insert(all->end(), cb.k_transform.begin(), cb.k_transform.end());
  all->insert(all->end(), inverse_t.begin(), inverse_t.end());
  const size_t at = all->size();
  all->resize(at + ints.size());
  std::memcpy(all->data() + at, ints.data(), ints.size() * sizeof(int32_t));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaVecInferKvCache(
    std::shared_ptr<const VecInferCodebooks> cb, int num_pages, int num_slots, int sink_tokens) {
  const KvShape& shape = cb->shape;
  const std::string name = VecInferCodecName(cb->options);
  if (absl::Status st = CudaKvCodecSupported(name, shape.head_dim); !st.ok()) return st;
  std::unique_ptr<KvCodec> codec = MakeVecInferCodec(cb);
  const CudaKeySide ks = *CudaKeySideFor(cb->options, shape.head_dim);  // CudaKvCodecSupported
  const PqSpec k = ks.spec, v = *PqSpecForBits(cb->options.v_bits);
  std::unique_ptr<CudaKvCache> c(new CudaKvCache());
  c->format_ = KvPageFormat::kVecInfer;
  c->InitSpec(*codec, shape, num_pages, num_slots, sink_tokens);
  if (c->spec_.page_tokens != 32) return absl::InternalError("cuda vecinfer cache: pages of 32");
  if (absl::Status st = c->Allocate(); !st.ok()) return st;
  // constants: lambda, k centroids, v centroids, back to back; with -pca keys then the pca
  // arrays (PcaConstants).
  std::vector<float> all(cb->lambda);
  all.insert(all.end(), cb->k_centroids.begin(), cb->k_centroids.end());
  all.insert(all.end(), cb->v_centroids.begin(), cb->v_centroids.end());
  const size_t pca_at = all.size();
  if (cb->options.key_pca) AppendPcaConstants(*cb, ks.codes, &all);
  if (absl::Status st = c->UploadConstants(all); !st.ok()) return st;
  CudaVecInferConstants& vc = c->vecinfer_;
  vc.lambda = c->constants_;
  vc.k_centroids = vc.lambda + cb->lambda.size();
  vc.v_centroids = vc.k_centroids + cb->k_centroids.size();
  if (cb->options.key_pca) {
    const size_t heads = static_cast<size_t>(shape.num_layers) * shape.num_kv_heads, D = shape.head_dim;
    vc.k_transform = c->constants_ + pca_at;
    vc.k_inverse_t = vc.k_transform + heads * D * D;
    vc.k_dims = reinterpret_cast<const int32_t*>(vc.k_inverse_t + heads * D * D);
    vc.k_dim_map = vc.k_dims + heads * ks.codes;
  }
  vc.k_codes = ks.codes;
  vc.k_sub_dim = k.sub_dim;
  vc.v_sub_dim = v.sub_dim;
  vc.k_code_bits = k.code_bits;
  vc.v_code_bits = v.code_bits;
  vc.per_head = cb->options.per_head;
  vc.hadamard = cb->options.hadamard;
  if (cuda::VecInferTakesHalfBooks(shape.head_dim, k.sub_dim, v.sub_dim, k.code_bits, v.code_bits)) {
    // the tensor-core decode kernel copies the value books and builds its lut from the fp16 key books
    // instead of converting / loading the fp32 ones per block.
    const int books = shape.num_layers * (vc.per_head ? shape.num_kv_heads : 1);
    const int64_t n = cuda::VecInferHalfBookElems(books, shape.head_dim);
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&c->half_books_), 2 * n * sizeof(uint16_t));
        e != cudaSuccess) {
      return absl::ResourceExhaustedError(absl::StrCat("cuda kv cache: fp16 books: ", cudaGetErrorString(e)));
    }
    std::string err = cuda::LaunchVecInferHalfBooks(vc.v_centroids, books, shape.head_dim, v.sub_dim, c->half_books_, nullptr);
    if (err.empty() && !cb->options.key_pca) {
      err = cuda::LaunchVecInferHalfBooks(vc.k_centroids, books, shape.head_dim, k.sub_dim, c->half_books_ + n, nullptr);
    }
    if (cudaError_t e = cudaDeviceSynchronize(); err.empty() && e != cudaSuccess) err = cudaGetErrorString(e);
    if (!err.empty()) return absl::InternalError(absl::StrCat("cuda kv cache: fp16 books: ", err));
    vc.v_centroids_f16 = c->half_books_;
    if (!cb->options.key_pca) vc.k_centroids_f16 = c->half_books_ + n;
  }
  return c;
}

absl::Status CudaKvCache::UploadConstants(const std::vector<float>& all) {
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, all.size() * sizeof(float)); e != cudaSuccess) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda kv cache: codebooks: ", cudaGetErrorString(e)));
  }
  constants_ = static_cast<float*>(p);
  if (cudaError_t e = cudaMemcpy(p, all.data(), all.size() * sizeof(float), cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cuda kv cache: codebook upload: ", cudaGetErrorString(e)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaCommVqKvCache(
    std::shared_ptr<const CommVqCodebooks> books, int key_rounds, int value_rounds, int num_pages,
    int num_slots, int sink_tokens) {
  const KvShape& shape = books->shape();
  if (absl::Status st = CudaKvCodecSupported("commvq-2", shape.head_dim); !st.ok()) return st;
  if (absl::Status st = CheckCommVqCodec(shape, *books, key_rounds, value_rounds); !st.ok()) {
    return st;
  }
  std::unique_ptr<KvCodec> codec = MakeCommVqCodec(shape, books, key_rounds, value_rounds);
  std::unique_ptr<CudaKvCache> c(new CudaKvCache());
  c->format_ = KvPageFormat::kCommVq;
  c->InitSpec(*codec, shape, num_pages, num_slots, sink_tokens);
  if (c->spec_.page_tokens != 32) return absl::InternalError("cuda commvq cache: pages of 32");
  if (absl::Status st = c->Allocate(); !st.ok()) return st;
  // constants: the rounds in use of every (layer, head)'s key books, then of the value books,
  // then the rope frequencies.
  const size_t kf = books->key_book_floats(), vf = books->value_book_floats();
  std::vector<float> all;
  all.reserve(size_t(shape.num_layers) * shape.num_kv_heads * (key_rounds * kf + value_rounds * vf) +
              shape.head_dim / 2);
  for (int l = 0; l < shape.num_layers; ++l) {
    for (int h = 0; h < shape.num_kv_heads; ++h) {
      const float* k = books->key_book(l, h, 0);  // rounds of one head are contiguous
      all.insert(all.end(), k, k + key_rounds * kf);
    }
  }
  const size_t value_start = all.size();
  for (int l = 0; l < shape.num_layers; ++l) {
    for (int h = 0; h < shape.num_kv_heads; ++h) {
      const float* v = books->value_book(l, h, 0);
      all.insert(all.end(), v, v + value_rounds * vf);
    }
  }
  const size_t freq_start = all.size();
  for (double f : commvq::RopeFrequencies(shape.head_dim, books->rope_theta())) {
    all.push_back(static_cast<float>(f));
  }
  if (absl::Status st = c->UploadConstants(all); !st.ok()) return st;
  CudaCommVqConstants& cc = c->commvq_;
  cc.key_books = c->constants_;
  cc.value_books = c->constants_ + value_start;
  cc.rope_freqs = c->constants_ + freq_start;
  cc.key_rounds = key_rounds;
  cc.value_rounds = value_rounds;
  cc.rope_theta = books->rope_theta();
  cc.key_head_stride = static_cast<int64_t>(key_rounds * kf);
  cc.value_head_stride = static_cast<int64_t>(value_rounds * vf);
  return c;
}

absl::StatusOr<std::unique_ptr<CudaKvCache>> MakeCudaKvCacheForCodec(
    const std::string& name, const KvShape& shape, const CodebookFile* codebooks, int num_pages,
    int num_slots, int sink_tokens) {
  if (absl::Status st = CudaKvCodecSupported(name, shape.head_dim); !st.ok()) return st;
  if (name == "fp16") return MakeCudaKvCache(shape, num_pages, num_slots);
  if (name == "kivi-k2v2" || name == "kivi-k4v4") {
    return MakeCudaKiviKvCache(shape, name == "kivi-k2v2" ? 2 : 4, num_pages, num_slots,
                               sink_tokens);
  }
  // the cpu factory checks the artifact against the name and shape with its own messages.
  absl::StatusOr<std::unique_ptr<KvCodec>> check = MakeCodec(name, shape, codebooks);
  if (!check.ok()) return check.status();
  if (absl::StartsWith(name, "commvq-")) {
    absl::StatusOr<CommVqOptions> o = CommVqOptionsForName(name, shape);
    if (!o.ok()) return o.status();
    absl::StatusOr<CommVqCodebooks> books =
        CommVqCodebooks::Deserialize(codebooks->blobs.at("commvq"));  // MakeCodec found it
    if (!books.ok()) return books.status();
    return MakeCudaCommVqKvCache(std::make_shared<const CommVqCodebooks>(std::move(*books)),
                                 o->key_rounds, o->value_rounds, num_pages, num_slots,
                                 sink_tokens);
  }
  absl::StatusOr<VecInferOptions> opts = VecInferOptionsForName(name);
  if (!opts.ok()) return opts.status();
  absl::StatusOr<VecInferCodebooks> cb = VecInferCodebooks::FromBlobs(shape, *opts, codebooks->blobs);
  if (!cb.ok()) return cb.status();
  return MakeCudaVecInferKvCache(std::make_shared<const VecInferCodebooks>(std::move(*cb)),
                                 num_pages, num_slots, sink_tokens);
}

absl::StatusOr<std::unique_ptr<KvCache>> MakeCudaKvCacheOf(const std::string& name,
                                                           const KvShape& shape,
                                                           const CodebookFile* codebooks,
                                                           int num_pages, int num_slots,
                                                           int sink_tokens) {
  absl::StatusOr<std::unique_ptr<CudaKvCache>> cache =
      MakeCudaKvCacheForCodec(name, shape, codebooks, num_pages, num_slots, sink_tokens);
  if (!cache.ok()) return cache.status();
  return std::unique_ptr<KvCache>(std::move(*cache));
}

absl::StatusOr<std::unique_ptr<KvCache>> MakeCudaKvCacheOver(
    const std::string& name, const KvShape& shape, const CodebookFile* codebooks,
    std::shared_ptr<const KvMemory> memory, int sink_tokens) {
  absl::StatusOr<std::unique_ptr<CudaKvCache>> cache =
      MakeCudaKvCacheForCodec(name, shape, codebooks, 1, 1, sink_tokens);
  if (!cache.ok()) return cache.status();
  if (absl::Status st = (*cache)->UseMemory(std::move(memory)); !st.ok()) return st;
  return std::unique_ptr<KvCache>(std::move(*cache));
}

absl::StatusOr<std::shared_ptr<KvMemory>> MakeCudaKvMemory(size_t bytes) {
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, bytes > 0 ? bytes : 1); e != cudaSuccess) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda kv memory: ", bytes, " bytes: ", cudaGetErrorString(e)));
  }
  auto m = std::make_shared<KvMemory>();
  m->base = static_cast<uint8_t*>(p);
  m->bytes = bytes;
  m->device = KvDevice::kCuda;
  m->owner = std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
  return m;
}

}  // namespace vqserve
