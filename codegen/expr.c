/* expr.c — scalar expressions of the loop form (loops.h LfExpr) as LLVM
 * values (or vectors where a load hook gives vectors: a GEMM prologue
 * along K, cpu/gemm_nest.c): element addresses, loads and stores in
 * storage types, unary,
 * binary and comparison ops with PyTorch's semantics, casts; the math
 * layer (math.h) for transcendental functions.  Target-independent: a
 * second backend evaluates the same expressions through cg_eval.
 * Needs: llvm_util.h, math.h.  Used by: cpu/ (nest bodies, GEMM prologues
 * and epilogues). */
#include <math.h>

#include "llvm_util.h"
#include "math.h"

/* ---- expressions -------------------------------------------------------- */

LLVMValueRef cg_eval(Cg *c, NestCtx *x, const LfExpr *e);

/* Address of a's element at the current loop variables; n: how many loop
 * variables a's strides cover (loads: all, stores: the outer ones). */
LLVMValueRef cg_address(Cg *c, NestCtx *x, const LfAccess *a, DType dt, int n) {
  /* c->idx32: every term in 32 bits (wrapping; the sum fits, cuda/variant.c) */
  LLVMTypeRef it = c->idx32 ? c->i32 : c->i64;
#define IX(v) (c->idx32 ? LLVMBuildTrunc(c->b, (v), c->i32, "") : (v))
  LLVMValueRef idx = IX(cg_sym_val(c, a->offset));
  if (a->rt_strides) {
    for (int l = 0; l < x->n->rank; l++)
      idx = LLVMBuildAdd(c->b, idx, LLVMBuildMul(c->b, IX(x->iv[l]), IX(x->rt_stride[l]), ""), "");
  } else if (a->lin_rank) {
    LLVMValueRef lin = ci(it, 0);
    for (int l = 0; l < x->n->rank; l++)
      lin = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, lin, IX(x->ub[l]), ""), IX(x->iv[l]), "");
    for (int e = a->lin_rank - 1; e >= 0; e--) {
      LLVMValueRef sz = IX(cg_smin(c, cg_sym_val(c, a->lin_shape[e]), i64c(c, 1), true));
      LLVMValueRef co = e ? LLVMBuildURem(c->b, lin, sz, "") : lin;
      idx = LLVMBuildAdd(c->b, idx, LLVMBuildMul(c->b, co, IX(cg_sym_val(c, a->stride[e])), ""), "");
      if (e) lin = LLVMBuildUDiv(c->b, lin, sz, "");
    }
  } else {
    for (int l = 0; l < n; l++)
      if (!sym_is(a->stride[l], 0))
        idx = LLVMBuildAdd(c->b, idx, LLVMBuildMul(c->b, IX(x->iv[l]), IX(cg_sym_val(c, a->stride[l])), ""), "");
  }
  for (int t = 0; t < a->ndyn; t++) /* indexing by tensors: index (in range) * stride */
    idx = LLVMBuildAdd(c->b, idx, LLVMBuildMul(c->b, IX(cg_eval(c, x, a->dyn[t])),
                                               IX(cg_sym_val(c, a->dyn_stride[t])), ""), "");
#undef IX
  if (c->idx32) idx = LLVMBuildSExt(c->b, idx, c->i64, "");
  if (!c->base[a->buf]) ICE("address of buffer %d, which has no memory", a->buf);
  return LLVMBuildGEP2(c->b, cg_storage_type(c, dt), c->base[a->buf], &idx, 1, "");
}

LLVMValueRef cg_from_storage(Cg *c, LLVMValueRef v, DType dt) {
  if (dt == DT_BOOL) return cg_to_bool(c, v);
  if (dt == DT_BF16) return cg_bf16_to_f32v(c, v);
  if (dt == DT_F16) return LLVMBuildFPExt(c->b, v, c->f32, "");
  return v;
}

LLVMValueRef cg_to_storage(Cg *c, LLVMValueRef v, DType dt) {
  if (dt == DT_BOOL) v = cg_to_bool(c, v);
  if (dt == DT_BF16) v = cg_f32_to_bf16v(c, v);
  if (dt == DT_F16) v = LLVMBuildFPTrunc(c->b, v, cg_storage_type(c, dt), "");
  return v;
}

LLVMValueRef cg_load_el(Cg *c, LLVMValueRef p, DType dt) {
  return cg_from_storage(c, LLVMBuildLoad2(c->b, cg_storage_type(c, dt), p, ""), dt);
}

void cg_store_el(Cg *c, LLVMValueRef v, LLVMValueRef p, DType dt) {
  LLVMBuildStore(c->b, cg_to_storage(c, v, dt), p);
}

/* ---- transcendental functions ----------------------------------------------
 * Every one goes through the math layer (math.h): plain IR, no libm,
 * vectorized by the loop vectorizer, the same on every target.  The one
 * exception: f64 sin, cos and tan stay libm's on the CPU (glibc's are
 * faster than the layer's f64 ones); f32 (and f16/bf16) use the layer's
 * f32 algorithms, exactly reduced at every magnitude, and targets without
 * libm (CUDA, Cg.layer_trig) use the layer for every type. */
