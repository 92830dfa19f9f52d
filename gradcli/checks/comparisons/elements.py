"""The entries under test judged against a reference, and the words for what was found: which entries
are wrong, undecided, on a kink or without a derivative, a gradient returned in another order than
``wrt``, and what the code under test is called. Read by gradcli.checks.comparisons.full and .fast."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.checks.comparisons import subgradient
from gradcli.core.constants import CHECK_ESTIMATE_SAFETY
from gradcli.checks.context import CheckContext, Outcome, Verdict, at_text, badness, combine, mismatch, summarize
from gradcli.checks.comparisons.judging import judge, typical_by_input, zero_of_columns
from gradcli.checks.comparisons.findings import (
    count_text, float64_hint, largest_elsewhere, largest_wrong, precision_by_input, underflow_text, worst,
    worst_entries)
from gradcli.checks.comparisons.under_test import FRAMEWORK_GRADIENT, framework_under_test


def under_test_name(ctx) -> str:
    if ctx.autodiff:
        return "traced_reverse"
    framework = framework_under_test(ctx)
    return FRAMEWORK_GRADIENT[framework][1] if framework else "hand_written"


def describe_under_test(ctx) -> str:
    if ctx.autodiff:
        return "traced AD"
    framework = framework_under_test(ctx)
    if framework:
        return FRAMEWORK_GRADIENT[framework][0]
    return {"vjp": "the hand-written vjp", "expression": "the grad= expression"}.get(
        ctx.kind, "the hand-written gradient")


def _undefined_text(ctx, undefined, cols) -> str:
    """Where the first entry without a derivative is, and why: a nan or inf given there (judged without
    it), or a function not finite at any step around it."""
    j, k = np.unravel_index(int(np.argmax(undefined)), undefined.shape)
    nm, idx = ctx.unflat_index(int(cols[k]))
    given = np.asarray(ctx.base[nm])[tuple(idx)]
    why = (f"the input is {given} there" if not np.isfinite(given)
           else "the function is not finite at any step around it (the input sits on the edge of the domain)")
    return f"no derivative at {at_text(nm, idx)}: {why}"


@dataclass(frozen=True)
class _Elements:
    """The entries under test judged against the reference ((m, len(cols)) each): what the wording of a
    failure, of undecided or kinked entries and of the pass all read."""

    ctx: CheckContext
    got: np.ndarray
    ref: np.ndarray
    err: np.ndarray
    kink: np.ndarray
    cols: np.ndarray
    refdesc: str
    cotangents: np.ndarray | None
    sigma: float
    typical: np.ndarray
    diff: np.ndarray
    tol: np.ndarray
    bad: np.ndarray
    und: np.ndarray
    live: np.ndarray
    rel: np.ndarray
    precision: tuple | None
    underflow: dict | None

    @property
    def cotangent_rows(self) -> bool:
        return self.cotangents is not None

    @property
    def ok(self) -> np.ndarray:
        """The entries with a derivative, off kinks."""
        return self.live & ~self.kink

    @property
    def shown(self) -> np.ndarray:
        """The entries the largest relative error is over.

        Where 0 is expected the relative error is infinite: it counts for the failing entries (got 1 for
        0), not for the passing ones (a 1e-20 within the tolerance)."""
        return self.ok & (np.isfinite(self.rel) | self.bad)

    @property
    def undefined(self) -> np.ndarray:
        """The entries without a derivative."""
        return ~self.live

    @property
    def errors(self) -> tuple:
        """(max_abs_error, max_rel_error), None where no entry counts."""
        ok, shown = self.ok, self.rel[self.shown]
        return (float(self.diff[ok].max()) if ok.any() else None,
                float(shown.max()) if shown.size else None)

    def method(self, status: str) -> tuple:
        """The gradient under test's (name, summary) with ``status``."""
        name, ok = under_test_name(self.ctx), self.ok
        return name, summarize(name, status, self.diff[ok], self.rel[ok])

    def row_text(self, j) -> str:
        """The row an entry is in: an output, or a random cotangent."""
        if self.ctx.scalar:
            return ""
        return f" (random cotangent {j})" if self.cotangent_rows else f" (output {list(self.ctx.out_index(j))})"


