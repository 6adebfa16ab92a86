/* math.c — the math layer (math.h): each function is built from IEEE
 * operations only, so its IR is the same on every target and vectorizes
 * as a whole.  f64 functions are computed in f64.  exp, exp2, expm1,
 * log, log2, log10, log1p, tanh, sigmoid, erf, sin, cos, tan, atan,
 * atan2, sinh and cosh on f32 have their own f32 algorithms (the
 * sections "f32 algorithms" onwards, 0.7-2.4 ulp); pow, asin, acos,
 * asinh, acosh and atanh on f32 are computed in f64 with polynomials
 * sized for an f32 result (the argument extended, the result rounded
 * once: about 0.5 ulp).  On the CPU the long argument reduction of f32
 * sin, cos and tan is a function of its own with vector variants, so
 * that vectorized loops run it only for vectors that need it (the
 * section "the long reduction out of line").
 *
 * Conventions: a V is an f64 scalar or vector (M.t), or an i64 of the
 * same shape (M.it); polynomials are Horner chains of llvm.fmuladd (fused
 * where the target has an FMA, two roundings where not: no algorithm
 * below needs the fusion for its bound, and a plain llvm.fma would be a
 * libm call on targets without an FMA unit).  Exact products use
 * Dekker's splitting instead of fma for the same reason.  The f64
 * coefficients are Taylor coefficients (1/n!, 1/(2n+1), ...), computed in
 * long double here; the f32 ones are fits that tools/fit_math_f32.py
 * computes; no constant table is copied from anywhere.
 * Needs: math.h, llvm-c. */
#include "math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/diag.h"
#include "llvm_attr.h"

typedef LLVMValueRef V;

typedef struct M {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef t, it; /* f64 and i64 (f32 and i32 for the f32 algorithms),
                        scalars or vectors of `lanes` */
  LLVMTypeRef ef, ei; /* their element types */
  unsigned lanes;     /* 0 for scalars */
  const CgMath *cm;   /* the caller's options */
} M;

/* ---- constants and small helpers ----------------------------------------- */

#define LN2_HI 0x1.62e42feep-1 /* 32 bits: e * LN2_HI is exact for |e| < 2^21 */
#define LN2_LO 0x1.a39ef35793c76p-33
#define LN2 0x1.62e42fefa39efp-1
#define INV_LN2 0x1.71547652b82fep+0
#define INV_LN10 0x1.bcb7b1526e50ep-2
#define LOG10_2_HI 0x1.34413508p-2
#define LOG10_2_LO 0x1.f79fef311f12bp-34
#define TWO_OVER_PI 0x1.45f306dc9c883p-1
#define PIO2 0x1.921fb54442d18p+0
#define PIO2_LO 0x1.1a62633145c07p-54
#define PIO4 0x1.921fb54442d18p-1
#define PIO4_LO 0x1.1a62633145c07p-55
#define TWO_OVER_SQRTPI 0x1.20dd750429b6dp+0
#define INV_SQRTPI 0x1.20dd750429b6dp-1
#define MAGIC 0x1.8p52 /* adding it rounds to an integer kept in the low bits */

static V splat(M *m, V c) {
  if (!m->lanes) return c;
  V v[64];
  for (unsigned i = 0; i < m->lanes; i++) v[i] = c;
  return LLVMConstVector(v, m->lanes);
}

/* A constant of the element type (f32 constants are given exactly). */
static V K(M *m, double v) { return splat(m, LLVMConstReal(m->ef, v)); }

static V KI(M *m, long long v) { return splat(m, LLVMConstInt(m->ei, (unsigned long long)v, 1)); }

static V add(M *m, V a, V b) { return LLVMBuildFAdd(m->b, a, b, ""); }
static V sub(M *m, V a, V b) { return LLVMBuildFSub(m->b, a, b, ""); }
static V mul(M *m, V a, V b) { return LLVMBuildFMul(m->b, a, b, ""); }
static V fdiv(M *m, V a, V b) { return LLVMBuildFDiv(m->b, a, b, ""); }
static V sel(M *m, V c, V a, V b) { return LLVMBuildSelect(m->b, c, a, b, ""); }
static V cmp(M *m, LLVMRealPredicate p, V a, V b) { return LLVMBuildFCmp(m->b, p, a, b, ""); }
static V lt(M *m, V a, double c) { return cmp(m, LLVMRealOLT, a, K(m, c)); }
static V gt(M *m, V a, double c) { return cmp(m, LLVMRealOGT, a, K(m, c)); }
static V eq(M *m, V a, double c) { return cmp(m, LLVMRealOEQ, a, K(m, c)); }
static V bits(M *m, V x) { return LLVMBuildBitCast(m->b, x, m->it, ""); }
static V from_bits(M *m, V i) { return LLVMBuildBitCast(m->b, i, m->t, ""); }

static V intr(M *m, const char *name, V *a, unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) ICE("unknown intrinsic %s", name);
  LLVMTypeRef t = LLVMTypeOf(a[0]);
  V f = LLVMGetIntrinsicDeclaration(m->mod, id, &t, 1);
  return LLVMBuildCall2(m->b, LLVMIntrinsicGetType(m->ctx, id, &t, 1), f, a, n, "");
}

static V fmadd(M *m, V a, V b, V c) {
  V v[3] = {a, b, c};
  return intr(m, "llvm.fmuladd", v, 3);
}
static V fabs_(M *m, V x) { return intr(m, "llvm.fabs", &x, 1); }
static V floor_(M *m, V x) { return intr(m, "llvm.floor", &x, 1); }
static V sqrt_(M *m, V x) { return intr(m, "llvm.sqrt", &x, 1); }
static V copysign_(M *m, V mag, V sgn) {
  V v[2] = {mag, sgn};
  return intr(m, "llvm.copysign", v, 2);
}
/* min(x, c) and max(x, c) that keep a NaN x. */
static V minc(M *m, V x, double c) { return sel(m, gt(m, x, c), K(m, c), x); }
static V maxc(M *m, V x, double c) { return sel(m, lt(m, x, c), K(m, c), x); }

/* Horner: c[0] + x (c[1] + x (... c[n-1])). */
static V poly(M *m, V x, const double *c, int n) {
  V p = K(m, c[n - 1]);
  for (int i = n - 2; i >= 0; i--) p = fmadd(m, p, x, K(m, c[i]));
  return p;
}

/* x == 0 -> x, keeping the sign of a zero that the formula would lose. */
static V keep_zero(M *m, V x, V r) { return sel(m, eq(m, x, 0), x, r); }

/* Dekker's exact product: a * b = *hi + *lo for |a|, |b| < 2^996. */
static void split(M *m, V a, V *h, V *l) {
  V c = mul(m, K(m, 134217729.0), a);
  *h = sub(m, c, sub(m, c, a));
  *l = sub(m, a, *h);
}
static void two_prod(M *m, V a, V b, V *hi, V *lo) {
  V ah, al, bh, bl;
  split(m, a, &ah, &al);
  split(m, b, &bh, &bl);
  *hi = mul(m, a, b);
  V e = sub(m, mul(m, ah, bh), *hi);
  e = add(m, e, mul(m, ah, bl));
  e = add(m, e, mul(m, al, bh));
  *lo = add(m, e, mul(m, al, bl));
}
/* a + b = *s + *e exactly, for |a| >= |b|. */
static void fast_two_sum(M *m, V a, V b, V *s, V *e) {
  *s = add(m, a, b);
  *e = sub(m, b, sub(m, *s, a));
}
static void two_sum(M *m, V a, V b, V *s, V *e) {
  *s = add(m, a, b);
  V bb = sub(m, *s, a);
  *e = add(m, sub(m, a, sub(m, *s, bb)), sub(m, b, bb));
}

/* ---- exp family ------------------------------------------------------------ */

/* 2^e for an i64 e in the normal range -1022..1023. */
static V pow2i(M *m, V e) {
  V b = LLVMBuildShl(m->b, LLVMBuildAdd(m->b, e, KI(m, 1023), ""), KI(m, 52), "");
  return from_bits(m, b);
}

/* p * 2^k for |k| <= 1100: two normal factors, the first product exact,
 * so overflow gives inf and a subnormal result is rounded once. */
static V scale(M *m, V p, V k) {
  V k1 = LLVMBuildAShr(m->b, k, KI(m, 1), ""), k2 = LLVMBuildSub(m->b, k, k1, "");
  return mul(m, mul(m, p, pow2i(m, k1)), pow2i(m, k2));
}

/* k = round(x) for |x| < 2^51 as a double and as an i64 (from the bits
 * of x + MAGIC, so a NaN gives a harmless garbage k, never poison). */
static V round_k(M *m, V x, V *ki) {
  V t = add(m, x, K(m, MAGIC));
  *ki = LLVMBuildSub(m->b, bits(m, t), KI(m, 0x4338000000000000LL), "");
  return sub(m, t, K(m, MAGIC));
}

/* e^r - 1 - r for |r| <= 0.35: r^2 (1/2! + r/3! + ... r^11/13!); the
 * first omitted term is below 2^-60 relative. */
static V expm1_tail(M *m, V r) {
  double c[12];
  long double f = 1;
  for (int n = 2; n <= 13; n++) f *= n, c[n - 2] = (double)(1.0L / f);
  return mul(m, mul(m, r, r), poly(m, r, c, 12));
}

/* x = k ln2 + r (Cody–Waite: k LN2_HI is exact and cancels exactly),
 * plus lo, a correction to x below its ulp (pow). */
static V exp_reduce(M *m, V x, V lo, V *k) {
  V kf = round_k(m, mul(m, x, K(m, INV_LN2)), k);
  V r = fmadd(m, kf, K(m, -LN2_HI), x);
  r = fmadd(m, kf, K(m, -LN2_LO), r);
  return lo ? add(m, r, lo) : r;
}

/* e^(x + lo): x clamped to [-750, 711] first (beyond, the result is 0 or
 * inf anyway, and a NaN passes through the selects). */
static V exp64(M *m, V x, V lo) {
  V k, xc = minc(m, maxc(m, x, -750), 711);
  V r = exp_reduce(m, xc, lo, &k);
  return scale(m, add(m, K(m, 1), add(m, r, expm1_tail(m, r))), k);
}

static V exp2_64(M *m, V x) {
  V k, xc = minc(m, maxc(m, x, -1080), 1030);
  V kf = round_k(m, xc, &k);
  V r = mul(m, sub(m, xc, kf), K(m, LN2)); /* xc - kf is exact */
  return scale(m, add(m, K(m, 1), add(m, r, expm1_tail(m, r))), k);
}

/* expm1: for k <= 56, 2^k em + (2^k - 1), where both 2^k em and 2^k - 1
 * are exact, so the one rounding is the sum's; above, (em + 1) 2^k - 1. */
static V expm1_64(M *m, V x) {
  V k, xc = minc(m, maxc(m, x, -60), 711);
  V r = exp_reduce(m, xc, NULL, &k);
  V em = add(m, r, expm1_tail(m, r));
  V big = LLVMBuildICmp(m->b, LLVMIntSGT, k, KI(m, 56), "");
  V s = pow2i(m, LLVMBuildSelect(m->b, big, KI(m, 0), k, ""));
  V small = fmadd(m, s, em, sub(m, s, K(m, 1)));
  V large = sub(m, scale(m, add(m, em, K(m, 1)), k), K(m, 1));
  return keep_zero(m, x, sel(m, big, large, small));
}

/* ---- log family ------------------------------------------------------------ */

/* a = 2^e * (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) for a > 0 finite
 * (subnormals scaled by 2^54 first); f is exact. */
