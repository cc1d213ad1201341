#include "traces/xprof_names.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

#include "sim/base/error.h"
#include "sim/base/text.h"
#include "traces/hlo_util.h"
#include "xplane.pb.h"

namespace fragsim {

namespace {

bool contains(std::string_view s, std::string_view x) { return s.find(x) != std::string_view::npos; }

// "PjitFunction(dot)" → "dot".
std::string jitted_function(const std::string& span) {
  static constexpr std::string_view kPjit = "PjitFunction(";
  if (span.rfind(kPjit, 0) != 0 || span.back() != ')') return {};
  return span.substr(kPjit.size(), span.size() - kPjit.size() - 1);
}
bool is_transfer(std::string_view span) {
  return contains(span, "BufferFromHostBuffer") || contains(span, "DevicePut") ||
         contains(span, "LinearizeHostBufferInto") || contains(span, "TransferToDevice");
}
bool is_execute(std::string_view span) { return contains(span, "Execute"); }

std::string shape_text(Dtype dt, const std::vector<std::uint64_t>& dims) {
  return fmt::format("{}[{}]", dt == Dtype::kNone ? "?" : std::string(dtype_name(dt)), fmt::join(dims, ","));
}

}  // namespace

CallSites::CallSites(const xprof::XPlane& plane) {
  auto name_of = [&](const xprof::XEvent& e) {
    auto it = plane.event_metadata().find(e.metadata_id());
    return it == plane.event_metadata().end() ? std::string() : sanitize_utf8(it->second.name());
  };
  std::int64_t producer_stat = -1, consumer_stat = -1;
  for (const auto& [id, sm] : plane.stat_metadata()) {
    if (sm.name() == "_p") producer_stat = id;
    if (sm.name() == "_c") consumer_stat = id;
  }
  auto flow = [](const xprof::XEvent& e, std::int64_t stat) -> std::optional<std::uint64_t> {
    if (stat < 0) return std::nullopt;
    for (const auto& s : e.stats())
      if (s.metadata_id() == stat) {
        if (s.has_uint64_value()) return s.uint64_value();
        if (s.has_int64_value()) return static_cast<std::uint64_t>(s.int64_value());
      }
    return std::nullopt;
  };
  // Spans nest on a line: ordered by start (the longer first), the ones still open around an
  // event are those whose end is beyond its start.
  auto walk = [&](const std::function<void(int, int, const std::vector<int>&)>& each) {
    for (int l = 0; l < plane.lines_size(); ++l) {
      const auto& line = plane.lines(l);
      std::vector<int> order(static_cast<size_t>(line.events_size()));
      for (int i = 0; i < line.events_size(); ++i) order[static_cast<size_t>(i)] = i;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        const auto &x = line.events(a), &y = line.events(b);
        return x.offset_ps() != y.offset_ps() ? x.offset_ps() < y.offset_ps() : x.duration_ps() > y.duration_ps();
      });
      std::vector<int> open;
      for (int i : order) {
        const auto& e = line.events(i);
        while (!open.empty()) {
          const auto& o = line.events(open.back());
          if (o.offset_ps() + o.duration_ps() > e.offset_ps()) break;
          open.pop_back();
        }
        each(l, i, open);
        if (e.duration_ps() > 0) open.push_back(i);
      }
    }
  };
  // The jitted function around each producer span (its flow id), then every call site.
  std::map<std::uint64_t, std::string> flow_function;
  auto function_around = [&](int l, const std::vector<int>& open, const std::map<std::uint64_t, std::string>* flows) {
    std::string f;
    for (int s : open) {
      const auto& e = plane.lines(l).events(s);
      if (std::string j = jitted_function(name_of(e)); !j.empty()) f = j;
      if (flows && f.empty())
        if (auto c = flow(e, consumer_stat))
          if (auto it = flows->find(*c); it != flows->end()) f = it->second;
    }
    return f;
  };
  walk([&](int l, int i, const std::vector<int>& open) {
    if (auto p = flow(plane.lines(l).events(i), producer_stat)) {
      std::string f = function_around(l, open, nullptr);
      if (!f.empty()) flow_function[*p] = f;
    }
  });
  walk([&](int l, int i, const std::vector<int>& open) {
    if (name_of(plane.lines(l).events(i)) != "MemoryAllocation") return;
    CallSite site;
    site.function = function_around(l, open, &flow_function);
    for (int s : open) {
      std::string n = name_of(plane.lines(l).events(s));
      site.transfer = site.transfer || is_transfer(n);
      site.execute = site.execute || is_execute(n);
      if (!n.empty() && n.front() != '$') site.innermost = n;  // '$' spans are Python frames
    }
    sites_[{l, i}] = std::move(site);
  });
}

const CallSite* CallSites::at(int line, int event) const {
  auto it = sites_.find({line, event});
  return it == sites_.end() ? nullptr : &it->second;
}

// A device allocation a module's executions make, as reports name it.
struct BufferNamer::Module {
  std::string name;      // as the capture names it: "jit_dot(79)"
  std::string function;  // the module's own name: "jit_dot"
  struct Alloc {
    std::uint64_t size = 0;
    enum Role { kParameter, kOutput, kTemp } role = kTemp;
    std::string text;
    Dtype dtype = Dtype::kNone;
    std::vector<std::uint64_t> shape;  // when one array of exactly the allocation's size
  };
  std::vector<Alloc> allocs;
};

