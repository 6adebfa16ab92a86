/* sema_ops.c — semantic analysis of the ops that are not elementwise or
 * views: reductions, softmax/log_softmax, layer_norm, matmul, conv2d,
 * pooling and the factories (tensor, zeros, ones, full, arange).
 *
 * Each builder reads the evaluated call arguments (CallArgs), checks them
 * with PyTorch's rules (every error PyTorch raises is a diagnostic at the
 * function or method name, in the project's own words), and appends the
 * IR of ops.h: the op itself plus the CASTs, UNSQUEEZE/EXPAND/SQUEEZE
 * views its operand conventions need.  Result geometry is PyTorch's:
 * reductions, softmax, layer_norm, matmul and factories contiguous;
 * conv2d and pooling channels-last when the input (or conv weight)
 * suggests it.
 *
 * Needs: the helpers of sema.c declared in sema.h (argument readers,
 * sema_new_dense, sema_emit, sema_cast, sema_expand_to), geometry.h.
 * Unbatched (rank-3) inputs of conv2d and the pools are unsqueezed to
 * rank 4 and the result squeezed back (conv2d is written so in PyTorch;
 * the pools give the same geometry, a rank-3 pool result being always
 * contiguous), so the ops themselves only see rank 4. */
#include <math.h>
#include <string.h>

#include "sema.h"

/* sema_arg index that never matches a positional: keyword-only argument. */
enum { KW_ONLY = 1000 };

/* ---- small helpers ---- */

static SVal sv_error(void) {
  SVal v;
  memset(&v, 0, sizeof v);
  v.kind = SV_ERROR;
  return v;
}

static SVal sv_tensor(IrRef r, Loc loc) {
  SVal v = sv_error();
  if (r < 0) return v;
  v.kind = SV_TENSOR;
  v.ref = r;
  v.loc = loc;
  return v;
}

/* An argument that already failed: the error was reported. */
static bool has_error_arg(const CallArgs *c) {
  for (int i = 0; i < c->npos; i++)
    if (c->pos[i].kind == SV_ERROR) return true;
  for (int i = 0; i < c->nkw; i++)
    if (c->kw[i].kind == SV_ERROR) return true;
  return false;
}

static bool absent(const SVal *v) { return !v || v->kind == SV_NONE; }

static const Sym *K(Sema *s, int64_t v) { return sym_const(s->st, v); }

static const Sym **sym_array(Sema *s, int n) {
  return arena_alloc(s->a, sizeof(const Sym *) * (size_t)(n > 0 ? n : 1));
}

static void set_args(Sema *s, IrValue *v, const IrRef *args, int n) {
  v->nargs = n;
  v->args = arena_dup(s->a, args, sizeof(IrRef) * (size_t)n);
}

static void set_attrs(Sema *s, IrValue *v, const int64_t *a, int n) {
  v->nattrs = n;
  v->attrs = sym_array(s, n);
  for (int i = 0; i < n; i++) v->attrs[i] = K(s, a[i]);
}

static const char *shape_str(Sema *s, const Sym *const *shape, int n) {
  return geom_shape_str(s->a, shape, n);
}

static const char *sym_text(Sema *s, const Sym *v) {
  return sym_str(s->a, v);
}

/* A bool argument (keepdim=, ceil_mode=, ...); `dflt` when absent. */
static bool bool_arg(Sema *s, const SVal *v, const char *fn, const char *what,
                     bool dflt, bool *out) {
  if (absent(v)) {
    *out = dflt;
    return true;
  }
  if (v->kind != SV_BOOL) {
    diag_error(s->d, v->loc, "%s(): %s must be true or false", fn, what);
    return false;
  }
  *out = v->b;
  return true;
}

/* An optional dtype argument (`dtype=f64`); DT_NONE when absent. */
static bool dtype_arg(Sema *s, const SVal *v, const char *fn, DType *out) {
  *out = DT_NONE;
  if (absent(v)) return true;
  if (v->kind != SV_DTYPE) {
    diag_error(s->d, v->loc, "%s(): dtype must be a dtype such as f32", fn);
    return false;
  }
  *out = v->dt;
  return true;
}

/* The input tensor (positional 0 or input=); reports when missing. */
static bool input_arg(Sema *s, CallArgs *c, IrRef *out) {
  const SVal *v = sema_arg(s, c, 0, "input");
  if (!v) {
    diag_error(s->d, c->loc, "%s(): missing the input tensor", c->name);
    return false;
  }
  return sema_tensor_arg(s, v, "input", out);
}

/* Wraps a dim as PyTorch does; a 0-dim tensor accepts -1 and 0. */
static bool wrap_dim(Sema *s, CallArgs *c, int64_t d, int rank, int *out) {
  if (rank == 0) {
    if (d == 0 || d == -1) {
      *out = 0;
      return true;
    }
    diag_error(s->d, c->loc,
               "%s(): dim %lld is out of range for a 0-dim tensor "
               "(expected -1 or 0)", c->name, (long long)d);
    return false;
  }
  GeomCtx gc = sema_geom(s, c->loc);
  const char *msg = geom_wrap_dim(&gc, d, rank, out);
  if (msg) {
    diag_error(s->d, c->loc, "%s(): %s", c->name, msg);
    return false;
  }
  return true;
}

/* A run-time condition lhs <= rhs (PyTorch checks it when it runs). */
static void add_check_le(Sema *s, const Sym *lhs, const Sym *rhs,
                         const char *msg, Loc loc) {
  IrCheck ck = {.lhs = lhs, .rhs = rhs, .op = CHK_LE, .msg = msg, .loc = loc};
  ir_add_check(s->m, s->k, &ck);
}

static void add_check_eq(Sema *s, const Sym *lhs, const Sym *rhs,
                         const char *msg, Loc loc) {
  IrCheck ck = {.lhs = lhs, .rhs = rhs, .op = CHK_EQ, .msg = msg, .loc = loc};
  ir_add_check(s->m, s->k, &ck);
}

/* Emits a view op `op` of src with the geometry g. */
static IrRef emit_view(Sema *s, Op op, IrRef src, const Geom *g,
                       const int64_t *attrs, int nattrs, Loc loc) {
  DType dt = sema_val(s, src)->dtype;
  IrValue v = sema_new_dense(s, op, dt, g->rank, g->shape, loc);
  v.stride = g->stride;
  v.offset = g->offset;
  set_args(s, &v, &src, 1);
  set_attrs(s, &v, attrs, nattrs);
  return sema_emit(s, &v);
}

static IrRef emit_unsqueeze(Sema *s, IrRef r, int dim, Loc loc) {
  GeomCtx gc = sema_geom(s, loc);
  Geom in = sema_geom_of(s, r), out;
  const char *msg = geom_unsqueeze(&gc, &in, dim, &out);
  if (msg) ICE("unsqueeze for an op operand: %s", msg);
  int64_t a = dim;
  return emit_view(s, OP_UNSQUEEZE, r, &out, &a, 1, loc);
}

/* Removes the size-1 dims `dims` (ascending) in one SQUEEZE view. */
static IrRef emit_squeeze(Sema *s, IrRef r, const int64_t *dims, int n,
                          Loc loc) {
  GeomCtx gc = sema_geom(s, loc);
  Geom g = sema_geom_of(s, r);
  for (int i = n - 1; i >= 0; i--) { /* highest first: lower dims stay put */
    Geom out;
    const char *msg = geom_squeeze(&gc, &g, &dims[i], &out);
    if (msg) ICE("squeeze for an op result: %s", msg);
    g = out;
  }
  return emit_view(s, OP_SQUEEZE, r, &g, dims, n, loc);
}

/* Emits v (made by sema_new_dense, attrs and flags set) with operands
 * args[0..n); returns its ref. */
static IrRef emit_op(Sema *s, IrValue *v, const IrRef *args, int n) {
  set_args(s, v, args, n);
  return sema_emit(s, v);
}

/* ---- reductions ---- */

