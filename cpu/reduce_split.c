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
 * each (chunk, output) pair is one item of tdsl_parallel_for (a few
 * columns of known count: each chunk of all of them, "columns" below), which
 * leaves the chunk's value (and position) in an array on the kernel's
 * stack; a second outlined function then combines each output's chunks
 * in chunk order and stores the result.
 * Integer sums and products wrap and extremes keep the first of equal
 * values in any split, so those results are the serial ones.  A float
 * sum's chunk of 16^m blocks runs the cascade from zero: its value is
 * the one the serial cascade's level m takes at that block (the levels
 * below are clear at every multiple of 16^m), so the chunks' values
 * enter the combining cascade at level m, and the last partial chunk's
 * levels, flushed smallest first, are the serial flush's first terms:
 * the result is the serial cascade's, bit for bit (test_codegen_numerics:
 * split_sums_are_serial).
 * A nest whose outputs are few at every shape runs the split alone (its
 * chunks of a short reduction on the calling thread: the grain is
 * SPLIT_GRAIN_MUL * par_min_elems elements); one whose outputs may be more than
 * SPLIT_MAX_OUT keeps its ordinary code (parallel.c) for those shapes;
 * both forms give the same values.  A nest known to reduce fewer than
 * 2 * par_min_elems elements per output never splits.
 * Needs: cpu.h.  Used by: kernel.c. */
#include "cpu.h"

#define SPLIT_MAX_OUT 32 /* outputs; more feed the threads through parallel.c */
#define SPLIT_ITEMS 512  /* chunks of all outputs: their values' arrays */
#define SPLIT_MAX_M 7    /* chunks of at most 16^7 blocks: level 7 is the top */
/* A thread's share of a split is at least SPLIT_GRAIN_MUL * par_min_elems
 * elements: waking the pool costs more than an elementwise chunk's worth
 * of a sum (x.sum() of 70000 f32 took 11.8 us split over 2 threads
 * against 6.8 us on one; 300000 were level, on the loaded 2-core VM). */
#define SPLIT_GRAIN_MUL 8

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

/* The extra values of both outlined functions' context, after the
 * symbols and the output strides (0 for static ones: cpu_fill_nest_ctx). */
enum { X_OUTS, X_CB, X_M, X_VALS, X_POSS, NX };

/* The extras as the open function's values. */
static void extras(Cg *c, const LfNest *n, const Outlined *f, LLVMValueRef *v) {
  for (int i = 0; i < NX; i++) v[i] = cpu_outline_value(f, c->k->nsyms + n->rank + i);
  v[X_VALS] = LLVMBuildIntToPtr(c->b, v[X_VALS], c->ptr, "");
  v[X_POSS] = LLVMBuildIntToPtr(c->b, v[X_POSS], c->ptr, "");
}

/* K.redI(begin, end, buf..., sym..., extras) and its wrapper: items
 * [begin, end), item w the chunk w / outs of output w % outs; its value
 * into values[w] (an array of the accumulator's type t) and, ARGMAX/
 * ARGMIN, its position into positions[w]. */
static Outlined chunk_functions(Cg *c, const LfNest *n, LLVMTypeRef t) {
  Outlined f;
  int last = n->rank + n->nred - 1;
  cpu_outline_open(c, &f, "red", 2, c->k->nsyms + NX + n->rank);
  NestCtx x = {.n = n};
  Geo g;
  LLVMValueRef e[NX];
  geometry(c, n, &x, &g);
  extras(c, n, &f, e);
  LLVMValueRef w = cg_open_loop_from(c, LLVMGetParam(f.impl, 0), LLVMGetParam(f.impl, 1));
  digits(c, &x, 0, n->rank, LLVMBuildURem(c->b, w, e[X_OUTS], ""));
  LLVMValueRef g0 = LLVMBuildMul(c->b, LLVMBuildUDiv(c->b, w, e[X_OUTS], ""), e[X_CB], "");
  LLVMValueRef g1 = cg_smin(c, LLVMBuildAdd(c->b, g0, e[X_CB], ""), g.nbl, false);
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
  LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, t, e[X_VALS], &w, 1, ""));
  if (arg) LLVMBuildStore(c->b, arg, LLVMBuildGEP2(c->b, c->i64, e[X_POSS], &w, 1, ""));
  cg_close_loop(c);
  cpu_outline_close(c, &f);
  return f;
}