static LLVMValueRef math_fn(Cg *c, MathFn fn, LLVMValueRef x, LLVMValueRef y) {
  CgMath m = {.ctx = c->ctx, .mod = c->mod, .b = c->b, .opt = c->opt};
  if (c->isa && !c->layer_trig) { /* the CPU: the long trig reduction out of line */
    m.trig_lanes = (unsigned)(c->isa->vec_bits / 32);
    m.cpu = c->isa->cpu, m.features = c->isa->features, m.suffix = c->isa->suffix;
  }
  if (c->dl_device == DL_CUDA) m.approx_div = "llvm.nvvm.div.approx.ftz.f";
  return cg_math(&m, fn, x, y);
}

/* sin, cos, tan: the layer's, or libm's (the intrinsic) for f64 on the CPU. */
static LLVMValueRef trig_fn(Cg *c, MathFn fn, const char *intr, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) t = LLVMGetElementType(t);
  if (c->layer_trig || LLVMGetTypeKind(t) == LLVMFloatTypeKind) return math_fn(c, fn, x, NULL);
  return cg_unary_intr(c, intr, x);
}

static LLVMValueRef exp_f(Cg *c, LLVMValueRef x) { return math_fn(c, MATH_EXP, x, NULL); }

/* The op table's MATH column (ir/ops.h): ops computed by one math-layer
 * function for floating-point dtypes. */
static const MathFn op_math[OP_COUNT] = {
#define OP(e, n, a, k, r, cost, m) [OP_##e] = MATH_##m,
    OP_LIST(OP)
#undef OP
};

/* min(max(x, 0), 6) keeping NaN (hardswish, hardsigmoid). */
static LLVMValueRef relu6(Cg *c, LLVMValueRef x) {
  LLVMValueRef r = sel(c, fcmp(c, LLVMRealOLT, x, fconst(x, 0)), fconst(x, 0), x);
  return sel(c, fcmp(c, LLVMRealOGT, r, fconst(x, 6)), fconst(x, 6), r);
}

static LLVMValueRef unary_f(Cg *c, Op op, int flags, const double *fa, LLVMValueRef x) {
  LLVMBuilderRef b = c->b;
  LLVMValueRef one = fconst(x, 1), zero = fconst(x, 0);
  if (op_math[op] != MATH_NONE) return math_fn(c, op_math[op], x, NULL);
  switch (op) {
  case OP_NEG: return LLVMBuildFNeg(b, x, "");
  case OP_ABS: return cg_unary_intr(c, "llvm.fabs", x);
  case OP_SQRT: return cg_unary_intr(c, "llvm.sqrt", x);
  case OP_RSQRT: return LLVMBuildFDiv(b, one, cg_unary_intr(c, "llvm.sqrt", x), "");
  case OP_SIN: return trig_fn(c, MATH_SIN, "llvm.sin", x);
  case OP_COS: return trig_fn(c, MATH_COS, "llvm.cos", x);
  case OP_SIGMOID:
  case OP_SILU: {
    LLVMValueRef d = LLVMBuildFAdd(b, one, exp_f(c, LLVMBuildFNeg(b, x, "")), "");
    return LLVMBuildFDiv(b, op == OP_SILU ? x : one, d, "");
  }
  case OP_RELU: return sel(c, fcmp(c, LLVMRealUGT, x, zero), x, zero);
  case OP_GELU: {
    LLVMValueRef t;
    if (flags & IRF_TANH) {
      LLVMValueRef x3 = LLVMBuildFMul(b, x, LLVMBuildFMul(b, x, x, ""), "");
      LLVMValueRef in = LLVMBuildFAdd(b, x, LLVMBuildFMul(b, fconst(x, 0.044715), x3, ""), "");
      t = math_fn(c, MATH_TANH, LLVMBuildFMul(b, fconst(x, 0.79788456080286535588), in, ""), NULL);
    } else {
      t = math_fn(c, MATH_ERF, LLVMBuildFMul(b, x, fconst(x, 0.70710678118654752440), ""), NULL);
    }
    return LLVMBuildFMul(b, LLVMBuildFMul(b, x, fconst(x, 0.5), ""),
                         LLVMBuildFAdd(b, one, t, ""), "");
  }
  case OP_FLOOR: return cg_unary_intr(c, "llvm.floor", x);
  case OP_CEIL: return cg_unary_intr(c, "llvm.ceil", x);
  case OP_ROUND: return cg_unary_intr(c, "llvm.roundeven", x);
  case OP_SIGN:
    return sel(c, fcmp(c, LLVMRealOGT, x, zero), one,
               sel(c, fcmp(c, LLVMRealOLT, x, zero), fconst(x, -1), zero));
  case OP_RECIPROCAL: return LLVMBuildFDiv(b, one, x, "");
  case OP_TAN: return trig_fn(c, MATH_TAN, "llvm.tan", x);
  case OP_TRUNC: return cg_unary_intr(c, "llvm.trunc", x);
  case OP_FRAC: return LLVMBuildFSub(b, x, cg_unary_intr(c, "llvm.trunc", x), "");
  case OP_SOFTPLUS: { /* PyTorch's: x beta > threshold ? x : log1p(exp(x beta)) / beta */
    LLVMValueRef xb = LLVMBuildFMul(b, x, fconst(x, fa[0]), "");
    LLVMValueRef sp = LLVMBuildFDiv(b, math_fn(c, MATH_LOG1P, exp_f(c, xb), NULL), fconst(x, fa[0]), "");
    return sel(c, fcmp(c, LLVMRealOGT, xb, fconst(x, fa[1])), x, sp);
  }
  case OP_LEAKY_RELU:
    return sel(c, fcmp(c, LLVMRealOGT, x, zero), x, LLVMBuildFMul(b, x, fconst(x, fa[0]), ""));
  case OP_ELU:
    return sel(c, fcmp(c, LLVMRealOLE, x, zero),
               LLVMBuildFMul(b, math_fn(c, MATH_EXPM1, x, NULL), fconst(x, fa[0]), ""), x);
  case OP_HARDTANH: {
    LLVMValueRef r = sel(c, fcmp(c, LLVMRealOLT, x, fconst(x, fa[0])), fconst(x, fa[0]), x);
    return sel(c, fcmp(c, LLVMRealOGT, r, fconst(x, fa[1])), fconst(x, fa[1]), r);
  }
  case OP_HARDSWISH:
    return LLVMBuildFDiv(b, LLVMBuildFMul(b, x, relu6(c, LLVMBuildFAdd(b, x, fconst(x, 3), "")), ""),
                         fconst(x, 6), "");
  case OP_HARDSIGMOID:
    return LLVMBuildFDiv(b, relu6(c, LLVMBuildFAdd(b, x, fconst(x, 3), "")), fconst(x, 6), "");
  case OP_MISH:
    return LLVMBuildFMul(b, x, math_fn(c, MATH_TANH, math_fn(c, MATH_LOG1P, exp_f(c, x), NULL), NULL), "");
  case OP_NAN_TO_NUM: {
    LLVMValueRef r = sel(c, fcmp(c, LLVMRealUNO, x, x), fconst(x, fa[0]), x);
    r = sel(c, fcmp(c, LLVMRealOEQ, x, fconst(x, INFINITY)), fconst(x, fa[1]), r);
    return sel(c, fcmp(c, LLVMRealOEQ, x, fconst(x, -INFINITY)), fconst(x, fa[2]), r);
  }
  default: ICE("unary %s on a float dtype", op_name(op));
  }
}