/* Reads dim= into mask (rank entries); *all when absent, None or []. */
static bool reduce_dims(Sema *s, CallArgs *c, const SVal *dv, int rank,
                        bool *mask, bool *all) {
  *all = absent(dv) || (dv->kind == SV_LIST && dv->nitems == 0);
  if (*all) return true;
  const SVal *items = dv->kind == SV_LIST ? dv->items : dv;
  int n = dv->kind == SV_LIST ? dv->nitems : 1;
  for (int i = 0; i < n; i++) {
    int64_t d;
    int w;
    if (!sema_int_arg(s, &items[i], "dim", &d)) return false;
    if (!wrap_dim(s, c, d, rank, &w)) return false;
    if (rank == 0) continue;
    if (mask[w]) {
      diag_error(s->d, c->loc,
                 "%s(): dim %d appears multiple times in the list of dims",
                 c->name, w);
      return false;
    }
    mask[w] = true;
  }
  return true;
}

/* amax/amin/argmax/argmin have no identity: a static size-0 reduced dim
 * is an error, as in PyTorch. */
static bool check_nonempty(Sema *s, CallArgs *c, const IrValue *xv,
                           const bool *mask) {
  for (int d = 0; d < xv->rank; d++) {
    if (mask[d] && !sym_is_const(xv->shape[d], NULL))
      add_check_le(s, K(s, 1), xv->shape[d],
                   arena_printf(s->a, "%s(): cannot reduce a size-0 dim",
                                c->name), c->loc);
    if (!mask[d] || !sym_is(xv->shape[d], 0)) continue;
    diag_error(s->d, c->loc,
               "%s(): cannot reduce dim %d of shape %s: it has size 0 and "
               "%s of no elements is undefined", c->name, d,
               shape_str(s, xv->shape, xv->rank), c->name);
    return false;
  }
  return true;
}

/* The result dtype and the dtype the operand must be cast to. */
static bool reduce_dtype(Sema *s, CallArgs *c, Op op, DType in, DType given,
                         DType *out) {
  DType dt = given != DT_NONE ? given : in;
  bool integral = !dtype_is_float(dt);
  if ((op == OP_SUM || op == OP_PROD) && given == DT_NONE && integral)
    dt = DT_I64;
  if (op == OP_MEAN && integral) {
    diag_error(s->d, c->loc,
               "mean(): the input has dtype %s, but mean needs a "
               "floating-point input; convert it with .to(f32) or pass "
               "dtype=f32", dtype_name(dt));
    return false;
  }
  if ((op == OP_ARGMAX || op == OP_ARGMIN) && in == DT_BOOL) {
    diag_error(s->d, c->loc,
               "%s(): not implemented for bool inputs (as in PyTorch); "
               "convert with .to(u8) first", c->name);
    return false;
  }
  *out = dt;
  return true;
}

/* Builds the reduction value over mask (all dims when mask is NULL). */
static IrRef emit_reduce(Sema *s, CallArgs *c, Op op, IrRef x, DType dt,
                         const bool *mask, bool keepdim) {
  IrValue xv = *sema_val(s, x);
  const Sym **shape = sym_array(s, xv.rank);
  int64_t *dims = arena_alloc(s->a, sizeof(int64_t) * (size_t)(xv.rank + 1));
  int rank = 0, nd = 0;
  for (int d = 0; d < xv.rank; d++) {
    if (mask && !mask[d]) {
      shape[rank++] = xv.shape[d];
      continue;
    }
    dims[nd++] = d;
    if (keepdim) shape[rank++] = K(s, 1);
  }
  bool argred = op == OP_ARGMAX || op == OP_ARGMIN;
  IrValue v = sema_new_dense(s, op, dt, rank, shape, c->loc);
  if (!(argred && !mask)) set_attrs(s, &v, dims, nd);
  if (keepdim) v.flags |= IRF_KEEPDIM;
  return emit_op(s, &v, &x, 1);
}

static SVal reduce_arg(Sema *s, Op op, CallArgs *c, IrRef x) {
  const SVal *dv = sema_arg(s, c, 1, "dim");
  const SVal *kv = sema_arg(s, c, 2, "keepdim");
  bool keepdim;
  if (!bool_arg(s, kv, c->name, "keepdim", false, &keepdim)) return sv_error();
  if (!sema_args_done(s, c, 3)) return sv_error();
  IrValue xv = *sema_val(s, x);
  if (!absent(dv) && dv->kind == SV_LIST) {
    diag_error(s->d, c->loc,
               "%s(): dim must be a single int or None, not a list", c->name);
    return sv_error();
  }
  DType dt;
  if (!reduce_dtype(s, c, op, xv.dtype, DT_NONE, &dt)) return sv_error();
  bool *mask = arena_alloc(s->a, (size_t)xv.rank + 1);
  bool all;
  if (!reduce_dims(s, c, dv, xv.rank, mask, &all)) return sv_error();
  if (all) memset(mask, 1, (size_t)xv.rank + 1);
  if (!check_nonempty(s, c, &xv, mask)) return sv_error();
  return sv_tensor(emit_reduce(s, c, op, x, DT_I64, all ? NULL : mask,
                               keepdim), c->loc);
}

SVal sema_reduce(Sema *s, Op op, CallArgs *c) {
  if (has_error_arg(c)) return sv_error();
  IrRef x;
  if (!input_arg(s, c, &x)) return sv_error();
  if (op == OP_ARGMAX || op == OP_ARGMIN) return reduce_arg(s, op, c, x);
  bool has_dtype = op == OP_SUM || op == OP_MEAN || op == OP_PROD;
  const SVal *dv = sema_arg(s, c, 1, "dim");
  const SVal *kv = sema_arg(s, c, 2, "keepdim");
  const SVal *tv = has_dtype ? sema_arg(s, c, KW_ONLY, "dtype") : NULL;
  bool keepdim;
  DType given, dt;
  if (!bool_arg(s, kv, c->name, "keepdim", false, &keepdim) ||
      !dtype_arg(s, tv, c->name, &given) || !sema_args_done(s, c, 3))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  if (!reduce_dtype(s, c, op, xv.dtype, given, &dt)) return sv_error();
  bool *mask = arena_alloc(s->a, (size_t)xv.rank + 1);
  bool all;
  if (!reduce_dims(s, c, dv, xv.rank, mask, &all)) return sv_error();
  if (all) memset(mask, 1, (size_t)xv.rank + 1);
  if ((op == OP_AMAX || op == OP_AMIN) && !check_nonempty(s, c, &xv, mask))
    return sv_error();
  /* sum/prod of integers accumulate in i64; dtype= converts first. */
  x = sema_cast(s, x, dt, c->loc);
  if (dtype_is_float(dt) || dt == DT_I64 || (op != OP_SUM && op != OP_PROD))
    return sv_tensor(emit_reduce(s, c, op, x, dt, mask, keepdim), c->loc);
  /* A narrower integer or bool dtype=: PyTorch adds (multiplies) in that
   * type, wrapping; + and * commute with truncation mod 2^n, and bool's
   * saturating + and * are "!= 0" of the i64 sum and product of 0s and 1s, so
   * reducing in i64 and casting the result back is exact. */
  x = sema_cast(s, x, DT_I64, c->loc);
  IrRef r = emit_reduce(s, c, op, x, DT_I64, mask, keepdim);
  return sv_tensor(sema_cast(s, r, dt, c->loc), c->loc);
}

/* ---- softmax, log_softmax, layer_norm ---- */

/* PyTorch's CPU softmax and log_softmax return before dispatching on the
 * dtype when the input has no elements, so an empty integer or bool input
 * gives an empty (contiguous) result of that dtype instead of an error. */
static IrRef empty_result(Sema *s, DType dt, const IrValue *xv, Loc loc) {
  IrValue v = sema_new_dense(s, OP_FULL, dt, xv->rank, xv->shape, loc);
  v.value = (Scalar){.i = 0};
  return sema_emit(s, &v);
}

