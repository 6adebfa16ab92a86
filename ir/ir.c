/* ir.c — the op table's accessors and IR construction helpers. */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  int nargs;
  OpKind kind;
  OpDtype dtype;
  int cost;
} op_info[] = {
#define OP(e, n, a, k, r, c, m) {n, a, k, r, c},
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
OpDtype op_dtype_rule(Op op) { return op_info[op].dtype; }
int op_cost(Op op) { return op_info[op].cost; }

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

const Sym *ir_dense_extent(IrModule *m, const IrValue *v) {
  SymTab *st = m->st;
  const Sym *one = sym_const(st, 1), *e = v->offset ? v->offset : sym_const(st, 0);
  const Sym *acc = one, *prod = one; /* row-major strides, PyTorch's or clamped */
  bool row_major = sym_is(e, 0);
  for (int d = v->rank - 1; d >= 0; d--) {
    const Sym *stride = v->stride ? v->stride[d] : acc;
    /* Syms are interned: equal expressions are the same pointer */
    row_major &= stride == acc || stride == prod || sym_is(v->shape[d], 1);
    const Sym *last = sym_max(st, sym_sub(st, v->shape[d], one), sym_const(st, 0));
    e = sym_add(st, e, sym_mul(st, last, stride));
    acc = sym_mul(st, acc, sym_max(st, v->shape[d], one));
    prod = sym_mul(st, prod, v->shape[d]);
  }
  return row_major ? sym_max(st, ir_numel(m, v), one) : sym_add(st, e, one);
}

IrRef ir_storage_root(const IrKernel *k, IrRef r) {
  while (op_kind(k->values[r].op) == IRK_VIEW) r = k->values[r].args[0];
  return r;
}

const char *ir_index_message(Arena *a, const IrKernel *k, IrRef r) {
  const IrValue *v = &k->values[r];
  IrRef x = v->args[0];
  const char *name = NULL;
  for (IrRef t = x; !name;) {
    const IrValue *w = &k->values[t];
    if (w->name) name = arena_printf(a, "'%s'", w->name);
    else if (w->op == OP_PARAM) name = arena_printf(a, "'%s'", k->params[w->value.i].name);
    else if (op_kind(w->op) != IRK_VIEW)
      name = arena_printf(a, "the %s at %d:%d", op_name(w->op), w->loc.line, w->loc.col);
    else t = w->args[0];
  }
  int64_t d = 0;
  sym_is_const(v->attrs[0], &d);
  return arena_printf(a, "%s at %d:%d: index %%lld is out of range for dim %d of %s "
                      "(size %%lld)", v->op == OP_GATHER ? "gather" : "index", v->loc.line,
                      v->loc.col, (int)d, name);
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

/* ---- run-time check messages ---- */

/* Adds the variables of s not yet in ids[0..*n). */
static void check_vars(const Sym *s, int *ids, int *n) {
  const Sym *a, *b;
  int id, nterms;
  switch (sym_form(s, NULL, &id, &a, &b, &nterms)) {
  case SYMF_CONST: return;
  case SYMF_VAR:
    for (int i = 0; i < *n; i++)
      if (ids[i] == id) return;
    if (*n < IR_CHECK_MAX_SYMS) ids[(*n)++] = id;
    return;
  case SYMF_POLY:
    for (int t = 0; t < nterms; t++) {
      int64_t coef;
      int natoms;
      const Sym *const *atoms;
      sym_term(s, t, &coef, &natoms, &atoms);
      for (int j = 0; j < natoms; j++) check_vars(atoms[j], ids, n);
    }
    return;
  default:
    check_vars(a, ids, n);
    check_vars(b, ids, n);
    return;
  }
}

static bool word_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
         (ch >= '0' && ch <= '9') || ch == '_';
}

/* Offset just past the first whole-word `name` in msg, or -1. */
static long word_end(const char *msg, const char *name) {
  size_t n = strlen(name);
  for (const char *p = strstr(msg, name); p && n; p = strstr(p + 1, name))
    if ((p == msg || !word_char(p[-1])) && !word_char(p[n]))
      return (long)(p - msg + (long)n);
  return -1;
}

/* Whether the symbol word ending at msg[end] (len characters) stands
 * alone ("size N"), not inside an expression ("3*N", "N - 1"), where
 * " (= 3)" would read as the whole expression's value. */
static bool stands_alone(const char *msg, long end, size_t len) {
  long b = end - (long)len - 1;
  while (b >= 0 && msg[b] == ' ') b--;
  const char *e = msg + end;
  while (*e == ' ') e++;
  return !(b >= 0 && strchr("*+-/%(", msg[b])) && !(*e && strchr("*+-/%)", *e));
}

static void put_escaped(FILE *f, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%') fputc('%', f);
    fputc(s[i], f);
  }
}

int ir_check_format(Arena *a, const IrKernel *k, const IrCheck *c, char **fmt,
                    int *ids) {
  const char *msg = c->msg ? c->msg : "run-time check failed";
  int vars[IR_CHECK_MAX_SYMS], nv = 0, n = 0;
  check_vars(c->lhs, vars, &nv);
  check_vars(c->rhs, vars, &nv);
  long at[IR_CHECK_MAX_SYMS], pos[IR_CHECK_MAX_SYMS];
  for (int i = 0; i < nv; i++) {
    at[i] = vars[i] < k->nsyms ? word_end(msg, k->syms[vars[i]].name) : -1;
    if (at[i] < 0) continue;
    int j = n++; /* sorted by position: the arguments follow the text */
    for (; j > 0 && pos[j - 1] > at[i]; j--) ids[j] = ids[j - 1], pos[j] = pos[j - 1];
    ids[j] = vars[i], pos[j] = at[i];
  }
  char *buf = NULL;
  size_t len = 0, done = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) ICE("out of memory");
  for (int i = 0; i < n; i++) {
    size_t end = (size_t)pos[i];
    const char *name = k->syms[ids[i]].name;
    put_escaped(f, msg + done, end - done);
    if (stands_alone(msg, pos[i], strlen(name))) {
      fputs(" (= %lld)", f);
    } else {
      fputs(" (", f);
      put_escaped(f, name, strlen(name));
      fputs(" = %lld)", f);
    }
    done = end;
  }
  put_escaped(f, msg + done, strlen(msg + done));
  for (int i = 0; i < nv; i++)
    if (at[i] < 0) {
      const char *name = vars[i] < k->nsyms ? k->syms[vars[i]].name : "?";
      fputs(" (", f);
      put_escaped(f, name, strlen(name));
      fputs(" = %lld)", f);
      ids[n++] = vars[i];
    }
  fclose(f);
  *fmt = arena_strdup(a, buf);
  free(buf);
  return n;
}
