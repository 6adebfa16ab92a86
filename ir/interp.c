/* interp.c — the reference interpreter (interp.h): evaluates a kernel one
 * value at a time on host buffers, with PyTorch eager's values.
 *
 * Needs: sym_eval (sym.h) for every geometry, scalar_load/store/cast and
 * the half conversions (dtype.h), interp_scalar.c (what each elementwise
 * op computes on one element).  Produces: the kernel's results as fresh
 * row-major HostTensors, or -1 and a message.
 *
 * Storage model.  Every runtime value is a HostTensor whose geometry is the
 * IR value's semantic geometry evaluated for the bound symbols:
 *  - a view shares the data pointer of its operand (hence of its storage
 *    root) and uses its own shape/stride/offset, absolute in that storage;
 *    every view is bounds-checked against the root's valid element range,
 *    so a wrong geometry gives an error, never a wild read;
 *  - every other value gets a fresh zeroed buffer laid out by its own
 *    semantic strides and offset;
 *  - a PARAM's storage must be laid out exactly per the PARAM value's
 *    semantic geometry (its declared layout; stride symbols for `strided`),
 *    because the geometry of views rooted at it assumes that layout.  An
 *    argument whose strides (on dims of size > 1) and offset already match
 *    is used in place; any other is first copied into a fresh buffer with
 *    the semantic layout.  So the interpreter accepts any argument strides,
 *    whatever the declared layout (it does not check layouts).
 *
 * Arithmetic.  Each op gathers its operands into row-major Scalar arrays
 * (.f for float dtypes, .i for integers and bool), computes there in double
 * or in 64-bit two's complement, and scatters the result: integers wrap to
 * the result dtype, half results are rounded through f32 once when stored.
 * The elementwise ops' math, and where it deliberately differs from
 * PyTorch (integer division by zero, negative integer exponents), is in
 * interp_scalar.c. */
#include "interp.h"
#include "interp_scalar.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* A value at run time: its tensor and the valid element range [lo, hi)
 * of its storage, relative to t.data. */
typedef struct RtVal {
  HostTensor t;
  int64_t numel;
  int64_t lo, hi;
} RtVal;

typedef struct Ctx {
  const IrModule *m;
  const IrKernel *k;
  const InterpArg *args;
  int64_t *env;  /* symbol values, indexed by symbol id */
  RtVal *vals;   /* one per IR value */
  char *err;
  size_t errlen;
} Ctx;

__attribute__((format(printf, 2, 3))) static int fail(Ctx *c, const char *fmt,
                                                      ...) {
  if (!c->err || c->errlen == 0) return -1;
  int n = snprintf(c->err, c->errlen, "kernel '%s': ", c->k->name);
  if (n < 0 || (size_t)n >= c->errlen) return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

/* ---- checked int64 arithmetic (sizes, addresses) ---- */

/* Number of elements; false on overflow or a negative size. */
static bool shape_numel(int rank, const int64_t *shape, int64_t *n) {
  int64_t p = 1;
  for (int d = 0; d < rank; d++)
    if (shape[d] < 0 || !ir_mul_ok(p, shape[d], &p)) return false;
  *n = p;
  return true;
}

/* Smallest and largest element address of a non-empty tensor. */
static bool addr_range(const HostTensor *t, int64_t *min, int64_t *max) {
  int64_t lo = t->offset, hi = t->offset, ext;
  for (int d = 0; d < t->rank; d++) {
    if (!ir_mul_ok(t->shape[d] - 1, t->stride[d], &ext)) return false;
    if (!ir_add_ok(ext < 0 ? lo : hi, ext, ext < 0 ? &lo : &hi)) return false;
  }
  *min = lo;
  *max = hi;
  return true;
}

/* ---- host tensors ---- */

int64_t host_tensor_numel(const HostTensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) n *= t->shape[d];
  return n;
}

int host_tensor_alloc(HostTensor *t, DType dt, int rank, const int64_t *shape) {
  memset(t, 0, sizeof *t);
  int64_t n, es = dtype_size(dt);
  if (rank < 0 || rank > TDSL_MAX_RANK || !shape_numel(rank, shape, &n))
    return -1;
  if (n > INT64_MAX / es || (uint64_t)(n * es) > (uint64_t)SIZE_MAX / 2)
    return -1;
  t->dtype = dt;
  t->rank = rank;
  int64_t st = 1;
  for (int d = rank - 1; d >= 0; d--) {
    t->shape[d] = shape[d];
    t->stride[d] = st;
    st *= shape[d] > 1 ? shape[d] : 1;
  }
  t->owned = t->data = calloc((size_t)(n > 0 ? n : 1), (size_t)es);
  return t->data ? 0 : -1;
}

void host_tensor_free(HostTensor *t) {
  free(t->owned);
  memset(t, 0, sizeof *t);
}

/* ---- element access ---- */

/* Stores a computed result: integers wrap, half types round via f32 so
 * the result is rounded exactly as math done in f32 would be. */
static void store_el(DType dt, void *p, Scalar v) {
  if (dtype_is_float(dt)) {
    if (dt == DT_F16 || dt == DT_BF16) v.f = (double)(float)v.f;
  } else {
    v.i = interp_int_wrap(dt, (uint64_t)v.i);
  }
  scalar_store(dt, p, v);
}

/* Advances idx (row-major) and the element address addr by one step. */
static void step_index(int rank, const int64_t *shape, const int64_t *st,
                       int64_t *idx, int64_t *addr) {
  for (int d = rank - 1; d >= 0; d--) {
    if (++idx[d] < shape[d]) {
      *addr += st[d];
      return;
    }
    idx[d] = 0;
    *addr -= (shape[d] - 1) * st[d];
  }
}

static void *xcalloc(Ctx *c, int64_t n, size_t es) {
  if (n < 0 || (uint64_t)n > (uint64_t)(SIZE_MAX / 2) / es) {
    fail(c, "tensor of %lld elements is too large", (long long)n);
    return NULL;
  }
  void *p = calloc((size_t)(n > 0 ? n : 1), es);
  if (!p) fail(c, "out of memory allocating %lld elements", (long long)n);
  return p;
}

