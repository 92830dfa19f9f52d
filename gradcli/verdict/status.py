"""The one overall verdict of grad, hessian and batch, from the methods' statuses and the diagnostics."""
from __future__ import annotations

import numpy as np


def overall_status(mismatched, kinds, have_reference: bool = True) -> str:
    """A mismatch decides; then a point where the derivative is undefined, then one where it does not
    exist (a kink), then one where it exists but float64 cannot resolve it; without a reference nothing
    is decided; otherwise the methods agree. ``kinds`` is the set of diagnostic kinds found
    ("undefined", "nondifferentiable", "ill_conditioned"; a "precision" note decides nothing)."""
    if mismatched:
        return "disagree"
    for kind in ("undefined", "nondifferentiable", "ill_conditioned"):
        if kind in kinds:
            return kind
    if not have_reference:
        return "undefined"
    return "agree"


def _disagree_message(mismatched, reference: str) -> str:
    return f"{', '.join(mismatched)} disagree{'s' if len(mismatched) == 1 else ''} with the {reference} reference"


def verdict(report, sym_status: str, sym_message: str, bad_deriv, have_reference: bool) -> None:
    """The overall status and message of a GradReport or HessianReport from its methods and diagnostics."""
    mismatched = [n for n, m in report.methods.items() if m.status == "mismatch"]
    kinds = {d.kind for d in report.diagnostics}
    if sym_status == "undefined" and not bad_deriv.any():
        kinds.add("undefined")  # sympy finds it undefined where the table's predicates did not
    report.status = overall_status(mismatched, kinds, have_reference)
    if report.status == "disagree":
        report.message = _disagree_message(mismatched, report.reference)
    elif report.status == "undefined":
        report.message = next((d.message for d in report.diagnostics if d.kind == "undefined"),
                              sym_message if have_reference or kinds else "no reference could be computed")
    elif report.status in ("nondifferentiable", "ill_conditioned"):
        report.message = next(d.message for d in report.diagnostics if d.kind == report.status)
    else:
        n = sum(1 for m in report.methods.values() if m.status == "ok")
        report.message = f"{n} {'methods agree' if n != 1 else 'method agrees'} with the {report.reference} reference"
    if bad_deriv.any():
        for m in report.methods.values():
            if m.error_estimate is not None:
                m.error_estimate = np.where(bad_deriv, np.nan, m.error_estimate)
            if bad_deriv.all() and m.jacobian is not None and m.status in ("ok", "unavailable"):
                m.status, m.message = "undefined", ""


def batch_verdict(report) -> None:
    """The overall status and message of a BatchReport: as at a point, with the points where the gradient
    is undefined or does not exist counted, and undefined only when no point could be compared."""
    judged = [m for m in report.methods.values() if not m.reference]
    bad = [m.name for m in judged if m.mismatched]
    compared = sum(m.compared for m in judged)
    undefined = f"; {report.undefined} of {report.points} points undefined or not differentiable" \
        if report.undefined else ""
    everywhere = compared == 0 and report.points > 0 and report.undefined
    report.status = overall_status(bad, {"undefined"} if everywhere else set())
    if report.status == "disagree":
        total = max(m.mismatched for m in judged)
        report.message = (f"{_disagree_message(bad, report.reference)} at up to {total} of {report.points} "
                          f"points{undefined}")
    elif report.status == "undefined":
        report.message = f"the gradient is undefined or not differentiable at every point{undefined}"
    else:
        ok = [m.name for m in judged if m.status == "ok"]
        agree = "methods agree" if len(ok) != 1 else "method agrees"
        report.message = (f"{len(ok)} {agree} with the {report.reference} "
                          f"reference at every point where the gradient is defined{undefined}")