static V log_split(M *m, V a, V *e) {
  V sub_ = lt(m, a, 0x1p-1022);
  V a2 = sel(m, sub_, mul(m, a, K(m, 0x1p54)), a);
  /* adding 1 - bits(sqrt(1/2)) carries into the exponent exactly when
   * the significand is >= sqrt(2)/2 * 2 */
  V ix = LLVMBuildAdd(m->b, bits(m, a2), KI(m, 0x3ff0000000000000LL - 0x3fe6a09e667f3bcdLL), "");
  V ei = LLVMBuildSub(m->b, LLVMBuildAShr(m->b, ix, KI(m, 52), ""), KI(m, 1023), "");
  ei = LLVMBuildSub(m->b, ei, LLVMBuildSelect(m->b, sub_, KI(m, 54), KI(m, 0), ""), "");
  *e = LLVMBuildSIToFP(m->b, ei, m->t, "");
  V mb = LLVMBuildAdd(m->b, LLVMBuildAnd(m->b, ix, KI(m, 0x000fffffffffffffLL), ""),
                      KI(m, 0x3fe6a09e667f3bcdLL), "");
  return sub(m, from_bits(m, mb), K(m, 1));
}

/* 2 atanh(s) - 2 s = s R with R = z (2/3 + z (2/5 + ... 2/21)), z = s^2,
 * |s| <= 0.1716: the first omitted term is below 2^-59 relative. */
static V log_R(M *m, V s) {
  double c[10];
  for (int n = 0; n < 10; n++) c[n] = (double)(2.0L / (2 * n + 3));
  V z = mul(m, s, s);
  return mul(m, z, poly(m, z, c, 10));
}

/* log(1 + f) = 2 atanh(s), s = f / (2 + f), written as
 * f - f^2/2 + s (f^2/2 + R): f is exact and dominates. */
static V log1pf_core(M *m, V f) {
  V s = fdiv(m, f, add(m, K(m, 2), f));
  V hfsq = mul(m, K(m, 0.5), mul(m, f, f));
  return add(m, f, sub(m, mul(m, s, add(m, hfsq, log_R(m, s))), hfsq));
}

/* The special values of log: 0 -> -inf, < 0 or NaN -> NaN, inf -> inf. */
static V log_special(M *m, V a, V r) {
  r = sel(m, eq(m, a, INFINITY), a, r);
  r = sel(m, eq(m, a, 0), K(m, -INFINITY), r);
  return sel(m, cmp(m, LLVMRealULT, a, K(m, 0)), K(m, NAN), r);
}

/* kind: 0 ln, 2 log2, 10 log10. */
static V log64(M *m, V a, int kind) {
  V e, f = log_split(m, a, &e), l = log1pf_core(m, f), r;
  if (kind == 2) r = fmadd(m, l, K(m, INV_LN2), e);
  else if (kind == 10)
    r = fmadd(m, e, K(m, LOG10_2_HI), fmadd(m, e, K(m, LOG10_2_LO), mul(m, l, K(m, INV_LN10))));
  else r = fmadd(m, e, K(m, LN2_HI), fmadd(m, e, K(m, LN2_LO), l));
  return log_special(m, a, r);
}

/* log1p(x) = log(u) + c / u with u = 1 + x rounded and c its rounding
 * error (two_sum), so tiny x gives x. */
static V log1p64(M *m, V x) {
  V u, c;
  two_sum(m, K(m, 1), x, &u, &c);
  c = sel(m, eq(m, u, INFINITY), K(m, 0), c);
  V r = add(m, log64(m, u, 0), fdiv(m, c, u));
  r = sel(m, eq(m, u, INFINITY), u, r);
  return keep_zero(m, x, log_special(m, u, r));
}

/* log(a) as hi + lo with about 2^-59 relative error, for pow: s also as
 * a double-double, and the sums exact. */
static V log_dd(M *m, V a, V *lo) {
  V e, f = log_split(m, a, &e);
  V d, dlo, ph, pl;
  fast_two_sum(m, K(m, 2), f, &d, &dlo);
  V s = fdiv(m, f, d);
  two_prod(m, s, d, &ph, &pl);
  V res = sub(m, sub(m, sub(m, f, ph), pl), mul(m, s, dlo));
  V slo = fdiv(m, res, d);
  V tail = fmadd(m, s, log_R(m, s), mul(m, K(m, 2), slo));
  V lh, ll, h, hl;
  fast_two_sum(m, mul(m, K(m, 2), s), tail, &lh, &ll);
  two_sum(m, mul(m, e, K(m, LN2_HI)), lh, &h, &hl);
  V l = add(m, add(m, hl, ll), mul(m, e, K(m, LN2_LO)));
  V hi;
  fast_two_sum(m, h, l, &hi, lo);
  return log_special(m, a, hi);
}

/* ---- pow --------------------------------------------------------------------- */

static V pow_special(M *m, V x, V y, V r);

/* C99's pow (PyTorch's std::pow): exp(y log|x|) in double-double, then
 * the sign and special cases of Annex F. */
static V pow64(M *m, V x, V y) {
  V a = fabs_(m, x), llo;
  V lhi = log_dd(m, a, &llo);
  V p, plo;
  two_prod(m, y, lhi, &p, &plo);
  plo = fmadd(m, y, llo, plo);
  /* a non-finite or huge product has no meaningful low part */
  plo = sel(m, lt(m, fabs_(m, p), 1000), plo, K(m, 0));
  return pow_special(m, x, y, exp64(m, p, plo));
}

/* pow's sign and special cases (C99 Annex F) around r = |x|^y. */
static V pow_special(M *m, V x, V y, V r) {
  V yint = cmp(m, LLVMRealOEQ, floor_(m, y), y);
  V hy = mul(m, y, K(m, 0.5));
  V yodd = LLVMBuildAnd(m->b, yint, cmp(m, LLVMRealUNE, floor_(m, hy), hy), "");
  V xneg = LLVMBuildICmp(m->b, LLVMIntSLT, bits(m, x), KI(m, 0), "");
  r = sel(m, LLVMBuildAnd(m->b, xneg, yodd, ""), LLVMBuildFNeg(m->b, r, ""), r);
  V bad = LLVMBuildAnd(m->b, lt(m, x, 0), LLVMBuildNot(m->b, yint, ""), "");
  bad = LLVMBuildAnd(m->b, bad, gt(m, x, -INFINITY), "");
  r = sel(m, bad, K(m, NAN), r);
  V m1inf = LLVMBuildAnd(m->b, eq(m, x, -1), eq(m, fabs_(m, y), INFINITY), "");
  V one = LLVMBuildOr(m->b, LLVMBuildOr(m->b, m1inf, eq(m, x, 1), ""), eq(m, y, 0), "");
  return sel(m, one, K(m, 1), r);
}

/* ---- f32 pow, computed in f64 to f32 accuracy ------------------------------
 * pow needs y log2|x| to about 2^-35 relative, more than an f32 can
 * carry, so its f32 version runs in f64 (M.t is f64, the inputs exact
 * extensions of f32), with polynomials as short as f32 results allow:
 * half the lanes of the f32 algorithms, but a third of the operations of
 * the f64 pow (no double-double). */

/* log2 a for a > 0 finite (log_special's values otherwise): a = 2^e (1
 * + f), log(1 + f) = f - f^2/2 + s (f^2/2 + R), s = f / (2 + f), R's
 * series cut after 2/13 s^12 (the rest below 2^-41 of the result). */
static V log2_for_f32(M *m, V a) {
  double c[6];
  for (int n = 0; n < 6; n++) c[n] = (double)(2.0L / (2 * n + 3));
  V e, f = log_split(m, a, &e);
  V s = fdiv(m, f, add(m, K(m, 2), f)), z = mul(m, s, s);
  V hfsq = mul(m, K(m, 0.5), mul(m, f, f));
  V l = add(m, f, sub(m, mul(m, s, add(m, hfsq, mul(m, z, poly(m, z, c, 6)))), hfsq));
  return log_special(m, a, fmadd(m, l, K(m, INV_LN2), e));
}

/* 2^p rounded to f32 later: k = round(p), r = (p - k) ln 2 (p - k
 * exact), e^r by its Taylor series to r^8/8! (|r| <= 0.35: the next
 * term is below 2^-32 relative), times 2^k in one step (p is clamped
 * to [-170, 130], whose 2^k are normal f64: the f32 rounding that
 * follows is the only one that overflows or goes subnormal). */
static V exp2_for_f32(M *m, V p) {
  double c[9];
  long double f = 1;
  for (int n = 0; n <= 8; n++) f *= n ? n : 1, c[n] = (double)(1.0L / f);
  V k, pc = minc(m, maxc(m, p, -170), 130);
  V kf = round_k(m, pc, &k);
  V r = mul(m, sub(m, pc, kf), K(m, LN2));
  return mul(m, poly(m, r, c, 9), pow2i(m, k));
}

/* pow for f32 x, y given as f64: 2^(y log2|x|), then pow's special
 * cases; the caller rounds the result to f32 once. */
static V pow_for_f32(M *m, V x, V y) {
  V l = log2_for_f32(m, fabs_(m, x));
  return pow_special(m, x, y, exp2_for_f32(m, mul(m, y, l)));
}

/* ---- trigonometric ----------------------------------------------------------- */

/* x = k pi/2 + r, |r| <= pi/4, with pi/2 in 26-bit parts so that each
 * k * part is exact for |k| < 2^27 (|x| < 2.1e8).  Returns r, *q = k & 3. */
static V trig_reduce_small(M *m, V x, V *q) {
  static const double c[4] = {0x1.921fb5p+0, 0x1.110b46p-26, 0x1.1a6263p-54,
                              0x1.8a2e03707344ap-81};
  V k, kf = round_k(m, mul(m, x, K(m, TWO_OVER_PI)), &k);
  V r = x;
  for (int i = 0; i < 4; i++) r = fmadd(m, kf, K(m, -c[i]), r);
  *q = LLVMBuildAnd(m->b, k, KI(m, 3), "");
  return r;
}

/* The binary fraction of 2/pi, 64 bits a word (tools/two_over_pi.py). */
static const unsigned long long two_over_pi_bits[19] = {
    0xa2f9836e4e441529ull, 0xfc2757d1f534ddc0ull, 0xdb6295993c439041ull,
    0xfe5163abdebbc561ull, 0xb7246e3a424dd2e0ull, 0x06492eea09d1921cull,
    0xfe1deb1cb129a73eull, 0xe88235f52ebb4484ull, 0xe99c7026b45f7e41ull,
    0x3991d639835339f4ull, 0x9c845f8bbdf9283bull, 0x1ff897ffde05980full,
    0xef2f118b5a0a6d1full, 0x6d367ecf27cb09b7ull, 0x4f463f669e5fea2dull,
    0x7527bac7ebe5f17bull, 0x3d0739f78a5292eaull, 0x6bfb5fb11f8d5d08ull,
    0x56033046fc7b6babull,
};

static LLVMTypeRef int_t(M *m, unsigned bits) {
  LLVMTypeRef t = LLVMIntTypeInContext(m->ctx, bits);
  return m->lanes ? LLVMVectorType(t, m->lanes) : t;
}

static V KW(M *m, unsigned bits, unsigned long long v) {
  V c = LLVMConstInt(LLVMIntTypeInContext(m->ctx, bits), v, 0);
  if (!m->lanes) return c;
  V e[64];
  for (unsigned i = 0; i < m->lanes; i++) e[i] = c;
  return LLVMConstVector(e, m->lanes);
}

/* Payne-Hanek: |x| = mant 2^s exactly (mant < 2^53); |x| 2/pi mod 4 from
 * the words i0 .. i0 + 3 of 2/pi, where i0 skips the words whose
 * products are multiples of 4 (an error below 2^-130 of the result's
 * fraction, enough for the closest doubles to multiples of pi/2).  The
 * 320-bit sum gives two integer bits k and 126 fraction bits f; with f
 * >= 1/2 taken as f - 1 (k + 1), r = f pi/2.  For finite |x| >= 2^-25. */
