#include "sim/report/by_stack.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "sim/base/text.h"

namespace fragsim {

namespace {

const std::vector<std::string>* frames_of(std::uint64_t stack, const StackFrames& stacks) {
  auto it = stacks.find(stack);
  return stack && it != stacks.end() && !it->second.empty() ? &it->second : nullptr;
}

constexpr const char* kNoSite = "(no name or stack)";
constexpr const char* kOtherSites = "(other sites)";

}  // namespace

std::string site_label(const SiteBytes& s, const StackFrames& stacks) {
  if (!s.name.empty()) return s.name;
  if (const auto* f = frames_of(s.stack, stacks)) return f->front();
  return kNoSite;
}

ByStack by_stack(const std::vector<SiteBytes>& sites, const SiteBytes& other, const StackFrames& stacks) {
  ByStack b;
  std::map<std::string, ByStack::Row> by_site, by_frame;
  for (const auto& s : sites) {
    b.live_bytes += s.bytes;
    b.buffers += s.buffers;
    std::string label = site_label(s, stacks);
    ByStack::Row& r = by_site[label];
    if (r.label.empty()) r.label = label, r.stack = s.stack;
    if (r.stack != s.stack) r.stack = 0;  // several stacks share the label: none names it
    r.bytes += s.bytes;
    r.requested += s.requested;
    r.buffers += s.buffers;
    const auto* frames = frames_of(s.stack, stacks);
    if (!frames) continue;
    std::set<std::string> seen;  // a recursive frame counts once
    for (const auto& f : *frames) {
      if (!seen.insert(f).second) continue;
      ByStack::Row& fr = by_frame[f];
      fr.label = f;
      fr.bytes += s.bytes;
      fr.requested += s.requested;
      fr.buffers += s.buffers;
    }
  }
  if (other.buffers) {
    b.live_bytes += other.bytes;
    b.buffers += other.buffers;
    by_site[kOtherSites] = {kOtherSites, 0, other.bytes, other.requested, other.buffers};
  }
  auto sorted = [](std::map<std::string, ByStack::Row>& m) {
    std::vector<ByStack::Row> v;
    for (auto& [k, r] : m) v.push_back(std::move(r));
    std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.bytes > y.bytes; });
    return v;
  };
  b.sites = sorted(by_site);
  b.frames = sorted(by_frame);
  return b;
}

namespace {

double share(Bytes part, Bytes whole) {
  return whole ? std::round(1e4 * static_cast<double>(part) / static_cast<double>(whole)) / 1e4 : 0.0;
}

nlohmann::json rows_json(const std::vector<ByStack::Row>& rows, Bytes whole, size_t n, const char* key) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < rows.size() && i < n; ++i) {
    const auto& r = rows[i];
    nlohmann::json j = {{key, r.label},
                        {"bytes", r.bytes},
                        {"requested_bytes", r.requested},
                        {"buffers", r.buffers},
                        {"share", share(r.bytes, whole)}};
    if (r.stack) j["stack"] = r.stack;
    a.push_back(std::move(j));
  }
  return a;
}

void rows_text(std::back_insert_iterator<std::string> out, const std::vector<ByStack::Row>& rows, Bytes whole, size_t n,
               const std::string& indent) {
  for (size_t i = 0; i < rows.size() && i < n; ++i)
    fmt::format_to(out, "{}{:>12} {:>6.1f}% {:>8}  {}\n", indent, human_bytes(rows[i].bytes),
                   100.0 * share(rows[i].bytes, whole), rows[i].buffers, escape_terminal(rows[i].label));
  if (rows.size() > n)
    fmt::format_to(out, "{}... {} more (the JSON report lists {})\n", indent, rows.size() - n,
                   std::min<size_t>(rows.size(), 50));
}

}  // namespace

nlohmann::json by_stack_json(const ByStack& b, size_t rows) {
  return {{"live_bytes", b.live_bytes},
          {"buffers", b.buffers},
          {"site_count", b.sites.size()},
          {"sites", rows_json(b.sites, b.live_bytes, rows, "site")},
          {"frames", rows_json(b.frames, b.live_bytes, rows, "frame")}};
}

