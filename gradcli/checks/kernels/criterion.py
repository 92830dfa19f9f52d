"""A kernel checked against a reference implementation: ``gradcli.check(kernel, reference=ref, dtype=...)``.

A fused low-precision kernel (Triton, Pallas, CUDA; float16 or bfloat16, often with no float64 path)
cannot be held to a fixed tolerance: what a correct kernel reaches depends on the dtype, the function,
the sizes of its reductions and the point. So the tolerance is measured, not chosen:

1. the reference (plain framework operations) is checked itself, in float64, as every check is: its AD
   against gradcli's numerics. A reference that fails is no yardstick, and the check says so;
2. the kernel runs forward and backward in its own dtype and device;
3. the reference runs in the **same** dtype and device: the error a correct implementation makes there;
4. the reference runs in float64 at the same point (the inputs rounded through the dtype) with the same
   cotangent: the truth.

For the output and for each input's gradient the kernel passes when its largest error against the truth is at
most ``factor`` (default :data:`FACTOR`, FlashAttention's rule) times the same-dtype reference's, plus the
spacing of the dtype's subnormal numbers (the finest difference the dtype can show: where the reference
happens to be exact, a kernel is held to exactness, not to less). The reference's error grows with the
reduction length, the condition of the function and the point, so the tolerance does too, on its own.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from gradcli.core.errors import BadInput
from gradcli.checks.context import EPS, TINY, Outcome, Verdict
from gradcli.checks.process.interrupt import raised_by_user_code
from gradcli.checks.kernels.options import FACTOR
from gradcli.checks.kernels.runs import Runner, module_parameters
from gradcli.checks.registry import materialize
from gradcli.checks.comparisons.under_test import user_traceback
from gradcli.checks.targets import framework as frameworks

@dataclass(frozen=True)
class Quantity:
    """One compared quantity: the output, or the gradient of one input."""

    name: str  # "output" or the input's name
    kernel_error: float  # max |kernel - truth|
    reference_error: float  # max |reference in the kernel's dtype - truth|
    allowed: float  # factor * reference_error + floor
    scale: float  # max |truth|
    passed: bool

    def digits(self, error: float) -> float | None:
        """Correct decimal digits of an error at this quantity's scale (None for an exact zero)."""
        if error == 0 or self.scale == 0:
            return None
        return max(0.0, -math.log10(error / self.scale)) if math.isfinite(error) else 0.0

    def to_dict(self) -> dict:
        return {"name": self.name, "kernel_error": _finite(self.kernel_error),
                "reference_error": _finite(self.reference_error), "allowed": _finite(self.allowed),
                "scale": self.scale,
                "kernel_digits": self.digits(self.kernel_error),
                "reference_digits": self.digits(self.reference_error), "passed": self.passed}


def _finite(x: float):
    return x if math.isfinite(x) else None


def compare(name: str, kernel, same, truth, dtype: str, factor: float) -> Quantity:
    """The criterion for one quantity (float64 arrays of one shape)."""
    truth = np.asarray(truth, dtype=np.float64)
    scale = float(np.max(np.abs(truth), initial=0.0))
    floor = EPS[dtype] * TINY[dtype]  # the spacing of the dtype's subnormals: the finest difference it has
    with np.errstate(invalid="ignore"):
        k_err = float(np.max(np.abs(np.asarray(kernel) - truth), initial=0.0))
        r_err = float(np.max(np.abs(np.asarray(same) - truth), initial=0.0))
    if not np.all(np.isfinite(kernel)):  # nan at a finite truth: no digits at all
        k_err = math.inf
    if not math.isfinite(r_err):
        r_err = math.inf
    allowed = factor * r_err + floor
    return Quantity(name, k_err, r_err, allowed, scale, k_err <= allowed)


#: reference checks already run in this process, by (reference, inputs, options): the twins of a kernel
#: and its dtypes share one reference, and checking it once per point is enough
_CHECKED: dict = {}


def _reference_verdict(spec, opts: dict, run_check) -> Verdict | None:
    """The reference checked in float64 as any check is; None when it passes."""
    options = {k: v for k, v in opts.items() if k in ("framework", "seed", "domain", "wrt", "output", "device")}
    ref_spec = dataclasses.replace(spec, name=f"{spec.name} reference", fn=opts["reference"],
                                   inputs={**spec.inputs, **module_parameters(spec.fn)},
                                   options={**options, "dtype": "float64"}, grad=None, vjp=None, hvp=None)
    # only inputs given as shapes or plain numbers make a key (a given array's repr elides its middle)
    plain = all(isinstance(v, (tuple, int, float)) for v in spec.inputs.values()) and not module_parameters(spec.fn)
    try:
        key = (opts["reference"], repr(spec.inputs), repr(sorted(options.items()))) if plain else None
        hash(key)
    except TypeError:  # an unhashable reference: checked every time
        key = None
    checked = _CHECKED.get(key) if key is not None else None
    if checked is None:
        checked = run_check(ref_spec)
        if key is not None:
            _CHECKED[key] = checked
    if checked.status == "pass":
        return None
    if checked.status == "skipped":
        return Verdict("skipped", f"the reference: {checked.message}")
    return Verdict("error", f"the reference does not pass its own float64 check ({checked.status}: "
                            f"{checked.message}); the kernel is not judged against it", checked.traceback)


