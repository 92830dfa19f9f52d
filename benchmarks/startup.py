"""Start-up time of the command line against the imports it cannot avoid, in one run.

    python benchmarks/startup.py [--runs 15] [--check]

Three pairs, each a fresh process, timed wall-clock from spawn to exit; the runs of all six commands
are interleaved (one of each per round, in a rotating order) so that a machine busy for a moment
slows every command alike, and each figure is the median over the rounds:

* ``gradcli --help``                                   against ``python -c "import click"``               (target <= 1.5x)
* ``gradcli grad EXPR --at ... --method forward,reverse`` against ``python -c "import numpy, rich, click"``  (target <= 1.3x, sympy never imported)
* ``gradcli grad EXPR --at ...`` (every method)         against ``python -c "import numpy, sympy, rich, click"`` (target <= 1.15x)

gradcli runs as ``python -m gradcli`` with the interpreter running this script (the installed
``gradcli`` script beside it does the same imports). ``--check`` exits 1 when a target is missed.

A fourth figure is the floor under the third: the same imports plus sympy's own first derivative
of the expression and its evaluation to 30 digits, which any run with a symbolic reference pays
(sympy imports its tensor and combinatorics modules on the first sum it builds, and fills its
assumption caches). It is printed as that floor's ratio to the baseline and gradcli's to the floor.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

EXPR = ["x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3"]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def gradcli(*args) -> list:
    return [sys.executable, "-m", "gradcli", *args]


def python(code: str) -> list:
    return [sys.executable, "-c", code]


#: (what, gradcli's command, the baseline command, the target ratio)
PAIRS = [
    ("gradcli --help", gradcli("--help"), python("import click"), 1.5),
    ("grad --method forward,reverse", gradcli("grad", *EXPR, "--method", "forward,reverse"),
     python("import numpy, rich, click"), 1.3),
    ("grad (every method)", gradcli("grad", *EXPR), python("import numpy, sympy, rich, click"), 1.15),
]

#: sympy's own first derivative of EXPR, evaluated at its point: what a symbolic reference costs at least.
FLOOR = python("import numpy, sympy, rich, click\n"
               "x, y = sympy.symbols('x y')\n"
               "f = x**2*sympy.sin(y)\n"
               "[f.diff(v).evalf(30, subs={x: 1.5, y: 0.3}) for v in (x, y)]")


#: Children may write .pyc files: an installed package has them (pip compiles at install), and a
#: PYTHONDONTWRITEBYTECODE inherited from the shell would make every gradcli run compile its sources.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_once(cmd: list) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    elapsed = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{p.stderr.decode()}")
    return elapsed


def loads_sympy(args: list) -> bool:
    """Whether ``gradcli ARGS`` imports sympy (read from sys.modules as the process exits)."""
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.__stderr__.write('\\nSYMPY %s\\n' % ('sympy' in sys.modules)))\n"
            "from gradcli.cli import main\n"
            f"main({args!r}, prog_name='gradcli')\n")
    p = subprocess.run(python(code), capture_output=True, text=True, cwd=ROOT)
    return "SYMPY True" in p.stderr


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15, help="rounds (at least 7); the median is reported")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    runs = max(7, args.runs)
    commands = [cmd for _, mine, base, _ in PAIRS for cmd in (mine, base)] + [FLOOR]
    for cmd in commands:  # warm the file cache and .pyc files: not part of any figure
        run_once(cmd)
    times: list = [[] for _ in commands]
    for r in range(runs):
        order = list(range(len(commands)))
        order = order[r % len(order):] + order[:r % len(order)]
        for k in order:
            times[k].append(run_once(commands[k]))
    medians = [statistics.median(t) for t in times]

    print(f"# gradcli start-up: median of {runs} interleaved runs, {sys.executable} "
          f"(Python {sys.version.split()[0]})")
    print(f"{'command':32} {'gradcli ms':>10} {'baseline ms':>11} {'ratio':>6} {'target':>7}  verdict")
    missed = 0
    for i, (what, mine, base, target) in enumerate(PAIRS):
        m, b = medians[2 * i], medians[2 * i + 1]
        ratio = m / b
        ok = ratio <= target
        note = ""
        if "forward,reverse" in what:
            sympy = loads_sympy(mine[3:])
            ok = ok and not sympy
            note = "  (sympy imported)" if sympy else "  (sympy not imported)"
        missed += not ok
        print(f"{what:32} {m * 1e3:10.0f} {b * 1e3:11.0f} {ratio:6.2f} {target:6.2f}x  "
              f"{'ok' if ok else 'MISSED'}{note}")
    floor, base, mine = medians[-1], medians[-2], medians[-3]
    print(f"{'floor: sympy first derivative':32} {'':10} {floor * 1e3:11.0f} {floor / base:6.2f}"
          f"          (the floor against the last baseline)")
    print(f"{'grad (every method) / floor':32} {'':10} {'':11} {mine / floor:6.2f}"
          f"          (what gradcli adds to sympy's own cost)")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
