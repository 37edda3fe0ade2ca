#ifndef VQSERVE_RUNTIME_KV_KV_CODEC_H_
#define VQSERVE_RUNTIME_KV_KV_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/kv/kv_cache.h"

namespace vqserve {

// running online-softmax state of one query position, all query heads.
// m: (num_heads) running max, l: (num_heads) running sum of exp, acc: (num_heads, head_dim)
// unnormalized weighted sum of values. start with m = -inf, l = 0, acc = 0.
struct SoftmaxState {
  float* m = nullptr;
  float* l = nullptr;
  float* acc = nullptr;
};

// the math of one kv codec on one layer's slice of a page (page_tokens tokens, all kv heads,
// k and v). pages are laid out as docs/kv_formats.md says. a codec is immutable after
// construction (codebooks fixed) and safe to call from several threads.
class KvCodec {
 public:
  virtual ~KvCodec() = default;
  virtual std::string name() const = 0;
  virtual const KvShape& shape() const = 0;
  virtual int page_tokens() const { return 32; }
  virtual int residual_tokens() const { return 128; }
  virtual bool needs_pre_rope_keys() const { return false; }
  // bytes of one layer's slice of a page.
  virtual size_t LayerPageBytes() const = 0;
  // bytes of codebooks and other constants, all layers.
  virtual size_t FixedBytes() const { return 0; }

  // encodes page_tokens tokens of `layer` starting at position first_pos.
  // k: (page_tokens, num_kv_heads, head_dim), pre-rope when needs_pre_rope_keys() else after
  // rope; v: same shape. dst: LayerPageBytes() bytes.
  virtual void EncodePage(int layer, int first_pos, const float* k, const float* v,
                          uint8_t* dst) const = 0;

  // folds num_tokens coded tokens at positions first_pos, first_pos + 1, ... into `state` for
  // one query position. pages: ceil(num_tokens / page_tokens) pointers to this layer's slices,
  // page j holding positions first_pos + j * page_tokens; first_pos is a multiple of
  // page_tokens. q: (num_heads, head_dim) after rope, at position q_pos. scores are scaled by
  // 1/sqrt(D). reads codes directly through lookup tables; never builds dequantized k/v.
  virtual void AttendPagesFrom(int layer, const uint8_t* const* pages, int first_pos,
                               int num_tokens, const float* q, int q_pos,
                               SoftmaxState* state) const = 0;
  // the same from position 0 (page j holding positions j * page_tokens ...).
  void AttendPages(int layer, const uint8_t* const* pages, int num_tokens, const float* q,
                   int q_pos, SoftmaxState* state) const {
    AttendPagesFrom(layer, pages, 0, num_tokens, q, q_pos, state);
  }

  // reconstructs a page (tests and error measurements only).
  // k_rope, v: (page_tokens, num_kv_heads, head_dim); keys returned after rope.
  virtual void DecodePage(int layer, int first_pos, const uint8_t* src, float* k_rope,
                          float* v) const = 0;
};

// folds fp16-precision keys/values (the residual ring) into `state`: n tokens,
// k, v: (n, num_kv_heads, head_dim) fp32 holding fp16-rounded values.
void AttendDense(const KvShape& shape, const float* q, const float* k, const float* v, int n,
                 SoftmaxState* state);
// out = acc / l per head. out: (num_heads, head_dim).
void FinishSoftmax(const KvShape& shape, const SoftmaxState& state, float* out);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_KV_KV_CODEC_H_
