"""The comparison behind ``run_check``: reference, tolerance, verdict (see gradcli.checks.runner); full mode
here, fast mode in gradcli.checks.comparisons.fast.

Every function here reads a :class:`~gradcli.checks.context.CheckContext` and arrays and returns an
:class:`~gradcli.checks.context.Outcome`; the runner alone writes it onto the result.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.checks.comparisons import numeric as num
from gradcli.core.constants import CHECK_ESTIMATE_SAFETY
from gradcli.checks.context import (
    CONSTANT_NOTE, NUMERIC_CAP, SAMPLE, UNSEEN_NOTE, CheckContext, Outcome, Verdict, at_text, combine, summarize)
from gradcli.checks.process.interrupt import raised_by_user_code
from gradcli.checks.comparisons.judging import judge, typical_by_input, zero_of_columns
from gradcli.checks.comparisons.findings import worst
from gradcli.checks.comparisons.elements import verdict_of_elements
from gradcli.checks.comparisons.under_test import user_gradient, user_vjp_at

def _sample(ctx, n):
    rng = np.random.default_rng([ctx.seed, 7])
    return np.sort(rng.choice(n, size=SAMPLE, replace=False))


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


def reference_text(ctx, reference: str, complex_step_used: bool) -> str:
    if ctx.autodiff or reference != ctx.ad_method:
        extra = " and complex step" if complex_step_used else ""
        return f"finite differences (richardson{extra})"
    if ctx.constant:
        return "0 (traced: the output is piecewise constant in the inputs; validated by finite differences)"
    return f"{ctx.ad_label} (validated by finite differences)"
