/* reduce_split.c — a long reduction to few outputs split over threads
 * (opt_level >= 1).  A nest's ordinary code runs each output's reduction
 * on one thread (parallel.c splits outer iterations only), which leaves
 * all but one thread idle for x.sum() or a loss's mean.  Here the
 * reduction of every output is cut into chunks whose bounds depend on
 * the shape alone, never on the thread count:
 *   - the innermost reduction loop runs in blocks of CPU_SUM_BLOCK
 *     elements (each outer reduction index starts a block), numbered in
 *     order over the whole reduction: the cascade's blocks (reduce.c);
 *   - a chunk is 16^m consecutive blocks from the reduction's start, m the
 *     smallest from 1 on that keeps all outputs' chunks to SPLIT_ITEMS;
 * each (chunk, output) pair is one item of tdsl_parallel_for, which
 * leaves the chunk's value (and position) in an array on the kernel's
 * stack; the kernel then combines each output's chunks in chunk order.
 * Integer sums and products wrap and extremes keep the first of equal
 * values in any split, so those results are the serial ones.  A float
 * sum's chunk of 16^m blocks runs the cascade from zero: its value is
 * the one the serial cascade's level m takes at that block (the levels
 * below are clear at every multiple of 16^m), so the chunks' values
 * enter the combining cascade at level m, and the last partial chunk's
 * levels, flushed smallest first, are the serial flush's first terms:
 * the result is the serial cascade's, bit for bit (test_codegen_numerics:
 * split_sums_are_serial).
 * The kernel keeps the nest's ordinary code for shapes the split does
 * not pay for (fewer than 2 * par_min_elems elements per output, more
 * than SPLIT_MAX_OUT outputs); both forms give the same values.
 * Needs: cpu.h.  Used by: kernel.c. */
#include "cpu.h"

#define SPLIT_MAX_OUT 32 /* outputs; more feed the threads through parallel.c */
#define SPLIT_ITEMS 512  /* chunks of all outputs: their values' arrays */
#define SPLIT_MAX_M 7    /* chunks of at most 16^7 blocks: level 7 is the top */

/* Whether n may split: a reduction the chunks keep exact (no float
 * product), loops without bounds of their own (pools' windows), not
 * known to be short or to have many outputs. */
static bool splittable(Cg *c, const LfNest *n) {
  if (n->check || n->nred == 0 || lf_is_scan(n)) return false;
  switch (n->reduce) {
  case OP_SUM: case OP_MEAN: case OP_AMAX: case OP_AMIN: case OP_ARGMAX: case OP_ARGMIN: break;
  case OP_PROD: if (dtype_is_float(n->value->dtype)) return false; break;
  default: return false;
  }
  int64_t e, r = 1, o = 1;
  bool rk = true, ok = true;
  for (int j = 0; j < n->nred; j++) {
    if ((n->red_lo && n->red_lo[j]) || (n->red_hi && n->red_hi[j])) return false;
    if (!sym_is_const(n->red[j], &e)) rk = false;
    else if (r < ((int64_t)1 << 40)) r *= e;
  }
  for (int l = 0; l < n->rank; l++) {
    if (!sym_is_const(n->shape[l], &e)) ok = false;
    else if (o <= SPLIT_MAX_OUT) o *= e;
  }
  return !(rk && r < 2 * c->target->par_min_elems) && !(ok && o > SPLIT_MAX_OUT);
}

/* The reduction's blocks for one output. */
typedef struct Geo {
  LLVMValueRef outs;  /* outer iterations (outputs) */
  LLVMValueRef total; /* elements reduced per output */
  LLVMValueRef len;   /* the innermost reduction loop's extent */
  LLVMValueRef nb;    /* its blocks */
  LLVMValueRef nbl;   /* blocks per output: nb times the outer reduction loops' extents */
} Geo;

/* Extents into x->ub, the reduction loops collapsed where the nest's
 * ordinary code collapses them (a nest with outer loops: vloops.c; a
 * nest without runs its loops as written, kernel.c), so that the blocks
 * are the same; and the geometry. */
