"""Tracing numpy code: arrays that record every numpy call so gradcli can differentiate it.

``trace(fn, inputs, wrt)`` runs ``fn`` once with the differentiated inputs wrapped as
:class:`~gradcli.trace.array.Traced` arrays; the returned :class:`~gradcli.trace.api.Trace` sweeps the
recorded tape forward (``jvp``) and backward (``vjp``, ``gradient``), and says what could not be traced.
"""
from gradcli.trace.api import Trace, trace
from gradcli.trace.array import Traced
from gradcli.trace.routing import ROUTES, kind_of

__all__ = ["trace", "Trace", "Traced", "ROUTES", "kind_of"]
