#include "runtime/cuda/cuda_coded_step.h"

#include <algorithm>

#include "kernels/cuda/kv_step/ring_kv_step.h"

namespace vqserve {

void CudaCodedStep::Plan(const CudaKvCache& cache, const std::vector<int32_t>& num_cached,
                         const std::vector<int32_t>& num_new, const std::vector<int32_t>& tables,
                         int stride, cudaStream_t stream) {
  const KvCacheSpec& spec = cache.spec();
  batch_ = static_cast<int>(num_cached.size());
  sink_tokens_ = spec.sink_tokens;
  page_tokens_ = spec.page_tokens;
  max_coded_after_sink_ = 0;
  sink_writes_ = false;
  std::vector<int32_t> flush, starts(batch_), coded_after_sink(batch_), sink_lens(batch_);
  page_ids_.clear();
  int start = 0;
  for (int j = 0; j < batch_; ++j) {
    starts[j] = start;
    const int before = CodedTokens(spec, num_cached[j]);
    const int after = CodedTokens(spec, num_cached[j] + num_new[j]);
    // as PagedKvCache::FlushPage: a page inside the sink stays fp16 and is never encoded.
    for (int first = std::max(before, sink_tokens_); first < after; first += spec.page_tokens) {
      flush.insert(flush.end(), {j, first, start});
      page_ids_.push_back(tables[static_cast<size_t>(j) * stride + first / spec.page_tokens]);
    }
    sink_writes_ = sink_writes_ || (num_new[j] > 0 && num_cached[j] < sink_tokens_);
    sink_lens[j] = std::min(sink_tokens_, after);
    coded_after_sink[j] = after - sink_lens[j];
    max_coded_after_sink_ = std::max(max_coded_after_sink_, coded_after_sink[j]);
    start += num_new[j];
  }
  flush.insert(flush.end(), starts.begin(), starts.end());
  flush.insert(flush.end(), coded_after_sink.begin(), coded_after_sink.end());
  flush.insert(flush.end(), sink_lens.begin(), sink_lens.end());
  flush.insert(flush.end(), page_ids_.begin(), page_ids_.end());
  meta_.UploadAsync(flush, stream);
  page_floats_ = static_cast<size_t>(spec.page_tokens) * cache.shape().num_kv_heads *
                 cache.shape().head_dim;
  stage_k_.Reserve(page_floats_ * std::max<size_t>(page_ids_.size(), 1));
  stage_v_.Reserve(page_floats_ * std::max<size_t>(page_ids_.size(), 1));
}

std::string CudaCodedStep::SinkAndGather(const cuda::PagedKvStep& step, const float* k,
                                         const float* v, int64_t kv_stride,
                                         cudaStream_t stream) const {
  std::string err = SinkAppend(step, k, v, kv_stride, stream);
  if (!err.empty()) return err;
  return Gather(step, k, v, kv_stride, stream);
}

std::string CudaCodedStep::SinkAppend(const cuda::PagedKvStep& step, const float* k,
                                      const float* v, int64_t kv_stride,
                                      cudaStream_t stream) const {
  if (!sink_writes_) return "";  // no new token lands in the sink: no launch
  return cuda::LaunchSinkAppend(step, k, v, kv_stride, stream);
}

std::string CudaCodedStep::Gather(const cuda::PagedKvStep& step, const float* k, const float* v,
                                  int64_t kv_stride, cudaStream_t stream) const {
  return cuda::LaunchGatherFlushPages(step, meta_.data(), flush_count(), k, v, kv_stride,
                                      stage_k_.data(), stage_v_.data(), stream);
}

void CudaCodedStep::SetDecodeSink(const CudaKvCache& cache, int layer,
                                  cuda::DecodeAttentionParams* dp) const {
  if (sink_tokens_ <= 0) return;
  const int32_t* d = meta_.data() + 3 * flush_count() + batch_;
  dp->coded_lens = d;
  dp->sink_lens = d + batch_;
  dp->max_coded_len = max_coded_after_sink_;
  dp->block_tables += sink_tokens_ / page_tokens_;
  dp->sink_k = cache.sink(layer, 0);
  dp->sink_v = cache.sink(layer, 1);
  dp->sink_slot_stride = cache.sink_slot_stride();
}

void CudaCodedStep::AppendGraphKey(std::vector<int64_t>* key) const {
  key->insert(key->end(), {batch_, sink_tokens_, page_tokens_, int64_t{sink_writes_}, flush_count(),
                           reinterpret_cast<intptr_t>(meta_.data()),
                           reinterpret_cast<intptr_t>(stage_k_.data()),
                           reinterpret_cast<intptr_t>(stage_v_.data())});
}

}  // namespace vqserve
