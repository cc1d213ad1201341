// Issue 51 (a viewer that replaces memory_viz), issue 47 item 4 (the page tells the truth about a
// stopped run) and issue 54 item 4 (the page, polished): the data the page is drawn from — every
// allocation (sim/engine/allocation_log.h), every region over time (sim/engine/region_log.h),
// compiled modules — checked against the recordings' own facts, and the page itself in headless
// Chromium: every view present, zoom, the entries behind a click, search, a stopped run's end.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <set>

#include "html_util.h"
#include "sim/base/io.h"
#include "sim/engine/history.h"
#include "sim_helpers.h"
#include "test_util.h"
#include "traces/pickle.h"
#include "traces/torch_snapshot.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

const std::string kPagesEmptyCache = test_data("torch/sqattn_empty_cache.pickle.zst");
const std::string kPagesOomRetry = test_data("torch/oom_retry_release.pickle.zst");
const std::string kPagesJaxCapture = test_data("xprof/tracelens_jax_te_fused_attn_934987a2fc2f.xplane.pb.zst");

const RunHistory& pages_history(const CmdRun& r) {
  REQUIRE(r.result.history);
  return *r.result.history;
}

// The trace as fragsim reads it (every event, the header first), by `fragsim convert`.
std::vector<nlohmann::json> pages_converted(const std::string& trace) {
  const std::string out = tmp_path("converted.jsonl");
  REQUIRE(cli("convert " + trace + " " + out).code == 0);
  auto lines = read_jsonl(out);
  lines.erase(lines.begin());  // the header
  return lines;
}

}  // namespace

TEST_CASE("allocation log: every allocation of a run, as its trace and its placements file hold them") {
  const std::string placements = tmp_path("log_placements.jsonl");
  RunOutputs out = kWithHtml;
  out.placements = placements;
  CmdRun r = run_cmd({.trace = kSample, .policy = "best-fit"}, out);
  const AllocationLog& log = *pages_history(r).allocations;
  REQUIRE(log.slots() == 1);
  const auto recs = log.records(0);
  // The trace: each alloc's size and the event that frees it.
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> trace;  // alloc event → (size, free event)
  std::map<std::uint64_t, std::uint64_t> open;                             // id → its alloc event
  std::uint64_t index = 0;
  for (const auto& e : read_jsonl(kSample)) {
    if (e.contains("fragsim_trace")) continue;
    if (e["op"] == "alloc") {
      trace[index] = {e["size"].get<std::uint64_t>(), AllocationLog::kNone};
      open[e["id"].get<std::uint64_t>()] = index;
    } else if (e["op"] == "free") {
      trace[open.at(e["id"].get<std::uint64_t>())].second = index;
    }
    ++index;
  }
  // One record per placed allocation, in order, each where the placements file says it went.
  std::vector<nlohmann::json> placed;
  for (const auto& p : r.placements)
    if (p["ok"] == true) placed.push_back(p);
  REQUIRE(recs.size() == placed.size());
  REQUIRE(recs.size() == trace.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    INFO("allocation " << i);
    CHECK(recs[i].alloc_event == placed[i]["i"].get<std::uint64_t>());
    CHECK(recs[i].addr.value() == placed[i]["addr"].get<std::uint64_t>());
    CHECK(recs[i].block == placed[i]["block_bytes"].get<std::uint64_t>());
    CHECK(recs[i].requested == trace.at(recs[i].alloc_event).first);
    CHECK(recs[i].free_event == trace.at(recs[i].alloc_event).second);
  }
}

