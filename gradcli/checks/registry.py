"""``gradcli.check``: register a gradient check (docs/contract.md, the model file), and turn a spec's inputs into arrays.

Three forms, all recording one :class:`~gradcli.checks.spec.CheckSpec` in ``REGISTRY``::

    @gradcli.check(x=np.linspace(-1, 1, 5), w=(3, 4))   # decorator: returns the function unchanged,
    def loss(x, w): ...                                   # with .grad / .vjp / .hvp registration attributes

    gradcli.check(loss, grad=loss_grad, x=..., w=...)    # call form: returns loss
    gradcli.check("x*sin(y)", grad={"x": "sin(y)", "y": "x*cos(y)"}, x=1.0, y=2.0)   # returns the spec

Keywords named in ``OPTIONS`` are options, ``name=`` names the check, every other keyword is an input;
``inputs={...}`` passes inputs whose names clash with an option or with ``name``. Bad options are
:class:`~gradcli.core.errors.BadInput` at registration, so a model file with a typo fails to import (exit 2)
instead of checking the wrong thing.

Inputs given as a shape (a tuple of ints, ``()`` included) are drawn, in the order the inputs are given,
from one ``numpy.random.default_rng(seed)`` as standard normal ``z`` and mapped through ``domain``:

* no domain: ``z``;
* ``"positive"``: ``0.1 + |z|`` (at least 0.1, so that steps of finite differences stay inside);
* ``"unit"``: ``0.9 * tanh(z)``, inside (-0.9, 0.9);
* ``(low, high)``: ``low + (high - low) * (0.5 + 0.45 * tanh(z))``, inside the middle 90% of the interval.

Values (numbers, lists, arrays) are used as given (``np.asarray``); ``domain`` does not touch them.
"""
from __future__ import annotations

import inspect
import sys

import numpy as np

from gradcli.core import options as option_values
from gradcli.core.errors import BadInput
from gradcli.core.parser import ParseError, parse
from gradcli.checks.targets import framework as frameworks
from gradcli.checks.kernels import options as kernel_options
from gradcli.checks.spec import OPTIONS, REGISTRY, CheckSpec

MODES = ("auto", "full", "fast")
DTYPES = ("float64", "float32")
DOMAINS = ("positive", "unit")


def check(fn=None, /, *, grad=None, vjp=None, hvp=None, inputs: dict | None = None, name: str | None = None,
          **kwargs):
    """Register a gradient check; see the module docstring and docs/contract.md, the model file.
    ``name`` names the check (default: the function's name, or the expression)."""
    return _check(fn, grad, vjp, inputs, kwargs, REGISTRY, sys._getframe(1), hvp=hvp, name=name)


def build_spec(fn, /, *, grad=None, vjp=None, hvp=None, inputs: dict | None = None, name: str | None = None,
               **kwargs) -> CheckSpec:
    """The CheckSpec ``gradcli.check(fn, ...)`` would register, without registering it or touching ``fn``."""
    found: list = []
    _check(fn, grad, vjp, inputs, kwargs, found, sys._getframe(1), attach=False, hvp=hvp, name=name)
    return found[0]