/* ---- columns ----------------------------------------------------------------
 * A reduction over the outer dim of a tall, narrow input (x.sum(0) of
 * [N, 4]) reads each output's column at its stride, and its chunks
 * (chunk_functions) read the same lines once per output.  When the
 * outputs are few and known (COL_MAX_BYTES of accumulators at most), no
 * load of the value walks the reduction unit-stride, and there is one
 * reduction loop, an item is instead a chunk of every output: the
 * outputs' accumulators side by side in a vector (lanes = outputs,
 * cpu_red_begin_lanes), each reduction step the value at every output
 * (a whole row: the SLP vectorizer makes its loads one vector load).
 * Every lane runs its output's own code in its own order: a cascade's
 * blocks summed in order without reassociation (-O0's order, which -O1's
 * chunks run too), COL_GROUP of them side by side for independent
 * chains, their sums entering the lane-wise cascade in block order;
 * plain reductions step by step, or, where the step is exact and its
 * order free (integers; -O2's llvm.maximum/minimum), COL_GROUP rows a
 * step into one wider accumulator, its parts combined at the chunk's
 * end.  The values go to the same array slots as the chunks', so the
 * combining is the same.  A `strided` input whose reduced dim turns out
 * unit-stride at run time still runs as columns (the same values). */

#define COL_MAX_BYTES 128 /* accumulators' bytes: two 512-bit vectors */
#define COL_GROUP 4       /* blocks summed side by side, at most */
#define COL_EVALS 64      /* values per step of a group, at most */

/* Whether e reads nothing unit-stride along loop variable r (and has a
 * load, of plain strides). */
static bool strided_along(const LfExpr *e, int r, bool *load) {
  if (e->kind == LFE_LOAD) {
    if (e->acc.lin_rank || e->acc.ndyn || sym_is(e->acc.stride[r], 1)) return false;
    *load = true;
  }
  for (int i = 0; i < e->nargs; i++)
    if (e->args[i] && !strided_along(e->args[i], r, load)) return false;
  return true;
}

/* The outputs (lanes) when n's chunks run as columns, else 0. */
static int column_lanes(const LfNest *n) {
  if (has_arg(n) || n->nred != 1 || n->rank < 1) return 0;
  int64_t o = 1, e;
  for (int l = 0; l < n->rank; l++) {
    if (!sym_is_const(n->shape[l], &e)) return 0;
    o *= e;
    if (o > SPLIT_MAX_OUT) return 0;
  }
  DType ad = cpu_red_acc_dtype(n->value->dtype);
  int64_t bytes = ad == DT_F32 ? 4 : 8;
  bool load = false;
  if (o < 2 || o * bytes > COL_MAX_BYTES || !strided_along(n->value, n->rank, &load) || !load)
    return 0;
  return (int)o;
}

/* Vector v (undef: NULL, of type t) with the values at row `row` of
 * every output in lanes at .. at + lanes - 1. */
static LLVMValueRef row_into(Cg *c, NestCtx *x, const RedAcc *a, LLVMTypeRef t, LLVMValueRef v,
                             int at, int lanes, LLVMValueRef row) {
  const LfNest *n = x->n;
  if (!v) v = LLVMGetUndef(t);
  x->iv[n->rank] = row;
  for (int o = 0; o < lanes; o++) {
    digits(c, x, 0, n->rank, i64c(c, o));
    LLVMValueRef e = cg_convert(c, cg_eval(c, x, n->value), a->in, a->ad);
    v = LLVMBuildInsertElement(c->b, v, e, i32c(c, at + o), "");
  }
  return v;
}

