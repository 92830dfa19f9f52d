"""The batch report: plain data with its exit code (docs/contract.md, the command line); its JSON document is
:func:`gradcli.render.json.batch_document`."""
from __future__ import annotations

from dataclasses import dataclass, field

from gradcli.verdict.exit_codes import exit_code
from gradcli.render.json import batch_document, batch_method_document


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
        return batch_method_document(self, points)


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
        return exit_code(self.status)

    @property
    def points_per_second(self) -> float | None:
        return self.points / self.seconds if self.seconds > 0 else None

    def to_dict(self) -> dict:
        """Exactly the ``--json`` document."""
        return batch_document(self)
