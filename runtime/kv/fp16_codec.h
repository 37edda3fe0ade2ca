#ifndef VQSERVE_RUNTIME_KV_FP16_CODEC_H_
#define VQSERVE_RUNTIME_KV_FP16_CODEC_H_

#include <memory>

#include "runtime/kv/kv_codec.h"

namespace vqserve {

// the uncompressed baseline: pages hold K[H][P][D] then V[H][P][D] in fp16 (keys after rope),
// no residual window.
class Fp16Codec : public KvCodec {
 public:
  explicit Fp16Codec(const KvShape& shape, int page_tokens = 32);
  std::string name() const override { return "fp16"; }
  const KvShape& shape() const override { return shape_; }
  int page_tokens() const override { return page_tokens_; }
  int residual_tokens() const override { return 0; }
  size_t LayerPageBytes() const override;
  void EncodePage(int layer, int first_pos, const float* k, const float* v,
                  uint8_t* dst) const override;
  void AttendPagesFrom(int layer, const uint8_t* const* pages, int first_pos, int num_tokens,
                       const float* q, int q_pos, SoftmaxState* state) const override;
  void DecodePage(int layer, int first_pos, const uint8_t* src, float* k_rope,
                  float* v) const override;

 private:
  KvShape shape_;
  int page_tokens_;
};

// the fp16 codec for `shape`.
std::unique_ptr<KvCodec> MakeFp16Codec(const KvShape& shape);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_FP16_CODEC_H_
