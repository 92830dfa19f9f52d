"""BUG: a missing transpose. A square linear layer y = x @ W whose vjp returns g @ W instead of g @ W.T.

Because W is square the shapes still match, so nothing crashes: only the values of dx are wrong.
gradcli names the input (x) and the elements that disagree.
"""
import gradcli


@gradcli.check(x=(3, 4), W=(4, 4))
def linear(x, W):
    return x @ W


@linear.vjp
def linear_vjp(g, x, W):
    dx = g @ W  # should be g @ W.T
    dW = x.T @ g
    return dx, dW
