"""Differential harness for the verdict layer: the same corpus through two gradcli trees, verdicts compared.

    python benchmarks/verdict_diff.py --old DIR            # another checkout (git worktree add DIR REV) against this tree
    python benchmarks/verdict_diff.py --old DIR --new DIR  # any two checkouts
    python benchmarks/verdict_diff.py --run DIR OUT.json   # one tree only (what the two runs above do)

Each tree runs in its own subprocess (``PYTHONPATH=DIR``), so the two never share a module. The corpus is
built here, deterministically: the expressions the tests use, random expressions drawn with the grammar of
``tests/strategies.py`` (a seeded ``random.Random``, not hypothesis, so both runs see the same cases), and
hard points (poles, kinks, huge and tiny arguments, the cases of the hardening issue). Per case it records
the overall status and every method's status for ``grad`` and, for scalar expressions, ``hessian``; a part
of the corpus also runs as a small batch, which records statuses and each method's agree_fraction.
Prints the changed verdicts and their count; exit 1 when any changed.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

UNARY = ["sin", "cos", "tan", "atan", "sinh", "cosh", "tanh", "asinh", "exp", "expm1", "log", "log1p",
         "sqrt", "cbrt", "abs", "erf", "erfc", "sigmoid", "softplus", "relu", "asin", "acos", "atanh",
         "acosh", "log2", "log10", "sign"]
BINARY_FN = ["atan2", "hypot", "pow", "min", "max"]
OPS = ["+", "-", "*", "/", "**"]
LEAVES = ["x", "y", "z", "2", "0.5", "3", "pi", "1e-3"]

#: (expression, point) pairs from the tests, the README and the hardening issue's wrong verdicts
FIXED = [
    ("x**2*sin(y)", {"x": 1.5, "y": 0.3}), ("x*y, x+y", {"x": 1.0, "y": 2.0}),
    ("sqrt(x)", {"x": 0.0}), ("log(x)", {"x": -1.0}), ("asin(x)", {"x": 2.0}), ("abs(x)", {"x": 0.0}),
    ("relu(x)", {"x": 0.0}), ("max(x, x)", {"x": 1.0}), ("sign(x)", {"x": 0.0}), ("abs(x) + 3*y", {"x": 0.0, "y": 1.0}),
    ("x - sin(x)", {"x": 1e-4}), ("x - sin(x)", {"x": 1e-8}), ("sin(pi*x)", {"x": 1.0}),
    ("tan(x)", {"x": 1.5707963}), ("tan(x)", {"x": 1e100}), ("sin(x - 1/8e-11)", {"x": -2.0}),
    ("sin(x)", {"x": 1e16}), ("sin(x)", {"x": 1e15}), ("sin(x)", {"x": 1.4e15}), ("sin(x)", {"x": 1e8}),
    ("sin(100*x)", {"x": 1e4}), ("exp(x) + y", {"x": 40.0, "y": 1.0}), ("exp(x)", {"x": 700.0}),
    ("exp(x)", {"x": 710.0}), ("log(x)", {"x": 1e-300}), ("sqrt(x)", {"x": 1e-305}),
    ("sqrt(x)*1e150", {"x": 1e-320}), ("1/x", {"x": 1e-10}), ("1/x", {"x": 1e-200}),
    ("asinh(x)", {"x": 1e200}), ("acosh(x)", {"x": 1e155}), ("atanh(x)", {"x": 0.999999}),
    ("x**1.5", {"x": 0.0}), ("abs(x)**3", {"x": 0.0}), ("tan(59**59*x)", {"x": 1.0}),
    ("1 + x*x", {"x": 1e-9}), ("log1p(x)", {"x": 1e-12}), ("expm1(x)", {"x": 1e-12}),
    ("abs(x)", {"x": 1e-160}), ("x/sqrt(x**2 + y**2)", {"x": 1e200, "y": 1e200}),
    ("exp(-(x**2 + y**2)/2) * cos(3*x*y)", {"x": 0.3, "y": -0.7}),
    ("sin(x + 1e6)", {"x": -2.0}), ("cos(x + 12345678.9)", {"x": 0.5}), ("exp(x + 1e10 - 1e10)", {"x": 0.5}),
    ("tanh(x)", {"x": 711.0}), ("tanh(x)", {"x": 19.0}), ("exp(t)**w", {"w": 1.5, "t": 1e-10}),
    ("exp(t*w) * (t/t)", {"w": 1.0, "t": 1e-8}),
    ("min(cosh(t), 1), sin(sinh(3e+16)), t - w*w", {"w": 0.806, "t": -173756.97968858667}),
    ("(1 - z * -e**-2)/log1p(a - a/a)", {"z": 0.0, "a": 1e-8}), ("(1 + z*e**-2)/log1p(a - a/a)", {"z": 0.0, "a": 1e-8}),
    ("tanh(3*w - z/w/216)", {"w": 0.3, "z": 0.7}), ("atan2(softplus(-2/t - 250), t)", {"t": 5e-3}),
    ("hypot(x, y)", {"x": 0.0, "y": 0.0}), ("hypot(x, y)", {"x": 3.0, "y": 4.0}), ("atan2(y, x)", {"x": -1.0, "y": 0.0}),
    ("x**y", {"x": 2.0, "y": 0.5}), ("x**y", {"x": 0.0, "y": 2.0}), ("pow(x, 3)", {"x": -2.0}),
    ("cbrt(x)", {"x": -8.0}), ("cbrt(x)", {"x": 0.0}), ("erf(x)", {"x": 6.0}), ("erfc(x)", {"x": 27.0}),
    ("sigmoid(x)", {"x": -40.0}), ("softplus(x)", {"x": 50.0}), ("log(x, 2)", {"x": 8.0}),
    ("log2(x) + log10(y)", {"x": 3.0, "y": 7.0}), ("min(x, y, z)", {"x": 1.0, "y": 2.0, "z": 0.5}),
    ("max(x, y)", {"x": 1.0, "y": 1.0}), ("x**-2", {"x": 0.5}), ("-x**2", {"x": 3.0}), ("x^3", {"x": 1.1}),
    ("x*y*z", {"x": 1.0, "y": 2.0, "z": 3.0}), ("x**2 - y**2", {"x": 0.0, "y": 0.0}),
    ("sin(x)*cos(y) + exp(z)", {"x": 0.1, "y": 0.2, "z": 0.3}), ("x**(10**10)", {"x": 1.0000001}),
    ("acos(x)", {"x": 1.0}), ("acos(x)", {"x": 0.9999999999}), ("acosh(x)", {"x": 1.0}), ("log(x)", {"x": 1e300}),
    ("x*1e-300", {"x": 1e-10}), ("1e300*x*x", {"x": 1e5}), ("3", {}), ("x - x", {"x": 2.0}),
    ("cos(x)", {"x": 0.0}), ("sin(x)/x", {"x": 1e-5}), ("(exp(x) - 1)/x", {"x": 1e-7}),
]

HARD_X = [0.0, 1e-300, 1e-12, 1e-6, -1e-3, 0.5, -0.5, 1.0, -1.0, 1.5707963267948966, 3.14159, 10.0, 1e3,
          1e8, -1e8, 1e15, 1e200]


def random_expr(rng: random.Random, leaves: int) -> str:
    """One expression of tests/strategies.py's grammar with about ``leaves`` leaves."""
    if leaves <= 1:
        return rng.choice(LEAVES)
    kind = rng.randrange(4)
    if kind == 0:
        return f"{rng.choice(UNARY)}({random_expr(rng, leaves - 1)})"
    if kind == 3:
        return f"-({random_expr(rng, leaves - 1)})"
    a = rng.randint(1, leaves - 1)
    left, right = random_expr(rng, a), random_expr(rng, leaves - a)
    if kind == 1:
        return f"{rng.choice(BINARY_FN)}({left}, {right})"
    return f"({left}){rng.choice(OPS)}({right})"


