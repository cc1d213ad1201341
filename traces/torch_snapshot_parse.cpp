#include "traces/torch_snapshot_parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string_view>
#include <tuple>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/text.h"
#include "sim/base/torch_sizes.h"

namespace fragsim::torch_snapshot {

namespace {

constexpr size_t kMaxFrames = 48;  // frames kept per stack (innermost first)

std::uint64_t u64(const PyObj* o) { return o->big ? o->u : static_cast<std::uint64_t>(o->as_int()); }

std::int64_t stream_of(const PyObj& d) {
  const PyObj* v = d.get("stream");
  if (!v || !v->is_int()) return 0;
  return v->big ? static_cast<std::int64_t>(v->u) : v->as_int();
}

Action action_of(const std::string& act, bool* known) {
  static const std::pair<const char*, Action> kActions[] = {{"alloc", Action::kAlloc},
                                                            {"free_requested", Action::kFreeRequested},
                                                            {"free_completed", Action::kFreeCompleted},
                                                            {"segment_alloc", Action::kSegAlloc},
                                                            {"segment_free", Action::kSegFree},
                                                            {"segment_map", Action::kSegMap},
                                                            {"segment_unmap", Action::kSegUnmap},
                                                            {"oom", Action::kOom},
                                                            {"snapshot", Action::kMark},
                                                            {"annotate", Action::kMark}};
  for (const auto& [n, a] : kActions)
    if (act == n) return *known = true, a;
  *known = false;
  return Action::kMark;
}

}  // namespace

WorkBudget::WorkBudget(const std::string& path) : WorkBudget(path, input_bytes(path)) {}

WorkBudget::WorkBudget(const std::string& name, std::uint64_t input)
    : bytes(Limit::kStrings, name, input), kept(Limit::kObjects, name, input), names(Limit::kNames, name, input) {}

nlohmann::json to_json(const PyObj& o, WorkBudget& budget, int depth) {
  budget.spend();
  budget.kept.spend(1);  // each object visited becomes a node of the JSON kept in the header
  if (depth > 16) return nullptr;
  switch (o.kind) {
    case PyObj::kNone:
      return nullptr;
    case PyObj::kBool:
      return o.b;
    case PyObj::kInt:
      return o.big ? nlohmann::json(o.u) : nlohmann::json(o.i);
    case PyObj::kFloat:
      return o.f;
    case PyObj::kStr:
      budget.copy(o.s.size());
      return sanitize_utf8(o.s);
    case PyObj::kBytes:
      return nullptr;
    case PyObj::kList:
    case PyObj::kTuple: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& x : o.items) a.push_back(to_json(*x, budget, depth + 1));
      return a;
    }
    case PyObj::kDict: {
      nlohmann::json d = nlohmann::json::object();
      for (const auto& [k, v] : o.kv)
        if (k->kind == PyObj::kStr) {
          budget.copy(k->s.size());
          d[sanitize_utf8(k->s)] = to_json(*v, budget, depth + 1);
        }
      return d;
    }
  }
  return nullptr;
}

void Parser::bad(const std::string& what) const { throw InputError(path_ + ": " + what); }

std::uint64_t Parser::field_u(const PyObj& d, const char* k, std::uint64_t line, const char* where) const {
  const PyObj* v = d.get(k);
  if (!v || !v->is_int() || (!v->big && v->as_int() < 0))
    bad(fmt::format("{} entry {}: {}: missing or not a non-negative integer", where, line, k));
  return u64(v);
}

std::vector<Entry> Parser::trace(const PyObj& tr, size_t dev, bool* any_time) const {
  std::vector<Entry> es;
  es.reserve(tr.items.size());
  std::uint64_t line = 0;
  for (const auto& ep : tr.items) es.push_back(entry(*ep, dev, ++line, any_time));
  return es;
}

Entry Parser::entry(const PyObj& e, size_t dev, std::uint64_t line, bool* any_time) const {
  budget_.spend();
  budget_.kept.spend(2);  // its entry, then its events: about two objects' memory
  const PyObj* a = e.get("action");
  if (!a || a->kind != PyObj::kStr) bad(fmt::format("device_traces[{}] entry {}: action: missing", dev, line));
  Entry x;
  x.line = line;
  x.stream = stream_of(e);
  x.frames = e.get("frames");
  if (const PyObj* t = e.get("time_us"); t && t->is_int() && (t->big || t->as_int() >= 0)) {
    x.t = u64(t);
    x.has_t = *any_time = true;
  }
  bool known = false;
  x.action = action_of(a->s, &known);
  if (!known) bad(fmt::format("device_traces[{}] entry {}: action: unknown action '{}'", dev, line, a->s));
  if (x.action == Action::kOom) {
    x.size = field_u(e, "size", line, "trace");
    if (const PyObj* f = e.get("device_free"); f && f->is_int() && (f->big || f->as_int() >= 0))
      x.device_free = u64(f), x.has_device_free = true;
  } else if (x.action != Action::kMark) {
    x.size = field_u(e, "size", line, "trace");
    x.addr = field_u(e, "addr", line, "trace");
  }
  return x;
}

