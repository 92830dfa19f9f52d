"""The Hessian at a point: every route, errors against the reference, symmetry, eigenvalues, verdict.

Tolerances are ``grad``'s (:mod:`gradcli.verdict.tolerance`): an entry passes when
``|got - ref| <= rtol * max(|ref|, scale) + 10 * spread [+ floor + 10 * estimate]``, where ``scale`` is
the Hessian computed without cancellation (absolute values of every first and second partial), ``spread`` is how far
one extra ulp of rounding per operation moves the Hessian (nested dual numbers, Monte Carlo
arithmetic) and ``estimate`` is the difference quotient's own error estimate. ``--rtol``/``--atol``
replace all of it with numpy.isclose's convention, as for ``grad``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from gradcli.verdict.conditioning import classify, route_spread
from gradcli.verdict.point import fallback_reference, judge_all, parse_methods
from gradcli.verdict.diagnose import diagnose_hessian
from gradcli.core.errors import BadInput
from gradcli.core.graph import Graph
from gradcli.methods import hessian as hm
from gradcli.methods import forward, reverse, symbolic
from gradcli.verdict.report import HESSIAN_ORDER, Directional, HessianReport, MethodResult, relative_error
from gradcli.verdict import tolerance as vt
from gradcli.core.constants import FLOOR_SHARE, HESSIAN_NUMERICAL, HESSIAN_TOLERANCES
from gradcli.verdict.status import verdict

#: An eigenvalue within this fraction of the largest |eigenvalue| counts as zero (degenerate).
DEFINITENESS_RTOL = 1e-8
_RUN = {"forward_over_reverse": hm.forward_over_reverse, "reverse_over_forward": hm.reverse_over_forward,
        "central_of_reverse": hm.central_of_reverse}


def parse_hessian_methods(names) -> list[str]:
    """``["forward_over_reverse,central_of_reverse"]`` -> validated names in the canonical order."""
    return parse_methods(names, HESSIAN_ORDER)


def require_scalar(graph: Graph) -> None:
    if len(graph.outputs) != 1:
        raise BadInput(f"a Hessian needs a scalar expression, and this one has {len(graph.outputs)} outputs "
                       "(top-level commas); ask for one component at a time")


def symmetry(H) -> float | None:
    """max |H - H^T| / max |H| over the finite entries (0 for a zero matrix); None without a matrix."""
    if H is None or H.size == 0:
        return None if H is None else 0.0
    live = np.isfinite(H) & np.isfinite(H.T)
    if not live.any():
        return None
    big = np.max(np.abs(H[live]))
    asym = np.max(np.abs(H - H.T)[live])
    return float(asym / big) if big > 0 else float(asym)


def definiteness(eigenvalues, rtol: float = DEFINITENESS_RTOL) -> str | None:
    """minimum (all > 0), maximum (all < 0), saddle (both signs), degenerate (some |λ| <= rtol·max|λ|).

    The names are those of the second-derivative test: they classify the point only where the gradient
    vanishes; elsewhere they describe the local curvature."""
    lam = np.asarray(eigenvalues, dtype=float)
    if lam.size == 0 or not np.isfinite(lam).all():
        return None
    big = np.max(np.abs(lam))
    if big == 0 or np.any(np.abs(lam) <= rtol * big):
        return "degenerate"
    if np.all(lam > 0):
        return "minimum"
    if np.all(lam < 0):
        return "maximum"
    return "saddle"


def compare_hessian(graph: Graph, point: dict, expression: str = "", methods=None, rtol=None, atol=None,
                    timeout: float | None = symbolic.DEFAULT_TIMEOUT, warnings=(), direction=None) -> HessianReport:
    """Every selected Hessian route at ``point``, with errors against sympy's Hessian and the verdict.

    ``direction`` (one number per variable) adds each method's directional derivative grad·v and
    Hessian-vector product H·v."""
    require_scalar(graph)
    with np.errstate(all="ignore"):  # inf and nan are findings, reported through the statuses
        report, gradients = _compare(graph, point, expression, parse_hessian_methods(methods), rtol, atol,
                                     timeout, warnings)
        if direction is not None:
            _directional(report, gradients, np.asarray(direction, dtype=float))
    return report


@dataclass(frozen=True)
class _Problem:
    """The graph at the point (in float64), and where :func:`diagnose_hessian` found the value, the
    gradient and each Hessian entry undefined."""

    graph: Graph
    point: dict
    diags: list
    bad_value: bool
    bad_grad: np.ndarray
    bad: np.ndarray

    @property
    def n(self) -> int:
        return len(self.graph.variables)

    def label(self, i, k) -> str:
        """How an entry is named in messages."""
        return f"d²f/d{self.graph.variables[i]}d{self.graph.variables[k]}"


@dataclass(frozen=True)
class _Reference:
    """What the methods are judged against: its name (a method's, or symbolic), the Hessian (None where
    there is none), sympy's exact entries, the gradient and the differences' own error estimate."""

    name: str
    hessian: np.ndarray | None
    exact: list | None
    gradient: np.ndarray | None
    estimate: np.ndarray | None


@dataclass(frozen=True)
class _Conditioning:
    """The Hessian's size without cancellation, how far rounding moves it, and the entries float64 cannot
    resolve."""

    scale: np.ndarray
    spread: np.ndarray
    ill: np.ndarray


def _compare(graph, point, expression, selected, rtol, atol, timeout, warnings) -> HessianReport:
    """The report of :func:`compare_hessian`, and each method's gradient for the directional derivatives."""
    point = {v: float(point[v]) for v in graph.variables}
    at = _Problem(graph, point, *diagnose_hessian(graph, point))

    t0 = time.perf_counter()
    sym = hm.symbolic_hessian(graph, point, timeout=timeout)
    sym_seconds = time.perf_counter() - t0

    results, gradients = _run_methods(at, selected)
    ref = _reference(at, sym, results)
    cond = _conditioning(at, ref, results)
    if "symbolic" in selected:
        results["symbolic"] = MethodResult("symbolic", ref.hessian.copy() if sym.status != "unavailable" else None,
                                           "ok" if sym.status == "ok" else sym.status, sym.message,
                                           seconds=sym_seconds)
        if sym.status != "unavailable":
            gradients["symbolic"] = ref.gradient
    value = _value(graph, point, at.bad_value)
    _judge(at, ref, cond, results, rtol, atol)

    ordered = {k: results[k] for k in HESSIAN_ORDER if k in results}
    report = HessianReport(expression, list(graph.variables), point, value,
                           None if ref.gradient is None else np.where(at.bad_grad | at.bad_value, np.nan, ref.gradient),
                           sym.text or None, ref.name, ordered, "agree", diagnostics=at.diags,
                           warnings=list(warnings),
                           reference_hessian=None if ref.hessian is None else np.where(at.bad, np.nan, ref.hessian),
                           symmetry={k: symmetry(m.jacobian) for k, m in ordered.items()},
                           symbolic_gradient=sym.gradient_text or None)
    _curvature(report, at, ref, results)
    verdict(report, sym.status, sym.message, at.bad, ref.hessian is not None)
    return report, gradients


