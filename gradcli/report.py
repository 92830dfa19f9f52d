"""Reports: plain data with an exit code. Every renderer (table, JSON) is a function of these."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: The process exit codes shared by every command (DESIGN.md section 3).
EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_UNDEFINED = 0, 1, 2, 3

METHOD_ORDER = ("symbolic", "forward", "reverse", "central", "richardson", "complex_step")


def finite_or_none(v):
    """JSON has no inf/nan: non-finite numbers become null (the status next to them says why)."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


@dataclass
class Diagnostic:
    """Why a point is not an ordinary one: ``kind`` is ``undefined`` or ``nondifferentiable``."""

    kind: str
    op: str
    message: str


@dataclass
class MethodResult:
    name: str
    jacobian: np.ndarray | None  # rows = outputs, columns = variables; nan where undefined
    status: str  # ok | mismatch | undefined | unavailable | error
    message: str = ""
    abs_error: np.ndarray | None = None
    rel_error: np.ndarray | None = None
    tolerance: np.ndarray | None = None
    error_estimate: np.ndarray | None = None
    seconds: float = 0.0

    @property
    def max_rel_error(self) -> float | None:
        if self.rel_error is None or not np.isfinite(self.rel_error).any():
            return None
        return float(np.nanmax(np.where(np.isfinite(self.rel_error), self.rel_error, np.nan)))


@dataclass
class GradReport:
    """The comparison at one point: what ``gradcli grad`` prints and ``gradcli.grad`` returns."""

    expression: str
    variables: list
    point: dict
    values: list  # one per output, None where undefined
    symbolic: list | None  # [output][variable] derivative strings, None when sympy was unavailable
    reference: str  # symbolic | consensus | richardson
    methods: dict  # name -> MethodResult, in METHOD_ORDER
    status: str  # agree | disagree | undefined | nondifferentiable
    message: str = ""
    diagnostics: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    reference_jacobian: np.ndarray | None = None

    @property
    def vector(self) -> bool:
        return len(self.values) > 1

    @property
    def exit_code(self) -> int:
        return {"agree": EXIT_OK, "disagree": EXIT_MISMATCH}.get(self.status, EXIT_UNDEFINED)

    @property
    def value(self):
        return self.values if self.vector else self.values[0]

    @property
    def jacobian(self) -> np.ndarray | None:
        return self.reference_jacobian

    @property
    def gradient(self) -> dict:
        """The reference gradient of a scalar expression, by variable name (None where undefined)."""
        if self.reference_jacobian is None:
            return {v: None for v in self.variables}
        return {v: finite_or_none(g) for v, g in zip(self.variables, self.reference_jacobian[0])}

    def _matrix(self, jac):
        if jac is None:  # same shape, all null: doc["methods"][m]["gradient"]["x"] always works
            jac = np.full((len(self.values), len(self.variables)), np.nan)
        if self.vector:
            return [[finite_or_none(v) for v in row] for row in jac]
        return {v: finite_or_none(g) for v, g in zip(self.variables, jac[0])}

    def to_dict(self) -> dict:
        """Exactly the ``gradcli grad --json`` document."""
        key = "jacobian" if self.vector else "gradient"
        methods = {}
        for name, m in self.methods.items():
            entry = {key: self._matrix(m.jacobian), "max_rel_error": finite_or_none(m.max_rel_error),
                     "status": m.status}
            if m.rel_error is not None:
                entry["rel_error"] = self._matrix(m.rel_error)
            if m.error_estimate is not None:
                entry["error_estimate"] = self._matrix(m.error_estimate)
            if m.message:
                entry["message"] = m.message
            methods[name] = entry
        if self.symbolic is None:
            symbolic = None
        elif self.vector:
            symbolic = [dict(zip(self.variables, row)) for row in self.symbolic]
        else:
            symbolic = dict(zip(self.variables, self.symbolic[0]))
        doc = {
            "expression": self.expression,
            "variables": list(self.variables),
            "point": {k: finite_or_none(v) for k, v in self.point.items()},
            "value": [finite_or_none(v) for v in self.values] if self.vector else finite_or_none(self.values[0]),
            "symbolic": symbolic,
            "reference": self.reference,
            "methods": methods,
            "status": self.status,
        }
        if self.message:
            doc["message"] = self.message
        if self.diagnostics:
            doc["diagnostics"] = [{"kind": d.kind, "op": d.op, "message": d.message} for d in self.diagnostics]
        if self.warnings:
            doc["warnings"] = list(self.warnings)
        return doc
