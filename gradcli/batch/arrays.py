"""Where a batch's arrays live: the device's namespace (:func:`on_device`), the one copy of a chunk's
statistics back to the host (:class:`HostCopy`), and the chunk size its memory allows (:func:`batch_chunk`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.core.constants import CENTRAL_CANDIDATES, RIDDERS_ROWS
from gradcli.engines.backend import execute
from gradcli.engines.device import free_bytes
from gradcli.methods.differences import OFFSETS


@dataclass(frozen=True)
class Device:
    """Where a chunk's arrays live: ``xp``, their namespace, and ``run(program, inputs, dtype, engine)``,
    the compiled program over them -> (rows, N) on ``xp``."""

    xp: object
    run: object


def on_device(name: str) -> Device:
    """numpy on the CPU, CuPy on ``cuda``: the one place a chunk meets its device. Tests put a namespace
    here that refuses every implicit copy to the host (tests/batch/strict_xp.py), so that the CPU runs
    the pipeline as CuPy would."""
    if name == "cuda":
        import cupy as xp
    else:
        xp = np
    return Device(xp, lambda program, inputs, dtype, engine: execute(program, inputs, device=name, dtype=dtype,
                                                                     engine=engine))


def to_host(a) -> np.ndarray:
    """A device array copied to the host (CuPy's ``get``); a host array as it is."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


class HostCopy:
    """Device arrays (or numbers) to bring to the host together: :meth:`fetch` copies them in one
    transfer, as float64 (exact for every count, index and float32 or float64 value), and gives each back
    in its own dtype and shape."""

    def __init__(self, xp):
        self.xp = xp
        self.parts: list = []

    def add(self, key: str, a) -> None:
        self.parts.append((key, self.xp.asarray(a)))

    def fetch(self) -> dict:
        xp = self.xp
        flat = to_host(xp.concatenate([a.reshape(-1).astype(xp.float64) for _, a in self.parts]))
        out, at = {}, 0
        for key, a in self.parts:
            out[key] = flat[at:at + a.size].reshape(a.shape).astype(a.dtype)
            at += a.size
        return out


# --- the chunk size -------------------------------------------------------------------------------------

#: Points per chunk on the CPU: the methods' arrays of a chunk stay within a few hundred MB, and a
#: chunk computes for 0.1 to 0.5 s, long beside its Python overhead and a Dask task's.
DEFAULT_CHUNK = 65536
#: On a GPU, the share of its free memory the arrays of one chunk may take: a step's arrays live beside
#: the next one's, and CuPy's pool keeps the blocks it freed in pieces of its own sizes.
DEVICE_MEMORY_SHARE = 0.25
#: ... in chunks of this many points at least (what the CPU takes) and at most (beyond it the Python
#: of a chunk is already under a percent of its time).
MIN_DEVICE_CHUNK, MAX_DEVICE_CHUNK = DEFAULT_CHUNK, 1 << 24
#: Arrays per Jacobian entry a chunk keeps per method (estimate, reference, spread, error, tolerance...).
ENTRY_ARRAYS = 8


def chunk_points(free: int, point_bytes: int) -> int:
    """The chunk on a GPU with ``free`` bytes free for a batch that takes ``point_bytes`` per point: the
    largest power of two whose arrays fill at most :data:`DEVICE_MEMORY_SHARE` of the free memory,
    within :data:`MIN_DEVICE_CHUNK` and :data:`MAX_DEVICE_CHUNK`."""
    fit = int(free * DEVICE_MEMORY_SHARE) // max(int(point_bytes), 1)
    return max(MIN_DEVICE_CHUNK, min(MAX_DEVICE_CHUNK, 1 << max(fit.bit_length() - 1, 0)))


def stencil_rows(name: str, n_vars: int) -> int:
    """The values per graph node and point that method ``name`` holds at once: the rows of its stencil
    (one variable moved at a time, but complex step's three steps of every variable at once, in complex)."""
    return {"forward": n_vars + 1, "reverse": 1, "central": len(OFFSETS) * CENTRAL_CANDIDATES,
            "richardson": 2 * RIDDERS_ROWS, "complex_step": 2 * 3 * n_vars}[name]


def point_bytes(plan) -> int:
    """The bytes a point of ``plan`` (a :class:`~gradcli.batch.chunk.Plan`) takes in a chunk at most: the
    graph's nodes times the widest stencil's rows, sympy's graph in float64 (its values, partials and adjoints at once for the rounding bound), and
    the per-entry arrays of every method."""
    graph, nv = plan.graph, len(plan.graph.variables)
    item = np.dtype(plan.options.dtype).itemsize
    running = {"forward", *plan.judged, *(("central", "richardson") if plan.sym_graph is None else ())}
    rows = max(stencil_rows(name, nv) for name in running)
    reference = 3 * len(plan.sym_graph.nodes) * 8 if plan.sym_graph is not None else 0
    entries = ENTRY_ARRAYS * len(graph.outputs) * max(nv, 1) * (len(running) + 1) * item
    return len(graph.nodes) * rows * item + reference + entries


def batch_chunk(plan) -> int:
    """Points per chunk when ``--chunk`` does not say: :data:`DEFAULT_CHUNK` on the CPU, on a GPU
    :func:`chunk_points` of its free memory now and the plan's :func:`point_bytes`."""
    free = free_bytes(plan.options.device)
    return DEFAULT_CHUNK if free is None else chunk_points(free, point_bytes(plan))
