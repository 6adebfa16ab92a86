/* outline.c — outlined functions of the CPU backend and their context.
 * A parallel nest, a row group or a GEMM epilogue is emitted into a
 * private function
 *   K.<what>I(i64 lead..., ptr noalias buf..., i64 value..., scalar...)
 * (the buffers' bases, then the symbols' values and any extra values,
 * then the scalar parameters by value, in their compute types), always
 * inlined into its wrapper
 *   K.<what>I.body(ptr ctx, i64 lead...),
 * which tdsl_parallel_for or the GEMM calls.  The context is one struct
 *   { [nb x ptr] buffer bases, [nv x i64] symbol values and extras,
 *     { scalar values } }
 * that the kernel fills (cpu_ctx_fill, cpu_ctx_set) and the wrapper or a
 * GEMM pack function unpacks (cpu_ctx_unpack): this file is the one place
 * that knows its layout.  A scalar's buffer has no memory (its base is a
 * null pointer); its value travels in the context like a symbol's.
 * Buffer pointers are noalias: an outlined nest writes only its store
 * buffer, which none of its reads touches (scratch is fresh, outputs
 * were checked against inputs and each other at entry).
 * Needs: cpu.h.  Used by: parallel.c, gemm_nest.c. */
#include <stdio.h>
#include <string.h>

#include "cpu.h"

/* ---- the context ------------------------------------------------------------ */

/* The scalar parameters' buffers, in buffer order, and their count. */
static int scalar_bufs(Cg *c, int *idx) {
  int n = 0;
  for (int i = 0; i < c->lk->nbufs; i++)
    if (c->lk->bufs[i].kind == LFB_SCALAR) idx[n++] = i;
  return n;
}

/* The types of scalars idx[0 .. n) in an outlined function. */
static LLVMTypeRef *scalar_types(Cg *c, const int *idx, int n) {
  LLVMTypeRef *t = arena_alloc(c->m->arena, sizeof *t * (size_t)(n + 1));
  for (int j = 0; j < n; j++) t[j] = cg_compute_type(c, c->lk->bufs[idx[j]].dtype);
  return t;
}

OutCtx cpu_ctx_type(Cg *c, int nb, int nv) {
  int *idx = arena_alloc(c->m->arena, sizeof *idx * (size_t)(c->lk->nbufs + 1));
  int ns = scalar_bufs(c, idx);
  LLVMTypeRef st = LLVMStructTypeInContext(c->ctx, scalar_types(c, idx, ns), (unsigned)ns, 0);
  LLVMTypeRef fs[3] = {LLVMArrayType2(c->ptr, (uint64_t)nb), LLVMArrayType2(c->i64, (uint64_t)nv),
                       st};
  return (OutCtx){LLVMStructTypeInContext(c->ctx, fs, 3, 0), nb, nv, ns, idx};
}

/* Field i: buffer i when i < nb, value i - nb when i < nb + nv, else
 * scalar i - nb - nv. */
static LLVMValueRef ctx_field(Cg *c, const OutCtx *x, LLVMValueRef ctx, int i) {
  int f = i < x->nb ? 0 : i < x->nb + x->nv ? 1 : 2;
  int e = f == 0 ? i : f == 1 ? i - x->nb : i - x->nb - x->nv;
  LLVMValueRef g[3] = {i32c(c, 0), i32c(c, f), f == 2 ? i32c(c, e) : i64c(c, e)};
  return LLVMBuildGEP2(c->b, x->t, ctx, g, 3, "");
}

static LLVMTypeRef ctx_field_type(Cg *c, const OutCtx *x, int i) {
  if (i < x->nb) return c->ptr;
  if (i < x->nb + x->nv) return c->i64;
  return cg_compute_type(c, c->lk->bufs[x->sidx[i - x->nb - x->nv]].dtype);
}

void cpu_ctx_set(Cg *c, const OutCtx *x, LLVMValueRef ctx, int i, LLVMValueRef v) {
  LLVMBuildStore(c->b, v, ctx_field(c, x, ctx, i));
}

LLVMValueRef cpu_ctx_fill(Cg *c, const OutCtx *x) {
  LLVMValueRef ctx = cg_entry_alloca(c, x->t, NULL);
  for (int i = 0; i < x->nb; i++)
    cpu_ctx_set(c, x, ctx, i, c->base[i] ? c->base[i] : LLVMConstNull(c->ptr));
  for (int j = 0; j < c->k->nsyms; j++) cpu_ctx_set(c, x, ctx, x->nb + j, c->env[j]);
  for (int j = 0; j < x->ns; j++)
    cpu_ctx_set(c, x, ctx, x->nb + x->nv + j, c->scalar[x->sidx[j]]);
  return ctx;
}

void cpu_ctx_unpack(Cg *c, const OutCtx *x, LLVMValueRef ctx, LLVMValueRef *v) {
  for (int i = 0; i < x->nb + x->nv + x->ns; i++)
    v[i] = LLVMBuildLoad2(c->b, ctx_field_type(c, x, i), ctx_field(c, x, ctx, i), "");
}

