/* stats.c — what a lowered kernel costs: the traffic estimate and nest
 * count of the optimization report (lf_stats, its entry point), and the
 * scratch blocks of an LfKernel, each counted once (lf_scratch_*: what
 * the code generator allocates, K_info's scratch_expr).
 * Needs: loops.h.  Produces: Syms in the module's table. */
#include <string.h>

#include "loops.h"

static void *zalloc_arena(Arena *a, size_t n) {
  void *p = arena_alloc(a, n);
  memset(p, 0, n);
  return p;
}

/* Marks the loops expression e depends on. */
static void expr_deps(const LfExpr *e, int nl, bool *dep) {
  if ((e->kind == LFE_INDEX || e->kind == LFE_ARANGE) && e->loop >= 0 && e->loop < nl)
    dep[e->loop] = true;
  if (e->kind == LFE_LOAD) {
    for (int l = 0; l < nl && e->acc.stride && !e->acc.lin_rank && !e->acc.rt_strides; l++)
      dep[l] |= !sym_is(e->acc.stride[l], 0);
    if (e->acc.lin_rank || e->acc.rt_strides)
      for (int l = 0; l < nl; l++) dep[l] = true;
    for (int t = 0; t < e->acc.ndyn; t++) expr_deps(e->acc.dyn[t], nl, dep);
  }
  for (int j = 0; j < e->nargs && j < 3; j++) expr_deps(e->args[j], nl, dep);
}

/* Distinct-address model: a load counts once per iteration of the loops
 * its address depends on (loads invariant in a loop stay in a register
 * or in cache across it). */
static const Sym *load_count(SymTab *st, const LfExpr *e, const Sym *const *ext, int nl,
                             const Sym *count) {
  if (e->acc.lin_rank > 0 || e->acc.rt_strides || !e->acc.stride) return count;
  bool dep[2 * TDSL_MAX_RANK + 4] = {false};
  for (int l = 0; l < nl; l++) dep[l] = !sym_is(e->acc.stride[l], 0);
  for (int t = 0; t < e->acc.ndyn; t++) /* the loops its indices read */
    expr_deps(e->acc.dyn[t], nl, dep);
  const Sym *c = sym_const(st, 1);
  for (int l = 0; l < nl; l++)
    if (dep[l]) c = sym_mul(st, c, ext[l]);
  return c;
}

/* hot (non-NULL inside a row group, loops.h): per buffer, whether an
 * earlier nest of the group (or an earlier load) touched it; the group
 * runs row by row, so such reads and rewrites stay in cache and count 0. */
static const Sym *expr_bytes(SymTab *st, const LfKernel *lk, const LfExpr *e,
                             const Sym *count, const Sym *const *ext, int nl, bool *hot) {
  if (!e) return sym_const(st, 0);
  const Sym *b = sym_const(st, 0);
  if (e->kind == LFE_LOAD && !(hot && hot[e->acc.buf]))
    b = sym_mul(st, load_count(st, e, ext, nl, count),
                sym_const(st, dtype_size(lk->bufs[e->acc.buf].dtype)));
  if (e->kind == LFE_LOAD && hot) hot[e->acc.buf] = true;
  for (int i = 0; i < e->nargs && i < 3; i++)
    b = sym_add(st, b, expr_bytes(st, lk, e->args[i], count, ext, nl, hot));
  for (int t = 0; e->kind == LFE_LOAD && t < e->acc.ndyn; t++) /* the indices' own loads */
    b = sym_add(st, b, expr_bytes(st, lk, e->acc.dyn[t], count, ext, nl, hot));
  return b;
}

/* Bytes one nest reads and writes: each element stored once, each load
 * once per distinct address (load_count); gemm nests read each operand
 * once (a prologue: its expression's loads).  hot: as expr_bytes. */
static const Sym *nest_bytes(IrModule *m, const LfKernel *lk, const LfNest *n, bool *hot) {
  SymTab *st = m->st;
  const Sym *ext[2 * TDSL_MAX_RANK + 4];
  int nl = 0;
  for (int l = 0; l < n->rank; l++) ext[nl++] = n->shape[l];
  for (int l = 0; l < n->nred; l++) ext[nl++] = n->red[l];
  const Sym *outer = sym_prod(st, n->shape, n->rank);
  if (n->check) return expr_bytes(st, lk, n->value, outer, ext, nl, NULL); /* no store */
  const Sym *b = sym_mul(st, outer, sym_const(st, dtype_size(n->dtype)));
  if (hot && hot[n->store.buf]) b = sym_const(st, 0);
  if (n->reduce == OP_MATMUL || n->reduce == OP_CONV2D) {
    const IrValue *v = ir_val(lk->k, n->gemm);
    for (int j = 0; j < v->nargs; j++) {
      const IrValue *x = ir_val(lk->k, v->args[j]);
      if (j < 2 && n->pro[j]) { /* a prologue: its loads, over the operand's dims */
        b = sym_add(st, b, expr_bytes(st, lk, n->pro[j], ir_numel(m, x), x->shape, x->rank, NULL));
        continue;
      }
      b = sym_add(st, b, sym_mul(st, ir_numel(m, x), sym_const(st, dtype_size(x->dtype))));
    }
    return sym_add(st, b, expr_bytes(st, lk, n->post, outer, ext, n->rank, NULL));
  }
  const Sym *all = sym_mul(st, outer, sym_prod(st, n->red, n->nred));
  b = sym_add(st, b, expr_bytes(st, lk, n->value, all, ext, nl, hot));
  b = sym_add(st, b, expr_bytes(st, lk, n->post, outer, ext, n->rank, hot));
  if (hot) hot[n->store.buf] = true;
  return b;
}

int lf_slot_shared(const LfKernel *lk, int i) {
  const LfBuf *b = &lk->bufs[i];
  if (b->kind != LFB_SCRATCH || b->slot <= 0) return 0;
  for (int j = 0; j < i; j++)
    if (lk->bufs[j].kind == LFB_SCRATCH && lk->bufs[j].slot == b->slot) return j + 1;
  return 0;
}

const Sym *lf_scratch_bytes(SymTab *st, const LfBuf *b) {
  if (b->slot > 0) return b->slot_bytes;
  return sym_mul(st, b->size, sym_const(st, dtype_size(b->dtype)));
}

void lf_stats(IrModule *m, const IrKernel *k, int opt_level, int *nests,
              const Sym **bytes, const Sym **scratch) {
  LfKernel *lk = lf_lower(m, k, opt_level);
  SymTab *st = m->st;
  *nests = lk->nnests;
  *bytes = sym_const(st, 0);
  bool *hot = zalloc_arena(m->arena, sizeof *hot * (size_t)(lk->nbufs + 1));
  for (int i = 0, end = 0; i < lk->nnests; i++) {
    const LfNest *n = &lk->nests[i];
    if (n->group > 1) { /* one loop over rows (loops.h): one nest */
      end = i + n->group;
      *nests -= n->group - 1;
      memset(hot, 0, sizeof *hot * (size_t)(lk->nbufs + 1));
    }
    *bytes = sym_add(st, *bytes, nest_bytes(m, lk, n, i < end ? hot : NULL));
  }
  *scratch = lf_scratch_total(st, lk);
}

const Sym *lf_scratch_total(SymTab *st, const LfKernel *lk) {
  const Sym *b = sym_const(st, 0);
  for (int i = 0; i < lk->nbufs; i++)
    if (lk->bufs[i].kind == LFB_SCRATCH && !lf_slot_shared(lk, i))
      b = sym_add(st, b, lf_scratch_bytes(st, &lk->bufs[i]));
  return b;
}
