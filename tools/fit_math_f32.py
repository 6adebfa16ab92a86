#!/usr/bin/env python3
"""fit_math_f32.py — computes the polynomial coefficients of the math
layer's f32 algorithms (codegen/math.c, "f32 algorithms").

Each fit is a near-minimax polynomial found by Lawson's algorithm:
weighted least squares on 6000 Chebyshev-spaced points, the weights
multiplied by the current error after each solve (300 rounds), which
converges to the equioscillating (minimax) solution.  The solve runs in
double on a basis scaled to [-1, 1]; the target values come from
Python's double math module (erf, erfc, tanh, log1p, expm1: correct to
about 1 double ulp, 2^-29 of an f32 ulp).  The coefficients are then
rounded to f32 and the error is re-measured with the rounded ones.

Prints, per fit, the C initializer and the maximum error (relative or
absolute, as the fit is weighted) before and after rounding.
Needs: Python 3, numpy.  Used by: whoever changes codegen/math.c.
Run: python3 tools/fit_math_f32.py
"""
import math

import numpy as np


def lawson(f, lo, hi, deg, weight, center=0.0, fixed=(), n=6000, rounds=300):
    """Coefficients c[0..deg] of sum c_i (t - center)^i ~ f(t) on [lo, hi],
    minimizing max |weight(t) (p(t) - f(t))|, with c[0..len(fixed)-1]
    held at the given values."""
    k = np.arange(n)
    t = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n)
    t = np.concatenate([t, [lo, hi]])
    y = np.array([f(v) for v in t])
    wt = np.array([weight(v) for v in t])
    u = t - center
    scale = max(abs(lo - center), abs(hi - center))
    a = np.stack([(u / scale) ** i for i in range(deg + 1)], axis=1)
    nf = len(fixed)
    cf = np.array(fixed, dtype=np.float64) * scale ** np.arange(nf)
    rhs = y - (a[:, :nf] @ cf if nf else 0)
    w = np.ones_like(y) / len(y)
    for _ in range(rounds):
        sw = np.sqrt(w) * wt
        c, *_ = np.linalg.lstsq(a[:, nf:] * sw[:, None], rhs * sw, rcond=None)
        e = np.abs(a[:, nf:] @ c - rhs) * wt
        w = w * (e + 1e-300)
        w /= w.sum()
    c = np.concatenate([cf, c]) / scale ** np.arange(deg + 1)
    err = np.max(np.abs(np.polyval(c[::-1], u) - y) * wt)
    return c, err


def report(name, f, lo, hi, deg, weight, center=0.0):
    """Fits, then rounds the coefficients to f32 one at a time from the
    lowest, refitting the higher ones after each rounding."""
    c, err = lawson(f, lo, hi, deg, weight, center)
    fixed = []
    for i in range(deg + 1):
        ci, err32 = lawson(f, lo, hi, deg, weight, center, fixed)
        fixed.append(float(np.float32(ci[i])))
    _, err32 = lawson(f, lo, hi, deg, weight, center, fixed)
    print(f"/* {name}: degree {deg} on [{lo:.6g}, {hi:.6g}]"
          + (f" in (t - {center:.6g})" if center else "")
          + f", weighted error {err:.3g} (2^{math.log2(err):.1f}),"
          f" f32 coefficients {err32:.3g} (2^{math.log2(err32):.1f}) */")
    print("{" + ", ".join(float(v).hex() for v in fixed) + "}")
    return fixed


def tanh_p(z):
    # (tanh(x) - x) / x^3 with x = sqrt(z); its series near 0
    if z < 1e-4:
        return -1 / 3 + 2 / 15 * z - 17 / 315 * z * z
    x = math.sqrt(z)
    return (math.tanh(x) - x) / (x * z)


def erf_q(z):
    # erf(x) / x with x = sqrt(z)
    if z == 0:
        return 2 / math.sqrt(math.pi)
    x = math.sqrt(z)
    return math.erf(x) / x