static LLVMValueRef unary_i(Cg *c, Op op, DType dt, const double *fa, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef zero = LLVMConstInt(t, 0, 0);
  bool u = cg_is_unsigned(dt);
  switch (op) {
  case OP_NEG: return LLVMBuildSub(c->b, zero, x, "");
  case OP_ABS:
    return u ? x : sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, x, zero, ""),
                       LLVMBuildSub(c->b, zero, x, ""), x);
  case OP_RELU:
    return u ? x : sel(c, LLVMBuildICmp(c->b, LLVMIntSGT, x, zero, ""), x, zero);
  case OP_FLOOR: case OP_CEIL: case OP_ROUND: case OP_TRUNC: case OP_NAN_TO_NUM: return x;
  case OP_HARDTANH: { /* bounds are in the dtype's range (sema) */
    LLVMValueRef lo = LLVMConstInt(t, (unsigned long long)(long long)fa[0], 1);
    LLVMValueRef hi = LLVMConstInt(t, (unsigned long long)(long long)fa[1], 1);
    LLVMValueRef r = sel(c, LLVMBuildICmp(c->b, u ? LLVMIntULT : LLVMIntSLT, x, lo, ""), lo, x);
    return sel(c, LLVMBuildICmp(c->b, u ? LLVMIntUGT : LLVMIntSGT, r, hi, ""), hi, r);
  }
  case OP_SIGN: {
    LLVMValueRef gt = LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, u ? LLVMIntUGT : LLVMIntSGT, x, zero, ""), t, "");
    if (u) return gt;
    LLVMValueRef lt = LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, zero, ""), t, "");
    return LLVMBuildSub(c->b, gt, lt, "");
  }
  case OP_BITNOT:
    return LLVMBuildXor(c->b, x, dt == DT_BOOL ? LLVMConstInt(t, 1, 0) : LLVMConstAllOnes(t), "");
  default: ICE("unary %s on an integer dtype", op_name(op));
  }
}

/* ---- fmod ----------------------------------------------------------------
 * C's fmod, exact.  LLVM's frem is libm's fmod on the CPU; targets without
 * libm (CUDA: Cg.own_frem) lower it to x - trunc(x / y) * y, which is
 * wrong once x / y needs more bits than the mantissa has.  Here: while
 * |x| >= |y|, subtract the largest |y| * 2^k not above |x| (exact: the
 * difference of two numbers within a factor 2), one exponent step at
 * least per round. */

/* floor(log2 v) of a finite v > 0 (subnormals scaled up first), i32. */
static LLVMValueRef ilogb_pos(Cg *c, LLVMValueRef v) {
  LLVMTypeRef t = LLVMTypeOf(v);
  bool dbl = LLVMGetTypeKind(t) == LLVMDoubleTypeKind;
  int mant = dbl ? 52 : 23, bias = dbl ? 1023 : 127;
  LLVMTypeRef it = dbl ? c->i64 : c->i32;
  LLVMValueRef sub = fcmp(c, LLVMRealOLT, v, fconst(v, ldexp(1.0, 1 - bias)));
  LLVMValueRef w = sel(c, sub, LLVMBuildFMul(c->b, v, fconst(v, ldexp(1.0, mant)), ""), v);
  LLVMValueRef bits = LLVMBuildBitCast(c->b, w, it, "");
  LLVMValueRef e = LLVMBuildLShr(c->b, bits, ci(it, mant), "");
  e = LLVMBuildTrunc(c->b, LLVMBuildAnd(c->b, e, ci(it, dbl ? 2047 : 255), ""), c->i32, "");
  e = LLVMBuildSub(c->b, e, i32c(c, bias), "");
  return sel(c, sub, LLVMBuildSub(c->b, e, i32c(c, mant), ""), e);
}