static V trig_reduce_large(M *m, V ax, V *q) {
  LLVMBuilderRef b = m->b;
  V bx = bits(m, ax);
  V e = LLVMBuildAnd(m->b, LLVMBuildLShr(b, bx, KI(m, 52), ""), KI(m, 2047), "");
  V mant = LLVMBuildOr(b, LLVMBuildAnd(b, bx, KI(m, (1LL << 52) - 1), ""), KI(m, 1LL << 52), "");
  V sh = LLVMBuildSub(b, e, KI(m, 1075), ""); /* |x| = mant 2^sh */
  V i0 = LLVMBuildSDiv(b, LLVMBuildSub(b, sh, KI(m, 2), ""), KI(m, 64), "");
  i0 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, sh, KI(m, 2), ""), KI(m, 0), i0, "");
  LLVMTypeRef t128 = int_t(m, 128), t320 = int_t(m, 320);
  V m128 = LLVMBuildZExt(b, mant, t128, ""), acc = KW(m, 320, 0);
  for (int j = 0; j < 4; j++) {
    V w = KW(m, 64, two_over_pi_bits[j]);
    for (int i = 1; i + j < 19; i++) /* the word i0 + j */
      w = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, i0, KI(m, i), ""),
                          KW(m, 64, two_over_pi_bits[i + j]), w, "");
    V p = LLVMBuildMul(b, m128, LLVMBuildZExt(b, w, t128, ""), "");
    acc = LLVMBuildAdd(b, acc, LLVMBuildShl(b, LLVMBuildZExt(b, p, t320, ""),
                                            KW(m, 320, (unsigned long long)(64 * (3 - j))), ""), "");
  }
  /* x 2/pi = acc 2^(sh - 64 (i0 + 4)): the binary point sits at bit
   * P = 64 (i0 + 4) - sh; keep bits P + 1 .. P - 126 */
  V P = LLVMBuildSub(b, LLVMBuildMul(b, LLVMBuildAdd(b, i0, KI(m, 4), ""), KI(m, 64), ""), sh, "");
  V win = LLVMBuildLShr(b, acc, LLVMBuildZExt(b, LLVMBuildSub(b, P, KI(m, 126), ""), t320, ""), "");
  win = LLVMBuildTrunc(b, win, t128, "");
  V k = LLVMBuildTrunc(b, LLVMBuildLShr(b, win, KW(m, 128, 126), ""), m->it, "");
  V g = LLVMBuildShl(b, win, KW(m, 128, 2), ""); /* f in [-1/2, 1/2) as i128 / 2^128 */
  V neg = LLVMBuildICmp(b, LLVMIntSLT, g, KW(m, 128, 0), "");
  k = LLVMBuildAdd(b, k, LLVMBuildZExt(b, neg, m->it, ""), "");
  *q = LLVMBuildAnd(b, k, KI(m, 3), "");
  /* g to a double: normalize so its top 64 bits hold 63 significant ones */
  V mag = LLVMBuildSelect(b, neg, LLVMBuildNot(b, g, ""), g, "");
  V zf[2] = {mag, LLVMConstInt(LLVMInt1TypeInContext(m->ctx), 0, 0)};
  unsigned id = LLVMLookupIntrinsicID("llvm.ctlz", 9);
  V ctlz = LLVMGetIntrinsicDeclaration(m->mod, id, &t128, 1);
  V lz = LLVMBuildCall2(b, LLVMIntrinsicGetType(m->ctx, id, &t128, 1), ctlz, zf, 2, "");
  V s1 = LLVMBuildSub(b, lz, KW(m, 128, 1), "");
  s1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, s1, KW(m, 128, 64), ""), KW(m, 128, 64), s1, "");
  V top = LLVMBuildTrunc(b, LLVMBuildAShr(b, LLVMBuildShl(b, g, s1, ""), KW(m, 128, 64), ""), m->it, "");
  V f = LLVMBuildSIToFP(b, top, m->t, "");
  V scale = from_bits(m, LLVMBuildShl(b, LLVMBuildSub(b, KI(m, 1023 - 64),
                                                      LLVMBuildTrunc(b, s1, m->it, ""), ""),
                                      KI(m, 52), ""));
  f = mul(m, f, scale);
  V hi, lo;
  two_prod(m, f, K(m, PIO2), &hi, &lo);
  return add(m, hi, fmadd(m, f, K(m, PIO2_LO), lo));
}

/* x = k pi/2 + r, |r| <= pi/4, for every finite x: Cody-Waite below
 * 1e8, Payne-Hanek above.  Vectors compute both and select per lane;
 * scalars (the CUDA backend's case) branch, so the long path costs only
 * where an argument needs it. */
static void large_signed(M *m, V x, V ax, V *r, V *q) {
  V rl = trig_reduce_large(m, ax, q);
  /* x < 0: -(k pi/2 + r) = (-k) pi/2 - r */
  V xneg = lt(m, x, 0);
  *r = sel(m, xneg, LLVMBuildFNeg(m->b, rl, ""), rl);
  *q = LLVMBuildSelect(m->b, xneg, LLVMBuildAnd(m->b, LLVMBuildNeg(m->b, *q, ""), KI(m, 3), ""), *q, "");
}

static V trig_reduce(M *m, V x, V *q) {
  V qs, ql, rl, rs = trig_reduce_small(m, x, &qs);
  V ax = fabs_(m, x), big = cmp(m, LLVMRealOGE, ax, K(m, 1e8));
  if (m->lanes) {
    large_signed(m, x, sel(m, big, ax, K(m, 1e8)), &rl, &ql);
    *q = LLVMBuildSelect(m->b, big, ql, qs, "");
    return sel(m, big, rl, rs);
  }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(m->b);
  LLVMValueRef fn = LLVMGetBasicBlockParent(pre);
  LLVMBasicBlockRef large = LLVMAppendBasicBlockInContext(m->ctx, fn, "trig_large"),
                    join = LLVMAppendBasicBlockInContext(m->ctx, fn, "trig_reduced");
  LLVMBuildCondBr(m->b, big, large, join);
  LLVMPositionBuilderAtEnd(m->b, large);
  large_signed(m, x, ax, &rl, &ql);
  LLVMBasicBlockRef large_end = LLVMGetInsertBlock(m->b);
  LLVMBuildBr(m->b, join);
  LLVMPositionBuilderAtEnd(m->b, join);
  V r = LLVMBuildPhi(m->b, m->t, "r"), qp = LLVMBuildPhi(m->b, m->it, "q");
  V rv[2] = {rs, rl}, qv[2] = {qs, ql};
  LLVMBasicBlockRef from[2] = {pre, large_end};
  LLVMAddIncoming(r, rv, from, 2);
  LLVMAddIncoming(qp, qv, from, 2);
  *q = qp;
  return r;
}

/* sin r for |r| <= pi/4: r + r^3 (-1/3! + ... + r^16/19!). */
static V sin_poly(M *m, V r, V z) {
  double c[9];
  long double f = 1;
  for (int n = 3, i = 0; n <= 19; n += 2, i++)
    f *= (long double)n * (n - 1), c[i] = (double)((i % 2 ? 1.0L : -1.0L) / f);
  return fmadd(m, mul(m, r, z), poly(m, z, c, 9), r);
}

/* cos r = w + ((1 - w) - z/2 + z^2 (1/4! - ...)), w = 1 - z/2: the
 * rounding error of w is added back exactly. */
static V cos_poly(M *m, V z) {
  double c[9];
  long double f = 2;
  for (int n = 4, i = 0; n <= 20; n += 2, i++)
    f *= (long double)n * (n - 1), c[i] = (double)((i % 2 ? -1.0L : 1.0L) / f);
  V hz = mul(m, z, K(m, 0.5)), w = sub(m, K(m, 1), hz);
  V corr = sub(m, sub(m, K(m, 1), w), hz);
  return add(m, w, fmadd(m, mul(m, z, z), poly(m, z, c, 9), corr));
}

static V bit(M *m, V q, long long b) {
  return LLVMBuildICmp(m->b, LLVMIntNE, LLVMBuildAnd(m->b, q, KI(m, b), ""), KI(m, 0), "");
}

/* which: 0 sin, 1 cos, 2 tan. */
static V trig64(M *m, V x, int which) {
  V q, r = trig_reduce(m, x, &q), z = mul(m, r, r);
  V s = sin_poly(m, r, z), c = cos_poly(m, z), res;
  V odd = bit(m, q, 1);
  if (which == 2) {
    res = sel(m, odd, LLVMBuildFNeg(m->b, fdiv(m, c, s), ""), fdiv(m, s, c));
  } else {
    V v = which == 0 ? sel(m, odd, c, s) : sel(m, odd, s, c);
    V nq = which == 0 ? q : LLVMBuildAdd(m->b, q, KI(m, 1), "");
    res = sel(m, bit(m, nq, 2), LLVMBuildFNeg(m->b, v, ""), v);
  }
  res = sel(m, cmp(m, LLVMRealOLT, fabs_(m, x), K(m, INFINITY)), res, K(m, NAN));
  return which == 1 ? res : keep_zero(m, x, res);
}

/* atan(a) for a >= 0 (inf included): a > 1 uses pi/2 - atan(1/a), then
 * t > tan(pi/8) uses pi/4 + atan((t - 1)/(t + 1)), leaving |u| <= 0.4143
 * for the series u - u^3/3 + ... (23 terms, the next below 2^-58). */
static V atan_pos(M *m, V a) {
  double c[23];
  for (int n = 0; n < 23; n++) c[n] = (double)((n % 2 ? -1.0L : 1.0L) / (2 * n + 1));
  V inv = gt(m, a, 1);
  V t = sel(m, inv, fdiv(m, K(m, 1), a), a);
  V mid = gt(m, t, 0x1.a827999fcef32p-2);
  V u = sel(m, mid, fdiv(m, sub(m, t, K(m, 1)), add(m, t, K(m, 1))), t);
  V at = mul(m, u, poly(m, mul(m, u, u), c, 23));
  at = sel(m, mid, add(m, K(m, PIO4), add(m, at, K(m, PIO4_LO))), at);
  return sel(m, inv, add(m, K(m, PIO2), sub(m, K(m, PIO2_LO), at)), at);
}

static V atan64(M *m, V x) { return copysign_(m, atan_pos(m, fabs_(m, x)), x); }

/* atan2(y, x) with C99's special values, at either precision: atan01
 * (atan_pos, atan01_f32) on t = min(|x|, |y|) / max(|x|, |y|) <= 1, then the quadrant from
 * pi/2 - t (|y| > |x|) and pi - t (x negative, -0 included) with pi/2 and
 * pi in two parts (pio2 + pio2_lo); the sign is y's.  Both zero gives t = 0 (0, or pi for
 * a negative x), both infinite t = 1 (pi/4, or 3 pi/4). */
static V atan2_quadrants(M *m, V y, V x, V (*atan01)(M *, V), double pio2, double pio2_lo) {
  V ay = fabs_(m, y), ax = fabs_(m, x);
  V swap = cmp(m, LLVMRealOGT, ay, ax);
  V t = fdiv(m, sel(m, swap, ax, ay), sel(m, swap, ay, ax));
  V same = cmp(m, LLVMRealOEQ, ay, ax);
  t = sel(m, LLVMBuildAnd(m->b, same, eq(m, ax, 0), ""), K(m, 0), t);
  t = sel(m, LLVMBuildAnd(m->b, same, eq(m, ax, INFINITY), ""), K(m, 1), t);
  V at = atan01(m, t);
  V neg = LLVMBuildICmp(m->b, LLVMIntSLT, bits(m, x), KI(m, 0), "");
  V r_pos = sel(m, swap, add(m, K(m, pio2), sub(m, K(m, pio2_lo), at)), at);
  V r_neg = sel(m, swap, add(m, K(m, pio2), add(m, at, K(m, pio2_lo))),
                add(m, K(m, 2 * pio2), sub(m, K(m, 2 * pio2_lo), at)));
  return copysign_(m, sel(m, neg, r_neg, r_pos), y);
}

static V atan2_64(M *m, V y, V x) { return atan2_quadrants(m, y, x, atan_pos, PIO2, PIO2_LO); }

/* asin x = atan(x / sqrt((1 - x)(1 + x))): 1 - |x| is exact near 1. */
static V asin64(M *m, V x) {
  V a = fabs_(m, x);
  V d = sqrt_(m, mul(m, sub(m, K(m, 1), a), add(m, K(m, 1), a)));
  V r = atan_pos(m, fdiv(m, a, d));
  return copysign_(m, sel(m, gt(m, a, 1), K(m, NAN), r), x);
}

/* acos x = 2 atan(sqrt((1 - x) / (1 + x))); |x| > 1 gives the sqrt of a
 * negative number, NaN. */
