"""The batch comparison on the GPU end to end, and its value-and-gradient kernel against JAX and a CuPy tape.

    python benchmarks/gpu.py [--sizes 1e7 1e8] [--dtypes float32 float64] [--repeat 7] [--json FILE]
    python benchmarks/gpu.py --whole-only --device cpu --whole-sizes 1e5   # the first part, on the CPU

First the whole comparison, as ``gradcli grad E2 --batch N --device cuda`` runs it (``grad_batch``): the
default methods and ``forward,reverse`` at ``--whole-sizes`` (1e7 and 1e8), with the seconds of each
method, points/s end to end, and the ratio to the kernel's own time at the same size (measured below). A
size whose predicted time (from the run before it) would overrun ``--whole-budget`` seconds is skipped and
says so.

Then the kernel: for E1-E4, at each size and dtype, with the points already on the device:

* ``gradcli``: ``gradcli.engines.cuda.execute``, one fused ElementwiseKernel (what ``--device cuda`` runs);
* ``jax``: ``jit(vmap(value_and_grad(f)))`` on the same GPU (skipped if JAX has no GPU);
* ``cupy-tape``: the same compiled program run instruction by instruction, one CuPy ufunc per
  instruction over whole arrays (every intermediate goes through device memory).

Each is timed with CUDA events (JAX: host clock after ``block_until_ready``), median of ``--repeat``
runs after two warm-ups, and reported as points/s and as achieved bandwidth: the fewest bytes the
problem needs (each input read once, each output written once) over the time, against a device-to-device
copy of the same number of bytes (bytes read plus bytes written) measured here. The outputs are checked
against each other first: a fast wrong answer is not a result.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX must leave memory to CuPy

import numpy as np  # noqa: E402

try:
    import cupy
except Exception as exc:  # pragma: no cover - a machine without CuPy: only --device cpu --whole-only runs
    cupy, NO_CUPY = None, f"benchmarks/gpu.py needs CuPy and a CUDA device: {exc}"

from gradcli.batch.api import grad_batch  # noqa: E402
from gradcli.engines import cuda  # noqa: E402
from gradcli.engines.program import compile_graph  # noqa: E402
from gradcli.core.parser import parse  # noqa: E402
from gradcli.core.primitives import PRIMITIVES  # noqa: E402

E4_TEXT = " + ".join(f"sin({k}*x + y)*exp(-{k}*z)" for k in range(1, 11))
EXPRESSIONS = {
    "E1": ("x*y + sin(x)", lambda m, x, y: x * y + m.sin(x)),
    "E2": ("exp(-(x**2 + y**2)/2) * cos(3*x*y)", lambda m, x, y: m.exp(-(x**2 + y**2) / 2) * m.cos(3 * x * y)),
    "E3": ("log(1 + exp(x*y)) / sqrt(1 + x**2 + y**2) + tanh(x - y)**2",
           lambda m, x, y: m.log(1 + m.exp(x * y)) / m.sqrt(1 + x**2 + y**2) + m.tanh(x - y) ** 2),
    "E4": (E4_TEXT, lambda m, x, y, z: sum(m.sin(k * x + y) * m.exp(-k * z) for k in range(1, 11))),
}


def free():
    cupy.get_default_memory_pool().free_all_blocks()


def time_cuda(fn, repeat):
    """Median milliseconds of fn() by CUDA events, after two warm-ups."""
    for _ in range(2):
        fn()
    cupy.cuda.Device().synchronize()
    times = []
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(repeat):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def copy_bandwidth(nbytes, repeat):
    """GB/s of a device-to-device copy moving ``nbytes`` in all (half read, half written)."""
    half = max(nbytes // 2, 1)
    src = cupy.empty(half, dtype=np.uint8)
    src.fill(1)
    dst = cupy.empty_like(src)
    ms = time_cuda(lambda: dst.data.copy_from_device_async(src.data, half), repeat)
    del src, dst
    free()
    return 2 * half / (ms * 1e-3) / 1e9


def tape(program, inputs, dtype):
    """The compiled program over whole CuPy arrays: one ufunc call per instruction."""
    regs = [None] * program.n_registers
    for k, v in enumerate(program.variables):
        regs[k] = inputs[v]
    for ins in program.instructions:
        regs[ins.out] = PRIMITIVES[ins.op].value(cupy, *(regs[a] if isinstance(a, int) else a for a in ins.args))
    n = inputs[program.variables[0]].shape
    return [regs[o] if isinstance(o, int) else cupy.full(n, o, dtype) for o in program.outputs]


def jax_runner(fn, nvars):
    try:
        import jax
        import jax.numpy as jnp

        if not any(d.platform == "gpu" for d in jax.devices()):
            return None, "JAX sees no GPU"
        jax.config.update("jax_enable_x64", True)
    except Exception as exc:
        return None, f"JAX unavailable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    f = jax.jit(jax.vmap(jax.value_and_grad(lambda *a: fn(jnp, *a), argnums=tuple(range(nvars)))))

    def to_jax(a):
        try:
            return jax.dlpack.from_dlpack(a)
        except Exception:
            return jax.device_put(cupy.asnumpy(a))

    return (f, to_jax, jax.block_until_ready), ""


def time_host(fn, sync, repeat):
    for _ in range(2):
        sync(fn())
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        sync(fn())
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def max_rel(a, b):
    a, b = cupy.asarray(a, dtype=np.float64), cupy.asarray(b, dtype=np.float64)
    scale = cupy.maximum(cupy.abs(b), 1.0)
    return float(cupy.nanmax(cupy.abs(a - b) / scale))


WHOLE_METHODS = (None, "forward,reverse")  # None: the default methods


def whole_comparison(sizes, device, budget, dtype="float64"):
    """``grad_batch`` on E2 end to end -> rows {n, methods, seconds, points_per_s, per_method, status}."""
    text = EXPRESSIONS["E2"][0]
    domain = {"x": (-1, 1), "y": (-1, 1)}
    grad_batch(text, n=100_000, domain=domain, device=device, dtype=dtype)  # compiles and warms up
    rows, start = [], time.perf_counter()
    for methods in WHOLE_METHODS:
        rate = None
        for size in sizes:
            n, label = int(size), methods or "default"
            left = budget - (time.perf_counter() - start)
            if rate is not None and n / rate > left:
                print(f"  whole {label} n={n:.0e}: skipped (predicted {n / rate:.0f} s, {left:.0f} s left)",
                      flush=True)
                rows.append({"n": n, "methods": label, "skipped": f"predicted {n / rate:.0f} s"})
                continue
            t = time.perf_counter()
            r = grad_batch(text, n=n, domain=domain, device=device, dtype=dtype, methods=methods)
            wall = time.perf_counter() - t
            rate = n / wall
            per = {name: m.seconds for name, m in r.methods.items()}
            rows.append({"n": n, "methods": label, "seconds": wall, "points_per_s": rate, "per_method": per,
                         "status": r.status, "chunk": r.chunk})
            print(f"  whole {label} n={n:.0e}: {wall:.2f} s, {rate / 1e6:.2f} Mpoints/s, {r.status}; " +
                  ", ".join(f"{k} {v:.3f} s" for k, v in per.items()), flush=True)
    return rows


def print_whole(rows, kernel_rows):
    """The whole comparison's table, with its ratio to the kernel (E2, float64, same N) where measured."""
    print(f"\n{'methods':16} {'N':>6} {'s':>8} {'Mpoints/s':>10} {'x kernel':>9}  per method (s)")
    for r in rows:
        if "skipped" in r:
            print(f"{r['methods']:16} {r['n']:>6.0e} skipped: {r['skipped']}")
            continue
        k = next((q["ms"] for q in kernel_rows if (q["expr"], q["n"], q["dtype"], q["method"]) ==
                  ("E2", r["n"], "float64", "gradcli")), None)
        ratio = f"{r['seconds'] / (k * 1e-3):8.0f}x" if k else f"{'-':>9}"
        per = ", ".join(f"{name} {s:.3f}" for name, s in r["per_method"].items())
        print(f"{r['methods']:16} {r['n']:>6.0e} {r['seconds']:8.2f} {r['points_per_s'] / 1e6:10.2f} {ratio}  {per}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e7, 1e8])
    ap.add_argument("--whole-sizes", nargs="+", type=float, default=[1e7, 1e8])
    ap.add_argument("--whole-budget", type=float, default=180.0, help="seconds for the whole comparison")
    ap.add_argument("--whole-only", action="store_true", help="the whole comparison, not the kernel")
    ap.add_argument("--no-whole", action="store_true", help="the kernel only")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run of the whole comparison")
    ap.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    ap.add_argument("--exprs", nargs="+", default=list(EXPRESSIONS))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    if cupy is None and not (args.device == "cpu" and args.whole_only):
        sys.exit(NO_CUPY)
    whole = [] if args.no_whole else whole_comparison(args.whole_sizes, args.device, args.whole_budget)
    rows = [] if args.whole_only else kernel_rows(args)
    if whole:
        print_whole(whole, rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "whole": whole}, fh, indent=1)


