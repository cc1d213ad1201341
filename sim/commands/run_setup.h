// Run setup: what a user asks of a run, as the command line (or a manifest line, or Python)
// states it, turned into RunOptions with every default chosen from the input — the hardware the
// recording names, the policy that models the recording, its recorded settings — and each choice
// the input did not make written down as a note. command_line() writes a request back as the
// fragsim command that reproduces it, so that a printed suggestion, pasted, does what it says.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "sim/base/option_names.h"
#include "sim/engine/engine.h"

namespace fragsim {

// Every member has a default, so that a request names only what it sets: {.trace = T, .policy = P}.
struct RunRequest {
  std::string trace{};
  std::string hw{};        // preset or FILE.json; "" = the recording's device, else h100-80g
  std::string capacity{};  // --capacity SIZE (with a unit); "" = the preset's or the recording's
  std::string reserve{};   // --reserve SIZE; "" = the preset's
  std::string policy{};    // POLICY or POLICY[k=v,...]; "" = chosen by --env, else by the recording and hardware
  std::vector<std::string> sets{}, envs{};  // --set KEY=VALUE, --env VAR=VALUE
  bool keep_going = false, lenient = false, check = false;
  bool follow_recording = false;   // --follow-recording (sim/engine/recording_fidelity.h)
  std::string pre_trace = "auto";  // --pre-trace auto|recorded|rebuilt (sim/engine/prior_state.h)
  bool strict = false;             // --strict: a recording with nothing to replay is an input error
  // --failed-alloc [DEVICE:]SIZE[@EVENT]: a request the program failed on, inserted before event
  // EVENT, else after the last (an XProf capture records only the allocations that succeeded).
  std::vector<std::string> failed_allocs{};
  std::int64_t shard = 1;  // signed: "-1" is refused as -1, not read as 4294967295
  std::string shard_dim = "major";
  // A trace held in memory instead of a file (a front end's: the Python module's snapshot dict or
  // list of events); `trace` then only names it in reports and messages. Empty: read the file.
  TraceSource source{};
  std::uint64_t source_bytes = 0;             // with a source: its size in memory, what its input limits scale with
  const std::atomic<bool>* cancel = nullptr;  // RunOptions::cancel of every run the request makes
  OptionNames names{};                        // how the caller names these options (the Python module's keywords)
};

// Checks the request against the registry and the trace's recording, chooses what it leaves
// open, and notes each choice (RunOptions::notes). Throws InputError (a bad or meaningless
// request: a size without a unit, a TPU-only policy on a GPU, a variable of another framework),
// EnvError (the trace cannot be read).
// `recording`: the trace's, when the caller has read it already (read_recording), else it is read.
[[nodiscard]] RunOptions prepare_run(const RunRequest& req, const Registry& reg, const Recording* recording = nullptr);

// What the trace's header says about its recording (opens the trace; EnvError/InputError).
[[nodiscard]] Recording read_recording(const std::string& trace, bool lenient);
// The request's trace: its source when it has one, else the file.
[[nodiscard]] Recording read_recording(const RunRequest& req);

// The policy's config as it resolves for the first device's main memory on this run (recorded
// settings applied): what its what-ifs and advice read. Builds nothing.
[[nodiscard]] nlohmann::json resolved_config(const RunOptions& o, const Recording& recording, const Registry& reg);

// Whose words a run's advice and sweeps speak: the framework that recorded the trace, and the
// platform of the device the run models (the recording's where the hardware names no vendor).
[[nodiscard]] Vocabulary vocabulary_of(const Recording& recording, const HardwareModel& hw);

// Notes that depend on how the run went (RunResult::notes): for an XProf capture that OOMs without
// --failed-alloc, that a capture holds only the requests that succeeded and how to replay the one
// a program failed on.
void add_outcome_notes(const RunRequest& req, RunResult& r);

// The hardware a request runs on: --hw, else the device the recording names, else h100-80g;
// then --capacity and --reserve. Adds a note for every choice the request did not make.
[[nodiscard]] HardwareModel choose_hardware(const RunRequest& req, const Recording& recording,
                                            std::vector<std::string>* notes);

// "fragsim run TRACE --hw … --policy '…' --env …": the request as a command, each argument quoted
// for a POSIX shell where it needs it; `command` is run, sweep or compare; `extra` goes last.
[[nodiscard]] std::string command_line(const RunRequest& req, const std::string& command = "run",
                                       const std::vector<std::string>& extra = {});

// The request with VAR=VALUE given as an --env (replacing that variable) or KEY=VALUE as a --set
// (replacing that key). The policy's own options in brackets win over both, so the key (for an
// --env, config_key: the option the variable sets) leaves them, and a --set of it, which wins over an
// --env, leaves too.
[[nodiscard]] RunRequest with_env(RunRequest req, const std::string& var_value, const std::string& config_key = "");
[[nodiscard]] RunRequest with_set(RunRequest req, const std::string& key_value);

// A POSIX shell word: s itself when it holds only safe characters, else single-quoted.
[[nodiscard]] std::string shell_quote(const std::string& s);

// The events a run of the request reads: `base` (the request's source, or the file when null),
// then the requests of --failed-alloc. InputError for a malformed --failed-alloc.
[[nodiscard]] TraceSource request_source(const RunRequest& req, TraceSource base);

// --strict: a run of a recording with nothing to replay fails as bad input (before any output).
void enforce_strict(const RunRequest& req, const RunResult& r);

// What a set of runs reads, as run_simulations reads it (sim/engine/engine.h), for the progress line:
// (trace, passes) — the online runs of a trace share one decode; an offline run reads it twice.
[[nodiscard]] std::vector<std::pair<std::string, double>> reads_of(const std::vector<RunOptions>& runs,
                                                                   const Registry& reg);

}  // namespace fragsim
