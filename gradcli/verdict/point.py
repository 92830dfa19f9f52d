"""Run the methods at a point, measure each against the reference, and reach a verdict.

The tolerance and the verdict are the verdict layer's (:mod:`gradcli.verdict.tolerance`,
:mod:`gradcli.verdict.status`), shared with ``hessian`` and the batch; what is particular to one point is
here: the 35-digit errors, the fallback reference and the per-entry messages.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from gradcli.verdict.conditioning import classify, route_spread
from gradcli.verdict.diagnose import diagnose
from gradcli.core import options as option_values
from gradcli.core.errors import BadInput, brief, real_number
from gradcli.core.graph import Graph
from gradcli.methods import forward, numeric, reverse, symbolic
from gradcli.verdict.report import (
    METHOD_ORDER, Directional, GradReport, MethodResult, relative_error)
from gradcli.verdict import tolerance as vt
from gradcli.core.constants import FLOOR_SHARE, NUMERICAL, TOLERANCES
from gradcli.verdict.status import verdict



#: The longest ``timeout`` (seconds): beyond it a limit means nothing; 0 (or None) is no limit.
MAX_TIMEOUT = 1e6


@dataclass(frozen=True)
class PointOptions:
    """The options of a comparison at a point (grad, hessian, explain), validated by :meth:`validate`."""

    methods: list
    rtol: float | None
    atol: float | None
    timeout: float | None

    @classmethod
    def validate(cls, methods=None, rtol=None, atol=None, timeout=symbolic.DEFAULT_TIMEOUT,
                 order=METHOD_ORDER) -> "PointOptions":
        """Every option of a point command checked once, for the command line and the Python API alike:
        :class:`BadInput` with one line that names the option (``rtol=inf`` and ``--rtol inf`` read the same)."""
        return cls(parse_methods(methods, order), _tolerance(rtol, "rtol"), _tolerance(atol, "atol"),
                   _timeout(timeout))


def _tolerance(value, name):
    return option_values.tolerance(value, f"{name} (--{name})")


def _timeout(value):
    if value is None:
        return None
    v = real_number(value, "timeout (--timeout)")
    if not 0 <= v <= MAX_TIMEOUT:  # also refuses nan and inf
        raise BadInput(f"timeout (--timeout) must be a number of seconds from 0 (no limit) to {MAX_TIMEOUT:g}, "
                       f"got {brief(value)}")
    return v


def parse_methods(names, order=METHOD_ORDER) -> list[str]:
    """``["forward,reverse", "central"]`` (or ``"forward,reverse"``) -> validated names in the canonical
    ``order``; :class:`BadInput` for an unknown name or anything but names."""
    if isinstance(names, str):
        names = [names]
    elif names is not None and not isinstance(names, (list, tuple)):
        raise BadInput(f"methods must be a name, a comma-separated string or a list of names, got {brief(names)}")
    wanted = []
    for item in names or ():
        if not isinstance(item, str):
            raise BadInput(f"methods must be names ({', '.join(order)}), got {brief(item)}")
        for given in item.split(","):
            given = given.strip()
            if given.startswith("-"):  # the command line's -m took the next option (-m --at x=1) as its name
                raise BadInput(f"-m/--method needs a method name, got the option {given!r}; "
                               f"choose from {', '.join(order)} (as in -m forward)")
            name = given.lower().replace("-", "_")
            if not name:
                continue
            if name == "all":
                wanted.extend(order)
                continue
            if name not in order:
                raise BadInput(f"unknown method {given!r}{_did_you_mean(name, order)}; choose from {', '.join(order)}")
            wanted.append(name)
    return [m for m in order if m in wanted] if wanted else list(order)


def _did_you_mean(name: str, order) -> str:
    """`` (did you mean forward?)`` for a misspelt method, as click suggests options; else ""."""
    import difflib  # here: only a misspelt method pays for it

    close = difflib.get_close_matches(name, order, n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


magnitudes = forward.magnitudes  # the tolerance's ``scale``
AD_ROUTES = ("forward", "reverse")


def _run(name, graph, point, timeout):
    """One method -> (jacobian or None, error estimate or None, status, message)."""
    if name == "forward":
        return forward.jacobian(graph, point)[1], None, "ok", ""
    if name == "reverse":
        return reverse.jacobian(graph, point)[1], None, "ok", ""
    fn = {"central": numeric.central, "richardson": numeric.richardson,
          "complex_step": numeric.complex_step}[name]
    r = fn(graph, point)
    return r.jacobian, r.error, r.status, r.message


def _errors(J, ref_exact, ref):
    """|J - ref| computed against the 35-digit reference where there is one, so that errors far below
    float64's resolution still show (1e-17 is not rounded to 0)."""
    abs_err = np.abs(J - ref)
    if ref_exact is not None and J.size <= 4096:
        sympy = symbolic.load_sympy()  # already loaded: the exact reference came from it
        for idx in np.ndindex(J.shape):
            r = ref_exact[idx[0]][idx[1]]
            if r is not None and np.isfinite(J[idx]):
                abs_err[idx] = float(abs(sympy.Float(float(J[idx]), 35) - r))
    with np.errstate(all="ignore"):
        rel = np.where(ref != 0, abs_err / np.abs(ref), abs_err)
    return abs_err, rel