SVal sema_softmax(Sema *s, Op op, CallArgs *c) {
  if (has_error_arg(c)) return sv_error();
  IrRef x;
  if (!input_arg(s, c, &x)) return sv_error();
  const SVal *dv = sema_arg(s, c, 1, "dim");
  const SVal *tv = sema_arg(s, c, 2, "dtype");
  DType given;
  if (!dtype_arg(s, tv, c->name, &given) || !sema_args_done(s, c, 3))
    return sv_error();
  if (absent(dv)) {
    diag_error(s->d, c->loc,
               "%s(): the dim to normalize over is required, e.g. "
               "%s(x, dim=-1)", c->name, c->name);
    return sv_error();
  }
  int64_t d;
  int w;
  IrValue xv = *sema_val(s, x);
  if (!sema_int_arg(s, dv, "dim", &d) || !wrap_dim(s, c, d, xv.rank, &w))
    return sv_error();
  DType dt = given != DT_NONE ? given : xv.dtype;
  if (!dtype_is_float(dt) && sym_is(sym_prod(s->st, xv.shape, xv.rank), 0))
    return sv_tensor(empty_result(s, dt, &xv, c->loc), c->loc);
  if (!dtype_is_float(dt)) {
    diag_error(s->d, c->loc,
               "%s(): not implemented for dtype %s; it needs a "
               "floating-point input: convert with .to(f32) or pass "
               "dtype=f32", c->name, dtype_name(dt));
    return sv_error();
  }
  x = sema_cast(s, x, dt, c->loc);
  /* PyTorch allocates softmax outputs contiguous (LEGACY_CONTIGUOUS). */
  IrValue v = sema_new_dense(s, op, dt, xv.rank, xv.shape, c->loc);
  int64_t a = w;
  set_attrs(s, &v, &a, 1);
  return sv_tensor(emit_op(s, &v, &x, 1), c->loc);
}

/* An int or a list of ints, possibly symbolic (normalized_shape). */
static bool sym_list(Sema *s, const SVal *v, const char *what,
                     const Sym ***out, int *n) {
  const SVal *items = v->kind == SV_LIST ? v->items : v;
  *n = v->kind == SV_LIST ? v->nitems : 1;
  *out = sym_array(s, *n);
  for (int i = 0; i < *n; i++)
    if (!sema_sym_arg(s, &items[i], what, &(*out)[i])) return false;
  return true;
}

/* weight= / bias= of layer_norm: exactly normalized_shape and x's dtype. */
static bool ln_affine(Sema *s, CallArgs *c, const SVal *v, const char *what,
                      DType dt, const Sym *const *ns, int nn, IrRef *out) {
  *out = -1;
  if (absent(v)) return true;
  if (!sema_tensor_arg(s, v, what, out)) return false;
  IrValue wv = *sema_val(s, *out);
  if (!sym_list_equal(wv.shape, wv.rank, ns, nn)) {
    diag_error(s->d, c->loc,
               "layer_norm(): %s must have shape normalized_shape = %s, "
               "but it has shape %s", what, shape_str(s, ns, nn),
               shape_str(s, wv.shape, wv.rank));
    sema_note_origin(s, *out);
    return false;
  }
  if (wv.dtype != dt) {
    diag_error(s->d, c->loc,
               "layer_norm(): %s has dtype %s but the input has dtype %s; "
               "convert one with .to()", what, dtype_name(wv.dtype),
               dtype_name(dt));
    return false;
  }
  return true;
}

/* normalized_shape must equal x's trailing dims. */
static bool ln_shape(Sema *s, CallArgs *c, const IrValue *xv,
                     const Sym *const *ns, int nn) {
  if (nn == 0) {
    diag_error(s->d, c->loc,
               "layer_norm(): normalized_shape must have at least one dim");
    return false;
  }
  bool ok = nn <= xv->rank &&
            sym_list_equal(xv->shape + xv->rank - nn, nn, ns, nn);
  if (!ok)
    diag_error(s->d, c->loc,
               "layer_norm(): normalized_shape %s must match the trailing "
               "dims of the input, i.e. an input of shape [*, %s, but the "
               "input has shape %s", shape_str(s, ns, nn),
               shape_str(s, ns, nn) + 1, shape_str(s, xv->shape, xv->rank));
  return ok;
}

SVal sema_layer_norm(Sema *s, CallArgs *c) {
  if (has_error_arg(c)) return sv_error();
  IrRef x, w, b;
  if (!input_arg(s, c, &x)) return sv_error();
  const SVal *nv = sema_arg(s, c, 1, "normalized_shape");
  const SVal *wv = sema_arg(s, c, 2, "weight");
  const SVal *bv = sema_arg(s, c, 3, "bias");
  const SVal *ev = sema_arg(s, c, 4, "eps");
  if (!sema_args_done(s, c, 5)) return sv_error();
  if (!nv) {
    diag_error(s->d, c->loc, "layer_norm(): missing normalized_shape");
    return sv_error();
  }
  double eps = 1e-5;
  if (ev && ev->kind == SV_FLOAT) eps = ev->f;
  else if (ev && ev->kind == SV_INT) {
    int64_t e;
    if (!sema_int_arg(s, ev, "eps", &e)) return sv_error();
    eps = (double)e;
  } else if (!absent(ev)) {
    diag_error(s->d, ev->loc, "layer_norm(): eps must be a number");
    return sv_error();
  }
  const Sym **ns;
  int nn;
  IrValue xv = *sema_val(s, x);
  if (!sym_list(s, nv, "normalized_shape", &ns, &nn) ||
      !ln_shape(s, c, &xv, ns, nn))
    return sv_error();
  if (!dtype_is_float(xv.dtype)) {
    diag_error(s->d, c->loc,
               "layer_norm(): not implemented for dtype %s; it needs a "
               "floating-point input: convert with .to(f32)",
               dtype_name(xv.dtype));
    return sv_error();
  }
  if (!ln_affine(s, c, wv, "weight", xv.dtype, ns, nn, &w) ||
      !ln_affine(s, c, bv, "bias", xv.dtype, ns, nn, &b))
    return sv_error();
  IrValue v = sema_new_dense(s, OP_LAYER_NORM, xv.dtype, xv.rank, xv.shape,
                             c->loc);
  int64_t a = nn;
  set_attrs(s, &v, &a, 1);
  v.fattr[0] = eps;
  IrRef args[3] = {x, 0, 0};
  int n = 1;
  if (w >= 0) args[n++] = w, v.flags |= IRF_WEIGHT;
  if (b >= 0) args[n++] = b, v.flags |= IRF_BIAS;
  return sv_tensor(emit_op(s, &v, args, n), c->loc);
}

/* ---- matmul ---- */

static bool matmul_types(Sema *s, const IrValue *a, const IrValue *b,
                         Loc loc) {
  if (a->rank == 0 || b->rank == 0) {
    diag_error(s->d, loc,
               "matmul: both operands must be at least 1-D, but they are "
               "%d-D and %d-D; use * to multiply by a scalar", a->rank,
               b->rank);
    return false;
  }
  if (a->dtype != b->dtype) {
    diag_error(s->d, loc,
               "matmul: operands must have the same dtype, but got %s and "
               "%s (matmul does not promote); convert one with .to()",
               dtype_name(a->dtype), dtype_name(b->dtype));
    return false;
  }
  if (a->dtype == DT_BOOL) {
    diag_error(s->d, loc,
               "matmul: not implemented for bool operands; convert them "
               "with .to(i64) or .to(f32)");
    return false;
  }
  return true;
}

/* Checks that a's last dim equals b's contracted dim (provably). */
static bool matmul_inner(Sema *s, const IrValue *a, const IrValue *b,
                         Loc loc) {
  const Sym *ka = a->shape[a->rank - 1];
  const Sym *kb = b->shape[b->rank == 1 ? 0 : b->rank - 2];
  if (ka == kb) return true;
  const char *which = b->rank == 1 ? "its only" : "its second-to-last";
  diag_error(s->d, loc,
             "matmul: cannot multiply shapes %s and %s: the first operand's "
             "last dim (%s) must equal the second's contracted dim, %s dim "
             "(%s)%s", shape_str(s, a->shape, a->rank),
             shape_str(s, b->shape, b->rank), sym_text(s, ka), which,
             sym_text(s, kb),
             sym_is_const(ka, NULL) && sym_is_const(kb, NULL)
                 ? ""
                 : "; symbolic dims must be the same expression");
  return false;
}

static void matmul_notes(Sema *s, IrRef a, IrRef b) {
  sema_note_origin(s, a);
  sema_note_origin(s, b);
}