/* The elements of t in row-major logical order (n = numel). */
static Scalar *gather(Ctx *c, const HostTensor *t, int64_t n) {
  Scalar *v = xcalloc(c, n, sizeof *v);
  if (!v) return NULL;
  int64_t idx[TDSL_MAX_RANK] = {0}, addr = t->offset;
  size_t es = (size_t)dtype_size(t->dtype);
  for (int64_t i = 0; i < n; i++) {
    v[i] = scalar_load(t->dtype, (char *)t->data + addr * (int64_t)es);
    step_index(t->rank, t->shape, t->stride, idx, &addr);
  }
  return v;
}

/* Stores v (row-major logical order, n = numel) into t. */
static void scatter(HostTensor *t, const Scalar *v, int64_t n) {
  int64_t idx[TDSL_MAX_RANK] = {0}, addr = t->offset;
  size_t es = (size_t)dtype_size(t->dtype);
  for (int64_t i = 0; i < n; i++) {
    store_el(t->dtype, (char *)t->data + addr * (int64_t)es, v[i]);
    step_index(t->rank, t->shape, t->stride, idx, &addr);
  }
}

/* ---- geometry ---- */

static int eval_sym(Ctx *c, const Sym *s, int64_t *out) {
  if (!s) {
    *out = 0;
    return 0;
  }
  if (sym_max_var(s) > c->k->nsyms) ICE("symbol id out of range");
  if (!sym_eval(s, c->env, out))
    return fail(c, "integer overflow or division by zero in a size");
  return 0;
}

static int64_t attr(Ctx *c, const IrValue *v, int i) {
  int64_t a = 0;
  if (i >= v->nattrs) ICE("%s: missing attribute %d", op_name(v->op), i);
  if (eval_sym(c, v->attrs[i], &a) != 0) ICE("%s: bad attribute", op_name(v->op));
  return a;
}

/* Evaluates the value's semantic geometry into rv (contiguous strides
 * when the value carries none). */
static int eval_geom(Ctx *c, IrRef r, RtVal *rv) {
  const IrValue *v = ir_val(c->k, r);
  HostTensor *t = &rv->t;
  if (v->rank < 0 || v->rank > TDSL_MAX_RANK)
    return fail(c, "value %%%d: rank %d unsupported", r, v->rank);
  t->dtype = v->dtype;
  t->rank = v->rank;
  for (int d = 0; d < v->rank; d++)
    if (eval_sym(c, v->shape[d], &t->shape[d]) != 0) return -1;
  if (!shape_numel(t->rank, t->shape, &rv->numel))
    return fail(c, "value %%%d: invalid or overflowing shape", r);
  int64_t st = 1;
  for (int d = v->rank - 1; d >= 0; d--) {
    if (v->stride) {
      if (eval_sym(c, v->stride[d], &t->stride[d]) != 0) return -1;
    } else {
      t->stride[d] = st;
      st *= t->shape[d] > 1 ? t->shape[d] : 1;
    }
  }
  return eval_sym(c, v->offset, &t->offset);
}

/* Fresh zeroed storage for rv's geometry. */
static int alloc_dense(Ctx *c, IrRef r, RtVal *rv) {
  int64_t lo = 0, hi = 0;
  if (rv->numel > 0 && !addr_range(&rv->t, &lo, &hi))
    return fail(c, "value %%%d: storage size overflows", r);
  if (lo < 0) return fail(c, "value %%%d: negative storage offset", r);
  int64_t ext = rv->numel > 0 ? hi + 1 : 0;
  rv->t.owned = rv->t.data = xcalloc(c, ext, (size_t)dtype_size(rv->t.dtype));
  rv->lo = 0;
  rv->hi = ext;
  return rv->t.data ? 0 : -1;
}

/* ---- parameters and symbols ---- */

static int param_index(const IrKernel *k, IrRef r) {
  for (int i = 0; i < k->nparams; i++)
    if (k->params[i].value == r) return i;
  ICE("PARAM value %%%d belongs to no parameter", r);
}

static int check_arg(Ctx *c, int i) {
  const IrParam *p = &c->k->params[i];
  const HostTensor *t = &c->args[i].t;
  if (!p->is_tensor) return 0;
  if (t->dtype != p->dtype)
    return fail(c, "parameter '%s': expected dtype %s, got %s", p->name,
                dtype_name(p->dtype), dtype_name(t->dtype));
  if (t->rank != p->rank)
    return fail(c, "parameter '%s': expected rank %d, got %d", p->name,
                p->rank, t->rank);
  int64_t n, lo, hi;
  if (!shape_numel(t->rank, t->shape, &n) || (n > 0 && !addr_range(t, &lo, &hi)))
    return fail(c, "parameter '%s': invalid or overflowing geometry", p->name);
  if (n > 0 && !t->data) return fail(c, "parameter '%s': NULL data", p->name);
  return 0;
}

static int bind_syms(Ctx *c) {
  for (int s = 0; s < c->k->nsyms; s++) {
    const IrSymVar *sv = &c->k->syms[s];
    if (sv->param < 0 || sv->param >= c->k->nparams ||
        !c->k->params[sv->param].is_tensor || sv->dim < 0 ||
        sv->dim >= c->k->params[sv->param].rank)
      ICE("symbol '%s' bound to a bad parameter dim", sv->name);
    const HostTensor *t = &c->args[sv->param].t;
    c->env[s] = sv->kind == SYMK_SIZE ? t->shape[sv->dim] : t->stride[sv->dim];
    if (c->env[s] < 0)
      return fail(c, "parameter '%s' dim %d: %s %lld is negative (%s)",
                  c->k->params[sv->param].name, sv->dim,
                  sv->kind == SYMK_SIZE ? "size" : "stride",
                  (long long)c->env[s], sv->name);
  }
  return 0;
}

static int check_dims(Ctx *c, int i) {
  const IrParam *p = &c->k->params[i];
  if (!p->is_tensor) return 0;
  for (int d = 0; d < p->rank; d++) {
    int64_t want, got = c->args[i].t.shape[d];
    int id;
    if (eval_sym(c, p->shape[d], &want) != 0) return -1;
    if (want == got) continue;
    if (sym_is_var(p->shape[d], &id) && id < c->k->nsyms)
      return fail(c, "parameter '%s' dim %d: expected %lld (%s), got %lld",
                  p->name, d, (long long)want, c->k->syms[id].name,
                  (long long)got);
    return fail(c, "parameter '%s' dim %d: expected %lld, got %lld", p->name,
                d, (long long)want, (long long)got);
  }
  return 0;
}

