/* fusion.c — which values the loop form computes inside their users
 * instead of in a nest of their own (the rules are in lower.h).
 *
 * lf_plan_inline counts, per storage root, the reads of it (through any
 * view) and refuses roots read by a consumer that cannot take an
 * expression (RESHAPE's linear reads) or through a view whose index map
 * does not compose (lf_view_map); then, in value order, inlines each
 * candidate read once, or read several times while its expression (with
 * its own inlined operands) stays within a small cost budget.
 *
 * Needs: ir.h, sym.h, lower.h.  Produces: flags in the arena of m. */
#include <string.h>

#include "lower.h"

/* A value read more often than once is recomputed per read only below
 * this cost (nodes; transcendental and division ops count extra). */
#define FUSE_MULTI_USE_BUDGET 12

/* v's semantic strides into st (row-major when it carries none). */
static void sem_strides(IrModule *m, const IrValue *v, const Sym **st) {
  if (v->stride) {
    for (int d = 0; d < v->rank; d++) st[d] = v->stride[d];
    return;
  }
  const Sym *acc = sym_const(m->st, 1);
  for (int d = v->rank - 1; d >= 0; d--) {
    st[d] = acc;
    acc = sym_mul(m->st, acc, sym_max(m->st, v->shape[d], sym_const(m->st, 1)));
  }
}

bool lf_view_map(IrModule *m, const IrKernel *k, IrRef r, const int *map, int *pm) {
  IrRef root = ir_storage_root(k, r);
  const IrValue *v = ir_val(k, r), *p = ir_val(k, root);
  if (v->rank > TDSL_LF_MAX_RANK || p->rank > TDSL_LF_MAX_RANK) return false;
  if (r == root) {
    memcpy(pm, map, sizeof *pm * (size_t)p->rank);
    return true;
  }
  if (v->offset && !sym_is(v->offset, 0)) return false;
  const Sym *sv[TDSL_LF_MAX_RANK], *sp[TDSL_LF_MAX_RANK];
  bool used[TDSL_LF_MAX_RANK] = {false};
  sem_strides(m, v, sv);
  sem_strides(m, p, sp);
  for (int j = 0; j < p->rank; j++) pm[j] = -1;
  for (int d = 0; d < v->rank; d++) {
    if (sym_is(v->shape[d], 1) || sym_is(sv[d], 0)) continue; /* index 0 / expand */
    int found = -1;
    for (int j = 0; j < p->rank; j++) {
      if (sym_is(p->shape[j], 1) || sp[j] != sv[d] || p->shape[j] != v->shape[d]) continue;
      if (found >= 0 || used[j]) return false; /* ambiguous */
      found = j;
    }
    if (found < 0) return false;
    used[found] = true;
    pm[found] = map[d];
  }
  for (int j = 0; j < p->rank; j++)
    if (!used[j] && !sym_is(p->shape[j], 1)) return false;
  return true;
}

/* Whether a read of value a (any view of its root) composes. */
static bool view_ok(IrModule *m, const IrKernel *k, IrRef a) {
  int map[TDSL_LF_MAX_RANK], pm[TDSL_LF_MAX_RANK];
  const IrValue *v = ir_val(k, a);
  if (v->rank > TDSL_LF_MAX_RANK) return false;
  for (int d = 0; d < v->rank; d++) map[d] = d;
  return lf_view_map(m, k, a, map, pm);
}

static bool candidate(Op op) {
  switch (op) {
  case OP_CONST: case OP_FULL: case OP_SYMVAL: case OP_ARANGE: case OP_COPY: case OP_CAST:
    return true;
  default: break;
  }
  OpKind kd = op_kind(op);
  return kd == IRK_UNARY || kd == IRK_BINARY || kd == IRK_COMPARE || kd == IRK_TERNARY;
}

/* Consumers whose operand reads become expressions. */
static bool takes_expr(Op op) {
  return op != OP_RESHAPE && (candidate(op) || op_kind(op) == IRK_REDUCE);
}

static int op_cost(Op op) {
  switch (op) {
  case OP_EXP: case OP_LOG: case OP_LOG1P: case OP_EXPM1: case OP_SQRT: case OP_RSQRT:
  case OP_SIN: case OP_COS: case OP_TANH: case OP_SIGMOID: case OP_GELU: case OP_SILU:
  case OP_ERF: case OP_RECIPROCAL: case OP_DIV: case OP_FLOORDIV: case OP_MOD: case OP_POW:
    return 8;
  default: return 1;
  }
}

bool *lf_plan_inline(IrModule *m, const IrKernel *k) {
  int n = k->nvalues;
  size_t cnt = (size_t)(n + 1);
  bool *inl = arena_alloc(m->arena, sizeof *inl * cnt), *bad = arena_alloc(m->arena, cnt);
  int *uses = arena_alloc(m->arena, sizeof *uses * cnt), *cost = arena_alloc(m->arena, sizeof *cost * cnt);
  memset(inl, 0, sizeof *inl * cnt);
  memset(bad, 0, cnt);
  memset(uses, 0, sizeof *uses * cnt);
  memset(cost, 0, sizeof *cost * cnt);
  for (IrRef r = 0; r < n; r++) {
    const IrValue *v = ir_val(k, r);
    if (op_kind(v->op) == IRK_VIEW) continue;
    for (int j = 0; j < v->nargs; j++) {
      IrRef root = ir_storage_root(k, v->args[j]);
      uses[root]++;
      if (!takes_expr(v->op) || !view_ok(m, k, v->args[j])) bad[root] = true;
    }
  }
  for (int i = 0; i < k->nresults; i++) {
    IrRef root = ir_storage_root(k, k->results[i].value);
    uses[root]++;
    if (!view_ok(m, k, k->results[i].value)) bad[root] = true;
  }
  for (IrRef r = 0; r < n; r++) {
    const IrValue *v = ir_val(k, r);
    if (!candidate(v->op) || bad[r] || v->rank > TDSL_LF_MAX_RANK) continue;
    int c = op_cost(v->op);
    for (int j = 0; j < v->nargs; j++) {
      IrRef root = ir_storage_root(k, v->args[j]);
      c += inl[root] ? cost[root] : 1;
    }
    cost[r] = c;
    inl[r] = uses[r] <= 1 || c <= FUSE_MULTI_USE_BUDGET;
  }
  return inl;
}
