"""exp, log, sin/cos, tanh, cosh and sigmoid as loops that LLVM vectorises, for the numba engine.

Why they exist: LLVM does not vectorise calls into libm, so a numba loop over ``math.sin`` runs
one element at a time (sin and cos together cost ~14 ns per element on an AVX2 machine, and numba's
llvmlite wheels have no SVML). Here are the classic algorithms in branch-free form: Cody-Waite
range reduction, a Taylor polynomial on the reduced interval (fdlibm's for log), and the power of
two built from integer arithmetic on the bits. LLVM turns each loop into 4-wide AVX2 code with
FMA: ~2 ns per element for exp and ~3.3 ns for sin and cos together.

Lanes the reduced algorithm does not cover (overflow and underflow ranges, subnormals, zeros,
negative logs, inf, NaN, and |x| > 1e5 for sin/cos) are recomputed by libm in a second pass, so
special values are numpy's exactly; elsewhere the results are within 2 ulp of the correctly
rounded value (tests/test_batch_vecmath.py measures them against mpmath).

Every loop a primitive names as its ``numba`` form is ``f(x, o, n, w, wi)``: it reads ``x[:n]`` and
writes ``o[:n]``; ``o`` may be ``x`` (the program reuses registers), and either may be float32 (the
arithmetic is float64). ``w`` is float64 scratch of at least 3 rows and ``wi`` its int64 view.
``sincos`` is the engine's own fused pair: ``sincos(x, so, co, n, w)``.

numba caches the engine's kernel on disk; its fingerprint covers this file (see numba_engine), so an
edit here recompiles it once.
"""
from __future__ import annotations

import math

import numba
import numpy as np

# fastmath "contract" only: LLVM may fuse a*b + c into one FMA, which rounds once instead of twice.
# No reassociation, no finite-math assumptions: the special values are exact by the second pass.
# error_model="numpy": no ZeroDivisionError check per division, which would also stop vectorisation.
_JIT = dict(boundscheck=False, fastmath={"contract"}, error_model="numpy")

SHIFT = 6755399441055744.0  # 1.5 * 2**52: x + SHIFT rounds x to an integer held in the low bits
SHIFT_BITS = int(np.array([SHIFT]).view(np.int64)[0])
TWO52 = 4503599627370496.0
TWO52_BITS = int(np.array([TWO52]).view(np.int64)[0])
ONE_BITS = int(np.array([1.0]).view(np.int64)[0])
MANTISSA = (1 << 52) - 1

LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01  # 32 significant bits: k * LN2_HI is exact for |k| < 2**21
LN2_LO = 1.90821492927058770002e-10
EXP_MAX = 708.0  # exp(+-708) is normal; beyond, libm (overflow to inf, gradual underflow)

# Taylor coefficients of exp: on |r| <= ln2/2 the first omitted term is below 0.05 ulp
E2, E3, E4, E5, E6, E7, E8, E9, E10, E11, E12, E13 = (1.0 / math.factorial(k) for k in range(2, 14))

TWO_OVER_PI = 0.63661977236758134308
# pi/2 in four parts (fdlibm's pio2_1, pio2_2, pio2_3, pio2_3t): the first three have 33 bits, so
# k * part is exact and each subtraction cancels exactly; 152 bits of pi/2 in all
PIO2_1 = 1.57079632673412561417e+00
PIO2_2 = 6.07710050630396597660e-11
PIO2_3 = 2.02226624871116645580e-21
PIO2_4 = 8.47842766036889956997e-32
TRIG_MAX = 1e5  # k < 2**17: all the products above are exact

# fdlibm's k_sin.c and k_cos.c minimax polynomials on |r| <= pi/4
S1 = -1.66666666666666324348e-01
S2 = 8.33333333332248946124e-03
S3 = -1.98412698298579493134e-04
S4 = 2.75573137070700676789e-06
S5 = -2.50507602534068634195e-08
S6 = 1.58969099521155010221e-10
C1 = 4.16666666666666019037e-02
C2 = -1.38888888888741095749e-03
C3 = 2.48015872894767294178e-05
C4 = -2.75573143513906633035e-07
C5 = 2.08757232129817482790e-09
C6 = -1.13596475577881948265e-11

