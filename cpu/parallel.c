/* parallel.c — parallel nests and row groups (opt_level >= 1): outlined
 * functions run by tdsl_parallel_for over chunks of outer iterations,
 * their context packed in the kernel and unpacked in the body.
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
 * The grain keeps chunks at >= PAR_MIN_ELEMS elements of work so small
 * nests run serially; chunks split outer (output) iterations only, never a
 * reduction, so results do not depend on the thread count. */
#define PAR_MIN_ELEMS 32768

void cpu_add_fn_attr(Cg *c, LLVMValueRef fn, unsigned idx, const char *name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(c->ctx, kind, 0));
}


typedef struct NestFn {
  LLVMValueRef impl, body;
  LLVMTypeRef ctxt; /* { [nb x ptr], [nv x i64] } */
  int nb, nv;
} NestFn;

/* The kernel's per-function state, swapped while a nest function is
 * emitted. */
typedef struct SavedFn {
  LLVMValueRef fn, *base, *env;
  LLVMBasicBlockRef entry, pos, start;
} SavedFn;

/* Creates K.nestI(i64 begin, i64 end, ptr noalias buf..., i64 value...)
 * with f->nv i64 values after the buffers (the symbols first), and
 * positions the builder inside it with the buffers and symbols bound. */
static void open_nest_fn(Cg *c, NestFn *f, SavedFn *s) {
  int np = 2 + f->nb + f->nv;
  LLVMTypeRef *ps = arena_alloc(c->m->arena, sizeof *ps * (size_t)np);
  ps[0] = ps[1] = c->i64;
  for (int i = 0; i < f->nb; i++) ps[2 + i] = c->ptr;
  for (int i = 0; i < f->nv; i++) ps[2 + f->nb + i] = c->i64;
  char name[600];
  snprintf(name, sizeof name, "%s.nest%d", c->k->name, c->nfns++);
  f->impl = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->vd, ps, (unsigned)np, 0));
  LLVMSetLinkage(f->impl, LLVMPrivateLinkage);
  cpu_add_fn_attr(c, f->impl, LLVMAttributeFunctionIndex, "alwaysinline");
  cpu_add_fn_attr(c, f->impl, LLVMAttributeFunctionIndex, "nounwind");
  for (int i = 0; i < f->nb; i++) cpu_add_fn_attr(c, f->impl, (unsigned)(3 + i), "noalias");
  *s = (SavedFn){c->fn, c->base, c->env, c->entry, LLVMGetInsertBlock(c->b), NULL};
  c->fn = f->impl;
  c->entry = block(c, "entry");
  s->start = block(c, "start");
  LLVMPositionBuilderAtEnd(c->b, s->start);
  c->base = arena_alloc(c->m->arena, sizeof *c->base * (size_t)(f->nb + 1));
  c->env = arena_alloc(c->m->arena, sizeof *c->env * (size_t)(c->k->nsyms + 1));
  for (int i = 0; i < f->nb; i++) c->base[i] = LLVMGetParam(f->impl, (unsigned)(2 + i));
  for (int i = 0; i < c->k->nsyms; i++) c->env[i] = LLVMGetParam(f->impl, (unsigned)(2 + f->nb + i));
}

/* Ends K.nestI, builds K.nestI.body(ptr ctx, i64 begin, i64 end) (the
 * tdsl_parallel_for body unpacking the context into K.nestI's
 * arguments) and restores the kernel's state. */
