// Advice after an OOM, proven by replay (architecture.md: "advice is produced by the policy,
// proven by a replay before it is printed").
//
// When the live buffers of the OOM's device and space alone need more than it can give, the
// answer is the memory the trace needs — no allocator setting helps, and none is suggested.
// Otherwise the policy proposes settings (PolicyInfo::advise) and each is replayed on the same
// trace and hardware, from the same request with that setting added: a setting with which the
// trace fits is printed with the command that reproduces it; one that does not is reported as
// tried. A memory-fraction proposal is answered by the sweep's search (the smallest fraction that
// fits). Every command printed is complete — trace, hardware, capacity, policy, settings.
#pragma once
#include <string>
#include <vector>

#include "sim/commands/run_setup.h"
#include "sim/engine/engine.h"

namespace fragsim {

// The advice lines for r (a run of `req`), or none when it completed. Replays on up to `threads`
// threads (run_simulations' rule).
[[nodiscard]] std::vector<std::string> proven_advice(const RunResult& r, const RunRequest& req, const Registry& reg,
                                                     unsigned threads);

// The waste split's advice line (waste_advice), crediting the allocator setting that recovers the
// most of the fragmentation: each setting the policy proposes against fragmentation is replayed on
// the same trace and hardware, and the one whose peak reserved memory on the binding space is
// lowest — below the run's, with no more OOMs — is named with what it recovers ("expandable
// segments recovers 5.4 GiB of it"). "" when the run needs no such line.
[[nodiscard]] std::string proven_waste_advice(const RunResult& r, const RunRequest& req, const Registry& reg,
                                              unsigned threads);

}  // namespace fragsim
