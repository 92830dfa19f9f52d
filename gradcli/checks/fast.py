"""Fast mode of ``run_check``: seeded random directions u and cotangents v instead of the whole Jacobian.

<u, J^T v> (J^T v from the code under test) must equal <J u, v> (J u by finite differences); where traced AD
is trusted, J^T v is also compared with AD's element by element (gradcli.checks.compare).
"""
from __future__ import annotations

import numpy as np

from gradcli.checks import numeric as num
from gradcli.checks import subgradient
from gradcli.checks.compare import (
    CLOSER, describe_under_test, reference_text, under_test_name, verdict_of_elements)
from gradcli.checks.interrupt import raised_by_user_code
from gradcli.checks.judging import judge, zero_of_directions
from gradcli.checks.findings import float64_hint
from gradcli.core.constants import CHECK_ESTIMATE_SAFETY
from gradcli.checks.context import (
    CONSTANT_NOTE, DIRECTIONS, UNSEEN_NOTE, CheckContext, Outcome, Verdict, at_text, badness, combine, summarize)
from gradcli.checks.result import Mismatch
from gradcli.checks.under_test import framework_under_test, user_gradient, user_vjp_at


def compare_fast(ctx: CheckContext) -> Outcome:
    """Random directions u and cotangents v: <u, J^T v> under test against <J u, v> by differences, and
    J^T v element by element against traced AD where AD is trusted -> Outcome."""
    m = ctx.m
    methods, notes = {}, []

    def found(**kw):
        return Outcome(methods=tuple(methods.items()), notes=tuple(notes), **kw)

    autodiff = ctx.autodiff
    rng = np.random.default_rng([ctx.seed, 11])
    finite_in, finite_out = _finite(ctx)
    us = [_directions_within(ctx, u, finite_in) for u in num.random_directions(ctx.numf, DIRECTIONS, rng)]
    vs = [np.ones(1) if ctx.scalar else rng.standard_normal(m) * finite_out for _ in us]
    target = ctx.rtol / 10
    sigma = num.noise_level(ctx.numf, ctx.f0, np.random.default_rng([ctx.seed, 13]))
    ests = [num.directional(ctx.numf, ctx.f0, u, ctx.step, target, sigma=sigma) for u in us]
    lhs = np.array([float(_within(e.value, finite_out) @ v) for e, v in zip(ests, vs)])
    lerr = np.array([float(np.abs(v) @ _within(e.error, finite_out)) for e, v in zip(ests, vs)])
    kinks = np.array([bool(e.kink.any()) for e in ests])
    kinked = bool(kinks.any())
    # a framework's rule at a kink is judged as a subgradient (gradcli.checks.subgradient), along the
    # directions that cross it; neither the differences there nor the framework's AD are a reference
    at_kink = kinked and framework_under_test(ctx) is not None

    ad_w = None
    if ctx.ad is not None:
        try:
            if ctx.scalar:
                g = ctx.flat(ctx.ad.gradient())
                ad_w = [g * v[0] for v in vs]
            else:
                ad_w = [ctx.flat(ctx.ad.vjp(v.reshape(ctx.out_shape))) for v in vs]
        except Exception as exc:  # noqa: BLE001
            notes.append(f"{ctx.ad_label} failed ({raised_by_user_code(exc)}); finite differences used")
            ad_w = None
    uflat = [ctx.flat(u) for u in us]

    def identity_rows(ws):
        with np.errstate(all="ignore"):  # gradients near float64's limit: an inf product, judged as such
            return np.array([float(u @ _within(w, finite_in)) for u, w in zip(uflat, ws)])

    scale = np.median(np.abs(lhs)) * np.ones(len(us))
    if autodiff:
        if ad_w is None:
            return found(verdict=Verdict("skipped", "nothing to compare: no hand-written gradient, and traced AD "
                                                    "is unavailable ("
                                         + "; ".join(ctx.setup_notes + tuple(notes)) + ")"), stop=True)
        got_w = ad_w
    elif ctx.scalar and ctx.vjp is None:
        g = user_gradient(ctx, "the gradient function", ctx.user_grads)
        if isinstance(g, Verdict):
            return found(verdict=g, stop=True)
        g = ctx.flat(g)
        got_w = [g * v[0] for v in vs]
    else:
        if ctx.vjp is None:
            return found(verdict=Verdict("fail", f"the output has shape {ctx.out_shape}, so a gradient is not "
                                                 "defined: register a vector-Jacobian product with @f.vjp instead"),
                         stop=True)
        got_w = []
        for v in vs:
            g = user_vjp_at(ctx, v)
            if isinstance(g, Verdict):
                return found(verdict=g, stop=True)
            got_w.append(ctx.flat(g))
    if not finite_out.all() and not np.isfinite(np.stack(got_w)[:, finite_in]).all():
        # a finite input whose output is not finite (sin(x) * y with x = inf: y's cofactor is nan) has no
        # derivative either, but the directions cannot say which inputs those are: full mode can
        given = _given_text(ctx, finite_in) + "; and " if not finite_in.all() else ""
        return found(verdict=Verdict("undefined", given + f"{describe_under_test(ctx)} is not finite at inputs that "
                                                          "are: mode='full' judges the other elements"), stop=True)

    reference = "richardson"
    trusted = False
    # a constant trace (all zeros) is a reference once the differences agree, even with no gradient under test
    if ad_w is not None and (not autodiff or ctx.constant) and not at_kink:
        adl = identity_rows(ad_w)
        with np.errstate(all="ignore"):
            rss = np.array([np.sqrt(np.sum((u * _within(w, finite_in)) ** 2)) for u, w in zip(uflat, ad_w)])
        zero = zero_of_directions(ctx, (1, len(us)), np.stack(vs))
        diff, tol, bad, und, live = judge(ctx, adl[None], lhs[None], lerr[None], np.fmax(scale, rss)[None], zero)
        if bad.any():  # a kink within the steps? (see _look_closer) look again with smaller ones
            for a in np.flatnonzero(bad[0]):
                e = num.directional(ctx.numf, ctx.f0, us[a], ctx.step * CLOSER, target, sigma=sigma)
                near, near_err = float(e.value @ vs[a]), float(np.abs(vs[a]) @ e.error)
                _, _, b2, u2, _ = judge(ctx, adl[None, a:a + 1], np.array([[near]]), np.array([[near_err]]),
                                        np.fmax(scale, rss)[None, a:a + 1],
                                        zero_of_directions(ctx, (1, 1), vs[a][None]))
                if not (b2.any() or u2.any() or e.kink.any()):
                    lhs[a], lerr[a] = near, near_err
                elif abs(near - lhs[a]) > CHECK_ESTIMATE_SAFETY * (near_err + lerr[a]):
                    lerr[a] = max(lerr[a], abs(near - lhs[a]))  # the two step sizes disagree: no reference
            diff, tol, bad, und, live = judge(ctx, adl[None], lhs[None], lerr[None], np.fmax(scale, rss)[None], zero)
            if not bad.any():
                notes.append("the finite differences along a random direction reach across a kink near the "
                             f"point; steps {1 / CLOSER:.0f} times smaller were used there")
        if bad.any():
            notes.append(f"{ctx.ad_label} disagrees with finite differences along a random direction; "
                         "finite differences used as the reference")
            if ctx.constant:
                notes.append(UNSEEN_NOTE)
            methods[ctx.ad_method] = summarize(ctx.ad_method, "mismatch", diff)
        else:
            trusted = True
            reference = ctx.ad_method
            methods[ctx.ad_method] = summarize(ctx.ad_method, "used")
            methods["richardson"] = summarize("richardson", "ok", diff, message=f"{len(us)} random directions")
            scale = np.fmax(scale, rss)
            if ctx.constant:
                notes.append(CONSTANT_NOTE)
    if autodiff and ctx.constant:
        if not trusted:
            return found(verdict=Verdict("skipped", "nothing to compare: no hand-written gradient, and traced AD is "
                                                    f"unavailable ({UNSEEN_NOTE})"), stop=True)
        return found(verdict=Verdict("pass", f"traced AD gives 0 (the output is piecewise constant in the inputs), "
                                             f"and the finite differences agree along {len(us)} random directions"),
                     reference=reference, errors=(float(np.max(np.abs(lhs), initial=0.0)), None))
    if "richardson" not in methods:
        methods["richardson"] = summarize("richardson", "used", message=f"{len(us)} random directions")
    name, under = under_test_name(ctx), describe_under_test(ctx)

    def identity_check():
        """<u, J^T v> under test against <J u, v> by differences -> the Outcome if it decides, else None."""
        got_l = identity_rows(got_w)
        diff, tol, bad, und, live = judge(ctx, got_l[None], lhs[None], lerr[None], scale[None],
                                          zero_of_directions(ctx, (1, len(us)), np.stack(vs)))
        if autodiff:
            und &= got_l[None] != 0  # traced AD's exact zero, which the differences agree with to their error
        if at_kink:
            bad &= ~kinks[None]
            und &= ~kinks[None]
        if bad.any():
            a = int(np.argmax(badness(diff, tol, bad)[0]))
            wrong = Mismatch("<u, J^T v>", (a,), float(lhs[a]), float(got_l[a]), float(diff[0, a]),
                             float(diff[0, a] / abs(lhs[a])) if lhs[a] else float("inf"))
            probed, off = _probe_inputs(ctx, us[a], vs[a], got_w[a], scale[a], target, sigma)
            return Outcome(verdict=Verdict("fail", f"{under} fails <u, J^T v> = <J u, v> for random direction {a}: "
                                                   f"finite differences give {lhs[a]:.8g}, {under} gives "
                                                   f"{got_l[a]:.8g}" + probed),
                           mismatches=(wrong, *off), methods=((name, summarize(name, "mismatch", diff)),))
        if und.any() and not trusted:
            return Outcome(verdict=Verdict("inconclusive", (
                "the finite-difference error estimate along a random direction is too large for the "
                f"tolerance, and {ctx.ad_label} was not available to decide; try {float64_hint(ctx, sigma)}another "
                "point (seed=), a larger step (eps=) or mode='full'")))
        return None

    if trusted:
        got, ref = np.stack(got_w), np.stack(ad_w)
        no_kink = np.zeros(got.shape, dtype=bool)
        decided = verdict_of_elements(ctx, got, ref, np.zeros_like(ref), no_kink, np.arange(ctx.n),
                                      reference_text(ctx, reference, False), identity=identity_check,
                                      cotangents=np.stack(vs))
        outcome = combine(found(reference=reference), decided)
    else:
        methods[name] = summarize(name, "ok")
        decided = identity_check()
        if decided is None and at_kink:
            decided = subgradient.at_kinks_fast(ctx, us, vs, got_w, kinks, under)
            if decided.verdict is None:
                smooth = int((~kinks).sum())
                decided = combine(Outcome(verdict=Verdict("pass", (
                    f"{under} satisfies <u, J^T v> = <J u, v> for {smooth} random directions and cotangents (finite "
                    "differences)" if smooth else f"every random direction crosses a kink at the inputs, where "
                                                  f"{under} is judged as a subgradient"))), decided)
        if decided is None and not finite_in.all():
            decided = Outcome(verdict=Verdict("undefined", (
                _given_text(ctx, finite_in) + f"; the other elements satisfy "
                f"<u, J^T v> = <J u, v> for {len(us)} random directions and cotangents (finite differences)")))
        if decided is None:
            if kinked:
                decided = Outcome(verdict=Verdict("nondifferentiable", "a random direction crosses a kink at the "
                                                                       "inputs (the one-sided slopes differ)"))
            else:
                decided = Outcome(verdict=Verdict("pass", f"{under} satisfies <u, J^T v> = <J u, v> for {len(us)} "
                                                          "random directions and cotangents (finite differences)"
                                                  + resolution_text(ctx)))
        outcome = combine(found(reference=reference), decided)
    if not finite_in.all() and outcome.verdict is not None and outcome.verdict.status == "fail" \
            and not trusted:  # the element comparison notes them itself
        outcome = combine(outcome, Outcome(notes=(_given_text(ctx, finite_in),)))
    if trusted and outcome.verdict is not None and outcome.verdict.status == "pass":
        outcome = combine(outcome, Outcome(suffix=f"; and <u, J^T v> = <J u, v> holds for {len(us)} random "
                                                  "directions"))
    return outcome


