"""Executing a compiled Program on a device: the one entry point the rest of gradcli calls.

(Placeholder until the chunked, threaded CPU executor lands: whole arrays through compile.run.)
"""
from __future__ import annotations

import numpy as np

from .compile import Program, run


def execute(program: Program, inputs: dict, device: str = "cpu", dtype=np.float64, chunk: int | None = None):
    """All outputs of ``program`` for arrays of points -> array of shape (len(program.outputs), N)."""
    arrays = {k: np.asarray(v, dtype=dtype) for k, v in inputs.items()}
    return np.stack(run(program, arrays)).astype(dtype, copy=False)