def verdict_of_elements(ctx, got, ref, err, kink, cols, refdesc: str, identity=None,
                        cotangents=None, sigma=0.0) -> Outcome:
    """Compare ``got`` with ``ref`` entry by entry ((m, len(cols))) -> the status, message, mismatches.
    ``identity()`` (fast mode) may decide after the elements pass: an Outcome, or None.
    ``cotangents`` (v, (r, m)): the rows are J^T v for them, so an entry is an input
    element (a column), counted once however many rows it is wrong in. ``sigma``: f's measured noise."""
    elements = _judge_elements(ctx, got, ref, err, kink, cols, refdesc, cotangents, sigma)
    if elements.bad.any():
        return _failure(elements)
    compared = Outcome(methods=(elements.method("ok"),), errors=elements.errors, precision=elements.precision)
    if identity is not None:
        decided = identity()
        if decided is not None:
            return combine(compared, decided)
    return combine(compared, *_verdict_of_agreeing(elements))


def _judge_elements(ctx, got, ref, err, kink, cols, refdesc, cotangents, sigma) -> _Elements:
    """Each entry failed, undecided, on a kink, or without a derivative; and the relative errors."""
    typ = typical_by_input(ctx, ref, cols)
    diff, tol, bad, und, live = judge(ctx, got, ref, err, typ, zero_of_columns(ctx, cols, cotangents))
    # an input given as nan or inf has no derivative: its entries are undefined, whatever either side says
    given = ~np.isfinite(ctx.flat({k: ctx.base[k] for k in ctx.wrt}))[np.asarray(cols)]
    live &= ~given
    bad &= ~kink & live
    und &= ~kink & live
    if ctx.autodiff:
        # traced AD's exact zero, which the differences agree with to their error, is not in doubt
        und &= got != 0
    with np.errstate(all="ignore"):
        rel = np.where(ref != 0, diff / np.abs(ref), np.where(diff == 0, 0.0, np.inf))
    digits, underflow = precision_by_input(ctx, got, ref, typ, cols, diff)
    return _Elements(ctx=ctx, got=got, ref=ref, err=err, kink=kink, cols=cols, refdesc=refdesc, cotangents=cotangents,
                     sigma=sigma, typical=typ, diff=diff, tol=tol, bad=bad, und=und, live=live, rel=rel,
                     precision=None if digits is None else (digits, underflow), underflow=underflow)


def _entries_to_name(e: _Elements) -> tuple[list, str]:
    """The failing entries to name, worst first, as (row, column) pairs; and how many fail, by input."""
    ctx, bad, live = e.ctx, e.bad, e.live
    which = ctx.input_of(e.cols)
    score = badness(e.diff, e.tol, bad)
    if e.cotangent_rows:
        rows = np.argmax(score, axis=0)  # each element's worst cotangent
        flat = worst_entries(score.max(axis=0)[None], which[None])
        return ([(int(rows[k]), int(k)) for k in flat],
                count_text(ctx, bad.any(axis=0)[None], live.any(axis=0)[None], which))
    flat = worst_entries(score, np.broadcast_to(which, score.shape), also=largest_wrong(e.rel, bad))
    return ([tuple(int(i) for i in np.unravel_index(f, bad.shape)) for f in flat],
            count_text(ctx, bad, live, which))


def _failure(e: _Elements) -> Outcome:
    """A fail that names the entry furthest past its tolerance, how many fail, and what else is known."""
    ctx = e.ctx
    picks, counted = _entries_to_name(e)
    found = [mismatch(ctx, int(e.cols[k]), e.ref[j, k], e.got[j, k], None if e.cotangent_rows else j)
             for j, k in picks]
    w = found[0]
    where = at_text(w.input, w.index) + (f" (output {list(w.output_index)})" if w.output_index else "")
    if e.cotangent_rows and not ctx.scalar:
        where += f" (random cotangent {picks[0][0]})"
    message = (f"{describe_under_test(ctx)} disagrees with {e.refdesc} at {where}: expected {w.expected:.8g}, got "
               f"{w.got:.8g} (rel error {w.rel_error:.2g}); {counted}"
               + underflow_text(ctx, w.expected, e.underflow)
               + largest_elsewhere(ctx, e.rel, e.shown, e.bad, e.cols, w.rel_error, e.row_text)
               + _swap_hint(ctx, e.got, e.ref, e.err, e.typical, e.kink, e.live, e.cols, e.cotangents))
    return Outcome(verdict=Verdict("fail", message), methods=(e.method("mismatch"),), mismatches=tuple(found),
                   errors=e.errors, precision=e.precision,
                   notes=(_undefined_text(ctx, e.undefined, e.cols),) if e.undefined.any() else ())