def compare_point(graph: Graph, point: dict, expression: str = "", methods=None, rtol=None, atol=None,
                  timeout: float | None = symbolic.DEFAULT_TIMEOUT, warnings=(), direction=None) -> GradReport:
    """Every selected method at ``point``, with errors against the reference and the verdict.

    ``direction`` (one number per variable) adds each method's directional derivative J·v."""
    with np.errstate(all="ignore"):  # inf and nan are findings here, reported through the statuses
        report = _compare(graph, point, expression, methods, rtol, atol, timeout, warnings)
        if direction is not None:
            v = np.asarray(direction, dtype=float)
            report.direction = v
            ref = None if report.reference_jacobian is None else report.reference_jacobian @ v
            for name, m in report.methods.items():
                if m.jacobian is not None:
                    got = m.jacobian @ v
                    err = None if ref is None or name == report.reference else relative_error(got, ref)
                    report.directional[name] = Directional(got, err)
        return report


def _compare(graph, point, expression, methods, rtol, atol, timeout, warnings) -> GradReport:
    selected = parse_methods(methods)
    point = {v: float(point[v]) for v in graph.variables}
    diags, bad_value, bad_deriv = diagnose(graph, point)

    t0 = time.perf_counter()
    # without the symbolic method there is no exact reference, and sympy (most of a second to import) is
    # never loaded: forward and reverse agreeing, else Richardson, stand in, and the report names which
    sym = symbolic.symbolic(graph, point, timeout=timeout) if "symbolic" in selected else \
        symbolic.SymbolicResult("unavailable", "the symbolic method was not selected")
    sym_seconds = time.perf_counter() - t0

    results: dict = {}
    for name in selected:
        if name == "symbolic":
            continue
        t0 = time.perf_counter()
        try:
            J, est, status, msg = _run(name, graph, point, timeout)
        except Exception as exc:  # a method failing is a finding to report, not a crash
            J, est, status, msg = None, None, "error", f"{type(exc).__name__}: {exc}"
        results[name] = MethodResult(name, None if J is None else np.array(J, dtype=float), status, msg,
                                     error_estimate=None if est is None else np.asarray(est, dtype=float),
                                     seconds=time.perf_counter() - t0)

    # the reference: sympy; failing that, forward and reverse when they agree; failing that, Richardson
    ref_exact = ref_estimate = None
    if sym.status == "ok":
        reference = "symbolic"
        ref_exact = sym.values
        ref = np.array([[float(v) for v in row] for row in sym.values], dtype=float)
    elif sym.status == "undefined":
        reference = "symbolic"
        ref = np.array([[np.nan if v is None else float(v) for v in row] for row in sym.values], dtype=float)
        ref_exact = sym.values
    else:
        ref, reference, ref_estimate = _fallback_reference(graph, point, results)

    scale = magnitudes(graph, point)
    run = lambda p, signs: forward.jacobian(graph, p, signs)[1]
    try:
        spread = forward.rounding_spread(graph, point)
        floor_spread = forward.input_spread(run, graph, point)
    except Exception:  # forward mode itself failed: its own result says so
        spread = np.zeros_like(scale)
        floor_spread = None
    spread = route_spread(spread, results, AD_ROUTES)
    ad = {n: results[n].jacobian for n in AD_ROUTES if n in results and results[n].jacobian is not None}
    ill = classify(graph, point, ref, scale, spread, floor_spread, ad,
                   lambda: forward.rounding_culprits(run, graph, point), diags, bad_deriv, lambda i, k: (
                       f"d{'f' if len(graph.outputs) == 1 else f'f{i + 1}'}/d{graph.variables[k]}"),
                   exact=reference == "symbolic")
    if "symbolic" in selected:
        results["symbolic"] = MethodResult("symbolic", ref.copy() if sym.status != "unavailable" else None,
                                           "ok" if sym.status == "ok" else sym.status, sym.message,
                                           seconds=sym_seconds)
    values = _values(graph, point, bad_value)
    xs = np.array([max(abs(point[v]), 1.0) for v in graph.variables])
    floor = vt.floor(FLOOR_SHARE, np.nan_to_num(np.array(values, dtype=float)), xs)
    judge_all(results, reference, ref, ref_exact, bad_deriv, scale, spread, rtol, atol, floor, TOLERANCES,
              NUMERICAL, label=lambda i, k: f"d/d{graph.variables[k]}", ref_estimate=ref_estimate, ill=ill)

    report = GradReport(expression, list(graph.variables), point, values,
                        sym.text if sym.text else None, reference,
                        {k: results[k] for k in METHOD_ORDER if k in results}, "agree",
                        diagnostics=diags, warnings=list(warnings),
                        reference_jacobian=None if ref is None else np.where(bad_deriv, np.nan, ref),
                        reference_digits=_digits(sym, bad_deriv))
    verdict(report, sym.status, sym.message, bad_deriv, ref is not None)
    return report


