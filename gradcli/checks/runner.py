"""Run one registered check: ``run_check(spec, defaults) -> CheckResult``.

The reference is independent of the gradient under test (docs/contract.md, the model file):

* **traced AD** (``gradcli.trace``) is the reference when tracing succeeded, its value equals the
  function's, and it agrees with the finite differences wherever those can decide (every element in
  ``full`` mode, up to ``NUMERIC_CAP`` elements, else a seeded sample; seeded random directions in
  ``fast`` mode). AD has no truncation error, so it decides elements the differences cannot;
* an output that the trace finds **piecewise constant** in the inputs (it reaches them only through
  constant routes: floor, sign, comparisons) has the derivative 0, the reference once the finite
  differences agree with it (a check with no gradient under test then passes, with a note);
* otherwise the **finite differences** (:mod:`gradcli.checks.comparisons.numeric`, Richardson with an error
  estimate), with **complex step** taking over only where it agrees with them.

An element passes when ``|got - ref| <= rtol * max(|ref|, typical) + atol + floor + 3 * estimate``
where ``typical`` is the median |ref| over that input (the gradient's own size, for elements that
cancel to near zero), ``floor`` is 10 ulp of the largest |ref| in the dtype under test (where the
reference is 0 to its estimate, plus the scale of an exact zero: gradcli.checks.comparisons.judging.exact_zero) and
``estimate`` the reference's own error estimate: a method is never blamed for error the reference
announced. When that estimate is too large for the tolerance, the element is **inconclusive** (not a pass), unless the
difference exceeds even the announced error, which is a failure (traced AD's exact 0, which the
differences agree with to their error, is not in doubt). Default tolerances depend on the dtype
under test (``RTOL``); ``rtol``/``atol`` options replace them.

Scalar outputs (size 1) check the gradient; larger outputs check vector-Jacobian products: every
row of the Jacobian (``vjp(e_j)``) in ``full`` mode, and in ``fast`` mode ``K`` seeded random
cotangents v and directions u with <u, J^T v> = <J u, v> (J^T v from the gradient under test, J u by
differences) plus, where AD is trusted, J^T v compared element by element with AD's.

How it runs: :func:`~gradcli.checks.building.build_context` calls the function at the inputs and resolves
everything once into a frozen :class:`~gradcli.checks.context.CheckContext`; the comparisons
(gradcli.checks.comparisons.full, .fast, .second_order, .taylor) return outcomes; :func:`apply` here is the
one place they become the result's status and message. A check's code cannot end the run: any BaseException it
raises is its ``error`` (only the user's Ctrl-C propagates, see gradcli.checks.process.interrupt).
"""
from __future__ import annotations

import time

from gradcli.core.errors import BadInput
from gradcli.checks.building import build_context
from gradcli.checks.comparisons import forward_mode, second_order, taylor
from gradcli.checks.comparisons.fast import compare_fast
from gradcli.checks.comparisons.full import compare_full
from gradcli.checks.comparisons.gradient_field import hv_under_test
from gradcli.checks.comparisons.under_test import user_traceback, zero_cotangent
from gradcli.checks.context import RTOL, TAYLOR_RESOLUTION, CheckContext, Outcome, Verdict
from gradcli.checks.kernels import criterion as kernel
from gradcli.checks.process.interrupt import is_user_interrupt, raised_by_user_code
from gradcli.checks.registry import check_wrt, validate_options
from gradcli.checks.result import CheckResult
from gradcli.checks.spec import OPTIONS
from gradcli.checks.targets.expression_formulas import judge_formulas

__all__ = ["run_check", "user_traceback", "RTOL"]


def run_check(spec, defaults: dict | None = None) -> CheckResult:
    """Run ``spec`` with ``defaults`` (e.g. ``[tool.gradcli]``) under its own options -> CheckResult."""
    t0 = time.perf_counter()
    result = CheckResult(name=spec.name, file=spec.file, line=spec.line, kind=spec.kind, status="pass")
    try:
        opts = {k: v for k, v in (defaults or {}).items() if k in OPTIONS and v is not None}
        opts.update({k: v for k, v in spec.options.items() if v is not None})
        validate_options(opts)
        if spec.options.get("wrt") is None and opts.get("wrt") is not None:
            _project_wrt(spec, opts["wrt"])
        _run(spec, opts, result)
    except BadInput as exc:
        result.status, result.message = "error", f"bad check: {exc.message}"
    except Exception:
        raise  # gradcli's own bug: the session reports it as an internal error
    except BaseException as exc:  # noqa: BLE001 - sys.exit() and the like in user code end the check, not the run
        if is_user_interrupt(exc):
            raise
        result.status = "error"
        result.message = (f"the code under test raised {raised_by_user_code(exc)}, which would end the run; "
                          "a check's code must return or raise an Exception")
        result.traceback = user_traceback(exc)
    result.seconds = time.perf_counter() - t0
    return result