# fdlibm's e_log.c: log(1+f) = f - hfsq + s*(hfsq + R(s*s)), s = f/(2+f), error below 1 ulp
LG1 = 6.666666666666735130e-01
LG2 = 3.999999999940941908e-01
LG3 = 2.857142874366239149e-01
LG4 = 2.222219843214978396e-01
LG5 = 1.818357216161805012e-01
LG6 = 1.531383769920937332e-01
LG7 = 1.479819860511658591e-01
SQRT2 = 1.4142135623730951
MIN_NORMAL = 2.2250738585072014e-308
MAX_FINITE = 1.7976931348623157e308


@numba.njit(inline="always", **_JIT)
def _expm1_reduced(r):
    """exp(r) - 1 for |r| <= ln2/2 (no constant term, so no cancellation near 0)."""
    return r * (1.0 + r * (0.5 + r * (E3 + r * (E4 + r * (E5 + r * (E6 + r * (E7 + r * (
        E8 + r * (E9 + r * (E10 + r * (E11 + r * (E12 + r * E13))))))))))))


@numba.njit(**_JIT)
def _exp_parts(v, p, s, si, n, minus_one):
    """exp(v) - minus_one = p * s (minus_one 0 or 1) with s = 2**k, for |v| <= 708 (clamped).

    Returns how many lanes are out of that range (or NaN): the caller recomputes those with libm.
    With ``minus_one`` p holds expm1(r) and the caller forms expm1(v) = (s - 1) + s * p.
    """
    bad = 0
    for i in range(n):
        a = v[i]
        bad += 0 if abs(a) < EXP_MAX else 1
        a = a if a < EXP_MAX else EXP_MAX
        a = a if a > -EXP_MAX else -EXP_MAX  # NaN ends here too
        kd = a * LOG2E + SHIFT
        k = kd - SHIFT
        r = (a - k * LN2_HI) - k * LN2_LO
        p[i] = (1.0 - minus_one) + _expm1_reduced(r)
        s[i] = kd
    # the bits of SHIFT + k, as ``kd`` left them, into the bits of 2.0**k
    for i in range(n):
        si[i] = (si[i] - SHIFT_BITS + 1023) << 52
    return bad


@numba.njit(**_JIT)
def exp(x, o, n, w, wi):
    p, s = w[0], w[1]
    if _exp_parts(x, p, s, wi[1], n, 0.0):
        for i in range(n):
            if not (abs(x[i]) < EXP_MAX):
                p[i] = math.exp(x[i])
                s[i] = 1.0
    for i in range(n):
        o[i] = p[i] * s[i]


@numba.njit(**_JIT)
def cosh(x, o, n, w, wi):
    a, p, s = w[2], w[0], w[1]
    for i in range(n):
        a[i] = abs(x[i])
    bad = _exp_parts(a, p, s, wi[1], n, 0.0)
    for i in range(n):
        e = p[i] * s[i]
        a[i] = 0.5 * e + 0.5 / e
    if bad:
        for i in range(n):
            if not (abs(x[i]) < EXP_MAX):
                a[i] = math.cosh(x[i])
    for i in range(n):
        o[i] = a[i]


@numba.njit(**_JIT)
def sigmoid(x, o, n, w, wi):
    """numpy-stable logistic: 1/(1+z) for x >= 0, z/(1+z) below, z = exp(-|x|)."""
    a, p, s = w[2], w[0], w[1]
    for i in range(n):
        a[i] = -abs(x[i])
    bad = _exp_parts(a, p, s, wi[1], n, 0.0)
    for i in range(n):
        z = p[i] * s[i]
        a[i] = (1.0 if x[i] >= 0 else z) / (1.0 + z)
    if bad:  # subnormal results, and NaN
        for i in range(n):
            if not (abs(x[i]) < EXP_MAX):
                z = math.exp(-abs(x[i]))
                a[i] = 1.0 / (1.0 + z) if x[i] >= 0 else z / (1.0 + z)
    for i in range(n):
        o[i] = a[i]


