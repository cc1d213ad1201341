"""The Python module against the command line: every entry point gives what the same command gives
for the same trace and options (the report, the text, the HTML, the error message), for every kind
of source (a path, a PyTorch snapshot dict, an iterable of events). Run by ctest, one entry per
test (tests/CMakeLists.txt), with the module of the build tree and FRAGSIM_BINARY the CLI."""

import json
import os
import pathlib
import pickle
import re
import shutil
import signal
import subprocess
import sys
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


def py_words(cli_text, lines=True):
    """The CLI's words as the module's: the keyword, not the flag (issue 54; the hardware notes and a
    capacity's setting since a trial found "--hw chooses another" in the module's notes). Commands to
    paste stay command lines: in backticks, and (`lines`: a text report) from "fragsim " to a line's end."""
    def words(text):
        for flag, word in (("(--policy chooses another)", "(policy= chooses another)"),
                           ("(--hw chooses another)", "(hw= chooses another)"),
                           ("(--hw names yours", "(hw= names yours"),
                           (", --capacity sets its memory)", ", capacity= sets its memory)"),
                           ("(--reserve 0 gives", "(reserve='0' gives")):
            text = text.replace(flag, word)
        return re.sub(r"--capacity ([0-9][^\s);,'\"\\]*)", r"capacity='\1'", text)

    def outside_commands(text):
        if not lines:
            return words(text)
        out = []
        for line in text.split("\n"):
            head, sep, tail = line.partition("fragsim ")
            out.append(words(head) + sep + tail)
        return "\n".join(out)
    parts = cli_text.split("`")
    return "`".join(outside_commands(p) if i % 2 == 0 else p for i, p in enumerate(parts))


