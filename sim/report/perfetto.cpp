#include "sim/report/perfetto.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace fragsim {

namespace {

// A JSON string literal (names come from traces: quotes, control characters, any UTF-8).
std::string json_string(std::string_view s) { return dump_json(nlohmann::json(std::string(s))); }

std::string buffer_name(AllocId id, std::string_view name) {
  return name.empty() ? fmt::format("id {}", id) : std::string(name);
}

}  // namespace

PerfettoWriter::PerfettoWriter(const std::string& path, const std::string& time_unit) : file_(path) {
  to_us_ = static_cast<double>(ns_per_tick(time_unit)) * 1e-3;
  buf_ = "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"fragsim\"},\"traceEvents\":[\n";
}

std::string PerfettoWriter::ts(Tick t) const { return fmt::format("{:.3f}", static_cast<double>(t.value()) * to_us_); }

void PerfettoWriter::emit(const std::string& event) {
  if (!first_) buf_ += ",\n";
  first_ = false;
  buf_ += event;
  if (buf_.size() > (1u << 20)) {
    file_.write(buf_);
    buf_.clear();
  }
}

void PerfettoWriter::process(std::uint32_t device) {
  if (named_[device]) return;
  named_[device] = true;
  emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{0},"tid":0,"args":{{"name":"device {0}"}}}})", device));
  emit(
      fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{0},"tid":0,"args":{{"sort_index":{0}}}}})", device));
}

void PerfettoWriter::counter(Tick t, std::uint32_t device, Space space, Bytes allocated, Bytes reserved,
                             double fragmentation) {
  Last& l = last_[{device, space}];
  double pct = std::round(fragmentation * 1e4) / 1e2;
  if (l.allocated == allocated && l.reserved == reserved && l.frag == pct) return;
  process(device);
  if (l.allocated != allocated || l.reserved != reserved)
    emit(fmt::format(
        R"({{"ph":"C","name":"{} memory","pid":{},"tid":0,"ts":{},"args":{{"allocated":{},"reserved":{}}}}})",
        space_name(space), device, ts(t), allocated, reserved));
  if (l.frag != pct)
    emit(fmt::format(
        R"({{"ph":"C","name":"{} external fragmentation %","pid":{},"tid":0,"ts":{},"args":{{"percent":{}}}}})",
        space_name(space), device, ts(t), pct));
  l = {allocated, reserved, pct};
}

void PerfettoWriter::begin_buffer(Tick t, std::uint32_t device, Space space, AllocId id, std::string_view name,
                                  Bytes requested, Bytes block, bool has_addr, Addr addr) {
  process(device);
  emit(fmt::format(
      R"({{"ph":"b","cat":"{}","name":{},"id":"{}","pid":{},"tid":0,"ts":{},"args":{{"id":{},"requested_bytes":{},"block_bytes":{},"addr":{}}}}})",
      space_name(space), json_string(buffer_name(id, name)), id, device, ts(t), id, requested, block,
      has_addr ? fmt::format("\"0x{:x}\"", addr.value()) : std::string("null")));
}

void PerfettoWriter::end_buffer(Tick t, std::uint32_t device, Space space, AllocId id, std::string_view name) {
  emit(fmt::format(R"({{"ph":"e","cat":"{}","name":{},"id":"{}","pid":{},"tid":0,"ts":{}}})", space_name(space),
                   json_string(buffer_name(id, name)), id, device, ts(t)));
}

void PerfettoWriter::oom(Tick t, std::uint32_t device, Space space, AllocId id, std::string_view name, Bytes requested,
                         Bytes free, Bytes largest_free, std::string_view cause, std::string_view kind) {
  process(device);
  emit(fmt::format(
      R"({{"ph":"i","s":"p","cat":"oom","name":{},"pid":{},"tid":0,"ts":{},"args":{{"space":"{}","id":{},"requested_bytes":{},"free_bytes":{},"largest_free_bytes":{},"cause":{}{}}}}})",
      json_string("OOM: " + buffer_name(id, name)), device, ts(t), space_name(space), id, requested, free, largest_free,
      json_string(cause), kind.empty() ? std::string() : ",\"kind\":" + json_string(kind)));
}

void PerfettoWriter::mark(Tick t, std::string_view name) {
  emit(fmt::format(R"({{"ph":"i","s":"g","cat":"mark","name":{},"pid":0,"tid":0,"ts":{}}})", json_string(name), ts(t)));
}

void PerfettoWriter::commit() {
  buf_ += "\n]}\n";
  file_.write(buf_);
  buf_.clear();
  file_.commit();
}

ReplaySinkFactory perfetto_sink(const std::string& path) {
  return [path](const std::string& time_unit) { return std::make_unique<PerfettoWriter>(path, time_unit); };
}

}  // namespace fragsim
