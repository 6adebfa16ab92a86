/* parallel.c — parallel nests and row groups (opt_level >= 1): outlined
 * functions (outline.c) run by tdsl_parallel_for over chunks of outer
 * iterations.
 * Needs: cpu.h.  Used by: kernel.c, gemm_nest.c (the context of
 * epilogue functions). */
#include <string.h>

#include "cpu.h"

/* ---- parallel nests (opt_level >= 1) --------------------------------------
 * A nest with outer loops becomes two private functions:
 *   K.nestI(i64 begin, i64 end, ptr noalias buf..., i64 sym..., i64 rtstride...)
 *     runs flattened outer iterations [begin, end): the first P outer loops
 *     (in memory order) form the parallel index, decomposed once per chunk
 *     and then stepped like an odometer; the rest run as plain loops, so
 *     the innermost loop is the nest's unit-stride store loop, free of
 *     div/mod.  Its buffer pointers are noalias: a nest writes only its
 *     store buffer, which no read of the nest touches (scratch is fresh,
 *     outputs were checked against inputs and each other at entry).  It is
 *     always-inlined into
 *   K.nestI.body(ptr ctx, i64 begin, i64 end), the tdsl_parallel_for body,
 *     which unpacks the context (buffer bases, symbol values, output
 *     strides) the kernel filled.
 * The grain keeps chunks at >= par_min_elems (loops/schedule.c) elements of work so small
 * nests run serially; chunks split outer (output) iterations only, never a
 * reduction, so results do not depend on the thread count (a long
 * reduction to few outputs splits before it gets here, reduce_split.c,
 * at bounds the shape alone fixes). */

/* Builds K.nestI (the loops) and K.nestI.body (outline.c); the values
 * after the symbols are the output strides. */
static Outlined nest_functions(Cg *c, const LfNest *n, int nvo) {
  Outlined f;
  cpu_outline_open(c, &f, "nest", 2, c->k->nsyms + n->rank);
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) {
    x.ub[l] = cg_sym_val(c, n->shape[l]);
    x.rt_stride[l] = cpu_outline_value(&f, c->k->nsyms + l);
  }
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = cg_sym_val(c, n->red[l]);
  VLoops vl;
  cpu_plan_vloops(c, n, &x, &vl);
  if (vl.nouter != nvo) ICE("nest loops collapsed differently");
  cpu_emit_nest_range(c, n, &x, &vl, LLVMGetParam(f.impl, 0), LLVMGetParam(f.impl, 1),
                      vl.par);
  cpu_outline_close(c, &f);
  return f;
}

LLVMValueRef cpu_fill_nest_ctx(Cg *c, const LfNest *n, const OutCtx *cx) {
  LLVMValueRef ctx = cpu_ctx_fill(c, cx);
  for (int l = 0; l < n->rank; l++) {
    LLVMValueRef v = i64c(c, 0);
    if (n->store.rt_strides)
      v = cg_dl_stride(c, c->args[c->k->nparams + c->lk->bufs[n->store.buf].index], n->rank, l);
    cpu_ctx_set(c, cx, ctx, cx->nb + c->k->nsyms + l, v);
  }
  return ctx;
}

