"""The comparison behind ``run_check``: reference, tolerance, verdict (see gradcli.checks.runner)."""
from __future__ import annotations

import numpy as np

from . import numeric as num
from .runner import (DIRECTIONS, ESTIMATE_SAFETY, MAX_MISMATCHES, NUMERIC_CAP, SAMPLE, mismatch, summarize)
from .result import Mismatch

#: An input's typical gradient magnitude is at least this share of the whole gradient's.
GLOBAL_SHARE = 1e-3


def judge(check, got, ref, err, typical):
    """Per entry: (|got - ref|, tolerance, failed, undecided, live). See the runner's docstring."""
    floor = check.floor(ref)
    with np.errstate(all="ignore"):
        base = check.rtol * np.fmax(np.abs(ref), typical) + check.atol + floor
        tol = base + ESTIMATE_SAFETY * err
        diff = np.abs(got - ref)
    live = np.isfinite(ref)
    failed = live & ~(diff <= tol)
    undecided = live & ~failed & (ESTIMATE_SAFETY * err > base)
    return diff, tol, failed, undecided, live


def typical_by_input(check, ref, cols=None) -> np.ndarray:
    """Per entry, the median |ref| over the non-negligible entries of the same input (all rows)."""
    cols = np.arange(check.n) if cols is None else np.asarray(cols)
    which = check.input_of(cols)
    floor = check.floor(ref)
    out = np.zeros(ref.shape)
    mag = np.abs(ref)
    every = mag[np.isfinite(mag) & (mag > floor)]
    # an input whose whole gradient is (nearly) zero is measured against the gradient as a whole
    overall = GLOBAL_SHARE * float(np.median(every)) if every.size else 0.0
    for k in np.unique(which):
        sel = which == k
        block = mag[:, sel]
        block = block[np.isfinite(block) & (block > floor)]
        out[:, sel] = max(float(np.median(block)) if block.size else 0.0, overall)
    return out


def _sample(check, n):
    rng = np.random.default_rng([check.seed, 7])
    return np.sort(rng.choice(n, size=SAMPLE, replace=False))


def _under_test_name(check) -> str:
    if check.autodiff:
        return "traced_reverse"
    return "hand_written"


def _describe_under_test(check) -> str:
    if check.autodiff:
        return "traced AD"
    return {"vjp": "the hand-written vjp", "expression": "the grad= expression"}.get(
        check.r.kind, "the hand-written gradient")


#: the closer look's steps, relative to the first pass's, and the most elements it looks at again
CLOSER = 2.0 ** -12
CLOSER_MAX = 256


def _look_closer(check, ad_rows, cols, bad, nref, nerr, kink, ntyp, target, sigma):
    """Where traced AD and the finite differences disagree, differences with steps 4096 times smaller.

    A kink near the point (a ReLU's input 5e-5 from 0, a max-pool's top two 3e-5 apart) bends
    differences whose steps reach across it, not the derivative. Where the smaller steps agree with
    AD, they replace the first ones; where they disagree with the first ones too, the differences
    cannot be trusted there and their error estimate becomes that disagreement (undecided, not a
    failure). Returns the updated (value, error, kink, still-disagreeing) arrays."""
    disputed = np.flatnonzero(bad.any(axis=0))[:CLOSER_MAX]
    close = num.jacobian_columns(check.numf, check.f0, [check.label(cols[k]) for k in disputed],
                                 check.H * CLOSER, target, complex_step=False, sigma=sigma)
    _, _, bad2, und2, _ = judge(check, ad_rows[:, cols[disputed]], close.value, close.error, ntyp[:, disputed])
    agree = ~(bad2 | und2 | close.kink).any(axis=0)
    nref, nerr, kink = nref.copy(), nerr.copy(), kink.copy()
    ks = disputed[agree]
    nref[:, ks], nerr[:, ks], kink[:, ks] = close.value[:, agree], close.error[:, agree], close.kink[:, agree]
    # where the two step sizes disagree with each other, neither is a reference
    gap = np.abs(close.value - nref[:, disputed])
    unsure = ~agree & (gap > ESTIMATE_SAFETY * (close.error + nerr[:, disputed])).any(axis=0)
    ku = disputed[unsure]
    nerr[:, ku] = np.fmax(nerr[:, ku], gap[:, unsure])
    if ks.size or ku.size:
        check.r.notes.append(
            f"the finite differences at the default step reach across a kink near the point at {ks.size + ku.size} "
            f"element(s): steps {1 / CLOSER:.0f} times smaller agree with traced AD at {ks.size}"
            + (f" and at {ku.size} give another value than the first steps (no finite-difference reference there)"
               if ku.size else ""))
    diff, tol, bad, und, live = judge(check, ad_rows[:, cols], nref, nerr, ntyp)
    return nref, nerr, kink, bad & ~kink