/* v * 2^k for 0 <= k (the product stays finite), in steps of at most
 * 2^64 (exact powers of two). */
static LLVMValueRef scale_up(Cg *c, LLVMValueRef v, LLVMValueRef k) {
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), head = block(c, "scale"),
                    body = block(c, "scale_step"), done = block(c, "scaled");
  LLVMBuildBr(c->b, head);
  LLVMPositionBuilderAtEnd(c->b, head);
  LLVMValueRef vp = LLVMBuildPhi(c->b, LLVMTypeOf(v), ""), kp = LLVMBuildPhi(c->b, c->i32, "");
  LLVMAddIncoming(vp, &v, &pre, 1);
  LLVMAddIncoming(kp, &k, &pre, 1);
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, kp, i32c(c, 0), ""), body, done);
  LLVMPositionBuilderAtEnd(c->b, body);
  LLVMValueRef step = cg_smin(c, kp, i32c(c, 64), false);
  /* 2^step as a float: exponent bits (step + bias) << mantissa */
  LLVMTypeRef t = LLVMTypeOf(v);
  bool dbl = LLVMGetTypeKind(t) == LLVMDoubleTypeKind;
  LLVMTypeRef it = dbl ? c->i64 : c->i32;
  LLVMValueRef eb = LLVMBuildAdd(c->b, dbl ? LLVMBuildZExt(c->b, step, it, "") : step,
                                 ci(it, dbl ? 1023 : 127), "");
  LLVMValueRef p2 = LLVMBuildBitCast(c->b, LLVMBuildShl(c->b, eb, ci(it, dbl ? 52 : 23), ""), t, "");
  LLVMValueRef vn = LLVMBuildFMul(c->b, vp, p2, ""), kn = LLVMBuildSub(c->b, kp, step, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
  LLVMAddIncoming(vp, &vn, &latch, 1);
  LLVMAddIncoming(kp, &kn, &latch, 1);
  LLVMBuildBr(c->b, head);
  LLVMPositionBuilderAtEnd(c->b, done);
  return vp;
}

static LLVMValueRef frem_exact(Cg *c, LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef ax = cg_unary_intr(c, "llvm.fabs", x), ay = cg_unary_intr(c, "llvm.fabs", y);
  LLVMValueRef inf = fconst(x, INFINITY);
  /* NaN for y == 0, x infinite or a NaN operand; x itself for y infinite */
  LLVMValueRef nan = LLVMBuildOr(B, fcmp(c, LLVMRealUEQ, ay, fconst(x, 0)),
                                 fcmp(c, LLVMRealUEQ, ax, inf), "");
  LLVMValueRef fin = LLVMBuildAnd(B, LLVMBuildNot(B, nan, ""), fcmp(c, LLVMRealONE, ay, inf), "");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B), head = block(c, "fmod"), body = block(c, "fmod_step"),
                    done = block(c, "fmod_done");
  LLVMBuildBr(B, head);
  LLVMPositionBuilderAtEnd(B, head);
  LLVMValueRef r = LLVMBuildPhi(B, LLVMTypeOf(x), "");
  LLVMAddIncoming(r, &ax, &pre, 1);
  LLVMBuildCondBr(B, LLVMBuildAnd(B, fin, fcmp(c, LLVMRealOGE, r, ay), ""), body, done);
  LLVMPositionBuilderAtEnd(B, body);
  LLVMValueRef k = LLVMBuildSub(B, ilogb_pos(c, r), ilogb_pos(c, ay), "");
  LLVMValueRef t = scale_up(c, ay, k);
  t = sel(c, fcmp(c, LLVMRealOGT, t, r), LLVMBuildFMul(B, t, fconst(x, 0.5), ""), t);
  LLVMValueRef rn = LLVMBuildFSub(B, r, t, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  LLVMAddIncoming(r, &rn, &latch, 1);
  LLVMBuildBr(B, head);
  LLVMPositionBuilderAtEnd(B, done);
  LLVMTypeRef ty = LLVMTypeOf(x);
  LLVMValueRef cs[2] = {r, x};
  LLVMValueRef res = cg_intrinsic(c, "llvm.copysign", &ty, 1, cs, 2);
  return sel(c, nan, fconst(x, NAN), res);
}

/* a fmod b: LLVM's frem, or the exact loop where frem is not libm's. */
static LLVMValueRef frem(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  return c->own_frem ? frem_exact(c, a, b) : LLVMBuildFRem(c->b, a, b, "");
}

