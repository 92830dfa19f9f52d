"""Numerical code that computes with inf and nan on purpose, quietly."""
from __future__ import annotations

import functools

import numpy as np


def quiet(fn):
    """``fn`` under a fresh ``np.errstate(all="ignore")`` per call. Every function here computes with
    inf and nan as results (a step past a pole, an overflowing f), which its callers report through
    statuses: numpy's RuntimeWarnings about them would be noise on a user's stderr, whoever calls."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    return wrapper
