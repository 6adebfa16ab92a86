/* math.h — the math layer: transcendental functions emitted as plain
 * LLVM IR (adds, multiplies, fmuladd, divisions, sqrt, floor, fabs,
 * copysign, bit casts, selects), with no call to libm, libdevice or an
 * llvm.* math intrinsic that lowers to a libcall.  So the same IR is
 * valid on every target, and LLVM's loop vectorizer widens it on the
 * CPU (where f32 sin, cos and tan call their long argument reduction
 * out of line, in internal functions of the module: CgMath.trig_lanes).
 * Values may be scalars or vectors of f32 or f64.  exp, exp2,
 * expm1, the log family, tanh, sigmoid, erf, sin, cos, tan, atan,
 * atan2, sinh and cosh have f32 algorithms computed in f32; the other
 * f32 functions (pow, asin, acos and the inverse hyperbolic ones) are
 * computed in f64 with polynomials sized for f32 and rounded once
 * (f16/bf16 compute in f32, spec §5.5).  The measured errors are in
 * docs/numerics.md.
 * Needs: llvm-c (LLVM 19).  Used by: codegen/expr.c, tests. */
#ifndef TDSL_CODEGEN_MATH_H
#define TDSL_CODEGEN_MATH_H

#include <llvm-c/Core.h>

typedef enum MathFn {
  MATH_NONE = -1, /* not a math-layer function (ir/ops.h's MATH column) */
  MATH_EXP, MATH_EXP2, MATH_EXPM1, MATH_LOG, MATH_LOG2, MATH_LOG10, MATH_LOG1P,
  MATH_SIN, MATH_COS, MATH_TAN, MATH_TANH, MATH_SIGMOID, MATH_ERF, MATH_POW,
  MATH_ASIN, MATH_ACOS, MATH_ATAN, MATH_SINH, MATH_COSH, MATH_ASINH, MATH_ACOSH,
  MATH_ATANH, MATH_ATAN2, MATH_NFNS
} MathFn;

/* Where to emit: the builder is positioned where the result is needed. */
typedef struct CgMath {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  int opt; /* -O level (no function depends on it today) */
  /* The CPU: f32 sin, cos and tan call their long argument reduction
   * out of line, in functions with vector variants that the loop
   * vectorizer calls (math.c, "the long reduction out of line");
   * trig_lanes is the ISA's f32 lanes per vector register (4, 8, 16),
   * 0 for the inline forms (CUDA: a branch).  cpu and features, when
   * set, become those functions' target-cpu and target-features, and
   * suffix is appended to their names (cpu/isa.c's variants). */
  unsigned trig_lanes;
  const char *cpu, *features, *suffix;
  /* A function `float (float a, float b)` within 2 ulp of a / b for
   * normal b, or NULL.  When set, the scalar f32 divisions of tanh and
   * of the layer's sigmoid (MATH_SIGMOID; the ops sigmoid and silu keep
   * PyTorch's 1 / (1 + exp(-x)), codegen/expr.c), whose divisors lie in
   * [1, 2^28], take the reciprocal from it and correct the quotient with
   * one fused multiply-add (math.c, div_by_normal): within an ulp, and
   * no IEEE division, which is a subroutine behind a branch on CUDA
   * (CUDA: llvm.nvvm.div.approx.ftz.f). */
  const char *approx_div;
} CgMath;

/* fn(x), or fn(x, y) for MATH_POW and MATH_ATAN2 (y has x's type; NULL
 * otherwise; atan2(x, y) is C's: the angle of the point (y, x)).  For a
 * scalar x without trig_lanes, sin, cos and tan branch to their long
 * argument reduction, so the builder may end in a new block. */
LLVMValueRef cg_math(CgMath *m, MathFn fn, LLVMValueRef x, LLVMValueRef y);

/* The function's name as C's libm spells it for double ("exp", ...;
 * "sigmoid" has none). */
const char *math_fn_name(MathFn fn);

#endif
