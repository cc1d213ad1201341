// Trace readers and writers: every validation rule of specs/contracts.md §1, lossless conversion.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <regex>

#include "sim/base/error.h"
#include "sim/base/io.h"
#include "sim_helpers.h"
#include "traces/generators.h"
#include "traces/kept_conversions.h"
#include "traces/trace_reader.h"
#include "traces/trace_writer.h"

using namespace fragsim;
using namespace fragsim::test;

namespace {

// Returns the InputError message for a trace, or "" when it reads cleanly.
std::string error_of(const std::string& name, const std::string& text, const ReaderOptions& ro = {}) {
  std::string p = write_text(name, text);
  try {
    read_events(p, ro);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Copies a trace event by event into another format (by the output's extension).
void convert(const std::string& from, const std::string& to) {
  auto r = open_trace(from, {});
  auto w = open_trace_writer(to, r->header());
  Event ev;
  while (r->next(ev)) w->write(ev);
  w->finish();
}

const char* kEveryKey =
    "{\"fragsim_trace\":1,\"time_unit\":\"us\",\"source\":\"t\",\"extra\":[1,2]}\n"
    "\n"
    "{\"op\":\"alloc\",\"id\":1,\"size\":12,\"shape\":[3],\"dtype\":\"f32\",\"name\":\"a\\u00e9\\n\\\"q\",\"stream\":-"
    "3,"
    "\"device\":2,\"space\":\"vmem\",\"t\":5,\"addr\":4096}\r\n"
    "  {\"op\":\"alloc\",\"id\":2,\"size\":0, \"t\":5, \"unknown\": {\"x\": [true, null, 1.5e3]}}\n"
    "{\"op\":\"free\",\"id\":1,\"device\":2,\"t\":9}\n"
    "{\"op\":\"segment_alloc\",\"addr\":140000000000000,\"size\":2097152,\"t\":9}\n"
    "{\"op\":\"oom\",\"size\":1024,\"t\":10}\n"
    "{\"op\":\"alloc\",\"id\":1,\"size\":1,\"t\":10,\"space\":\"collective\",\"dtype\":\"s4\",\"shape\":[1]}\n"
    "{\"op\":\"mark\",\"name\":\"end\",\"t\":11}";

// Malformed traces: the text, the line of the error and a part of its message.
struct BadCase {
  const char* text;
  int line;
  const char* needle;
};
const BadCase kBadCases[] = {
    {"{\"op\":\"alloc\",\"id\":1,\"size\":10}\n{\"op\":", 2, "truncated"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":\"big\"}", 1, "size"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":-5}", 1, "size: must be non-negative"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1.5}", 1, "size: must be an integer"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1e3}", 1, "size: must be an integer"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":18446744073709551616}", 1, "size: does not fit in 64 bits"},
    {"{\"op\":\"alloc\",\"id\":-1,\"size\":1}", 1, "id"},
    {"{\"op\":\"grow\",\"id\":1}", 1, "op: unknown op"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":4,\"dtype\":\"f33\"}", 1, "dtype: unknown dtype"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":4,\"space\":\"l2\"}", 1, "space: unknown space"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":10,\"shape\":[2,2],\"dtype\":\"f32\"}", 1, "size: 10 does not match"},
    {"{\"op\":\"mark\",\"t\":5}\n{\"op\":\"mark\",\"t\":4}", 2, "t: time 4 is before"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1}\n{\"op\":\"alloc\",\"id\":1,\"size\":1}", 2, "already live"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1}\n{\"op\":\"free\",\"id\":2}", 2, "free of id 2 which is not live"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1,\"device\":1}\n{\"op\":\"free\",\"id\":1}", 2, "not live"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1} x", 1, "trailing characters"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1}{}", 1, "trailing characters"},
    {"{\"op\":\"mark\",\"name\":\"\xff\"}", 1, "invalid UTF-8"},
    {"{\"op\":\"mark\",\"name\":\"\xc0\xaf\"}", 1, "invalid UTF-8"},
    {"{\"op\":\"alloc\",\"size\":1}", 1, "id: missing"},
    {"{\"op\":\"alloc\",\"id\":1}", 1, "size: missing"},
    {"{\"id\":1}", 1, "op: missing"},
    {"[1,2]", 1, "one JSON object"},
    {"{\"op\":\"alloc\",\"id\":1,\"id\":2,\"size\":1}", 1, "id: duplicate key"},
    {"{\"op\":\"mark\",\"name\":\"\\ud800\"}", 1, "surrogate"},
    {"{\"fragsim_trace\":2}\n", 1, "unsupported trace version"},
    {"{\"fragsim_trace\":1,\"time_unit\":\"fortnight\"}\n", 1, "time_unit"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1,\"device\":4294967296}", 1, "device"},
    {"{\"op\":\"mark\",\"name\":\"a\tb\"}", 1, "control character"},
    // Unknown keys are skipped only when their value is valid JSON (RFC 8259), and named when not.
    {"{\"op\":\"mark\",\"extra\":01}", 1, "extra: invalid JSON number: leading zero"},
    {"{\"op\":\"mark\",\"extra\":1.e5}", 1, "extra: invalid JSON number"},
    {"{\"op\":\"mark\",\"extra\":[1,2,]}", 1,
     "extra: invalid JSON: a comma, colon, brace or bracket is missing or out of place (column 27)"},
    {"{\"op\":\"mark\",\"extra\":{\"a\" 1}}", 1,
     "extra: invalid JSON: a comma, colon, brace or bracket is missing or out of place (column 27)"},
    {"{\"op\":\"mark\",\"extra\":{\"a\":\"\\q\"}}", 1, "extra: invalid JSON string"},
    {"{\"op\":\"mark\",\"extra\":1e400}", 1, "extra: invalid JSON number"},
    {"{\"op\":\"mark\",\"extra\":nul}", 1, "extra: invalid JSON value"},
    // simdjson's first stage refuses these; the reader finds the byte and the key it is in.
    {"{\"op\":\"mark\",\t\"name\":\"x\ty\"}", 1,
     "name: control character in a string (JSON requires it escaped, e.g. \\t or \\u0001) (column 24)"},
    {"{\"op\":\"mark\",\"extra\":[\"\xc3\xa9\",\"\xe9\"]}", 1, "extra: invalid UTF-8 (column 29)"},
    {"{\"op\":\"mark\",\"name\":\"abc}", 1, "truncated JSON: unterminated string (column 21)"},
    {"{\"op\":\"alloc\",\"id\":1 \"size\":1}", 1, "id: invalid JSON: a comma"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1} {\"op\":\"mark\"}", 1,
     "trailing characters after the JSON object (column 32)"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":", 1, "truncated JSON"},
    {"{\"op\":\"alloc\",\"id\":1,\"stream\":9223372036854775808,\"size\":1}", 1, "stream: does not fit in 64 bits"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":-0}", 1, "size: must be non-negative"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1,\"shape\":[2,\"x\"]}", 1, "shape: must be a non-negative integer"},
    {"{\"op\":\"alloc\",\"id\":1,\"size\":1,\"frames\":\"f\"}", 1, "frames: must be an array"},
    {"{\"op\":\"mark\",\"extra\":tru}", 1, "extra: invalid JSON value"},
    // Each line is one document: an object is not continued on the next line, a line of JSON
    // whitespace that is not blank (a lone CR) holds no document.
    {"{\"op\":\"alloc\",\"id\":1,\n\"size\":1}", 1, "truncated JSON: an object or array is not closed"},
    {"{\"op\":\"mark\"}\n \r \n{\"op\":\"mark\"}", 2, "invalid JSON: Empty: no JSON found"},
};

}  // namespace

TEST_CASE("valid JSONL trace: header, blank lines, CRLF, every key, unknown keys skipped") {
  std::string p = write_text("ok.jsonl", kEveryKey);
  auto r = open_trace(p, {});
  REQUIRE(r->header()["source"] == "t");
  REQUIRE(r->header()["extra"] == nlohmann::json::array({1, 2}));
  std::vector<Event> v;
  Event ev;
  while (r->next(ev)) v.push_back(ev);
  REQUIRE(v.size() == 7);
  CHECK(v[0].index == 0);
  CHECK(v[0].line == 3);
  CHECK(v[0].t == Tick(5));
  CHECK(v[0].stream == -3);
  CHECK(v[0].device == 2);
  CHECK(v[0].space == Space::kVmem);
  CHECK(v[0].name == "a\xc3\xa9\n\"q");
  CHECK(v[0].addr == Addr(4096));
  CHECK(v[1].line == 4);
  CHECK(v[1].size == 0);
  CHECK(v[2].op == Op::kFree);
  CHECK(v[2].live_size == 12);
  CHECK(v[2].live_space == Space::kVmem);
  CHECK(v[2].handle == v[0].handle);
  CHECK(v[5].handle == v[0].handle);  // recycled after the free
  CHECK(v[6].index == 6);
}

TEST_CASE("JSONL: escaped keys, any valid JSON under unknown keys, addr null, lines across buffer refills") {
  // A name longer than the reader's first 1 MiB buffer, so lines straddle refills and the buffer grows.
  std::string big(1500000, 'n');
  std::string text =
      "{\"\\u006fp\":\"alloc\",\"i\\u0064\":1,\"size\":8,\"addr\":null}\n"
      "{\"op\":\"mark\",\"x\":[99999999999999999999999,-0.0e-0,{\"\":[[],{}]},\"\\ud83d\\ude00\",false]}\n"
      "{\"op\":\"mark\",\"name\":\"" +
      big +
      "\"}\n"
      "{\"op\":\"free\",\"id\":1,\"t\":12345678901234}";  // no newline at the end
  auto v = read_events(write_text("escaped.jsonl", text));
  REQUIRE(v.size() == 4);
  CHECK(v[0].op == Op::kAlloc);
  CHECK(v[0].id == AllocId(1));
  CHECK(!v[0].has(key::kAddr));
  CHECK(v[1].op == Op::kMark);
  CHECK(v[2].name.size() == big.size());
  CHECK(v[3].line == 4);
  CHECK(v[3].t == Tick(12345678901234));
}

TEST_CASE("default time is the event index") {
  auto v = read_events(write_text("t.jsonl", "{\"op\":\"mark\"}\n{\"op\":\"mark\"}\n{\"op\":\"mark\",\"t\":7}\n"));
  CHECK(v[0].t == Tick(0));
  CHECK(v[1].t == Tick(1));
  CHECK(v[2].t == Tick(7));
}

TEST_CASE("every malformed trace is an InputError naming file:line and the key") {
  int k = 0;
  for (const auto& c : kBadCases) {
    std::string name = "bad" + std::to_string(k++) + ".jsonl";
    std::string msg = error_of(name, c.text);
    INFO(c.text << " -> " << msg);
    CHECK(msg.find(name + ":" + std::to_string(c.line) + ": ") != std::string::npos);
    CHECK(msg.find(c.needle) != std::string::npos);
    CHECK(error_of(name, c.text, {.decode_threads = 3}) ==
          msg);  // lines parsed on three worker threads: the same error
    CHECK(error_of(name, c.text, {.line_by_line = true}) == msg);
  }
}

// The reader parses chunks of lines with one simdjson stage 1 each and hands any line it doubts
// to the line-by-line parser: a bad line in the middle of a chunk must get the message it gets
// alone, and what comes before it must be read as before.
TEST_CASE("JSONL in blocks: a bad line among thousands of good ones gets the message it gets alone") {
  // 3,000 good lines (ids no case uses, time 0) before each case and 3,000 after it.
  std::string before, after;
  for (int i = 0; i < 1500; ++i) {
    std::string id = std::to_string(1000000 + i);
    before += "{\"op\":\"alloc\",\"id\":" + id + ",\"size\":64,\"t\":0}\n{\"op\":\"free\",\"id\":" + id + ",\"t\":0}\n";
    after += "{\"op\":\"mark\",\"name\":\"after\"}\n{\"op\":\"alloc\",\"id\":" + std::to_string(2000000 + i) +
             ",\"size\":8}\n";
  }
  int k = 0, checked = 0;
  for (const auto& c : kBadCases) {
    if (std::string_view(c.text).find("fragsim_trace") != std::string_view::npos) continue;  // a header
    std::string name = "alone" + std::to_string(k) + ".jsonl", inner = "inner" + std::to_string(k++) + ".jsonl";
    std::string alone = error_of(name, c.text), where = name + ":" + std::to_string(c.line) + ": ";
    REQUIRE(alone.find(where) != std::string::npos);
    std::string want =
        inner + ":" + std::to_string(3000 + c.line) + ": " + alone.substr(alone.find(where) + where.size());
    for (ReaderOptions ro :
         {ReaderOptions{}, ReaderOptions{.decode_threads = 3}, ReaderOptions{.line_by_line = true}}) {
      std::string msg = error_of(inner, before + c.text + "\n" + after, ro);
      INFO(c.text << " -> " << msg << " (" << ro.decode_threads << " threads, line by line " << ro.line_by_line << ")");
      REQUIRE(msg.size() >= want.size());
      CHECK(msg.substr(msg.size() - want.size()) == want);
    }
    ++checked;
  }
  CHECK(checked == static_cast<int>(std::size(kBadCases)) - 2);  // all but the two header cases
}

// Whatever the layout of a line — leading and trailing whitespace, CRLF, escaped keys, unknown keys
// with nested values, blank lines between — the blocks read the events the plain lines hold.
TEST_CASE("JSONL in blocks: whitespace, CRLF, escaped and unknown keys read as the plain lines") {
  std::string plain = tmp_path("layout.jsonl");
  generate_workload("random", 11, {{"events", 9000}, {"live", 200}}, plain);
  std::istringstream in(read_text(plain));
  std::string line, text;
  for (int i = 0; std::getline(in, line); ++i) {
    if (i > 0) {  // the header stays as it is
      switch (i % 7) {
        case 1:
          line = " \t " + line;
          break;
        case 2:
          line += " \t";
          break;
        case 3:
          line += "\r";
          break;
        case 4:
          line.replace(line.find("\"op\""), 4, "\"\\u006fp\"");
          break;
        case 5:
          line.insert(1, "\"x\":{\"y\":[1,2.5e-3,null,\"q\\\"\\u00e9\",{}],\"z\":true},");
          break;
        case 6:
          line = "\n  \n" + line;
          break;
      }
    }
    text += line + "\n";
  }
  std::string laid = write_text("layout2.jsonl", text);
  auto want = read_events(plain);
  REQUIRE(want.size() == 9000);
  for (ReaderOptions ro : {ReaderOptions{}, ReaderOptions{.decode_threads = 2}, ReaderOptions{.line_by_line = true}}) {
    INFO(ro.decode_threads << " threads, line by line " << ro.line_by_line);
    same_events(read_events(laid, ro), want);
  }
}

// Lines of the common shape are read by a strict scanner before the block path
// (LineParser::plain_line); near misses must fall through to simdjson and read, or fail, exactly
// as the line-by-line parser reads them.
TEST_CASE("JSONL plain lines: the scanner's events and errors are the line-by-line parser's") {
  const char* variants[] = {
      R"({"op":"alloc","id":5,"size":10})",
      R"(  { "op" : "alloc" ,	"id" : 6 , "size" : 10 , "t" : 900 }  )",
      R"({"op":"alloc","id":7,"size":0,"device":4294967295,"stream":9223372036854775807,"addr":0,"block_size":8})",
      R"({"op":"alloc","id":8,"size":1,"device":4294967296})",
      R"({"op":"alloc","id":9,"size":1,"stream":9223372036854775808})",
      R"({"op":"alloc","id":10,"size":1,"stream":-1})",
      R"({"op":"alloc","id":9999999999999999999,"size":1})",
      R"({"op":"alloc","id":18446744073709551615,"size":1})",
      R"({"op":"alloc","id":18446744073709551616,"size":1})",
      R"({"op":"alloc","id":011,"size":1})",
      R"({"op":"alloc","id":12,"size":1.0})",
      R"({"op":"alloc","id":13,"size":1e3})",
      R"({"op":"alloc","id":14,"size":-1})",
      R"({"op":"alloc","id":15,"id":16,"size":1})",
      R"({"op":"alloc","op":"alloc","id":17,"size":1})",
      R"({"op":"alloc","id":18})",
      R"({"op":"free"})",
      R"({"id":19,"size":1})",
      R"({"op":"allocate","id":20,"size":1})",
      R"({"op":"Alloc","id":21,"size":1})",
      R"({"op":"alloc","id":22,"size":1}x)",
      R"({"op":"alloc","id":23,"size":1,})",
      R"({"op":"alloc","id":24,"size":1 2})",
      R"({"op":"alloc" "id":25,"size":1})",
      R"({"op":"alloc","id":26,"size":1,"stack":3})",
      R"({"op":"alloc","id":27,"size":4,"block_size":2})",
      R"({"op":"free","id":1001,"addr":null})",
      R"({"op":"alloc","id":28,"size":1,"name":"n","x":[1]})",
      R"({"op":"alloc","\u0069d":29,"size":1})",
      R"({"op":"alloc","id":30,"size":1,"t":1000})",
      R"({"op":"mark"})",
      R"({})",
  };
  std::string before;
  for (int i = 0; i < 50; ++i)
    before += R"({"op":"alloc","id":)" + std::to_string(1000 + i) +
              R"(,"size":64})"
              "\n";
  int errors = 0, k = 0;
  for (const char* v : variants) {
    std::string text = before + v + "\n" + R"({"op":"free","id":1000,"t":2000})" + "\n";
    std::string name = "plain" + std::to_string(k++) + ".jsonl";
    std::string msg = error_of(name, text), alone = error_of(name, text, {.line_by_line = true});
    INFO(v << " -> " << msg);
    CHECK(msg == alone);
    CHECK(error_of(name, text, {.decode_threads = 2}) == msg);
    if (!msg.empty()) {
      ++errors;
      CHECK(msg.find(name + ":51: ") != std::string::npos);
      continue;
    }
    std::string p = write_text(name, text);
    auto a = read_events(p), b = read_events(p, {.line_by_line = true});
    same_events(a, b);
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].line == b[i].line);
      CHECK(a[i].block_size == b[i].block_size);
      CHECK(a[i].stack == b[i].stack);
      CHECK(a[i].handle == b[i].handle);
    }
  }
  CHECK(errors == 21);  // every variant that is not a valid event line fails, as simdjson reads it
}

