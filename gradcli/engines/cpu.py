"""The CPU executor: a compiled Program run on numpy in cache-sized chunks, on every core.

Why this shape: the programs are compute-bound (transcendentals), so what matters is that every
ufunc runs on data already in cache and that both cores work. Each thread owns one register file of
``chunk`` elements per register, allocated once per call; every instruction is one ufunc call writing
into it (``out=``), so no full-size temporary is ever made. numpy releases the GIL inside ufunc
loops, so a ThreadPoolExecutor over the chunks scales with the cores.

The Python cost per instruction is one ``itemgetter`` over a list of *slots* (register buffers,
constants, the chunk's input and output views) and the ufunc call: arguments are bound once per
thread, and only the input and output slots change from chunk to chunk. Inputs are read in place when
they already have the right dtype; outputs are written straight into the preallocated result from the
instruction that computes them last, so the common case copies nothing.
"""
from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter

import numpy as np

from gradcli.core.primitives import PRIMITIVES
from gradcli.engines.program import Program

#: Chunk length: the largest power of two (up to MAX_CHUNK) whose register file fits CACHE_BYTES.
#: Longer chunks amortise the ~1 us of Python per ufunc call; past the cache they lose more (measured
#: on 2-core EPYC: E1-E3 fastest at 16K-32K, E4 with 34 registers at 4K-8K).
CACHE_BYTES = 2 << 20
MAX_CHUNK = 32768
MIN_CHUNK = 1024


def default_chunk(n_registers: int, itemsize: int) -> int:
    fit = CACHE_BYTES // max(1, n_registers * itemsize)
    return max(MIN_CHUNK, min(MAX_CHUNK, 1 << max(0, fit.bit_length() - 1)))

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def n_threads() -> int:
    return max(1, os.cpu_count() or 1)


def pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=n_threads(), thread_name_prefix="gradcli-batch")
        return _POOL


def _call_value(prim):
    """A ufunc-like ``f(*args, out)`` for a primitive without a ufunc (sigmoid, erf...)."""
    def f(*args):
        *xs, out = args
        np.copyto(out, prim.value(np, *xs), casting="unsafe")
    return f


class Plan:
    """A Program laid out as slot indices, once per (program, dtype).

    Slots: ``[0, R)`` register buffers, ``[R, R+V)`` inputs, ``[R+V, R+V+M)`` output rows, then constants.
    """

    def __init__(self, program: Program, dtype):
        self.program = program
        self.dtype = np.dtype(dtype)
        R, V, M = program.n_registers, len(program.variables), len(program.outputs)
        self.R, self.V, self.M = R, V, M
        consts: dict = {}

        def const_slot(c):
            if c not in consts:
                consts[c] = R + V + M + len(consts)
            return consts[c]

        # the output a register ends in, written straight into the result from its last writer on
        last_write = {}
        for j, ins in enumerate(program.instructions):
            last_write[ins.out] = j
        direct: dict = {}  # register -> output index
        copies = []  # (output index, source slot): repeated registers, input registers, constants
        const_outputs = []
        for k, o in enumerate(program.outputs):
            if not isinstance(o, int):
                const_outputs.append((k, float(o)))
            elif o < V:
                copies.append((k, R + o))
            elif o in direct:
                copies.append((k, R + V + direct[o]))
            else:
                direct[o] = k
        self.const_outputs = const_outputs
        self.copies = copies

        where = {r: R + r for r in range(V)}  # register -> current slot
        steps = []
        for j, ins in enumerate(program.instructions):
            prim = PRIMITIVES[ins.op]
            args = [where.get(a, a) if isinstance(a, int) else const_slot(float(a)) for a in ins.args]
            if prim.ufunc is not None:
                f = getattr(np, prim.ufunc[0])
                if f in (np.maximum, np.minimum):  # numpy deprecates their positional out
                    f = (lambda u: lambda a, b, o: u(a, b, out=o))(f)
                args += [const_slot(float(c)) for c in prim.ufunc[1:]]
            else:
                f = _call_value(prim)
            if ins.out in direct and last_write[ins.out] == j:
                where[ins.out] = R + V + direct[ins.out]
            else:
                where[ins.out] = ins.out
            out = where[ins.out]
            steps.append((f, tuple(args) + (out,)))
        self.steps = steps
        self.n_slots = R + V + M + len(consts)
        self.constants = [(s, c) for c, s in consts.items()]

    def bind(self, length):
        """Per-thread slots and calls for chunks of ``length`` elements."""
        slots = [None] * self.n_slots
        buf = np.empty((self.R, length), dtype=self.dtype)
        for r in range(self.R):
            slots[r] = buf[r]
        for s, c in self.constants:
            slots[s] = self.dtype.type(c)
        calls = [(f, itemgetter(*idx)) for f, idx in self.steps]
        return slots, calls


