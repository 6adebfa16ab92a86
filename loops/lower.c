/* lower.c — tensor IR to the loop form (loops.h), the entry point
 * lf_lower.
 *
 * One nest per non-view, non-parameter value not inlined by pass fuse
 * (each written to its own scratch buffer with its semantic strides, or
 * to the caller's output when plan-memory placed it there), then one
 * copy nest per remaining result into the caller's output.
 * A cat is one nest per operand, each storing its slice of the value.
 * Views fold into the accesses of their users; TENSOR data becomes a
 * constant buffer.  At -O1+ values flagged by pass fuse are inlined,
 * GEMMs take their readers as epilogues (loops.h "Fusion", "Epilogues"),
 * and the members of pass row-group's groups are lowered consecutively
 * as one row group (lower_values, ir.h "Row groups").
 *
 * Needs: ir.h (storage.c: ir_view_map, ir_slot_bytes, the rules the
 * passes planned with), sym.h.  Produces: LfKernel (arena of m). */
#include "loops.h"

#include <math.h>
#include <string.h>

/* An index-map entry >= LF_DYN is not a loop variable but the dynamic
 * index L->dslot[entry - LF_DYN] (indexing by tensors, loops.h): maps
 * carry it through views and inlined values down to the loads, where it
 * becomes a dynamic term of the access. */
#define LF_DYN (1 << 20)