TEST_CASE("JSONL parsed on worker threads: the same events, and the first error in file order") {
  // 30,000 events (15 chunks of the parallel reader), with blank and CRLF lines among them.
  std::string p = tmp_path("par.jsonl");
  generate_workload("random", 7, {{"events", 30000}, {"live", 300}}, p);
  // Without its times (each event's time is then its index), so that lines can be inserted.
  std::string text = std::regex_replace(read_text(p), std::regex(",\"t\":[0-9]+"), "");
  text.insert(text.find('\n', text.size() / 3) + 1, "\n   \n");
  text.insert(text.find('\n', text.size() / 2), "\r");
  std::string q = write_text("par2.jsonl", text);
  for (unsigned threads : {1u, 2u, 5u}) {
    INFO(threads << " threads");
    same_events(read_events(q, {.decode_threads = threads}), read_events(q));
  }
  // Line by line: the position of a line's start, to break lines at chosen places.
  auto at_line = [&](size_t n) {
    size_t pos = 0;
    for (size_t i = 1; i < n; ++i) pos = text.find('\n', pos) + 1;
    return pos;
  };
  // A free of an id never allocated (found when the events are validated, in file order) at line
  // 5,000, and a syntax error a worker meets at line 20,001 (earlier in time, in another chunk):
  // the first in the file wins, as with one thread; and the other way round.
  std::string semantic = "{\"op\":\"free\",\"id\":999999999}\n", syntax = "{\"op\":\"mark\",\"x\":01}\n";
  std::string a = text, b = text;
  a.insert(at_line(20000), syntax);
  a.insert(at_line(5000), semantic);
  b.insert(at_line(20000), semantic);
  b.insert(at_line(5000), syntax);
  for (unsigned threads : {0u, 3u}) {
    INFO(threads << " threads");
    CHECK(error_of("par_a.jsonl", a, {.decode_threads = threads}).find("par_a.jsonl:5000: id: free of id 999999999") !=
          std::string::npos);
    CHECK(error_of("par_b.jsonl", b, {.decode_threads = threads})
              .find("par_b.jsonl:5000: x: invalid JSON number: leading zero") != std::string::npos);
  }
}