SVal sema_matmul(Sema *s, IrRef a, IrRef b, Loc loc) {
  IrValue av = *sema_val(s, a), bv = *sema_val(s, b);
  if (!matmul_types(s, &av, &bv, loc)) return sv_error();
  if (!matmul_inner(s, &av, &bv, loc)) {
    matmul_notes(s, a, b);
    return sv_error();
  }
  /* 1-D operands become [1, K] and [K, 1]; squeezed off at the end. */
  if (av.rank == 1) a = emit_unsqueeze(s, a, 0, loc);
  if (bv.rank == 1) b = emit_unsqueeze(s, b, 1, loc);
  IrValue A = *sema_val(s, a), B = *sema_val(s, b);
  GeomCtx gc = sema_geom(s, loc);
  const Sym **batch;
  int nb;
  const char *msg = geom_broadcast(&gc, A.shape, A.rank - 2, B.shape,
                                   B.rank - 2, &batch, &nb);
  if (msg) {
    diag_error(s->d, loc,
               "matmul: the batch dims of %s and %s do not broadcast: %s",
               shape_str(s, av.shape, av.rank),
               shape_str(s, bv.shape, bv.rank), msg);
    return sv_error();
  }
  const Sym **sa = sym_array(s, nb + 2), **sb = sym_array(s, nb + 2),
            **sr = sym_array(s, nb + 2);
  for (int i = 0; i < nb; i++) sa[i] = sb[i] = sr[i] = batch[i];
  const Sym *M = A.shape[A.rank - 2], *Kd = A.shape[A.rank - 1],
            *N = B.shape[B.rank - 1];
  sa[nb] = M, sa[nb + 1] = Kd;
  sb[nb] = Kd, sb[nb + 1] = N;
  sr[nb] = M, sr[nb + 1] = N;
  a = sema_expand_to(s, a, nb + 2, sa, loc);
  b = sema_expand_to(s, b, nb + 2, sb, loc);
  IrValue v = sema_new_dense(s, OP_MATMUL, av.dtype, nb + 2, sr, loc);
  IrRef args[2] = {a, b};
  IrRef r = emit_op(s, &v, args, 2);
  int64_t sq[2];
  int nsq = 0;
  if (av.rank == 1) sq[nsq++] = nb;
  if (bv.rank == 1) sq[nsq++] = nb + 1;
  if (nsq) r = emit_squeeze(s, r, sq, nsq, loc);
  return sv_tensor(r, loc);
}

/* ---- conv2d and pooling: shared pieces ---- */

/* An int or a pair of ints; `dflt` (both) when absent or None. */
static bool pair_arg(Sema *s, CallArgs *c, const SVal *v, const char *what,
                     int64_t dflt, int64_t out[2]) {
  out[0] = out[1] = dflt;
  if (absent(v) || (v->kind == SV_LIST && v->nitems == 0)) return true;
  int64_t buf[2];
  int n = 0;
  if (!sema_int_list(s, v, what, buf, &n, 2)) return false;
  if (n == 1) buf[1] = buf[0];
  else if (n != 2) {
    diag_error(s->d, c->loc, "%s(): %s must be an int or a pair of ints",
               c->name, what);
    return false;
  }
  out[0] = buf[0], out[1] = buf[1];
  return true;
}

/* An input of rank 3 (unbatched) or 4; rank 3 gets a leading 1. */
static bool batched_input(Sema *s, CallArgs *c, IrRef *x, bool *unbatched) {
  IrValue xv = *sema_val(s, *x);
  *unbatched = xv.rank == 3;
  if (xv.rank != 3 && xv.rank != 4) {
    diag_error(s->d, c->loc,
               "%s(): expected a 3-D (unbatched) or 4-D (batched) input "
               "[N, C, H, W], but got shape %s", c->name,
               shape_str(s, xv.shape, xv.rank));
    sema_note_origin(s, *x);
    return false;
  }
  if (*unbatched) *x = emit_unsqueeze(s, *x, 0, c->loc);
  return true;
}

/* Output size of a sliding window: (in + 2p - d*(k-1) - 1) // s + 1. */
static const Sym *window_out(Sema *s, const Sym *in, const Sym *k, int64_t st,
                             int64_t pad, int64_t dil) {
  const Sym *span = sym_add(s->st, sym_mul(s->st, K(s, dil),
                                           sym_sub(s->st, k, K(s, 1))),
                            K(s, 1));
  const Sym *room = sym_sub(s->st, sym_add(s->st, in, K(s, 2 * pad)), span);
  /* a // s + 1 written as (a + s) // s, so that H//2 comes out as H//2 */
  return sym_floordiv(s->st, sym_add(s->st, room, K(s, st)), K(s, st));
}

/* Output dims must be >= 1: static error, or a run-time check. */
static bool window_fits(Sema *s, CallArgs *c, const IrValue *xv,
                        const int64_t pad[2], const Sym *oh, const Sym *ow,
                        const char *kernel) {
  int64_t h, w;
  bool sh = sym_is_const(oh, &h), sw = sym_is_const(ow, &w);
  const Sym *ph = sym_add(s->st, xv->shape[2], K(s, 2 * pad[0]));
  const Sym *pw = sym_add(s->st, xv->shape[3], K(s, 2 * pad[1]));
  const char *msg = arena_printf(
      s->a, "%s(): the padded input size [%s, %s] is smaller than the "
      "kernel %s", c->name, sym_text(s, ph), sym_text(s, pw), kernel);
  if ((sh && h < 1) || (sw && w < 1)) {
    diag_error(s->d, c->loc,
               "%s: the output would be %sx%s; use a smaller kernel, more "
               "padding or a larger input", msg, sym_text(s, oh),
               sym_text(s, ow));
    return false;
  }
  if (!sh) add_check_le(s, K(s, 1), oh, msg, c->loc);
  if (!sw) add_check_le(s, K(s, 1), ow, msg, c->loc);
  return true;
}

/* Non-batch dims of a pooling/conv input must not be statically 0. */
static bool nonzero_dims(Sema *s, CallArgs *c, IrRef x) {
  IrValue xv = *sema_val(s, x);
  for (int d = 1; d < 4; d++) {
    if (!sym_is(xv.shape[d], 0)) continue;
    diag_error(s->d, c->loc,
               "%s(): the input %s has a size-0 dim %d; only the batch dim "
               "may be empty", c->name, shape_str(s, xv.shape, 4), d);
    return false;
  }
  return true;
}

/* PyTorch's convolution runs an empty input only when its batch or
 * channel dim is 0: an input [N, C, 0, W] with N, C >= 1 is an error even
 * when padding makes room for the kernel.  A dim without padding is
 * already >= 1 by window_fits (it holds the kernel), so only padded dims
 * are checked: statically, or at kernel entry as min(N*C, 1) <= H*W. */
static bool conv_nonempty(Sema *s, CallArgs *c, const IrValue *xv,
                          const int64_t pad[2]) {
  const Sym *spatial = K(s, 1);
  for (int d = 0; d < 2; d++)
    if (pad[d] > 0) spatial = sym_mul(s->st, spatial, xv->shape[2 + d]);
  const Sym *nc = sym_mul(s->st, xv->shape[0], xv->shape[1]);
  const Sym *need = sym_min(s->st, nc, K(s, 1));
  int64_t have, want;
  bool static_have = sym_is_const(spatial, &have);
  bool static_want = sym_is_const(need, &want);
  const char *msg = arena_printf(
      s->a, "conv2d(): the input %s has an empty spatial dim; only the "
      "batch or the channel dim may be 0 (as in PyTorch)",
      shape_str(s, xv->shape, 4));
  if (static_have && static_want) {
    if (want <= have) return true;
    diag_error(s->d, c->loc, "%s: give it a nonzero height and width", msg);
    return false;
  }
  if (!(static_have && have >= 1) && !(static_want && want == 0))
    add_check_le(s, need, spatial, msg, c->loc);
  return true;
}

/* Fresh [N, C, oh, ow] result, channels-last when `cl`. */
static IrValue window_result(Sema *s, Op op, DType dt, const Sym *n,
                             const Sym *ch, const Sym *oh, const Sym *ow,
                             bool cl, Loc loc) {
  const Sym **shape = sym_array(s, 4);
  shape[0] = n, shape[1] = ch, shape[2] = oh, shape[3] = ow;
  IrValue v = sema_new_dense(s, op, dt, 4, shape, loc);
  if (cl) {
    GeomCtx gc = sema_geom(s, loc);
    Geom g;
    geom_channels_last(&gc, shape, &g);
    v.stride = g.stride;
  }
  return v;
}

static bool suggests_cl(Sema *s, IrRef r) {
  Geom g = sema_geom_of(s, r);
  return g.rank == 4 && geom_suggests_channels_last(&g);
}

