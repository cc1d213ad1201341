// OOM reports people act on (issue 13): the failing request and the live set named in the text,
// JSON and HTML reports of a JAX OOM and a PyTorch OOM (bundled samples), and advice that names
// the setting of the framework the user runs and never one already set.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <catch2/catch.hpp>
#include <map>

#include "test_util.h"

using namespace fragsim::test;

namespace {

const std::string kJax = std::string(FRAGSIM_SOURCE_DIR) + "/traces/samples/jax_train_small.jsonl";
const std::string kTorchOom = std::string(FRAGSIM_SOURCE_DIR) + "/tests/data/torch/expandable_3dev_oom.pickle.zst";

nlohmann::json html_data(const std::string& path) {
  std::string h = read_text(path);
  const std::string open = "<script type=\"application/json\" id=\"fragsim-data\">";
  auto a = h.find(open) + open.size();
  return nlohmann::json::parse(h.substr(a, h.find("</script>", a) - a));
}

std::string advice_of(const std::string& args) {
  auto r = cli("run " + args);
  REQUIRE(r.code == 0);
  std::string out;
  for (size_t p = r.out.find("  advice: "); p != std::string::npos; p = r.out.find("  advice: ", p + 1))
    out += r.out.substr(p, r.out.find('\n', p) - p) + "\n";
  return out;
}

// 64 live 1 MiB buffers fill 64 MiB; every other one is freed; a 2 MiB request finds 32 MiB free
// in 1 MiB holes: a fragmentation OOM under BFC and PyTorch's caching allocator alike.
std::string fragmentation_trace() {
  std::string t = "{\"fragsim_trace\":1}\n";
  for (int i = 1; i <= 64; ++i) t += fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":1048576}}\n", i);
  for (int i = 2; i <= 64; i += 2) t += fmt::format("{{\"op\":\"free\",\"id\":{}}}\n", i);
  t += "{\"op\":\"alloc\",\"id\":100,\"size\":2097152,\"name\":\"big\"}\n";
  return write_text("frag.jsonl", t);
}

}  // namespace

TEST_CASE("oom reports: a JAX OOM names the failing buffer and the live set in text, JSON and HTML") {
  std::string js = tmp_path("jax_oom.json"), html = tmp_path("jax_oom.html");
  auto r = cli("run " + kJax + " --policy xla-bfc --capacity 1GiB --json " + js + " --html " + html);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(read_text(js));
  REQUIRE(j["oom_count"] == 1);
  const auto& o = j["ooms"][0];
  // The trace's own line for the failing event: its name, shape and dtype are what reports show.
  auto lines = read_jsonl(kJax);
  const auto& ev = lines.at(o["event_index"].get<size_t>() + 1);  // + the header line
  REQUIRE(ev["op"] == "alloc");
  CHECK(o["request"]["id"] == ev["id"]);
  CHECK(o["request"]["name"] == ev["name"]);
  CHECK(o["request"]["shape"] == ev["shape"]);
  CHECK(o["request"]["dtype"] == ev["dtype"]);
  std::vector<std::uint64_t> dims = ev["shape"];
  std::string shape = fmt::format("{}[{}]", ev["dtype"].get<std::string>(), fmt::join(dims, ","));
  CHECK(r.out.find("): " + ev["name"].get<std::string>() + " " + shape) != std::string::npos);
  // The live set at the OOM: the largest live buffers, largest first, each live at that event.
  std::map<std::uint64_t, nlohmann::json> live;
  for (size_t i = 1; i < o["event_index"].get<size_t>() + 1; ++i) {
    if (lines[i]["op"] == "alloc") live[lines[i]["id"]] = lines[i];
    if (lines[i]["op"] == "free") live.erase(lines[i]["id"].get<std::uint64_t>());
  }
  const auto& at = o["at_oom"];
  CHECK(at["live_buffers"] == live.size());
  REQUIRE(at["top_buffers"].size() == std::min<size_t>(20, live.size()));
  std::uint64_t prev = UINT64_MAX;
  for (const auto& b : at["top_buffers"]) {
    REQUIRE(live.count(b["id"]) == 1);
    CHECK(b["name"] == live[b["id"]]["name"]);
    CHECK(b["requested_bytes"] == live[b["id"]]["size"]);
    CHECK(b["block_bytes"].get<std::uint64_t>() <= prev);
    prev = b["block_bytes"];
  }
  CHECK(r.out.find("largest live buffers (20 of " + std::to_string(live.size()) + ")") != std::string::npos);
  // The peak of allocated memory came just before the OOM, with the same live set. (Regression: the
  // peak's snapshot was taken after the replay had stopped, when later allocs had reused handles.)
  CHECK(j["at_peak_allocated"]["event_index"].get<size_t>() < o["event_index"].get<size_t>());
  CHECK(j["at_peak_allocated"]["live_buffers"] == live.size());
  REQUIRE(j["at_peak_allocated"]["top_buffers"].size() == at["top_buffers"].size());
  for (size_t i = 0; i < at["top_buffers"].size(); ++i)
    CHECK(j["at_peak_allocated"]["top_buffers"][i]["id"] == at["top_buffers"][i]["id"]);
  // HTML: the OOM row and the moment at the OOM.
  auto d = html_data(html);
  CHECK(d["runs"][0]["ooms"][0]["name"] == ev["name"]);
  CHECK(d["runs"][0]["ooms"][0]["shape"] == shape);
  CHECK(d["runs"][0]["moments"][1]["top"][0]["name"] == at["top_buffers"][0]["name"]);
}

