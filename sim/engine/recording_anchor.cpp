#include "sim/engine/recording_anchor.h"

#include <fmt/format.h>

#include <set>

#include "sim/base/torch_sizes.h"
#include "traces/recorded_layout.h"

namespace fragsim {

namespace {

// GPU_0_bfc, GPU_collectivememory_0_bfc, gpu_host_bfc (a TPU's allocator is named TPU:N).
bool is_bfc(const std::string& name) { return name.size() > 4 && name.compare(name.size() - 4, 4, "_bfc") == 0; }

// The capture's allocators that one preallocated region explains (traces/xprof_capture.h).
std::vector<const RecordedAllocator*> single_region_allocators(const Recording& r) {
  std::vector<const RecordedAllocator*> out;
  for (const auto& a : r.allocators)
    if (a.mode == RecordedAllocator::Mode::kSingleRegion && is_bfc(a.name) && a.limit) out.push_back(&a);
  return out;
}

// The capture's allocators that grow on demand (traces/bfc_growth.h).
std::vector<const RecordedAllocator*> growing_allocators(const Recording& r) {
  std::vector<const RecordedAllocator*> out;
  for (const auto& a : r.allocators)
    if (a.mode == RecordedAllocator::Mode::kGrow && is_bfc(a.name) && a.limit) out.push_back(&a);
  return out;
}

}  // namespace

bool RecordingAnchor::wanted(const Recording& recording) {
  if (recording.source == RecordingSource::kTorchSnapshot) return true;
  for (const auto* a : single_region_allocators(recording))
    if (a->live_before > 0) return true;
  return !growing_allocators(recording).empty();
}

void RecordingAnchor::learn(TraceReader& reader) {
  if (reader.recording().source == RecordingSource::kTorchSnapshot) return learn_torch_blocks(reader);
  std::map<std::pair<std::uint32_t, Space>, RecordedLayout> layouts;
  std::map<std::pair<std::uint32_t, Space>, std::vector<Bytes>> unplaced;
  for (const auto* a : single_region_allocators(reader.recording())) by_[{a->device, a->space}].limit = *a->limit;
  std::set<std::pair<std::uint32_t, Space>> growing;
  for (const auto* a : growing_allocators(reader.recording())) {
    by_[{a->device, a->space}].limit = *a->limit;
    growing.insert({a->device, a->space});
  }
  Event ev;
  while (reader.next(ev)) {
    if (ev.op != Op::kAlloc && ev.op != Op::kFree) continue;
    auto it = by_.find({ev.device, ev.space});
    if (it == by_.end()) continue;
    Allocator& al = it->second;
    const bool pre = ev.has(key::kPreTrace);
    const Bytes block = ev.has(key::kBlockSize) ? ev.block_size : ev.size;
    if (ev.op == Op::kAlloc && pre && ev.has(key::kAddr)) al.known += block, ++al.known_buffers;
    if (ev.op == Op::kAlloc && pre && !ev.has(key::kAddr)) al.unknown += block, al.unknowns.emplace_back(ev.id, block);
    if (growing.count(it->first)) {
      BfcEvent g{ev.op == Op::kAlloc, ev.id.value(), 0, std::nullopt, pre};
      // The policy asks for the request (seeding an earlier buffer, for the chunk it held).
      if (g.alloc) g.chunk = bfc_chunk_of(pre ? block : ev.size), g.held = bfc_chunk_of(block);
      if (g.alloc && ev.has(key::kAddr)) g.at = ev.addr;
      al.growth_events.push_back(g);
      continue;
    }
    if (ev.op != Op::kAlloc) continue;
    if (ev.has(key::kAddr)) {
      layouts[it->first].occupied(ev.addr, block);
    } else if (!pre) {
      unplaced[it->first].push_back(ev.size);
      al.unplaced_bytes += ev.size;
    }
  }
  for (const auto& k : growing) {
    Allocator& al = by_[k];
    BfcPriorRegions p = infer_bfc_prior_regions(al.growth_events, al.limit);
    al.prior_regions = std::move(p.regions);
    al.prior_matched_before = p.matched_before;
    al.prior_matched = p.matched;
    al.prior_compared = p.compared;
    al.growth_events = {};
    if (!p.live.empty()) {  // the unknown bytes, where the regions held before put them
      al.in_prior_regions = true;
      al.extents = std::move(p.live);
      al.in_gaps = p.live_in_gaps;
      al.below = 0;
      share_extents(al);
    }
  }
  for (auto& [k, al] : by_) {
    if (al.unknowns.empty() || !layouts.count(k)) continue;
    auto s = layouts[k].single_region(al.unknown, al.limit, unplaced[k]);
    if (!s) continue;
    al.anchored = true;
    al.base = s->base;
    al.extents = std::move(s->live);
    al.in_gaps = s->in_gaps;
    al.below = s->below;
    share_extents(al);
  }
}

void RecordingAnchor::share_extents(Allocator& al) {
  std::vector<Bytes> sizes;
  for (const auto& u : al.unknowns) sizes.push_back(u.second);
  auto shares = place_in_extents(al.extents, sizes);
  for (size_t i = 0; i < shares.size(); ++i) al.of_alloc[al.unknowns[i].first] = std::move(shares[i]);
}

void RecordingAnchor::learn_torch_blocks(TraceReader& reader) {
  using torch::kSmallSize;  // requests up to it use the small pool
  const Recording& rec = reader.recording();
  // Each device's max_split_size (unset: no oversize blocks)
  auto mss = [&](std::uint32_t device) {
    const RecordedTorchSettings* s = rec.torch_settings_of(device);
    return s && s->max_split_size ? *s->max_split_size : kTooLarge;
  };
  std::map<std::pair<std::uint32_t, std::uint64_t>, Bytes> segments;            // (device, base) → size
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> pre_ids;     // (device, id) → address
  std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>> starts;  // (device, x, index)
  Event ev;
  while (reader.next(ev)) {
    bool pre = ev.has(key::kPreTrace);
    if (ev.op == Op::kSegmentAlloc && pre && ev.has(key::kAddr)) segments[{ev.device, ev.addr.value()}] = ev.size;
    if (ev.op == Op::kFree) {
      if (auto it = pre_ids.find({ev.device, ev.id.value()}); it != pre_ids.end()) {
        pre_blocks_[{ev.device, it->second}].freed_at = ev.index;
        pre_ids.erase(it);
      }
    }
    if (ev.op != Op::kAlloc || !ev.has(key::kAddr)) continue;
    starts.emplace_back(ev.device, ev.addr.value(), pre ? 0 : ev.index);
    Bytes r = round_up_sat(ev.size, torch::kMinBlockSize);
    if (pre && !ev.has(key::kBlockSize) && r > kSmallSize && r < mss(ev.device)) {
      pre_blocks_[{ev.device, ev.addr.value()}] = PreBlock{r};
      pre_ids[{ev.device, ev.id.value()}] = ev.addr.value();
    }
  }
  for (auto [device, x, when] : starts) {
    auto p = pre_blocks_.lower_bound({device, x});
    if (p == pre_blocks_.begin()) continue;
    --p;
    auto [d, a] = p->first;
    PreBlock& b = p->second;
    if (d != device || x <= a + b.rounded || x - (a + b.rounded) > kSmallSize) continue;
    if (b.freed_at <= when) continue;  // gone by then
    auto seg = segments.upper_bound({device, a});
    if (seg == segments.begin()) continue;
    --seg;
    if (seg->first.first != device || x >= seg->first.second + seg->second) continue;  // beyond its segment
    if (!b.block || x - a < b.block) b.block = x - a;
  }
  for (const auto& [k, b] : pre_blocks_)
    if (b.block) ++blocks_inferred_[k.first];
}

Bytes RecordingAnchor::block(const Event& ev) const {
  if (!ev.has(key::kPreTrace) || !ev.has(key::kAddr) || ev.has(key::kBlockSize)) return 0;
  auto it = pre_blocks_.find({ev.device, ev.addr.value()});
  return it == pre_blocks_.end() ? 0 : it->second.block;
}

std::span<const Extent> RecordingAnchor::extents(const Event& ev) const {
  if (!ev.has(key::kPreTrace) || ev.has(key::kAddr)) return {};
  auto it = by_.find({ev.device, ev.space});
  if (it == by_.end() || !(it->second.anchored || it->second.in_prior_regions)) return {};
  auto share = it->second.of_alloc.find(ev.id);
  if (share == it->second.of_alloc.end()) return {};
  return share->second;
}

std::vector<Observation> RecordingAnchor::take_regions(std::uint32_t device, Space space) {
  std::vector<Observation> out;
  auto it = by_.find({device, space});
  if (it == by_.end() || it->second.region_taken) return out;
  Allocator& al = it->second;
  al.region_taken = true;
  auto region = [&](Addr base, Bytes size) {
    Observation ob;
    ob.op = Op::kSegmentAlloc;
    ob.addr = base;
    ob.has_addr = true;
    ob.size = size;
    ob.pre_trace = true;
    ob.bfc_region = true;
    out.push_back(ob);
  };
  if (al.anchored) region(al.base, 0);
  for (const Extent& g : al.prior_regions) region(g.addr, g.bytes);
  return out;
}

nlohmann::json RecordingAnchor::summary() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [device, n] : blocks_inferred_)
    out.push_back({{"device", device}, {"space", space_name(Space::kHbm)}, {"pre_trace_block_sizes_inferred", n}});
  for (const auto& [k, al] : by_) {
    const bool live = !al.unknowns.empty() || al.known_buffers;
    if (!live && al.prior_regions.empty()) continue;
    nlohmann::json j = {
        {"device", k.first}, {"space", space_name(k.second)}, {"live_before_bytes", al.known + al.unknown}};
    if (live) {
      const bool placed = al.anchored || al.in_prior_regions;
      j["recorded_bytes"] = al.known;
      j["recorded_buffers"] = al.known_buffers;
      j["inferred_bytes"] = placed ? al.unknown : 0;
      j["unplaced_bytes"] = placed ? 0 : al.unknown;
      if (al.unknowns.size() > 1) j["unknown_address_buffers"] = al.unknowns.size();
      if (placed) {
        j["inferred_extents"] = al.extents.size();
        j["inferred_in_gaps_bytes"] = al.in_gaps;
      }
      if (al.anchored) {
        j["region_base"] = al.base;
        j["inferred_below_bytes"] = al.below;
      }
    }
    if (!al.prior_regions.empty()) {
      nlohmann::json regions = nlohmann::json::array();
      for (const Extent& g : al.prior_regions) regions.push_back({{"base", g.addr.value()}, {"bytes", g.bytes}});
      j["prior_regions"] = std::move(regions);
      j["model_matched_without"] = al.prior_matched_before;
      j["model_matched_with"] = al.prior_matched;
      j["model_compared"] = al.prior_compared;
    }
    out.push_back(std::move(j));
  }
  return out.empty() ? nlohmann::json() : out;
}

