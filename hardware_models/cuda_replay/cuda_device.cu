// The real device: CUDA runtime calls (cudaMalloc/cudaFree, cudaMallocAsync on the default
// memory pool with one stream per trace stream, cudaMemGetInfo).
#include <cuda_runtime.h>

#include <map>

#include "hardware_models/cuda_replay/device_api.h"

namespace fragsim::replay {

namespace {

class CudaDevice : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess) name_ = prop.name;
  }
  ~CudaDevice() override {
    for (auto& [id, s] : streams_) cudaStreamDestroy(s);
  }
  std::string name() const override { return name_; }
  int malloc(void** p, std::size_t n) override { return static_cast<int>(cudaMalloc(p, n)); }
  int free(void* p) override { return static_cast<int>(cudaFree(p)); }
  int malloc_async(void** p, std::size_t n, int stream) override {
    return static_cast<int>(cudaMallocAsync(p, n, get(stream)));
  }
  int free_async(void* p, int stream) override { return static_cast<int>(cudaFreeAsync(p, get(stream))); }
  int synchronize() override { return static_cast<int>(cudaDeviceSynchronize()); }
  int synchronize_stream(int stream) override { return static_cast<int>(cudaStreamSynchronize(get(stream))); }
  int mem_info(std::size_t* free, std::size_t* total) override { return static_cast<int>(cudaMemGetInfo(free, total)); }
  int set_release_threshold(std::uint64_t bytes) override {
    cudaMemPool_t pool;
    cudaError_t e = cudaDeviceGetDefaultMemPool(&pool, ordinal_);
    if (e != cudaSuccess) return static_cast<int>(e);
    return static_cast<int>(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &bytes));
  }
  std::string error_string(int code) const override { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

 private:
  cudaStream_t get(int id) {
    auto it = streams_.find(id);
    if (it != streams_.end()) return it->second;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return streams_[id] = s;
  }
  int ordinal_;
  std::string name_ = "CUDA device";
  std::map<int, cudaStream_t> streams_;
};

}  // namespace

std::unique_ptr<Device> open_cuda_device(int ordinal, std::string* why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = std::string("no usable CUDA device: ") + cudaGetErrorString(e);
    return nullptr;
  }
  if (ordinal >= count) {
    *why = "no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(count) + " present)";
    return nullptr;
  }
  e = cudaSetDevice(ordinal);
  if (e == cudaSuccess) e = cudaFree(nullptr);  // create the context now, not inside the first timed call
  if (e != cudaSuccess) {
    *why = std::string("cannot use CUDA device: ") + cudaGetErrorString(e);
    return nullptr;
  }
  return std::make_unique<CudaDevice>(ordinal);
}

}  // namespace fragsim::replay