def _run_methods(at: _Problem, selected) -> tuple[dict, dict]:
    """Every selected route but symbolic, timed -> their results and the gradients they computed on the way."""
    results, gradients = {}, {}
    for name in selected:
        if name == "symbolic":
            continue
        t0 = time.perf_counter()
        try:
            r = _RUN[name](at.graph, at.point)
            H, est, status, msg = r.hessian, r.error, r.status, r.message
            gradients[name] = r.gradient
        except Exception as exc:  # a method failing is a finding to report, not a crash
            H, est, status, msg = None, None, "error", f"{type(exc).__name__}: {exc}"
        results[name] = MethodResult(name, None if H is None else np.array(H, dtype=float), status, msg,
                                     error_estimate=None if est is None else np.asarray(est, dtype=float),
                                     seconds=time.perf_counter() - t0)
    return results, gradients


def _reference(at: _Problem, sym, results: dict) -> _Reference:
    """sympy's Hessian and gradient where it has them, else the best the methods offer, with reverse mode's
    gradient."""
    graph, point, n = at.graph, at.point, at.n
    ref_exact, ref_grad, ref_estimate = None, None, None
    if sym.status in ("ok", "undefined"):
        reference, ref_exact = "symbolic", sym.values
        ref = np.array([[np.nan if v is None else float(v) for v in row] for row in sym.values],
                       dtype=float).reshape(n, n)
        ref_grad = np.array([np.nan if v is None else float(v) for v in sym.gradient], dtype=float)
    else:
        ref, reference, ref_estimate = _fallback_reference(graph, point, results)
    if ref_grad is None:
        try:
            ref_grad = np.asarray(reverse.jacobian(graph, point)[1][0], dtype=float)
        except Exception:
            ref_grad = None
    return _Reference(reference, ref, ref_exact, ref_grad, ref_estimate)


