"""A framework's rule at a kink: where the derivative does not exist (tied values in a max, relu or abs at
0) a framework's backward still returns a number, by its own convention (torch's even split among tied
values, relu'(0) = 0). That number is accepted when it is a valid subgradient as far as gradcli can
check: between the one-sided derivatives of f along every direction checked, each element on the kink and
seeded random directions (half of them with every component positive, which moves tied values together,
so that a split that does not add up to the whole shows), within the check's tolerance. Outside them it
is wrong. A numpy check's gradient (traced AD, a hand-written gradient) keeps its rule: a kink there is
``nondifferentiable`` (docs/contract.md).
"""
from __future__ import annotations

import numpy as np

from gradcli.checks.comparisons import numeric as num
from gradcli.checks.comparisons.judging import judge, zero_of_columns, zero_of_directions
from gradcli.checks.context import DIRECTIONS, CheckContext, Outcome, Verdict, at_text, mismatch
from gradcli.checks.result import Mismatch

#: how near one end (or the middle) of the one-sided range a value is to be named as that convention
NAMED = 0.05


def between(ctx: CheckContext, got, lo, hi, err, typical, zero):
    """``got`` against the range of the one-sided derivatives ``lo``, ``hi`` (either order) with the one
    tolerance rule: -> (nearest value in the range, failed, undecided)."""
    near = np.clip(got, np.fmin(lo, hi), np.fmax(lo, hi))
    _, _, failed, undecided, _ = judge(ctx, got, near, err, typical, zero)
    return near, failed, undecided


def nearest_one_sided(ctx: CheckContext, u: dict, got):
    """For J u under test (``got``, per output) along a direction u that crosses a kink: the nearest value
    between the one-sided derivatives along u, and their error -> (reference, error): the comparison
    that follows then fails only a value outside them (forward mode's tangents)."""
    lo, hi, err = num.one_sided(ctx.numf, ctx.f0, num.direction_move(ctx.numf, u), ctx.step)
    return np.clip(got, np.fmin(lo, hi), np.fmax(lo, hi)), err


def _directions(ctx: CheckContext) -> list:
    """DIRECTIONS seeded random directions, the second half with every component positive."""
    us = num.random_directions(ctx.numf, DIRECTIONS, np.random.default_rng([ctx.seed, 43]))
    half = DIRECTIONS // 2
    return us[:half] + [{k: np.abs(v) for k, v in u.items()} for u in us[half:]]


def _convention(got, lo, hi) -> str:
    """How the values sit in their one-sided ranges, in words: the convention the rule follows."""
    with np.errstate(all="ignore"):
        p = (got - lo) / (hi - lo)
    p = p[np.isfinite(p)]
    names = []
    for test, text in ((np.abs(p - 0.5) <= NAMED, "the mean of the one-sided slopes (what an even split among "
                                                  "tied values gives)"),
                       (p <= NAMED, "the slope from the left"), (p >= 1 - NAMED, "the slope from the right")):
        if test.any():
            names.append(text)
    if (~((np.abs(p - 0.5) <= NAMED) | (p <= NAMED) | (p >= 1 - NAMED))).any():
        names.append("a value between the one-sided slopes")
    return " or ".join(names) or "a value between the one-sided slopes"


def at_kinks_full(ctx: CheckContext, got, kink, cols, typ, under: str) -> Outcome:
    """Full mode: the Jacobian rows under test ``got`` (m, len(cols)), whose ``kink`` entries sit on a
    kink, along each element on the kink and the random directions -> a pass, fail or inconclusive Outcome."""
    checked, bad_entries, undecided = [], [], False
    for k in np.flatnonzero(kink.any(axis=0)):
        name, i = ctx.label(int(cols[k]))
        move, s = num.element_move(ctx.numf, name, i)
        lo, hi, err = (a / s for a in num.one_sided(ctx.numf, ctx.f0, move, ctx.step))
        on = kink[:, k]
        near, failed, und = between(ctx, got[:, k][on][:, None], lo[on][:, None], hi[on][:, None],
                                    err[on][:, None], typ[:, k][on][:, None],
                                    _rows_of(zero_of_columns(ctx, [cols[k]]), on))
        checked.append((got[:, k][on], lo[on], hi[on]))
        undecided |= bool(und.any())
        rows = np.flatnonzero(on)
        bad_entries += [mismatch(ctx, int(cols[k]), near[r, 0], got[j, k], j) for r, j in enumerate(rows)
                        if failed[r, 0]]
    n_elements = len(checked)
    if len(cols) == ctx.n:  # the whole Jacobian is at hand: J u along the random directions
        for a, u in enumerate(_directions(ctx)):
            lo, hi, err = num.one_sided(ctx.numf, ctx.f0, num.direction_move(ctx.numf, u), ctx.step)
            ju = got @ ctx.flat(u)
            near, failed, und = between(ctx, ju[None], lo[None], hi[None], err[None],
                                        np.fmax(np.abs(lo), np.abs(hi))[None], zero_of_directions(ctx, (1, ctx.m)))
            undecided |= bool(und.any())
            bad_entries += [_along(ctx, a, j, near[0, j], ju[j]) for j in np.flatnonzero(failed[0])]
    k = int(np.flatnonzero(kink.any(axis=0))[0])
    where = "the kink at " + at_text(*ctx.unflat_index(int(cols[k]))) + (
        f" ({n_elements} elements on kinks)" if n_elements > 1 else "")
    directions = (f"{n_elements} element direction{'s' if n_elements != 1 else ''} on the kink and "
                  f"{DIRECTIONS if len(cols) == ctx.n else 0} random directions")
    return _verdict(ctx, where, directions, checked, bad_entries, undecided, under)