def as_py(want):
    """A JSON value the CLI wrote, in the module's words (py_words; a command line stays one)."""
    if isinstance(want, dict):
        return {k: as_py(v) for k, v in want.items()}
    if isinstance(want, list):
        return [as_py(v) for v in want]
    if isinstance(want, str) and not want.startswith("fragsim "):
        return py_words(want, lines=False)
    return want


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
                # The same report, its notes naming Python's keywords where the CLI's name flags.
                self.assertEqual(r, as_py(want))
                self.assertIsInstance(r, dict)
                self.assertEqual(r.text(), py_words(cli("run", JAX, *args).stdout))
                self.assertEqual(str(r), r.text())
                with open(self.path("cli.json")) as f:
                    self.assertEqual(r.json(), py_words(f.read()))
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
                self.assertEqual(a.read(), py_words(b.read().decode(), lines=False).encode(), k)
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
                    self.assertEqual(fragsim.run(snapshot, name=path, **kw), as_py(want))
        # Unnamed, the snapshot is "<snapshot>" in the report and its notes.
        r = fragsim.run(snapshot)
        self.assertEqual(r["trace"]["path"], "<snapshot>")

    def test_a_list_of_paths_is_a_set_of_ranks(self):
        # Trial 21 #9: a list of paths was read as JSONL lines ("invalid JSON"); the command takes
        # the same files as one job's ranks.
        torch = os.path.join(SRC, "tests/data/torch")
        ranks = [os.path.join(torch, "small_mlp_97ev.pickle.zst"), os.path.join(torch, "max_split_whole_block.pickle.zst")]
        want, _ = self.cli_json("run", ",".join(ranks))
        got = fragsim.run(ranks)
        self.assertEqual(len(got["devices"]), 2)
        self.assertEqual(got["devices"], as_py(want)["devices"])
        self.assertEqual(fragsim.run(tuple(pathlib.Path(p) for p in ranks))["devices"], got["devices"])
        # A list of JSONL lines is still events.
        self.assertEqual(fragsim.run(['{"op":"alloc","id":1,"size":1024}'], policy="best-fit")["trace"]["allocs"], 1)

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
            self.assertEqual(fragsim.run(snap, name=path, **kw), as_py(want))

    def test_snapshot_errors_name_the_object(self):
        snap = hand_snapshot()
        snap["segments"][1]["blocks"][0]["frames"] = [object()]
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.run(snap)
        self.assertIn("<snapshot>: snapshot: segments[1].blocks[0].frames[0]: an object of type object is not",
                      str(cm.exception))  # the Python type, named as Python names it (was "a object")
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
        # Segments are disjoint device ranges: a second segment inside the first is not a snapshot
        # PyTorch writes (each is one cudaMalloc), and its blocks would be placed twice.
        twice = hand_snapshot()
        twice["segments"][1]["address"] = A + 16 * MiB
        twice["segments"][1]["blocks"][0]["address"] = A + 16 * MiB
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.run(twice)
        self.assertIn("segments: entry 1 (device 0, address 0x7f0001000000, 12582912 B) overlaps entry 0",
                      str(cm.exception))
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
            want = as_py(want)
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
        self.assertEqual(str(cm.exception), "<events>:2: name: an object of type set is not a JSON value")
        # --lenient skips frees of unknown ids, as for a file.
        events = [{"op": "alloc", "id": 1, "size": 4}, {"op": "free", "id": 3}, {"op": "free", "id": 1}]
        path = write_jsonl(self.path("lenient.jsonl"), events)
        want, _ = self.cli_json("run", path, "--lenient")
        self.assertEqual(fragsim.run(events, name=path, lenient=True), as_py(want))
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
            # XLA builds no cudaMallocAsync allocator for ROCm (se_gpu_pjrt_client.cc): refused, naming
            # the option that picks a CUDA device; it said "--hw" in Python (trial finding 6).
            ({"hw": "mi300x", "env": {"XLA_PYTHON_CLIENT_ALLOCATOR": "cuda_async"}},
             ["--hw", "mi300x", "--env", "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async"]),
        ]
        for kw, args in cases:
            with self.subTest(kw=kw):
                # The CLI's message and exit code, in Python's words: the keyword the caller used
                # (policy=, capacity=), never the command-line flag (issue 54).
                with self.assertRaises(fragsim.InputError) as cm:
                    fragsim.run(JAX, **kw)
                p = cli("run", JAX, *args)
                self.assertEqual(p.returncode, cm.exception.exit_code)
                said = str(cm.exception)
                self.assertNotIn(" --", " " + said)
                self.assertEqual(p.stderr.count("\n"), 1)  # the CLI: one line
                words = {"--set": "settings=", "--env": "env="}
                for f in (a for a in args if a.startswith("--") and a in p.stderr):
                    self.assertIn(words.get(f, f[2:] + "="), said)  # the flag it names, as a keyword
        missing = self.path("no-such-trace.jsonl")
        self.assert_same_error(lambda: fragsim.run(missing), "run", missing, exc=fragsim.EnvError)
        self.assertTrue(issubclass(fragsim.InputError, ValueError))
        self.assertTrue(issubclass(fragsim.EnvError, OSError))
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.sweep(JAX, "min-everything")
        self.assertTrue(str(cm.exception).startswith("find=: must be min-capacity or min-mem-fraction"))
        self.assertEqual(cli("sweep", JAX, "--find", "min-everything").stderr,
                         "fragsim: --find: must be min-capacity or min-mem-fraction\n")
        self.assert_same_error(lambda: fragsim.layout("bf16[1000,,129]"), "layout", "bf16[1000,,129]")
        self.assert_same_error(lambda: fragsim.list("xla-bfx"), "list", "xla-bfx")

    def test_python_words(self):
        # A capacity given as a bare number is a number of GiB meant: refused with the Python fix.
        for bad in (16, "16"):
            with self.subTest(capacity=bad), self.assertRaises(fragsim.InputError) as cm:
                fragsim.run(JAX, capacity=bad)
            self.assertIn("capacity='16GiB' or capacity=16 * 2**30", str(cm.exception))
            self.assertNotIn("--capacity", str(cm.exception))
        self.assertEqual(fragsim.run(JAX, capacity=16 * 2**30)["hardware"]["spaces"][0]["capacity_bytes"], 16 << 30)
        # Type errors name the Python type.
        with self.assertRaises(TypeError) as cm:
            fragsim.run(JAX, policy=object())
        self.assertIn("policy=: expected a str, got an object of type object", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            fragsim.run(JAX, settings={"mem_fraction": {1, 2}})
        self.assertIn("an object of type set", str(cm.exception))

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
                self.assertEqual(c, as_py(want))
                self.assertEqual(len(c), 3 * len(sources))
                self.assertEqual(c.text(),
                                 py_words(cli("compare", *sources, "--policies", pol, "--capacity", "1GiB").stdout))
                self.assertEqual([r["label"] for r in c][:3], [f"{os.path.basename(JAX)}: {p}" if len(sources) > 1
                                                               else p for p in pol.split(",")])
        # A list of entries, any number of threads: the same runs. The default entries follow the input.
        self.assertEqual(fragsim.compare(JAX, policies=pol.split(",")[:2] + ["xla-bfc[preallocate=false]"], jobs=1,
                                         capacity="1GiB"),
                         fragsim.compare(JAX, policies=pol, jobs=3, capacity="1GiB"))
        want, _ = self.cli_json("compare", JAX)
        self.assertEqual(fragsim.compare(JAX), as_py(want))
        # settings= configures the default entries that take the key, as --set does (trial 12: the
        # bound refused every key with InputError).
        snap = PICKLES[1]
        c = fragsim.compare(snap, settings={"memory_fraction": 0.5})
        self.assertEqual(c, as_py(self.cli_json("compare", snap, "--set", "memory_fraction=0.5")[0]))
        self.assertTrue(all(r["policy"]["config"]["memory_fraction"] == 0.5 for r in c))
        self.assertNotIn("ideal", [r["label"] for r in c])

    def test_html_is_the_cli_file_and_sources_in_memory_compare(self):
        fragsim.compare(JAX, policies="ideal,best-fit", html=self.path("py.html"))
        cli("compare", JAX, "--policies", "ideal,best-fit", "--html", self.path("cli.html"))
        with open(self.path("py.html"), "rb") as a, open(self.path("cli.html"), "rb") as b:
            self.assertEqual(a.read(), py_words(b.read().decode(), lines=False).encode())
        snap = hand_snapshot()
        c = fragsim.compare(snap, policies="ideal,torch-caching", capacity="24MiB", reserve=0)
        self.assertEqual([r["completed"] for r in c], [True, False])  # the bound fits, the allocator fragments


class Sweep(Scratch):
    def test_equals_the_cli(self):
        for find, args in (("min-capacity", ["--policy", "best-fit"]), ("min-mem-fraction", ["--policy", "xla-bfc"])):
            with self.subTest(find=find):
                s = fragsim.sweep(JAX, find, policy=args[1])
                want, p = self.cli_json("sweep", JAX, "--find", find, *args)
                self.assertEqual(s, as_py(want))
                self.assertEqual(s.text(), py_words(cli("sweep", JAX, "--find", find, *args).stdout))
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
        # github() returns the ::error lines --github prints (GitHub reads them from a step's output),
        # shown on the current report's file; on= names another; a positional path (a file to write,
        # as a newcomer read it) is refused (issue 54).
        gh = cli("check", "--baseline", self.path("good.json"), "--current", self.path("bad.json"),
                 "--allow-different-policy", "--github").stdout
        self.assertTrue(c.github().startswith("::error") and gh.startswith(c.github()), gh)
        self.assertIn("::error file=" + self.path("bad.json").replace(":", "%3A") + ",", c.github())
        self.assertIn("::error file=ci/bad.json,", c.github(on="ci/bad.json"))
        with self.assertRaises(TypeError):
            c.github("bad.json")
        # Reports in memory: the same verdict on the same figures.
        d = fragsim.check(good, bad, allow_different_policy=True)
        self.assertEqual([(i["metric"], i["regression"]) for i in d["items"]],
                         [(i["metric"], i["regression"]) for i in c["items"]])
        # ... and the same messages: a new OOM's request in bytes, never "? requested" (trial 11, finding 8).
        self.assertEqual([i["message"] for i in d["items"]], [i["message"] for i in c["items"]])
        self.assertIn(" requested, cause ", d.text())
        self.assertNotIn("? requested", d.text())
        self.assertTrue(d.github().startswith("::error title=fragsim "), d.github())  # no file: on the run
        self.assertTrue(fragsim.check(good, good)["pass"])
        with self.assertRaises(fragsim.InputError):
            fragsim.check(good, {"fragsim_report": 1})


    def test_messages_name_keywords_and_env_values_are_str(self):
        # Trial 11, finding 11: check's messages named --tolerance and --allow-different-policy, and
        # env={"PYTORCH_CUDA_ALLOC_CONF": 1} was taken as the string "1".
        good = fragsim.run(JAX, policy="best-fit", capacity="2GiB")
        other = fragsim.run(JAX, policy="first-fit", capacity="2GiB")
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.check(good, good, tolerance=-1)
        self.assertTrue(str(cm.exception).startswith("tolerance=: "), str(cm.exception))
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.check(good, other)
        self.assertIn("allow_different_policy=True compares them anyway", str(cm.exception))
        self.assertNotIn("--", str(cm.exception))
        with self.assertRaises(TypeError):
            fragsim.run(PICKLES[0], env={"PYTORCH_CUDA_ALLOC_CONF": 1})


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
        # ... named by their traces and policies (here the same: then by their hardware), never "A"/"B".
        self.assertEqual(m["a"]["name"], "jax_train_small.jsonl, best-fit, on h100-80g 2.00 GiB")
        self.assertEqual(m["b"]["name"], "jax_train_small.jsonl, best-fit, on h100-80g 600.00 MiB")
        self.assertIn("jax_train_small.jsonl, best-fit, on h100-80g 600.00 MiB", m.text())
        self.assertEqual(d["a"]["name"], a)  # files are named by their paths
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


class ProfilerTraces(Scratch):
    """PyTorch profiler (Kineto) traces: every entry point reads a .json, .json.gz or a log
    directory as the CLI does."""

    KINETO = os.path.join(SRC, "tests/data/kineto")

    def test_run_info_compare_sweep_and_diff_take_them(self):
        gz = os.path.join(self.KINETO, "gh200_transformer_stack.pt.trace.json.gz")
        plain = os.path.join(self.KINETO, "mi300x_rank1_hip.json")
        ranks = os.path.join(self.KINETO, "tb_ranks")
        for path in (gz, plain, ranks):
            with self.subTest(path=path):
                r = fragsim.run(path)
                want, _ = self.cli_json("run", path)
                self.assertEqual(r, as_py(want))
                self.assertEqual(r["policy"]["name"], "torch-caching")
                f = r["fidelity"]
                self.assertEqual(f["reserved_matched"], f["reserved_compared"])
                self.assertEqual(fragsim.info(path), self.cli_json("info", path)[0])
        # GH200 (deviceProperties): its family's preset with the recorded memory.
        r = fragsim.run(gz)
        self.assertEqual(r["hardware"]["name"], "h100-80g")
        self.assertEqual(r["fidelity"]["allocs_matched"], 60)
        c = fragsim.compare(gz, policies=["torch-caching", "torch-caching[expandable_segments=true]"])
        self.assertEqual(c, as_py(self.cli_json("compare", gz, "--policies",
                                                "torch-caching,torch-caching[expandable_segments=true]")[0]))
        s = fragsim.sweep(gz, policy="torch-caching", find="min-capacity")
        self.assertEqual(s, as_py(self.cli_json("sweep", gz, "--policy", "torch-caching", "--find", "min-capacity")[0]))
        # A .json profiler trace given to diff is a trace to replay, not a report.
        d = fragsim.diff(plain, policies=["torch-caching", "best-fit"])
        self.assertEqual(d, as_py(self.cli_json("diff", plain, "--policies", "torch-caching,best-fit")[0]))

    def test_a_snapshot_without_allocator_settings_keeps_its_expandable_segments(self):
        # Issue 48: a viewer's demo snapshot (expandable segments, every block live at the dump, a
        # trace of alloc and free_completed only, no allocator_settings: PyTorch before 2.5) replayed
        # 0 of 520 addresses: without the setting, best fit takes the smallest free segment, where
        # PyTorch's expandable segment grows per stream and pool. Its segments say is_expandable.
        trace = self.path("live.jsonl")
        sizes = [512, 4096, 100000, 1 << 20, 2 << 20, 3 << 20, 7 << 20, 25 << 20]
        with open(trace, "w") as f:
            for i in range(200):
                f.write(json.dumps({"op": "alloc", "id": i + 1, "size": sizes[(i * 5) % len(sizes)], "t": i}) + "\n")
        full = self.path("full.pickle")
        p = cli("run", trace, "--policy", "torch-caching[expandable_segments=true]", "--hw", "h100-80g",
                "--export-snapshot", full)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(full, "rb") as f:
            snap = pickle.load(f)
        self.assertTrue(all(s["is_expandable"] for s in snap["segments"]))
        del snap["allocator_settings"]
        snap["device_traces"] = [[e for e in t if e["action"] in ("alloc", "free_completed")]
                                 for t in snap["device_traces"]]
        demo = self.path("demo.pickle")
        with open(demo, "wb") as f:
            pickle.dump(snap, f)
        r = fragsim.run(demo)
        f = r["fidelity"]
        self.assertEqual(f["allocs_compared"], 200)
        self.assertEqual(f["allocs_matched"], 200)
        self.assertTrue(any("the recording's settings include expandable_segments:True" in n for n in r["notes"]),
                        r["notes"])
        # Without is_expandable either, nothing in the file shows the setting: replayed without it.
        for s in snap["segments"]:
            del s["is_expandable"]
        with open(demo, "wb") as f:
            pickle.dump(snap, f)
        self.assertLess(fragsim.run(demo)["fidelity"]["allocs_matched"], 200)

    def test_cpu_memory_is_a_space_of_its_own_without_a_limit(self):
        # Trial 9, findings 1 and 4: CPU tensors (Device Type 0) are PyTorch's CPU allocator's, with
        # no limit (the preset's 64 GiB host space is XLA's pinned pool, and made a 70 GiB CPU tensor
        # an OOM), and info keeps them apart from the GPU's memory (it gave ResNet-50's 142.21 MiB on
        # the T4 plus 88.29 MiB of CPU tensors as device 0's peak requested, 230.50 MiB).
        path = os.path.join(self.KINETO, "t4_resnet50.json.gz")
        spaces = {d["space"]: d for d in fragsim.run(path)["devices"]}
        self.assertTrue(spaces["host"]["unbounded"])
        self.assertEqual(spaces["host"]["usable_bytes"], 0)
        self.assertFalse(spaces["hbm"]["unbounded"])
        i = fragsim.info(path)
        self.assertEqual({(d["device"], d["space"]): d["peak_requested_bytes"] for d in i["devices"]},
                         {(0, s): d["peak_requested_bytes"] for s, d in spaces.items()})
        self.assertIn("device 0 hbm: peak requested 142.21 MiB", i.text())
        self.assertIn("device 0 host: peak requested 88.29 MiB", i.text())

    def test_a_trace_without_memory_events_raises_the_cli_message(self):
        path = os.path.join(self.KINETO, "no_memory_events.json")
        msg = self.assert_same_error(lambda: fragsim.run(path), "run", path)
        self.assertIn("profile_memory=True", msg)


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


class Hardening(Scratch):
    """Issue 50: walks of Python objects are bounded, limits follow what is held, exceptions are of
    the documented types, and no output replaces a file the call read."""

    def test_deep_and_self_containing_objects_are_input_errors(self):
        # Before: a snapshot nested 100,000 deep ended the interpreter (the converter recursed before
        # it checked its nesting), a report containing itself made check() and diff() grow until
        # they crashed, and one sharing a list at every level was walked 2^64 times.
        # One object shared by every event is copied into each (trial 17: a 1 MiB name in 3,000
        # events held 3 GB, a shape of 100,000 dims 1.2 GB, until MemoryError): the strings limit.
        name, shape = "q" * (1 << 20), [1] * 100_000
        for key, value in (("name", name), ("shape", shape)):
            with self.subTest(key=key), self.assertRaises(fragsim.InputError) as cm:
                fragsim.run([{"op": "alloc", "id": i, "size": 16, key: value} for i in range(1, 3000)])
            self.assertIn("limit strings", str(cm.exception))
            self.assertIn("fragsim.set_limit('strings=SIZE') raises it", str(cm.exception))
        for depth in (201, 100_000):
            x = []
            for _ in range(depth):
                x = [x]
            with self.subTest(depth=depth), self.assertRaises(fragsim.InputError) as cm:
                fragsim.run({"segments": [], "device_traces": [x]})
            self.assertIn("nesting deeper than 200", str(cm.exception))
            with self.assertRaises(fragsim.InputError):
                fragsim.run([{"op": "alloc", "id": 1, "size": 1, "name": x}])
            report = dict(fragsim.run(JAX, policy="best-fit"))
            report["trace"] = dict(report["trace"], header=x)
            with self.assertRaises(fragsim.InputError):
                fragsim.check(report, report)
        report = dict(fragsim.run(JAX, policy="best-fit"))
        report["trace"] = dict(report["trace"])
        report["trace"]["itself"] = report
        for call in (lambda: fragsim.check(report, report), lambda: fragsim.diff(report, report)):
            with self.assertRaises(fragsim.InputError) as cm:
                call()
            self.assertIn("contains itself", str(cm.exception))
        shared = [1]
        for _ in range(64):
            shared = [shared, shared]
        report["trace"] = dict(report["trace"], itself=shared)
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.check(report, report)
        self.assertIn("more than 4194304 values", str(cm.exception))
        with self.assertRaises(fragsim.InputError):
            fragsim.run([{"op": "alloc", "id": 1, "size": 1, "name": shared}])
        self.assertTrue(fragsim.check(fragsim.run(JAX), fragsim.run(JAX))["pass"])  # the module works on

    def test_events_held_from_an_iterable_are_limited(self):
        # Before: an endless iterable was read until bad_alloc.
        import itertools
        self.addCleanup(fragsim.reset_limits)
        fragsim.set_limit("objects=20000")
        endless = ({"op": "alloc", "id": i, "size": 1} for i in itertools.count())
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.run(endless)
        self.assertIn("limit objects", str(cm.exception))
        with self.assertRaises(fragsim.InputError):
            fragsim.info(itertools.repeat('{"op":"mark","name":"m"}'))  # no Python code runs between items
        fragsim.reset_limits()
        # A list is its own measure: one longer than a generator may be is read whole.
        n = 300_000
        events = [{"op": "alloc", "id": i, "size": 1} for i in range(n)]
        self.assertEqual(fragsim.info(events)["allocs"], n)

    def test_a_name_does_not_change_the_limits(self):
        # Before: name= was measured as a file: naming a large file raised every limit.
        big = self.path("big.bin")
        with open(big, "wb") as f:
            f.truncate(1 << 20)
        events = [{"op": "alloc", "id": 1, "size": 64, "device": d} for d in range(400)]
        for name in (None, big):
            with self.subTest(name=name), self.assertRaises(fragsim.InputError) as cm:
                fragsim.run(events, policy="best-fit", name=name)
            self.assertIn("limit devices", str(cm.exception))
        self.assertEqual(fragsim.run(events[:200], policy="best-fit", name=big)["trace"]["allocs"], 200)

    def test_shard_is_never_cut_to_32_bits(self):
        # Before: shard=2**32+1 ran unsharded (cut to 1), shard=2**64 raised "Unable to cast".
        for shard in (2**32 + 1, 2**40):
            with self.subTest(shard=shard):
                self.assert_same_error(lambda: fragsim.run(JAX, hw="tpu-v5e", policy="tpu-padded", shard=shard),
                                       "run", JAX, "--hw", "tpu-v5e", "--policy", "tpu-padded", "--shard", str(shard))
        with self.assertRaises(fragsim.InputError) as cm:
            fragsim.run(JAX, hw="tpu-v5e", policy="tpu-padded", shard=2**64)
        self.assertIn("does not fit in 64 bits", str(cm.exception))

    def test_exceptions_are_the_documented_types(self):
        # Before: some of these raised SystemError ("bad argument to internal function", "returned a
        # result with an exception set") or RuntimeError("Unable to cast ...").
        class BadIndex:
            def __index__(self):
                raise ValueError("no index")

        class Pairs:  # a mapping whose items() are not (key, value) pairs
            def __getitem__(self, k):
                return 1

            def __len__(self):
                return 1

            def __iter__(self):
                return iter(["a"])

            def items(self):
                return [["a", 1, 2]]

        good = fragsim.run(JAX, policy="best-fit")
        calls = [
            (TypeError, lambda: fragsim.run(JAX, capacity=BadIndex())),
            (TypeError, lambda: fragsim.run(JAX, jobs=BadIndex())),
            (TypeError, lambda: fragsim.run(JAX, settings=Pairs())),
            (TypeError, lambda: fragsim.run(JAX, env=Pairs())),
            (TypeError, lambda: fragsim.run(JAX, env={"A": object()})),
            (TypeError, lambda: fragsim.run(JAX, env=5)),
            (TypeError, lambda: fragsim.run(JAX, shard=True)),
            (TypeError, lambda: fragsim.check(good, good, tolerance="5")),
            (TypeError, lambda: fragsim.check(good, good, gate=1)),
            (TypeError, lambda: fragsim.check({"fragsim_report": BadIndex()}, good)),
            (TypeError, lambda: fragsim.check(Pairs(), good)),
            (fragsim.InputError, lambda: fragsim.check(good, good, tolerance=10**400)),
            (fragsim.InputError, lambda: fragsim.run(JAX, jobs=2**70)),
            (fragsim.InputError, lambda: fragsim.run(JAX, policy="best-fit\ud800")),
            # Paths no file name holds (trial 17: UnicodeEncodeError, and a message that was the path
            # cut at its NUL).
            (fragsim.InputError, lambda: fragsim.run("\ud800")),
            (fragsim.InputError, lambda: fragsim.run(JAX, html="\ud800")),
            (fragsim.InputError, lambda: good.json("victim.json\x00zz")),
            (fragsim.InputError, lambda: fragsim.run(JAX + "\x00zz")),
            (fragsim.InputError, lambda: fragsim.run(JAX, env={"XLA\ud800": "1"})),
            (fragsim.InputError, lambda: fragsim.run(JAX, settings={"k": "\ud800"})),
            (fragsim.InputError, lambda: fragsim.run([{"op": "alloc", "id": BadIndex(), "size": 1}])),
            (fragsim.InputError, lambda: fragsim.run([Pairs()])),
            (fragsim.InputError, lambda: fragsim.run({"segments": [], "\ud800": 1})),
            (fragsim.InputError, lambda: fragsim.run({"segments": [{"device": BadIndex()}]})),
        ]
        for i, (exc, call) in enumerate(calls):
            with self.subTest(i=i):
                with self.assertRaises(exc) as cm:
                    call()
                self.assertNotIsInstance(cm.exception, (SystemError, RuntimeError))

    def test_no_output_replaces_a_file_the_call_read(self):
        # Before: Report.json(path) and html(path) wrote over the run's own trace, and diff(html=)
        # over the baseline report it read.
        trace = self.path("t.jsonl")
        shutil.copy(JAX, trace)
        with open(trace) as f:
            before = f.read()
        r = fragsim.run(trace, policy="best-fit")
        c = fragsim.compare(trace, policies="best-fit,ideal")
        for call in (lambda: r.json(trace), lambda: r.html(trace), lambda: c.json(trace), lambda: c.html(trace)):
            with self.assertRaises(fragsim.InputError):
                call()
        r.json(self.path("a.json"))
        r.json(self.path("b.json"))
        with open(self.path("a.json")) as f:
            report = f.read()
        with self.assertRaises(fragsim.InputError):
            fragsim.diff(self.path("a.json"), self.path("b.json"), html=self.path("a.json"))
        with open(trace) as f:
            self.assertEqual(f.read(), before)
        with open(self.path("a.json")) as f:
            self.assertEqual(f.read(), report)
        import pathlib
        r.json(pathlib.Path(self.path("c.json")))  # a path object names a file too
        self.assertTrue(os.path.exists(self.path("c.json")))


    def test_names_that_are_not_utf8_give_the_error_or_the_result(self):
        # Before: a file whose name is not UTF-8 raised UnicodeDecodeError in place of the error
        # naming it, and RuntimeError ("invalid UTF-8 byte") in place of the report of a run of it.
        bad = os.fsdecode(os.path.join(os.fsencode(self.dir), b"a\x80b.jsonl"))
        message = self.assert_same_error(lambda: fragsim.run(bad), "run", bad, exc=fragsim.EnvError)
        self.assertIn("a\\x80b.jsonl", message)
        with self.assertRaises(fragsim.InputError) as cm:  # a folder that does not exist
            fragsim.gen("random", os.path.join(bad, "x.jsonl"))
        self.assertIn("a\\x80b.jsonl", str(cm.exception))
        shutil.copy(JAX, bad)
        r = fragsim.run(bad, policy="best-fit")
        self.assertTrue(r["trace"]["path"].endswith("a\ufffdb.jsonl"))
        self.assertEqual(json.loads(r.json()), dict(r))
        self.assertIn("a\\x80b.jsonl", r.text())
        self.assertEqual(fragsim.info(bad)["allocs"], r["trace"]["allocs"])
        self.assertTrue(fragsim.check(r, r)["pass"])

    def test_plan_and_gen_read_their_keywords_as_every_call_does(self):
        # Before: plan's capacity=2**64, 1.5 or an object raised RuntimeError("Unable to cast ..."),
        # seed=nan a plain ValueError, and time_limit=-1 or "3" were taken (the command refuses a
        # negative time); gen took seed=True as 1, and seed=2**64 raised pybind11's TypeError.
        calls = [
            (fragsim.InputError, dict(capacity=2**64)),
            (TypeError, dict(capacity=1.5)),
            (TypeError, dict(capacity=object())),
            (TypeError, dict(seed=float("nan"))),
            (fragsim.InputError, dict(seed=2**70)),
            (fragsim.InputError, dict(seed=-1)),
            (fragsim.InputError, dict(time_limit=-1)),
            (TypeError, dict(time_limit="3")),
        ]
        for exc, kw in calls:
            with self.subTest(**{k: repr(v) for k, v in kw.items()}), self.assertRaises(exc) as cm:
                fragsim.plan(JAX, **kw)
            self.assertNotIsInstance(cm.exception, (SystemError, RuntimeError))
        self.assertEqual(fragsim.plan(JAX, capacity=2 << 30, seed=3)["fragsim_plan"], 1)
        out = self.path("g.jsonl")
        for exc, seed in ((TypeError, True), (TypeError, 1.0), (fragsim.InputError, 2**64), (fragsim.InputError, -1)):
            with self.subTest(seed=seed), self.assertRaises(exc):
                fragsim.gen("random", out, seed=seed, settings={"events": 10})
        self.assertFalse(os.path.exists(out))

    def test_a_signal_that_ends_python_leaves_no_temporary(self):
        # Before: SIGTERM (a timeout, a batch system) or SIGHUP during gen() or run(html=...) ended the
        # interpreter with the output's temporary left behind (230 MB after 2 s of gen).
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
            out = self.path(f"big{int(sig)}.jsonl")
            code = f"import fragsim; fragsim.gen('random', {out!r}, settings={{'events': 10**9}})"
            p = subprocess.Popen([sys.executable, "-c", code])
            try:
                while not any(".tmp." in f for f in os.listdir(self.dir)):
                    self.assertIsNone(p.poll())
                    threading.Event().wait(0.05)
                p.send_signal(sig)
                self.assertEqual(p.wait(timeout=60), -sig)
            finally:
                p.kill()
                p.wait()
            self.assertEqual([f for f in os.listdir(self.dir) if ".tmp." in f], [])
        # Python's own SIGINT is still KeyboardInterrupt (the module never takes it).
        self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)

    def test_none_for_a_source_or_a_report_is_a_type_error(self):
        # Before: check(None, r), compare(None), sweep(None, ...), sweep(path, None), info(None) and
        # diff(None) raised KeyError: the package dropped the None and then deleted its key.
        r = fragsim.run(JAX, policy="best-fit")
        calls = [lambda: fragsim.check(None, r), lambda: fragsim.check(r, None), lambda: fragsim.diff(None),
                 lambda: fragsim.compare(None), lambda: fragsim.sweep(None, "min-capacity"),
                 lambda: fragsim.sweep(JAX, None), lambda: fragsim.info(None), lambda: fragsim.run(None)]
        for i, call in enumerate(calls):
            with self.subTest(i=i), self.assertRaises((TypeError, fragsim.InputError)):
                call()

    def test_limits_follow_the_memory_the_process_may_use(self):
        # Before: the limits were capped by the machine's memory alone: under an address-space limit
        # (prlimit --as=2GiB) a list of 16 million events was held until the allocator failed
        # (MemoryError after 10 s). Now half the 2 GiB caps the events held.
        if "asan" in os.environ.get("LD_PRELOAD", ""):
            self.skipTest("ASan reserves more address space than the limit")
        code = (
            "import resource, fragsim\n"
            "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
            "try:\n"
            "    fragsim.info([{'op': 'alloc', 'id': 1, 'size': 8}] * (1 << 24))\n"
            "except fragsim.InputError as e:\n"
            "    print('InputError', e)\n")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("limit objects", p.stdout)


