#include "traces/jax_memory_profile.h"

#include <fmt/format.h>
#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <map>

#include "profile.pb.h"
#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/base/text.h"
#include "traces/proto_scan.h"
#include "traces/stack_table.h"

namespace fragsim {

namespace {

constexpr std::uint64_t kMaxProfileBytes = std::uint64_t{1} << 31;  // protobuf parses at most 2 GiB

// A device as jaxlib names it (PjRtDevice::DebugString): its ordinal (the name's last number before
// any "(...)"), and whether it is a CPU (its buffers are host memory). False when it names none.
bool device_of(std::string_view name, std::uint32_t* ordinal, bool* cpu) {
  std::string_view head = name.substr(0, name.find('('));
  size_t end = head.size();
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(head[begin - 1]))) --begin;
  if (begin == end || end - begin > 9) return false;
  *ordinal = static_cast<std::uint32_t>(std::stoul(std::string(head.substr(begin, end - begin))));
  std::string lower(head);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  *cpu = lower.find("cpu") != std::string::npos;
  return true;
}

// The innermost frame outside JAX's own code ("train.py:42 loss"), else the innermost frame.
std::string name_of(const std::vector<std::string>& frames) {
  for (const auto& f : frames) {
    if (f.find("/jax/") != std::string::npos || f.find("/jaxlib/") != std::string::npos || f.front() == '<') continue;
    auto slash = f.rfind('/', f.find(':'));
    return slash == std::string::npos ? f : f.substr(slash + 1);
  }
  return frames.empty() ? std::string() : frames.front();
}

class MemoryProfileReader : public TraceReader {
 public:
  MemoryProfileReader(const std::string& path, const ReaderOptions& opt) : TraceReader(path, opt) {
    GOOGLE_PROTOBUF_VERIFY_VERSION;
    google::protobuf::SetLogHandler(nullptr);  // a parse failure is one input error, not a log line
    const std::uint64_t input = input_bytes(path);
    LimitCounter objects(Limit::kObjects, path, input), strings(Limit::kStrings, path, input);
    std::string bytes = read_input(path, kMaxProfileBytes);
    count_proto_objects(bytes, pprof_schema(), 0, objects);
    pprof::Profile p;
    if (!p.ParseFromString(bytes)) bad("not a pprof profile: the protobuf does not parse (corrupt or truncated?)");
    bytes.clear();
    convert(p, objects, strings);
  }

 protected:
  bool read_raw(Event& ev) override {
    if (next_ >= events_.size()) return false;
    const Buffer& b = events_[next_];
    if (stacks_.define_before_use(b.stack, b.line, ev)) return true;
    ++next_;
    ev.op = Op::kAlloc;
    ev.line = b.line;
    ev.id = AllocId(next_ - 1);
    ev.size = b.size;
    ev.device = b.device;
    ev.present = key::kId | key::kSize | key::kDevice | key::kPreTrace;
    if (b.host) ev.space = Space::kHost, ev.present |= key::kSpace;
    if (b.stack) ev.stack = b.stack, ev.present |= key::kStack;
    if (!b.name.empty()) ev.name = b.name, ev.present |= key::kName;
    return true;
  }

 private:
  struct Buffer {
    Bytes size = 0;
    std::uint32_t device = 0;
    bool host = false;
    std::uint64_t stack = 0, line = 0;  // line: the sample's position, from 1 (messages)
    std::string name;
  };
  [[noreturn]] void bad(const std::string& what) const { throw InputError(path_, 0, what); }

  static const std::vector<ProtoType>& pprof_schema() {
    // Profile, ValueType, Sample, Label, Location, Line, Function (traces/proto/profile.proto).
    static const std::vector<ProtoType> kSchema = {
        {{{1, 1}, {2, 2}, {4, 4}, {5, 6}}, {}},  // 0 Profile: sample_type, sample, location, function
        {{}, {}},                                // 1 ValueType
        {{{3, 3}}, {1, 2}},                      // 2 Sample: label; location_id, value
        {{}, {}},                                // 3 Label
        {{{4, 5}}, {}},                          // 4 Location: line
        {{}, {}},                                // 5 Line
        {{}, {}},                                // 6 Function
    };
    return kSchema;
  }

