/* reduce.c — the CPU code of a nest's reduction (loops.h LfNest.reduce):
 * accumulators in f32/f64/i64, vectorizable float steps, and the cascade
 * that keeps long float sums accurate (docs/numerics.md).
 * Needs: cpu.h.  Used by: kernel.c, vloops.c, parallel.c, reduce_split.c. */
#include <math.h>
#include <string.h>


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

/* ---- a full block as vectors ------------------------------------------------
 * At -O2 a full block (CPU_SUM_BLOCK elements) of an f32 value that
 * qualifies (lane_kind) is summed by code written here rather than by the
 * loop vectorizer: VB_ACCS vectors of VB_LANES partial sums (a vector is
 * a cache line's worth of a unit-stride f32 input), each load of one that
 * moves along the loop preceded by a prefetch of the line VB_AHEAD bytes
 * ahead, and the sums combined in a fixed tree: ((acc0 + acc1) + acc2) +
 * acc3, then each half of the lanes added to the other down to one.  A
 * sum far beyond the caches is bound by how many lines are in flight per
 * core: the loop vectorizer's form of the same block (the same 64 partial
 * sums) left that to the hardware prefetcher and read about 10% slower
 * than torch's sum on the Zen 5 VM (bench/README.md, "sum_all against
 * torch: lines in flight").  The order is the same on every ISA of
 * 256-bit vectors and more (a 16-lane vector is two 8-lane ones), and
 * the same in the split (reduce_split.c) and the ordinary code (both run
 * this), so the split keeps the serial bits.  Partial blocks, other values, and -O0/-O1
 * (whose blocks add in order) run the scalar loop below. */

#define VB_LANES 16
#define VB_ACCS 4
#define VB_AHEAD 4096 /* bytes: two f32 blocks ahead (2048 and 8192 read slower) */

/* The operations a vector block evaluates as lanes (cg_lane_kind):
 * exact lane-wise f32 arithmetic. */
static int block_op(const LfExpr *e) {
  if (e->args[0]->dtype != DT_F32 || e->dtype != DT_F32) return -1;
  switch (e->op) {
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_NEG: case OP_ABS: return 1;
  case OP_POW: { /* the constant exponents expr.c's pow_f turns into products */
    const LfExpr *p = e->args[1]->kind == LFE_CAST ? e->args[1]->args[0] : e->args[1];
    if (p->kind != LFE_CONST) return -1;
    double v = p->dtype == DT_F64 ? p->value.f : (double)p->value.i;
    return v == 1 || v == 2 || v == 3 || v == -1 || v == -2 ? 1 : -1;
  }
  default: return -1;
  }
}

/* 1: e moves along loop kd as a vector of f32 (unit-stride f32 loads and
 * exact lane-wise ops of them); 0: it does not move along kd (a scalar
 * in every lane); -1: neither (the scalar loop). */
static int lane_kind(const Cg *c, const LfExpr *e, int kd) {
  return cg_lane_kind(c, e, kd, block_op);
}

/* The load hook of a vector block: a load that moves along the loop is
 * VB_LANES lanes from the current index, its line VB_AHEAD bytes ahead
 * prefetched; others load as scalars (NULL). */
static LLVMValueRef lane_load(Cg *c, NestCtx *x, const LfExpr *e) {
  int kd = *(const int *)c->load_data;
  if (sym_is(e->acc.stride[kd], 0)) return NULL;
  LLVMValueRef p = cg_address(c, x, &e->acc, DT_F32, x->n->rank + x->n->nred);
  LLVMValueRef ahead = i64c(c, VB_AHEAD);
  LLVMValueRef pf[4] = {LLVMBuildGEP2(c->b, c->i8, p, &ahead, 1, ""), i32c(c, 0), i32c(c, 3),
                        i32c(c, 1)};
  cg_intrinsic(c, "llvm.prefetch", &c->ptr, 1, pf, 4);
  LLVMValueRef v = LLVMBuildLoad2(c->b, LLVMVectorType(c->f32, VB_LANES), p, "");
  LLVMSetAlignment(v, 4);
  return v;
}