def prepare_inputs(program: Program, inputs: dict) -> tuple[list, int]:
    """The inputs in variable order as 1-D arrays (size-1 ones broadcast), and the number of points."""
    arrays = []
    for v in program.variables:
        a = np.asarray(inputs[v])
        if a.ndim != 1:
            a = a.reshape(-1)
        arrays.append(a)
    sizes = {a.shape[0] for a in arrays if a.shape[0] != 1}
    if len(sizes) > 1:
        raise ValueError(f"inputs of different lengths {sorted(sizes)} do not broadcast")
    return arrays, (sizes.pop() if sizes else 1)


def execute(program: Program, inputs: dict, dtype=np.float64, chunk: int | None = None,
            threads: int | None = None) -> np.ndarray:
    """All outputs of ``program`` at N points -> array of shape (len(program.outputs), N).

    ``inputs`` maps each variable to a 1-D array of N points or a scalar (broadcast). The result has
    ``dtype``; constants and inputs are cast to it. Memory: ``chunk * n_registers * threads`` elements
    of buffers besides the result.
    """
    dtype = np.dtype(dtype)
    arrays, N = prepare_inputs(program, inputs)
    out = np.empty((len(program.outputs), N), dtype=dtype)
    run_range(program, arrays, out, 0, N, chunk=chunk, threads=threads)
    return out


def run_range(program: Program, arrays: list, out: np.ndarray, start: int, stop: int,
              chunk: int | None = None, threads: int | None = None) -> None:
    """Points ``start:stop`` of the program into ``out[:, start:stop]`` (``out`` sets the dtype)."""
    dtype = out.dtype
    plan = _plan(program, dtype)
    chunk = int(chunk or default_chunk(plan.R, dtype.itemsize))
    if chunk < 1:
        raise ValueError("chunk must be positive")
    # inputs: read in place (right dtype, contiguous), a 0-d scalar, or copied per chunk
    kinds = []
    for a in arrays:
        if a.shape[0] == 1:
            kinds.append(("scalar", np.asarray(a.reshape(()), dtype=dtype)))
        elif a.dtype == dtype and a.strides[0] == a.itemsize:
            kinds.append(("view", a))
        else:
            kinds.append(("copy", a))
    for k, c in plan.const_outputs:
        out[k, start:stop].fill(c)
    N = stop - start
    if N <= 0:
        return
    n_chunks = -(-N // chunk)
    workers = min(threads or n_threads(), n_chunks)
    counter = itertools.count()
    R, base = plan.R, plan.R + plan.V

    def work():
        with np.errstate(all="ignore"):
            bound = {}
            while True:
                i = next(counter)
                if i >= n_chunks:
                    return
                s = start + i * chunk
                e = min(stop, s + chunk)
                L = e - s
                if L not in bound:
                    bound[L] = plan.bind(L)
                    slots = bound[L][0]
                    for v, (kind, a) in enumerate(kinds):
                        if kind == "scalar":
                            slots[R + v] = a
                        elif kind == "copy":
                            slots[R + v] = np.empty(L, dtype=dtype)
                slots, calls = bound[L]
                for v, (kind, a) in enumerate(kinds):
                    if kind == "view":
                        slots[R + v] = a[s:e]
                    elif kind == "copy":
                        np.copyto(slots[R + v], a[s:e], casting="unsafe")
                for k in range(plan.M):
                    slots[base + k] = out[k, s:e]
                for f, g in calls:
                    f(*g(slots))
                for k, src in plan.copies:
                    np.copyto(slots[base + k], slots[src], casting="unsafe")

    if workers == 1:
        work()
    else:
        futures = [pool().submit(work) for _ in range(workers)]
        for fut in futures:
            fut.result()


_PLANS: dict = {}


def _plan(program: Program, dtype) -> Plan:
    key = (id(program), dtype)
    hit = _PLANS.get(key)
    if hit is None or hit.program is not program:
        if len(_PLANS) > 64:
            _PLANS.clear()
        hit = _PLANS[key] = Plan(program, dtype)
    return hit