TEST_CASE("lenient reading counts and skips frees of unknown ids, keeping event indexes") {
  std::string text = "{\"op\":\"free\",\"id\":5}\n{\"op\":\"alloc\",\"id\":1,\"size\":3}\n{\"op\":\"free\",\"id\":1}\n";
  std::string p = write_text("lenient.jsonl", text);
  ReaderOptions ro;
  ro.lenient = true;
  auto r = open_trace(p, ro);
  Event ev;
  REQUIRE(r->next(ev));
  CHECK(ev.op == Op::kAlloc);
  CHECK(ev.index == 1);
  REQUIRE(r->next(ev));
  CHECK(!r->next(ev));
  CHECK(r->skipped_frees() == 1);
  CHECK_THROWS_AS(read_events(p), InputError);
}

TEST_CASE("jsonl -> fstrace -> jsonl and jsonl.zst keep every key of every event") {
  std::string src = write_text("every.jsonl", kEveryKey);
  auto a = read_events(src);
  for (const char* mid_ext : {".fstrace", ".jsonl.zst"}) {
    std::string mid = tmp_path(std::string("every") + mid_ext), back = tmp_path("every_back.jsonl");
    convert(src, mid);
    CHECK(open_trace(mid, {})->header()["source"] == "t");
    convert(mid, back);
    same_events(a, read_events(mid));
    same_events(a, read_events(back));
  }
}