typedef struct Lower {
  IrModule *m;
  const IrKernel *k;
  SymTab *st;
  int *buf_of; /* per IR value: its buffer when it is a storage root */
  bool *inl;   /* per IR value: computed inside its users (IRF_INLINE) */
  IrRef epi;   /* the inlined GEMM value read by the nest being built, or -1 */
  int front;   /* check nests of input indices, to run first */
  LfExpr **dslot; /* dynamic indices: index-map entry LF_DYN + s is dslot[s] */
  int ndslot, dslotcap;
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

/* Elements a dense buffer with v's semantic geometry needs (the same
 * expression plan-memory sizes its blocks with). */
static const Sym *extent(Lower *L, const IrValue *v) {
  return ir_dense_extent(L->m, v);
}

/* Pass plan-memory's slot of scratch value r: the block is as large as
 * the slot's first value (ir_slot_bytes). */
static void plan_slot(Lower *L, IrRef r, LfBuf *b) {
  const IrValue *v = ir_val(L->k, r);
  if (v->slot <= 0) return;
  b->slot = v->slot;
  b->slot_bytes = ir_slot_bytes(L->m, L->k, v->slot);
}

/* Per value: flagged IRF_INLINE by pass fuse (lowering decides nothing). */
static bool *planned_inline(Lower *L) {
  bool *inl = zalloc(L, sizeof *inl * (size_t)(L->k->nvalues + 1));
  for (IrRef r = 0; r < L->k->nvalues; r++)
    inl[r] = ir_val(L->k, r)->flags & IRF_INLINE;
  return inl;
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
  } else if (L->inl && v->out > 0) { /* plan-memory: in the caller's output */
    b.kind = LFB_OUTPUT;
    b.index = v->out - 1;
  } else {
    b.kind = LFB_SCRATCH;
    b.size = extent(L, v);
    if (L->inl) plan_slot(L, r, &b);
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
    if (map[d] >= LF_DYN) { /* a dynamic index along dim d */
      if (!a.ndyn) {
        a.dyn = zalloc(L, sizeof *a.dyn * (size_t)(v->rank + 1));
        a.dyn_stride = zalloc(L, sizeof *a.dyn_stride * (size_t)(v->rank + 1));
      }
      a.dyn[a.ndyn] = L->dslot[map[d] - LF_DYN];
      a.dyn_stride[a.ndyn++] = st[d];
    } else if (map[d] >= 0) { /* < 0: an inlined size-1 dim, index 0 */
      a.stride[map[d]] = sym_add(L->st, a.stride[map[d]], st[d]);
    }
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

static LfExpr *inline_load(Lower *L, IrRef r, const int *map, int nloops);
static LfExpr *op2(Lower *L, Op op, DType dt, LfExpr *a, LfExpr *b);
static LfExpr *fconst(Lower *L, double v, DType dt);
static LfExpr *index_at(Lower *L, IrRef r, const int *map, int nloops);
static LfExpr *epilogue_acc(Lower *L, IrRef g, const int *map, int nloops);

static LfExpr *load(Lower *L, IrRef r, const int *map, int nloops) {
  LfExpr *e = inline_load(L, r, map, nloops);
  if (e) return e;
  e = expr(L, LFE_LOAD, ir_val(L->k, r)->dtype);
  e->acc = access(L, r, map, nloops);
  return e;
}

static LfExpr *iconst(Lower *L, int64_t v);
static LfExpr *index_of(Lower *L, int loop);

/* Whether ARANGE v is integral with integral start and step (|x| <= 2^52):
 * its element i is then start + i * step computed in i64, PyTorch's
 * integer arange, equal to the f64 start + f64(i) * step cast to the
 * dtype wherever that is exact, and without a float-to-integer
 * conversion per element (the causal mask's `col <= row` of
 * scaled_dot_product_attention is two such aranges). */
static bool int_arange(const IrValue *v) {
  const double lim = 4503599627370496.0; /* 2^52 */
  return dtype_is_int(v->dtype) && fabs(v->fattr[0]) <= lim && fabs(v->fattr[1]) <= lim &&
         v->fattr[0] == trunc(v->fattr[0]) && v->fattr[1] == trunc(v->fattr[1]);
}

/* The value computed by a source or elementwise/copy op at loop
 * variables map[d] for its dims d (< 0: index 0) of a nest with nloops
 * loops.  RESHAPE only with its own dims (never inlined). */
static LfExpr *value_at(Lower *L, IrRef r, const int *map, int nloops) {
  const IrValue *v = ir_val(L->k, r);
  const int *id = map;
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
    if (int_arange(v)) { /* start + i * step in i64 (see int_arange) */
      e = map[0] >= LF_DYN ? L->dslot[map[0] - LF_DYN] : map[0] < 0 ? iconst(L, 0) : index_of(L, map[0]);
      if (v->fattr[1] != 1) e = op2(L, OP_MUL, DT_I64, e, iconst(L, (int64_t)v->fattr[1]));
      if (v->fattr[0] != 0) e = op2(L, OP_ADD, DT_I64, e, iconst(L, (int64_t)v->fattr[0]));
      return cast(L, e, v->dtype);
    }
    if (map[0] >= LF_DYN) { /* at a dynamic index i: start + f64(i) * step, as LFE_ARANGE */
      e = op2(L, OP_MUL, DT_F64, cast(L, L->dslot[map[0] - LF_DYN], DT_F64), fconst(L, v->fattr[1], DT_F64));
      return cast(L, op2(L, OP_ADD, DT_F64, fconst(L, v->fattr[0], DT_F64), e), v->dtype);
    }
    e = expr(L, LFE_ARANGE, DT_F64);
    e->start = v->fattr[0];
    e->step = v->fattr[1];
    e->loop = map[0];
    if (e->loop < 0) { /* a size-1 arange read at index 0 */
      e->kind = LFE_CONST;
      e->value.f = e->start;
    }
    return cast(L, e, v->dtype);
  case OP_INDEX:
  case OP_GATHER: return index_at(L, r, map, nloops);
  case OP_COPY: return load(L, v->args[0], id, nloops);
  case OP_CAST: return cast(L, load(L, v->args[0], id, nloops), v->dtype);
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
  memcpy(e->fattr, v->fattr, sizeof e->fattr);
  e->nargs = v->nargs;
  for (int j = 0; j < v->nargs; j++) e->args[j] = load(L, v->args[j], id, nloops);
  return e;
}

static LfExpr *value_expr(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  return value_at(L, r, identity(L, v->rank), v->rank);
}

/* A load of r whose storage root is inlined: the root's expression at
 * the composed index (pass fuse checked that the composition exists). */
static LfExpr *inline_load(Lower *L, IrRef r, const int *map, int nloops) {
  IrRef root = ir_storage_root(L->k, r);
  if (!L->inl || !L->inl[root]) return NULL;
  const IrValue *p = ir_val(L->k, root);
  if (op_kind(p->op) == IRK_MATMUL || op_kind(p->op) == IRK_CONV)
    return epilogue_acc(L, r, map, nloops);
  int *pm = zalloc(L, sizeof *pm * (size_t)(p->rank + 1));
  if (!ir_view_map(L->m, L->k, r, map, pm))
    ICE("inlined value %%%d read through a view it cannot follow", root);
  LfExpr *e = value_at(L, root, pm, nloops);
  if (p->dtype == DT_F16 || p->dtype == DT_BF16) /* rounded as its store would */
    e = cast(L, cast(L, e, DT_F32), p->dtype);
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
  bool red[TDSL_MAX_RANK];
  int map[TDSL_MAX_RANK], nred = 0, nkept = 0;
  if (a->rank > TDSL_MAX_RANK) ICE("rank %d too large", a->rank);
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

/* ---- scans (loops.h "Scans") ---- */

static LfExpr *op2(Lower *L, Op op, DType dt, LfExpr *a, LfExpr *b);
static LfExpr *fconst(Lower *L, double v, DType dt);
static LfExpr *iconst(Lower *L, int64_t v);

/* The accumulator of a scan: PyTorch's CPU at::acc_type (f64 for f32 and
 * f64, f32 for f16/bf16, i64 for i64). */
static DType scan_acc_dtype(DType dt) {
  return dt == DT_F32 || dt == DT_F64 ? DT_F64 : dtype_is_float(dt) ? DT_F32 : DT_I64;
}

static void lower_scan(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  int64_t sd;
  if (!sym_is_const(v->attrs[0], &sd) || sd < 0 || sd >= v->rank) ICE("scan dim");
  int map[TDSL_MAX_RANK];
  LfNest *n = add_nest(L);
  n->rank = v->rank - 1;
  n->shape = zalloc(L, sizeof *n->shape * (size_t)v->rank);
  for (int d = 0; d < v->rank; d++) {
    map[d] = d < sd ? d : d == sd ? v->rank - 1 : d - 1;
    if (d != sd) n->shape[map[d]] = v->shape[d];
  }
  n->nred = 1;
  n->red = zalloc(L, sizeof *n->red);
  n->red[0] = v->shape[sd];
  n->reduce = v->op;
  DType ad = scan_acc_dtype(v->dtype);
  LfExpr *x = cast(L, load(L, v->args[0], map, v->rank), ad), *acc = expr(L, LFE_ACC, ad);
  n->value = v->op == OP_CUMSUM    ? op2(L, OP_ADD, ad, acc, x)
             : v->op == OP_CUMPROD ? op2(L, OP_MUL, ad, acc, x)
                                   : op2(L, OP_LOGADDEXP, ad, x, acc);
  double init = v->op == OP_CUMSUM ? 0 : v->op == OP_CUMPROD ? 1 : -INFINITY;
  n->scan_init = ad == DT_I64 ? iconst(L, (int64_t)init) : fconst(L, init, ad);
  n->store = access(L, r, map, v->rank);
  n->dtype = v->dtype;
  n->src = r;
}

/* ---- normalizations and pools (loops.h) ---- */

static LfExpr *op2(Lower *L, Op op, DType dt, LfExpr *a, LfExpr *b) {
  LfExpr *e = expr(L, LFE_OP, dt);
  e->op = op;
  e->nargs = b ? 2 : 1;
  e->args[0] = a;
  e->args[1] = b;
  return e;
}

static LfExpr *fconst(Lower *L, double v, DType dt) {
  LfExpr *e = expr(L, LFE_CONST, DT_F64);
  e->value.f = v;
  return cast(L, e, dt);
}

static LfExpr *iconst(Lower *L, int64_t v) {
  LfExpr *e = expr(L, LFE_CONST, DT_I64);
  e->value.i = v;
  return e;
}

static LfExpr *isym(Lower *L, const Sym *s) {
  LfExpr *e = expr(L, LFE_SYM, DT_I64);
  e->sym = s;
  return e;
}

static LfExpr *index_of(Lower *L, int loop) {
  LfExpr *e = expr(L, LFE_INDEX, DT_I64);
  e->loop = loop;
  return e;
}

/* Loop variables of a nest over a value's dims with the dims red[d]
 * moved innermost: map[d] for dim d.  Returns the number kept. */
static int red_map(int rank, const bool *red, int *map) {
  int nk = 0, nr = 0;
  for (int d = 0; d < rank; d++) nk += !red[d];
  for (int d = 0; d < rank; d++) map[d] = red[d] ? nk + nr++ : (d - nr);
  return nk;
}

/* Element strides (per dim of value r, 0 on reduced dims) of a
 * statistics buffer: row-major over the kept dims. */
static const Sym *stats_strides(Lower *L, const IrValue *v, const bool *red,
                                const Sym **st) {
  const Sym *acc = sym_const(L->st, 1);
  for (int d = v->rank - 1; d >= 0; d--) {
    st[d] = red[d] ? sym_const(L->st, 0) : acc;
    if (!red[d]) acc = sym_mul(L->st, acc, sym_max(L->st, v->shape[d], sym_const(L->st, 1)));
  }
  return acc;
}

/* A load of statistics buffer buf (strides st per dim of the normalized
 * value) where dim d is loop variable map[d] of a nest with nl loops. */
static LfExpr *stats_load(Lower *L, int buf, const Sym **st, int rank,
                          const int *map, int nl) {
  LfExpr *e = expr(L, LFE_LOAD, L->lk->bufs[buf].dtype);
  e->acc.buf = buf;
  e->acc.offset = sym_const(L->st, 0);
  e->acc.stride = zalloc(L, sizeof *e->acc.stride * (size_t)(nl + 1));
  for (int l = 0; l < nl; l++) e->acc.stride[l] = sym_const(L->st, 0);
  for (int d = 0; d < rank; d++)
    e->acc.stride[map[d]] = sym_add(L->st, e->acc.stride[map[d]], st[d]);
  return e;
}

/* A reduction nest over the dims red[d] of normalized value r (loop
 * variables by red_map's map) storing `reduce` of `value` into a new
 * statistics buffer of dtype ad.  Returns the buffer; st: its strides. */
static int stats_nest(Lower *L, IrRef r, const bool *red, const int *map,
                      Op reduce, LfExpr *value, DType ad, const Sym **st) {
  const IrValue *v = ir_val(L->k, r);
  LfBuf b = {.kind = LFB_SCRATCH, .index = r, .dtype = ad, .stats = true};
  b.size = stats_strides(L, v, red, st);
  int buf = add_buf(L, b);
  LfNest *n = add_nest(L);
  n->shape = zalloc(L, sizeof *n->shape * (size_t)(v->rank + 1));
  n->red = zalloc(L, sizeof *n->red * (size_t)(v->rank + 1));
  for (int d = 0; d < v->rank; d++) {
    if (red[d]) n->red[n->nred++] = v->shape[d];
    else n->shape[n->rank++] = v->shape[d];
  }
  n->reduce = reduce;
  n->value = value;
  n->dtype = ad;
  n->src = r;
  n->store = stats_load(L, buf, st, v->rank, map, v->rank)->acc;
  return buf;
}

/* The plain nest storing value r (its own dims as loop variables). */
static void final_nest(Lower *L, IrRef r, LfExpr *value) {
  const IrValue *v = ir_val(L->k, r);
  LfNest *n = add_nest(L);
  n->rank = v->rank;
  n->shape = v->shape;
  n->value = cast(L, value, v->dtype);
  n->store = dense_store(L, r);
  n->dtype = v->dtype;
  n->src = r;
}

/* -O1+: the nests from `first` on (one normalization: statistics nests,
 * then the final one) form a row group over their first `shared` outer
 * loops, the dims before the normalized one(s) (loops.h), if any. */
static void row_group(Lower *L, int first, int shared) {
  if (!L->inl || shared < 1) return;
  L->lk->nests[first].group = L->lk->nnests - first;
  L->lk->nests[first].shared = shared;
}

/* The statistics dtype: half types compute in f32. */
static DType stat_dtype(DType dt) { return dt == DT_F64 ? DT_F64 : DT_F32; }

/* max of a row with -inf read as 0 (all -inf: exp(-inf - 0) = 0). */
static LfExpr *finite_max(Lower *L, LfExpr *m) {
  DType ad = m->dtype;
  LfExpr *inf = op2(L, OP_EQ, DT_BOOL, m, fconst(L, -INFINITY, ad));
  LfExpr *e = op2(L, OP_WHERE, ad, inf, fconst(L, 0, ad));
  e->nargs = 3;
  e->args[2] = m;
  return e;
}

static void lower_softmax(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  IrRef x = v->args[0];
  int R = v->rank, map[TDSL_MAX_RANK];
  bool red[TDSL_MAX_RANK] = {false};
  const Sym *smax[TDSL_MAX_RANK], *ssum[TDSL_MAX_RANK];
  int64_t dim;
  if (R > TDSL_MAX_RANK) ICE("rank %d too large", R);
  if (!sym_is_const(v->attrs[0], &dim)) ICE("softmax dim is not constant");
  if (R > 0) red[dim < 0 ? dim + R : dim] = true; /* 0-dim: a row of one */
  red_map(R, red, map);
  DType ad = stat_dtype(v->dtype);
  int first = L->lk->nnests;
  int bmax = stats_nest(L, r, red, map, OP_AMAX, cast(L, load(L, x, map, R), ad), ad, smax);
  const int *id = identity(L, R);
  int nd = R > 0 ? (int)(dim < 0 ? dim + R : dim) : 0;
  if (L->inl && v->op == OP_SOFTMAX && v->dtype == ad && nd > 0) {
    /* -O1+, f32/f64, rows to group: exp(x - max) once, stored in the
     * result, then summed and scaled in place while the row is in cache
     * (row_group); without a group the extra passes would go to memory */
    LfExpr *t = op2(L, OP_SUB, ad, cast(L, load(L, x, id, R), ad),
                    finite_max(L, stats_load(L, bmax, smax, R, id, R)));
    final_nest(L, r, op2(L, OP_EXP, ad, t, NULL));
    int bsum = stats_nest(L, r, red, map, OP_SUM, load(L, r, map, R), ad, ssum);
    /* scaled by the sum's reciprocal, as PyTorch's CPU kernel does
     * (_vec_softmax_lastdim: tmp_sum = 1 / tmp_sum, then a multiply): a
     * multiply per element instead of a division */
    LfExpr *rs = op2(L, OP_DIV, ad, fconst(L, 1, ad), stats_load(L, bsum, ssum, R, id, R));
    final_nest(L, r, op2(L, OP_MUL, ad, load(L, r, id, R), rs));
    row_group(L, first, R > 0 ? (int)(dim < 0 ? dim + R : dim) : 0);
    return;
  }
  LfExpr *d = op2(L, OP_SUB, ad, cast(L, load(L, x, map, R), ad),
                  finite_max(L, stats_load(L, bmax, smax, R, map, R)));
  int bsum = stats_nest(L, r, red, map, OP_SUM, op2(L, OP_EXP, ad, d, NULL), ad, ssum);
  LfExpr *t = op2(L, OP_SUB, ad, cast(L, load(L, x, id, R), ad),
                  finite_max(L, stats_load(L, bmax, smax, R, id, R)));
  LfExpr *s = stats_load(L, bsum, ssum, R, id, R);
  if (v->op == OP_LOG_SOFTMAX)
    final_nest(L, r, op2(L, OP_SUB, ad, t, op2(L, OP_LOG, ad, s, NULL)));
  else
    final_nest(L, r, op2(L, OP_DIV, ad, op2(L, OP_EXP, ad, t, NULL), s));
  row_group(L, first, R > 0 ? (int)(dim < 0 ? dim + R : dim) : 0);
}

/* x - mean at loop variables map (dim d of x at map[d]). */
static LfExpr *centered(Lower *L, IrRef x, int buf, const Sym **st, int R,
                        const int *map, DType ad) {
  return op2(L, OP_SUB, ad, cast(L, load(L, x, map, R), ad),
             stats_load(L, buf, st, R, map, R));
}

static void lower_layer_norm(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  IrRef x = v->args[0];
  int R = v->rank, map[TDSL_MAX_RANK], wmap[TDSL_MAX_RANK], next = 1;
  bool red[TDSL_MAX_RANK];
  const Sym *smean[TDSL_MAX_RANK], *svar[TDSL_MAX_RANK];
  int64_t nn;
  if (R > TDSL_MAX_RANK) ICE("rank %d too large", R);
  if (!sym_is_const(v->attrs[0], &nn) || nn < 1 || nn > R) ICE("layer_norm: normalized rank");
  for (int d = 0; d < R; d++) red[d] = d >= R - nn;
  red_map(R, red, map);
  DType ad = stat_dtype(v->dtype);
  int first = L->lk->nnests;
  /* the mean accumulates in f64 (stored in ad): a row of equal values
   * then has exactly that mean, x - mean is exactly 0 and the row
   * normalizes to the bias, as PyTorch's (Welford) does; an f32 sum of
   * n copies of v is not n * v, and (x - mean) / sqrt(eps) magnifies
   * its last-bit error about 300-fold */
  int bmean = stats_nest(L, r, red, map, OP_MEAN, cast(L, load(L, x, map, R), DT_F64), ad, smean);
  LfExpr *sq = op2(L, OP_MUL, ad, centered(L, x, bmean, smean, R, map, ad),
                   centered(L, x, bmean, smean, R, map, ad));
  int bvar = stats_nest(L, r, red, map, OP_MEAN, sq, ad, svar);
  const int *id = identity(L, R);
  LfExpr *var = stats_load(L, bvar, svar, R, id, R);
  LfExpr *rstd = op2(L, OP_RSQRT, ad, op2(L, OP_ADD, ad, var, fconst(L, v->fattr[0], ad)), NULL);
  LfExpr *y = op2(L, OP_MUL, ad, centered(L, x, bmean, smean, R, id, ad), rstd);
  for (int j = 0; j < nn; j++) wmap[j] = R - (int)nn + j;
  if (v->flags & IRF_WEIGHT)
    y = op2(L, OP_MUL, ad, y, cast(L, load(L, v->args[next++], wmap, R), ad));
  if (v->flags & IRF_BIAS)
    y = op2(L, OP_ADD, ad, y, cast(L, load(L, v->args[next++], wmap, R), ad));
  final_nest(L, r, y);
  row_group(L, first, R - (int)nn);
}

/* Window of output index o (loop variable loop) along input size `in`:
 * bounds [*lo, *hi) clipped to the input, and the divisor's factor. */
static LfExpr *pool_window(Lower *L, const IrValue *v, int i, const Sym *in,
                           LfExpr **lo, LfExpr **hi) {
  LfExpr *o = index_of(L, 2 + i);
  if (v->op == OP_ADAPTIVE_AVG_POOL2D) {
    /* start = floor(o*in/out), end = ceil((o+1)*in/out) */
    LfExpr *out = isym(L, v->shape[2 + i]);
    *lo = op2(L, OP_FLOORDIV, DT_I64, op2(L, OP_MUL, DT_I64, o, isym(L, in)), out);
    LfExpr *e = op2(L, OP_MUL, DT_I64, op2(L, OP_ADD, DT_I64, index_of(L, 2 + i), iconst(L, 1)),
                    isym(L, in));
    e = op2(L, OP_ADD, DT_I64, e, op2(L, OP_SUB, DT_I64, isym(L, v->shape[2 + i]), iconst(L, 1)));
    *hi = op2(L, OP_FLOORDIV, DT_I64, e, isym(L, v->shape[2 + i]));
    return op2(L, OP_SUB, DT_I64, *hi, *lo);
  }
  int64_t k, s, p;
  if (!sym_is_const(v->attrs[i], &k) || !sym_is_const(v->attrs[2 + i], &s) ||
      !sym_is_const(v->attrs[4 + i], &p))
    ICE("pool attributes are not constant");
  /* start = o*s - p; count_include_pad: the window clipped to the padded
   * input (PyTorch's hend = min(start + k, in + p)) */
  LfExpr *start = op2(L, OP_SUB, DT_I64, op2(L, OP_MUL, DT_I64, o, iconst(L, s)), iconst(L, p));
  LfExpr *end = op2(L, OP_ADD, DT_I64, start, iconst(L, k));
  *lo = op2(L, OP_MAXIMUM, DT_I64, start, iconst(L, 0));
  *hi = op2(L, OP_MINIMUM, DT_I64, end, isym(L, in));
  LfExpr *pend = op2(L, OP_MINIMUM, DT_I64, end,
                     op2(L, OP_ADD, DT_I64, isym(L, in), iconst(L, p)));
  return op2(L, OP_SUB, DT_I64, pend, start);
}

/* Loops N, C, OH, OW, then the window's rows and columns (input
 * coordinates). */
static void lower_pool(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r), *a = ir_val(L->k, v->args[0]);
  static const int map[4] = {0, 1, 4, 5};
  if (v->rank != 4 || a->rank != 4) ICE("pool of rank %d", a->rank);
  LfExpr *lo[2], *hi[2], *size[2];
  for (int i = 0; i < 2; i++) size[i] = pool_window(L, v, i, a->shape[2 + i], &lo[i], &hi[i]);
  LfNest *n = add_nest(L);
  n->rank = 4;
  n->shape = v->shape;
  n->nred = 2;
  n->red = zalloc(L, sizeof *n->red * 2);
  n->red_lo = zalloc(L, sizeof *n->red_lo * 2);
  n->red_hi = zalloc(L, sizeof *n->red_hi * 2);
  for (int i = 0; i < 2; i++) {
    n->red[i] = v->op == OP_ADAPTIVE_AVG_POOL2D ? a->shape[2 + i] : v->attrs[i];
    n->red_lo[i] = lo[i];
    n->red_hi[i] = hi[i];
  }
  n->reduce = v->op == OP_MAX_POOL2D ? OP_AMAX : OP_SUM;
  n->value = load(L, v->args[0], map, 6);
  if (v->op != OP_MAX_POOL2D) {
    DType ad = v->dtype == DT_F64 ? DT_F64 : dtype_is_float(v->dtype) ? DT_F32 : DT_I64;
    /* the divisor is >= 1 whenever the window is not empty (padding <=
     * half the kernel); an empty one (a 0-size input) sums to 0 */
    LfExpr *div = op2(L, OP_MAXIMUM, DT_I64, op2(L, OP_MUL, DT_I64, size[0], size[1]),
                      iconst(L, 1));
    n->post = op2(L, OP_DIV, ad, expr(L, LFE_ACC, ad), cast(L, div, ad));
  }
  n->store = dense_store(L, r);
  n->dtype = v->dtype;
  n->src = r;
}

static void lower_norm_pool(Lower *L, IrRef r) {
  switch (ir_val(L->k, r)->op) {
  case OP_SOFTMAX:
  case OP_LOG_SOFTMAX: lower_softmax(L, r); return;
  case OP_LAYER_NORM: lower_layer_norm(L, r); return;
  default: lower_pool(L, r); return;
  }
}

/* Operand j (0 or 1) of gemm nest n, value a: when its storage root is
 * inlined (a prologue, loops.h), its expression over a's dims and no
 * buffer.  Returns whether it is one. */
static bool gemm_prologue(Lower *L, LfNest *n, IrRef a, int j) {
  IrRef root = ir_storage_root(L->k, a);
  OpKind kd = op_kind(ir_val(L->k, root)->op);
  if (!L->inl || !L->inl[root] || kd == IRK_MATMUL || kd == IRK_CONV) return false;
  int rank = ir_val(L->k, a)->rank;
  n->pro[j] = load(L, a, identity(L, rank), rank);
  n->opnd[j] = (LfAccess){.buf = -1, .offset = sym_const(L->st, 0)};
  n->opnd[j].stride = zalloc(L, sizeof *n->opnd[j].stride * (size_t)(rank ? rank : 1));
  for (int d = 0; d < rank; d++) n->opnd[j].stride[d] = sym_const(L->st, 0);
  return true;
}

/* n computes GEMM value g (MATMUL or CONV2D): its op, its operands, each
 * over its own dims, and (for printing) a load of operand 0 as value. */
static void gemm_operands(Lower *L, LfNest *n, IrRef g) {
  const IrValue *v = ir_val(L->k, g);
  n->reduce = v->op;
  n->gemm = g;
  n->nopnd = v->nargs;
  if (v->nargs > 3) ICE("%s with %d operands", op_name(v->op), v->nargs);
  for (int j = 0; j < v->nargs; j++) {
    int rank = ir_val(L->k, v->args[j])->rank;
    if (j < 2 && gemm_prologue(L, n, v->args[j], j)) continue;
    n->opnd[j] = access(L, v->args[j], identity(L, rank), rank);
  }
  int r0 = ir_val(L->k, v->args[0])->rank;
  n->value = n->pro[0] ? n->pro[0] : load(L, v->args[0], identity(L, r0), r0);
}

/* MATMUL / CONV2D: one nest that carries its operands' accesses (loops.h);
 * the code generator emits a packed GEMM for it (gemm.c). */
static void lower_gemm(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  LfNest *n = add_nest(L);
  n->rank = v->rank;
  n->shape = v->shape;
  gemm_operands(L, n, r);
  n->store = dense_store(L, r);
  n->dtype = v->dtype;
  n->src = r;
  n->cstore = n->store;
  n->cdtype = v->dtype;
}

/* ---- epilogues (loops.h "Epilogues") ---- */

/* A read of inlined GEMM value g (pass fuse: once, directly, at the
 * output index of the nest being built): LFE_ACC. */
static LfExpr *epilogue_acc(Lower *L, IrRef g, const int *map, int nloops) {
  const IrValue *v = ir_val(L->k, g);
  if (L->epi >= 0 || nloops != v->rank)
    ICE("GEMM value %%%d read as an epilogue where it cannot be", g);
  for (int d = 0; d < v->rank; d++)
    if (map[d] != d) ICE("GEMM value %%%d read off its output index", g);
  L->epi = g;
  return expr(L, LFE_ACC, v->dtype);
}

/* Whether the GEMM can accumulate into n's store itself (in place). */
static bool epilogue_in_place(Lower *L, const LfNest *n, const IrValue *g) {
  if (n->dtype != g->dtype || n->store.lin_rank ||
      (g->dtype != DT_F32 && g->dtype != DT_F64 && g->dtype != DT_I64))
    return false;
  if (op_kind(g->op) == IRK_MATMUL) return true;
  if (n->store.rt_strides) return false;
  /* conv (gemm.h): each channel's pixels dense, stride h == OW * stride w */
  int R = g->rank;
  const Sym *sh = n->store.stride[R - 2], *sw = n->store.stride[R - 1], *ow = g->shape[R - 1];
  return sym_is(g->shape[R - 2], 1) || sh == sym_mul(L->st, ow, sw) ||
         sh == sym_mul(L->st, sym_max(L->st, ow, sym_const(L->st, 1)), sw);
}

/* Turns n, the nest that reads inlined GEMM value L->epi, into that
 * GEMM's nest with n's expression as its epilogue. */
static void epilogue_nest(Lower *L, LfNest *n) {
  IrRef g = L->epi;
  const IrValue *v = ir_val(L->k, g);
  L->epi = -1;
  if (n->reduce != OP_COUNT || n->nred) ICE("an epilogue in a reduction nest");
  n->post = n->value;
  gemm_operands(L, n, g);
  n->cdtype = v->dtype;
  n->cstore = epilogue_in_place(L, n, v) ? n->store : dense_store(L, g);
}

/* ---- indexing by tensors (loops.h) ---- */

/* Whether the index operand idx reads a parameter or constant table
 * (its check can run before every nest). */
static bool index_is_input(Lower *L, IrRef idx) {
  Op op = ir_val(L->k, ir_storage_root(L->k, idx))->op;
  return op == OP_PARAM || op == OP_TENSOR;
}

/* The check nest of INDEX/GATHER value r: over the index operand's own
 * dims, the raw index. */
static void check_nest(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r), *ix = ir_val(L->k, v->args[1]);
  int64_t d;
  if (!sym_is_const(v->attrs[0], &d)) ICE("index dim");
  const Sym *bound = ir_val(L->k, v->args[0])->shape[d];
  LfCheck *ck = zalloc(L, sizeof *ck);
  ck->bound = bound;
  ck->wrap = v->flags & IRF_WRAP;
  ck->msg = ir_index_message(L->m->arena, L->k, r);
  LfNest *n = add_nest(L);
  n->rank = ix->rank;
  n->shape = ix->shape;
  n->value = cast(L, load(L, v->args[1], identity(L, ix->rank), ix->rank), DT_I64);
  n->store = (LfAccess){.buf = -1, .offset = sym_const(L->st, 0)};
  n->store.stride = zalloc(L, sizeof *n->store.stride * (size_t)(ix->rank + 1));
  for (int l = 0; l < ix->rank; l++) n->store.stride[l] = sym_const(L->st, 0);
  n->dtype = DT_I64;
  n->src = r;
  n->check = ck;
}

/* A new dynamic index (LF_DYN) for index maps. */
static int dyn_slot(Lower *L, LfExpr *i) {
  if (L->ndslot == L->dslotcap) {
    L->dslotcap = L->dslotcap ? 2 * L->dslotcap : 8;
    LfExpr **n = zalloc(L, sizeof *n * (size_t)L->dslotcap);
    if (L->ndslot) memcpy(n, L->dslot, sizeof *n * (size_t)L->ndslot);
    L->dslot = n;
  }
  L->dslot[L->ndslot] = i;
  return LF_DYN + L->ndslot++;
}

/* INDEX r's value at loop variables map[j] for its dims j (< 0: index
 * 0) of a nest with nloops loops: a load of x whose dynamic term is the
 * index (loops.h).  INDEX: x's dims before d, the index's, x's after;
 * GATHER: the index's dims, x's dim d replaced by the index. */
static LfExpr *index_at(Lower *L, IrRef r, const int *map, int nloops) {
  const IrValue *v = ir_val(L->k, r), *x = ir_val(L->k, v->args[0]), *ix = ir_val(L->k, v->args[1]);
  int64_t d;
  if (!sym_is_const(v->attrs[0], &d) || d < 0 || d >= x->rank) ICE("index dim");
  int xmap[TDSL_MAX_RANK], imap[TDSL_MAX_RANK];
  for (int k = 0; k < x->rank; k++)
    xmap[k] = k == d ? -1 : map[v->op == OP_GATHER || k < d ? k : k - 1 + ix->rank];
  for (int j = 0; j < ix->rank; j++) imap[j] = map[v->op == OP_GATHER ? j : (int)d + j];
  const Sym *size = x->shape[d];
  LfExpr *i = cast(L, load(L, v->args[1], imap, nloops), DT_I64);
  if (v->flags & IRF_WRAP) { /* i < 0 ? i + size : i */
    LfExpr *w = op2(L, OP_WHERE, DT_I64, op2(L, OP_LT, DT_BOOL, i, iconst(L, 0)),
                    op2(L, OP_ADD, DT_I64, i, isym(L, size)));
    w->nargs = 3;
    w->args[2] = i;
    i = w;
  }
  xmap[d] = dyn_slot(L, i);
  return load(L, v->args[0], xmap, nloops); /* x's storage, or x inlined */
}

/* The check nest of INDEX/GATHER r unless its indices are known in
 * range (those of parameters and constants run first: checks_first). */
static void index_check(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  if (v->flags & IRF_INBOUNDS) return;
  check_nest(L, r);
  if (index_is_input(L, v->args[1])) L->front++;
}

/* One nest storing INDEX/GATHER r, after its check. */
static void lower_index(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  index_check(L, r);
  LfNest *n = add_nest(L);
  n->rank = v->rank;
  n->shape = v->shape;
  n->value = index_at(L, r, identity(L, v->rank), v->rank);
  n->store = dense_store(L, r);
  n->dtype = v->dtype;
  n->src = r;
}

/* Moves the check nests of input indices (L->front of them, in order)
 * before every other nest. */
static void checks_first(Lower *L) {
  LfKernel *lk = L->lk;
  for (int i = 0, to = 0; i < lk->nnests && to < L->front; i++) {
    LfNest *n = &lk->nests[i];
    if (!n->check || !index_is_input(L, ir_val(L->k, n->src)->args[1])) continue;
    LfNest c = *n;
    memmove(&lk->nests[to + 1], &lk->nests[to], sizeof c * (size_t)(i - to));
    lk->nests[to++] = c;
  }
}

/* -O1+: the nest just added for rank-4 value r stored channels-last
 * (pass choose-layout or PyTorch's rules) loops N H W C, so its store
 * runs along memory. */
static void cl_loop_order(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  LfNest *n = &L->lk->nests[L->lk->nnests - 1];
  if (!L->inl || n->src != r || n->rank != 4 || !v->stride) return;
  if (!sym_is(v->stride[1], 1) || sym_is(v->shape[1], 1) || sym_is(v->stride[3], 1)) return;
  int *order = (int *)identity(L, 4);
  order[1] = 2, order[2] = 3, order[3] = 1;
  n->order = order;
}

/* CAT: one nest per operand over the operand's own dims, storing into
 * its slice of the value (the value's store moved along the dim by the
 * sizes before it).  An operand computed inline (pass fuse) is evaluated
 * in its nest; a value plan-memory placed in an output is written there
 * slice by slice. */
static void lower_cat(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  int64_t dim;
  if (!sym_is_const(v->attrs[0], &dim) || dim < 0 || dim >= v->rank) ICE("cat dim");
  const Sym **st = strides(L, v);
  const Sym *at = sym_const(L->st, 0);
  for (int j = 0; j < v->nargs; j++) {
    const IrValue *a = ir_val(L->k, v->args[j]);
    LfNest *n = add_nest(L);
    n->rank = a->rank;
    n->shape = a->shape;
    n->value = cast(L, load(L, v->args[j], identity(L, a->rank), a->rank), v->dtype);
    n->store = dense_store(L, r);
    n->store.offset = sym_add(L->st, n->store.offset, sym_mul(L->st, at, st[dim]));
    n->dtype = v->dtype;
    n->src = r;
    at = sym_add(L->st, at, a->shape[dim]);
    if (L->epi >= 0) ICE("a GEMM epilogue in a cat nest");
  }
}

static void lower_value(Lower *L, IrRef r) {
  const IrValue *v = ir_val(L->k, r);
  OpKind kind = op_kind(v->op);
  if (kind == IRK_VIEW || v->op == OP_PARAM || v->op == OP_TENSOR) return;
  if (L->inl && L->inl[r]) { /* computed inside its users */
    if (kind == IRK_INDEX) index_check(L, r); /* its check still runs here */
    return;
  }
  if (kind == IRK_REDUCE) {
    lower_reduce(L, r);
    return;
  }
  if (kind == IRK_SCAN) {
    lower_scan(L, r);
    return;
  }
  if (kind == IRK_NORM || kind == IRK_POOL) {
    lower_norm_pool(L, r);
    if (kind == IRK_POOL) cl_loop_order(L, r);
    return;
  }
  if (kind == IRK_MATMUL || kind == IRK_CONV) {
    lower_gemm(L, r);
    return;
  }
  if (kind == IRK_INDEX) {
    lower_index(L, r);
    return;
  }
  if (kind == IRK_JOIN) {
    lower_cat(L, r);
    return;
  }
  LfNest *n = add_nest(L);
  n->rank = v->rank;
  n->shape = v->shape;
  n->value = value_expr(L, r);
  n->store = dense_store(L, r);
  n->dtype = v->dtype;
  n->src = r;
  cl_loop_order(L, r);
  if (L->epi >= 0) epilogue_nest(L, n);
}

/* Every value's nests: in value order at -O0; at -O1+ in ir_exec_order,
 * each row group of pass row-group (ir.h "Row groups") as consecutive
 * nests, one per member, that form an LfNest row group over its rows. */
static void lower_values(Lower *L) {
  const IrKernel *k = L->k;
  IrRef *order = zalloc(L, sizeof *order * (size_t)(k->nvalues + 1));
  if (L->inl) ir_exec_order(k, order, NULL);
  else for (IrRef r = 0; r < k->nvalues; r++) order[r] = r;
  for (int i = 0; i < k->nvalues; i++) {
    const IrValue *v = ir_val(k, order[i]);
    int g = L->inl ? v->group : 0, first = L->lk->nnests, members = 0;
    for (; i < k->nvalues && (members == 0 || (g > 0 && ir_val(k, order[i])->group == g)); i++) {
      lower_value(L, order[i]);
      members++;
    }
    i--;
    if (g <= 0) continue;
    if (L->lk->nnests - first != members)
      ICE("row group %d: %d nests for %d members", g, L->lk->nnests - first, members);
    row_group(L, first, v->rows);
  }
}

/* Outputs of a checked dense layout: strides known from the shape (the
 * entry checks enforced them; size-1 dims are only read at index 0), so
 * the store is unit-stride to the vectorizer.  Loops run in the layout's
 * memory order (channels_last: N H W C). */
static void static_output_strides(Lower *L, LfNest *n, const IrResult *res) {
  bool cl = res->layout == LAYOUT_CHANNELS_LAST && n->rank == 4;
  if (res->layout == LAYOUT_STRIDED || (res->layout != LAYOUT_CONTIGUOUS && !cl)) return;
  int *order = (int *)identity(L, n->rank);
  if (cl) order[1] = 2, order[2] = 3, order[3] = 1;
  const Sym **st = zalloc(L, sizeof *st * (size_t)(n->rank + 1));
  const Sym *acc = sym_const(L->st, 1);
  for (int j = n->rank - 1; j >= 0; j--) {
    st[order[j]] = acc;
    acc = sym_mul(L->st, acc, sym_max(L->st, n->shape[order[j]], sym_const(L->st, 1)));
  }
  n->store.stride = st;
  n->store.rt_strides = false;
  if (cl) n->order = order;
}

/* Copies result i's value into the caller's output (unless plan-memory
 * had the value computed there in the first place). */
static void lower_result(Lower *L, int i) {
  const IrResult *res = &L->k->results[i];
  const IrValue *v = ir_val(L->k, res->value);
  if (L->inl && ir_val(L->k, ir_storage_root(L->k, res->value))->out == i + 1) return;
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
  if (L->inl) static_output_strides(L, n, res);
  if (L->epi >= 0) epilogue_nest(L, n);
}

/* Result copies carrying a GEMM epilogue run before the other result
 * copies (from nest `first` on): the GEMM allocates its packing memory,
 * which may fail, and a failed kernel leaves every output untouched
 * (spec §7.2).  Copies only read values and write their own outputs, so
 * their order is free. */
static void gemm_copies_first(LfKernel *lk, int first) {
  for (int i = first, to = first; i < lk->nnests; i++) {
    if (lk->nests[i].reduce != OP_MATMUL && lk->nests[i].reduce != OP_CONV2D) continue;
    LfNest g = lk->nests[i];
    memmove(&lk->nests[to + 1], &lk->nests[to], sizeof g * (size_t)(i - to));
    lk->nests[to++] = g;
  }
}

LfKernel *lf_lower(IrModule *m, const IrKernel *k, int opt_level) {
  Lower L = {.m = m, .k = k, .st = m->st, .epi = -1};
  L.lk = zalloc(&L, sizeof *L.lk);
  L.lk->k = k;
  L.buf_of = zalloc(&L, sizeof *L.buf_of * (size_t)(k->nvalues + 1));
  for (int r = 0; r < k->nvalues; r++) L.buf_of[r] = -1;
  if (opt_level > 0) L.inl = planned_inline(&L);
  lower_values(&L);
  int first = L.lk->nnests;
  for (int i = 0; i < k->nresults; i++) lower_result(&L, i);
  gemm_copies_first(L.lk, first);
  checks_first(&L);
  return L.lk;
}
