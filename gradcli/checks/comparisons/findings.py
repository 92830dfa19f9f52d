"""How a comparison words what it found: the worst entries, the wrong counts by input, what float64
could do for an undecided check. Read by gradcli.checks.comparisons.full, .fast and .second_order."""
from __future__ import annotations

import numpy as np

from gradcli.checks.context import EPS, TINY, MAX_MISMATCHES, at_text, badness

#: f's measured noise above this many ulp of |f| says it computes in less than float64 inside.
NOISY_ULPS = 1e3


def worst(diff, tol, bad):
    """(row, column) of the entry furthest past its tolerance among ``bad``."""
    j, k = np.unravel_index(int(np.argmax(badness(diff, tol, bad))), bad.shape)
    return int(j), int(k)


def worst_entries(score: np.ndarray, which: np.ndarray, limit: int = MAX_MISMATCHES, also=None) -> np.ndarray:
    """Flat indices of the worst entries (``score`` > -1 fails, larger is worse), worst first, at most
    ``limit``, with the worst of every input (``which``: its input per entry) among them: a few large
    errors in one input must not hide that another input is wrong too; and ``also`` (a flat index, the
    entry with the largest relative error: :func:`largest_wrong`), so that the worst entries shown hold
    the error the report's summary gives."""
    score, which = score.ravel(), np.broadcast_to(which, score.shape).ravel()
    order = np.argsort(-score, kind="stable")
    order = order[score[order] > -1]
    picked = list(order[:limit])
    need = [order[which[order] == k][0] for k in dict.fromkeys(which[order]) if k not in set(which[picked])]
    if also is not None and score[also] > -1 and also not in picked and also not in need:
        need.append(also)
    if need:
        picked = picked[:max(limit - len(need), 0)] + need
        picked.sort(key=lambda i: -score[i])
    return np.array(picked, dtype=np.int64)


def largest_wrong(rel: np.ndarray, bad: np.ndarray):
    """The flat index of the largest relative error among the ``bad`` entries, or None."""
    masked = np.where(bad & ~np.isnan(rel), rel, -np.inf).ravel()
    k = int(np.argmax(masked))
    return k if masked[k] > -np.inf else None


def max_errors(diff: np.ndarray, ref: np.ndarray, live: np.ndarray) -> tuple:
    """(max abs error, max finite rel error) over the ``live`` entries, None where there is none: the
    report's summary of a comparison that failed, so that its table shows the error that failed it."""
    with np.errstate(all="ignore"):
        rel = np.where(ref != 0, diff / np.abs(ref), np.where(diff == 0, 0.0, np.inf))
    max_abs = float(np.max(diff[live])) if live.any() else None
    fin = rel[live][np.isfinite(rel[live])]
    return max_abs, (float(fin.max()) if fin.size else None)


def count_text(ctx, bad: np.ndarray, live: np.ndarray, which: np.ndarray, what: str | None = None) -> str:
    """``7 of 120 entries wrong (input elements; X: 7 of 8, W: 2 of 64)``: what an entry is (``what``; by
    default an input element for one row, a Jacobian entry for several), then the breakdown by input
    where there is more than one; ``which`` is each column's wrt position."""
    if what is None:
        what = "input elements" if bad.shape[0] == 1 else "Jacobian entries: output element × input element"
    text = f"{int(bad.sum())} of {int(live.sum())} entries wrong ({what}"
    if len(ctx.wrt) > 1:
        parts = [f"{name}: {int(bad[:, which == k].sum())} of {int(live[:, which == k].sum())}"
                 for k, name in enumerate(ctx.wrt) if bad[:, which == k].any()]
        text += f"; {', '.join(parts)}"
    return text + ")"


def largest_elsewhere(ctx, rel: np.ndarray, shown: np.ndarray, bad: np.ndarray, cols, named: float,
                      row_text=lambda j: "") -> str:
    """Where the largest relative error (the report's max rel err) is another entry than the one the
    message names (the one furthest past its tolerance, with ``named`` its relative error): the clause
    that says where it is and why it is not named; else "". ``shown``: the entries the maximum is over."""
    if not shown.any():
        return ""
    masked = np.where(shown, rel, -np.inf)
    j, k = (int(i) for i in np.unravel_index(int(np.argmax(masked)), rel.shape))
    top = float(masked[j, k])
    if not top > named or f"{top:.1e}" == f"{named:.1e}":  # the same number as the report prints it
        return ""
    name, index = ctx.unflat_index(int(cols[k]))
    why = "also wrong, but less far past its tolerance" if bad[j, k] else "within its tolerance"
    return f"; the largest relative error, {top:.2g} at {at_text(name, index)}{row_text(j)}, is {why}"


def float64_hint(ctx, sigma=0.0) -> str:
    """What float64 could do for an undecided check: inputs in float64 when the dtype under test is
    not, evaluating f in float64 when f is noisier than float64 rounding (float32 inside), else nothing."""
    if ctx.dtype != "float64":
        return "float64 inputs, "
    size = np.fmax(np.abs(ctx.f0), np.finfo(np.float64).tiny)
    if np.any(np.asarray(sigma) > NOISY_ULPS * np.finfo(np.float64).eps * size):
        return "evaluating the function in float64 (it is noisier than float64 rounding), "
    return ""


def precision_by_input(ctx, got, ref, typ, cols, diff) -> tuple:
    """Below float64: per input, the correct digits of the gradient under test (-log10 of its worst
    error relative to the input's typical gradient) and the share of its live entries that are 0 where
    the reference is not (underflow) -> (digits, underflow) dicts, or (None, None) in float64."""
    if ctx.dtype == "float64":
        return None, None
    which = ctx.input_of(cols)
    digits, underflow = {}, {}
    with np.errstate(all="ignore"):
        scaled = diff / np.fmax(np.abs(ref), typ)
    for k, name in enumerate(ctx.wrt):
        sel = np.broadcast_to(which == k, ref.shape)
        live = sel & np.isfinite(ref) & np.isfinite(scaled)
        if not live.any():
            continue
        # no more digits than the dtype holds: an exact entry is as right as the dtype can be
        holds = float(-np.log10(EPS[ctx.dtype] / 2))
        worst_err = float(np.max(scaled[live]))
        digits[name] = round(float(max(0.0, min(holds, -np.log10(worst_err) if worst_err > 0 else holds))), 1)
        lost = live & (got == 0) & (np.abs(ref) > ctx.floor(ref))
        underflow[name] = float(lost.sum() / live.sum())
    return digits, underflow


def underflow_text(ctx, expected: float, underflow: dict) -> str:
    """The diagnosis of a low-precision failure whose worst entry is below the dtype's smallest normal
    number (it kept fewer digits or flushed to 0), or ""."""
    if ctx.dtype == "float64" or not abs(expected) < TINY[ctx.dtype]:
        return ""
    lost = [f"{k} {100 * v:.3g}%" for k, v in (underflow or {}).items() if v > 0]
    return (f"; the gradient underflows: entries below {ctx.dtype}'s smallest normal number ({TINY[ctx.dtype]:.2g}) "
            "keep fewer digits or become 0" + (f" (0 where the reference is not: {', '.join(lost)})" if lost else "")
            + ": scale the loss (torch.amp.GradScaler) so that small gradients stay representable")