// `aggregate` marks the bytes of several allocations a recording does not list one by one (a
// profiler trace's memory live before its window at addresses it never states). A what-if holds
// them as they are: PyTorch rounds each request (roundup_power2_divisions=4: 5 MiB + 1 B to 6 MiB,
// the next quarter of its power of two), not a sum of requests.
TEST_CASE("aggregate: kept by every format, only on a pre-trace alloc and never rounded as one request") {
  const std::string seg = R"({"op":"segment_alloc","addr":140000000000000,"size":20971520,"pre_trace":true})";
  auto trace = [&](bool aggregate) {
    return write_text(aggregate ? "agg.jsonl" : "one.jsonl",
                      seg + "\n" + R"({"op":"alloc","id":1,"size":5242881,"addr":140000000000000,"pre_trace":true)" +
                          (aggregate ? R"(,"aggregate":true})" : "}") + "\n" +
                          R"({"op":"alloc","id":2,"size":1024,"t":1})" + "\n" + R"({"op":"free","id":2,"t":2})" + "\n");
  };
  const std::string agg = trace(true), one = trace(false);
  for (const char* ext : {".fstrace", ".jsonl"}) {
    std::string mid = tmp_path(std::string("agg_mid") + ext);
    convert(agg, mid);
    auto evs = read_events(mid);
    REQUIRE(evs.size() == 4);
    CHECK(evs[1].has(key::kAggregate));
    CHECK(!evs[2].has(key::kAggregate));
    same_events(evs, read_events(agg));
  }
  auto held = [](const std::string& t) {
    auto r = run_json({.trace = t, .policy = "torch-caching", .sets = {"roundup_power2_divisions=4"}});
    CHECK(r["devices"][0]["before_recording"]["held"] == "rebuilt");
    return r["devices"][0]["peak_allocated_bytes"].get<Bytes>();
  };
  CHECK(held(agg) == 5243392 + 1024);  // to whole 512-byte blocks
  CHECK(held(one) == 6291456 + 1024);  // one request: a quarter step of 4 MiB
  CHECK(
      error_of("agg_free.jsonl", R"({"op":"alloc","id":1,"size":8,"aggregate":true})")
          .find(
              "agg_free.jsonl:1: aggregate: only an alloc or a segment_alloc marked pre_trace can stand for several") !=
      std::string::npos);
  CHECK(error_of("agg_false.jsonl", R"({"op":"alloc","id":1,"size":8,"aggregate":false})").empty());
}

