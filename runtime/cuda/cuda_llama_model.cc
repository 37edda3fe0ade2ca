#include "runtime/cuda/cuda_llama_model.h"

#include <string>

#include "absl/status/status.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/model/model_kernels.h"
#include "kernels/cuda/kv_step/paged_kv_append.h"
#include "kernels/cuda/kv_step/paged_kv_step.h"
#include "kernels/cuda/prefill/prefill_attention.h"
#include "kernels/cuda/prefill/prefill_tiles.h"
#include "kernels/cuda/model/random_fill.h"
#include "kernels/cpu/rope.h"
#include "runtime/cuda/cuda_codec_step.h"
#include "runtime/cuda/cuda_device_array.h"
#include "runtime/cuda/cuda_graph_cache.h"
#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/cuda/cuda_weight_matrix.h"
#include "runtime/model/forward_by_cache.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/model/llama_weights.h"

namespace vqserve {

namespace {

// aborts with `what` when a launcher reported an error (a broken device or a programming error).
void Check(const std::string& err, const char* what) {
  if (!err.empty()) {
    std::fprintf(stderr, "CudaLlamaModel: %s: %s\n", what, err.c_str());
    std::abort();
  }
}
void CheckCuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Check(cudaGetErrorString(e), what);
}
void CheckBlas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) Check(cublasGetStatusString(s), what);
}
void Fail(const char* what) { Check("contract broken", what); }