@numba.njit(**_JIT)
def tanh(x, o, n, w, wi):
    """sign(x) * -t/(t+2) with t = expm1(-2|x|), as fdlibm: accurate from tiny x to saturation."""
    a, p, s = w[2], w[0], w[1]
    for i in range(n):
        v = -2.0 * abs(x[i])
        a[i] = v if v > -100.0 else -100.0  # tanh is +-1 to the last bit long before; NaN too
    _exp_parts(a, p, s, wi[1], n, 1.0)
    bad = 0
    for i in range(n):
        c = s[i]
        t = (c - 1.0) + c * p[i]  # 2**k * (1 + p) - 1 with k <= 0: both terms <= 0
        a[i] = math.copysign(-t / (t + 2.0), x[i])
        bad += 0 if x[i] == x[i] else 1
    if bad:
        for i in range(n):
            if x[i] != x[i]:
                a[i] = x[i]
    for i in range(n):
        o[i] = a[i]


@numba.njit(**_JIT)
def _sincos_parts(x, sn, cs, n):
    bad = 0
    for i in range(n):
        v = x[i]
        bad += 0 if abs(v) <= TRIG_MAX else 1
        v = v if abs(v) <= TRIG_MAX else 0.0  # NaN and inf too; fixed below
        kd = v * TWO_OVER_PI + SHIFT
        k = kd - SHIFT
        r = (((v - k * PIO2_1) - k * PIO2_2) - k * PIO2_3) - k * PIO2_4
        z = r * r
        sk = r + r * z * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)))))
        ck = 1.0 - (0.5 * z - z * z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6))))))
        q = k - 4.0 * math.floor(k * 0.25)  # the quadrant, 0..3
        odd = (q == 1.0) | (q == 3.0)
        a = ck if odd else sk
        b = sk if odd else ck
        a = -a if q >= 2.0 else a
        sn[i] = a if v != 0.0 else v  # sin(-0.0) is -0.0; the polynomial would give +0.0
        cs[i] = -b if (q == 1.0) | (q == 2.0) else b
    if bad:
        for i in range(n):
            if not (abs(x[i]) <= TRIG_MAX):
                sn[i] = math.sin(x[i])
                cs[i] = math.cos(x[i])


@numba.njit(**_JIT)
def sincos(x, so, co, n, w):
    _sincos_parts(x, w[0], w[1], n)
    sn, cs = w[0], w[1]
    for i in range(n):
        so[i] = sn[i]
        co[i] = cs[i]


@numba.njit(**_JIT)
def sin(x, o, n, w, wi):
    _sincos_parts(x, w[0], w[1], n)
    sn = w[0]
    for i in range(n):
        o[i] = sn[i]


@numba.njit(**_JIT)
def cos(x, o, n, w, wi):
    _sincos_parts(x, w[0], w[1], n)
    cs = w[1]
    for i in range(n):
        o[i] = cs[i]


@numba.njit(**_JIT)
def log(x, o, n, w, wi):
    """fdlibm's log for positive normal x; libm (and numpy's rules: -inf at 0, NaN below) elsewhere."""
    m, e = w[0], w[1]
    mi, ei = wi[0], wi[1]
    bad = 0
    for i in range(n):
        v = x[i]
        m[i] = v
        bad += 0 if (v >= MIN_NORMAL) & (v <= MAX_FINITE) else 1
    for i in range(n):
        b = mi[i]
        ei[i] = TWO52_BITS + (b >> 52)  # 2**52 + the biased exponent
        mi[i] = (b & MANTISSA) | ONE_BITS  # the mantissa, in [1, 2)
    for i in range(n):
        f = m[i]
        k = e[i] - (TWO52 + 1023.0)
        big = f > SQRT2
        f = f * 0.5 if big else f
        k = k + 1.0 if big else k
        f = f - 1.0
        hfsq = 0.5 * f * f
        s = f / (2.0 + f)
        z = s * s
        z2 = z * z
        t1 = z2 * (LG2 + z2 * (LG4 + z2 * LG6))
        t2 = z * (LG1 + z2 * (LG3 + z2 * (LG5 + z2 * LG7)))
        R = t2 + t1
        m[i] = k * LN2_HI - ((hfsq - (s * (hfsq + R) + k * LN2_LO)) - f)
    if bad:
        for i in range(n):
            v = x[i]
            if not ((v >= MIN_NORMAL) & (v <= MAX_FINITE)):
                m[i] = math.log(v) if v > 0 else (-np.inf if v == 0 else np.nan)
    for i in range(n):
        o[i] = m[i]
