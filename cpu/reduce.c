/* reduce.c — the CPU code of a nest's reduction (loops.h LfNest.reduce):
 * accumulators in f32/f64/i64, vectorizable float steps, and the cascade
 * that keeps long float sums accurate (docs/numerics.md).
 * Needs: cpu.h.  Used by: kernel.c, vloops.c, parallel.c, reduce_split.c. */
#include <math.h>

#include "cpu.h"

/* ---- nests -------------------------------------------------------------- */

DType cpu_red_acc_dtype(DType in) {
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
 * cascade below (vector partial sums; a reduction split over threads is
 * split at block boundaries that depend on the shape alone,
 * reduce_split.c, so results do not depend on the thread count).
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
 * A float SUM/MEAN over more than CPU_SUM_BLOCK elements is a cascade, at
 * every opt level: the innermost reduction loop runs in blocks of
 * CPU_SUM_BLOCK elements, each summed from zero by its own loop
 * (vectorized with reassociation at -O2), and the block sums enter a
 * carry chain of CPU_SUM_LEVELS accumulators where level k takes
 * 2^CPU_SUM_FAN_LOG2 sums before it is added into level k + 1 and
 * cleared.  Every addition then adds values of similar magnitude: the
 * error bound grows with CPU_SUM_BLOCK + 16 * log16(n) instead of n (a
 * sum of 50M ones is exact where a running f32 sum stops at 2^24), like
 * PyTorch's cascade sum.  Level CPU_SUM_LEVELS - 1 holds blocks of
 * CPU_SUM_BLOCK * 16^6 (8.6e11) elements.
 * No level ever holds -0 (each starts at +0, and a sum is -0 only when
 * both terms are), so adding +0 to a level or to a flushed total leaves
 * its bits as they were: reduce_split.c relies on it. */

/* Whether n's reduction loops may exceed CPU_SUM_BLOCK elements. */
static bool long_reduction(const LfNest *n) {
  int64_t total = 1, e;
  for (int j = 0; j < n->nred; j++) {
    if (!sym_is_const(n->red[j], &e)) return true;
    total *= e;
    if (total > CPU_SUM_BLOCK) return true;
  }
  return false;
}

/* Adds s into level `level` of the cascade (levels lv; cnt: the sums
 * that level took), carrying into the levels above. */
static void cascade_push(Cg *c, LLVMTypeRef t, LLVMValueRef lv, LLVMValueRef cnt,
                         LLVMValueRef s, LLVMValueRef level) {
  LLVMValueRef zero = i64c(c, 0), l0 = LLVMBuildGEP2(c->b, t, lv, &level, 1, "");
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, t, l0, ""), s, ""), l0);
  LLVMValueRef one = i64c(c, 1), k = LLVMBuildAdd(c->b, level, one, "");
  LLVMValueRef m = LLVMBuildAdd(c->b, LLVMBuildLoad2(c->b, c->i64, cnt, ""), one, "");
  LLVMBuildStore(c->b, m, cnt);
  /* carry: while k < CPU_SUM_LEVELS and m % 16 == 0: level k += level k-1 */
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), head = block(c, "carry"),
                    body = block(c, "carry_body"), done = block(c, "carried");
  LLVMBuildBr(c->b, head);
  LLVMPositionBuilderAtEnd(c->b, head);
  LLVMValueRef kp = LLVMBuildPhi(c->b, c->i64, "k"), mp = LLVMBuildPhi(c->b, c->i64, "m");
  LLVMAddIncoming(kp, &k, &pre, 1);
  LLVMAddIncoming(mp, &m, &pre, 1);
  LLVMValueRef low = LLVMBuildAnd(c->b, mp, i64c(c, (1 << CPU_SUM_FAN_LOG2) - 1), "");
  LLVMValueRef go = LLVMBuildAnd(c->b,
                                 LLVMBuildICmp(c->b, LLVMIntULT, kp, i64c(c, CPU_SUM_LEVELS), ""),
                                 LLVMBuildICmp(c->b, LLVMIntEQ, low, zero, ""), "");
  LLVMBuildCondBr(c->b, go, body, done);
  LLVMPositionBuilderAtEnd(c->b, body);
  LLVMValueRef km = LLVMBuildSub(c->b, kp, one, "");
  LLVMValueRef from = LLVMBuildGEP2(c->b, t, lv, &km, 1, ""), to = LLVMBuildGEP2(c->b, t, lv, &kp, 1, "");
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, t, to, ""),
                                     LLVMBuildLoad2(c->b, t, from, ""), ""), to);
  LLVMBuildStore(c->b, LLVMConstNull(t), from);
  LLVMValueRef kn = LLVMBuildAdd(c->b, kp, one, ""),
               mn = LLVMBuildLShr(c->b, mp, i64c(c, CPU_SUM_FAN_LOG2), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
  LLVMAddIncoming(kp, &kn, &latch, 1);
  LLVMAddIncoming(mp, &mn, &latch, 1);
  LLVMBuildBr(c->b, head);
  LLVMPositionBuilderAtEnd(c->b, done);
}

