"""pytest helpers: ``assert_gradients(fn, grad=..., **inputs)`` runs one gradient check in a test.

::

    from gradcli.testing import assert_gradients

    def test_loss_gradient():
        assert_gradients(loss, grad=loss_grad, x=np.linspace(-1, 1, 5), w=(3, 4))
        assert_gradients(layer, vjp=layer_vjp, x=(4, 3), rtol=1e-5)

Inputs and options are those of ``gradcli.check`` (docs/contract.md, the model file); nothing is registered and
``fn`` is not modified. Anything but ``pass`` raises an AssertionError with the text ``gradcli check``
shows for that check (status, message, the worst elements with input, index, expected and got, notes,
the user's traceback); on ``pass`` the CheckResult is returned.
"""
from __future__ import annotations

import sys

from gradcli.checks.collect import display_path
from gradcli.checks.registry import build_spec
from gradcli.core.errors import BadInput
from gradcli.checks.runner import run_check
from gradcli.render.check import result_text

__all__ = ["assert_gradients", "format_failure"]


def assert_gradients(fn, grad=None, vjp=None, hvp=None, **inputs_and_options):
    """Check ``fn``'s gradient (``grad``), vector-Jacobian product (``vjp``), or, with neither, gradcli's
    AD of ``fn`` against finite differences; with ``order=2`` (implied by ``hvp``) the gradient's own
    derivative and the Hessian-vector product ``hvp`` too. Raise AssertionError unless the check passes."""
    # pytest leaves this frame out of the failure it shows: the test's own line is what fails
    __tracebackhide__ = True
    caller = sys._getframe(1)
    try:
        result = _run(fn, grad, vjp, hvp, inputs_and_options, caller.f_code.co_filename, caller.f_lineno)
        failure = None if result.status == "pass" else AssertionError(format_failure(result))
    except BadInput as exc:
        # raised afresh from here, outside the handler: no chain, and none of gradcli's frames beneath
        failure = exc.with_traceback(None)
    if failure is not None:
        raise failure
    return result


def _run(fn, grad, vjp, hvp, inputs_and_options: dict, file: str, line: int):
    if fn is None:  # gradcli.check(None) is its decorator form: here there would be nothing to check
        raise BadInput("assert_gradients needs the function (or expression string) to check, got None")
    spec = build_spec(fn, grad=grad, vjp=vjp, hvp=hvp, **inputs_and_options)
    spec.file, spec.line = display_path(file), line
    return run_check(spec, {})


def format_failure(result) -> str:
    """The failure text of a CheckResult: what ``gradcli check`` shows for it
    (:func:`gradcli.render.check.result_text`)."""
    return result_text(result)
