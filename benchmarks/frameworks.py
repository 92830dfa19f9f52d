"""gradcli against torch.autograd.gradcheck and jax.test_util.check_grads on corpora of custom rules.

    python benchmarks/frameworks.py              # every rule, then the ~1e6-parameter module
    python benchmarks/frameworks.py --quick      # the correct rules and one bug of each, a smaller module
    python benchmarks/frameworks.py -k rmsnorm   # the rules whose name holds the text

The corpus is tests/checks/torch_corpus.py: small torch.autograd.Functions (some inside nn.Modules),
each bug beside its correct twin. Per rule, the verdict (pass or FAIL) and the seconds of gradcli's
check in float64 and float32 (dtype=) and of gradcheck in float64 and float32, with fast_mode off
and on, at gradcheck's defaults (eps=1e-6, atol=1e-5, rtol=1e-3). The column "bug" gives the dtypes
a bug shows in: a float32 cancellation bug is right in float64, a 1e-5 error is under float32's
rounding; in the other dtype's columns the bug is not scored. A FAIL on a bug is a catch, a FAIL on a
correct rule a false alarm. The totals give both per column, and the time ratios gradcli/gradcheck.
Then the speed case: a causal-attention Function on q, k, v of shape (1, 2, 5, 4) (120 input elements,
benchmarks/causal_attention.py), gradcli's check against gradcheck's, the best of three runs each, and
their ratio. Then an nn.Module of about 1e6 parameters (Linear(1000, 1000), tanh) checked by gradcli in
mode="fast" and by gradcheck with fast_mode=True on a functional wrapper, both in float64. Last, where
JAX is installed, the JAX corpus (tests/checks/jax_corpus.py): gradcli in float64 and float32 against
check_grads(order=1, modes=["rev"]) in float64 (x64 on), scored the same way. Before JAX, order 2
(gradcli order=2 against gradgradcheck, on the corpus's correct rules and on second-order bugs written
here) and forward mode (gradcli against gradcheck(check_forward_ad=True) on Functions with a jvp), in
float64: verdicts side by side and the time ratio.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "checks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from torch_corpus import (  # noqa: E402
    CASES, Cube, CubeDetachedGradOut, CubeDetachedX, CubeWGradNoGrad, SinMul, SinMulJvpDropsW, SinMulJvpSign, gradcheck)

from gradcli.checks.registry import build_spec  # noqa: E402
from gradcli.checks.runner import run_check  # noqa: E402

#: column -> (tool, dtype name, fast_mode)
COLUMNS = {
    "gradcli f64": ("gradcli", "float64", False),
    "gradcli f32": ("gradcli", "float32", False),
    "gradcheck f64": ("gradcheck", "float64", False),
    "gc f64 fast": ("gradcheck", "float64", True),
    "gradcheck f32": ("gradcheck", "float32", False),
    "gc f32 fast": ("gradcheck", "float32", True),
}


def verdict(case, tool: str, dtype: str, fast: bool) -> tuple[bool, float]:
    """-> (passed, seconds) of one tool on one case."""
    t0 = time.perf_counter()
    if tool == "gradcli":
        r = run_check(build_spec(case.target(), **case.inputs, **case.options, dtype=dtype), {})
        passed = r.status == "pass"
    else:
        passed = gradcheck(case, getattr(torch, dtype), fast_mode=fast)
    return passed, time.perf_counter() - t0


def score(t: dict, case, dtype: str, passed: bool, seconds: float) -> str:
    """Count one verdict into a column's totals ``t`` -> its cell. A bug is scored only in the dtypes it
    shows in; a FAIL on a bug is a catch, on a correct rule a false alarm."""
    t["s"] += seconds
    if not case.buggy or dtype in case.dtypes:
        t["bugs" if case.buggy else "right"] += 1
        t["caught" if case.buggy else "alarms"] += (not passed)
    return f"{'pass' if passed else 'FAIL':>5} {seconds:8.3f}s"


def print_totals(totals: dict, width: int) -> None:
    print(f"\n{'':35} " + " ".join(f"{name:>{width}}" for name in totals))
    for label, cell in (("bugs caught", lambda t: f"{t['caught']}/{t['bugs']}"),
                        ("false alarms", lambda t: f"{t['alarms']}/{t['right']}"),
                        ("seconds", lambda t: f"{t['s']:.2f}")):
        print(f"{label:35} " + " ".join(f"{cell(totals[name]):>{width}}" for name in totals))


def quick(cases):
    """The correct rules and the first bug of each."""
    first = {}
    for c in cases:
        if c.buggy:
            first.setdefault(c.twin, c.name)
    return [c for c in cases if not c.buggy or first[c.twin] == c.name]


def big_module_row(width: int) -> None:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh()).double()
    n = sum(p.numel() for p in module.parameters())
    t0 = time.perf_counter()
    r = run_check(build_spec(module, x=(2, width), mode="fast", dtype="float64"), {})
    ours = time.perf_counter() - t0
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in module.parameters()]
    x = torch.randn(2, width, dtype=torch.float64, requires_grad=True)

    def f(x, *ps):
        return torch.func.functional_call(module, dict(zip(names, ps)), (x,))
    t0 = time.perf_counter()
    theirs_ok = torch.autograd.gradcheck(f, (x, *params), fast_mode=True, raise_exception=False)
    theirs = time.perf_counter() - t0
    print(f"\nnn.Sequential(Linear({width}, {width}), Tanh()), {n:.3g} parameters, x (2, {width}), float64:")
    print(f"  gradcli mode=fast          {r.status:5} {ours:8.2f} s")
    print(f"  gradcheck fast_mode=True   {'pass' if theirs_ok else 'FAIL':5} {theirs:8.2f} s")
    print(f"  time ratio gradcli/gradcheck {ours / theirs:.1f}")


def best_of(k: int, run) -> tuple:
    """-> (run()'s last result, the fewest seconds of ``k`` runs): the others' load on a shared machine
    only ever adds time."""
    times, out = [], None
    for _ in range(k):
        t0 = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t0)
    return out, min(times)


def attention_row(reps: int = 3) -> None:
    from causal_attention import SHAPE, CausalAttention

    S = SHAPE
    g = torch.Generator().manual_seed(0)
    xs = tuple(torch.rand(S, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(3))
    ours, ours_s = best_of(reps, lambda: run_check(build_spec(CausalAttention.apply, q=S, k=S, v=S), {}).status)
    theirs, theirs_s = best_of(reps, lambda: torch.autograd.gradcheck(CausalAttention.apply, xs,
                                                                      raise_exception=False))
    fast, fast_s = best_of(reps, lambda: torch.autograd.gradcheck(CausalAttention.apply, xs, fast_mode=True,
                                                                  raise_exception=False))
    print(f"\ncausal attention Function, q, k, v {S} (120 input elements), float64, best of {reps}:")
    print(f"  gradcli check              {ours:5} {ours_s:8.2f} s")
    print(f"  gradcheck                  {'pass' if theirs else 'FAIL':5} {theirs_s:8.2f} s")
    print(f"  gradcheck fast_mode=True   {'pass' if fast else 'FAIL':5} {fast_s:8.2f} s")
    print(f"  time ratio gradcli/gradcheck {ours_s / theirs_s:.1f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the correct rules and one bug of each; a 300-wide module")
    ap.add_argument("-k", metavar="TEXT", help="only the rules whose name holds TEXT")
    ap.add_argument("--width", type=int, help="width of the big module's Linear (default 1000, 300 with --quick)")
    ap.add_argument("--no-big", action="store_true", help="leave out the big module")
    ap.add_argument("--no-jax", action="store_true", help="leave out the JAX corpus")
    ap.add_argument("--no-attention", action="store_true", help="leave out the causal-attention speed case")
    ap.add_argument("--no-order2", action="store_true", help="leave out order 2 and forward mode")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if args.k is None or args.k in c.name]
    if args.quick:
        cases = quick(cases)
    warnings.simplefilter("ignore")  # gradcheck on float32 inputs warns every time: that is the point here
    if not cases:
        raise SystemExit(f"no torch rule's name holds {args.k!r}")
    for tool in ("gradcli", "gradcheck"):  # torch's first calls load code: not either tool's time
        verdict(cases[0], tool, "float64", False)

    print(f"{len(cases)} rules ({sum(c.buggy for c in cases)} buggy); seconds after each verdict\n")
    print(f"{'rule':30} {'bug':>4} " + " ".join(f"{name:>15}" for name in COLUMNS))
    totals = {name: {"caught": 0, "bugs": 0, "alarms": 0, "right": 0, "s": 0.0} for name in COLUMNS}
    for case in cases:
        cells = []
        for name, (tool, dtype, fast) in COLUMNS.items():
            passed, seconds = verdict(case, tool, dtype, fast)
            cells.append(score(totals[name], case, dtype, passed, seconds))
        mark = "/".join(d[-2:] for d in case.dtypes) if case.buggy else ""
        print(f"{case.name:30} {mark:>4} " + " ".join(f"{c:>15}" for c in cells))

    print_totals(totals, 15)
    print("\ntime ratio gradcli/gradcheck (whole corpus):")
    for ours, theirs in (("gradcli f64", "gradcheck f64"), ("gradcli f64", "gc f64 fast"),
                         ("gradcli f32", "gradcheck f32"), ("gradcli f32", "gc f32 fast")):
        print(f"  {ours} / {theirs:14} {totals[ours]['s'] / totals[theirs]['s']:8.1f}")
    if not args.no_attention:
        attention_row()
    if not args.no_big:
        big_module_row(args.width or (300 if args.quick else 1000))
    if not args.no_order2:
        order2_and_forward_section(cases)
    if not args.no_jax:
        jax_section(args)


def jax_section(args) -> None:
    try:
        import jax
        from jax.test_util import check_grads
    except ImportError:
        print("\nJAX is not installed: no check_grads rows")
        return
    import jax_corpus

    jax.config.update("jax_enable_x64", True)

    def theirs(case) -> bool:
        f, xs = jax_corpus.check_grads_call(case)
        try:
            check_grads(f, xs, order=1, modes=["rev"])
        except (AssertionError, NotImplementedError):  # NotImplementedError: no transpose, no reverse mode
            return False
        return True

    columns = {"gradcli f64": "float64", "gradcli f32": "float32", "check_grads f64": "float64"}
    cases = [c for c in jax_corpus.CASES if args.k is None or args.k in c.name]
    for case in cases[:1]:  # compiling JAX's first programs: not either tool's time
        theirs(case)
        run_check(build_spec(case.target, **case.inputs, **case.options), {})
    print(f"\nJAX: {len(cases)} rules ({sum(c.buggy for c in cases)} buggy)\n")
    print(f"{'rule':30} {'bug':>4} " + " ".join(f"{name:>16}" for name in columns))
    totals = {name: {"caught": 0, "bugs": 0, "alarms": 0, "right": 0, "s": 0.0} for name in columns}
    for case in cases:
        cells = []
        for name, dtype in columns.items():
            t0 = time.perf_counter()
            if name.startswith("gradcli"):
                passed = run_check(build_spec(case.target, **case.inputs, **case.options, dtype=dtype),
                                   {}).status == "pass"
            else:
                passed = theirs(case)
            cells.append(score(totals[name], case, dtype, passed, time.perf_counter() - t0))
        mark = "/".join(d[-2:] for d in case.dtypes) if case.buggy else ""
        print(f"{case.name:30} {mark:>4} " + " ".join(f"{c:>16}" for c in cells))
    print_totals(totals, 16)
    ratio = totals["gradcli f64"]["s"] / totals["check_grads f64"]["s"]
    print(f"\ntime ratio gradcli f64 / check_grads f64: {ratio:.1f}")



def _side_by_side(title: str, rows: list, theirs_name: str) -> None:
    """rows: (name, buggy, gradcli status, gradcli s, theirs verdict, theirs s)."""
    print(f"\n{title}\n")
    print(f"{'rule':32} {'bug':>4} {'gradcli':>14} {'s':>7} {theirs_name:>22} {'s':>7}")
    for name, buggy, ours, ours_s, theirs, theirs_s in rows:
        print(f"{name:32} {'yes' if buggy else '':>4} {ours:>14} {ours_s:7.3f} {theirs:>22} {theirs_s:7.3f}")
    ours_t, theirs_t = sum(r[3] for r in rows), sum(r[5] for r in rows)
    print(f"time ratio gradcli/{theirs_name}: {ours_t / theirs_t:.1f}")


def _theirs(check, f, tensors, **kw) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "pass" if check(f, tensors, raise_exception=False, **kw) else "FAIL"
    except RuntimeError as exc:  # torch cannot differentiate the backward, or the rule raised
        return "raises " + type(exc).__name__


def order2_and_forward_section(cases) -> None:
    """order=2 against gradgradcheck, forward mode against gradcheck(check_forward_ad=True), in float64."""
    from torch_corpus import Case, gradcheck_call

    cube = {"x": (3, 4), "w": (4,)}
    mine = [("cube", Cube, cube, False), ("cube_detached_saved_x", CubeDetachedX, cube, True),
            ("cube_no_grad_w", CubeWGradNoGrad, cube, True), ("cube_constant_cotangent", CubeDetachedGradOut, cube,
                                                            True)]
    for cls in (Cube, SinMul):  # the first order-2 and forward-mode runs load torch code: no one's time
        run_check(build_spec(cls.apply, x=(3, 4), w=(4,) if cls is Cube else (3, 4), order=2), {})
    rows = []
    jobs = [(c.name, c.target, c.inputs, c.options, False) for c in cases if not c.buggy]
    jobs += [(n, (lambda cls=cls: cls.apply), inp, {}, bug) for n, cls, inp, bug in mine]
    for name, target, inputs, options, bug in jobs:
        t0 = time.perf_counter()
        ours = run_check(build_spec(target(), **inputs, **options, order=2), {}).status
        ours_s = time.perf_counter() - t0
        f, tensors = gradcheck_call(Case(name, target, inputs, bug, options=options))
        t0 = time.perf_counter()
        theirs = _theirs(torch.autograd.gradgradcheck, f, tensors)
        rows.append((name, bug, ours, ours_s, theirs, time.perf_counter() - t0))
    # a correct rule that fails here saves a forward intermediate: right once, not differentiable twice
    _side_by_side("order 2: gradcli order=2 against gradgradcheck (float64)", rows, "gradgradcheck")

    rows = []
    pair = {"x": (3, 4), "w": (3, 4)}
    for name, cls, bug in (("sin_mul", SinMul, False), ("sin_mul_jvp_drops_w", SinMulJvpDropsW, True),
                           ("sin_mul_jvp_sign", SinMulJvpSign, True)):
        t0 = time.perf_counter()
        ours = run_check(build_spec(cls.apply, **pair), {}).status
        ours_s = time.perf_counter() - t0
        f, tensors = gradcheck_call(Case(name, lambda cls=cls: cls.apply, pair, bug))
        t0 = time.perf_counter()
        theirs = _theirs(torch.autograd.gradcheck, f, tensors, check_forward_ad=True)
        rows.append((name, bug, ours, ours_s, theirs, time.perf_counter() - t0))
    _side_by_side("forward mode: gradcli against gradcheck(check_forward_ad=True) (float64)", rows,
                  "gradcheck fwd")


if __name__ == "__main__":
    main()