def apply(result: CheckResult, outcome: Outcome) -> None:
    """Write an outcome onto the result: the one place a check's status is set."""
    result.notes.extend(outcome.notes)
    for name, summary in outcome.methods:
        result.methods[name] = summary
    if outcome.reference is not None:
        result.reference = outcome.reference
    if outcome.mismatches is not None:
        result.mismatches = list(outcome.mismatches)
    if outcome.errors is not None:
        result.max_abs_error, result.max_rel_error = outcome.errors
    if outcome.second_order is not None:
        result.second_order = outcome.second_order
    if outcome.precision is not None:
        result.digits, result.underflow = outcome.precision
    if outcome.taylor2 is not None:
        result.taylor2 = outcome.taylor2
    if outcome.kernel is not None:
        result.kernel = list(outcome.kernel)
    if outcome.verdict is not None:
        v = outcome.verdict
        result.status, result.message = v.status, v.message
        if v.traceback:
            result.traceback = v.traceback
    result.message += outcome.suffix


def _project_wrt(spec, wrt) -> None:
    # a check's own wrt= was checked against its inputs when it was registered; [tool.gradcli]'s
    # applies to every check, so it is checked here, and the message says where it came from
    try:
        check_wrt(spec.inputs, {"wrt": wrt})
    except BadInput as exc:
        raise BadInput(f"[tool.gradcli] {exc.message}") from None


def _run(spec, opts: dict, result: CheckResult) -> None:
    if opts.get("reference") is not None:
        apply(result, kernel.check(spec, opts, run_check))
        result.dtype = opts.get("dtype") or "float64"
        return
    built = build_context(spec, opts, result)
    if isinstance(built, Verdict):
        apply(result, Outcome(verdict=built))
        return
    ctx = built
    result.dtype = ctx.dtype
    outcome = zero_cotangent(ctx) or (compare_full(ctx) if ctx.mode == "full" else compare_fast(ctx))
    apply(result, outcome)
    if spec.expression is not None and spec.grad is not None and result.status == "pass":
        apply(result, judge_formulas(ctx, opts.get("domain")))  # one point can agree by chance
    if not outcome.stop:
        _after_first_order(ctx, result)
    _seen_on_the_way(ctx, result)


def _seen_on_the_way(ctx: CheckContext, result: CheckResult) -> None:
    """What calling the code showed beside the comparisons: a framework's None for a gradient, which it
    reads as 0 (right where the derivative is 0: the comparison decided), and an output whose shape or
    dtype moved with the inputs, which no comparison can judge (its steps were unusable)."""
    none = getattr(ctx.user_vjp, "framework_none", {})
    said = tuple(getattr(ctx.user_vjp, "framework_notes", ())) + tuple(none.values())
    result.notes.extend(text for text in said if text not in result.notes)
    wrong = [k for k in none if any(m.input == k for m in result.mismatches)]
    if result.status == "fail" and wrong:
        result.message += "; " + "; ".join(f"{none[k]}, but its derivative is not 0" for k in wrong)
    change = getattr(ctx.numf.call, "change", None)
    if change is not None and result.status != "error":
        apply(result, Outcome(verdict=Verdict("fail", change)))


def _after_first_order(ctx: CheckContext, result: CheckResult) -> None:
    """The Taylor test (asked for, or to resolve an inconclusive verdict), then order 2 on a pass."""
    r = result
    if ctx.taylor or r.status == "inconclusive":
        t = taylor.taylor_test(ctx, 1)
        if isinstance(t, Verdict):  # the gradient under test raised this time
            apply(r, Outcome(verdict=t))
            return
        r.taylor = t
        fine = t.resolution is None or t.resolution <= TAYLOR_RESOLUTION
        if r.status == "inconclusive" and t.verdict == "right" and fine:
            r.status = "pass"
            r.message += f"; resolved by the Taylor test: the remainder falls like h^2 ({t.detail})"
        elif r.status == "inconclusive" and t.verdict == "right":
            # slope 2 only bounds the error by the resolution: too coarse to call it verified
            r.message += (f"; the Taylor test agrees but only to {t.resolution:.2g} relative ({t.detail}); "
                          "evaluate the function in float64 to decide")
        elif r.status == "inconclusive" and t.verdict == "wrong":
            r.status = "fail"
            r.message += (f"; the Taylor test decides: the remainder falls like h, not h^2 ({t.detail}): "
                          "the gradient is wrong")
        elif r.status == "pass" and t.verdict == "wrong":
            r.notes.append(f"the Taylor test disagrees: {t.detail}")
    if r.status == "pass":  # a forward rule (a Function's jvp, a custom_jvp) is checked as a jvp
        forward = forward_mode.check_forward_mode(ctx)
        if forward is not None:
            apply(r, forward)
    if ctx.order == 2 and r.status == "pass":
        outcome = second_order.check_second_order(ctx, r.reference)
        apply(r, outcome)
        # with ``taylor`` set, the order-2 slope is reported even when a comparison failed first
        if not outcome.stop and ctx.taylor and r.taylor2 is None and r.status in ("pass", "fail"):
            t2 = taylor.taylor_test(ctx, 2, hv_under_test(ctx))
            if isinstance(t2, Verdict):
                apply(r, Outcome(verdict=t2))
                return
            r.taylor2 = t2
            r.second_order["taylor"] = t2.to_dict()
