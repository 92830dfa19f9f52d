"""What the CLI tests share: a runner that keeps stdout and stderr apart, a colour-free environment,
a JSON parser that rejects NaN and Infinity (the contract says null), ``gradcli check`` run in this
process, model files with a statement placed in the function, gradient, vjp or hvp, and gradcli started
in a process of its own that a signal stops in a chosen phase."""
import json
import os
import subprocess
import sys
import textwrap

from click.testing import CliRunner

try:  # click < 8.2 mixes stderr into stdout unless told not to
    RUNNER = CliRunner(mix_stderr=False)
except TypeError:
    RUNNER = CliRunner()

PLAIN_ENV = {"FORCE_COLOR": None, "NO_COLOR": None, "TTY_COMPATIBLE": None, "TTY_INTERACTIVE": None}


def _reject(name):
    raise ValueError(f"{name} is not JSON")


def strict_json(text: str):
    return json.loads(text, parse_constant=_reject)


def check(*args, cwd=None):
    """``gradcli check ARGS`` through click in this process (from ``cwd`` if given); an exception
    escaping the CLI fails the test."""
    from gradcli.cli import main

    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return RUNNER.invoke(main, ["check", *map(str, args)], env=PLAIN_ENV, catch_exceptions=False)
    finally:
        os.chdir(old)


def model(path, *parts):
    """A model file at ``path`` made of ``parts`` (dedented); returns the path."""
    path.write_text(textwrap.dedent("\n".join(parts)))
    return path


#: A check named ``quits`` with ``{stmt}`` in the place named by the key (see :func:`placed`).
PLACES = {
    "function": '''
        @gradcli.check(x=np.array([1.0, 2.0]))
        def quits(x):
            {stmt}
            return np.sum(x ** 2)
        ''',
    "gradient": '''
        @gradcli.check(x=np.array([1.0, 2.0]))
        def quits(x):
            return np.sum(x ** 2)

        @quits.grad
        def quits_grad(x):
            {stmt}
            return 2 * x
        ''',
    "vjp": '''
        @gradcli.check(x=np.array([1.0, 2.0]))
        def quits(x):
            return np.tanh(x)

        @quits.vjp
        def quits_vjp(g, x):
            {stmt}
            return g * (1 - np.tanh(x) ** 2)
        ''',
    "hvp": '''
        @gradcli.check(x=np.array([1.0, 2.0]))
        def quits(x):
            return np.sum(x ** 3)

        @quits.grad
        def quits_grad(x):
            return 3 * x ** 2

        @quits.hvp
        def quits_hvp(v, x):
            {stmt}
            return 6 * x * v
        ''',
}


def placed(where: str, stmt: str) -> str:
    """The check of :data:`PLACES` ``where`` with ``stmt`` in it."""
    return textwrap.dedent(PLACES[where]).replace("{stmt}", stmt)


#: The shipped examples; examples/torch and examples/jax need their framework and have tests of their own.
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples")
FRAMEWORK_EXAMPLES = ("torch", "jax")


def numpy_examples() -> list:
    """The numpy example files: examples/*.py and examples/bugs/*.py."""
    return sorted(os.path.join(d, f) for d in (EXAMPLES, os.path.join(EXAMPLES, "bugs"))
                  for f in os.listdir(d) if f.endswith(".py"))


# --- gradcli in a process of its own, stopped by a signal in a chosen phase -------------------------------

#: The one line each stop signal leaves on stderr.
LINE = {"SIGINT": "interrupted: Ctrl-C (SIGINT)", "SIGTERM": "terminated: SIGTERM", "SIGHUP": "hung up: SIGHUP"}

# gradcli's entry point, started as a terminal would start it: whatever the test runner's own parent
# ignores, Ctrl-C raises KeyboardInterrupt (a background job's SIGINT is ignored, and gradcli rightly
# keeps ignoring it). With a hook MODULE:FUNCTION the process sends itself the signal when it first
# enters that function.
LAUNCHER = r'''
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
for name in sys.argv[2].split(",") if sys.argv[2] else ():
    signal.signal(getattr(signal, name), signal.SIG_IGN)
sig, hook = sys.argv[1], sys.argv[3]
if hook:
    prefix, _, function = hook.partition(":")
    def profile(frame, event, arg):
        if (event == "call" and frame.f_code.co_name == function
                and frame.f_globals.get("__name__", "").startswith(prefix)):
            sys.setprofile(None)
            os.kill(os.getpid(), getattr(signal, sig))
    sys.setprofile(profile)
from gradcli.cli import main
main(sys.argv[4:], prog_name="gradcli")
'''


def start(args, cwd, sig="SIGINT", hook="", ignored=()):
    return subprocess.Popen([sys.executable, "-c", LAUNCHER, sig, ",".join(ignored), hook, *map(str, args)],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    assert "Traceback" not in err and "Aborted" not in err, err
    return proc.returncode, out, err