def corpus() -> dict:
    """{"grad": [(expr, point)], "batch": [(expr, domain, seed)]}, the same on every call."""
    from gradcli.core.parser import parse  # whichever tree is on the path: parsing is not under test

    rng = random.Random(20261201)
    cases = list(FIXED)
    for name in ("sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "atan", "asinh", "log1p", "erf",
                 "sigmoid", "softplus", "cbrt", "abs"):
        for x in rng.sample(HARD_X, 5):
            cases.append((f"{name}(x)", {"x": x}))
    seen = set()
    while len(cases) < 420:
        text = random_expr(rng, rng.randint(2, 8))
        if text in seen:
            continue
        seen.add(text)
        try:
            graph = parse(text)
        except Exception:
            continue
        coords = lambda: rng.choice([rng.uniform(-2.5, 2.5), rng.uniform(-2.5, 2.5), rng.choice(HARD_X)])
        cases.append((text, {v: coords() for v in graph.variables}))
    batch = [(text, {v: (-1.0, 1.0) for v in sorted(pt)}, 7) for text, pt in cases[::7] if pt]
    domains = [(-1.0, 1.0), (0.1, 2.0), (-3.0, 3.0), (1e-3, 1e-2), (10.0, 100.0)]
    for i, (text, pt) in enumerate(cases[len(FIXED) + 75::3]):
        if pt:
            lo_hi = domains[i % len(domains)]
            batch.append((text, {v: lo_hi for v in sorted(pt)}, i))
    batch += [("tanh(3*w - z/w/216)", {"w": (0.0, 1.0), "z": (0.0, 1.0)}, 64),
              ("atan2(softplus(-2/t - 250), t)", {"t": (1e-3, 1e-2)}, 76),
              ("exp(-(x**2 + y**2)/2) * cos(3*x*y)", {"x": (-1.0, 1.0), "y": (-1.0, 1.0)}, 0),
              ("sin(x)", {"x": (1e7, 1e8)}, 1), ("sqrt(x)", {"x": (0.0, 1e-6)}, 2)]
    return {"grad": cases, "batch": batch}


