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
