/* lower.c — tensor IR to the loop form (lower.h).
 *
 * One nest per non-view, non-parameter value (no fusion yet: every
 * intermediate is written to its own scratch buffer with its semantic
 * strides), then one copy nest per result into the caller's output.
 * Views fold into the accesses of their users; TENSOR data becomes a
 * constant buffer.
 *
 * Needs: ir.h, sym.h.  Produces: LfKernel (arena of m). */
#include "lower.h"

#include <string.h>

typedef struct Lower {
  IrModule *m;
  const IrKernel *k;
  SymTab *st;
  int *buf_of; /* per IR value: its buffer when it is a storage root */
  LfKernel *lk;
  int bufcap, nestcap;
} Lower;

static void *zalloc(Lower *L, size_t n) {
  void *p = arena_alloc(L->m->arena, n ? n : 1);
  memset(p, 0, n ? n : 1);
  return p;
}

static int add_buf(Lower *L, LfBuf b) {
  LfKernel *lk = L->lk;
  if (lk->nbufs == L->bufcap) {
    L->bufcap = L->bufcap ? 2 * L->bufcap : 8;
    LfBuf *nb = zalloc(L, sizeof *nb * (size_t)L->bufcap);
    if (lk->nbufs) memcpy(nb, lk->bufs, sizeof *nb * (size_t)lk->nbufs);
    lk->bufs = nb;
  }
  lk->bufs[lk->nbufs] = b;
  return lk->nbufs++;
}

static LfNest *add_nest(Lower *L) {
  LfKernel *lk = L->lk;
  if (lk->nnests == L->nestcap) {
    L->nestcap = L->nestcap ? 2 * L->nestcap : 8;
    LfNest *nn = zalloc(L, sizeof *nn * (size_t)L->nestcap);
    if (lk->nnests) memcpy(nn, lk->nests, sizeof *nn * (size_t)lk->nnests);
    lk->nests = nn;
  }
  LfNest *n = &lk->nests[lk->nnests++];
  memset(n, 0, sizeof *n);
  n->reduce = OP_COUNT;
  return n;
}

static int param_of(const IrKernel *k, IrRef r) {
  for (int i = 0; i < k->nparams; i++)
    if (k->params[i].value == r) return i;
  ICE("PARAM value %%%d belongs to no parameter", r);
}

/* v's semantic strides (contiguous when the value carries none). */
static const Sym **strides(Lower *L, const IrValue *v) {
  if (v->stride) return v->stride;
  const Sym **st = zalloc(L, sizeof *st * (size_t)(v->rank + 1));
  const Sym *acc = sym_const(L->st, 1);
  for (int d = v->rank - 1; d >= 0; d--) {
    st[d] = acc;
    acc = sym_mul(L->st, acc, sym_max(L->st, v->shape[d], sym_const(L->st, 1)));
  }
  return st;
}

/* Elements a dense buffer with v's semantic geometry needs. */
static const Sym *extent(Lower *L, const IrValue *v) {
  const Sym *e = v->offset ? v->offset : sym_const(L->st, 0);
  const Sym **st = strides(L, v);
  for (int d = 0; d < v->rank; d++) {
    const Sym *last = sym_max(L->st, sym_sub(L->st, v->shape[d], sym_const(L->st, 1)),
                              sym_const(L->st, 0));
    e = sym_add(L->st, e, sym_mul(L->st, last, st[d]));
  }
  return sym_add(L->st, e, sym_const(L->st, 1));
}

/* The buffer of storage root r (created on first use). */
static int root_buf(Lower *L, IrRef r) {
  if (L->buf_of[r] >= 0) return L->buf_of[r];
  const IrValue *v = ir_val(L->k, r);
  LfBuf b = {.dtype = v->dtype, .index = r};
  if (v->op == OP_PARAM) {
    b.index = param_of(L->k, r);
    b.kind = L->k->params[b.index].is_tensor ? LFB_PARAM : LFB_SCALAR;
  } else if (v->op == OP_TENSOR) {
    b.kind = LFB_CONST;
    b.data = v->data;
    b.size = ir_numel(L->m, v);
  } else {
    b.kind = LFB_SCRATCH;
    b.size = extent(L, v);
  }
  return L->buf_of[r] = add_buf(L, b);
}

/* Access to value r whose dim d is loop variable map[d] of a nest with
 * nloops loops. */
static LfAccess access(Lower *L, IrRef r, const int *map, int nloops) {
  const IrValue *v = ir_val(L->k, r);
  LfAccess a = {.buf = root_buf(L, ir_storage_root(L->k, r))};
  a.offset = v->offset ? v->offset : sym_const(L->st, 0);
  a.stride = zalloc(L, sizeof *a.stride * (size_t)(nloops ? nloops : 1));
  for (int l = 0; l < nloops; l++) a.stride[l] = sym_const(L->st, 0);
  const Sym **st = strides(L, v);
  for (int d = 0; d < v->rank; d++)
    a.stride[map[d]] = sym_add(L->st, a.stride[map[d]], st[d]);
  return a;
}

