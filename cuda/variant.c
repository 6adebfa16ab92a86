/* variant.c — kernel variants chosen at launch (cuda.h "Variants"): a
 * launch unit may have several device kernels computing the same thing,
 * the most specialized first and the general one (K__nI) last; the host
 * function tests each variant's condition on the actual sizes, strides
 * and pointers and launches the first that holds.
 *
 * Elementwise nests at -O1 and up (every element computed exactly as
 * the general kernel computes it; only the indexing and the memory
 * accesses differ):
 *  - "i32": 32-bit index arithmetic.  The thread's linear index, its
 *    split over the schedule's virtual loops and every element index
 *    (codegen cg_address with Cg.idx32) are 32-bit; the host checks that
 *    the nest's element count is below 2^31 - 2^28 (a grid-stride step
 *    never wraps) and that every access's index stays in
 *    [-2^31, 2^31): |offset| + sum (extent - 1) * |stride| < 2^31.
 *  - "vN": the "i32" kernel where each thread takes N consecutive
 *    elements along the store's innermost loop (N = 16 bytes / the
 *    stored element's size): the store and every load of unit stride
 *    along that loop are one N-element vector access (128-bit for the
 *    store), loads of stride 0 (broadcasts) load once, other loads load
 *    per element.  The host checks, besides "i32": the innermost
 *    extent a multiple of N, and for each vector access its first
 *    element's address aligned to its vector (at most 16 bytes): the
 *    pointer, the offset and the other loops' strides.
 *  - "t32": the transposing tile kernel (nest.c) with 32-bit element
 *    indices, when the tile loop's extent is at least CU_TILE_MIN; below
 *    it a transposing nest runs as "vN" or "i32" (a tile would leave
 *    most threads idle, and the load's stride along the store's
 *    innermost loop is small enough to coalesce).
 * Needs: cuda.h. */
#include <stdio.h>
#include <string.h>

#include "cuda.h"

/* Below this tile-loop extent a transposing nest runs untiled. */
enum { CU_TILE_MIN = 8 };

/* ---- what a nest allows ------------------------------------------------------ */

/* The loads of e (not scalars), in evaluation order; false when one
 * indexes by tensors (no 32-bit variant: its index range is not a
 * symbol's). */
static bool collect_loads(const LfKernel *lk, const LfExpr *e, const LfExpr **out, int *n, int max) {
  if (e->kind == LFE_LOAD) {
    if (lk->bufs[e->acc.buf].kind == LFB_SCALAR) return true;
    if (e->acc.ndyn) return false;
    if (*n >= max) return false;
    out[(*n)++] = e;
    return true;
  }
  for (int i = 0; i < e->nargs; i++)
    if (e->args[i] && !collect_loads(lk, e->args[i], out, n, max)) return false;
  return true;
}

enum { MAX_LOADS = 64 };

typedef struct NestFacts {
  LfSchedule s;
  int inner;                 /* the innermost virtual loop's carrier */
  int nloads;
  const LfExpr *load[MAX_LOADS];
  bool i32;                  /* a 32-bit variant can exist */
  int vec;                   /* N of a vector variant (0: none) */
} NestFacts;

/* How load l runs in a vector variant: one vector (VEC), one scalar for
 * all lanes (BCAST), or per lane (LANE). */
typedef enum { LANE, VEC, BCAST } LoadKind;

static LoadKind load_kind(const LfKernel *lk, const LfExpr *e, int inner) {
  const LfBuf *b = &lk->bufs[e->acc.buf];
  if (b->kind == LFB_CONST || e->acc.rt_strides || e->acc.lin_rank || e->acc.ndyn) return LANE;
  if (sym_is(e->acc.stride[inner], 0)) return BCAST;
  if (sym_is(e->acc.stride[inner], 1)) return VEC;
  return LANE;
}

static NestFacts nest_facts(SymTab *st, const LfKernel *lk, const LfNest *n, const LfTarget *t) {
  NestFacts f = {.s = lf_schedule(st, n, t)};
  const LfAccess *a = &n->store;
  if (n->rank == 0 || f.s.nouter == 0) return f; /* one element: the general kernel */
  f.inner = lf_schedule_var(&f.s, f.s.nouter - 1);
  f.i32 = collect_loads(lk, n->value, f.load, &f.nloads, MAX_LOADS) && !a->ndyn;
  int es = dtype_size(n->dtype);
  bool unit = a->rt_strides || (!a->lin_rank && sym_is(a->stride[f.inner], 1));
  if (f.i32 && unit && !a->lin_rank && es < 16) f.vec = 16 / es;
  return f;
}