/* The check's message with the values of the symbols it involves. */
static int fail_check(Ctx *c, const IrCheck *ck) {
  char *fmt, what[1024];
  int ids[IR_CHECK_MAX_SYMS];
  long long v[IR_CHECK_MAX_SYMS] = {0};
  int n = ir_check_format(c->m->arena, c->k, ck, &fmt, ids);
  for (int i = 0; i < n; i++) v[i] = (long long)c->env[ids[i]];
  /* fmt has n <= 4 conversions, all %lld; printf ignores extra arguments */
  snprintf(what, sizeof what, fmt, v[0], v[1], v[2], v[3]);
  return fail(c, "%s", what);
}

static int run_checks(Ctx *c) {
  for (int i = 0; i < c->k->nchecks; i++) {
    const IrCheck *ck = &c->k->checks[i];
    int64_t l, r;
    if (eval_sym(c, ck->lhs, &l) != 0 || eval_sym(c, ck->rhs, &r) != 0)
      return -1;
    bool ok = ck->op == CHK_EQ ? l == r : ck->op == CHK_LE ? l <= r : l < r;
    if (!ok) return fail_check(c, ck);
  }
  return 0;
}

/* True when the argument can serve as storage laid out per rv's
 * semantic geometry: same offset, same strides on dims of size > 1. */
static bool same_layout(const HostTensor *arg, const HostTensor *sem) {
  if (arg->offset != sem->offset) return false;
  for (int d = 0; d < sem->rank; d++)
    if (sem->shape[d] > 1 && arg->stride[d] != sem->stride[d]) return false;
  return true;
}

static int eval_param(Ctx *c, IrRef r, RtVal *rv) {
  int i = param_index(c->k, r);
  const IrParam *p = &c->k->params[i];
  if (eval_geom(c, r, rv) != 0) return -1;
  if (!p->is_tensor) {
    if (rv->numel != 1) ICE("scalar parameter '%s' is not 0-dim", p->name);
    if (alloc_dense(c, r, rv) != 0) return -1;
    store_el(rv->t.dtype, (char *)rv->t.data +
             rv->t.offset * dtype_size(rv->t.dtype), c->args[i].s);
    return 0;
  }
  const HostTensor *arg = &c->args[i].t;
  if (rv->numel == 0 || same_layout(arg, &rv->t)) {
    rv->t.data = arg->data;
    rv->lo = rv->hi = 0;
    if (rv->numel > 0) addr_range(arg, &rv->lo, &rv->hi);
    rv->hi += rv->numel > 0;
    return 0;
  }
  if (alloc_dense(c, r, rv) != 0) return -1;
  Scalar *v = gather(c, arg, rv->numel);
  if (!v) return -1;
  scatter(&rv->t, v, rv->numel);
  free(v);
  return 0;
}

/* A value as the user knows it: "y" or "the add at 3:15". */
static const char *value_text(Ctx *c, IrRef r, char *buf, size_t cap) {
  const IrValue *v = ir_val(c->k, r);
  if (v->name) return v->name;
  snprintf(buf, cap, "the %s at %d:%d", op_name(v->op), v->loc.line, v->loc.col);
  return buf;
}

static int eval_view(Ctx *c, IrRef r, RtVal *rv) {
  const IrValue *v = ir_val(c->k, r);
  const RtVal *src = &c->vals[v->args[0]];
  if (eval_geom(c, r, rv) != 0) return -1;
  rv->t.data = src->t.data;
  rv->lo = src->lo;
  rv->hi = src->hi;
  int64_t lo, hi;
  if (rv->numel == 0) return 0;
  if (!addr_range(&rv->t, &lo, &hi))
    return fail(c, "the %s view at %d:%d: invalid or overflowing geometry",
                op_name(v->op), v->loc.line, v->loc.col);
  if (lo < rv->lo || hi >= rv->hi) {
    char root[96];
    return fail(c, "the %s view%s%s at %d:%d addresses elements %lld to %lld of the "
                "storage of %s, which holds elements %lld to %lld", op_name(v->op),
                v->name ? " " : "", v->name ? v->name : "", v->loc.line, v->loc.col,
                (long long)lo, (long long)hi,
                value_text(c, ir_storage_root(c->k, r), root, sizeof root),
                (long long)rv->lo, (long long)rv->hi - 1);
  }
  return 0;
}

/* ---- elementwise ---- */

static int eval_elementwise(Ctx *c, const IrValue *v, RtVal *rv) {
  Scalar *ops[3] = {NULL, NULL, NULL}, x[3];
  int rc = -1;
  Scalar *out = xcalloc(c, rv->numel, sizeof *out);
  if (v->nargs < 1 || v->nargs > 3) ICE("%s: bad arity", op_name(v->op));
  for (int j = 0; j < v->nargs && out; j++) {
    const RtVal *a = &c->vals[v->args[j]];
    if (a->numel != rv->numel) ICE("%s: operand shape mismatch", op_name(v->op));
    if (!(ops[j] = gather(c, &a->t, a->numel))) goto done;
  }
  if (!out) goto done;
  /* the compute dtype: operand 0's, or the branches' for where() */
  DType in = c->vals[v->args[v->op == OP_WHERE ? 1 : 0]].t.dtype;
  for (int64_t i = 0; i < rv->numel; i++) {
    for (int j = 0; j < v->nargs; j++) x[j] = ops[j][i];
    out[i] = interp_elementwise(v, in, x);
  }
  scatter(&rv->t, out, rv->numel);
  rc = 0;
done:
  for (int j = 0; j < 3; j++) free(ops[j]);
  free(out);
  return rc;
}

/* ---- copies and sources ---- */

