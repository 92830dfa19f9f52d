"""The comparison behind ``run_check``: reference, tolerance, verdict (see gradcli.checks.runner); full mode
here, fast mode in gradcli.checks.fast.

Every function here reads a :class:`~gradcli.checks.context.CheckContext` and arrays and returns an
:class:`~gradcli.checks.context.Outcome`; the runner alone writes it onto the result.
"""
from __future__ import annotations

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


def compare_full(ctx: CheckContext) -> Outcome:
    """Every row of the Jacobian (the gradient, or vjp(e_j) for each output element) -> Outcome."""
    m, n = ctx.m, ctx.n
    methods, notes = {}, []

    def stopped(verdict):
        return Outcome(verdict=verdict, methods=tuple(methods.items()), notes=tuple(notes), stop=True)

    autodiff = ctx.autodiff
    got = None if autodiff else _user_rows(ctx)
    if isinstance(got, Verdict):
        return stopped(got)
    ad_rows = _ad_rows(ctx, methods, notes)
    if autodiff and ad_rows is None:
        return stopped(Verdict("skipped", "nothing to compare: no hand-written gradient, and traced AD is "
                                          "unavailable (" + "; ".join(ctx.setup_notes + tuple(notes)) + ")"))
    cols = np.arange(n)
    if n > NUMERIC_CAP and ad_rows is not None:
        cols = _sample(ctx, n)
        notes.append(f"{n} elements: finite differences on a seeded sample of {len(cols)}, {ctx.ad_label} as the "
                     "reference elsewhere")
    target = ctx.rtol / 10
    sigma = num.noise_level(ctx.numf, ctx.f0, np.random.default_rng([ctx.seed, 13]))
    numc = num.jacobian_columns(ctx.numf, ctx.f0, [ctx.label(c) for c in cols], ctx.step, target,
                                n_total=n, sigma=sigma)
    nref, nerr, kink = numc.value, numc.error, numc.kink
    ntyp = typical_by_input(ctx, nref, cols)

    # complex step: trusted where it agrees with every decided finite difference, used where those cannot decide
    cs = numc.complex_value
    cs_used = False
    if cs is None:
        methods["complex_step"] = summarize("complex_step", "unavailable", message=(
            "the function does not take complex inputs" if len(cols) <= num.COMPLEX_MAX else
            f"not run on more than {num.COMPLEX_MAX} elements"))
    else:
        diff, tol, bad, und, live = judge(ctx, cs, nref, nerr, ntyp, zero_of_columns(ctx, cols))
        bad &= ~kink
        if bad.any():
            methods["complex_step"] = summarize("complex_step", "mismatch", diff, message=(
                "disagrees with the finite differences (a non-holomorphic operation such as abs); not used"))
        else:
            use = und & np.isfinite(cs)
            nref = np.where(use, cs, nref)
            nerr = np.where(use, 1e-12 * np.fmax(np.abs(cs), ntyp), nerr)
            cs_used = bool(use.any())
            methods["complex_step"] = summarize("complex_step", "ok", diff, message=(
                f"used for {int(use.sum())} entries the differences could not decide" if use.any() else ""))

    numeric_name = "richardson"
    ref, err, ref_cols, reference = None, None, cols, numeric_name
    # a constant trace (all zeros) is a reference once the differences agree, even with no gradient under test
    if ad_rows is not None and (not autodiff or ctx.constant):
        diff, tol, bad, und, live = judge(ctx, ad_rows[:, cols], nref, nerr, ntyp, zero_of_columns(ctx, cols))
        bad &= ~kink
        if bad.any():
            nref, nerr, kink, bad = _look_closer(ctx, ad_rows, cols, bad, nref, nerr, kink, ntyp, target, sigma,
                                                 notes)
        if bad.any():
            j, k = worst(diff, tol, bad)
            name, idx = ctx.unflat_index(cols[k])
            notes.append(f"{ctx.ad_label} disagrees with the finite differences at {at_text(name, idx)} "
                         f"({ad_rows[j, cols[k]]:.6g} vs {nref[j, k]:.6g} ± {nerr[j, k]:.2g}); "
                         "finite differences used as the reference")
            if ctx.constant:
                notes.append(UNSEEN_NOTE)
            methods[ctx.ad_method] = summarize(ctx.ad_method, "mismatch", diff,
                                                  message="disagrees with the finite differences; not used")
        else:
            ref, err, ref_cols, reference = ad_rows, np.zeros_like(ad_rows), np.arange(n), ctx.ad_method
            methods[ctx.ad_method] = summarize(ctx.ad_method, "used")
            methods[numeric_name] = summarize(numeric_name, "ok", diff, message=f"{len(cols)} elements")
            full_kink = np.zeros((m, n), dtype=bool)
            full_kink[:, cols] = kink
            kink = full_kink
            if ctx.constant:
                notes.append(CONSTANT_NOTE)
    if autodiff and ctx.constant:
        return _constant_autodiff(ctx, ref is not None, methods, notes, numc, cols)
    if ref is None:
        if len(cols) < n and not autodiff:  # AD was not trusted: every element needs the differences
            numc = num.jacobian_columns(ctx.numf, ctx.f0, [ctx.label(c) for c in range(n)],
                                        ctx.step, target, sigma=sigma)
            nref, nerr, kink, cols = numc.value, numc.error, numc.kink, np.arange(n)
            notes.append("finite differences on every element")
        ref, err, ref_cols = nref, nerr, cols
        methods[numeric_name] = summarize(numeric_name, "used")
    if autodiff:
        got = ad_rows
    found = Outcome(methods=tuple(methods.items()), notes=tuple(notes), reference=reference)
    return combine(found, verdict_of_elements(ctx, got[:, ref_cols], ref, err, kink, ref_cols,
                                              reference_text(ctx, reference, cs_used), sigma=sigma))


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