/* Whether a's full blocks run as vectors (at the builder's ISA). */
static bool vector_blocks(Cg *c, const RedAcc *a) {
  const LfNest *n = a->n;
  return c->opt >= 2 && c->isa && c->isa->vec_bits >= 256 && a->ad == DT_F32 &&
         LLVMGetTypeKind(a->t) == LLVMFloatTypeKind && n->value->dtype == DT_F32 &&
         lane_kind(c, n->value, n->rank + n->nred - 1) == 1;
}

/* Marks the loop whose back edge is br as not to be unrolled: its 8
 * steps (512-bit vectors) unrolled read no faster and took a tenth more
 * of tdslc's time for a sum kernel.  The loop ID is the self-referential
 * node LLVM requires: !{!self, !{"llvm.loop.unroll.disable"}}. */
static void no_unroll(Cg *c, LLVMValueRef br) {
  const char *k = "llvm.loop.unroll.disable";
  LLVMMetadataRef prop = LLVMMDStringInContext2(c->ctx, k, strlen(k));
  LLVMMetadataRef node = LLVMMDNodeInContext2(c->ctx, &prop, 1);
  LLVMMetadataRef id = cg_loop_id(c->ctx, &node, 1);
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(c->ctx, "llvm.loop", 9),
                  LLVMMetadataAsValue(c->ctx, id));
}

/* The sum of the full block from e0 into a->bs. */
static void vector_block(Cg *c, NestCtx *x, RedAcc *a, LLVMValueRef e0) {
  const LfNest *n = x->n;
  int last = n->rank + n->nred - 1;
  LLVMTypeRef vt = LLVMVectorType(c->f32, VB_LANES);
  LLVMValueRef acc[VB_ACCS];
  for (int j = 0; j < VB_ACCS; j++) {
    acc[j] = cg_entry_alloca(c, vt, NULL);
    LLVMBuildStore(c->b, LLVMConstNull(vt), acc[j]);
  }
  LLVMValueRef (*hook)(Cg *, NestCtx *, const LfExpr *) = c->load_hook;
  void *data = c->load_data;
  c->load_hook = lane_load, c->load_data = &last;
  LLVMValueRef k = cg_open_loop(c, i64c(c, CPU_SUM_BLOCK / (VB_LANES * VB_ACCS)));
  LLVMValueRef step = LLVMBuildMul(c->b, k, i64c(c, VB_LANES * VB_ACCS), "");
  LLVMValueRef base = LLVMBuildAdd(c->b, e0, step, "");
  for (int j = 0; j < VB_ACCS; j++) {
    x->iv[last] = LLVMBuildAdd(c->b, base, i64c(c, j * VB_LANES), "");
    LLVMValueRef v = cg_eval(c, x, n->value);
    LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, vt, acc[j], ""), v, ""), acc[j]);
  }
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
  cg_close_loop(c);
  no_unroll(c, LLVMGetBasicBlockTerminator(latch));
  c->load_hook = hook, c->load_data = data;
  LLVMValueRef s = LLVMBuildLoad2(c->b, vt, acc[0], ""), idx[VB_LANES];
  for (int j = 1; j < VB_ACCS; j++)
    s = LLVMBuildFAdd(c->b, s, LLVMBuildLoad2(c->b, vt, acc[j], ""), "");
  for (int w = VB_LANES / 2; w >= 1; w /= 2) {
    for (int i = 0; i < w; i++) idx[i] = i32c(c, i);
    LLVMValueRef lo = LLVMBuildShuffleVector(c->b, s, LLVMGetUndef(LLVMTypeOf(s)),
                                             LLVMConstVector(idx, (unsigned)w), "");
    for (int i = 0; i < w; i++) idx[i] = i32c(c, w + i);
    LLVMValueRef hi = LLVMBuildShuffleVector(c->b, s, LLVMGetUndef(LLVMTypeOf(s)),
                                             LLVMConstVector(idx, (unsigned)w), "");
    s = LLVMBuildFAdd(c->b, lo, hi, "");
  }
  LLVMBuildStore(c->b, LLVMBuildExtractElement(c->b, s, i32c(c, 0), ""), a->bs);
}