/* COPY, RESHAPE, CAST: logical (row-major) element order is preserved. */
static int eval_copy(Ctx *c, const IrValue *v, RtVal *rv) {
  const RtVal *a = &c->vals[v->args[0]];
  if (a->numel != rv->numel) ICE("%s: element count mismatch", op_name(v->op));
  Scalar *x = gather(c, &a->t, a->numel);
  if (!x) return -1;
  if (v->op == OP_CAST)
    for (int64_t i = 0; i < rv->numel; i++)
      x[i] = scalar_cast(x[i], a->t.dtype, v->dtype);
  scatter(&rv->t, x, rv->numel);
  free(x);
  return 0;
}

static int eval_source(Ctx *c, const IrValue *v, RtVal *rv) {
  Scalar *x = xcalloc(c, rv->numel, sizeof *x);
  if (!x) return -1;
  bool isf = dtype_is_float(v->dtype);
  int es = dtype_size(v->dtype);
  for (int64_t i = 0; i < rv->numel; i++) {
    switch (v->op) {
    case OP_TENSOR: x[i] = scalar_load(v->dtype, (char *)v->data + i * es); break;
    case OP_ARANGE: {
      Scalar d = {.f = v->fattr[0] + (double)i * v->fattr[1]};
      x[i] = scalar_cast(d, DT_F64, v->dtype);
      break;
    }
    case OP_SYMVAL: {
      int64_t s;
      if (eval_sym(c, v->attrs[0], &s) != 0) {
        free(x);
        return -1;
      }
      x[i] = isf ? (Scalar){.f = (double)s} : (Scalar){.i = s};
      break;
    }
    default: x[i] = v->value; break; /* CONST, FULL */
    }
  }
  scatter(&rv->t, x, rv->numel);
  free(x);
  return 0;
}

/* ---- reductions ---- */

typedef struct Reduce {
  bool red[TDSL_MAX_RANK]; /* dims reduced */
  int64_t nout, nred;      /* output elements, elements per output */
  int dim;                 /* ARGMAX/ARGMIN: the dim, -1 flattened */
} Reduce;

static int reduce_plan(Ctx *c, const IrValue *v, const HostTensor *a,
                       Reduce *p) {
  memset(p, 0, sizeof *p);
  p->dim = -1;
  for (int i = 0; i < v->nattrs; i++) {
    int64_t d = attr(c, v, i);
    if (a->rank == 0 && (d == 0 || d == -1)) continue; /* 0-dim: no-op */
    if (d < 0) d += a->rank;
    if (d < 0 || d >= a->rank) ICE("%s: dim %lld out of range", op_name(v->op), (long long)d);
    p->red[d] = true;
    p->dim = (int)d;
  }
  if (v->nattrs == 0) {
    for (int d = 0; d < a->rank; d++) p->red[d] = true;
    p->dim = -1;
  }
  p->nout = p->nred = 1;
  /* arg reductions and integer extremes have no identity; a float
   * amax/amin of nothing is -inf/+inf, the compiled loops' identity (sema
   * rejects or checks an empty amax/amin of the program itself;
   * logsumexp's inner max relies on it) */
  bool extreme = v->op == OP_ARGMAX || v->op == OP_ARGMIN ||
                 ((v->op == OP_AMAX || v->op == OP_AMIN) &&
                  !dtype_is_float(a->dtype));
  for (int d = 0; d < a->rank; d++) {
    if (p->red[d] && a->shape[d] == 0 && extreme)
      return fail(c, "%s(): cannot reduce over dim %d of size 0",
                  op_name(v->op), d);
    *(p->red[d] ? &p->nred : &p->nout) *= a->shape[d];
  }
  return 0;
}

/* Output (row-major over kept dims) index of every input element. */
static int64_t *reduce_map(Ctx *c, const HostTensor *a, const Reduce *p,
                           int64_t n, int64_t *along) {
  int64_t *map = xcalloc(c, n, sizeof *map);
  if (!map) return NULL;
  int64_t idx[TDSL_MAX_RANK] = {0}, dummy = 0, zero[TDSL_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t o = 0;
    for (int d = 0; d < a->rank; d++)
      if (!p->red[d]) o = o * a->shape[d] + idx[d];
    map[i] = o;
    along[i] = p->dim < 0 ? i : idx[p->dim];
    step_index(a->rank, a->shape, zero, idx, &dummy);
  }
  return map;
}

/* Folds x into acc; *seen tells whether acc holds a value yet. */
static void reduce_step(Op op, bool isf, Scalar *acc, int64_t *arg, bool seen,
                        Scalar x, int64_t pos) {
  if (op == OP_SUM || op == OP_MEAN) {
    if (isf) acc->f += x.f;
    else acc->i = (int64_t)((uint64_t)acc->i + (uint64_t)x.i);
    return;
  }
  if (op == OP_PROD) {
    if (isf) acc->f *= x.f;
    else acc->i = (int64_t)((uint64_t)acc->i * (uint64_t)x.i);
    return;
  }
  bool max = op == OP_AMAX || op == OP_ARGMAX, take;
  if (!seen) take = true;
  else if (isf && isnan(acc->f)) take = false; /* first NaN wins */
  else if (isf && isnan(x.f)) take = true;
  else if (isf) take = max ? x.f > acc->f : x.f < acc->f;
  else take = max ? x.i > acc->i : x.i < acc->i;
  if (take) {
    *acc = x;
    *arg = pos;
  }
}

