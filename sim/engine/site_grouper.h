// SiteGrouper: a moment's live buffers summed by call site, i.e. by (stack, name), in O(1) per
// buffer; finish() keeps the kMaxSites largest groups (Moment::sites) and sums the rest
// (Moment::other_sites). The engine groups (sim/engine/live_set.cpp); what reports print of the groups
// (sites, stack frames, the flame graph) is sim/report/by_stack.h's.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/engine/run_result.h"

namespace fragsim {

class SiteGrouper {
 public:
  void add(std::uint64_t stack, std::uint32_t name, Bytes bytes, Bytes requested);
  // The groups, most bytes first (ties: stack, then name), at most `keep`; the rest summed in `other`.
  void finish(const std::function<std::string(std::uint32_t name)>& name_of, size_t keep, std::vector<SiteBytes>* sites,
              SiteBytes* other) const;

 private:
  struct Key {
    std::uint64_t stack;
    std::uint32_t name;
    bool operator==(const Key& o) const { return stack == o.stack && name == o.name; }
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      return std::hash<std::uint64_t>()(k.stack * 0x9e3779b97f4a7c15ULL ^ k.name);
    }
  };
  struct Sum {
    Bytes bytes = 0, requested = 0;
    std::uint64_t buffers = 0;
  };
  std::unordered_map<Key, Sum, Hash> groups_;
};

}  // namespace fragsim