static void close_nest_fn(Cg *c, NestFn *f, const SavedFn *s) {
  LLVMBuildRetVoid(c->b);
  LLVMPositionBuilderAtEnd(c->b, c->entry);
  LLVMBuildBr(c->b, s->start);
  int np = 2 + f->nb + f->nv;
  LLVMTypeRef fs[2] = {LLVMArrayType2(c->ptr, (uint64_t)f->nb), LLVMArrayType2(c->i64, (uint64_t)f->nv)};
  f->ctxt = LLVMStructTypeInContext(c->ctx, fs, 2, 0);
  LLVMTypeRef bps[3] = {c->ptr, c->i64, c->i64};
  char name[600];
  snprintf(name, sizeof name, "%s.nest%d.body", c->k->name, c->nfns - 1);
  f->body = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->vd, bps, 3, 0));
  LLVMSetLinkage(f->body, LLVMPrivateLinkage);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, f->body, "entry"));
  LLVMValueRef *a = arena_alloc(c->m->arena, sizeof *a * (size_t)np), ctx = LLVMGetParam(f->body, 0);
  a[0] = LLVMGetParam(f->body, 1);
  a[1] = LLVMGetParam(f->body, 2);
  for (int i = 0; i < f->nb + f->nv; i++) {
    bool isb = i < f->nb;
    LLVMValueRef g[3] = {i32c(c, 0), i32c(c, isb ? 0 : 1), i64c(c, isb ? i : i - f->nb)};
    LLVMValueRef q = LLVMBuildGEP2(c->b, f->ctxt, ctx, g, 3, "");
    a[2 + i] = LLVMBuildLoad2(c->b, isb ? c->ptr : c->i64, q, "");
  }
  LLVMBuildCall2(c->b, LLVMGlobalGetValueType(f->impl), f->impl, a, (unsigned)np, "");
  LLVMBuildRetVoid(c->b);
  c->fn = s->fn, c->base = s->base, c->env = s->env, c->entry = s->entry;
  LLVMPositionBuilderAtEnd(c->b, s->pos);
}

/* Builds K.nestI (the loops) and K.nestI.body (the unpacking wrapper);
 * the values after the symbols are the output strides. */
static NestFn nest_functions(Cg *c, const LfNest *n, int nvo) {
  NestFn f = {.nb = c->lk->nbufs, .nv = c->k->nsyms + n->rank};
  SavedFn s;
  open_nest_fn(c, &f, &s);
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) {
    x.ub[l] = cg_sym_val(c, n->shape[l]);
    x.rt_stride[l] = LLVMGetParam(f.impl, (unsigned)(2 + f.nb + c->k->nsyms + l));
  }
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = cg_sym_val(c, n->red[l]);
  VLoops vl;
  cpu_plan_vloops(c, n, &x, &vl);
  if (vl.nouter != nvo) ICE("nest loops collapsed differently");
  cpu_emit_nest_range(c, n, &x, &vl, LLVMGetParam(f.impl, 0), LLVMGetParam(f.impl, 1),
                  nvo >= 2 ? nvo - 1 : 1);
  close_nest_fn(c, &f, &s);
  return f;
}

/* In the kernel: the context { [nb x ptr] buffer bases, [nsyms + rank x
 * i64] symbol values then n's output strides (0 for static ones) } of a
 * nest function of n. */
LLVMValueRef cpu_fill_nest_ctx(Cg *c, const LfNest *n, LLVMTypeRef ctxt, int nb) {
  LLVMValueRef ctx = cg_entry_alloca(c, ctxt, NULL);
  for (int i = 0; i < nb + c->k->nsyms + n->rank; i++) {
    bool isb = i < nb;
    int j = isb ? i : i - nb;
    LLVMValueRef v;
    if (isb) v = c->base[i] ? c->base[i] : LLVMConstNull(c->ptr);
    else if (j < c->k->nsyms) v = c->env[j];
    else if (n->store.rt_strides)
      v = cg_dl_stride(c, c->args[c->k->nparams + c->lk->bufs[n->store.buf].index], n->rank,
                    j - c->k->nsyms);
    else v = i64c(c, 0);
    LLVMValueRef g[3] = {i32c(c, 0), i32c(c, isb ? 0 : 1), i64c(c, j)};
    LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, ctxt, ctx, g, 3, ""));
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
  int p = vl.nouter >= 2 ? vl.nouter - 1 : 1;
  NestFn f = nest_functions(c, n, vl.nouter);
  LLVMValueRef ctx = cpu_fill_nest_ctx(c, n, f.ctxt, f.nb);
  LLVMValueRef total = i64c(c, 1), inner = i64c(c, 1);
  for (int i = 0; i < vl.n; i++) {
    if (i < p) total = LLVMBuildMul(c->b, total, vl.ub[i], "");
    else inner = LLVMBuildMul(c->b, inner, vl.ub[i], "");
  }
  if (vl.tile_var >= 0) inner = LLVMBuildMul(c->b, inner, vl.blocked ? i64c(c, vl.tile) : vl.tile_ub, "");
  inner = cg_smin(c, inner, i64c(c, 1), true);
  LLVMValueRef grain = cg_smin(c, LLVMBuildSDiv(c->b, i64c(c, PAR_MIN_ELEMS), inner, ""),
                            i64c(c, 1), true);
  LLVMTypeRef ps[4] = {c->i64, c->i64, c->ptr, c->ptr};
  LLVMValueRef a[4] = {total, grain, f.body, ctx};
  call(c, cg_fdecl(c, "tdsl_parallel_for", c->vd, ps, 4, 0), a, 4);
}