TEST_CASE("fstrace varints of every length from 1 to 10 bytes round-trip") {
  // LEB128 (as .fstrace stores numbers) takes one byte per 7 bits: 2^(7k) - 1 is the largest k-byte
  // value, 2^(7k) the smallest of k + 1 bytes, 2^64 - 1 takes ten. Each is an id, size, time step
  // and zigzagged stream (the reader decodes up to 8 bytes from one load, longer ones byte by byte).
  std::string text;
  std::uint64_t t = 0;
  std::vector<std::uint64_t> values{0, ~std::uint64_t{0}};
  for (int k = 1; k <= 9; ++k) {
    const std::uint64_t top = std::uint64_t{1} << (7 * k);
    values.insert(values.end(), {top - 1, top, top + 1});
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const std::uint64_t v = values[i];
    t += v % 1000003;
    const std::int64_t stream = static_cast<std::int64_t>(v >> 2) * (i % 2 ? -1 : 1);
    text += fmt::format("{{\"op\":\"alloc\",\"id\":{},\"size\":{},\"t\":{},\"stream\":{}}}\n", v, v, t, stream);
    text += fmt::format("{{\"op\":\"free\",\"id\":{},\"t\":{}}}\n", v, t);
  }
  std::string src = write_text("varints.jsonl", text), mid = tmp_path("varints.fstrace");
  convert(src, mid);
  auto a = read_events(src), b = read_events(mid);
  REQUIRE(a.size() == 2 * values.size());
  CHECK(a[3].id.value() == ~std::uint64_t{0});
  same_events(a, b);
}

