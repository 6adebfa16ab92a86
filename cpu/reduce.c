/* reduce.c — the CPU code of a nest's reduction (loops.h LfNest.reduce):
 * accumulators in f32/f64/i64, vectorizable float steps, and the cascade
 * that keeps long float sums accurate (docs/numerics.md).
 * Needs: cpu.h.  Used by: kernel.c, vloops.c, parallel.c. */
#include <math.h>

#include "cpu.h"

/* ---- nests -------------------------------------------------------------- */

static DType acc_dtype(DType in) {
  return in == DT_F64 ? DT_F64 : dtype_is_float(in) ? DT_F32 : DT_I64;
}

/* Reduction loops' bounds at the current outer index: lo[l] and
 * x->ub[l] (a loop's own red_lo/red_hi replace 0 and red[l]). */
static void red_bounds(Cg *c, NestCtx *x, LLVMValueRef *lo) {
  const LfNest *n = x->n;
  for (int j = 0; j < n->nred; j++) {
    int l = n->rank + j;
    lo[l] = n->red_lo && n->red_lo[j] ? cg_eval(c, x, n->red_lo[j]) : i64c(c, 0);
    if (n->red_hi && n->red_hi[j]) x->ub[l] = cg_eval(c, x, n->red_hi[j]);
  }
}

/* Float accumulation steps the loop vectorizer can widen.  SUM/MEAN
 * (opt_level >= 1): the fadd may be reassociated within a block of the
 * cascade below (vector partial sums; a nest's reduction never spans
 * threads, so results do not depend on the thread count).
 * AMAX/AMIN (opt_level >= 2, where LLVM vectorizes loops; scalar, the
 * select form is cheaper): llvm.maximum/minimum, which propagate NaN as
 * PyTorch does (a row with a NaN reduces to NaN); they order -0 < +0,
 * where the select form keeps the first of equal values (the same
 * number). */
static LLVMValueRef fsum_step(Cg *c, LLVMValueRef a, LLVMValueRef v) {
  LLVMValueRef r = LLVMBuildFAdd(c->b, a, v, "");
  if (c->opt > 0) LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc);
  return r;
}

static LLVMValueRef fextreme_step(Cg *c, Op op, LLVMValueRef a, LLVMValueRef v) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef av[2] = {a, v};
  return cg_intrinsic(c, op == OP_AMAX ? "llvm.maximum" : "llvm.minimum", &t, 1, av, 2);
}

/* ---- accurate float sums ----------------------------------------------------
 * A float SUM/MEAN over more than SUM_BLOCK elements is a cascade, at
 * every opt level: the innermost reduction loop runs in blocks of
 * SUM_BLOCK elements, each summed from zero by its own loop (vectorized
 * with reassociation at -O2), and the block sums enter a carry chain of
 * SUM_LEVELS accumulators where level k takes 2^SUM_FAN_LOG2 sums before
 * it is added into level k + 1 and cleared.  Every addition then adds
 * values of similar magnitude: the error bound grows with
 * SUM_BLOCK + 16 * log16(n) instead of n (a sum of 50M ones is exact
 * where a running f32 sum stops at 2^24), like PyTorch's cascade sum.
 * Level SUM_LEVELS - 1 holds blocks of SUM_BLOCK * 16^6 (8.6e11)
 * elements. */
#define SUM_BLOCK 512
#define SUM_FAN_LOG2 4
#define SUM_LEVELS 8

/* Whether n's reduction loops may exceed SUM_BLOCK elements. */
static bool long_reduction(const LfNest *n) {
  int64_t total = 1, e;
  for (int j = 0; j < n->nred; j++) {
    if (!sym_is_const(n->red[j], &e)) return true;
    total *= e;
    if (total > SUM_BLOCK) return true;
  }
  return false;
}

