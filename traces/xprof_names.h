// Names for the buffers of a JAX capture (docs/importers.md, "Buffer names").
//
// JAX's allocator events carry no op name (TensorFlow's carry tf_op), but the capture says where
// each allocator call was made — the host thread's spans around it — and embeds every compiled
// module with its buffer assignment:
//   call site  the spans around a MemoryAllocation on its line: PjitFunction(NAME) names the jitted
//              function; a span inside an execution (…Execute…) allocates the executable's outputs
//              and temp; one inside a host-to-device transfer (DevicePut, BufferFromHostBuffer,
//              LinearizeHostBufferInto) an argument. A call on another thread (TPU's
//              py_xla_execute) is linked to its function through the spans' flow ids (_p → _c).
//   module     for each BufferAllocation of the function's modules that the runtime allocates
//              (entry parameters, outputs, temp; not constants nor thread-local ones): its size,
//              role, and the instruction defining its (largest) logical buffer — name, shape,
//              op_name and source line from the instruction's metadata.
// A buffer's name is the allocation of its function's modules whose size is its requested size
// and whose role fits the call site; a buffer that none fits is named for why
// ("(unnamed: …)").
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/event.h"

namespace fragsim {
namespace xprof {
class XSpace;
class XPlane;
}  // namespace xprof

// Where an allocator call was made.
struct CallSite {
  std::string function;   // the jitted function (PjitFunction(NAME) → NAME); empty: none
  bool transfer = false;  // inside a host-to-device transfer
  bool execute = false;   // inside an executable's execution
  std::string innermost;  // the innermost span around it (for the reason a buffer has no name)
};

// The call sites of one host plane's events, by (line index, event index).
class CallSites {
 public:
  explicit CallSites(const xprof::XPlane& plane);
  const CallSite* at(int line, int event) const;

 private:
  std::map<std::pair<int, int>, CallSite> sites_;  // only MemoryAllocation events
};

struct BufferName {
  std::string text;                  // what reports show
  Dtype dtype = Dtype::kNone;        // when the buffer is one array of exactly its size
  std::vector<std::uint64_t> shape;  //   …and its shape
  bool named = false;                // false: text says why there is no name
};

class BufferNamer {
 public:
  BufferNamer();
  ~BufferNamer();
  // The modules a host's capture embeds.
  void add_modules(const xprof::XSpace& space);
  // The name of a buffer of `requested` bytes allocated at `site`.
  [[nodiscard]] BufferName name(std::uint64_t requested, const CallSite& site) const;
  size_t modules() const;
  // How many of those modules are named as jax.jit names what it lowers: jit_NAME.
  size_t jit_modules() const;

 private:
  struct Module;
  std::vector<std::unique_ptr<Module>> modules_;
};

}  // namespace fragsim