TEST_CASE("allocation log: a what-if that re-holds a mid-run snapshot's state logs it at one event, in event order") {
  // transformer_ctx128_train_step starts mid-run: 324 blocks were live when recording began (in
  // the snapshot's segments, never allocated in its trace). With expandable segments the run re-holds them in the
  // history's order (by address: docs/report.md, "Before the recording"), not the trace's. The log, the page's regions
  // and the placements file all go by event: the state is held at the last event before the trace's own, each placement
  // line keeps its allocation's own event, in event order, and the page's times are from the run's first event (the
  // snapshot's are microseconds since the epoch).
  const std::string placements = tmp_path("reheld_placements.jsonl");
  RunOutputs out = kWithHtml;
  out.placements = placements;
  CmdRun r = run_cmd({.trace = kTrain, .sets = {"expandable_segments=true"}}, out);
  REQUIRE(r.json["devices"][0]["before_recording"]["held"] == "rebuilt");
  std::vector<std::uint64_t> pre_trace;  // the trace's pre_trace allocs, by event index
  std::uint64_t first_own = 0, index = 0, t_first = 0, t_last = 0;
  for (const auto& e : pages_converted(kTrain)) {
    const bool pre = e.value("pre_trace", false);
    if (e["op"] == "alloc" && pre) pre_trace.push_back(index);
    if (!pre && first_own == 0 && (e["op"] == "alloc" || e["op"] == "free")) first_own = index;
    if (e.contains("t")) (index == 0 ? t_first : t_last) = e["t"].get<std::uint64_t>();
    ++index;
  }
  REQUIRE(pre_trace.size() == 324);
  REQUIRE(t_last - t_first < t_first);  // times since the epoch: the run spans far less than them
  const auto recs = pages_history(r).allocations->records(0);
  std::set<std::uint64_t> held_at;
  size_t held = 0;
  for (size_t i = 0; i < recs.size(); ++i) {
    INFO("allocation " << i);
    if (i) CHECK(recs[i].alloc_event >= recs[i - 1].alloc_event);
    CHECK(recs[i].alloc_t.value() <= t_last - t_first);
    if (recs[i].pre_trace) ++held, held_at.insert(recs[i].alloc_event);
  }
  CHECK(held == pre_trace.size());
  REQUIRE(held_at.size() == 1);
  CHECK(*held_at.begin() >= pre_trace.back());
  CHECK(*held_at.begin() < first_own);
  for (const auto& g : pages_history(r).regions)
    for (size_t k = 1; k < g.usage.size(); ++k) CHECK(g.usage[k].event >= g.usage[k - 1].event);
  std::vector<std::uint64_t> lines, placed_pre;
  for (const auto& p : r.placements) lines.push_back(p["i"].get<std::uint64_t>());
  CHECK(std::is_sorted(lines.begin(), lines.end()));
  for (std::uint64_t i : lines)
    if (i < first_own) placed_pre.push_back(i);
  CHECK(placed_pre == pre_trace);
}

TEST_CASE("allocator state: a re-held state that does not fit is shown whole at the OOM that stops the run") {
  // transformer_ctx128_train_step's 12.82 GiB live when recording began do not fit a memory fraction
  // of 0.1 (7.92 GiB of its H100's 79.15): the run stops at the OOM of a block of that state, at
  // the one event the state is held at. The page's state at that event (its keyframe, a bookmark)
  // is the allocator's after all of the state it could hold, as the OOM's report gives it.
  CmdRun r = run_cmd({.trace = kTrain, .sets = {"memory_fraction=0.1"}}, kWithHtml);
  REQUIRE(r.json["ooms"].size() == 1);
  const auto& oom = r.json["ooms"][0];
  REQUIRE(oom.contains("before_recording"));
  const RunHistory& h = pages_history(r);
  const auto k = std::find_if(h.keyframes.begin(), h.keyframes.end(),
                              [&](const Keyframe& f) { return f.event == oom["event_index"].get<std::uint64_t>(); });
  REQUIRE(k != h.keyframes.end());
  CHECK(k->slots.at(0).figures.allocated == oom["allocated_bytes"].get<Bytes>());
  CHECK(k->slots.at(0).figures.reserved == oom["reserved_bytes"].get<Bytes>());
}

TEST_CASE("segments over time: the segments a PyTorch program's empty_cache calls released, at those calls") {
  // sqattn_empty_cache: 28 bursts of segment_free, 420 in all, each burst an empty_cache call
  // (tests/data/torch/SOURCES.md). Replayed as recorded, the regions released by empty_cache are
  // the recording's freed segments: the same addresses and sizes.
  CmdRun r = run_cmd({.trace = kPagesEmptyCache}, kWithHtml);
  const RunHistory& h = pages_history(r);
  std::multiset<std::pair<std::uint64_t, std::uint64_t>> recorded, released;
  for (const auto& e : pages_converted(kPagesEmptyCache))
    if (e["op"] == "segment_free") recorded.insert({e["addr"].get<std::uint64_t>(), e["size"].get<std::uint64_t>()});
  REQUIRE(recorded.size() == 420);
  size_t by_empty_cache = 0;
  for (const auto& g : h.regions) {
    if (g.released_event == RegionLife::kHeld) continue;
    released.insert({g.base.value(), g.size});
    if (g.released_by == Op::kEmptyCache) ++by_empty_cache;
  }
  CHECK(released == recorded);
  CHECK(by_empty_cache == 420);
  // Each region's usage points: what was in use never exceeds what was mapped.
  for (const auto& g : h.regions)
    for (const auto& u : g.usage) CHECK(u.in_use <= u.mapped);
}