/* ---- accumulators ----------------------------------------------------------- */

/* v in every one of `lanes` lanes (lanes 1: v). */
static LLVMValueRef splat(LLVMValueRef v, int lanes) {
  LLVMValueRef e[64];
  if (lanes == 1) return v;
  for (int i = 0; i < lanes; i++) e[i] = v;
  return LLVMConstVector(e, (unsigned)lanes);
}

void cpu_red_begin(Cg *c, const LfNest *n, RedAcc *a) { cpu_red_begin_lanes(c, n, a, 1); }

void cpu_red_begin_lanes(Cg *c, const LfNest *n, RedAcc *a, int lanes) {
  Op op = n->reduce;
  a->n = n;
  a->in = n->value->dtype;
  a->ad = cpu_red_acc_dtype(a->in);
  a->t = cg_compute_type(c, a->ad);
  LLVMTypeRef st = a->t;
  if (lanes > 1) a->t = LLVMVectorType(st, (unsigned)lanes);
  bool isf = dtype_is_float(a->ad), mx = op == OP_AMAX || op == OP_ARGMAX;
  bool ext = mx || op == OP_AMIN || op == OP_ARGMIN;
  a->cascade = isf && (op == OP_SUM || op == OP_MEAN) && long_reduction(n);
  if (a->cascade) {
    LLVMTypeRef t = a->t;
    a->lv = cg_entry_alloca(c, t, i32c(c, CPU_SUM_LEVELS));
    a->cnt = cg_entry_alloca(c, c->i64, NULL);
    a->bs = cg_entry_alloca(c, t, NULL);
    for (int k = 0; k < CPU_SUM_LEVELS; k++) {
      LLVMValueRef o = i64c(c, k);
      LLVMBuildStore(c->b, LLVMConstNull(t), LLVMBuildGEP2(c->b, t, a->lv, &o, 1, ""));
    }
    LLVMBuildStore(c->b, i64c(c, 0), a->cnt);
    return;
  }
  LLVMValueRef init = op == OP_PROD ? (isf ? LLVMConstReal(st, 1) : i64c(c, 1))
                      : !ext ? LLVMConstNull(st)
                      : isf ? LLVMConstReal(st, mx ? -INFINITY : INFINITY)
                      : i64c(c, mx ? INT64_MIN : INT64_MAX);
  init = splat(init, lanes);
  a->acc = cg_entry_alloca(c, a->t, NULL);
  a->arg = cg_entry_alloca(c, c->i64, NULL);
  a->pos = cg_entry_alloca(c, c->i64, NULL);
  LLVMBuildStore(c->b, init, a->acc);
  LLVMBuildStore(c->b, i64c(c, 0), a->arg);
  LLVMBuildStore(c->b, i64c(c, 0), a->pos);
}

