"""scipy.special and scipy.stats: the gradient tests of HIPS autograd's test_scipy as autodiff-only
checks, with this file's own values. Parameters that must be positive (scales, shapes, orders of the
gamma function) are drawn inside their domains; covariances are built positive definite inside the
function."""
import numpy as np
import scipy.signal
import scipy.special as special
import scipy.stats as stats

import gradcli
from suite_helpers import named, parts, spd


def case(name, fn, **spec):
    gradcli.check(**spec)(named(fn, name))


def plain(f):
    return lambda x: f(x)


def complex_parts(f):
    return lambda x, y: parts(f(x + 0.1j * y))


# --- special functions of one argument ---------------------------------------------------------------
#: name -> (function, domain)
UNARY = {
    "expit": (special.expit, None), "logit": (special.logit, (0.05, 0.95)), "log_expit": (special.log_expit, None),
    "erf": (special.erf, (-3.0, 3.0)), "erfc": (special.erfc, (-3.0, 3.0)),
    "erfinv": (special.erfinv, (-0.95, 0.95)), "erfcinv": (special.erfcinv, (0.05, 1.95)),
    "ndtr": (special.ndtr, (-3.0, 3.0)), "ndtri": (special.ndtri, (0.05, 0.95)),
    "log_ndtr": (special.log_ndtr, (-6.0, 3.0)), "psi": (special.psi, (0.3, 2.0)),
    "digamma": (special.digamma, (0.3, 2.0)), "gamma": (special.gamma, (0.3, 2.0)),
    "gammaln": (special.gammaln, (0.3, 2.0)), "gammaln_negative": (special.gammaln, (-0.9, -0.1)),
    "special_expm1": (special.expm1, None), "special_log1p": (special.log1p, (0.2, 2.0)),
    "rgamma": (special.rgamma, (0.3, 2.0)), "j0": (special.j0, (0.2, 20.0)), "j1": (special.j1, (0.2, 20.0)),
    "y0": (special.y0, (0.2, 20.0)), "y1": (special.y1, (0.2, 20.0)), "gammasgn": (special.gammasgn, (0.3, 2.0)),
}


for name, (f, domain) in UNARY.items():
    opts = {} if domain is None else {"domain": domain}
    case(f"{name}_matrix", plain(f), x=(3, 2), **opts)

for n in (0, 1, 2):
    case(f"polygamma_{n}", lambda x, n=n: special.polygamma(n, x), x=(4,), domain=(1.3, 3.0))
case("polygamma_orders_array", lambda x: special.polygamma(np.array([0, 1, 2, 3]), x), x=(4,), domain=(1.3, 3.0))
case("jn", lambda x: special.jn(2, x), x=(4,), domain=(1.3, 5.0))
case("yn", lambda x: special.yn(2, x), x=(4,), domain=(1.3, 5.0))
case("multigammaln", lambda a: special.multigammaln(a, 2), a=(2, 3), domain=(4.0, 5.0))


case("complex_erf", complex_parts(special.erf), x=(3, 2), y=(3, 2), domain={"x": (-3.0, 3.0)})
case("complex_erfc", complex_parts(special.erfc), x=(3, 2), y=(3, 2), domain={"x": (-3.0, 3.0)})


# --- special functions of two arguments --------------------------------------------------------------
case("xlogy", lambda x, y: special.xlogy(x, y), x=(3, 2), y=(3, 2), domain={"y": "positive"})
case("xlogy_broadcast", lambda x, y: special.xlogy(x, y), x=(3, 1), y=(2,), domain={"y": "positive"})
case("xlogy_zero_x", lambda x, y: special.xlogy(x * np.array([0.0, 1.0, 0.0]), y), x=(3,), y=(3,),
     domain={"y": "positive"})
case("xlog1py", lambda x, y: special.xlog1py(x, y), x=(3, 2), y=(3, 2), domain={"y": (-0.5, 2.0)})
case("betaln", lambda a, b: special.betaln(a, b), a=(3, 2), b=(3, 2), domain="positive")
case("betaln_broadcast", lambda a, b: special.betaln(a, b), a=(3, 1), b=(1, 2), domain="positive")
case("beta", lambda a, b: special.beta(a, b), a=(3,), b=(3,), domain=(0.5, 3.0))


# --- logsumexp, softmax ------------------------------------------------------------------------------
for label, shape, axis, keepdims in (("scalar", 1.1, None, False), ("vector", (4,), 0, True),
                                     ("matrix", (3, 4), None, False), ("matrix", (3, 4), 0, True),
                                     ("matrix", (3, 4), 1, False), ("3d", (2, 3, 2), 1, True),
                                     ("3d", (2, 3, 2), None, True), ("row", (1, 5), 0, False),
                                     ("row", (1, 5), 1, True)):
    name = f"logsumexp_{label}_axis{axis}" + ("_keepdims" if keepdims else "")
    case(name, lambda x, axis=axis, keepdims=keepdims: special.logsumexp(x, axis=axis, keepdims=keepdims), x=shape)