BufferNamer::BufferNamer() = default;
BufferNamer::~BufferNamer() = default;
size_t BufferNamer::modules() const { return modules_.size(); }
size_t BufferNamer::jit_modules() const {
  return static_cast<size_t>(
      std::count_if(modules_.begin(), modules_.end(), [](const auto& m) { return m->function.rfind("jit_", 0) == 0; }));
}

void BufferNamer::add_modules(const xprof::XSpace& space) {
  for (auto& [name, proto] : capture_modules(space)) {
    auto m = std::make_unique<Module>();
    m->name = name;
    m->function = sanitize_utf8(proto.hlo_module().name());
    std::map<std::int64_t, const hlo::HloInstructionProto*> instr;
    for (const auto& c : proto.hlo_module().computations())
      for (const auto& i : c.instructions()) instr[i.id()] = &i;
    std::map<std::int64_t, const hlo::LogicalBufferProto*> buffers;
    for (const auto& b : proto.buffer_assignment().logical_buffers()) buffers[b.id()] = &b;
    for (const auto& a : proto.buffer_assignment().buffer_allocations()) {
      if (a.is_thread_local() || a.is_constant() || a.size() <= 0) continue;
      Module::Alloc al;
      al.size = static_cast<std::uint64_t>(a.size());
      al.role = a.is_entry_computation_parameter() ? Module::Alloc::kParameter
                : a.maybe_live_out()               ? Module::Alloc::kOutput
                                                   : Module::Alloc::kTemp;
      std::string role = al.role == Module::Alloc::kParameter ? fmt::format("parameter {}", a.parameter_number())
                         : al.role == Module::Alloc::kOutput  ? std::string(a.is_tuple() ? "output tuple" : "output")
                                                              : std::string("temp");
      // The buffer that names it: the largest one assigned to it.
      const hlo::LogicalBufferProto* lb = nullptr;
      for (const auto& as : a.assigned())
        if (auto it = buffers.find(as.logical_buffer_id());
            it != buffers.end() && (!lb || it->second->size() > lb->size()))
          lb = it->second;
      std::string what;
      if (lb) {
        if (auto in = instr.find(lb->defined_at().instruction_id()); in != instr.end()) {
          const hlo::ShapeProto* sh = shape_at(in->second->shape(), lb->defined_at().shape_index());
          std::vector<std::uint64_t> dims;
          Dtype dt = sh ? array_of(*sh, &dims) : Dtype::kNone;
          what = sanitize_utf8(in->second->name());
          Bytes want = 0;
          if (dt != Dtype::kNone && unpadded_bytes(dims, dt, &want) && want == al.size && a.assigned_size() == 1)
            al.dtype = dt, al.shape = dims;  // reports show the buffer's shape beside its name
          else if (dt != Dtype::kNone)
            what = shape_text(dt, dims) + " " + what;
          const auto& md = in->second->metadata();
          std::string src = md.source_file().empty()
                                ? std::string()
                                : fmt::format("{}:{}", sanitize_utf8(md.source_file()), md.source_line());
          std::string op = sanitize_utf8(md.op_name());
          if (!op.empty() || !src.empty())
            what += fmt::format(" ({}{}{})", op, !op.empty() && !src.empty() ? " at " : "", src);
        }
      }
      if (a.assigned_size() > 1) what = fmt::format("{} buffers, largest {}", a.assigned_size(), what);
      al.text = fmt::format("{}: {}{}{}", m->name, role, what.empty() ? "" : " ", what);
      m->allocs.push_back(std::move(al));
    }
    modules_.push_back(std::move(m));
  }
}

BufferName BufferNamer::name(std::uint64_t requested, const CallSite& site) const {
  BufferName out;
  auto unnamed = [&](const std::string& why) {
    out.text = "(unnamed: " + why + ")";
    return out;
  };
  if (site.transfer && site.function.empty()) return unnamed("a transfer from the host outside any jitted call");
  if (modules_.empty()) return unnamed("the capture embeds no compiled module");
  if (site.function.empty())
    return unnamed(site.innermost.empty() ? "allocated outside any jitted call"
                                          : "allocated outside any jitted call, in " + site.innermost);
  std::string fn = "jit_" + site.function;
  std::vector<const Module::Alloc*> fits;
  size_t modules = 0;
  for (const auto& m : modules_) {
    if (m->function != fn) continue;
    ++modules;
    for (const auto& a : m->allocs) {
      bool role = site.transfer  ? a.role == Module::Alloc::kParameter
                  : site.execute ? a.role != Module::Alloc::kParameter
                                 : true;
      if (role && a.size == requested) fits.push_back(&a);
    }
  }
  if (!modules) return unnamed(fmt::format("the capture embeds no module of {}", fn));
  if (fits.empty())
    return unnamed(fmt::format("no {} of {}'s {} compiled module{} is {} B",
                               site.transfer  ? "parameter"
                               : site.execute ? "output or temp buffer"
                                              : "buffer",
                               fn, modules, modules == 1 ? "" : "s", requested));
  const Module::Alloc& a = *fits.front();
  out.named = true;
  out.text = a.text;
  size_t others = 0;
  for (const auto* f : fits) others += f->text != a.text;
  if (others) out.text += fmt::format(" (or {} other buffer{} of that size)", others, others == 1 ? "" : "s");
  out.dtype = a.dtype;
  out.shape = a.shape;
  return out;
}

}  // namespace fragsim
