#ifndef VQSERVE_RUNTIME_CUDA_CUDA_DEVICE_ARRAY_H_
#define VQSERVE_RUNTIME_CUDA_CUDA_DEVICE_ARRAY_H_

// a growable array in cuda device memory.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace vqserve {

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() const { return data_; }
  size_t size() const { return size_; }

  // at least n elements (contents lost when it grows); aborts when device memory runs out.
  void Reserve(size_t n) {
    if (n <= size_) return;
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(T)); e != cudaSuccess) {
      std::fprintf(stderr, "DeviceArray: cudaMalloc of %zu bytes: %s\n", n * sizeof(T),
                   cudaGetErrorString(e));
      std::abort();
    }
    size_ = n;
  }
  // uploads `host` on `stream` (the host buffer may go once this returns), growing to hold it.
  void UploadAsync(const std::vector<T>& host, cudaStream_t stream) {
    Reserve(host.size());
    if (host.empty()) return;
    if (cudaError_t e = cudaMemcpyAsync(data_, host.data(), host.size() * sizeof(T),
                                        cudaMemcpyHostToDevice, stream);
        e != cudaSuccess) {
      std::fprintf(stderr, "DeviceArray: upload: %s\n", cudaGetErrorString(e));
      std::abort();
    }
  }
  // uploads `host` (synchronously), growing to hold it.
  void Upload(const std::vector<T>& host) {
    Reserve(host.size());
    if (host.empty()) return;
    if (cudaError_t e = cudaMemcpy(data_, host.data(), host.size() * sizeof(T),
                                   cudaMemcpyHostToDevice);
        e != cudaSuccess) {
      std::fprintf(stderr, "DeviceArray: upload: %s\n", cudaGetErrorString(e));
      std::abort();
    }
  }
  // the first size() elements, copied back (synchronously).
  std::vector<T> Download() const {
    std::vector<T> host(size_);
    if (size_ == 0) return host;
    if (cudaError_t e = cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost);
        e != cudaSuccess) {
      std::fprintf(stderr, "DeviceArray: download: %s\n", cudaGetErrorString(e));
      std::abort();
    }
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CUDA_CUDA_DEVICE_ARRAY_H_
