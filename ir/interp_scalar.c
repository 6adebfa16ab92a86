/* interp_scalar.c — the scalar semantics of the elementwise ops for the
 * reference interpreter, as PyTorch eager computes them: float math in
 * double (libm; f32 ops round where PyTorch's f32 kernel would), integer
 * math in 64-bit two's complement wrapped to the result dtype, with
 * Python's floor division and modulo, PyTorch's powi, lerp, logaddexp,
 * the activations' parameters (fattr) and the comparisons.
 *
 * Deliberate differences from PyTorch (which raises instead): integer
 * `x // 0` and `x % 0` give 0; a negative integer exponent follows
 * PyTorch's tensor-tensor `powi` (1 for base 1, +-1 for base -1, else 0).
 *
 * Needs: ops.h (dtype rules, op kinds), dtype.h.
 * Used by: interp.c (eval_elementwise, and the wrap of stored integers). */
#include "interp_scalar.h"

#include <math.h>
#include <string.h>

#define INTERP_SQRT1_2 0.70710678118654752440
#define INTERP_SQRT_2_PI 0.79788456080286535588 /* sqrt(2/pi) */

/* Two's-complement wrap of v into integer dtype t (bool: != 0). */
int64_t interp_int_wrap(DType t, uint64_t v) {
  if (t == DT_BOOL) return v != 0;
  int bits = 8 * dtype_size(t);
  if (bits < 64) {
    uint64_t mask = (UINT64_C(1) << bits) - 1;
    v &= mask;
    if (dtype_is_signed(t) && (v >> (bits - 1))) v |= ~mask;
  }
  int64_t r;
  memcpy(&r, &v, sizeof r);
  return r;
}

static double gelu(double x, bool approx) {
  if (!approx) return x * 0.5 * (1.0 + erf(x * INTERP_SQRT1_2));
  double inner = INTERP_SQRT_2_PI * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + tanh(inner));
}

/* min(max(x, 0), 6), keeping NaN (PyTorch's hardswish, hardsigmoid). */
static double relu6(double x) { return x < 0 ? 0 : x > 6 ? 6 : x; }

/* f32: the op computes in f32 (f32, f16, bf16): where an intermediate
 * may overflow f32, it is rounded to f32 as PyTorch's kernel would. */
static double unary_f(Op op, int flags, const double *fa, bool f32, double x) {
  switch (op) {
  case OP_NEG: return -x;
  case OP_ABS: return fabs(x);
  case OP_EXP: return exp(x);
  case OP_LOG: return log(x);
  case OP_LOG1P: return log1p(x);
  case OP_EXPM1: return expm1(x);
  case OP_SQRT: return sqrt(x);
  case OP_RSQRT: return 1.0 / sqrt(x);
  case OP_SIN: return sin(x);
  case OP_COS: return cos(x);
  case OP_TANH: return tanh(x);
  case OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case OP_RELU: return isnan(x) ? x : x > 0 ? x : 0.0;
  case OP_GELU: return gelu(x, flags & IRF_TANH);
  case OP_SILU: return x / (1.0 + exp(-x));
  case OP_ERF: return erf(x);
  case OP_FLOOR: return floor(x);
  case OP_CEIL: return ceil(x);
  case OP_ROUND: return nearbyint(x); /* default mode: half to even */
  case OP_SIGN: return (double)((0 < x) - (x < 0)); /* NaN -> 0 as PyTorch */
  case OP_RECIPROCAL: return 1.0 / x;
  case OP_TAN: return tan(x);
  case OP_ASIN: return asin(x);
  case OP_ACOS: return acos(x);
  case OP_ATAN: return atan(x);
  case OP_SINH: return sinh(x);
  case OP_COSH: return cosh(x);
  case OP_ASINH: return asinh(x);
  case OP_ACOSH: return acosh(x);
  case OP_ATANH: return atanh(x);
  case OP_EXP2: return exp2(x);
  case OP_LOG2: return log2(x);
  case OP_LOG10: return log10(x);
  case OP_TRUNC: return trunc(x);
  case OP_FRAC: return x - trunc(x);
  case OP_SOFTPLUS: return x * fa[0] > fa[1] ? x : log1p(exp(x * fa[0])) / fa[0];
  case OP_LEAKY_RELU: return x > 0 ? x : x * fa[0];
  case OP_ELU: return x <= 0 ? expm1(x) * fa[0] : x;
  case OP_HARDTANH: x = x < fa[0] ? fa[0] : x; return x > fa[1] ? fa[1] : x; /* NaN stays */
  case OP_HARDSWISH: return (f32 ? (float)(x * relu6(x + 3)) : x * relu6(x + 3)) / 6;
  case OP_HARDSIGMOID: return relu6(x + 3) / 6;
  case OP_MISH: return x * tanh(log1p(exp(x)));
  case OP_NAN_TO_NUM: return isnan(x) ? fa[0] : x == INFINITY ? fa[1] : x == -INFINITY ? fa[2] : x;
  default: ICE("unary %s on a float dtype", op_name(op));
  }
}

static uint64_t unary_i(Op op, DType dt, const double *fa, int64_t a) {
  uint64_t u = (uint64_t)a;
  switch (op) {
  case OP_NEG: return 0 - u;
  case OP_ABS: return a < 0 ? 0 - u : u;
  case OP_RELU: return a > 0 ? u : 0;
  case OP_FLOOR:
  case OP_CEIL:
  case OP_ROUND:
  case OP_TRUNC:
  case OP_NAN_TO_NUM: return u;
  case OP_HARDTANH: /* bounds are in the dtype's range (sema); max wins */
    a = a < (int64_t)fa[0] ? (int64_t)fa[0] : a;
    return (uint64_t)(a > (int64_t)fa[1] ? (int64_t)fa[1] : a);
  case OP_SIGN: return (uint64_t)(int64_t)((0 < a) - (a < 0));
  case OP_BITNOT: return dt == DT_BOOL ? (uint64_t)!a : ~u;
  default: ICE("unary %s on an integer dtype", op_name(op));
  }
}

