/* sema_reduce.c — reductions (sum, mean, prod, amax, amin, argmax,
 * argmin), softmax/log_softmax and layer_norm.
 *
 * The builder reads the evaluated call arguments (CallArgs), checks them
 * with PyTorch's rules (every error PyTorch raises is a diagnostic at the
 * function or method name, in the project's own words), and appends the
 * IR of ops.h: the op itself plus the CASTs and UNSQUEEZE/EXPAND/SQUEEZE
 * views its operand conventions need.  Results are contiguous, as PyTorch's.
 *
 * Needs: sema_internal.h, sema_values.c, sema_args.c, geometry.c.
 * Used by: sema_expr.c (the call dispatch, through sema_reduce_builtins). */
#include <string.h>

#include "sema_internal.h"

/* ---- Reductions ---- */

/* Reads dim= into mask (rank entries); *all when absent, None or []. */
bool sema_reduce_dims(Sema *s, CallArgs *c, const SVal *dv, int rank,
                      bool *mask, bool *all) {
  *all = absent(dv) || (dv->kind == SV_LIST && dv->nitems == 0);
  if (*all) return true;
  const SVal *items = dv->kind == SV_LIST ? dv->items : dv;
  int n = dv->kind == SV_LIST ? dv->nitems : 1;
  for (int i = 0; i < n; i++) {
    int64_t d;
    int w;
    if (!sema_int_arg(s, &items[i], "dim", &d)) return false;
    if (!sema_wrap_dim(s, c, d, rank, &w)) return false;
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
bool sema_reduce_nonempty(Sema *s, CallArgs *c, const IrValue *xv,
                          const bool *mask) {
  for (int d = 0; d < xv->rank; d++) {
    if (mask[d] && !sym_is_const(xv->shape[d], NULL))
      sema_check_le(s, K(s, 1), xv->shape[d],
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
IrRef sema_reduce_emit(Sema *s, CallArgs *c, Op op, IrRef x, DType dt,
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
  if (!(argred && !mask)) sema_set_int_attrs(s, &v, dims, nd);
  if (keepdim) v.flags |= IRF_KEEPDIM;
  return sema_emit_op(s, &v, &x, 1);
}

static SVal reduce_arg(Sema *s, Op op, CallArgs *c, IrRef x) {
  const SVal *dv = sema_arg(s, c, 1, "dim");
  const SVal *kv = sema_arg(s, c, 2, "keepdim");
  bool keepdim;
  if (!sema_bool_arg(s, kv, c->name, "keepdim", false, &keepdim))
    return sv_error();
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
  if (!sema_reduce_dims(s, c, dv, xv.rank, mask, &all)) return sv_error();
  if (all) memset(mask, 1, (size_t)xv.rank + 1);
  if (!sema_reduce_nonempty(s, c, &xv, mask)) return sv_error();
  return sv_tensor(sema_reduce_emit(s, c, op, x, DT_I64, all ? NULL : mask,
                               keepdim), c->loc);
}

static SVal build_reduce(Sema *s, Op op, CallArgs *c) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x;
  if (!sema_input_arg(s, c, &x)) return sv_error();
  if (op == OP_ARGMAX || op == OP_ARGMIN) return reduce_arg(s, op, c, x);
  bool has_dtype = op == OP_SUM || op == OP_MEAN || op == OP_PROD;
  const SVal *dv = sema_arg(s, c, 1, "dim");
  const SVal *kv = sema_arg(s, c, 2, "keepdim");
  const SVal *tv = has_dtype ? sema_arg(s, c, KW_ONLY, "dtype") : NULL;
  bool keepdim;
  DType given, dt;
  if (!sema_bool_arg(s, kv, c->name, "keepdim", false, &keepdim) ||
      !sema_dtype_arg(s, tv, c->name, &given) || !sema_args_done(s, c, 3))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  if (!reduce_dtype(s, c, op, xv.dtype, given, &dt)) return sv_error();
  bool *mask = arena_alloc(s->a, (size_t)xv.rank + 1);
  bool all;
  if (!sema_reduce_dims(s, c, dv, xv.rank, mask, &all)) return sv_error();
  if (all) memset(mask, 1, (size_t)xv.rank + 1);
  if ((op == OP_AMAX || op == OP_AMIN) &&
      !sema_reduce_nonempty(s, c, &xv, mask))
    return sv_error();
  /* sum/prod of integers accumulate in i64; dtype= converts first. */
  x = sema_cast(s, x, dt, c->loc);
  if (dtype_is_float(dt) || dt == DT_I64 || (op != OP_SUM && op != OP_PROD))
    return sv_tensor(sema_reduce_emit(s, c, op, x, dt, mask, keepdim), c->loc);
  /* A narrower integer or bool dtype=: PyTorch adds (multiplies) in that
   * type, wrapping; + and * commute with truncation mod 2^n, and bool's
   * saturating + and * are "!= 0" of the i64 sum and product of 0s and 1s, so
   * reducing in i64 and casting the result back is exact. */
  x = sema_cast(s, x, DT_I64, c->loc);
  IrRef r = sema_reduce_emit(s, c, op, x, DT_I64, mask, keepdim);
  return sv_tensor(sema_cast(s, r, dt, c->loc), c->loc);
}

/* ---- softmax, log_softmax ---- */

/* PyTorch's CPU softmax and log_softmax return before dispatching on the
 * dtype when the input has no elements, so an empty integer or bool input
 * gives an empty (contiguous) result of that dtype instead of an error. */
static IrRef empty_result(Sema *s, DType dt, const IrValue *xv, Loc loc) {
  IrValue v = sema_new_dense(s, OP_FULL, dt, xv->rank, xv->shape, loc);
  v.value = (Scalar){.i = 0};
  return sema_emit(s, &v);
}

static SVal build_softmax(Sema *s, Op op, CallArgs *c) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x;
  if (!sema_input_arg(s, c, &x)) return sv_error();
  const SVal *dv = sema_arg(s, c, 1, "dim");
  const SVal *tv = sema_arg(s, c, 2, "dtype");
  DType given;
  if (!sema_dtype_arg(s, tv, c->name, &given) || !sema_args_done(s, c, 3))
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
  if (!sema_int_arg(s, dv, "dim", &d) || !sema_wrap_dim(s, c, d, xv.rank, &w))
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
  sema_set_int_attrs(s, &v, &a, 1);
  return sv_tensor(sema_emit_op(s, &v, &x, 1), c->loc);
}

/* ---- layer_norm ---- */

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

static SVal build_layer_norm(Sema *s, CallArgs *c) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x, w, b;
  if (!sema_input_arg(s, c, &x)) return sv_error();
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
  sema_set_int_attrs(s, &v, &a, 1);
  v.fattr[0] = eps;
  IrRef args[3] = {x, 0, 0};
  int n = 1;
  if (w >= 0) args[n++] = w, v.flags |= IRF_WEIGHT;
  if (b >= 0) args[n++] = b, v.flags |= IRF_BIAS;
  return sv_tensor(sema_emit_op(s, &v, args, n), c->loc);
}

/* ---- Call handlers ---- */

static SVal h_reduce(Sema *s, CallArgs *c, const Builtin *b) {
  return build_reduce(s, b->op, c);
}

static SVal h_softmax(Sema *s, CallArgs *c, const Builtin *b) {
  return build_softmax(s, b->op, c);
}

static SVal h_layer_norm(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  return build_layer_norm(s, c);
}

const Builtin sema_reduce_builtins[] = {
    {"sum", h_reduce, OP_SUM, BF_BOTH},
    {"mean", h_reduce, OP_MEAN, BF_BOTH},
    {"prod", h_reduce, OP_PROD, BF_BOTH},
    {"amax", h_reduce, OP_AMAX, BF_BOTH},
    {"amin", h_reduce, OP_AMIN, BF_BOTH},
    {"argmax", h_reduce, OP_ARGMAX, BF_BOTH},
    {"argmin", h_reduce, OP_ARGMIN, BF_BOTH},
    {"softmax", h_softmax, OP_SOFTMAX, BF_BOTH},
    {"log_softmax", h_softmax, OP_LOG_SOFTMAX, BF_BOTH},
    {"layer_norm", h_layer_norm, OP_LAYER_NORM, BF_FUNC},
    {NULL, NULL, OP_COUNT, 0},
};