TEST_CASE("segments over time: a failed cudaMalloc's retry releases cached segments during the allocation") {
  // oom_retry_release: a failed cudaMalloc made the allocator free its cached blocks (17
  // segment_free, 9.3 GiB) and retry (tests/data/torch/SOURCES.md).
  CmdRun r = run_cmd({.trace = kPagesOomRetry}, kWithHtml);
  size_t by_alloc = 0;
  Bytes bytes = 0;
  for (const auto& g : pages_history(r).regions)
    if (g.released_event != RegionLife::kHeld && g.released_by == Op::kAlloc) ++by_alloc, bytes += g.size;
  CHECK(by_alloc == 17);
  CHECK(bytes > Bytes{9} << 30);
  CHECK(bytes < Bytes{10} << 30);
}

TEST_CASE("stopped run: the history, the log and the page's data end at the first OOM") {
  CmdRun r = run_cmd({.trace = kTrain, .capacity = "40GiB"}, kWithHtml);
  REQUIRE(r.result.stopped_early);
  const std::uint64_t stop = r.result.ooms.at(0).event_index;
  const RunHistory& h = pages_history(r);
  CHECK(h.stopped_at == stop);
  CHECK(h.last == stop);
  for (const auto& tl : h.timelines)
    for (const auto& p : tl.points) CHECK(p.event <= stop);
  for (const auto& rec : h.allocations->records(0)) {
    CHECK(rec.alloc_event < stop);
    if (rec.free_event != AllocationLog::kNone) CHECK(rec.free_event < stop);
  }
  for (const auto& g : h.regions) CHECK((g.released_event == RegionLife::kHeld || g.released_event <= stop));
  CHECK(r.page()["runs"][0]["history"]["stopped_at"] == stop);
}

TEST_CASE("progress: each input event counts once, though the page's history reads the trace again") {
  new_input_epoch();
  const std::uint64_t before = input_events_read();
  CmdRun r = run_cmd({.trace = kTrain}, kWithHtml);  // the run's pass, then the history's
  CHECK(input_events_read() - before == r.result.events);
}

TEST_CASE(
    "pickle: a snapshot pickled at protocols 2 to 5 reads as the same events, and out-of-band buffers are refused") {
  // The fixture decompressed, then pickled again by Python at each protocol (a bytearray beside it
  // takes protocol 5's BYTEARRAY8).
  const std::string raw = write_text("raw.pickle", read_input(test_data("torch/small_mlp_97ev.pickle.zst"), 1 << 30));
  const std::string script = write_text("repickle.py", R"PY(
import pickle, sys
snap = pickle.load(open(sys.argv[1], 'rb'))
for p in (2, 3, 4, 5):
    s = dict(snap)
    if p == 5:
        s['extra'] = bytearray(b'fragsim')
    pickle.dump(s, open(f'{sys.argv[2]}/p{p}.pickle', 'wb'), protocol=p)
s = dict(snap)
s['extra'] = pickle.PickleBuffer(bytearray(b'out of band'))
pickle.dump(s, open(f'{sys.argv[2]}/oob.pickle', 'wb'), protocol=5, buffer_callback=lambda b: None)
)PY");
  REQUIRE(std::system(("/usr/bin/python3 " + script + " " + raw + " " + tmp_dir()).c_str()) == 0);
  const auto want = pages_converted(raw);
  for (int p = 2; p <= 5; ++p) {
    INFO("protocol " << p);
    CHECK(pages_converted(tmp_path("p" + std::to_string(p) + ".pickle")) == want);
  }
  auto oob = cli("run " + tmp_path("oob.pickle"));
  CHECK(oob.code == 2);
  CHECK(std::count(oob.err.begin(), oob.err.end(), '\n') == 1);
  CHECK(oob.err.find("oob.pickle: pickle: a protocol-5 out-of-band buffer") != std::string::npos);
}

