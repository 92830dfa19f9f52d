"""Random expressions of the language, for property tests (hypothesis)."""
from hypothesis import strategies as st

UNARY = ["sin", "cos", "tan", "atan", "sinh", "cosh", "tanh", "asinh", "exp", "expm1", "log", "log1p",
         "sqrt", "cbrt", "abs", "erf", "erfc", "sigmoid", "softplus", "relu", "asin", "acos", "atanh",
         "acosh", "log2", "log10", "sign"]
BINARY_FN = ["atan2", "hypot", "pow", "min", "max"]
OPS = ["+", "-", "*", "/", "**"]
leaves = st.sampled_from(["x", "y", "z", "2", "0.5", "3", "pi", "1e-3"])


def _extend(children):
    return st.one_of(
        st.tuples(st.sampled_from(UNARY), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(BINARY_FN), children, children).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
        st.tuples(children, st.sampled_from(OPS), children).map(lambda t: f"({t[0]}){t[1]}({t[2]})"),
        children.map(lambda c: f"-({c})"),
    )


expressions = st.recursive(leaves, _extend, max_leaves=8)
coords = st.floats(-2.5, 2.5, allow_nan=False).filter(lambda v: abs(v) > 1e-3)