static IrRef finish_batched(Sema *s, IrRef r, bool unbatched, Loc loc) {
  int64_t d0 = 0;
  return unbatched ? emit_squeeze(s, r, &d0, 1, loc) : r;
}

/* ---- conv2d ---- */

typedef struct ConvParams {
  int64_t stride[2], pad[2], dil[2], groups;
  bool trim[2]; /* padding="same" with an odd total: drop output row/col 0 */
} ConvParams;

/* padding="valid" / "same" (stride 1, static kernel).  An odd total
 * padding P puts the extra row/column at the end (PyTorch): the conv pads
 * ceil(P/2) on both sides and trims its first output row/column. */
static bool conv_pad_str(Sema *s, CallArgs *c, const char *p,
                         const IrValue *wv, ConvParams *cp) {
  if (strcmp(p, "valid") == 0) {
    cp->pad[0] = cp->pad[1] = 0;
    return true;
  }
  if (strcmp(p, "same") != 0) {
    diag_error(s->d, c->loc,
               "conv2d(): padding must be an int, a pair, \"valid\" or "
               "\"same\", not \"%s\"", p);
    return false;
  }
  if (cp->stride[0] != 1 || cp->stride[1] != 1) {
    diag_error(s->d, c->loc,
               "conv2d(): padding=\"same\" needs stride 1 (as in PyTorch)");
    return false;
  }
  for (int i = 0; i < 2; i++) {
    int64_t k;
    if (!sym_is_const(wv->shape[2 + i], &k)) {
      diag_error(s->d, c->loc,
                 "conv2d(): padding=\"same\" with kernel %s is not "
                 "supported by tdsl (it needs a static kernel size); pass "
                 "explicit padding",
                 shape_str(s, wv->shape + 2, 2));
      return false;
    }
    int64_t total = cp->dil[i] * (k - 1);
    cp->pad[i] = (total + 1) / 2;
    cp->trim[i] = total % 2 != 0;
  }
  return true;
}

static bool conv_params(Sema *s, CallArgs *c, const IrValue *wv,
                        ConvParams *cp) {
  const SVal *sv = sema_arg(s, c, 3, "stride");
  const SVal *pv = sema_arg(s, c, 4, "padding");
  const SVal *dv = sema_arg(s, c, 5, "dilation");
  const SVal *gv = sema_arg(s, c, 6, "groups");
  cp->groups = 1;
  cp->trim[0] = cp->trim[1] = false;
  if (!pair_arg(s, c, sv, "stride", 1, cp->stride) ||
      !pair_arg(s, c, dv, "dilation", 1, cp->dil) ||
      (!absent(gv) && !sema_int_arg(s, gv, "groups", &cp->groups)))
    return false;
  if (pv && pv->kind == SV_STR) {
    if (!conv_pad_str(s, c, pv->s, wv, cp)) return false;
  } else if (!pair_arg(s, c, pv, "padding", 0, cp->pad)) {
    return false;
  }
  const char *bad = NULL;
  for (int i = 0; i < 2 && !bad; i++) {
    if (cp->stride[i] <= 0) bad = "stride must be positive";
    else if (cp->dil[i] <= 0) bad = "dilation must be positive";
    else if (cp->pad[i] < 0) bad = "padding must not be negative";
  }
  if (!bad && cp->groups <= 0) bad = "groups must be positive";
  if (bad) diag_error(s->d, c->loc, "conv2d(): %s", bad);
  return !bad;
}

static bool conv_types(Sema *s, CallArgs *c, const IrValue *xv,
                       const IrValue *wv) {
  /* PyTorch's CPU convolution takes every dtype but bool. */
  if (xv->dtype == DT_BOOL) {
    diag_error(s->d, c->loc,
               "conv2d(): not implemented for bool tensors; convert with "
               ".to(f32)");
    return false;
  }
  if (wv->dtype != xv->dtype) {
    diag_error(s->d, c->loc,
               "conv2d(): the input has dtype %s but the weight has dtype "
               "%s; they must be the same", dtype_name(xv->dtype),
               dtype_name(wv->dtype));
    return false;
  }
  if (wv->rank != 4) {
    diag_error(s->d, c->loc,
               "conv2d(): the weight must be 4-D [out_channels, "
               "in_channels/groups, kH, kW], but has shape %s",
               shape_str(s, wv->shape, wv->rank));
    return false;
  }
  return true;
}

/* C == w.shape[1] * groups; O divisible by groups. */
static bool conv_channels(Sema *s, CallArgs *c, const IrValue *xv,
                          const IrValue *wv, int64_t groups) {
  const Sym *want = sym_mul(s->st, wv->shape[1], K(s, groups));
  if (xv->shape[1] != want) {
    diag_error(s->d, c->loc,
               "conv2d(): the weight %s with groups=%lld expects an input "
               "with %s channels, but the input %s has %s channels",
               shape_str(s, wv->shape, 4), (long long)groups,
               sym_text(s, want), shape_str(s, xv->shape, 4),
               sym_text(s, xv->shape[1]));
    return false;
  }
  const Sym *rem = sym_mod(s->st, wv->shape[0], K(s, groups));
  int64_t r;
  if (sym_is_const(rem, &r) && r != 0) {
    diag_error(s->d, c->loc,
               "conv2d(): the weight's %s output channels are not divisible "
               "by groups=%lld", sym_text(s, wv->shape[0]), (long long)groups);
    return false;
  }
  if (!sym_is_const(rem, NULL))
    add_check_eq(s, rem, K(s, 0),
                 "conv2d(): out_channels must be divisible by groups", c->loc);
  return true;
}

static bool conv_bias(Sema *s, CallArgs *c, const SVal *v, const IrValue *wv,
                      IrRef *out) {
  *out = -1;
  if (absent(v)) return true;
  if (!sema_tensor_arg(s, v, "bias", out)) return false;
  IrValue bv = *sema_val(s, *out);
  if (bv.rank != 1 || bv.shape[0] != wv->shape[0]) {
    diag_error(s->d, c->loc,
               "conv2d(): bias must have shape [%s] (one per output "
               "channel), but has shape %s", sym_text(s, wv->shape[0]),
               shape_str(s, bv.shape, bv.rank));
    return false;
  }
  if (bv.dtype != wv->dtype) {
    diag_error(s->d, c->loc,
               "conv2d(): bias has dtype %s but the weight has dtype %s",
               dtype_name(bv.dtype), dtype_name(wv->dtype));
    return false;
  }
  return true;
}

/* The kernel's extent as "KHxKW", dilated when dilation > 1. */
static const char *conv_kernel_str(Sema *s, const IrValue *wv,
                                   const ConvParams *cp) {
  const Sym *e[2];
  for (int i = 0; i < 2; i++)
    e[i] = sym_add(s->st, sym_mul(s->st, K(s, cp->dil[i]),
                                  sym_sub(s->st, wv->shape[2 + i], K(s, 1))),
                   K(s, 1));
  bool dilated = cp->dil[0] != 1 || cp->dil[1] != 1;
  return arena_printf(s->a, "%s(%sx%s)", dilated ? "dilated " : "",
                      sym_text(s, e[0]), sym_text(s, e[1]));
}

/* The conv result r (one row/column too many where cp->trim) without its
 * first row/column, copied into a fresh tensor with the strides the conv
 * result itself has (channels-last when `cl`), as PyTorch's is. */
static IrRef conv_trim(Sema *s, IrRef r, const ConvParams *cp, bool cl,
                       Loc loc) {
  GeomCtx gc = sema_geom(s, loc);
  for (int i = 0; i < 2; i++) {
    if (!cp->trim[i]) continue;
    Geom in = sema_geom_of(s, r), out;
    const char *msg = geom_slice(&gc, &in, 2 + i, K(s, 1), NULL, NULL, &out);
    if (msg) ICE("conv2d same-padding trim: %s", msg);
    int64_t a[4] = {2 + i, 1, 0, 1};
    IrRef t = emit_view(s, OP_SLICE, r, &out, a, 4, loc);
    sema_val(s, t)->attrs[2] = in.shape[2 + i]; /* end: the whole dim */
    r = t;
  }
  IrValue rv = *sema_val(s, r);
  IrValue v = window_result(s, OP_COPY, rv.dtype, rv.shape[0], rv.shape[1],
                            rv.shape[2], rv.shape[3], cl, loc);
  v.flags = cl ? IRF_CL : 0;
  return emit_op(s, &v, &r, 1);
}

