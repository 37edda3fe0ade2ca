#include "runtime/cuda/cuda_graph_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vqserve {

CudaGraphCache::~CudaGraphCache() {
  for (Graph& g : graphs_) {
    if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
  }
}

cudaError_t CudaGraphCache::Capture(cudaStream_t stream, const std::function<void()>& launches,
                                    Graph* g) {
  // relaxed: launchers may set function attributes or query the device while capturing.
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) return e;
  launches();
  cudaGraph_t graph = nullptr;
  if (e = cudaStreamEndCapture(stream, &graph); e != cudaSuccess) return e;
  if (g->exec != nullptr) {
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(g->exec, graph, &info) != cudaSuccess) {
      (void)cudaGetLastError();  // another topology: instantiate anew
      cudaGraphExecDestroy(g->exec);
      g->exec = nullptr;
    }
  }
  if (g->exec == nullptr) e = cudaGraphInstantiate(&g->exec, graph, 0);
  cudaGraphDestroy(graph);
  return e;
}

std::string CudaGraphCache::Run(const std::vector<int64_t>& key, cudaStream_t stream,
                                const std::function<void()>& launches) {
  if (broken_) {
    launches();
    return "";
  }
  auto found =
      std::find_if(graphs_.begin(), graphs_.end(), [&](const Graph& g) { return g.key == key; });
  if (found == graphs_.end()) {
    auto seen = std::find(seen_.begin(), seen_.end(), key);
    if (seen == seen_.end()) {  // first sight: eager (it may grow buffers), capture next time
      if (seen_.size() == kMaxGraphs) seen_.erase(seen_.begin());
      seen_.push_back(key);
      launches();
      return "";
    }
    seen_.erase(seen);
    if (graphs_.size() < kMaxGraphs) {
      found = graphs_.emplace(graphs_.end());
    } else {
      found = std::min_element(graphs_.begin(), graphs_.end(), [](const Graph& a, const Graph& b) {
        return a.last_used < b.last_used;
      });
    }
    found->key.clear();
    if (cudaError_t e = Capture(stream, launches, &*found); e != cudaSuccess) {
      std::fprintf(stderr, "CudaGraphCache: capture failed (%s); cuda graphs off\n",
                   cudaGetErrorString(e));
      (void)cudaGetLastError();
      broken_ = true;
      launches();  // nothing captured ran: run the step eagerly
      return "";
    }
    found->key = key;
    ++captures_;
  } else {
    ++replays_;
  }
  found->last_used = ++tick_;
  cudaError_t e = cudaGraphLaunch(found->exec, stream);
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

bool CudaGraphsDefault() {
  const char* env = std::getenv("VQSERVE_CUDA_GRAPHS");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

}  // namespace vqserve