/* The value at row `row` of every output, as a vector of a->t. */
static LLVMValueRef row_values(Cg *c, NestCtx *x, RedAcc *a, int lanes, LLVMValueRef row) {
  return row_into(c, x, a, a->t, NULL, 0, lanes, row);
}

/* Sums of blocks b0 .. b0 + k - 1 (full ones: CPU_SUM_BLOCK rows each),
 * side by side, entered into a's cascade in order. */
static void column_blocks(Cg *c, NestCtx *x, RedAcc *a, int lanes, LLVMValueRef b0, int k) {
  LLVMValueRef bs[COL_GROUP], zero = LLVMConstNull(a->t);
  for (int j = 0; j < k; j++) {
    bs[j] = cg_entry_alloca(c, a->t, NULL);
    LLVMBuildStore(c->b, zero, bs[j]);
  }
  LLVMValueRef i = cg_open_loop(c, i64c(c, CPU_SUM_BLOCK));
  for (int j = 0; j < k; j++) {
    LLVMValueRef row = LLVMBuildAdd(
        c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, b0, i64c(c, j), ""), i64c(c, CPU_SUM_BLOCK), ""),
        i, "");
    LLVMValueRef v = row_values(c, x, a, lanes, row);
    LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, a->t, bs[j], ""), v, ""), bs[j]);
  }
  cg_close_loop(c);
  for (int j = 0; j < k; j++)
    cpu_red_merge(c, a, LLVMBuildLoad2(c->b, a->t, bs[j], ""), i64c(c, 0), i64c(c, 0));
}

/* K.redI(begin, end, buf..., sym..., extras) and its wrapper for columns:
 * item w the chunk w of every output, output o's value into
 * values[w * outs + o]. */