static LfExpr *expr(Lower *L, LfExprKind kind, DType dt) {
  LfExpr *e = zalloc(L, sizeof *e);
  e->kind = kind;
  e->dtype = dt;
  return e;
}

static LfExpr *cast(Lower *L, LfExpr *x, DType to) {
  if (x->dtype == to) return x;
  LfExpr *e = expr(L, LFE_CAST, to);
  e->nargs = 1;
  e->args[0] = x;
  return e;
}

static const int *identity(Lower *L, int n) {
  int *map = zalloc(L, sizeof *map * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) map[i] = i;
  return map;
}

static LfExpr *load(Lower *L, IrRef r, const int *map, int nloops) {
  LfExpr *e = expr(L, LFE_LOAD, ir_val(L->k, r)->dtype);
  e->acc = access(L, r, map, nloops);
  return e;
}

/* The value computed by a source or elementwise/copy op at the nest's
 * loop variables (its own dims). */
static LfExpr *value_expr(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  const int *id = identity(L, v->rank);
  LfExpr *e;
  switch (v->op) {
  case OP_CONST:
  case OP_FULL:
    e = expr(L, LFE_CONST, dtype_is_float(v->dtype) ? DT_F64 : DT_I64);
    e->value = v->value;
    return cast(L, e, v->dtype);
  case OP_SYMVAL:
    e = expr(L, LFE_SYM, DT_I64);
    e->sym = v->attrs[0];
    return cast(L, e, v->dtype);
  case OP_ARANGE:
    e = expr(L, LFE_ARANGE, DT_F64);
    e->start = v->fattr[0];
    e->step = v->fattr[1];
    return cast(L, e, v->dtype);
  case OP_COPY: return load(L, v->args[0], id, v->rank);
  case OP_CAST: return cast(L, load(L, v->args[0], id, v->rank), v->dtype);
  case OP_RESHAPE: {
    const IrValue *a = ir_val(L->k, v->args[0]);
    e = load(L, v->args[0], identity(L, a->rank), a->rank);
    e->acc.lin_rank = a->rank;
    e->acc.lin_shape = a->shape;
    if (a->rank == 0) { /* a 0-dim operand: every index reads element 0 */
      e->acc.lin_rank = 0;
      e->acc.stride = zalloc(L, sizeof *e->acc.stride * (size_t)(v->rank + 1));
      for (int d = 0; d < v->rank; d++) e->acc.stride[d] = sym_const(L->st, 0);
    }
    return e;
  }
  default: break;
  }
  e = expr(L, LFE_OP, v->dtype);
  e->op = v->op;
  e->flags = v->flags;
  e->nargs = v->nargs;
  for (int j = 0; j < v->nargs; j++) e->args[j] = load(L, v->args[j], id, v->rank);
  return e;
}

static LfAccess dense_store(Lower *L, IrRef r) {
  return access(L, r, identity(L, ir_val(L->k, r)->rank), ir_val(L->k, r)->rank);
}

/* Normalized reduced dims of a reduction over an input of rank n. */
static void reduced_dims(const IrValue *v, int n, bool *red) {
  for (int d = 0; d < n; d++) red[d] = v->nattrs == 0;
  for (int i = 0; i < v->nattrs; i++) {
    int64_t d;
    if (!sym_is_const(v->attrs[i], &d)) ICE("reduction dim is not constant");
    if (n == 0) continue;
    if (d < 0) d += n;
    if (d < 0 || d >= n) ICE("reduction dim out of range");
    red[d] = true;
  }
}

static void lower_reduce(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  const IrValue *a = ir_val(L->k, v->args[0]);
  bool red[TDSL_LF_MAX_RANK];
  int map[TDSL_LF_MAX_RANK], nred = 0, nkept = 0;
  if (a->rank > TDSL_LF_MAX_RANK) ICE("rank %d too large", a->rank);
  reduced_dims(v, a->rank, red);
  LfNest *n = add_nest(L);
  n->red = zalloc(L, sizeof *n->red * (size_t)(a->rank + 1));
  for (int d = 0; d < a->rank; d++)
    if (red[d]) n->red[nred++] = a->shape[d];
  for (int d = 0; d < a->rank; d++) {
    if (red[d]) {
      int before = 0;
      for (int j = 0; j < d; j++) before += red[j];
      map[d] = v->rank + before;
    } else {
      map[d] = v->rank == a->rank ? d : nkept;
      nkept++;
    }
  }
  n->rank = v->rank;
  n->shape = v->shape;
  n->nred = nred;
  n->reduce = v->op;
  n->value = load(L, v->args[0], map, v->rank + nred);
  n->store = dense_store(L, r);
  n->dtype = v->dtype;
  n->src = r;
}

static bool supported(Op op) {
  OpKind k = op_kind(op);
  return k != IRK_NORM && k != IRK_MATMUL && k != IRK_CONV && k != IRK_POOL;
}