// whether multi-token steps take the tensor-core prefill kernels: yes unless
// VQSERVE_CUDA_TILED_PREFILL=0.
bool TiledPrefillDefault() {
  const char* env = std::getenv("VQSERVE_CUDA_TILED_PREFILL");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

// key splits of the tensor-core prefill kernel: VQSERVE_CUDA_PREFILL_SPLITS, else 0 (the
// launcher's choice, prefill_tiles.h).
int PrefillSplitsDefault() {
  const char* env = std::getenv("VQSERVE_CUDA_PREFILL_SPLITS");
  return env == nullptr ? 0 : std::clamp(std::atoi(env), 0, cuda::kMaxPrefillSplits);
}

// the most fp16 elements of the scratch that prefill-size products of block weights
// dequantize into (64 MiB; larger matrices go in row tiles).
constexpr int64_t kScratchHalves = int64_t{32} << 20;

// device weights of one transformer block; q/k/v and gate/up stacked as on the cpu.
struct CudaLayer {
  DeviceArray<float> attn_norm, ffn_norm;             // (hidden) fp32
  CudaWeightMatrix wqkv, wo, wgate_up, wdown;  // (out, in), fp16 or ggml blocks
};

class CudaLlamaModel : public LlamaModel {
 public:
  ~CudaLlamaModel() override {
    if (blas_ != nullptr) cublasDestroy(blas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  const ModelConfig& config() const override { return config_; }
  const Tokenizer& tokenizer() const override {
    if (tokenizer_ == nullptr) Fail("this random-weight model has no tokenizer");
    return *tokenizer_;
  }
  void Forward(std::span<const ForwardSeq> batch, std::vector<float>* logits) override;

  // reads every tensor and uploads it (block formats kept as `weights` says); errors name the
  // file and the tensor.
  absl::Status Load(const GgufFile& file, CudaWeights weights);
  // pseudo-random weights of config_'s shape, made on the device: fp16, or for kBlocks the
  // block types of a llama.cpp Q4_K_M file (q4_k; q6_k for the head and, in the layers
  // llama.cpp gives more bits, for attn_v and ffn_down).
  absl::Status InitRandom(uint64_t seed, CudaWeights weights);
  // device bytes of the weights (embeddings, head, blocks, norms).
  int64_t weight_bytes() const;
  void set_use_graphs(bool on) { use_graphs_ = on; }
  void set_tiled_prefill(bool on) { tiled_prefill_ = on; }
  void set_prefill_splits(int splits) { prefill_splits_ = splits; }
  int64_t graph_replays() const { return graphs_.replays(); }

  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;

 private:
  struct StepHost;
  // Forward of a batch whose sequences with new tokens all use one cache: PlanStep on the
  // host, UploadStep, the codec's Plan, then RunLayers (replayed from a graph for decode
  // steps, keyed by GraphKey) and the logits copy.
  void ForwardOneCache(std::span<const ForwardSeq> batch, std::vector<float>* logits);
  StepHost PlanStep(std::span<const ForwardSeq> batch) const;
  void UploadStep(const StepHost& h, cuda::PagedKvStep* step, cuda::DecodeAttentionParams* dp);
  void RunLayers(const StepHost& h, CudaCodecStep& codec, cuda::PagedKvStep step,
                 const cuda::DecodeAttentionParams& dp);
  std::vector<int64_t> GraphKey(const StepHost& h, const CudaCodecStep& codec,
                                const cuda::DecodeAttentionParams& dp) const;
  // the codec step of `format`'s caches (one per format, kept across steps).
  CudaCodecStep& CodecStepFor(KvPageFormat format);
  // the stream and the cublas handle on it, with a fixed workspace (needed for graph capture).
  void InitBlas();
  // y (n, w.rows) fp32 (+)= x (n, w.cols) fp16 · wᵀ, fp32 accumulation.
  void Gemm(const __half* x, const CudaWeightMatrix& w, float* y, int n, bool accumulate);
  // the scratch of prefill-size block-weight products, sized for the largest matrix.
  void ReserveScratch();

  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  int rope_half_ = 0;
  DeviceArray<float> rope_freqs_;
  // the embeddings (vocab, hidden): fp32 for the gather, or as ggml blocks (token_embd_blocks_).
  DeviceArray<float> token_embd_;
  CudaWeightMatrix token_embd_blocks_;
  // (vocab, hidden): output.weight, or the tied embeddings (then head_ may be the blocks above).
  CudaWeightMatrix lm_head_;
  const CudaWeightMatrix* head_ = &lm_head_;
  DeviceArray<__half> scratch_;
  DeviceArray<float> output_norm_;
  std::vector<CudaLayer> layers_;
  // step activations, grown on demand.
  DeviceArray<int32_t> meta_;
  DeviceArray<float> x_, qkv_, att_, gu_, logits_, workspace_;
  DeviceArray<float> kv_pre_;  // commvq: (n, k | v) before rope, what its flushes code
  DeviceArray<int32_t> argmax_;  // (r): the logit rows' argmax, for greedy rows
  std::vector<int32_t> argmax_host_;
  DeviceArray<__half> xn_, att16_, h_;
  std::array<std::unique_ptr<CudaCodecStep>, 4> codec_steps_;  // by KvPageFormat
  DeviceArray<uint8_t> blas_workspace_;
  // decode steps without page flushes replay a captured graph (runtime/cuda/cuda_graph_cache.h).
  bool use_graphs_ = CudaGraphsDefault();
  // multi-token steps on the tensor-core prefill kernels (VQSERVE_CUDA_TILED_PREFILL=0: the
  // reference kernels, one warp per token and head).
  bool tiled_prefill_ = TiledPrefillDefault();
  int prefill_splits_ = PrefillSplitsDefault();
  CudaGraphCache graphs_;
};

void CudaLlamaModel::InitBlas() {
  constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;  // cublas' advice for hopper
  CheckCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  CheckBlas(cublasCreate(&blas_), "cublasCreate");
  CheckBlas(cublasSetStream(blas_, stream_), "cublasSetStream");
  blas_workspace_.Reserve(kBlasWorkspaceBytes);
  CheckBlas(cublasSetWorkspace(blas_, blas_workspace_.data(), kBlasWorkspaceBytes),
            "cublasSetWorkspace");
}

absl::Status CudaLlamaModel::Load(const GgufFile& file, CudaWeights weights) {
  const ModelConfig& c = config_;
  if (c.head_dim != 64 && c.head_dim != 128) {
    return absl::UnimplementedError(absl::StrCat(file.path(), ": the cuda backend needs head_dim "
                                                 "64 or 128, the model has ", c.head_dim));
  }
  InitBlas();
  const int64_t hid = c.hidden_size, qd = int64_t{c.num_heads} * c.head_dim,
                kvd = int64_t{c.num_kv_heads} * c.head_dim, ffn = c.ffn_size;
  const bool blocks = weights == CudaWeights::kBlocks;
  std::vector<float> w;
  // the embeddings: blocks when kept so (also the head when tied), else fp32.
  const GgufTensor* embd = file.FindTensor("token_embd.weight");
  const bool tied = file.FindTensor("output.weight") == nullptr;
  if (blocks && embd != nullptr && KeepsBlocks(*embd, hid)) {
    if (absl::Status s = token_embd_blocks_.Append(file, "token_embd.weight", c.vocab_size, hid,
                                                   true);
        !s.ok()) {
      return s;
    }
    token_embd_blocks_.Upload();
    if (tied) head_ = &token_embd_blocks_;
  } else {
    if (absl::Status s = ReadChecked(file, "token_embd.weight", {hid, c.vocab_size}, &w);
        !s.ok()) {
      return s;
    }
    token_embd_.Upload(w);
  }
  if (head_ == &lm_head_) {
    if (absl::Status s = lm_head_.Append(file, tied ? "token_embd.weight" : "output.weight",
                                         c.vocab_size, hid, blocks);
        !s.ok()) {
      return s;
    }
    lm_head_.Upload();
  }
  if (absl::Status s = ReadChecked(file, "output_norm.weight", {hid}, &w); !s.ok()) return s;
  output_norm_.Upload(w);
  layers_ = std::vector<CudaLayer>(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    CudaLayer& d = layers_[l];
    absl::Status s = ReadChecked(file, p + "attn_norm.weight", {hid}, &w);
    if (s.ok()) d.attn_norm.Upload(w);
    if (s.ok()) s = ReadChecked(file, p + "ffn_norm.weight", {hid}, &w);
    if (s.ok()) d.ffn_norm.Upload(w);
    if (s.ok()) s = d.wqkv.Append(file, p + "attn_q.weight", qd, hid, blocks);
    if (s.ok()) s = d.wqkv.Append(file, p + "attn_k.weight", kvd, hid, blocks);
    if (s.ok()) s = d.wqkv.Append(file, p + "attn_v.weight", kvd, hid, blocks);
    if (s.ok()) s = d.wo.Append(file, p + "attn_output.weight", hid, qd, blocks);
    if (s.ok()) s = d.wgate_up.Append(file, p + "ffn_gate.weight", ffn, hid, blocks);
    if (s.ok()) s = d.wgate_up.Append(file, p + "ffn_up.weight", ffn, hid, blocks);
    if (s.ok()) s = d.wdown.Append(file, p + "ffn_down.weight", hid, ffn, blocks);
    if (!s.ok()) return s;
    for (CudaWeightMatrix* m : {&d.wqkv, &d.wo, &d.wgate_up, &d.wdown}) m->Upload();
  }
  ReserveScratch();
  absl::StatusOr<std::vector<float>> freqs = LlamaRopeFrequencies(c, file);
  if (!freqs.ok()) return freqs.status();
  rope_half_ = static_cast<int>(freqs->size());
  rope_freqs_.Upload(*freqs);
  CheckCuda(cudaDeviceSynchronize(), "weight upload");
  return absl::OkStatus();
}

absl::Status CudaLlamaModel::InitRandom(uint64_t seed, CudaWeights weights) {
  const ModelConfig& c = config_;
  if (c.head_dim != 64 && c.head_dim != 128) {
    return absl::UnimplementedError(
        absl::StrCat("the cuda backend needs head_dim 64 or 128, the config has ", c.head_dim));
  }
  if (c.num_layers <= 0 || c.hidden_size <= 0 || c.ffn_size <= 0 || c.vocab_size <= 0 ||
      c.num_heads <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 ||
      c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return absl::InvalidArgumentError("random cuda model: inconsistent config");
  }
  InitBlas();
  const int64_t hid = c.hidden_size, qd = int64_t{c.num_heads} * c.head_dim,
                kvd = int64_t{c.num_kv_heads} * c.head_dim, ffn = c.ffn_size;
  uint64_t next = seed * 1000003;
  const bool blocks = weights == CudaWeights::kBlocks;
  constexpr int kF16 = static_cast<int>(GgmlType::kF16);
  constexpr int kQ4K = static_cast<int>(GgmlType::kQ4_K), kQ6K = static_cast<int>(GgmlType::kQ6_K);
  // uniform in ±sqrt(3 / fan_in): unit-variance outputs for unit-variance inputs.
  auto fill = [&](CudaWeightMatrix* m, int type, int64_t rows, int64_t cols) {
    m->AppendRandom(blocks ? type : kF16, rows, cols, std::sqrt(3.0f / cols), next++, stream_);
  };
  auto ones = [&](DeviceArray<float>* a) { a->Upload(std::vector<float>(hid, 1.0f)); };
  if (blocks) {
    token_embd_blocks_.AppendRandom(kQ4K, c.vocab_size, hid, 1.0f, next++, stream_);
  } else {
    token_embd_.Reserve(size_t(c.vocab_size) * hid);
    Check(cuda::LaunchFillRandomFloat(token_embd_.data(), int64_t{c.vocab_size} * hid, 1.0f,
                                      0.0f, next++, stream_),
          "random embeddings");
  }
  fill(&lm_head_, kQ6K, c.vocab_size, hid);
  ones(&output_norm_);
  layers_ = std::vector<CudaLayer>(c.num_layers);
  const int nl = c.num_layers;
  for (int l = 0; l < nl; ++l) {
    CudaLayer& d = layers_[l];
    // llama.cpp's use_more_bits: the first and last eighth of the layers and every third.
    const bool more = l < nl / 8 || l >= 7 * nl / 8 || (l - nl / 8) % 3 == 2;
    ones(&d.attn_norm);
    ones(&d.ffn_norm);
    fill(&d.wqkv, kQ4K, qd + kvd, hid);
    fill(&d.wqkv, more ? kQ6K : kQ4K, kvd, hid);
    fill(&d.wo, kQ4K, hid, qd);
    fill(&d.wgate_up, kQ4K, 2 * ffn, hid);
    fill(&d.wdown, more ? kQ6K : kQ4K, hid, ffn);
  }
  ReserveScratch();
  cpu::RopeParams rp;
  rp.rope_dim = c.rope_dim;
  rp.theta = c.rope_theta;
  const std::vector<float> freqs = cpu::RopeFrequencies(rp);
  rope_half_ = static_cast<int>(freqs.size());
  rope_freqs_.Upload(freqs);
  CheckCuda(cudaDeviceSynchronize(), "random weights");
  return absl::OkStatus();
}

void CudaLlamaModel::Gemm(const __half* x, const CudaWeightMatrix& w, float* y, int n,
                          bool accumulate) {
  CudaMatmulContext ctx;
  ctx.stream = stream_;
  ctx.blas = blas_;
  ctx.scratch = scratch_.data();
  ctx.scratch_halves = static_cast<int64_t>(scratch_.size());
  w.Multiply(x, n, y, accumulate, ctx);
}

void CudaLlamaModel::ReserveScratch() {
  int64_t want = head_->ScratchWanted(kScratchHalves);
  for (const CudaLayer& d : layers_) {
    for (const CudaWeightMatrix* m : {&d.wqkv, &d.wo, &d.wgate_up, &d.wdown}) {
      want = std::max(want, m->ScratchWanted(kScratchHalves));
    }
  }
  if (want > 0) scratch_.Reserve(size_t(want));
}

int64_t CudaLlamaModel::weight_bytes() const {
  int64_t b = int64_t(token_embd_.size() * sizeof(float)) + token_embd_blocks_.bytes() +
              lm_head_.bytes() + int64_t(output_norm_.size() * sizeof(float));
  for (const CudaLayer& d : layers_) {
    b += int64_t((d.attn_norm.size() + d.ffn_norm.size()) * sizeof(float)) + d.wqkv.bytes() +
         d.wo.bytes() + d.wgate_up.bytes() + d.wdown.bytes();
  }
  return b;
}

void CudaLlamaModel::Forward(std::span<const ForwardSeq> batch, std::vector<float>* logits) {
  ForwardByCache(batch, config_.vocab_size, logits,
                 [this](std::span<const ForwardSeq> one, std::vector<float>* out) {
                   ForwardOneCache(one, out);
                 });
}

// the host side of a step over one cache: the sequences with new tokens, checked, and the
// metadata uploaded in one copy (ids, tok_seq, tok_pos (n each); slots, num_cached,
// coded_before, coded_after, ring lengths (b each); block tables (b, stride); logit rows (r);
// prefill query tiles).
struct CudaLlamaModel::StepHost {
  CudaKvCache* cache = nullptr;
  CudaStepPlan plan;
  int n = 0, b = 0, r = 0, max_coded = 0, max_total = 0;
  bool all_single = true;
  std::vector<int32_t> ids, tok_seq, tok_pos, rows, slots, before, after, ring_lens, first,
      q_tiles;
  std::vector<int32_t*> row_argmax;  // per logit row: where its argmax goes, or null (the row)
};

CudaLlamaModel::StepHost CudaLlamaModel::PlanStep(std::span<const ForwardSeq> batch) const {
  const ModelConfig& c = config_;
  StepHost h;
  std::vector<const ForwardSeq*> seqs;
  int stride = 1;
  for (const ForwardSeq& s : batch) {
    if (s.tokens.empty()) continue;
    if (s.cache == nullptr || s.cache->device() != KvDevice::kCuda) {
      Fail("every sequence needs a cuda kv cache");
    }
    auto* cc = static_cast<CudaKvCache*>(s.cache);  // the only kCuda cache
    if (h.cache != nullptr && cc != h.cache) Fail("all sequences of a step must share one cache");
    h.cache = cc;
    seqs.push_back(&s);
    h.n += static_cast<int>(s.tokens.size());
    stride = std::max(stride, s.kv.num_blocks);
  }
  if (h.n == 0) return h;
  // block tables padded to a power of two: the stride (baked into a cuda graph's launches) then
  // changes only when a sequence's table doubles.
  stride = static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(stride, 1))));
  h.b = static_cast<int>(seqs.size());
  const KvCacheSpec& spec = h.cache->spec();
  CudaStepPlan& plan = h.plan;
  plan.stride = stride;
  plan.num_new.resize(h.b);
  plan.num_cached.resize(h.b);
  plan.tables.assign(static_cast<size_t>(h.b) * stride, 0);
  h.slots.resize(h.b);
  h.before.resize(h.b);
  h.after.resize(h.b);
  h.ring_lens.resize(h.b);
  h.first.resize(h.b);
  for (int j = 0; j < h.b; ++j) {
    const ForwardSeq& s = *seqs[j];
    const int m = static_cast<int>(s.tokens.size()), total = s.kv.num_cached + m;
    h.first[j] = static_cast<int32_t>(h.ids.size());
    if (s.kv.slot < 0 || s.kv.slot >= h.cache->num_slots()) Fail("slot out of range");
    if (PagesForTokens(spec, total) > s.kv.num_blocks) Fail("block table too short");
    for (int i = 0; i < m; ++i) {
      if (s.tokens[i] < 0 || s.tokens[i] >= c.vocab_size) Fail("token id out of range");
      if (s.want_all_logits || (s.want_logits && i == m - 1)) {
        h.rows.push_back(static_cast<int32_t>(h.ids.size()));
        h.row_argmax.push_back(s.want_all_logits ? nullptr : s.argmax);
      }
      h.ids.push_back(s.tokens[i]);
      h.tok_seq.push_back(j);
      h.tok_pos.push_back(s.kv.num_cached + i);
    }
    for (int i = 0; i < s.kv.num_blocks; ++i) {
      if (s.kv.block_table[i] < 0 || s.kv.block_table[i] >= h.cache->num_pages()) {
        if (i < PagesForTokens(spec, total)) Fail("page id out of range");
      } else {
        plan.tables[static_cast<size_t>(j) * stride + i] = s.kv.block_table[i];
      }
    }
    plan.num_new[j] = m;
    plan.num_cached[j] = s.kv.num_cached;
    h.slots[j] = s.kv.slot;
    h.before[j] = CodedTokens(spec, s.kv.num_cached);
    h.after[j] = CodedTokens(spec, total);
    h.ring_lens[j] = total - h.after[j];
    plan.max_flush = std::max(plan.max_flush, std::min(s.kv.num_cached, h.after[j]) - h.before[j]);
    h.max_coded = std::max(h.max_coded, h.after[j]);
    h.max_total = std::max(h.max_total, total);
    if (m != 1) h.all_single = false;
  }
  h.r = static_cast<int>(h.rows.size());
  // multi-token steps: query tiles for the tensor-core prefill kernels (prefill_tiles.h).
  if (!h.all_single && tiled_prefill_) {
    h.q_tiles = cuda::PlanPrefillTiles(h.first, plan.num_cached, plan.num_new,
                                       spec.residual_tokens, spec.page_tokens);
  }
  return h;
}