static void geometry(Cg *c, const LfNest *n, NestCtx *x, Geo *g) {
  int last = n->rank + n->nred - 1;
  for (int l = 0; l < n->rank; l++) x->ub[l] = cg_sym_val(c, n->shape[l]);
  for (int l = 0; l < n->nred; l++) x->ub[n->rank + l] = cg_sym_val(c, n->red[l]);
  if (n->rank > 0) {
    NestCtx t = *x;
    VLoops vl;
    cpu_plan_vloops(c, n, &t, &vl);
    for (int l = n->rank; l <= last; l++) x->ub[l] = t.ub[l];
  }
  LLVMValueRef rows = i64c(c, 1);
  g->outs = i64c(c, 1);
  for (int l = 0; l < n->rank; l++) g->outs = LLVMBuildMul(c->b, g->outs, x->ub[l], "");
  for (int l = n->rank; l < last; l++) rows = LLVMBuildMul(c->b, rows, x->ub[l], "");
  g->len = x->ub[last];
  g->total = LLVMBuildMul(c->b, rows, g->len, "");
  g->nb = LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, g->len, i64c(c, CPU_SUM_BLOCK - 1), ""),
                        i64c(c, CPU_SUM_BLOCK), "");
  g->nbl = LLVMBuildMul(c->b, rows, g->nb, "");
}

static LLVMValueRef ceil_div(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, a, LLVMBuildSub(c->b, b, i64c(c, 1), ""), ""), b,
                       "");
}

/* Sets x->iv[from .. to) to flat index i's digits over extents x->ub. */
static void digits(Cg *c, NestCtx *x, int from, int to, LLVMValueRef i) {
  for (int l = to - 1; l >= from; l--) {
    x->iv[l] = l > from ? LLVMBuildURem(c->b, i, x->ub[l], "") : i;
    if (l > from) i = LLVMBuildUDiv(c->b, i, x->ub[l], "");
  }
}

static bool has_arg(const LfNest *n) { return n->reduce == OP_ARGMAX || n->reduce == OP_ARGMIN; }

/* K.redI(begin, end, buf..., sym..., outs, chunk blocks, values, positions)
 * and its wrapper: items [begin, end), item w the chunk w / outs of
 * output w % outs; its value into values[w] (an array of the
 * accumulator's type) and, ARGMAX/ARGMIN, its position into positions[w]. */
static Outlined chunk_functions(Cg *c, const LfNest *n, LLVMTypeRef t) {
  Outlined f;
  int ns = c->k->nsyms, last = n->rank + n->nred - 1;
  cpu_outline_open(c, &f, "red", 2, ns + 4);
  NestCtx x = {.n = n};
  Geo g;
  geometry(c, n, &x, &g);
  LLVMValueRef outs = cpu_outline_value(&f, ns), cb = cpu_outline_value(&f, ns + 1);
  LLVMValueRef vals = LLVMBuildIntToPtr(c->b, cpu_outline_value(&f, ns + 2), c->ptr, "");
  LLVMValueRef poss = LLVMBuildIntToPtr(c->b, cpu_outline_value(&f, ns + 3), c->ptr, "");
  LLVMValueRef w = cg_open_loop_from(c, LLVMGetParam(f.impl, 0), LLVMGetParam(f.impl, 1));
  digits(c, &x, 0, n->rank, LLVMBuildURem(c->b, w, outs, ""));
  LLVMValueRef g0 = LLVMBuildMul(c->b, LLVMBuildUDiv(c->b, w, outs, ""), cb, "");
  LLVMValueRef g1 = cg_smin(c, LLVMBuildAdd(c->b, g0, cb, ""), g.nbl, false);
  RedAcc a;
  cpu_red_begin(c, n, &a);
  LLVMValueRef gi = cg_open_loop_from(c, g0, g1), row = i64c(c, 0), b = gi;
  if (n->nred > 1) {
    row = LLVMBuildUDiv(c->b, gi, g.nb, "");
    b = LLVMBuildURem(c->b, gi, g.nb, "");
    digits(c, &x, n->rank, last, row);
  }
  LLVMValueRef e0 = LLVMBuildMul(c->b, b, i64c(c, CPU_SUM_BLOCK), "");
  LLVMValueRef e1 = cg_smin(c, LLVMBuildAdd(c->b, e0, i64c(c, CPU_SUM_BLOCK), ""), g.len, false);
  LLVMValueRef pos0 = has_arg(n) ? LLVMBuildAdd(c->b, LLVMBuildMul(c->b, row, g.len, ""), e0, "")
                                 : NULL;
  cpu_red_run(c, &x, &a, e0, e1, pos0);
  cg_close_loop(c);
  LLVMValueRef arg = NULL, v = cpu_red_value(c, &a, NULL, has_arg(n) ? &arg : NULL);
  LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, t, vals, &w, 1, ""));
  if (arg) LLVMBuildStore(c->b, arg, LLVMBuildGEP2(c->b, c->i64, poss, &w, 1, ""));
  cg_close_loop(c);
  cpu_outline_close(c, &f);
  return f;
}