std::vector<Segment> Parser::segments(const PyObj* segments) const {
  std::vector<Segment> out;
  if (!segments) return out;
  for (const auto& gp : segments->items) {
    budget_.spend();
    const PyObj& g = *gp;
    if (g.kind != PyObj::kDict) bad("segments: an entry is not a dict");
    Segment s;
    const PyObj* gd = g.get("device");
    if (!gd || !gd->is_int() || gd->big || gd->as_int() < 0 || gd->as_int() > UINT32_MAX)
      bad("segments: device: missing or not a 32-bit device number");
    s.device = static_cast<std::uint32_t>(gd->as_int());
    s.addr = field_u(g, "address", 0, "segments");
    s.size = field_u(g, "total_size", 0, "segments");
    s.stream = stream_of(g);
    const PyObj* ex = g.get("is_expandable");
    s.expandable = ex && ex->is_int() && ex->as_int() != 0;
    const PyObj* ty = g.get("segment_type");
    s.small = ty && ty->kind == PyObj::kStr ? ty->s == "small" : s.size == torch::kSmallBuffer;
    const PyObj* blocks = g.get("blocks");
    std::uint64_t at = s.addr;
    if (blocks && blocks->kind == PyObj::kList) {
      std::uint64_t k = 0;
      for (const auto& bp : blocks->items) {
        budget_.spend();
        budget_.kept.spend(1);
        ++k;
        const PyObj& b = *bp;
        Block blk;
        const PyObj* ad = b.get("address");
        blk.addr = ad ? field_u(b, "address", k, "segments.blocks") : at;
        blk.size = field_u(b, "size", k, "segments.blocks");
        const PyObj* rq = b.get("requested_size");
        blk.requested = rq && rq->is_int() && rq->as_int() >= 0 ? u64(rq) : blk.size;
        const PyObj* st = b.get("state");
        blk.active = st && st->kind == PyObj::kStr && (st->s == "active_allocated" || st->s == "active_pending_free");
        blk.frames = b.get("frames");
        if (const PyObj* h = b.get("history");
            (!blk.frames || blk.frames->items.empty()) && h && h->kind == PyObj::kList && !h->items.empty())
          blk.frames = h->items.back()->get("frames");  // the 2.0 layout keeps frames in history
        at = blk.addr + blk.size;
        s.blocks.push_back(blk);
      }
    }
    out.push_back(std::move(s));
  }
  // Segments are disjoint device ranges (each one cudaMalloc or one reserved virtual range): two
  // that overlap are not a snapshot PyTorch wrote, and replaying them would place blocks twice.
  std::vector<size_t> by_addr(out.size());
  for (size_t i = 0; i < out.size(); ++i) by_addr[i] = i;
  std::sort(by_addr.begin(), by_addr.end(), [&](size_t a, size_t b) {
    return std::tie(out[a].device, out[a].addr, a) < std::tie(out[b].device, out[b].addr, b);
  });
  for (size_t k = 1; k < by_addr.size(); ++k) {
    const size_t first = std::min(by_addr[k - 1], by_addr[k]), later = std::max(by_addr[k - 1], by_addr[k]);
    const Segment &p = out[by_addr[k - 1]], &q = out[by_addr[k]];
    if (p.device == q.device && q.addr - p.addr < std::max<std::uint64_t>(p.size, 1))
      bad(fmt::format(
          "segments: entry {} (device {}, address {:#x}, {} B) overlaps entry {} (address {:#x}, {} B): "
          "segments are disjoint device ranges",
          later, out[later].device, out[later].addr, out[later].size, first, out[first].addr, out[first].size));
  }
  return out;
}

