"""sympy, imported on first use, with gradcli's own functions beside its names.

The primitive table (gradcli/core/primitives.py) writes each function's symbolic form over the namespace
:func:`sympy_namespace` returns, so that importing the table never imports sympy (a second or so):
only a run that needs a symbolic result pays for it.
"""
from __future__ import annotations


class _SympyNamespace:
    """sympy's names, with gradcli's own functions in front of them."""

    def __init__(self, sympy, own: dict):
        self._sympy, self._own = sympy, own

    def __getattr__(self, name):
        own = self.__dict__.get("_own", {})
        return own[name] if name in own else getattr(self._sympy, name)


_SYMPY: _SympyNamespace | None = None


def sympy_namespace() -> _SympyNamespace:
    """sympy plus gradcli's ``log1p`` and ``softplus`` classes; the one place that imports sympy."""
    global _SYMPY
    if _SYMPY is not None:
        return _SYMPY
    import sympy

    class log1p(sympy.Function):  # noqa: N801 - printed as the language writes it
        """log(1 + x) for sympy, evaluated by mpmath's log1p: sympy's own log(1 + x) rounds 1 + x at its
        working precision and gives 0 for x = 1e-200, then an undefined reference downstream."""

        @classmethod
        def eval(cls, x):
            if x.is_zero:
                return sympy.S.Zero

        def fdiff(self, argindex=1):
            return 1 / (1 + self.args[0])

        def _eval_evalf(self, prec):
            return _mp_evalf(self.args[0], prec, lambda mp, a: mp.log1p(a))

    class softplus(sympy.Function):  # noqa: N801
        """log(1 + exp(x)) for sympy, evaluated as mpmath's log1p(exp(x)) for the same reason."""

        def fdiff(self, argindex=1):
            return 1 / (1 + sympy.exp(-self.args[0]))

        def _eval_evalf(self, prec):
            return _mp_evalf(self.args[0], prec, lambda mp, a: mp.log1p(mp.exp(a)))

    own = {}
    for cls in (log1p, softplus):  # found again by pickle through the module's __getattr__
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
        own[cls.__name__] = cls
    _SYMPY = _SympyNamespace(sympy, own)
    return _SYMPY


def __getattr__(name):  # pickle finds the classes here
    if name in ("log1p", "softplus"):
        return getattr(sympy_namespace(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _mp_evalf(arg, prec, f):
    import mpmath
    from mpmath.libmp import prec_to_dps

    a = arg.evalf(prec_to_dps(prec) + 10)
    if not (a.is_Number and a.is_real):
        return None
    with mpmath.workprec(prec + 30):
        v = f(mpmath.mp, a._to_mpmath(prec + 30))
    S = sympy_namespace()
    return S.Float(v, precision=prec) if mpmath.isfinite(v) and not isinstance(v, mpmath.mpc) else None