static int eval_reduce(Ctx *c, const IrValue *v, RtVal *rv) {
  const RtVal *a = &c->vals[v->args[0]];
  Reduce p;
  if (reduce_plan(c, v, &a->t, &p) != 0) return -1;
  if (p.nout != rv->numel) ICE("%s: result size mismatch", op_name(v->op));
  bool isf = dtype_is_float(a->t.dtype);
  Scalar *x = gather(c, &a->t, a->numel), *acc = xcalloc(c, p.nout, sizeof *acc);
  int64_t *along = xcalloc(c, a->numel, sizeof *along);
  int64_t *arg = xcalloc(c, p.nout, sizeof *arg), *map = NULL;
  bool *seen = xcalloc(c, p.nout, sizeof *seen);
  int rc = -1;
  if (!x || !acc || !along || !arg || !seen) goto done;
  if (!(map = reduce_map(c, &a->t, &p, a->numel, along))) goto done;
  for (int64_t o = 0; o < p.nout; o++)
    if (v->op == OP_PROD) acc[o] = isf ? (Scalar){.f = 1} : (Scalar){.i = 1};
  for (int64_t i = 0; i < a->numel; i++) {
    reduce_step(v->op, isf, &acc[map[i]], &arg[map[i]], seen[map[i]], x[i], along[i]);
    seen[map[i]] = true;
  }
  for (int64_t o = 0; o < p.nout; o++) {
    if (v->op == OP_MEAN) acc[o].f /= (double)p.nred;
    if (!seen[o] && isf && (v->op == OP_AMAX || v->op == OP_AMIN))
      acc[o].f = v->op == OP_AMAX ? -INFINITY : INFINITY;
    if (v->op == OP_ARGMAX || v->op == OP_ARGMIN) acc[o].i = arg[o];
  }
  scatter(&rv->t, acc, p.nout);
  rc = 0;
done:
  free(x), free(acc), free(along), free(arg), free(map), free(seen);
  return rc;
}

/* ---- normalizations ---- */

/* Splits a's shape around dim into outer x len x inner. */
static void split_dim(const HostTensor *a, int dim, int64_t *outer,
                      int64_t *len, int64_t *inner) {
  *outer = *inner = *len = 1;
  for (int d = 0; d < a->rank; d++) {
    if (d < dim) *outer *= a->shape[d];
    else if (d == dim) *len = a->shape[d];
    else *inner *= a->shape[d];
  }
}

static void softmax_row(Scalar *x, int64_t len, int64_t inner, bool log_) {
  double mx = -INFINITY, sum = 0;
  for (int64_t j = 0; j < len; j++)
    mx = isnan(x[j * inner].f) || x[j * inner].f > mx ? x[j * inner].f : mx;
  if (isinf(mx) && mx < 0) mx = 0; /* all -inf: keep exp(-inf) = 0 */
  for (int64_t j = 0; j < len; j++) sum += exp(x[j * inner].f - mx);
  for (int64_t j = 0; j < len; j++) {
    double t = x[j * inner].f - mx;
    x[j * inner].f = log_ ? t - log(sum) : exp(t) / sum;
  }
}

static int eval_softmax(Ctx *c, const IrValue *v, RtVal *rv) {
  const RtVal *a = &c->vals[v->args[0]];
  int64_t dim = attr(c, v, 0), outer, len, inner;
  if (a->t.rank == 0) dim = 0;
  else if (dim < 0) dim += a->t.rank;
  if (dim < 0 || (dim >= a->t.rank && a->t.rank > 0)) ICE("softmax: bad dim");
  if (!dtype_is_float(v->dtype)) ICE("softmax on a non-float dtype");
  Scalar *x = gather(c, &a->t, a->numel);
  if (!x) return -1;
  split_dim(&a->t, (int)dim, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++)
      softmax_row(x + o * len * inner + i, len, inner, v->op == OP_LOG_SOFTMAX);
  scatter(&rv->t, x, rv->numel);
  free(x);
  return 0;
}

/* PyTorch's _log_add_exp_helper(x, acc) of its CPU logcumsumexp: NaN
 * propagates, equal infinities stay. */
static double log_add_exp(double x, double y) {
  double mn = isnan(y) ? y : fmin(x, y), mx = isnan(y) ? y : fmax(x, y);
  if (isnan(x)) mn = mx = x;
  if (mn != mx || isfinite(mn)) return log1p(exp(mn - mx)) + mx;
  return x;
}

/* cumsum / cumprod / logcumsumexp along attrs[0]: a running value in
 * double (floats) or wrapping i64, each element stored. */
static int eval_scan(Ctx *c, const IrValue *v, RtVal *rv) {
  const RtVal *a = &c->vals[v->args[0]];
  int64_t dim = attr(c, v, 0), outer, len, inner;
  if (dim < 0 || dim >= a->t.rank) ICE("%s: bad dim", op_name(v->op));
  bool isf = dtype_is_float(v->dtype);
  Scalar *x = gather(c, &a->t, a->numel);
  if (!x) return -1;
  split_dim(&a->t, (int)dim, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      Scalar *row = x + o * len * inner + i;
      double f = v->op == OP_CUMPROD ? 1 : v->op == OP_CUMSUM ? 0 : -INFINITY;
      uint64_t n = v->op == OP_CUMPROD;
      for (int64_t j = 0; j < len; j++) {
        Scalar *e = &row[j * inner];
        if (!isf) {
          n = v->op == OP_CUMPROD ? n * (uint64_t)e->i : n + (uint64_t)e->i;
          e->i = (int64_t)n;
          continue;
        }
        f = v->op == OP_CUMSUM    ? f + e->f
            : v->op == OP_CUMPROD ? f * e->f
                                  : log_add_exp(e->f, f);
        e->f = f;
      }
    }
  scatter(&rv->t, x, rv->numel);
  free(x);
  return 0;
}

static void norm_row(Scalar *x, int64_t n, double eps, const Scalar *w,
                     const Scalar *b) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < n; j++) mean += x[j].f;
  mean /= (double)n;
  for (int64_t j = 0; j < n; j++) var += (x[j].f - mean) * (x[j].f - mean);
  double rstd = 1.0 / sqrt(var / (double)n + eps);
  for (int64_t j = 0; j < n; j++) {
    double y = (x[j].f - mean) * rstd;
    if (w) y *= w[j].f;
    if (b) y += b[j].f;
    x[j].f = y;
  }
}