static V acos64(M *m, V x) {
  V q = fdiv(m, sub(m, K(m, 1), x), add(m, K(m, 1), x));
  return mul(m, K(m, 2), atan_pos(m, sqrt_(m, q)));
}

/* ---- hyperbolic and erf ---------------------------------------------------- */

/* tanh |x| = e / (e + 2), e = expm1(2|x|); 1 beyond 22. */
static V tanh64(M *m, V x) {
  V a = minc(m, fabs_(m, x), 22);
  V e = expm1_64(m, add(m, a, a));
  return copysign_(m, fdiv(m, e, add(m, e, K(m, 2))), x);
}

/* e^a / 2 for a >= 22 without overflowing early: (e^(a/2) / 2) e^(a/2). */
static V half_exp_big(M *m, V a) {
  V w = exp64(m, mul(m, a, K(m, 0.5)), NULL);
  return mul(m, mul(m, w, K(m, 0.5)), w);
}

/* sinh |x| = (E + E / (E + 1)) / 2, E = expm1(|x|). */
static V sinh64(M *m, V x) {
  V a = fabs_(m, x), small = lt(m, a, 22);
  V e = expm1_64(m, minc(m, a, 22));
  V r = mul(m, K(m, 0.5), add(m, e, fdiv(m, e, add(m, e, K(m, 1)))));
  return copysign_(m, sel(m, small, r, half_exp_big(m, a)), x);
}

static V cosh64(M *m, V x) {
  V a = fabs_(m, x), small = lt(m, a, 22);
  V e = exp64(m, minc(m, a, 22), NULL);
  V r = fmadd(m, K(m, 0.5), e, fdiv(m, K(m, 0.5), e));
  return sel(m, small, r, sel(m, cmp(m, LLVMRealUNO, x, x), x, half_exp_big(m, a)));
}

/* asinh |x| = log1p(a + a^2 / (1 + sqrt(1 + a^2))); log(a) + ln 2 from
 * 2^28 on (where sqrt(1 + a^2) rounds to a). */
static V asinh64(M *m, V x) {
  V a = fabs_(m, x), big = gt(m, a, 0x1p28);
  V ac = minc(m, a, 0x1p28), a2 = mul(m, ac, ac);
  V r = log1p64(m, add(m, ac, fdiv(m, a2, add(m, K(m, 1), sqrt_(m, add(m, K(m, 1), a2))))));
  V rb = add(m, log64(m, a, 0), K(m, LN2));
  return copysign_(m, sel(m, big, rb, r), x);
}

/* acosh x = log1p(t + sqrt(2t + t^2)), t = x - 1 (exact near 1). */
static V acosh64(M *m, V x) {
  V big = gt(m, x, 0x1p28), t = sub(m, minc(m, x, 0x1p28), K(m, 1));
  V r = log1p64(m, add(m, t, sqrt_(m, fmadd(m, t, t, add(m, t, t)))));
  r = sel(m, big, add(m, log64(m, x, 0), K(m, LN2)), r);
  return sel(m, lt(m, x, 1), K(m, NAN), r);
}

/* atanh |x| = log1p(2a / (1 - a)) / 2; |x| > 1 gives log1p(< -1) = NaN. */
static V atanh64(M *m, V x) {
  V a = fabs_(m, x);
  V r = mul(m, K(m, 0.5), log1p64(m, fdiv(m, add(m, a, a), sub(m, K(m, 1), a))));
  return copysign_(m, r, x);
}

/* erf |x|: below 2, (2/sqrt(pi)) a e^(-a^2) sum (2a^2)^n / (2n+1)!!
 * (positive terms, 32 of them, the next below 2^-57 relative); from 2,
 * 1 - erfc with erfc from its continued fraction
 * e^(-a^2)/sqrt(pi) / (a + (1/2)/(a + 1/(a + ...))) at depth 52 (absolute
 * error below 2^-58 from 2 on), evaluated as one fraction P/Q; 1 from 6 on. e^(-a^2)
 * takes a^2 exactly as hi + lo. */
static V erf64(M *m, V x) {
  double c[32];
  long double dd = 1;
  for (int n = 0; n < 32; n++) dd *= (n ? 2 * n + 1 : 1), c[n] = (double)(1.0L / dd);
  V a = minc(m, fabs_(m, x), 6), h, l;
  two_prod(m, a, a, &h, &l);
  V e = exp64(m, LLVMBuildFNeg(m->b, h, ""), LLVMBuildFNeg(m->b, l, ""));
  V s = poly(m, add(m, h, h), c, 32);
  V small = mul(m, mul(m, mul(m, K(m, TWO_OVER_SQRTPI), a), e), s);
  V p = a, q = K(m, 1);
  for (int n = 52; n >= 1; n--) {
    V np = fmadd(m, a, p, mul(m, K(m, n * 0.5), q));
    q = p, p = np;
  }
  V erfc = mul(m, mul(m, e, K(m, INV_SQRTPI)), fdiv(m, q, p));
  V big = sub(m, K(m, 1), erfc);
  return copysign_(m, sel(m, lt(m, a, 2), small, big), x);
}

/* 1 / (1 + e^-x), PyTorch's formula. */
static V sigmoid64(M *m, V x) {
  V e = exp64(m, LLVMBuildFNeg(m->b, x, ""), NULL);
  return fdiv(m, K(m, 1), add(m, K(m, 1), e));
}

/* ---- f32 algorithms ---------------------------------------------------------
 * Computed in f32 (M.t is f32, M.it i32), so a vector holds twice the
 * lanes of the f64 path.  The polynomials are near-minimax fits computed
 * by tools/fit_math_f32.py (Lawson's algorithm in double, coefficients
 * rounded to f32 one at a time, the rest refitted after each); the error
 * each comment gives is the fit's, weighted to be relative to the
 * function's value.  The measured maxima over all 2^32 inputs are in
 * docs/numerics.md (tests/unit/test_math.c, TDSL_MATH_EXHAUSTIVE=1). */

#define F_MAGIC 0x1.8p23 /* adding it rounds an f32 to an integer in its low bits */
#define F_LN2_HI 0x1.62e4p-1 /* 16 bits: k * F_LN2_HI is exact for |k| < 2^8 */
#define F_LN2_LO 0x1.7f7d1cp-20
#define F_LOG2E 0x1.715476p+0

/* (e^r - 1 - r) / r^2 for |r| <= ln2/2: degree 4, relative error 4.4e-9. */
static V expm1_q_f32(M *m, V r) {
  static const double q[5] = {0x1.fffffcp-2, 0x1.55549p-3, 0x1.5558f4p-5, 0x1.123a6cp-7,
                              0x1.6a2352p-10};
  return poly(m, r, q, 5);
}

/* e^r for |r| <= ln2/2: 1 + (r + r^2 q(r)), the sum rounded last. */
static V exp_r_f32(M *m, V r) { return add(m, K(m, 1), fmadd(m, mul(m, r, r), expm1_q_f32(m, r), r)); }

/* k = round(x / ln 2) as an f32 and an i32 (from the bits of x log2e +
 * 1.5 2^23, never fptosi, so a NaN gives a garbage k, never poison);
 * returns r = x - k ln 2 in two parts, |r| <= ln2/2 plus a rounding. */
static V exp_reduce_f32(M *m, V x, V *kf, V *k) {
  V t = add(m, mul(m, x, K(m, F_LOG2E)), K(m, F_MAGIC));
  *kf = sub(m, t, K(m, F_MAGIC));
  *k = LLVMBuildSub(m->b, bits(m, t), KI(m, 0x4b400000), "");
  V r = fmadd(m, *kf, K(m, -F_LN2_HI), x);
  return fmadd(m, *kf, K(m, -F_LN2_LO), r);
}

/* 2^k for an i32 k in -126..127. */
static V pow2i_f32(M *m, V k) {
  return from_bits(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, k, KI(m, 127), ""), KI(m, 23), ""));
}

/* p 2^k for |k| <= 252 as two normal factors: overflow gives inf, and a
 * subnormal result is rounded once. */
static V scale_f32(M *m, V p, V k) {
  V k1 = LLVMBuildAShr(m->b, k, KI(m, 1), ""), k2 = LLVMBuildSub(m->b, k, k1, "");
  return mul(m, mul(m, p, pow2i_f32(m, k1)), pow2i_f32(m, k2));
}

/* e^x for x in [-104, 89] (NaN passes): e^r 2^k.  Max error 1 ulp. */
static V exp_core_f32(M *m, V x) {
  V kf, k, r = exp_reduce_f32(m, x, &kf, &k);
  V p = exp_r_f32(m, r);
  return scale_f32(m, p, k);
}

/* The same for x in [-87, 88], where e^x and 2^k are normal: one scale
 * (exact), four instructions fewer. */
static V exp_normal_f32(M *m, V x) {
  V kf, k, r = exp_reduce_f32(m, x, &kf, &k);
  V p = exp_r_f32(m, r);
  return mul(m, p, pow2i_f32(m, k));
}

/* e^x with x clamped to [-104, 89]: beyond, e^x underflows to 0 or
 * overflows to inf; a NaN stays NaN through the selects. */
static V exp_f32(M *m, V x) { return exp_core_f32(m, minc(m, maxc(m, x, -104), 89)); }

/* 2^x: k = round(x), r = (x - k) ln 2 (x - k is exact; the product's
 * rounding moves e^r by at most 2^-25 relative). */
static V exp2_f32(M *m, V x) {
  V xc = minc(m, maxc(m, x, -152), 129);
  V t = add(m, xc, K(m, F_MAGIC)), kf = sub(m, t, K(m, F_MAGIC));
  V k = LLVMBuildSub(m->b, bits(m, t), KI(m, 0x4b400000), "");
  V r = mul(m, sub(m, xc, kf), K(m, 0x1.62e43p-1));
  V p = exp_r_f32(m, r);
  return scale_f32(m, p, k);
}

/* expm1: x = k ln2 + r, em = e^r - 1 = r + r^2 q(r); for k <= 24 the
 * result is 2^k em + (2^k - 1), where 2^k em and 2^k - 1 are exact, so
 * the one rounding is the sum's (k = 0, |x| <= ln2/2: r = x exactly);
 * above, (em + 1) 2^k - 1.  x is clamped to [-18, 89] (expm1 is -1 in
 * f32 below -17.4 and inf above 88.73). */
static V expm1_f32(M *m, V x) {
  V kf, k, xc = minc(m, maxc(m, x, -18), 89);
  V r = exp_reduce_f32(m, xc, &kf, &k);
  V em = fmadd(m, mul(m, r, r), expm1_q_f32(m, r), r);
  V big = LLVMBuildICmp(m->b, LLVMIntSGT, k, KI(m, 24), "");
  V s = pow2i_f32(m, LLVMBuildSelect(m->b, big, KI(m, 0), k, ""));
  V small = fmadd(m, s, em, sub(m, s, K(m, 1)));
  V large = sub(m, scale_f32(m, add(m, em, K(m, 1)), k), K(m, 1));
  return keep_zero(m, x, sel(m, big, large, small));
}

/* a = 2^e m, m = 1 + f in [sqrt(1/2), sqrt(2)), f exact, for a > 0
 * finite; subnormals are scaled by 2^23 first. */
static V log_split_f32(M *m, V a, V *e) {
  V sub_ = lt(m, a, 0x1p-126);
  V a2 = sel(m, sub_, mul(m, a, K(m, 0x1p23)), a);
  /* adding 1 - bits(sqrt(1/2)) carries into the exponent exactly when
   * the significand is >= sqrt(1/2) * 2 */
  V ix = LLVMBuildAdd(m->b, bits(m, a2), KI(m, 0x3f800000 - 0x3f3504f3), "");
  V ei = LLVMBuildSub(m->b, LLVMBuildAShr(m->b, ix, KI(m, 23), ""), KI(m, 127), "");
  *e = LLVMBuildSub(m->b, ei, LLVMBuildSelect(m->b, sub_, KI(m, 23), KI(m, 0), ""), "");
  V mb = LLVMBuildAdd(m->b, LLVMBuildAnd(m->b, ix, KI(m, 0x007fffff), ""), KI(m, 0x3f3504f3), "");
  return sub(m, from_bits(m, mb), K(m, 1));
}