/* At -O1 and up: -O0 keeps one plain kernel per unit (its PTX, one
 * kernel per IR value, is large enough already). */
static bool elementwise_unit(const LfKernel *lk, int i, int opt) {
  const LfNest *n = &lk->nests[i];
  return opt > 0 && cu_unit(lk, i, opt) == 1 && !n->check && cu_plan(n).kind == CU_ELEMWISE && !lf_is_scan(n);
}

int cu_variants(SymTab *st, const LfKernel *lk, int i, int opt, const LfTarget *t, CuVariant *v) {
  int nv = 0;
  if (elementwise_unit(lk, i, opt)) {
    const LfNest *n = &lk->nests[i];
    NestFacts f = nest_facts(st, lk, n, t);
    if (cu_transposes(st, n, t) && f.i32) v[nv++] = (CuVariant){CU_FORM_TILE, 1, true, "t32"};
    if (f.vec) {
      v[nv] = (CuVariant){CU_FORM_PLAIN, f.vec, true, ""};
      snprintf(v[nv].tag, sizeof v[nv].tag, "v%d", f.vec);
      nv++;
    }
    if (f.i32) v[nv++] = (CuVariant){CU_FORM_PLAIN, 1, true, "i32"};
  }
  v[nv++] = (CuVariant){CU_FORM_DEFAULT, 1, false, ""};
  return nv;
}

/* ---- device side ------------------------------------------------------------- */

/* Extent of virtual loop k, i32 (the host checked it fits). */
static LLVMValueRef vext32(Cg *c, const LfNest *n, const LfSchedule *s, int k) {
  LLVMValueRef e = i64c(c, 1);
  for (int m = 0; m < s->count[k]; m++)
    e = LLVMBuildMul(c->b, e, cg_sym_val(c, lf_loop_extent(n, s->order[s->first[k] + m])), "");
  return LLVMBuildTrunc(c->b, e, c->i32, "");
}

/* Virtual loop k at index d (i32): its carrier d, the loops it covers 0. */
static void set_vloop32(Cg *c, const LfSchedule *s, int k, LLVMValueRef d, NestCtx *x) {
  for (int m = 0; m < s->count[k]; m++) x->iv[s->order[s->first[k] + m]] = i64c(c, 0);
  x->iv[lf_schedule_var(s, k)] = LLVMBuildZExt(c->b, d, c->i64, "");
}

typedef struct VecState {
  int nloads, lane;
  const LfExpr **load;
  LoadKind kind[MAX_LOADS];
  LLVMValueRef val[MAX_LOADS]; /* VEC: the vector; BCAST: the value */
} VecState;

static LLVMValueRef vec_load_hook(Cg *c, NestCtx *x, const LfExpr *e) {
  (void)x;
  VecState *v = c->load_data;
  for (int i = 0; i < v->nloads; i++) {
    if (v->load[i] != e || v->kind[i] == LANE) continue;
    if (v->kind[i] == BCAST) return v->val[i];
    LLVMValueRef el = LLVMBuildExtractElement(c->b, v->val[i], i32c(c, v->lane), "");
    return cg_from_storage(c, el, c->lk->bufs[e->acc.buf].dtype);
  }
  return NULL;
}

static int vec_align(int N, int es) { return N * es < 16 ? N * es : 16; }

/* The N elements at x's loop variables (the inner carrier at a multiple
 * of N): the loads ahead, each lane's value, one vector store. */
