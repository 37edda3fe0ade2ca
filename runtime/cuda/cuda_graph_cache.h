#ifndef VQSERVE_RUNTIME_CUDA_CUDA_GRAPH_CACHE_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_GRAPH_CACHE_H_

// replays captured cuda graphs of a model step's launches. a step is described by a key: every host
// value and device pointer its launches bake in (sizes, split counts, buffer addresses, cache
// identity). a key that ran eagerly on one of the last few steps is captured and instantiated (or
// the least recently used executable graph updated in place); a key already captured replays its
// graph; any other key runs eagerly. so a step that grows a buffer runs eagerly and changes the key
// of the next one, and a capture never allocates. up to kMaxGraphs keys are held (one per kv cache
// a step mixes, say). the launches must only enqueue work on the stream: no host syncs, no copies
// from pageable host memory (upload metadata before Run).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vqserve {

class CudaGraphCache {
 public:
  CudaGraphCache() = default;
  ~CudaGraphCache();
  CudaGraphCache(const CudaGraphCache&) = delete;
  CudaGraphCache& operator=(const CudaGraphCache&) = delete;

  // enqueues `launches` on `stream` for a step of `key`: replayed, captured then launched, or
  // run eagerly (see above). empty string on success; after a failed capture the cache turns
  // itself off (the step is then run eagerly) and says why once on stderr.
  std::string Run(const std::vector<int64_t>& key, cudaStream_t stream,
                  const std::function<void()>& launches);

  int64_t replays() const { return replays_; }
  int64_t captures() const { return captures_; }

 private:
  static constexpr size_t kMaxGraphs = 4;
  struct Graph {
    std::vector<int64_t> key;
    cudaGraphExec_t exec = nullptr;
    int64_t last_used = 0;
  };
  // captures `launches` into `g` (updated in place when it has an executable graph).
  cudaError_t Capture(cudaStream_t stream, const std::function<void()>& launches, Graph* g);

  std::vector<Graph> graphs_;
  std::vector<std::vector<int64_t>> seen_;  // keys of the last eager steps, oldest first
  bool broken_ = false;
  int64_t replays_ = 0, captures_ = 0, tick_ = 0;
};

// true unless the environment sets VQSERVE_CUDA_GRAPHS=0: the default of new cuda models.
bool CudaGraphsDefault();

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_GRAPH_CACHE_H_