// uploads the step's metadata and fills the per-step fields of the kv step and, for decode
// steps, of the decode-attention params (the per-layer ones are set by RunLayers).
void CudaLlamaModel::UploadStep(const StepHost& h, cuda::PagedKvStep* step,
                                cuda::DecodeAttentionParams* dp) {
  const ModelConfig& c = config_;
  const int hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int qd = nh * hd, kvd = nkv * hd, qkvd = qd + 2 * kvd;
  const int n = h.n, b = h.b;
  std::vector<int32_t> meta;
  for (const std::vector<int32_t>* v :
       {&h.ids, &h.tok_seq, &h.tok_pos, &h.slots, &h.plan.num_cached, &h.before, &h.after,
        &h.ring_lens, &h.plan.tables, &h.rows, &h.q_tiles}) {
    meta.insert(meta.end(), v->begin(), v->end());
  }
  meta_.UploadAsync(meta, stream_);
  const int32_t* d = meta_.data();
  const int32_t *d_seq = d + n, *d_pos = d + 2 * n;
  const int32_t *d_slots = d + 3 * n, *d_cached = d_slots + b, *d_before = d_cached + b,
                *d_after = d_before + b, *d_ring = d_after + b, *d_tables = d_ring + b,
                *d_rows = d_tables + h.plan.tables.size();
  const CudaKvCache& cache = *h.cache;
  const KvCacheSpec& spec = cache.spec();
  step->num_tokens = n;
  step->tok_seq = d_seq;
  step->tok_pos = d_pos;
  step->q_tiles = h.q_tiles.empty() ? nullptr : d_rows + h.r;
  step->num_q_tiles = static_cast<int>(h.q_tiles.size() / 2);
  step->batch = b;
  step->slots = d_slots;
  step->num_cached = d_cached;
  step->coded_before = d_before;
  step->coded_after = d_after;
  step->block_tables = d_tables;
  step->block_table_stride = h.plan.stride;
  step->pages = cache.pages();
  step->page_stride = static_cast<int64_t>(spec.page_bytes);
  step->page_tokens = spec.page_tokens;
  step->ring_slot_stride = cache.ring_slot_stride();
  step->ring_tokens = cache.ring_tokens();
  step->num_kv_heads = nkv;
  step->head_dim = hd;
  step->sink_slot_stride = cache.sink_slot_stride();
  step->sink_tokens = spec.sink_tokens;
  if (!h.q_tiles.empty()) {
    // the prefill kernel's key splits (prefill_tiles.h) share the decode steps' workspace: up
    // to 8 splits of 512 tokens, fewer of longer steps (which fill the sms without).
    const int splits = std::clamp(4096 / n, 2, cuda::kMaxPrefillSplits);
    workspace_.Reserve(size_t(cuda::PrefillWorkFloats(n, nh, hd, splits)));
    step->max_seq_len = h.max_total;
    step->prefill_work = workspace_.data();
    step->prefill_work_floats = static_cast<int64_t>(workspace_.size());
    step->prefill_splits = prefill_splits_;
  }
  if (!h.all_single) return;
  workspace_.Reserve(cuda::DecodeWorkspaceFloats(b, nh, hd));
  dp->q = qkv_.data();
  dp->q_batch_stride = qkvd;
  dp->q_head_stride = hd;
  dp->out = att_.data();
  dp->out_batch_stride = qd;
  dp->out_head_stride = hd;
  dp->batch = b;
  dp->num_heads = nh;
  dp->num_kv_heads = nkv;
  dp->head_dim = hd;
  dp->scale = 1.0f / std::sqrt(static_cast<float>(hd));
  dp->pages = cache.pages();
  dp->page_stride = step->page_stride;
  dp->page_tokens = spec.page_tokens;
  dp->block_tables = d_tables;
  dp->block_table_stride = h.plan.stride;
  dp->coded_lens = d_after;
  dp->max_coded_len = h.max_coded;
  dp->res_token_stride = kvd;
  dp->res_head_stride = hd;
  dp->res_slot_stride = cache.ring_slot_stride();
  dp->res_ring_tokens = cache.ring_tokens();
  dp->slots = d_slots;
  dp->res_lens = d_ring;
  dp->workspace = workspace_.data();
}

