/* row_groups.c — row groups of the IR (ir.h "Row groups"): which values
 * can be members, the order lowering emits nests in, what a member's
 * nest reads (through views and inlined values, with the index map of
 * each read), and the invariants ir_verify checks.  Pass row-group
 * (passes/row_group.c) decides the groups with the same reads, lowering
 * (loops/lower.c) emits them in ir_exec_order, and plan-memory plans
 * their scratch by that order.
 * Needs: ir.h (storage.c: ir_view_map).  Produces: orders and checks. */
#include <string.h>

#include "ir.h"

/* The reductions lowered as one plain reduction nest (loops/lower.c
 * lower_reduce): those a group may hold. */
bool ir_group_reduce(Op op) {
  switch (op) {
  case OP_SUM: case OP_MEAN: case OP_PROD: case OP_AMAX: case OP_AMIN:
  case OP_ARGMAX: case OP_ARGMIN:
    return true;
  default: return false;
  }
}

void ir_exec_order(const IrKernel *k, IrRef *order, int *pos) {
  int n = k->nvalues, i = 0;
  for (IrRef r = 0; r < n; r++) {
    int g = ir_val(k, r)->group;
    bool first = true;
    for (IrRef q = 0; q < r && g > 0 && first; q++) first = ir_val(k, q)->group != g;
    if (!first) continue; /* placed with its group's first member */
    for (IrRef q = r; q < n; q++) {
      if (q != r && (g == 0 || ir_val(k, q)->group != g)) continue;
      if (order) order[i] = q;
      if (pos) pos[q] = i;
      i++;
      if (g == 0) break;
    }
  }
  if (pos) pos[n] = n;
}

/* ---- what a member's nest reads ---- */

/* Loop variables of the nest of value c over its operand j's dims (the
 * loop form's: identity for elementwise ops, whose operands are expanded
 * to the result's shape; a reduction's outer loops over its result's
 * dims, then its reduced dims, as lower_reduce numbers them). */
static void operand_map(const IrKernel *k, IrRef c, IrRef a, int *map) {
  const IrValue *v = ir_val(k, c), *x = ir_val(k, a);
  if (!ir_group_reduce(v->op)) {
    for (int d = 0; d < x->rank; d++) map[d] = d;
    return;
  }
  bool red[TDSL_MAX_RANK];
  ir_reduced_dims(v, x->rank, red);
  int nred = 0, nkept = 0;
  for (int d = 0; d < x->rank; d++) {
    if (red[d]) map[d] = v->rank + nred++;
    else map[d] = v->rank == x->rank ? d : nkept, nkept++;
  }
}

void ir_reduced_dims(const IrValue *v, int n, bool *red) {
  for (int d = 0; d < n; d++) red[d] = v->nattrs == 0;
  for (int i = 0; i < v->nattrs; i++) {
    int64_t d;
    if (!sym_is_const(v->attrs[i], &d)) continue;
    if (d < 0) d += n;
    if (d >= 0 && d < n) red[d] = true;
  }
}

/* The reads of value r (an operand of the nest, or an inlined value
 * evaluated at loop variables map[] for its dims). */
static bool loads_of(IrModule *m, const IrKernel *k, IrRef a, const int *map, IrLoadFn fn,
                     void *ctx, int depth) {
  IrRef root = ir_storage_root(k, a);
  const IrValue *p = ir_val(k, root);
  int pm[TDSL_MAX_RANK];
  bool ok = p->rank <= TDSL_MAX_RANK && ir_view_map(m, k, a, map, pm);
  if (!(p->flags & IRF_INLINE) || op_kind(p->op) == IRK_MATMUL || op_kind(p->op) == IRK_CONV)
    return fn(ctx, root, ok ? pm : NULL);
  if (!ok || depth > 64 || p->op == OP_RESHAPE) return fn(ctx, root, NULL);
  for (int j = 0; j < p->nargs; j++)
    if (!loads_of(m, k, p->args[j], pm, fn, ctx, depth + 1)) return false;
  return true;
}

bool ir_nest_loads(IrModule *m, const IrKernel *k, IrRef c, IrLoadFn fn, void *ctx) {
  const IrValue *v = ir_val(k, c);
  int map[TDSL_MAX_RANK];
  for (int j = 0; j < v->nargs; j++) {
    if (ir_val(k, v->args[j])->rank > TDSL_MAX_RANK)
      return fn(ctx, ir_storage_root(k, v->args[j]), NULL);
    operand_map(k, c, v->args[j], map);
    if (!loads_of(m, k, v->args[j], map, fn, ctx, 0)) return false;
  }
  return true;
}

