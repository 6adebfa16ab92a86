/* ir.c — the op table's accessors and IR construction helpers. */
#include "ir.h"

#include <string.h>

static const struct {
  const char *name;
  int nargs;
  OpKind kind;
} op_info[] = {
#define OP(e, n, a, k) {n, a, k},
    OP_LIST(OP)
#undef OP
};

const char *op_name(Op op) {
  IR_ASSERT(op >= 0 && op < OP_COUNT);
  return op_info[op].name;
}

Op op_from_name(const char *name) {
  for (int i = 0; i < OP_COUNT; i++)
    if (strcmp(op_info[i].name, name) == 0) return (Op)i;
  return OP_COUNT;
}

int op_nargs(Op op) { return op_info[op].nargs; }
OpKind op_kind(Op op) { return op_info[op].kind; }

const char *layout_name(Layout l) {
  switch (l) {
  case LAYOUT_CONTIGUOUS: return "contiguous";
  case LAYOUT_CHANNELS_LAST: return "channels_last";
  case LAYOUT_STRIDED: return "strided";
  }
  ICE("bad layout %d", (int)l);
}

IrModule *ir_module_new(Arena *a, const char *file) {
  IrModule *m = arena_alloc(a, sizeof *m);
  m->file = file ? arena_strdup(a, file) : "<input>";
  m->arena = a;
  m->st = sym_tab_new(a);
  return m;
}

IrKernel *ir_kernel_new(IrModule *m, const char *name, Loc loc) {
  IrKernel *k = arena_alloc(m->arena, sizeof *k);
  k->name = arena_strdup(m->arena, name);
  k->loc = loc;
  if (m->nkernels == m->kcap)
    m->kernels = arena_grow(m->arena, m->kernels, &m->kcap, sizeof *m->kernels);
  m->kernels[m->nkernels++] = k;
  return k;
}

IrRef ir_add(IrModule *m, IrKernel *k, const IrValue *v) {
  for (int i = 0; i < v->nargs; i++)
    IR_ASSERT(v->args[i] >= 0 && v->args[i] < k->nvalues);
  if (k->nvalues == k->valcap)
    k->values = arena_grow(m->arena, k->values, &k->valcap, sizeof *k->values);
  k->values[k->nvalues] = *v;
  return k->nvalues++;
}

int ir_add_sym(IrModule *m, IrKernel *k, const IrSymVar *s) {
  if (k->nsyms == k->symcap)
    k->syms = arena_grow(m->arena, k->syms, &k->symcap, sizeof *k->syms);
  k->syms[k->nsyms] = *s;
  return k->nsyms++;
}

void ir_add_check(IrModule *m, IrKernel *k, const IrCheck *c) {
  if (k->nchecks == k->checkcap)
    k->checks = arena_grow(m->arena, k->checks, &k->checkcap, sizeof *k->checks);
  k->checks[k->nchecks++] = *c;
}

const Sym *ir_numel(IrModule *m, const IrValue *v) {
  return sym_prod(m->st, v->shape, v->rank);
}

IrRef ir_storage_root(const IrKernel *k, IrRef r) {
  while (op_kind(k->values[r].op) == IRK_VIEW) r = k->values[r].args[0];
  return r;
}

/* live[r]: r is kept.  Users follow their operands, so one backward walk
 * sees every user of r before r itself. */
static void mark_live(const IrKernel *k, const bool *drop_ok, bool *live) {
  for (int i = 0; i < k->nresults; i++) live[k->results[i].value] = true;
  for (IrRef r = k->nvalues - 1; r >= 0; r--) {
    const IrValue *v = &k->values[r];
    if (v->op == OP_PARAM || (drop_ok && !drop_ok[r])) live[r] = true;
    if (!live[r]) continue;
    for (int j = 0; j < v->nargs; j++) live[v->args[j]] = true;
  }
}

int ir_compact(IrModule *m, IrKernel *k, const bool *drop_ok) {
  int n = k->nvalues;
  bool *live = arena_alloc(m->arena, sizeof *live * (size_t)(n + 1));
  IrRef *to = arena_alloc(m->arena, sizeof *to * (size_t)(n + 1));
  mark_live(k, drop_ok, live);
  int kept = 0;
  for (IrRef r = 0; r < n; r++) {
    to[r] = live[r] ? kept : -1;
    if (!live[r]) continue;
    IrValue v = k->values[r];
    if (v.nargs) {
      IrRef *args = arena_alloc(m->arena, sizeof *args * (size_t)v.nargs);
      for (int j = 0; j < v.nargs; j++) args[j] = to[v.args[j]];
      v.args = args;
    }
    k->values[kept++] = v;
  }
  k->nvalues = kept;
  for (int i = 0; i < k->nparams; i++)
    if (k->params[i].value >= 0) k->params[i].value = to[k->params[i].value];
  for (int i = 0; i < k->nresults; i++)
    k->results[i].value = to[k->results[i].value];
  return n - kept;
}
