"""The numba engine's vectorised transcendentals against a numba loop over libm, per element.

    python benchmarks/vecmath.py [--block 512] [--calls 20000]

Both run inside one numba call over one block (the engine's unit of work), on one core, so the
figure is the loop's own cost: best of 5 rounds of ``--calls`` calls. Needs the ``fast`` extra.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numba
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from gradcli.engines import vecmath as vm  # noqa: E402

NAMES = ["exp", "log", "tanh", "cosh", "sigmoid", "sin + cos"]


@numba.njit(error_model="numpy")
def libm(x, o, o2, n, calls, which):
    for _ in range(calls):
        if which == 0:
            for i in range(n):
                o[i] = math.exp(x[i])
        elif which == 1:
            for i in range(n):
                o[i] = math.log(x[i])
        elif which == 2:
            for i in range(n):
                o[i] = math.tanh(x[i])
        elif which == 3:
            for i in range(n):
                o[i] = math.cosh(x[i])
        elif which == 4:
            for i in range(n):
                o[i] = 1.0 / (1.0 + math.exp(-x[i]))
        else:
            for i in range(n):
                o[i] = math.sin(x[i])
                o2[i] = math.cos(x[i])


@numba.njit(error_model="numpy")
def vectorised(x, o, o2, n, w, wi, calls, which):
    for _ in range(calls):
        if which == 0:
            vm.exp(x, o, n, w, wi)
        elif which == 1:
            vm.log(x, o, n, w, wi)
        elif which == 2:
            vm.tanh(x, o, n, w, wi)
        elif which == 3:
            vm.cosh(x, o, n, w, wi)
        elif which == 4:
            vm.sigmoid(x, o, n, w, wi)
        else:
            vm.sincos(x, o, o2, n, w)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args(argv)
    n = args.block
    x = np.random.default_rng(0).uniform(0.1, 2.0, n)
    o, o2 = np.empty(n), np.empty(n)
    w = np.empty((3, n))
    wi = w.view(np.int64)
    print(f"# ns per element, one core, {n}-element blocks, best of 5 x {args.calls} calls")
    print(f"{'function':10} {'libm loop':>10} {'vecmath':>10} {'ratio':>7}")
    for which, name in enumerate(NAMES):
        libm(x, o, o2, n, 1, which)
        vectorised(x, o, o2, n, w, wi, 1, which)
        t_l = t_v = math.inf
        for _ in range(5):
            t0 = time.perf_counter()
            libm(x, o, o2, n, args.calls, which)
            t1 = time.perf_counter()
            vectorised(x, o, o2, n, w, wi, args.calls, which)
            t2 = time.perf_counter()
            t_l, t_v = min(t_l, t1 - t0), min(t_v, t2 - t1)
        per = 1e9 / args.calls / n
        print(f"{name:10} {t_l * per:10.2f} {t_v * per:10.2f} {t_l / t_v:7.1f}")


if __name__ == "__main__":
    main()
