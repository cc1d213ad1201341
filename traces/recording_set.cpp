#include "traces/recording_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "traces/kineto.h"

namespace fragsim {

namespace {

bool is_snapshot_file(const std::string& p) {
  return ends_with(p, ".pickle") || ends_with(p, ".pickle.zst") || ends_with(p, ".pkl") || ends_with(p, ".pkl.zst");
}

// A member of a set: a snapshot or a profiler trace (a folder of traces is the Kineto reader's).
bool is_member_file(const std::string& p) { return is_snapshot_file(p) || is_kineto_file(p); }

std::vector<std::string> set_files(const std::string& path) {
  std::vector<std::string> files;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(path, ec))
      if (e.is_regular_file(ec) && is_snapshot_file(e.path().string())) files.push_back(e.path().string());
  } else if (path.find(',') != std::string::npos) {
    size_t at = 0;
    while (at <= path.size()) {
      size_t comma = path.find(',', at);
      if (comma == std::string::npos) comma = path.size();
      if (comma > at) files.push_back(path.substr(at, comma - at));
      at = comma + 1;
    }
  }
  return files;
}

// The rank a file's name states ("snapshot_rank3.pickle" → 3), or -1: the whole number, never its
// first digits (snapshot_rank1234567 was read as rank 123456), and none past the 32-bit device
// ordinals a rank becomes.
long rank_of(const std::string& file) {
  std::string stem = std::filesystem::path(file).filename().string();
  size_t at = stem.rfind("rank");
  if (at == std::string::npos) return -1;
  at += 4;
  while (at < stem.size() && (stem[at] == '_' || stem[at] == '-')) ++at;
  size_t end = at;
  while (end < stem.size() && std::isdigit(static_cast<unsigned char>(stem[end]))) ++end;
  if (end == at || end - at > 10) return -1;
  const std::uint64_t rank = std::stoull(stem.substr(at, end - at));
  return rank <= UINT32_MAX ? static_cast<long>(rank) : -1;
}

// Natural order: snapshot_rank2 before snapshot_rank10.
bool file_before(const std::string& a, const std::string& b) {
  long ra = rank_of(a), rb = rank_of(b);
  if (ra >= 0 && rb >= 0 && ra != rb) return ra < rb;
  return a < b;
}