std::vector<std::string> RecordingAnchor::notes() const {
  std::vector<std::string> out;
  for (const auto& [device, n] : blocks_inferred_)
    out.push_back(fmt::format(
        "device {}: {} blocks allocated before the trace hold more than they asked for, as later allocations show "
        "(an unsplit remainder of the large pool; sizes inferred)",
        device, n));
  for (const auto& [k, al] : by_) {
    if (!al.prior_regions.empty()) {
      std::string regions;
      for (const Extent& g : al.prior_regions)
        regions += fmt::format("{}{} at {:#x}", regions.empty() ? "" : ", ", human_bytes(g.bytes), g.addr.value());
      const std::string held =
          al.known + al.unknown == 0
              ? std::string("nothing live when the recording began, but")
              : fmt::format(
                    "{} live when the recording began ({} at addresses it states{}), and",
                    human_bytes(al.known + al.unknown), human_bytes(al.known),
                    al.in_prior_regions
                        ? fmt::format(
                              "; {} in ranges inside these regions no recorded buffer used, {} where best fit put it",
                              human_bytes(al.in_gaps), human_bytes(al.unknown - al.in_gaps))
                        : std::string());
      out.push_back(fmt::format(
          "device {} {}: {} its addresses show regions the allocator had "
          "already obtained (and the growth target they left): {}; obtained first, in that order (the inference's "
          "model reproduces {} of {} recorded addresses with them, {} without)",
          k.first, space_name(k.second), held, regions, al.prior_matched, al.prior_compared, al.prior_matched_before));
      continue;
    }
    if (al.unknowns.empty()) continue;
    Bytes total = al.known + al.unknown;
    if (!al.anchored) {
      out.push_back(fmt::format(
          "device {} {}: {} live before the recording began, {} at addresses it states; the other {} could not be "
          "placed from its addresses (placed by the policy)",
          k.first, space_name(k.second), human_bytes(total), human_bytes(al.known), human_bytes(al.unknown)));
      continue;
    }
    out.push_back(fmt::format(
        "device {} {}: {} live before the recording began: {} at addresses it states ({} buffers), {} inferred "
        "({:.0f}% of that state) from its addresses and BFC's rules: {} in {} gaps no recorded buffer used, {} "
        "from the region's inferred base {:#x} up",
        k.first, space_name(k.second), human_bytes(total), human_bytes(al.known), al.known_buffers,
        human_bytes(al.unknown), total ? 100.0 * static_cast<double>(al.unknown) / static_cast<double>(total) : 0.0,
        human_bytes(al.in_gaps), al.extents.size() - (al.below ? 1 : 0), human_bytes(al.below), al.base));
  }
  return out;
}

}  // namespace fragsim