/* Fills the context in the kernel and calls tdsl_parallel_for. */
void cpu_emit_nest_parallel(Cg *c, const LfNest *n) {
  NestCtx x = {.n = n};
  VLoops vl;
  for (int l = 0; l < n->rank; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = cg_sym_val(c, n->red[l]);
  cpu_plan_vloops(c, n, &x, &vl);
  int p = vl.par;
  Outlined f = nest_functions(c, n, vl.nouter);
  LLVMValueRef ctx = cpu_fill_nest_ctx(c, n, &f.cx);
  LLVMValueRef total = i64c(c, 1), inner = i64c(c, 1);
  for (int i = 0; i < vl.n; i++) {
    if (i < p) total = LLVMBuildMul(c->b, total, vl.ub[i], "");
    else inner = LLVMBuildMul(c->b, inner, vl.ub[i], "");
  }
  if (vl.tile_var >= 0) inner = LLVMBuildMul(c->b, inner, vl.blocked ? i64c(c, vl.tile) : vl.tile_ub, "");
  inner = cg_smin(c, inner, i64c(c, 1), true);
  LLVMValueRef grain = cg_smin(c, LLVMBuildSDiv(c->b, i64c(c, c->target->par_min_elems), inner, ""),
                            i64c(c, 1), true);
  if (cpu_scan_columns(c, n, &vl) && p == vl.nouter) grain = cpu_scan_grain(c, grain);
  LLVMTypeRef ps[4] = {c->i64, c->i64, c->ptr, c->ptr};
  LLVMValueRef a[4] = {total, grain, f.body, ctx};
  call(c, cg_fdecl(c, "tdsl_parallel_for", c->vd, ps, 4, 0), a, 4);
}

/* ---- row groups (opt_level >= 1; loops.h LfNest.group) -------------------
 * A group (a normalization's statistics nests and its final nest, or a
 * reduction and its readers grouped by pass row-group) runs as
 * one parallel loop over the flattened iterations of its `shared` outer
 * loops: for each shared index (a row), every nest's remaining outer
 * loops and reduction in turn, so the later nests find the row in cache.
 * Two private functions, as for single nests:
 *   K.nestI(i64 begin, i64 end, ptr noalias buf..., i64 sym...,
 *           i64 rtstride... (each nest's rank of them, in order))
 *     decomposes begin once and steps the shared index like an odometer;
 *     noalias holds as for single nests: each nest writes only its store
 *     buffer (a statistics buffer or a member's value, which later nests
 *     read through the same pointer), and no two buffers the group
 *     touches share a plan-memory block (plan-memory keeps a group's
 *     members and what they read apart).
 *     Always-inlined into
 *   K.nestI.body(ptr ctx, i64 begin, i64 end), the tdsl_parallel_for body.
 * The group's last nest streams its stores past the cache when it writes
 * a large output no nest of the group reads back (cpu_group_stream,
 * vloops.c): K.nestI then ends with an sfence.
 * Chunks split shared iterations only (>= par_min_elems (loops/schedule.c) elements of work
 * of all nests per chunk); each row is reduced by one thread in a fixed
 * order, so results do not depend on the thread count. */

/* Elements of work per shared iteration: every nest's remaining loops. */
static LLVMValueRef group_row_work(Cg *c, const LfNest *g) {
  LLVMValueRef sum = i64c(c, 0);
  for (int k = 0; k < g->group; k++) {
    const LfNest *n = &g[k];
    LLVMValueRef w = i64c(c, 1);
    for (int l = g->shared; l < n->rank + n->nred; l++)
      w = LLVMBuildMul(c->b, w, cg_sym_val(c, lf_loop_extent(n, l)), "");
    sum = LLVMBuildAdd(c->b, sum, w, "");
  }
  return cg_smin(c, sum, i64c(c, 1), true);
}

/* One nest of a group at the current shared index (x->iv[0..s-1] set);
 * stream: cpu_group_stream's i1 for the group's last nest, else NULL. */
static void emit_group_member(Cg *c, NestCtx *x, int s, LLVMValueRef stream) {
  const LfNest *n = x->n;
  int open = stream ? n->rank - 1 : n->rank;
  for (int l = s; l < open; l++) x->iv[l] = cg_open_loop(c, x->ub[l]);
  if (stream) {
    cpu_emit_inner_streaming(c, n, x, open, i64c(c, 0), x->ub[open], stream);
  } else {
    LLVMValueRef v = n->reduce == OP_COUNT ? cg_eval(c, x, n->value) : cpu_emit_reduce(c, x);
    cg_store_el(c, v, cg_address(c, x, &n->store, n->dtype, n->rank), n->dtype);
  }
  for (int l = s; l < open; l++) cg_close_loop(c);
}

/* The loops of K.nestI for shared iterations [lo, hi); rt: the first
 * output-stride parameter. */
static void emit_group_range(Cg *c, const LfNest *g, LLVMValueRef lo, LLVMValueRef hi,
                             unsigned rt) {
  int s = g->shared;
  VLoops sh = {.n = s, .nouter = s};
  LLVMValueRef idx[MAXL], rest = lo;
  NestCtx *x = arena_alloc(c->m->arena, sizeof *x * (size_t)g->group);
  for (int k = 0; k < g->group; k++) {
    const LfNest *n = &g[k];
    x[k] = (NestCtx){.n = n};
    for (int l = 0; l < n->rank + n->nred; l++) x[k].ub[l] = cg_sym_val(c, lf_loop_extent(n, l));
    for (int l = 0; l < n->rank; l++) x[k].rt_stride[l] = LLVMGetParam(c->fn, rt++);
  }
  for (int j = s - 1; j >= 0; j--) {
    sh.ub[j] = x[0].ub[j];
    idx[j] = cg_entry_alloca(c, c->i64, NULL);
    LLVMBuildStore(c->b, j ? LLVMBuildURem(c->b, rest, sh.ub[j], "") : rest, idx[j]);
    if (j) rest = LLVMBuildUDiv(c->b, rest, sh.ub[j], "");
  }
  LLVMValueRef stream = cpu_group_stream(c, g); /* once per call, before the loops */
  cg_open_loop_from(c, lo, hi);
  for (int j = 0; j < s; j++) {
    LLVMValueRef iv = LLVMBuildLoad2(c->b, c->i64, idx[j], "");
    for (int k = 0; k < g->group; k++) x[k].iv[j] = iv;
  }
  for (int k = 0; k < g->group; k++)
    emit_group_member(c, &x[k], s, k == g->group - 1 ? stream : NULL);
  cpu_odometer_step(c, &sh, idx, s);
  cg_close_loop(c);
  if (stream) cg_intrinsic(c, "llvm.x86.sse.sfence", NULL, 0, NULL, 0);
}

/* Whether group g holds a float sum or mean of an IR reduction (pass
 * row-group's groups; a normalization's statistics nests have the
 * normalization as src): such a sum must add in the order it would
 * outside the group (the vector width sets the partial sums of the
 * reassociated loop, reduce.c), so its group keeps the default width. */
static bool user_float_sum(Cg *c, const LfNest *g) {
  for (int k = 0; k < g->group; k++) {
    const LfNest *n = &g[k];
    if ((n->reduce == OP_SUM || n->reduce == OP_MEAN) && n->src >= 0 &&
        op_kind(ir_val(c->k, n->src)->op) == IRK_REDUCE && dtype_is_float(n->value->dtype))
      return true;
  }
  return false;
}

/* On targets with 512-bit vectors, lets the vectorizer use them in fn
 * (LLVM prefers 256 bits by default): a group's loops are compute-bound
 * on exp once their row is in cache.  Not for a group with a user's float
 * sum (user_float_sum). */
static void prefer_wide_vectors(Cg *c, const LfNest *g, LLVMValueRef fn) {
  if (c->vec_bits < 512 || user_float_sum(c, g)) return;
  cg_prefer_512(c->ctx, fn);
}

/* Builds K.nestI and K.nestI.body of group g (see above). */
static Outlined group_functions(Cg *c, const LfNest *g) {
  int nv = c->k->nsyms;
  for (int k = 0; k < g->group; k++) nv += g[k].rank;
  Outlined f;
  cpu_outline_open(c, &f, "nest", 2, nv);
  prefer_wide_vectors(c, g, f.impl);
  emit_group_range(c, g, LLVMGetParam(f.impl, 0), LLVMGetParam(f.impl, 1),
                   (unsigned)(2 + f.cx.nb + c->k->nsyms));
  cpu_outline_close(c, &f);
  prefer_wide_vectors(c, g, f.body);
  return f;
}

/* Fills group g's context in the kernel and calls tdsl_parallel_for. */
void cpu_emit_group_parallel(Cg *c, const LfNest *g) {
  if (g->shared < 1 || g->shared > g->rank) ICE("row group sharing %d loops", g->shared);
  Outlined f = group_functions(c, g);
  LLVMValueRef ctx = cpu_ctx_fill(c, &f.cx);
  int j = f.cx.nb + c->k->nsyms;
  for (int k = 0; k < g->group; k++) {
    const LfNest *n = &g[k];
    for (int l = 0; l < n->rank; l++, j++) {
      LLVMValueRef v = i64c(c, 0);
      if (n->store.rt_strides)
        v = cg_dl_stride(c, c->args[c->k->nparams + c->lk->bufs[n->store.buf].index], n->rank, l);
      cpu_ctx_set(c, &f.cx, ctx, j, v);
    }
  }
  LLVMValueRef total = i64c(c, 1);
  for (int l = 0; l < g->shared; l++) total = LLVMBuildMul(c->b, total, cg_sym_val(c, g->shape[l]), "");
  LLVMValueRef grain = cg_smin(c, LLVMBuildSDiv(c->b, i64c(c, c->target->par_min_elems), group_row_work(c, g), ""),
                            i64c(c, 1), true);
  LLVMTypeRef ps[4] = {c->i64, c->i64, c->ptr, c->ptr};
  LLVMValueRef a[4] = {total, grain, f.body, ctx};
  call(c, cg_fdecl(c, "tdsl_parallel_for", c->vd, ps, 4, 0), a, 4);
}