/* Python // and % of floats, as PyTorch computes them. */
static LLVMValueRef floordiv_f(Cg *c, LLVMValueRef a, LLVMValueRef b, bool mod) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef zero = fconst(a, 0), m = frem(c, a, b);
  LLVMValueRef adj = LLVMBuildAnd(B, fcmp(c, LLVMRealUNE, m, zero),
                                  LLVMBuildXor(B, fcmp(c, LLVMRealOLT, b, zero),
                                               fcmp(c, LLVMRealOLT, m, zero), ""), "");
  if (mod) return sel(c, adj, LLVMBuildFAdd(B, m, b, ""), m);
  LLVMValueRef q = LLVMBuildFDiv(B, a, b, "");
  LLVMValueRef div = LLVMBuildFDiv(B, LLVMBuildFSub(B, a, m, ""), b, "");
  div = sel(c, adj, LLVMBuildFSub(B, div, fconst(a, 1), ""), div);
  LLVMValueRef fl = cg_unary_intr(c, "llvm.floor", div);
  LLVMValueRef up = fcmp(c, LLVMRealOGT, LLVMBuildFSub(B, div, fl, ""), fconst(a, 0.5));
  LLVMValueRef r = sel(c, up, LLVMBuildFAdd(B, fl, fconst(a, 1), ""), fl);
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef cs[2] = {zero, q};
  r = sel(c, fcmp(c, LLVMRealOEQ, div, zero), cg_intrinsic(c, "llvm.copysign", &t, 1, cs, 2), r);
  return sel(c, fcmp(c, LLVMRealOEQ, b, zero), q, r);
}

/* PyTorch's integer pow: a private i64 function, exponentiation by
 * squaring unrolled over the 64 exponent bits. */
static LLVMValueRef powi_fn(Cg *c) {
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, "tdsl.powi");
  if (f) return f;
  LLVMTypeRef ps[2] = {c->i64, c->i64};
  f = LLVMAddFunction(c->mod, "tdsl.powi", LLVMFunctionType(c->i64, ps, 2, 0));
  LLVMSetLinkage(f, LLVMPrivateLinkage);
  LLVMBuilderRef saved = c->b;
  c->b = LLVMCreateBuilderInContext(c->ctx);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, f, "entry"));
  LLVMValueRef a = LLVMGetParam(f, 0), e = LLVMGetParam(f, 1), r = i64c(c, 1), x = a;
  for (int i = 0; i < 64; i++) {
    LLVMValueRef bit = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, e, i64c(c, i), ""), c->i1, "");
    r = sel(c, bit, LLVMBuildMul(c->b, r, x, ""), r);
    x = LLVMBuildMul(c->b, x, x, "");
  }
  LLVMValueRef odd = LLVMBuildTrunc(c->b, e, c->i1, "");
  LLVMValueRef neg = sel(c, LLVMBuildICmp(c->b, LLVMIntEQ, a, i64c(c, 1), ""), i64c(c, 1),
                         sel(c, LLVMBuildICmp(c->b, LLVMIntEQ, a, i64c(c, -1), ""),
                             sel(c, odd, i64c(c, -1), i64c(c, 1)), i64c(c, 0)));
  LLVMBuildRet(c->b, sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, e, i64c(c, 0), ""), neg, r));
  LLVMDisposeBuilder(c->b);
  c->b = saved;
  return f;
}

/* C's truncating % (fmod of integers); x % 0 and x % -1 give 0 (PyTorch
 * raises for the first; the second would overflow for the minimum). */
static LLVMValueRef c_rem(Cg *c, LLVMValueRef a, LLVMValueRef b, bool u) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef zero = LLVMConstInt(t, 0, 0);
  LLVMValueRef bad = LLVMBuildICmp(c->b, LLVMIntEQ, b, zero, "");
  if (!u) bad = LLVMBuildOr(c->b, bad, LLVMBuildICmp(c->b, LLVMIntEQ, b, LLVMConstAllOnes(t), ""), "");
  LLVMValueRef safe = sel(c, bad, LLVMConstInt(t, 1, 0), b);
  return sel(c, bad, zero, u ? LLVMBuildURem(c->b, a, safe, "") : LLVMBuildSRem(c->b, a, safe, ""));
}

/* hypot without overflow or underflow: f32 (and so f16/bf16) squares in
 * f64, where they are exact, and rounds once; f64 scales by the larger
 * magnitude.  An infinity wins over NaN (C99). */
static LLVMValueRef hypot_f(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef x = cg_unary_intr(c, "llvm.fabs", a), y = cg_unary_intr(c, "llvm.fabs", b), r;
  LLVMTypeRef t = LLVMTypeOf(a), el = LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t) : t;
  if (LLVMGetTypeKind(el) == LLVMFloatTypeKind) {
    LLVMTypeRef d = LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMVectorType(c->f64, LLVMGetVectorSize(t)) : c->f64;
    LLVMValueRef xd = LLVMBuildFPExt(B, x, d, ""), yd = LLVMBuildFPExt(B, y, d, "");
    LLVMValueRef s = LLVMBuildFAdd(B, LLVMBuildFMul(B, xd, xd, ""), LLVMBuildFMul(B, yd, yd, ""), "");
    r = LLVMBuildFPTrunc(B, cg_unary_intr(c, "llvm.sqrt", s), t, "");
  } else {
    LLVMValueRef big = sel(c, fcmp(c, LLVMRealOGT, y, x), y, x), small = sel(c, fcmp(c, LLVMRealOGT, y, x), x, y);
    LLVMValueRef q = LLVMBuildFDiv(B, small, big, "");
    r = LLVMBuildFMul(B, big, cg_unary_intr(c, "llvm.sqrt", LLVMBuildFAdd(B, fconst(a, 1), LLVMBuildFMul(B, q, q, ""), "")), "");
    r = sel(c, fcmp(c, LLVMRealOEQ, big, fconst(a, 0)), small, r); /* 0, or a NaN small */
  }
  LLVMValueRef inf = LLVMBuildOr(B, fcmp(c, LLVMRealOEQ, x, fconst(a, INFINITY)),
                                 fcmp(c, LLVMRealOEQ, y, fconst(a, INFINITY)), "");
  return sel(c, inf, fconst(a, INFINITY), r);
}