void cpu_red_run(Cg *c, NestCtx *x, RedAcc *a, LLVMValueRef e0, LLVMValueRef e1,
                 LLVMValueRef pos0) {
  const LfNest *n = x->n;
  int last = n->rank + n->nred - 1;
  if (a->cascade) {
    LLVMBasicBlockRef done = NULL;
    if (vector_blocks(c, a)) {
      LLVMBasicBlockRef full = block(c, "vblock"), part = block(c, "sblock");
      done = block(c, "block_sum");
      LLVMValueRef len = LLVMBuildSub(c->b, e1, e0, "");
      LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, len, i64c(c, CPU_SUM_BLOCK), ""), full,
                      part);
      LLVMPositionBuilderAtEnd(c->b, full);
      vector_block(c, x, a, e0);
      LLVMBuildBr(c->b, done);
      LLVMPositionBuilderAtEnd(c->b, part);
    }
    LLVMBuildStore(c->b, LLVMConstNull(a->t), a->bs);
    x->iv[last] = cg_open_loop_from(c, e0, e1);
    LLVMValueRef v = cg_convert(c, cg_eval(c, x, n->value), a->in, a->ad);
    LLVMBuildStore(c->b, fsum_step(c, LLVMBuildLoad2(c->b, a->t, a->bs, ""), v), a->bs);
    cg_close_loop(c);
    if (done) {
      LLVMBuildBr(c->b, done);
      LLVMPositionBuilderAtEnd(c->b, done);
    }
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

/* ---- a short row's ARGMAX/ARGMIN as one vector ----------------------------
 * At -O2 on ISAs of 256-bit vectors and more, an ARGMAX/ARGMIN over one
 * reduction loop of a compile-time extent of ROW_HALF + 1 .. 2 * ROW_HALF
 * f32 values that qualify (lane_kind: unit-stride loads along the row)
 * is two vectors of ROW_HALF lanes, the row's first and last (overlapping
 * where the row is shorter than both, all plain loads within the row),
 * then: the first NaN's position if the row has a NaN, else the first
 * position equal to the row's maximum (minimum), the lowest set bit of a
 * compare mask (the second vector's bits shifted to their positions).
 * That is the plain step's result (plain_step: a NaN is taken and kept; a
 * value replaces the accumulator only when greater, so ties keep the
 * first, and -0 == +0; a row of -inf is position 0).  LLVM does not
 * vectorize the plain loop along the row (a position is no reduction it
 * knows), so it vectorized the loop of rows around it, the row's elements
 * unrolled: rows of up to 8 (its largest interleave group) as wide loads
 * and shuffles, fast, so they stay so; longer ones as a gather per
 * element per 8 rows, several times slower than this and a large function
 * for instruction selection (mlp's logits.argmax(1), 10 a row: as much of
 * tdslc's time as a small GEMM function; bench/README.md, "Compile time:
 * short argmax rows").  One masked load of 16 lanes a row instead read
 * 4x slower than these from memory (6 GB/s, not 25, on the Zen 5 VM). */

#define ROW_HALF 8 /* shorter rows: LLVM's interleaved loads across rows */

