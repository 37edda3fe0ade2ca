// the llama forward pass on the cpu: the reference backend (LlamaModel::Load).

#include "runtime/model/llama_model.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#include <thread>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/argmax.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/residual_add.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/silu_mul.h"
#include "runtime/model/llama_weights.h"

namespace vqserve {

namespace {

// fp32 weights of one transformer block; q/k/v and gate/up are stacked into one matrix each.
struct LayerWeights {
  std::vector<float> attn_norm;  // (hidden)
  std::vector<float> wqkv;       // (q_dim + 2 kv_dim, hidden)
  std::vector<float> wo;         // (hidden, q_dim)
  std::vector<float> ffn_norm;   // (hidden)
  std::vector<float> wgate_up;   // (2 ffn, hidden)
  std::vector<float> wdown;      // (hidden, ffn)
  // the same matrices in block formats for decode steps (empty without quantized decode).
  cpu::QuantMatrix qqkv, qo, qgate_up, qdown;
};

// steps of at most this many tokens take the quantized path. every step size takes it, so a
// sequence's logits do not depend on what it was batched with (measured: batched == alone
// exactly, and 251/256 greedy steps equal llama.cpp's against 249/256 with an sgemm prefill).
constexpr int kQuantMaxTokens = 1 << 20;

// the cpu llama forward pass.
class CpuLlamaModel : public LlamaModel {
 public:
  const ModelConfig& config() const override { return config_; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  void Forward(std::span<const ForwardSeq> batch, std::vector<float>* logits) override;

  // reads every tensor; errors name the file and the tensor.
  absl::Status LoadWeights(const GgufFile& file);

  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<float> rope_freqs_;
  std::vector<float> token_embd_;  // (vocab, hidden)
  std::vector<float> output_;      // (vocab, hidden); empty when tied
  std::vector<float> output_norm_;
  std::vector<LayerWeights> layers_;
  cpu::QuantMatrix qoutput_;
  bool quantized_decode_ = true;

 private:
  // activations of the last step, reused between steps.
  std::vector<float> x_, xn_, qkv_, q_, k_, k_pre_, v_, att_, gu_, h_;
  std::vector<int32_t> ids_, pos_;

  // y (n, rows) = x (n, cols) · wᵀ, through the blocks for short steps.
  void Linear(const float* x, const std::vector<float>& w, const cpu::QuantMatrix& qw, float* y,
              int n, int cols, int rows, bool accumulate) const {
    if (quantized_decode_ && n <= kQuantMaxTokens && qw.rows == rows) {
      cpu::QuantMatMul(x, qw, y, n, accumulate);
    } else {
      cpu::MatMul(x, w.data(), y, n, cols, rows, accumulate);
    }
  }
};

// the named tensors stacked by rows in their file's block format when they all share a
// q8_0/q4_0/q4_1 format; otherwise `fp32` (their stacked rows) re-quantized to q8_0.
cpu::QuantMatrix StackQuant(const GgufFile& file, const std::vector<std::string>& names,
                            const std::vector<float>& fp32, int rows, int cols) {
  const GgufTensor* first = file.FindTensor(names[0]);
  bool same = first != nullptr;
  for (const std::string& name : names) {
    const GgufTensor* t = file.FindTensor(name);
    same = same && t != nullptr && t->type == first->type;
  }
  if (same && (first->type == GgmlType::kQ8_0 || first->type == GgmlType::kQ4_0 ||
               first->type == GgmlType::kQ4_1) && cols % 32 == 0) {
    cpu::QuantMatrix m;
    m.format = first->type == GgmlType::kQ8_0   ? cpu::QuantFormat::kQ8_0
               : first->type == GgmlType::kQ4_0 ? cpu::QuantFormat::kQ4_0
                                                : cpu::QuantFormat::kQ4_1;
    m.rows = rows;
    m.cols = cols;
    for (const std::string& name : names) {
      const GgufTensor* t = file.FindTensor(name);
      m.data.insert(m.data.end(), t->data, t->data + t->nbytes);
    }
    if (m.data.size() == m.row_bytes() * rows) return m;
  }
  if (cols % 32 != 0) return cpu::QuantMatrix{};  // rows stay 0: the fp32 path is used
  return cpu::QuantizeQ8_0(fp32.data(), rows, cols);
}

absl::Status CpuLlamaModel::LoadWeights(const GgufFile& file) {
  const ModelConfig& c = config_;
  const int64_t hid = c.hidden_size, qd = int64_t{c.num_heads} * c.head_dim,
                kvd = int64_t{c.num_kv_heads} * c.head_dim, ffn = c.ffn_size;
  if (absl::Status s = ReadChecked(file, "token_embd.weight", {hid, c.vocab_size}, &token_embd_);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadChecked(file, "output_norm.weight", {hid}, &output_norm_); !s.ok()) {
    return s;
  }
  if (file.FindTensor("output.weight") != nullptr) {
    if (absl::Status s = ReadChecked(file, "output.weight", {hid, c.vocab_size}, &output_);
        !s.ok()) {
      return s;
    }
  }
  layers_.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    LayerWeights& w = layers_[l];
    absl::Status s = ReadChecked(file, p + "attn_norm.weight", {hid}, &w.attn_norm);
    if (s.ok()) s = ReadChecked(file, p + "ffn_norm.weight", {hid}, &w.ffn_norm);
    if (s.ok()) {
      s = ReadStacked(file, {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"},
                      {qd, kvd, kvd}, hid, &w.wqkv);
    }
    if (s.ok()) s = ReadChecked(file, p + "attn_output.weight", {qd, hid}, &w.wo);
    if (s.ok()) {
      s = ReadStacked(file, {p + "ffn_gate.weight", p + "ffn_up.weight"}, {ffn, ffn}, hid,
                      &w.wgate_up);
    }
    if (s.ok()) s = ReadChecked(file, p + "ffn_down.weight", {ffn, hid}, &w.wdown);
    if (!s.ok()) return s;
    if (quantized_decode_) {
      w.qqkv = StackQuant(file, {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"},
                          w.wqkv, qd + 2 * kvd, hid);
      w.qo = StackQuant(file, {p + "attn_output.weight"}, w.wo, hid, qd);
      w.qgate_up = StackQuant(file, {p + "ffn_gate.weight", p + "ffn_up.weight"}, w.wgate_up,
                              2 * ffn, hid);
      w.qdown = StackQuant(file, {p + "ffn_down.weight"}, w.wdown, hid, ffn);
    }
  }
  if (quantized_decode_) {
    qoutput_ = output_.empty()
                   ? StackQuant(file, {"token_embd.weight"}, token_embd_, c.vocab_size, hid)
                   : StackQuant(file, {"output.weight"}, output_, c.vocab_size, hid);
  }
  absl::StatusOr<std::vector<float>> freqs = LlamaRopeFrequencies(c, file);
  if (!freqs.ok()) return freqs.status();
  rope_freqs_ = std::move(*freqs);
  return absl::OkStatus();
}

// grows `v` to at least n elements.
void Reserve(std::vector<float>* v, size_t n) {
  if (v->size() < n) v->resize(n);
}

void CpuLlamaModel::Forward(std::span<const ForwardSeq> batch, std::vector<float>* logits) {
  const ModelConfig& c = config_;
  const int hid = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int qd = nh * hd, kvd = nkv * hd, ffn = c.ffn_size, qkvd = qd + 2 * kvd;
  // concatenate the batch's new tokens.
  ids_.clear();
  pos_.clear();
  std::vector<int> offset(batch.size() + 1, 0);
  bool all_single = batch.size() > 1;
  for (size_t b = 0; b < batch.size(); ++b) {
    const ForwardSeq& s = batch[b];
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      if (s.tokens[i] < 0 || s.tokens[i] >= c.vocab_size) {
        std::fprintf(stderr, "LlamaModel::Forward: token id %d out of range\n", s.tokens[i]);
        std::abort();
      }
      ids_.push_back(s.tokens[i]);
      pos_.push_back(s.kv.num_cached + static_cast<int>(i));
    }
    offset[b + 1] = static_cast<int>(ids_.size());
    if (s.tokens.size() != 1) all_single = false;
    if (!s.tokens.empty() && s.cache->device() != KvDevice::kHost) {
      std::fprintf(stderr, "LlamaModel::Forward: the cpu model needs caches in host memory\n");
      std::abort();
    }
  }
  const int n = static_cast<int>(ids_.size());
  if (n == 0) return;
  Reserve(&x_, size_t(n) * hid);
  Reserve(&xn_, size_t(n) * hid);
  Reserve(&qkv_, size_t(n) * qkvd);
  Reserve(&q_, size_t(n) * qd);
  Reserve(&k_, size_t(n) * kvd);
  Reserve(&k_pre_, size_t(n) * kvd);
  Reserve(&v_, size_t(n) * kvd);
  Reserve(&att_, size_t(n) * qd);
  Reserve(&gu_, size_t(n) * 2 * ffn);
  Reserve(&h_, size_t(n) * ffn);

  cpu::EmbeddingLookup(token_embd_.data(), hid, ids_.data(), n, x_.data());
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = layers_[l];
    // attention block.
    cpu::RmsNorm(x_.data(), w.attn_norm.data(), xn_.data(), n, hid, c.rms_eps);
    Linear(xn_.data(), w.wqkv, w.qqkv, qkv_.data(), n, hid, qkvd, false);
    for (int t = 0; t < n; ++t) {
      const float* row = qkv_.data() + size_t(t) * qkvd;
      std::memcpy(q_.data() + size_t(t) * qd, row, sizeof(float) * qd);
      std::memcpy(k_.data() + size_t(t) * kvd, row + qd, sizeof(float) * kvd);
      std::memcpy(v_.data() + size_t(t) * kvd, row + qd + kvd, sizeof(float) * kvd);
    }
    std::memcpy(k_pre_.data(), k_.data(), sizeof(float) * size_t(n) * kvd);
    cpu::ApplyRope(q_.data(), n, nh, hd, pos_.data(), rope_freqs_);
    cpu::ApplyRope(k_.data(), n, nkv, hd, pos_.data(), rope_freqs_);
    auto attend_one = [&](size_t b) {
      const ForwardSeq& s = batch[b];
      const int o = offset[b], m = offset[b + 1] - offset[b];
      if (m == 0) return;
      const float* kpre =
          s.cache->spec().needs_pre_rope_keys ? k_pre_.data() + size_t(o) * kvd : nullptr;
      auto* cache = static_cast<HostKvCache*>(s.cache);  // checked above
      cache->Append(l, s.kv, m, kpre, k_.data() + size_t(o) * kvd, v_.data() + size_t(o) * kvd);
      cache->Attend(l, s.kv, m, q_.data() + size_t(o) * qd, att_.data() + size_t(o) * qd);
    };
    if (all_single) {
      // decode batch: one query per sequence, spread the sequences over the threads.
#pragma omp parallel for schedule(dynamic, 1)
      for (size_t b = 0; b < batch.size(); ++b) attend_one(b);
    } else {
      // prefill: the cache spreads each sequence's queries over the threads.
      for (size_t b = 0; b < batch.size(); ++b) attend_one(b);
    }
    Linear(att_.data(), w.wo, w.qo, x_.data(), n, qd, hid, /*accumulate=*/true);
    // feed-forward block.
    cpu::RmsNorm(x_.data(), w.ffn_norm.data(), xn_.data(), n, hid, c.rms_eps);
    Linear(xn_.data(), w.wgate_up, w.qgate_up, gu_.data(), n, hid, 2 * ffn, false);
    cpu::SiluMul(gu_.data(), h_.data(), n, ffn);
    Linear(h_.data(), w.wdown, w.qdown, x_.data(), n, ffn, hid, /*accumulate=*/true);
  }
  // logits of the requested rows; argmax rows (at the end, in batch order) only reduced.
  std::vector<int> rows, argmax_rows;
  std::vector<int32_t*> argmax_out;
  for (size_t b = 0; b < batch.size(); ++b) {
    const ForwardSeq& s = batch[b];
    if (offset[b + 1] == offset[b]) continue;
    if (s.want_all_logits) {
      for (int t = offset[b]; t < offset[b + 1]; ++t) rows.push_back(t);
    } else if (s.want_logits && s.argmax != nullptr) {
      argmax_rows.push_back(offset[b + 1] - 1);
      argmax_out.push_back(s.argmax);
    } else if (s.want_logits) {
      rows.push_back(offset[b + 1] - 1);
    }
  }
  const int kept = static_cast<int>(rows.size());
  rows.insert(rows.end(), argmax_rows.begin(), argmax_rows.end());
  if (rows.empty()) return;
  const int r = static_cast<int>(rows.size());
  for (int i = 0; i < r; ++i) {
    cpu::RmsNorm(x_.data() + size_t(rows[i]) * hid, output_norm_.data(),
                 xn_.data() + size_t(i) * hid, 1, hid, c.rms_eps);
  }
  const size_t base = logits->size(), vocab = static_cast<size_t>(c.vocab_size);
  logits->resize(base + size_t(r) * vocab);
  const std::vector<float>& out_w = output_.empty() ? token_embd_ : output_;
  Linear(xn_.data(), out_w, qoutput_, logits->data() + base, r, hid, c.vocab_size, false);
  for (int i = kept; i < r; ++i) {
    *argmax_out[i - kept] = static_cast<int32_t>(
        cpu::ArgMax(logits->data() + base + size_t(i) * vocab, c.vocab_size));
  }
  logits->resize(base + size_t(kept) * vocab);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& path,
                                                             const LoadOptions& options) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  auto model = std::make_unique<CpuLlamaModel>();
  absl::StatusOr<ModelConfig> config = ModelConfig::FromGguf(**file);
  if (!config.ok()) return config.status();
  model->config_ = *config;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) return tok.status();
  model->tokenizer_ = std::move(*tok);
  model->quantized_decode_ = options.quantized_decode;
  if (absl::Status s = model->LoadWeights(**file); !s.ok()) return s;
#ifdef _OPENMP
  const int threads = options.num_threads > 0 ? options.num_threads : omp_get_num_procs();
  omp_set_num_threads(threads);
#else  // serial kernels (the tsan build): blas keeps its threads
  const int threads = options.num_threads > 0 ? options.num_threads
                                              : static_cast<int>(std::thread::hardware_concurrency());
#endif
  cpu::SetBlasThreads(threads);
  return std::unique_ptr<LlamaModel>(std::move(model));
}

}  // namespace vqserve