TEST_CASE("pickle: a snapshot is read as a stream, holding a batch of its entries' objects, at protocols 2 and 5") {
  // 40,000 events of fragsim's generator replayed by torch-caching and exported as the dict
  // torch.cuda.memory._snapshot() returns (how scripts/bench --viewer makes its 1 GB snapshot).
  const std::string fs = tmp_path("stream.fstrace"), pk = tmp_path("stream.pickle");
  REQUIRE(cli("gen random --seed 3 --set events=40000 --set live=300 -o " + fs).code == 0);
  REQUIRE(cli("run " + fs + " --policy torch-caching --capacity 1TiB --export-snapshot " + pk).code == 0);
  // Python reads it, counts device 0's entries, and pickles it again at protocols 2 and 5 (5: in
  // 64 KiB frames, memo indices past 2^16).
  const std::string script = write_text("stream_repickle.py", R"PY(
import pickle, sys
snap = pickle.load(open(sys.argv[1], 'rb'))
open(sys.argv[2] + '/stream_entries.txt', 'w').write(str(len(snap['device_traces'][0])))
for p in (2, 5):
    pickle.dump(snap, open(f'{sys.argv[2]}/stream_p{p}.pickle', 'wb'), protocol=p)
)PY");
  REQUIRE(std::system(("/usr/bin/python3 " + script + " " + pk + " " + tmp_dir()).c_str()) == 0);
  const std::uint64_t entries = std::stoull(read_text(tmp_path("stream_entries.txt")));
  REQUIRE(entries >= 40000);  // an alloc, a free_requested and a free_completed for each buffer
  for (const std::string& file : {pk, tmp_path("stream_p2.pickle"), tmp_path("stream_p5.pickle")}) {
    INFO(file);
    std::uint64_t handed = 0, device = 99;
    const ListStream count{"device_traces",
                           [&](const PyObj&, const PyObj&, std::uint64_t index, std::span<const PyRef> items) {
                             handed += items.size();
                             device = index;
                           }};
    auto streamed = load_pickle(file, &count);
    auto whole = load_pickle(file);
    CHECK(handed == entries);
    CHECK(device == 0);
    // Held whole, each entry is a dict of five or six objects; streamed, the objects of one batch
    // of a thousand entries are recycled for the next.
    CHECK(whole->arena.size() > 5 * entries);
    CHECK(streamed->arena.size() < 20000);
  }
  // The reader of the file (streamed) and of the document held whole read the same events.
  const auto want = read_events(pk);
  auto doc = parse_pickle(read_input(pk, kMaxPickleBytes), pk);
  auto from_doc = make_torch_snapshot_reader_from(pk, *doc, {});
  std::vector<Event> held;
  for (Event e; from_doc->next(e);) held.push_back(e);
  CHECK(want.size() >= entries);  // each entry one event, and the state before recording began
  same_events(held, want);
  same_events(read_events(tmp_path("stream_p2.pickle")), want);
  same_events(read_events(tmp_path("stream_p5.pickle")), want);
}

TEST_CASE("pickle: a trace entry streamed and then referred to again through the memo is refused in one line") {
  // A snapshot whose second device-trace entry is the first again (BINGET of the memoised dict):
  // no pickle Python writes does it, and the streamed entry is gone.
  static const char kBytes[] =
      "\x80\x04}(\x8c\x08segments]\x8c\x0d"
      "device_traces](](}\x94(\x8c\x06"
      "action\x8c\x04"
      "markueh\x00"
      "ae"
      "u.";
  const std::string p(kBytes, sizeof kBytes - 1);
  const std::string path = write_text("memo_again.pickle", p);
  auto r = cli("run " + path);
  CHECK(r.code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find("memo_again.pickle: pickle: memo index 0 refers to a device_traces item already read") !=
        std::string::npos);
}

