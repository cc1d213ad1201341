"""fragsim from Python: replay an allocation trace through models of the allocators ML frameworks
run, and ask whether it fits, where it runs out of memory, why, and which setting makes it fit.

    import fragsim
    r = fragsim.run(torch.cuda.memory._snapshot(), capacity="24GiB",
                    env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    print(r)                      # the text summary `fragsim run` prints
    r["completed"], r["ooms"]     # the report itself: fragsim report v1, a plain dict

Every function makes the library calls the `fragsim` command makes (no subprocess), with the same
defaults, the same results and the same messages. A source is

  - a path (str or os.PathLike) of any format the command reads: .jsonl(.zst), .fstrace,
    PyTorch snapshots (.pickle), PyTorch profiler traces (.json, .json.gz, TensorBoard log
    directories), JAX device memory profiles (.prof), XProf captures and profile directories,
    XLA modules;
  - a PyTorch memory snapshot as a dict, as torch.cuda.memory._snapshot() returns it (read as
    the same snapshot pickled to a file would be, without pickling it);
  - any other iterable of events: dicts with the keys of fragsim trace v1
    ({"op": "alloc", "id": 1, "size": 1024}, ...) or JSONL lines (an open .jsonl file). Item i
    (from 1) is read as line i of a .jsonl file would be: a first item with "fragsim_trace" is
    the header, and errors name the item as "NAME:i: key: what".

name= names a source held in memory in reports and messages ("<snapshot>", "<events>").

Options are the command's, as keywords: policy="xla-bfc[preallocate=false]", hw="h100-80g",
capacity="16GiB" (or an int of bytes), reserve=..., env={"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"},
settings={"max_split_size_mb": 256} (--set; the keys `fragsim list POLICY` names), keep_going, lenient, check, follow_recording,
pre_trace ("auto", "recorded" or "rebuilt": --pre-trace),
strict, shard, shard_dim, jobs (threads, as --jobs: 0 = every core).

Bad input raises InputError (a ValueError; the command's exit 2), an unreadable file EnvError (an
OSError; exit 3), with the message the command prints after "fragsim: ". An OOM is a result, never
an exception. While a replay runs the GIL is released; Ctrl-C (KeyboardInterrupt) stops it within
a few thousand events and leaves no output file behind. progress= takes a callable, called about
ten times a second with the events decoded since its previous call (a tqdm bar's update: the
numbers sum to the input's events, each counted once; raising from it stops the run too).

docs/python.md has the whole story.
"""

import builtins as _builtins
import os as _os

from . import _fragsim
from ._fragsim import EnvError, InputError, InternalError

__version__ = _fragsim.version
__all__ = [
    "run", "compare", "sweep", "check", "diff", "info", "layout", "list", "gen", "plan", "set_limit",
    "reset_limits", "Report", "Comparison", "Sweep", "Check", "Diff", "Info", "Layout", "Plan",
    "InputError", "EnvError", "InternalError",
]

for _exc, _code in ((InputError, 2), (EnvError, 3), (InternalError, 1)):
    _exc.__module__ = __name__
    _exc.exit_code = _code  # what the command exits with for the same error


class _Result(dict):
    """A plain dict (json.loads of what the command writes with --json) that also renders itself."""

    __slots__ = ("_native",)

    def __init__(self, data, native):
        super().__init__(data)
        self._native = native

    def text(self):
        """The text the command prints."""
        return self._native.text()

    def __str__(self):
        return self.text()

    def __reduce__(self):  # pickles, copies and deep copies as the plain dict
        return (dict, (dict(self),))


class Report(_Result):
    """One run: fragsim report v1 (docs/report.md), as `fragsim run --json` writes it."""

    __slots__ = ("_index",)

    def __init__(self, runs, index):
        super().__init__(runs.report(index), runs)
        self._index = index

    def text(self):
        """The text summary `fragsim run` prints."""
        return self._native.text(self._index)

    def html(self, path):
        """Writes the interactive HTML report (`fragsim run --html`) to path."""
        self._native.html(path, self._index)

    def json(self, path=None):
        """The report as `fragsim run --json` writes it; written to path when given (never over a
        file the run read: InputError)."""
        if path is not None:
            self._native.write_json(path, self._index)
        return self._native.json_text(self._index)