TEST_CASE("oom reports: a PyTorch OOM names the request frame and the live set, and its advice repeats no setting") {
  std::string js = tmp_path("torch_oom.json"), html = tmp_path("torch_oom.html");
  auto r = cli("run " + kTorchOom + " --json " + js + " --html " + html);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(read_text(js));
  CHECK(j["policy"]["name"] == "torch-caching");  // the default for a snapshot
  REQUIRE(j["oom_count"] == 1);
  const auto& o = j["ooms"][0];
  CHECK(o["device"] == 1);
  CHECK(o["cause"] == "capacity");
  std::string name = o["request"]["name"], frame = o["request"]["frame"];
  CHECK(name == "models.py:181 update_nodes");  // the innermost frame outside torch (docs/importers.md)
  CHECK(frame.find("functional.py:1701 relu") != std::string::npos);
  CHECK(r.out.find("): " + name + "  at " + frame) != std::string::npos);
  const auto& at = o["at_oom"];
  CHECK(at["top_buffers"].size() == 20);
  for (const auto& b : at["top_buffers"]) CHECK(b.contains("name"));
  auto d = html_data(html);
  CHECK(d["runs"][0]["ooms"][0]["name"] == name);
  CHECK(d["stacks"].contains(d["runs"][0]["ooms"][0]["stack"].get<std::string>()));
  // The snapshot recorded expandable segments on: the advice is about capacity, not that setting.
  CHECK(j["policy"]["config"]["resolved_expandable_segments"] == true);
  for (const auto& a : j["advice"]) CHECK(a.get<std::string>().find("expandable_segments:True") == std::string::npos);
}

TEST_CASE("oom reports: advice names the framework's own setting and never one that is already set") {
  std::string t = fragmentation_trace();
  const std::string dev = " --capacity 64MiB --reserve 0";
  // JAX, preallocating: grow on demand or cuda_async; JAX's variables only.
  std::string a = advice_of(t + " --env XLA_PYTHON_CLIENT_MEM_FRACTION=1.0" + dev);
  CHECK(a.find("fragmentation: XLA_PYTHON_CLIENT_PREALLOCATE=false") != std::string::npos);
  for (const char* other : {"TF_GPU_ALLOCATOR", "PYTORCH", "TF_FORCE"}) CHECK(a.find(other) == std::string::npos);
  // JAX with preallocation already off: not suggested again.
  a = advice_of(t + " --env XLA_PYTHON_CLIENT_PREALLOCATE=false --env XLA_PYTHON_CLIENT_MEM_FRACTION=1.0" + dev);
  CHECK(a.find("PREALLOCATE") == std::string::npos);
  CHECK(a.find("XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async") != std::string::npos);
  // PyTorch: expandable segments, unless on; then the next setting not yet set.
  a = advice_of(t + " --policy torch-caching" + dev);
  CHECK(a.find("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") != std::string::npos);
  CHECK(a.find("XLA_") == std::string::npos);
  a = advice_of(t + " --env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" + dev);
  CHECK(a.find("expandable_segments:True") == std::string::npos);
  CHECK(a.find("max_split_size_mb") != std::string::npos);
  a = advice_of(t + " --env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:256" + dev);
  CHECK(a.find("max_split_size_mb") == std::string::npos);
  CHECK(a.find("garbage_collection_threshold") != std::string::npos);
  // A capacity OOM under JAX: the fraction when the pool stopped at its limit, else the device.
  a = advice_of(kJax + " --policy xla-bfc --capacity 2GiB --set mem_fraction=0.3");
  CHECK(a.find("XLA_PYTHON_CLIENT_MEM_FRACTION is 0.3") != std::string::npos);
  a = advice_of(kJax + " --policy xla-bfc --capacity 1GiB");  // 0.75 of 1 GiB exceeds what the device gives
  CHECK(a.find("MEM_FRACTION") == std::string::npos);
  CHECK(a.find("--find min-capacity") != std::string::npos);
}
