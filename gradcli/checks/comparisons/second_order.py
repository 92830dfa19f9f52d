"""``order=2``: the gradient under test as a function of the inputs, and a hand-written ``@f.hvp``.

A first-order check compares the gradient g(x) at one point. A gradient can be right there and still
be the wrong function of x (a quantity cached from the first call, a term frozen as a constant), and a
hand-written Hessian-vector product can be wrong while the gradient is right. With ``order=2`` (the
default when an ``hvp`` is registered), once the first order passes, for ``DIRECTIONS`` seeded random
directions v (standard normal times each element's step scale), with G the gradient under test of
phi = f (scalar output) or of phi = <w, f> for a seeded random cotangent w (array output, through the
vjp):

* **the gradient field**: H_G v = d/dt G(x + t v) at t = 0, by directional finite differences
  (central, Richardson, Ridders where needed, with error estimates) of the *hand-written* gradient,
  evaluated at float64 inputs, against H v = the same differences of **gradcli's AD gradient** of the
  numpy code (retraced at each step) where AD was the first-order reference. A mismatch means the
  gradient function is right at x but its derivative is not the Hessian;
* **symmetry**: <v_i, H_G v_j> = <H_G v_i, v_j> for neighbouring pairs: a Jacobian that is not
  symmetric belongs to no function at all (this needs no AD);
* **the hvp under test** (``hvp(v, *inputs)``; v is one array per wrt input, a tuple in wrt order or a
  bare array for one input; it returns one array per wrt input, as ``grad`` does), run in the dtype
  under test, against AD's H v, or against H_G v where AD is unavailable;
* **a framework's own second derivatives** (torch, JAX: what gradgradcheck checks) take the hvp's
  place, for array outputs too: with G the framework's vjp of w, its derivative along v (torch's double
  backward, JAX's vjp of its vjp) against the same reference, and its derivative along the cotangent,
  d/dw <G, v> = J v, against directional differences of f; a backward the framework cannot differentiate
  (``@once_differentiable``) is ``skipped`` at order 2;
* **the Taylor test of order 2** (:mod:`gradcli.checks.comparisons.taylor`): the remainder
  |phi(x+hv) - phi(x) - h<g, v> - h^2/2 <v, Hv>| must fall like h^3, with Hv from the hvp under test or
  from H_G v. It ties the curvature to f itself: it runs when ``taylor`` is set, when a comparison could
  not decide (and then decides it), and always when AD is unavailable (a slope of 2 then fails).

Element comparisons use the first-order tolerance (``judge``) with the two estimates' errors added.
Where the whole reference is 0 to its error (a piecewise-linear f, whose Hessian is 0 almost
everywhere), the scale of the relative tolerance is the gradient's size instead of the reference's own,
which would be 0 and leave correct code undecidable.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from gradcli.checks.comparisons import numeric as num
from gradcli.checks.comparisons import taylor
from gradcli.checks.comparisons.judging import judge, typical_by_input
from gradcli.checks.comparisons.findings import count_text, largest_elsewhere, largest_wrong, max_errors, worst_entries
from gradcli.checks.context import (
    DIRECTIONS, CheckContext, Outcome, Verdict, at_text, badness, index_text, mismatch, summarize)
from gradcli.checks.comparisons.elements import describe_under_test
from gradcli.checks.comparisons.gradient_field import (
    ad_field, derivatives_along, field_function, framework_label, framework_products, gradient_field, hv_under_test,
    zero_within_error)
from gradcli.checks.comparisons.order2_hints import cached_term, constant_cotangent, frozen_term
from gradcli.checks.comparisons.under_test import user_hvp


def _ad_gradient(ctx) -> str:
    return "gradcli's AD gradient" if ctx.ad_method == "traced_reverse" else f"the gradient by {ctx.ad_label}"


def _disagreement(ctx, what, ref_text, got, ref, err, zero_scale, k_label="random direction"):
    """-> (failing Outcome or None, undecided: bool) for ``got`` against ``ref`` element by element.

    Where the whole reference is 0 to its error (a piecewise-linear f: its Hessian is 0 almost
    everywhere), its own size is no scale: ``zero_scale`` (the gradient's, per entry) is."""
    typ = typical_by_input(ctx, ref)
    if zero_within_error(ref, err):
        typ = np.fmax(typ, zero_scale)
    diff, tol, bad, und, live = judge(ctx, got, ref, err, typ)
    if not bad.any():
        return None, bool(und.any())
    score = badness(diff, tol, bad)
    with np.errstate(all="ignore"):
        rel = np.where(ref != 0, diff / np.abs(ref), np.where(diff == 0, 0.0, np.inf))
    picks = [np.unravel_index(i, bad.shape) for i in worst_entries(score, ctx.input_of(np.arange(ctx.n))[None],
                                                                   also=largest_wrong(rel, bad & live))]
    # each row is an element along one of the directions: the direction goes with it
    found = [dataclasses.replace(mismatch(ctx, int(k), ref[j, k], got[j, k]), direction=int(j)) for j, k in picks]
    m = found[0]
    j = int(picks[0][0])
    which = ctx.input_of(np.arange(ctx.n))
    counted = count_text(ctx, bad, live, which, what=f"{bad.shape[0]} {k_label}s × {bad.shape[1]} input elements")
    message = (f"second order: {what} disagrees with {ref_text} at {at_text(m.input, m.index)} ({k_label} {j}): "
               f"expected {m.expected:.8g}, got {m.got:.8g} (rel error {m.rel_error:.2g}); {counted}"
               + largest_elsewhere(ctx, rel, live & np.isfinite(rel), bad, np.arange(ctx.n), m.rel_error,
                                   lambda row: f" ({k_label} {row})"))
    return Outcome(verdict=Verdict("fail", message), mismatches=tuple(found), errors=max_errors(diff, ref, live)), False


@dataclasses.dataclass(frozen=True)
class _Tally:
    """What order 2 reports as its steps decide (frozen: the steps add to its containers, never replace them)."""

    summary: dict = dataclasses.field(default_factory=lambda: {"directions": DIRECTIONS, "checks": {}})
    methods: dict = dataclasses.field(default_factory=dict)
    notes: list = dataclasses.field(default_factory=list)
    undecided: list = dataclasses.field(default_factory=list)  # what could not be decided by the tolerance test

    def outcome(self, verdict=None, stop=False, suffix="", base=None, taylor2=None) -> Outcome:
        """The Outcome so far; ``base``, a failing comparison's, gives its verdict, mismatches and errors."""
        extra = {} if base is None else {"mismatches": base.mismatches, "errors": base.errors}
        if base is not None:
            verdict = Verdict(base.verdict.status, base.verdict.message + suffix)
            suffix = ""
        return Outcome(verdict=verdict, methods=tuple(self.methods.items()), notes=tuple(self.notes), suffix=suffix,
                       second_order=self.summary, taylor2=taylor2, stop=stop, **extra)

    def settle(self, check: str, unsure, what: str) -> None:
        """Records a comparison that did not fail: ok, or undecided (``what`` is then left to the Taylor test)."""
        if unsure:
            self.undecided.append(what)
        self.summary["checks"][check] = "undecided" if unsure else "ok"


@dataclasses.dataclass(frozen=True)
class _Probe:
    """The gradient under test differentiated along the random directions, and AD's gradient where AD decided
    the first order: what every comparison of order 2 works from."""

    ctx: CheckContext
    dirs: list  # one array per wrt input for each direction v
    vflat: list
    w: np.ndarray  # the cotangent (1 for a scalar output)
    hg_v: np.ndarray  # H_G v (K, n)
    hg_e: np.ndarray
    # the gradient's own size per entry: the scale of H v where the Hessian is 0 (see _disagreement)
    zero_scale: np.ndarray
    ad: tuple | None  # derivatives_along of AD's gradient, or None where AD did not run
    named: str  # the gradient under test: hand-written, torch's backward, JAX's vjp

    def reference(self) -> tuple:
        """(H v, its errors, what it is called, the field it differentiates): AD's where it ran, else H_G v."""
        if self.ad is not None:
            return self.ad[0], self.ad[1], f"the derivative of {_ad_gradient(self.ctx)} (the Hessian)", ad_field
        return self.hg_v, self.hg_e, f"the derivative of {self.named}", gradient_field


def check_second_order(ctx: CheckContext, reference: str) -> Outcome:
    """The second-order checks of a check whose first order passed (``reference``: what decided it)."""
    tally = _Tally()
    refused = _refusal(ctx)
    if refused is not None:
        return tally.outcome(refused, stop=True)
    probe = _probe(ctx, reference, tally)
    if isinstance(probe, Verdict):
        return tally.outcome(probe, stop=True)
    for step in (_against_ad, _symmetry, _hvp_under_test):
        decided = step(probe, tally)
        if decided is not None:
            return decided
    decided, t = _taylor_step(probe, tally)
    return decided if decided is not None else _verdict(probe, tally, t)


def _refusal(ctx: CheckContext) -> Verdict | None:
    """The verdict that ends order 2 before any differences are taken, if one does."""
    if ctx.spec.hvp is not None and not ctx.scalar:
        return Verdict("fail", f"an hvp is defined for a scalar output; the output has shape "
                               f"{ctx.out_shape} (order=2 without an hvp checks the vjp's own derivative)")
    if "kink" in ctx.memo:  # first order judged a framework's rule there as a subgradient
        return Verdict("nondifferentiable", f"second order: the first order sits on {ctx.memo['kink']}, "
                                            "where the gradient does not exist, so neither does the "
                                            "Hessian")
    return None


def _probe(ctx: CheckContext, reference: str, tally: _Tally) -> _Probe | Verdict:
    """Differences of the gradient under test (and of AD's) along seeded random directions | the Verdict where
    the gradient under test cannot be differentiated there."""
    rng = np.random.default_rng([ctx.seed, 23])
    dirs = num.random_directions(ctx.numf, DIRECTIONS, rng)
    vflat = [ctx.flat(v) for v in dirs]
    w = np.ones(1) if ctx.scalar else rng.standard_normal(ctx.m)
    hg = derivatives_along(ctx, field_function(ctx, gradient_field, w), dirs)
    if hg is None:
        return Verdict("fail", "second order: the gradient under test raised or is not finite at the "
                               "inputs in float64")
    hg_v, hg_e, hg_k, g0 = hg
    zero_scale = typical_by_input(ctx, g0[None])
    if hg_k.any():
        return Verdict("nondifferentiable", "second order: the gradient has a kink at the inputs along a "
                                            "random direction (e.g. a ReLU at 0): the Hessian does not "
                                            "exist there")
    use_ad = ctx.ad is not None and not ctx.autodiff and reference == ctx.ad_method
    ad = derivatives_along(ctx, field_function(ctx, ad_field, w), dirs) if use_ad else None
    if use_ad and ad is None:
        tally.notes.append("second order: AD of the gradient failed; finite differences of the gradient only")
    named = describe_under_test(ctx)
    tally.summary["reference"] = (f"{ctx.ad_method} (directional differences of {_ad_gradient(ctx)})"
                                  if ad is not None else f"the differences of {named} (symmetry) and the Taylor test")
    return _Probe(ctx=ctx, dirs=dirs, vflat=vflat, w=w, hg_v=hg_v, hg_e=hg_e, zero_scale=zero_scale, ad=ad,
                  named=named)


def _against_ad(p: _Probe, tally: _Tally) -> Outcome | None:
    """The gradient field: its derivative along each direction against AD's Hessian there, where AD ran."""
    if p.ad is None:
        return None
    ctx = p.ctx
    ad_v, ad_e, ref_text, _ = p.reference()
    under = f"the gradient's derivative (differences of {p.named})"
    if ctx.autodiff:
        under = "the derivative of gradcli's AD gradient"
    failed, unsure = _disagreement(ctx, under, ref_text, p.hg_v, ad_v, p.hg_e + ad_e, p.zero_scale)
    if failed is not None:
        tally.summary["checks"]["gradient_field"] = "mismatch"
        tally.methods["hvp_of_gradient"] = summarize("hvp_of_gradient", "mismatch", np.abs(p.hg_v - ad_v))
        return tally.outcome(base=failed, suffix=f"; {p.named} is right at the inputs but not as a function of them"
                                                 f"{cached_term(ctx)}")
    tally.settle("gradient_field", unsure, under)
    tally.methods["hvp_traced"] = summarize("hvp_traced", "used", message=f"{DIRECTIONS} random directions")
    tally.methods["hvp_of_gradient"] = summarize("hvp_of_gradient", "ok", np.abs(p.hg_v - ad_v))
    return None


def _symmetry(p: _Probe, tally: _Tally) -> Outcome | None:
    """The gradient's Jacobian is symmetric: <v_i, H_G v_j> against <H_G v_i, v_j> for neighbouring pairs."""
    vflat, hg_v, hg_e = p.vflat, p.hg_v, p.hg_e
    pairs = [(i, (i + 1) % DIRECTIONS) for i in range(DIRECTIONS)]
    a = np.array([[vflat[i] @ hg_v[j] for i, j in pairs]])
    b = np.array([[hg_v[i] @ vflat[j] for i, j in pairs]])
    e = np.array([[np.abs(vflat[i]) @ hg_e[j] + hg_e[i] @ np.abs(vflat[j]) for i, j in pairs]])
    rss = np.array([[np.sqrt(np.sum((vflat[i] * hg_v[j]) ** 2)) for i, j in pairs]])
    typical = np.fmax(np.median(np.abs(b)), rss)
    if zero_within_error(hg_v, hg_e):  # H = 0: <v, Hv> is measured against <v, g>
        typical = np.fmax(typical, [[np.sqrt(np.sum((vflat[i] * p.zero_scale[0]) ** 2)) for i, j in pairs]])
    diff, tol, bad, und, live = judge(p.ctx, a, b, e, typical)
    if bad.any():
        k = int(np.argmax(np.where(bad[0], diff[0] / tol[0], -1)))
        i, j = pairs[k]
        tally.summary["checks"]["symmetry"] = "mismatch"
        tally.methods["symmetry"] = summarize("symmetry", "mismatch", diff)
        return tally.outcome(Verdict("fail", f"second order: the gradient's Jacobian is not symmetric: <v{i}, H v{j}> "
                                             f"= {a[0, k]:.8g} but <H v{i}, v{j}> = {b[0, k]:.8g}, so {p.named} is not "
                                             "the gradient of any function (directional differences of the gradient "
                                             "along random directions)"))
    tally.settle("symmetry", und.any(), "the symmetry of the gradient's Jacobian")
    return None


def _hvp_under_test(p: _Probe, tally: _Tally) -> Outcome | None:
    """The hvp under test (the hand-written one, or the framework's own derivative of its vjp) against the
    reference H v, and a framework's along its cotangent."""
    ctx = p.ctx
    if ctx.spec.hvp is None and ctx.framework_hvp is None:
        return None
    products = _products(p)
    if isinstance(products, Verdict):
        return tally.outcome(products, stop=True)
    name, what, got, jv = products
    ref, err, ref_text, field = p.reference()
    failed, unsure = _disagreement(ctx, what, ref_text, got, ref, err, p.zero_scale)
    if failed is not None:
        tally.summary["checks"]["hvp"] = "mismatch"
        tally.methods[name] = summarize(name, "mismatch", np.abs(got - ref))
        suffix = "" if jv is None else _direction_input(ctx, failed.mismatches[0], p.dirs, p.w, field)
        return tally.outcome(base=failed, suffix=suffix)
    tally.settle("hvp", unsure, what)
    tally.methods[name] = summarize(name, "ok", np.abs(got - ref))
    return None if jv is None else _along_cotangent(p, tally, name, what, jv)


def _products(p: _Probe) -> tuple | Verdict:
    """(method name, what it is called, H v (K, n), J v (K, m) or None) of the hvp under test | Verdict."""
    ctx = p.ctx
    if ctx.spec.hvp is None:
        name, what = framework_label(ctx)
        products = framework_products(ctx, p.dirs, p.w)
        return products if isinstance(products, Verdict) else (name, what, *products)
    got = []
    for v in p.dirs:
        hv = user_hvp(ctx, v)
        if isinstance(hv, Verdict):
            return hv
        got.append(hv)
    return "hand_written_hvp", "the hand-written hvp", np.stack(got), None


def _along_cotangent(p: _Probe, tally: _Tally, name: str, what: str, jv: np.ndarray) -> Outcome | None:
    """The framework's derivative of its vjp along the cotangent, J v, against differences of f."""
    failed, unsure, jv_err = _cotangent(p.ctx, what, p.dirs, jv)
    tally.methods[name + "_cotangent"] = summarize(name + "_cotangent", "ok" if failed is None else "mismatch", jv_err)
    if failed is not None:
        tally.summary["checks"]["cotangent"] = "mismatch"
        return tally.outcome(base=failed)
    tally.settle("cotangent", unsure, f"{what} along the cotangent")
    return None


def _taylor_step(p: _Probe, tally: _Tally) -> tuple:
    """The Taylor test of order 2 where it is asked for, must decide, or is the only tie to f
    -> (the Outcome it decides or None, its result or None)."""
    ctx, undecided = p.ctx, tally.undecided
    if not (ctx.taylor or undecided or p.ad is None):
        return None, None
    t = taylor.taylor_test(ctx, 2, hv_under_test(ctx))
    if isinstance(t, Verdict):
        return tally.outcome(t, stop=True), None
    tally.summary["taylor"] = t.to_dict()
    if t.verdict == "wrong" and (p.ad is None or undecided):
        return tally.outcome(Verdict("fail", f"second order: the Taylor test finds the remainder with the h^2/2 "
                                             f"<v, Hv> term falling like h^{round(t.slope)} instead of h^3 "
                                             f"({t.detail})"), taylor2=t), t
    if t.verdict == "wrong":
        tally.notes.append(f"second order: the Taylor test disagrees: {t.detail}")
    if undecided and t.verdict == "right":
        resolved = f"{', '.join(undecided)} resolved by the Taylor test ({t.detail})"
        return tally.outcome(suffix=f"; second order: {resolved}", taylor2=t), t
    return None, t


def _verdict(p: _Probe, tally: _Tally, t) -> Outcome:
    """Where no step decided: inconclusive while a comparison is undecided, else a pass naming what agreed."""
    ctx = p.ctx
    if tally.undecided:
        return tally.outcome(Verdict("inconclusive", f"second order: {', '.join(tally.undecided)} cannot be decided: "
                                                     "the error estimates of the differences of the gradient are too "
                                                     "large for the tolerance, and the Taylor test did not decide; try "
                                                     "another point (seed=) or a larger step (eps=)"), taylor2=t)
    what = ["the gradient's derivative " + ("agrees with gradcli's AD Hessian" if p.ad is not None else
                                            "is symmetric and consistent with f (Taylor test)")]
    if ctx.spec.hvp is not None:
        what.append("the hand-written hvp agrees")
    elif ctx.framework_hvp is not None:
        what.append(f"{framework_label(ctx)[1]} agrees along the inputs and the cotangent")
    return tally.outcome(suffix=f"; second order: {' and '.join(what)} ({DIRECTIONS} random directions)", taylor2=t)


def _direction_input(ctx, worst, dirs, w, field) -> str:
    """Which input's part of the worst entry's direction the framework gets wrong: each part alone, the
    framework's product against the reference's at that entry."""
    frozen = frozen_term(ctx)
    if len(ctx.wrt) == 1:
        return f"; {frozen}" if frozen else ""
    c = int(ctx.offsets[ctx.wrt.index(worst.input)]) + int(np.ravel_multi_index(worst.index, ctx.shapes[worst.input])
                                                             if worst.index else 0)
    v = dirs[worst.direction]
    parts = {k: {j: v[j] if j == k else np.zeros_like(v[j]) for j in ctx.wrt} for k in ctx.wrt}
    gaps = {}
    for k, part in parts.items():
        if not np.any(part[k]):
            continue
        got = framework_products(ctx, [part], w)
        ref = derivatives_along(ctx, field_function(ctx, field, w), [part])
        if isinstance(got, Verdict) or ref is None:
            return ""
        gaps[k] = (abs(got[0][0, c] - ref[0][0, c]), got[0][0, c] + 0.0, ref[0][0, c] + 0.0)  # no -0
    if not gaps:
        return ""
    k = max(gaps, key=lambda j: gaps[j][0])
    _, got_k, ref_k = gaps[k]
    # the framework differentiates its vjp in reverse: the entry for x along w's part of v is
    # sum_j d(grad w)_j / dx v_j, so it is the gradient for w that is wrong as a function of x
    i = worst.input
    return (f"; the {i} entries go wrong along the {k} part of random direction {worst.direction} alone (expected "
            f"{ref_k:.8g}, got {got_k:.8g}): there they are the derivative of the gradient for {k} with respect to "
            f"{i}, so the gradient for {k} is wrong as a function of {i}" + (f"; {frozen}" if frozen else ""))


def _cotangent(ctx, what: str, dirs: list, jv: np.ndarray):
    """d/dw <J^T w, v> from the framework against J v by directional differences of f in float64
    -> (failing Outcome or None, undecided, |difference|)."""
    ests = [num.directional(ctx.numf, ctx.f0, v, ctx.step, ctx.rtol / 10) for v in dirs]
    ref = np.stack([e.value for e in ests])
    err = np.stack([np.where(e.kink, np.inf, e.error) for e in ests])
    finite = np.abs(ref[np.isfinite(ref)])
    typical = np.full(ref.shape, float(np.median(finite)) if finite.size else 0.0)
    diff, tol, bad, und, live = judge(ctx, jv, ref, err, typical)
    if not bad.any():
        return None, bool(und.any()), diff
    j, i = np.unravel_index(int(np.argmax(badness(diff, tol, bad))), bad.shape)
    hint = constant_cotangent(ctx)
    at = ctx.out_index(int(i))
    where = f"at output {index_text(at)} " if at else ""
    message = (f"second order: {what} is wrong along the cotangent direction: d/dw <J^T w, v> must be J v (a vjp "
               f"is linear in its cotangent w), but {where}(random direction {j}) J v = {ref[j, i]:.8g} by "
               f"differences of f and {what} gives {jv[j, i]:.8g} ({int(bad.sum())} of {bad.size} entries "
               f"disagree): the backward's derivative along its cotangent is wrong ({hint}?)")
    return Outcome(verdict=Verdict("fail", message), errors=max_errors(diff, ref, live)), False, diff