def _verdict_of_agreeing(e: _Elements) -> tuple:
    """No entry fails: inconclusive, nondifferentiable or undefined where some entries say so, else a pass
    (after a framework's values at kinks, where it gives them)."""
    ctx, kink = e.ctx, e.kink
    if e.und.any():
        return (_undecided(e),)
    at_kink = ()
    if kink.any() and framework_under_test(ctx) and not e.cotangent_rows:
        # a framework's rule gives a number at a kink by its own convention: valid if it is a subgradient
        decided = subgradient.at_kinks_full(ctx, e.got, kink, e.cols, e.typical, describe_under_test(ctx))
        if decided.verdict is not None:
            return (decided,)
        at_kink = (decided,)
    elif kink.any():
        return (_on_kink(e),)
    if e.undefined.any():
        message = _undefined_text(ctx, e.undefined, e.cols) + (
            f"; the other entries agree with {e.refdesc}" if e.live.any() else "")
        return (Outcome(verdict=Verdict("undefined", message)),)
    return (_passed(e), *at_kink)


def _undecided(e: _Elements) -> Outcome:
    """Inconclusive: the entry whose error estimate leaves the least of its tolerance, and what to try."""
    ctx, err, tol, und = e.ctx, e.err, e.tol, e.und
    j, k = worst(CHECK_ESTIMATE_SAFETY * err, tol - CHECK_ESTIMATE_SAFETY * err, und)
    nm, idx = ctx.unflat_index(int(e.cols[k]))
    message = (f"{int(und.sum())} of {int(e.live.sum())} entries cannot be decided: the finite-difference "
               f"error estimate ({err[j, k]:.2g} at {at_text(nm, idx)}) is too large for the tolerance "
               f"({tol[j, k] - CHECK_ESTIMATE_SAFETY * err[j, k]:.2g}) and {ctx.ad_label} was not available to "
               f"decide; try {float64_hint(ctx, e.sigma)}another point (seed=), or a larger step (eps=)")
    return Outcome(verdict=Verdict("inconclusive", message))


def _on_kink(e: _Elements) -> Outcome:
    """Nondifferentiable: the first entry on a kink, and how many elements are."""
    ctx, kink = e.ctx, e.kink
    j, k = np.unravel_index(int(np.argmax(kink)), kink.shape)
    nm, idx = ctx.unflat_index(int(e.cols[k]))
    nk = int(kink.any(axis=0).sum())
    message = (f"{at_text(nm, idx)} sits on a kink: the one-sided slopes differ, so the gradient does not exist "
               f"there" + (f" ({nk} elements on kinks)" if nk > 1 else "")
               + (f"; the other entries agree with {e.refdesc}" if nk < kink.shape[1] else ""))
    return Outcome(verdict=Verdict("nondifferentiable", message))


def _passed(e: _Elements) -> Outcome:
    """A pass: how many entries agree, and the largest relative error among them."""
    live, max_rel = e.live, e.errors[1]
    entries = int(live.any(axis=0).sum()) if e.cotangent_rows else int(live.sum())
    unit = "input elements" if e.cotangent_rows or live.shape[0] == 1 else "Jacobian entries"
    message = (f"{describe_under_test(e.ctx)} agrees with {e.refdesc} ({entries} {unit}, max rel error "
               f"{max_rel if max_rel is not None else 0:.2g})")
    return Outcome(verdict=Verdict("pass", message))


def _swap_hint(ctx, got, ref, err, typ, kink, live, cols, cotangents) -> str:
    """On a failure only: '; the gradients for b and W match if swapped: ...' where two wrt inputs of one
    shape, exchanged, make every entry agree (a gradient returned in another order than wrt), else ''."""
    if ctx.autodiff or framework_under_test(ctx) or len(cols) != ctx.n or len(ctx.wrt) < 2:
        return ""
    off = ctx.offsets
    for a in range(len(ctx.wrt)):
        for b in range(a + 1, len(ctx.wrt)):
            if ctx.shapes[ctx.wrt[a]] != ctx.shapes[ctx.wrt[b]]:
                continue
            perm, sa, sb = np.arange(ctx.n), slice(off[a], off[a + 1]), slice(off[b], off[b + 1])
            perm[sa], perm[sb] = perm[sb].copy(), perm[sa].copy()
            _, _, bad, _, _ = judge(ctx, got[:, perm], ref, err, typ, zero_of_columns(ctx, cols, cotangents))
            if not (bad & ~kink & live).any():
                wa, wb = ctx.wrt[a], ctx.wrt[b]
                return (f"; the gradients for {wa} and {wb} match if swapped: {describe_under_test(ctx)} returns "
                        f"them in another order than wrt={list(ctx.wrt)}")
    return ""
