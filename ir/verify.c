/* verify.c — ir_verify(): the structural invariants of the IR (ir.h,
 * ops.h), checked between passes.
 *
 * Needs: ir.h, sym.h (pointer equality of hash-consed Syms is equality of
 * expressions).  Produces one line per violation on `out`,
 *     kernel K: %N (op): message
 * (or `kernel K: param 0 (x): ...`, `result 0`, `sym 1 (N)`, `check 0`
 * for the kernel's tables) and returns their number.
 *
 * It must survive any module, so each value's form (refs, arrays, ids) is
 * checked first; a value that fails, or uses one that failed, gets no
 * semantic checks, which would read through its bad fields. */
#include <stdarg.h>
#include <stdlib.h>

#include "ir.h"

typedef struct Ctx {
  FILE *out;
  const IrModule *m;
  const IrKernel *k;
  bool *ok;  /* per value: its form is sound */
  int count;
} Ctx;

static void bad_value(Ctx *c, IrRef r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bad_value(Ctx *c, IrRef r, const char *fmt, ...) {
  Op op = c->k->values[r].op;
  fprintf(c->out, "kernel %s: %%%d (%s): ", c->k->name, r,
          op >= 0 && op < OP_COUNT ? op_name(op) : "?");
  va_list ap;
  va_start(ap, fmt);
  vfprintf(c->out, fmt, ap);
  va_end(ap);
  fputc('\n', c->out);
  c->count++;
}

/* A violation in a kernel table; `what` names the entry. */
static void bad_entry(Ctx *c, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bad_entry(Ctx *c, const char *what, const char *fmt, ...) {
  fprintf(c->out, "kernel %s: %s: ", c->k->name, what);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(c->out, fmt, ap);
  va_end(ap);
  fputc('\n', c->out);
  c->count++;
}

static const char *str(const Ctx *c, const Sym *s) {
  return sym_str(c->m->arena, s);
}

static const char *dt(DType t) {
  return t >= 0 && t < DT_COUNT ? dtype_name(t) : "?";
}

/* ---- form ---- */

/* A Sym field: present and over declared symbols only. */
static bool sym_ok(const Ctx *c, const Sym *s) {
  return s && sym_max_var(s) <= c->k->nsyms;
}

static bool syms_ok(const Ctx *c, const Sym *const *v, int n) {
  if (n < 0 || (n > 0 && !v)) return false;
  for (int i = 0; i < n; i++)
    if (!sym_ok(c, v[i])) return false;
  return true;
}

static bool check_form(Ctx *c, IrRef r) {
  const IrValue *v = &c->k->values[r];
  if (v->op < 0 || v->op >= OP_COUNT) {
    bad_value(c, r, "op %d is not in the op table", (int)v->op);
    return false;
  }
  if (v->dtype < 0 || v->dtype >= DT_COUNT) {
    bad_value(c, r, "dtype %d is not a dtype", (int)v->dtype);
    return false;
  }
  if (!syms_ok(c, v->shape, v->rank) || !syms_ok(c, v->stride, v->rank) ||
      !sym_ok(c, v->offset)) {
    bad_value(c, r, "rank %d geometry is missing or names undeclared symbols",
              v->rank);
    return false;
  }
  if (!syms_ok(c, v->attrs, v->nattrs)) {
    bad_value(c, r, "%d attributes missing or naming undeclared symbols",
              v->nattrs);
    return false;
  }
  if (v->nargs < 0 || (v->nargs > 0 && !v->args)) {
    bad_value(c, r, "operand list missing");
    return false;
  }
  bool ok = true;
  for (int i = 0; i < v->nargs; i++) {
    if (v->args[i] < 0 || v->args[i] >= r) {
      bad_value(c, r, "operand %d (%%%d) is not an earlier value", i,
                v->args[i]);
      ok = false;
    } else if (!c->ok[v->args[i]]) {
      ok = false; /* reported at the operand */
    }
  }
  return ok;
}

static bool check_arity(Ctx *c, IrRef r, const IrValue *v) {
  int want = op_nargs(v->op);
  if (v->op == OP_LAYER_NORM)
    want = 1 + !!(v->flags & IRF_WEIGHT) + !!(v->flags & IRF_BIAS);
  else if (v->op == OP_CONV2D)
    want = 2 + !!(v->flags & IRF_BIAS);
  else if (v->op == OP_LERP)
    want = 2 + !!(v->flags & IRF_WEIGHT);
  else if (v->op == OP_CAT)
    want = v->nargs >= 1 ? v->nargs : 1;
  if (v->nargs == want) return true;
  bad_value(c, r, "%d operands, expected %d", v->nargs, want);
  return false;
}

/* ---- helpers over operands ---- */

static const IrValue *arg(const Ctx *c, const IrValue *v, int i) {
  return &c->k->values[v->args[i]];
}

static void want_shape(Ctx *c, IrRef r, const IrValue *v, int i) {
  const IrValue *a = arg(c, v, i);
  if (!sym_list_equal(a->shape, a->rank, v->shape, v->rank))
    bad_value(c, r, "operand %d (%%%d) shape differs from the result's", i,
              v->args[i]);
}

static void want_dtype(Ctx *c, IrRef r, const IrValue *v, int i, DType t) {
  DType have = arg(c, v, i)->dtype;
  if (have != t)
    bad_value(c, r, "operand %d (%%%d) is %s, expected %s", i, v->args[i],
              dt(have), dt(t));
}

static void want_rank(Ctx *c, IrRef r, int have, int want, const char *what) {
  if (have != want)
    bad_value(c, r, "%s has rank %d, expected %d", what, have, want);
}

/* attrs[i] as a constant in [lo, hi), or false after reporting. */
static bool attr_in(Ctx *c, IrRef r, const IrValue *v, int i, int64_t lo,
                    int64_t hi, int64_t *out) {
  int64_t x;
  if (i >= v->nattrs) {
    bad_value(c, r, "attribute %d missing", i);
    return false;
  }
  if (!sym_is_const(v->attrs[i], &x) || x < lo || x >= hi) {
    bad_value(c, r, "attribute %d is %s, expected a constant in [%lld, %lld)",
              i, str(c, v->attrs[i]), (long long)lo, (long long)hi);
    return false;
  }
  if (out) *out = x;
  return true;
}

static bool want_nattrs(Ctx *c, IrRef r, const IrValue *v, int n) {
  if (v->nattrs == n) return true;
  bad_value(c, r, "%d attributes, expected %d", v->nattrs, n);
  return false;
}

/* ---- sources ---- */

static void check_param_value(Ctx *c, IrRef r, const IrValue *v) {
  int64_t i = v->value.i;
  if (i < 0 || i >= c->k->nparams) {
    bad_value(c, r, "parameter index %lld out of range", (long long)i);
    return;
  }
  const IrParam *p = &c->k->params[i];
  if (p->is_tensor && !syms_ok(c, p->shape, p->rank)) return; /* reported */
  if (p->dtype != v->dtype)
    bad_value(c, r, "dtype %s, parameter %lld is %s", dt(v->dtype),
              (long long)i, dt(p->dtype));
  int rank = p->is_tensor ? p->rank : 0;
  if (!sym_list_equal(p->shape, rank, v->shape, v->rank))
    bad_value(c, r, "shape differs from parameter %lld's declaration",
              (long long)i);
}

static void check_source(Ctx *c, IrRef r, const IrValue *v) {
  switch (v->op) {
  case OP_PARAM: check_param_value(c, r, v); break;
  case OP_CONST: want_rank(c, r, v->rank, 0, "const"); break;
  case OP_SYMVAL:
    want_rank(c, r, v->rank, 0, "symval");
    want_nattrs(c, r, v, 1);
    if (v->dtype != DT_I64) bad_value(c, r, "symval must be i64");
    break;
  case OP_TENSOR:
    for (int d = 0; d < v->rank; d++)
      if (!sym_is_const(v->shape[d], NULL)) {
        bad_value(c, r, "tensor data needs a constant shape");
        return;
      }
    if (!v->data) bad_value(c, r, "tensor has no data");
    break;
  case OP_ARANGE: want_rank(c, r, v->rank, 1, "arange"); break;
  default: break;
  }
}

/* ---- views ---- */

/* Lowest and highest element addressed by a value with constant
 * geometry.  Returns 1 when it addresses some, 0 when it is empty, -1
 * when the geometry is symbolic or overflows. */
static int addr_range(const IrValue *v, int64_t *lo, int64_t *hi) {
  int64_t off;
  if (!sym_is_const(v->offset, &off)) return -1;
  *lo = *hi = off;
  bool empty = false;
  for (int d = 0; d < v->rank; d++) {
    int64_t n, s, span;
    if (!sym_is_const(v->shape[d], &n) || !sym_is_const(v->stride[d], &s))
      return -1;
    if (n <= 0) {
      empty = true;
      continue;
    }
    if (!ir_mul_ok(n - 1, s, &span)) return -1;
    if (!ir_add_ok(s < 0 ? *lo : *hi, span, s < 0 ? lo : hi)) return -1;
  }
  return empty ? 0 : 1;
}

/* A view's addresses must stay within its storage root's extent. */
static void check_view_bounds(Ctx *c, IrRef r, const IrValue *v) {
  int64_t off, lo, hi, rlo, rhi;
  if (sym_is_const(v->offset, &off) && off < 0) {
    bad_value(c, r, "negative storage offset %lld", (long long)off);
    return;
  }
  if (addr_range(v, &lo, &hi) != 1) return;
  IrRef root = ir_storage_root(c->k, r);
  int rr = addr_range(&c->k->values[root], &rlo, &rhi);
  if (rr < 0) return;
  int64_t extent = rr == 0 ? 0 : rhi + 1;
  if (lo < 0 || hi >= extent)
    bad_value(c, r, "addresses elements %lld..%lld of storage %%%d, which "
              "holds %lld", (long long)lo, (long long)hi, root,
              (long long)extent);
}

/* The attrs are strictly increasing dims of a rank-n operand. */
static bool sorted_dims(Ctx *c, IrRef r, const IrValue *v, int n) {
  int64_t prev = -1, d;
  for (int i = 0; i < v->nattrs; i++) {
    if (!attr_in(c, r, v, i, prev + 1, n, &d)) return false;
    prev = d;
  }
  return true;
}

static void check_permute(Ctx *c, IrRef r, const IrValue *v,
                          const IrValue *x) {
  want_rank(c, r, v->rank, x->rank, "permute result");
  if (!want_nattrs(c, r, v, x->rank) || v->rank != x->rank) return;
  bool *seen = calloc((size_t)x->rank + 1, sizeof *seen);
  for (int i = 0; i < v->nattrs; i++) {
    int64_t p;
    if (!attr_in(c, r, v, i, 0, x->rank, &p)) break;
    if (seen[p]) {
      bad_value(c, r, "dim %lld repeats in the permutation", (long long)p);
      break;
    }
    seen[p] = true;
    if (v->shape[i] != x->shape[p])
      bad_value(c, r, "dim %d is %s, operand dim %lld is %s", i,
                str(c, v->shape[i]), (long long)p, str(c, x->shape[p]));
  }
  free(seen);
}

static void check_view_attrs(Ctx *c, IrRef r, const IrValue *v,
                             const IrValue *x) {
  switch (v->op) {
  case OP_PERMUTE: check_permute(c, r, v, x); break;
  case OP_EXPAND:
    want_nattrs(c, r, v, v->rank);
    if (v->rank < x->rank) bad_value(c, r, "expand lowers the rank");
    break;
  case OP_UNSQUEEZE:
    want_rank(c, r, v->rank, x->rank + 1, "unsqueeze result");
    if (want_nattrs(c, r, v, 1)) attr_in(c, r, v, 0, 0, x->rank + 1, NULL);
    break;
  case OP_SQUEEZE:
    want_rank(c, r, v->rank, x->rank - v->nattrs, "squeeze result");
    sorted_dims(c, r, v, x->rank);
    break;
  case OP_SLICE:
    want_rank(c, r, v->rank, x->rank, "slice result");
    if (want_nattrs(c, r, v, 4) && attr_in(c, r, v, 0, 0, x->rank, NULL) &&
        sym_is_const(v->attrs[3], NULL))
      attr_in(c, r, v, 3, 1, INT64_MAX, NULL);
    break;
  case OP_SELECT:
    want_rank(c, r, v->rank, x->rank - 1, "select result");
    if (want_nattrs(c, r, v, 2)) attr_in(c, r, v, 0, 0, x->rank, NULL);
    break;
  case OP_DIAGONAL:
    want_rank(c, r, v->rank, x->rank - 1, "diagonal result");
    if (want_nattrs(c, r, v, 3) && attr_in(c, r, v, 1, 0, x->rank, NULL) &&
        attr_in(c, r, v, 2, 0, x->rank, NULL) && v->attrs[1] == v->attrs[2])
      bad_value(c, r, "diagonal of one dim with itself");
    break;
  case OP_UNFOLD:
    /* a 0-dim operand unfolds as if it were [1] (PyTorch): dim 0 */
    want_rank(c, r, v->rank, x->rank + 1, "unfold result");
    if (want_nattrs(c, r, v, 3))
      attr_in(c, r, v, 0, 0, x->rank ? x->rank : 1, NULL);
    break;
  default: break;
  }
}

/* Element counts, when both shapes are constant, must agree. */
static void want_same_numel(Ctx *c, IrRef r, const IrValue *v,
                            const IrValue *x) {
  int64_t a = 1, b = 1, n;
  for (int d = 0; d < v->rank; d++)
    if (!sym_is_const(v->shape[d], &n) || !ir_mul_ok(a, n, &a)) return;
  for (int d = 0; d < x->rank; d++)
    if (!sym_is_const(x->shape[d], &n) || !ir_mul_ok(b, n, &b)) return;
  if (a != b)
    bad_value(c, r, "%lld elements from an operand of %lld", (long long)a,
              (long long)b);
}

static void check_view(Ctx *c, IrRef r, const IrValue *v) {
  const IrValue *x = arg(c, v, 0);
  if (x->dtype != v->dtype)
    bad_value(c, r, "view changes dtype %s to %s", dt(x->dtype), dt(v->dtype));
  if (v->op == OP_VIEW) want_same_numel(c, r, v, x);
  check_view_attrs(c, r, v, x);
  check_view_bounds(c, r, v);
}

static void check_copy(Ctx *c, IrRef r, const IrValue *v) {
  if (v->op == OP_RESHAPE) {
    want_same_numel(c, r, v, arg(c, v, 0));
    want_dtype(c, r, v, 0, v->dtype);
    return;
  }
  want_shape(c, r, v, 0);
  if (v->op == OP_COPY) want_dtype(c, r, v, 0, v->dtype);
}

/* ---- elementwise ---- */

static void check_elementwise(Ctx *c, IrRef r, const IrValue *v) {
  for (int i = 0; i < v->nargs; i++) want_shape(c, r, v, i);
  if (op_dtype_rule(v->op) == DR_TO_BOOL) {
    if (v->dtype != DT_BOOL)
      bad_value(c, r, "result is %s, expected bool", dt(v->dtype));
    for (int i = 1; i < v->nargs; i++) want_dtype(c, r, v, i, arg(c, v, 0)->dtype);
  } else if (v->op == OP_WHERE) {
    want_dtype(c, r, v, 0, DT_BOOL);
    want_dtype(c, r, v, 1, v->dtype);
    want_dtype(c, r, v, 2, v->dtype);
  } else {
    for (int i = 0; i < v->nargs; i++) want_dtype(c, r, v, i, v->dtype);
  }
}

/* ---- reductions, normalizations ---- */

static void check_reduce_shape(Ctx *c, IrRef r, const IrValue *v,
                               const IrValue *x) {
  bool keep = v->flags & IRF_KEEPDIM;
  int nred = v->nattrs ? v->nattrs : x->rank; /* no attrs: every dim */
  want_rank(c, r, v->rank, keep ? x->rank : x->rank - nred, "result");
  if (v->rank != (keep ? x->rank : x->rank - nred)) return;
  for (int d = 0, j = 0, a = 0; d < x->rank; d++) {
    int64_t ad = -1;
    bool reduced = !v->nattrs ||
                   (a < v->nattrs && sym_is_const(v->attrs[a], &ad) && ad == d);
    if (reduced && v->nattrs) a++;
    if (reduced && keep && !sym_is(v->shape[j], 1))
      bad_value(c, r, "kept reduced dim %d is %s, expected 1", j,
                str(c, v->shape[j]));
    if (!reduced && v->shape[j] != x->shape[d])
      bad_value(c, r, "dim %d is %s, operand dim %d is %s", j,
                str(c, v->shape[j]), d, str(c, x->shape[d]));
    if (keep || !reduced) j++;
  }
}

static void check_reduce(Ctx *c, IrRef r, const IrValue *v) {
  const IrValue *x = arg(c, v, 0);
  if (!sorted_dims(c, r, v, x->rank)) return;
  check_reduce_shape(c, r, v, x);
  if (v->op == OP_ARGMAX || v->op == OP_ARGMIN) {
    if (v->dtype != DT_I64)
      bad_value(c, r, "result is %s, expected i64", dt(v->dtype));
    return;
  }
  want_dtype(c, r, v, 0, v->dtype);
  if ((v->op == OP_SUM || v->op == OP_PROD) && !dtype_is_float(x->dtype) &&
      x->dtype != DT_I64)
    bad_value(c, r, "integer operand is %s, expected i64", dt(x->dtype));
}

static void check_layer_norm(Ctx *c, IrRef r, const IrValue *v) {
  const IrValue *x = arg(c, v, 0);
  int64_t n;
  if (!want_nattrs(c, r, v, 1) || !attr_in(c, r, v, 0, 0, x->rank + 1, &n))
    return;
  for (int i = 1; i < v->nargs; i++) {
    const IrValue *w = arg(c, v, i);
    bool same = w->rank == n;
    for (int d = 0; same && d < n; d++)
      same = w->shape[d] == x->shape[x->rank - n + d];
    if (!same)
      bad_value(c, r, "operand %d (%%%d) is not shaped like the normalized "
                "dims", i, v->args[i]);
    want_dtype(c, r, v, i, v->dtype);
  }
}

static void check_norm(Ctx *c, IrRef r, const IrValue *v) {
  want_shape(c, r, v, 0);
  want_dtype(c, r, v, 0, v->dtype);
  const IrValue *x = arg(c, v, 0);
  if (v->op == OP_LAYER_NORM) check_layer_norm(c, r, v);
  else if (want_nattrs(c, r, v, 1))
    attr_in(c, r, v, 0, 0, x->rank > 0 ? x->rank : 1, NULL);
}

/* A scan keeps its operand's shape and dtype: floats, or i64 (cumsum and
 * cumprod of integers and bool, cast by sema), along one dim. */
static void check_scan(Ctx *c, IrRef r, const IrValue *v) {
  want_shape(c, r, v, 0);
  want_dtype(c, r, v, 0, v->dtype);
  const IrValue *x = arg(c, v, 0);
  if (want_nattrs(c, r, v, 1)) attr_in(c, r, v, 0, 0, x->rank, NULL);
  if (!dtype_is_float(v->dtype) && (v->op == OP_LOGCUMSUMEXP || v->dtype != DT_I64))
    bad_value(c, r, "result is %s, expected a float%s", dt(v->dtype),
              v->op == OP_LOGCUMSUMEXP ? "" : " or i64");
}

/* ---- matmul, conv, pooling ---- */

static void want_dim(Ctx *c, IrRef r, const Sym *a, const char *what,
                     const Sym *b, const char *bwhat) {
  if (a != b)
    bad_value(c, r, "%s is %s but %s is %s", what, str(c, a), bwhat, str(c, b));
}

static void check_matmul(Ctx *c, IrRef r, const IrValue *v) {
  const IrValue *a = arg(c, v, 0), *b = arg(c, v, 1);
  int n = a->rank;
  if (n < 2 || b->rank != n || v->rank != n) {
    bad_value(c, r, "ranks %d x %d -> %d, expected equal and at least 2",
              a->rank, b->rank, v->rank);
    return;
  }
  for (int d = 0; d < n - 2; d++) {
    want_dim(c, r, a->shape[d], "batch dim of operand 0", b->shape[d],
             "operand 1's");
    want_dim(c, r, v->shape[d], "batch dim of the result", a->shape[d],
             "operand 0's");
  }
  want_dim(c, r, a->shape[n - 1], "K of operand 0", b->shape[n - 2],
           "operand 1's");
  want_dim(c, r, v->shape[n - 2], "M of the result", a->shape[n - 2],
           "operand 0's");
  want_dim(c, r, v->shape[n - 1], "N of the result", b->shape[n - 1],
           "operand 1's");
  want_dtype(c, r, v, 0, v->dtype);
  want_dtype(c, r, v, 1, v->dtype);
}

static void check_conv(Ctx *c, IrRef r, const IrValue *v) {
  const IrValue *x = arg(c, v, 0), *w = arg(c, v, 1);
  want_rank(c, r, x->rank, 4, "input");
  want_rank(c, r, w->rank, 4, "weight");
  want_rank(c, r, v->rank, 4, "result");
  want_nattrs(c, r, v, 7);
  for (int i = 0; i < v->nargs; i++) want_dtype(c, r, v, i, v->dtype);
  if (x->rank != 4 || w->rank != 4 || v->rank != 4) return;
  want_dim(c, r, v->shape[0], "batch of the result", x->shape[0], "input's");
  want_dim(c, r, v->shape[1], "channels of the result", w->shape[0],
           "weight's");
  if (v->nargs == 3) {
    const IrValue *b = arg(c, v, 2);
    if (b->rank != 1) bad_value(c, r, "bias has rank %d, expected 1", b->rank);
    else want_dim(c, r, b->shape[0], "bias size", w->shape[0], "weight's");
  }
}

static void check_pool(Ctx *c, IrRef r, const IrValue *v) {
  const IrValue *x = arg(c, v, 0);
  want_rank(c, r, x->rank, 4, "input");
  want_rank(c, r, v->rank, 4, "result");
  want_dtype(c, r, v, 0, v->dtype);
  if (v->op != OP_ADAPTIVE_AVG_POOL2D) want_nattrs(c, r, v, 6);
  if (x->rank != 4 || v->rank != 4) return;
  want_dim(c, r, v->shape[0], "batch of the result", x->shape[0], "input's");
  want_dim(c, r, v->shape[1], "channels of the result", x->shape[1],
           "input's");
}

/* ---- indexing by tensors ---- */

/* INDEX: x.shape[:d] + index.shape + x.shape[d+1:]; GATHER: index's shape,
 * the same rank as x (ops.h).  The index is i64 or i32. */
static void check_index(Ctx *c, IrRef r, const IrValue *v) {
  const IrValue *x = arg(c, v, 0), *ix = arg(c, v, 1);
  int64_t d;
  want_dtype(c, r, v, 0, v->dtype);
  if (ix->dtype != DT_I64 && ix->dtype != DT_I32)
    bad_value(c, r, "index operand is %s, expected i64 or i32", dt(ix->dtype));
  if (!want_nattrs(c, r, v, 1) || !attr_in(c, r, v, 0, 0, x->rank > 0 ? x->rank : 1, &d)) return;
  if (v->op == OP_GATHER) {
    if (ix->rank != x->rank && !(x->rank == 0 && ix->rank <= 1))
      bad_value(c, r, "index has rank %d, x rank %d", ix->rank, x->rank);
    else if (v->rank != ix->rank)
      bad_value(c, r, "result has rank %d, the index %d", v->rank, ix->rank);
    else
      for (int j = 0; j < v->rank; j++)
        if (v->shape[j] != ix->shape[j]) bad_value(c, r, "dim %d is not the index's", j);
    return;
  }
  int xr = x->rank > 0 ? x->rank : 1;
  if (v->rank != xr - 1 + ix->rank) {
    bad_value(c, r, "result has rank %d, expected %d", v->rank, xr - 1 + ix->rank);
    return;
  }
  for (int j = 0; j < v->rank; j++) {
    const Sym *want = j < d ? x->shape[j]
                      : j < d + ix->rank ? ix->shape[j - d]
                                         : x->shape[j - ix->rank + 1];
    if (v->shape[j] != want) bad_value(c, r, "dim %d is not %s", j, str(c, want));
  }
}

/* CAT: operands of the result's dtype and rank, equal sizes but along
 * the dim, where they add up to the result's size. */
static void check_cat(Ctx *c, IrRef r, const IrValue *v) {
  int64_t d;
  if (!want_nattrs(c, r, v, 1) || !attr_in(c, r, v, 0, 0, v->rank > 0 ? v->rank : 1, &d))
    return;
  if (v->rank < 1) {
    bad_value(c, r, "a 0-dim result");
    return;
  }
  const Sym *sum = sym_const(c->m->st, 0);
  for (int i = 0; i < v->nargs; i++) {
    const IrValue *a = arg(c, v, i);
    want_dtype(c, r, v, i, v->dtype);
    if (a->rank != v->rank) {
      bad_value(c, r, "operand %d has rank %d, expected %d", i, a->rank, v->rank);
      return;
    }
    for (int j = 0; j < v->rank; j++)
      if (j != d)
        want_dim(c, r, a->shape[j], arena_printf(c->m->arena, "dim %d of operand %d", j, i),
                 v->shape[j], "the result's");
    sum = sym_add(c->m->st, sum, a->shape[d]);
  }
  if (!sym_is(sym_sub(c->m->st, sum, v->shape[d]), 0))
    bad_value(c, r, "operand sizes along dim %lld add up to %s, the result has %s",
              (long long)d, str(c, sum), str(c, v->shape[d]));
}

/* ---- values and kernel tables ---- */

/* Pass annotations: only a computed value is inlined or gets a scratch
 * slot (views, parameters and constant tables own no scratch), never
 * both. */
static void check_plan(Ctx *c, IrRef r, const IrValue *v) {
  bool owns = op_kind(v->op) != IRK_VIEW && v->op != OP_PARAM && v->op != OP_TENSOR;
  if ((v->flags & IRF_INLINE) && !owns) bad_value(c, r, "only a computed value can be inline");
  if (v->slot < 0 || (v->slot > 0 && !owns))
    bad_value(c, r, "scratch slot %d on a value that owns no scratch", v->slot);
  if (v->slot > 0 && (v->flags & IRF_INLINE))
    bad_value(c, r, "an inline value has scratch slot %d", v->slot);
  if (v->out == 0) return;
  if (!owns || (v->flags & IRF_INLINE) || v->slot != 0)
    bad_value(c, r, "only a computed value without scratch can live in an output");
  else if (v->out < 0 || v->out > c->k->nresults ||
           ir_storage_root(c->k, c->k->results[v->out - 1].value) != r ||
           c->k->results[v->out - 1].dtype != v->dtype)
    bad_value(c, r, "computed in output %d, whose result is another value (or a view of one) "
              "or dtype", v->out - 1);
}

static void check_value(Ctx *c, IrRef r) {
  const IrValue *v = &c->k->values[r];
  c->ok[r] = check_form(c, r) && check_arity(c, r, v);
  if (!c->ok[r]) return;
  for (int d = 0; d < v->rank; d++) {
    int64_t n;
    if (sym_is_const(v->shape[d], &n) && n < 0)
      bad_value(c, r, "dim %d has negative size %lld", d, (long long)n);
  }
  OpKind kind = op_kind(v->op);
  if (kind != IRK_VIEW && v->op != OP_PARAM && !sym_is(v->offset, 0))
    bad_value(c, r, "a fresh value has storage offset %s", str(c, v->offset));
  check_plan(c, r, v);
  switch (kind) {
  case IRK_SOURCE: check_source(c, r, v); break;
  case IRK_VIEW: check_view(c, r, v); break;
  case IRK_COPY: check_copy(c, r, v); break;
  case IRK_UNARY:
  case IRK_BINARY:
  case IRK_COMPARE:
  case IRK_TERNARY: check_elementwise(c, r, v); break;
  case IRK_REDUCE: check_reduce(c, r, v); break;
  case IRK_SCAN: check_scan(c, r, v); break;
  case IRK_NORM: check_norm(c, r, v); break;
  case IRK_MATMUL: check_matmul(c, r, v); break;
  case IRK_CONV: check_conv(c, r, v); break;
  case IRK_POOL: check_pool(c, r, v); break;
  case IRK_INDEX: check_index(c, r, v); break;
  case IRK_JOIN: check_cat(c, r, v); break;
  }
}

static void check_params(Ctx *c) {
  for (int i = 0; i < c->k->nparams; i++) {
    const IrParam *p = &c->k->params[i];
    const char *what = arena_printf(c->m->arena, "param %d (%s)", i,
                                    p->name ? p->name : "?");
    if (p->is_tensor && !syms_ok(c, p->shape, p->rank))
      bad_entry(c, what, "declared shape missing or names undeclared symbols");
    IrRef r = p->value;
    if (r < 0 || r >= c->k->nvalues || c->k->values[r].op != OP_PARAM ||
        c->k->values[r].value.i != i)
      bad_entry(c, what, "value %%%d is not 'param %d'", r, i);
  }
}

static void check_symvars(Ctx *c) {
  for (int i = 0; i < c->k->nsyms; i++) {
    const IrSymVar *s = &c->k->syms[i];
    const char *what = arena_printf(c->m->arena, "sym %d (%s)", i,
                                    s->name ? s->name : "?");
    if (!s->name) bad_entry(c, what, "no name");
    if (s->param < 0 || s->param >= c->k->nparams) {
      bad_entry(c, what, "bound from parameter %d, out of range", s->param);
      continue;
    }
    const IrParam *p = &c->k->params[s->param];
    if (!p->is_tensor || s->dim < 0 || s->dim >= p->rank)
      bad_entry(c, what, "bound from dim %d of '%s', out of range", s->dim,
                p->name ? p->name : "?");
    if (s->kind == SYMK_STRIDE && p->layout != LAYOUT_STRIDED)
      bad_entry(c, what, "a stride symbol of a parameter that is not strided");
  }
}

static void check_checks(Ctx *c) {
  for (int i = 0; i < c->k->nchecks; i++) {
    const IrCheck *ck = &c->k->checks[i];
    const char *what = arena_printf(c->m->arena, "check %d", i);
    if (!sym_ok(c, ck->lhs) || !sym_ok(c, ck->rhs))
      bad_entry(c, what, "operand missing or names undeclared symbols");
    if (ck->op < CHK_EQ || ck->op > CHK_LT)
      bad_entry(c, what, "comparison %d unknown", (int)ck->op);
    if (!ck->msg) bad_entry(c, what, "no message");
  }
}

static void check_result(Ctx *c, int i) {
  const IrResult *res = &c->k->results[i];
  const char *what = arena_printf(c->m->arena, "result %d", i);
  if (!syms_ok(c, res->shape, res->rank)) {
    bad_entry(c, what, "declared shape missing or names undeclared symbols");
    return;
  }
  if (res->qstride && (res->layout != LAYOUT_STRIDED ||
                       !syms_ok(c, res->qstride, res->rank)))
    bad_entry(c, what, "query strides on a non-strided result or naming "
                       "undeclared symbols");
  IrRef r = res->value;
  if (r < 0 || r >= c->k->nvalues || !c->ok[r]) {
    bad_entry(c, what, "returns %%%d, not a sound value", r);
    return;
  }
  const IrValue *v = &c->k->values[r];
  if (v->dtype != res->dtype)
    bad_entry(c, what, "returns %s, declared %s", dt(v->dtype), dt(res->dtype));
  if (!sym_list_equal(v->shape, v->rank, res->shape, res->rank))
    bad_entry(c, what, "returned shape differs from the declared one");
}

static void check_kernel(Ctx *c) {
  const IrKernel *k = c->k;
  if (k->nvalues < 0 || (k->nvalues > 0 && !k->values)) {
    bad_entry(c, "values", "value list missing");
    return;
  }
  c->ok = calloc((size_t)k->nvalues + 1, sizeof *c->ok);
  if (!c->ok) ICE("out of memory");
  check_symvars(c);
  check_params(c);
  check_checks(c);
  for (IrRef r = 0; r < k->nvalues; r++) check_value(c, r);
  for (int i = 0; i < k->nresults; i++) check_result(c, i);
  bool all_ok = true;
  for (IrRef r = 0; r < k->nvalues; r++) all_ok &= c->ok[r];
  IrRef at = -1;
  /* (the module's symbol table only grows: hash-consed view strides) */
  const char *why = all_ok ? ir_check_groups((IrModule *)c->m, k, &at) : NULL;
  if (why) bad_value(c, at, "row group: %s", why);
  free(c->ok);
  c->ok = NULL;
}

int ir_verify(const IrModule *m, FILE *out) {
  Ctx c = {out, m, NULL, NULL, 0};
  for (int i = 0; i < m->nkernels; i++) {
    c.k = m->kernels[i];
    check_kernel(&c);
  }
  return c.count;
}