def _check(fn, grad, vjp, inputs, kwargs, registry, caller, attach=True, hvp=None, name=None):
    options = {k: v for k, v in kwargs.items() if k in OPTIONS}
    given = {k: v for k, v in kwargs.items() if k not in OPTIONS}
    if inputs is not None:
        if not isinstance(inputs, dict):
            raise BadInput(f"inputs= must be a dict of name -> value or shape, got {type(inputs).__name__}")
        clash = sorted(set(inputs) & set(given))
        if clash:
            raise BadInput(f"input {clash[0]!r} given twice (in inputs= and as a keyword)")
        given = {**inputs, **given}
    validate_options(options)
    if name is not None and (not isinstance(name, str) or not name.strip() or "\n" in name):
        raise BadInput(f"name= must be a non-empty one-line string, got {name!r}")
    where = (caller.f_code.co_filename, caller.f_lineno)
    reg = (registry, attach, name)  # where the spec goes, whether fn gets .grad/.vjp/.hvp, its name

    if hvp is not None and not callable(hvp):
        raise BadInput(f"hvp= takes a function hvp(v, *inputs), got {type(hvp).__name__}")
    if isinstance(fn, str):
        if hvp is not None:
            raise BadInput("string checks take grad={name: expression}, not hvp=")
        return _register_expression(fn, grad, vjp, given, options, where, reg)
    if fn is None:  # the decorator form
        if grad is not None or vjp is not None or hvp is not None:
            raise BadInput("grad=/vjp=/hvp= belong to the call form gradcli.check(fn, grad=...); "
                           "with the decorator use @fn.grad / @fn.vjp / @fn.hvp")

        def decorator(f):
            return _register_function(f, None, None, given, options, None, reg)
        return decorator
    if not callable(fn):
        raise BadInput(f"gradcli.check takes a function or an expression string, got {type(fn).__name__}")
    if not given and not options and grad is None and vjp is None and hvp is None:
        # ``@gradcli.check`` without parentheses: every input comes from the parameters' defaults
        return _register_function(fn, None, None, given, options, None, reg)
    return _register_function(fn, grad, vjp, given, options, where, reg, hvp)


def _code_of(fn):
    """The code object of the function ``fn`` wraps, if any: through ``__wrapped__`` (functools.wraps,
    ``jax.jit``, whose object has no code of its own) and a JAX custom rule's ``.fun``."""
    for _ in range(32):  # a chain of wrappers, never a cycle
        code = getattr(fn, "__code__", None)
        if code is not None:
            return code
        inner = getattr(fn, "__wrapped__", None) or getattr(fn, "fun", None)
        if inner is None or inner is fn:
            return None
        fn = inner
    return None


def _register_function(fn, grad, vjp, inputs, options, where, reg, hvp=None):
    if where is None:  # a decorator: where the function is defined (its first decorator line)
        code = _code_of(fn)
        where = (code.co_filename, code.co_firstlineno) if code is not None else ("<unknown>", 0)
    if not inputs:
        inputs = _defaults_of(fn)
    name = getattr(fn, "__name__", type(fn).__name__)
    framework = frameworks.framework_of(fn, options)
    if options.get("reference") is not None:
        kernel_options.validate(options, grad, vjp, hvp)
    if framework != "numpy":
        # the framework target binds inputs itself (a Function's apply has no signature of its own)
        frameworks.validate(fn, framework, inputs, options, grad, vjp, hvp)
        check_wrt(inputs, options)
        options, name = {**options, "framework": framework}, frameworks.display_name(fn, framework)
    else:
        if options.get("dtype") is not None and options["dtype"] not in DTYPES:
            raise BadInput(f"dtype must be float64 or float32 for a numpy check, got {options['dtype']!r}")
        frameworks.refuse_torch_options(options, framework)
        _check_names(fn, inputs, options)
    spec = CheckSpec(name=reg[2] or name, fn=fn, file=where[0], line=where[1],
                     inputs=dict(inputs), options=dict(options), grad=grad, vjp=vjp, hvp=hvp)
    reg[0].append(spec)
    # a framework's own target (Function, module, custom rule) has its gradient under test, and
    # Function.vjp is torch's own; a plain function of tensors may have a hand-written one
    if reg[1] and (framework == "numpy" or not frameworks.target_of(framework).detects(fn)):
        _attach(fn, spec)
    return fn


