/* sema_layers.c — layers: linear, addmm, bmm, baddbmm, einsum, conv1d,
 * batch_norm, group_norm, rms_norm and scaled_dot_product_attention.
 *
 * None of them is an op of its own: each builder checks its arguments with
 * PyTorch's rules (every error PyTorch raises is a diagnostic at the
 * function or method name, an einsum equation's at its character in the
 * string) and composes the IR of the families below it — matmul,
 * conv2d, reductions, softmax, elementwise ops and views — so that both
 * backends and every pass (a bias as a GEMM epilogue, a normalization's
 * chain fused into its statistics' readers) take them as they take the
 * same program written out by hand.  The values follow PyTorch's own
 * composite or CPU formulas (named beside each builder); half inputs
 * compute in f32 where PyTorch's kernels do.
 *
 * Calls into the other families go through their builtin tables (call()),
 * with arguments this file has already checked.
 *
 * Needs: sema_internal.h, sema_values.c, sema_args.c, geometry.c, the
 * builtin tables of sema_elementwise.c, sema_views.c, sema_reduce.c and
 * sema_factory.c, sema_matmul (sema_matmul.c), sema_conv (sema_conv.c).
 * Used by: sema_expr.c (the call dispatch, through sema_layer_builtins). */
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "sema_internal.h"

/* ---- Composing the other families' ops ---- */

static const Builtin *const callee_tables[] = {
    sema_elementwise_builtins, sema_view_builtins, sema_reduce_builtins,
    sema_factory_builtins};

/* The builtin function `name` called as name(args...) at loc.  The layer
 * has checked what it passes. */
static SVal call(Sema *s, Loc loc, const char *name, int n, SVal *args) {
  const Builtin *b = NULL;
  for (size_t t = 0; !b && t < sizeof callee_tables / sizeof *callee_tables; t++)
    b = sema_builtin_find(callee_tables[t], name);
  if (!b) ICE("layers: no builtin %s", name);
  return sema_call_builtin(s, b, loc, false, args, n, NULL, NULL, 0);
}

static SVal tsv(IrRef r, Loc loc) { return sv_tensor(r, loc); }

static SVal int_list(Sema *s, const int64_t *v, int n, Loc loc) {
  SVal l = sv_make(SV_LIST, loc);
  l.nitems = n;
  l.items = arena_alloc(s->a, sizeof *l.items * (size_t)(n + 1));
  for (int i = 0; i < n; i++) l.items[i] = sv_int(K(s, v[i]), loc);
  return l;
}

/* sum/mean over dims, as the builtins compute them (-1 on error). */
static IrRef reduce_dims(Sema *s, const char *fn, IrRef x, const int64_t *d,
                         int n, bool keepdim, Loc loc) {
  SVal a[3] = {tsv(x, loc), int_list(s, d, n, loc), sv_bool(keepdim, loc)};
  return call(s, loc, fn, 3, a).ref;
}

static IrRef bin(Sema *s, Op op, IrRef a, IrRef b, Loc loc) {
  if (a < 0 || b < 0) return -1;
  SVal x = tsv(a, loc), y = tsv(b, loc);
  return sema_ew_binary(s, op, &x, &y, loc).ref;
}

/* a op number: a float, or an int when `is_int` (integer tensors). */
static IrRef bin_num(Sema *s, Op op, IrRef a, double f, bool is_int,
                     Loc loc) {
  if (a < 0) return -1;
  SVal x = tsv(a, loc);
  SVal y = is_int ? sv_int(K(s, (int64_t)f), loc) : sv_float(f, loc);
  return sema_ew_binary(s, op, &x, &y, loc).ref;
}

static IrRef unary(Sema *s, Op op, IrRef a, Loc loc) {
  return a < 0 ? -1 : sema_ew_unary(s, op, a, 0, loc).ref;
}

/* where(cond, a, -inf) */
static IrRef mask_fill(Sema *s, IrRef cond, IrRef a, Loc loc) {
  if (cond < 0 || a < 0) return -1;
  SVal w[3] = {tsv(cond, loc), tsv(a, loc), sv_float(-INFINITY, loc)};
  return call(s, loc, "where", 3, w).ref;
}

/* x.to(dt) keeping its layout (x itself when already dt). */
static IrRef to_dtype(Sema *s, IrRef x, DType dt, Loc loc) {
  if (x < 0 || sema_val(s, x)->dtype == dt) return x;
  return sema_emit_cast(s, x, dt, 0, loc);
}

/* PyTorch's "opmath" type: half types compute in f32. */
static DType opmath(DType dt) {
  return dt == DT_F16 || dt == DT_BF16 ? DT_F32 : dt;
}

/* reshape(): a view when the strides allow, else a contiguous copy. */
static IrRef reshape_to(Sema *s, IrRef x, const Sym *const *shape, int n,
                        Loc loc) {
  IrValue *v = sema_val(s, x);
  if (sym_list_equal(v->shape, v->rank, shape, n)) return x;
  GeomCtx gc = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  bool is_view = false;
  const char *err = geom_reshape(&gc, &in, shape, n, &out, &is_view);
  if (err) ICE("layers: reshape: %s", err);
  if (is_view)
    return sema_emit_view(s, OP_VIEW, x, &out, out.shape, out.rank, 0, loc);
  return sema_emit_copy(s, OP_RESHAPE, x, v->dtype, &out, 0, loc);
}

/* x with n size-1 dims appended (a per-channel [C] against [N, C, *]). */
static IrRef unsqueeze_trailing(Sema *s, IrRef x, int n, Loc loc) {
  for (int i = 0; i < n && x >= 0; i++)
    x = sema_emit_unsqueeze(s, x, sema_val(s, x)->rank, loc);
  return x;
}

/* Dim d of x (size C, stride st) split into [g, C // g] with strides
 * [(C // g) * st, st]: a view for any strides.  The caller makes sure g
 * divides C (statically or by an entry check), which view()'s symbolic
 * element count cannot see. */
static IrRef split_dim(Sema *s, IrRef x, int d, const Sym *g, Loc loc) {
  Geom in = sema_geom_of(s, x), out = in;
  out.rank = in.rank + 1;
  out.shape = sym_array(s, out.rank);
  out.stride = sym_array(s, out.rank);
  for (int i = 0, j = 0; i < in.rank; i++, j++) {
    if (i != d) {
      out.shape[j] = in.shape[i], out.stride[j] = in.stride[i];
      continue;
    }
    const Sym *inner = sym_floordiv(s->st, in.shape[i], g);
    out.shape[j] = g, out.stride[j] = sym_mul(s->st, inner, in.stride[i]);
    j++;
    out.shape[j] = inner, out.stride[j] = in.stride[i];
  }
  return sema_emit_view(s, OP_VIEW, x, &out, out.shape, out.rank, 0, loc);
}

/* Dims d and d+1 of x merged into one of size `size` (their product,
 * written as the caller knows it): a view when their strides chain, else
 * a copy in row-major order. */
static IrRef merge_dims(Sema *s, IrRef x, int d, const Sym *size, Loc loc) {
  Geom in = sema_geom_of(s, x), out = in;
  out.rank = in.rank - 1;
  out.shape = sym_array(s, out.rank);
  out.stride = sym_array(s, out.rank);
  for (int i = 0, j = 0; i < in.rank; i++, j++) {
    out.shape[j] = in.shape[i], out.stride[j] = in.stride[i];
    if (i != d) continue;
    out.shape[j] = size;
    out.stride[j] =
        sym_is(in.shape[d + 1], 1) ? in.stride[d] : in.stride[d + 1];
    i++;
  }
  const Sym *chain = sym_mul(s->st, in.shape[d + 1], in.stride[d + 1]);
  if (sym_is(in.shape[d], 1) || sym_is(in.shape[d + 1], 1) ||
      in.stride[d] == chain)
    return sema_emit_view(s, OP_VIEW, x, &out, out.shape, out.rank, 0, loc);
  GeomCtx gc = sema_geom(s, loc);
  geom_contiguous(&gc, out.rank, out.shape, &out);
  out.rank = in.rank - 1;
  return sema_emit_copy(s, OP_RESHAPE, x, sema_val(s, x)->dtype, &out, 0,
                        loc);
}

/* PyTorch allocates batch_norm's and group_norm's results as
 * empty_like(input, input.suggest_memory_format()): contiguous, or
 * channels-last where a rank-4 input suggests it.  r (x's shape) is kept
 * when its strides agree (size-1 dims aside), else copied. */