class Fuzz(Scratch):  # ctest: fuzz
    """Structured fuzzing of the module's inputs (issue 50): random Python objects — of every type,
    nested past the bound, inside themselves, shared at every level, with failing __index__ or
    items() — as events, snapshots, reports and options. Each call returns or raises InputError or
    TypeError (EnvError for a path that does not exist), nothing else, and the module works on.
    FRAGSIM_FUZZ_SCALE and FRAGSIM_FUZZ_SEED as for the C++ fuzzers."""

    INPUTS = 400

    def test_random_objects_give_results_or_documented_errors(self):
        import random

        scale = int(os.environ.get("FRAGSIM_FUZZ_SCALE") or 1)
        rng = random.Random(50004 + 1000003 * int(os.environ.get("FRAGSIM_FUZZ_SEED") or 0))

        class BadIndex:
            def __index__(self):
                raise ValueError("no index")

        class OddMapping:
            def __getitem__(self, k):
                return 1

            def __len__(self):
                return 1

            def __iter__(self):
                return iter(["k"])

            def items(self):
                return rng.choice([[("k", 1)], [["k", 1, 2]], [42], ()])

        def scalar():
            return rng.choice([
                None, True, False, 0, 1, -1, 4096, 2**31, 2**63, 2**64 - 1, 2**64, -2**63 - 1, 2**200,
                0.5, float("nan"), float("inf"), "", "alloc", "free", "f32", "\ud800", "x\n\x1b", b"bytes",
                BadIndex(), object(), {1, 2}, OddMapping()])

        def value(depth=0):
            roll = rng.random()
            if depth > 3 or roll < 0.55:
                return scalar()
            if roll < 0.7:
                return [value(depth + 1) for _ in range(rng.randrange(3))]
            if roll < 0.8:
                return tuple(value(depth + 1) for _ in range(rng.randrange(3)))
            if roll < 0.9:
                return {rng.choice(["op", "id", "size", "device", "name", "shape", "dtype", 1, "\ud800"]): value(depth + 1)
                        for _ in range(rng.randrange(4))}
            special = rng.randrange(3)
            if special == 0:  # past the nesting bound
                x = []
                for _ in range(rng.choice([199, 201, 1000, 50_000])):
                    x = [x]
                return x
            if special == 1:  # inside itself
                d = {"a": 1}
                d["self"] = rng.choice([d, [d], {"b": d}])
                return d
            x = [1]  # shared at every level: up to 2^60 leaves
            for _ in range(rng.choice([8, 12, 16, 60])):
                x = [x, x]
            return x

        def event():
            e = {"op": rng.choice(["alloc", "free", "mark"]), "id": rng.randrange(4), "size": rng.randrange(1 << 20)}
            for _ in range(rng.randrange(3)):
                e[rng.choice(["op", "id", "size", "device", "name", "shape", "dtype", "t", "stream"])] = value()
            return e

        good = dict(fragsim.run(JAX, policy="best-fit"))
        outcomes = {"result": 0, "InputError": 0, "TypeError": 0}
        for i in range(self.INPUTS * scale):
            kind = rng.randrange(5)
            try:
                if kind == 0:  # events
                    fragsim.run([event() for _ in range(rng.randrange(1, 6))], policy="best-fit")
                elif kind == 1:  # a snapshot
                    seg = {"device": value(), "address": rng.choice([0x100000, value()]), "total_size": 2 << 20,
                           "blocks": [{"size": 512, "state": "active_allocated", "requested_size": value()}]}
                    fragsim.run({"segments": [seg], "device_traces": [[{"action": "alloc", "addr": value(),
                                                                        "size": 512, "frames": value()}]]})
                elif kind == 2:  # a report for check or diff
                    report = dict(good)
                    report[rng.choice(["trace", "policy", "devices", "ooms", "peak_reserved_bytes", "extra"])] = value()
                    rng.choice([fragsim.check, fragsim.diff])(good, report)
                elif kind == 3:  # an option
                    key = rng.choice(["capacity", "reserve", "jobs", "shard", "env", "settings", "policy", "name"])
                    fragsim.run([{"op": "alloc", "id": 1, "size": 64}], **{key: value()})
                else:
                    fragsim.check(good, good, **{rng.choice(["tolerance", "gate"]): value()})
                outcomes["result"] += 1
            except fragsim.InputError:
                outcomes["InputError"] += 1
            except TypeError:
                outcomes["TypeError"] += 1
            except fragsim.EnvError:  # a name= or policy= that reads as a path
                outcomes["InputError"] += 1
        print("python fuzz outcomes:", outcomes)
        self.assertEqual(sum(outcomes.values()), self.INPUTS * scale)
        for k, n in outcomes.items():
            self.assertGreater(n, 0, outcomes)
        self.assertTrue(fragsim.check(good, good)["pass"])