// every launch of a step: embedding, the blocks (attention through the codec's step), the
// output norm and head for the logit rows.
void CudaLlamaModel::RunLayers(const StepHost& h, CudaCodecStep& codec, cuda::PagedKvStep step,
                               const cuda::DecodeAttentionParams& dp) {
  const ModelConfig& c = config_;
  const int hid = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  const int qd = nh * hd, kvd = nkv * hd, ffn = c.ffn_size, qkvd = qd + 2 * kvd;
  const int n = h.n, r = h.r;
  const CudaKvCache& cache = *h.cache;
  const bool pre_rope = cache.spec().needs_pre_rope_keys;
  const int32_t* d_ids = meta_.data();
  const int32_t* d_pos = step.tok_pos;
  const int32_t* d_rows = step.block_tables + h.plan.tables.size();
  CudaLayerIo io;
  io.step = &step;
  io.qkv = qkv_.data();
  io.qkv_stride = qkvd;
  io.kv_pre = pre_rope ? kv_pre_.data() : nullptr;
  io.num_heads = nh;
  io.att = att_.data();
  io.att_stride = qd;
  io.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  io.decode = h.all_single;
  io.dp = dp;
  if (token_embd_.size() > 0) {
    Check(cuda::LaunchEmbeddingGather(d_ids, token_embd_.data(), x_.data(), n, hid, stream_),
          "embedding");
  } else {
    token_embd_blocks_.GatherRows(d_ids, n, x_.data(), stream_);
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const CudaLayer& w = layers_[l];
    step.layer_offset = static_cast<int64_t>(cache.layer_page_bytes()) * l;
    step.ring_k = cache.ring(l, 0);
    step.ring_v = cache.ring(l, 1);
    step.sink_k = cache.sink(l, 0);
    step.sink_v = cache.sink(l, 1);
    io.dp.layer_offset = step.layer_offset;
    io.dp.res_k = step.ring_k;
    io.dp.res_v = step.ring_v;
    // attention block.
    Check(cuda::LaunchRmsNormHalf(x_.data(), nullptr, w.attn_norm.data(), xn_.data(), n, hid,
                                  c.rms_eps, stream_),
          "attn norm");
    Gemm(xn_.data(), w.wqkv, qkv_.data(), n, false);
    if (pre_rope) {  // k and v before rope (adjacent in a qkv row), for the flushes
      CheckCuda(cudaMemcpy2DAsync(kv_pre_.data(), 2 * kvd * sizeof(float), qkv_.data() + qd,
                                  qkvd * sizeof(float), 2 * kvd * sizeof(float), n,
                                  cudaMemcpyDeviceToDevice, stream_),
                "pre-rope keys");
    }
    // q's nh heads and k's nkv heads are adjacent in a qkv row: one launch rotates both.
    Check(cuda::LaunchRope(qkv_.data(), qkvd, n, nh + nkv, hd, rope_half_, d_pos,
                           rope_freqs_.data(), stream_),
          "rope q, k");
    Check(codec.Layer(cache, l, io, stream_), "kv cache and attention");
    Check(cuda::LaunchFloatToHalf(att_.data(), att16_.data(), int64_t{n} * qd, stream_), "cast");
    Gemm(att16_.data(), w.wo, x_.data(), n, /*accumulate=*/true);
    // feed-forward block.
    Check(cuda::LaunchRmsNormHalf(x_.data(), nullptr, w.ffn_norm.data(), xn_.data(), n, hid,
                                  c.rms_eps, stream_),
          "ffn norm");
    Gemm(xn_.data(), w.wgate_up, gu_.data(), n, false);
    Check(cuda::LaunchSiluMulHalf(gu_.data(), h_.data(), n, ffn, stream_), "silu_mul");
    Gemm(h_.data(), w.wdown, x_.data(), n, /*accumulate=*/true);
  }
  if (r > 0) {
    Check(cuda::LaunchRmsNormHalf(x_.data(), d_rows, output_norm_.data(), xn_.data(), r, hid,
                                  c.rms_eps, stream_),
          "output norm");
    Gemm(xn_.data(), *head_, logits_.data(), r, false);
  }
}

