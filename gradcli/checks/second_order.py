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
* **the Taylor test of order 2** (:mod:`gradcli.checks.taylor`): the remainder
  |phi(x+hv) - phi(x) - h<g, v> - h^2/2 <v, Hv>| must fall like h^3, with Hv from the hvp under test or
  from H_G v. It ties the curvature to f itself: it runs when ``taylor`` is set, when a comparison could
  not decide (and then decides it), and always when AD is unavailable (a slope of 2 then fails).

Element comparisons use the first-order tolerance (``judge``) with the two estimates' errors added.
"""
from __future__ import annotations

import numpy as np

from . import numeric as num
from .compare import _at, judge, typical_by_input
from .runner import DIRECTIONS, MAX_MISMATCHES, mismatch, summarize


def _flat_of(check, res) -> np.ndarray:
    wrt = check.wrt
    if isinstance(res, dict):
        items = [res[k] for k in wrt]
    elif isinstance(res, (tuple, list)) and (len(wrt) > 1 or (len(res) == 1
                                                              and np.shape(res[0]) == check.shapes[wrt[0]])):
        items = list(res)
    else:
        items = [res]
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in items])


def gradient_field(check, inputs: dict, w: np.ndarray) -> np.ndarray:
    """The gradient under test of <w, f> at ``inputs`` (float64), flat; raises what the user's code raises."""
    if check.autodiff:
        return ad_field(check, inputs, w)
    kw = {k: np.array(v) for k, v in inputs.items()}
    spec = check.spec
    vjp = check.user_vjp or spec.vjp
    if check.with_grad:
        return _flat_of(check, check.fn(**kw)[1]) * float(w[0])
    if check.scalar and vjp is None:
        return _flat_of(check, spec.grad(**kw)) * float(w[0])
    return _flat_of(check, vjp(w.reshape(check.out_shape), **kw))


def ad_field(check, inputs: dict, w: np.ndarray) -> np.ndarray:
    """gradcli's AD gradient of <w, f> at ``inputs``, traced afresh."""
    if check.ad_factory is not None:
        t = check.ad_factory(inputs, check.wrt)
    else:
        from ..trace import trace
        t = trace(check.fn, {k: np.array(v) for k, v in inputs.items()}, list(check.wrt),
                  0 if check.with_grad else check.output)
    return check.flat(t.vjp(w.reshape(np.shape(t.value))))


def _field(check, field, w):
    return num.Function(lambda inputs, complex_ok=False: field(check, inputs, w), check.base, check.wrt)


def _derivatives(check, fn, dirs):
    """d/dt field(x + t v) for each v -> (values (K, n), errors (K, n), kink (K, n)) or None."""
    g0 = fn.at({})
    if g0 is None or g0.size != check.n or not np.all(np.isfinite(g0)):
        return None
    ests = [num.directional(fn, g0, v, check.H, check.rtol / 10) for v in dirs]
    return (np.stack([e.value for e in ests]), np.stack([e.error for e in ests]),
            np.stack([e.kink for e in ests]))


def user_hvp(check, v: dict) -> np.ndarray:
    """The hvp under test for direction ``v`` ({name: array}) in the dtype under test, flat."""
    vs = tuple(np.array(v[k], dtype=check.dtype) for k in check.wrt)
    try:
        res = check.spec.hvp(vs[0] if len(vs) == 1 else vs, **{k: np.array(a) for k, a in check.inputs.items()})
    except Exception as exc:  # noqa: BLE001 - the hvp under test raised: a failure
        check.stop("fail", f"the hvp function raised {type(exc).__name__}: {exc}", exc)
    return check.flat(check.normalize(res, "the hvp"))