static void vec_body(Cg *c, const LfNest *n, NestCtx *x, const NestFacts *f, int N) {
  LLVMBuilderRef b = c->b;
  VecState v = {.nloads = f->nloads, .load = (const LfExpr **)f->load};
  for (int i = 0; i < f->nloads; i++) {
    const LfExpr *e = f->load[i];
    DType dt = c->lk->bufs[e->acc.buf].dtype;
    v.kind[i] = load_kind(c->lk, e, f->inner);
    if (v.kind[i] == LANE) continue;
    LLVMValueRef p = cg_address(c, x, &e->acc, dt, n->rank + n->nred);
    if (v.kind[i] == BCAST) {
      v.val[i] = cg_load_el(c, p, dt);
    } else {
      v.val[i] = LLVMBuildLoad2(b, LLVMVectorType(cg_storage_type(c, dt), (unsigned)N), p, "");
      LLVMSetAlignment(v.val[i], (unsigned)vec_align(N, dtype_size(dt)));
    }
  }
  LLVMValueRef base = x->iv[f->inner];
  LLVMValueRef store = cg_address(c, x, &n->store, n->dtype, n->rank);
  LLVMTypeRef st = cg_storage_type(c, n->dtype);
  LLVMValueRef out = LLVMGetUndef(LLVMVectorType(st, (unsigned)N));
  c->load_hook = vec_load_hook;
  c->load_data = &v;
  for (int j = 0; j < N; j++) {
    v.lane = j;
    x->iv[f->inner] = LLVMBuildAdd(b, base, i64c(c, j), "");
    LLVMValueRef el = cg_to_storage(c, cg_eval(c, x, n->value), n->dtype);
    out = LLVMBuildInsertElement(b, out, el, i32c(c, j), "");
  }
  c->load_hook = NULL;
  c->load_data = NULL;
  x->iv[f->inner] = base;
  LLVMValueRef s = LLVMBuildStore(b, out, store);
  LLVMSetAlignment(s, (unsigned)vec_align(N, dtype_size(n->dtype)));
}

/* The untiled kernel with 32-bit indices, N elements per step (N > 1:
 * vectors): grid-stride over the nest's element count / N. */
static void emit_plain32(Cg *c, const LfNest *n, NestCtx *x, int N) {
  LLVMBuilderRef b = c->b;
  NestFacts f = nest_facts(c->m->st, c->lk, n, c->target);
  const LfSchedule *s = &f.s;
  LLVMValueRef ext[LF_MAXL], total = i32c(c, 1);
  for (int k = 0; k < s->nouter; k++) total = LLVMBuildMul(b, total, ext[k] = vext32(c, n, s, k), "");
  LLVMValueRef steps = LLVMBuildUDiv(b, total, i32c(c, N), "");
  LLVMValueRef tid = LLVMBuildAdd(b, LLVMBuildMul(b, cu_sreg(c, "ctaid.x"), cu_sreg(c, "ntid.x"), ""),
                                  cu_sreg(c, "tid.x"), "");
  LLVMValueRef grid = LLVMBuildMul(b, cu_sreg(c, "nctaid.x"), cu_sreg(c, "ntid.x"), "");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b), head = block(c, "loop32"), body = block(c, "body32"),
                    done = block(c, "loop32_end");
  LLVMBuildBr(b, head);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef t = LLVMBuildPhi(b, c->i32, "t");
  LLVMAddIncoming(t, &tid, &pre, 1);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntULT, t, steps, ""), body, done);
  LLVMPositionBuilderAtEnd(b, body);
  LLVMValueRef i = N > 1 ? LLVMBuildMul(b, t, i32c(c, N), "") : t;
  for (int k = s->nouter - 1; k >= 0; k--) { /* row-major, the innermost fastest */
    set_vloop32(c, s, k, k > 0 ? LLVMBuildURem(b, i, ext[k], "") : i, x);
    if (k > 0) i = LLVMBuildUDiv(b, i, ext[k], "");
  }
  if (N > 1) {
    vec_body(c, n, x, &f, N);
  } else {
    LLVMValueRef v = cg_eval(c, x, n->value);
    cg_store_el(c, v, cg_address(c, x, &n->store, n->dtype, n->rank), n->dtype);
  }
  LLVMValueRef next = LLVMBuildAdd(b, t, grid, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMAddIncoming(t, &next, &latch, 1);
  LLVMBuildBr(b, head);
  LLVMPositionBuilderAtEnd(b, done);
}

