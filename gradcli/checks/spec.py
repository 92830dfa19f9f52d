"""What ``@gradcli.check`` registers: one CheckSpec per check, in a process-wide registry.

The registration API (gradcli.checks.registry) creates these; collection (gradcli.checks.collect)
imports model files and takes the specs each file added; the runner (gradcli.checks.runner) turns a
spec into a CheckResult. Nothing here runs user code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

#: Option keywords of ``gradcli.check`` (docs/contract.md, the model file); any other keyword is an input.
OPTIONS = ("atol", "rtol", "eps", "seed", "dtype", "mode", "domain", "wrt", "output", "with_grad", "order",
           "taylor", "framework", "device", "autocast", "nondet_tol", "reference", "factor")


@dataclass
class CheckSpec:
    name: str  # the function's __name__ (or the expression text for string checks)
    fn: Callable | None  # the function under test (None for string expressions)
    file: str  # where it was registered
    line: int
    inputs: dict  # name -> value or shape tuple, exactly as given to gradcli.check
    options: dict = field(default_factory=dict)  # the option keywords that were given
    grad: Callable | dict | None = None  # hand-written gradient (function, or {name: expression})
    vjp: Callable | None = None  # hand-written vector-Jacobian product
    hvp: Callable | None = None  # hand-written Hessian-vector product
    expression: str | None = None  # string checks: the expression text

    @property
    def kind(self) -> str:
        if self.expression is not None:
            return "expression"
        if self.vjp is not None:
            return "vjp"
        if self.grad is not None:
            return "grad"
        if self.options.get("reference") is not None:  # a kernel against a reference implementation
            return "reference"
        if self.options.get("framework") in ("torch", "jax"):  # the framework's own vjp is under test
            return "vjp"
        return "autodiff"


#: Every spec registered in this process, in registration order.
REGISTRY: list = []