/* The row's length when n's reduction runs as one vector, else 0. */
static int short_row(const Cg *c, const LfNest *n) {
  int64_t e;
  if ((n->reduce != OP_ARGMAX && n->reduce != OP_ARGMIN) || n->nred != 1 || c->opt < 2 ||
      !c->isa || c->isa->vec_bits < 256)
    return 0;
  if ((n->red_lo && n->red_lo[0]) || (n->red_hi && n->red_hi[0])) return 0;
  if (!sym_is_const(n->red[0], &e) || e <= ROW_HALF || e > 2 * ROW_HALF) return 0;
  return n->value->dtype == DT_F32 && lane_kind(c, n->value, n->rank) == 1 ? (int)e : 0;
}

/* The load hook of a short row: a load that moves along the row is
 * ROW_HALF lanes from the current index; others load as scalars (NULL). */
static LLVMValueRef row_load(Cg *c, NestCtx *x, const LfExpr *e) {
  if (sym_is(e->acc.stride[x->n->rank], 0)) return NULL;
  LLVMValueRef p = cg_address(c, x, &e->acc, DT_F32, x->n->rank + x->n->nred);
  LLVMValueRef v = LLVMBuildLoad2(c->b, LLVMVectorType(c->f32, ROW_HALF), p, "");
  LLVMSetAlignment(v, 4);
  return v;
}

/* The position (i64) of the row's ARGMAX/ARGMIN, len its length. */
static LLVMValueRef row_arg(Cg *c, NestCtx *x, int len) {
  const LfNest *n = x->n;
  LLVMValueRef (*hook)(Cg *, NestCtx *, const LfExpr *) = c->load_hook, h[2], idx[2 * ROW_HALF];
  c->load_hook = row_load;
  for (int k = 0; k < 2; k++) {
    x->iv[n->rank] = i64c(c, k ? len - ROW_HALF : 0);
    h[k] = cg_eval(c, x, n->value);
  }
  c->load_hook = hook;
  for (int i = 0; i < 2 * ROW_HALF; i++) idx[i] = i32c(c, i);
  LLVMValueRef v = LLVMBuildShuffleVector(c->b, h[0], h[1], LLVMConstVector(idx, 2 * ROW_HALF), "");
  LLVMTypeRef vt = LLVMTypeOf(v), bt = LLVMIntTypeInContext(c->ctx, 2 * ROW_HALF);
  const char *red = n->reduce == OP_ARGMAX ? "llvm.vector.reduce.fmax" : "llvm.vector.reduce.fmin";
  LLVMValueRef m = cg_intrinsic(c, red, &vt, 1, &v, 1);
  LLVMSetFastMathFlags(m, LLVMFastMathNoNaNs); /* a tree of vector max; used only without NaN */
  LLVMValueRef lanes[2] = {fcmp(c, LLVMRealUNO, v, v),
                           fcmp(c, LLVMRealOEQ, v, cg_splat(c, m, 2 * ROW_HALF))};
  for (int k = 0; k < 2; k++) { /* lane i < ROW_HALF: position i; else len - 2 * ROW_HALF + i */
    LLVMValueRef b = LLVMBuildZExt(c->b, LLVMBuildBitCast(c->b, lanes[k], bt, ""), c->i32, "");
    LLVMValueRef lo = LLVMBuildAnd(c->b, b, i32c(c, (1 << ROW_HALF) - 1), "");
    LLVMValueRef hi = LLVMBuildShl(c->b, LLVMBuildLShr(c->b, b, i32c(c, ROW_HALF), ""),
                                   i32c(c, len - ROW_HALF), "");
    lanes[k] = LLVMBuildOr(c->b, lo, hi, "");
  }
  LLVMValueRef bits = sel(c, LLVMBuildICmp(c->b, LLVMIntNE, lanes[0], i32c(c, 0), ""), lanes[0],
                          lanes[1]);
  LLVMValueRef tz[2] = {bits, LLVMConstInt(c->i1, 1, 0)};
  return LLVMBuildZExt(c->b, cg_intrinsic(c, "llvm.cttz", &c->i32, 1, tz, 2), c->i64, "");
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
  int len = short_row(c, n);
  if (len) return cg_convert(c, row_arg(c, x, len), DT_I64, n->dtype);
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
