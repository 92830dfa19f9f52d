"""What the numerical differences of every mode share, over an array namespace ``xp``: the step the
arithmetic really takes and Ridders' tableau (point, batch and ``gradcli check`` alike)."""
from __future__ import annotations

import numpy as np

from .constants import RIDDERS_CON, RIDDERS_CREDIBLE, RIDDERS_SAFE


def representable(x, h):
    """The step the float arithmetic actually takes, so that (x + h) - x == h exactly."""
    return (x + h) - x


def ridders(row, n_rows: int, shape, xp=np, dtype=np.float64, done=None, trace: dict | None = None):
    """Ridders' tableau over central differences at steps h, h/2, h/4, ...; ``row(i)`` gives the
    differences at h/2**i (computed lazily, so a caller may stop early). Each column cancels one more
    power of h**2; the entry with the smallest change between neighbouring orders is the estimate and
    that change its error estimate. An entry stops once the top order got worse by a factor SAFE
    after a credible estimate (round-off has taken over), or where ``done`` is set from the start.
    -> (best, err), both of ``shape``. A ``trace`` dict, if given, receives the tableau as computed
    (``tableau``: rows of columns, each of ``shape``), where each entry's estimate came from
    (``chosen_row``, ``chosen_column``; -1: none) and the row at which it stopped (``stopped_row``;
    the last row computed if it never did): for explanations; the results do not depend on it."""
    best = xp.full(shape, xp.nan, dtype=dtype)
    err = xp.full(shape, xp.inf, dtype=dtype)
    done = xp.zeros(shape, dtype=bool) if done is None else done.copy()
    prev = [row(0)]
    if trace is not None:
        trace["tableau"] = [prev]
        for key in ("chosen_row", "chosen_column", "stopped_row"):
            trace[key] = np.full(shape, -1)
        trace["stopped_row"][np.asarray(done)] = 0
    for i in range(1, n_rows):
        cur = [row(i)]
        fac = RIDDERS_CON ** 2
        for j in range(1, i + 1):
            cur.append((cur[j - 1] * fac - prev[j - 1]) / (fac - 1))
            fac *= RIDDERS_CON ** 2
            errt = xp.maximum(xp.abs(cur[j] - cur[j - 1]), xp.abs(cur[j] - prev[j - 1]))
            take = ~done & xp.isfinite(errt) & (errt <= err)
            best = xp.where(take, cur[j], best)
            err = xp.where(take, errt, err)
            if trace is not None:
                trace["chosen_row"][take] = i
                trace["chosen_column"][take] = j
        credible = err <= RIDDERS_CREDIBLE * xp.abs(best)
        done |= credible & (xp.abs(cur[i] - prev[i - 1]) >= RIDDERS_SAFE * err)
        prev = cur
        if trace is not None:
            trace["tableau"].append(cur)
            trace["stopped_row"][(trace["stopped_row"] < 0) & done] = i
        if bool(done.all()):
            break
    if trace is not None:
        trace["stopped_row"][trace["stopped_row"] < 0] = len(trace["tableau"]) - 1
    return best, err