static void lower_value(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  OpKind kind = op_kind(v->op);
  if (kind == IRK_VIEW || v->op == OP_PARAM || v->op == OP_TENSOR) return;
  if (kind == IRK_REDUCE) {
    lower_reduce(L, r);
    return;
  }
  LfNest *n = add_nest(L);
  n->rank = v->rank;
  n->shape = v->shape;
  n->value = value_expr(L, r);
  n->store = dense_store(L, r);
  n->dtype = v->dtype;
  n->src = r;
}

/* Copies result i's value into the caller's output. */
static void lower_result(Lower *L, int i) {
  const IrResult *res = &L->k->results[i];
  const IrValue *v = ir_val(L->k, res->value);
  LfBuf b = {.kind = LFB_OUTPUT, .index = i, .dtype = res->dtype};
  LfNest *n = add_nest(L);
  n->rank = v->rank;
  n->shape = v->shape;
  n->value = cast(L, load(L, res->value, identity(L, v->rank), v->rank), res->dtype);
  n->store.buf = add_buf(L, b);
  n->store.offset = sym_const(L->st, 0);
  n->store.rt_strides = true;
  n->dtype = res->dtype;
  n->src = -1;
}

LfKernel *lf_lower(IrModule *m, const IrKernel *k, Op *unsupported) {
  Lower L = {.m = m, .k = k, .st = m->st};
  for (int r = 0; r < k->nvalues; r++)
    if (!supported(ir_val(k, r)->op)) {
      *unsupported = ir_val(k, r)->op;
      return NULL;
    }
  L.lk = zalloc(&L, sizeof *L.lk);
  L.lk->k = k;
  L.buf_of = zalloc(&L, sizeof *L.buf_of * (size_t)(k->nvalues + 1));
  for (int r = 0; r < k->nvalues; r++) L.buf_of[r] = -1;
  for (int r = 0; r < k->nvalues; r++) lower_value(&L, r);
  for (int i = 0; i < k->nresults; i++) lower_result(&L, i);
  return L.lk;
}

/* ---- printing ---- */

static void print_access(FILE *f, const LfAccess *a, int n) {
  fprintf(f, "b%d[", a->buf);
  sym_print(f, a->offset);
  if (a->rt_strides) {
    fputs(" + i.rt_strides]", f);
    return;
  }
  if (a->lin_rank) {
    fputs(" | lin", f);
    n = a->lin_rank;
  }
  for (int l = 0; l < n; l++) {
    fprintf(f, " + i%d*", l);
    sym_print(f, a->stride[l]);
  }
  fputc(']', f);
}

static void print_expr(FILE *f, const LfExpr *e, int nloops) {
  switch (e->kind) {
  case LFE_LOAD: print_access(f, &e->acc, nloops); return;
  case LFE_CONST:
    if (e->dtype == DT_F64) fprintf(f, "%g", e->value.f);
    else fprintf(f, "%lld", (long long)e->value.i);
    return;
  case LFE_SYM: sym_print(f, e->sym); return;
  case LFE_ARANGE: fprintf(f, "(%g + i0*%g)", e->start, e->step); return;
  case LFE_CAST: fprintf(f, "%s(", dtype_name(e->dtype)); break;
  case LFE_OP: fprintf(f, "%s(", op_name(e->op)); break;
  }
  for (int j = 0; j < e->nargs; j++) {
    if (j) fputs(", ", f);
    print_expr(f, e->args[j], nloops);
  }
  fputc(')', f);
}

void lf_print(FILE *f, const LfKernel *lk) {
  static const char *const kinds[] = {"param", "scalar", "const", "scratch",
                                      "output"};
  fprintf(f, "kernel %s\n", lk->k->name);
  for (int b = 0; b < lk->nbufs; b++) {
    fprintf(f, "  b%d = %s %d %s", b, kinds[lk->bufs[b].kind],
            lk->bufs[b].index, dtype_name(lk->bufs[b].dtype));
    if (lk->bufs[b].size) {
      fputs(" size ", f);
      sym_print(f, lk->bufs[b].size);
    }
    fputc('\n', f);
  }
  for (int i = 0; i < lk->nnests; i++) {
    const LfNest *n = &lk->nests[i];
    fputs("  for [", f);
    for (int d = 0; d < n->rank; d++) {
      if (d) fputs(", ", f);
      sym_print(f, n->shape[d]);
    }
    fputs("]", f);
    if (n->reduce != OP_COUNT) {
      fprintf(f, " %s over [", op_name(n->reduce));
      for (int d = 0; d < n->nred; d++) {
        if (d) fputs(", ", f);
        sym_print(f, n->red[d]);
      }
      fputs("]", f);
    }
    fputs(": ", f);
    print_access(f, &n->store, n->rank);
    fprintf(f, " = %s ", dtype_name(n->dtype));
    print_expr(f, n->value, n->rank + n->nred);
    fputc('\n', f);
  }
}