static int eval_layer_norm(Ctx *c, const IrValue *v, RtVal *rv) {
  const RtVal *a = &c->vals[v->args[0]];
  int64_t nd = attr(c, v, 0), inner = 1;
  if (nd < 0 || nd > a->t.rank) ICE("layer_norm: bad normalized rank");
  for (int d = a->t.rank - (int)nd; d < a->t.rank; d++) inner *= a->t.shape[d];
  Scalar *x = gather(c, &a->t, a->numel), *w = NULL, *b = NULL;
  int next = 1, rc = -1;
  if (!x) return -1;
  if (v->flags & IRF_WEIGHT) {
    const RtVal *wv = &c->vals[v->args[next++]];
    if (wv->numel != inner) ICE("layer_norm: weight size");
    if (!(w = gather(c, &wv->t, wv->numel))) goto done;
  }
  if (v->flags & IRF_BIAS) {
    const RtVal *bv = &c->vals[v->args[next++]];
    if (bv->numel != inner) ICE("layer_norm: bias size");
    if (!(b = gather(c, &bv->t, bv->numel))) goto done;
  }
  for (int64_t o = 0; inner > 0 && o < a->numel / inner; o++)
    norm_row(x + o * inner, inner, v->fattr[0], w, b);
  scatter(&rv->t, x, rv->numel);
  rc = 0;
done:
  free(x), free(w), free(b);
  return rc;
}

/* ---- matmul ---- */

static void matmul_block(const Scalar *a, const Scalar *b, Scalar *o,
                         int64_t m, int64_t k, int64_t n, bool isf) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t p = 0; p < k; p++) {
      Scalar x = a[i * k + p];
      const Scalar *brow = b + p * n;
      Scalar *orow = o + i * n;
      if (isf)
        for (int64_t j = 0; j < n; j++) orow[j].f += x.f * brow[j].f;
      else
        for (int64_t j = 0; j < n; j++)
          orow[j].i = (int64_t)((uint64_t)orow[j].i +
                                (uint64_t)x.i * (uint64_t)brow[j].i);
    }
}

static int eval_matmul(Ctx *c, const IrValue *v, RtVal *rv) {
  const HostTensor *a = &c->vals[v->args[0]].t, *b = &c->vals[v->args[1]].t;
  int r = v->rank;
  if (r < 2 || a->rank != r || b->rank != r) ICE("matmul: operand ranks");
  int64_t m = a->shape[r - 2], k = a->shape[r - 1], n = b->shape[r - 1];
  int64_t batch = 1;
  for (int d = 0; d < r - 2; d++) batch *= a->shape[d];
  if (b->shape[r - 2] != k || batch * m * n != rv->numel)
    ICE("matmul: operand shapes");
  Scalar *x = gather(c, a, batch * m * k), *y = gather(c, b, batch * k * n);
  Scalar *o = xcalloc(c, rv->numel, sizeof *o);
  int rc = -1;
  if (x && y && o) {
    for (int64_t i = 0; i < batch; i++)
      matmul_block(x + i * m * k, y + i * k * n, o + i * m * n, m, k, n,
                   dtype_is_float(v->dtype));
    scatter(&rv->t, o, rv->numel);
    rc = 0;
  }
  free(x), free(y), free(o);
  return rc;
}

/* ---- convolution and pooling ---- */

/* Planes x H x W views of a rank >= 2 tensor (leading dims flattened). */
typedef struct Plane {
  int64_t n, h, w;
} Plane;

static Plane planes(const HostTensor *t) {
  Plane p = {1, 1, 1};
  if (t->rank < 2) ICE("2-d op on rank %d", t->rank);
  for (int d = 0; d < t->rank - 2; d++) p.n *= t->shape[d];
  p.h = t->shape[t->rank - 2];
  p.w = t->shape[t->rank - 1];
  return p;
}

typedef struct ConvArgs {
  int64_t sh, sw, ph, pw, dh, dw, groups;
  int64_t cin, cout, kh, kw;
  Plane in, out;
  bool isf;
} ConvArgs;

/* One output element: output channel o of image nb at (oy, ox). */
static Scalar conv_point(const ConvArgs *p, const Scalar *x, const Scalar *w,
                         int64_t nb, int64_t o, int64_t oy, int64_t ox) {
  int64_t cg = p->cin / p->groups, g = o / (p->cout / p->groups);
  Scalar acc = {0};
  for (int64_t ci = 0; ci < cg; ci++) {
    const Scalar *xp = x + ((nb * p->cin) + g * cg + ci) * p->in.h * p->in.w;
    const Scalar *wp = w + (o * cg + ci) * p->kh * p->kw;
    for (int64_t ky = 0; ky < p->kh; ky++) {
      int64_t iy = oy * p->sh - p->ph + ky * p->dh;
      if (iy < 0 || iy >= p->in.h) continue;
      for (int64_t kx = 0; kx < p->kw; kx++) {
        int64_t ix = ox * p->sw - p->pw + kx * p->dw;
        if (ix < 0 || ix >= p->in.w) continue;
        Scalar a = xp[iy * p->in.w + ix], b = wp[ky * p->kw + kx];
        if (p->isf) acc.f += a.f * b.f;
        else acc.i = (int64_t)((uint64_t)acc.i + (uint64_t)a.i * (uint64_t)b.i);
      }
    }
  }
  return acc;
}

static int conv_args(Ctx *c, const IrValue *v, RtVal *rv, ConvArgs *p) {
  const HostTensor *x = &c->vals[v->args[0]].t, *w = &c->vals[v->args[1]].t;
  int64_t *f[7] = {&p->sh, &p->sw, &p->ph, &p->pw, &p->dh, &p->dw, &p->groups};
  for (int i = 0; i < 7; i++) *f[i] = attr(c, v, i);
  if (x->rank < 3 || w->rank != 4 || rv->t.rank != x->rank) ICE("conv2d: ranks");
  p->in = planes(x);
  p->out = planes(&rv->t);
  p->cin = x->shape[x->rank - 3];
  p->cout = w->shape[0];
  p->kh = w->shape[2];
  p->kw = w->shape[3];
  p->isf = dtype_is_float(v->dtype);
  if (p->groups < 1 || p->cin % p->groups || p->cout % p->groups ||
      w->shape[1] * p->groups != p->cin || rv->t.shape[rv->t.rank - 3] != p->cout)
    ICE("conv2d: channel counts");
  return 0;
}