/* log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: f - f^2/2 + f^3 L(f),
 * L of degree 8, weighted error 7.7e-10; the sum with the exact f is the
 * last rounding. */
static V log1p_core_f32(M *m, V f) {
  static const double c[9] = {0x1.555548p-2,   -0x1.000006p-2, 0x1.99a476p-3,
                              -0x1.555c44p-3,  0x1.233ba2p-3,  -0x1.fc28cap-4,
                              0x1.e6c00ap-4,   -0x1.de01dcp-4, 0x1.14733ep-4};
  V f2 = mul(m, f, f);
  V r = fmadd(m, mul(m, f2, f), poly(m, f, c, 9), mul(m, f2, K(m, -0.5)));
  return add(m, f, r);
}

/* kind: 0 ln, 2 log2, 10 log10: e ln2 + log(1 + f), with ln 2 (and
 * log10(2)) in two parts whose high part times e is exact. */
static V log_f32(M *m, V a, int kind) {
  V ei, f = log_split_f32(m, a, &ei), l = log1p_core_f32(m, f), r;
  V e = LLVMBuildSIToFP(m->b, ei, m->t, "");
  if (kind == 2) r = fmadd(m, l, K(m, 0x1.715476p+0), fmadd(m, l, K(m, 0x1.4ae0bep-26), e));
  else if (kind == 10)
    r = fmadd(m, e, K(m, 0x1.344p-2), fmadd(m, e, K(m, 0x1.3509f8p-18), mul(m, l, K(m, 0x1.bcb7b2p-2))));
  else r = fmadd(m, e, K(m, F_LN2_HI), fmadd(m, e, K(m, F_LN2_LO), l));
  return log_special(m, a, r);
}

/* log1p(x) = log(u + c) with u = 1 + x rounded and c its rounding error
 * (two_sum): u = 2^e (1 + f), so log1p(x) = e ln2 + log(1 + f + c 2^-e),
 * the correction added to the exact f.  Tiny x gives f = 0, c = x. */
static V log1p_f32(M *m, V x) {
  V u, c, ei;
  two_sum(m, K(m, 1), x, &u, &c);
  V f = log_split_f32(m, u, &ei);
  V es = LLVMBuildSelect(m->b, LLVMBuildICmp(m->b, LLVMIntSGT, ei, KI(m, 100), ""), KI(m, 100), ei, "");
  V cs = mul(m, c, pow2i_f32(m, LLVMBuildNeg(m->b, es, "")));
  cs = sel(m, eq(m, u, INFINITY), K(m, 0), cs);
  V l = log1p_core_f32(m, add(m, f, cs));
  V e = LLVMBuildSIToFP(m->b, ei, m->t, "");
  V r = fmadd(m, e, K(m, F_LN2_HI), fmadd(m, e, K(m, F_LN2_LO), l));
  return keep_zero(m, x, log_special(m, u, r));
}

/* a / b for b in [1, 2^28] and finite a (NaN passes): the IEEE division,
 * or, where CgMath.approx_div names an approximate one (scalar f32 only),
 * r ~ 1/b from it (relative error d <= 2^-22), q0 = a r rounded, and
 * q = q0 + (a - b q0) r with the residual a - b q0 exact in a fused
 * multiply-add: q - a/b = (a/b - q0) d before q's rounding, 2^-43 of
 * a/b at most, so q is a / b rounded to within an ulp (almost always
 * correctly).  No subnormal enters the approximation: b >= 1. */
static V div_by_normal(M *m, V a, V b) {
  const char *name = m->cm->approx_div;
  if (!name || m->lanes || m->ef != LLVMFloatTypeInContext(m->ctx)) return fdiv(m, a, b);
  V f = LLVMGetNamedFunction(m->mod, name);
  LLVMTypeRef ft = LLVMFunctionType(m->ef, (LLVMTypeRef[]){m->ef, m->ef}, 2, 0);
  if (!f) f = LLVMAddFunction(m->mod, name, ft);
  V one_b[2] = {K(m, 1), b};
  V r = LLVMBuildCall2(m->b, ft, f, one_b, 2, "");
  V q0 = mul(m, a, r);
  V res[3] = {LLVMBuildFNeg(m->b, b, ""), q0, a};
  V e = intr(m, "llvm.fma", res, 3);
  V fix[3] = {e, r, q0};
  return intr(m, "llvm.fma", fix, 3);
}

/* tanh |x|: below 0.625, a + a^3 P(a^2) (P of degree 5, weighted error
 * 4e-10); from there 1 - 2 / (e^(2a) + 1), whose 2 / (e^(2a) + 1) <=
 * 0.45 carries exp's 1 ulp and two roundings; 1 from 9.1 on.  The sign
 * is x's (so -0 stays -0 and NaN stays NaN). */
static V tanh_f32(M *m, V x) {
  static const double p[6] = {-0x1.555554p-2, 0x1.111064p-3,  -0x1.b9ea7cp-5,
                              0x1.634442p-6,  -0x1.0a3a42p-7, 0x1.119bc4p-9};
  V a = fabs_(m, x), z = mul(m, a, a);
  V small = fmadd(m, mul(m, a, z), poly(m, z, p, 6), a);
  V ac = minc(m, a, 9.1);
  V e = exp_normal_f32(m, add(m, ac, ac));
  V big = sub(m, K(m, 1), div_by_normal(m, K(m, 2), add(m, e, K(m, 1))));
  return copysign_(m, sel(m, lt(m, a, 0.625), small, big), x);
}

/* erf |x|: below 0.921875, a + a R(a^2) (R of degree 6, weighted error
 * 9e-10); from there 1 - erfc(a), erfc(a) = e^(s(a) - a^2) with s(a) =
 * log(erfc(a) e^(a^2)) a degree-7 polynomial in a - 2.421875 (weighted
 * error 5e-11), and a^2 = h + l exactly (l from a fused multiply-add;
 * without one l is 0 and the rounding of h costs erfc at most 2^-21
 * relative).  The exponent is reduced as exp's with -h first (exact in
 * the cases that matter), then s - l.  1 from 3.921875 on, where erfc
 * is below half an ulp of 1. */
static V erf_f32(M *m, V x) {
  static const double rs[7] = {0x1.06eba8p-3,  -0x1.81274p-2,  0x1.ce2d64p-4, -0x1.b80112p-6,
                               0x1.544954p-8,  -0x1.a5fe48p-11, 0x1.4f2da2p-14};
  static const double ss[8] = {-0x1.8766fp+0, -0x1.72549p-2, 0x1.e124c8p-5, -0x1.7aa2e2p-7,
                               0x1.339902p-9, -0x1.deb8d4p-12, 0x1.4184c4p-14, -0x1.6275d8p-16};
  V a = fabs_(m, x);
  V small = fmadd(m, a, poly(m, mul(m, a, a), rs, 7), a);
  V ac = minc(m, maxc(m, a, 0.921875), 3.921875);
  V h = mul(m, ac, ac), l = fmadd(m, ac, ac, LLVMBuildFNeg(m->b, h, ""));
  V s = poly(m, sub(m, ac, K(m, 2.421875)), ss, 8);
  V kf, k;
  exp_reduce_f32(m, sub(m, s, h), &kf, &k);
  V r = fmadd(m, kf, K(m, -F_LN2_HI), LLVMBuildFNeg(m->b, h, ""));
  r = fmadd(m, kf, K(m, -F_LN2_LO), r);
  r = add(m, r, sub(m, s, l));
  V p = exp_r_f32(m, r);
  V big = sub(m, K(m, 1), mul(m, p, pow2i_f32(m, k))); /* k in [-27, -1] */
  return copysign_(m, sel(m, lt(m, a, 0.921875), small, big), x);
}

/* With E = e^-|x| <= 1: 1 / (1 + E) for x >= 0, E / (1 + E) below, so
 * results down to the subnormals keep their precision (1 / (1 + e^-x)
 * would give 0 once e^-x overflows f32). */
static V sigmoid_f32(M *m, V x) {
  V e = exp_f32(m, LLVMBuildFNeg(m->b, fabs_(m, x), ""));
  return div_by_normal(m, sel(m, lt(m, x, 0), e, K(m, 1)), add(m, K(m, 1), e));
}

/* ---- f32 sin, cos, tan ---------------------------------------------------- */

/* f64 scalars or vectors of m's shape (int_t gives the integers). */
static LLVMTypeRef f64_t(M *m) {
  LLVMTypeRef t = LLVMDoubleTypeInContext(m->ctx);
  return m->lanes ? LLVMVectorType(t, m->lanes) : t;
}
static V K64(M *m, double v) { return splat(m, LLVMConstReal(LLVMDoubleTypeInContext(m->ctx), v)); }

/* pi/2 in four parts: the first three of 12 significant bits, so k times
 * each is exact in f32 for |k| < 2^12 (with or without a fused
 * multiply-add); their sum is pi/2 within 2^-68.  2/pi rounded to f32. */
#define F_PIO2_1 0x1.922p+0
#define F_PIO2_2 -0x1.2aep-18
#define F_PIO2_3 -0x1.deap-31
#define F_PIO2_4 0x1.184698p-44
#define F_TWO_OVER_PI 0x1.45f306p-1
#define F_TRIG_SMALL 0x1.8p12 /* |x| < 6144: k <= 3912 */

/* x = k pi/2 + r + c for |x| < F_TRIG_SMALL (Cody-Waite): k = round(x
 * 2/pi) (off by one near the midpoints is harmless: |r| stays below
 * 0.79); x - k part1 is exact (Sterbenz), and so are the other steps
 * where r is small; where not, each rounding error is recovered (a fast
 * two-sum) into c, a correction below an ulp of r.  *q = k. */
static V trig_reduce_small_f32(M *m, V x, V *q, V *c) {
  static const double part[4] = {F_PIO2_1, F_PIO2_2, F_PIO2_3, F_PIO2_4};
  V t = add(m, mul(m, x, K(m, F_TWO_OVER_PI)), K(m, F_MAGIC));
  V kf = sub(m, t, K(m, F_MAGIC));
  *q = LLVMBuildSub(m->b, bits(m, t), KI(m, 0x4b400000), "");
  V r = sub(m, x, mul(m, kf, K(m, part[0])));
  *c = NULL;
  for (int i = 1; i < 4; i++) {
    V p = mul(m, kf, K(m, part[i])), rn = sub(m, r, p);
    V e = sub(m, sub(m, r, rn), p);
    *c = *c ? add(m, *c, e) : e;
    r = rn;
  }
  return r;
}

/* Payne-Hanek for an f32 a = |x| >= 2^-7 (finite; other lanes give a
 * harmless garbage): a = mant 2^(E-23) with mant < 2^24.  The bits of
 * 2/pi of weight 2^-(E-24) and below (the 32-bit words of
 * two_over_pi_bits, shifted by the exponent; the bits above only add
 * multiples of 4) are taken as a 96-bit integer W, so a 2/pi = mant W
 * 2^-94 mod 4 up to 2^-70.  Bits 32..95 of mant W (bit 94 is the units)
 * give k mod 4 and 62 fraction bits; a fraction >= 1/2 is taken as f - 1
 * with k + 1.  r = f pi/2 in f64, rounded to f32, *c the rest (the
 * closest f32 to a multiple of pi/2 leaves |r| far above the 2^-61
 * truncation).
 * The words are chosen and shifted in i32 lanes; only the two full
 * products and their carries need i64. */
