"""Fast mode of ``run_check``: seeded random directions u and cotangents v instead of the whole Jacobian.

<u, J^T v> (J^T v from the code under test) must equal <J u, v> (J u by finite differences); where traced AD
is trusted, J^T v is also compared with AD's element by element (gradcli.checks.comparisons.full).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gradcli.checks.comparisons import numeric as num
from gradcli.checks.comparisons import subgradient
from gradcli.checks.comparisons.elements import describe_under_test, under_test_name, verdict_of_elements
from gradcli.checks.comparisons.full import CLOSER, reference_text
from gradcli.checks.process.interrupt import raised_by_user_code
from gradcli.checks.comparisons.judging import judge, zero_of_directions
from gradcli.checks.comparisons.findings import float64_hint
from gradcli.core.constants import CHECK_ESTIMATE_SAFETY
from gradcli.checks.context import (
    CONSTANT_NOTE, DIRECTIONS, UNSEEN_NOTE, CheckContext, Outcome, Verdict, at_text, badness, combine, summarize)
from gradcli.checks.result import Mismatch
from gradcli.checks.comparisons.under_test import framework_under_test, user_gradient, user_vjp_at


@dataclass(frozen=True)
class _Probe:
    """The seeded random directions and cotangents, and <J u, v> by finite differences along them: what the
    steps of fast mode share."""

    us: tuple  # the directions u, {input: array}, with no component along inputs given as nan or inf
    uflat: tuple  # the same, flat
    vs: tuple  # the cotangents v, flat, 0 at the outputs that are not finite
    finite_in: np.ndarray
    finite_out: np.ndarray
    target: float  # the error the differences aim for
    sigma: float  # f's measured noise
    lhs: np.ndarray  # <J u, v> by differences, by direction
    lerr: np.ndarray  # its error estimate
    kinks: np.ndarray  # whether the differences along a direction cross a kink
    scale: np.ndarray  # the size the identity is judged against, by direction
    at_kink: bool  # the framework's own rule is under test and a direction crosses a kink

    @property
    def kinked(self) -> bool:
        return bool(self.kinks.any())


@dataclass(frozen=True)
class _Trust:
    """Whether traced AD agrees with the differences along every direction, so that it is the reference."""

    trusted: bool
    reference: str
    probe: _Probe  # lhs and lerr after any look with smaller steps; scale widened where AD is trusted
    notes: tuple = ()
    methods: tuple = ()  # (name, MethodSummary) pairs, in the order they were decided


def compare_fast(ctx: CheckContext) -> Outcome:
    """Random directions u and cotangents v: <u, J^T v> under test against <J u, v> by differences, and
    J^T v element by element against traced AD where AD is trusted -> Outcome."""
    probe = _probe(ctx)
    ad_w, notes = _ad_products(ctx, probe.vs)
    got_w = _products_under_test(ctx, probe, ad_w, notes)
    if isinstance(got_w, Verdict):
        return Outcome(verdict=got_w, notes=notes, stop=True)
    trust = _trust_ad(ctx, probe, ad_w)
    probe, notes, methods = trust.probe, notes + trust.notes, dict(trust.methods)
    if ctx.autodiff and ctx.constant:
        return combine(Outcome(methods=tuple(methods.items()), notes=notes), _constant_trace(probe, trust))
    if "richardson" not in methods:
        methods["richardson"] = summarize("richardson", "used", message=f"{len(probe.us)} random directions")
    if trust.trusted:
        decided = _decide_trusted(ctx, probe, got_w, ad_w, trust.reference)
    else:
        name = under_test_name(ctx)
        methods[name] = summarize(name, "ok")
        decided = _decide_untrusted(ctx, probe, got_w)
    outcome = combine(Outcome(methods=tuple(methods.items()), notes=notes, reference=trust.reference), decided)
    return _closing_words(ctx, probe, outcome, trust.trusted)


def _probe(ctx: CheckContext) -> _Probe:
    """The seeded directions and cotangents, and the finite differences along them."""
    rng = np.random.default_rng([ctx.seed, 11])
    finite_in, finite_out = _finite(ctx)
    us = tuple(_directions_within(ctx, u, finite_in) for u in num.random_directions(ctx.numf, DIRECTIONS, rng))
    vs = tuple(np.ones(1) if ctx.scalar else rng.standard_normal(ctx.m) * finite_out for _ in us)
    target = ctx.rtol / 10
    sigma = num.noise_level(ctx.numf, ctx.f0, np.random.default_rng([ctx.seed, 13]))
    ests = [num.directional(ctx.numf, ctx.f0, u, ctx.step, target, sigma=sigma) for u in us]
    lhs = np.array([float(_within(e.value, finite_out) @ v) for e, v in zip(ests, vs)])
    lerr = np.array([float(np.abs(v) @ _within(e.error, finite_out)) for e, v in zip(ests, vs)])
    kinks = np.array([bool(e.kink.any()) for e in ests])
    # a framework's rule at a kink is judged as a subgradient (gradcli.checks.comparisons.subgradient), along the
    # directions that cross it; neither the differences there nor the framework's AD are a reference
    at_kink = bool(kinks.any()) and framework_under_test(ctx) is not None
    return _Probe(us=us, uflat=tuple(ctx.flat(u) for u in us), vs=vs, finite_in=finite_in, finite_out=finite_out,
                  target=target, sigma=sigma, lhs=lhs, lerr=lerr, kinks=kinks,
                  scale=np.median(np.abs(lhs)) * np.ones(len(us)), at_kink=at_kink)


def _ad_products(ctx: CheckContext, vs) -> tuple:
    """J^T v by traced AD for each cotangent -> (the products, or None where AD is absent or failed; notes)."""
    if ctx.ad is None:
        return None, ()
    try:
        if ctx.scalar:
            g = ctx.flat(ctx.ad.gradient())
            return [g * v[0] for v in vs], ()
        return [ctx.flat(ctx.ad.vjp(v.reshape(ctx.out_shape))) for v in vs], ()
    except Exception as exc:  # noqa: BLE001
        return None, (f"{ctx.ad_label} failed ({raised_by_user_code(exc)}); finite differences used",)


def _products_under_test(ctx: CheckContext, probe: _Probe, ad_w, notes: tuple):
    """J^T v under test for each cotangent -> the products, or the Verdict that ends the check."""
    if ctx.autodiff:
        if ad_w is None:
            return Verdict("skipped", "nothing to compare: no hand-written gradient, and traced AD is unavailable ("
                                      + "; ".join(ctx.setup_notes + notes) + ")")
        got_w = ad_w
    elif ctx.scalar and ctx.vjp is None:
        g = user_gradient(ctx, "the gradient function", ctx.user_grads)
        if isinstance(g, Verdict):
            return g
        g = ctx.flat(g)
        got_w = [g * v[0] for v in probe.vs]
    else:
        if ctx.vjp is None:
            return Verdict("fail", f"the output has shape {ctx.out_shape}, so a gradient is not defined: register a "
                                   "vector-Jacobian product with @f.vjp instead")
        got_w = []
        for v in probe.vs:
            g = user_vjp_at(ctx, v)
            if isinstance(g, Verdict):
                return g
            got_w.append(ctx.flat(g))
    if not probe.finite_out.all() and not np.isfinite(np.stack(got_w)[:, probe.finite_in]).all():
        # a finite input whose output is not finite (sin(x) * y with x = inf: y's cofactor is nan) has no
        # derivative either, but the directions cannot say which inputs those are: full mode can
        given = _given_text(ctx, probe.finite_in) + "; and " if not probe.finite_in.all() else ""
        return Verdict("undefined", given + f"{describe_under_test(ctx)} is not finite at inputs that are: "
                                            "mode='full' judges the other elements")
    return got_w


def _identity_rows(probe: _Probe, ws) -> np.ndarray:
    """<u, w> for each direction u and its product w = J^T v, over the input elements given finite."""
    with np.errstate(all="ignore"):  # gradients near float64's limit: an inf product, judged as such
        return np.array([float(u @ _within(w, probe.finite_in)) for u, w in zip(probe.uflat, ws)])


def _trust_ad(ctx: CheckContext, probe: _Probe, ad_w) -> _Trust:
    """Whether <u, J^T v> by traced AD agrees with the differences along every direction."""
    # a constant trace (all zeros) is a reference once the differences agree, even with no gradient under test
    if ad_w is None or (ctx.autodiff and not ctx.constant) or probe.at_kink:
        return _Trust(trusted=False, reference="richardson", probe=probe)
    adl = _identity_rows(probe, ad_w)
    with np.errstate(all="ignore"):
        rss = np.array([np.sqrt(np.sum((u * _within(w, probe.finite_in)) ** 2)) for u, w in zip(probe.uflat, ad_w)])
    scale = np.fmax(probe.scale, rss)
    zero = zero_of_directions(ctx, (1, len(probe.us)), np.stack(probe.vs))
    diff, tol, bad, und, live = judge(ctx, adl[None], probe.lhs[None], probe.lerr[None], scale[None], zero)
    notes = []
    if bad.any():  # a kink within the steps? (see compare._look_closer) look again with smaller ones
        probe = _smaller_steps(ctx, probe, adl, scale, bad[0])
        diff, tol, bad, und, live = judge(ctx, adl[None], probe.lhs[None], probe.lerr[None], scale[None], zero)
        if not bad.any():
            notes.append("the finite differences along a random direction reach across a kink near the point; "
                         f"steps {1 / CLOSER:.0f} times smaller were used there")
    if bad.any():
        notes.append(f"{ctx.ad_label} disagrees with finite differences along a random direction; "
                     "finite differences used as the reference")
        if ctx.constant:
            notes.append(UNSEEN_NOTE)
        return _Trust(trusted=False, reference="richardson", probe=probe, notes=tuple(notes),
                      methods=((ctx.ad_method, summarize(ctx.ad_method, "mismatch", diff)),))
    if ctx.constant:
        notes.append(CONSTANT_NOTE)
    methods = ((ctx.ad_method, summarize(ctx.ad_method, "used")),
               ("richardson", summarize("richardson", "ok", diff, message=f"{len(probe.us)} random directions")))
    return _Trust(trusted=True, reference=ctx.ad_method, probe=replace(probe, scale=scale), notes=tuple(notes),
                  methods=methods)


def _smaller_steps(ctx: CheckContext, probe: _Probe, adl: np.ndarray, scale: np.ndarray, bad) -> _Probe:
    """The differences again with smaller steps along the directions where AD disagrees -> the probe with
    the estimates that the smaller steps settle, and a wider error where the two step sizes disagree."""
    lhs, lerr = probe.lhs.copy(), probe.lerr.copy()
    for a in np.flatnonzero(bad):
        v = probe.vs[a]
        e = num.directional(ctx.numf, ctx.f0, probe.us[a], ctx.step * CLOSER, probe.target, sigma=probe.sigma)
        near, near_err = float(e.value @ v), float(np.abs(v) @ e.error)
        _, _, b2, u2, _ = judge(ctx, adl[None, a:a + 1], np.array([[near]]), np.array([[near_err]]),
                                scale[None, a:a + 1], zero_of_directions(ctx, (1, 1), v[None]))
        if not (b2.any() or u2.any() or e.kink.any()):
            lhs[a], lerr[a] = near, near_err
        elif abs(near - lhs[a]) > CHECK_ESTIMATE_SAFETY * (near_err + lerr[a]):
            lerr[a] = max(lerr[a], abs(near - lhs[a]))  # the two step sizes disagree: no reference
    return replace(probe, lhs=lhs, lerr=lerr)


def _constant_trace(probe: _Probe, trust: _Trust) -> Outcome:
    """Traced AD under test with a constant trace: a pass where the differences agree it is 0, else skipped."""
    if not trust.trusted:
        return Outcome(verdict=Verdict("skipped", "nothing to compare: no hand-written gradient, and traced AD is "
                                                  f"unavailable ({UNSEEN_NOTE})"), stop=True)
    return Outcome(verdict=Verdict("pass", "traced AD gives 0 (the output is piecewise constant in the inputs), and "
                                           f"the finite differences agree along {len(probe.us)} random directions"),
                   reference=trust.reference, errors=(float(np.max(np.abs(probe.lhs), initial=0.0)), None))


def _identity_check(ctx: CheckContext, probe: _Probe, got_w, trusted: bool) -> Outcome | None:
    """<u, J^T v> under test against <J u, v> by differences -> the Outcome if it decides, else None."""
    lhs, us = probe.lhs, probe.us
    got_l = _identity_rows(probe, got_w)
    diff, tol, bad, und, live = judge(ctx, got_l[None], lhs[None], probe.lerr[None], probe.scale[None],
                                      zero_of_directions(ctx, (1, len(us)), np.stack(probe.vs)))
    if ctx.autodiff:
        und &= got_l[None] != 0  # traced AD's exact zero, which the differences agree with to their error
    if probe.at_kink:
        bad &= ~probe.kinks[None]
        und &= ~probe.kinks[None]
    if bad.any():
        name, under = under_test_name(ctx), describe_under_test(ctx)
        a = int(np.argmax(badness(diff, tol, bad)[0]))
        wrong = Mismatch("<u, J^T v>", (a,), float(lhs[a]), float(got_l[a]), float(diff[0, a]),
                         float(diff[0, a] / abs(lhs[a])) if lhs[a] else float("inf"))
        probed, off = _probe_inputs(ctx, us[a], probe.vs[a], got_w[a], probe.scale[a], probe.target, probe.sigma)
        return Outcome(verdict=Verdict("fail", f"{under} fails <u, J^T v> = <J u, v> for random direction {a}: "
                                               f"finite differences give {lhs[a]:.8g}, {under} gives "
                                               f"{got_l[a]:.8g}" + probed),
                       mismatches=(wrong, *off), methods=((name, summarize(name, "mismatch", diff)),))
    if und.any() and not trusted:
        return Outcome(verdict=Verdict("inconclusive", (
            "the finite-difference error estimate along a random direction is too large for the tolerance, and "
            f"{ctx.ad_label} was not available to decide; try {float64_hint(ctx, probe.sigma)}another point "
            "(seed=), a larger step (eps=) or mode='full'")))
    return None


def _decide_trusted(ctx: CheckContext, probe: _Probe, got_w, ad_w, reference: str) -> Outcome:
    """J^T v under test element by element against traced AD's, then the identity."""
    got, ref = np.stack(got_w), np.stack(ad_w)
    no_kink = np.zeros(got.shape, dtype=bool)
    return verdict_of_elements(ctx, got, ref, np.zeros_like(ref), no_kink, np.arange(ctx.n),
                               reference_text(ctx, reference, False),
                               identity=lambda: _identity_check(ctx, probe, got_w, trusted=True),
                               cotangents=np.stack(probe.vs))