def _finite(ctx: CheckContext):
    """(input elements given finite, output elements finite), flat. An input given as nan or inf has no
    derivative, and the outputs it reaches none either: the random directions and cotangents leave them
    out, so that they do not mix into every element (the other elements are judged, as in full mode)."""
    return np.isfinite(ctx.flat({k: ctx.base[k] for k in ctx.wrt})), np.isfinite(ctx.f0)


def _given_text(ctx: CheckContext, finite_in) -> str:
    """Where the first input element given as nan or inf is (the words of full mode's undefined entries)."""
    nm, idx = ctx.unflat_index(int(np.argmin(finite_in)))
    more = int((~finite_in).sum()) - 1
    return (f"no derivative at {at_text(nm, idx)}: the input is {np.asarray(ctx.base[nm])[tuple(idx)]} there"
            + (f" ({more} more input elements not finite)" if more else ""))


def _directions_within(ctx: CheckContext, u: dict, finite_in) -> dict:
    """The direction ``u`` with no component along the input elements that are not finite."""
    return {name: np.where(finite_in[ctx.offsets[k]:ctx.offsets[k + 1]].reshape(np.shape(u[name])), u[name], 0.0)
            for k, name in enumerate(ctx.wrt)}


def _within(a, finite):
    """``a`` with 0 where ``finite`` is False: a nan there would make every product with it nan."""
    return np.where(finite, a, 0.0)


