#include "runtime/cuda/cuda_codec_step.h"

#include "kernels/cuda/kv_step/paged_kv_append.h"
#include "kernels/cuda/prefill/prefill_attention.h"
#include "runtime/cuda/cuda_coded_step.h"
#include "runtime/cuda/cuda_commvq_step.h"
#include "runtime/cuda/cuda_kivi_step.h"
#include "runtime/cuda/cuda_vecinfer_step.h"

namespace vqserve {
namespace {

// fp16 pages: the ring's oldest page flushed as is, the new tokens appended, then attention.
class Fp16Step : public CudaCodecStep {
 public:
  void Plan(const CudaKvCache&, const CudaStepPlan& plan, cudaStream_t) override {
    max_flush_ = plan.max_flush;
  }
  std::string Layer(const CudaKvCache&, int, const CudaLayerIo& io, cudaStream_t s) override {
    const int64_t qd = int64_t{io.num_heads} * io.step->head_dim;
    const int64_t kvd = int64_t{io.step->num_kv_heads} * io.step->head_dim;
    std::string e = cuda::LaunchPagedKvFlush(*io.step, max_flush_, s);
    if (e.empty()) {
      e = cuda::LaunchPagedKvAppend(*io.step, io.qkv + qd, io.qkv + qd + kvd, io.qkv_stride, s);
    }
    if (!e.empty()) return e;
    if (io.decode) return cuda::LaunchDecodeAttention(KvPageFormat::kFp16, io.dp, s);
    return cuda::LaunchPrefillAttention(*io.step, io.qkv, io.qkv_stride, io.att, io.att_stride,
                                        io.num_heads, io.scale, s);
  }
  int DecodeSplits(const CudaKvCache&,
                   const cuda::DecodeAttentionParams& dp) const override {
    return cuda::ChooseDecodeSplits(KvPageFormat::kFp16, dp);
  }
  void AppendGraphKey(std::vector<int64_t>*) const override {}  // the model keys max_flush

 private:
  int max_flush_ = 0;
};

// the coded formats share the flush plan, sink and gathers of a CudaCodedStep.
class CodedStep : public CudaCodecStep {
 public:
  void Plan(const CudaKvCache& cache, const CudaStepPlan& plan, cudaStream_t s) override {
    coded_.Plan(cache, plan.num_cached, plan.num_new, plan.tables, plan.stride, s);
  }
  void AppendGraphKey(std::vector<int64_t>* key) const override { coded_.AppendGraphKey(key); }

 protected:
  CudaCodedStep coded_;
};

class KiviStep : public CodedStep {
 public:
  std::string Layer(const CudaKvCache& cache, int layer, const CudaLayerIo& io,
                    cudaStream_t s) override {
    return CudaKiviLayer(cache, layer, coded_, *io.step, io.qkv, io.qkv_stride, io.num_heads,
                         io.att, io.att_stride, io.decode, io.dp, s);
  }
  int DecodeSplits(const CudaKvCache& cache,
                   const cuda::DecodeAttentionParams& dp) const override {
    return cuda::ChooseDecodeSplits(KvPageFormat::kKivi, KiviDecodeParams(cache, 0, coded_, dp));
  }
};

class VecInferStep : public CodedStep {
 public:
  std::string Layer(const CudaKvCache& cache, int layer, const CudaLayerIo& io,
                    cudaStream_t s) override {
    return vecinfer_.Layer(cache, layer, coded_, *io.step, io.qkv, io.qkv_stride, io.num_heads,
                           io.att, io.att_stride, io.decode, io.dp, s);
  }
  int DecodeSplits(const CudaKvCache& cache,
                   const cuda::DecodeAttentionParams& dp) const override {
    return cuda::ChooseDecodeSplits(KvPageFormat::kVecInfer,
                                    vecinfer_.DecodeParams(cache, 0, coded_, dp));
  }
  void AppendGraphKey(std::vector<int64_t>* key) const override {
    CodedStep::AppendGraphKey(key);
    key->push_back(reinterpret_cast<intptr_t>(vecinfer_.q_tilde()));
    key->push_back(reinterpret_cast<intptr_t>(vecinfer_.pca_lut()));
  }

 private:
  CudaVecInferStep vecinfer_;
};

class CommVqStep : public CodedStep {
 public:
  std::string Layer(const CudaKvCache& cache, int layer, const CudaLayerIo& io,
                    cudaStream_t s) override {
    return commvq_.Layer(cache, layer, coded_, *io.step, io.qkv, io.qkv_stride, io.kv_pre,
                         io.num_heads, io.att, io.att_stride, io.decode, io.dp, s);
  }
  int DecodeSplits(const CudaKvCache& cache,
                   const cuda::DecodeAttentionParams& dp) const override {
    return cuda::ChooseDecodeSplits(KvPageFormat::kCommVq,
                                    CudaCommVqStep::DecodeParams(cache, 0, coded_, dp));
  }

 private:
  CudaCommVqStep commvq_;
};

}  // namespace

std::unique_ptr<CudaCodecStep> MakeCudaCodecStep(KvPageFormat format) {
  switch (format) {
    case KvPageFormat::kFp16:
      return std::make_unique<Fp16Step>();
    case KvPageFormat::kKivi:
      return std::make_unique<KiviStep>();
    case KvPageFormat::kVecInfer:
      return std::make_unique<VecInferStep>();
    case KvPageFormat::kCommVq:
      return std::make_unique<CommVqStep>();
  }
  return nullptr;
}

}  // namespace vqserve
