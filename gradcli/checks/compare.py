"""The comparison behind ``run_check``: reference, tolerance, verdict (see gradcli.checks.runner); full mode
here, fast mode in gradcli.checks.fast.

Every function here reads a :class:`~gradcli.checks.context.CheckContext` and arrays and returns an
:class:`~gradcli.checks.context.Outcome`; the runner alone writes it onto the result.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.checks import numeric as num
from gradcli.checks import subgradient
from gradcli.core.constants import CHECK_ESTIMATE_SAFETY
from gradcli.checks.context import (
    CONSTANT_NOTE, NUMERIC_CAP, SAMPLE, UNSEEN_NOTE, CheckContext, Outcome, Verdict, at_text, badness, combine,
    mismatch, summarize)
from gradcli.checks.interrupt import raised_by_user_code
from gradcli.checks.judging import judge, typical_by_input, zero_of_columns
from gradcli.checks.findings import (
    count_text, float64_hint, largest_elsewhere, largest_wrong, precision_by_input, underflow_text, worst,
    worst_entries)
from gradcli.checks.under_test import FRAMEWORK_GRADIENT, framework_under_test, user_gradient, user_vjp_at

def _sample(ctx, n):
    rng = np.random.default_rng([ctx.seed, 7])
    return np.sort(rng.choice(n, size=SAMPLE, replace=False))


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


#: the closer look's steps, relative to the first pass's, and the most elements it looks at again
CLOSER = 2.0 ** -12
CLOSER_MAX = 256


def _look_closer(ctx, ad_rows, cols, bad, nref, nerr, kink, ntyp, target, sigma, notes):
    """Where traced AD and the finite differences disagree, differences with steps 4096 times smaller.

    A kink near the point (a ReLU's input 5e-5 from 0, a max-pool's top two 3e-5 apart) bends
    differences whose steps reach across it, not the derivative. Where the smaller steps agree with
    AD, they replace the first ones; where they disagree with the first ones too, the differences
    cannot be trusted there and their error estimate becomes that disagreement (undecided, not a
    failure). Returns the updated (value, error, kink, still-disagreeing) arrays; a note goes to ``notes``."""
    disputed = np.flatnonzero(bad.any(axis=0))[:CLOSER_MAX]
    close = num.jacobian_columns(ctx.numf, ctx.f0, [ctx.label(cols[k]) for k in disputed],
                                 ctx.step * CLOSER, target, complex_step=False, sigma=sigma)
    _, _, bad2, und2, _ = judge(ctx, ad_rows[:, cols[disputed]], close.value, close.error, ntyp[:, disputed],
                                zero_of_columns(ctx, cols[disputed]))
    agree = ~(bad2 | und2 | close.kink).any(axis=0)
    nref, nerr, kink = nref.copy(), nerr.copy(), kink.copy()
    ks = disputed[agree]
    nref[:, ks], nerr[:, ks], kink[:, ks] = close.value[:, agree], close.error[:, agree], close.kink[:, agree]
    # where the two step sizes disagree with each other, neither is a reference
    gap = np.abs(close.value - nref[:, disputed])
    unsure = ~agree & (gap > CHECK_ESTIMATE_SAFETY * (close.error + nerr[:, disputed])).any(axis=0)
    ku = disputed[unsure]
    nerr[:, ku] = np.fmax(nerr[:, ku], gap[:, unsure])
    if ks.size or ku.size:
        notes.append(
            f"the finite differences at the default step reach across a kink near the point at {ks.size + ku.size} "
            f"element(s): steps {1 / CLOSER:.0f} times smaller agree with {ctx.ad_label} at {ks.size}"
            + (f" and at {ku.size} give another value than the first steps (no finite-difference reference there)"
               if ku.size else ""))
    diff, tol, bad, und, live = judge(ctx, ad_rows[:, cols], nref, nerr, ntyp, zero_of_columns(ctx, cols))
    return nref, nerr, kink, bad & ~kink


#: the finite differences' name, as a method and as a reference
_NUMERIC = "richardson"


@dataclass(frozen=True)
class _FullRun:
    """What the steps of a full comparison share: traced AD's rows (None without them), the columns the
    finite differences cover, their first pass and its setup; ``methods`` and ``notes`` fill in as the
    steps decide, in the order they decide."""

    ctx: CheckContext
    ad_rows: np.ndarray | None
    cols: np.ndarray
    target: float
    sigma: float
    first: num.Columns
    typical: np.ndarray
    methods: dict
    notes: list

    def outcome(self, **fields) -> Outcome:
        """The methods and notes so far, with ``fields``."""
        return Outcome(methods=tuple(self.methods.items()), notes=tuple(self.notes), **fields)


@dataclass(frozen=True)
class _Reference:
    """What the entries under test are compared with on the columns ``cols``: values, error estimates and
    where a kink bends them; ``ad_method`` is None where these are the finite differences."""

    value: np.ndarray
    error: np.ndarray
    kink: np.ndarray
    cols: np.ndarray
    ad_method: str | None = None

    @property
    def name(self) -> str:
        return _NUMERIC if self.ad_method is None else self.ad_method


def compare_full(ctx: CheckContext) -> Outcome:
    """Every row of the Jacobian (the gradient, or vjp(e_j) for each output element) -> Outcome."""
    methods, notes = {}, []
    got = None if ctx.autodiff else _user_rows(ctx)
    if isinstance(got, Verdict):
        return _stopped(got, methods, notes)
    ad_rows = _ad_rows(ctx, methods, notes)
    if ctx.autodiff and ad_rows is None:
        return _stopped(Verdict("skipped", "nothing to compare: no hand-written gradient, and traced AD is "
                                           "unavailable (" + "; ".join(ctx.setup_notes + tuple(notes)) + ")"),
                        methods, notes)
    run = _first_differences(ctx, ad_rows, methods, notes)
    differences, cs_used = _with_complex_step(run)
    reference = _validated_ad(run, differences)
    if ctx.autodiff and ctx.constant:
        return _constant_autodiff(ctx, reference.ad_method is not None, methods, notes, run.first, run.cols)
    if reference.ad_method is None:
        reference = _on_every_element(run, reference)
    if ctx.autodiff:
        got = ad_rows
    return combine(run.outcome(reference=reference.name),
                   verdict_of_elements(ctx, got[:, reference.cols], reference.value, reference.error, reference.kink,
                                       reference.cols, reference_text(ctx, reference.name, cs_used), sigma=run.sigma))


def _stopped(verdict: Verdict, methods: dict, notes: list) -> Outcome:
    """The check ends with ``verdict`` before anything was compared."""
    return Outcome(verdict=verdict, methods=tuple(methods.items()), notes=tuple(notes), stop=True)


def _first_differences(ctx, ad_rows, methods: dict, notes: list) -> _FullRun:
    """The columns to difference and the finite differences' first pass on them: every element, or a seeded
    sample of a large input where traced AD can stand in for the rest."""
    n = ctx.n
    cols = np.arange(n)
    if n > NUMERIC_CAP and ad_rows is not None:
        cols = _sample(ctx, n)
        notes.append(f"{n} elements: finite differences on a seeded sample of {len(cols)}, {ctx.ad_label} as the "
                     "reference elsewhere")
    target = ctx.rtol / 10
    sigma = num.noise_level(ctx.numf, ctx.f0, np.random.default_rng([ctx.seed, 13]))
    first = num.jacobian_columns(ctx.numf, ctx.f0, [ctx.label(c) for c in cols], ctx.step, target,
                                 n_total=n, sigma=sigma)
    return _FullRun(ctx=ctx, ad_rows=ad_rows, cols=cols, target=target, sigma=sigma, first=first,
                    typical=typical_by_input(ctx, first.value, cols), methods=methods, notes=notes)


def _with_complex_step(run: _FullRun) -> tuple[_Reference, bool]:
    """The first differences, with the complex step where they cannot decide; and whether it was used."""
    ctx, cols, first = run.ctx, run.cols, run.first
    differences = _Reference(first.value, first.error, first.kink, cols)
    # complex step: trusted where it agrees with every decided finite difference, used where those cannot decide
    cs = first.complex_value
    if cs is None:
        run.methods["complex_step"] = summarize("complex_step", "unavailable", message=(
            "the function does not take complex inputs" if len(cols) <= num.COMPLEX_MAX else
            f"not run on more than {num.COMPLEX_MAX} elements"))
        return differences, False
    diff, tol, bad, und, live = judge(ctx, cs, first.value, first.error, run.typical, zero_of_columns(ctx, cols))
    bad &= ~first.kink
    if bad.any():
        run.methods["complex_step"] = summarize("complex_step", "mismatch", diff, message=(
            "disagrees with the finite differences (a non-holomorphic operation such as abs); not used"))
        return differences, False
    use = und & np.isfinite(cs)
    value = np.where(use, cs, first.value)
    error = np.where(use, 1e-12 * np.fmax(np.abs(cs), run.typical), first.error)
    run.methods["complex_step"] = summarize("complex_step", "ok", diff, message=(
        f"used for {int(use.sum())} entries the differences could not decide" if use.any() else ""))
    return _Reference(value, error, first.kink, cols), bool(use.any())


def _validated_ad(run: _FullRun, differences: _Reference) -> _Reference:
    """Traced AD where the finite differences agree with it (looked at again with smaller steps where they
    do not), else the differences."""
    ctx, cols, ad_rows = run.ctx, run.cols, run.ad_rows
    # a constant trace (all zeros) is a reference once the differences agree, even with no gradient under test
    if ad_rows is None or (ctx.autodiff and not ctx.constant):
        return differences
    nref, nerr, kink = differences.value, differences.error, differences.kink
    diff, tol, bad, und, live = judge(ctx, ad_rows[:, cols], nref, nerr, run.typical, zero_of_columns(ctx, cols))
    bad &= ~kink
    if bad.any():
        nref, nerr, kink, bad = _look_closer(ctx, ad_rows, cols, bad, nref, nerr, kink, run.typical, run.target,
                                             run.sigma, run.notes)
    if bad.any():
        _distrust_ad(run, diff, tol, bad, nref, nerr)
        return _Reference(nref, nerr, kink, cols)
    run.methods[ctx.ad_method] = summarize(ctx.ad_method, "used")
    run.methods[_NUMERIC] = summarize(_NUMERIC, "ok", diff, message=f"{len(cols)} elements")
    full_kink = np.zeros((ctx.m, ctx.n), dtype=bool)
    full_kink[:, cols] = kink
    if ctx.constant:
        run.notes.append(CONSTANT_NOTE)
    return _Reference(ad_rows, np.zeros_like(ad_rows), full_kink, np.arange(ctx.n), ad_method=ctx.ad_method)


def _distrust_ad(run: _FullRun, diff, tol, bad, nref, nerr) -> None:
    """Traced AD is not the reference: the note names the entry furthest past its tolerance."""
    ctx, cols, ad_rows = run.ctx, run.cols, run.ad_rows
    j, k = worst(diff, tol, bad)
    name, idx = ctx.unflat_index(cols[k])
    run.notes.append(f"{ctx.ad_label} disagrees with the finite differences at {at_text(name, idx)} "
                     f"({ad_rows[j, cols[k]]:.6g} vs {nref[j, k]:.6g} ± {nerr[j, k]:.2g}); "
                     "finite differences used as the reference")
    if ctx.constant:
        run.notes.append(UNSEEN_NOTE)
    run.methods[ctx.ad_method] = summarize(ctx.ad_method, "mismatch", diff,
                                           message="disagrees with the finite differences; not used")


def _on_every_element(run: _FullRun, differences: _Reference) -> _Reference:
    """The finite differences as the reference, on every element where only a sample was differenced."""
    ctx = run.ctx
    if len(differences.cols) < ctx.n and not ctx.autodiff:  # AD was not trusted: every element needs the differences
        every = num.jacobian_columns(ctx.numf, ctx.f0, [ctx.label(c) for c in range(ctx.n)],
                                     ctx.step, run.target, sigma=run.sigma)
        differences = _Reference(every.value, every.error, every.kink, np.arange(ctx.n))
        run.notes.append("finite differences on every element")
    run.methods[_NUMERIC] = summarize(_NUMERIC, "used")
    return differences


def _constant_autodiff(ctx, agreed: bool, methods: dict, notes: list, numc, cols) -> Outcome:
    """No gradient under test, and the trace finds the output constant in the inputs: a pass where the
    finite differences agree that the derivative is 0, else nothing to compare (the trace missed a route)."""
    if not agreed:
        return Outcome(verdict=Verdict("skipped", "nothing to compare: no hand-written gradient, and traced AD is "
                                                  "unavailable (" + UNSEEN_NOTE + ")"),
                       methods=tuple(methods.items()), notes=tuple(notes), stop=True)
    live = np.isfinite(numc.value)
    size = float(np.max(np.abs(numc.value[live]), initial=0.0))
    return Outcome(verdict=Verdict("pass", f"traced AD gives 0 for all {ctx.m * ctx.n} entries (the output is "
                                           f"piecewise constant in the inputs), and the finite differences agree "
                                           f"({len(cols)} elements)"),
                   methods=tuple(methods.items()), notes=tuple(notes), reference="traced_reverse",
                   errors=(size, None))


def _user_rows(ctx):
    """The Jacobian rows under test (m, n): the gradient, or vjp(e_j) per output element | Verdict."""
    if ctx.scalar and ctx.vjp is None:
        g = user_gradient(ctx, "the gradient function", ctx.user_grads)
        return g if isinstance(g, Verdict) else ctx.flat(g)[None]
    if ctx.vjp is None:
        return Verdict("fail", f"the output has shape {ctx.out_shape}, so a gradient is not defined: register a "
                               "vector-Jacobian product with @f.vjp (def f_vjp(g, ...)) instead")
    rows = np.empty((ctx.m, ctx.n))
    for j in range(ctx.m):
        e = np.zeros(ctx.m)
        e[j] = 1.0
        g = user_vjp_at(ctx, e)
        if isinstance(g, Verdict):
            return g
        rows[j] = ctx.flat(g)
    return rows


def _ad_rows(ctx, methods: dict, notes: list):
    ad = ctx.ad
    if ad is None:
        return None
    try:
        if ctx.scalar:
            rows = ctx.flat(ad.gradient())[None]
        else:
            rows = np.empty((ctx.m, ctx.n))
            for j in range(ctx.m):
                e = np.zeros(ctx.out_shape)
                e.flat[j] = 1.0
                rows[j] = ctx.flat(ad.vjp(e))
        return rows
    except Exception as exc:  # noqa: BLE001
        notes.append(f"{ctx.ad_label} failed ({raised_by_user_code(exc)}); finite differences used")
        methods[ctx.ad_method] = summarize(ctx.ad_method, "error", message=raised_by_user_code(exc))
        return None


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


def reference_text(ctx, reference: str, complex_step_used: bool) -> str:
    if ctx.autodiff or reference != ctx.ad_method:
        extra = " and complex step" if complex_step_used else ""
        return f"finite differences (richardson{extra})"
    if ctx.constant:
        return "0 (traced: the output is piecewise constant in the inputs; validated by finite differences)"
    return f"{ctx.ad_label} (validated by finite differences)"

