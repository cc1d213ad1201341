#!/usr/bin/env python3
"""A real PyTorch run on a GPU for fragsim's fixtures: a memory snapshot (trace from the first
allocation) of a small MLP trained a few steps, then N tensors of BLOCK MiB with every other one
freed, then BIG1 MiB (more than any cached block: the allocator frees its cache and retries) and
BIG2 MiB (past the per-process fraction: a real OutOfMemoryError, whose text is kept).

    torch_probe.py --out DIR [--fraction F] [--block MiB] [--count N] [--big1 MiB] [--big2 MiB]

Writes DIR/snapshot.pickle and DIR/result.json. Set PYTORCH_CUDA_ALLOC_CONF as you run it.
"""
import argparse
import json
import os
import pickle
import sys
import traceback


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--fraction", type=float, default=0.04)
    p.add_argument("--block", type=int, default=100)
    p.add_argument("--count", type=int, default=40)
    p.add_argument("--big1", type=int, default=2560)
    p.add_argument("--big2", type=int, default=3584)
    p.add_argument("--steps", type=int, default=6)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import torch

    dev = torch.device("cuda:0")
    torch.cuda.set_per_process_memory_fraction(a.fraction, dev)
    props = torch.cuda.get_device_properties(dev)
    result = {"argv": sys.argv[1:], "torch": torch.__version__, "device": props.name,
              "total_memory": props.total_memory, "fraction": a.fraction,
              "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=1000000)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096),
                                    torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for s in range(a.steps):
            batch = (256, 512, 384, 1024)[s % 4]
            x = torch.randn(batch, 1024, device=dev)
            loss = (model(x) - x).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            del x, loss
        torch.cuda.synchronize()
        n = a.block * 2**20 // 4
        ts = [torch.full((n,), float(i), device=dev) for i in range(a.count)]
        for i in range(0, a.count, 2):
            ts[i] = None
        result["reserved_before_big"] = torch.cuda.memory_reserved(dev)
        result["allocated_before_big"] = torch.cuda.memory_allocated(dev)
        big1 = torch.empty(a.big1 * 2**20 // 4, device=dev)
        result["big1_allocated"] = True
        result["reserved_after_big1"] = torch.cuda.memory_reserved(dev)
        big2 = torch.empty(a.big2 * 2**20 // 4, device=dev)
        result["big2_allocated"] = True
        del big1, big2
    except Exception as e:  # noqa: BLE001  (the OOM is the result)
        result["error_type"] = type(e).__name__
        result["error"] = str(e)
        result["traceback"] = traceback.format_exc()
    result["memory_stats"] = {k: v for k, v in torch.cuda.memory_stats(dev).items() if not k.startswith("oversize")}
    snap = torch.cuda.memory._snapshot()
    with open(os.path.join(a.out, "snapshot.pickle"), "wb") as f:
        pickle.dump(snap, f)
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(json.dumps({k: result.get(k) for k in ("error_type", "error", "reserved_after_big1")})[:2000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