def _conditioning(at: _Problem, ref: _Reference, results: dict) -> _Conditioning:
    """The tolerances' scale and rounding spread, and which entries the rounding makes ill-conditioned."""
    graph, point, n = at.graph, at.point, at.n
    run = lambda p, signs: hm.forward_over_forward(graph, p, signs)
    try:
        spread = hm.rounding_spread(graph, point)
        floor_spread = forward.input_spread(run, graph, point)
    except Exception:  # the nested duals themselves failed: the AD methods' own results say so
        spread = np.zeros((n, n))
        floor_spread = None
    routes = ("forward_over_reverse", "reverse_over_forward")
    spread = route_spread(spread, results, routes)
    ad = {r: results[r].jacobian for r in routes if r in results and results[r].jacobian is not None}
    try:
        scale = np.nan_to_num(hm.magnitudes(graph, point), nan=0.0)
    except Exception:
        scale = np.zeros((n, n))
    ill = classify(graph, point, ref.hessian, scale, spread, floor_spread, ad,
                   lambda: forward.rounding_culprits(run, graph, point), at.diags, at.bad, at.label,
                   exact=ref.name == "symbolic")
    return _Conditioning(scale, spread, ill)


def _judge(at: _Problem, ref: _Reference, cond: _Conditioning, results: dict, rtol, atol) -> None:
    """Every method's status and errors against the reference, with ``grad``'s tolerances."""
    xs = np.array([max(abs(at.point[v]), 1.0) for v in at.graph.variables])
    g = np.abs(np.nan_to_num(ref.gradient)) if ref.gradient is not None else np.zeros(at.n)
    floor = vt.floor(FLOOR_SHARE, g, xs)  # the differences see the gradient to ~1e-8 of its size
    judge_all(results, ref.name, ref.hessian, ref.exact, at.bad, cond.scale, cond.spread, rtol, atol, floor,
              HESSIAN_TOLERANCES, HESSIAN_NUMERICAL, label=at.label, ref_estimate=ref.estimate, ill=cond.ill)


def _curvature(report: HessianReport, at: _Problem, ref: _Reference, results: dict) -> None:
    """The reference's eigenvalues and definiteness, where every entry of it is defined and finite."""
    H, n = ref.hessian, at.n
    if H is None or at.bad.any() or not np.isfinite(H).all():
        return
    sym_ref = (H + H.T) / 2
    report.eigenvalues = np.linalg.eigvalsh(sym_ref) if n else np.zeros(0)
    tol = DEFINITENESS_RTOL
    if ref.name == "central_of_reverse" and n:  # only as good as the differences' own estimate
        est = results[ref.name].error_estimate
        big = np.max(np.abs(report.eigenvalues))
        if est is not None and big > 0:
            tol = max(tol, 10 * float(np.max(np.nan_to_num(est))) / big)
    report.definiteness = definiteness(report.eigenvalues, tol)


def _fallback_reference(graph, point, results):
    """Without sympy: the two AD routes when they agree, otherwise the differences of the gradient."""
    def route(method):
        return lambda: (method(graph, point).hessian, None)

    def differences():
        h = hm.central_of_reverse(graph, point)
        return h.hessian, h.error
    return fallback_reference(results, ("forward_over_reverse", "reverse_over_forward"), "central_of_reverse", {
        "forward_over_reverse": route(hm.forward_over_reverse), "reverse_over_forward": route(hm.reverse_over_forward),
        "central_of_reverse": differences})


def _value(graph, point, bad_value):
    """The value in float64, as ``grad`` reports it (None where undefined)."""
    if bad_value:
        return None
    v = float(reverse.jacobian(graph, point)[0][0])
    return v if np.isfinite(v) else None


def _directional(report: HessianReport, gradients: dict, v: np.ndarray) -> None:
    """grad·v and H·v for every method that has a matrix, with relative errors against the reference's."""
    report.direction = v
    ref_h = report.reference_hessian
    ref_hv = None if ref_h is None else ref_h @ v
    ref_g = report.gradient_reference
    ref_d = None if ref_g is None else np.array([ref_g @ v])
    for name, m in report.methods.items():
        if m.jacobian is None:
            continue
        g = gradients.get(name, ref_g)
        d = np.array([np.nan]) if g is None else np.array([np.asarray(g, dtype=float) @ v])
        hv = m.jacobian @ v
        own = name == report.reference
        report.directional[name] = Directional(
            d, None if own or ref_d is None else relative_error(d, ref_d),
            hv, None if own or ref_hv is None else relative_error(hv, ref_hv))