TEST_CASE("modules: a JAX capture's compiled modules, each buffer at XLA's offset and at fragsim's plan") {
  CmdRun r = run_cmd({.trace = kPagesJaxCapture}, kWithHtml);
  REQUIRE(r.result.modules);
  const auto& mods = *r.result.modules;
  REQUIRE(!mods.empty());
  size_t heaps = 0, planned = 0;
  for (const auto& m : mods) {
    INFO(m.name);
    for (const auto& h : m.heaps) {
      ++heaps;
      if (h.planned_bytes) ++planned;
    }
    for (const auto& b : m.buffers) {
      CHECK(b.padded >= b.logical);  // a layout pads, never shrinks
      if (b.offset >= 0 && b.allocation >= 0) {
        const auto a = std::find_if(m.allocations.begin(), m.allocations.end(),
                                    [&](const ModuleAllocation& x) { return x.index == b.allocation; });
        REQUIRE(a != m.allocations.end());
        CHECK(static_cast<std::uint64_t>(b.offset) + b.padded <= a->size);  // inside its allocation
      }
    }
  }
  CHECK(heaps > 0);
  CHECK(planned == heaps);
  // fragsim's plan places the heap's buffers inside the heap it needed, at offsets of its own.
  size_t placed = 0;
  for (const auto& m : mods)
    for (const auto& b : m.buffers) {
      if (b.planned < 0) continue;
      ++placed;
      const auto h = std::find_if(m.heaps.begin(), m.heaps.end(),
                                  [&](const ModuleView::Heap& x) { return x.trace == b.heap_trace; });
      REQUIRE(h != m.heaps.end());
      CHECK(static_cast<std::uint64_t>(b.planned) + b.padded <= h->planned_bytes);
    }
  CHECK(placed > 0);
}