// a decode step's graph key: every host value and pointer baked into its launches. the
// lengths are read on the device, so what max_coded changes is only the decode split count
// (the same in every layer) and a step flushing pages differs only in the flush count.
std::vector<int64_t> CudaLlamaModel::GraphKey(const StepHost& h, const CudaCodecStep& codec,
                                              const cuda::DecodeAttentionParams& dp) const {
  const CudaKvCache& cache = *h.cache;
  const KvCacheSpec& spec = cache.spec();
  const CudaVecInferConstants& vc = cache.vecinfer();
  const CudaCommVqConstants& cq = cache.commvq();
  std::vector<int64_t> key = {h.n, h.b, h.plan.stride, h.r, codec.DecodeSplits(cache, dp),
                              h.plan.max_flush, int64_t(cache.format()), spec.page_tokens,
                              spec.sink_tokens, int64_t(spec.page_bytes),
                              cache.ring_slot_stride(), cache.ring_tokens(),
                              cache.sink_slot_stride(), cache.kivi_bits(), vc.k_sub_dim,
                              vc.k_codes, vc.v_sub_dim, vc.per_head, vc.hadamard, cq.key_rounds,
                              cq.value_rounds, cq.key_head_stride, cq.value_head_stride};
  float theta = cq.rope_theta;  // the bits of the commvq rope base
  int32_t theta_bits = 0;
  std::memcpy(&theta_bits, &theta, sizeof(theta_bits));
  key.push_back(theta_bits);
  for (const void* p : std::initializer_list<const void*>{
           &cache, cache.pages(), cache.ring(0, 0), cache.sink(0, 0), vc.lambda, vc.k_centroids,
           vc.v_centroids, meta_.data(), x_.data(), xn_.data(), qkv_.data(), att_.data(),
           att16_.data(), gu_.data(), h_.data(), workspace_.data(), logits_.data(),
           cq.key_books, cq.value_books, cq.rope_freqs, cache.ring(0, 2), kv_pre_.data()}) {
    key.push_back(reinterpret_cast<intptr_t>(p));
  }
  codec.AppendGraphKey(&key);
  return key;
}