def verdict_of_elements(ctx, got, ref, err, kink, cols, refdesc: str, identity=None,
                        cotangents=None, sigma=0.0) -> Outcome:
    """Compare ``got`` with ``ref`` entry by entry ((m, len(cols))) -> the status, message, mismatches.
    ``identity()`` (fast mode) may decide after the elements pass: an Outcome, or None.
    ``cotangents`` (v, (r, m)): the rows are J^T v for them, so an entry is an input
    element (a column), counted once however many rows it is wrong in. ``sigma``: f's measured noise."""
    typ = typical_by_input(ctx, ref, cols)
    diff, tol, bad, und, live = judge(ctx, got, ref, err, typ, zero_of_columns(ctx, cols, cotangents))
    cotangent_rows = cotangents is not None
    # an input given as nan or inf has no derivative: its entries are undefined, whatever either side says
    given = ~np.isfinite(ctx.flat({k: ctx.base[k] for k in ctx.wrt}))[np.asarray(cols)]
    live &= ~given
    bad &= ~kink & live
    und &= ~kink & live
    if ctx.autodiff:
        # traced AD's exact zero, which the differences agree with to their error, is not in doubt
        und &= got != 0
    undefined = ~live
    with np.errstate(all="ignore"):
        rel = np.where(ref != 0, diff / np.abs(ref), np.where(diff == 0, 0.0, np.inf))
    ok = live & ~kink
    name = under_test_name(ctx)
    max_abs = float(diff[ok].max()) if ok.any() else None
    # where 0 is expected the relative error is infinite: it counts for the failing entries (got 1 for
    # 0), not for the passing ones (a 1e-20 within the tolerance)
    shown = rel[ok & (np.isfinite(rel) | bad)]
    max_rel = float(shown.max()) if shown.size else None
    errors = (max_abs, max_rel)
    under = describe_under_test(ctx)
    which = ctx.input_of(cols)
    digits, underflow = precision_by_input(ctx, got, ref, typ, cols, diff)
    precision = None if digits is None else (digits, underflow)
    if bad.any():
        score = badness(diff, tol, bad)
        if cotangent_rows:
            rows = np.argmax(score, axis=0)  # each element's worst cotangent
            flat = worst_entries(score.max(axis=0)[None], which[None])
            picks = [(int(rows[k]), int(k)) for k in flat]
            counted = count_text(ctx, bad.any(axis=0)[None], live.any(axis=0)[None], which)
        else:
            flat = worst_entries(score, np.broadcast_to(which, score.shape), also=largest_wrong(rel, bad))
            picks = [tuple(int(i) for i in np.unravel_index(f, bad.shape)) for f in flat]
            counted = count_text(ctx, bad, live, which)
        found = [mismatch(ctx, int(cols[k]), ref[j, k], got[j, k], None if cotangent_rows else j) for j, k in picks]
        w = found[0]
        where = at_text(w.input, w.index) + (f" (output {list(w.output_index)})" if w.output_index else "")
        if cotangent_rows and not ctx.scalar:
            where += f" (random cotangent {picks[0][0]})"

        def row_text(j):  # the row an entry is in: an output, or a random cotangent
            if ctx.scalar:
                return ""
            return f" (random cotangent {j})" if cotangent_rows else f" (output {list(ctx.out_index(j))})"
        return Outcome(
            verdict=Verdict("fail", f"{under} disagrees with {refdesc} at {where}: expected {w.expected:.8g}, got "
                                    f"{w.got:.8g} (rel error {w.rel_error:.2g}); {counted}"
                                    + underflow_text(ctx, w.expected, underflow)
                                    + largest_elsewhere(ctx, rel, ok & (np.isfinite(rel) | bad), bad, cols,
                                                        w.rel_error, row_text)
                                    + _swap_hint(ctx, got, ref, err, typ, kink, live, cols, cotangents)),
            methods=((name, summarize(name, "mismatch", diff[ok], rel[ok])),), mismatches=tuple(found), errors=errors,
            precision=precision, notes=(_undefined_text(ctx, undefined, cols),) if undefined.any() else ())
    elements = Outcome(methods=((name, summarize(name, "ok", diff[ok], rel[ok])),), errors=errors,
                       precision=precision)
    if identity is not None:
        decided = identity()
        if decided is not None:
            return combine(elements, decided)
    if und.any():
        j, k = worst(CHECK_ESTIMATE_SAFETY * err, tol - CHECK_ESTIMATE_SAFETY * err, und)
        nm, idx = ctx.unflat_index(int(cols[k]))
        message = (f"{int(und.sum())} of {int(live.sum())} entries cannot be decided: the finite-difference error "
                   f"estimate ({err[j, k]:.2g} at {at_text(nm, idx)}) is too large for the tolerance "
                   f"({tol[j, k] - CHECK_ESTIMATE_SAFETY * err[j, k]:.2g}) and {ctx.ad_label} was not available to decide; "
                   f"try {float64_hint(ctx, sigma)}another point (seed=), or a larger step (eps=)")
        return combine(elements, Outcome(verdict=Verdict("inconclusive", message)))
    at_kink = ()
    if kink.any() and framework_under_test(ctx) and not cotangent_rows:
        # a framework's rule gives a number at a kink by its own convention: valid if it is a subgradient
        decided = subgradient.at_kinks_full(ctx, got, kink, cols, typ, under)
        if decided.verdict is not None:
            return combine(elements, decided)
        at_kink = (decided,)
    elif kink.any():
        j, k = np.unravel_index(int(np.argmax(kink)), kink.shape)
        nm, idx = ctx.unflat_index(int(cols[k]))
        nk = int(kink.any(axis=0).sum())
        message = (f"{at_text(nm, idx)} sits on a kink: the one-sided slopes differ, so the gradient does not exist "
                   f"there" + (f" ({nk} elements on kinks)" if nk > 1 else "")
                   + (f"; the other entries agree with {refdesc}" if nk < kink.shape[1] else ""))
        return combine(elements, Outcome(verdict=Verdict("nondifferentiable", message)))
    if undefined.any():
        message = _undefined_text(ctx, undefined, cols) + (
            f"; the other entries agree with {refdesc}" if live.any() else "")
        return combine(elements, Outcome(verdict=Verdict("undefined", message)))
    entries = int(live.any(axis=0).sum()) if cotangent_rows else int(live.sum())
    unit = "input elements" if cotangent_rows or live.shape[0] == 1 else "Jacobian entries"
    message = (f"{under} agrees with {refdesc} ({entries} {unit}, max rel error "
               f"{max_rel if max_rel is not None else 0:.2g})")
    return combine(elements, Outcome(verdict=Verdict("pass", message)), *at_kink)


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