/* PyTorch's logaddexp: max + log1p(exp(-|a - b|)); equal infinities give
 * themselves. */
static LLVMValueRef logaddexp_f(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef m = sel(c, fcmp(c, LLVMRealOLT, a, b), b, a);
  LLVMValueRef d = LLVMBuildFNeg(B, cg_unary_intr(c, "llvm.fabs", LLVMBuildFSub(B, a, b, "")), "");
  LLVMValueRef r = LLVMBuildFAdd(B, m, math_fn(c, MATH_LOG1P, exp_f(c, d), NULL), "");
  LLVMValueRef same_inf = LLVMBuildAnd(B, fcmp(c, LLVMRealOEQ, a, b),
                                       fcmp(c, LLVMRealOEQ, cg_unary_intr(c, "llvm.fabs", a), fconst(a, INFINITY)), "");
  return sel(c, same_inf, a, r);
}

/* PyTorch's lerp: exact at both ends (weight 0 gives a, 1 gives b). */
static LLVMValueRef lerp_f(Cg *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef w) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef d = LLVMBuildFSub(B, b, a, "");
  LLVMValueRef lo = LLVMBuildFAdd(B, a, LLVMBuildFMul(B, w, d, ""), "");
  LLVMValueRef hi = LLVMBuildFSub(B, b, LLVMBuildFMul(B, d, LLVMBuildFSub(B, fconst(a, 1), w, ""), ""), "");
  return sel(c, fcmp(c, LLVMRealOLT, cg_unary_intr(c, "llvm.fabs", w), fconst(a, 0.5)), lo, hi);
}

static LLVMValueRef binary_i(Cg *c, Op op, DType dt, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  bool u = cg_is_unsigned(dt);
  LLVMTypeRef t = LLVMTypeOf(a);
  switch (op) {
  case OP_ADD: return LLVMBuildAdd(B, a, b, "");
  case OP_SUB: return LLVMBuildSub(B, a, b, "");
  case OP_MUL: return LLVMBuildMul(B, a, b, "");
  case OP_AND: return LLVMBuildAnd(B, a, b, "");
  case OP_OR: return LLVMBuildOr(B, a, b, "");
  case OP_XOR: return LLVMBuildXor(B, a, b, "");
  case OP_DIV: /* loop form only (pools): C division, divisor != 0 */
    return u ? LLVMBuildUDiv(B, a, b, "") : LLVMBuildSDiv(B, a, b, "");
  case OP_MAXIMUM:
  case OP_MINIMUM: {
    LLVMIntPredicate p = op == OP_MAXIMUM ? (u ? LLVMIntUGT : LLVMIntSGT) : (u ? LLVMIntULT : LLVMIntSLT);
    return sel(c, LLVMBuildICmp(B, p, a, b, ""), a, b);
  }
  case OP_FMOD: return c_rem(c, a, b, u);
  case OP_FLOORDIV:
  case OP_MOD:
    if (!u) return cg_py_divmod(c, a, b, op == OP_MOD);
    {
      LLVMValueRef zero = LLVMConstInt(t, 0, 0);
      LLVMValueRef b0 = LLVMBuildICmp(B, LLVMIntEQ, b, zero, "");
      LLVMValueRef safe = sel(c, b0, LLVMConstInt(t, 1, 0), b);
      LLVMValueRef r = op == OP_MOD ? LLVMBuildURem(B, a, safe, "") : LLVMBuildUDiv(B, a, safe, "");
      return sel(c, b0, zero, r);
    }
  case OP_POW: {
    LLVMValueRef x[2] = {u ? LLVMBuildZExt(B, a, c->i64, "") : LLVMBuildSExt(B, a, c->i64, ""),
                         u ? LLVMBuildZExt(B, b, c->i64, "") : LLVMBuildSExt(B, b, c->i64, "")};
    if (t == c->i64) x[0] = a, x[1] = b;
    LLVMValueRef r = call(c, powi_fn(c), x, 2);
    return t == c->i64 ? r : LLVMBuildTrunc(B, r, t, "");
  }
  default: ICE("binary %s on an integer dtype", op_name(op));
  }
}

/* a ** b.  The constant exponents LLVM and PyTorch's CPU kernel compute
 * without pow: 1, 2 and -1 give exactly C's pow (one rounding of the exact
 * result, the same special values); 3 and -2 are PyTorch's own formulas
 * (x * x * x, 1 / (x * x)); 0.5 is sqrt with C's pow's special values
 * (pow(-0, 0.5) = +0, pow(-inf, 0.5) = +inf, where sqrt gives -0 and
 * NaN), -0.5 its reciprocal.  So -O0, the interpreter and -O2 agree to
 * the ulp.  Every other exponent goes through the math layer's pow. */
/* Constant b's value: a scalar, or a vector's when every lane holds the
 * same (a splat beside a vector, eval_op); else NULL. */