TEST_CASE("generated workloads round-trip through .fstrace") {
  for (const auto& w : list_workloads()) {
    std::string j = tmp_path(w.name + ".jsonl"), f = tmp_path(w.name + ".fstrace");
    nlohmann::json knobs = w.name == "random" ? nlohmann::json{{"events", 5000}} : nlohmann::json::object();
    generate_workload(w.name, 7, knobs, j);
    generate_workload(w.name, 7, knobs, f);
    auto a = read_events(j), b = read_events(f);
    INFO(w.name);
    REQUIRE(a.size() > 100);
    same_events(a, b);
  }
}

TEST_CASE("generators are deterministic per seed and differ across seeds") {
  std::string a = tmp_path("s1.jsonl"), b = tmp_path("s1b.jsonl"), c = tmp_path("s2.jsonl");
  generate_workload("torch-eager", 1, {{"steps", 2}}, a);
  generate_workload("torch-eager", 1, {{"steps", 2}}, b);
  generate_workload("torch-eager", 2, {{"steps", 2}}, c);
  CHECK(read_text(a) == read_text(b));
  CHECK(read_text(a) != read_text(c));
  CHECK_THROWS_AS(generate_workload("torch-eager", 1, {{"stepz", 2}}, a), InputError);
}

TEST_CASE("corrupt .fstrace files are input errors") {
  std::string good = tmp_path("c.fstrace");
  generate_workload("random", 3, {{"events", 200}}, good);
  std::string bytes = read_text(good);
  // Truncated just before the end, bad magic, cut in the middle of a record stream.
  for (auto mutate : {+[](std::string s) { return s.substr(0, s.size() - 3); },
                      +[](std::string s) {
                        s[0] = 'X';
                        return s;
                      },
                      +[](std::string s) { return s.substr(0, s.size() / 2); }}) {
    std::string p = write_text("corrupt.fstrace", mutate(bytes));
    CHECK_THROWS_AS(read_events(p), InputError);
  }
}

