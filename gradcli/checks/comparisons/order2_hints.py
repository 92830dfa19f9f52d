"""What an ``order=2`` failure of a framework check asks after: the rule the framework differentiates,
named (a Function's backward, a custom_vjp's bwd, a custom_jvp's jvp rule), and only the causes that
framework has. Read by gradcli.checks.comparisons.second_order."""
from __future__ import annotations

from gradcli.checks.targets import framework as frameworks
from gradcli.checks.comparisons.under_test import framework_under_test


def target_kind(ctx) -> str:
    """What the framework's gradient under test comes from, for the hints: "custom_vjp" or "custom_jvp" (a
    JAX rule registered directly), "Function" (a torch Function), "module", or "function" (a plain
    function of tensors or jax arrays, whose custom rules are inside it)."""
    fn = ctx.spec.fn
    kind = type(fn).__name__
    if kind in ("custom_vjp", "custom_jvp"):
        return kind
    if hasattr(fn, "named_parameters"):
        return "module"
    framework = ctx.spec.options.get("framework")
    if framework == "torch" and frameworks.target_of("torch").detects(fn):
        return "Function"
    return "function"


def _rule(ctx) -> str:
    """The code the framework's second derivatives differentiate, named: "Cube.backward", "the bwd of
    cube", "the jvp rule of sine", "the backward of each Function inside block"."""
    name = ctx.spec.name
    return {"Function": f"{name}.backward", "custom_vjp": f"the bwd of {name}",
            "custom_jvp": f"the jvp rule of {name} (JAX transposes it)"}.get(
        target_kind(ctx), f"the backward of each {'Function' if _torch(ctx) else 'custom rule'} inside {name}")


def _torch(ctx) -> bool:
    return ctx.spec.options.get("framework") == "torch"


def frozen_term(ctx) -> str:
    """Why the framework's derivative of its vjp goes wrong: it differentiates the rule's own operations, so
    a term it takes for a constant, or an operation whose own rule is wrong, is what it gets wrong."""
    if framework_under_test(ctx) is None:
        return ""
    what = "torch's double backward" if _torch(ctx) else "JAX's vjp of its vjp"
    if _torch(ctx):
        constant = "under torch.no_grad(), .detach() or .data, or a forward intermediate saved for backward"
        inner = "a Function whose own backward is wrong"
    else:
        constant = "under jax.lax.stop_gradient, or computed with numpy rather than jax.numpy"
        inner = "a custom_vjp/custom_jvp function whose own rule is wrong"
    return f"{what} differentiates {_rule(ctx)}: does it take a term for a constant ({constant}), or call {inner}?"


def constant_cotangent(ctx) -> str:
    """What leaves the cotangent out of the framework's vjp, or differentiates it wrongly."""
    if framework_under_test(ctx) is None:
        return "a cotangent treated as a constant"
    kind = target_kind(ctx)
    if kind == "custom_jvp":  # JAX's vjp of it is the transpose of the rule: linear in the tangent, or wrong
        return f"the jvp rule of {ctx.spec.name} is not linear in its tangent (jax.lax.stop_gradient on it?)"
    if _torch(ctx):
        return f"g.detach(), g.data or g used under torch.no_grad() in {_rule(ctx)}, or a Function called on g " \
               "whose own backward is wrong"
    return f"jax.lax.stop_gradient on the cotangent in {_rule(ctx)}, or a custom_vjp/custom_jvp function called " \
           "on it whose own rule is wrong"


def cached_term(ctx) -> str:
    """Why a gradient right at the inputs is the wrong function of them: a value it does not recompute."""
    if framework_under_test(ctx) is None:
        return " (a cached or frozen quantity?)"
    if _torch(ctx):
        return f" (does {_rule(ctx)} use a value kept from an earlier call, on ctx or in a global, rather than " \
               "what it saved for backward?)"
    return f" (does {_rule(ctx)} use a value fixed when it was traced, a Python global or closure, rather than " \
           "its inputs and residuals?)"