LLVMValueRef *cpu_ctx_scalars(Cg *c, const OutCtx *x, LLVMValueRef *s) {
  LLVMValueRef *v = arena_alloc(c->m->arena, sizeof *v * (size_t)(c->lk->nbufs + 1));
  for (int j = 0; j < x->ns; j++) v[x->sidx[j]] = s[j];
  return v;
}

/* ---- outlined functions ---------------------------------------------------- */

void cpu_outline_open(Cg *c, Outlined *o, const char *what, int nlead, int nv) {
  int nb = c->lk->nbufs;
  o->nlead = nlead;
  o->cx = cpu_ctx_type(c, nb, nv);
  int ns = o->cx.ns, np = nlead + nb + nv + ns;
  LLVMTypeRef *ps = arena_alloc(c->m->arena, sizeof *ps * (size_t)(np + 1));
  for (int i = 0; i < np; i++)
    ps[i] = i < nlead ? c->i64 : ctx_field_type(c, &o->cx, i - nlead);
  char name[600];
  snprintf(name, sizeof name, "%s.%s%d", c->k->name, what, c->nfns++);
  o->impl = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->vd, ps, (unsigned)np, 0));
  LLVMSetLinkage(o->impl, LLVMPrivateLinkage);
  cg_add_attr(c->ctx, o->impl, LLVMAttributeFunctionIndex, "alwaysinline");
  cg_add_attr(c->ctx, o->impl, LLVMAttributeFunctionIndex, "nounwind");
  for (int i = 0; i < nb; i++) cg_add_attr(c->ctx, o->impl, (unsigned)(nlead + 1 + i), "noalias");
  o->sfn = c->fn, o->sbase = c->base, o->senv = c->env, o->sscalar = c->scalar;
  o->sentry = c->entry;
  o->spos = LLVMGetInsertBlock(c->b);
  c->fn = o->impl;
  c->entry = block(c, "entry");
  o->start = block(c, "start");
  LLVMPositionBuilderAtEnd(c->b, o->start);
  c->base = arena_alloc(c->m->arena, sizeof *c->base * (size_t)(nb + 1));
  c->env = arena_alloc(c->m->arena, sizeof *c->env * (size_t)(c->k->nsyms + 1));
  for (int i = 0; i < nb; i++) c->base[i] = LLVMGetParam(o->impl, (unsigned)(nlead + i));
  for (int i = 0; i < c->k->nsyms; i++)
    c->env[i] = LLVMGetParam(o->impl, (unsigned)(nlead + nb + i));
  c->scalar = arena_alloc(c->m->arena, sizeof *c->scalar * (size_t)(nb + 1));
  for (int j = 0; j < ns; j++) {
    int i = o->cx.sidx[j];
    c->base[i] = NULL; /* no memory: the value alone */
    c->scalar[i] = LLVMGetParam(o->impl, (unsigned)(nlead + nb + nv + j));
    const char *pn = c->k->params[c->lk->bufs[i].index].name;
    LLVMSetValueName2(c->scalar[i], pn, strlen(pn));
  }
}

LLVMValueRef cpu_outline_value(const Outlined *o, int i) {
  return LLVMGetParam(o->impl, (unsigned)(o->nlead + o->cx.nb + i));
}

void cpu_outline_close(Cg *c, Outlined *o) {
  LLVMBuildRetVoid(c->b);
  LLVMPositionBuilderAtEnd(c->b, c->entry);
  LLVMBuildBr(c->b, o->start);
  int nb = o->cx.nb, nv = o->cx.nv, np = o->nlead + nb + nv + o->cx.ns;
  LLVMTypeRef *bps = arena_alloc(c->m->arena, sizeof *bps * (size_t)(o->nlead + 1));
  bps[0] = c->ptr;
  for (int i = 0; i < o->nlead; i++) bps[1 + i] = c->i64;
  char name[620];
  snprintf(name, sizeof name, "%s.body", LLVMGetValueName(o->impl));
  o->body = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->vd, bps, (unsigned)(o->nlead + 1), 0));
  LLVMSetLinkage(o->body, LLVMPrivateLinkage);
  if (cpu_is_light(o->impl)) cpu_mark_light(o->body); /* in the same part as impl */
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, o->body, "entry"));
  LLVMValueRef *a = arena_alloc(c->m->arena, sizeof *a * (size_t)np);
  for (int i = 0; i < o->nlead; i++) a[i] = LLVMGetParam(o->body, (unsigned)(1 + i));
  cpu_ctx_unpack(c, &o->cx, LLVMGetParam(o->body, 0), a + o->nlead);
  LLVMBuildCall2(c->b, LLVMGlobalGetValueType(o->impl), o->impl, a, (unsigned)np, "");
  LLVMBuildRetVoid(c->b);
  c->fn = o->sfn, c->base = o->sbase, c->env = o->senv, c->scalar = o->sscalar;
  c->entry = o->sentry;
  LLVMPositionBuilderAtEnd(c->b, o->spos);
}