CudaCodecStep& CudaLlamaModel::CodecStepFor(KvPageFormat format) {
  std::unique_ptr<CudaCodecStep>& s = codec_steps_[static_cast<int>(format)];
  if (s == nullptr) s = MakeCudaCodecStep(format);
  return *s;
}

void CudaLlamaModel::ForwardOneCache(std::span<const ForwardSeq> batch,
                                     std::vector<float>* logits) {
  const ModelConfig& c = config_;
  const int hid = c.hidden_size, qd = c.num_heads * c.head_dim;
  const int kvd = c.num_kv_heads * c.head_dim, ffn = c.ffn_size, qkvd = qd + 2 * kvd;
  const StepHost h = PlanStep(batch);
  if (h.n == 0) return;
  const int n = h.n, r = h.r;
  CudaCodecStep& codec = CodecStepFor(h.cache->format());
  x_.Reserve(size_t(n) * hid);
  xn_.Reserve(size_t(std::max(n, r)) * hid);
  qkv_.Reserve(size_t(n) * qkvd);
  att_.Reserve(size_t(n) * qd);
  att16_.Reserve(size_t(n) * qd);
  gu_.Reserve(size_t(n) * 2 * ffn);
  h_.Reserve(size_t(n) * ffn);
  if (h.cache->spec().needs_pre_rope_keys) kv_pre_.Reserve(size_t(n) * 2 * kvd);
  if (r > 0) logits_.Reserve(size_t(r) * c.vocab_size);
  cuda::PagedKvStep step;
  cuda::DecodeAttentionParams dp;
  UploadStep(h, &step, &dp);
  codec.Plan(*h.cache, h.plan, stream_);
  auto launches = [&] { RunLayers(h, codec, step, dp); };
  if (use_graphs_ && h.all_single) {
    Check(graphs_.Run(GraphKey(h, codec, dp), stream_, launches), "cuda graph");
  } else {
    launches();
  }
  // the logit rows back, except those whose argmax is taken here (greedy sampling: 4 bytes a
  // row instead of the vocabulary's floats, 8 MB a step at 16 rows of 128K).
  const size_t vocab = static_cast<size_t>(c.vocab_size);
  int kept = 0;
  for (int i = 0; i < r; ++i) kept += h.row_argmax[i] == nullptr;
  if (kept < r) {
    argmax_.Reserve(size_t(r));
    Check(cuda::LaunchRowArgMax(logits_.data(), r, c.vocab_size, argmax_.data(), stream_),
          "argmax");
    argmax_host_.resize(size_t(r));
    CheckCuda(cudaMemcpyAsync(argmax_host_.data(), argmax_.data(), size_t(r) * sizeof(int32_t),
                              cudaMemcpyDeviceToHost, stream_),
              "argmax copy");
  }
  const size_t base = logits->size();
  logits->resize(base + size_t(kept) * vocab);
  for (int i = 0, at = 0; i < r;) {  // runs of consecutive kept rows, one copy each
    int end = i;
    while (end < r && h.row_argmax[end] == nullptr) ++end;
    if (end > i) {
      CheckCuda(cudaMemcpyAsync(logits->data() + base + size_t(at) * vocab,
                                logits_.data() + size_t(i) * vocab,
                                size_t(end - i) * vocab * sizeof(float), cudaMemcpyDeviceToHost,
                                stream_),
                "logits copy");
      at += end - i;
    }
    i = end + 1;
  }
  CheckCuda(cudaStreamSynchronize(stream_), "forward");
  for (int i = 0; i < r; ++i) {
    if (h.row_argmax[i] != nullptr) *h.row_argmax[i] = argmax_host_[i];
  }
}

}  // namespace