static V trig_reduce_large_f32(M *m, V a, V *q, V *c) {
  LLVMBuilderRef b = m->b;
  LLVMTypeRef t64 = int_t(m, 64), d = f64_t(m);
  /* the words of 2/pi, 32 bits each, after one word of zeros */
  unsigned long long w32[8] = {0};
  for (int i = 0; i < 7; i++)
    w32[i + 1] = i % 2 ? two_over_pi_bits[i / 2] & 0xffffffffull : two_over_pi_bits[i / 2] >> 32;
  V ba = bits(m, a);
  V e = LLVMBuildAnd(b, LLVMBuildLShr(b, ba, KI(m, 23), ""), KI(m, 255), "");
  V mant = LLVMBuildOr(b, LLVMBuildAnd(b, ba, KI(m, 0x7fffff), ""), KI(m, 0x800000), "");
  /* the window starts after bit s = E - 25 of 2/pi, bit s + 32 of the
   * table; s + 32 = e - 120 for the biased exponent e, clamped */
  V s = LLVMBuildSub(b, e, KI(m, 120), "");
  s = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, s, KI(m, 0), ""), KI(m, 0), s, "");
  s = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, s, KI(m, 134), ""), KI(m, 134), s, "");
  V idx = LLVMBuildLShr(b, s, KI(m, 5), "");
  V sh = LLVMBuildAnd(b, s, KI(m, 31), ""), rsh = LLVMBuildSub(b, KI(m, 31), sh, "");
  V w[4];
  for (int j = 0; j < 4; j++) {
    w[j] = KI(m, (long long)w32[j]);
    for (int i = 1; i <= 4; i++)
      w[j] = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, idx, KI(m, i), ""), KI(m, (long long)w32[i + j]),
                             w[j], "");
  }
  /* W's words: w[j] << sh with the top bits of w[j + 1] (shifted by 1,
   * then 31 - sh, so that sh = 0 shifts in nothing) */
  V win[3];
  for (int j = 0; j < 3; j++)
    win[j] = LLVMBuildOr(b, LLVMBuildShl(b, w[j], sh, ""),
                         LLVMBuildLShr(b, LLVMBuildLShr(b, w[j + 1], KI(m, 1), ""), rsh, ""), "");
  V m64 = LLVMBuildZExt(b, mant, t64, "");
  V p1 = LLVMBuildMul(b, m64, LLVMBuildZExt(b, win[1], t64, ""), "");
  V p2 = LLVMBuildMul(b, m64, LLVMBuildZExt(b, win[2], t64, ""), "");
  V p0 = LLVMBuildMul(b, mant, win[0], ""); /* only its low word counts */
  V c32 = KW(m, 64, 32);
  V mid = LLVMBuildAdd(b, LLVMBuildLShr(b, p2, c32, ""), LLVMBuildAnd(b, p1, KW(m, 64, 0xffffffffull), ""), "");
  V hi = LLVMBuildAdd(b, p0, LLVMBuildTrunc(b, LLVMBuildLShr(b, p1, c32, ""), m->it, ""), "");
  hi = LLVMBuildAdd(b, hi, LLVMBuildTrunc(b, LLVMBuildLShr(b, mid, c32, ""), m->it, ""), "");
  V lo = LLVMBuildTrunc(b, mid, m->it, "");
  /* k = the top two bits; f = the 62 below as fh 2^32 + fl, signed */
  V fh = LLVMBuildOr(b, LLVMBuildShl(b, hi, KI(m, 2), ""), LLVMBuildLShr(b, lo, KI(m, 30), ""), "");
  V fl = LLVMBuildAnd(b, lo, KI(m, 0x3fffffff), ""); /* (lo << 2) / 4 */
  V neg = LLVMBuildICmp(b, LLVMIntSLT, fh, KI(m, 0), "");
  *q = LLVMBuildAdd(b, LLVMBuildLShr(b, hi, KI(m, 30), ""), LLVMBuildZExt(b, neg, m->it, ""), "");
  V dh = LLVMBuildSIToFP(b, fh, d, ""), dl = LLVMBuildSIToFP(b, fl, d, "");
  V r = LLVMBuildFAdd(b, LLVMBuildFMul(b, dh, K64(m, PIO2 * 0x1p-32), ""),
                      LLVMBuildFMul(b, dl, K64(m, PIO2 * 0x1p-62), ""), "");
  V r32 = LLVMBuildFPTrunc(b, r, m->t, "");
  *c = LLVMBuildFPTrunc(b, LLVMBuildFSub(b, r, LLVMBuildFPExt(b, r32, d, ""), ""), m->t, "");
  return r32;
}

/* x = k pi/2 + r + c, |r| <= pi/4 (a little more near the midpoints),
 * c below an ulp of r, *q = k mod 4 (low bits), for every finite x:
 * Cody-Waite below 6144, Payne-Hanek above, on |x| with the signs put
 * back.  Vectors compute both and select per lane; scalars (the CUDA
 * backend's case) branch, so the long path costs only where a lane
 * needs it.  (The CPU's form calls the long path instead: below.) */
static void large_signed_f32(M *m, V x, V ax, V *r, V *q, V *c) {
  V rl = trig_reduce_large_f32(m, ax, q, c);
  V xneg = lt(m, x, 0);
  *r = sel(m, xneg, LLVMBuildFNeg(m->b, rl, ""), rl);
  *c = sel(m, xneg, LLVMBuildFNeg(m->b, *c, ""), *c);
  *q = LLVMBuildSelect(m->b, xneg, LLVMBuildNeg(m->b, *q, ""), *q, "");
}

static V trig_reduce_f32(M *m, V x, V *q, V *c) {
  V ax = fabs_(m, x), big = cmp(m, LLVMRealOGE, ax, K(m, F_TRIG_SMALL));
  V qs, ql, rl, cs, cl, rs = trig_reduce_small_f32(m, x, &qs, &cs);
  if (m->lanes) {
    large_signed_f32(m, x, ax, &rl, &ql, &cl);
    *q = LLVMBuildSelect(m->b, big, ql, qs, "");
    *c = sel(m, big, cl, cs);
    return sel(m, big, rl, rs);
  }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(m->b);
  LLVMValueRef fn = LLVMGetBasicBlockParent(pre);
  LLVMBasicBlockRef large = LLVMAppendBasicBlockInContext(m->ctx, fn, "trig_large"),
                    join = LLVMAppendBasicBlockInContext(m->ctx, fn, "trig_reduced");
  LLVMBuildCondBr(m->b, big, large, join);
  LLVMPositionBuilderAtEnd(m->b, large);
  large_signed_f32(m, x, ax, &rl, &ql, &cl);
  LLVMBasicBlockRef large_end = LLVMGetInsertBlock(m->b);
  LLVMBuildBr(m->b, join);
  LLVMPositionBuilderAtEnd(m->b, join);
  V r = LLVMBuildPhi(m->b, m->t, "r"), qp = LLVMBuildPhi(m->b, m->it, "q");
  V cp = LLVMBuildPhi(m->b, m->t, "c");
  V rv[2] = {rs, rl}, qv[2] = {qs, ql}, cv[2] = {cs, cl};
  LLVMBasicBlockRef from[2] = {pre, large_end};
  LLVMAddIncoming(r, rv, from, 2);
  LLVMAddIncoming(qp, qv, from, 2);
  LLVMAddIncoming(cp, cv, from, 2);
  *q = qp, *c = cp;
  return r;
}

/* sin(r + c) = r + (r z S(z) + c w), z = r^2, w = 1 - z/2 (~ cos r),
 * |r| <= 0.786: S of degree 3, weighted error 1.6e-10 relative to sin r. */
static V sin_poly_f32(M *m, V r, V c, V z, V w) {
  static const double s[4] = {-0x1.555556p-3, 0x1.111174p-7, -0x1.a05964p-13, 0x1.7c3474p-19};
  return add(m, r, fmadd(m, mul(m, r, z), poly(m, z, s, 4), mul(m, c, w)));
}

/* cos(r + c) = w + ((1 - w) - z/2 + z^2 C(z) - c r), w = 1 - z/2 (its
 * rounding error added back exactly): C of degree 3, weighted error
 * 7.3e-12. */
static V cos_poly_f32(M *m, V r, V c, V z, V hz, V w) {
  static const double cc[4] = {0x1.555556p-5, -0x1.6c175ep-10, 0x1.a071bap-16, -0x1.361664p-22};
  V corr = sub(m, sub(m, sub(m, K(m, 1), w), hz), mul(m, c, r));
  return add(m, w, fmadd(m, mul(m, z, z), poly(m, z, cc, 4), corr));
}

/* tan(r + c) = r + (r z T(z) + c (1 + z)): T of degree 6, weighted error
 * 1.3e-9 relative to tan r; odd k gives -1/tan. */
static V tan_poly_f32(M *m, V r, V c, V z) {
  static const double t[7] = {0x1.55556p-2,   0x1.110d9cp-3, 0x1.bada56p-5, 0x1.5cb93p-6,
                              0x1.62f992p-7, 0x1.7b1e88p-14, 0x1.1ed8b6p-8};
  return add(m, r, fmadd(m, mul(m, r, z), poly(m, z, t, 7), fmadd(m, c, z, c)));
}

/* sin and cos of x = q pi/2 + r + c (the quadrant applied), into sn and
 * cs where not NULL: both polynomials, each picked by q's parity and
 * signed by its next bit. */
static void sincos_reduced_f32(M *m, V r, V c, V q, V *sn, V *cs) {
  V z = mul(m, r, r), odd = bit(m, q, 1), hz = mul(m, z, K(m, 0.5)), w = sub(m, K(m, 1), hz);
  V s = sin_poly_f32(m, r, c, z, w), co = cos_poly_f32(m, r, c, z, hz, w);
  if (sn) {
    V v = sel(m, odd, co, s);
    *sn = sel(m, bit(m, q, 2), LLVMBuildFNeg(m->b, v, ""), v);
  }
  if (cs) {
    V v = sel(m, odd, s, co), nq = LLVMBuildAdd(m->b, q, KI(m, 1), "");
    *cs = sel(m, bit(m, nq, 2), LLVMBuildFNeg(m->b, v, ""), v);
  }
}

/* tan of x = q pi/2 + r + c: -1/tan r for odd q. */
static V tan_reduced_f32(M *m, V r, V c, V q) {
  V z = mul(m, r, r), odd = bit(m, q, 1), t = tan_poly_f32(m, r, c, z);
  return sel(m, odd, fdiv(m, K(m, -1), t), t);
}

/* ---- the long reduction out of line (the CPU) ---------------------------------
 * The loop vectorizer cannot branch per vector, so inline the long
 * reduction would run for every lane (about three times the rest of sin
 * and cos).  With CgMath.trig_lanes set, sin, cos and tan take the short
 * reduction inline and call a function for the long one's results:
 *   i64 tdsl.math.sincos_long.f32(float x)   sin x | cos x << 32 (bits)
 *   float tdsl.math.tan_long.f32(float x)
 * (memory(none), so sin and cos of one x share one call; noinline, so
 * the loop vectorizer sees the call), and their vector variants of 2 to
 * 4 trig_lanes lanes, which it calls instead (the attribute
 * "vector-function-abi-variant", LLVM's internal vector ABI).  Each
 * variant is only the test whether a lane has |x| >= F_TRIG_SMALL and,
 * where one has (an unlikely branch), a call of its body (".body"), which
 * computes the long path; it returns 0 otherwise, and the results of
 * the lanes below are unused.  The variants are always inlined, by the
 * second half of the -O2 pipeline (cpu/machine.c), after the loop
 * vectorizer has called them: the vector loop tests and branches around
 * the call instead of calling a function per vector and spilling its
 * registers around it.  Only the body of trig_lanes lanes (the ISA's f32
 * register) holds the long path; narrower bodies widen their argument
 * and call it, wider ones call the next narrower variant on each half,
 * and the scalar function (which keeps the test itself) the narrowest
 * variant: all of them are joined by direct calls (so cpu/split.c keeps
 * them in one part) and the variants kept alive for the vectorizer by
 * llvm.compiler.used.  Names get CgMath.suffix and the functions the
 * ISA's target attributes (a --target=x86-64 object builds one set per
 * ISA level). */

#define TRIG_MIN_LANES 2

/* Appends fn to llvm.compiler.used (kept until code generation). */
static void compiler_used(M *m, V fn) {
  LLVMTypeRef ptr = LLVMPointerTypeInContext(m->ctx, 0);
  V old = LLVMGetNamedGlobal(m->mod, "llvm.compiler.used");
  unsigned n = old ? (unsigned)LLVMGetNumOperands(LLVMGetInitializer(old)) : 0;
  V *el = malloc(sizeof *el * (n + 1));
  if (!el) ICE("out of memory");
  for (unsigned i = 0; i < n; i++) el[i] = LLVMGetOperand(LLVMGetInitializer(old), i);
  el[n] = fn;
  if (old) LLVMDeleteGlobal(old);
  V g = LLVMAddGlobal(m->mod, LLVMArrayType2(ptr, n + 1), "llvm.compiler.used");
  LLVMSetLinkage(g, LLVMAppendingLinkage);
  LLVMSetSection(g, "llvm.metadata");
  LLVMSetInitializer(g, LLVMConstArray2(ptr, el, n + 1));
  free(el);
}