class Comparison(_builtins.list):
    """Several runs (`fragsim compare`): a list of Report, one per policy and trace."""

    __slots__ = ("_native",)

    def __init__(self, runs):
        super().__init__(Report(runs, i) for i in range(len(runs)))
        self._native = runs

    def text(self):
        """The table `fragsim compare` prints."""
        return self._native.text(-1)

    def __str__(self):
        return self.text()

    def html(self, path):
        """Writes one HTML report with every run (`fragsim compare --html`) to path."""
        self._native.html(path, -1)

    def json(self, path=None):
        """The JSON array `fragsim compare --json` writes; written to path when given (never over
        a file the runs read: InputError)."""
        if path is not None:
            self._native.write_json(path, -1)
        return self._native.json_text(-1)

    def __reduce__(self):
        return (_builtins.list, (_builtins.list(self),))


class _Reported(_Result):
    """A result whose native object gives the report and renders it."""

    __slots__ = ()

    def __init__(self, native):
        super().__init__(native.report(), native)


class _WithMarkdown(_Reported):
    """A result the command also writes as Markdown (--markdown)."""

    __slots__ = ()

    def markdown(self):
        """The Markdown the command writes with --markdown (e.g. for a CI job summary)."""
        return self._native.markdown()


class Sweep(_Reported):
    """`fragsim sweep`: {find, policy, value, setting, command, range, monotonic, runs, ...}.
    value (and setting, command) is None when no setting in range works."""

    __slots__ = ()


class Check(_WithMarkdown):
    """`fragsim check`: {pass, tolerance_pct, items, notes}; pass is False on a regression.
    markdown() is the table --markdown writes."""

    __slots__ = ()

    def junit(self):
        """JUnit XML, one test case per figure (--junit)."""
        return self._native.junit()

    def github(self, *, on=None):
        """The GitHub Actions ::error lines `fragsim check --github` prints, one per regression, as a
        str: print it in a workflow step (GitHub reads annotations from a step's output; nothing is
        written). on: the file each annotation is shown on; default the current report's path when
        check() was given one, else none (the annotation belongs to the run)."""
        return self._native.github(on=None if on is None else _os.fspath(on))


class Diff(_WithMarkdown):
    """`fragsim diff`: fragsim_diff 1 (docs/report.md): each run's peaks and first OOM, per device
    and space, the live bytes at each peak by call site and frame, the buffers added, removed or
    grown. markdown() is what --markdown writes."""

    __slots__ = ()


class _Texted(_Result):
    __slots__ = ("_text",)

    def __init__(self, data_text):
        super().__init__(data_text[0], None)
        self._text = data_text[1]

    def text(self):
        return self._text


class Info(_Texted):
    """`fragsim info`: events, allocs, frees, devices, peak requested, size histogram."""

    __slots__ = ()


class Layout(_Texted):
    """`fragsim layout`: {shape, dtype, tile, unpadded_bytes, padded_bytes}."""

    __slots__ = ()


class Plan(_Texted):
    """`fragsim plan`: fragsim_plan 1 — per space the height, lower bound, optimal, offsets."""

    __slots__ = ()


def _options(given, *arguments):
    """The keywords given (None: not given), without the call's positional arguments: a None
    passed for one of those is the native call's to refuse (TypeError), not a KeyError here."""
    return {k: v for k, v in given.items() if v is not None and k not in arguments}


def run(source, *, policy=None, hw=None, capacity=None, reserve=None, env=None, settings=None,
        keep_going=False, lenient=False, check=False, follow_recording=False, pre_trace=None,
        strict=False, shard=None, shard_dim=None, jobs=0, name=None, placements=None, perfetto=None, html=None,
        progress=None):
    """Replays source through one policy: `fragsim run`. Returns a Report.

    Without policy, the policy follows the input (torch-caching with the recorded settings for a
    PyTorch snapshot, xla-bfc for a GPU capture, ...), as the command chooses it; every choice
    the input left open is a note in the report. After an OOM, each setting the report suggests
    was replayed first (report["advice"]). placements, perfetto, html: output paths, as the
    command's options (html also keeps the buffers behind the address maps).
    """
    return Report(_fragsim.run(source, _options(locals(), "source")), 0)


def compare(source, *more_sources, policies=None, hw=None, capacity=None, reserve=None, env=None,
            settings=None, keep_going=False, lenient=False, check=False, follow_recording=False,
            pre_trace=None, strict=False, shard=None, shard_dim=None, jobs=0, name=None, html=None, progress=None):
    """Several policies on one or more sources, each decoded once: `fragsim compare`.

    policies: "ideal,xla-bfc,xla-bfc[preallocate=false]" or a list of such entries; by default
    the lower bound, the policy a run would choose and its what-ifs. Returns a Comparison.
    """
    opts = _options(locals(), "source", "more_sources")
    return Comparison(_fragsim.compare((source,) + more_sources, opts))