def compare_full(check):
    r, m, n = check.r, check.m, check.n
    autodiff = check.autodiff
    got = None if autodiff else _user_rows(check)
    ad_rows = _ad_rows(check)
    if autodiff and ad_rows is None:
        check.stop("skipped", "nothing to compare: no hand-written gradient, and traced AD is unavailable ("
                   + "; ".join(r.notes) + ")")
    cols = np.arange(n)
    if n > NUMERIC_CAP and ad_rows is not None:
        cols = _sample(check, n)
        r.notes.append(f"{n} elements: finite differences on a seeded sample of {len(cols)}, traced AD as the "
                       "reference elsewhere")
    target = check.rtol / 10
    sigma = num.noise_level(check.numf, check.f0, np.random.default_rng([check.seed, 13]))
    numc = num.jacobian_columns(check.numf, check.f0, [check.label(c) for c in cols], check.H, target,
                                n_total=n, sigma=sigma)
    nref, nerr, kink = numc.value, numc.error, numc.kink
    ntyp = typical_by_input(check, nref, cols)

    # complex step: trusted where it agrees with every decided finite difference, used where those cannot decide
    cs = numc.complex_value
    if cs is None:
        r.methods["complex_step"] = summarize("complex_step", "unavailable", message=(
            "the function does not take complex inputs" if len(cols) <= num.COMPLEX_MAX else
            f"not run on more than {num.COMPLEX_MAX} elements"))
    else:
        diff, tol, bad, und, live = judge(check, cs, nref, nerr, ntyp)
        bad &= ~kink
        if bad.any():
            r.methods["complex_step"] = summarize("complex_step", "mismatch", diff, message=(
                "disagrees with the finite differences (a non-holomorphic operation such as abs); not used"))
        else:
            use = und & np.isfinite(cs)
            nref = np.where(use, cs, nref)
            nerr = np.where(use, 1e-12 * np.fmax(np.abs(cs), ntyp), nerr)
            r.methods["complex_step"] = summarize("complex_step", "ok", diff, message=(
                f"used for {int(use.sum())} entries the differences could not decide" if use.any() else ""))

    numeric_name = "richardson"
    ref, err, ref_cols, reference = None, None, cols, numeric_name
    if ad_rows is not None and not autodiff:
        diff, tol, bad, und, live = judge(check, ad_rows[:, cols], nref, nerr, ntyp)
        bad &= ~kink
        if bad.any():
            nref, nerr, kink, bad = _look_closer(check, ad_rows, cols, bad, nref, nerr, kink, ntyp, target, sigma)
        if bad.any():
            j, k = _worst(diff, tol, bad)
            name, idx = check.unflat_index(cols[k])
            r.notes.append(f"traced AD disagrees with the finite differences at {_at(name, idx)} "
                           f"({ad_rows[j, cols[k]]:.6g} vs {nref[j, k]:.6g} ± {nerr[j, k]:.2g}); "
                           "finite differences used as the reference")
            r.methods["traced_reverse"] = summarize("traced_reverse", "mismatch", diff,
                                                   message="disagrees with the finite differences; not used")
        else:
            ref, err, ref_cols, reference = ad_rows, np.zeros_like(ad_rows), np.arange(n), "traced_reverse"
            r.methods["traced_reverse"] = summarize("traced_reverse", "used")
            r.methods[numeric_name] = summarize(numeric_name, "ok", diff, message=f"{len(cols)} elements")
            full_kink = np.zeros((m, n), dtype=bool)
            full_kink[:, cols] = kink
            kink = full_kink
    if ref is None:
        if len(cols) < n and not autodiff:  # AD was not trusted: every element needs the differences
            numc = num.jacobian_columns(check.numf, check.f0, [check.label(c) for c in range(n)],
                                          check.H, target, sigma=sigma)
            nref, nerr, kink, cols = numc.value, numc.error, numc.kink, np.arange(n)
            r.notes.append("finite differences on every element")
        ref, err, ref_cols = nref, nerr, cols
        r.methods[numeric_name] = summarize(numeric_name, "used")
    r.reference = reference
    if autodiff:
        got = ad_rows
    _verdict(check, got[:, ref_cols], ref, err, kink, ref_cols)