static LLVMValueRef splat_const(LLVMValueRef b) {
  if (LLVMIsAConstantFP(b)) return b;
  if (!LLVMIsConstant(b) || LLVMGetTypeKind(LLVMTypeOf(b)) != LLVMVectorTypeKind) return NULL;
  LLVMValueRef e = LLVMGetAggregateElement(b, 0);
  for (unsigned i = 1; e && i < LLVMGetVectorSize(LLVMTypeOf(b)); i++)
    if (LLVMGetAggregateElement(b, i) != e) return NULL;
  return e && LLVMIsAConstantFP(e) ? e : NULL;
}

static LLVMValueRef pow_f(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef k = splat_const(b);
  if (k) {
    b = k;
    LLVMBool lossy;
    double e = LLVMConstRealGetDouble(b, &lossy);
    LLVMValueRef one = fconst(a, 1);
    if (e == 1) return a;
    if (e == 2) return LLVMBuildFMul(B, a, a, "");
    if (e == 3) return LLVMBuildFMul(B, LLVMBuildFMul(B, a, a, ""), a, "");
    if (e == -1) return LLVMBuildFDiv(B, one, a, "");
    if (e == -2) return LLVMBuildFDiv(B, one, LLVMBuildFMul(B, a, a, ""), "");
    if (e == 0.5 || e == -0.5) {
      LLVMValueRef r = cg_unary_intr(c, "llvm.fabs", cg_unary_intr(c, "llvm.sqrt", a));
      LLVMValueRef ninf = LLVMBuildFCmp(B, LLVMRealOEQ, a, fconst(a, -INFINITY), "");
      r = LLVMBuildSelect(B, ninf, fconst(a, INFINITY), r, "");
      return e > 0 ? r : LLVMBuildFDiv(B, one, r, "");
    }
  }
  return math_fn(c, MATH_POW, a, b);
}

static LLVMValueRef binary_f(Cg *c, Op op, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  if (op == OP_POW) return pow_f(c, a, b);
  if (op_math[op] != MATH_NONE) return math_fn(c, op_math[op], a, b);
  switch (op) {
  case OP_ADD: return LLVMBuildFAdd(B, a, b, "");
  case OP_SUB: return LLVMBuildFSub(B, a, b, "");
  case OP_MUL: return LLVMBuildFMul(B, a, b, "");
  /* Correctly rounded at every level, as PyTorch divides: a multiply by
   * the reciprocal is not (round(150 / 60) would be 3).  LLVM still
   * turns a division by a constant power of two into the exact multiply. */
  case OP_DIV: return LLVMBuildFDiv(B, a, b, "");
  case OP_FLOORDIV: return floordiv_f(c, a, b, false);
  case OP_MOD: return floordiv_f(c, a, b, true);
  case OP_HYPOT: return hypot_f(c, a, b);
  case OP_FMOD: return frem(c, a, b);
  case OP_COPYSIGN: {
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef cs[2] = {a, b};
    return cg_intrinsic(c, "llvm.copysign", &t, 1, cs, 2);
  }
  case OP_LOGADDEXP: return logaddexp_f(c, a, b);
  case OP_MAXIMUM:
  case OP_MINIMUM: {
    LLVMValueRef r = sel(c, fcmp(c, op == OP_MAXIMUM ? LLVMRealOGT : LLVMRealOLT, a, b), a, b);
    return sel(c, fcmp(c, LLVMRealUNO, a, b), fconst(a, NAN), r);
  }
  default: ICE("binary %s on a float dtype", op_name(op));
  }
}