static IrRef like_input_format(Sema *s, IrRef r, IrRef x, Loc loc) {
  if (r < 0) return r;
  Geom xg = sema_geom_of(s, x), rg = sema_geom_of(s, r), want;
  GeomCtx gc = sema_geom(s, loc);
  bool cl = xg.rank == 4 && geom_suggests_channels_last(&xg);
  memset(&want, 0, sizeof want);
  if (cl) geom_channels_last(&gc, rg.shape, &want);
  else geom_contiguous(&gc, rg.rank, rg.shape, &want);
  want.rank = rg.rank;
  want.shape = rg.shape;
  bool same = rg.stride != NULL;
  for (int d = 0; same && d < rg.rank; d++)
    if (!sym_is(rg.shape[d], 1) && rg.stride[d] != want.stride[d])
      same = false;
  if (same) return r;
  return sema_emit_copy(s, OP_COPY, r, sema_val(s, r)->dtype, &want,
                        cl ? IRF_CL : 0, loc);
}

/* Whether shape b broadcasts to shape a without changing it (the rule of
 * an in-place add and of expand): no more dims, each equal or 1. */
static bool fits_into(const Sym *const *a, int na, const Sym *const *b,
                      int nb) {
  if (nb > na) return false;
  for (int i = 1; i <= nb; i++)
    if (b[nb - i] != a[na - i] && !sym_is(b[nb - i], 1)) return false;
  return true;
}

/* An optional Python number argument (dflt when absent or None). */
static bool num_arg(Sema *s, CallArgs *c, const SVal *v, const char *what,
                    double dflt, double *out) {
  *out = dflt;
  if (absent(v)) return true;
  int64_t i;
  if (v->kind == SV_FLOAT) *out = v->f;
  else if (sv_const_int(v, &i)) *out = (double)i;
  else {
    diag_error(s->d, v->loc, "%s(): %s must be a number, got %s", c->name,
               what, sv_kind_name(v));
    return false;
  }
  return true;
}

static bool need_tensor(Sema *s, CallArgs *c, int i, const char *kw,
                        IrRef *out) {
  const SVal *v = sema_arg(s, c, i, kw);
  if (!v) {
    diag_error(s->d, c->loc, "%s(): missing the %s tensor", c->name, kw);
    return false;
  }
  return sema_tensor_arg(s, v, arena_printf(s->a, "%s() argument '%s'",
                                            c->name, kw), out);
}

static bool opt_tensor(Sema *s, CallArgs *c, int i, const char *kw,
                       IrRef *out) {
  const SVal *v = sema_arg(s, c, i, kw);
  *out = -1;
  return absent(v) ||
         sema_tensor_arg(s, v, arena_printf(s->a, "%s() argument '%s'",
                                            c->name, kw), out);
}

static bool float_input(Sema *s, CallArgs *c, IrRef x) {
  DType dt = sema_val(s, x)->dtype;
  if (dtype_is_float(dt)) return true;
  diag_error(s->d, c->loc,
             "%s(): not implemented for dtype %s; it needs a floating-point "
             "input: convert with .to(f32)", c->name, dtype_name(dt));
  sema_note_origin(s, x);
  return false;
}

/* ---- linear (F.linear: matmul(x, w.t()) + bias) ---- */

/* PyTorch adds a bias with addmm (2-D input) or addmm on the input
 * flattened to 2-D (a contiguous input of rank 3, or of higher rank with
 * a 1-D bias); otherwise in place onto matmul's result.  The two paths
 * reject different biases. */
static bool linear_fused(Sema *s, IrRef x, int brank) {
  Geom g = sema_geom_of(s, x);
  return g.rank == 2 ||
         (g.rank >= 3 && geom_is_contiguous(&g) && (g.rank == 3 || brank == 1));
}

static bool linear_bias(Sema *s, CallArgs *c, IrRef x, IrRef w, IrRef *b,
                        const Sym *const *rs, int rr) {
  IrValue xv = *sema_val(s, x), wv = *sema_val(s, w), bv = *sema_val(s, *b);
  if (linear_fused(s, x, bv.rank)) {
    const Sym *rows = sym_prod(s->st, xv.shape, xv.rank - 1);
    const Sym *mat[2] = {rows, wv.rank == 2 ? wv.shape[0] : K(s, 1)};
    if (wv.rank == 1) {
      diag_error(s->d, c->loc,
                 "linear(): a bias needs a 2-D weight [out_features, "
                 "in_features] for a %s input, but the weight has shape %s "
                 "(PyTorch adds the bias with addmm here)",
                 xv.rank == 2 ? "2-D" : "contiguous N-D",
                 shape_str(s, wv.shape, 1));
      return false;
    }
    if (bv.dtype != xv.dtype) {
      diag_error(s->d, c->loc,
                 "linear(): bias has dtype %s but the input has dtype %s; "
                 "they must be the same", dtype_name(bv.dtype),
                 dtype_name(xv.dtype));
      return false;
    }
    if (!fits_into(mat, 2, bv.shape, bv.rank)) {
      diag_error(s->d, c->loc,
                 "linear(): bias of shape %s does not broadcast to the "
                 "flattened result %s (rows x out_features)",
                 shape_str(s, bv.shape, bv.rank), shape_str(s, mat, 2));
      sema_note_origin(s, *b);
      return false;
    }
    /* A [rows, out] bias against an N-D input: the result's shape. */
    if (bv.rank == 2 && !sym_is(bv.shape[0], 1) && xv.rank > 2)
      *b = reshape_to(s, *b, rs, rr, c->loc);
    return true;
  }
  if (!fits_into(rs, rr, bv.shape, bv.rank)) {
    diag_error(s->d, c->loc,
               "linear(): bias of shape %s does not broadcast to the "
               "result shape %s", shape_str(s, bv.shape, bv.rank),
               shape_str(s, rs, rr));
    sema_note_origin(s, *b);
    return false;
  }
  if (dtype_is_float(bv.dtype) && !dtype_is_float(xv.dtype)) {
    diag_error(s->d, c->loc,
               "linear(): a %s bias cannot be added in place to the %s "
               "result; convert it with .to(%s)", dtype_name(bv.dtype),
               dtype_name(xv.dtype), dtype_name(xv.dtype));
    return false;
  }
  return true;
}

static bool linear_operands(Sema *s, CallArgs *c, const IrValue *xv,
                            const IrValue *wv) {
  const char *bad = NULL;
  if (xv->rank == 0 || wv->rank == 0)
    bad = arena_printf(s->a, "the input and the weight must be at least "
                       "1-D, but they are %d-D and %d-D", xv->rank, wv->rank);
  else if (wv->rank > 2)
    bad = arena_printf(s->a, "the weight must be 2-D [out_features, "
                       "in_features] or 1-D, but has shape %s",
                       shape_str(s, wv->shape, wv->rank));
  else if (xv->dtype != wv->dtype)
    bad = arena_printf(s->a, "the input has dtype %s but the weight has "
                       "dtype %s; they must be the same",
                       dtype_name(xv->dtype), dtype_name(wv->dtype));
  else if (xv->dtype == DT_BOOL)
    bad = "not implemented for bool tensors; convert with .to(f32)";
  else if (xv->shape[xv->rank - 1] != wv->shape[wv->rank - 1])
    bad = arena_printf(s->a, "the input %s has %s features in its last dim "
                       "but the weight %s takes %s",
                       shape_str(s, xv->shape, xv->rank),
                       sym_text(s, xv->shape[xv->rank - 1]),
                       shape_str(s, wv->shape, wv->rank),
                       sym_text(s, wv->shape[wv->rank - 1]));
  if (bad) diag_error(s->d, c->loc, "linear(): %s", bad);
  return !bad;
}

static SVal h_linear(Sema *s, CallArgs *c, const Builtin *bt) {
  (void)bt;
  IrRef x, w, b;
  if (sema_has_error_arg(c) || !sema_input_arg(s, c, &x) ||
      !need_tensor(s, c, 1, "weight", &w) || !opt_tensor(s, c, 2, "bias", &b) ||
      !sema_args_done(s, c, 3))
    return sv_error();
  IrValue xv = *sema_val(s, x), wv = *sema_val(s, w);
  if (!linear_operands(s, c, &xv, &wv)) return sv_error();
  const Sym **rs = sym_array(s, xv.rank);
  int rr = xv.rank - 1;
  memcpy(rs, xv.shape, sizeof *rs * (size_t)rr);
  if (wv.rank == 2) rs[rr++] = wv.shape[0];
  if (b >= 0 && !linear_bias(s, c, x, w, &b, rs, rr)) return sv_error();
  IrRef wt = wv.rank == 2 ? sema_transpose(s, w, 0, 1, c->loc).ref : w;
  IrRef r = sema_matmul(s, x, wt, c->loc).ref;
  if (b >= 0) r = to_dtype(s, bin(s, OP_ADD, r, b, c->loc), xv.dtype, c->loc);
  return sv_tensor(r, c->loc);
}

