"""Executing a compiled Program on a device: the one entry point the rest of gradcli calls.

On the CPU there are two engines. ``numpy`` (always there, :mod:`.cpu`) runs the program in
cache-sized chunks on every core. ``numba`` (the optional ``fast`` extra, :mod:`.numba_backend`) runs
it as one compiled interpreter on every core. ``auto`` uses numba only where it pays:

* loading the kernel costs about a second (about 12 s the first time on a machine and dtype, when
  numba compiles it into its disk cache), so it is loaded only once this process has spent that long in
  numpy batches (rent until renting has cost as much as buying: never worse than twice the best);
* then, on the first large batch of each program and dtype, both engines run one slice of it
  (results kept) and the faster one, by a clear margin for numba, does the rest and later batches.
"""
from __future__ import annotations

import importlib.util
import threading
import time

import numpy as np

from . import cpu
from .compile import Program

#: Seconds of numpy batches after which loading the numba kernel is worth it.
LOAD_AFTER = 1.0
#: Points per engine when measuring (two slices of half this each); batches under 3x this are
#: never measured (numpy runs them).
SAMPLE = 1 << 18
#: numba must be this much faster to be chosen (a measurement on one slice is noisy).
MARGIN = 0.95

_LOCK = threading.Lock()
_NUMPY_SECONDS = 0.0
_CHOICE: dict = {}  # (id(program), dtype) -> (program, engine, numba plan or None)
_HAVE_NUMBA: bool | None = None


def execute(program: Program, inputs: dict, device: str = "cpu", dtype=np.float64, chunk: int | None = None,
            *, engine: str = "auto"):
    """All outputs of ``program`` for arrays of points -> array of shape (len(program.outputs), N).

    ``inputs`` maps every variable to a 1-D array of N points or a scalar. ``device`` is ``cpu`` or
    ``cuda`` (a CuPy array comes back); ``engine`` (CPU only) is ``auto``, ``numpy`` or ``numba``;
    ``chunk`` sets the numpy engine's chunk length.
    """
    if device == "cuda":
        from .cuda import execute as execute_cuda

        return execute_cuda(program, inputs, dtype)
    if device != "cpu":
        raise ValueError(f"unknown device {device!r}; choose cpu or cuda")
    if engine not in ("auto", "numpy", "numba"):
        raise ValueError(f"unknown engine {engine!r}; choose auto, numpy or numba")
    dtype = np.dtype(dtype)
    arrays, N = cpu.prepare_inputs(program, inputs)
    out = np.empty((len(program.outputs), N), dtype=dtype)
    if engine == "numba":
        nb = _numba()
        if nb is None:
            raise ValueError("engine 'numba' needs numba (pip install 'gradcli[fast]')")
        nb.run_range(nb.NumbaPlan(program, dtype), nb.stack(arrays, N, dtype), out, 0, N)
        return out
    if engine == "numpy" or not _numba_due():
        _numpy(program, arrays, out, 0, N, chunk)
        return out
    key = (id(program), dtype)
    choice = _CHOICE.get(key)
    if choice is not None and choice[0] is not program:
        choice = None
    done = 0
    nb = _numba()
    if choice is None:
        if N < 3 * SAMPLE:
            _numpy(program, arrays, out, 0, N, chunk)
            return out
        plan = nb.NumbaPlan(program, dtype)
        x = nb.stack(arrays, N, dtype)
        nb.run_range(plan, x, out, 0, nb.BLOCK)  # compiles or loads the kernel for this dtype
        done = nb.BLOCK
        # two interleaved slices per engine, the faster of each: one slice alone is at the mercy
        # of whatever else the machine does at that moment
        half = SAMPLE // 2
        t_np = t_nb = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            cpu.run_range(program, arrays, out, done, done + half, chunk=chunk)
            t1 = time.perf_counter()
            nb.run_range(plan, x, out, done + half, done + 2 * half)
            t2 = time.perf_counter()
            done += 2 * half
            t_np, t_nb = min(t_np, t1 - t0), min(t_nb, t2 - t1)
        winner = "numba" if t_nb < MARGIN * t_np else "numpy"
        choice = (program, winner, plan if winner == "numba" else None)
        with _LOCK:
            if len(_CHOICE) > 256:
                _CHOICE.clear()
            _CHOICE[key] = choice
        if winner == "numba":
            nb.run_range(plan, x, out, done, N)
            return out
    elif choice[1] == "numba":
        nb.run_range(choice[2], nb.stack(arrays, N, dtype), out, 0, N)
        return out
    cpu.run_range(program, arrays, out, done, N, chunk=chunk)
    return out


def chosen_engine(program: Program, dtype=np.float64) -> str | None:
    """The engine ``auto`` settled on for this program and dtype, or None before it measured."""
    choice = _CHOICE.get((id(program), np.dtype(dtype)))
    return choice[1] if choice is not None and choice[0] is program else None


def _numpy(program, arrays, out, start, stop, chunk):
    global _NUMPY_SECONDS
    t0 = time.perf_counter()
    cpu.run_range(program, arrays, out, start, stop, chunk=chunk)
    with _LOCK:
        _NUMPY_SECONDS += time.perf_counter() - t0


def numba_installed() -> bool:
    global _HAVE_NUMBA
    if _HAVE_NUMBA is None:
        _HAVE_NUMBA = importlib.util.find_spec("numba") is not None
    return _HAVE_NUMBA


def _numba_due() -> bool:
    if not numba_installed():
        return False
    return _NUMPY_SECONDS >= LOAD_AFTER or _numba_loaded()


def _numba_loaded() -> bool:
    import sys

    mod = sys.modules.get(__package__ + ".numba_backend")
    return mod is not None and mod.compiled()


def _numba():
    """The numba engine module, imported on first use (numba itself takes ~0.5 s to import)."""
    if not numba_installed():
        return None
    from . import numba_backend

    return numba_backend if numba_backend.available() else None