def judge_all(results: dict, reference: str, ref, ref_exact, bad, scale, spread, rtol, atol, floor,
              tolerances: dict, numerical: tuple, label, ref_estimate=None, ill=None) -> None:
    """Mask what the point spoils in every method's result, then :func:`judge` each against the
    reference (grad and hessian alike). ``ref_estimate`` is a numerical reference's own error
    estimate: no method is blamed for the error the reference announced. ``ill`` marks the entries
    float64 cannot resolve (:mod:`gradcli.verdict.conditioning`): shown, never judged, and no
    numerical method vouches for them."""
    ill = np.zeros(np.shape(bad), dtype=bool) if ill is None else ill
    for name, m in results.items():
        if m.jacobian is not None:
            m.jacobian = np.where(bad, np.nan, m.jacobian)
            if m.status == "unavailable" and np.isfinite(m.jacobian[~bad]).all():
                m.status, m.message = "ok", ""  # only the entries the point itself spoils were missing
        if m.jacobian is None or m.status in ("error", "unavailable") or ref is None:
            continue
        if name == reference and name != "symbolic":
            continue
        judge(m, ref, ref_exact, bad | ill, scale, spread, rtol, atol, floor, tolerances[name],
              numerical=name in numerical, label=label, ref_estimate=ref_estimate)
        if name in numerical and m.status == "ok" and ill.any():
            i, k = (int(a[0]) for a in np.nonzero(ill))
            m.status = "unavailable"
            m.message = f"{label(i, k)}: float64 cannot resolve it here (the program as written loses its digits)"


