"""Which framework a check's target belongs to, and what every framework target shares: how inputs
bind to its parameters, the dtypes it may run in, and the dispatch to the target modules.

A framework target (gradcli.checks.targets.torch_target, gradcli.checks.targets.jax_target) turns its target into a
numpy-level check: ``fn(**inputs)`` runs the primal and returns numpy, ``vjp(g, **inputs)`` returns the
framework's own gradients (every custom rule inside the target is what is checked), and the one
pipeline (gradcli.checks.runner) compares them with its numerics in float64. The frameworks are
imported only when such a check runs, never when gradcli is imported.
"""
from __future__ import annotations

import numpy as np

from gradcli.core.errors import BadInput
from gradcli.checks.targets.complex_inputs import NOTE as COMPLEX_NOTE, framework_pairs
from gradcli.checks.context import Verdict
from gradcli.checks.targets import jax_target
from gradcli.checks.targets import torch_target

FRAMEWORKS = ("numpy", "torch", "jax")
COMPLEX_OUTPUT_NOTE = ("the output is complex: checked as real and imaginary parts (index [..., 0] and [..., 1]), "
                       "the cotangent of a complex output being g_re + i g_im (PyTorch's convention)")
#: dtypes a framework check may run in; numpy checks take float64 and float32 only
DTYPES = ("float64", "float32", "float16", "bfloat16")
TARGETS = {"torch": torch_target, "jax": jax_target}


def framework_of(fn, options: dict) -> str:
    """The target's own framework (a torch Function or module, a JAX custom rule), else the
    ``framework=`` option, else "numpy". A target of one framework asked to run as another is BadInput."""
    asked = options.get("framework")
    for name, target in TARGETS.items():
        if target.detects(fn):
            if asked is not None and asked != name:
                raise BadInput(f"{target.display_name(fn)} is a {target.KIND}: framework={asked!r} cannot check it")
            return name
    return asked or "numpy"


def target_of(framework: str):
    return TARGETS[framework]


def display_name(fn, framework: str) -> str:
    return TARGETS[framework].display_name(fn)


def validate(fn, framework: str, inputs: dict, options: dict, grad=None, vjp=None, hvp=None) -> None:
    """Raise BadInput for what a framework check cannot take (registration and run both call this)."""
    target = TARGETS[framework]
    what = target.display_name(fn)
    if (grad is not None or vjp is not None) and target.detects(fn):
        raise BadInput(f"{what} is checked against {framework}'s own gradients: drop grad=/vjp=")
    if hvp is not None:
        raise BadInput(f"hvp= is not checked for a {framework} check: drop it (order=2 checks the framework's own "
                       "second derivatives)")
    if options.get("with_grad"):
        raise BadInput(f"with_grad=True does not apply to a {framework} check ({framework}'s gradients are checked)")
    refuse_torch_options(options, framework)
    target.validate(fn, inputs, options)


def refuse_torch_options(options: dict, framework: str) -> None:
    """``device=`` and ``autocast=`` are torch's: BadInput where a check of another framework sets them
    itself (from ``[tool.gradcli]`` or the command line they apply to the torch checks only)."""
    if framework != "torch":
        for key in ("device", "autocast"):
            if options.get(key) is not None:
                raise BadInput(f"{key}= applies to torch checks only")


def functions(spec, opts: dict, inputs: dict):
    """-> (fn(**inputs), vjp(g, **inputs), ad_factory, inputs) for the pipeline, or the Verdict that ends
    the check (the framework missing, inputs it cannot take). ``inputs`` may gain entries (a module's
    parameters)."""
    framework = opts["framework"]
    target = TARGETS[framework]
    target.validate(spec.fn, spec.inputs, opts)
    complex_inputs = [k for k, v in inputs.items() if v.dtype.kind == "c"]
    if complex_inputs and not getattr(target, "COMPLEX", False):
        return Verdict("skipped", f"complex inputs to a {framework} check are not checked yet "
                                  f"({', '.join(complex_inputs)})")
    if complex_inputs and int(opts.get("order", 1)) == 2:
        return Verdict("skipped", f"order=2 is not checked for complex inputs ({', '.join(complex_inputs)}); "
                                  "order=1 is")
    built = target.functions(spec, opts, inputs)
    if isinstance(built, Verdict):
        return built
    if complex_inputs:
        # checked as real and imaginary parts, as numpy checks are (gradcli.checks.targets.complex_inputs)
        built = framework_pairs(built, complex_inputs)
        built[1].framework_notes = (COMPLEX_NOTE.format(names=", ".join(complex_inputs)),)
    elif _complex_output(built):
        if int(opts.get("order", 1)) == 2:
            return Verdict("skipped", "order=2 is not checked for a complex output; order=1 is")
        # a complex output of real inputs: its real and imaginary parts are two real outputs, and the
        # framework's vjp of the cotangent g_re + i g_im is the sum of their vjps (as gradcheck splits it)
        built = framework_pairs(built, [])
        built[1].framework_notes = (COMPLEX_OUTPUT_NOTE,)
    return built


def _complex_output(built) -> bool:
    """Whether the target's output (run once in float64 at the inputs) is complex; a target that raises
    here raises again where the pipeline calls it, and says so there."""
    fn, _, _, inputs = built
    try:
        out = fn(**inputs)
    except Exception:  # noqa: BLE001 - reported by the pipeline's own call
        return False
    return any(np.iscomplexobj(o) for o in (out if isinstance(out, (tuple, list)) else (out,)))


def check_dtype(dtype) -> str | None:
    """The dtype's name (None: the default), BadInput for one no check can take; numpy checks take
    float64 and float32 only (the registry says so)."""
    if dtype is None:
        return None
    name = str(dtype).replace("torch.", "")
    name = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32", "double": "float64",
            "fp32": "float32", "fp64": "float64"}.get(name, name)
    if name not in DTYPES:
        try:
            name = np.dtype(dtype).name
        except (TypeError, ValueError):
            pass
    if name not in DTYPES:
        raise BadInput(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return name
