"""Ridders' tableau over central differences at steps h, h/2, h/4, ..., for a point and a batch alike
(``grad``'s Richardson and ``gradcli check``'s refinement), over an array namespace ``xp``; in a batch the
points still converging are gathered row by row, so the others stop paying."""
from __future__ import annotations

import numpy as np

from gradcli.core.constants import RIDDERS_CON, RIDDERS_CREDIBLE, RIDDERS_SAFE
from gradcli.methods.quiet import quiet


#: Rows of Ridders' tableau evaluated per call: the steps of a block go through f in one evaluation (most
#: entries stop within the first block, at rows 5 to 7), and the points still unsure are gathered for
#: the next.
TABLEAU_BLOCK = 8


def tableau_rows(xp, rows, hs):
    """``row(i, idx, keep)`` for :func:`ridders`: central differences at step ``hs[i]`` over the points
    ``idx`` (None: all), evaluated :data:`TABLEAU_BLOCK` rows at a time; ``keep``, where the points were
    narrowed since the last call, gives their places among the last call's, so that the rest of a block
    already evaluated is narrowed too, not evaluated again."""
    cache = {"start": -1, "D": []}

    def row(i, idx=None, keep=None):
        if keep is not None:
            cache["D"] = [d[..., keep] for d in cache["D"]]
        if not cache["start"] <= i < cache["start"] + len(cache["D"]):
            ks = range(i, min(i + TABLEAU_BLOCK, len(hs)))
            steps = [hs[k] if idx is None else hs[k][..., idx] for k in ks]
            F = rows(xp.stack([sign * h for h in steps for sign in (1.0, -1.0)]), idx=idx)
            cache.update(start=i, D=[(F[:, 2 * j] - F[:, 2 * j + 1]) / (2 * h) for j, h in enumerate(steps)])
        return cache["D"][i - cache["start"]]
    return row


@quiet
def ridders(row, n_rows: int, shape, xp=np, dtype=np.float64, done=None, trace: dict | None = None,
            gather=False):
    """Ridders' tableau over central differences at steps h, h/2, h/4, ...; ``row(i)`` gives the
    differences at h/2**i (computed lazily, so a caller may stop early). Each column cancels one more
    power of h**2; the entry with the smallest change between neighbouring orders is the estimate and
    that change its error estimate. An entry stops once the top order got worse by a factor SAFE
    after a credible estimate (round-off has taken over), or where ``done`` is set from the start.
    With ``gather``, the last axis of ``shape`` is points and ``row(i, idx, keep)`` is asked for the points
    ``idx`` (None: all) whose entries have not all stopped (``keep``: their places among those of the
    last call, where they were narrowed since; else None): the others never pay for more rows.
    -> (best, err), both of ``shape``. A ``trace`` dict, if given, receives where each entry's estimate
    came from (``chosen_row``, ``chosen_column``; -1: none) and the row at which it stopped
    (``stopped_row``; the last row computed if it never did), and without ``gather`` the tableau as
    computed (``tableau``: rows of columns, each of ``shape``): for explanations; the results do not
    depend on it."""
    best = xp.full(shape, xp.nan, dtype=dtype)
    err = xp.full(shape, xp.inf, dtype=dtype)
    done = xp.zeros(shape, dtype=bool) if done is None else done.copy()
    trace = {} if trace is None else trace
    for key in ("chosen_row", "chosen_column"):
        trace[key] = xp.full(shape, -1)
    trace["stopped_row"] = xp.where(done, 0, -1)
    idx = None  # the points still computed: all, until some stop
    prev = [row(0, None) if gather else row(0)]
    if not gather:
        trace["tableau"] = [prev]
    last = 0
    for i in range(1, n_rows):
        if gather:  # the one wait for the device per row: how many points are still unsure
            idx, prev, keep = _still_unsure(xp, done, idx, prev)
            if idx is not None and not idx.shape[0]:
                break
        cur = [row(i, idx, keep) if gather else row(i)]
        _tableau_step(xp, i, cur, prev, best, err, done, trace, slice(None) if idx is None else idx)
        prev, last = cur, i
        if not gather:
            trace["tableau"].append(cur)
            if bool(done.all()):
                break
    trace["stopped_row"] = xp.where(trace["stopped_row"] < 0, last, trace["stopped_row"])
    return best, err


def _still_unsure(xp, done, idx, prev):
    """Gathers the points of which some entry has not stopped -> (their indices, prev over them, and their
    places among the points before, or None where none stopped)."""
    here = done if idx is None else done[..., idx]
    unsure = ~here.reshape(-1, here.shape[-1]).all(axis=0)
    keep = xp.nonzero(unsure)[0]
    if keep.shape[0] == unsure.shape[0]:
        return idx, prev, None
    return (keep if idx is None else idx[keep]), [p[..., keep] for p in prev], keep


def _tableau_step(xp, i: int, cur: list, prev: list, best, err, done, trace, live):
    """Row i of the tableau over the points ``live``: its columns, and every entry's estimate updated."""
    b, e, d = best[..., live], err[..., live], done[..., live]
    chosen_row, chosen_column = trace["chosen_row"][..., live], trace["chosen_column"][..., live]
    fac = RIDDERS_CON ** 2
    for j in range(1, i + 1):
        cur.append((cur[j - 1] * fac - prev[j - 1]) / (fac - 1))
        fac *= RIDDERS_CON ** 2
        errt = xp.maximum(xp.abs(cur[j] - cur[j - 1]), xp.abs(cur[j] - prev[j - 1]))
        take = ~d & xp.isfinite(errt) & (errt <= e)
        b, e = xp.where(take, cur[j], b), xp.where(take, errt, e)
        chosen_row, chosen_column = xp.where(take, i, chosen_row), xp.where(take, j, chosen_column)
    credible = e <= RIDDERS_CREDIBLE * xp.abs(b)
    now = d | (credible & (xp.abs(cur[i] - prev[i - 1]) >= RIDDERS_SAFE * e))
    stopped = trace["stopped_row"][..., live]
    best[..., live], err[..., live], done[..., live] = b, e, now
    trace["chosen_row"][..., live], trace["chosen_column"][..., live] = chosen_row, chosen_column
    trace["stopped_row"][..., live] = xp.where((stopped < 0) & now, i, stopped)