def _decide_untrusted(ctx: CheckContext, probe: _Probe, got_w) -> Outcome:
    """With differences alone: the identity, then a framework's rule at a kink as a subgradient, then the
    inputs given as nan or inf, then a kink the identity cannot judge; else a pass."""
    under, n_dirs = describe_under_test(ctx), len(probe.us)
    decided = _identity_check(ctx, probe, got_w, trusted=False)
    if decided is None and probe.at_kink:
        decided = subgradient.at_kinks_fast(ctx, probe.us, probe.vs, got_w, probe.kinks, under)
        if decided.verdict is None:
            smooth = int((~probe.kinks).sum())
            decided = combine(Outcome(verdict=Verdict("pass", (
                f"{under} satisfies <u, J^T v> = <J u, v> for {smooth} random directions and cotangents (finite "
                "differences)" if smooth else f"every random direction crosses a kink at the inputs, where "
                                              f"{under} is judged as a subgradient"))), decided)
    if decided is None and not probe.finite_in.all():
        decided = Outcome(verdict=Verdict("undefined", (
            _given_text(ctx, probe.finite_in) + f"; the other elements satisfy "
            f"<u, J^T v> = <J u, v> for {n_dirs} random directions and cotangents (finite differences)")))
    if decided is None:
        if probe.kinked:
            decided = Outcome(verdict=Verdict("nondifferentiable", "a random direction crosses a kink at the "
                                                                   "inputs (the one-sided slopes differ)"))
        else:
            decided = Outcome(verdict=Verdict("pass", f"{under} satisfies <u, J^T v> = <J u, v> for {n_dirs} "
                                                      "random directions and cotangents (finite differences)"
                                              + resolution_text(ctx)))
    return decided


def _closing_words(ctx: CheckContext, probe: _Probe, outcome: Outcome, trusted: bool) -> Outcome:
    """A failure's note on the inputs given as nan or inf, and a trusted pass's word on the identity."""
    status = outcome.verdict.status if outcome.verdict is not None else None
    if not probe.finite_in.all() and status == "fail" and not trusted:  # the element comparison notes them itself
        outcome = combine(outcome, Outcome(notes=(_given_text(ctx, probe.finite_in),)))
    if trusted and status == "pass":
        outcome = combine(outcome, Outcome(suffix=f"; and <u, J^T v> = <J u, v> holds for {len(probe.us)} random "
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