bool ir_row_local(const IrValue *p, const int *pm, int rows) {
  if (!pm || p->rank < rows) return false;
  for (int j = 0; j < p->rank; j++) {
    if (j < rows && pm[j] != j && !(pm[j] < 0 && sym_is(p->shape[j], 1))) return false;
    if (j >= rows && pm[j] >= 0 && pm[j] < rows) return false;
  }
  return true;
}

bool ir_group_shape_ok(const IrKernel *k, IrRef r, int rows, const Sym *const *ext) {
  const IrValue *v = ir_val(k, r);
  if (v->rank < rows) return false;
  for (int j = 0; j < rows; j++)
    if (v->shape[j] != ext[j]) return false;
  if (!ir_group_reduce(v->op)) return true;
  const IrValue *x = ir_val(k, v->args[0]);
  bool red[TDSL_MAX_RANK];
  if (x->rank > TDSL_MAX_RANK || x->rank < rows) return false;
  ir_reduced_dims(v, x->rank, red);
  for (int j = 0; j < rows; j++)
    if (red[j] || x->shape[j] != ext[j]) return false;
  return true;
}

/* ---- the verifier's checks ---- */

typedef struct Check {
  const IrKernel *k;
  int g, rows, first_pos; /* the member's group, its first member's place */
  const int *pos;
  const char *why;
  Arena *a;
  IrRef bad;
} Check;

static bool check_load(void *ctx, IrRef p, const int *pm) {
  Check *c = ctx;
  const IrValue *v = ir_val(c->k, p);
  bool nest = op_kind(v->op) != IRK_VIEW && v->op != OP_PARAM && v->op != OP_TENSOR;
  if (v->group == c->g) {
    if (!ir_row_local(v, pm, c->rows))
      c->why = arena_printf(c->a, "reads member %%%d at another row", p);
  } else if (nest && (v->flags & IRF_INLINE)) {
    c->why = arena_printf(c->a, "computes inlined %%%d where lowering cannot (an epilogue, "
                          "or through a view that does not compose)", p);
  } else if (nest && c->pos[p] > c->first_pos) {
    c->why = arena_printf(c->a, "reads %%%d, which runs after the group", p);
  }
  return c->why == NULL;
}

/* Each member's reads: row-local for members, before the group for
 * other nests. */
static const char *check_reads(IrModule *m, const IrKernel *k, IrRef *at) {
  int n = k->nvalues, *pos = arena_alloc(m->arena, sizeof *pos * (size_t)(n + 1));
  ir_exec_order(k, NULL, pos);
  for (IrRef r = 0; r < n; r++) {
    const IrValue *v = ir_val(k, r);
    if (v->group <= 0) continue;
    IrRef f = 0;
    while (ir_val(k, f)->group != v->group) f++;
    Check c = {.k = k, .g = v->group, .rows = v->rows, .first_pos = pos[f], .pos = pos,
               .a = m->arena};
    ir_nest_loads(m, k, r, check_load, &c);
    if (c.why) {
      *at = r;
      return c.why;
    }
  }
  return NULL;
}

const char *ir_check_groups(IrModule *m, const IrKernel *k, IrRef *at) {
  Arena *a = m->arena;
  int n = k->nvalues;
  IrRef *first = arena_alloc(a, sizeof *first * (size_t)(n + 1));
  int *count = arena_alloc(a, sizeof *count * (size_t)(n + 1));
  memset(count, 0, sizeof *count * (size_t)(n + 1));
  for (IrRef r = 0; r < n; r++) {
    const IrValue *v = ir_val(k, r);
    *at = r;
    if (v->group < 0 || v->group > n) return "group number out of range";
    if (v->group == 0) {
      if (v->rows != 0) return "rows without a group";
      continue;
    }
    OpKind kd = op_kind(v->op);
    bool elem = kd == IRK_UNARY || kd == IRK_BINARY || kd == IRK_COMPARE ||
                kd == IRK_TERNARY || v->op == OP_COPY || v->op == OP_CAST;
    if ((!elem && !ir_group_reduce(v->op)) || (v->flags & IRF_INLINE))
      return "a member is neither a reduction nor an elementwise value with a nest";
    if (count[v->group]++ == 0) first[v->group] = r;
    const IrValue *f = ir_val(k, first[v->group]);
    if (v->rows != f->rows || v->rows < 1 || v->rows > TDSL_MAX_RANK || f->rank < v->rows ||
        !ir_group_shape_ok(k, r, v->rows, f->shape))
      return "members do not share their leading dims";
  }
  for (IrRef r = 0; r < n; r++)
    if (ir_val(k, r)->group > 0 && count[ir_val(k, r)->group] < 2) {
      *at = r;
      return "a group of one";
    }
  return check_reads(m, k, at);
}