namespace {

// C++ frames that every allocation of PyTorch's stack shares, which say nothing of its call site:
// the unwinder and the snapshot's gathering, the caching allocator, tensor construction and
// TensorIterator, the dispatcher's and the generated registrations' wrappers, autograd's engine
// and its thread, the C library's thread entry.
constexpr std::string_view kSharedNative[] = {"torch::unwind::",
                                              "torch::CapturedTraceback::",
                                              "torch::cuda::(anonymous namespace)::gather",
                                              "c10::cuda::CUDACachingAllocator::",
                                              "c10::impl::",
                                              "c10::Dispatcher::",
                                              "at::detail::",
                                              "at::TensorIteratorBase::",
                                              "at::(anonymous namespace)::",
                                              "torch::autograd::Engine::",
                                              "torch::autograd::Node::operator()",
                                              "torch::autograd::python::PythonEngine::",
                                              "execute_native_thread_routine",
                                              "start_thread",
                                              "clone",
                                              "pthread_",
                                              "__"};

// A C++ frame's function as the unwinder names it ("at::TensorBase at::detail::empty_generic(
// c10::ArrayRef<long>, …)"): its qualified name, without the return type and the parameters.
std::string_view native_function(std::string_view s) {
  constexpr std::string_view kAnon = "(anonymous namespace)", kCall = "operator()";
  for (size_t at = 0; (at = s.find('(', at)) != std::string_view::npos;) {
    if (s.substr(at, kAnon.size()) == kAnon) {
      at += kAnon.size();
    } else if (at >= 8 && s.substr(at - 8, kCall.size()) == kCall) {
      at += 2;
    } else {
      s = s.substr(0, at);
      break;
    }
  }
  int depth = 0;  // the return type ends at the last space outside template arguments and parentheses
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' || s[i] == '(') ++depth;
    if (s[i] == '>' || s[i] == ')') --depth;
    if (s[i] == ' ' && depth == 0) start = i + 1;
  }
  return s.substr(start);
}

bool shared_native(std::string_view fn) {
  return fn.empty() || std::any_of(std::begin(kSharedNative), std::end(kSharedNative),
                                   [&](std::string_view p) { return fn.substr(0, p.size()) == p; });
}

}  // namespace

std::vector<std::string> Parser::stack_frames(const PyObj* frames) const {
  std::vector<std::string> out;
  if (!frames || frames->kind != PyObj::kList) return out;
  for (const auto& f : frames->items) {
    budget_.spend();
    if (out.size() == kMaxFrames) break;
    const PyObj* file = f->get("filename");
    const PyObj* fn = f->get("name");
    const PyObj* ln = f->get("line");
    if (!file || file->kind != PyObj::kStr || file->s.size() < 3 || file->s.compare(file->s.size() - 3, 3, ".py"))
      continue;
    budget_.copy(file->s.size() + (fn && fn->kind == PyObj::kStr ? fn->s.size() : 1) + 24);
    out.push_back(sanitize_utf8(fmt::format("{}:{} {}", file->s, ln && ln->is_int() ? ln->as_int() : 0,
                                            fn && fn->kind == PyObj::kStr ? fn->s : "?")));
  }
  if (!out.empty()) return out;
  // No Python frame: an allocation of autograd's backward thread, or of C++ code. Its C++ frames,
  // as memory_viz shows them, less those every allocation shares.
  for (const auto& f : frames->items) {
    budget_.spend();
    if (out.size() == kMaxFrames) break;
    const PyObj* fn = f->get("name");
    if (!fn || fn->kind != PyObj::kStr) continue;
    const std::string_view name = native_function(fn->s);
    if (shared_native(name)) continue;
    budget_.copy(name.size());
    out.push_back(sanitize_utf8(std::string(name)));
  }
  return out;
}

namespace {

// The call site a C++ stack names: the autograd node whose backward made it ("MeanBackward0
// (backward)"), else the outermost ATen operator it went through ("aten::div"), else its innermost
// frame.
std::string native_site(const std::vector<std::string>& frames) {
  constexpr std::string_view kNode = "torch::autograd::generated::", kApply = "::apply";
  constexpr std::string_view kOp = "at::_ops::";
  std::string_view op;
  for (std::string_view f : frames) {
    if (f.substr(0, kNode.size()) == kNode && f.size() > kNode.size() + kApply.size() &&
        f.substr(f.size() - kApply.size()) == kApply)
      return std::string(f.substr(kNode.size(), f.size() - kNode.size() - kApply.size())) + " (backward)";
    if (f.substr(0, kOp.size()) == kOp) op = f.substr(kOp.size(), f.find("::", kOp.size()) - kOp.size());
  }
  if (!op.empty()) return "aten::" + std::string(op);
  return frames.empty() ? std::string() : frames.front();
}

}  // namespace

std::string user_frame(const std::vector<std::string>& frames) {
  if (!frames.empty() && frames.front().find(".py:") == std::string::npos) return native_site(frames);
  for (const auto& f : frames) {
    if (f.find("/torch/") != std::string::npos || f.front() == '<') continue;
    auto slash = f.rfind('/', f.find(':'));
    return slash == std::string::npos ? f : f.substr(slash + 1);
  }
  return {};
}

}  // namespace fragsim::torch_snapshot