/* Python floor division and modulo of floats, as PyTorch computes them. */
static double floordiv_f(double a, double b) {
  if (b == 0) return a / b;
  double mod = fmod(a, b), div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return copysign(0.0, a / b);
  double fl = floor(div);
  return div - fl > 0.5 ? fl + 1.0 : fl;
}

static double mod_f(double a, double b) {
  double mod = fmod(a, b);
  if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
  return mod;
}

/* PyTorch's lerp: exact at both ends (weight 0 gives a, 1 gives b). */
static double lerp_f(double a, double b, double w) {
  return fabs(w) < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w);
}

/* PyTorch's logaddexp: equal infinities give themselves (not NaN). */
static double logaddexp_f(double a, double b) {
  if (isinf(a) && a == b) return a;
  double m = a < b ? b : a;
  return m + log1p(exp(-fabs(a - b)));
}

static double binary_f(Op op, double a, double b) {
  switch (op) {
  case OP_ADD: return a + b;
  case OP_SUB: return a - b;
  case OP_MUL: return a * b;
  case OP_DIV: return a / b;
  case OP_FLOORDIV: return floordiv_f(a, b);
  case OP_MOD: return mod_f(a, b);
  case OP_POW: return pow(a, b);
  case OP_MAXIMUM: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
  case OP_MINIMUM: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  case OP_ATAN2: return atan2(a, b);
  case OP_HYPOT: return hypot(a, b);
  case OP_FMOD: return fmod(a, b);
  case OP_COPYSIGN: return copysign(a, b);
  case OP_LOGADDEXP: return logaddexp_f(a, b);
  default: ICE("binary %s on a float dtype", op_name(op));
  }
}

/* PyTorch's powi: wrapping exponentiation by squaring. */
static uint64_t pow_i(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? (uint64_t)-1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)a;
  for (uint64_t e = (uint64_t)b; e; e >>= 1, x *= x)
    if (e & 1) r *= x;
  return r;
}

static uint64_t floordiv_i(int64_t a, int64_t b) {
  if (b == 0) return 0;                  /* PyTorch raises */
  if (b == -1) return 0 - (uint64_t)a;   /* wraps for INT64_MIN */
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  return (uint64_t)q;
}

static uint64_t mod_i(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;       /* x % 0: PyTorch raises */
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return (uint64_t)r;
}

static uint64_t binary_i(Op op, int64_t a, int64_t b) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case OP_ADD: return ua + ub;
  case OP_SUB: return ua - ub;
  case OP_MUL: return ua * ub;
  case OP_FLOORDIV: return floordiv_i(a, b);
  case OP_MOD: return mod_i(a, b);
  case OP_FMOD: return b == 0 || b == -1 ? 0 : (uint64_t)(a % b); /* x % 0: PyTorch raises */
  case OP_POW: return pow_i(a, b);
  case OP_MAXIMUM: return a > b ? ua : ub;
  case OP_MINIMUM: return a < b ? ua : ub;
  case OP_AND: return ua & ub;
  case OP_OR: return ua | ub;
  case OP_XOR: return ua ^ ub;
  default: ICE("binary %s on an integer dtype", op_name(op));
  }
}

static bool compare(Op op, bool isf, Scalar a, Scalar b) {
  if (isf) {
    switch (op) {
    case OP_EQ: return a.f == b.f;
    case OP_NE: return a.f != b.f;
    case OP_LT: return a.f < b.f;
    case OP_LE: return a.f <= b.f;
    case OP_GT: return a.f > b.f;
    default: return a.f >= b.f;
    }
  }
  switch (op) {
  case OP_EQ: return a.i == b.i;
  case OP_NE: return a.i != b.i;
  case OP_LT: return a.i < b.i;
  case OP_LE: return a.i <= b.i;
  case OP_GT: return a.i > b.i;
  default: return a.i >= b.i;
  }
}

/* One result element from its operands' elements x[0..2]. */
Scalar interp_elementwise(const IrValue *v, DType in, const Scalar *x) {
  Scalar r;
  bool isf = dtype_is_float(in);
  switch (op_kind(v->op)) {
  case IRK_UNARY:
    if (v->op == OP_LOGICAL_NOT)
      r.i = isf ? x[0].f == 0 : x[0].i == 0;
    else if (v->op == OP_ISNAN)
      r.i = isf && isnan(x[0].f);
    else if (v->op == OP_ISINF)
      r.i = isf && isinf(x[0].f);
    else if (v->op == OP_ISFINITE)
      r.i = !isf || isfinite(x[0].f);
    else if (isf)
      r.f = unary_f(v->op, v->flags, v->fattr, in != DT_F64, x[0].f);
    else
      r.i = (int64_t)unary_i(v->op, in, v->fattr, x[0].i);
    return r;
  case IRK_BINARY:
    if (isf)
      r.f = binary_f(v->op, x[0].f, x[1].f);
    else
      r.i = interp_int_wrap(v->dtype, binary_i(v->op, x[0].i, x[1].i));
    return r;
  case IRK_COMPARE: r.i = compare(v->op, isf, x[0], x[1]); return r;
  default:
    if (v->op == OP_LERP) {
      r.f = lerp_f(x[0].f, x[1].f, v->nargs == 3 ? x[2].f : v->fattr[0]);
      return r;
    }
    return x[0].i ? x[1] : x[2]; /* WHERE */
  }
}