bool CudaDeviceAvailable(std::string* why) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    if (why != nullptr) {
      *why = e != cudaSuccess ? absl::StrCat("no cuda device: ", cudaGetErrorString(e))
                              : "no cuda device on this machine";
    }
    return false;
  }
  return true;
}

bool SetCudaGraphs(LlamaModel& model, bool on) {
  auto* m = dynamic_cast<CudaLlamaModel*>(&model);
  if (m != nullptr) m->set_use_graphs(on);
  return m != nullptr;
}

bool SetCudaTiledPrefill(LlamaModel& model, bool on) {
  auto* m = dynamic_cast<CudaLlamaModel*>(&model);
  if (m != nullptr) m->set_tiled_prefill(on);
  return m != nullptr;
}

bool SetCudaPrefillSplits(LlamaModel& model, int splits) {
  auto* m = dynamic_cast<CudaLlamaModel*>(&model);
  if (m != nullptr) m->set_prefill_splits(std::clamp(splits, 0, cuda::kMaxPrefillSplits));
  return m != nullptr;
}

int64_t CudaGraphReplays(const LlamaModel& model) {
  auto* m = dynamic_cast<const CudaLlamaModel*>(&model);
  return m != nullptr ? m->graph_replays() : 0;
}

int64_t CudaWeightBytes(const LlamaModel& model) {
  auto* m = dynamic_cast<const CudaLlamaModel*>(&model);
  return m != nullptr ? m->weight_bytes() : 0;
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LoadCudaLlamaModel(const std::string& path,
                                                               CudaWeights weights) {
  std::string why;
  if (!CudaDeviceAvailable(&why)) return absl::FailedPreconditionError(why);
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  auto model = std::make_unique<CudaLlamaModel>();
  absl::StatusOr<ModelConfig> config = ModelConfig::FromGguf(**file);
  if (!config.ok()) return config.status();
  model->config_ = *config;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) return tok.status();
  model->tokenizer_ = std::move(*tok);
  if (absl::Status s = model->Load(**file, weights); !s.ok()) return s;
  return std::unique_ptr<LlamaModel>(std::move(model));
}

absl::StatusOr<std::unique_ptr<LlamaModel>> MakeRandomCudaLlamaModel(const ModelConfig& config,
                                                                     uint64_t seed,
                                                                     CudaWeights weights) {
  std::string why;
  if (!CudaDeviceAvailable(&why)) return absl::FailedPreconditionError(why);
  auto model = std::make_unique<CudaLlamaModel>();
  model->config_ = config;
  if (absl::Status s = model->InitRandom(seed, weights); !s.ok()) return s;
  return std::unique_ptr<LlamaModel>(std::move(model));
}

}  // namespace vqserve
