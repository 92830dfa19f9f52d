"""gradcli: a gradient calculator and checker.

``gradcli.grad(expr, **point)`` compares forward mode, reverse mode, finite differences and sympy at
a point; see docs/ for the command line.

The public names are imported on first use (PEP 562), so that ``import gradcli`` and ``gradcli --help``
load neither numpy nor sympy; ``from gradcli import grad`` works as before.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> the module that defines it
_PUBLIC = {
    "grad": "gradcli.api",
    "hessian": "gradcli.api",
    "BadInput": "gradcli.core.errors",
    "compile": "gradcli.engines.compiled",
    "grad_batch": "gradcli.batch.api",
    "check": "gradcli.checks.registry",
}

__all__ = ["grad", "hessian", "compile", "grad_batch", "check", "BadInput", "__version__"]


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'gradcli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