/* The plain accumulator acc after value v at position p (ARGMAX/ARGMIN:
 * the position is stored in a->arg when v is taken; ties keep the
 * first). */
static LLVMValueRef plain_step(Cg *c, RedAcc *a, LLVMValueRef acc, LLVMValueRef v,
                               LLVMValueRef p) {
  Op op = a->n->reduce;
  bool isf = dtype_is_float(a->ad), mx = op == OP_AMAX || op == OP_ARGMAX;
  if (op == OP_SUM || op == OP_MEAN) return isf ? fsum_step(c, acc, v) : LLVMBuildAdd(c->b, acc, v, "");
  if (op == OP_PROD) return isf ? LLVMBuildFMul(c->b, acc, v, "") : LLVMBuildMul(c->b, acc, v, "");
  if (isf && c->opt >= 2 && (op == OP_AMAX || op == OP_AMIN)) return fextreme_step(c, op, acc, v);
  LLVMValueRef take;
  if (isf) {
    LLVMValueRef better = LLVMBuildOr(c->b, fcmp(c, LLVMRealUNO, v, v),
                                      fcmp(c, mx ? LLVMRealOGT : LLVMRealOLT, v, acc), "");
    take = LLVMBuildAnd(c->b, fcmp(c, LLVMRealORD, acc, acc), better, "");
  } else {
    take = LLVMBuildICmp(c->b, mx ? LLVMIntSGT : LLVMIntSLT, v, acc, "");
  }
  LLVMValueRef r = sel(c, take, v, acc);
  if (op == OP_ARGMAX || op == OP_ARGMIN)
    LLVMBuildStore(c->b, sel(c, take, p, LLVMBuildLoad2(c->b, c->i64, a->arg, "")), a->arg);
  return r;
}

void cpu_red_run(Cg *c, NestCtx *x, RedAcc *a, LLVMValueRef e0, LLVMValueRef e1,
                 LLVMValueRef pos0) {
  const LfNest *n = x->n;
  int last = n->rank + n->nred - 1;
  if (a->cascade) {
    LLVMBuildStore(c->b, LLVMConstNull(a->t), a->bs);
    x->iv[last] = cg_open_loop_from(c, e0, e1);
    LLVMValueRef v = cg_convert(c, cg_eval(c, x, n->value), a->in, a->ad);
    LLVMBuildStore(c->b, fsum_step(c, LLVMBuildLoad2(c->b, a->t, a->bs, ""), v), a->bs);
    cg_close_loop(c);
    cascade_push(c, a->t, a->lv, a->cnt, LLVMBuildLoad2(c->b, a->t, a->bs, ""), i64c(c, 0));
    return;
  }
  if (pos0) LLVMBuildStore(c->b, pos0, a->pos);
  if (n->nred) x->iv[last] = cg_open_loop_from(c, e0, e1); /* else one value */
  LLVMValueRef v = cg_convert(c, cg_eval(c, x, n->value), a->in, a->ad);
  LLVMValueRef acc = LLVMBuildLoad2(c->b, a->t, a->acc, ""),
               p = LLVMBuildLoad2(c->b, c->i64, a->pos, "");
  LLVMBuildStore(c->b, plain_step(c, a, acc, v, p), a->acc);
  LLVMBuildStore(c->b, LLVMBuildAdd(c->b, p, i64c(c, 1), ""), a->pos);
  if (n->nred) cg_close_loop(c);
}

void cpu_red_merge(Cg *c, RedAcc *a, LLVMValueRef v, LLVMValueRef p, LLVMValueRef level) {
  if (a->cascade) cascade_push(c, a->t, a->lv, a->cnt, v, level);
  else LLVMBuildStore(c->b, plain_step(c, a, LLVMBuildLoad2(c->b, a->t, a->acc, ""), v, p), a->acc);
}