/* ---- addmm, baddbmm, bmm ---- */

/* The operands of bmm/addmm/baddbmm: rank-`rank` matrices of one dtype
 * (and the input's), equal batch sizes, inner dims that agree. */
static bool mm_operands(Sema *s, CallArgs *c, IrRef in, IrRef a, IrRef b,
                        int rank, const char *na, const char *nb) {
  IrValue av = *sema_val(s, a), bv = *sema_val(s, b);
  const char *what = rank == 2 ? "a 2-D matrix" : "a 3-D tensor [b, n, m]";
  const IrValue *bad_rank =
      av.rank != rank ? &av : bv.rank != rank ? &bv : NULL;
  if (bad_rank) {
    diag_error(s->d, c->loc, "%s(): %s must be %s, but has shape %s", c->name,
               bad_rank == &av ? na : nb, what,
               shape_str(s, bad_rank->shape, bad_rank->rank));
    return false;
  }
  DType di = in >= 0 ? sema_val(s, in)->dtype : av.dtype;
  if (av.dtype != bv.dtype || di != av.dtype) {
    diag_error(s->d, c->loc,
               "%s(): %s%s and %s must have the same dtype, but they are "
               "%s%s%s and %s", c->name, in >= 0 ? "input, " : "", na, nb,
               in >= 0 ? dtype_name(di) : "", in >= 0 ? ", " : "",
               dtype_name(av.dtype), dtype_name(bv.dtype));
    return false;
  }
  if (av.dtype == DT_BOOL) {
    diag_error(s->d, c->loc,
               "%s(): not implemented for bool tensors; convert with "
               ".to(i64) or .to(f32)", c->name);
    return false;
  }
  if (rank == 3 && av.shape[0] != bv.shape[0]) {
    diag_error(s->d, c->loc,
               "%s(): %s %s and %s %s have different batch sizes (%s and "
               "%s); %s() does not broadcast", c->name, na,
               shape_str(s, av.shape, 3), nb, shape_str(s, bv.shape, 3),
               sym_text(s, av.shape[0]), sym_text(s, bv.shape[0]), c->name);
    return false;
  }
  if (av.shape[rank - 1] != bv.shape[rank - 2]) {
    diag_error(s->d, c->loc,
               "%s(): cannot multiply %s %s by %s %s: %s's last dim (%s) "
               "must equal %s's %s dim (%s)", c->name, na,
               shape_str(s, av.shape, rank), nb, shape_str(s, bv.shape, rank),
               na, sym_text(s, av.shape[rank - 1]), nb,
               rank == 2 ? "first" : "second",
               sym_text(s, bv.shape[rank - 2]));
    return false;
  }
  return true;
}

static SVal h_bmm(Sema *s, CallArgs *c, const Builtin *bt) {
  (void)bt;
  IrRef a, b;
  if (sema_has_error_arg(c) || !sema_tensor_recv(s, c, &a) ||
      !need_tensor(s, c, 1, "mat2", &b) || !sema_args_done(s, c, 2) ||
      !mm_operands(s, c, -1, a, b, 3, c->method ? "self" : "input", "mat2"))
    return sv_error();
  return sema_matmul(s, a, b, c->loc);
}

/* beta and alpha: Python numbers; an integer result takes them as
 * integers (PyTorch converts the Scalar, truncating). */
static bool scale_arg(Sema *s, CallArgs *c, const char *kw, DType dt,
                      double *out) {
  if (!num_arg(s, c, sema_arg(s, c, KW_ONLY, kw), kw, 1, out)) return false;
  if (dtype_is_float(dt)) return true;
  *out = trunc(*out);
  if (fabs(*out) < 0x1p62) return true;
  diag_error(s->d, c->loc, "%s(): %s=%g is out of range for %s tensors",
             c->name, kw, *out, dtype_name(dt));
  return false;
}

/* addmm (rank 2) and baddbmm (rank 3): beta * input + alpha * (a @ b),
 * as PyTorch's BLAS call: beta == 0 never reads the input (its NaNs stay
 * out), alpha == 0 never reads the matrices. */
static SVal build_addmm(Sema *s, CallArgs *c, int rank) {
  const char *na = rank == 2 ? "mat1" : "batch1";
  const char *nb = rank == 2 ? "mat2" : "batch2";
  IrRef in, a, b;
  double beta, alpha;
  if (sema_has_error_arg(c) || !sema_tensor_recv(s, c, &in) ||
      !need_tensor(s, c, 1, na, &a) || !need_tensor(s, c, 2, nb, &b))
    return sv_error();
  DType dt = sema_val(s, a)->dtype;
  if (!scale_arg(s, c, "beta", dt, &beta) ||
      !scale_arg(s, c, "alpha", dt, &alpha) || !sema_args_done(s, c, 3) ||
      !mm_operands(s, c, in, a, b, rank, na, nb))
    return sv_error();
  IrValue av = *sema_val(s, a), bv = *sema_val(s, b), iv = *sema_val(s, in);
  const Sym **rs = sym_array(s, rank);
  memcpy(rs, av.shape, sizeof *rs * (size_t)(rank - 1));
  rs[rank - 1] = bv.shape[rank - 1];
  if (!fits_into(rs, rank, iv.shape, iv.rank)) {
    diag_error(s->d, c->loc,
               "%s(): input of shape %s does not broadcast to the result "
               "shape %s", c->name, shape_str(s, iv.shape, iv.rank),
               shape_str(s, rs, rank));
    sema_note_origin(s, in);
    return sv_error();
  }
  bool is_int = !dtype_is_float(dt);
  IrRef mm = -1, t = -1, r;
  if (alpha != 0) {
    mm = sema_matmul(s, a, b, c->loc).ref;
    if (alpha != 1) mm = bin_num(s, OP_MUL, mm, alpha, is_int, c->loc);
    if (mm < 0) return sv_error();
  }
  if (beta != 0) {
    t = beta == 1 ? in : bin_num(s, OP_MUL, in, beta, is_int, c->loc);
    if (t < 0) return sv_error();
  }
  if (mm >= 0 && t >= 0) {
    r = bin(s, OP_ADD, mm, t, c->loc);
  } else if (mm >= 0) {
    r = mm;
  } else if (t >= 0) { /* a fresh [.., n, p] tensor of beta * input */
    GeomCtx gc = sema_geom(s, c->loc);
    Geom g;
    geom_contiguous(&gc, rank, rs, &g);
    g.rank = rank, g.shape = rs;
    r = sema_emit_copy(s, OP_COPY, sema_expand_to(s, t, rank, rs, c->loc), dt,
                       &g, 0, c->loc);
  } else {
    IrValue v = sema_new_dense(s, OP_FULL, dt, rank, rs, c->loc);
    v.value = (Scalar){.i = 0};
    r = sema_emit(s, &v);
  }
  return sv_tensor(r, c->loc);
}

static SVal h_addmm(Sema *s, CallArgs *c, const Builtin *bt) {
  (void)bt;
  return build_addmm(s, c, 2);
}

static SVal h_baddbmm(Sema *s, CallArgs *c, const Builtin *bt) {
  (void)bt;
  return build_addmm(s, c, 3);
}

/* ---- einsum ---- */

/* Labels: 'A'..'Z' are 0..25 and 'a'..'z' 26..51 (PyTorch's order, which
 * the implicit output follows); dims under an ellipsis get ids from
 * EIN_ELL on, right-aligned across the operands. */
enum { EIN_LABELS = 52, EIN_ELL = 52, EIN_MAXLAB = 64,
       EIN_IDS = EIN_ELL + MAX_DIMS };

typedef struct EinTerm {  /* the subscripts of one operand or the output */
  int n;                  /* entries, an ellipsis counting as one */
  int lab[EIN_MAXLAB];    /* a label, or EIN_ELL */
  int at[EIN_MAXLAB];     /* the entry's index in the equation */
  int start, end;         /* the subscripts' span in the equation */
  bool ell;
} EinTerm;

typedef struct EinVal {   /* a tensor and the id of each of its dims */
  IrRef t;
  int rank;
  int ids[MAX_DIMS];
} EinVal;

typedef struct Ein {
  Sema *s;
  CallArgs *c;
  const char *eq;
  Loc loc;                /* of the equation string */
  int nops;
  EinTerm *in, out;
  bool arrow;
  int ell;                /* dims under the widest ellipsis */
  int nout, outids[EIN_IDS];
} Ein;