class _Second:
    def __init__(self, check):
        self.c, self.r = check, check.r
        self.undecided: list = []  # what could not be decided by the tolerance test
        self.summary = {"directions": DIRECTIONS, "checks": {}}
        self.r.second_order = self.summary

    def fail(self, what, ref_text, got, ref, err, k_label="random direction"):
        c, r = self.c, self.r
        typ = typical_by_input(c, ref)
        diff, tol, bad, und, live = judge(c, got, ref, err, typ)
        if not bad.any():
            if und.any():
                self.undecided.append(what)
            return False
        order = np.argsort(-np.where(bad, diff / np.where(tol > 0, tol, 1.0), -1.0), axis=None)
        r.mismatches = [mismatch(c, int(np.unravel_index(i, bad.shape)[1]),
                                 ref[np.unravel_index(i, bad.shape)], got[np.unravel_index(i, bad.shape)])
                        for i in order[:min(MAX_MISMATCHES, int(bad.sum()))]]
        m = r.mismatches[0]
        j = int(np.unravel_index(order[0], bad.shape)[0])
        with np.errstate(all="ignore"):
            rel = np.where(ref != 0, diff / np.abs(ref), np.where(diff == 0, 0.0, np.inf))
        r.max_abs_error = float(np.max(diff[live])) if live.any() else None
        fin = rel[live][np.isfinite(rel[live])]
        r.max_rel_error = float(fin.max()) if fin.size else None
        r.status = "fail"
        r.message = (f"second order: {what} disagrees with {ref_text} at {_at(m.input, m.index)} ({k_label} {j}): "
                     f"expected {m.expected:.8g}, got {m.got:.8g} (rel error {m.rel_error:.2g}); "
                     f"{int(bad.sum())} of {int(live.sum())} entries wrong")
        return True

    def run(self):
        c, r, s = self.c, self.r, self.summary
        if c.spec.hvp is not None and not c.scalar:
            c.stop("fail", f"an hvp is defined for a scalar output; the output has shape {c.out_shape} "
                           "(order=2 without an hvp checks the vjp's own derivative)")
        rng = np.random.default_rng([c.seed, 23])
        dirs = num.random_directions(c.numf, DIRECTIONS, rng)
        vflat = [c.flat(v) for v in dirs]
        w = np.ones(1) if c.scalar else rng.standard_normal(c.m)
        hg = _derivatives(c, _field(c, gradient_field, w), dirs)
        if hg is None:
            c.stop("fail", "second order: the gradient under test raised or is not finite at the inputs in "
                           "float64")
        hg_v, hg_e, hg_k = hg
        if hg_k.any():
            c.stop("nondifferentiable", "second order: the gradient has a kink at the inputs along a random "
                                        "direction (e.g. a ReLU at 0): the Hessian does not exist there")
        use_ad = c.ad is not None and not c.autodiff and r.reference == "traced_reverse"
        ad = _derivatives(c, _field(c, ad_field, w), dirs) if use_ad else None
        if use_ad and ad is None:
            r.notes.append("second order: AD of the gradient failed; finite differences of the gradient only")
        s["reference"] = ("traced_reverse (directional differences of gradcli's AD gradient)" if ad is not None
                          else "the hand-written gradient's own differences (symmetry) and the Taylor test")
        under = "the gradient's derivative (differences of the hand-written gradient)"
        if c.autodiff:
            under = "the derivative of gradcli's AD gradient"

        # 1. the gradient field against AD
        if ad is not None:
            ad_v, ad_e, _ = ad
            if self.fail(under, "the derivative of gradcli's AD gradient (the Hessian)", hg_v, ad_v, hg_e + ad_e):
                s["checks"]["gradient_field"] = "mismatch"
                r.methods["hvp_of_gradient"] = summarize("hvp_of_gradient", "mismatch", np.abs(hg_v - ad_v))
                r.message += ("; the gradient is right at the inputs but not as a function of them (a cached or "
                              "frozen quantity?)")
                return
            s["checks"]["gradient_field"] = "undecided" if under in self.undecided else "ok"
            r.methods["hvp_traced"] = summarize("hvp_traced", "used", message=f"{DIRECTIONS} random directions")
            r.methods["hvp_of_gradient"] = summarize("hvp_of_gradient", "ok", np.abs(hg_v - ad_v))

        # 2. symmetry of the gradient's Jacobian
        pairs = [(i, (i + 1) % DIRECTIONS) for i in range(DIRECTIONS)]
        a = np.array([[vflat[i] @ hg_v[j] for i, j in pairs]])
        b = np.array([[hg_v[i] @ vflat[j] for i, j in pairs]])
        e = np.array([[np.abs(vflat[i]) @ hg_e[j] + hg_e[i] @ np.abs(vflat[j]) for i, j in pairs]])
        rss = np.array([[np.sqrt(np.sum((vflat[i] * hg_v[j]) ** 2)) for i, j in pairs]])
        diff, tol, bad, und, live = judge(c, a, b, e, np.fmax(np.median(np.abs(b)), rss))
        if bad.any():
            k = int(np.argmax(np.where(bad[0], diff[0] / tol[0], -1)))
            i, j = pairs[k]
            s["checks"]["symmetry"] = "mismatch"
            r.methods["symmetry"] = summarize("symmetry", "mismatch", diff)
            r.status = "fail"
            r.message = (f"second order: the gradient's Jacobian is not symmetric: <v{i}, H v{j}> = {a[0, k]:.8g} but "
                         f"<H v{i}, v{j}> = {b[0, k]:.8g}, so the hand-written gradient is not the gradient of any "
                         "function (directional differences of the gradient along random directions)")
            return
        if und.any():
            self.undecided.append("the symmetry of the gradient's Jacobian")
        s["checks"]["symmetry"] = "undecided" if und.any() else "ok"

        # 3. the hvp under test
        if c.spec.hvp is not None:
            got = np.stack([user_hvp(c, v) for v in dirs])
            if ad is not None:
                ref, err, ref_text = ad[0], ad[1], "the derivative of gradcli's AD gradient (the Hessian)"
            else:
                ref, err, ref_text = hg_v, hg_e, "the derivative of the hand-written gradient"
            if self.fail("the hand-written hvp", ref_text, got, ref, err):
                s["checks"]["hvp"] = "mismatch"
                r.methods["hand_written_hvp"] = summarize("hand_written_hvp", "mismatch", np.abs(got - ref))
                return
            s["checks"]["hvp"] = "undecided" if "the hand-written hvp" in self.undecided else "ok"
            r.methods["hand_written_hvp"] = summarize("hand_written_hvp", "ok", np.abs(got - ref))

        hv_fn = _hv_under_test(c)

        # 4. the Taylor test of order 2
        if c.opts.get("taylor") or self.undecided or ad is None:
            from .taylor import taylor_test
            t = taylor_test(c, 2, hv_fn)
            r.taylor2 = t
            s["taylor"] = t.to_dict()
            if t.verdict == "wrong" and (ad is None or self.undecided):
                r.status = "fail"
                r.message = (f"second order: the Taylor test finds the remainder with the h^2/2 <v, Hv> term "
                             f"falling like h^{round(t.slope)} instead of h^3 ({t.detail})")
                return
            if t.verdict == "wrong":
                r.notes.append(f"second order: the Taylor test disagrees: {t.detail}")
            if self.undecided and t.verdict == "right":
                resolved = f"{', '.join(self.undecided)} resolved by the Taylor test ({t.detail})"
                self.undecided = []
                r.message += f"; second order: {resolved}"
                return
        if self.undecided:
            r.status = "inconclusive"
            r.message = (f"second order: {', '.join(self.undecided)} cannot be decided: the error estimates of the "
                         "differences of the gradient are too large for the tolerance, and the Taylor test did not "
                         "decide; try another point (seed=) or a larger step (eps=)")
            return
        what = ["the gradient's derivative " + ("agrees with gradcli's AD Hessian" if ad is not None else
                                                "is symmetric and consistent with f (Taylor test)")]
        if c.spec.hvp is not None:
            what.append("the hand-written hvp agrees")
        r.message += f"; second order: {' and '.join(what)} ({DIRECTIONS} random directions)"


def check_second_order(check) -> None:
    """Run the second-order checks on ``check`` (its first order has passed); sets status and message.
    With ``taylor`` set, the order-2 Taylor slope is reported even when a comparison failed first."""
    _Second(check).run()
    r = check.r
    if check.opts.get("taylor") and r.taylor2 is None and r.status in ("pass", "fail"):
        from .taylor import taylor_test
        r.taylor2 = taylor_test(check, 2, _hv_under_test(check))
        r.second_order["taylor"] = r.taylor2.to_dict()


def _hv_under_test(check):
    """hv(v, w) -> (Hv, error): the registered hvp, else directional differences of the gradient under test."""
    if check.spec.hvp is not None and check.scalar:
        def hv(v, w):
            out = user_hvp(check, v)
            return out, np.zeros_like(out)
        return hv

    def hv(v, w):
        field = _field(check, gradient_field, w)
        est = num.directional(field, field.at({}), v, check.H, check.rtol / 10)
        return est.value, est.error
    return hv

