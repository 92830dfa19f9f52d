"""The batch report: plain data, its JSON document and its exit code (DESIGN.md section 3)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..report import EXIT_MISMATCH, EXIT_OK, EXIT_UNDEFINED, finite_or_none, symbolic_document


@dataclass
class BatchMethod:
    """One method's statistics over the batch. Point counts: ``agreed + mismatched + undefined +
    unavailable == points``; ``agree_fraction`` is agreed / (agreed + mismatched), the points where the
    method and the reference both had a number to compare."""

    name: str
    status: str  # ok | mismatch | undefined | unavailable | error
    message: str = ""
    agreed: int = 0
    mismatched: int = 0
    undefined: int = 0
    unavailable: int = 0
    max_rel_error: float | None = None
    median_rel_error: float | None = None
    seconds: float = 0.0
    worst: list = field(default_factory=list)  # dicts, worst first
    reference: bool = False

    @property
    def compared(self) -> int:
        return self.agreed + self.mismatched

    @property
    def agree_fraction(self) -> float | None:
        return self.agreed / self.compared if self.compared and not self.reference else None

    def to_dict(self, points: int) -> dict:
        d = {"status": self.status,
             "max_rel_error": finite_or_none(self.max_rel_error),
             "median_rel_error": finite_or_none(self.median_rel_error),
             "agree_fraction": self.agree_fraction,
             "agreed": self.agreed, "mismatched": self.mismatched,
             "undefined": self.undefined, "unavailable": self.unavailable,
             "seconds": self.seconds,
             "points_per_second": finite_or_none(points / self.seconds) if self.seconds > 0 else None,
             "worst": [clean(w) for w in self.worst]}
        if self.reference:
            d["reference"] = True
        if self.message:
            d["message"] = self.message
        return d


def clean(record: dict) -> dict:
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


@dataclass
class BatchReport:
    """What ``gradcli grad --batch/--points`` prints and ``gradcli.grad_batch`` returns."""

    expression: str
    variables: list
    points: int
    device: str
    dtype: str
    chunk: int
    reference: str  # symbolic | consensus
    methods: dict  # name -> BatchMethod
    status: str  # agree | disagree | undefined
    message: str = ""
    undefined: int = 0  # points where some entry of the Jacobian is undefined or not differentiable
    diagnostics: list = field(default_factory=list)  # {kind, op, message, count, example}
    worst: list = field(default_factory=list)  # the worst points over all methods
    seconds: float = 0.0
    median: str = "exact"  # exact | histogram
    source: dict = field(default_factory=dict)  # {"domain": ..., "seed": ...} or {"points_file": ...}
    symbolic: list | None = None  # [output][variable] derivative texts
    notes: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    out: str | None = None
    reference_fallback: int = 0  # points where sympy's formula was not finite and consensus stood in

    @property
    def exit_code(self) -> int:
        """0: every method agrees at every point where the gradient is defined (undefined points are
        counted and reported, not failed); 1: a disagreement at any point; 3: no point had a defined
        gradient to compare."""
        return {"agree": EXIT_OK, "disagree": EXIT_MISMATCH}.get(self.status, EXIT_UNDEFINED)

    @property
    def points_per_second(self) -> float | None:
        return self.points / self.seconds if self.seconds > 0 else None

    def to_dict(self) -> dict:
        """Exactly the ``--json`` document."""
        symbolic = symbolic_document(self.variables, self.symbolic)
        doc = {
            "expression": self.expression,
            "variables": list(self.variables),
            "points": self.points,
            "device": self.device,
            "dtype": self.dtype,
            "chunk": self.chunk,
            **self.source,
            "reference": self.reference,
            "symbolic": symbolic,
            "methods": {name: m.to_dict(self.points) for name, m in self.methods.items()},
            "undefined": self.undefined,
            "worst": [clean(w) for w in self.worst],
            "median": self.median,
            "seconds": self.seconds,
            "points_per_second": finite_or_none(self.points_per_second),
            "status": self.status,
            "message": self.message,
        }
        if self.reference_fallback:
            doc["reference_fallback"] = self.reference_fallback
        if self.diagnostics:
            doc["diagnostics"] = [dict(d) for d in self.diagnostics]
        if self.notes:
            doc["notes"] = list(self.notes)
        if self.warnings:
            doc["warnings"] = list(self.warnings)
        if self.out:
            doc["out"] = self.out
        return doc
