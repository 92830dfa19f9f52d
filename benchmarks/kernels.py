"""gradcli's kernel criterion against the fixed-tolerance practice, on the Triton example kernels.

For every kernel of examples/triton (the right ones and their buggy twins), in float16 and bfloat16, at
two sizes each, two verdicts:

- gradcli: ``gradcli.check(kernel, reference=..., dtype=...)`` (the kernel's error against float64 at
  most 2x the same-dtype reference's);
- fixed: ``torch.testing.assert_close`` of the kernel's output and gradients against the reference run in
  the same dtype, with torch's default tolerances for that dtype (float16: rtol 1e-3, atol 1e-5;
  bfloat16: rtol 1.6e-2, atol 1e-5), as kernel test suites do before they tune them by hand.

Run by hand (the Triton interpreter without a GPU; a few minutes on two cores):

    python benchmarks/kernels.py [--markdown]

It prints, per kernel and dtype, what each catches (a twin flagged) and where each false-alarms (a right
kernel flagged), a third column with the fixed tolerance loosened (rtol and atol scaled together) until
every right kernel of the family passes in that dtype (what a suite ends up with after its false
alarms), and the seconds per gradcli check.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "triton"))

import torch  # noqa: E402

import attention as att  # noqa: E402
import layernorm as ln  # noqa: E402
import softmax as sm  # noqa: E402
from gradcli.checks.kernels.runs import Runner  # noqa: E402
from gradcli.checks.registry import build_spec, materialize  # noqa: E402
from gradcli.checks.runner import run_check  # noqa: E402

SIZES = {
    "softmax": [dict(x=(64, 64)), dict(x=(64, 512))],
    "layernorm": [dict(x=(8, 64), weight=(64,), bias=(64,)), dict(x=(8, 512), weight=(512,), bias=(512,))],
    "attention": [dict(q=(32, 16), k=(32, 16), v=(32, 16)), dict(q=(64, 32), k=(64, 32), v=(64, 32))],
}
# (family, kernel, reference, is it right?)
CASES = [
    ("softmax", sm.TritonSoftmax, sm.softmax_reference, True),
    ("softmax", sm.TritonSoftmaxNoRescale, sm.softmax_reference, False),
    ("softmax", sm.TritonSoftmaxLowAcc, sm.softmax_reference, False),
    ("layernorm", ln.TritonLayerNorm, ln.layernorm_reference, True),
    ("layernorm", ln.TritonLayerNormBwdEps, ln.layernorm_reference, False),
    ("attention", att.TritonAttention, att.attention_reference, True),
    ("attention", att.TritonAttentionMaskOffByOne, att.attention_reference, False),
    ("attention", att.TritonAttentionDqNoScale, att.attention_reference, False),
    ("attention", att.TritonAttentionDropout, att.attention_dropout_reference, True),
    ("attention", att.TritonAttentionDropoutReseeded, att.attention_dropout_reference, False),
]


#: torch.testing.assert_close's default tolerances by dtype
DEFAULT_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}


def fixed_tolerance_scale(kernel, reference, dtype: str, inputs: dict) -> float:
    """How many times torch.testing.assert_close's default tolerances (rtol, atol) for ``dtype`` the kernel's
    worst entry needs against the same-dtype reference, over the output and every gradient, at gradcli's
    point and cotangent: above 1 the default assert_close fails."""
    point = materialize(inputs, 0, None, np.float64)
    runner = Runner("torch", point, tuple(point), "cpu", 0, None)
    runner = Runner("torch", runner.rounded(point, dtype), tuple(point), "cpu", 0, None)
    cot = {}

    def cotangent(shape):
        if shape not in cot:
            g = np.random.default_rng(1).standard_normal(shape)
            cot[shape] = runner.rounded({"g": g}, dtype)["g"]
        return cot[shape]
    k, r = runner.run(kernel, dtype, cotangent), runner.run(reference, dtype, cotangent)
    rtol, atol = DEFAULT_TOLERANCES[dtype]
    need = 0.0
    for a, b in [(k.output, r.output)] + [(k.grads[n], r.grads[n]) for n in r.grads]:
        a = np.zeros(np.shape(b)) if a is None else np.asarray(a)
        need = max(need, float(np.max(np.abs(a - b) / (atol + rtol * np.abs(b)))))
    return need


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--markdown", action="store_true", help="print the table as markdown")
    args = p.parse_args(argv)
    rows = []
    for family, kernel, reference, right in CASES:
        for dtype in ("float16", "bfloat16"):
            ours, needs, seconds = [], [], []
            for inputs in SIZES[family]:
                t0 = time.perf_counter()
                result = run_check(build_spec(kernel, reference=reference, dtype=dtype, **inputs), {})
                seconds.append(time.perf_counter() - t0)
                ours.append(result.status != "pass")
                needs.append(fixed_tolerance_scale(kernel, reference, dtype, inputs))
            rows.append((family, kernel.__name__, dtype, right, ours, needs, float(np.mean(seconds))))
    _print(rows, args.markdown)
    return 0


def _verdict(flags: list, right: bool) -> str:
    n = sum(flags)
    if right:
        return "passes both sizes" if n == 0 else f"FALSE ALARM at {n} of {len(flags)} sizes"
    return "caught at both sizes" if n == len(flags) else f"MISSED at {len(flags) - n} of {len(flags)} sizes"


def _print(rows, markdown: bool) -> None:
    # the tolerance loosened (both rtol and atol scaled) until every right kernel of the family passes
    # in that dtype at every size: what a suite ends up with after its false alarms
    loosened = {}
    for family, _, dtype, right, _, needs, _ in rows:
        if right:
            loosened[family, dtype] = max(loosened.get((family, dtype), 1.0), *needs)
    head = ("kernel", "dtype", "right?", "gradcli", "assert_close, default tolerance",
            "assert_close, loosened until right kernels pass", "s/check")
    lines = [(name, dtype, "right" if right else "bug", _verdict(ours, right),
              _verdict([n > 1 for n in needs], right),
              f"{_verdict([n > loosened[family, dtype] for n in needs], right)} "
              f"(x{loosened[family, dtype]:.3g})", f"{sec:.1f}")
             for family, name, dtype, right, ours, needs, sec in rows]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for line in lines:
            print("| " + " | ".join(line) + " |")
        return
    widths = [max(len(str(r[i])) for r in [head] + lines) for i in range(len(head))]
    for line in [head] + lines:
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths)))


if __name__ == "__main__":
    sys.exit(main())
