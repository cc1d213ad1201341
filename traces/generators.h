// Synthetic workload generators (`fragsim gen`): seeded, deterministic on every platform (own
// PRNG and distributions), each a recognisable real allocation pattern with size knobs.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fragsim {

struct WorkloadInfo {
  std::string name;
  std::string summary;
};
const std::vector<WorkloadInfo>& list_workloads();

// Writes the workload to path (.jsonl, .jsonl.zst, .fstrace). settings: the --set knobs.
// Returns the resolved knobs. Throws InputError on unknown workloads/knobs.
nlohmann::json generate_workload(const std::string& name, std::uint64_t seed, const nlohmann::json& settings,
                                 const std::string& path);

}  // namespace fragsim