void cu_emit_variant_kernel(Cg *c, const LfNest *n, const CuVariant *v, LLVMValueRef fn) {
  if (v->form == CU_FORM_DEFAULT) ICE("the general kernel is not a variant");
  c->idx32 = v->i32;
  if (v->form == CU_FORM_TILE) {
    cu_emit_nest_kernel(c, n, fn); /* the tile kernel, its element indices 32-bit */
  } else {
    LLVMValueRef *rts[64];
    if (c->k->nresults > 64) ICE("more than 64 results");
    cu_unpack(c, fn, rts);
    NestCtx x = {.n = n};
    for (int l = 0; l < n->rank; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
    if (n->store.rt_strides) {
      const LfBuf *b = &c->lk->bufs[n->store.buf];
      for (int l = 0; l < n->rank; l++) x.rt_stride[l] = rts[b->index][l];
    }
    emit_plain32(c, n, &x, v->vec);
    LLVMBuildRetVoid(c->b);
  }
  c->idx32 = false;
}

/* ---- host side ------------------------------------------------------------------ */

static LLVMValueRef ult(Cg *c, LLVMValueRef a, int64_t v) {
  return LLVMBuildICmp(c->b, LLVMIntULT, a, i64c(c, v), "");
}

static LLVMValueRef and2(Cg *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAnd(c->b, a, b, ""); }

static LLVMValueRef iabs(Cg *c, LLVMValueRef v) {
  return cg_smin(c, v, LLVMBuildNeg(c->b, v, ""), true);
}

/* Adds (e - 1) * |stride| to the access span *sp (both checked below
 * 2^31 first, so nothing wraps while ok holds). */
static LLVMValueRef span_term(Cg *c, LLVMValueRef ok, LLVMValueRef *sp, LLVMValueRef e,
                              LLVMValueRef stride) {
  LLVMValueRef a = iabs(c, stride), m = cg_smin(c, LLVMBuildSub(c->b, e, i64c(c, 1), ""), i64c(c, 0), true);
  ok = and2(c, ok, and2(c, ult(c, a, 1LL << 31), ult(c, m, 1LL << 31)));
  *sp = LLVMBuildAdd(c->b, *sp, LLVMBuildMul(c->b, m, a, ""), "");
  return and2(c, ok, ult(c, *sp, 1LL << 31));
}

/* The descriptor stride of the store's dim l (rt_strides). */
static LLVMValueRef rt_stride(Cg *c, const LfNest *n, int l) {
  const LfBuf *b = &c->lk->bufs[n->store.buf];
  return cg_dl_stride(c, c->args[c->k->nparams + b->index], n->rank, l);
}

static LLVMValueRef access_stride(Cg *c, const LfNest *n, const LfAccess *a, int l) {
  return a->rt_strides ? rt_stride(c, n, l) : cg_sym_val(c, a->stride[l]);
}

/* Whether every index of access a fits 32 bits. */
static LLVMValueRef access_fits(Cg *c, const LfNest *n, const LfAccess *a, LLVMValueRef ok) {
  LLVMValueRef sp = iabs(c, cg_sym_val(c, a->offset));
  ok = and2(c, ok, ult(c, sp, 1LL << 31));
  if (a->lin_rank) {
    for (int e = 0; e < a->lin_rank; e++)
      ok = span_term(c, ok, &sp, cg_smin(c, cg_sym_val(c, a->lin_shape[e]), i64c(c, 1), true),
                     cg_sym_val(c, a->stride[e]));
    return ok;
  }
  for (int l = 0; l < n->rank; l++)
    if (a->rt_strides || !sym_is(a->stride[l], 0))
      ok = span_term(c, ok, &sp, cg_sym_val(c, n->shape[l]), access_stride(c, n, a, l));
  return ok;
}

/* Whether vector access a (its carrier's stride 1) starts every vector
 * aligned: pointer, offset and the outer carriers' strides. */
static LLVMValueRef access_aligned(Cg *c, const LfNest *n, const NestFacts *f, const LfAccess *a,
                                   DType dt, int N, LLVMValueRef ok) {
  LLVMBuilderRef b = c->b;
  int es = dtype_size(dt), al = vec_align(N, es), q = al / es;
  LLVMValueRef p = LLVMBuildPtrToInt(b, c->base[a->buf], c->i64, "");
  ok = and2(c, ok, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, p, i64c(c, al - 1), ""), i64c(c, 0), ""));
  LLVMValueRef zero = i64c(c, 0), qv = i64c(c, q);
  ok = and2(c, ok, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildSRem(b, cg_sym_val(c, a->offset), qv, ""), zero, ""));
  if (a->rt_strides)
    ok = and2(c, ok, LLVMBuildICmp(b, LLVMIntEQ, rt_stride(c, n, f->inner), i64c(c, 1), ""));
  for (int k = 0; k + 1 < f->s.nouter; k++) {
    int l = lf_schedule_var(&f->s, k);
    if (!a->rt_strides && sym_is(a->stride[l], 0)) continue;
    LLVMValueRef r = LLVMBuildSRem(b, access_stride(c, n, a, l), qv, "");
    ok = and2(c, ok, LLVMBuildICmp(b, LLVMIntEQ, r, zero, ""));
  }
  return ok;
}

