// `fragsim compare`: several policies on one or more traces, as one table. With no --policies
// the list follows the input: the lower bound (ideal), the policy a run would choose (the
// recorded allocator with its recorded settings) and that policy's what-ifs (PolicyInfo::what_ifs:
// expandable segments, growth instead of preallocation, another of the framework's allocators).
#pragma once
#include <string>
#include <vector>

#include "sim/commands/run_setup.h"

namespace fragsim {

struct CompareRequest {
  RunRequest base{};                  // trace (the first), hardware, settings shared by every entry
  std::vector<std::string> traces{};  // every trace, the base's first
  std::string policies{};             // "A,B[k=v],..."; "" = the defaults for the input
  // Per trace, a source holding it in memory (RunRequest::source), or empty (read the file);
  // traces past its end are files. base.source is not used.
  std::vector<TraceSource> sources{};
  std::vector<std::uint64_t> source_bytes{};  // of each source held in memory (RunRequest::source_bytes)
};

struct ComparePlan {
  std::vector<RunOptions> runs;      // traces × entries, in that order, each with its label
  std::vector<RunRequest> requests;  // the request of each run (the advice's replays start from it)
  std::vector<std::string> entries;
};

// Throws InputError on a bad entry (before any trace is replayed) or a bad request.
[[nodiscard]] ComparePlan prepare_compare(const CompareRequest& req, const Registry& reg);

// The default entries for one trace: the lower bound, the chosen policy, its what-ifs (each with the
// recording framework's setting that selects it).
[[nodiscard]] std::vector<WhatIf> default_compare_entries(const RunRequest& req, const Recording& recording,
                                                          const Registry& reg);

// Labels for the runs of `compare` (each trace's entries, trace-major), unique: the entry alone for
// one trace, else "TRACE: entry" with TRACE the file's name, or its path where two traces share a
// name; a label that still repeats (a policy entry given twice) gets " #2", " #3", ...
[[nodiscard]] std::vector<std::string> compare_labels(const std::vector<std::string>& traces,
                                                      const std::vector<std::vector<std::string>>& entries);

}  // namespace fragsim