static LLVMValueRef compare(Cg *c, Op op, DType dt, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef r;
  int i = op - OP_EQ; /* EQ NE LT LE GT GE */
  if (dtype_is_float(dt)) {
    static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                           LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    r = fcmp(c, fp[i], a, b);
  } else {
    static const LLVMIntPredicate sp[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT,
                                          LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
    static const LLVMIntPredicate up[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT,
                                          LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
    r = LLVMBuildICmp(c->b, cg_is_unsigned(dt) ? up[i] : sp[i], a, b, "");
  }
  return LLVMBuildZExt(c->b, r, c->i8, "");
}

LLVMValueRef cg_eval(Cg *c, NestCtx *x, const LfExpr *e);

/* Each scalar of a[0..n) in every lane where another of them is a vector
 * (a GEMM prologue evaluated along K, cpu/gemm_nest.c pro_row: loads are
 * vectors there, constants and symbols scalars). */
static void splat_args(Cg *c, LLVMValueRef *a, int n) {
  LLVMTypeRef vt = NULL;
  for (int j = 0; j < n; j++)
    if (LLVMGetTypeKind(LLVMTypeOf(a[j])) == LLVMVectorTypeKind) vt = LLVMTypeOf(a[j]);
  if (!vt) return;
  for (int j = 0; j < n; j++)
    if (LLVMGetTypeKind(LLVMTypeOf(a[j])) != LLVMVectorTypeKind)
      a[j] = cg_splat(c, a[j], LLVMGetVectorSize(vt));
}

static LLVMValueRef eval_op(Cg *c, NestCtx *x, const LfExpr *e) {
  LLVMValueRef a[3];
  for (int j = 0; j < e->nargs; j++) a[j] = cg_eval(c, x, e->args[j]);
  splat_args(c, a, e->nargs);
  DType in = e->args[e->op == OP_WHERE ? 1 : 0]->dtype;
  bool isf = dtype_is_float(in);
  LLVMValueRef r;
  switch (op_kind(e->op)) {
  case IRK_UNARY:
    if (e->op == OP_ISNAN || e->op == OP_ISINF || e->op == OP_ISFINITE) {
      if (!isf) return ci(c->i8, e->op == OP_ISFINITE);
      LLVMValueRef ax = cg_unary_intr(c, "llvm.fabs", a[0]);
      LLVMValueRef p = e->op == OP_ISNAN   ? fcmp(c, LLVMRealUNO, a[0], a[0])
                       : e->op == OP_ISINF ? fcmp(c, LLVMRealOEQ, ax, fconst(ax, INFINITY))
                                           : fcmp(c, LLVMRealOLT, ax, fconst(ax, INFINITY));
      return LLVMBuildZExt(c->b, p, c->i8, "");
    }
    if (e->op == OP_LOGICAL_NOT)
      return LLVMBuildZExt(c->b, isf ? fcmp(c, LLVMRealOEQ, a[0], fconst(a[0], 0))
                                     : LLVMBuildICmp(c->b, LLVMIntEQ, a[0], LLVMConstInt(LLVMTypeOf(a[0]), 0, 0), ""),
                           c->i8, "");
    r = isf ? unary_f(c, e->op, e->flags, e->fattr, a[0]) : unary_i(c, e->op, in, e->fattr, a[0]);
    break;
  case IRK_BINARY:
    r = isf ? binary_f(c, e->op, a[0], a[1]) : binary_i(c, e->op, in, a[0], a[1]);
    break;
  case IRK_COMPARE: return compare(c, e->op, in, a[0], a[1]);
  case IRK_TERNARY:
    if (e->op == OP_LERP) {
      r = lerp_f(c, a[0], a[1], e->nargs == 3 ? a[2] : fconst(a[0], e->fattr[0]));
      break;
    }
    return sel(c, LLVMBuildICmp(c->b, LLVMIntNE, a[0], ci(c->i8, 0), ""), a[1], a[2]);
  default: ICE("op %s in an elementwise expression", op_name(e->op));
  }
  if (e->dtype == DT_BOOL && !isf) r = cg_to_bool(c, r);
  return cg_convert(c, r, in, e->dtype);
}

int cg_lane_kind(const Cg *c, const LfExpr *e, int kd, int (*op_lanes)(const LfExpr *e)) {
  switch (e->kind) {
  case LFE_CONST: case LFE_SYM: return 0;
  case LFE_INDEX: case LFE_ARANGE: return e->loop == kd ? -1 : 0;
  case LFE_ACC: return -1;
  case LFE_LOAD: {
    const LfBuf *b = &c->lk->bufs[e->acc.buf];
    if (b->kind == LFB_SCALAR) return 0;
    if (e->acc.lin_rank || e->acc.rt_strides || e->acc.ndyn) return -1;
    if (sym_is(e->acc.stride[kd], 0)) return 0;
    return sym_is(e->acc.stride[kd], 1) && b->dtype == DT_F32 && e->dtype == DT_F32 ? 1 : -1;
  }
  case LFE_CAST: {
    int k = cg_lane_kind(c, e->args[0], kd, op_lanes);
    return k == 1 && (e->args[0]->dtype != DT_F32 || e->dtype != DT_F32) ? -1 : k;
  }
  case LFE_OP: break;
  }
  int k = 0;
  for (int j = 0; j < e->nargs; j++) {
    int kj = cg_lane_kind(c, e->args[j], kd, op_lanes);
    if (kj < 0) return -1;
    if (kj) k = 1;
  }
  return k ? op_lanes(e) : 0;
}

LLVMValueRef cg_eval(Cg *c, NestCtx *x, const LfExpr *e) {
  switch (e->kind) {
  case LFE_LOAD:
    if (c->lk->bufs[e->acc.buf].kind == LFB_SCALAR) { /* by value, from the arguments */
      if (!c->scalar || !c->scalar[e->acc.buf]) ICE("scalar parameter without its value");
      return c->scalar[e->acc.buf];
    }
    if (c->load_hook) { /* loaded ahead (cuda/variant.c) or kept in registers (cuda/nest.c) */
      LLVMValueRef v = c->load_hook(c, x, e);
      if (v) return v;
    }
    return cg_load_el(c, cg_address(c, x, &e->acc, c->lk->bufs[e->acc.buf].dtype,
                              x->n->rank + x->n->nred),
                   c->lk->bufs[e->acc.buf].dtype);
  case LFE_CONST:
    return e->dtype == DT_F64 ? LLVMConstReal(c->f64, e->value.f) : i64c(c, e->value.i);
  case LFE_SYM: return cg_sym_val(c, e->sym);
  case LFE_ARANGE:
    return LLVMBuildFAdd(c->b, LLVMConstReal(c->f64, e->start),
                         LLVMBuildFMul(c->b, LLVMBuildSIToFP(c->b, x->iv[e->loop], c->f64, ""),
                                       LLVMConstReal(c->f64, e->step), ""), "");
  case LFE_CAST: return cg_convert(c, cg_eval(c, x, e->args[0]), e->args[0]->dtype, e->dtype);
  case LFE_OP: return eval_op(c, x, e);
  case LFE_INDEX: return x->iv[e->loop];
  case LFE_ACC: return x->acc;
  }
  ICE("bad loop-form expression");
}
