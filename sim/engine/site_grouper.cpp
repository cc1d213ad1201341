#include "sim/engine/site_grouper.h"

#include <algorithm>
#include <utility>

namespace fragsim {

void SiteGrouper::add(std::uint64_t stack, std::uint32_t name, Bytes bytes, Bytes requested) {
  Sum& s = groups_[{stack, name}];
  s.bytes += bytes;
  s.requested += requested;
  ++s.buffers;
}

void SiteGrouper::finish(const std::function<std::string(std::uint32_t)>& name_of, size_t keep,
                         std::vector<SiteBytes>* sites, SiteBytes* other) const {
  std::vector<std::pair<Key, Sum>> v(groups_.begin(), groups_.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    if (a.second.bytes != b.second.bytes) return a.second.bytes > b.second.bytes;
    return a.first.stack != b.first.stack ? a.first.stack < b.first.stack : a.first.name < b.first.name;
  });
  sites->clear();
  *other = SiteBytes();
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& [k, s] = v[i];
    if (i < keep) {
      sites->push_back({k.stack, name_of(k.name), s.bytes, s.requested, s.buffers});
    } else {
      other->bytes += s.bytes;
      other->requested += s.requested;
      other->buffers += s.buffers;
    }
  }
}

}  // namespace fragsim