def resolution_text(ctx: CheckContext) -> str:
    """What the identity alone can miss: <u, J^T v> sums n terms, so an error at one element of n moves it
    by about 1/sqrt(n) of its relative size, and passes below rtol sqrt(n)."""
    if ctx.n < 2:
        return ""
    return (f"; its resolution: one element of {ctx.n} wrong by less than about {ctx.rtol * np.sqrt(ctx.n):.2g} "
            "relative (rtol x sqrt(elements)) can pass; mode='full' checks every element")


def _probe_inputs(ctx: CheckContext, u: dict, v: np.ndarray, w: np.ndarray, scale: float, target: float, sigma):
    """Where <u, J^T v> = <J u, v> fails with more than one input: the identity again with u moving one
    input at a time, which names the inputs whose gradient is off -> (text for the message, Mismatches)."""
    if len(ctx.wrt) < 2:
        return "", ()
    off, undecided, found = [], [], []
    finite_in, finite_out = _finite(ctx)
    for k, name in enumerate(ctx.wrt):
        e = num.directional(ctx.numf, ctx.f0, {name: u[name]}, ctx.step, target, sigma=sigma)
        fd, fd_err = float(_within(e.value, finite_out) @ v), float(np.abs(v) @ _within(e.error, finite_out))
        part = _within(w, finite_in)[ctx.offsets[k]:ctx.offsets[k + 1]]
        got = float(np.asarray(u[name], dtype=np.float64).ravel() @ part)
        diff, tol, bad, und, live = judge(ctx, np.array([[got]]), np.array([[fd]]), np.array([[fd_err]]),
                                          np.array([[scale]]))
        if bad.any():
            off.append(f"{name} ({got:.6g} where the differences give {fd:.6g})")
            found.append(Mismatch(f"<u_{name}, J^T v>", (), fd, got, float(diff[0, 0]),
                                  float(diff[0, 0] / abs(fd)) if fd else float("inf")))
        elif und.any():
            undecided.append(name)
    if off:
        text = (f"; moving one input at a time, the gradient of {', '.join(off)} is off"
                + (f" ({', '.join(undecided)} undecided)" if undecided else ""))
    else:
        text = "; moving one input at a time, no single input's part fails by itself"
    return text, tuple(found)