def at_kinks_fast(ctx: CheckContext, us, vs, got_w, kinked, under: str) -> Outcome:
    """Fast mode: <u, J^T v> under test (``got_w``: J^T v for each cotangent v) where direction u crosses a
    kink (``kinked``), along u and along |u| (every component positive), against the one-sided derivatives
    of <v, f> -> a pass (notes and suffix only), fail or inconclusive Outcome."""
    checked, bad_entries, undecided = [], [], False
    for a, (u, v, w) in enumerate(zip(us, vs, got_w)):
        for direction in (u, {k: np.abs(x) for k, x in u.items()}):
            lo, hi, err = num.one_sided(ctx.numf, ctx.f0, num.direction_move(ctx.numf, direction), ctx.step)
            # the one-sided derivatives of <v, f> are <v, those of f>: one-sided limits are linear
            lo, hi, err = (np.array([[float(x)]]) for x in (v @ lo, v @ hi, np.abs(v) @ err))
            got = np.array([[float(ctx.flat(direction) @ w)]])
            near, failed, und = between(ctx, got, lo, hi, err, np.fmax(np.abs(lo), np.abs(hi)),
                                        zero_of_directions(ctx, (1, 1), v[None]))
            undecided |= bool(und.any())
            if failed.any():
                bad_entries.append(Mismatch("<u, J^T v>", (a,), float(near[0, 0]), float(got[0, 0]),
                                            float(abs(got[0, 0] - near[0, 0])), float("inf"), direction=a))
    directions = f"{len(us)} random directions, and each with every component positive"
    # along a random direction the elements' conventions mix: only the elements' own are named
    return _verdict(ctx, "the kink that a random direction crosses at the inputs", directions, None, bad_entries,
                    undecided, under)


def _rows_of(zero, on):
    return lambda: zero()[on]


def _along(ctx, a: int, j: int, expected, got) -> Mismatch:
    abs_err = abs(float(got) - float(expected))
    rel = abs_err / abs(float(expected)) if expected != 0 else float("inf")
    at = ctx.out_index(j)
    return Mismatch("J u", at, float(expected), float(got), abs_err, rel, output_index=at or None, direction=a)


def _verdict(ctx, where: str, directions: str, checked, bad_entries, undecided, under) -> Outcome:
    """The policy's verdict: a fail naming the first entry outside its one-sided range, inconclusive, or
    a pass's note and suffix naming the convention the values follow (``checked``: (got, lo, hi) arrays).
    A pass leaves ``where`` in the check's memo: order 2 has no Hessian to check there."""
    if bad_entries:
        w = bad_entries[0]
        along = (f"random direction {w.direction}" if w.direction is not None
                 else f"{at_text(w.input, w.index)}")
        out = f" (output {list(w.output_index)})" if w.output_index else ""
        return Outcome(verdict=Verdict("fail", (
            f"{under} is not a subgradient at {where}: along {along}{out} the derivative must lie "
            f"between the one-sided derivatives of f, and {under} gives {w.got:.8g}, {w.abs_error:.2g} outside "
            f"them (nearest {w.expected:.8g}); {len(bad_entries)} entries outside, along {directions}")),
            mismatches=tuple(bad_entries[:10]))
    if undecided:
        return Outcome(verdict=Verdict("inconclusive", (
            f"whether {under} gives a subgradient at {where} cannot be decided: the one-sided derivatives' "
            "error estimates are too large for the tolerance; try another point (seed=)")))
    convention = ("a value between the one-sided derivatives along each direction" if checked is None
                  else _convention(*(np.concatenate(c) for c in zip(*checked))))
    note = (f"at {where} the derivative does not exist; {under} gives {convention} there, a convention of its "
            f"rule, between the one-sided derivatives along every direction checked ({directions}): a valid "
            "subgradient")
    ctx.memo["kink"] = where
    return Outcome(notes=(note,), suffix=f"; at {where} it gives a subgradient ({convention})")
