/* storage.c — where values live, as the passes that plan it (fuse,
 * plan-memory) and lowering (loops/lower.c) must both see it: which
 * reads through a view can follow the storage root's index space
 * (ir_view_map, the rule for inlining a value into its readers), which
 * values own a scratch buffer, and how large buffers and plan-memory
 * blocks are.  One definition each, so a pass never plans what lowering
 * does not build.
 * Needs: ir.h.  Produces: index maps and sizes (Syms in m's table). */
#include <string.h>

#include "ir.h"

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

bool ir_view_map(IrModule *m, const IrKernel *k, IrRef r, const int *map, int *pm) {
  IrRef root = ir_storage_root(k, r);
  const IrValue *v = ir_val(k, r), *p = ir_val(k, root);
  if (v->rank > TDSL_MAX_RANK || p->rank > TDSL_MAX_RANK) return false;
  if (r == root) {
    memcpy(pm, map, sizeof *pm * (size_t)p->rank);
    return true;
  }
  if (v->offset && !sym_is(v->offset, 0)) return false;
  const Sym *sv[TDSL_MAX_RANK], *sp[TDSL_MAX_RANK];
  bool used[TDSL_MAX_RANK] = {false};
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

bool ir_owns_scratch(const IrValue *v) {
  return op_kind(v->op) != IRK_VIEW && v->op != OP_PARAM && v->op != OP_TENSOR &&
         !(v->flags & IRF_INLINE) && v->out == 0;
}

const Sym *ir_scratch_bytes(IrModule *m, const IrValue *v) {
  return sym_mul(m->st, ir_dense_extent(m, v), sym_const(m->st, dtype_size(v->dtype)));
}

/* The block of a slot never grows: it is sized for its first value. */
const Sym *ir_slot_bytes(IrModule *m, const IrKernel *k, int slot) {
  for (IrRef r = 0; r < k->nvalues; r++)
    if (ir_val(k, r)->slot == slot) return ir_scratch_bytes(m, ir_val(k, r));
  ICE("plan-memory slot %d holds no value", slot);
}

const Sym *ir_planned_scratch_bytes(IrModule *m, const IrKernel *k) {
  const Sym *total = sym_const(m->st, 0);
  for (IrRef r = 0; r < k->nvalues; r++) {
    const IrValue *v = ir_val(k, r);
    if (!ir_owns_scratch(v)) continue;
    bool first = true; /* a block counts once, at its first value */
    for (IrRef q = 0; q < r && v->slot > 0 && first; q++)
      first = ir_val(k, q)->slot != v->slot;
    if (first) total = sym_add(m->st, total, ir_scratch_bytes(m, v));
  }
  return total;
}
