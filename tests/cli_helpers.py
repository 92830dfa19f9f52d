"""What the CLI tests share: a runner that keeps stdout and stderr apart, a colour-free environment,
a JSON parser that rejects NaN and Infinity (the contract says null), ``gradcli check`` run in this
process, and model files with a statement placed in the function, gradient, vjp or hvp."""
import json
import os
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