def _user_rows(check) -> np.ndarray:
    spec = check.spec
    has_vjp = check.user_vjp is not None or spec.vjp is not None
    if check.scalar and not has_vjp:
        return check.flat(check.user_gradient("the gradient function", check.user_grads))[None]
    if not has_vjp:
        check.stop("fail", f"the output has shape {check.out_shape}, so a gradient is not defined: register a "
                           "vector-Jacobian product with @f.vjp (def f_vjp(g, ...)) instead")
    rows = np.empty((check.m, check.n))
    for j in range(check.m):
        e = np.zeros(check.m)
        e[j] = 1.0
        rows[j] = check.flat(check.user_vjp_at(e))
    return rows


def _ad_rows(check):
    ad = check.ad
    if ad is None:
        return None
    try:
        if check.scalar:
            rows = check.flat(ad.gradient())[None]
        else:
            rows = np.empty((check.m, check.n))
            for j in range(check.m):
                e = np.zeros(check.out_shape)
                e.flat[j] = 1.0
                rows[j] = check.flat(ad.vjp(e))
        return rows
    except Exception as exc:  # noqa: BLE001
        check.r.notes.append(f"traced AD failed ({type(exc).__name__}: {exc}); finite differences used")
        check.r.methods["traced_reverse"] = summarize("traced_reverse", "error", message=str(exc))
        return None


def _worst(diff, tol, bad):
    badness = np.where(bad, np.nan_to_num(diff / np.where(tol > 0, tol, 1.0), nan=np.inf, posinf=np.inf), -1.0)
    j, k = np.unravel_index(int(np.argmax(badness)), badness.shape)
    return int(j), int(k)


def _verdict(check, got, ref, err, kink, cols, identity=None, cotangent_rows=False):
    """Compare ``got`` with ``ref`` entry by entry ((m, len(cols))) and set status, message, mismatches."""
    r = check.r
    typ = typical_by_input(check, ref, cols)
    diff, tol, bad, und, live = judge(check, got, ref, err, typ)
    bad &= ~kink
    und &= ~kink
    undefined = ~live
    with np.errstate(all="ignore"):
        rel = np.where(ref != 0, diff / np.abs(ref), np.where(diff == 0, 0.0, np.inf))
    ok = live & ~kink
    name = _under_test_name(check)
    r.max_abs_error = float(diff[ok].max()) if ok.any() else None
    # where 0 is expected the relative error is infinite: it counts for the failing entries (got 1 for
    # 0), not for the passing ones (a 1e-20 within the tolerance)
    shown = rel[ok & (np.isfinite(rel) | bad)]
    r.max_rel_error = float(shown.max()) if shown.size else None
    under, refdesc = _describe_under_test(check), _reference_text(check)
    if bad.any():
        order = np.argsort(-np.where(bad, diff / np.where(tol > 0, tol, 1.0), -1.0), axis=None)
        for flat in order[:min(MAX_MISMATCHES, int(bad.sum()))]:
            j, k = np.unravel_index(flat, bad.shape)
            r.mismatches.append(mismatch(check, int(cols[k]), ref[j, k], got[j, k],
                                         None if cotangent_rows else int(j)))
        w = r.mismatches[0]
        where = _at(w.input, w.index) + (f" (output {list(w.output_index)})" if w.output_index else "")
        if cotangent_rows and not check.scalar:
            where += f" (random cotangent {int(np.unravel_index(order[0], bad.shape)[0])})"
        r.methods[name] = summarize(name, "mismatch", diff[ok], rel[ok])
        r.status = "fail"
        r.message = (f"{under} disagrees with {refdesc} at {where}: expected {w.expected:.8g}, got {w.got:.8g} "
                     f"(rel error {w.rel_error:.2g}); {int(bad.sum())} of {int(live.sum())} entries wrong")
        return
    r.methods[name] = summarize(name, "ok", diff[ok], rel[ok])
    if identity is not None and identity():
        return
    if und.any():
        j, k = _worst(ESTIMATE_SAFETY * err, tol - ESTIMATE_SAFETY * err, und)
        nm, idx = check.unflat_index(int(cols[k]))
        r.status = "inconclusive"
        r.message = (f"{int(und.sum())} of {int(live.sum())} entries cannot be decided: the finite-difference error "
                     f"estimate ({err[j, k]:.2g} at {_at(nm, idx)}) is too large for the tolerance "
                     f"({tol[j, k] - ESTIMATE_SAFETY * err[j, k]:.2g}) and traced AD was not available to decide; "
                     "try float64 inputs, another point (seed=), or a larger step (eps=)")
        return
    if kink.any():
        j, k = np.unravel_index(int(np.argmax(kink)), kink.shape)
        nm, idx = check.unflat_index(int(cols[k]))
        r.status = "nondifferentiable"
        nk = int(kink.any(axis=0).sum())
        r.message = (f"{_at(nm, idx)} sits on a kink: the one-sided slopes differ, so the gradient does not exist "
                     f"there" + (f" ({nk} elements on kinks)" if nk > 1 else "")
                     + (f"; the other entries agree with {refdesc}" if nk < kink.shape[1] else ""))
        return
    if undefined.any():
        j, k = np.unravel_index(int(np.argmax(undefined)), undefined.shape)
        nm, idx = check.unflat_index(int(cols[k]))
        r.status = "undefined"
        r.message = (f"no derivative at {_at(nm, idx)}: the function is not finite at any step around it (the "
                     "input sits on the edge of the domain)")
        return
    r.status = "pass"
    r.message = f"{under} agrees with {refdesc} ({int(live.sum())} entries, max rel error " \
                f"{r.max_rel_error if r.max_rel_error is not None else 0:.2g})"