TEST_CASE("seeded mutation of JSONL and .fstrace traces: only FILE:LINE input errors, never a crash", "[fuzz]") {
  std::string j = tmp_path("mutsrc.jsonl"), f = tmp_path("mutsrc.fstrace"), r = tmp_path("mutsrc2.jsonl");
  generate_workload("tpu-train", 3, {{"layers", 1}, {"steps", 1}}, j);
  generate_workload("tpu-train", 3, {{"layers", 1}, {"steps", 1}}, f);
  generate_workload("random", 3, {{"events", 2500}, {"live", 100}}, r);  // two chunks of lines
  std::uint64_t s = 99;
  auto rnd = [&] { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (const auto& [src, ext] : {std::pair{j, std::string(".jsonl")}, std::pair{r, std::string(".jsonl")},
                                 std::pair{f, std::string(".fstrace")}}) {
    std::string good = read_text(src);
    int errors = 0;
    for (int k = 0; k < 300; ++k) {
      std::string bytes = good;
      size_t at = rnd() % bytes.size();
      if (rnd() % 2)
        bytes[at] = static_cast<char>(rnd());
      else
        bytes.erase(at, 1 + rnd() % 8);
      std::string p = write_text("mut" + ext, bytes);
      std::vector<Event> got;
      std::string msg;
      try {
        got = read_events(p);
      } catch (const InputError& e) {
        ++errors;
        msg = e.what();
        CHECK(msg.find("mut" + ext + ":") != std::string::npos);
      }
      if (ext != ".jsonl") continue;
      // The chunks parsed as blocks read what the lines read one by one: the same events, or
      // the same error where they stop.
      INFO("mutation " << k << ": " << msg);
      CHECK(error_of("mut.jsonl", bytes, {.line_by_line = true}) == msg);
      if (msg.empty()) same_events(got, read_events(p, {.line_by_line = true}));
    }
    INFO(ext);
    CHECK(errors > 50);
  }
}

// Gradient checkpointing what-if (issue 13): remat=every:K keeps every K-th layer's input and
// recomputes each segment before its backward pass; full = every:1.
TEST_CASE("gen: remat recomputes what it freed, lowers the activation peak and leaves remat=none unchanged") {
  auto events = [](const std::string& workload, const std::string& remat, nlohmann::json knobs) {
    if (!remat.empty()) knobs["remat"] = remat;
    std::string p = tmp_path(workload + "_" + (remat.empty() ? "default" : remat) + ".jsonl");
    generate_workload(workload, 3, knobs, p);
    return read_events(p);
  };
  auto peak = [](const std::vector<Event>& ev) {
    std::map<std::uint64_t, std::uint64_t> live;
    std::uint64_t cur = 0, best = 0;
    for (const auto& e : ev) {
      if (e.op == Op::kAlloc) live[e.id.value()] = e.size, cur += e.size;
      if (e.op == Op::kFree) cur -= live[e.id.value()], live.erase(e.id.value());
      best = std::max(best, cur);
    }
    CHECK(live.size() < ev.size());  // the reader validated every free; nothing double-freed
    return best;
  };
  auto count = [](const std::vector<Event>& ev, const std::string& prefix) {
    size_t n = 0;
    for (const auto& e : ev) n += e.op == Op::kAlloc && e.name.rfind(prefix, 0) == 0;
    return n;
  };
  const nlohmann::json jax = {{"layers", 8}, {"batch", 64}, {"steps", 2}};
  auto none = events("jax-train", "none", jax), dflt = events("jax-train", "", jax);
  same_events(none, dflt);
  CHECK(count(none, "remat/") == 0);
  auto full = events("jax-train", "full", jax), every4 = events("jax-train", "every:4", jax);
  // full: every layer's MLP intermediate recomputed, every layer input kept.
  CHECK(count(full, "remat/mlp/") == 8 * 2);
  CHECK(count(full, "remat/act/") == 0);
  // every:4: two segments of four; all but each segment's first input recomputed.
  CHECK(count(every4, "remat/mlp/") == 8 * 2);
  CHECK(count(every4, "remat/act/") == 6 * 2);
  CHECK(peak(full) < peak(none));
  CHECK(peak(every4) < peak(none));

  const nlohmann::json torch = {{"steps", 2}, {"ops_per_step", 300}};
  auto tnone = events("torch-eager", "none", torch), tfull = events("torch-eager", "full", torch);
  same_events(tnone, events("torch-eager", "", torch));
  CHECK(count(tnone, "activation/remat") == 0);
  CHECK(count(tfull, "activation/remat") > 0);
  CHECK(peak(tfull) < peak(tnone));

  for (const char* bad : {"every:0", "every:9", "every:", "sometimes", "every:2x"})
    CHECK_THROWS_AS(generate_workload("jax-train", 1, {{"layers", 8}, {"remat", bad}}, tmp_path("bad.jsonl")),
                    InputError);
}

TEST_CASE("compare: several traces, e.g. with and without remat, one table with the OOM and the fix") {
  std::string a = tmp_path("cmp_none.jsonl"), b = tmp_path("cmp_remat.jsonl");
  generate_workload("jax-train", 1, {{"layers", 8}, {"batch", 64}, {"steps", 2}}, a);
  generate_workload("jax-train", 1, {{"layers", 8}, {"batch", 64}, {"steps", 2}, {"remat", "every:4"}}, b);
  auto r = compare_cmd({.base = {.trace = a, .capacity = "4GiB"}, .traces = {a, b}, .policies = "xla-bfc"});
  const auto& arr = r.json;
  REQUIRE(arr.size() == 2);
  CHECK(arr[0]["label"] == "cmp_none.jsonl: xla-bfc");
  CHECK(arr[1]["label"] == "cmp_remat.jsonl: xla-bfc");
  CHECK(arr[0]["completed"] == false);  // 0.75 of 4 GiB is too little without remat ...
  CHECK(arr[1]["completed"] == true);   // ... and enough with it
  CHECK(arr[1]["peak_requested_bytes"].get<std::uint64_t>() < arr[0]["peak_requested_bytes"].get<std::uint64_t>());
  CHECK(r.text.find("trace " + b) != std::string::npos);
}

// A command reads its input several times (the replay, the second fidelity pass, the history, the
// report's best plan, advice, a sweep's replays); each read of a pickle was a full decode (a 1 GB
// snapshot: hours), each read of a profiler trace a parse and a layout search of seconds. While
// conversions are kept, each file is converted once; nothing is kept outside a scope (the profiler
// trace's layouts were kept for the whole process, by their events, before 2026-12-07).
TEST_CASE("a trace read again while conversions are kept is converted once and a file changed since is read again") {
  namespace fs = std::filesystem;
  auto digest = [](const std::string& path) {
    auto r = open_trace(path);
    Event ev;
    std::uint64_t n = 0;
    while (r->next(ev)) ++n;
    return fmt::format("{} events, {}", n, r->digest());
  };
  const std::pair<std::string, std::string> traces[] = {
      {"kept.pickle", read_input(test_data("torch/small_mlp_97ev.pickle.zst"), 1 << 20)},
      {"kept.pt.trace.json", read_file(test_data("kineto/mi300x_rank1_hip.json"))}};
  for (const auto& [name, bytes] : traces) {
    INFO(name);
    const std::string p = tmp_path(name);
    write_file_atomic(p, bytes);
    const std::string whole = digest(p);
    const auto when = fs::last_write_time(p);
    auto spoil = [&](fs::file_time_type t) {  // the same size, none of the content, time t
      write_file_atomic(p, std::string(bytes.size(), '\0'));
      fs::last_write_time(p, t);
    };
    {
      KeepConversions keep;
      CHECK(digest(p) == whole);
      spoil(when);
      CHECK(digest(p) == whole);  // not read again: the first read's conversion
      {
        KeepConversions inner;  // scopes nest: the outer one's conversion serves
        CHECK(digest(p) == whole);
      }
      CHECK(digest(p) == whole);  // the inner scope's end kept it
      fs::last_write_time(p, when + std::chrono::seconds(1));
      CHECK_THROWS_AS(digest(p), InputError);  // changed since: read again
    }
    write_file_atomic(p, bytes);
    fs::last_write_time(p, when);
    CHECK(digest(p) == whole);
    spoil(when);
    CHECK_THROWS_AS(digest(p), InputError);  // nothing kept outside a scope
  }
}