SVal sema_conv2d(Sema *s, CallArgs *c) {
  if (has_error_arg(c)) return sv_error();
  IrRef x, w, b;
  const SVal *wa = sema_arg(s, c, 1, "weight");
  if (!input_arg(s, c, &x)) return sv_error();
  if (!wa) {
    diag_error(s->d, c->loc, "conv2d(): missing the weight tensor");
    return sv_error();
  }
  if (!sema_tensor_arg(s, wa, "weight", &w)) return sv_error();
  IrValue xv0 = *sema_val(s, x), wv = *sema_val(s, w);
  ConvParams cp;
  if (!conv_types(s, c, &xv0, &wv) || !conv_params(s, c, &wv, &cp) ||
      !conv_bias(s, c, sema_arg(s, c, 2, "bias"), &wv, &b) ||
      !sema_args_done(s, c, 7))
    return sv_error();
  /* PyTorch's dilated CPU convolution has no kernel for these types. */
  if ((cp.dil[0] != 1 || cp.dil[1] != 1) &&
      (xv0.dtype == DT_U8 || xv0.dtype == DT_I8 || xv0.dtype == DT_I16)) {
    diag_error(s->d, c->loc,
               "conv2d(): dilation is not implemented for dtype %s; convert "
               "with .to(i32) or .to(f32)", dtype_name(xv0.dtype));
    return sv_error();
  }
  bool unbatched;
  if (!batched_input(s, c, &x, &unbatched)) return sv_error();
  IrValue xv = *sema_val(s, x);
  if (!conv_channels(s, c, &xv, &wv, cp.groups)) {
    sema_note_origin(s, x);
    return sv_error();
  }
  const Sym *oh = window_out(s, xv.shape[2], wv.shape[2], cp.stride[0],
                             cp.pad[0], cp.dil[0]);
  const Sym *ow = window_out(s, xv.shape[3], wv.shape[3], cp.stride[1],
                             cp.pad[1], cp.dil[1]);
  if (!window_fits(s, c, &xv, cp.pad, oh, ow, conv_kernel_str(s, &wv, &cp)) ||
      !conv_nonempty(s, c, &xv, cp.pad))
    return sv_error();
  bool cl = (suggests_cl(s, x) || suggests_cl(s, w)) && xv.dtype != DT_F64;
  IrValue v = window_result(s, OP_CONV2D, xv.dtype, xv.shape[0], wv.shape[0],
                            oh, ow, cl, c->loc);
  int64_t attrs[7] = {cp.stride[0], cp.stride[1], cp.pad[0], cp.pad[1],
                      cp.dil[0],    cp.dil[1],    cp.groups};
  set_attrs(s, &v, attrs, 7);
  IrRef args[3] = {x, w, b};
  if (b >= 0) v.flags |= IRF_BIAS;
  IrRef r = emit_op(s, &v, args, b >= 0 ? 3 : 2);
  if (cp.trim[0] || cp.trim[1]) r = conv_trim(s, r, &cp, cl, c->loc);
  return sv_tensor(finish_batched(s, r, unbatched, c->loc), c->loc);
}

/* ---- pooling ---- */

static bool pool_dtype(Sema *s, CallArgs *c, Op op, DType dt) {
  /* PyTorch's CPU kernels: max pooling takes any non-bool type, average
   * pooling floats and i64 only, adaptive average pooling floats only. */
  bool ok = dt != DT_BOOL &&
            (op == OP_MAX_POOL2D || dtype_is_float(dt) ||
             (dt == DT_I64 && op == OP_AVG_POOL2D));
  if (!ok)
    diag_error(s->d, c->loc,
               "%s(): not implemented for dtype %s; convert with .to(f32)",
               c->name, dtype_name(dt));
  return ok;
}

/* Options PyTorch has that tdsl only accepts at their defaults. */
static bool pool_defaults(Sema *s, CallArgs *c, Op op) {
  const char *bad = NULL;
  bool ceil, cip;
  int64_t dil[2];
  if (op == OP_MAX_POOL2D) {
    bool ri;
    if (!pair_arg(s, c, sema_arg(s, c, 4, "dilation"), "dilation", 1, dil) ||
        !bool_arg(s, sema_arg(s, c, 5, "ceil_mode"), c->name, "ceil_mode",
                  false, &ceil) ||
        !bool_arg(s, sema_arg(s, c, 6, "return_indices"), c->name,
                  "return_indices", false, &ri))
      return false;
    if (dil[0] != 1 || dil[1] != 1) bad = "dilation other than 1";
    else if (ri) bad = "return_indices=true";
    else if (ceil) bad = "ceil_mode=true";
    return !bad || (diag_error(s->d, c->loc, "%s(): %s is not supported by "
                               "tdsl", c->name, bad), false);
  }
  const SVal *dv = sema_arg(s, c, 6, "divisor_override");
  if (!bool_arg(s, sema_arg(s, c, 4, "ceil_mode"), c->name, "ceil_mode",
                false, &ceil) ||
      !bool_arg(s, sema_arg(s, c, 5, "count_include_pad"), c->name,
                "count_include_pad", true, &cip))
    return false;
  if (ceil) bad = "ceil_mode=true";
  else if (!cip) bad = "count_include_pad=false";
  else if (!absent(dv)) bad = "divisor_override";
  return !bad || (diag_error(s->d, c->loc, "%s(): %s is not supported by "
                             "tdsl", c->name, bad), false);
}

static bool pool_params(Sema *s, CallArgs *c, int64_t k[2], int64_t st[2],
                        int64_t pad[2]) {
  const SVal *kv = sema_arg(s, c, 1, "kernel_size");
  if (absent(kv)) {
    diag_error(s->d, c->loc, "%s(): missing kernel_size", c->name);
    return false;
  }
  if (!pair_arg(s, c, kv, "kernel_size", 1, k) ||
      !pair_arg(s, c, sema_arg(s, c, 2, "stride"), "stride", 0, st) ||
      !pair_arg(s, c, sema_arg(s, c, 3, "padding"), "padding", 0, pad))
    return false;
  if (st[0] == 0 && st[1] == 0) st[0] = k[0], st[1] = k[1];
  const char *bad = NULL;
  for (int i = 0; i < 2 && !bad; i++) {
    if (k[i] <= 0) bad = "kernel_size must be positive";
    else if (st[i] <= 0) bad = "stride must be positive";
    else if (pad[i] < 0) bad = "padding must not be negative";
    else if (pad[i] > k[i] / 2)
      bad = arena_printf(s->a, "padding %lld is more than half of the kernel "
                         "size %lld; use at most %lld", (long long)pad[i],
                         (long long)k[i], (long long)(k[i] / 2));
  }
  if (bad) diag_error(s->d, c->loc, "%s(): %s", c->name, bad);
  return !bad;
}

/* adaptive_avg_pool2d's output_size: an int or a pair; None keeps the
 * input's size. */
static bool adaptive_size(Sema *s, CallArgs *c, const IrValue *xv,
                          const Sym *out[2]) {
  const SVal *v = sema_arg(s, c, 1, "output_size");
  if (!v) {
    diag_error(s->d, c->loc, "%s(): missing output_size", c->name);
    return false;
  }
  const SVal *items = v->kind == SV_LIST ? v->items : v;
  int n = v->kind == SV_LIST ? v->nitems : 1;
  if (n != 1 && n != 2) {
    diag_error(s->d, c->loc,
               "%s(): output_size must be an int or a pair", c->name);
    return false;
  }
  for (int i = 0; i < 2; i++) {
    const SVal *it = &items[n == 1 ? 0 : i];
    int64_t cv;
    if (it->kind == SV_NONE) out[i] = xv->shape[2 + i];
    else if (!sema_sym_arg(s, it, "output_size", &out[i])) return false;
    if (sym_is_const(out[i], &cv) && cv < 0) {
      diag_error(s->d, c->loc, "%s(): output_size must not be negative",
                 c->name);
      return false;
    }
  }
  return true;
}