static int eval_conv(Ctx *c, const IrValue *v, RtVal *rv) {
  ConvArgs p;
  conv_args(c, v, rv, &p);
  const RtVal *xv = &c->vals[v->args[0]], *wv = &c->vals[v->args[1]];
  const RtVal *bv = (v->flags & IRF_BIAS) ? &c->vals[v->args[2]] : NULL;
  Scalar *x = gather(c, &xv->t, xv->numel), *w = gather(c, &wv->t, wv->numel);
  Scalar *b = bv ? gather(c, &bv->t, bv->numel) : NULL;
  Scalar *o = xcalloc(c, rv->numel, sizeof *o);
  int rc = -1;
  if (!x || !w || (bv && !b) || !o) goto done;
  int64_t batch = p.cout ? p.out.n / p.cout : 0, i = 0;
  for (int64_t nb = 0; nb < batch; nb++)
    for (int64_t oc = 0; oc < p.cout; oc++)
      for (int64_t oy = 0; oy < p.out.h; oy++)
        for (int64_t ox = 0; ox < p.out.w; ox++, i++) {
          o[i] = conv_point(&p, x, w, nb, oc, oy, ox);
          if (b && p.isf) o[i].f += b[oc].f;
          else if (b) o[i].i = (int64_t)((uint64_t)o[i].i + (uint64_t)b[oc].i);
        }
  scatter(&rv->t, o, rv->numel);
  rc = 0;
done:
  free(x), free(w), free(b), free(o);
  return rc;
}

/* One pooling window: rows [y0, y1) x cols [x0, x1) of plane xp. */
static Scalar pool_window(Op op, bool isf, const Scalar *xp, int64_t w,
                          int64_t y0, int64_t y1, int64_t x0, int64_t x1,
                          int64_t divisor) {
  Scalar acc = {0};
  bool seen = false;
  for (int64_t y = y0; y < y1; y++)
    for (int64_t x = x0; x < x1; x++) {
      Scalar e = xp[y * w + x];
      if (op != OP_MAX_POOL2D) {
        if (isf) acc.f += e.f;
        else acc.i = (int64_t)((uint64_t)acc.i + (uint64_t)e.i);
      } else if (!seen || (isf ? (isnan(e.f) || e.f > acc.f) : e.i > acc.i)) {
        if (!(seen && isf && isnan(acc.f))) acc = e;
      }
      seen = true;
    }
  if (op == OP_MAX_POOL2D) {
    if (!seen && isf) acc.f = -INFINITY;
    return acc;
  }
  if (divisor == 0) return (Scalar){0};
  if (isf) acc.f /= (double)divisor;
  else acc.i /= divisor;
  return acc;
}

static Scalar pool_point(Ctx *c, const IrValue *v, const Scalar *xp, Plane in,
                         Plane out, int64_t oy, int64_t ox) {
  bool isf = dtype_is_float(v->dtype);
  int64_t y0, y1, x0, x1, div;
  if (v->op == OP_ADAPTIVE_AVG_POOL2D) {
    y0 = oy * in.h / out.h, y1 = ((oy + 1) * in.h + out.h - 1) / out.h;
    x0 = ox * in.w / out.w, x1 = ((ox + 1) * in.w + out.w - 1) / out.w;
    return pool_window(v->op, isf, xp, in.w, y0, y1, x0, x1, (y1 - y0) * (x1 - x0));
  }
  int64_t kh = attr(c, v, 0), kw = attr(c, v, 1), sh = attr(c, v, 2);
  int64_t sw = attr(c, v, 3), ph = attr(c, v, 4), pw = attr(c, v, 5);
  y0 = oy * sh - ph, x0 = ox * sw - pw;
  /* count_include_pad: the window clipped to the padded input */
  y1 = y0 + kh < in.h + ph ? y0 + kh : in.h + ph;
  x1 = x0 + kw < in.w + pw ? x0 + kw : in.w + pw;
  div = (y1 - y0) * (x1 - x0);
  y0 = y0 > 0 ? y0 : 0, x0 = x0 > 0 ? x0 : 0;
  y1 = y1 < in.h ? y1 : in.h, x1 = x1 < in.w ? x1 : in.w;
  if (v->op == OP_AVG_POOL2D && (y0 >= y1 || x0 >= x1)) return (Scalar){0};
  return pool_window(v->op, isf, xp, in.w, y0, y1, x0, x1, div);
}

static int eval_pool(Ctx *c, const IrValue *v, RtVal *rv) {
  const RtVal *a = &c->vals[v->args[0]];
  Plane in = planes(&a->t), out = planes(&rv->t);
  if (in.n != out.n || a->t.rank != rv->t.rank) ICE("pool: plane count");
  if (v->op == OP_ADAPTIVE_AVG_POOL2D && (out.h == 0 || out.w == 0) && out.n)
    return 0;
  Scalar *x = gather(c, &a->t, a->numel), *o = xcalloc(c, rv->numel, sizeof *o);
  int rc = -1;
  if (x && o) {
    for (int64_t n = 0, i = 0; n < in.n; n++)
      for (int64_t oy = 0; oy < out.h; oy++)
        for (int64_t ox = 0; ox < out.w; ox++, i++)
          o[i] = pool_point(c, v, x + n * in.h * in.w, in, out, oy, ox);
    scatter(&rv->t, o, rv->numel);
    rc = 0;
  }
  free(x), free(o);
  return rc;
}

/* ---- indexing by tensors ---- */

/* INDEX and GATHER (ops.h): every index is checked before anything is
 * computed; out of range (after wrapping negatives with IRF_WRAP) is the
 * error generated code reports as TDSL_E_INDEX, with the same message. */
