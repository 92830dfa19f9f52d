"""Batch value + full gradient: gradcli against every peer installed, in one run.

    python benchmarks/batch.py [--sizes 1e6,1e7] [--repeat 5]

For E1-E4 (float64, the same uniform points in [-1, 1]) it prints points per second for gradcli's
default path (``auto``), its numpy and numba engines, and each installed peer: sympy lambdify with
cse, numexpr, JAX jit(vmap(value_and_grad)), PyTorch autograd, and a hand-fused numba kernel (a
reference: one fused parallel loop per expression, derived by hand, calling libm). Ratio = peer time
/ gradcli default time (above 1: gradcli is faster). Every peer's value and gradient are checked
against gradcli's before it is timed. Timing: best of k after one warm-up call (which also pays JIT compilation). Peers are never project
dependencies: install them in the environment that runs this (see benchmarks/RESULTS.md).
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from gradcli.engines import backend  # noqa: E402
from gradcli.engines.program import compile_graph  # noqa: E402
from gradcli.core.parser import parse  # noqa: E402

E4_TEXT = " + ".join(f"sin({k}*x + y)*exp(-{k}*z)" for k in range(1, 11))
EXPRESSIONS = {
    "E1": "x*y + sin(x)",
    "E2": "exp(-(x**2 + y**2)/2) * cos(3*x*y)",
    "E3": "log(1 + exp(x*y)) / sqrt(1 + x**2 + y**2) + tanh(x - y)**2",
    "E4": E4_TEXT,
}


# the same functions for the array libraries (m: a namespace with sin, cos, exp, log, sqrt, tanh)
def f_e1(m, x, y):
    return x * y + m.sin(x)


def f_e2(m, x, y):
    return m.exp(-(x**2 + y**2) / 2) * m.cos(3 * x * y)


def f_e3(m, x, y):
    return m.log(1 + m.exp(x * y)) / m.sqrt(1 + x**2 + y**2) + m.tanh(x - y) ** 2


def f_e4(m, x, y, z):
    total = m.sin(1 * x + y) * m.exp(-1 * z)
    for k in range(2, 11):
        total = total + m.sin(k * x + y) * m.exp(-k * z)
    return total


FUNCS = {"E1": f_e1, "E2": f_e2, "E3": f_e3, "E4": f_e4}


# ---- peers: each builder returns (name, run(points) -> list of arrays [value, d/dv...]) or raises ----

def peer_sympy(key, variables):
    import sympy

    syms = sympy.symbols(variables)
    f = sympy.sympify(EXPRESSIONS[key], locals=dict(zip(variables, syms)))
    exprs = [f] + [sympy.diff(f, s) for s in syms]
    fn = sympy.lambdify(syms, exprs, modules="numpy", cse=True)
    return lambda pts: fn(*pts)


def peer_numexpr(key, variables):
    import numexpr
    import sympy

    numexpr.set_num_threads(os.cpu_count() or 1)
    syms = sympy.symbols(variables)
    f = sympy.sympify(EXPRESSIONS[key], locals=dict(zip(variables, syms)))
    texts = [str(e) for e in [f] + [sympy.diff(f, s) for s in syms]]

    def run(pts):
        env = dict(zip(variables, pts))
        out = np.empty((len(texts), pts[0].shape[0]))
        for i, t in enumerate(texts):
            numexpr.evaluate(t, local_dict=env, out=out[i], casting="unsafe")
        return list(out)
    return run


def peer_jax(key, variables):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    f = FUNCS[key]
    g = jax.jit(jax.vmap(jax.value_and_grad(lambda *a: f(jnp, *a), argnums=tuple(range(len(variables))))))

    def run(pts):
        v, grads = g(*(jnp.asarray(p) for p in pts))
        v.block_until_ready()
        return [np.asarray(v)] + [np.asarray(d) for d in grads]
    return run


def peer_torch(key, variables):
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    f = FUNCS[key]

    def run(pts):
        xs = [torch.from_numpy(p).requires_grad_(True) for p in pts]
        v = f(torch, *xs)
        grads = torch.autograd.grad(v, xs, grad_outputs=torch.ones_like(v))
        return [v.detach().numpy()] + [d.numpy() for d in grads]
    return run


PEERS = [("sympy lambdify+cse", peer_sympy), ("numexpr", peer_numexpr), ("JAX jit(vmap)", peer_jax),
         ("PyTorch autograd", peer_torch), ("numba hand-fused (ref)", None)]


def hand_numba():
    """Hand-written fused kernels (value and gradient derived by hand): a reference, not a peer library."""
    import numba
    from numba import prange

    @numba.njit(parallel=True)
    def e1(x, y, out):
        for i in prange(x.size):
            a, b = x[i], y[i]
            out[0, i] = a * b + math.sin(a)
            out[1, i] = b + math.cos(a)
            out[2, i] = a

    @numba.njit(parallel=True)
    def e2(x, y, out):
        for i in prange(x.size):
            a, b = x[i], y[i]
            g = math.exp(-(a * a + b * b) / 2)
            c, s = math.cos(3 * a * b), math.sin(3 * a * b)
            out[0, i] = g * c
            out[1, i] = -a * g * c - 3 * b * g * s
            out[2, i] = -b * g * c - 3 * a * g * s

    @numba.njit(parallel=True)
    def e3(x, y, out):
        for i in prange(x.size):
            a, b = x[i], y[i]
            ex = math.exp(a * b)
            lg = math.log(1 + ex)
            r = math.sqrt(1 + a * a + b * b)
            t = math.tanh(a - b)
            ch = math.cosh(a - b)
            sg = ex / (1 + ex)
            dt = 2 * t / (ch * ch)
            r3 = r * r * r
            out[0, i] = lg / r + t * t
            out[1, i] = sg * b / r - lg * a / r3 + dt
            out[2, i] = sg * a / r - lg * b / r3 - dt

    @numba.njit(parallel=True)
    def e4(x, y, z, out):
        for i in prange(x.size):
            a, b, c = x[i], y[i], z[i]
            v = gx = gy = gz = 0.0
            for k in range(1, 11):
                s, co, e = math.sin(k * a + b), math.cos(k * a + b), math.exp(-k * c)
                v += s * e
                gx += k * co * e
                gy += co * e
                gz -= k * s * e
            out[0, i], out[1, i], out[2, i], out[3, i] = v, gx, gy, gz

    kernels = {"E1": e1, "E2": e2, "E3": e3, "E4": e4}

    def builder(key, variables):
        k = kernels[key]

        def run(pts):
            out = np.empty((len(pts) + 1, pts[0].shape[0]))
            k(*pts, out)
            return list(out)
        return run
    return builder


def best_of(fn, repeat):
    fn()  # warm-up: JIT compilation, caches, thread pools
    best = math.inf
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def agrees(got, ref) -> float:
    """Largest error relative to each row's scale (rows: value, then each partial)."""
    worst = 0.0
    for g, r in zip(got, ref):
        g = np.broadcast_to(np.asarray(g, dtype=np.float64), r.shape)
        scale = max(np.max(np.abs(r)), 1e-300)
        worst = max(worst, float(np.max(np.abs(g - r)) / scale))
    return worst


