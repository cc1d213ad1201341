// The options that state a run (RunRequest), as one table that `fragsim run`, `compare`, `sweep`
// and the lines of a batch manifest all read: the same words mean the same thing everywhere.
#pragma once
#include <boost/program_options/options_description.hpp>
#include <string>
#include <vector>

#include "sim/commands/batch.h"
#include "sim/commands/run_setup.h"

namespace fragsim {

// --hw, --capacity, --reserve, --set, --env, --keep-going, --lenient, --check, --follow-recording,
// --strict, --failed-alloc, --shard, --shard-dim
// (the trace is positional; --policy is each command's own: run takes one, compare a list).
void add_run_request_options(boost::program_options::options_description& d, RunRequest& r);

// A manifest line (`TRACE [run options] [--label NAME]`) as a request and its label (the line's
// text when it names none). InputError naming the manifest's FILE:LINE for a malformed line.
[[nodiscard]] RunRequest parse_manifest_line(const Manifest& m, const BatchEntry& e, std::string* label);

}  // namespace fragsim
