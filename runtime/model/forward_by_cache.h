#ifndef VQSERVE_RUNTIME_MODEL_FORWARD_BY_CACHE_H_
#define VQSERVE_RUNTIME_MODEL_FORWARD_BY_CACHE_H_

// a model step whose sequences use several kv caches (one pool per codec) as one sub-step per
// cache, for runtimes whose step takes one cache (the cuda model).

#include <functional>
#include <span>
#include <vector>

#include "runtime/model/llama_model.h"

namespace vqserve {

// runs `batch` as one call of `one_cache` per kv cache its sequences with new tokens use (all of
// `batch` at once when that is at most one cache) and appends the logit rows (`vocab_size`
// floats each) to *logits in batch order, as one LlamaModel::Forward over the batch would.
// one_cache(sub, out) appends the rows of `sub` to *out.
void ForwardByCache(
    std::span<const ForwardSeq> batch, int vocab_size, std::vector<float>* logits,
    const std::function<void(std::span<const ForwardSeq>, std::vector<float>*)>& one_cache);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_MODEL_FORWARD_BY_CACHE_H_