namespace {

// The text of every element of a class in the DOM.
std::vector<std::string> pages_texts(const std::string& dom, const std::string& tag, const std::string& attrs) {
  std::vector<std::string> out;
  std::regex re("<" + tag + attrs + "[^>]*>([^<]*)</" + tag + ">");
  for (std::sregex_iterator it(dom.begin(), dom.end(), re), end; it != end; ++it) out.push_back((*it)[1]);
  return out;
}

// The part of the DOM from <div id="ID"> to the next section's <div id=...> at the top level.
std::string pages_section(const std::string& dom, const std::string& id) {
  auto a = dom.find("<div id=\"" + id + "\">");
  REQUIRE(a != std::string::npos);
  static const char* kOrder[] = {"summary", "search", "charts",  "buffers", "segments", "states",
                                 "maps",    "stacks", "modules", "ooms",    "tooltip"};
  size_t b = std::string::npos;
  bool after = false;
  for (const char* k : kOrder) {
    if (after) {
      b = dom.find("<div id=\"" + std::string(k) + "\">", a);
      if (b != std::string::npos) break;
    }
    after = after || k == id;
  }
  return dom.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

// The page as headless Chromium renders it (with the probes), checked whole: no script error, no
// console message, every view drawn and present.
std::string page_with_every_view(const std::string& html) {
  std::string console;
  std::string dom = rendered_dom(html, "#probe", "1400,900", &console);
  CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
  CHECK(console.empty());
  CHECK(dom.find("data-ready=\"1\"") != std::string::npos);
  for (const char* id : {"search", "charts", "buffers", "segments", "states", "maps", "stacks"})
    CHECK(dom.find("<div id=\"" + std::string(id) + "\"><h2>") != std::string::npos);
  return dom;
}

}  // namespace

TEST_CASE(
    "viewer: a PyTorch snapshot's page has every view, no console message, zoom, the entries behind a click, "
    "search",
    "[chromium]") {
  // The recorded settings, and a what-if that re-holds the state before the recording.
  for (const RunRequest& req : {RunRequest{.trace = kTrain}, RunRequest{.trace = k3dev},
                                RunRequest{.trace = kTrain, .sets = {"expandable_segments=true"}}}) {
    INFO(req.trace << (req.sets.empty() ? "" : " --set " + req.sets[0]));
    const std::string dom = page_with_every_view(write_text("every_view.html", run_cmd(req, kWithHtml).html()));
    size_t charts = 0, zooms = 0, clicks = 0, searches = 0, built = 0;
    for (const auto& p : probes(dom)) {
      INFO(p.dump());
      if (p.contains("buffers_chart")) {  // hover along each chart: every band a live allocation, named
        ++charts;
        CHECK(p["answered"] == p["probes"]);
        CHECK(p["bands"].get<int>() > 0);
        CHECK(p["named"] == p["bands"]);
        CHECK(p["live_ok"] == p["bands"]);
      } else if (p.contains("zoom")) {  // a wheel narrows the range of every chart
        ++zooms;
        CHECK(p["after"][1].get<double>() - p["after"][0].get<double>() <
              p["before"][1].get<double>() - p["before"][0].get<double>());
        CHECK(p["following"] == p["charts"]);
      } else if (p.contains("click")) {  // a click pins the band's alloc and free entries and sizes
        ++clicks;
        CHECK(p["pinned"] == true);
        CHECK(p["shows_alloc"] == true);
        CHECK(p["shows_free"] == true);
        CHECK(p["shows_sizes"] == true);
      } else if (p.contains("search")) {  // a search finds the largest allocation and draws it highlighted
        ++searches;
        CHECK(p["count"].get<int>() > 0);
        CHECK(p["includes"] == true);
        CHECK(p["drawn"].get<int>() > 0);
      } else if (p.contains("states_from_log")) {  // fragsim's keyframes, built again from the logs
        ++built;
        CHECK(p["compared"].get<int>() > 0);
        CHECK(p["agree"] == p["compared"]);
      }
    }
    CHECK(charts >= 1);
    CHECK(zooms == 1);
    CHECK(clicks == 1);
    CHECK(searches == 1);
    CHECK(built == 1);
  }
}

TEST_CASE("viewer: the page of a 200k-event run has every view, no console message, zoom, clicks, search",
          "[chromium]") {
  // A moderate size for the test suite's budget; scripts/bench --viewer measures 10 M events and a
  // 1 GB snapshot the same way (docs/viewer.md, "Recordings of any size").
  const std::string fs = tmp_path("big200k.fstrace"), html = tmp_path("big200k.html");
  REQUIRE(cli("gen random --seed 1 --set events=200000 --set live=2000 --set max_size=16MiB -o " + fs).code == 0);
  REQUIRE(cli("run " + fs + " --policy torch-caching --capacity 1TiB --html " + html).code == 0);
  // Every allocation is in the page: the log was not cut.
  const auto page = embedded_data(read_text(html));
  CHECK(page["runs"][0]["history"]["allocations"]["cut_at"] == -1);
  const std::string dom = page_with_every_view(html);
  size_t charts = 0, zooms = 0, clicks = 0, searches = 0;
  for (const auto& p : probes(dom)) {
    INFO(p.dump());
    if (p.contains("buffers_chart")) {
      ++charts;
      CHECK(p["answered"] == p["probes"]);
      CHECK(p["bands"].get<int>() > 0);
      CHECK(p["live_ok"] == p["bands"]);
    } else if (p.contains("zoom")) {
      ++zooms;
      CHECK(p["after"][1].get<double>() - p["after"][0].get<double>() <
            p["before"][1].get<double>() - p["before"][0].get<double>());
    } else if (p.contains("click")) {
      ++clicks;
      CHECK(p["shows_alloc"] == true);
      CHECK(p["shows_sizes"] == true);
    } else if (p.contains("search")) {
      ++searches;
      CHECK(p["includes"] == true);
      CHECK(p["drawn"].get<int>() > 0);
    }
  }
  CHECK(charts >= 1);
  CHECK(zooms == 1);
  CHECK(clicks == 1);
  CHECK(searches == 1);
}

TEST_CASE("viewer: a run that stopped at its first OOM: charts and bands end at the stop, in steps", "[chromium]") {
  CmdRun r = run_cmd({.trace = kTrain, .capacity = "40GiB"}, kWithHtml);
  REQUIRE(r.result.stopped_early);
  const std::uint64_t stop = r.result.ooms.at(0).event_index;
  const std::string dom = rendered_dom(write_text("stopped.html", r.html()), "", "1400,900");
  CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
  const std::string charts = pages_section(dom, "charts");
  // The x axis ends at the stop, not at the trace's last event.
  std::smatch m;
  REQUIRE(std::regex_search(charts, m, std::regex("data-x1=\"([0-9]+)\"")));
  CHECK(std::stoull(m[1]) == stop);
  // Each series is steps (only horizontal and vertical moves) and ends at the chart's right edge,
  // which is the stop.
  // Read by hand, not with std::regex: libstdc++'s matcher recurses once per character, and a
  // series' path runs to hundreds of kilobytes (a stack overflow under AddressSanitizer).
  size_t paths = 0;
  for (size_t at = charts.find("<path d=\""); at != std::string::npos; at = charts.find("<path d=\"", at + 1)) {
    const size_t begin = at + 9, end = charts.find('"', begin), close = charts.find('>', end);
    REQUIRE(close != std::string::npos);
    if (charts.substr(end, close - end).find("class=\"series-") == std::string::npos) continue;
    const std::string d = charts.substr(begin, end - begin);
    ++paths;
    CHECK(d.find('L') == std::string::npos);
    CHECK(d.find("H") != std::string::npos);
  }
  CHECK(paths == 3);
  CHECK(r.page()["runs"][0]["history"]["last"] == stop);
  CHECK(charts.find("stopped before the trace's first event") == std::string::npos);
  // A run stopped by the state before the recording holds one moment: the note says why.
  CmdRun held = run_cmd({.trace = kTrain, .sets = {"memory_fraction=0.1"}}, kWithHtml);
  REQUIRE(held.json["ooms"].at(0).contains("before_recording"));
  const std::string hdom = rendered_dom(write_text("stopped_before.html", held.html()), "", "1400,900");
  CHECK(pages_section(hdom, "charts")
            .find("The run stopped before the trace's first event: the 12.69 GiB live when "
                  "recording began do not fit, so its charts hold that one moment.") != std::string::npos);
}

TEST_CASE("viewer: the page, polished: headings, device order, round ticks, the window's width, usable, actions",
          "[chromium]") {
  const std::string html = write_text("polish.html", run_cmd({.trace = k3dev}, kWithHtml).html());
  const std::string dom = rendered_dom(html, "", "1400,900");
  CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
  // No heading without something under it: a section's heading (h2) may be followed by its first
  // sub-heading (h3), never by the section's end or a heading of its own level or above.
  CHECK(!std::regex_search(dom, std::regex("<h2>[^<]*</h2>\\s*(</div>|<h[12]>)|<h3>[^<]*</h3>\\s*(</div>|<h[123]>)")));
  // Devices 0, 1, 2 in that order in every section that lists them.
  for (const char* id : {"charts", "buffers", "segments"}) {
    INFO(id);
    std::vector<int> seen;
    for (const auto& t : pages_texts(pages_section(dom, id), "h3", "")) {
      std::smatch m;
      if (std::regex_search(t, m, std::regex("device ([0-9]+)"))) seen.push_back(std::stoi(m[1]));
    }
    CHECK(seen == std::vector<int>{0, 1, 2});
  }
  // Byte ticks on round values: evenly spaced by 1, 2 or 5 × 10^k of one unit.
  for (const std::string& chart : {pages_section(dom, "charts")}) {
    std::vector<double> ys;
    std::regex tick(
        "<text x=\"[0-9.]+\" y=\"[0-9.]+\" text-anchor=\"end\" class=\"axis\">([0-9.]+) (B|KiB|MiB|GiB)</text>");
    for (std::sregex_iterator it(chart.begin(), chart.end(), tick), end; it != end; ++it)
      ys.push_back(std::stod((*it)[1]));
    REQUIRE(ys.size() >= 6);
    for (size_t i = 2; i < 4; ++i) {
      const double step = ys[i] - ys[i - 1];
      const double mant = step / std::pow(10, std::floor(std::log10(step)));
      CHECK((std::abs(mant - 1) < 1e-9 || std::abs(mant - 2) < 1e-9 || std::abs(mant - 5) < 1e-9));
    }
  }
  // Charts as wide as the window (1400 px less the page's margins), not a fixed 900.
  std::smatch w;
  REQUIRE(std::regex_search(dom, w, std::regex("<svg class=\"chart\" width=\"100%\" viewBox=\"0 0 ([0-9]+) ")));
  CHECK(std::stoi(w[1]) > 1200);
  // Expandable segments reserve 1.125 x the device's memory per stream and pool (95.63 GB here)
  // and map pages into it on demand: its address map opens on the part where memory is used.
  std::smatch z;
  REQUIRE(std::regex_search(dom, z,
                            std::regex("regions? from 0x[0-9a-f]+, ([0-9.]+) GiB; showing ([0-9.]+) (MiB|GiB) of it, "
                                       "where memory is used")));
  CHECK(std::stod(z[2]) * (z[3] == "MiB" ? 1.0 / 1024 : 1.0) < std::stod(z[1]) / 4);
  // The usable memory a recording implies is "usable", never "capacity".
  CHECK(dom.find("usable (inferred from the recording)") != std::string::npos);
  CHECK(dom.find(">capacity ") == std::string::npos);
  CHECK(dom.find("▲ capacity") == std::string::npos);

  // A program's empty_cache calls: drawn where they happened and said as the text summary says them.
  CmdRun ec = run_cmd({.trace = kPagesEmptyCache}, kWithHtml);
  const std::string edom = rendered_dom(write_text("actions.html", ec.html()), "", "1400,900");
  const auto calls = ec.json["empty_cache"]["calls"].get<std::uint64_t>();
  CHECK(calls == ec.json["actions"].size());
  CHECK(edom.find("empty_cache: the program called it " + std::to_string(calls) + " times") != std::string::npos);
  CHECK(report_text(ec.result).find("empty_cache: the program called it " + std::to_string(calls) + " times") !=
        std::string::npos);
  CHECK(count(pages_section(edom, "charts"), "class=\"action\"") == calls);
}

TEST_CASE("viewer: a JAX capture's compiled modules, their buffers in program order and both plans drawn",
          "[chromium]") {
  CmdRun r = run_cmd({.trace = kPagesJaxCapture}, kWithHtml);
  const auto page = r.page();
  REQUIRE(page["runs"][0].contains("modules"));
  const std::string dom = rendered_dom(write_text("modules.html", r.html()), "", "1400,900");
  CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
  const std::string mods = pages_section(dom, "modules");
  CHECK(mods.find("<h2>Compiled modules</h2>") != std::string::npos);
  // The module shown first: the first with a heap; one row per buffer, both plans drawn.
  const auto& all = page["runs"][0]["modules"];
  size_t first = 0;
  while (first < all.size() && all[first]["heaps"].empty()) ++first;
  REQUIRE(first < all.size());
  CHECK(count(mods, "class=\"module-buffer\"") == all[first]["buffers"].size());
  std::smatch m;
  REQUIRE(std::regex_search(mods, m, std::regex("data-xla-boxes=\"([0-9]+)\" data-planned-boxes=\"([0-9]+)\"")));
  CHECK(std::stoi(m[1]) > 0);
  CHECK(std::stoi(m[2]) == std::stoi(m[1]));
}

// A page of millions of events spent most of its load decoding the allocation log and drawing the
// charts below the first screen (issue 51: ready within 10 s for 10 M events): those views wait
// until they come near the screen; #eager draws every view before the page says it is ready.
TEST_CASE("viewer: views below the first screen are drawn when they come near it and eager draws every view at once",
          "[chromium]") {
  const std::string html = write_text("lazy.html", run_cmd({.trace = kTrain}, kWithHtml).html());
  auto count = [](const std::string& dom, const std::string& what) {
    size_t n = 0;
    for (size_t at = dom.find(what); at != std::string::npos; at = dom.find(what, at + 1)) ++n;
    return n;
  };
  const size_t slots = embedded_data(read_text(html))["runs"][0]["history"]["allocations"]["slots"].size();
  REQUIRE(slots >= 1);
  for (const char* m : {"", "#eager"}) {
    const std::string mode = m;
    INFO(mode);
    std::string console;
    // A window 400 pixels tall: the summary and memory over time fill it.
    const std::string dom = rendered_dom(html, mode, "1400,400", &console);
    CHECK(dom.find("<div id=\"errors\"></div>") != std::string::npos);
    CHECK(console.empty());
    CHECK(dom.find("data-ready=\"1\"") != std::string::npos);
    CHECK(count(dom, "<svg class=\"chart") >= 1);  // memory over time, on the first screen
    // Every allocation: each device's chart, or the room it will take while it waits.
    CHECK(count(dom, "class=\"bufchart\"") == (mode.empty() ? 0 : slots));
    CHECK(count(dom, "class=\"bufroom\"") == (mode.empty() ? slots : 0));
  }
}