static int ein_label(int ch) {
  return isupper(ch) ? ch - 'A' : 26 + (ch - 'a');
}

static char ein_char(int id) {
  return (char)(id < 26 ? 'A' + id : 'a' + (id - 26));
}

/* The location of characters [i, i + len) of the equation. */
static Loc ein_at(const Ein *e, int i, int len) {
  Loc l = e->loc;
  l.col += 1 + i;
  l.len = len > 0 ? len : 1;
  return l;
}

static bool ein_fail(Ein *e, int i, int len, const char *msg) {
  diag_error(e->s->d, ein_at(e, i, len), "einsum(): %s", msg);
  return false;
}

/* One character of a term: a label, ' ' or the start of '...'. */
static bool ein_char_in(Ein *e, EinTerm *t, int *i, int end,
                        const char *whose) {
  Sema *s = e->s;
  int ch = (unsigned char)e->eq[*i];
  if (ch == ' ') return true;
  if (ch == '.') {
    if (t->ell)
      return ein_fail(e, *i, 1, arena_printf(s->a, "%s already has an "
                                             "ellipsis '...'", whose));
    if (!(*i + 2 < end && e->eq[*i + 1] == '.' && e->eq[*i + 2] == '.'))
      return ein_fail(e, *i, 1, "'.' must be part of an ellipsis '...'");
    t->ell = true;
    t->lab[t->n] = EIN_ELL, t->at[t->n++] = *i;
    *i += 2;
    return true;
  }
  if (ch > 127 || !isalpha(ch))
    return ein_fail(e, *i, 1, arena_printf(
        s->a, "invalid subscript %s; subscripts are the letters a-z and A-Z",
        ch > 127 || !isprint(ch) ? "(not an ASCII letter)"
                                 : arena_printf(s->a, "'%c'", ch)));
  if (t->n >= EIN_MAXLAB)
    return ein_fail(e, *i, 1, arena_printf(s->a, "%s has more than %d "
                                           "subscripts", whose, EIN_MAXLAB));
  t->lab[t->n] = ein_label(ch), t->at[t->n++] = *i;
  return true;
}

static bool ein_parse(Ein *e) {
  Sema *s = e->s;
  int len = (int)strlen(e->eq);
  const char *arrow = strstr(e->eq, "->");
  int lhs = arrow ? (int)(arrow - e->eq) : len;
  int op = 0;
  e->arrow = arrow != NULL;
  e->in[0].start = 0;
  for (int i = 0; i < lhs; i++) {
    if (e->eq[i] == ',') {
      e->in[op].end = i;
      if (++op >= e->nops)
        return ein_fail(e, i, 1, arena_printf(s->a, "the equation has more "
                                              "operands than the %d "
                                              "tensor%s given", e->nops,
                                              e->nops == 1 ? "" : "s"));
      e->in[op].start = i + 1;
      continue;
    }
    if (!ein_char_in(e, &e->in[op], &i, lhs,
                     arena_printf(s->a, "operand %d", op)))
      return false;
  }
  e->in[op].end = lhs;
  if (op != e->nops - 1) {
    diag_error(s->d, e->loc,
               "einsum(): the equation has %d operand%s but %d tensors were "
               "given", op + 1, op ? "s" : "", e->nops);
    return false;
  }
  e->out.start = lhs + 2, e->out.end = len;
  for (int i = lhs + 2; arrow && i < len; i++)
    if (!ein_char_in(e, &e->out, &i, len, "the output")) return false;
  return true;
}

/* Operand ranks against their subscripts; the ellipsis width; the
 * output's ids (explicit, or '...' then the labels used once, in order). */
static bool ein_output(Ein *e, int *count) {
  Sema *s = e->s;
  for (int i = 0; i < e->nops; i++) {
    EinTerm *t = &e->in[i];
    int rank = sema_val(s, e->c->pos[i + 1].ref)->rank, nl = 0;
    for (int j = 0; j < t->n; j++)
      if (t->lab[j] != EIN_ELL) nl++, count[t->lab[j]]++;
    if (t->ell ? nl <= rank : nl == rank) {
      if (t->ell && rank - nl > e->ell) e->ell = rank - nl;
      continue;
    }
    return ein_fail(e, t->start, t->end - t->start, arena_printf(
        s->a, "operand %d has %d dim%s but its subscripts name %d%s", i,
        rank, rank == 1 ? "" : "s", nl,
        t->ell ? "" : " (and there is no ellipsis '...')"));
  }
  bool seen[EIN_LABELS] = {false};
  if (!e->arrow) {
    for (int k = 0; k < e->ell; k++) e->outids[e->nout++] = EIN_ELL + k;
    for (int l = 0; l < EIN_LABELS; l++)
      if (count[l] == 1) e->outids[e->nout++] = l;
    return true;
  }
  for (int j = 0; j < e->out.n; j++) {
    int l = e->out.lab[j];
    if (l == EIN_ELL) {
      for (int k = 0; k < e->ell; k++) e->outids[e->nout++] = EIN_ELL + k;
      continue;
    }
    if (!count[l] || seen[l])
      return ein_fail(e, e->out.at[j], 1, arena_printf(
          s->a, "output subscript '%c' %s", ein_char(l),
          seen[l] ? "appears more than once in the output"
                  : "does not appear in any input operand"));
    seen[l] = true;
    e->outids[e->nout++] = l;
  }
  return true;
}

/* Operand i as a tensor with one id per dim, repeated labels taken as
 * diagonals (PyTorch: diagonal(0, first, repeat).movedim(-1, first)). */
static bool ein_operand(Ein *e, int i, EinVal *v) {
  Sema *s = e->s;
  Loc loc = e->c->loc;
  EinTerm *t = &e->in[i];
  v->t = e->c->pos[i + 1].ref;
  int rank = sema_val(s, v->t)->rank, nl = t->n - (t->ell ? 1 : 0);
  v->rank = 0;
  for (int j = 0; j < t->n; j++) {
    if (t->lab[j] == EIN_ELL) {
      int w = rank - nl;
      for (int k = 0; k < w; k++) v->ids[v->rank++] = EIN_ELL + e->ell - w + k;
      continue;
    }
    int first = -1;
    for (int p = 0; p < v->rank; p++)
      if (v->ids[p] == t->lab[j]) first = p;
    if (first < 0) {
      v->ids[v->rank++] = t->lab[j];
      continue;
    }
    IrValue *x = sema_val(s, v->t);
    if (x->shape[first] != x->shape[v->rank])
      return ein_fail(e, t->at[j], 1, arena_printf(
          s->a, "subscript '%c' is repeated in operand %d, but its dims "
          "have sizes %s and %s", ein_char(t->lab[j]), i,
          sym_text(s, x->shape[first]), sym_text(s, x->shape[v->rank])));
    /* the repeat is dim v->rank of the current tensor (dims after it
     * still to come) */
    SVal a[4] = {tsv(v->t, loc), sv_int(K(s, 0), loc),
                 sv_int(K(s, first), loc), sv_int(K(s, v->rank), loc)};
    IrRef dg = call(s, loc, "diagonal", 4, a).ref;
    if (dg < 0) return false;
    int r2 = sema_val(s, dg)->rank;
    int64_t perm[MAX_DIMS];
    for (int p = 0, q = 0; p < r2; p++)
      perm[p] = p == first ? r2 - 1 : q++;
    v->t = sema_permute(s, dg, perm, r2, loc).ref;
    if (v->t < 0) return false;
  }
  return true;
}

static int ein_find(const EinVal *v, int id) {
  for (int d = 0; d < v->rank; d++)
    if (v->ids[d] == id) return d;
  return -1;
}

static const char *ein_id_text(Sema *s, int id) {
  return id < EIN_ELL ? arena_printf(s->a, "subscript '%c'", ein_char(id))
                      : "a dim under '...'";
}

/* Sizes of one id must agree across the operands (or be 1). */
static bool ein_sizes(Ein *e, const EinVal *v) {
  Sema *s = e->s;
  for (int id = 0; id < EIN_IDS; id++) {
    const Sym *size = NULL;
    int from = -1;
    for (int i = 0; i < e->nops; i++) {
      int d = ein_find(&v[i], id);
      if (d < 0) continue;
      const Sym *z = sema_val(s, v[i].t)->shape[d];
      if (!size || sym_is(size, 1)) {
        if (!size || !sym_is(z, 1)) size = z, from = i;
        continue;
      }
      if (z == size || sym_is(z, 1)) continue;
      EinTerm *t = &e->in[i];
      return ein_fail(e, t->start, t->end - t->start, arena_printf(
          s->a, "%s has size %s in operand %d but %s in operand %d; they "
          "must be equal or one of them 1", ein_id_text(s, id),
          sym_text(s, z), i, sym_text(s, size), from));
    }
  }
  return true;
}

