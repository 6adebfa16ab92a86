/* fold_views.c — the fold-views pass: a chain of views becomes one index
 * map on the storage it reads.
 *
 * Every view value carries its geometry (shape, strides, offset) absolute
 * in the storage of its root, the first non-view ancestor (ops.h).  So a
 * view whose operand is itself a view can read the root directly: it
 * becomes `as_strided %root` with the same geometry, which is exact, and
 * the intermediate views, once nothing else reads them, are removed.  One
 * "fold" decision is recorded per folded chain, at the outermost view,
 * naming the chain in source terms and the single index map left.  Each
 * implicit broadcast (an EXPAND that sema inserted) gets a "broadcast"
 * decision saying it stays a stride-0 read (nothing is materialized);
 * one that only renames equal sizes gets none.
 *
 * Needs: passes.h, ir.h.  Changes: view operands and ops, value list. */
#include <string.h>

#include "passes.h"

#define PASS "fold-views"

static bool is_view(const IrKernel *k, IrRef r) {
  return op_kind(ir_val(k, r)->op) == IRK_VIEW;
}

/* An implicit EXPAND that keeps every stride only renames sizes that are
 * equal written two ways (sema's geom_same_size): no broadcast. */
static bool renames_only(const IrValue *v, const IrValue *x) {
  return v->stride && x->stride && sym_list_equal(v->stride, v->rank, x->stride, x->rank);
}

static void note_broadcasts(PassCtx *c) {
  const IrKernel *k = c->k;
  for (IrRef r = 0; r < k->nvalues; r++) {
    const IrValue *v = ir_val(k, r);
    if (v->op != OP_EXPAND || !(v->flags & IRF_IMPLICIT) || !c->r) continue;
    const IrValue *x = ir_val(k, v->args[0]);
    if (renames_only(v, x)) continue;
    char *src = pass_describe_at(c->m->arena, k, v->args[0]);
    /* a scalar's shape [] says nothing: "broadcast of the scalar 2.0 at 3:9" */
    const char *shape = x->rank ? pass_shape_text(c->m->arena, x) : NULL;
    report_decision(c->r, PASS, "broadcast", v->loc, 0,
                    "broadcast of %s%s%s to %s stays a stride-0 read: nothing "
                    "is materialized", src, shape ? " " : "", shape ? shape : "",
                    pass_shape_text(c->m->arena, v));
  }
}

/* used_by_view[r]: some view reads r (r is inside a longer chain). */
static bool *views_reading(PassCtx *c) {
  const IrKernel *k = c->k;
  bool *u = arena_alloc(c->m->arena, (size_t)k->nvalues + 1);
  for (IrRef r = 0; r < k->nvalues; r++)
    if (is_view(k, r)) u[ir_val(k, r)->args[0]] = true;
  return u;
}

bool pass_fold_views(PassCtx *c) {
  IrKernel *k = c->k;
  note_broadcasts(c);
  bool *inner = views_reading(c);
  bool *drop = arena_alloc(c->m->arena, (size_t)k->nvalues + 1);
  bool changed = false;
  /* Describe chains before any rewrite, outermost views only. */
  for (IrRef r = 0; r < k->nvalues; r++) {
    drop[r] = is_view(k, r);
    if (!is_view(k, r) || !is_view(k, ir_val(k, r)->args[0]) || inner[r] || !c->r)
      continue;
    int n;
    IrRef root = ir_storage_root(k, r);
    char *chain = pass_describe(c->m->arena, k, r, &n);
    report_decision(c->r, PASS, "fold", ir_val(k, r)->loc, 0,
                    "%s reads %s directly with %s: %d views folded, "
                    "nothing copied", chain, pass_describe_at(c->m->arena, k, root),
                    pass_geom_text(c->m->arena, ir_val(k, r)), n);
  }
  for (IrRef r = 0; r < k->nvalues; r++) {
    IrValue *v = ir_val(k, r);
    if (!is_view(k, r) || !is_view(k, v->args[0])) continue;
    IrRef *args = arena_alloc(c->m->arena, sizeof *args);
    args[0] = ir_storage_root(k, r);
    v->args = args;
    v->nargs = 1;
    v->op = OP_AS_STRIDED; /* geometry absolute in the root: exact */
    v->nattrs = 0;
    v->attrs = NULL;
    v->flags = 0;
    changed = true;
  }
  if (ir_compact(c->m, k, drop)) changed = true;
  return changed;
}
