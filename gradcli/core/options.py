"""The option values every command and the Python API share (tolerances, seeds), each rule once: a
:class:`BadInput` of one line that names the option as its caller spells it (``rtol (--rtol)``,
``--seed``, ``seed``)."""
from __future__ import annotations

import math

import numpy as np

from gradcli.core.errors import BadInput, brief, real_number


def tolerance(value, name: str) -> float | None:
    """An rtol/atol (or a step): a finite, non-negative real number; None stays None."""
    if value is None:
        return None
    v = real_number(value, name)
    if not (math.isfinite(v) and v >= 0):
        raise BadInput(f"{name} must be a finite, non-negative number, got {brief(value)}")
    return v


def seed(value, name: str, optional: bool = True) -> int | None:
    """A random seed: a non-negative integer (numpy's generators take no negative seed); None stays None
    where the seed is ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise BadInput(f"{name} must be a non-negative integer, got {brief(value)}")
    return int(value)
