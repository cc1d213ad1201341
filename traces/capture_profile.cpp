#include "traces/capture_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "sim/base/error.h"
#include "sim/base/text.h"
#include "traces/jax_memory_profile.h"
#include "traces/recorded_layout.h"
#include "traces/xprof_capture.h"

namespace fragsim {

namespace {

constexpr std::uint64_t kProfileStacks = 1ULL << 40;  // the profile's stack ids, after the capture's

// The two pieces of "A,B" (empty when the path is not one comma-joined pair).
std::pair<std::string, std::string> comma_pair(const std::string& path) {
  size_t comma = path.find(',');
  if (comma == std::string::npos || path.find(',', comma + 1) != std::string::npos) return {};
  return {path.substr(0, comma), path.substr(comma + 1)};
}

// (capture, profile), or empty strings when `path` is not such a pair.
std::pair<std::string, std::string> parts_of(const std::string& path) {
  auto [a, b] = comma_pair(path);
  if (a.empty() || b.empty()) return {};
  if (is_jax_memory_profile_path(b) && is_xprof_path(a) && !is_jax_memory_profile_path(a)) return {a, b};
  if (is_jax_memory_profile_path(a) && is_xprof_path(b) && !is_jax_memory_profile_path(b)) return {b, a};
  return {};
}

// A buffer of the profile: an alloc event of its reader (size, device, name, stack).
struct ProfileBuffer {
  Event ev;
  bool used = false;
};

std::unique_ptr<TraceReader> capture_with_profile(const std::string& path, const std::string& capture_path,
                                                  const std::string& profile_path, const ReaderOptions& opt) {
  // The profile: its stacks and its buffers per device (hbm), the largest first (its reader's order).
  std::map<std::uint64_t, Event> profile_stacks;  // id → definition
  std::map<std::uint32_t, std::vector<ProfileBuffer>> pool;
  std::uint64_t host_buffers = 0;
  {
    auto r = uncounted(make_jax_memory_profile_reader(profile_path, opt));  // the pair counts its events
    Event ev;
    while (r->next(ev)) {
      if (ev.op == Op::kStack) {
        profile_stacks[ev.id.value()] = ev;
      } else if (ev.op == Op::kAlloc) {
        if (ev.space != Space::kHbm)
          ++host_buffers;
        else
          pool[ev.device].push_back({ev});
      }
    }
  }
  auto capture = uncounted(open_trace(capture_path, opt));
  std::vector<Event> head, body;
  std::uint64_t next_id = 1;
  std::map<std::uint32_t, std::vector<Event>> unknown;  // device → the capture's pre-trace allocs without address
  Event ev;
  while (capture->next(ev)) {
    if (ev.op == Op::kAlloc || ev.op == Op::kFree) next_id = std::max(next_id, ev.id.value() + 1);
    const bool pre = ev.op == Op::kAlloc && ev.has(key::kPreTrace) && ev.space == Space::kHbm;
    if (pre && !ev.has(key::kAddr))
      unknown[ev.device].push_back(ev);
    else if (pre)
      head.push_back(ev);
    else
      body.push_back(ev);
  }
  struct Tally {
    std::uint64_t profile_buffers = 0, matched = 0, placed = 0, left_out = 0;
    Bytes profile_bytes = 0, capture_unknown = 0, placed_bytes = 0, remainder = 0, left_out_bytes = 0;
  };
  std::map<std::uint32_t, Tally> tally;
  for (auto& [d, bufs] : pool)
    for (const auto& b : bufs) ++tally[d].profile_buffers, tally[d].profile_bytes += b.ev.size;
  auto take_stack = [&](Event& to, const Event& from) {
    if (from.has(key::kStack)) to.stack = from.stack + kProfileStacks, to.present |= key::kStack;
    if (from.has(key::kName)) to.name = from.name, to.present |= key::kName;
  };
  // Earlier buffers the capture frees at stated addresses: the profile's buffer of that chunk size.
  for (Event& e : head) {
    if (e.op != Op::kAlloc || !e.has(key::kAddr)) continue;
    auto it = pool.find(e.device);
    if (it == pool.end()) continue;
    const Bytes block = e.has(key::kBlockSize) ? e.block_size : e.size;
    for (auto& b : it->second)
      if (!b.used && bfc_chunk_of(b.ev.size) == bfc_chunk_of(block)) {
        b.used = true;
        take_stack(e, b.ev);
        ++tally[e.device].matched;
        break;
      }
  }
  // The memory at no stated address: the profile's other buffers, while their chunks fit in it.
  for (auto& [d, list] : unknown) {
    for (Event& u : list) {
      Tally& t = tally[d];
      t.capture_unknown += u.size;
      Bytes room = u.size;
      if (auto it = pool.find(d); it != pool.end())
        for (auto& b : it->second) {
          if (b.used || bfc_chunk_of(b.ev.size) > room) continue;
          b.used = true;
          room -= bfc_chunk_of(b.ev.size);
          Event x = u;
          x.id = AllocId(next_id++);
          x.size = b.ev.size;
          x.present &= static_cast<std::uint16_t>(~(key::kName | key::kStack | key::kBlockSize));
          x.name.clear();
          if (bfc_chunk_of(b.ev.size) != b.ev.size)
            x.block_size = bfc_chunk_of(b.ev.size), x.present |= key::kBlockSize;
          take_stack(x, b.ev);
          head.push_back(std::move(x));
          ++t.placed;
          t.placed_bytes += b.ev.size;
        }
      if (room) {  // what the profile does not cover stays one allocation
        u.size = room;
        u.name = "(live before the capture, address unknown, not in the memory profile)";
        head.push_back(u);
        t.remainder += room;
      }
    }
  }
  for (auto& [d, bufs] : pool)
    for (const auto& b : bufs)
      if (!b.used) ++tally[d].left_out, tally[d].left_out_bytes += b.ev.size;
  // Stacks first (each defined before any use), then the state, then the capture's events.
  std::vector<Event> events;
  for (auto& [id, s] : profile_stacks) {
    Event x = s;
    x.id = AllocId(id + kProfileStacks);
    x.t = Tick(0);  // at the capture's start, with the state they describe
    x.present |= key::kT;
    events.push_back(std::move(x));
  }
  for (auto& e : head) events.push_back(std::move(e));
  for (auto& e : body) events.push_back(std::move(e));
  nlohmann::json header = capture->header().is_object() ? capture->header() : nlohmann::json{{"fragsim_trace", 1}};
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& [d, t] : tally)
    devices.push_back({{"device", d},
                       {"profile_buffers", t.profile_buffers},
                       {"profile_bytes", t.profile_bytes},
                       {"matched_recorded_buffers", t.matched},
                       {"capture_unknown_bytes", t.capture_unknown},
                       {"placed_buffers", t.placed},
                       {"placed_bytes", t.placed_bytes},
                       {"remainder_bytes", t.remainder},
                       {"left_out_buffers", t.left_out},
                       {"left_out_bytes", t.left_out_bytes}});
  header["pre_trace_profile"] = {{"file", profile_path}, {"devices", devices}, {"host_buffers_left_out", host_buffers}};
  return make_event_reader(path, std::move(events), std::move(header));
}

}  // namespace

bool is_capture_with_profile(const std::string& path) { return !parts_of(path).first.empty(); }

std::unique_ptr<TraceReader> make_capture_with_profile_reader(const std::string& path, const ReaderOptions& opt) {
  auto [capture, profile] = parts_of(path);
  if (capture.empty()) throw InputError(path + ": expected an XProf capture and a JAX memory profile (.prof)");
  return capture_with_profile(path, capture, profile, opt);
}

}  // namespace fragsim