def judge(m: MethodResult, ref, ref_exact, bad_deriv, scale, spread, rtol, atol, floor, defaults,
          numerical: bool, label, ref_estimate=None) -> None:
    """Errors, tolerance and status of one method's matrix (``m.jacobian``: a Jacobian or a Hessian)
    against the reference; shared by ``grad`` and ``hessian``.

    ``defaults`` is the method's (rtol, atol); ``numerical`` methods add ``floor`` (the size below which
    their error estimate is noise, not a lack of digits) and may be ``unavailable`` when their own
    estimate is as large as the result; ``label(i, k)`` names entry (i, k) in the message."""
    J = m.jacobian
    m.abs_error, m.rel_error = _errors(J, ref_exact, ref)
    default_tol = rtol is None and atol is None
    tol = vt.tolerance(np, ref, scale, spread, m.error_estimate, floor, defaults, rtol, atol, numerical,
                       ref_estimate=ref_estimate)
    m.tolerance = tol
    live = np.isfinite(ref) & ~bad_deriv
    # what the estimate must fit within: the method's tolerance relative to the derivative itself (not
    # to the scale of its terms: x - sin(x) at 1e-4 is 5e-9 and has 9 digits to show, not 1e-6 of 2),
    # plus the program's own rounding; the floor excuses a wide estimate only where the derivative is 0
    # (tanh(x) at 12.5 is 5.5e-11, far below the floor, and has digits)
    vouch = None if not numerical else vt.tolerance(np, ref, 0.0, spread, None, np.where(ref == 0, floor, 0.0),
                                                    defaults, rtol, atol, numerical)
    j = vt.judge_entries(np, J, m.abs_error, ref, live, tol, m.error_estimate, floor, numerical, default_tol,
                         vouch=vouch)
    if numerical:
        if j.nonfinite.any():
            m.status, m.message = "unavailable", "no finite estimate at this point (the steps overflow or " \
                                                 "leave the domain)"
            return
        if j.vague.any():
            m.status = "unavailable"
            m.message = "its own error estimate is as large as the derivative: no digits to compare"
            return
        # an entry within its tolerance only because the floor or its estimate is that wide, while it
        # misses a nonzero derivative by half or more, has no digits either (d/dy of exp(x) + y at
        # x = 40: y's steps change f by far less than f's rounding)
        if j.unseen.any():
            m.status = "unavailable"
            m.message = "the derivative is below what its steps can resolve next to f's size"
            return
        if j.unvouched.any():
            at = np.unravel_index(np.argmax(np.where(j.unvouched, m.error_estimate / np.where(vouch > 0, vouch, 1),
                                                     -1.0)), J.shape)
            m.status = "unavailable"
            m.message = (f"{label(*at)}: its own error estimate {m.error_estimate[at]:.2g} is above the "
                         f"tolerance {vouch[at]:.2g}: it cannot vouch for the digits that would need")
            return
    ok = ~j.exceeds
    if m.name != "symbolic" and not ok.all():
        m.status = "mismatch"
        badness = np.where(ok, -1.0, np.nan_to_num(m.abs_error / np.where(tol > 0, tol, 1), nan=np.inf))
        worst = np.unravel_index(np.argmax(badness), J.shape)
        m.message = (f"{label(*worst)}: error {m.abs_error[worst]:.3g} exceeds the tolerance "
                     f"{tol[worst]:.3g}")


def _digits(sym, bad) -> list | None:
    """The symbolic reference as 35-digit decimal strings (None where the point spoils an entry)."""
    if sym.status == "unavailable" or not sym.values:
        return None
    return [[None if v is None or bad[i, k] else str(v) for k, v in enumerate(row)]
            for i, row in enumerate(sym.values)]


def fallback_reference(results: dict, routes, numerical: str, compute: dict):
    """Without sympy (grad and hessian alike): the two AD ``routes`` averaged where they agree to 1e-12
    ("consensus"), otherwise the ``numerical`` method with its own error estimate -> (matrix, its name,
    its estimate or None). Each method comes from ``results`` where it ran, else from
    ``compute[name]()`` -> (matrix, estimate)."""
    def get(name):
        m = results.get(name)
        return (m.jacobian, m.error_estimate) if m is not None else compute[name]()
    try:
        A, B = (get(name)[0] for name in routes)
        if np.allclose(A, B, rtol=1e-12, atol=0, equal_nan=True):
            return (A + B) / 2, "consensus", None
        J, estimate = get(numerical)
        return J, numerical, estimate
    except Exception:
        return None, "none", None


def _fallback_reference(graph, point, results):
    def richardson():
        r = numeric.richardson(graph, point)
        return r.jacobian, r.error
    return fallback_reference(results, ("forward", "reverse"), "richardson", {
        "forward": lambda: (forward.jacobian(graph, point)[1], None),
        "reverse": lambda: (reverse.jacobian(graph, point)[1], None), "richardson": richardson})


def _values(graph, point, bad_value):
    with np.errstate(all="ignore"):
        vals = forward.jacobian(graph, point)[0]
    return [None if bad or not np.isfinite(v) else float(v) for v, bad in zip(vals, bad_value)]