def _methods(report) -> dict:
    return {name: m.status for name, m in report.methods.items()}


def _timed_out(report) -> bool:
    """sympy ran out of time: under load that depends on the machine, not on the code under test."""
    return any("within" in (m.message or "") for m in report.methods.values() if m.status == "unavailable")


def run_tree(out: str) -> None:
    """Run the corpus with the gradcli that is importable, write the verdicts to ``out``."""
    import warnings

    import gradcli

    warnings.simplefilter("ignore")
    assert Path(gradcli.__file__).resolve().is_relative_to(Path.cwd().resolve()), gradcli.__file__
    c = corpus()
    results = {}
    for text, point in c["grad"]:
        key = f"grad {text} @ {json.dumps(point, sort_keys=True)}"
        try:
            r = gradcli.grad(text, point=point, timeout=10)
            results[key] = {"status": r.status, "methods": _methods(r), "timed_out": _timed_out(r)}
        except Exception as exc:
            results[key] = {"status": f"raised {type(exc).__name__}"}
        try:
            h = gradcli.hessian(text, point=point, timeout=10)
            results["hessian" + key[4:]] = {"status": h.status, "methods": _methods(h), "timed_out": _timed_out(h)}
        except gradcli.BadInput:
            pass
        except Exception as exc:
            results["hessian" + key[4:]] = {"status": f"raised {type(exc).__name__}"}
    for text, domain, seed in c["batch"]:
        key = f"batch {text} over {json.dumps(domain, sort_keys=True)} seed {seed}"
        try:
            b = gradcli.grad_batch(text, n=200, domain=domain, seed=seed, timeout=10)
            results[key] = {"status": b.status, "methods": {n: m.status for n, m in b.methods.items()},
                            "agree_fraction": {n: m.agree_fraction for n, m in b.methods.items()
                                               if getattr(m, "agree_fraction", None) is not None}}
        except Exception as exc:
            results[key] = {"status": f"raised {type(exc).__name__}"}
    Path(out).write_text(json.dumps(results, indent=1, sort_keys=True))


def _spawn(tree: Path, out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree), "NO_COLOR": "1"}
    subprocess.run([sys.executable, __file__, "--run", str(tree), str(out)], env=env, check=True, cwd=tree)


def diff(old: dict, new: dict) -> tuple[list[str], list[str]]:
    """-> (changed verdicts, differences where sympy ran out of time on one side: timing, not code)."""
    changes, timing = [], []
    strip = lambda r: {k: v for k, v in (r or {}).items() if k != "timed_out"} if r else r
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if strip(a) != strip(b):
            timed = (a or {}).get("timed_out") or (b or {}).get("timed_out")
            (timing if timed else changes).append(
                f"{key}\n    old {json.dumps(a, sort_keys=True)}\n    new {json.dumps(b, sort_keys=True)}")
    return changes, timing


def main(argv: list[str]) -> int:
    if argv[:1] == ["--run"]:
        run_tree(argv[2])
        return 0
    if "--old" not in argv:
        raise SystemExit("--old DIR: the checkout to compare against (e.g. git worktree add /tmp/base main)")
    old_tree = Path(argv[argv.index("--old") + 1])
    new_tree = Path(argv[argv.index("--new") + 1]) if "--new" in argv else ROOT
    work = Path(os.environ.get("VERDICT_DIFF_DIR", "/tmp/verdict_diff"))
    work.mkdir(parents=True, exist_ok=True)
    old_out, new_out = work / "old.json", work / "new.json"
    if "--reuse-old" not in argv or not old_out.exists():
        _spawn(old_tree, old_out)
    _spawn(new_tree, new_out)
    old, new = json.loads(old_out.read_text()), json.loads(new_out.read_text())
    changes, timing = diff(old, new)
    for c in changes:
        print(c)
    for c in timing:
        print("(sympy timed out on one side)", c)
    grad = sum(k.startswith("grad ") for k in new)
    print(f"{len(new)} verdicts ({grad} grad, {sum(k.startswith('hessian ') for k in new)} hessian, "
          f"{sum(k.startswith('batch ') for k in new)} batch); changed: {len(changes)}; "
          f"timing-dependent (sympy's time limit): {len(timing)}")
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
