"""What check_grads(order=2, modes=["fwd", "rev"]) checks, as gradcli checks: second order and forward mode.

``cube`` (y_i = sum_j x_ij^3 w_j, a custom_vjp) passes ``order=2``. ``cube_stopped`` is the bug: its bwd
wraps x in ``jax.lax.stop_gradient``, right at first order and wrong at second order in x (fails).
``sine`` is a custom_jvp with the right tangent (passes in forward and reverse mode); ``sine_offset``
adds a tangent-free term to its jvp, which JAX's transpose drops, so reverse mode is right and forward
mode is not (fails, naming forward mode).
"""
import jax
import jax.numpy as jnp

import gradcli


def _cube(x, w):
    return jnp.sum(x ** 3 * w, axis=-1)


def _named(name, fn):
    """``fn`` under ``name``: a check is named after its rule's function."""
    def primal(*args):
        return fn(*args)
    primal.__name__ = primal.__qualname__ = name
    return primal


def _cube_rule(name, stop):
    f = jax.custom_vjp(_named(name, _cube))

    def bwd(res, g):
        x, w = res
        xs = jax.lax.stop_gradient(x) if stop else x
        return g[:, None] * 3 * xs ** 2 * w, jnp.sum(g[:, None] * x ** 3, 0)

    f.defvjp(lambda x, w: (_cube(x, w), (x, w)), bwd)
    return f


def _sine_rule(name, offset):
    f = jax.custom_jvp(_named(name, jnp.sin))

    @f.defjvp
    def jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        return jnp.sin(x), jnp.cos(x) * dx + offset * x

    return f


for rule in (_cube_rule("cube", False), _cube_rule("cube_stopped", True)):
    gradcli.check(rule, x=(3, 4), w=(4,), order=2)
for rule in (_sine_rule("sine", 0.0), _sine_rule("sine_offset", 0.1)):
    gradcli.check(rule, inputs={"x": (5,)})