/* ---- row groups (opt_level >= 1; loops.h LfNest.group) -------------------
 * A group (a normalization's statistics nests and its final nest) runs as
 * one parallel loop over the flattened iterations of its `shared` outer
 * loops: for each shared index (a row), every nest's remaining outer
 * loops and reduction in turn, so the later nests find the row in cache.
 * Two private functions, as for single nests:
 *   K.nestI(i64 begin, i64 end, ptr noalias buf..., i64 sym...,
 *           i64 rtstride... (each nest's rank of them, in order))
 *     decomposes begin once and steps the shared index like an odometer;
 *     noalias holds as for single nests: each nest writes only its store
 *     buffer (a statistics buffer, which the later nests read through the
 *     same pointer, or the value's own buffer, which no nest reads).
 *     Always-inlined into
 *   K.nestI.body(ptr ctx, i64 begin, i64 end), the tdsl_parallel_for body.
 * Chunks split shared iterations only (>= PAR_MIN_ELEMS elements of work
 * of all nests per chunk); each row is reduced by one thread in a fixed
 * order, so results do not depend on the thread count. */

/* Elements of work per shared iteration: every nest's remaining loops. */
static LLVMValueRef group_row_work(Cg *c, const LfNest *g) {
  LLVMValueRef sum = i64c(c, 0);
  for (int k = 0; k < g->group; k++) {
    const LfNest *n = &g[k];
    LLVMValueRef w = i64c(c, 1);
    for (int l = g->shared; l < n->rank + n->nred; l++)
      w = LLVMBuildMul(c->b, w, cg_sym_val(c, cpu_loop_extent(n, l)), "");
    sum = LLVMBuildAdd(c->b, sum, w, "");
  }
  return cg_smin(c, sum, i64c(c, 1), true);
}

/* One nest of a group at the current shared index (x->iv[0..s-1] set). */
static void emit_group_member(Cg *c, NestCtx *x, int s) {
  const LfNest *n = x->n;
  for (int l = s; l < n->rank; l++) x->iv[l] = cg_open_loop(c, x->ub[l]);
  LLVMValueRef v = n->reduce == OP_COUNT ? cg_eval(c, x, n->value) : cpu_emit_reduce(c, x);
  cg_store_el(c, v, cg_address(c, x, &n->store, n->dtype, n->rank), n->dtype);
  for (int l = s; l < n->rank; l++) cg_close_loop(c);
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
    for (int l = 0; l < n->rank + n->nred; l++) x[k].ub[l] = cg_sym_val(c, cpu_loop_extent(n, l));
    for (int l = 0; l < n->rank; l++) x[k].rt_stride[l] = LLVMGetParam(c->fn, rt++);
  }
  for (int j = s - 1; j >= 0; j--) {
    sh.ub[j] = x[0].ub[j];
    idx[j] = cg_entry_alloca(c, c->i64, NULL);
    LLVMBuildStore(c->b, j ? LLVMBuildURem(c->b, rest, sh.ub[j], "") : rest, idx[j]);
    if (j) rest = LLVMBuildUDiv(c->b, rest, sh.ub[j], "");
  }
  cg_open_loop_from(c, lo, hi);
  for (int j = 0; j < s; j++) {
    LLVMValueRef iv = LLVMBuildLoad2(c->b, c->i64, idx[j], "");
    for (int k = 0; k < g->group; k++) x[k].iv[j] = iv;
  }
  for (int k = 0; k < g->group; k++) emit_group_member(c, &x[k], s);
  cpu_odometer_step(c, &sh, idx, s);
  cg_close_loop(c);
}

