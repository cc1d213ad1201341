// --dry-run device: the simulator's DeviceMemory (2 MiB pages, capacity as given). It lets the
// replayer's GPU-free parts (arguments, trace loading, outputs) run and be tested anywhere.
#include <unordered_map>

#include "hardware_models/cuda_replay/device_api.h"
#include "hardware_models/device_memory.h"

namespace fragsim::replay {

namespace {

class FakeDevice : public Device {
 public:
  explicit FakeDevice(std::uint64_t capacity) : mem_(spec(capacity), CostModel{}) {}
  std::string name() const override { return "fake device (dry run)"; }
  int malloc(void** p, std::size_t n) override {
    auto g = mem_.allocate(n == 0 ? 1 : n);
    if (!g) return 2;  // cudaErrorMemoryAllocation
    *p = reinterpret_cast<void*>(g.addr().value());
    live_.emplace(*p, std::move(g));
    return 0;
  }
  int free(void* p) override {
    return live_.erase(p) ? 0 : 1;  // cudaErrorInvalidValue for an unknown pointer
  }
  int malloc_async(void** p, std::size_t n, int) override { return malloc(p, n); }
  int free_async(void* p, int) override { return free(p); }
  int synchronize() override { return 0; }
  int synchronize_stream(int) override { return 0; }
  int mem_info(std::size_t* free, std::size_t* total) override {
    *total = mem_.limit();
    *free = mem_.available();
    return 0;
  }
  int set_release_threshold(std::uint64_t) override { return 0; }
  std::string error_string(int code) const override { return code == 2 ? "out of memory" : "error"; }

 private:
  static SpaceSpec spec(std::uint64_t capacity) {
    SpaceSpec s;
    s.capacity = capacity;
    s.granularity = 2 << 20;
    s.alignment = 256;
    return s;
  }
  DeviceMemory mem_;
  std::unordered_map<void*, DeviceMemory::Grant> live_;  // destroyed before mem_
};

}  // namespace

std::unique_ptr<Device> open_fake_device(std::uint64_t capacity) { return std::make_unique<FakeDevice>(capacity); }

}  // namespace fragsim::replay