/* Sums out the dims of v whose ids are not in keep (squeezes them where
 * they are all 1, as PyTorch, which keeps the dtype then). */
static bool ein_sum_out(Sema *s, EinVal *v, const bool *keep, Loc loc) {
  int64_t dims[MAX_DIMS];
  int n = 0, ones = 0;
  IrValue *x = sema_val(s, v->t);
  for (int d = 0; d < v->rank; d++)
    if (!keep[v->ids[d]]) {
      dims[n++] = d;
      ones += sym_is(x->shape[d], 1);
    }
  if (n == 0) return true;
  if (ones == n) v->t = sema_emit_squeeze(s, v->t, dims, n, loc);
  else v->t = reduce_dims(s, "sum", v->t, dims, n, false, loc);
  for (int i = 0, j = 0, k = 0; i < v->rank; i++) {
    if (k < n && dims[k] == i) {
      k++;
      continue;
    }
    v->ids[j++] = v->ids[i];
  }
  v->rank -= n;
  return v->t >= 0;
}

/* v permuted to the ids `order` (every id of v, once). */
static bool ein_permute(Sema *s, EinVal *v, const int *order, Loc loc) {
  int64_t perm[MAX_DIMS];
  bool ident = true;
  for (int i = 0; i < v->rank; i++) {
    perm[i] = ein_find(v, order[i]);
    ident &= perm[i] == i;
  }
  if (!ident) v->t = sema_permute(s, v->t, perm, v->rank, loc).ref;
  memcpy(v->ids, order, sizeof *order * (size_t)v->rank);
  return v->t >= 0;
}

/* v's shape as [its first nb dims, the product of the next n1, the
 * product of the n2 after them]. */
static void ein_group(Sema *s, const EinVal *v, int nb, int n1, int n2,
                      const Sym **out) {
  const Sym *const *sh = sema_val(s, v->t)->shape;
  for (int i = 0; i < nb; i++) out[i] = sh[i];
  out[nb] = sym_prod(s->st, sh + nb, n1);
  out[nb + 1] = sym_prod(s->st, sh + nb + n1, n2);
}

/* a and b contracted over the ids they share and `keep` lacks: a
 * product when nothing is summed, else a batched matmul of a as
 * [batch, M, K] and b as [batch, K, N] (PyTorch's sumproduct_pair). */
static bool ein_pair(Ein *e, EinVal *a, EinVal *b, const bool *keep,
                     EinVal *out) {
  Sema *s = e->s;
  Loc loc = e->c->loc;
  bool ka[EIN_IDS], kb[EIN_IDS];
  for (int id = 0; id < EIN_IDS; id++) {
    ka[id] = keep[id] || ein_find(b, id) >= 0;
    kb[id] = keep[id] || ein_find(a, id) >= 0;
  }
  if (!ein_sum_out(s, a, ka, loc) || !ein_sum_out(s, b, kb, loc)) return false;
  int bat[MAX_DIMS], m[MAX_DIMS], k[MAX_DIMS], n[MAX_DIMS];
  int nbat = 0, nm = 0, nk = 0, nn = 0;
  for (int d = 0; d < a->rank; d++) {
    int id = a->ids[d];
    if (ein_find(b, id) < 0) m[nm++] = id;
    else if (keep[id]) bat[nbat++] = id;
    else k[nk++] = id;
  }
  for (int d = 0; d < b->rank; d++)
    if (ein_find(a, b->ids[d]) < 0) n[nn++] = b->ids[d];
  /* shared dims of size 1 on one side broadcast */
  const Sym *sa[MAX_DIMS], *sb[MAX_DIMS];
  IrValue av = *sema_val(s, a->t), bv = *sema_val(s, b->t);
  memcpy(sa, av.shape, sizeof *sa * (size_t)a->rank);
  memcpy(sb, bv.shape, sizeof *sb * (size_t)b->rank);
  for (int d = 0; d < a->rank; d++) {
    int j = ein_find(b, a->ids[d]);
    if (j < 0 || sa[d] == sb[j]) continue;
    if (sym_is(sa[d], 1)) sa[d] = sb[j];
    else sb[j] = sa[d];
  }
  a->t = sema_expand_to(s, a->t, a->rank, sa, loc);
  b->t = sema_expand_to(s, b->t, b->rank, sb, loc);
  int oa[MAX_DIMS], ob[MAX_DIMS], na = 0, nbb = 0;
  for (int i = 0; i < nbat; i++) oa[na++] = bat[i], ob[nbb++] = bat[i];
  for (int i = 0; i < nm; i++) oa[na++] = m[i];
  for (int i = 0; i < nk; i++) oa[na++] = k[i], ob[nbb++] = k[i];
  for (int i = 0; i < nn; i++) ob[nbb++] = n[i];
  if (!ein_permute(s, a, oa, loc) || !ein_permute(s, b, ob, loc)) return false;
  out->rank = 0;
  for (int i = 0; i < nbat; i++) out->ids[out->rank++] = bat[i];
  for (int i = 0; i < nm; i++) out->ids[out->rank++] = m[i];
  for (int i = 0; i < nn; i++) out->ids[out->rank++] = n[i];
  if (!sema_rank_ok(s, out->rank, loc)) return false;
  if (nk == 0) { /* [batch, M, 1...] * [batch, 1..., N] */
    IrRef ta = unsqueeze_trailing(s, a->t, nn, loc), tb = b->t;
    for (int i = 0; i < nm; i++) tb = sema_emit_unsqueeze(s, tb, nbat, loc);
    out->t = bin(s, OP_MUL, ta, tb, loc);
    return out->t >= 0;
  }
  if (av.dtype == DT_BOOL) {
    diag_error(s->d, loc, "einsum(): contracting bool tensors is not "
               "implemented; convert them with .to(i64) or .to(f32)");
    return false;
  }
  if (av.dtype != bv.dtype) {
    diag_error(s->d, loc, "einsum(): contracting operands of dtypes %s and "
               "%s needs one dtype; convert one with .to()",
               dtype_name(av.dtype), dtype_name(bv.dtype));
    return false;
  }
  const Sym **ga = sym_array(s, nbat + 2), **gb = sym_array(s, nbat + 2);
  ein_group(s, a, nbat, nm, nk, ga);
  ein_group(s, b, nbat, nk, nn, gb);
  IrRef ta = reshape_to(s, a->t, ga, nbat + 2, loc);
  IrRef tb = reshape_to(s, b->t, gb, nbat + 2, loc);
  IrRef r = sema_matmul(s, ta, tb, loc).ref;
  if (r < 0) return false;
  const Sym **rs = sym_array(s, out->rank);
  const Sym *const *sha = sema_val(s, a->t)->shape;
  const Sym *const *shb = sema_val(s, b->t)->shape;
  memcpy(rs, sha, sizeof *rs * (size_t)(nbat + nm));
  memcpy(rs + nbat + nm, shb + nbat + nk, sizeof *rs * (size_t)nn);
  out->t = reshape_to(s, r, rs, out->rank, loc);
  return out->t >= 0;
}

/* The operands: positionals after the equation, or one list of them. */
static bool ein_operands(Sema *s, CallArgs *c) {
  if (c->npos == 2 && c->pos[1].kind == SV_LIST) {
    SVal *items = c->pos[1].items;
    int n = c->pos[1].nitems;
    SVal *pos = arena_alloc(s->a, sizeof *pos * (size_t)(n + 1));
    pos[0] = c->pos[0];
    memcpy(pos + 1, items, sizeof *pos * (size_t)n);
    c->pos = pos, c->npos = n + 1;
  }
  if (c->npos < 2) {
    diag_error(s->d, c->loc, "einsum(): needs at least one operand tensor "
               "after the equation");
    return false;
  }
  for (int i = 1; i < c->npos; i++)
    if (c->pos[i].kind != SV_TENSOR) {
      diag_error(s->d, c->pos[i].loc, "einsum(): operand %d must be a "
                 "tensor, got %s", i - 1, sv_kind_name(&c->pos[i]));
      return false;
    }
  return true;
}

