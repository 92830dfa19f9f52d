"""pytest helpers: ``assert_gradients(fn, grad=..., **inputs)`` runs one gradient check in a test.

::

    from gradcli.testing import assert_gradients

    def test_loss_gradient():
        assert_gradients(loss, grad=loss_grad, x=np.linspace(-1, 1, 5), w=(3, 4))
        assert_gradients(layer, vjp=layer_vjp, x=(4, 3), rtol=1e-5)

Inputs and options are those of ``gradcli.check`` (DESIGN.md section 4); nothing is registered and
``fn`` is not modified. Anything but ``pass`` raises an AssertionError whose message names the status,
the input, the element index, expected and got; on ``pass`` the CheckResult is returned.
"""
from __future__ import annotations

__all__ = ["assert_gradients", "format_failure"]


def assert_gradients(fn, grad=None, vjp=None, hvp=None, **inputs_and_options):
    """Check ``fn``'s gradient (``grad``), vector-Jacobian product (``vjp``), or, with neither, gradcli's
    AD of ``fn`` against finite differences; with ``order=2`` (implied by ``hvp``) the gradient's own
    derivative and the Hessian-vector product ``hvp`` too. Raise AssertionError unless the check passes."""
    import sys

    from .checks.registry import build_spec
    from .checks.runner import run_check

    spec = build_spec(fn, grad=grad, vjp=vjp, hvp=hvp, **inputs_and_options)
    caller = sys._getframe(1)
    spec.file, spec.line = caller.f_code.co_filename, caller.f_lineno
    result = run_check(spec, {})
    if result.status != "pass":
        raise AssertionError(format_failure(result))
    return result


def _num(v) -> str:
    return "-" if v is None else f"{v:.10g}"


def format_failure(result) -> str:
    """A few readable lines: status and message, the worst mismatches as a table, notes, traceback."""
    lines = [f"gradient check of {result.name} {result.status.upper()}: {result.message}"]
    if result.mismatches:
        rows = [("input", "index", "expected", "got", "abs error", "rel error")]
        for m in result.mismatches:
            index = "[" + ", ".join(map(str, m.index)) + "]"
            if m.output_index is not None:
                index += " of output [" + ", ".join(map(str, m.output_index)) + "]"
            rows.append((m.input, index, _num(m.expected), _num(m.got), f"{m.abs_error:.3g}", f"{m.rel_error:.3g}"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if result.reference:
        lines.append(f"reference: {result.reference}; mode: {result.mode}")
    for note in result.notes:
        lines.append(f"note: {note}")
    if result.traceback:
        lines.append(result.traceback.rstrip())
    return "\n".join(lines)
