"""gradcli's numerical methods against exact 50-digit references, beside numdifftools, on one corpus.

    python benchmarks/numerics.py                 # the table of figures (numdifftools if installed)
    python benchmarks/numerics.py --list          # also every case whose verdict or estimate is wrong
    python benchmarks/numerics.py --group pole    # one group of the corpus

The corpus is tests/verdict/numerics_corpus.py (stationary points of the standard optimisation test
functions, cancellation forms, smooth, steep and oscillatory functions, points near poles). Per method:
median correct digits, how often its error estimate is below its actual error (beyond 2 ulp of the
exact value) and by how much at worst, how many numbers have status ``ok`` while off by more than their
tolerance or with fewer than 6 correct digits where AD of the program has 6, and the time per case. numdifftools (``pip install numdifftools``, a benchmark-only
dependency) runs its default (central differences, Richardson-extrapolated) and its complex step, each
with ``full_output=True`` for its error estimate. The overall statuses per group come last.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "verdict"))
from numerics_corpus import CASES, exact_gradient, sympy_expr  # noqa: E402

from gradcli.api import grad  # noqa: E402

METHODS = ("forward", "reverse", "central", "richardson", "complex_step")
EXCEEDED = 2  # ulp of the exact value an estimate may miss by: the exact value's own rounding


def digits(got, exact) -> float:
    """Correct significant digits of ``got`` (absolute digits where the exact value is 0), 0 to 17."""
    if got is None or not math.isfinite(got):
        return float("nan")
    err = abs(got - exact)
    rel = err / abs(exact) if exact != 0 else err
    return 17.0 if rel == 0 else float(min(17.0, max(0.0, -math.log10(rel))))


def exceeded(got, est, exact) -> float:
    """How many times the estimate the actual error is (0 where the estimate holds)."""
    if got is None or est is None or not (math.isfinite(got) and math.isfinite(est)):
        return 0.0
    err = abs(got - exact)
    if err <= est + EXCEEDED * np.spacing(abs(exact)):
        return 0.0
    return err / est if est > 0 else float("inf")


class Tally:
    def __init__(self):
        self.digits, self.exceeded, self.worst, self.ok_off, self.seconds = [], [], [], [], []
        self.ok_few = []  # status ok with fewer than 6 correct digits

    def add(self, name, case, got, est, exact, ok=None, tol=None, seconds=0.0, ad=None):
        d = [digits(g, e) for g, e in zip(got, exact)]
        self.digits.append(np.nanmin(d) if not np.isnan(d).all() else np.nan)
        x = [exceeded(g, s, e) for g, s, e in zip(got, est, exact)] if est is not None else [0.0]
        self.exceeded.append(max(x) > 0)
        if max(x) > 0:
            self.worst.append((max(x), case.label))
        if ok is not None and ok:
            off = [abs(g - e) > t for g, e, t in zip(got, exact, tol) if math.isfinite(g)]
            if any(off):
                self.ok_off.append(case.label)
            # where the program itself has 6 digits (AD of it does): fewer is the method's doing
            ad = ad or got
            if any(e != 0 and digits(g, e) < 6 <= digits(a, e) for g, e, a in zip(got, exact, ad)):
                self.ok_few.append(case.label)
        self.seconds.append(seconds)


def gradcli_case(case, exact, tallies, statuses, problems):
    t0 = time.perf_counter()
    report = grad(case.expr, case.at)
    statuses["whole report seconds"][time.perf_counter() - t0] += 1
    statuses[case.group][report.status] += 1
    want = "agree" if case.group in ("stationary", "smooth", "steep") else None
    if want and report.status != want:
        problems.append(f"status {report.status} (want {want}): {case.label}: {report.message}")
    if report.status == "undefined":
        problems.append(f"undefined where the derivative exists: {case.label}: {report.message}")
    forward = report.methods.get("forward")
    ad = None if forward is None else [float(forward.jacobian[0, report.variables.index(n)]) for n, _ in case.point]
    for name in METHODS:
        m = report.methods.get(name)
        if m is None or m.jacobian is None:
            continue
        # columns in the case's order of variables (the report's is the expression's)
        cols = [report.variables.index(name) for name, _ in case.point]
        got = [float(m.jacobian[0, k]) for k in cols]
        est = None if m.error_estimate is None else [float(m.error_estimate[0, k]) for k in cols]
        tol = None if m.tolerance is None else [float(m.tolerance[0, k]) for k in cols]
        tallies[f"gradcli {name}"].add(name, case, got, est, exact, m.status == "ok", tol, m.seconds, ad)


def numdifftools_case(case, exact, tallies):
    import numdifftools as nd
    import sympy
    expr, symbols = sympy_expr(case)
    f = sympy.lambdify([symbols], expr, modules="numpy")
    x = np.array([v for _, v in case.point], dtype=float)
    for label, method in (("numdifftools default", "central"), ("numdifftools complex", "complex")):
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                r = nd.Gradient(lambda v: f(v), method=method, full_output=True)(x)
            got = np.ravel(r.estimate).astype(float).tolist()
            est = np.ravel(r.error_estimate).astype(float).tolist()
        except Exception:
            got, est = [float("nan")] * len(exact), None
        tallies[label].add(label, case, got, est, exact, seconds=time.perf_counter() - t0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print every case with a wrong verdict or estimate")
    ap.add_argument("--group", help="only this group of the corpus")
    ap.add_argument("--no-peers", action="store_true", help="gradcli only")
    ap.add_argument("--dump", metavar="FILE", help="write the correct digits per method and case (JSON)")
    ap.add_argument("--against", metavar="FILE", help="a --dump of another version: digits gained and lost")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if args.group in (None, c.group)]
    try:
        import numdifftools
        peers = not args.no_peers and bool(numdifftools.__version__)
    except ImportError:
        peers = False
        print("numdifftools is not installed (pip install numdifftools): gradcli only\n")
    tallies, statuses, problems = defaultdict(Tally), defaultdict(Counter), []
    for case in cases:
        exact = [float(v) for v in exact_gradient(case)]
        gradcli_case(case, exact, tallies, statuses, problems)
        if peers:
            numdifftools_case(case, exact, tallies)

    print(f"{len(cases)} gradients with exact 50-digit references\n")
    print(f"{'method':24} {'median digits':>13} {'estimate exceeded':>18} {'worst':>8} {'ok but off':>10} "
          f"{'ok <6 digits':>12} {'ms/case':>8}")
    for name, t in tallies.items():
        worst = max((w for w, _ in t.worst), default=0.0)
        n = len(t.digits)
        print(f"{name:24} {np.nanmedian(t.digits):13.1f} {sum(t.exceeded):8d} ({100 * sum(t.exceeded) / n:4.1f}%) "
              f"{worst:8.2g} {len(t.ok_off):10d} {len(t.ok_few):12d} {1e3 * np.median(t.seconds):8.2f}")
    if peers:
        a, b = tallies["gradcli richardson"].digits, tallies["numdifftools default"].digits
        more = sum(1 for x, y in zip(a, b) if x > y + 0.5 or (np.isnan(y) and not np.isnan(x)))
        fewer = sum(1 for x, y in zip(a, b) if y > x + 0.5 or (np.isnan(x) and not np.isnan(y)))
        print(f"\ngradcli richardson has more correct digits than numdifftools' default in {more} cases, "
              f"fewer in {fewer}")
    whole = statuses.pop("whole report seconds")
    print(f"\ngradcli grad, the whole report (sympy, five methods, the verdict): median "
          f"{1e3 * np.median(list(whole.elements())):.1f} ms per case")
    print("\noverall status per group:")
    for group, c in statuses.items():
        print(f"  {group:14} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    if args.dump:
        import json
        Path(args.dump).write_text(json.dumps({k: [None if np.isnan(d) else d for d in t.digits]
                                               for k, t in tallies.items()}))
    if args.against:
        import json
        old = json.loads(Path(args.against).read_text())
        print("\ncorrect digits against the other version, on the cases where both give a number:")
        for name, t in tallies.items():
            pairs = [(a, b) for a, b in zip(t.digits, old.get(name, [])) if b is not None and not np.isnan(a)]
            if pairs:
                print(f"  {name:24} median {np.median([a for a, _ in pairs]):5.1f} (was "
                      f"{np.median([b for _, b in pairs]):5.1f}), more in {sum(a > b + 0.5 for a, b in pairs)}, "
                      f"fewer in {sum(b > a + 0.5 for a, b in pairs)}")
    if args.list:
        for name, t in tallies.items():
            for w, label in sorted(t.worst, reverse=True):
                problems.append(f"{name}: estimate exceeded {w:.3g}x: {label}")
            for label in t.ok_off:
                problems.append(f"{name}: ok but off by more than its tolerance: {label}")
            for label in t.ok_few:
                problems.append(f"{name}: ok with fewer than 6 correct digits: {label}")
        print("\n" + "\n".join(problems) if problems else "\nno problems")


if __name__ == "__main__":
    main()