class PlanTest(Scratch):
    def test_equals_the_cli(self):
        # MiniMalloc's example: b1, b3 and b5 (4 bytes each) live over [0, 3): 12 bytes.
        csv = os.path.join(SRC, "tests/data/plan/input.12.csv")
        got = fragsim.plan(csv)
        want, p = self.cli_json("plan", csv)
        self.assertEqual(p.returncode, 0)
        for g, w in zip(got["spaces"], want["spaces"], strict=True):
            self.assertEqual(g["height_bytes"], 12)
            self.assertEqual(g["lower_bound_bytes"], 12)
            self.assertTrue(g["optimal"])
            self.assertEqual(g["offsets"], w["offsets"])

    def test_bad_input_raises_the_cli_message(self):
        bad = self.path("bad.csv")
        with open(bad, "w") as f:
            f.write("id,lower,upper,size\nb1,0,x,4\n")
        message = self.assert_same_error(lambda: fragsim.plan(bad), "plan", bad)
        self.assertIn(":2:", message)  # the file's line
        self.assertEqual(cli("plan", bad).returncode, 2)


class Progress(Scratch):
    """progress= is a tqdm bar's update target: it is given the events decoded since its previous
    call, and over one call they sum to the events of the input, each counted once, for every kind
    of input and however often the command replays it (docs/python.md)."""

    DATA = os.path.join(SRC, "tests/data")

    def inputs(self):
        fstrace = self.path("jax.fstrace")
        self.assertEqual(cli("convert", JAX, fstrace).returncode, 0)
        prof = self.path("prof/plugins/profile/r1")
        os.makedirs(prof)
        for host, capture in (("nodeA", "tracelens_mi300_jax08_gemm"),
                              ("nodeB", "tracelens_jax_te_fused_attn_934987a2fc2f")):
            shutil.copy(os.path.join(self.DATA, "xprof", capture + ".xplane.pb.zst"),
                        os.path.join(prof, host + ".xplane.pb.zst"))
        return {
            "snapshot": os.path.join(self.DATA, "torch/small_mlp_97ev.pickle.zst"),
            "jsonl": JAX,
            "fstrace": fstrace,
            "capture": os.path.join(self.DATA, "xprof/tracelens_mi300_jax08_gemm.xplane.pb.zst"),
            "profile directory": self.path("prof"),
            "profiler trace": os.path.join(self.DATA, "kineto/gh200_transformer_stack.pt.trace.json.gz"),
            "set": ",".join(PICKLES),
        }

    def counted(self, call, source):
        calls = []
        call(source, progress=calls.append)
        self.assertEqual(calls[0], 0)  # at once, before anything is read
        self.assertTrue(all(isinstance(n, int) and n >= 0 for n in calls), calls)
        return sum(calls)

    def test_each_input_event_counts_once_for_every_input_and_command(self):
        # Trial 10, finding 2: the callback was given the events decoded since the call began, ten
        # times a second: a pickle of 8,049 events gave [0, 8049, 8049, ...] (a tqdm bar read 40,245),
        # and a capture, replayed within the first tenth of a second, gave only [0].
        for kind, source in self.inputs().items():
            events = fragsim.info(source)["events"]
            with self.subTest(kind=kind):
                self.assertGreater(events, 0)
                self.assertEqual(self.counted(fragsim.info, source), events)
                self.assertEqual(self.counted(fragsim.run, source), events)  # the run, its passes and advice
                self.assertEqual(self.counted(lambda s, **k: fragsim.run(s, html=self.path("p.html"), **k), source),
                                 events)  # the page's history replays it again
                self.assertEqual(self.counted(lambda s, **k: fragsim.compare(s, policies=["best-fit", "ideal"], **k),
                                              source), events)
                self.assertEqual(self.counted(lambda s, **k: fragsim.sweep(s, "min-capacity", policy="best-fit", **k),
                                              source), events)
                self.assertEqual(self.counted(lambda s, **k: fragsim.diff(s, policies=["best-fit", "ideal"], **k),
                                              source), events)
        # Two traces: each one's events.
        self.assertEqual(self.counted(lambda s, **k: fragsim.diff(s, LLM, policy="best-fit", **k), JAX),
                         fragsim.info(JAX)["events"] + fragsim.info(LLM)["events"])


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

    def test_sigint_while_an_endless_iterable_is_read(self):
        # Before: an iterator that runs no Python code between items (itertools.repeat) ignored
        # Ctrl-C until memory ran out.
        # The signal comes from the kernel (a timer), as a terminal's Ctrl-C does: a Python thread
        # could not send it, since the reading holds the GIL and runs no Python code. Its handler
        # raises KeyboardInterrupt, as SIGINT's does. The limit (5 million events, a few hundred MB)
        # keeps a regression from growing until the machine runs out: it then fails as InputError.
        import itertools
        self.addCleanup(fragsim.reset_limits)
        fragsim.set_limit("objects=10000000")
        old = signal.signal(signal.SIGALRM, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGALRM, old)
        self.addCleanup(signal.setitimer, signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with self.assertRaises(KeyboardInterrupt):
            fragsim.info(itertools.repeat('{"op":"mark","name":"m"}'))

    def test_progress_counts_each_event_once_though_the_page_reads_the_trace_again(self):
        # --html replays the trace a second time for the page's history (issue 47): the callback
        # still counts each of the trace's events once, never more than the trace holds.
        path = self.big_trace()
        calls = []
        fragsim.run(path, policy="best-fit", html=self.path("page.html"), progress=calls.append)
        self.assertGreater(len(calls), 2)
        self.assertEqual(sum(calls), self.EVENTS)

    def test_progress_is_called_with_the_events_decoded(self):
        path = self.big_trace()
        calls = []
        fragsim.info(path, progress=calls.append)
        self.assertGreaterEqual(len(calls), 2)  # at once, and when it is done
        self.assertEqual(sum(calls), self.EVENTS)


if __name__ == "__main__":
    unittest.main()