/* body: the name of a variant's out-of-line part (long_fn). */
static void long_name(const CgMath *cm, int tan, unsigned lanes, int body, char *buf, size_t n) {
  char l[16] = "";
  if (lanes) snprintf(l, sizeof l, ".v%u", lanes);
  snprintf(buf, n, "tdsl.math.%s_long.f32%s%s%s", tan ? "tan" : "sincos", l, body ? ".body" : "",
           cm->suffix ? cm->suffix : "");
}

/* m's shape for f32 scalars (lanes 0) or vectors. */
static M f32_shape(const M *m, unsigned lanes) {
  M s = *m;
  LLVMTypeRef f = LLVMFloatTypeInContext(m->ctx), i = LLVMInt32TypeInContext(m->ctx);
  s.ef = f, s.ei = i, s.lanes = lanes;
  s.t = lanes ? LLVMVectorType(f, lanes) : f;
  s.it = lanes ? LLVMVectorType(i, lanes) : i;
  return s;
}

static LLVMTypeRef long_ret_t(M *m, int tan, unsigned lanes) {
  LLVMTypeRef e = tan ? LLVMFloatTypeInContext(m->ctx) : LLVMInt64TypeInContext(m->ctx);
  return lanes ? LLVMVectorType(e, lanes) : e;
}

/* The long path's result for the lanes of m (F_TRIG_SMALL <= |x|; any
 * value elsewhere): sin | cos << 32 as i64, or tan. */
static V long_result(M *m, V x, int tan) {
  V r, q, c;
  large_signed_f32(m, x, fabs_(m, x), &r, &q, &c);
  if (tan) return tan_reduced_f32(m, r, c, q);
  V sn, cs;
  sincos_reduced_f32(m, r, c, q, &sn, &cs);
  LLVMTypeRef t64 = int_t(m, 64);
  V lo = LLVMBuildZExt(m->b, bits(m, sn), t64, ""), hi = LLVMBuildZExt(m->b, bits(m, cs), t64, "");
  return LLVMBuildOr(m->b, lo, LLVMBuildShl(m->b, hi, KW(m, 64, 32), ""), "");
}

static V long_fn(M *m, int tan, unsigned lanes, int body);

/* Lanes i..i+n-1 of v (`have` lanes; n 0: lane i as a scalar), or v
 * widened to n lanes with zeros (defined values, which need no long
 * path; their results are unused). */
static V lanes_of(M *m, V v, unsigned have, unsigned i, unsigned n) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(m->ctx);
  if (!n) return LLVMBuildExtractElement(m->b, v, LLVMConstInt(i32, i, 0), "");
  if (!have) {
    V z = LLVMConstNull(LLVMVectorType(LLVMTypeOf(v), n));
    return LLVMBuildInsertElement(m->b, z, v, LLVMConstInt(i32, 0, 0), "");
  }
  V idx[64];
  for (unsigned k = 0; k < n; k++) idx[k] = LLVMConstInt(i32, i + k < have ? i + k : have, 0);
  return LLVMBuildShuffleVector(m->b, v, LLVMConstNull(LLVMTypeOf(v)), LLVMConstVector(idx, n), "");
}

static V call_fn(M *m, V fn, V x) {
  return LLVMBuildCall2(m->b, LLVMGlobalGetValueType(fn), fn, &x, 1, "");
}

/* The body of the long function of `lanes` lanes (0: the scalar one;
 * body: a variant's out-of-line part, which computes without the test). */
static void long_body(M *m, V fn, int tan, unsigned lanes, int body) {
  const CgMath *cm = m->cm;
  LLVMBuilderRef b = LLVMCreateBuilderInContext(m->ctx);
  M s = f32_shape(m, lanes);
  s.b = b;
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(m->ctx, fn, "entry");
  LLVMPositionBuilderAtEnd(b, entry);
  V x = LLVMGetParam(fn, 0);
  if (lanes && !body) { /* the variant: the test, the rest called (cold) */
    LLVMBasicBlockRef lng = LLVMAppendBasicBlockInContext(m->ctx, fn, "long");
    LLVMBasicBlockRef none = LLVMAppendBasicBlockInContext(m->ctx, fn, "none");
    V big = cmp(&s, LLVMRealOGE, fabs_(&s, x), K(&s, F_TRIG_SMALL));
    big = intr(&s, "llvm.vector.reduce.or", &big, 1);
    V br = LLVMBuildCondBr(b, big, lng, none);
    LLVMMetadataRef w[3] = {LLVMMDStringInContext2(m->ctx, "branch_weights", 14),
                            LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(m->ctx), 1, 0)),
                            LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(m->ctx), 1 << 20, 0))};
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(m->ctx, "prof", 4),
                    LLVMMetadataAsValue(m->ctx, LLVMMDNodeInContext2(m->ctx, w, 3)));
    LLVMPositionBuilderAtEnd(b, none);
    LLVMBuildRet(b, LLVMConstNull(long_ret_t(&s, tan, lanes)));
    LLVMPositionBuilderAtEnd(b, lng);
    LLVMBuildRet(b, call_fn(&s, long_fn(m, tan, lanes, 1), x));
    LLVMDisposeBuilder(b);
    return;
  }
  if (!lanes) { /* the scalar function: returns at once below F_TRIG_SMALL */
    LLVMBasicBlockRef lng = LLVMAppendBasicBlockInContext(m->ctx, fn, "long");
    LLVMBasicBlockRef none = LLVMAppendBasicBlockInContext(m->ctx, fn, "none");
    LLVMBuildCondBr(b, cmp(&s, LLVMRealOGE, fabs_(&s, x), K(&s, F_TRIG_SMALL)), lng, none);
    LLVMPositionBuilderAtEnd(b, none);
    LLVMBuildRet(b, LLVMConstNull(long_ret_t(&s, tan, lanes)));
    LLVMPositionBuilderAtEnd(b, lng);
  }
  unsigned core = cm->trig_lanes;
  V r;
  if (lanes == core) {
    r = long_result(&s, x, tan);
  } else if (lanes < core) { /* widen to the next variant (the scalar: the narrowest) */
    unsigned to = lanes ? lanes * 2 : TRIG_MIN_LANES;
    V w = call_fn(&s, long_fn(m, tan, to, lanes != 0), lanes_of(&s, x, lanes, 0, to));
    r = lanes_of(&s, w, to, 0, lanes);
  } else { /* each half through the next narrower variant (its test skips a half without) */
    unsigned h = lanes / 2;
    V f = long_fn(m, tan, h, 0);
    V lo = call_fn(&s, f, lanes_of(&s, x, lanes, 0, h));
    V hi = call_fn(&s, f, lanes_of(&s, x, lanes, h, h));
    V idx[64];
    LLVMTypeRef i32 = LLVMInt32TypeInContext(m->ctx);
    for (unsigned k = 0; k < lanes; k++) idx[k] = LLVMConstInt(i32, k, 0);
    r = LLVMBuildShuffleVector(b, lo, hi, LLVMConstVector(idx, lanes), "");
  }
  LLVMBuildRet(b, r);
  LLVMDisposeBuilder(b);
}

/* The long function of `lanes` lanes (0: the scalar one with the
 * variants' mapping; body: a variant's out-of-line part), created with
 * its body at the first use.  A variant is its test, always inlined (by
 * the -O2 pipeline's second half, after the loop vectorizer has called
 * it), and a call of its body where a lane needs the long path: the loop
 * then branches around the call instead of making it for every vector. */
static V long_fn(M *m, int tan, unsigned lanes, int body) {
  const CgMath *cm = m->cm;
  char name[96];
  long_name(cm, tan, lanes, body, name, sizeof name);
  V fn = LLVMGetNamedFunction(m->mod, name);
  if (fn) return fn;
  LLVMTypeRef xt = LLVMFloatTypeInContext(m->ctx);
  if (lanes) xt = LLVMVectorType(xt, lanes);
  fn = LLVMAddFunction(m->mod, name, LLVMFunctionType(long_ret_t(m, tan, lanes), &xt, 1, 0));
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  static const char *const attrs[] = {"noinline", "nounwind", "willreturn", "memory"};
  int inl = lanes && !body;
  if (inl) cg_add_attr(m->ctx, fn, LLVMAttributeFunctionIndex, "alwaysinline");
  for (int i = inl; i < 4; i++) cg_add_attr(m->ctx, fn, LLVMAttributeFunctionIndex, attrs[i]); /* memory 0: memory(none) */
  if (cm->cpu) cg_add_str_attr(m->ctx, fn, "target-cpu", cm->cpu);
  if (cm->features) cg_add_str_attr(m->ctx, fn, "target-features", cm->features);
  if (!lanes) { /* the mapping to the variants, which exist before it is used */
    char map[1024] = "", vn[96];
    for (unsigned l = TRIG_MIN_LANES; l <= 4 * cm->trig_lanes && l <= 64; l *= 2) {
      compiler_used(m, long_fn(m, tan, l, 0));
      long_name(cm, tan, l, 0, vn, sizeof vn);
      size_t k = strlen(map);
      snprintf(map + k, sizeof map - k, "%s_ZGV_LLVM_N%uv_%s(%s)", k ? "," : "", l, name, vn);
    }
    cg_add_str_attr(m->ctx, fn, "vector-function-abi-variant", map);
  }
  long_body(m, fn, tan, lanes, body);
  return fn;
}

/* The long path's results for x (m's shape) through the out-of-line
 * function; NULL where it does not apply (a vector width without a
 * variant). */
static V long_call(M *m, V x, int tan) {
  unsigned l = m->lanes;
  if (l && (l < TRIG_MIN_LANES || l > 4 * m->cm->trig_lanes || l > 64 || (l & (l - 1))))
    return NULL;
  return call_fn(m, long_fn(m, tan, l, 0), x);
}

/* which: 0 sin, 1 cos, 2 tan. */
static V trig_f32(M *m, V x, int which) {
  V res = NULL, q, c, r;
  if (m->cm && m->cm->trig_lanes) { /* the short path inline, the long one called */
    V lg = long_call(m, x, which == 2);
    if (lg) {
      r = trig_reduce_small_f32(m, x, &q, &c);
      if (which == 2) {
        res = tan_reduced_f32(m, r, c, q);
      } else {
        sincos_reduced_f32(m, r, c, q, which == 0 ? &res : NULL, which == 1 ? &res : NULL);
        if (which == 1) lg = LLVMBuildLShr(m->b, lg, KW(m, 64, 32), "");
        lg = from_bits(m, LLVMBuildTrunc(m->b, lg, m->it, ""));
      }
      res = sel(m, cmp(m, LLVMRealOGE, fabs_(m, x), K(m, F_TRIG_SMALL)), lg, res);
    }
  }
  if (!res) {
    r = trig_reduce_f32(m, x, &q, &c);
    if (which == 2) {
      res = tan_reduced_f32(m, r, c, q);
    } else {
      sincos_reduced_f32(m, r, c, q, which == 0 ? &res : NULL, which == 1 ? &res : NULL);
    }
  }
  res = sel(m, cmp(m, LLVMRealOLT, fabs_(m, x), K(m, INFINITY)), res, K(m, NAN));
  return which == 1 ? res : keep_zero(m, x, res);
}

/* ---- f32 atan, atan2 --------------------------------------------------------- */

#define F_PIO2_HI 0x1.921fb6p+0 /* pi/2 = F_PIO2_HI + F_PIO2_LO within 2^-50 */
#define F_PIO2_LO -0x1.777a5cp-25

/* atan t for t in [0, 1]: t + t z P(z), z = t^2, P of degree 8 (weighted
 * error 2.7e-9 relative to atan t). */
