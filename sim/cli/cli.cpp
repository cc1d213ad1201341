#include "sim/cli/cli.h"

#include <fmt/format.h>

#include <cctype>
#include <iostream>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim/base/limits.h"
#include "sim/engine/progress.h"

namespace fragsim::cli {

bool parse(const Args& args, po::options_description& desc, const std::vector<std::pair<std::string, int>>& positionals,
           const std::string& usage, po::options_description hidden) {
  std::vector<std::string> limits;
  desc.add_options()("help,h", "show this help")(
      "limit", po::value(&limits)->composing()->value_name("KEY=VALUE"),
      ("set a limit on what an input may make fragsim hold instead of its default, which grows with the input's "
       "size; KEY one of " +
       limit_keys() + ", VALUE a size, a count or none (repeatable; fragsim --help, docs/limits.md)")
          .c_str());
  po::positional_options_description pos;
  for (const auto& [name, n] : positionals) pos.add(name.c_str(), n);
  po::options_description all;
  all.add(desc).add(hidden);
  auto shown = [&](std::string m) {
    for (const auto& [name, n] : positionals) {
      std::string upper = name;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      for (const std::string& form : {"'--" + name + "'", "--" + name})
        for (size_t at; (at = m.find(form)) != std::string::npos;) m.replace(at, form.size(), upper);
    }
    return m;
  };
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n" << desc << "\n";
      return true;
    }
    po::notify(vm);
    for (const auto& l : limits) set_limit(l);
  } catch (const po::required_option& e) {
    std::string name = e.get_option_name();
    throw InputError(shown(name.rfind("--", 0) == 0 && hidden.find_nothrow(name.substr(2), false)
                               ? "missing " + name + " (" + usage.substr(0, usage.find('\n')) + ")"
                               : e.what()));
  } catch (const po::error& e) {
    throw InputError(shown(e.what()));
  }
  return false;
}

po::options_description hidden_option(const char* name, std::string* value) {
  po::options_description h;
  h.add_options()(name, po::value(value)->required(), name);
  return h;
}

void Threads::add(po::options_description& d, const std::string& how) {
  d.add_options()("progress", po::bool_switch(&on),
                  "show a progress line on stderr (share of the input, events/s, ETA); the default when stderr is "
                  "a terminal")("no-progress", po::bool_switch(&off), "never show the progress line")(
      "jobs,j", po::value(&jobs)->default_value(0), ("threads at most (0 = every core, else 1..1024): " + how).c_str());
}
bool Threads::progress() const {
  if (on && off) throw InputError("--progress and --no-progress: choose one");
  return on || (!off && stderr_is_terminal());
}
unsigned Threads::threads() const {
  if (jobs < 0 || jobs > 1024) throw InputError(fmt::format("--jobs: must be in 0..1024, got {}", jobs));
  return static_cast<unsigned>(jobs);
}

bool to_stdout(std::initializer_list<std::string> outputs) {
  for (const auto& o : outputs)
    if (o == "-") return true;
  return false;
}
void write_if(const std::string& path, const std::function<std::string()>& content) {
  if (!path.empty()) write_file_atomic(path, content());
}

void add_window_options(po::options_description& d, std::string* from, std::string* to) {
  d.add_options()("from", po::value(from)->value_name("EVENT|TIME"),
                  "the HTML report shows the run from this event index (1200) or time from the first event (2.5s, "
                  "300ms): memory over time, buffers, allocator states; the replay and its figures stay whole")(
      "to", po::value(to)->value_name("EVENT|TIME"), "... up to this event index or time (inclusive)");
}

}  // namespace fragsim::cli
