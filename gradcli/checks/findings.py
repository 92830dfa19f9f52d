"""How a comparison words what it found: the worst entries, the wrong counts by input, what float64
could do for an undecided check. Read by gradcli.checks.compare, .fast and .second_order."""
from __future__ import annotations

import numpy as np

from gradcli.checks.context import MAX_MISMATCHES, badness

#: f's measured noise above this many ulp of |f| says it computes in less than float64 inside.
NOISY_ULPS = 1e3


def worst(diff, tol, bad):
    """(row, column) of the entry furthest past its tolerance among ``bad``."""
    j, k = np.unravel_index(int(np.argmax(badness(diff, tol, bad))), bad.shape)
    return int(j), int(k)


def worst_entries(score: np.ndarray, which: np.ndarray, limit: int = MAX_MISMATCHES) -> np.ndarray:
    """Flat indices of the worst entries (``score`` > -1 fails, larger is worse), worst first, at most
    ``limit``, with the worst of every input (``which``: its input per entry) among them: a few large
    errors in one input must not hide that another input is wrong too."""
    score, which = score.ravel(), np.broadcast_to(which, score.shape).ravel()
    order = np.argsort(-score, kind="stable")
    order = order[score[order] > -1]
    picked = list(order[:limit])
    missing = [order[which[order] == k][0] for k in dict.fromkeys(which[order]) if k not in set(which[picked])]
    if missing:
        picked = picked[:max(limit - len(missing), 0)] + missing
        picked.sort(key=lambda i: -score[i])
    return np.array(picked, dtype=np.int64)


def count_text(ctx, bad: np.ndarray, live: np.ndarray, which: np.ndarray) -> str:
    """``7 of 120 entries wrong (X: 7 of 8, W: 2 of 64)``; ``which`` is each column's wrt position (the
    breakdown by input only where there is more than one input)."""
    text = f"{int(bad.sum())} of {int(live.sum())} entries wrong"
    if len(ctx.wrt) > 1:
        parts = [f"{name}: {int(bad[:, which == k].sum())} of {int(live[:, which == k].sum())}"
                 for k, name in enumerate(ctx.wrt) if bad[:, which == k].any()]
        text += f" ({', '.join(parts)})"
    return text


def float64_hint(ctx, sigma=0.0) -> str:
    """What float64 could do for an undecided check: inputs in float64 when the dtype under test is
    not, evaluating f in float64 when f is noisier than float64 rounding (float32 inside), else nothing."""
    if ctx.dtype != "float64":
        return "float64 inputs, "
    size = np.fmax(np.abs(ctx.f0), np.finfo(np.float64).tiny)
    if np.any(np.asarray(sigma) > NOISY_ULPS * np.finfo(np.float64).eps * size):
        return "evaluating the function in float64 (it is noisier than float64 rounding), "
    return ""
