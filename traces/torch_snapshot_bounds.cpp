#include "traces/torch_snapshot_bounds.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/base/text.h"
#include "sim/base/torch_sizes.h"

namespace fragsim::torch_snapshot {

namespace {

bool releases(Action a) { return a == Action::kSegFree || a == Action::kSegUnmap; }

// Whether releases of max_split_size or the GC threshold could explain a burst of releases.
bool other_releases_possible(const nlohmann::json& settings) {
  if (!settings.is_object()) return false;
  if (settings.contains("max_split_size") && settings["max_split_size"].is_number_integer() &&
      settings["max_split_size"].get<std::int64_t>() > 0)
    return true;
  return settings.contains("garbage_collection_threshold") && settings["garbage_collection_threshold"].is_number() &&
         settings["garbage_collection_threshold"].get<double>() > 0;
}

}  // namespace

// A run of segment_free (or segment_unmap) entries is the cache being released: by the
// program (torch.cuda.empty_cache()) or by the allocator itself, when cudaMalloc failed inside
// a malloc and it released the cache to retry (specs/torch-caching.md §3, §5). The snapshot does
// not say which; the allocator releases inside a malloc only when
//   (a) the next entries are that malloc: segment_alloc/segment_map, then its alloc (or its oom);
//   (b) none of the released memory could have served the request (else best fit would have
//       found it: a released whole segment of the request's pool at least as large, or an
//       unmapped range at least as large, means the cache could serve it);
//   (c) the device could not hold what the malloc asked for: reserved + that segment exceeds
//       the most the process ever held.
// Anything else is the program's call. A retry bounds the device's usable memory from above.
Releases read_releases(const std::vector<Entry>& es, Bytes reserved, bool expandable, const nlohmann::json& settings,
                       DeviceBounds* bounds) {
  using namespace torch;
  std::vector<Bytes> reserved_before(es.size());
  Bytes peak = reserved;
  // The least cap a per-process memory fraction can have had: each growth passed its check,
  // reserved + segment ≤ cap. A cudaMalloc's segment is what it added; expandable segments map only
  // what the reservation lacks, yet the check is on the whole segment the request would take.
  Bytes cap = reserved;
  for (size_t i = 0; i < es.size(); ++i) {
    reserved_before[i] = reserved;
    const Entry& e = es[i];
    const bool grows = e.action == Action::kSegAlloc || e.action == Action::kSegMap;
    if (grows) reserved += e.size;
    if (releases(e.action)) reserved -= std::min(reserved, e.size);
    peak = std::max(peak, reserved);
    if (e.action == Action::kSegMap && expandable && (i == 0 || es[i - 1].action != Action::kSegMap)) {
      size_t k = i;
      while (k < es.size() && es[k].action == Action::kSegMap) ++k;
      if (k < es.size() && es[k].action == Action::kAlloc)
        cap = std::max(cap, sat_add(reserved_before[i], segment_size(round_up_sat(es[k].size, kMinBlockSize))));
    }
  }
  bounds->peak_reserved = peak;
  cap = std::max(cap, peak);

  Releases out;
  out.empty_cache_before.assign(es.size(), false);
  out.request_before.assign(es.size(), false);
  const bool other_releases = other_releases_possible(settings);
  for (size_t i = 0; i < es.size();) {
    if (!releases(es[i].action)) {
      ++i;
      continue;
    }
    size_t j = i;
    Bytes largest_small = 0, largest_large = 0, largest_range = 0;
    for (; j < es.size() && releases(es[j].action); ++j) {
      const Entry& e = es[j];
      Bytes& largest = e.action == Action::kSegUnmap ? largest_range
                       : e.size == kSmallBuffer      ? largest_small
                                                     : largest_large;
      largest = std::max(largest, e.size);
    }
    // (a) the malloc this burst would be part of.
    size_t k = j;
    Bytes first_growth = 0;
    for (; k < es.size() && (es[k].action == Action::kSegAlloc || es[k].action == Action::kSegMap); ++k)
      if (!first_growth) first_growth = es[k].size;
    bool retry = !other_releases && k < es.size() &&
                 (es[k].action == Action::kOom || (es[k].action == Action::kAlloc && first_growth));
    if (retry) {
      Bytes r = round_up_sat(es[k].size, kMinBlockSize);
      // (b) could the released cache have served it?
      if (r <= kSmallSize ? largest_small >= r : largest_large >= r) retry = false;
      if (largest_range >= r) retry = false;
      // (c) could the device have held the segment it asked for?
      Bytes ask = first_growth ? first_growth
                  : expandable ? round_up_sat(r, r <= kSmallSize ? kSmallBuffer : kLargeBuffer)
                               : r;
      Bytes before = reserved_before[i];
      if (before > kTooLarge - ask || before + ask <= bounds->peak_reserved) retry = false;
      if (retry) {
        bounds->upper = std::min(bounds->upper.value_or(kTooLarge), before + ask);
        ++bounds->retries;
        if (es[k].action == Action::kOom) out.request_before[i] = true;
      }
    }
    if (!retry) {
      out.empty_cache_before[i] = true;
      ++bounds->empty_caches;
    }
    i = j;
  }
  // A recorded oom says what the driver had left: usable ≈ reserved then + that free memory.
  for (size_t i = 0; i < es.size(); ++i) {
    const Entry& e = es[i];
    if (e.action != Action::kOom) continue;
    if (e.has_device_free) bounds->at_oom = reserved_before[i] + e.device_free;
    // The driver had room for the segment, and no cap the growths allow would have let it through:
    // the allocator's own cap refused it.
    const Bytes ask = segment_size(round_up_sat(e.size, kMinBlockSize));
    if (e.has_device_free && e.device_free >= ask && sat_add(reserved_before[i], ask) > cap && !bounds->refused)
      bounds->refused = Refusal{i, ask, e.device_free, cap};
    bool released_before = i > 0 && (releases(es[i - 1].action) || es[i - 1].action == Action::kSegMap);
    if (!released_before) out.request_before[i] = true;  // the request sits right here
  }
  return out;
}

nlohmann::json bounds_json(std::uint32_t device, const DeviceBounds& b, std::uint64_t oom_event) {
  nlohmann::json j = {{"device", device}, {"lower_bytes", b.peak_reserved}};
  if (b.upper) j["upper_bytes"] = *b.upper;
  if (b.refused)
    j["allocator_cap"] = {{"cap_bytes", b.refused->cap},
                          {"request_bytes", b.refused->request},
                          {"device_free_bytes", b.refused->device_free},
                          {"oom_event", oom_event}};
  if (b.at_oom) {
    j["usable_bytes"] = *b.at_oom;
    j["basis"] = fmt::format(
        "a recorded oom: reserved memory plus the free memory the driver reported then ({}); it held at most {}",
        human_bytes(*b.at_oom), human_bytes(b.peak_reserved));
  } else {
    j["usable_bytes"] = b.peak_reserved;
    j["basis"] = fmt::format(
        "{} OOM retr{} (cudaMalloc failed, the cache was released and the allocation retried): usable memory is "
        "at least the {} it held and less than {}; the replay uses the lower bound",
        b.retries, b.retries == 1 ? "y" : "ies", human_bytes(b.peak_reserved), human_bytes(*b.upper));
  }
  return j;
}

}  // namespace fragsim::torch_snapshot