static Outlined column_functions(Cg *c, const LfNest *n, int lanes) {
  Outlined f;
  LLVMBuilderRef b = c->b;
  cpu_outline_open(c, &f, "red", 2, c->k->nsyms + NX + n->rank);
  NestCtx x = {.n = n};
  Geo g;
  LLVMValueRef e[NX];
  geometry(c, n, &x, &g);
  extras(c, n, &f, e);
  LLVMValueRef w = cg_open_loop_from(c, LLVMGetParam(f.impl, 0), LLVMGetParam(f.impl, 1));
  LLVMValueRef g0 = LLVMBuildMul(b, w, e[X_CB], "");
  LLVMValueRef g1 = cg_smin(c, LLVMBuildAdd(b, g0, e[X_CB], ""), g.nbl, false);
  RedAcc a;
  cpu_red_begin_lanes(c, n, &a, lanes);
  if (a.cascade) {
    int k = COL_EVALS / lanes;
    k = k < 1 ? 1 : k > COL_GROUP ? COL_GROUP : k;
    /* groups of k full blocks, then the chunk's other blocks one by one */
    LLVMValueRef full = cg_smin(c, g1, LLVMBuildUDiv(b, g.len, i64c(c, CPU_SUM_BLOCK), ""), false);
    LLVMValueRef ng = LLVMBuildSDiv(b, cg_smin(c, LLVMBuildSub(b, full, g0, ""), i64c(c, 0), true),
                                    i64c(c, k), "");
    LLVMValueRef q = cg_open_loop(c, ng);
    column_blocks(c, &x, &a, lanes, LLVMBuildAdd(b, g0, LLVMBuildMul(b, q, i64c(c, k), ""), ""), k);
    cg_close_loop(c);
    LLVMValueRef bi = cg_open_loop_from(c, LLVMBuildAdd(b, g0, LLVMBuildMul(b, ng, i64c(c, k), ""), ""), g1);
    LLVMValueRef e0 = LLVMBuildMul(b, bi, i64c(c, CPU_SUM_BLOCK), "");
    LLVMValueRef e1 = cg_smin(c, LLVMBuildAdd(b, e0, i64c(c, CPU_SUM_BLOCK), ""), g.len, false);
    LLVMBuildStore(b, LLVMConstNull(a.t), a.bs);
    LLVMValueRef row = cg_open_loop_from(c, e0, e1);
    LLVMValueRef v = row_values(c, &x, &a, lanes, row);
    LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, a.t, a.bs, ""), v, ""), a.bs);
    cg_close_loop(c);
    cpu_red_merge(c, &a, LLVMBuildLoad2(b, a.t, a.bs, ""), i64c(c, 0), i64c(c, 0));
    cg_close_loop(c);
  } else {
    /* an exact, order-free step (integers; llvm.maximum/minimum, -O2)
     * takes k consecutive rows a step into one accumulator of k * lanes
     * lanes (whole lines), its k parts combined at the chunk's end */
    bool free_order = !dtype_is_float(a.ad) || c->opt >= 2;
    int k = free_order ? COL_EVALS / lanes : 1;
    k = k < 1 ? 1 : k > COL_GROUP ? COL_GROUP : k;
    RedAcc s;
    cpu_red_begin_lanes(c, n, &s, k * lanes);
    LLVMValueRef r0 = LLVMBuildMul(b, g0, i64c(c, CPU_SUM_BLOCK), "");
    LLVMValueRef r1 = cg_smin(c, LLVMBuildMul(b, g1, i64c(c, CPU_SUM_BLOCK), ""), g.len, false);
    LLVMValueRef ng = LLVMBuildSDiv(b, LLVMBuildSub(b, r1, r0, ""), i64c(c, k), "");
    LLVMValueRef q = cg_open_loop(c, ng), rq = LLVMBuildAdd(b, r0, LLVMBuildMul(b, q, i64c(c, k), ""), "");
    LLVMValueRef wide = NULL;
    for (int j = 0; j < k; j++)
      wide = row_into(c, &x, &a, s.t, wide, j * lanes, lanes, LLVMBuildAdd(b, rq, i64c(c, j), ""));
    cpu_red_merge(c, &s, wide, i64c(c, 0), NULL);
    cg_close_loop(c);
    LLVMValueRef row = cg_open_loop_from(c, LLVMBuildAdd(b, r0, LLVMBuildMul(b, ng, i64c(c, k), ""), ""), r1);
    cpu_red_merge(c, &a, row_values(c, &x, &a, lanes, row), i64c(c, 0), NULL);
    cg_close_loop(c);
    if (k > 1) {
      LLVMValueRef all = cpu_red_value(c, &s, NULL, NULL), idx[64];
      for (int j = 0; j < k; j++) {
        for (int o = 0; o < lanes; o++) idx[o] = i32c(c, j * lanes + o);
        LLVMValueRef part = LLVMBuildShuffleVector(b, all, LLVMGetUndef(s.t),
                                                   LLVMConstVector(idx, (unsigned)lanes), "");
        cpu_red_merge(c, &a, part, i64c(c, 0), NULL);
      }
    } else {
      cpu_red_merge(c, &a, cpu_red_value(c, &s, NULL, NULL), i64c(c, 0), NULL);
    }
  }
  LLVMValueRef v = cpu_red_value(c, &a, NULL, NULL);
  LLVMTypeRef st = LLVMGetElementType(a.t);
  for (int o = 0; o < lanes; o++) {
    LLVMValueRef slot = LLVMBuildAdd(b, LLVMBuildMul(b, w, i64c(c, lanes), ""), i64c(c, o), "");
    LLVMBuildStore(b, LLVMBuildExtractElement(b, v, i32c(c, o), ""),
                   LLVMBuildGEP2(b, st, e[X_VALS], &slot, 1, ""));
  }
  cg_close_loop(c);
  cpu_outline_close(c, &f);
  return f;
}

/* K.redI(buf..., sym..., extras) and its wrapper, called once after the
 * chunks: each output's chunks combined in chunk order and the result
 * stored.  A cascade takes the full chunks' values at level m and starts
 * its flush from the partial chunk's value (+0 without one).  A few
 * hundred values: the light pipeline (machine.c), which leaves the
 * kernel without loops (cold code, machine.c). */
