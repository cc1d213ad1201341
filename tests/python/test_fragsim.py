"""The Python module against the command line: every entry point gives what the same command gives
for the same trace and options (the report, the text, the HTML, the error message), for every kind
of source (a path, a PyTorch snapshot dict, an iterable of events). Run by ctest, one entry per
test (tests/CMakeLists.txt), with the module of the build tree and FRAGSIM_BINARY the CLI."""

import json
import os
import pickle
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest

import fragsim
from fragsim import _fragsim

SRC = os.environ["FRAGSIM_SOURCE_DIR"]
CLI = os.environ["FRAGSIM_BINARY"]
JAX = os.path.join(SRC, "traces/samples/jax_train_small.jsonl")
LLM = os.path.join(SRC, "traces/samples/llm_serving_small.jsonl")
PICKLES = [os.path.join(SRC, "tests/data", p) for p in ("two_devices.pickle", "recorded_settings.pickle")]
MiB = 1 << 20


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True)


class Scratch(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fragsim-py-")
        self.addCleanup(shutil.rmtree, self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def cli_json(self, *args):
        """Runs the CLI with --json FILE; returns (the JSON, the completed process)."""
        out = self.path("cli.json")
        if os.path.exists(out):
            os.remove(out)
        p = cli(*args, "--json", out)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        with open(out) as f:
            return json.load(f), p

    def assert_same_error(self, call, *cli_args, exc=fragsim.InputError):
        """call() raises exc with the message the CLI prints after 'fragsim: ', and the CLI exits
        with the code the exception names."""
        with self.assertRaises(exc) as cm:
            call()
        p = cli(*cli_args)
        self.assertEqual(p.stderr, f"fragsim: {cm.exception}\n")
        self.assertEqual(p.returncode, cm.exception.exit_code)
        return str(cm.exception)


def write_jsonl(path, items):
    with open(path, "w") as f:
        for item in items:
            f.write(json.dumps(item) + "\n")
    return path


# A hand-built PyTorch snapshot, in the layout torch.cuda.memory._snapshot() returns (the keys the
# PyTorch 2.x allocator writes: segments with their blocks, device_traces with one list of
# entries per device). The caching allocator keeps one 20 MiB segment for requests above 1 MiB
# (kLargeBuffer) and rounds large allocations to 2 MiB (kRoundLarge); blocks never span segments.
A = 0x7F0000000000


def hand_snapshot():
    def entry(action, addr, size, t):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": []}

    trace = [
        entry("segment_alloc", A, 20 * MiB, 1),
        entry("alloc", A, 8 * MiB, 2),
        entry("alloc", A + 8 * MiB, 8 * MiB, 3),
        entry("free_requested", A, 8 * MiB, 4),
        entry("free_completed", A, 8 * MiB, 4),
        # 12 MiB: 8 MiB free at the start of the segment and 4 MiB at its end, neither enough.
        entry("segment_alloc", A + 32 * MiB, 12 * MiB, 5),
        entry("alloc", A + 32 * MiB, 12 * MiB, 6),
    ]
    segments = [
        {"device": 0, "address": A, "total_size": 20 * MiB, "stream": 0, "segment_type": "large",
         "allocated_size": 8 * MiB, "active_size": 8 * MiB, "requested_size": 8 * MiB, "is_expandable": False,
         "segment_pool_id": (0, 0), "frames": [],
         "blocks": [{"address": A, "size": 8 * MiB, "requested_size": 8 * MiB, "state": "inactive", "frames": []},
                    {"address": A + 8 * MiB, "size": 8 * MiB, "requested_size": 8 * MiB,
                     "state": "active_allocated", "frames": []},
                    {"address": A + 16 * MiB, "size": 4 * MiB, "requested_size": 0, "state": "inactive",
                     "frames": []}]},
        {"device": 0, "address": A + 32 * MiB, "total_size": 12 * MiB, "stream": 0, "segment_type": "large",
         "allocated_size": 12 * MiB, "active_size": 12 * MiB, "requested_size": 12 * MiB, "is_expandable": False,
         "segment_pool_id": (0, 0), "frames": [],
         "blocks": [{"address": A + 32 * MiB, "size": 12 * MiB, "requested_size": 12 * MiB,
                     "state": "active_allocated", "frames": []}]},
    ]
    return {"segments": segments, "device_traces": [trace],
            "allocator_settings": {"expandable_segments": False, "max_split_size": -1}}


class Run(Scratch):
    def test_report_text_and_outputs_equal_the_cli(self):
        cases = [
            ({}, []),
            ({"policy": "xla-bfc", "capacity": "2GiB", "keep_going": True},
             ["--policy", "xla-bfc", "--capacity", "2GiB", "--keep-going"]),
            # An OOM: the advice is replayed (proven_advice) in both.
            ({"policy": "best-fit", "capacity": 600 * MiB, "reserve": 0},
             ["--policy", "best-fit", "--capacity", "600MiB", "--reserve", "0"]),
            ({"env": {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".3"}, "hw": "a100-40g"},
             ["--env", "XLA_PYTHON_CLIENT_MEM_FRACTION=.3", "--hw", "a100-40g"]),
            ({"policy": "xla-bfc", "settings": {"preallocate": False, "mem_fraction": 0.5}, "jobs": 1},
             ["--policy", "xla-bfc", "--set", "preallocate=false", "--set", "mem_fraction=0.5", "--jobs", "1"]),
        ]
        for kw, args in cases:
            with self.subTest(kw=kw):
                r = fragsim.run(JAX, **kw)
                want, p = self.cli_json("run", JAX, *args)
                self.assertEqual(r, want)
                self.assertIsInstance(r, dict)
                self.assertEqual(r.text(), cli("run", JAX, *args).stdout)
                self.assertEqual(str(r), r.text())
                with open(self.path("cli.json")) as f:
                    self.assertEqual(r.json(), f.read())
        oom = fragsim.run(JAX, policy="best-fit", capacity=600 * MiB, reserve=0)
        self.assertFalse(oom["completed"])
        self.assertTrue(oom["advice"])

    def test_html_placements_and_perfetto_are_the_cli_files(self):
        mine = {k: self.path(f"py.{k}") for k in ("html", "placements", "perfetto")}
        theirs = {k: self.path(f"cli.{k}") for k in mine}
        r = fragsim.run(JAX, policy="xla-bfc", capacity="1GiB", **mine)
        p = cli("run", JAX, "--policy", "xla-bfc", "--capacity", "1GiB",
                *[a for k, v in theirs.items() for a in (f"--{k}", v)])
        self.assertEqual(p.returncode, 0, p.stderr)
        for k in mine:
            with open(mine[k], "rb") as a, open(theirs[k], "rb") as b:
                self.assertEqual(a.read(), b.read(), k)
        # report.html() later renders the same run (the buffers were kept: html= was given).
        r.html(self.path("again.html"))
        with open(self.path("again.html"), "rb") as a, open(mine["html"], "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_sizes_and_settings_take_python_values(self):
        a = fragsim.run(JAX, policy="xla-bfc", capacity=700 * MiB, reserve=0,
                        env=["XLA_PYTHON_CLIENT_MEM_FRACTION=.5"])
        b = fragsim.run(JAX, policy="xla-bfc", capacity="700MiB", reserve="0",
                        env={"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"})
        self.assertEqual(a, b)
        self.assertEqual(a["hardware"]["spaces"][0]["capacity_bytes"], 700 * MiB)
        with self.assertRaises(TypeError):
            fragsim.run(JAX, capacity=True)
        with self.assertRaises(fragsim.InputError):
            fragsim.run(JAX, capacity=-1)
        with self.assertRaises(TypeError):
            fragsim.run(JAX, env={"XLA_PYTHON_CLIENT_PREALLOCATE": False})  # an environment holds strings
        with self.assertRaises(TypeError):
            fragsim.run(JAX, unknown_option=1)

    def test_a_report_is_a_plain_dict_for_pickle_and_json(self):
        r = fragsim.run(JAX, policy="best-fit")
        self.assertEqual(json.loads(json.dumps(r)), r)
        back = pickle.loads(pickle.dumps(r))
        self.assertIs(type(back), dict)
        self.assertEqual(back, r)


class Sources(Scratch):
    def test_snapshot_dicts_equal_their_pickles(self):
        for path in PICKLES:
            with open(path, "rb") as f:
                snapshot = pickle.load(f)
            for kw, args in (({}, []), ({"capacity": "8MiB", "keep_going": True}, ["--capacity", "8MiB", "--keep-going"])):
                with self.subTest(path=path, kw=kw):
                    want, _ = self.cli_json("run", path, *args)
                    self.assertEqual(fragsim.run(snapshot, name=path, **kw), want)
        # Unnamed, the snapshot is "<snapshot>" in the report and its notes.
        r = fragsim.run(snapshot)
        self.assertEqual(r["trace"]["path"], "<snapshot>")

    def test_a_snapshot_built_in_python(self):
        snap = hand_snapshot()
        r = fragsim.run(snap)
        self.assertEqual(r["policy"]["name"], "torch-caching")  # the policy follows a PyTorch snapshot
        self.assertTrue(r["completed"])
        self.assertEqual(r["peak_requested_bytes"], 8 * MiB + 12 * MiB)
        # The 12 MiB request fits in neither free block of the first segment: a second segment, as recorded.
        self.assertEqual(r["peak_reserved_bytes"], 20 * MiB + 12 * MiB)
        self.assertEqual(r["fidelity"]["allocs_matched"], r["fidelity"]["allocs_compared"])
        # On a device that gives the allocator 24 MiB, that second segment does not fit: an OOM
        # with 12 MiB free in the first segment: fragmentation.
        oom = fragsim.run(snap, capacity="24MiB", reserve=0)
        self.assertFalse(oom["completed"])
        self.assertEqual(oom["ooms"][0]["requested_bytes"], 12 * MiB)
        self.assertEqual(oom["ooms"][0]["cause"], "fragmentation")
        # The same objects pickled to a file: the CLI gives the same report.
        path = self.path("hand.pickle")
        with open(path, "wb") as f:
            pickle.dump(snap, f)
        for kw, args in (({}, []), ({"capacity": "24MiB", "reserve": 0}, ["--capacity", "24MiB", "--reserve", "0"])):
            want, _ = self.cli_json("run", path, *args)
            self.assertEqual(fragsim.run(snap, name=path, **kw), want)

    def test_snapshot_errors_name_the_object(self):
        snap = hand_snapshot()
        snap["segments"][1]["blocks"][0]["frames"] = [object()]
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.run(snap)
        self.assertIn("<snapshot>: snapshot: segments[1].blocks[0].frames[0]: a object is not", str(cm.exception))
        snap = hand_snapshot()
        snap["device_traces"][0][1]["size"] = 1 << 70
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.run(snap, name="mine")
        self.assertEqual(str(cm.exception), "mine: snapshot: device_traces[0][1].size: integer does not fit in 64 bits")
        loop = hand_snapshot()
        loop["segments"].append(loop["segments"])
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.run(loop)
        self.assertIn("contains itself", str(cm.exception))
        # What the importer refuses in a file, it refuses in a dict, with the same message.
        bad = {"device_traces": [[{"action": "alloc", "addr": 1}]], "segments": []}
        path = self.path("bad.pickle")
        with open(path, "wb") as f:
            pickle.dump(bad, f)
        self.assert_same_error(lambda: fragsim.run(bad, name=path), "run", path)

    def test_events_equal_their_jsonl_file(self):
        header = {"fragsim_trace": 1, "time_unit": "us", "workload": "by hand"}
        events = [header,
                  {"op": "alloc", "id": 1, "size": 3 * MiB, "t": 1, "name": "w", "shape": [768, 1024], "dtype": "f32"},
                  {"op": "alloc", "id": 2, "size": 5 * MiB, "t": 2, "stream": 7},
                  {"op": "mark", "name": "step 1", "t": 3},
                  {"op": "free", "id": 1, "t": 4},
                  {"op": "alloc", "id": 3, "size": 4 * MiB, "t": 5, "device": 1},
                  {"op": "alloc", "id": 4, "size": 6 * MiB, "t": 6, "future_key": {"kept": [1, None]}}]
        path = write_jsonl(self.path("events.jsonl"), events)
        for kw, args in (({"policy": "best-fit", "capacity": "12MiB", "reserve": 0},
                          ["--policy", "best-fit", "--capacity", "12MiB", "--reserve", "0"]),
                         ({"policy": "ideal"}, ["--policy", "ideal"])):
            want, _ = self.cli_json("run", path, *kw and args)
            self.assertEqual(fragsim.run(events, name=path, **kw), want)  # a list
            self.assertEqual(fragsim.run(iter(events), name=path, **kw), want)  # consumed once
            with open(path) as f:  # JSONL lines, as an open file yields them
                self.assertEqual(fragsim.run(f, name=path, **kw), want)
        r = fragsim.run(e for e in events[1:])
        self.assertEqual(r["trace"]["path"], "<events>")
        self.assertEqual(r["trace"]["events"], 6)
        # Device 0: 3 + 5 MiB live, then 5 + 6 MiB once id 1 is freed (id 3 is on device 1).
        self.assertEqual(r["devices"][0]["peak_requested_bytes"], 5 * MiB + 6 * MiB)

    def test_event_errors_are_the_jsonl_readers(self):
        bad = [
            [{"op": "alloc", "id": 1, "size": -5}],
            [{"op": "alloc", "id": 1, "size": 1.5}],
            [{"op": "alloc", "id": 1, "size": "4"}],
            [{"op": "alloc", "id": 1, "size": True}],
            [{"op": "alloc", "id": 1}],
            [{"op": "allocate", "id": 1, "size": 4}],
            [{"op": "alloc", "id": 1, "size": 4, "dtype": "f33"}],
            [{"op": "alloc", "id": 1, "size": 4, "shape": [3], "dtype": "f32"}],
            [{"op": "alloc", "id": 1, "size": 4, "t": 5}, {"op": "alloc", "id": 2, "size": 4, "t": 4}],
            [{"op": "alloc", "id": 1, "size": 4}, {"op": "alloc", "id": 1, "size": 4}],
            [{"op": "free", "id": 3}],
            [{"fragsim_trace": 2}],
            [{"fragsim_trace": 1, "time_unit": "h"}],
            [{"op": "alloc", "id": 1, "size": 4}, [1, 2]],
            [{"op": "alloc", "id": 1, "size": 1 << 64}],
        ]
        for events in bad:
            with self.subTest(events=events):
                path = write_jsonl(self.path("bad.jsonl"), events)
                message = self.assert_same_error(lambda: fragsim.run(events, name=path), "run", path)
                self.assertTrue(message.startswith(path + ":"), message)
        # A value JSON cannot hold: the event and the key named.
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.run([{"op": "alloc", "id": 1, "size": 4}, {"op": "alloc", "id": 2, "size": 4, "name": {1, 2}}])
        self.assertEqual(str(cm.exception), "<events>:2: name: a set is not a JSON value")
        # --lenient skips frees of unknown ids, as for a file.
        events = [{"op": "alloc", "id": 1, "size": 4}, {"op": "free", "id": 3}, {"op": "free", "id": 1}]
        path = write_jsonl(self.path("lenient.jsonl"), events)
        want, _ = self.cli_json("run", path, "--lenient")
        self.assertEqual(fragsim.run(events, name=path, lenient=True), want)
        self.assertEqual(want["trace"]["skipped_frees"], 1)


class Errors(Scratch):
    def test_bad_options_raise_the_cli_message(self):
        cases = [
            ({"policy": "xla-bfcc"}, ["--policy", "xla-bfcc"]),
            ({"capacity": "16"}, ["--capacity", "16"]),
            ({"hw": "h101"}, ["--hw", "h101"]),
            ({"policy": "best-fit", "env": {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}},
             ["--policy", "best-fit", "--env", "XLA_PYTHON_CLIENT_MEM_FRACTION=.5"]),
            ({"policy": "xla-bfc", "settings": {"no_such_key": 1}}, ["--policy", "xla-bfc", "--set", "no_such_key=1"]),
            ({"policy": "tpu-padded"}, ["--policy", "tpu-padded"]),
        ]
        for kw, args in cases:
            with self.subTest(kw=kw):
                self.assert_same_error(lambda: fragsim.run(JAX, **kw), "run", JAX, *args)
        missing = self.path("no-such-trace.jsonl")
        self.assert_same_error(lambda: fragsim.run(missing), "run", missing, exc=fragsim.EnvError)
        self.assertTrue(issubclass(fragsim.InputError, ValueError))
        self.assertTrue(issubclass(fragsim.EnvError, OSError))
        self.assert_same_error(lambda: fragsim.sweep(JAX, "min-everything"), "sweep", JAX, "--find", "min-everything")
        self.assert_same_error(lambda: fragsim.layout("bf16[1000,,129]"), "layout", "bf16[1000,,129]")
        self.assert_same_error(lambda: fragsim.list("xla-bfx"), "list", "xla-bfx")

    def test_sources_of_the_wrong_kind(self):
        for source in (b"trace.jsonl", 42, None):
            with self.subTest(source=source), self.assertRaises(TypeError):
                fragsim.run(source)
        with self.assertRaises(TypeError):
            fragsim.run(JAX, name="a path names itself")


class Compare(Scratch):
    def test_equals_the_cli_on_one_and_two_traces(self):
        pol = "ideal,best-fit,xla-bfc[preallocate=false]"
        for sources in ((JAX,), (JAX, LLM)):
            with self.subTest(sources=sources):
                c = fragsim.compare(*sources, policies=pol, capacity="1GiB")
                want, _ = self.cli_json("compare", *sources, "--policies", pol, "--capacity", "1GiB")
                self.assertEqual(c, want)
                self.assertEqual(len(c), 3 * len(sources))
                self.assertEqual(c.text(), cli("compare", *sources, "--policies", pol, "--capacity", "1GiB").stdout)
                self.assertEqual([r["label"] for r in c][:3], [f"{os.path.basename(JAX)}: {p}" if len(sources) > 1
                                                               else p for p in pol.split(",")])
        # A list of entries, any number of threads: the same runs. The default entries follow the input.
        self.assertEqual(fragsim.compare(JAX, policies=pol.split(",")[:2] + ["xla-bfc[preallocate=false]"], jobs=1,
                                         capacity="1GiB"),
                         fragsim.compare(JAX, policies=pol, jobs=3, capacity="1GiB"))
        want, _ = self.cli_json("compare", JAX)
        self.assertEqual(fragsim.compare(JAX), want)

    def test_html_is_the_cli_file_and_sources_in_memory_compare(self):
        fragsim.compare(JAX, policies="ideal,best-fit", html=self.path("py.html"))
        cli("compare", JAX, "--policies", "ideal,best-fit", "--html", self.path("cli.html"))
        with open(self.path("py.html"), "rb") as a, open(self.path("cli.html"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        snap = hand_snapshot()
        c = fragsim.compare(snap, policies="ideal,torch-caching", capacity="24MiB", reserve=0)
        self.assertEqual([r["completed"] for r in c], [True, False])  # the bound fits, the allocator fragments


class Sweep(Scratch):
    def test_equals_the_cli(self):
        for find, args in (("min-capacity", ["--policy", "best-fit"]), ("min-mem-fraction", ["--policy", "xla-bfc"])):
            with self.subTest(find=find):
                s = fragsim.sweep(JAX, find, policy=args[1])
                want, p = self.cli_json("sweep", JAX, "--find", find, *args)
                self.assertEqual(s, want)
                self.assertEqual(s.text(), cli("sweep", JAX, "--find", find, *args).stdout)
                self.assertIsNotNone(s["value"])
        # The answer replays: at the capacity found it fits, one granule less it does not.
        s = fragsim.sweep(hand_snapshot(), "min-capacity")
        self.assertTrue(fragsim.run(hand_snapshot(), capacity=int(s["value"]))["completed"])


class Check(Scratch):
    def test_a_regression_fails_as_with_the_cli(self):
        good = fragsim.run(JAX, policy="best-fit", capacity="2GiB")
        bad = fragsim.run(JAX, policy="best-fit", capacity=600 * MiB, reserve=0, keep_going=True)
        good.json(self.path("good.json"))
        bad.json(self.path("bad.json"))
        # Paths: exactly the CLI's result.
        c = fragsim.check(self.path("good.json"), self.path("bad.json"), allow_different_policy=True)
        want, p = self.cli_json("check", "--baseline", self.path("good.json"), "--current", self.path("bad.json"),
                                "--allow-different-policy")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(c, want)
        self.assertFalse(c["pass"])
        self.assertEqual(c.text(), cli("check", "--baseline", self.path("good.json"), "--current",
                                       self.path("bad.json"), "--allow-different-policy").stdout)
        self.assertIn("oom\\_count", c.markdown())  # Markdown escapes the underscore
        self.assertIn("<testsuite", c.junit())
        self.assertIn("::error", c.github("bad.json"))
        # Reports in memory: the same verdict on the same figures.
        d = fragsim.check(good, bad, allow_different_policy=True)
        self.assertEqual([(i["metric"], i["regression"]) for i in d["items"]],
                         [(i["metric"], i["regression"]) for i in c["items"]])
        self.assertTrue(fragsim.check(good, good)["pass"])
        with self.assertRaises(fragsim.InputError):
            fragsim.check(good, {"fragsim_report": 1})


class Diff(Scratch):
    def test_equals_the_cli_on_reports_and_traces(self):
        fragsim.run(JAX, policy="best-fit", capacity="2GiB").json(self.path("a.json"))
        fragsim.run(JAX, policy="best-fit", capacity=600 * MiB, reserve=0, keep_going=True).json(self.path("b.json"))
        a, b = self.path("a.json"), self.path("b.json")
        d = fragsim.diff(a, b)
        want, _ = self.cli_json("diff", a, b)
        self.assertEqual(d, want)
        self.assertEqual(d.text(), cli("diff", a, b).stdout)
        cli("diff", a, b, "--markdown", self.path("cli.md"))
        with open(self.path("cli.md")) as f:
            self.assertEqual(d.markdown(), f.read())
        # B runs out of memory at event 52, the 16 MiB opt0/l4 (the trace's 53rd event), A never.
        self.assertEqual(d["first_oom"]["change"], "new in B")
        self.assertEqual(d["first_oom"]["b"]["event_index"], 52)
        self.assertEqual(d["first_oom"]["b"]["requested_bytes"], 16 * MiB)
        # Reports in memory: the same figures.
        with open(a) as fa, open(b) as fb:
            m = fragsim.diff(json.load(fa), json.load(fb))
        self.assertEqual((m["first_oom"], m["devices"]), (d["first_oom"], d["devices"]))
        # One trace under two policies, replayed: as the CLI, page included.
        pol = ["best-fit", "ideal"]
        t = fragsim.diff(JAX, policies=pol, capacity=600 * MiB, reserve=0, keep_going=True,
                         html=self.path("py.html"))
        want, _ = self.cli_json("diff", JAX, "--policies", ",".join(pol), "--capacity", "600MiB", "--reserve", "0",
                                "--keep-going")
        self.assertEqual(t, want)
        self.assertTrue(t["same_trace"])
        with open(self.path("py.html")) as f:
            self.assertIn("fragsim", f.read())
        # Two sources in memory: the trace's events against the same with the 16 MiB buffers doubled.
        with open(JAX) as f:
            events = [json.loads(ln) for ln in f]
        grown = [dict(e, size=2 * e["size"], shape=None) if e.get("size") == 16 * MiB else e for e in events]
        grown = [{k: v for k, v in e.items() if v is not None} for e in grown]
        g = fragsim.diff(events, grown, policy="ideal")
        self.assertGreater(g["b"]["peak_allocated_bytes"], g["a"]["peak_allocated_bytes"])
        with self.assertRaises(fragsim.InputError):
            fragsim.diff(JAX)  # one trace and no policies


class Info(Scratch):
    def test_equals_the_cli_and_reads_sources_in_memory(self):
        for path in (JAX, PICKLES[0]):
            with self.subTest(path=path):
                i = fragsim.info(path)
                want, _ = self.cli_json("info", path)
                self.assertEqual(i, want)
                self.assertEqual(i.text(), cli("info", path).stdout)
        with open(PICKLES[0], "rb") as f:
            self.assertEqual(fragsim.info(pickle.load(f), name=PICKLES[0]), fragsim.info(PICKLES[0]))
        i = fragsim.info([{"op": "alloc", "id": 1, "size": 100}, {"op": "alloc", "id": 2, "size": 50},
                          {"op": "free", "id": 1}])
        self.assertEqual((i["events"], i["allocs"], i["frees"], i["peak_requested_bytes"]), (3, 2, 1, 150))


class Layout(Scratch):
    def test_the_contract_example(self):
        # specs/contracts.md §5: `fragsim layout --hw tpu-v5e 'bf16[1000,129]' --json`.
        got = fragsim.layout("bf16[1000,129]", hw="tpu-v5e")
        self.assertEqual({k: got[k] for k in ("shape", "dtype", "tile", "unpadded_bytes", "padded_bytes")},
                         {"shape": [1000, 129], "dtype": "bf16", "tile": "(8,128)(2,1)", "unpadded_bytes": 258000,
                          "padded_bytes": 512000})
        p = cli("layout", "--hw", "tpu-v5e", "bf16[1000,129]", "--json")
        self.assertEqual(got, json.loads(p.stdout))
        self.assertEqual(got.text(), cli("layout", "--hw", "tpu-v5e", "bf16[1000,129]").stdout)


class List(Scratch):
    def test_equals_the_cli(self):
        self.assertEqual(fragsim.list(), cli("list").stdout)
        self.assertEqual(fragsim.list("xla-bfc"), cli("list", "xla-bfc").stdout)

    def test_gen_writes_the_cli_file(self):
        resolved = fragsim.gen("random", self.path("py.jsonl"), seed=3, settings={"events": 500})
        cli("gen", "random", "--seed", "3", "--set", "events=500", "-o", self.path("cli.jsonl"))
        with open(self.path("py.jsonl")) as a, open(self.path("cli.jsonl")) as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual(resolved["events"], 500)


class Threads(Scratch):  # ctest: integration
    """The GIL is released while a replay runs; Ctrl-C stops it."""

    EVENTS = 2_000_000

    def big_trace(self):
        path = self.path("big.fstrace")
        fragsim.gen("random", path, settings={"events": self.EVENTS})
        return path

    def test_python_runs_while_a_replay_does(self):
        path = self.big_trace()
        before = _fragsim.events_read()
        result = {}
        worker = threading.Thread(target=lambda: result.update(r=fragsim.run(path, policy="best-fit")))
        seen = set()
        worker.start()
        while worker.is_alive():
            seen.add(_fragsim.events_read())  # Python code, run while the other thread replays
        worker.join()
        after = _fragsim.events_read()
        self.assertEqual(result["r"]["trace"]["events"], self.EVENTS)
        # Counts in between: this thread ran while the replay was under way (the counter grows
        # every 4096 events decoded).
        self.assertTrue(any(before < s < after for s in seen), (before, after, len(seen)))

    def test_keyboard_interrupt_stops_a_run_and_leaves_no_output(self):
        path = self.big_trace()
        placements = self.path("placements.jsonl")
        calls = []

        def progress(events):  # called at once, then ten times a second, with the GIL
            calls.append(events)
            raise KeyboardInterrupt  # what Ctrl-C raises in the caller's thread

        before = _fragsim.events_read()
        with self.assertRaises(KeyboardInterrupt):
            fragsim.run(path, policy="best-fit", placements=placements, progress=progress)
        self.assertEqual(len(calls), 1)
        # It stopped well before the end of the trace, and its output was never committed.
        self.assertLess(_fragsim.events_read() - before, self.EVENTS // 2)
        self.assertEqual(os.listdir(self.dir), ["big.fstrace"])
        # The module works on afterwards.
        self.assertEqual(fragsim.run(path, policy="best-fit")["trace"]["events"], self.EVENTS)

    def test_sigint_while_waiting_raises_keyboard_interrupt(self):
        path = self.big_trace()
        placements = self.path("placements.jsonl")
        started = threading.Event()

        def interrupt():  # Ctrl-C: SIGINT to the process while the replay runs
            started.wait()
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupt).start()
        before = _fragsim.events_read()
        with self.assertRaises(KeyboardInterrupt):
            fragsim.compare(path, policies="best-fit,first-fit,xla-bfc", progress=lambda n: started.set())
        self.assertLess(_fragsim.events_read() - before, self.EVENTS // 2)
        self.assertEqual(os.listdir(self.dir), ["big.fstrace"])

    def test_progress_counts_each_event_once_though_the_page_reads_the_trace_again(self):
        # --html replays the trace a second time for the page's history (issue 47): the callback
        # still counts each of the trace's events once, never more than the trace holds.
        path = self.big_trace()
        calls = []
        fragsim.run(path, policy="best-fit", html=self.path("page.html"), progress=calls.append)
        self.assertGreater(len(calls), 2)
        self.assertEqual(calls, sorted(calls))
        self.assertLessEqual(calls[-1], self.EVENTS)

    def test_progress_is_called_with_the_events_decoded(self):
        path = self.big_trace()
        calls = []
        fragsim.info(path, progress=calls.append)
        self.assertGreaterEqual(len(calls), 1)
        self.assertEqual(calls, sorted(calls))
        self.assertLessEqual(calls[-1], self.EVENTS)


if __name__ == "__main__":
    unittest.main()