LLVMValueRef cpu_red_value(Cg *c, RedAcc *a, LLVMValueRef start, LLVMValueRef *arg) {
  if (!a->cascade) {
    if (arg) *arg = LLVMBuildLoad2(c->b, c->i64, a->arg, "");
    return LLVMBuildLoad2(c->b, a->t, a->acc, "");
  }
  LLVMValueRef r = start;
  for (int k = 0; k < CPU_SUM_LEVELS; k++) { /* smallest first */
    LLVMValueRef o = i64c(c, k);
    LLVMValueRef l = LLVMBuildLoad2(c->b, a->t, LLVMBuildGEP2(c->b, a->t, a->lv, &o, 1, ""), "");
    r = r ? LLVMBuildFAdd(c->b, r, l, "") : l;
  }
  return r;
}

LLVMValueRef cpu_red_finish(Cg *c, NestCtx *x, RedAcc *a, LLVMValueRef r, LLVMValueRef arg,
                            LLVMValueRef total) {
  const LfNest *n = x->n;
  Op op = n->reduce;
  if (op == OP_ARGMAX || op == OP_ARGMIN) return cg_convert(c, arg, DT_I64, n->dtype);
  if (op == OP_MEAN) r = LLVMBuildFDiv(c->b, r, LLVMBuildSIToFP(c->b, total, a->t, ""), "");
  if (n->post) {
    x->acc = r;
    return cg_convert(c, cg_eval(c, x, n->post), n->post->dtype, n->dtype);
  }
  return cg_convert(c, r, a->ad, n->dtype);
}

/* ---- the serial reduction ------------------------------------------------- */

/* The reduction loops (bounds lo and x->ub) into a: a cascade runs the
 * innermost loop in blocks of CPU_SUM_BLOCK; a plain reduction runs it
 * whole, its positions counting on over the outer reduction loops. */
static void serial_reduce(Cg *c, NestCtx *x, RedAcc *a, LLVMValueRef *lo) {
  const LfNest *n = x->n;
  int last = n->rank + n->nred - 1;
  for (int l = n->rank; l < last; l++) x->iv[l] = cg_open_loop_from(c, lo[l], x->ub[l]);
  if (a->cascade) {
    LLVMValueRef len = cg_smin(c, LLVMBuildSub(c->b, x->ub[last], lo[last], ""), i64c(c, 0), true);
    LLVMValueRef nb = LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, len, i64c(c, CPU_SUM_BLOCK - 1), ""),
                                    i64c(c, CPU_SUM_BLOCK), "");
    LLVMValueRef b = cg_open_loop(c, nb);
    LLVMValueRef b0 = LLVMBuildAdd(c->b, lo[last], LLVMBuildMul(c->b, b, i64c(c, CPU_SUM_BLOCK), ""), "");
    LLVMValueRef b1 = cg_smin(c, LLVMBuildAdd(c->b, b0, i64c(c, CPU_SUM_BLOCK), ""), x->ub[last], false);
    cpu_red_run(c, x, a, b0, b1, NULL);
    cg_close_loop(c);
  } else {
    cpu_red_run(c, x, a, n->nred ? lo[last] : NULL, n->nred ? x->ub[last] : NULL, NULL);
  }
  for (int l = n->rank; l < last; l++) cg_close_loop(c);
}

/* The reduction's value for the current outer index. */
LLVMValueRef cpu_emit_reduce(Cg *c, NestCtx *x) {
  const LfNest *n = x->n;
  LLVMValueRef total = i64c(c, 1), lo[MAXL], arg = NULL;
  red_bounds(c, x, lo);
  for (int l = n->rank; l < n->rank + n->nred; l++)
    total = LLVMBuildMul(c->b, total, cg_smin(c, LLVMBuildSub(c->b, x->ub[l], lo[l], ""),
                                           i64c(c, 0), true), "");
  RedAcc a;
  cpu_red_begin(c, n, &a);
  serial_reduce(c, x, &a, lo);
  LLVMValueRef r = cpu_red_value(c, &a, NULL, &arg);
  return cpu_red_finish(c, x, &a, r, arg, total);
}
