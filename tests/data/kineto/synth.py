#!/usr/bin/env python3
"""Writes the synthetic PyTorch profiler traces of tests/data/kineto (SOURCES.md).

Each is shaped as torch.profiler writes a trace recorded with profile_memory=True: `[memory]`
instant events with Addr, Bytes (the block's size), Total Allocated and Total Reserved after the
event, Device Type and Device Id, enclosed by `cpu_op` spans; the variants are the ones the real
traces show (specs/kineto.md). The addresses and totals come from a small model of PyTorch's
caching allocator run here (best fit on (size, address), a 2 MiB segment per small request and
20 MiB per large one under 10 MiB, a block split when the remainder is 512 B or more in the small
pool and more than 1 MiB in the large one, free neighbours merged, empty_cache releasing whole free
segments), so that a trace is one a real program could have written. The window starts after a
warm-up step, as a profiler schedule's does: memory is reserved and live before it.

usage: python3 tests/data/kineto/synth.py   (writes the files beside itself; standard library only)
"""
import gzip
import json
import os

MiB = 1 << 20


class Allocator:
    """One stream of the caching allocator (specs/torch-caching.md §1-§5)."""

    def __init__(self, base, limit=None):
        self.next = base  # where the driver hands out the next segment
        self.blocks = {}  # addr -> [size, used, segment]
        self.segments = {}  # segment base -> (size, small)
        self.allocated = self.reserved = 0
        # The most it may reserve (torch.cuda.set_per_process_memory_fraction): a segment past it
        # is refused, and the allocator releases its cache and retries (specs/torch-caching.md §3).
        self.limit = limit

    def _free_blocks(self, small):
        return sorted((b[0], a) for a, b in self.blocks.items() if not b[1] and self.segments[b[2]][1] == small)

    def malloc(self, size):
        r = max(512, -(-size // 512) * 512)
        small = r <= MiB
        fits = [(s, a) for s, a in self._free_blocks(small) if s >= r]
        grew = 0
        if not fits:
            seg = 2 * MiB if small else (20 * MiB if r < 10 * MiB else -(-r // (2 * MiB)) * 2 * MiB)
            if self.limit is not None and self.reserved + seg > self.limit:
                self.empty_cache()  # the retry: every cached segment goes, then cudaMalloc again
                if self.reserved + seg > self.limit:
                    raise MemoryError(f"{r} bytes: {self.reserved} reserved of {self.limit}")
            a = self.next
            self.next += seg + 2 * MiB  # the driver leaves gaps between allocations
            self.segments[a] = (seg, small)
            self.blocks[a] = [seg, False, a]
            self.reserved += seg
            grew = seg
            fits = [(seg, a)]
        s, a = fits[0]
        rest = s - r
        if (small and rest >= 512) or (not small and rest > MiB):
            self.blocks[a + r] = [rest, False, self.blocks[a][2]]
            self.blocks[a][0] = r
        self.blocks[a][1] = True
        self.allocated += self.blocks[a][0]
        return a, self.blocks[a][0], grew

    def free(self, a):
        b = self.blocks[a]
        b[1] = False
        self.allocated -= b[0]
        nxt = a + b[0]
        if nxt in self.blocks and not self.blocks[nxt][1] and self.blocks[nxt][2] == b[2]:
            b[0] += self.blocks.pop(nxt)[0]
        for p, pb in self.blocks.items():
            if p + pb[0] == a and not pb[1] and pb[2] == b[2]:
                pb[0] += self.blocks.pop(a)[0]
                break

    def empty_cache(self):
        for a in [a for a, b in self.blocks.items() if not b[1] and a == b[2] and b[0] == self.segments[a][0]]:
            self.reserved -= self.segments.pop(a)[0]
            del self.blocks[a]


class Host:
    """The CPU allocator as the profiler reports it: the bytes asked for (no rounding), no reserve."""

    def __init__(self, base):
        self.next, self.allocated, self.reserved = base, 0, 0

    def malloc(self, size):
        a = self.next
        self.next += size + 0x3D0980
        self.allocated += size
        return a, size, 0

    def free(self, a, size):
        self.allocated -= size


class Trace:
    """The events of one process, as Kineto writes them."""

    def __init__(self, pid, tid, device_type, device, t0_us, fractional, style):
        self.pid, self.tid = pid, tid
        self.device_type, self.device = device_type, device
        self.t = t0_us  # µs: since the epoch, or after baseTimeNanoseconds
        self.fractional = fractional
        self.style = style  # "old": no cat, no Ev Idx, no finished; "new": all three
        self.events, self.index = [], 0
        self.recording = False

    def tick(self, us):
        self.t += us

    def ts(self):
        return round(self.t, 3) if self.fractional else int(self.t)

    def memory(self, addr, nbytes, alloc, device_type=None, device=None):
        if not self.recording:
            return
        args = {
            "Total Reserved": alloc.reserved,
            "Total Allocated": alloc.allocated,
            "Bytes": nbytes,
            "Addr": addr,
            "Device Id": self.device if device is None else device,
            "Device Type": self.device_type if device_type is None else device_type,
        }
        ev = {"ph": "i", "s": "t", "name": "[memory]", "pid": self.pid, "tid": self.tid, "ts": self.ts(), "args": args}
        if self.style == "new":
            ev["cat"] = "cpu_instant_event"
            args["Ev Idx"] = self.index
            args["finished"] = False
        self.index += 1
        self.events.append(ev)
        self.tick(7.25)

    def op(self, name, start, end):
        if self.recording:
            ev = {"ph": "X", "cat": "cpu_op", "name": name, "pid": self.pid, "tid": self.tid, "ts": start,
                  "dur": round(end - start, 3) if self.fractional else int(end - start), "args": {}}
            self.events.append(ev)


def step(trace, alloc, sizes, keep, release=False):
    """One training step: allocate activations, free most, keep `keep` of them (optimizer state)."""
    live = []
    for i, size in enumerate(sizes):
        start = trace.ts()
        addr, block, _ = alloc.malloc(size)
        trace.memory(addr, block, alloc)
        trace.op(f"aten::empty_{i % 3}", start, trace.ts())
        live.append((addr, block))
    for addr, block in live[keep:]:
        alloc.free(addr)
        trace.memory(addr, -block, alloc)
    if release:
        start = trace.ts()
        alloc.empty_cache()
        trace.tick(3)
        trace.op("aten::empty_cache", start, trace.ts())
    return live[:keep]


def write(name, doc):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    data = json.dumps(doc, indent=1) + "\n"
    if name.endswith(".gz"):
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(data.encode())
    else:
        with open(path, "w") as f:
            f.write(data)


def props(device, name, mem, major, minor):
    return {"id": device, "name": name, "totalGlobalMem": mem, "computeMajor": major, "computeMinor": minor}


SIZES = [3 * MiB, 512 * 1024, 6 * MiB, 12 * MiB, 4096, 1536, 5 * MiB, 700 * 1024, 2 * MiB]


def hip_rank1():
    """A DDP rank that is not device 0, on ROCm (Device Type 6), in the oldest style: whole µs since
    the epoch, no cat, no Ev Idx, no finished; the window starts after a warm-up step."""
    alloc = Allocator(0x7F3A40000000)
    t = Trace(4242, 4242, 6, 1, 1716980583000000, False, "old")
    kept = step(t, alloc, SIZES, 3)  # warm-up, not recorded
    t.recording = True
    for _ in range(3):
        kept2 = step(t, alloc, SIZES, 0)
    del kept, kept2
    doc = {"schemaVersion": 1,
           "deviceProperties": [props(0, "", 206141652992, 9, 4), props(1, "", 206141652992, 9, 4)],
           "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
           "traceEvents": t.events}
    write("mi300x_rank1_hip.json", doc)


def growth_release():
    """Reserved memory that grows inside the window and falls at empty_cache, with CPU events
    (Device Type 0) between the device's, in the newest style (fractional µs after
    baseTimeNanoseconds, cat, Ev Idx, finished)."""
    alloc = Allocator(0x7E71E8000000)
    host = Host(0x2B0A9D40)
    t = Trace(276, 276, 1, 0, 2598589631556.375, True, "new")
    step(t, alloc, SIZES[:4], 2)  # warm-up: two blocks stay live
    t.recording = True
    step(t, alloc, SIZES, 0)
    step(t, alloc, [30 * MiB, 14 * MiB] + SIZES, 0, release=True)
    for i in range(2):
        a, b, _ = host.malloc(4000000)
        t.memory(a, b, host, device_type=0, device=-1)
        step(t, alloc, SIZES[::-1], 0)
        host.free(a, b)
        t.memory(a, -b, host, device_type=0, device=-1)
    doc = {"schemaVersion": 1, "deviceProperties": [props(0, "NVIDIA H100 80GB HBM3", 85045477376, 9, 0)],
           "baseTimeNanoseconds": 1727743122000000000, "profile_memory": 1, "traceEvents": t.events}
    write("h100_growth_release.pt.trace.json.gz", doc)


def release_at_alloc():
    """empty_cache followed directly by allocations, so that Total Reserved falls at the allocation
    after it: once at one a segment that survived serves (inside the small segment a block live since
    the warm-up holds), once at one that obtains a segment of its own (the fall and the growth at one
    event). The reserved memory before each fall plus the segment obtained stays under the most the
    window held: the program's empty_cache, not the allocator's retry. The newest style, on an H100."""
    alloc = Allocator(0x7E7100000000)
    t = Trace(311, 311, 1, 0, 2598589631556.375, True, "new")
    step(t, alloc, SIZES[:4], 2)  # warm-up: its 3 MiB and 512 KiB blocks stay live
    t.recording = True
    step(t, alloc, [100 * MiB] + SIZES, 0, release=True)
    step(t, alloc, [4096, 30 * MiB] + SIZES, 0, release=True)
    step(t, alloc, [40 * MiB] + SIZES, 0)
    doc = {"schemaVersion": 1, "deviceProperties": [props(0, "NVIDIA H100 80GB HBM3", 85045477376, 9, 0)],
           "baseTimeNanoseconds": 1727743122000000000, "profile_memory": 1, "traceEvents": t.events}
    write("h100_release_at_alloc.pt.trace.json", doc)


def oom_retry():
    """An allocator capped at 96 MiB (set_per_process_memory_fraction): a 36 MiB request that no cached
    block serves would take reserved memory past the cap, so the allocator releases its cache (30 and
    20 MiB segments, free) and retries inside that malloc: Total Reserved falls at the allocation, which
    obtained a segment, to more than the window ever held before. On a T4 (compute capability 7.5)."""
    alloc = Allocator(0x7F2200000000, limit=96 * MiB)
    t = Trace(512, 512, 1, 0, 2598589631556.375, True, "new")
    step(t, alloc, SIZES[:2], 2)  # warm-up: 3 MiB and 512 KiB live, in 20 and 2 MiB segments
    t.recording = True
    step(t, alloc, [30 * MiB, 20 * MiB], 0)
    step(t, alloc, [36 * MiB] + SIZES[2:5], 0)
    doc = {"schemaVersion": 1, "deviceProperties": [props(0, "Tesla T4", 15835660288, 7, 5)],
           "baseTimeNanoseconds": 1727743122000000000, "profile_memory": 1, "traceEvents": t.events}
    write("t4_oom_retry.pt.trace.json", doc)


def tensorboard_ranks():
    """Two ranks of one job as tensorboard_trace_handler writes them: <worker>.<ns>.pt.trace.json."""
    for rank in (0, 1):
        alloc = Allocator(0x7F0000000000 + rank * 0x100000000)
        t = Trace(100 + rank, 100 + rank, 1, rank, 1700000000000000 + rank * 13, False, "new")
        t.recording = True
        for _ in range(2):
            step(t, alloc, SIZES[: 5 + rank], 0)
        doc = {"schemaVersion": 1,
               "deviceProperties": [props(0, "NVIDIA H100 80GB HBM3", 85045477376, 9, 0),
                                    props(1, "NVIDIA H100 80GB HBM3", 85045477376, 9, 0)],
               "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}, "traceEvents": t.events}
        os.makedirs(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tb_ranks"), exist_ok=True)
        write(f"tb_ranks/host_{100 + rank}.170000000000{rank}.pt.trace.json", doc)


def refused():
    """Traces fragsim refuses: recorded without profile_memory (no [memory] events), and the
    oldest memory events (Bytes and the device only: no address to pair a free with)."""
    ops = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {}}]
    write("no_memory_events.json", {"schemaVersion": 1, "traceEvents": ops})
    old = [{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12,
            "args": {"Bytes": 512, "Device Type": 1, "Device Id": 0}}]
    write("no_addresses_2021.json", {"schemaVersion": 1, "traceEvents": ops + old})


def random_window(seed):
    """A window of a seeded random workload on one of four A100s: small and large blocks, frees
    between allocations and in any order, some blocks kept for later steps; the window begins after
    a few such steps. Seeds 10, 14 and 25 are windows whose large segments the window's blocks show
    only in part: a 20 MiB segment obtained for an earlier, smaller request, of which the window
    touches 11.5 MiB (seed 10), a 78 MiB one of which it touches the first 30 MiB (seed 14), one
    whose touched blocks form two extents with an untouched range between them (seed 25), a 12 MiB
    one of which it shows 10 MiB (seed 29), and two of which it shows 58 MiB each, 62 and 66 MiB
    long (seed 40)."""
    import random
    rnd = random.Random(seed)
    alloc = Allocator(0x7F0000000000 + rnd.randrange(0, 64) * 0x40000000)
    t = Trace(100, 100, 1, rnd.choice([0, 1, 3]), 1716980583000000, False, "new")

    def size():
        k = rnd.random()
        if k < 0.45:
            return rnd.choice([512, 1024, 4096, 8192, 20480, 40960, 131072, 262144, 524288, MiB]) - rnd.choice([0, 0, 100])
        if k < 0.8:
            return rnd.randrange(1, 12) * MiB + rnd.choice([0, 0, 512 * 1024, 4096])
        return rnd.randrange(12, 80) * MiB

    sizes = [size() for _ in range(rnd.randrange(8, 30))]
    live = []
    steps = rnd.randrange(2, 6)
    for s in range(steps + 3):
        t.recording = s >= steps
        step_sizes = sizes if rnd.random() < 0.7 else [size() for _ in range(len(sizes))]
        cur = []
        for sz in step_sizes:
            a, b, _ = alloc.malloc(sz)
            t.memory(a, b, alloc)
            cur.append((a, b))
            if cur and rnd.random() < 0.3:  # a temporary freed at once
                a2, b2 = cur.pop(rnd.randrange(len(cur)))
                alloc.free(a2)
                t.memory(a2, -b2, alloc)
        rnd.shuffle(cur)
        keep = rnd.randrange(0, 4)
        for a, b in cur[keep:]:
            alloc.free(a)
            t.memory(a, -b, alloc)
        live += cur[:keep]
        if live and rnd.random() < 0.5:
            a, b = live.pop(rnd.randrange(len(live)))
            alloc.free(a)
            t.memory(a, -b, alloc)
    doc = {"schemaVersion": 1,
           "deviceProperties": [props(i, "NVIDIA A100-SXM4-80GB", 85899345920, 8, 0) for i in range(4)],
           "traceEvents": t.events}
    write(f"random_window_{seed}.json", doc)


if __name__ == "__main__":
    hip_rank1()
    growth_release()
    release_at_alloc()
    oom_retry()
    tensorboard_ranks()
    refused()
    random_window(10)
    random_window(14)
    random_window(25)
    random_window(29)
    random_window(40)