SVal sema_pool(Sema *s, Op op, CallArgs *c) {
  if (has_error_arg(c)) return sv_error();
  IrRef x;
  bool unbatched;
  int64_t k[2], st[2], pad[2];
  const Sym *o[2];
  if (!input_arg(s, c, &x) || !pool_dtype(s, c, op, sema_val(s, x)->dtype))
    return sv_error();
  bool adaptive = op == OP_ADAPTIVE_AVG_POOL2D;
  if (!adaptive && (!pool_params(s, c, k, st, pad) ||
                    !pool_defaults(s, c, op)))
    return sv_error();
  if (!sema_args_done(s, c, adaptive ? 2 : 7) ||
      !batched_input(s, c, &x, &unbatched) || !nonzero_dims(s, c, x))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  if (adaptive && !adaptive_size(s, c, &xv, o)) return sv_error();
  if (!adaptive) {
    for (int i = 0; i < 2; i++)
      o[i] = window_out(s, xv.shape[2 + i], K(s, k[i]), st[i], pad[i], 1);
    const char *ks = arena_printf(s->a, "(%lldx%lld)", (long long)k[0],
                                  (long long)k[1]);
    if (!window_fits(s, c, &xv, pad, o[0], o[1], ks)) return sv_error();
  }
  /* A rank-3 input's result is contiguous in PyTorch (it never suggests
   * channels-last). */
  bool cl = !unbatched && suggests_cl(s, x);
  IrValue v = window_result(s, op, xv.dtype, xv.shape[0], xv.shape[1], o[0],
                            o[1], cl, c->loc);
  if (!adaptive) {
    int64_t attrs[6] = {k[0], k[1], st[0], st[1], pad[0], pad[1]};
    set_attrs(s, &v, attrs, 6);
  }
  IrRef r = emit_op(s, &v, &x, 1);
  return sv_tensor(finish_batched(s, r, unbatched, c->loc), c->loc);
}

/* ---- factories ---- */

/* Shape of nested lists, read along the first elements (as PyTorch). */
static int data_shape(const SVal *v, int64_t *shape, int max) {
  int rank = 0;
  while (v->kind == SV_LIST && rank < max) {
    shape[rank++] = v->nitems;
    if (v->nitems == 0) break;
    v = &v->items[0];
  }
  return rank;
}

typedef struct Flat {
  int rank;
  int64_t shape[TDSL_MAX_RANK];
  int n;
  Scalar *vals;
  DType *from;
  bool any_float, any_int;
} Flat;

static bool data_leaf(Sema *s, CallArgs *c, const SVal *v, Flat *f) {
  Scalar x;
  DType from;
  if (v->kind == SV_FLOAT) {
    x.f = v->f, from = DT_F64, f->any_float = true;
  } else if (v->kind == SV_BOOL) {
    x.i = v->b, from = DT_BOOL;
  } else if (v->kind == SV_INT && sym_is_const(v->sym, &x.i)) {
    from = DT_I64, f->any_int = true;
  } else {
    diag_error(s->d, c->loc,
               "tensor(): elements must be number or bool literals%s",
               v->kind == SV_INT ? " (a size symbol is only known at run "
                                   "time; use full() for it)" : "");
    return false;
  }
  f->vals[f->n] = x;
  f->from[f->n++] = from;
  return true;
}

static bool data_fill(Sema *s, CallArgs *c, const SVal *v, int depth,
                      Flat *f) {
  if (depth == f->rank) {
    if (v->kind != SV_LIST) return data_leaf(s, c, v, f);
    diag_error(s->d, c->loc, "tensor(): lists nested deeper than %d levels "
               "at dim %d", f->rank, depth);
    return false;
  }
  if (v->kind != SV_LIST || v->nitems != f->shape[depth]) {
    if (v->kind != SV_LIST)
      diag_error(s->d, c->loc,
                 "tensor(): expected a sequence of length %lld at dim %d "
                 "(got a single number); every row must have the same shape",
                 (long long)f->shape[depth], depth);
    else
      diag_error(s->d, c->loc,
                 "tensor(): expected sequence of length %lld at dim %d (got "
                 "%d); nested lists must be rectangular",
                 (long long)f->shape[depth], depth, v->nitems);
    return false;
  }
  for (int i = 0; i < v->nitems; i++)
    if (!data_fill(s, c, &v->items[i], depth + 1, f)) return false;
  return true;
}

/* The dtype PyTorch infers: any float -> f32, any int -> i64, else bool
 * (an empty list is f32). */
static DType data_dtype(const Flat *f) {
  if (f->any_float || f->n == 0) return DT_F32;
  return f->any_int ? DT_I64 : DT_BOOL;
}