def kernel_rows(args):
    """The kernel against JAX and the CuPy tape, printed as a table -> its rows."""
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    print(f"device: {props['name'].decode() if isinstance(props['name'], bytes) else props['name']}, "
          f"CuPy {cupy.__version__}", flush=True)
    rows, notes = [], []
    for label in args.exprs:
        text, fn = EXPRESSIONS[label]
        program = compile_graph(parse(text))
        nv, nout = len(program.variables), len(program.outputs)
        jr, why = (None, "--no-jax") if args.no_jax else jax_runner(fn, nv)
        if jr is None and why not in notes:
            notes.append(why)
        for dtype in args.dtypes:
            for size in args.sizes:
                n = int(size)
                itemsize = np.dtype(dtype).itemsize
                nbytes = (len(cuda.used_inputs(program)) + nout) * n * itemsize
                rng = cupy.random.default_rng(0)
                inputs = {v: (rng.random(n, dtype=np.float64) * 2 - 1).astype(dtype) for v in program.variables}
                copy_gbs = copy_bandwidth(nbytes, args.repeat)
                got = cuda.execute(program, inputs, dtype)
                results = {}
                ms = time_cuda(lambda: cuda.execute(program, inputs, dtype), args.repeat)
                results["gradcli"] = (ms, "")
                want = tape(program, inputs, dtype)
                err = max(max_rel(got[j], want[j]) for j in range(nout))
                del want
                free()
                ms = time_cuda(lambda: tape(program, inputs, dtype), args.repeat)
                results["cupy-tape"] = (ms, f"max rel diff vs gradcli {err:.1e}")
                free()
                if jr is not None:
                    f, to_jax, sync = jr
                    try:
                        jin = [to_jax(inputs[v]) for v in program.variables]
                        val, grads = f(*jin)
                        jout = [val, *grads]
                        m = min(n, 1_000_000)  # compared on the first million points: no big copies
                        jerr = max(max_rel(cupy.asarray(np.asarray(jout[j][:m])), got[j][:m]) for j in range(nout))
                        del jout, val, grads
                        ms = time_host(lambda: f(*jin), sync, args.repeat)
                        results["jax"] = (ms, f"max rel diff vs gradcli {jerr:.1e}")
                        del jin
                    except Exception as exc:  # out of memory at 1e8 float64, say
                        results["jax"] = (float("nan"), f"failed: {str(exc).splitlines()[0][:80]}")
                del got, inputs
                free()
                for method, (ms, note) in results.items():
                    s = ms * 1e-3
                    rows.append({"expr": label, "n": n, "dtype": dtype, "method": method, "ms": ms,
                                 "points_per_s": n / s, "gb_per_s": nbytes / s / 1e9, "copy_gb_per_s": copy_gbs,
                                 "of_copy": nbytes / s / 1e9 / copy_gbs, "note": note})
                print(f"  {label} n={n:.0e} {dtype}: " + ", ".join(
                    f"{m} {r[0]:.3f} ms" for m, r in results.items()), flush=True)

    print()
    head = f"{'expr':4} {'N':>6} {'dtype':7} {'method':9} {'ms':>9} {'Gpoints/s':>10} {'GB/s':>8} " \
           f"{'copy GB/s':>9} {'of copy':>7} {'vs jax':>7}  note"
    print(head)
    print("-" * len(head))
    for r in rows:
        jax_ms = next((q["ms"] for q in rows if q["method"] == "jax" and
                       (q["expr"], q["n"], q["dtype"]) == (r["expr"], r["n"], r["dtype"])), float("nan"))
        print(f"{r['expr']:4} {r['n']:>6.0e} {r['dtype']:7} {r['method']:9} {r['ms']:9.3f} "
              f"{r['points_per_s'] / 1e9:10.2f} {r['gb_per_s']:8.0f} {r['copy_gb_per_s']:9.0f} "
              f"{r['of_copy']:7.0%} {jax_ms / r['ms']:6.2f}x  {r['note']}")
    print("\nbytes = (inputs read + outputs written) x N x itemsize; 'vs jax' = JAX time / this time "
          "(above 1: faster than JAX); copy = device-to-device copy of the same bytes.")
    for note in notes:
        print(f"note: {note}")
    return rows


if __name__ == "__main__":
    main()