for label, shape in (("vector", (4,)), ("matrix", (3, 4)), ("3d", (2, 3, 2))):
    weights = np.exp(np.linspace(-1.0, 1.0, int(np.prod(shape)))).reshape(shape)
    for axis in (None, 0):
        case(f"logsumexp_b_{label}_axis{axis}", lambda x, b=weights, axis=axis: special.logsumexp(x, axis=axis, b=b),
             x=shape)
case("logsumexp_b_traced", lambda x, b: special.logsumexp(x, b=b, axis=1), x=(3, 4), b=(3, 4), domain={"b": "positive"})
case("logsumexp_return_sign", lambda x: special.logsumexp(x, axis=0, return_sign=True)[0], x=(3, 4))
case("softmax", lambda x: special.softmax(x), x=(5,))
case("softmax_axis", lambda x: special.softmax(x, axis=1), x=(3, 4))
case("log_softmax_axis", lambda x: special.log_softmax(x, axis=0), x=(3, 4))


# --- scipy.stats.norm ----------------------------------------------------------------------------------
# each case looks the method up when it is called, as user code does: a bound method taken at import
# time and kept (a default argument) is one the tracer cannot reach, which the contract says
for kind in ("pdf", "cdf", "logpdf", "logcdf"):
    case(f"norm_{kind}", lambda x, loc, scale, k=kind: getattr(stats.norm, k)(x, loc, scale), x=(4,), loc=(4,),
         scale=(4,), domain={"scale": (1.1, 3.0)})
    case(f"norm_{kind}_broadcast", lambda x, loc, scale, k=kind: getattr(stats.norm, k)(x, loc, scale), x=(4, 3),
         loc=(1, 3), scale=(4, 1), domain={"scale": (1.1, 3.0)})
    case(f"norm_{kind}_keywords", lambda x, loc, k=kind: getattr(stats.norm, k)(x, loc=loc, scale=2.0), x=(4,), loc=())
    case(f"norm_{kind}_frozen", lambda x, loc, k=kind: getattr(stats.norm(loc, 1.5), k)(x), x=(3,), loc=(3,))
    case(f"norm_{kind}_standard", lambda x, k=kind: getattr(stats.norm, k)(x), x=(2, 3))
    # as in autograd's suite: the densities in every argument, the distribution functions in x and loc
    case(f"t_{kind}", lambda x, df, loc, scale, k=kind: getattr(stats.t, k)(x, df, loc, scale), x=(4,), df=(4,),
         loc=(4,), scale=(4,), domain={"df": (2.1, 5.0), "scale": (1.1, 3.0)},
         **({"wrt": ("x", "loc")} if kind.endswith("cdf") else {}))
    case(f"t_{kind}_broadcast", lambda x, df, loc, scale, k=kind: getattr(stats.t, k)(x, df, loc, scale), x=(4, 3),
         df=(1, 3), loc=(4, 3), scale=(4, 1), domain={"df": (2.1, 5.0), "scale": (1.1, 3.0)},
         **({"wrt": ("x", "loc")} if kind.endswith("cdf") else {}))


# --- scipy.stats.multivariate_normal -----------------------------------------------------------------
MVN = stats.multivariate_normal
for kind in ("logpdf", "pdf"):
    case(f"mvn_{kind}", lambda x, mean, c, k=kind: getattr(MVN, k)(x, mean, spd(c)), x=(4,), mean=(4,), c=(4, 4))
    case(f"mvn_{kind}_broadcast", lambda x, mean, c, k=kind: getattr(MVN, k)(x, mean, spd(c)), x=(5, 4), mean=(4,),
         c=(4, 4))
    case(f"mvn_{kind}_x_only", lambda x, k=kind: getattr(MVN, k)(x, np.zeros(3), 2.0 * np.eye(3)), x=(3,))
case("mvn_entropy", lambda mean, c: stats.multivariate_normal.entropy(mean, spd(c)), mean=(4,), c=(4, 4))


# --- scipy.stats.dirichlet, scipy.signal.convolve and np.convolve ------------------------------------
def normalized(x):
    # on the simplex whatever x is, so that the steps of finite differences stay there
    return x / np.sum(x)


case("dirichlet_pdf_x", lambda x: stats.dirichlet.pdf(normalized(x), np.array([1.5, 2.0, 1.3, 1.8])), x=(4,),
     domain=(0.5, 1.5))
case("dirichlet_logpdf_alpha", lambda a: stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.1, 0.4]), a), a=(4,),
     domain=(1.2, 2.2))
case("convolve_full", lambda a, b: scipy.signal.convolve(a, b, mode="full"), a=(5,), b=(3,))
case("np_convolve", lambda a, b: np.convolve(a, b, mode="valid"), a=(5,), b=(3,))