static V atan01_f32(M *m, V t) {
  static const double c[9] = {-0x1.55553ep-2, 0x1.9991e4p-3, -0x1.242084p-3,
                              0x1.c08c1ap-4,  -0x1.580814p-4, 0x1.da24cap-5,
                              -0x1.fd6fbcp-6, 0x1.6410e4p-7, -0x1.d32dacp-10};
  V z = mul(m, t, t);
  return fmadd(m, mul(m, t, z), poly(m, z, c, 9), t);
}

/* atan |x| = atan t with t = |x| <= 1, or pi/2 - atan(1/|x|) above (one
 * division either way); the sign is x's (inf gives pi/2, NaN stays). */
static V atan_f32(M *m, V x) {
  V a = fabs_(m, x), inv = gt(m, a, 1);
  V t = fdiv(m, sel(m, inv, K(m, 1), a), sel(m, inv, a, K(m, 1)));
  V at = atan01_f32(m, t);
  V r = sel(m, inv, add(m, K(m, F_PIO2_HI), sub(m, K(m, F_PIO2_LO), at)), at);
  return copysign_(m, r, x);
}

/* atan2(y, x), C99's: atan2_quadrants with atan01_f32 and pi/2 in f32
 * parts. */
static V atan2_f32(M *m, V y, V x) {
  return atan2_quadrants(m, y, x, atan01_f32, F_PIO2_HI, F_PIO2_LO);
}

/* ---- f32 sinh, cosh ---------------------------------------------------------- */

/* e^a / 2 for a in [0, 89.5] (NaN passes): exp's reduction with k - 1. */
static V half_exp_f32(M *m, V a) {
  V kf, k, r = exp_reduce_f32(m, a, &kf, &k);
  V p = exp_r_f32(m, r);
  return scale_f32(m, p, LLVMBuildSub(m->b, k, KI(m, 1), ""));
}

/* sinh |x|: below 1, a + a^3 (1/3! + a^2/5! + ... a^8/11!) (the next
 * term below 2^-32 relative); from 1, h - 1/(4h) with h = e^a / 2 (the
 * second term at most 0.16 of the first, so exp's error stays about 1
 * ulp); inf where h overflows. */
static V sinh_f32(M *m, V x) {
  double c[5];
  long double f = 1;
  for (int n = 3, i = 0; n <= 11; n += 2, i++) f *= (long double)n * (n - 1), c[i] = (double)(float)(1.0L / f);
  V a = fabs_(m, x), z = mul(m, a, a);
  V small = fmadd(m, mul(m, a, z), poly(m, z, c, 5), a);
  V h = half_exp_f32(m, minc(m, a, 89.5));
  V big = sub(m, h, fdiv(m, K(m, 0.25), h));
  return copysign_(m, sel(m, lt(m, a, 1), small, big), x);
}

/* cosh |x| = h + 1/(4h), h = e^a / 2: both terms positive. */
static V cosh_f32(M *m, V x) {
  V h = half_exp_f32(m, minc(m, fabs_(m, x), 89.5));
  return add(m, h, fdiv(m, K(m, 0.25), h));
}

/* ---- f32 asin, acos, asinh, acosh, atanh, computed in f64 ---------------------
 * As pow: M.t is f64, the input an exact f32, the caller rounds once;
 * each formula's cancellations are harmless in f64, so short
 * polynomials (the f32 fit for asin) give about 0.5 ulp of f32. */

/* asin t for t in [0, 1/2]: t + t z P(z), P of degree 5 (weighted error
 * 2.9e-10 relative to asin t). */
static V asin_small_for_f32(M *m, V t, V z) {
  static const double c[6] = {0x1.55554cp-3, 0x1.3338acp-4, 0x1.6ca744p-5,
                              0x1.04d452p-5, 0x1.d4fb36p-7, 0x1.34db14p-5};
  return fmadd(m, mul(m, t, z), poly(m, z, c, 6), t);
}

/* asin |x| below 1/2 directly, above pi/2 - 2 asin(sqrt((1 - |x|)/2));
 * |x| > 1 gives the sqrt of a negative number, NaN.  acos x: pi/2 -
 * asin x below 1/2, 2 asin(sqrt((1 - x)/2)) above, pi - that below -1/2. */
static V asin_acos_for_f32(M *m, V x, int is_acos) {
  V a = fabs_(m, x), small = lt(m, a, 0.5);
  V zs = mul(m, a, a), zb = mul(m, sub(m, K(m, 1), a), K(m, 0.5));
  V z = sel(m, small, zs, zb), t = sel(m, small, a, sqrt_(m, zb));
  V u = asin_small_for_f32(m, t, z); /* asin a (small) or asin sqrt(zb) */
  V neg = lt(m, x, 0);
  if (!is_acos) {
    V r = sel(m, small, u, sub(m, K(m, PIO2), add(m, u, u)));
    return copysign_(m, r, x);
  }
  V su = copysign_(m, u, x);
  V big = sel(m, neg, sub(m, K(m, 2 * PIO2), add(m, u, u)), add(m, u, u));
  return sel(m, small, sub(m, K(m, PIO2), su), big);
}

/* ln v for v > 0 (log_special's values otherwise), about 2^-41 relative. */
static V ln_for_f32(M *m, V v) { return mul(m, log2_for_f32(m, v), K(m, LN2)); }

/* asinh |x| = ln(a + sqrt(a^2 + 1)); below 2^-10 a - a^3/6 (1 + a
 * would lose a's low bits); the sign is x's. */
static V asinh_for_f32(M *m, V x) {
  V a = fabs_(m, x), z = mul(m, a, a);
  V r = ln_for_f32(m, add(m, a, sqrt_(m, add(m, z, K(m, 1)))));
  V small = fmadd(m, mul(m, a, z), K(m, -1.0 / 6), a);
  return copysign_(m, sel(m, lt(m, a, 0x1p-10), small, r), x);
}

/* acosh x = ln(x + sqrt((x - 1)(x + 1))): x - 1, x + 1 and their
 * product are exact in f64; NaN below 1. */
static V acosh_for_f32(M *m, V x) {
  V w = mul(m, sub(m, x, K(m, 1)), add(m, x, K(m, 1)));
  V r = ln_for_f32(m, add(m, x, sqrt_(m, w)));
  return sel(m, lt(m, x, 1), K(m, NAN), r);
}

/* atanh |x| = ln((1 + a) / (1 - a)) / 2 (1 +- a exact in f64; a > 1
 * gives the log of a negative number, NaN; 1 gives inf); below 2^-10
 * a + a^3/3. */
static V atanh_for_f32(M *m, V x) {
  V a = fabs_(m, x), z = mul(m, a, a);
  V r = mul(m, K(m, 0.5), ln_for_f32(m, fdiv(m, add(m, K(m, 1), a), sub(m, K(m, 1), a))));
  V small = fmadd(m, mul(m, a, z), K(m, 1.0 / 3), a);
  return copysign_(m, sel(m, lt(m, a, 0x1p-10), small, r), x);
}

/* The f32 algorithm of fn, or NULL where f32 is computed in f64 (by
 * dispatch, or by the f32-accuracy functions cg_math picks). */
static V dispatch_f32(M *m, MathFn fn, V x, V y) {
  switch (fn) {
  case MATH_EXP: return exp_f32(m, x);
  case MATH_EXP2: return exp2_f32(m, x);
  case MATH_EXPM1: return expm1_f32(m, x);
  case MATH_LOG: return log_f32(m, x, 0);
  case MATH_LOG2: return log_f32(m, x, 2);
  case MATH_LOG10: return log_f32(m, x, 10);
  case MATH_LOG1P: return log1p_f32(m, x);
  case MATH_TANH: return tanh_f32(m, x);
  case MATH_SIGMOID: return sigmoid_f32(m, x);
  case MATH_ERF: return erf_f32(m, x);
  case MATH_SIN: return trig_f32(m, x, 0);
  case MATH_COS: return trig_f32(m, x, 1);
  case MATH_TAN: return trig_f32(m, x, 2);
  case MATH_ATAN: return atan_f32(m, x);
  case MATH_ATAN2: return atan2_f32(m, x, y);
  case MATH_SINH: return sinh_f32(m, x);
  case MATH_COSH: return cosh_f32(m, x);
  default: return NULL;
  }
}

/* ---- the interface ----------------------------------------------------------- */

static V dispatch(M *m, MathFn fn, V x, V y) {
  switch (fn) {
  case MATH_EXP: return exp64(m, x, NULL);
  case MATH_EXP2: return exp2_64(m, x);
  case MATH_EXPM1: return expm1_64(m, x);
  case MATH_LOG: return log64(m, x, 0);
  case MATH_LOG2: return log64(m, x, 2);
  case MATH_LOG10: return log64(m, x, 10);
  case MATH_LOG1P: return log1p64(m, x);
  case MATH_SIN: return trig64(m, x, 0);
  case MATH_COS: return trig64(m, x, 1);
  case MATH_TAN: return trig64(m, x, 2);
  case MATH_TANH: return tanh64(m, x);
  case MATH_SIGMOID: return sigmoid64(m, x);
  case MATH_ERF: return erf64(m, x);
  case MATH_POW: return pow64(m, x, y);
  case MATH_ASIN: return asin64(m, x);
  case MATH_ACOS: return acos64(m, x);
  case MATH_ATAN: return atan64(m, x);
  case MATH_SINH: return sinh64(m, x);
  case MATH_COSH: return cosh64(m, x);
  case MATH_ASINH: return asinh64(m, x);
  case MATH_ACOSH: return acosh64(m, x);
  case MATH_ATANH: return atanh64(m, x);
  case MATH_ATAN2: return atan2_64(m, x, y);
  default: ICE("math function %d", (int)fn);
  }
}

LLVMValueRef cg_math(CgMath *cm, MathFn fn, LLVMValueRef x, LLVMValueRef y) {
  LLVMTypeRef t = LLVMTypeOf(x), el = t;
  M m = {cm->ctx, cm->mod, cm->b, NULL, NULL, NULL, NULL, 0, cm};
  if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) {
    el = LLVMGetElementType(t);
    m.lanes = LLVMGetVectorSize(t);
    if (m.lanes > 64) ICE("math on a vector of %u lanes", m.lanes);
  }
  LLVMTypeRef f64 = LLVMDoubleTypeInContext(cm->ctx), i64 = LLVMInt64TypeInContext(cm->ctx);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(cm->ctx), i32 = LLVMInt32TypeInContext(cm->ctx);
  if (el != f64 && el != f32) ICE("math on a type other than f32/f64");
  if (el == f32) {
    M s = m;
    s.ef = f32, s.ei = i32;
    s.t = t, s.it = m.lanes ? LLVMVectorType(i32, m.lanes) : i32;
    V r = dispatch_f32(&s, fn, x, y);
    if (r) return r;
  }
  m.ef = f64, m.ei = i64;
  m.t = m.lanes ? LLVMVectorType(f64, m.lanes) : f64;
  m.it = m.lanes ? LLVMVectorType(i64, m.lanes) : i64;
  if (el == f64) return dispatch(&m, fn, x, y);
  V xd = LLVMBuildFPExt(cm->b, x, m.t, "");
  V yd = y ? LLVMBuildFPExt(cm->b, y, m.t, "") : NULL;
  V r;
  switch (fn) { /* f32 functions computed in f64 to f32 accuracy */
  case MATH_POW: r = pow_for_f32(&m, xd, yd); break;
  case MATH_ASIN: r = asin_acos_for_f32(&m, xd, 0); break;
  case MATH_ACOS: r = asin_acos_for_f32(&m, xd, 1); break;
  case MATH_ASINH: r = asinh_for_f32(&m, xd); break;
  case MATH_ACOSH: r = acosh_for_f32(&m, xd); break;
  case MATH_ATANH: r = atanh_for_f32(&m, xd); break;
  default: r = dispatch(&m, fn, xd, yd);
  }
  return LLVMBuildFPTrunc(cm->b, r, t, "");
}

const char *math_fn_name(MathFn fn) {
  static const char *names[MATH_NFNS] = {
      "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh",
      "sigmoid", "erf", "pow", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
      "atanh", "atan2"};
  return fn >= 0 && fn < MATH_NFNS ? names[fn] : "?";
}