class SetReader : public TraceReader {
 public:
  SetReader(const std::string& path, std::vector<std::string> files, const ReaderOptions& opt)
      : TraceReader(path, opt) {
    std::sort(files.begin(), files.end(), file_before);
    // A file's rank: its name's ("rank3"), else the one its recording states (a profiler trace's
    // distributedInfo), when every file has one and no two share it; then files in rank order.
    std::vector<long> rank(files.size());
    std::vector<std::unique_ptr<TraceReader>> readers;
    for (size_t i = 0; i < files.size(); ++i) {
      if (is_recording_set(files[i])) throw InputError(files[i] + ": a set inside a set of recordings");
      for (size_t j = 0; j < i; ++j) {
        std::error_code ec;
        if (std::filesystem::equivalent(files[i], files[j], ec))
          throw InputError(fmt::format(
              "{}: given twice in one set of recordings (also as {}): one rank replayed as two", files[i], files[j]));
      }
      if (!is_member_file(files[i]))
        throw InputError(files[i] +
                         ": not a PyTorch snapshot or profiler trace; a comma-separated list is one job's ranks, each "
                         "a snapshot (.pickle) or a profiler trace (.json)");
      readers.push_back(uncounted(open_trace(files[i], ReaderOptions{opt.lenient})));  // the set counts its events
      rank[i] = rank_of(files[i]);
      const std::optional<std::uint32_t> stated = readers.back()->recording().rank;
      // A name that contradicts the recording's own rank (a file renamed or mislabelled) would
      // number it onto another rank's device: which is right is for the user to say.
      if (rank[i] >= 0 && stated && static_cast<long>(*stated) != rank[i])
        throw InputError(fmt::format(
            "{}: its name says rank {} and its recording says rank {} (distributedInfo): rename it to the rank it is",
            files[i], rank[i], *stated));
      if (rank[i] < 0 && stated) rank[i] = *stated;
    }
    std::set<long> ranks(rank.begin(), rank.end());
    const bool named = !ranks.count(-1) && ranks.size() == files.size();
    // Two files of one rank are two recordings of one process (two runs mixed, a profile kept under
    // two names): which one the job ran is for the user to say, not a device to invent.
    std::map<long, size_t> first_of_rank;
    for (size_t i = 0; i < files.size(); ++i)
      if (auto [it, fresh] = first_of_rank.emplace(rank[i], i); rank[i] >= 0 && !fresh)
        throw InputError(
            fmt::format("{}: rank {}, as {} is: one rank recorded twice in one set of recordings "
                        "(give one file per rank)",
                        files[i], rank[i], files[it->second]));
    if (named) {
      std::vector<size_t> order(files.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank[a] < rank[b]; });
      std::vector<std::string> f2;
      std::vector<long> r2;
      std::vector<std::unique_ptr<TraceReader>> rd2;
      for (size_t i : order) f2.push_back(files[i]), r2.push_back(rank[i]), rd2.push_back(std::move(readers[i]));
      files = std::move(f2), rank = std::move(r2), readers = std::move(rd2);
    }
    // Each file's devices: those its memory events use (read once: snapshots and traces are read
    // whole anyway). A stack definition or a mark names no device: a profiler trace recorded with
    // with_stack=True on cuda:1 defines stacks, and its device is 1 alone, not 0 and 1.
    std::vector<std::set<std::uint32_t>> used(files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      auto probe = uncounted(open_trace(files[i], ReaderOptions{opt.lenient}));
      Event e;
      while (probe->next(e))
        if (e.op != Op::kStack && (e.op != Op::kMark || e.has(key::kDevice))) used[i].insert(e.device);
      if (used[i].empty()) used[i].insert(0);
    }
    // Rank N is device N when every file states a distinct rank and has one device; otherwise (a
    // rank with two devices beside a rank with one) each file's devices follow the previous files'
    // — ranks numbered onto one device would be replayed as one GPU.
    const bool by_rank = named && std::all_of(used.begin(), used.end(), [](const auto& u) { return u.size() == 1; });
    nlohmann::json members = nlohmann::json::array(), names = nlohmann::json::object(),
                   recorded = nlohmann::json::array(), kineto, hardware, hardware_devices = nlohmann::json::array(),
                   device_settings = nlohmann::json::array();
    std::uint64_t next_device = 0;
    for (size_t i = 0; i < files.size(); ++i) {
      Member m;
      m.reader = std::move(readers[i]);
      const long rank_i = named ? rank[i] : -1;
      if (next_device + used[i].size() > std::uint64_t{UINT32_MAX} + 1)
        throw InputError(files[i] + ": its devices, after the earlier files', are beyond the 32-bit device ordinals");
      const std::uint32_t base = by_rank ? static_cast<std::uint32_t>(rank_i) : static_cast<std::uint32_t>(next_device);
      std::string who =
          rank_i >= 0 ? fmt::format("rank {}", rank_i) : std::filesystem::path(files[i]).filename().string();
      nlohmann::json devs = nlohmann::json::array();
      std::uint32_t k = 0;
      for (auto d : used[i]) {
        const std::uint32_t to = base + k;
        m.device[d] = to;
        names[std::to_string(to)] = used[i].size() == 1 ? who : fmt::format("{} device {}", who, d);
        devs.push_back(to);
        next_device = std::max<std::uint64_t>(next_device, std::uint64_t{to} + 1);
        ++k;
      }
      const nlohmann::json& h = m.reader->header();
      if (i == 0 && h.is_object()) header_ = h;
      // Each process configured its own allocator: a member whose recorded settings are not the
      // first's keeps them for its devices (the set's header states the first's).
      auto settings_of = [](const nlohmann::json& x) {
        nlohmann::json s = nlohmann::json::object();
        for (const char* k : {"allocator_settings", "inferred_allocator_settings"})
          if (x.is_object() && x.contains(k)) s[k] = x[k];
        return s;
      };
      if (const nlohmann::json own = settings_of(h); i > 0 && own != settings_of(header_))
        for (auto d : used[i]) {
          nlohmann::json e = own;
          e["device"] = m.device[d];
          device_settings.push_back(std::move(e));
        }
      // The memory each device reported in its own recording (a profiler trace's deviceProperties):
      // a set may mix GPUs, and each rank runs on its own.
      if (h.is_object() && h.contains("recorded_hardware") && h["recorded_hardware"].is_object()) {
        const nlohmann::json& hw = h["recorded_hardware"];
        if (!hardware.is_object()) hardware = hw;
        if (hw.contains("capacity_bytes") && hw["capacity_bytes"].is_number_unsigned())
          for (auto d : used[i])
            hardware_devices.push_back({{"device", m.device[d]},
                                        {"capacity_bytes", hw["capacity_bytes"]},
                                        {"basis", hw.value("device", hw.value("basis", std::string()))}});
      }
      if (h.is_object() && h.contains("recorded_devices") && h["recorded_devices"].is_array())
        for (auto d : h["recorded_devices"])
          if (d.is_object() && d.contains("device") && d["device"].is_number_unsigned())
            if (auto it = m.device.find(d["device"].get<std::uint32_t>()); it != m.device.end()) {
              d["device"] = it->second;
              recorded.push_back(d);
            }
      // A profiler trace's own figures per device (info shows them): every rank's, renumbered.
      if (h.is_object() && h.contains("kineto") && h["kineto"].is_object()) {
        nlohmann::json k = h["kineto"];
        auto renumber = [&](nlohmann::json& d) {
          if (d.is_object() && d.contains("device") && d["device"].is_number_unsigned())
            if (auto it = m.device.find(d["device"].get<std::uint32_t>()); it != m.device.end())
              d["device"] = it->second;
        };
        if (!kineto.is_object()) {
          kineto = k;
          kineto.erase("rank");  // each file's own (the set's devices are named by rank)
          kineto.erase("world_size");
          kineto["devices"] = nlohmann::json::array();
          kineto["events"] = 0;
          kineto.erase("host");
        }
        kineto["events"] = kineto["events"].get<std::uint64_t>() + k.value("events", std::uint64_t{0});
        for (auto d : k.value("devices", nlohmann::json::array())) renumber(d), kineto["devices"].push_back(d);
        if (k.contains("host")) {
          nlohmann::json host = k["host"];
          renumber(host);
          kineto["hosts"].push_back(host);
        }
      }
      members.push_back({{"file", files[i]}, {"devices", devs}});
      m.stack_base = static_cast<std::uint64_t>(i) << 40;  // distinct stack ids per file
      members_.push_back(std::move(m));
    }
    if (!header_.is_object()) header_ = {{"fragsim_trace", 1}};
    // The set's hardware is the first recording's that names one; each device keeps its own memory.
    if (hardware.is_object()) {
      header_["recorded_hardware"] = hardware;
      if (std::any_of(hardware_devices.begin(), hardware_devices.end(), [&](const auto& d) {
            return d["capacity_bytes"] != hardware.value("capacity_bytes", nlohmann::json());
          }))
        header_["recorded_hardware"]["devices"] = hardware_devices;
    }
    header_.erase("recorded_devices");
    if (!device_settings.empty()) header_["device_allocator_settings"] = device_settings;
    header_.erase("rank");  // each file's own
    if (!recorded.empty()) header_["recorded_devices"] = recorded;
    if (kineto.is_object()) header_["kineto"] = kineto;
    header_["recording_set"] = members;
    header_["device_names"] = names;
    // One clock for the set: files in different units (a snapshot's us, a profiler trace's ns) are
    // merged in ns; a file without times makes the set one (its events keep their order, and every
    // event's time is its index: no common clock exists).
    std::set<std::string> units;
    for (const auto& m : members_) units.insert(unit_of(m.reader->header()));
    for (auto& m : members_) {
      if (units.size() > 1) m.scale = ns_per_tick(unit_of(m.reader->header()));
      m.has = m.reader->next(m.next);
      m.in_prefix = m.has && among_before_recording(m.next);
      untimed_ = untimed_ || (m.has && !m.next.has(key::kT));
    }
    if (units.size() > 1) header_["time_unit"] = "ns";
    if (untimed_) header_.erase("time_unit");
    for (const auto& m : members_)
      if (m.has) first_t_ = std::min(first_t_, when(m));
    set_header(header_);
  }

 protected:
  bool read_raw(Event& ev) override {
    Member* pick = nullptr;
    // What each recording shows from before it began comes first, every file's, in file order: a
    // run takes the state before the recording from the events ahead of the first that is not
    // (sim/engine/prior_state.h), and a later rank's, at its own first time, would come after
    // the earlier ranks' events had begun (a what-if or a limit then never reached it). It is held
    // at the set's first time.
    for (auto& m : members_)
      if (m.in_prefix) {
        pick = &m;
        break;
      }
    if (!pick)
      for (auto& m : members_)  // the earliest next event; ties keep file order
        if (m.has && (!pick || when(m) < when(*pick))) pick = &m;
    if (!pick) return false;
    ev = pick->next;
    ev.t = pick->in_prefix ? first_t_ : when(*pick);
    if (untimed_) ev.present &= static_cast<std::uint16_t>(~key::kT);  // its index, as the set's other events
    ev.handle = kNoHandle;
    if (auto it = pick->device.find(ev.device); it != pick->device.end()) ev.device = it->second;
    if (ev.op == Op::kStack) ev.id = AllocId(ev.id.value() + pick->stack_base);
    if (ev.has(key::kStack)) ev.stack += pick->stack_base;
    if (ev.has(key::kDevice) || ev.device) ev.present |= key::kDevice;
    ev.line = ++line_;
    pick->has = pick->reader->next(pick->next);
    pick->in_prefix = pick->in_prefix && pick->has && among_before_recording(pick->next);
    return true;
  }

 private:
  struct Member {
    std::unique_ptr<TraceReader> reader;
    std::map<std::uint32_t, std::uint32_t> device;  // file's device → run's device
    std::uint64_t stack_base = 0;
    Event next;
    bool has = false;
    bool in_prefix = false;   // its events so far show the state before it began
    std::uint64_t scale = 1;  // the set's time units per one of its own
  };
  static std::string unit_of(const nlohmann::json& h) {
    return h.is_object() && h.contains("time_unit") && h["time_unit"].is_string() ? h["time_unit"].get<std::string>()
                                                                                  : "ns";
  }
  // A file's next event's time on the set's clock (saturating).
  static Tick when(const Member& m) {
    const std::uint64_t t = m.next.t.value();
    return Tick(t > std::numeric_limits<std::uint64_t>::max() / m.scale ? std::numeric_limits<std::uint64_t>::max()
                                                                        : t * m.scale);
  }
  std::vector<Member> members_;
  Tick first_t_{std::numeric_limits<std::uint64_t>::max()};  // the earliest first event of any file
  bool untimed_ = false;                                     // a file has no times: neither has the set
  std::uint64_t line_ = 0;
};

}  // namespace

bool is_file_list(const std::string& path) {
  std::error_code ec;
  return path.find(',') != std::string::npos && !std::filesystem::exists(path, ec);
}

bool is_recording_set(const std::string& path) {
  auto files = set_files(path);
  if (files.empty()) return false;
  std::error_code ec;
  // A list (no file of that name): its reader names a piece that is not a snapshot or a profiler
  // trace (a folder, a .jsonl), where the list read as one file's name was 'cannot open' (exit 3).
  if (!std::filesystem::is_directory(path, ec))
    return is_file_list(path) || std::all_of(files.begin(), files.end(), is_member_file);
  return true;
}

std::unique_ptr<TraceReader> make_recording_set_reader(const std::string& path, const ReaderOptions& opt) {
  auto files = set_files(path);
  if (files.empty()) throw InputError(path + ": no PyTorch snapshots (*.pickle) in this set");
  return std::make_unique<SetReader>(path, std::move(files), opt);
}

std::unique_ptr<TraceReader> make_recording_set_reader(const std::string& path, std::vector<std::string> files,
                                                       const ReaderOptions& opt) {
  return std::make_unique<SetReader>(path, std::move(files), opt);
}

}  // namespace fragsim