/* In the kernel: each output's chunks combined in chunk order and the
 * result stored.  A cascade takes the full chunks' values at level m and
 * starts its flush from the partial chunk's value (+0 without one). */
static void combine(Cg *c, const LfNest *n, NestCtx *x, const Geo *g, LLVMValueRef m,
                    LLVMValueRef cb, LLVMValueRef nc, LLVMValueRef vals, LLVMValueRef poss,
                    LLVMTypeRef t) {
  if (n->store.rt_strides) {
    const LfBuf *b = &c->lk->bufs[n->store.buf];
    for (int l = 0; l < n->rank; l++)
      x->rt_stride[l] = cg_dl_stride(c, c->args[c->k->nparams + b->index], n->rank, l);
  }
  LLVMValueRef o = i64c(c, 0), arg = NULL, r;
  for (int l = 0; l < n->rank; l++) {
    x->iv[l] = cg_open_loop(c, x->ub[l]);
    o = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, o, x->ub[l], ""), x->iv[l], "");
  }
  RedAcc a;
  cpu_red_begin(c, n, &a);
  bool cascade = a.cascade;
  LLVMValueRef full = cascade ? LLVMBuildUDiv(c->b, g->nbl, cb, "") : nc;
  LLVMValueRef ci = cg_open_loop(c, full);
  LLVMValueRef w = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, g->outs, ""), o, "");
  LLVMValueRef v = LLVMBuildLoad2(c->b, t, LLVMBuildGEP2(c->b, t, vals, &w, 1, ""), "");
  LLVMValueRef p = has_arg(n) ? LLVMBuildLoad2(c->b, c->i64, LLVMBuildGEP2(c->b, c->i64, poss, &w, 1, ""), "")
                              : i64c(c, 0);
  cpu_red_merge(c, &a, v, p, m);
  cg_close_loop(c);
  if (cascade) {
    LLVMValueRef lw = LLVMBuildAdd(
        c->b, LLVMBuildMul(c->b, LLVMBuildSub(c->b, nc, i64c(c, 1), ""), g->outs, ""), o, "");
    LLVMValueRef part = LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildURem(c->b, g->nbl, cb, ""),
                                      i64c(c, 0), "");
    LLVMValueRef lastv = LLVMBuildLoad2(c->b, t, LLVMBuildGEP2(c->b, t, vals, &lw, 1, ""), "");
    r = cpu_red_value(c, &a, sel(c, part, lastv, LLVMConstNull(t)), NULL);
  } else {
    r = cpu_red_value(c, &a, NULL, &arg);
  }
  LLVMValueRef s = cpu_red_finish(c, x, &a, r, arg, g->total);
  cg_store_el(c, s, cg_address(c, x, &n->store, n->dtype, n->rank), n->dtype);
  for (int l = 0; l < n->rank; l++) cg_close_loop(c);
}

/* The chunks' level m (1 .. SPLIT_MAX_M): the smallest that keeps
 * outs * ceil(nbl / 16^m) to SPLIT_ITEMS. */
static LLVMValueRef chunk_level(Cg *c, const Geo *g) {
  LLVMValueRef m = i64c(c, 1);
  for (int k = 1; k < SPLIT_MAX_M; k++) {
    LLVMValueRef items = LLVMBuildMul(c->b, g->outs, ceil_div(c, g->nbl, i64c(c, 1LL << (4 * k))), "");
    LLVMValueRef more = LLVMBuildICmp(c->b, LLVMIntUGT, items, i64c(c, SPLIT_ITEMS), "");
    m = LLVMBuildAdd(c->b, m, LLVMBuildZExt(c->b, more, c->i64, ""), "");
  }
  return m;
}