def _at(name, index) -> str:
    return name + (f"[{', '.join(str(int(i)) for i in index)}]" if len(index) else "")


def _reference_text(check) -> str:
    r = check.r
    if check.autodiff or r.reference != "traced_reverse":
        cs = r.methods.get("complex_step")
        extra = " and complex step" if cs is not None and "used for" in cs.message else ""
        return f"finite differences (richardson{extra})"
    return "traced AD (validated by finite differences)"


# --- fast mode ---------------------------------------------------------------------------------------

def compare_fast(check):
    r, m, n = check.r, check.m, check.n
    autodiff = check.autodiff
    rng = np.random.default_rng([check.seed, 11])
    us = num.random_directions(check.numf, DIRECTIONS, rng)
    vs = [np.ones(1) if check.scalar else rng.standard_normal(m) for _ in us]
    target = check.rtol / 10
    sigma = num.noise_level(check.numf, check.f0, np.random.default_rng([check.seed, 13]))
    ests = [num.directional(check.numf, check.f0, u, check.H, target, sigma=sigma) for u in us]
    lhs = np.array([float(e.value @ v) for e, v in zip(ests, vs)])
    lerr = np.array([float(np.abs(v) @ e.error) for e, v in zip(ests, vs)])
    kinked = any(e.kink.any() for e in ests)

    ad_w = None
    if check.ad is not None:
        try:
            if check.scalar:
                g = check.flat(check.ad.gradient())
                ad_w = [g * v[0] for v in vs]
            else:
                ad_w = [check.flat(check.ad.vjp(v.reshape(check.out_shape))) for v in vs]
        except Exception as exc:  # noqa: BLE001
            r.notes.append(f"traced AD failed ({type(exc).__name__}: {exc}); finite differences used")
            ad_w = None
    uflat = [check.flat(u) for u in us]

    def identity_rows(ws):
        return np.array([float(u @ w) for u, w in zip(uflat, ws)])

    scale = np.median(np.abs(lhs)) * np.ones(len(us))
    if autodiff:
        if ad_w is None:
            check.stop("skipped", "nothing to compare: no hand-written gradient, and traced AD is unavailable ("
                       + "; ".join(r.notes) + ")")
        got_w = ad_w
    elif check.scalar and check.spec.vjp is None and check.user_vjp is None:
        g = check.flat(check.user_gradient("the gradient function", check.user_grads))
        got_w = [g * v[0] for v in vs]
    else:
        if check.spec.vjp is None and check.user_vjp is None:
            check.stop("fail", f"the output has shape {check.out_shape}, so a gradient is not defined: register "
                               "a vector-Jacobian product with @f.vjp instead")
        got_w = [check.flat(check.user_vjp_at(v)) for v in vs]

    r.reference = "richardson"
    trusted = False
    if ad_w is not None and not autodiff:
        adl = identity_rows(ad_w)
        rss = np.array([np.sqrt(np.sum((u * w) ** 2)) for u, w in zip(uflat, ad_w)])
        diff, tol, bad, und, live = judge(check, adl[None], lhs[None], lerr[None], np.fmax(scale, rss)[None])
        if bad.any():  # a kink within the steps? (see _look_closer) look again with smaller ones
            for a in np.flatnonzero(bad[0]):
                e = num.directional(check.numf, check.f0, us[a], check.H * CLOSER, target, sigma=sigma)
                near, near_err = float(e.value @ vs[a]), float(np.abs(vs[a]) @ e.error)
                _, _, b2, u2, _ = judge(check, adl[None, a:a + 1], np.array([[near]]), np.array([[near_err]]),
                                        np.fmax(scale, rss)[None, a:a + 1])
                if not (b2.any() or u2.any() or e.kink.any()):
                    lhs[a], lerr[a] = near, near_err
                elif abs(near - lhs[a]) > ESTIMATE_SAFETY * (near_err + lerr[a]):
                    lerr[a] = max(lerr[a], abs(near - lhs[a]))  # the two step sizes disagree: no reference
            diff, tol, bad, und, live = judge(check, adl[None], lhs[None], lerr[None], np.fmax(scale, rss)[None])
            if not bad.any():
                r.notes.append("the finite differences along a random direction reach across a kink near the "
                               f"point; steps {1 / CLOSER:.0f} times smaller were used there")
        if bad.any():
            r.notes.append("traced AD disagrees with finite differences along a random direction; "
                           "finite differences used as the reference")
            r.methods["traced_reverse"] = summarize("traced_reverse", "mismatch", diff)
        else:
            trusted = True
            r.reference = "traced_reverse"
            r.methods["traced_reverse"] = summarize("traced_reverse", "used")
            r.methods["richardson"] = summarize("richardson", "ok", diff,
                                                message=f"{len(us)} random directions")
            scale = np.fmax(scale, rss)
    if "richardson" not in r.methods:
        r.methods["richardson"] = summarize("richardson", "used", message=f"{len(us)} random directions")

    def identity_check() -> bool:
        """<u, J^T v> under test against <J u, v> by differences; True if it decided the verdict."""
        got_l = identity_rows(got_w)
        diff, tol, bad, und, live = judge(check, got_l[None], lhs[None], lerr[None], scale[None])
        if bad.any():
            a = int(np.argmax(np.where(bad[0], diff[0] / tol[0], -1)))
            r.status = "fail"
            r.mismatches.append(Mismatch("<u, J^T v>", (a,), float(lhs[a]), float(got_l[a]), float(diff[0, a]),
                                         float(diff[0, a] / abs(lhs[a])) if lhs[a] else float("inf")))
            r.message = (f"{_describe_under_test(check)} fails <u, J^T v> = <J u, v> for random direction {a}: "
                         f"finite differences give {lhs[a]:.8g}, {_describe_under_test(check)} gives "
                         f"{got_l[a]:.8g}")
            r.methods[_under_test_name(check)] = summarize(_under_test_name(check), "mismatch", diff)
            return True
        if und.any() and not trusted:
            r.status = "inconclusive"
            r.message = ("the finite-difference error estimate along a random direction is too large for the "
                         "tolerance, and traced AD was not available to decide; try float64 inputs, another "
                         "point (seed=), a larger step (eps=) or mode='full'")
            return True
        return False

    if trusted:
        got = np.stack(got_w)
        ref = np.stack(ad_w)
        cols = np.arange(n)
        kink = np.zeros(got.shape, dtype=bool)
        _verdict(check, got, ref, np.zeros_like(ref), kink, cols, identity=identity_check, cotangent_rows=True)
    else:
        r.methods[_under_test_name(check)] = summarize(_under_test_name(check), "ok")
        if not identity_check():
            if kinked:
                r.status = "nondifferentiable"
                r.message = "a random direction crosses a kink at the inputs (the one-sided slopes differ)"
            else:
                r.status = "pass"
                r.message = (f"{_describe_under_test(check)} satisfies <u, J^T v> = <J u, v> for {len(us)} "
                             "random directions and cotangents (finite differences)")
    if r.status == "pass" and trusted:
        r.message += f"; and <u, J^T v> = <J u, v> holds for {len(us)} random directions"