static SVal h_einsum(Sema *s, CallArgs *c, const Builtin *bt) {
  (void)bt;
  if (sema_has_error_arg(c) || !sema_args_done(s, c, c->npos))
    return sv_error();
  if (c->npos < 1 || c->pos[0].kind != SV_STR) {
    diag_error(s->d, c->npos ? c->pos[0].loc : c->loc,
               "einsum(): the first argument must be the equation, a string "
               "such as \"ij,jk->ik\"");
    return sv_error();
  }
  if (!ein_operands(s, c)) return sv_error();
  Ein e;
  memset(&e, 0, sizeof e);
  e.s = s, e.c = c, e.eq = c->pos[0].s, e.loc = c->pos[0].loc;
  e.nops = c->npos - 1;
  e.in = arena_alloc(s->a, sizeof *e.in * (size_t)e.nops);
  memset(e.in, 0, sizeof *e.in * (size_t)e.nops);
  int count[EIN_LABELS] = {0};
  if (!ein_parse(&e) || !ein_output(&e, count)) return sv_error();
  EinVal *v = arena_alloc(s->a, sizeof *v * (size_t)e.nops);
  for (int i = 0; i < e.nops; i++)
    if (!ein_operand(&e, i, &v[i])) return sv_error();
  if (!ein_sizes(&e, v)) return sv_error();
  bool keep[EIN_IDS] = {false};
  for (int i = 0; i < e.nout; i++) keep[e.outids[i]] = true;
  EinVal cur = v[0];
  if (e.nops == 1 && !ein_sum_out(s, &cur, keep, c->loc)) return sv_error();
  for (int i = 1; i < e.nops; i++) {
    /* keep what the output or a later operand needs */
    bool kp[EIN_IDS];
    memcpy(kp, keep, sizeof kp);
    for (int j = i + 1; j < e.nops; j++)
      for (int d = 0; d < v[j].rank; d++) kp[v[j].ids[d]] = true;
    EinVal next;
    if (!ein_pair(&e, &cur, &v[i], kp, &next)) return sv_error();
    cur = next;
  }
  if (!ein_permute(s, &cur, e.outids, c->loc)) return sv_error();
  return sv_tensor(cur.t, c->loc);
}

/* ---- conv1d ---- */

static SVal h_conv1d(Sema *s, CallArgs *c, const Builtin *bt) {
  (void)bt;
  return sema_conv(s, c, 1);
}

/* ---- batch_norm, group_norm, rms_norm ---- */

/* A per-channel parameter of a normalization over x: C elements (PyTorch
 * checks the count, so [1, C] passes too) as a [C] tensor, in the dtype of
 * x or, for half x, f32 (PyTorch's mixed types), *mixed telling which. */
static bool channel_param(Sema *s, CallArgs *c, const char *what, IrRef x,
                          IrRef *p, int *mixed) {
  if (*p < 0) return true;
  IrValue xv = *sema_val(s, x), pv = *sema_val(s, *p);
  const Sym *n = sym_prod(s->st, pv.shape, pv.rank), *ch = xv.shape[1];
  if (n != ch) {
    diag_error(s->d, c->loc,
               "%s(): %s must have one element per channel (%s), but has "
               "shape %s", c->name, what, sym_text(s, ch),
               shape_str(s, pv.shape, pv.rank));
    sema_note_origin(s, *p);
    return false;
  }
  bool half = xv.dtype == DT_F16 || xv.dtype == DT_BF16;
  int m = pv.dtype == xv.dtype ? 0 : (half && pv.dtype == DT_F32) ? 1 : -1;
  if (m < 0 || (*mixed >= 0 && m != *mixed)) {
    diag_error(s->d, c->loc,
               "%s(): %s has dtype %s but the input has dtype %s; the "
               "parameters must all have the input's dtype%s",
               c->name, what, dtype_name(pv.dtype), dtype_name(xv.dtype),
               half ? " or all be f32" : "");
    return false;
  }
  *mixed = m;
  *p = reshape_to(s, *p, &ch, 1, c->loc);
  return *p >= 0;
}

static bool norm_input(Sema *s, CallArgs *c, IrRef x) {
  if (!float_input(s, c, x)) return false;
  IrValue xv = *sema_val(s, x);
  if (xv.rank >= 2) return true;
  diag_error(s->d, c->loc,
             "%s(): the input must have at least 2 dims [N, C, *], but has "
             "shape %s", c->name, shape_str(s, xv.shape, xv.rank));
  sema_note_origin(s, x);
  return false;
}

/* PyTorch's inference batch norm (batch_norm_cpu_collect_linear_and_
 * constant_terms): per channel alpha = w / sqrt(var + eps) and
 * beta = b - mean * alpha in the opmath type, then x * alpha + beta. */
static SVal h_batch_norm(Sema *s, CallArgs *c, const Builtin *bt) {
  (void)bt;
  IrRef x, mean, var, w, b;
  bool training;
  double momentum, eps;
  Loc loc = c->loc;
  if (sema_has_error_arg(c) || !sema_input_arg(s, c, &x) ||
      !opt_tensor(s, c, 1, "running_mean", &mean) ||
      !opt_tensor(s, c, 2, "running_var", &var) ||
      !opt_tensor(s, c, 3, "weight", &w) || !opt_tensor(s, c, 4, "bias", &b) ||
      !sema_bool_arg(s, sema_arg(s, c, 5, "training"), c->name, "training",
                     false, &training) ||
      !num_arg(s, c, sema_arg(s, c, 6, "momentum"), "momentum", 0.1,
               &momentum) ||
      !num_arg(s, c, sema_arg(s, c, 7, "eps"), "eps", 1e-5, &eps) ||
      !sema_args_done(s, c, 8) || !norm_input(s, c, x))
    return sv_error();
  if (training) {
    diag_error(s->d, loc,
               "batch_norm(): training=true is not supported by tdsl: "
               "kernels normalize with the running statistics (inference); "
               "pass training=false");
    return sv_error();
  }
  if (mean < 0 || var < 0) {
    diag_error(s->d, loc,
               "batch_norm(): running_mean and running_var must be tensors "
               "in inference mode (training=false)");
    return sv_error();
  }
  int mixed = -1;
  if (!channel_param(s, c, "running_mean", x, &mean, &mixed) ||
      !channel_param(s, c, "running_var", x, &var, &mixed) ||
      !channel_param(s, c, "weight", x, &w, &mixed) ||
      !channel_param(s, c, "bias", x, &b, &mixed))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  DType ct = opmath(xv.dtype);
  mean = to_dtype(s, mean, ct, loc), var = to_dtype(s, var, ct, loc);
  IrRef alpha = unary(s, OP_RECIPROCAL,
                      unary(s, OP_SQRT, bin_num(s, OP_ADD, var, eps, false,
                                                loc), loc), loc);
  if (w >= 0) alpha = bin(s, OP_MUL, alpha, to_dtype(s, w, ct, loc), loc);
  IrRef beta = bin(s, OP_MUL, mean, alpha, loc);
  beta = b >= 0 ? bin(s, OP_SUB, to_dtype(s, b, ct, loc), beta, loc)
                : unary(s, OP_NEG, beta, loc);
  alpha = unsqueeze_trailing(s, alpha, xv.rank - 2, loc);
  beta = unsqueeze_trailing(s, beta, xv.rank - 2, loc);
  IrRef y = bin(s, OP_ADD, bin(s, OP_MUL, to_dtype(s, x, ct, loc), alpha, loc),
                beta, loc);
  y = to_dtype(s, y, xv.dtype, loc);
  return sv_tensor(like_input_format(s, y, x, loc), loc);
}

/* PyTorch's F.group_norm rejects a batch with one value per group in
 * all (N * C // num_groups * spatial == 1): statically, or at entry. */
static bool group_norm_values(Sema *s, CallArgs *c, const IrValue *xv,
                              int64_t g) {
  const Sym *n = sym_mul(s->st, sym_floordiv(s->st, sym_mul(s->st, xv->shape[0],
                                                           xv->shape[1]),
                                            K(s, g)),
                         sym_prod(s->st, xv->shape + 2, xv->rank - 2));
  const char *msg = arena_printf(
      s->a, "group_norm(): the input %s has one value per group in the "
      "whole batch (N * C / num_groups * spatial size = 1), which PyTorch "
      "rejects", shape_str(s, xv->shape, xv->rank));
  int64_t v;
  if (sym_is_const(n, &v)) {
    if (v == 1) diag_error(s->d, c->loc, "%s", msg);
    return v != 1;
  }
  const Sym *one = K(s, 1);
  sema_check_le(s, one, sym_max(s->st, sym_sub(s->st, n, one),
                                sym_sub(s->st, one, n)), msg, c->loc);
  return true;
}