/* Adds block sum s into the cascade (levels lv, block count cnt). */
static void cascade_push(Cg *c, LLVMTypeRef t, LLVMValueRef lv, LLVMValueRef cnt,
                         LLVMValueRef s) {
  LLVMValueRef zero = i64c(c, 0), l0 = LLVMBuildGEP2(c->b, t, lv, &zero, 1, "");
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, t, l0, ""), s, ""), l0);
  LLVMValueRef k = i64c(c, 1);
  LLVMValueRef m = LLVMBuildAdd(c->b, LLVMBuildLoad2(c->b, c->i64, cnt, ""), k, "");
  LLVMBuildStore(c->b, m, cnt);
  /* carry: while k < SUM_LEVELS and m % 16 == 0: level k += level k-1 */
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), head = block(c, "carry"),
                    body = block(c, "carry_body"), done = block(c, "carried");
  LLVMBuildBr(c->b, head);
  LLVMPositionBuilderAtEnd(c->b, head);
  LLVMValueRef kp = LLVMBuildPhi(c->b, c->i64, "k"), mp = LLVMBuildPhi(c->b, c->i64, "m");
  LLVMAddIncoming(kp, &k, &pre, 1);
  LLVMAddIncoming(mp, &m, &pre, 1);
  LLVMValueRef low = LLVMBuildAnd(c->b, mp, i64c(c, (1 << SUM_FAN_LOG2) - 1), "");
  LLVMValueRef go = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntULT, kp, i64c(c, SUM_LEVELS), ""),
                                 LLVMBuildICmp(c->b, LLVMIntEQ, low, zero, ""), "");
  LLVMBuildCondBr(c->b, go, body, done);
  LLVMPositionBuilderAtEnd(c->b, body);
  LLVMValueRef km = LLVMBuildSub(c->b, kp, k, "");
  LLVMValueRef from = LLVMBuildGEP2(c->b, t, lv, &km, 1, ""), to = LLVMBuildGEP2(c->b, t, lv, &kp, 1, "");
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, t, to, ""),
                                     LLVMBuildLoad2(c->b, t, from, ""), ""), to);
  LLVMBuildStore(c->b, LLVMConstNull(t), from);
  LLVMValueRef kn = LLVMBuildAdd(c->b, kp, k, ""),
               mn = LLVMBuildLShr(c->b, mp, i64c(c, SUM_FAN_LOG2), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
  LLVMAddIncoming(kp, &kn, &latch, 1);
  LLVMAddIncoming(mp, &mn, &latch, 1);
  LLVMBuildBr(c->b, head);
  LLVMPositionBuilderAtEnd(c->b, done);
}

/* The cascade sum of n->value over the reduction loops (bounds lo and
 * x->ub), in the accumulator type t. */
static LLVMValueRef cascade_sum(Cg *c, NestCtx *x, LLVMTypeRef t, DType in, DType ad,
                                LLVMValueRef *lo) {
  const LfNest *n = x->n;
  int last = n->rank + n->nred - 1;
  LLVMValueRef lv = cg_entry_alloca(c, t, i32c(c, SUM_LEVELS)), cnt = cg_entry_alloca(c, c->i64, NULL),
               bs = cg_entry_alloca(c, t, NULL);
  for (int k = 0; k < SUM_LEVELS; k++) {
    LLVMValueRef o = i64c(c, k);
    LLVMBuildStore(c->b, LLVMConstNull(t), LLVMBuildGEP2(c->b, t, lv, &o, 1, ""));
  }
  LLVMBuildStore(c->b, i64c(c, 0), cnt);
  for (int l = n->rank; l < last; l++) x->iv[l] = cg_open_loop_from(c, lo[l], x->ub[l]);
  LLVMValueRef len = cg_smin(c, LLVMBuildSub(c->b, x->ub[last], lo[last], ""), i64c(c, 0), true);
  LLVMValueRef nb = LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, len, i64c(c, SUM_BLOCK - 1), ""),
                                  i64c(c, SUM_BLOCK), "");
  LLVMValueRef b = cg_open_loop(c, nb);
  LLVMValueRef b0 = LLVMBuildAdd(c->b, lo[last], LLVMBuildMul(c->b, b, i64c(c, SUM_BLOCK), ""), "");
  LLVMValueRef b1 = cg_smin(c, LLVMBuildAdd(c->b, b0, i64c(c, SUM_BLOCK), ""), x->ub[last], false);
  LLVMBuildStore(c->b, LLVMConstNull(t), bs);
  x->iv[last] = cg_open_loop_from(c, b0, b1);
  LLVMValueRef v = cg_convert(c, cg_eval(c, x, n->value), in, ad);
  LLVMBuildStore(c->b, fsum_step(c, LLVMBuildLoad2(c->b, t, bs, ""), v), bs);
  cg_close_loop(c);
  cascade_push(c, t, lv, cnt, LLVMBuildLoad2(c->b, t, bs, ""));
  cg_close_loop(c);
  for (int l = n->rank; l < last; l++) cg_close_loop(c);
  LLVMValueRef o = i64c(c, 0), r = LLVMBuildLoad2(c->b, t, LLVMBuildGEP2(c->b, t, lv, &o, 1, ""), "");
  for (int k = 1; k < SUM_LEVELS; k++) { /* smallest first */
    o = i64c(c, k);
    r = LLVMBuildFAdd(c->b, r, LLVMBuildLoad2(c->b, t, LLVMBuildGEP2(c->b, t, lv, &o, 1, ""), ""), "");
  }
  return r;
}

/* The sequential reduction: integer sums, products, extremes and their
 * positions, and float sums of at most SUM_BLOCK elements. */