/* On targets with 512-bit vectors, lets the vectorizer use them in fn
 * (LLVM prefers 256 bits by default): a group's loops are compute-bound
 * on exp once their row is in cache. */
static void prefer_wide_vectors(Cg *c, LLVMValueRef fn) {
  if (c->vec_bits < 512) return;
  const char *keys[2] = {"prefer-vector-width", "min-legal-vector-width"};
  for (int i = 0; i < 2; i++)
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(c->ctx, keys[i], (unsigned)strlen(keys[i]),
                                                      "512", 3));
}

/* Builds K.nestI and K.nestI.body of group g (see above). */
static NestFn group_functions(Cg *c, const LfNest *g) {
  NestFn f = {.nb = c->lk->nbufs, .nv = c->k->nsyms};
  for (int k = 0; k < g->group; k++) f.nv += g[k].rank;
  SavedFn s;
  open_nest_fn(c, &f, &s);
  prefer_wide_vectors(c, f.impl);
  emit_group_range(c, g, LLVMGetParam(f.impl, 0), LLVMGetParam(f.impl, 1),
                   (unsigned)(2 + f.nb + c->k->nsyms));
  close_nest_fn(c, &f, &s);
  prefer_wide_vectors(c, f.body);
  return f;
}

/* Stores context field (part, j) of f. */
static void ctx_store(Cg *c, const NestFn *f, LLVMValueRef ctx, int part, int j, LLVMValueRef v) {
  LLVMValueRef gi[3] = {i32c(c, 0), i32c(c, part), i64c(c, j)};
  LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, f->ctxt, ctx, gi, 3, ""));
}

/* Fills group g's context in the kernel and calls tdsl_parallel_for. */
void cpu_emit_group_parallel(Cg *c, const LfNest *g) {
  if (g->shared < 1 || g->shared > g->rank) ICE("row group sharing %d loops", g->shared);
  NestFn f = group_functions(c, g);
  LLVMValueRef ctx = cg_entry_alloca(c, f.ctxt, NULL);
  for (int i = 0; i < f.nb; i++) ctx_store(c, &f, ctx, 0, i, c->base[i] ? c->base[i] : LLVMConstNull(c->ptr));
  for (int j = 0; j < c->k->nsyms; j++) ctx_store(c, &f, ctx, 1, j, c->env[j]);
  int j = c->k->nsyms;
  for (int k = 0; k < g->group; k++) {
    const LfNest *n = &g[k];
    for (int l = 0; l < n->rank; l++, j++) {
      LLVMValueRef v = i64c(c, 0);
      if (n->store.rt_strides)
        v = cg_dl_stride(c, c->args[c->k->nparams + c->lk->bufs[n->store.buf].index], n->rank, l);
      ctx_store(c, &f, ctx, 1, j, v);
    }
  }
  LLVMValueRef total = i64c(c, 1);
  for (int l = 0; l < g->shared; l++) total = LLVMBuildMul(c->b, total, cg_sym_val(c, g->shape[l]), "");
  LLVMValueRef grain = cg_smin(c, LLVMBuildSDiv(c->b, i64c(c, PAR_MIN_ELEMS), group_row_work(c, g), ""),
                            i64c(c, 1), true);
  LLVMTypeRef ps[4] = {c->i64, c->i64, c->ptr, c->ptr};
  LLVMValueRef a[4] = {total, grain, f.body, ctx};
  call(c, cg_fdecl(c, "tdsl_parallel_for", c->vd, ps, 4, 0), a, 4);
}
