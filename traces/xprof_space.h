// Loading XProf captures (XSpace protobufs), shared by the capture importer (xprof_capture.cpp)
// and the module reader (xla_modules.cpp); internal to traces/ (it names the generated classes).
#pragma once
#include <string>
#include <vector>

#include "sim/base/limits.h"
#include "xplane.pb.h"

namespace fragsim {

// The captures a path names: itself, or the *.xplane.pb[.zst] files of the one profile run under a
// folder (find_profile_run: any depth; InputError when none or several), sorted.
[[nodiscard]] std::vector<std::string> xprof_capture_files(const std::string& path);
// Parses one capture after counting what the parse would build against `objects` (proto_scan.h):
// InputError when it exceeds the limit or does not parse.
[[nodiscard]] xprof::XSpace load_xspace(const std::string& file, LimitCounter& objects);

}  // namespace fragsim
