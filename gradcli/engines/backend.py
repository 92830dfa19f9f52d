"""Executing a compiled Program: the one entry point the rest of gradcli calls, and the rule that
picks its engine.

Three engines: ``numpy`` (always there, :mod:`.cpu`) runs the program in cache-sized chunks on every
core; ``numba`` (the optional ``fast`` extra, :mod:`.numba_engine`) runs it as one compiled
interpreter on every core; ``cuda`` (:mod:`.cuda`, CuPy) runs it as one fused kernel on a GPU.

The engine is chosen by a rule of the input alone, never by what the process did before, so that the
same input gives the same bits in one process and the next (the engines agree to about an ulp, not to
the bit). :func:`choose_engine` holds the rule: the device's engine on a GPU; on the CPU numba when it
is installed and the batch is large, ``points × instructions >= NUMBA_WORK`` (about a second of the
numpy engine: what loading numba's kernel costs a process, about 12 s the first time on a machine),
else numpy.
"""
from __future__ import annotations

import importlib.util

import numpy as np

from gradcli.engines import cpu, cuda
from gradcli.engines.program import Program

ENGINES = ("numpy", "numba", "cuda")
#: points × program instructions from which ``auto`` runs the numba engine (where it is installed)
NUMBA_WORK = 1 << 29

_HAVE_NUMBA: bool | None = None


def numba_installed() -> bool:
    global _HAVE_NUMBA
    if _HAVE_NUMBA is None:
        _HAVE_NUMBA = importlib.util.find_spec("numba") is not None
    return _HAVE_NUMBA


def choose_engine(n_points: int, program_size: int, device: str = "cpu", engine: str = "auto") -> str:
    """The engine for ``n_points`` points of a program of ``program_size`` instructions on ``device``:
    ``engine`` itself unless it is ``auto``, else the documented rule (module docstring)."""
    if engine not in ("auto", *ENGINES):
        raise ValueError(f"unknown engine {engine!r}; choose {', '.join(ENGINES)} (or auto)")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}; choose cpu or cuda")
    if engine == "auto":
        if device == "cuda":
            return "cuda"
        big = int(n_points) * max(int(program_size), 1) >= NUMBA_WORK
        return "numba" if big and _numba() is not None else "numpy"
    if (engine == "cuda") != (device == "cuda"):
        raise ValueError(f"engine {engine!r} does not run on device {device!r}: "
                         + ("cuda runs on the GPU" if engine == "cuda" else f"{engine} runs on the CPU"))
    return engine


def execute(program: Program, inputs: dict, device: str = "cpu", dtype=np.float64, chunk: int | None = None,
            *, engine: str = "auto"):
    """All outputs of ``program`` for arrays of points -> array of shape (len(program.outputs), N).

    ``inputs`` maps every variable to a 1-D array of N points or a scalar. ``device`` is ``cpu`` or
    ``cuda`` (a CuPy array comes back); ``engine`` is ``auto`` (:func:`choose_engine` for these N
    points), ``numpy``, ``numba`` or ``cuda``; ``chunk`` sets the numpy engine's chunk length.
    """
    if device == "cuda" and engine in ("auto", "cuda"):
        return cuda.execute(program, inputs, dtype)
    dtype = np.dtype(dtype)
    arrays, N = cpu.prepare_inputs(program, inputs) if device == "cpu" else ({}, 0)
    engine = choose_engine(N, len(program), device, engine)
    out = np.empty((len(program.outputs), N), dtype=dtype)
    if engine == "numba":
        nb = _numba()
        if nb is None:
            raise ValueError("engine 'numba' needs numba (pip install 'gradcli[fast]')")
        nb.run_range(nb.NumbaPlan(program, dtype), nb.stack(arrays, N, dtype), out, 0, N)
        return out
    cpu.run_range(program, arrays, out, 0, N, chunk=chunk)
    return out


def chosen_engine(program: Program, dtype=np.float64, n_points: int | None = None) -> str | None:
    """The engine ``auto`` runs for ``n_points`` points of ``program`` on the CPU (None without a count)."""
    return None if n_points is None else choose_engine(n_points, len(program))


def _numba():
    """The numba engine module, imported on first use: it imports numba, which takes ~0.5 s."""
    if not numba_installed():
        return None
    from gradcli.engines import numba_engine

    return numba_engine if numba_engine.available() else None