static int eval_index(Ctx *c, IrRef r, const IrValue *v, RtVal *rv) {
  const RtVal *x = &c->vals[v->args[0]], *ix = &c->vals[v->args[1]];
  int d = (int)attr(c, v, 0), xr = x->t.rank;
  int64_t size = xr > 0 ? x->t.shape[d] : 1, rst[TDSL_MAX_RANK];
  Scalar *xs = gather(c, &x->t, x->numel), *is = NULL, *out = NULL;
  int rc = -1;
  if (!xs || !(is = gather(c, &ix->t, ix->numel)) || !(out = xcalloc(c, rv->numel, sizeof *out)))
    goto done;
  for (int64_t i = 0; i < ix->numel; i++) {
    int64_t j = is[i].i;
    if ((v->flags & IRF_WRAP) && j < 0) j += size;
    if (j < 0 || j >= size) {
      char fmt[512];
      snprintf(fmt, sizeof fmt, "%s", ir_index_message(c->m->arena, c->k, r));
      fail(c, fmt, (long long)is[i].i, (long long)size);
      goto done;
    }
    is[i].i = j;
  }
  for (int k = xr - 1; k >= 0; k--) /* x's row-major strides */
    rst[k] = k == xr - 1 ? 1 : rst[k + 1] * x->t.shape[k + 1];
  if (v->op == OP_INDEX) {
    int64_t outer = 1, inner = 1, ni = ix->numel;
    for (int k = 0; k < d; k++) outer *= x->t.shape[k];
    for (int k = d + 1; k < xr; k++) inner *= x->t.shape[k];
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < ni; j++)
        for (int64_t i = 0; i < inner; i++)
          out[(o * ni + j) * inner + i] = xs[(o * size + is[j].i) * inner + i];
  } else {
    int64_t p[TDSL_MAX_RANK] = {0};
    for (int64_t i = 0; i < rv->numel; i++) {
      int64_t a = 0;
      for (int k = 0; k < xr; k++) a += (k == d ? is[i].i : p[k]) * rst[k];
      out[i] = xs[a];
      for (int k = rv->t.rank - 1; k >= 0; k--) {
        if (++p[k] < rv->t.shape[k]) break;
        p[k] = 0;
      }
    }
  }
  scatter(&rv->t, out, rv->numel);
  rc = 0;
done:
  free(xs);
  free(is);
  free(out);
  return rc;
}

/* ---- joining ---- */

/* CAT: each operand's elements into its slice of the result along dim. */
static int eval_cat(Ctx *c, const IrValue *v, RtVal *rv) {
  int dim = (int)attr(c, v, 0);
  int64_t at = 0;
  for (int j = 0; j < v->nargs; j++) {
    const RtVal *a = &c->vals[v->args[j]];
    if (a->t.rank != rv->t.rank) ICE("cat: operand rank mismatch");
    HostTensor dst = rv->t;
    memcpy(dst.shape, a->t.shape, sizeof dst.shape);
    dst.offset += at * rv->t.stride[dim];
    at += a->t.shape[dim];
    Scalar *x = gather(c, &a->t, a->numel);
    if (!x) return -1;
    scatter(&dst, x, a->numel);
    free(x);
  }
  if (at != rv->t.shape[dim]) ICE("cat: operand sizes do not add up");
  return 0;
}

/* ---- driver ---- */

static int eval_value(Ctx *c, IrRef r) {
  const IrValue *v = ir_val(c->k, r);
  RtVal *rv = &c->vals[r];
  if (v->op == OP_PARAM) return eval_param(c, r, rv);
  if (op_kind(v->op) == IRK_VIEW) return eval_view(c, r, rv);
  if (eval_geom(c, r, rv) != 0 || alloc_dense(c, r, rv) != 0) return -1;
  switch (op_kind(v->op)) {
  case IRK_SOURCE: return eval_source(c, v, rv);
  case IRK_COPY: return eval_copy(c, v, rv);
  case IRK_UNARY:
  case IRK_BINARY:
  case IRK_COMPARE:
  case IRK_TERNARY: return eval_elementwise(c, v, rv);
  case IRK_REDUCE: return eval_reduce(c, v, rv);
  case IRK_SCAN: return eval_scan(c, v, rv);
  case IRK_NORM:
    return v->op == OP_LAYER_NORM ? eval_layer_norm(c, v, rv)
                                  : eval_softmax(c, v, rv);
  case IRK_MATMUL: return eval_matmul(c, v, rv);
  case IRK_CONV: return eval_conv(c, v, rv);
  case IRK_POOL: return eval_pool(c, v, rv);
  case IRK_INDEX: return eval_index(c, r, v, rv);
  case IRK_JOIN: return eval_cat(c, v, rv);
  default: ICE("interp: unhandled op %s", op_name(v->op));
  }
}

static int copy_result(Ctx *c, int i, HostTensor *out) {
  const IrResult *res = &c->k->results[i];
  const RtVal *rv = &c->vals[res->value];
  if (host_tensor_alloc(out, res->dtype, rv->t.rank, rv->t.shape) != 0)
    return fail(c, "result %d: cannot allocate %lld elements", i,
                (long long)rv->numel);
  Scalar *x = gather(c, &rv->t, rv->numel);
  if (!x) return -1;
  if (res->dtype != rv->t.dtype)
    for (int64_t j = 0; j < rv->numel; j++)
      x[j] = scalar_cast(x[j], rv->t.dtype, res->dtype);
  scatter(out, x, rv->numel);
  free(x);
  return 0;
}

static int run_entry(Ctx *c) {
  for (int i = 0; i < c->k->nparams; i++)
    if (check_arg(c, i) != 0) return -1;
  if (bind_syms(c) != 0) return -1;
  for (int i = 0; i < c->k->nparams; i++)
    if (check_dims(c, i) != 0) return -1;
  return run_checks(c);
}

int interp_run(const IrModule *m, const IrKernel *k, const InterpArg *args,
               HostTensor *outs, char *err, size_t errlen) {
  Ctx c = {m, k, args, NULL, NULL, err, errlen};
  int rc = -1;
  if (err && errlen) err[0] = '\0';
  for (int i = 0; i < k->nresults; i++) memset(&outs[i], 0, sizeof outs[i]);
  c.env = calloc((size_t)k->nsyms + 1, sizeof *c.env);
  c.vals = calloc((size_t)k->nvalues + 1, sizeof *c.vals);
  if (!c.env || !c.vals) {
    fail(&c, "out of memory");
    goto out;
  }
  if (run_entry(&c) != 0) goto out;
  for (int r = 0; r < k->nvalues; r++)
    if (eval_value(&c, r) != 0) goto out;
  for (int i = 0; i < k->nresults; i++)
    if (copy_result(&c, i, &outs[i]) != 0) goto out;
  rc = 0;
out:
  if (rc != 0)
    for (int i = 0; i < k->nresults; i++) host_tensor_free(&outs[i]);
  for (int r = 0; c.vals && r < k->nvalues; r++) free(c.vals[r].t.owned);
  free(c.env);
  free(c.vals);
  return rc;
}