  void convert(const pprof::Profile& p, LimitCounter& objects, LimitCounter& strings) {
    auto str = [&](std::int64_t i) -> std::string {
      if (i < 0 || i >= p.string_table_size()) bad(fmt::format("string_table: index {} out of range", i));
      strings.spend(p.string_table(static_cast<int>(i)).size());
      return sanitize_utf8(p.string_table(static_cast<int>(i)));
    };
    // Which value is the bytes, which the count (JAX: ("allocations", "count"), ("space", "bytes")).
    int bytes_at = -1, count_at = -1;
    for (int i = 0; i < p.sample_type_size(); ++i) {
      const std::string type = str(p.sample_type(i).type()), unit = str(p.sample_type(i).unit());
      if (type == "space" && unit == "bytes") bytes_at = i;
      if (type == "allocations" && unit == "count") count_at = i;
    }
    if (bytes_at < 0)
      bad("not a JAX device memory profile: no (\"space\", \"bytes\") sample type "
          "(jax.profiler.save_device_memory_profile writes one)");
    std::map<std::uint64_t, std::pair<std::string, std::string>> fn;  // id → (file, name)
    for (const auto& f : p.function()) fn[f.id()] = {str(f.filename()), str(f.name())};
    std::map<std::uint64_t, std::vector<std::string>> locations;  // id → frames, innermost first
    for (const auto& l : p.location()) {
      std::vector<std::string> frames;
      for (const auto& line : l.line()) {
        auto it = fn.find(line.function_id());
        if (it == fn.end()) bad(fmt::format("location {}: function {} is not defined", l.id(), line.function_id()));
        frames.push_back(fmt::format("{}:{} {}", it->second.first, line.line(), it->second.second));
      }
      locations[l.id()] = std::move(frames);
    }
    std::map<std::vector<std::string>, std::uint64_t> stack_ids;
    std::map<std::uint32_t, std::pair<std::uint64_t, Bytes>> per_device;  // buffers, bytes
    std::uint64_t executables = 0, line = 0;
    Bytes code = 0;
    for (const auto& s : p.sample()) {
      ++line;
      if (bytes_at >= s.value_size()) bad(fmt::format("sample {}: no bytes value", line));
      const std::int64_t total = s.value(bytes_at);
      const std::int64_t count = count_at >= 0 && count_at < s.value_size() ? s.value(count_at) : 1;
      if (total < 0 || count <= 0 || total % count != 0)
        bad(fmt::format("sample {}: {} bytes in {} buffers is no whole size", line, total, count));
      std::string kind, device;
      for (const auto& l : s.label()) {
        const std::string k = str(l.key());
        if (k == "kind") kind = str(l.str());
        if (k == "device") device = str(l.str());
      }
      if (kind == "executable" || device.empty()) {  // generated code, on no device
        executables += static_cast<std::uint64_t>(count);
        code += static_cast<Bytes>(total);
        continue;
      }
      Buffer b;
      if (!device_of(device, &b.device, &b.host))
        bad(fmt::format("sample {}: device '{}' names no ordinal", line, device));
      b.size = static_cast<Bytes>(total / count);
      b.line = line;
      std::vector<std::string> frames;
      for (auto id : s.location_id()) {
        auto it = locations.find(id);
        if (it == locations.end()) bad(fmt::format("sample {}: location {} is not defined", line, id));
        frames.insert(frames.end(), it->second.begin(), it->second.end());
      }
      if (!frames.empty()) {
        auto [it, fresh] = stack_ids.try_emplace(frames, stacks_.next_id());
        if (fresh) stacks_.add(frames);
        b.stack = it->second;
        b.name = name_of(frames);
      }
      auto& d = per_device[b.device];
      d.first += static_cast<std::uint64_t>(count);
      d.second += static_cast<Bytes>(total);
      objects.spend(2 * static_cast<std::uint64_t>(count));
      for (std::int64_t k = 0; k < count; ++k) events_.push_back(b);
    }
    // Largest first: placed as state, in the order a best fit would be least fragmented by.
    std::stable_sort(events_.begin(), events_.end(), [](const Buffer& a, const Buffer& b) {
      return a.device != b.device ? a.device < b.device : a.size > b.size;
    });
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& [d, v] : per_device) devices.push_back({{"device", d}, {"buffers", v.first}, {"bytes", v.second}});
    nlohmann::json h = {
        {"fragsim_trace", 1},
        {"source", "jax-memory-profile"},
        {"state_only", true},
        {"device_sizes", true},
        {"jax_memory_profile", {{"devices", devices}, {"executables", executables}, {"executable_bytes", code}}}};
    set_header(h);
  }

  std::vector<Buffer> events_;
  StackTable stacks_;
  size_t next_ = 0;
};

}  // namespace

bool is_jax_memory_profile_path(const std::string& path) {
  return ends_with(path, ".prof") || ends_with(path, ".prof.gz");
}

std::unique_ptr<TraceReader> make_jax_memory_profile_reader(const std::string& path, const ReaderOptions& opt) {
  return std::make_unique<MemoryProfileReader>(path, opt);
}

}  // namespace fragsim