def check(spec, opts: dict, run_check) -> Outcome:
    """The kernel check of ``spec`` (``opts`` resolved) -> Outcome; ``run_check(spec)`` runs a plain check."""
    framework = opts.get("framework")
    if framework not in frameworks.TARGETS:
        raise BadInput("reference= checks a torch or JAX kernel: pass framework='torch' or 'jax' for a "
                       "function of tensors or arrays")
    dtype = opts.get("dtype") or "float64"
    verdict = _reference_verdict(spec, opts, run_check)
    if verdict is not None:
        return Outcome(verdict=verdict)
    target = frameworks.target_of(framework)
    point = materialize(target.as_arrays(spec.inputs), int(opts.get("seed", 0)), opts.get("domain"), np.float64)
    point.update(module_parameters(spec.fn))  # a module's parameters are inputs, as for the reference
    wrt = tuple(opts.get("wrt") or [k for k, v in point.items() if np.asarray(v).dtype.kind == "f"])
    runner = Runner(framework, point, wrt, opts.get("device") or "cpu", int(opts.get("seed", 0)), opts.get("output"))
    runner = dataclasses.replace(runner, inputs=runner.rounded(point, dtype))
    cotangent = _cotangents(runner, dtype, int(opts.get("seed", 0)))
    try:
        under_test = runner.run(spec.fn, dtype, cotangent)
    except Exception as exc:  # noqa: BLE001 - the kernel raised: the check's error, not gradcli's
        return Outcome(verdict=Verdict("error", f"the kernel raised {raised_by_user_code(exc)}",
                                       user_traceback(exc)))
    same, truth = runner.run(opts["reference"], dtype, cotangent), runner.run(opts["reference"], "float64", cotangent)
    return judge(under_test, same, truth, dtype, float(opts.get("factor") or FACTOR))


def _cotangents(runner: Runner, dtype: str, seed: int):
    """A seeded cotangent of each shape asked for, rounded through ``dtype``: the same in the three runs."""
    made: dict = {}

    def cotangent(shape: tuple):
        if shape not in made:
            g = np.random.default_rng(seed + 1).standard_normal(shape)
            made[shape] = runner.rounded({"g": g}, dtype)["g"]
        return made[shape]
    return cotangent


def judge(under_test, same, truth, dtype: str, factor: float) -> Outcome:
    """The three runs compared -> Outcome with the verdict and the rows of the report."""
    if np.shape(under_test.output) != np.shape(truth.output):
        return Outcome(verdict=Verdict("fail", f"the kernel's output has shape {np.shape(under_test.output)}, the "
                                               f"reference's {np.shape(truth.output)}"))
    rows = [compare("output", under_test.output, same.output, truth.output, dtype, factor)]
    notes = []
    for name, t in truth.grads.items():
        t = np.zeros_like(under_test.output) if t is None else t
        k, s = under_test.grads.get(name), same.grads.get(name)
        if k is None:
            notes.append(f"the kernel's backward gives None for {name}: read as a zero gradient")
        rows.append(compare(name, np.zeros_like(t) if k is None else k, np.zeros_like(t) if s is None else s, t,
                            dtype, factor))
    if under_test.dtype != dtype:
        notes.append(f"the kernel's output came out in {under_test.dtype}, not {dtype}")
    wrong = [q for q in rows if not q.passed]
    what = "the output" if len(rows) == 1 else "the output and " + ", ".join(q.name for q in rows[1:])
    if not wrong:
        verdict = Verdict("pass", f"{what} within {factor:g}x the {dtype} reference's error")
    else:
        verdict = Verdict("fail", "; ".join(_failure(q, dtype, factor) for q in wrong))
    worst = max(rows, key=lambda q: q.kernel_error)
    errors = (worst.kernel_error, max(q.kernel_error / q.scale if q.scale else 0.0 for q in rows))
    return Outcome(verdict=verdict, notes=tuple(notes), kernel=tuple(rows), reference="reference in float64",
                   errors=errors)


def _failure(q: Quantity, dtype: str, factor: float) -> str:
    what = "the output" if q.name == "output" else f"the gradient of {q.name}"
    if not math.isfinite(q.kernel_error):
        return f"{what}: the kernel's is not finite where the reference's is"
    if not q.reference_error:
        return f"{what}: the kernel's error {q.kernel_error:.2e} where the {dtype} reference's is 0"
    ratio = q.kernel_error / q.reference_error
    times = f"{ratio:,.0f}" if ratio >= 100 else f"{ratio:.3g}"
    return (f"{what}: the kernel's error {q.kernel_error:.2e} is {times}x the {dtype} reference's "
            f"{q.reference_error:.2e} (at most {factor:g}x allowed)")
