#!/usr/bin/env python3
"""Real JAX runs on a GPU for fragsim's fixtures: an XProf capture of the BFC allocator as JAX
configures it (XLA_PYTHON_CLIENT_* as set in the environment), and the device's memory_stats().

    jax_probe.py train   --out DIR [--steps N] [--trace-from K]   a small MLP trained with momentum
                          SGD, batch sizes cycling (each new shape compiles anew); the capture
                          starts before step K (0: before the first device allocation, else
                          mid-run, with buffers live from earlier steps)
    jax_probe.py fragment --out DIR [--block MiB] [--count N] [--big MiB]
                          N arrays of BLOCK MiB, every other one deleted, then one of BIG MiB:
                          an out-of-memory with that much free in holes when BIG exceeds every
                          free range (the error text is kept)

Writes DIR/plugins/profile/<run>/*.xplane.pb and DIR/result.json (memory_stats before and after,
the error if any, the settings seen). Needs only jax.
"""
import argparse
import json
import os
import sys
import traceback


def stats(dev):
    try:
        return dev.memory_stats()
    except Exception as e:  # noqa: BLE001  (not every backend has them)
        return {"error": str(e)}


def train(a, jax, jnp, result):
    dev = jax.devices()[0]
    sizes = [1024, 4096, 4096, 4096, 1024]

    def init(key):
        ps = []
        for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
            key, k = jax.random.split(key)
            ps.append((jax.random.normal(k, (m, n), jnp.float32) * 0.02, jnp.zeros((n,), jnp.float32)))
        return ps

    def loss(ps, x, y):
        h = x
        for w, b in ps[:-1]:
            h = jax.nn.gelu(h @ w + b)
        w, b = ps[-1]
        return jnp.mean((h @ w + b - y) ** 2)

    @jax.jit
    def step(ps, mom, x, y):
        l, g = jax.value_and_grad(loss)(ps, x, y)
        mom = jax.tree_util.tree_map(lambda m, gi: 0.9 * m + gi, mom, g)
        ps = jax.tree_util.tree_map(lambda p, m: p - 1e-3 * m, ps, mom)
        return ps, mom, l

    tracing = False
    if a.trace_from == 0:
        jax.profiler.start_trace(a.out)
        tracing = True
    ps = init(jax.random.PRNGKey(0))
    mom = jax.tree_util.tree_map(jnp.zeros_like, ps)
    losses = []
    for s in range(a.steps):
        if s == a.trace_from and not tracing:
            jax.block_until_ready(ps)
            result["stats_at_trace_start"] = stats(dev)
            jax.profiler.start_trace(a.out)
            tracing = True
        batch = (256, 512, 384, 1024)[s % 4]
        key = jax.random.PRNGKey(s + 1)
        x = jax.random.normal(key, (batch, sizes[0]), jnp.float32)
        y = jax.random.normal(jax.random.fold_in(key, 1), (batch, sizes[-1]), jnp.float32)
        ps, mom, l = step(ps, mom, x, y)
        losses.append(float(l))
        del x, y
    jax.block_until_ready(ps)
    result["losses"] = losses
    return tracing


def fragment(a, jax, jnp, result):
    dev = jax.devices()[0]
    n = a.block * 2**20 // 4
    jax.profiler.start_trace(a.out)
    arrays = []
    for i in range(a.count):
        arrays.append(jnp.full((n,), float(i), jnp.float32))
    jax.block_until_ready(arrays)
    for i in range(0, a.count, 2):
        arrays[i] = None
    import gc

    gc.collect()
    jax.block_until_ready([x for x in arrays if x is not None])
    result["stats_before_big"] = stats(dev)
    big = jnp.ones((a.big * 2**20 // 4,), jnp.float32)
    jax.block_until_ready(big)
    result["big_allocated"] = True
    return True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["train", "fragment"])
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--trace-from", type=int, default=0)
    p.add_argument("--block", type=int, default=100)
    p.add_argument("--count", type=int, default=40)
    p.add_argument("--big", type=int, default=2560)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import jax
    import jax.numpy as jnp

    result = {
        "what": a.what,
        "argv": sys.argv[1:],
        "jax": jax.__version__,
        "env": {k: v for k, v in os.environ.items() if k.startswith(("XLA_", "JAX_", "TF_"))},
        "device": str(jax.devices()[0]),
        "device_kind": jax.devices()[0].device_kind,
        "stats_at_start": stats(jax.devices()[0]),
    }
    tracing = False
    status = 0
    try:
        tracing = (train if a.what == "train" else fragment)(a, jax, jnp, result)
    except Exception as e:  # noqa: BLE001  (an OOM is a result here)
        result["error_type"] = type(e).__name__
        result["error"] = str(e)
        result["traceback"] = traceback.format_exc()
        tracing = True
        status = 0 if a.what == "fragment" else 1
    finally:
        result["stats_at_end"] = stats(jax.devices()[0])
        if tracing:
            try:
                jax.profiler.stop_trace()
            except Exception as e:  # noqa: BLE001
                result["stop_trace_error"] = str(e)
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(json.dumps({k: result.get(k) for k in ("what", "error_type", "error", "stats_at_end")}, default=str)[:2000])
    return status


if __name__ == "__main__":
    sys.exit(main())
