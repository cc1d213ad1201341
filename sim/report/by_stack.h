// Live bytes by call site: which code holds the memory at a moment (a space's peak, an OOM, an
// event of the viewer's history), as memory_viz's flame graphs and `_memory_viz.py memory` show it.
// The engine groups a moment's live buffers (SiteGrouper, sim/engine/site_grouper.h: Moment::sites); the
// outputs render those groups from here:
//   ByStack     — what reports print of a moment's groups: one row per call site (a site is the
//                 buffers' name — PyTorch snapshots name a buffer by its innermost user frame —
//                 else the innermost frame of their stack), and the inclusive bytes of every
//                 stack frame (a frame holds the bytes of every buffer whose stack passes through
//                 it). Shares are of the moment's live bytes (Σ block bytes of its live buffers).
//   flame_json  — the same groups as an icicle for the HTML viewer: root → outermost frame → …
//                 → innermost, each node's inclusive bytes; small nodes merge into "(other)".
// Every output (text, JSON report, HTML, diff) renders these; none groups on its own.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/engine/run_result.h"

namespace fragsim {

// "model.py:45 forward": how reports name the call site of a group.
[[nodiscard]] std::string site_label(const SiteBytes& s, const StackFrames& stacks);

struct ByStack {
  struct Row {
    std::string label;        // the site, or the frame
    std::uint64_t stack = 0;  // a site's stack (0: none)
    Bytes bytes = 0, requested = 0;
    std::uint64_t buffers = 0;
  };
  Bytes live_bytes = 0;  // Σ block bytes of the moment's live buffers
  std::uint64_t buffers = 0;
  std::vector<Row> sites;   // most bytes first
  std::vector<Row> frames;  // inclusive bytes per frame, most first (only buffers with a stack count)
};

[[nodiscard]] ByStack by_stack(const std::vector<SiteBytes>& sites, const SiteBytes& other, const StackFrames& stacks);
[[nodiscard]] inline ByStack by_stack(const Moment& m, const StackFrames& stacks) {
  return by_stack(m.sites, m.other_sites, stacks);
}

// The report's `by_stack` key (docs/report.md): the `rows` largest sites and frames.
[[nodiscard]] nlohmann::json by_stack_json(const ByStack& b, size_t rows = 50);
// The table `run --by-stack` prints: sites, then frames.
[[nodiscard]] std::string by_stack_text(const ByStack& b, size_t rows = 15, const std::string& indent = "    ");

// The icicle: {"names": [...], "nodes": [[name index, parent, bytes, buffers], ...]} in depth-first
// order (parents first); node 0 is the root (all live bytes). Nodes under `min_share` of the root
// merge into one "(other)" child per parent; at most `max_nodes` nodes.
[[nodiscard]] nlohmann::json flame_json(const std::vector<SiteBytes>& sites, const SiteBytes& other,
                                        const StackFrames& stacks, size_t max_nodes = 400, double min_share = 0.002);

}  // namespace fragsim