static SVal factory_tensor(Sema *s, CallArgs *c) {
  const SVal *dv = sema_arg(s, c, 0, "data");
  DType dt;
  if (!dtype_arg(s, sema_arg(s, c, 1, "dtype"), "tensor", &dt) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  if (!dv) {
    diag_error(s->d, c->loc, "tensor(): missing the data");
    return sv_error();
  }
  Flat f;
  memset(&f, 0, sizeof f);
  f.rank = data_shape(dv, f.shape, TDSL_MAX_RANK);
  int64_t numel = 1;
  for (int i = 0; i < f.rank; i++) numel *= f.shape[i];
  f.vals = arena_alloc(s->a, sizeof(Scalar) * (size_t)(numel + 1));
  f.from = arena_alloc(s->a, sizeof(DType) * (size_t)(numel + 1));
  if (!data_fill(s, c, dv, 0, &f)) return sv_error();
  if (dt == DT_NONE) dt = data_dtype(&f);
  size_t es = (size_t)dtype_size(dt);
  unsigned char *data = arena_alloc(s->a, es * (size_t)(numel + 1));
  for (int i = 0; i < f.n; i++)
    scalar_store(dt, data + es * (size_t)i,
                 scalar_cast(f.vals[i], f.from[i], dt));
  const Sym **shape = sym_array(s, f.rank);
  for (int i = 0; i < f.rank; i++) shape[i] = K(s, f.shape[i]);
  IrValue v = sema_new_dense(s, OP_TENSOR, dt, f.rank, shape, c->loc);
  v.data = data;
  return sv_tensor(sema_emit(s, &v), c->loc);
}

/* A trailing positional dtype (`zeros([2, 3], f16)`) is taken off the
 * positionals; returns it or NULL. */
static const SVal *pop_dtype(CallArgs *c, int min) {
  if (c->npos > min && c->pos[c->npos - 1].kind == SV_DTYPE)
    return &c->pos[--c->npos];
  return NULL;
}

/* The dtype given positionally (tv) or as dtype= (kv), not both. */
static bool pick_dtype(Sema *s, CallArgs *c, const SVal *tv, const SVal *kv,
                       DType *dt) {
  if (tv && kv) {
    diag_error(s->d, c->loc, "%s(): dtype given twice", c->name);
    return false;
  }
  return dtype_arg(s, tv ? tv : kv, c->name, dt);
}

/* Ends a factory call whose trailing dtype pop_dtype took off: at most
 * maxpos other positionals (npos: the count before popping). */
static bool factory_done(Sema *s, CallArgs *c, int npos, int maxpos) {
  bool ok = sema_args_done(s, c, maxpos);
  c->npos = npos;
  return ok;
}

static bool check_sizes(Sema *s, CallArgs *c, const Sym *const *shape,
                        int n) {
  for (int i = 0; i < n; i++) {
    int64_t v;
    if (!sym_is_const(shape[i], &v) || v >= 0) continue;
    diag_error(s->d, c->loc, "%s(): size %lld at dim %d of %s is negative",
               c->name, (long long)v, i, shape_str(s, shape, n));
    return false;
  }
  return true;
}

/* A FULL of `shape` holding x (of dtype `from`) converted to dt. */
static SVal emit_full(Sema *s, CallArgs *c, DType dt, const Sym **shape,
                      int n, Scalar x, DType from) {
  if (!check_sizes(s, c, shape, n)) return sv_error();
  IrValue v = sema_new_dense(s, OP_FULL, dt, n, shape, c->loc);
  v.value = scalar_cast(x, from, dt);
  return sv_tensor(sema_emit(s, &v), c->loc);
}

/* zeros(*size, dtype=f32) / ones(...). */
static SVal factory_fill(Sema *s, CallArgs *c, int64_t value) {
  int npos = c->npos;
  const SVal *tv = pop_dtype(c, 1);
  const SVal *kv = sema_arg(s, c, KW_ONLY, "dtype");
  const Sym **shape;
  int n;
  DType dt;
  bool ok = sema_sizes(s, c, 0, &shape, &n) && pick_dtype(s, c, tv, kv, &dt);
  if (!factory_done(s, c, npos, c->npos) || !ok) return sv_error();
  Scalar x = {.i = value};
  return emit_full(s, c, dt == DT_NONE ? DT_F32 : dt, shape, n, x, DT_I64);
}

/* The fill value of full(): a number or bool literal. */
static bool fill_value(Sema *s, CallArgs *c, const SVal *v, Scalar *x,
                       DType *from) {
  if (v && v->kind == SV_FLOAT) {
    x->f = v->f, *from = DT_F64;
    return true;
  }
  if (v && v->kind == SV_BOOL) {
    x->i = v->b, *from = DT_BOOL;
    return true;
  }
  if (v && v->kind == SV_INT && sym_is_const(v->sym, &x->i)) {
    *from = DT_I64;
    return true;
  }
  diag_error(s->d, c->loc, "full(): fill_value must be a number or bool "
             "literal%s", v && v->kind == SV_INT ? " (not a size symbol)" :
             "");
  return false;
}

/* full(size, fill_value, dtype=None): dtype from the value by default. */
static SVal factory_full(Sema *s, CallArgs *c) {
  int npos = c->npos;
  const SVal *tv = pop_dtype(c, 2);
  const SVal *sv = sema_arg(s, c, 0, "size");
  const SVal *fv = sema_arg(s, c, 1, "fill_value");
  const SVal *kv = sema_arg(s, c, KW_ONLY, "dtype");
  if (!factory_done(s, c, npos, 2)) return sv_error();
  if (!sv || !fv) {
    diag_error(s->d, c->loc, "full(): expected full(size, fill_value)");
    return sv_error();
  }
  Scalar x;
  DType from, dt;
  if (!fill_value(s, c, fv, &x, &from) || !pick_dtype(s, c, tv, kv, &dt))
    return sv_error();
  /* Read the size through a call of its own: sema_sizes takes an int or a
   * list at positional 0. */
  CallArgs one = *c;
  one.pos = (SVal *)sv;
  one.npos = 1;
  one.nkw = 0;
  const Sym **shape;
  int n;
  if (!sema_sizes(s, &one, 0, &shape, &n)) return sv_error();
  if (dt == DT_NONE) dt = from == DT_F64 ? DT_F32 : from;
  return emit_full(s, c, dt, shape, n, x, from);
}

/* arange bounds: ints (end possibly symbolic) or floats. */
typedef struct Bound {
  bool is_float;
  double f;
  const Sym *sym; /* ints */
} Bound;

static bool bound_arg(Sema *s, CallArgs *c, const SVal *v, const char *what,
                      Bound *b) {
  b->is_float = v->kind == SV_FLOAT;
  b->f = v->f;
  b->sym = NULL;
  if (b->is_float) return true;
  if (v->kind != SV_INT) {
    diag_error(s->d, c->loc,
               "arange(): %s must be a number or a size symbol%s", what,
               v->kind == SV_TENSOR ? " (a scalar parameter is only known "
                                      "at run time)" : "");
    return false;
  }
  if (!sema_sym_arg(s, v, what, &b->sym)) return false;
  int64_t cv;
  if (sym_is_const(b->sym, &cv)) b->f = (double)cv;
  return true;
}

/* Length of arange for constant bounds, PyTorch's formula. */
static bool arange_static(Sema *s, CallArgs *c, const Bound *st,
                          const Bound *en, const Bound *sp, bool fl,
                          int64_t *len) {
  double a = st->f, b = en->f, d = sp->f;
  if ((d > 0 && b < a) || (d < 0 && b > a)) {
    diag_error(s->d, c->loc,
               "arange(): the range from %g to %g is inconsistent with the "
               "step %g's sign", a, b, d);
    return false;
  }
  if (!fl) {
    int64_t ia, ib, id;
    sym_is_const(st->sym, &ia), sym_is_const(en->sym, &ib);
    sym_is_const(sp->sym, &id);
    int64_t sgn = id > 0 ? 1 : -1;
    *len = (ib - ia + id - sgn) / id;
  } else {
    *len = (int64_t)ceil((b - a) / d);
  }
  return true;
}

/* Length with a symbolic end: ceil((end - start) / step) for an integer
 * step, plus the run-time sign check PyTorch does. */
static const Sym *arange_symbolic(Sema *s, CallArgs *c, const Bound *st,
                                  const Bound *en, int64_t step) {
  const Sym *span = step > 0 ? sym_sub(s->st, en->sym, st->sym)
                             : sym_sub(s->st, st->sym, en->sym);
  int64_t as = step > 0 ? step : -step;
  add_check_le(s, K(s, 0), span,
               "arange(): the range is inconsistent with the step's sign",
               c->loc);
  return sym_floordiv(s->st, sym_add(s->st, span, K(s, as - 1)), K(s, as));
}

static bool arange_bounds(Sema *s, CallArgs *c, Bound *st, Bound *en,
                          Bound *sp) {
  const SVal *a0 = sema_arg(s, c, 0, "start"), *a1 = sema_arg(s, c, 1, "end");
  const SVal *a2 = sema_arg(s, c, 2, "step");
  if (!a0 && !a1) {
    diag_error(s->d, c->loc, "arange(): missing end");
    return false;
  }
  st->is_float = false, st->f = 0, st->sym = K(s, 0);
  sp->is_float = false, sp->f = 1, sp->sym = K(s, 1);
  if (!a1) return bound_arg(s, c, a0, "end", en); /* arange(end) */
  return (!a0 || bound_arg(s, c, a0, "start", st)) &&
         bound_arg(s, c, a1, "end", en) &&
         (absent(a2) || bound_arg(s, c, a2, "step", sp));
}

static SVal factory_arange(Sema *s, CallArgs *c) {
  int npos = c->npos;
  const SVal *tv = pop_dtype(c, 1);
  Bound st, en, sp;
  DType dt;
  bool ok = arange_bounds(s, c, &st, &en, &sp) &&
            pick_dtype(s, c, tv, sema_arg(s, c, KW_ONLY, "dtype"), &dt);
  if (!factory_done(s, c, npos, 3) || !ok) return sv_error();
  bool fl = st.is_float || en.is_float || sp.is_float;
  if (dt == DT_NONE) dt = fl ? DT_F32 : DT_I64;
  if (dt == DT_BOOL) {
    diag_error(s->d, c->loc, "arange(): not implemented for dtype bool");
    return sv_error();
  }
  if (sp.f == 0) {
    diag_error(s->d, c->loc, "arange(): step must be nonzero");
    return sv_error();
  }
  if ((st.sym && !sym_is_const(st.sym, NULL)) ||
      (sp.sym && !sym_is_const(sp.sym, NULL))) {
    diag_error(s->d, c->loc,
               "arange(): start and step must be constants; only end may "
               "be a size symbol");
    return sv_error();
  }
  const Sym *len;
  if (en.sym && !sym_is_const(en.sym, NULL)) {
    if (fl) {
      diag_error(s->d, c->loc, "arange(): a symbolic end needs integer "
                 "start and step");
      return sv_error();
    }
    len = arange_symbolic(s, c, &st, &en, (int64_t)sp.f);
  } else {
    int64_t n;
    if (!arange_static(s, c, &st, &en, &sp, fl, &n)) return sv_error();
    len = K(s, n);
  }
  const Sym **shape = sym_array(s, 1);
  shape[0] = len;
  IrValue v = sema_new_dense(s, OP_ARANGE, dt, 1, shape, c->loc);
  v.fattr[0] = st.f;
  v.fattr[1] = sp.f;
  return sv_tensor(sema_emit(s, &v), c->loc);
}

SVal sema_factory(Sema *s, CallArgs *c) {
  if (has_error_arg(c)) return sv_error();
  if (strcmp(c->name, "tensor") == 0) return factory_tensor(s, c);
  if (strcmp(c->name, "zeros") == 0) return factory_fill(s, c, 0);
  if (strcmp(c->name, "ones") == 0) return factory_fill(s, c, 1);
  if (strcmp(c->name, "full") == 0) return factory_full(s, c);
  if (strcmp(c->name, "arange") == 0) return factory_arange(s, c);
  ICE("sema_factory: unknown factory %s", c->name);
}