def erfc_s(x):
    # log(erfc(x) e^(x^2))
    return math.log(math.erfc(x)) + x * x


def log_l(f):
    # (log1p(f) - f + f^2/2) / f^3; its series near 0
    if abs(f) < 1e-3:
        return 1 / 3 - f / 4 + f * f / 5 - f ** 3 / 6
    return (math.log1p(f) - f + f * f / 2) / f ** 3


def odd_p(f, series):
    """(f(x) - x) / x^3 in z = x^2 for an odd f, its series near 0."""
    def g(z):
        if z < 1e-6:
            return series(z)
        x = math.sqrt(z)
        return (f(x) - x) / (x * z)
    return g


def cos_c(z):
    # (cos(x) - 1 + z/2) / z^2 with x = sqrt(z); its series near 0
    if z < 1e-6:
        return 1 / 24 - z / 720 + z * z / 40320
    return (math.cos(math.sqrt(z)) - 1 + z / 2) / (z * z)


if __name__ == "__main__":
    # Each weight turns the polynomial's error into the error relative to
    # the function's value, where the polynomial enters the result (tanh:
    # plus 0.02, so that the fit stays bounded near 0, where the term
    # a^3 P vanishes).  codegen/math.c holds these coefficients.
    TANH_T = 0.625
    ERF_T = 0.921875
    report("tanh: (tanh a - a) / a^3 in z = a^2", tanh_p, 0.0, TANH_T ** 2, 5,
           lambda z: (z + 0.02) * (math.sqrt(z) / math.tanh(math.sqrt(z)) if z else 1.0))
    report("erf: erf(a) / a - 1 in z = a^2", lambda z: erf_q(z) - 1, 0.0, ERF_T ** 2, 6,
           lambda z: math.sqrt(z) / math.erf(math.sqrt(z)) if z else math.sqrt(math.pi) / 2)
    report("erfc: s(a) = log(erfc(a) e^(a^2))", erfc_s, ERF_T, 3.921875, 7,
           lambda x: math.erfc(x) / math.erf(x), center=2.421875)
    report("log: (log1p f - f + f^2/2) / f^3", log_l, math.sqrt(0.5) - 1, math.sqrt(2) - 1, 8,
           lambda f: abs(f ** 3 / math.log1p(f)) if f else 0.0)
    # sin, cos, tan on the reduced argument |r| <= 0.786 (pi/4 and the
    # slack of k = round(x 2/pi) computed in f32); atan on [0, 1]; asin on
    # [0, 1/2] (evaluated in f64 for the f32 asin and acos).
    TRIG_R = 0.786
    odd_w = lambda f: (lambda z: z ** 1.5 / f(math.sqrt(z)) if z else 0.0)
    report("sin: (sin r - r) / r^3 in z = r^2",
           odd_p(math.sin, lambda z: -1 / 6 + z / 120 - z * z / 5040), 0.0, TRIG_R ** 2, 3,
           odd_w(math.sin))
    report("cos: (cos r - 1 + z/2) / z^2", cos_c, 0.0, TRIG_R ** 2, 3,
           lambda z: z * z / math.cos(math.sqrt(z)))
    report("tan: (tan r - r) / r^3 in z = r^2",
           odd_p(math.tan, lambda z: 1 / 3 + 2 * z / 15 + 17 * z * z / 315), 0.0, TRIG_R ** 2, 6,
           odd_w(math.tan))
    report("atan: (atan t - t) / t^3 in z = t^2",
           odd_p(math.atan, lambda z: -1 / 3 + z / 5 - z * z / 7), 0.0, 1.0, 8, odd_w(math.atan))
    report("asin: (asin t - t) / t^3 in z = t^2",
           odd_p(math.asin, lambda z: 1 / 6 + 3 * z / 40 + 15 * z * z / 336), 0.0, 0.25, 5,
           odd_w(math.asin))