def sweep(source, find, *, policy=None, exhaustive=False, hw=None, capacity=None, reserve=None,
          env=None, settings=None, lenient=False, follow_recording=False, pre_trace=None, strict=False,
          shard=None, shard_dim=None, jobs=0, name=None, progress=None):
    """The smallest memory fraction or capacity with no OOM: `fragsim sweep --find FIND`.

    find: "min-mem-fraction" or "min-capacity". Returns a Sweep; its "setting" is what to type
    (XLA_PYTHON_CLIENT_MEM_FRACTION=.83, --capacity 17GiB) and "command" the run that replays it.
    """
    opts = _options(locals(), "source", "find")
    return Sweep(_fragsim.sweep(source, find, opts))


def check(baseline, current, *, tolerance=0, gate="recommended", same_trace=False, allow_different_policy=False):
    """The CI gate: `fragsim check`. baseline and current are reports (a Report, a Comparison, a
    dict or list loaded from JSON) or paths of JSON files. Returns a Check; check["pass"] is False
    when current has a new or earlier OOM, or a gated figure grown by more than tolerance percent
    (gate="recommended": peak allocated and reserved, fragmentation max and at the peak of
    allocated; gate="all": every figure). Reports of different traces are compared as recordings
    of one workload, with a note, unless same_trace=True (then InputError)."""
    opts = _options(locals(), "baseline", "current")
    return Check(_fragsim.check(baseline, current, opts))


def diff(a, b=None, *, policies=None, label=None, policy=None, hw=None, capacity=None, reserve=None, env=None,
         settings=None, keep_going=False, lenient=False, check=False, follow_recording=False, pre_trace=None,
         strict=False, shard=None, shard_dim=None, jobs=0, html=None, progress=None):
    """What changed the peak and the first OOM between two runs: `fragsim diff`. Returns a Diff.

    a and b are two reports (a Report, a dict loaded from run --json, a Comparison or list from
    compare --json with label= naming the run to take, or paths of .json files), read as they
    are; or two sources (paths, snapshot dicts, event iterables) replayed as run() would, with
    the same options; or one source and policies=[A, B]. html: a path for the page with both
    runs aligned."""
    opts = _options(locals(), "a", "b")
    return Diff(_fragsim.diff(a, b, opts))


def info(source, *, lenient=False, name=None, progress=None):
    """A trace's summary (`fragsim info`): counts, devices, peak requested, size histogram."""
    opts = _options(locals(), "source")
    return Info(_fragsim.info(source, opts))


def plan(path, *, capacity=None, time_limit=0, seed=1):
    """The best static placement of a trace's (or MiniMalloc CSV's) buffers (`fragsim plan`):
    capacity a height to meet ("1MiB" or bytes), else minimised within time_limit seconds (0: the
    command's default). Every plan is checked before it is returned."""
    return Plan(_fragsim.plan(path, _options({"capacity": capacity, "time_limit": time_limit, "seed": seed})))


def layout(shape, *, hw="tpu-v5e"):
    """Padded bytes and tile of an array in TPU tiled layout (`fragsim layout`), e.g.
    layout("bf16[1000,129]") -> {"tile": "(8,128)(2,1)", "padded_bytes": 512000, ...}."""
    return Layout(_fragsim.layout(shape, hw))


def gen(workload, path, *, seed=1, settings=None):
    """Writes a synthetic workload trace (`fragsim gen`) to path (.jsonl, .jsonl.zst, .fstrace);
    returns the workload's resolved settings. fragsim.list() names the workloads."""
    return _fragsim.gen(workload, path, _options({"seed": seed, "settings": settings}))


def set_limit(key_value):
    """Sets an input limit for the rest of the process, as `--limit KEY=VALUE` does for a command
    (docs/limits.md): set_limit("objects=8000000"), set_limit("decompressed=8GiB"),
    set_limit("objects=none"). Process-wide, like the command's flag; reset_limits() forgets them."""
    _fragsim.set_limit(key_value)


def reset_limits():
    """Forgets every set_limit: each limit is its default again."""
    _fragsim.reset_limits()


def list(policy=None):  # noqa: A001 (fragsim.list, as `fragsim list`)
    """`fragsim list`: the policies, hardware presets and workloads; with a policy name, that
    policy's options with their defaults."""
    return _fragsim.catalog() if policy is None else _fragsim.policy(policy)