std::string by_stack_text(const ByStack& b, size_t rows, const std::string& indent) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "{}live bytes by call site ({} in {} buffers):\n", indent, human_bytes(b.live_bytes), b.buffers);
  fmt::format_to(out, "{}  {:>12} {:>7} {:>8}  {}\n", indent, "bytes", "share", "buffers", "site");
  rows_text(out, b.sites, b.live_bytes, rows, indent + "  ");
  if (!b.frames.empty()) {
    fmt::format_to(out, "{}by stack frame (a frame holds every buffer whose stack passes through it):\n", indent);
    rows_text(out, b.frames, b.live_bytes, rows, indent + "  ");
  }
  return s;
}

nlohmann::json flame_json(const std::vector<SiteBytes>& sites, const SiteBytes& other, const StackFrames& stacks,
                          size_t max_nodes, double min_share) {
  // The full tree first (children by name), then a depth-first walk that keeps large nodes.
  struct Node {
    std::string name;
    Bytes bytes = 0;
    std::uint64_t buffers = 0;
    std::map<std::string, size_t> children;
  };
  std::vector<Node> tree(1);
  tree[0].name = "all live buffers";
  auto add_path = [&](const std::vector<std::string>& path, Bytes bytes, std::uint64_t buffers) {
    size_t at = 0;
    tree[0].bytes += bytes;
    tree[0].buffers += buffers;
    for (const auto& p : path) {
      auto it = tree[at].children.find(p);
      size_t next;
      if (it == tree[at].children.end()) {
        next = tree.size();
        tree[at].children.emplace(p, next);
        tree.push_back({p, 0, 0, {}});
      } else {
        next = it->second;
      }
      tree[next].bytes += bytes;
      tree[next].buffers += buffers;
      at = next;
    }
  };
  for (const auto& s : sites) {
    std::vector<std::string> path;
    if (const auto* f = frames_of(s.stack, stacks))
      path.assign(f->rbegin(), f->rend());
    else
      path.push_back(site_label(s, stacks));
    add_path(path, s.bytes, s.buffers);
  }
  if (other.buffers) add_path({kOtherSites}, other.bytes, other.buffers);

  nlohmann::json names = nlohmann::json::array(), nodes = nlohmann::json::array();
  std::map<std::string, size_t> name_index;
  auto intern = [&](const std::string& n) {
    auto [it, fresh] = name_index.try_emplace(n, name_index.size());
    if (fresh) names.push_back(n);
    return it->second;
  };
  const Bytes min_bytes = static_cast<Bytes>(min_share * static_cast<double>(tree[0].bytes));
  // Iterative depth-first walk: (tree node, parent's index in `nodes`).
  std::vector<std::pair<size_t, long>> todo = {{0, -1}};
  while (!todo.empty()) {
    auto [n, parent] = todo.back();
    todo.pop_back();
    if (nodes.size() >= max_nodes) break;
    long self = static_cast<long>(nodes.size());
    nodes.push_back({intern(tree[n].name), parent, tree[n].bytes, tree[n].buffers});
    std::vector<size_t> kids;
    Bytes small = 0;
    std::uint64_t small_buffers = 0;
    for (const auto& [name, c] : tree[n].children) {
      if (tree[c].bytes >= min_bytes && tree[c].bytes > 0)
        kids.push_back(c);
      else
        small += tree[c].bytes, small_buffers += tree[c].buffers;
    }
    if (small_buffers && nodes.size() < max_nodes) nodes.push_back({intern("(other)"), self, small, small_buffers});
    // Largest first on the page: pushed last so that it is walked first.
    std::sort(kids.begin(), kids.end(), [&](size_t a, size_t b) { return tree[a].bytes < tree[b].bytes; });
    for (size_t c : kids) todo.push_back({c, self});
  }
  return {{"names", names}, {"nodes", nodes}};
}

}  // namespace fragsim