def _defaults_of(fn) -> dict:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def _check_names(fn, inputs, options):
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins and ufuncs: nothing to compare against
        params = None
    if params is not None and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = [k for k in inputs if k not in params]
        if unknown:
            raise BadInput(f"{getattr(fn, '__name__', fn)} has no parameter {unknown[0]!r} "
                           f"(its parameters: {', '.join(params) or 'none'})")
        missing = [p.name for p in params.values() if p.default is p.empty and p.name not in inputs
                   and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if missing:
            raise BadInput(f"no value for parameter {missing[0]!r} of {getattr(fn, '__name__', fn)}: "
                           f"pass {missing[0]}=value or a shape such as {missing[0]}=(3,)")
    check_wrt(inputs, options)


def check_wrt(inputs, options):
    for name in options.get("wrt") or ():
        if name not in inputs:
            raise BadInput(f"wrt names {name!r}, which is not an input (inputs: {', '.join(inputs) or 'none'})")
    domain = options.get("domain")
    if isinstance(domain, dict):
        for name in domain:
            if name not in inputs:
                raise BadInput(f"domain names {name!r}, which is not an input")


def _attach(fn, spec):
    """``fn.grad`` / ``fn.vjp`` / ``fn.hvp``: decorators that register on every check of ``fn``."""
    specs = getattr(fn, "__gradcli_specs__", None)
    try:
        if specs is None:
            specs = []
            fn.__gradcli_specs__ = specs
            for kind in ("grad", "vjp", "hvp"):
                setattr(fn, kind, _registrar(specs, kind))
    except (AttributeError, TypeError):  # a builtin or ufunc: the call form still works
        return
    specs.append(spec)


def _registrar(specs, kind):
    def register(g):
        if not callable(g):
            raise BadInput(f"@.{kind} takes a function, got {type(g).__name__}")
        for s in specs:
            setattr(s, kind, g)
        return g
    register.__doc__ = f"Register the hand-written {kind} of this function (returns it unchanged)."
    return register


def _register_expression(text, grad, vjp, inputs, options, where, reg):
    try:
        graph = parse(text)
    except ParseError as exc:
        raise BadInput(exc.one_line(), detail=exc.caret(), column=exc.column) from None
    missing = [v for v in graph.variables if v not in inputs]
    if missing:
        raise BadInput(f"no value for {missing[0]!r} in gradcli.check({text!r}): pass {missing[0]}=value")
    extra = [k for k in inputs if k not in graph.variables]
    if extra:
        raise BadInput(f"{extra[0]!r} is not a variable of {text!r} (its variables: {', '.join(graph.variables)})")
    if vjp is not None:
        raise BadInput("string checks take grad={name: expression}, not vjp=")
    if grad is not None:
        if not isinstance(grad, dict) or not all(isinstance(v, str) for v in grad.values()):
            raise BadInput("grad= of a string check must be a dict of name -> expression string")
        if len(graph.outputs) > 1:
            raise BadInput(f"{text!r} has {len(graph.outputs)} outputs: a grad= dict is for a single output "
                           "(check each output separately, or leave grad= out to check gradcli's AD)")
        for name, g in grad.items():
            if name not in inputs:
                raise BadInput(f"grad= names {name!r}, which is not a variable of {text!r}")
            try:
                gg = parse(g)
            except ParseError as exc:
                raise BadInput(f"grad[{name!r}]: {exc.one_line()}", detail=exc.caret(), column=exc.column) from None
            unknown = [v for v in gg.variables if v not in inputs]
            if unknown:
                raise BadInput(f"grad[{name!r}] uses {unknown[0]!r}, which is not a variable of {text!r}")
    check_wrt(inputs, options)
    spec = CheckSpec(name=reg[2] or text, fn=None, file=where[0], line=where[1], inputs=dict(inputs),
                     options=dict(options), grad=None if grad is None else dict(grad), expression=text)
    reg[0].append(spec)
    return spec


def validate_options(options: dict) -> dict:
    """Raise BadInput for an option value gradcli cannot use; returns ``options``."""
    for key in ("atol", "rtol", "eps", "nondet_tol"):
        option_values.tolerance(options.get(key), key)
    if options.get("eps") == 0:
        raise BadInput("eps (the finite-difference step) must be positive")
    option_values.seed(options.get("seed"), "seed")
    if options.get("dtype") is not None:
        options["dtype"] = frameworks.check_dtype(options["dtype"])
    mode = options.get("mode")
    if mode is not None and mode not in MODES:
        raise BadInput(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    domain = options.get("domain")
    if domain is not None:
        for d in (domain.values() if isinstance(domain, dict) else (domain,)):
            _domain_ok(d)
    wrt = options.get("wrt")
    if wrt is not None:
        names = [wrt] if isinstance(wrt, str) else wrt
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise BadInput(f"wrt must be an input name or a list of names, got {wrt!r}")
        options["wrt"] = list(names)
    output = options.get("output")
    if output is not None and (isinstance(output, bool) or not isinstance(output, (int, np.integer))):
        raise BadInput(f"output must be an integer index into the function's tuple of outputs, got {output!r}")
    with_grad = options.get("with_grad")
    if with_grad is not None and not isinstance(with_grad, bool):
        raise BadInput(f"with_grad must be True or False, got {with_grad!r}")
    order = options.get("order")
    if order is not None and (isinstance(order, bool) or order not in (1, 2)):
        raise BadInput(f"order must be 1 or 2, got {order!r}")
    framework = options.get("framework")
    if framework is not None and framework not in frameworks.FRAMEWORKS:
        raise BadInput(f"framework must be one of {', '.join(frameworks.FRAMEWORKS)}, got {framework!r}")
    frameworks.torch_target.check_options(options)
    taylor = options.get("taylor")
    if taylor is not None and not isinstance(taylor, bool):
        raise BadInput(f"taylor must be True or False, got {taylor!r}")
    if options.get("reference") is not None:
        kernel_options.validate(options)
    elif options.get("factor") is not None:
        raise BadInput("factor= scales the tolerance of a reference= check: pass reference= as well")
    return options


def _domain_ok(d):
    if d is None or d in DOMAINS:
        return
    if (isinstance(d, (tuple, list)) and len(d) == 2 and all(isinstance(v, (int, float)) for v in d)
            and d[0] < d[1]):
        return
    raise BadInput(f"domain must be 'positive', 'unit' or (low, high) with low < high, got {d!r}")


# --- inputs ------------------------------------------------------------------------------------------

def is_shape(v) -> bool:
    """A tuple of ints (``()`` included) is a shape; anything else is a value."""
    return isinstance(v, tuple) and all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0
                                        for n in v)


def map_domain(z: np.ndarray, domain) -> np.ndarray:
    """Standard normal ``z`` -> a sample inside ``domain`` (the mapping in the module docstring)."""
    if domain is None:
        return z
    if domain == "positive":
        return 0.1 + np.abs(z)
    if domain == "unit":
        return 0.9 * np.tanh(z)
    low, high = float(domain[0]), float(domain[1])
    return low + (high - low) * (0.5 + 0.45 * np.tanh(z))


def materialize(inputs: dict, seed: int = 0, domain=None, dtype=np.float64) -> dict:
    """name -> numpy array: shapes drawn (in the order given) and mapped through ``domain``, values as given.

    Floating-point values are cast to ``dtype``; integer and boolean values stay as they are (constants).
    """
    rng = np.random.default_rng(seed)
    out = {}
    for name, v in inputs.items():
        d = domain.get(name) if isinstance(domain, dict) else domain
        if is_shape(v):
            # an array also for shape (): numpy's ufuncs hand a 0-d array back as a scalar, which the
            # finite differences could not step in place
            out[name] = np.asarray(map_domain(rng.standard_normal(v), d), dtype=dtype)
        elif isinstance(v, tuple) and v and all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                                                for n in v):
            # (-1, 4) is neither a shape nor, as a tuple of ints, meant to be a constant
            raise BadInput(f"input {name!r}: {v!r} is a tuple of ints, which gradcli reads as a shape, and a "
                           f"shape has no negative sizes; for these values pass a list or array of floats, "
                           f"{name}={[float(n) for n in v]!r}")
        else:
            a = np.array(v)
            if a.dtype.kind == "f" or a.dtype.kind == "c":
                a = a.astype(dtype) if a.dtype.kind == "f" else a
            elif a.dtype.kind not in "biu":
                try:
                    a = a.astype(dtype)
                except (TypeError, ValueError):
                    raise BadInput(f"input {name!r} is not numeric ({a.dtype})") from None
            out[name] = a
    return out
