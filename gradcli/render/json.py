"""The ``--json`` documents: exactly one JSON object, with null for every non-finite number.

Each document is a function of its report (plain data); the reports' ``to_dict()`` call these.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np


def dumps(doc: dict) -> str:
    # allow_nan=False: a stray inf/nan must fail loudly here rather than emit invalid JSON
    import json  # here: a report printed as a table never pays for the json module

    return json.dumps(doc, indent=2, allow_nan=False, default=_numpy_default)


def _numpy_default(obj):
    """What json cannot encode by itself: numpy numbers and arrays (a 0-d array is what several numpy
    functions return for one number), as plain numbers, null where not finite."""
    out = plain(obj) if isinstance(obj, (np.ndarray, np.generic)) else obj
    if out is not obj:
        return out
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def plain(obj):
    """Dataclasses, numpy numbers and arrays (0-d ones too) and non-finite floats -> JSON-ready values:
    dicts, lists, str, bool, int, float, None (recursive over the document's few levels of nesting)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return plain(obj[()]) if obj.ndim == 0 else [plain(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return finite_or_none(obj)
    return obj


def error_document(message: str, **extra) -> str:
    return dumps({"status": "error", "error": message, **extra})


def finite_or_none(v):
    """JSON has no inf/nan: non-finite numbers become null (the status next to them says why)."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def symbolic_document(variables, symbolic):
    """Derivative strings for JSON: {var: text} for one output, a list of those for several."""
    if symbolic is None:
        return None
    if len(symbolic) > 1:
        return [dict(zip(variables, row)) for row in symbolic]
    return dict(zip(variables, symbolic[0]))


def null_matrix(a) -> list | None:
    return None if a is None else [[finite_or_none(v) for v in row] for row in np.asarray(a, dtype=float)]


def _point_document(report, doc: dict) -> dict:
    """The header and trailer every single-point document shares (grad and hessian)."""
    head = {"expression": report.expression, "variables": list(report.variables),
            "point": {k: finite_or_none(v) for k, v in report.point.items()}}
    doc = {**head, **doc}
    if report.message:
        doc["message"] = report.message
    if report.diagnostics:
        doc["diagnostics"] = [{"kind": d.kind, "op": d.op, "message": d.message} for d in report.diagnostics]
    if report.warnings:
        doc["warnings"] = list(report.warnings)
    if report.direction is not None:
        doc["direction"] = dict(zip(report.variables, (finite_or_none(v) for v in report.direction)))
    return doc


def _grad_matrix(report, jac):
    if jac is None:  # same shape, all null: doc["methods"][m]["gradient"]["x"] always works
        jac = np.full((len(report.values), len(report.variables)), np.nan)
    if report.vector:
        return [[finite_or_none(v) for v in row] for row in jac]
    return {v: finite_or_none(g) for v, g in zip(report.variables, jac[0])}


def grad_document(report) -> dict:
    """The ``gradcli grad --json`` document of a GradReport."""
    key = "jacobian" if report.vector else "gradient"
    methods = {}
    for name, m in report.methods.items():
        entry = {key: _grad_matrix(report, m.jacobian), "max_rel_error": finite_or_none(m.max_rel_error),
                 "status": m.status}
        if m.rel_error is not None:
            entry["rel_error"] = _grad_matrix(report, m.rel_error)
        if m.error_estimate is not None:
            entry["error_estimate"] = _grad_matrix(report, m.error_estimate)
        if m.message:
            entry["message"] = m.message
        d = report.directional.get(name)
        if d is not None:
            entry["directional_derivative"] = ([finite_or_none(v) for v in d.derivative] if report.vector
                                               else finite_or_none(d.derivative[0]))
            entry["directional_rel_error"] = finite_or_none(d.derivative_rel_error)
        methods[name] = entry
    return _point_document(report, {
        "value": ([finite_or_none(v) for v in report.values] if report.vector
                  else finite_or_none(report.values[0])),
        "symbolic": symbolic_document(report.variables, report.symbolic),
        "reference": report.reference,
        "reference_digits": symbolic_document(report.variables, report.reference_digits),
        "methods": methods,
        "status": report.status,
    })


def hessian_document(report) -> dict:
    """The ``gradcli hessian --json`` document of a HessianReport."""
    methods = {}
    n = len(report.variables)
    for name, m in report.methods.items():
        H = m.jacobian if m.jacobian is not None else np.full((n, n), np.nan)
        entry = {"hessian": null_matrix(H), "max_rel_error": finite_or_none(m.max_rel_error),
                 "status": m.status}
        if m.rel_error is not None:
            entry["rel_error"] = null_matrix(m.rel_error)
        if m.error_estimate is not None:
            entry["error_estimate"] = null_matrix(m.error_estimate)
        if m.message:
            entry["message"] = m.message
        d = report.directional.get(name)
        if d is not None:
            entry["directional_derivative"] = finite_or_none(d.derivative[0])
            entry["directional_rel_error"] = finite_or_none(d.derivative_rel_error)
            entry["hvp"] = None if d.hvp is None else [finite_or_none(v) for v in d.hvp]
            entry["hvp_rel_error"] = finite_or_none(d.hvp_rel_error)
        methods[name] = entry
    return _point_document(report, {
        "value": finite_or_none(report.value),
        "gradient": report.gradient,
        "symbolic": report.symbolic,
        "symbolic_gradient": (None if report.symbolic_gradient is None
                              else dict(zip(report.variables, report.symbolic_gradient))),
        "reference": report.reference,
        "methods": methods,
        "symmetry": {k: finite_or_none(v) for k, v in report.symmetry.items()},
        "eigenvalues": None if report.eigenvalues is None else [finite_or_none(v) for v in report.eigenvalues],
        "definiteness": report.definiteness,
        "status": report.status,
    })


def worst_record(record: dict) -> dict:
    """A worst-point record with every float JSON-safe (non-finite -> null)."""
    out = {}
    for k, v in record.items():
        if isinstance(v, dict):
            out[k] = {kk: finite_or_none(vv) for kk, vv in v.items()}
        elif isinstance(v, float):
            out[k] = finite_or_none(v)
        else:
            out[k] = v
    return out


def batch_method_document(m, points: int) -> dict:
    """One method's entry in the batch document (a BatchMethod over ``points`` points)."""
    d = {"status": m.status,
         "max_rel_error": finite_or_none(m.max_rel_error),
         "median_rel_error": finite_or_none(m.median_rel_error),
         "agree_fraction": m.agree_fraction,
         "agreed": m.agreed, "mismatched": m.mismatched,
         "undefined": m.undefined, "unavailable": m.unavailable,
         "seconds": m.seconds,
         "points_per_second": finite_or_none(points / m.seconds) if m.seconds > 0 else None,
         "worst": [worst_record(w) for w in m.worst]}
    if m.reference:
        d["reference"] = True
    if m.message:
        d["message"] = m.message
    return d


def batch_document(report) -> dict:
    """The ``gradcli grad --batch/--points --json`` document of a BatchReport."""
    doc = {
        "expression": report.expression,
        "variables": list(report.variables),
        "points": report.points,
        "device": report.device,
        "dtype": report.dtype,
        "chunk": report.chunk,
        **report.source,
        "reference": report.reference,
        "symbolic": symbolic_document(report.variables, report.symbolic),
        "methods": {name: batch_method_document(m, report.points) for name, m in report.methods.items()},
        "undefined": report.undefined,
        "worst": [worst_record(w) for w in report.worst],
        "median": report.median,
        "seconds": report.seconds,
        "points_per_second": finite_or_none(report.points_per_second),
        "status": report.status,
        "message": report.message,
    }
    if report.reference_fallback:
        doc["reference_fallback"] = report.reference_fallback
    if report.diagnostics:
        doc["diagnostics"] = [dict(d) for d in report.diagnostics]
    if report.notes:
        doc["notes"] = list(report.notes)
    if report.warnings:
        doc["warnings"] = list(report.warnings)
    if report.out:
        doc["out"] = report.out
    return doc


# --- gradcli check --------------------------------------------------------------------------------

def mismatch_document(m) -> dict:
    d = {"input": m.input, "index": list(m.index), "expected": finite_or_none(m.expected),
         "got": finite_or_none(m.got), "abs_error": finite_or_none(m.abs_error),
         "rel_error": finite_or_none(m.rel_error)}
    if m.output_index is not None:
        d["output_index"] = list(m.output_index)
    if getattr(m, "direction", None) is not None:
        d["direction"] = m.direction
    return d


def check_method_document(m) -> dict:
    d = {"status": m.status, "max_abs_error": finite_or_none(m.max_abs_error),
         "max_rel_error": finite_or_none(m.max_rel_error)}
    if m.message:
        d["message"] = m.message
    return d


def check_result_document(c) -> dict:
    d = {"name": c.name, "file": c.file, "line": c.line, "kind": c.kind, "status": c.status,
         "methods": {k: check_method_document(m) for k, m in c.methods.items()},
         "mismatches": [mismatch_document(m) for m in c.mismatches], "message": c.message,
         "reference": c.reference, "mode": c.mode,
         "max_abs_error": finite_or_none(c.max_abs_error),
         "max_rel_error": finite_or_none(c.max_rel_error), "seconds": c.seconds}
    if c.traceback:
        d["traceback"] = c.traceback
    if c.order != 1:
        d["order"] = c.order
    if c.second_order is not None:
        d["second_order"] = c.second_order
    if c.taylor is not None or c.taylor2 is not None:
        d["taylor"] = {"slope": finite_or_none(c.taylor_slope), "verdict": c.taylor_verdict,
                       "detail": c.taylor.detail if c.taylor is not None else ""}
        if c.taylor2 is not None:
            d["taylor"].update({"slope2": finite_or_none(c.taylor_slope2), "verdict2": c.taylor_verdict2,
                                "detail2": c.taylor2.detail})
    if c.digits is not None:
        d.update(dtype=c.dtype, digits=dict(c.digits), underflow=dict(c.underflow or {}))
    if c.notes:
        d["notes"] = list(c.notes)
    if c.kernel is not None:
        d.update(dtype=c.dtype, kernel=[q.to_dict() for q in c.kernel])
    return d


def check_document(report) -> dict:
    d = {"checks": [check_result_document(c) for c in report.checks], "summary": report.summary()}
    if report.errors:
        d["errors"] = list(report.errors)
    if report.interrupted:
        d["interrupted"] = True
    return d