/* Marks the arrays' lifetimes (llvm.lifetime.start/end): the code
 * generator then gives every split nest of a kernel the same stack. */
static void lifetime(Cg *c, const char *what, LLVMValueRef p, LLVMTypeRef t) {
  if (LLVMIsNull(p)) return;
  unsigned bytes = LLVMGetTypeKind(t) == LLVMFloatTypeKind ? 4 : 8; /* f32, f64 or i64 */
  LLVMValueRef a[2] = {i64c(c, (long long)bytes * SPLIT_ITEMS), p};
  cg_intrinsic(c, what, &c->ptr, 1, a, 2);
}

LLVMBasicBlockRef cpu_emit_reduce_split(Cg *c, const LfNest *n) {
  if (!splittable(c, n)) return NULL;
  NestCtx x = {.n = n};
  Geo g;
  geometry(c, n, &x, &g);
  LLVMValueRef m = chunk_level(c, &g);
  LLVMValueRef cb = LLVMBuildShl(c->b, i64c(c, 1), LLVMBuildMul(c->b, m, i64c(c, 4), ""), "");
  LLVMValueRef nc = ceil_div(c, g.nbl, cb), items = LLVMBuildMul(c->b, g.outs, nc, "");
  LLVMValueRef go = LLVMBuildICmp(c->b, LLVMIntSGE, g.total,
                                  i64c(c, 2 * c->target->par_min_elems), "");
  go = LLVMBuildAnd(c->b, go, LLVMBuildICmp(c->b, LLVMIntULE, g.outs, i64c(c, SPLIT_MAX_OUT), ""), "");
  go = LLVMBuildAnd(c->b, go, LLVMBuildICmp(c->b, LLVMIntULE, items, i64c(c, SPLIT_ITEMS), ""), "");
  LLVMBasicBlockRef split = block(c, "red_split"), other = block(c, "red_whole"),
                    join = block(c, "red_join");
  LLVMBuildCondBr(c->b, go, split, other);
  LLVMPositionBuilderAtEnd(c->b, split);
  LLVMTypeRef t = cg_compute_type(c, cpu_red_acc_dtype(n->value->dtype));
  Outlined f = chunk_functions(c, n, t);
  LLVMValueRef vals = cg_entry_alloca(c, t, i32c(c, SPLIT_ITEMS));
  LLVMValueRef poss = has_arg(n) ? cg_entry_alloca(c, c->i64, i32c(c, SPLIT_ITEMS))
                                 : LLVMConstNull(c->ptr);
  lifetime(c, "llvm.lifetime.start", vals, t);
  lifetime(c, "llvm.lifetime.start", poss, c->i64);
  LLVMValueRef ctx = cpu_ctx_fill(c, &f.cx);
  LLVMValueRef extra[4] = {g.outs, cb, LLVMBuildPtrToInt(c->b, vals, c->i64, ""),
                           LLVMBuildPtrToInt(c->b, poss, c->i64, "")};
  for (int i = 0; i < 4; i++) cpu_ctx_set(c, &f.cx, ctx, f.cx.nb + c->k->nsyms + i, extra[i]);
  /* items of 16^m blocks: a grain of at least par_min_elems elements */
  LLVMValueRef grain = cg_smin(
      c, LLVMBuildUDiv(c->b, i64c(c, c->target->par_min_elems),
                       LLVMBuildMul(c->b, cb, i64c(c, CPU_SUM_BLOCK), ""), ""),
      i64c(c, 1), true);
  LLVMTypeRef ps[4] = {c->i64, c->i64, c->ptr, c->ptr};
  LLVMValueRef a[4] = {items, grain, f.body, ctx};
  call(c, cg_fdecl(c, "tdsl_parallel_for", c->vd, ps, 4, 0), a, 4);
  combine(c, n, &x, &g, m, cb, nc, vals, poss, t);
  lifetime(c, "llvm.lifetime.end", vals, t);
  lifetime(c, "llvm.lifetime.end", poss, c->i64);
  LLVMBuildBr(c->b, join);
  LLVMPositionBuilderAtEnd(c->b, other);
  return join;
}