def machine() -> str:
    model = platform.processor() or "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except Exception:
        pass
    return f"{os.cpu_count()} cores, {model}, numpy {np.__version__}, Python {platform.python_version()}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6,1e7")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated subset of E1,E2,E3,E4")
    args = ap.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    keys = [k for k in EXPRESSIONS if not args.only or k in args.only.split(",")]
    print(f"# gradcli batch benchmark: float64, value + full gradient, points/s (M = 1e6)")
    print(f"# machine: {machine()}")
    print(f"# OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')!s} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '')!s}")
    have_numba = backend.numba_installed()
    peers = []
    for name, build in PEERS:
        if build is None:
            if have_numba:
                peers.append((name, hand_numba()))
            else:
                print(f"# skipped {name}: numba is not installed")
            continue
        try:
            build("E1", ("x", "y"))
            peers.append((name, build))
        except ImportError as exc:
            print(f"# skipped {name}: not installed ({exc.name})")
    if not have_numba:
        print("# gradcli numba engine: numba is not installed (pip install 'gradcli[fast]')")
    rng = np.random.default_rng(0)
    header = f"{'expr':4} {'N':>5}  {'method':24} {'Mpts/s':>8} {'gradcli/this':>12}  note"
    summary = []
    for N in sizes:
        base = {v: rng.uniform(-1, 1, N) for v in "xyz"}
        print()
        print(header)
        for key in keys:
            program = compile_graph(parse(EXPRESSIONS[key]))
            variables = program.variables
            pts = [base[v] for v in variables]
            inputs = dict(zip(variables, pts))
            repeat = args.repeat if N <= 10**6 else max(2, args.repeat // 2)
            rows = []
            if have_numba:
                rows.append(("gradcli numba engine", lambda: backend.execute(program, inputs, engine="numba"), ""))
            rows.append(("gradcli numpy engine", lambda: backend.execute(program, inputs, engine="numpy"), ""))
            # the default path last among gradcli's: in this process the numba kernel is then loaded
            # and auto measures both engines on its first batch, as it would in a long-running one
            rows.insert(0, ("gradcli default (auto)", lambda: backend.execute(program, inputs), "auto"))
            ref = backend.execute(program, inputs, engine="numpy")
            times = {}
            for name, fn, note in rows[1:] + rows[:1]:
                times[name] = (best_of(fn, repeat), note)
            chosen = backend.chosen_engine(program, n_points=N)
            times["gradcli default (auto)"] = (times["gradcli default (auto)"][0], f"chose {chosen or 'numpy'}")
            for name, build in peers:
                try:
                    fn = build(key, variables)
                    got = fn(pts)
                    err = agrees(got, ref)
                    if err > 1e-9:
                        times[name] = (math.nan, f"DISAGREES with gradcli (rel. error {err:.1e}): not timed")
                        continue
                    del got
                    times[name] = (best_of(lambda: fn(pts), repeat), f"max rel. diff {err:.0e}")
                except MemoryError:
                    times[name] = (math.nan, "out of memory")
                gc.collect()
            mine = times["gradcli default (auto)"][0]
            for name, (t, note) in times.items():
                rate = N / t / 1e6
                ratio = "" if name == "gradcli default (auto)" else f"{t / mine:12.2f}"
                print(f"{key:4} {N:5.0e}  {name:24} {rate:8.1f} {ratio:>12}  {note}", flush=True)
            finite = {k: v[0] for k, v in times.items() if not math.isnan(v[0])}
            fastest = min(finite, key=finite.get)
            jax_t = times.get("JAX jit(vmap)", (math.nan,))[0]
            summary.append((key, N, jax_t / mine, finite[fastest] / mine, fastest))
    print()
    print("# targets: default >= 1.5x JAX, and >= 1/1.2 = 0.83x the fastest method")
    for key, N, vs_jax, vs_best, fastest in summary:
        ok = (math.isnan(vs_jax) or vs_jax >= 1.5) and vs_best >= 1 / 1.2
        print(f"# {key} {N:.0e}: {vs_jax:.2f}x JAX, {vs_best:.2f}x the fastest ({fastest}): "
              f"{'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