/* group_norm: x [N, C, *] viewed as [N, G, C/G, *]; per group the mean
 * (accumulated in f64), then the (biased) variance of the deviations —
 * two passes, accurate — and y = (x - mean) / sqrt(var + eps), scaled and
 * shifted per channel. */
static SVal h_group_norm(Sema *s, CallArgs *c, const Builtin *bt) {
  (void)bt;
  IrRef x, w, b;
  int64_t g;
  double eps;
  Loc loc = c->loc;
  if (sema_has_error_arg(c) || !sema_input_arg(s, c, &x) ||
      !sema_req_int(s, c, 1, "num_groups", &g) ||
      !opt_tensor(s, c, 2, "weight", &w) || !opt_tensor(s, c, 3, "bias", &b) ||
      !num_arg(s, c, sema_arg(s, c, 4, "eps"), "eps", 1e-5, &eps) ||
      !sema_args_done(s, c, 5) || !norm_input(s, c, x))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  const Sym *ch = xv.shape[1];
  if (g <= 0) {
    diag_error(s->d, loc, "group_norm(): num_groups must be positive, got "
               "%lld", (long long)g);
    return sv_error();
  }
  const Sym *rem = sym_mod(s->st, ch, K(s, g));
  int64_t rv;
  if (sym_is_const(rem, &rv) && rv != 0) {
    diag_error(s->d, loc,
               "group_norm(): the input %s has %s channels, which num_groups="
               "%lld does not divide", shape_str(s, xv.shape, xv.rank),
               sym_text(s, ch), (long long)g);
    sema_note_origin(s, x);
    return sv_error();
  }
  if (!sym_is_const(rem, NULL))
    sema_check_eq(s, rem, K(s, 0), arena_printf(s->a, "group_norm(): the "
                  "channels must be divisible by num_groups=%lld",
                  (long long)g), loc);
  if (!group_norm_values(s, c, &xv, g)) return sv_error();
  for (int i = 0; i < 2; i++) {
    IrRef p = i ? b : w;
    if (p < 0) continue;
    IrValue pv = *sema_val(s, p);
    if (pv.rank == 1 && pv.shape[0] == ch) continue;
    diag_error(s->d, loc,
               "group_norm(): %s must be a vector of one value per channel "
               "[%s], but has shape %s", i ? "bias" : "weight",
               sym_text(s, ch), shape_str(s, pv.shape, pv.rank));
    sema_note_origin(s, p);
    return sv_error();
  }
  int mixed = -1;
  if (!channel_param(s, c, "weight", x, &w, &mixed) ||
      !channel_param(s, c, "bias", x, &b, &mixed))
    return sv_error();
  DType ct = opmath(xv.dtype);
  IrRef x5 = split_dim(s, to_dtype(s, x, ct, loc), 1, K(s, g), loc);
  int64_t dims[MAX_DIMS];
  int nd = 0;
  for (int d = 2; d <= xv.rank; d++) dims[nd++] = d;
  /* the mean accumulated in f64, as layer_norm's: a group of one
   * repeated value normalizes to exactly the bias */
  IrRef mean = to_dtype(s, reduce_dims(s, "mean", to_dtype(s, x5, DT_F64, loc),
                                       dims, nd, true, loc), ct, loc);
  IrRef dev = bin(s, OP_SUB, x5, mean, loc);
  IrRef var = reduce_dims(s, "mean", bin(s, OP_MUL, dev, dev, loc), dims, nd,
                          true, loc);
  IrRef rstd = unary(s, OP_RECIPROCAL,
                     unary(s, OP_SQRT, bin_num(s, OP_ADD, var, eps, false,
                                               loc), loc), loc);
  IrRef y = bin(s, OP_MUL, dev, rstd, loc);
  for (int i = 0; i < 2 && y >= 0; i++) {
    IrRef p = i ? b : w;
    if (p < 0) continue;
    p = split_dim(s, to_dtype(s, p, ct, loc), 0, K(s, g), loc);
    p = unsqueeze_trailing(s, p, xv.rank - 2, loc);
    y = bin(s, i ? OP_ADD : OP_MUL, y, p, loc);
  }
  if (y < 0) return sv_error();
  y = to_dtype(s, merge_dims(s, y, 1, ch, loc), xv.dtype, loc);
  return sv_tensor(like_input_format(s, y, x, loc), loc);
}

/* normalized_shape: an int or a list of ints, possibly symbolic. */
static bool shape_arg(Sema *s, CallArgs *c, const Sym ***out, int *n) {
  const SVal *v = sema_arg(s, c, 1, "normalized_shape");
  if (!v) {
    diag_error(s->d, c->loc, "%s(): missing normalized_shape", c->name);
    return false;
  }
  const SVal *items = v->kind == SV_LIST ? v->items : v;
  *n = v->kind == SV_LIST ? v->nitems : 1;
  *out = sym_array(s, *n);
  for (int i = 0; i < *n; i++)
    if (!sema_sym_arg(s, &items[i], "normalized_shape", &(*out)[i]))
      return false;
  return true;
}

/* eps: None is the epsilon of the opmath type; a number is first stored
 * in the input's dtype (PyTorch's scalar_t eps_val). */
static bool rms_eps(Sema *s, CallArgs *c, const SVal *v, DType dt,
                    double *eps) {
  if (absent(v)) {
    *eps = dt == DT_F64 ? DBL_EPSILON : FLT_EPSILON;
    return true;
  }
  if (!num_arg(s, c, v, "eps", 0, eps)) return false;
  if (dt == DT_F32) *eps = (float)*eps;
  else if (dt == DT_F16) *eps = f16_to_f32(f32_to_f16((float)*eps));
  else if (dt == DT_BF16) *eps = bf16_to_f32(f32_to_bf16((float)*eps));
  return true;
}

/* rms_norm: PyTorch's composite (2.4): x in opmath,
 * x * rsqrt(mean(x^2 over the normalized dims) + eps), back to the input
 * dtype, then times weight (promoting). */
static SVal h_rms_norm(Sema *s, CallArgs *c, const Builtin *bt) {
  (void)bt;
  IrRef x, w;
  const Sym **ns;
  int nn;
  double eps;
  Loc loc = c->loc;
  const SVal *ev = sema_arg(s, c, 3, "eps");
  if (sema_has_error_arg(c) || !sema_input_arg(s, c, &x) ||
      !shape_arg(s, c, &ns, &nn) || !opt_tensor(s, c, 2, "weight", &w) ||
      !sema_args_done(s, c, 4) || !float_input(s, c, x))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  if (!rms_eps(s, c, ev, xv.dtype, &eps)) return sv_error();
  const char *bad = NULL;
  if (nn == 0)
    bad = "normalized_shape must have at least one dim";
  else if (nn > xv.rank ||
           !sym_list_equal(xv.shape + xv.rank - nn, nn, ns, nn))
    bad = arena_printf(s->a, "normalized_shape %s must match the trailing "
                       "dims of the input, i.e. an input of shape [*, %s, "
                       "but the input has shape %s", shape_str(s, ns, nn),
                       shape_str(s, ns, nn) + 1,
                       shape_str(s, xv.shape, xv.rank));
  else if (w >= 0 && !sym_list_equal(sema_val(s, w)->shape,
                                     sema_val(s, w)->rank, ns, nn))
    bad = arena_printf(s->a, "weight must have shape normalized_shape = %s, "
                       "but it has shape %s", shape_str(s, ns, nn),
                       sema_shape_str(s, w));
  if (bad) {
    diag_error(s->d, loc, "rms_norm(): %s", bad);
    return sv_error();
  }
  DType ct = opmath(xv.dtype);
  IrRef xc = to_dtype(s, x, ct, loc);
  int64_t dims[MAX_DIMS];
  for (int i = 0; i < nn; i++) dims[i] = xv.rank - nn + i;
  IrRef ms = reduce_dims(s, "mean", bin(s, OP_MUL, xc, xc, loc), dims, nn,
                         true, loc);
  IrRef r = unary(s, OP_RSQRT, bin_num(s, OP_ADD, ms, eps, false, loc), loc);
  IrRef y = to_dtype(s, bin(s, OP_MUL, xc, r, loc), xv.dtype, loc);
  if (w >= 0) y = bin(s, OP_MUL, y, w, loc);
  return sv_tensor(y, loc);
}

/* ---- scaled_dot_product_attention ---- */

