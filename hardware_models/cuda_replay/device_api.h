// The few CUDA runtime calls the replayer makes, behind a plain C++ interface so that the rest
// of the replayer (and fragsim's reader library) compiles with the host compiler. Two
// implementations: cuda_device.cu (the real device) and FakeDevice (--dry-run: the simulator's
// DeviceMemory, so argument parsing, trace loading and output writing run without a GPU).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace fragsim::replay {

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  // 0 on success, else an error code (error_string explains it).
  virtual int malloc(void** p, std::size_t n) = 0;
  virtual int free(void* p) = 0;
  virtual int malloc_async(void** p, std::size_t n, int stream) = 0;
  virtual int free_async(void* p, int stream) = 0;
  virtual int synchronize() = 0;
  virtual int synchronize_stream(int stream) = 0;  // waits for `stream`'s work (a pool sync point)
  virtual int mem_info(std::size_t* free, std::size_t* total) = 0;
  virtual int set_release_threshold(std::uint64_t bytes) = 0;
  virtual std::string error_string(int code) const = 0;
};

// Opens CUDA device `ordinal`; nullptr with *why set when no device is usable.
std::unique_ptr<Device> open_cuda_device(int ordinal, std::string* why);
// A device with `capacity` bytes, 2 MiB pages, instant calls.
std::unique_ptr<Device> open_fake_device(std::uint64_t capacity);

}  // namespace fragsim::replay