static Outlined combine_functions(Cg *c, const LfNest *n, LLVMTypeRef t) {
  Outlined f;
  cpu_outline_open(c, &f, "red", 0, c->k->nsyms + NX + n->rank);
  cpu_mark_light(f.impl);
  NestCtx x = {.n = n};
  Geo g;
  LLVMValueRef e[NX];
  geometry(c, n, &x, &g);
  extras(c, n, &f, e);
  for (int l = 0; l < n->rank; l++) x.rt_stride[l] = cpu_outline_value(&f, c->k->nsyms + l);
  LLVMValueRef nc = ceil_div(c, g.nbl, e[X_CB]), o = i64c(c, 0), arg = NULL, r;
  for (int l = 0; l < n->rank; l++) {
    x.iv[l] = cg_open_loop(c, x.ub[l]);
    o = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, o, x.ub[l], ""), x.iv[l], "");
  }
  RedAcc a;
  cpu_red_begin(c, n, &a);
  LLVMValueRef ci = cg_open_loop(c, a.cascade ? LLVMBuildUDiv(c->b, g.nbl, e[X_CB], "") : nc);
  LLVMValueRef w = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, g.outs, ""), o, "");
  LLVMValueRef v = LLVMBuildLoad2(c->b, t, LLVMBuildGEP2(c->b, t, e[X_VALS], &w, 1, ""), "");
  LLVMValueRef p = has_arg(n) ? LLVMBuildLoad2(c->b, c->i64, LLVMBuildGEP2(c->b, c->i64, e[X_POSS], &w, 1, ""), "")
                              : i64c(c, 0);
  cpu_red_merge(c, &a, v, p, e[X_M]);
  cg_close_loop(c);
  if (a.cascade) {
    LLVMValueRef lc = cg_smin(c, LLVMBuildSub(c->b, nc, i64c(c, 1), ""), i64c(c, 0), true);
    LLVMValueRef lw = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, lc, g.outs, ""), o, "");
    LLVMValueRef part = LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildURem(c->b, g.nbl, e[X_CB], ""),
                                      i64c(c, 0), "");
    LLVMValueRef lastv = LLVMBuildLoad2(c->b, t, LLVMBuildGEP2(c->b, t, e[X_VALS], &lw, 1, ""), "");
    r = cpu_red_value(c, &a, sel(c, part, lastv, LLVMConstNull(t)), NULL);
  } else {
    r = cpu_red_value(c, &a, NULL, &arg);
  }
  LLVMValueRef st = cpu_red_finish(c, &x, &a, r, arg, g.total);
  cg_store_el(c, st, cg_address(c, &x, &n->store, n->dtype, n->rank), n->dtype);
  for (int l = 0; l < n->rank; l++) cg_close_loop(c);
  cpu_outline_close(c, &f);
  return f;
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

/* The chunks' size in blocks: 16^m, or (more than SPLIT_ITEMS chunks at
 * m = SPLIT_MAX_M, never on real memory: a stride-0 input) every block
 * of an output in one chunk, its partial one, which the serial cascade's
 * code then runs as is.  *m: m. */
static LLVMValueRef chunk_blocks(Cg *c, const Geo *g, LLVMValueRef *m) {
  *m = chunk_level(c, g);
  LLVMValueRef cb = LLVMBuildShl(c->b, i64c(c, 1), LLVMBuildMul(c->b, *m, i64c(c, 4), ""), "");
  LLVMValueRef items = LLVMBuildMul(c->b, g->outs, ceil_div(c, g->nbl, cb), "");
  LLVMValueRef over = LLVMBuildICmp(c->b, LLVMIntUGT, items, i64c(c, SPLIT_ITEMS), "");
  return sel(c, over, LLVMBuildAdd(c->b, g->nbl, i64c(c, 1), ""), cb);
}