static bool sdpa_operands(Sema *s, CallArgs *c, IrRef q, IrRef k, IrRef v) {
  IrValue qv = *sema_val(s, q), kv = *sema_val(s, k), vv = *sema_val(s, v);
  const char *bad = NULL;
  if (qv.rank < 2 || kv.rank < 2 || vv.rank < 2)
    bad = arena_printf(s->a, "query, key and value must be at least 2-D "
                       "[..., L, E], but they are %d-D, %d-D and %d-D",
                       qv.rank, kv.rank, vv.rank);
  else if (qv.dtype != kv.dtype || qv.dtype != vv.dtype)
    bad = arena_printf(s->a, "query, key and value must have the same "
                       "dtype, but they are %s, %s and %s",
                       dtype_name(qv.dtype), dtype_name(kv.dtype),
                       dtype_name(vv.dtype));
  else if (!dtype_is_float(qv.dtype))
    bad = arena_printf(s->a, "not implemented for dtype %s; it needs "
                       "floating-point inputs: convert with .to(f32)",
                       dtype_name(qv.dtype));
  else if (qv.shape[qv.rank - 1] != kv.shape[kv.rank - 1])
    bad = arena_printf(s->a, "query %s and key %s must have the same "
                       "embedding size (last dim)",
                       shape_str(s, qv.shape, qv.rank),
                       shape_str(s, kv.shape, kv.rank));
  else if (kv.shape[kv.rank - 2] != vv.shape[vv.rank - 2])
    bad = arena_printf(s->a, "key %s and value %s must have the same "
                       "sequence length (second-to-last dim)",
                       shape_str(s, kv.shape, kv.rank),
                       shape_str(s, vv.shape, vv.rank));
  if (bad) diag_error(s->d, c->loc, "scaled_dot_product_attention(): %s", bad);
  return !bad;
}

/* The mask: bool (keep where true) or float (added), shaped to broadcast
 * to the scores without changing them (PyTorch adds it in place). */
static bool sdpa_mask(Sema *s, CallArgs *c, IrRef m, DType qdt,
                      const IrValue *sv) {
  IrValue mv = *sema_val(s, m);
  if (mv.dtype != DT_BOOL && mv.dtype != DT_F32 && mv.dtype != qdt) {
    diag_error(s->d, c->loc,
               "scaled_dot_product_attention(): attn_mask must be bool, f32 "
               "or the query's dtype %s, but is %s", dtype_name(qdt),
               dtype_name(mv.dtype));
    return false;
  }
  if (fits_into(sv->shape, sv->rank, mv.shape, mv.rank)) return true;
  diag_error(s->d, c->loc,
             "scaled_dot_product_attention(): attn_mask of shape %s does not "
             "broadcast to the attention scores %s ([..., L, S])",
             shape_str(s, mv.shape, mv.rank),
             shape_str(s, sv->shape, sv->rank));
  sema_note_origin(s, m);
  return false;
}

/* The options: dropout_p 0, no mask with is_causal, scale a number. */
static bool sdpa_options(Sema *s, CallArgs *c, IrRef mask, bool *causal,
                         const SVal **scale) {
  double p;
  bool gqa;
  *scale = sema_arg(s, c, KW_ONLY, "scale");
  if (!num_arg(s, c, sema_arg(s, c, 4, "dropout_p"), "dropout_p", 0, &p) ||
      !sema_bool_arg(s, sema_arg(s, c, 5, "is_causal"), c->name, "is_causal",
                     false, causal) ||
      !sema_bool_arg(s, sema_arg(s, c, KW_ONLY, "enable_gqa"), c->name,
                     "enable_gqa", false, &gqa) ||
      !sema_args_done(s, c, 6))
    return false;
  double sc;
  if (!absent(*scale) && !num_arg(s, c, *scale, "scale", 0, &sc)) return false;
  const char *bad = NULL;
  if (p != 0)
    bad = "dropout_p must be 0: kernels run inference, without dropout";
  else if (gqa)
    bad = "enable_gqa=true is not supported by tdsl; expand key and value "
          "to the query's heads";
  else if (*causal && mask >= 0)
    bad = "give either attn_mask or is_causal=true, not both";
  if (bad) diag_error(s->d, c->loc, "scaled_dot_product_attention(): %s", bad);
  return !bad;
}

/* The causal mask [L, S]: key position j <= query position i (ones(L,
 * S).tril()), from two aranges. */
static IrRef causal_mask(Sema *s, const Sym *l, const Sym *sl, Loc loc) {
  SVal al = sv_int(l, loc), as = sv_int(sl, loc);
  IrRef i = call(s, loc, "arange", 1, &al).ref;
  IrRef j = call(s, loc, "arange", 1, &as).ref;
  if (i < 0 || j < 0) return -1;
  i = sema_emit_unsqueeze(s, i, 1, loc);
  return bin(s, OP_LE, j, i, loc);
}

/* softmax(q @ k^T * scale + mask) @ v (PyTorch's math reference), half
 * inputs in f32 and the result rounded once. */
static SVal h_sdpa(Sema *s, CallArgs *c, const Builtin *bt) {
  (void)bt;
  IrRef q, k, v, mask;
  bool causal;
  const SVal *scale;
  Loc loc = c->loc;
  if (sema_has_error_arg(c) || !need_tensor(s, c, 0, "query", &q) ||
      !need_tensor(s, c, 1, "key", &k) || !need_tensor(s, c, 2, "value", &v) ||
      !opt_tensor(s, c, 3, "attn_mask", &mask) ||
      !sdpa_options(s, c, mask, &causal, &scale) ||
      !sdpa_operands(s, c, q, k, v))
    return sv_error();
  IrValue qv = *sema_val(s, q);
  DType ct = opmath(qv.dtype);
  IrRef kt = sema_transpose(s, to_dtype(s, k, ct, loc), -2, -1, loc).ref;
  IrRef sc = sema_matmul(s, to_dtype(s, q, ct, loc), kt, loc).ref;
  if (sc < 0) return sv_error();
  IrValue sv = *sema_val(s, sc);
  if (mask >= 0 && !sdpa_mask(s, c, mask, qv.dtype, &sv)) return sv_error();
  const Sym *e = qv.shape[qv.rank - 1];
  if (!absent(scale)) {
    sc = bin_num(s, OP_MUL, sc, sv_num_f(scale), false, loc);
  } else if (sym_is_const(e, NULL)) {
    int64_t ev;
    sym_is_const(e, &ev);
    sc = bin_num(s, OP_MUL, sc, 1.0 / sqrt((double)ev), false, loc);
  } else { /* 1 / sqrt(E) of a run-time E, in double as PyTorch's */
    SVal es = sv_int(e, loc);
    IrRef r = to_dtype(s, sema_to_tensor(s, &es, "E"), DT_F64, loc);
    r = unary(s, OP_RECIPROCAL, unary(s, OP_SQRT, r, loc), loc);
    sc = bin(s, OP_MUL, sc, r, loc);
  }
  if (causal)
    sc = mask_fill(s, causal_mask(s, sv.shape[sv.rank - 2],
                                  sv.shape[sv.rank - 1], loc), sc, loc);
  else if (mask >= 0 && sema_val(s, mask)->dtype == DT_BOOL)
    sc = mask_fill(s, mask, sc, loc);
  else if (mask >= 0)
    sc = to_dtype(s, bin(s, OP_ADD, sc, to_dtype(s, mask, ct, loc), loc), ct,
                  loc);
  if (sc < 0) return sv_error();
  SVal sm[2] = {tsv(sc, loc), sv_int(K(s, -1), loc)};
  IrRef p = call(s, loc, "softmax", 2, sm).ref;
  if (p < 0) return sv_error();
  IrRef out = sema_matmul(s, p, to_dtype(s, v, ct, loc), loc).ref;
  return sv_tensor(to_dtype(s, out, qv.dtype, loc), loc);
}

const Builtin sema_layer_builtins[] = {
    {"linear", h_linear, OP_MATMUL, BF_FUNC},
    {"addmm", h_addmm, OP_MATMUL, BF_BOTH},
    {"bmm", h_bmm, OP_MATMUL, BF_BOTH},
    {"baddbmm", h_baddbmm, OP_MATMUL, BF_BOTH},
    {"einsum", h_einsum, OP_MATMUL, BF_FUNC},
    {"conv1d", h_conv1d, OP_CONV2D, BF_FUNC},
    {"batch_norm", h_batch_norm, OP_COUNT, BF_FUNC},
    {"group_norm", h_group_norm, OP_COUNT, BF_FUNC},
    {"rms_norm", h_rms_norm, OP_COUNT, BF_FUNC},
    {"scaled_dot_product_attention", h_sdpa, OP_MATMUL, BF_FUNC},
    {NULL, NULL, OP_COUNT, 0},
};
