"""A snapshot made of PyTorch's own tensors, read by fragsim as PyTorch's own tools read it. Needs
Debian's python3-torch (an optional extra: without it the test is reported skipped by ctest).
torch.cuda.memory._snapshot() needs a CUDA device; on the CPU build the snapshot is laid out by
hand from a model's tensors, in the layout that call returns, and checked with PyTorch's own
snapshot code where the installed version has it (torch.cuda._memory_viz.stats: 1.13)."""

import unittest

import fragsim

try:
    import torch
except ImportError:  # python3-torch is not installed
    torch = None

MiB = 1 << 20
# The caching allocator's two pools (specs/torch-caching.md): requests of at most 1 MiB
# (kSmallSize) are served from 2 MiB segments (kSmallBuffer), larger ones below 10 MiB from 20 MiB
# segments (kLargeBuffer); every block is a multiple of 512 bytes (kMinBlockSize).
SMALL_SIZE, SMALL_SEGMENT, LARGE_SEGMENT, MIN_BLOCK = 1 * MiB, 2 * MiB, 20 * MiB, 512


def segment(address, total, kind, tensors):
    """A segment as torch.cuda.memory_snapshot() lists it: its tensors' blocks back to back from its
    start, as the allocator carves them, then one free block. Each block records the bytes its
    tensor asked for (1.13: history[].real_size; 2.x: requested_size)."""
    blocks, at = [], 0
    for t in tensors:
        nbytes = t.element_size() * t.nelement()
        size = -(-nbytes // MIN_BLOCK) * MIN_BLOCK
        blocks.append({"address": address + at, "size": size, "requested_size": nbytes, "state": "active_allocated",
                       "frames": [], "history": [{"addr": address + at, "real_size": nbytes, "frames": []}]})
        at += size
    assert at < total
    blocks.append({"address": address + at, "size": total - at, "requested_size": 0, "state": "inactive",
                   "frames": [], "history": []})
    return {"device": 0, "address": address, "total_size": total, "allocated_size": at, "active_size": at,
            "requested_size": at, "stream": 0, "segment_type": kind, "is_expandable": False, "blocks": blocks}


@unittest.skipIf(torch is None, "python3-torch is not installed (an optional extra)")
class TorchSnapshot(unittest.TestCase):
    def tensors(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
        x = torch.randn(64, 512)
        y = model(x)
        return list(model.parameters()) + [x, y]

    def test_a_models_tensors_as_a_snapshot(self):
        tensors = self.tensors()
        nbytes = [t.element_size() * t.nelement() for t in tensors]
        large = [t for t, n in zip(tensors, nbytes) if n > SMALL_SIZE]
        small = [t for t, n in zip(tensors, nbytes) if n <= SMALL_SIZE]
        self.assertTrue(large and small)
        segments = [segment(0x7F0000000000, LARGE_SEGMENT, "large", large),
                    segment(0x7F0002000000, SMALL_SEGMENT, "small", small)]
        allocated = sum(s["allocated_size"] for s in segments)

        viz = getattr(torch.cuda, "_memory_viz", None)
        if viz is not None and hasattr(viz, "stats"):  # PyTorch's own reading of the snapshot
            stats = viz.stats(segments)
            self.assertEqual(stats["total_size"].value, LARGE_SEGMENT + SMALL_SEGMENT)
            self.assertEqual(stats["active_allocated"].value, allocated)

        # As torch.cuda.memory_snapshot() returns it (the segments), and as _snapshot() does in 2.x.
        for source in (segments, {"segments": segments, "device_traces": [[]]}):
            with self.subTest(kind=type(source).__name__):
                r = fragsim.run(source)
                self.assertEqual(r["policy"]["name"], "torch-caching")
                self.assertEqual(r["peak_requested_bytes"], sum(nbytes))  # what the tensors asked for
                self.assertEqual(r["peak_allocated_bytes"], allocated)  # their blocks
                self.assertEqual(r["peak_reserved_bytes"], LARGE_SEGMENT + SMALL_SEGMENT)  # as PyTorch counts it
                self.assertTrue(r["completed"])


if __name__ == "__main__":
    unittest.main()