/* The split: the chunks over threads, then their combining. */
static void emit_split(Cg *c, const LfNest *n, const Geo *g) {
  LLVMValueRef m, cb = chunk_blocks(c, g, &m);
  LLVMValueRef nc = ceil_div(c, g->nbl, cb), items = LLVMBuildMul(c->b, g->outs, nc, "");
  LLVMTypeRef t = cg_compute_type(c, cpu_red_acc_dtype(n->value->dtype));
  int lanes = column_lanes(n);
  Outlined f = lanes ? column_functions(c, n, lanes) : chunk_functions(c, n, t);
  Outlined fc = combine_functions(c, n, t);
  if (lanes) items = nc; /* a chunk of every output */
  LLVMValueRef vals = cg_entry_alloca(c, t, i32c(c, SPLIT_ITEMS));
  LLVMValueRef poss = has_arg(n) ? cg_entry_alloca(c, c->i64, i32c(c, SPLIT_ITEMS))
                                 : LLVMConstNull(c->ptr);
  lifetime(c, "llvm.lifetime.start", vals, t);
  lifetime(c, "llvm.lifetime.start", poss, c->i64);
  LLVMValueRef ctx = cpu_fill_nest_ctx(c, n, &f.cx);
  LLVMValueRef e[NX] = {[X_OUTS] = g->outs, [X_CB] = cb, [X_M] = m,
                        [X_VALS] = LLVMBuildPtrToInt(c->b, vals, c->i64, ""),
                        [X_POSS] = LLVMBuildPtrToInt(c->b, poss, c->i64, "")};
  for (int i = 0; i < NX; i++) cpu_ctx_set(c, &f.cx, ctx, f.cx.nb + c->k->nsyms + n->rank + i, e[i]);
  /* a grain of SPLIT_GRAIN_MUL * par_min_elems elements: small
   * reductions run on the calling thread */
  LLVMValueRef work = cg_smin(c, LLVMBuildMul(c->b, cb, i64c(c, CPU_SUM_BLOCK), ""), g->total, false);
  if (lanes) work = LLVMBuildMul(c->b, work, i64c(c, lanes), "");
  LLVMValueRef grain = cg_smin(
      c, LLVMBuildSDiv(c->b, i64c(c, SPLIT_GRAIN_MUL * c->target->par_min_elems),
                       cg_smin(c, work, i64c(c, 1), true), ""),
      i64c(c, 1), true);
  LLVMTypeRef ps[4] = {c->i64, c->i64, c->ptr, c->ptr};
  LLVMValueRef a[4] = {items, grain, f.body, ctx};
  call(c, cg_fdecl(c, "tdsl_parallel_for", c->vd, ps, 4, 0), a, 4);
  LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fc.body), fc.body, &ctx, 1, "");
  lifetime(c, "llvm.lifetime.end", vals, t);
  lifetime(c, "llvm.lifetime.end", poss, c->i64);
}

bool cpu_emit_reduce_split(Cg *c, const LfNest *n, LLVMBasicBlockRef *join) {
  *join = NULL;
  if (!splittable(c, n)) return false;
  NestCtx x = {.n = n};
  Geo g;
  geometry(c, n, &x, &g);
  int64_t o = 1, e;
  for (int l = 0; l < n->rank && o <= SPLIT_MAX_OUT; l++)
    o = sym_is_const(n->shape[l], &e) ? o * e : SPLIT_MAX_OUT + 1;
  if (o <= SPLIT_MAX_OUT) { /* always few outputs: the split alone */
    emit_split(c, n, &g);
    return true;
  }
  LLVMBasicBlockRef split = block(c, "red_split"), other = block(c, "red_whole");
  *join = block(c, "red_join");
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntULE, g.outs, i64c(c, SPLIT_MAX_OUT), ""),
                  split, other);
  LLVMPositionBuilderAtEnd(c->b, split);
  emit_split(c, n, &g);
  LLVMBuildBr(c->b, *join);
  LLVMPositionBuilderAtEnd(c->b, other);
  return false;
}
