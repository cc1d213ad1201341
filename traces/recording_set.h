// Several recordings of one job replayed as one multi-device run (docs/importers.md, "Sets of
// recordings"): PyTorch jobs write one snapshot per rank (`snapshot_rank{N}.pickle`), given as a
// directory that holds them or as a comma-separated list of files, or one profiler trace per rank
// (a TensorBoard log directory's workers, traces/kineto.h, or files joined by commas).
//
//   devices  those of each file's memory events (a stack or a mark names none), numbered after
//            the previous files' (a file with one device — the usual rank snapshot — is device N
//            for rank N when every name says its rank, or every recording does: a profiler
//            trace's distributedInfo); two files of one rank are an input error;
//            the header's `device_names` name them "rank N" (or the file's whole name);
//   events   merged by time (stable: ties keep file order), each file's own order kept, after
//            what every file shows from before it began (pre_trace events and the stacks and
//            marks among them: file after file, at the set's first time); one clock (files in
//            other units merged in ns; a file without times makes the set one); stack ids are made
//            distinct per file; allocation ids are per device already;
//   header   the first file's, with `recorded_devices` renumbered, `recorded_hardware` the first's
//            that names one with each device's own memory (`devices`) where they differ, and
//            `recording_set` listing the files and their devices.
// A profile directory of XProf captures (one per host) is the importer's own (xprof_capture.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "traces/trace_reader.h"

namespace fragsim {

// A directory holding PyTorch snapshots (*.pickle, *.pickle.zst), or "a.pickle,b.pickle,..." (the
// pieces snapshots or profiler traces, traces/kineto.h).
[[nodiscard]] bool is_recording_set(const std::string& path);
// "a,b,...": a path with a comma that names no file or folder, read as a list of files (a set, or
// a capture and its memory profile), never as one file of its last piece's format.
[[nodiscard]] bool is_file_list(const std::string& path);
[[nodiscard]] std::unique_ptr<TraceReader> make_recording_set_reader(const std::string& path, const ReaderOptions& opt);
// The set of these files, named `path` in messages (a profile directory's workers).
[[nodiscard]] std::unique_ptr<TraceReader> make_recording_set_reader(const std::string& path,
                                                                     std::vector<std::string> files,
                                                                     const ReaderOptions& opt);

}  // namespace fragsim
