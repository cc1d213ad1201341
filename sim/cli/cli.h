// Helpers every command of the CLI uses (sim/cli/main.cpp): option parsing with positional
// arguments named as the usage line names them, the thread and progress options, outputs.
#pragma once
#include <boost/program_options.hpp>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace fragsim {
class Registry;
}

namespace fragsim::cli {

namespace po = boost::program_options;
using Args = std::vector<std::string>;

// Parses args; positional arguments are hidden options (named in `positionals`), shown in the
// usage line and in messages by their upper-case names, never as --trace. True: --help was shown.
bool parse(const Args& args, po::options_description& desc, const std::vector<std::pair<std::string, int>>& positionals,
           const std::string& usage, po::options_description hidden = po::options_description());

po::options_description hidden_option(const char* name, std::string* value);

// --progress / --no-progress, and --jobs N (0 = every core, else 1..1024, the decoding thread counted).
struct Threads {
  bool on = false, off = false;
  int jobs = 0;
  void add(po::options_description& d, const std::string& how);
  bool progress() const;
  unsigned threads() const;
};

// True when one of the outputs is standard output (the text summary then stays off it).
bool to_stdout(std::initializer_list<std::string> outputs);
// Writes what `content` makes to `path` unless the path is empty (then nothing is made: a run
// without --json does not build its JSON report).
void write_if(const std::string& path, const std::function<std::string()>& content);

// --from / --to (sim/engine/window.h): the window of the run the HTML report shows.
void add_window_options(po::options_description& d, std::string* from, std::string* to);

// The commands that replay nothing (sim/cli/tools.cpp); each returns its exit code.
int cmd_validate(const Args& args, const Registry& reg);
int cmd_info(const Args& args, const Registry& reg);
int cmd_convert(const Args& args, const Registry& reg);
int cmd_gen(const Args& args, const Registry& reg);
int cmd_layout(const Args& args, const Registry& reg);
int cmd_list(const Args& args, const Registry& reg);
int cmd_plan(const Args& args, const Registry& reg);

}  // namespace fragsim::cli