/* The extent of the tile loop of a transposing nest. */
static LLVMValueRef tile_extent(Cg *c, const LfNest *n, const LfSchedule *s) {
  LLVMValueRef e = i64c(c, 1);
  for (int m = 0; m < s->count[s->tile_k]; m++)
    e = LLVMBuildMul(c->b, e, cg_sym_val(c, lf_loop_extent(n, s->order[s->first[s->tile_k] + m])), "");
  return e;
}

LLVMValueRef cu_variant_ok(Cg *c, const LfNest *n, const CuVariant *v) {
  LLVMBuilderRef b = c->b;
  NestFacts f = nest_facts(c->m->st, c->lk, n, c->target);
  LLVMValueRef ok = LLVMConstInt(c->i1, 1, 0), total = i64c(c, 1);
  if (v->i32) { /* the element count, with room for a grid-stride step */
    for (int l = 0; l < n->rank; l++) {
      LLVMValueRef e = cg_sym_val(c, n->shape[l]);
      ok = and2(c, ok, ult(c, e, 1LL << 31));
      total = LLVMBuildMul(b, total, e, "");
      ok = and2(c, ok, ult(c, total, (1LL << 31) - CU_MAX_BLOCKS * (int64_t)CU_BLOCK));
    }
    ok = access_fits(c, n, &n->store, ok);
    for (int i = 0; i < f.nloads; i++) ok = access_fits(c, n, &f.load[i]->acc, ok);
  }
  if (cu_transposes(c->m->st, n, c->target)) {
    LLVMValueRef wide = LLVMBuildICmp(b, LLVMIntSGE, tile_extent(c, n, &f.s), i64c(c, CU_TILE_MIN), "");
    ok = and2(c, ok, v->form == CU_FORM_TILE ? wide : LLVMBuildNot(b, wide, ""));
  }
  if (v->vec > 1) {
    LLVMValueRef e = i64c(c, 1);
    const LfSchedule *s = &f.s;
    int k = s->nouter - 1;
    for (int m = 0; m < s->count[k]; m++)
      e = LLVMBuildMul(b, e, cg_sym_val(c, lf_loop_extent(n, s->order[s->first[k] + m])), "");
    ok = and2(c, ok, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, e, i64c(c, v->vec - 1), ""),
                                   i64c(c, 0), ""));
    ok = access_aligned(c, n, &f, &n->store, n->dtype, v->vec, ok);
    for (int i = 0; i < f.nloads; i++)
      if (load_kind(c->lk, f.load[i], f.inner) == VEC)
        ok = access_aligned(c, n, &f, &f.load[i]->acc, c->lk->bufs[f.load[i]->acc.buf].dtype, v->vec, ok);
  }
  return ok;
}

void cu_emit_host_variants(Cg *c, const LfNest *n, const CuVariant *v, int nv, LLVMValueRef fns,
                           int f0, void (*launch)(Cg *c, const LfNest *n, const CuVariant *v,
                                                  LLVMValueRef fn, LLVMValueRef args),
                           LLVMValueRef args) {
  LLVMBasicBlockRef done = block(c, "variant_done");
  for (int i = 0; i < nv; i++) {
    LLVMBasicBlockRef next = NULL;
    if (i + 1 < nv) {
      LLVMBasicBlockRef go = block(c, "variant");
      next = block(c, "variant_next");
      LLVMBuildCondBr(c->b, cu_variant_ok(c, n, &v[i]), go, next);
      LLVMPositionBuilderAtEnd(c->b, go);
    }
    LLVMValueRef o = i64c(c, f0 + i);
    LLVMValueRef fn = LLVMBuildLoad2(c->b, c->ptr, LLVMBuildGEP2(c->b, c->ptr, fns, &o, 1, ""), "");
    launch(c, n, &v[i], fn, args);
    LLVMBuildBr(c->b, done);
    if (next) LLVMPositionBuilderAtEnd(c->b, next);
  }
  LLVMPositionBuilderAtEnd(c->b, done);
}