static LLVMValueRef plain_reduce(Cg *c, NestCtx *x, LLVMTypeRef t, DType in, DType ad,
                                 LLVMValueRef *lo) {
  const LfNest *n = x->n;
  Op op = n->reduce;
  bool isf = dtype_is_float(ad), mx = op == OP_AMAX || op == OP_ARGMAX;
  bool ext = mx || op == OP_AMIN || op == OP_ARGMIN;
  LLVMValueRef init = op == OP_PROD ? (isf ? LLVMConstReal(t, 1) : i64c(c, 1))
                      : !ext ? LLVMConstNull(t)
                      : isf ? LLVMConstReal(t, mx ? -INFINITY : INFINITY)
                      : i64c(c, mx ? INT64_MIN : INT64_MAX);
  LLVMValueRef acc = cg_entry_alloca(c, t, NULL), arg = cg_entry_alloca(c, c->i64, NULL),
               pos = cg_entry_alloca(c, c->i64, NULL);
  LLVMBuildStore(c->b, init, acc);
  LLVMBuildStore(c->b, i64c(c, 0), arg);
  LLVMBuildStore(c->b, i64c(c, 0), pos);
  for (int l = n->rank; l < n->rank + n->nred; l++) x->iv[l] = cg_open_loop_from(c, lo[l], x->ub[l]);
  LLVMValueRef v = cg_convert(c, cg_eval(c, x, n->value), in, ad);
  LLVMValueRef a = LLVMBuildLoad2(c->b, t, acc, ""), p = LLVMBuildLoad2(c->b, c->i64, pos, "");
  LLVMValueRef r;
  if (op == OP_SUM || op == OP_MEAN) r = isf ? fsum_step(c, a, v) : LLVMBuildAdd(c->b, a, v, "");
  else if (op == OP_PROD) r = isf ? LLVMBuildFMul(c->b, a, v, "") : LLVMBuildMul(c->b, a, v, "");
  else if (isf && c->opt >= 2 && (op == OP_AMAX || op == OP_AMIN)) r = fextreme_step(c, op, a, v);
  else {
    LLVMValueRef take;
    if (isf) {
      LLVMValueRef better = LLVMBuildOr(c->b, fcmp(c, LLVMRealUNO, v, v),
                                        fcmp(c, mx ? LLVMRealOGT : LLVMRealOLT, v, a), "");
      take = LLVMBuildAnd(c->b, fcmp(c, LLVMRealORD, a, a), better, "");
    } else {
      take = LLVMBuildICmp(c->b, mx ? LLVMIntSGT : LLVMIntSLT, v, a, "");
    }
    r = sel(c, take, v, a);
    LLVMBuildStore(c->b, sel(c, take, p, LLVMBuildLoad2(c->b, c->i64, arg, "")), arg);
  }
  LLVMBuildStore(c->b, r, acc);
  LLVMBuildStore(c->b, LLVMBuildAdd(c->b, p, i64c(c, 1), ""), pos);
  for (int l = 0; l < n->nred; l++) cg_close_loop(c);
  if (op == OP_ARGMAX || op == OP_ARGMIN) return LLVMBuildLoad2(c->b, c->i64, arg, "");
  return LLVMBuildLoad2(c->b, t, acc, "");
}

/* The reduction's value for the current outer index. */
LLVMValueRef cpu_emit_reduce(Cg *c, NestCtx *x) {
  const LfNest *n = x->n;
  Op op = n->reduce;
  DType in = n->value->dtype, ad = acc_dtype(in);
  LLVMTypeRef t = cg_compute_type(c, ad);
  LLVMValueRef total = i64c(c, 1), lo[MAXL];
  red_bounds(c, x, lo);
  for (int l = n->rank; l < n->rank + n->nred; l++)
    total = LLVMBuildMul(c->b, total, cg_smin(c, LLVMBuildSub(c->b, x->ub[l], lo[l], ""),
                                           i64c(c, 0), true), "");
  bool cascade = dtype_is_float(ad) && (op == OP_SUM || op == OP_MEAN) && long_reduction(n);
  LLVMValueRef r = cascade ? cascade_sum(c, x, t, in, ad, lo) : plain_reduce(c, x, t, in, ad, lo);
  if (op == OP_ARGMAX || op == OP_ARGMIN) return cg_convert(c, r, DT_I64, n->dtype);
  if (op == OP_MEAN)
    r = LLVMBuildFDiv(c->b, r, LLVMBuildSIToFP(c->b, total, t, ""), "");
  if (n->post) {
    x->acc = r;
    return cg_convert(c, cg_eval(c, x, n->post), n->post->dtype, n->dtype);
  }
  return cg_convert(c, r, ad, n->dtype);
}
