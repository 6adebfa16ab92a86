/* sema_conv.c — the window ops: conv2d, conv1d and the pools
 * (max_pool2d, avg_pool2d, adaptive_avg_pool2d).
 *
 * The builder reads the evaluated call arguments (CallArgs), checks them
 * with PyTorch's rules (every error PyTorch raises is a diagnostic at the
 * function or method name, in the project's own words), and appends the
 * IR of ops.h: the op itself plus the CASTs and UNSQUEEZE/EXPAND/SQUEEZE
 * views its operand conventions need.  The result is channels-last when the input (or the
 * conv weight) suggests it, as PyTorch decides.
 *
 * Unbatched (rank-3) inputs are unsqueezed to rank 4 and the result
 * squeezed back (conv2d is written so in PyTorch; the pools give the same
 * geometry, a rank-3 pool result being always contiguous), so the ops
 * themselves only see rank 4.  conv1d is conv2d over [N, C, 1, L] inputs
 * and [O, C/groups, 1, K] weights (PyTorch's own route), its messages
 * showing the 1-D shapes.
 *
 * Needs: sema_internal.h, sema_values.c, sema_args.c, geometry.c,
 * geometry_views.c (unsqueeze/squeeze of unbatched inputs).
 * Used by: sema_expr.c (the call dispatch, through sema_conv_builtins),
 * sema_layers.c (conv1d, through sema_conv). */
#include <string.h>

#include "sema_internal.h"

/* ---- Shared by conv2d and the pools ---- */

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

/* An input of rank nsp + 1 (unbatched) or nsp + 2 (nsp spatial dims);
 * an unbatched one gets a leading 1, a 1-D one (conv1d) a 1 at dim 2. */
static bool batched_input(Sema *s, CallArgs *c, IrRef *x, bool *unbatched,
                          int nsp) {
  IrValue xv = *sema_val(s, *x);
  *unbatched = xv.rank == nsp + 1;
  if (xv.rank != nsp + 1 && xv.rank != nsp + 2) {
    diag_error(s->d, c->loc,
               "%s(): expected a %d-D (unbatched) or %d-D (batched) input "
               "%s, but got shape %s", c->name, nsp + 1, nsp + 2,
               nsp == 1 ? "[N, C, L]" : "[N, C, H, W]",
               shape_str(s, xv.shape, xv.rank));
    sema_note_origin(s, *x);
    return false;
  }
  if (*unbatched) *x = sema_emit_unsqueeze(s, *x, 0, c->loc);
  if (nsp == 1) *x = sema_emit_unsqueeze(s, *x, 2, c->loc);
  return true;
}

/* A rank-4 shape as the user sees it: without the added dim 2 when
 * nsp == 1 (conv1d). */
static const char *nd_shape(Sema *s, const Sym *const *shape, int rank,
                            int nsp) {
  if (nsp != 1 || rank != 4) return shape_str(s, shape, rank);
  const Sym *v[3] = {shape[0], shape[1], shape[3]};
  return shape_str(s, v, 3);
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
                        const char *kernel, int nsp) {
  int64_t h, w;
  bool sh = sym_is_const(oh, &h), sw = sym_is_const(ow, &w);
  const Sym *ph = sym_add(s->st, xv->shape[2], K(s, 2 * pad[0]));
  const Sym *pw = sym_add(s->st, xv->shape[3], K(s, 2 * pad[1]));
  const char *hin = nsp == 1 ? "" : arena_printf(s->a, "%s, ", sym_text(s, ph));
  const char *hout = nsp == 1 ? "" : arena_printf(s->a, "%sx", sym_text(s, oh));
  const char *msg = arena_printf(
      s->a, "%s(): the padded input size [%s%s] is smaller than the "
      "kernel %s", c->name, hin, sym_text(s, pw), kernel);
  if ((sh && h < 1) || (sw && w < 1)) {
    diag_error(s->d, c->loc,
               "%s: the output would be %s%s; use a smaller kernel, more "
               "padding or a larger input", msg, hout, sym_text(s, ow));
    return false;
  }
  if (!sh) sema_check_le(s, K(s, 1), oh, msg, c->loc);
  if (!sw) sema_check_le(s, K(s, 1), ow, msg, c->loc);
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
                          const int64_t pad[2], int nsp) {
  const Sym *spatial = K(s, 1);
  for (int d = 0; d < 2; d++)
    if (pad[d] > 0) spatial = sym_mul(s->st, spatial, xv->shape[2 + d]);
  const Sym *nc = sym_mul(s->st, xv->shape[0], xv->shape[1]);
  const Sym *need = sym_min(s->st, nc, K(s, 1));
  int64_t have, want;
  bool static_have = sym_is_const(spatial, &have);
  bool static_want = sym_is_const(need, &want);
  const char *msg = arena_printf(
      s->a, "%s(): the input %s has an empty spatial dim; only the "
      "batch or the channel dim may be 0 (as in PyTorch)", c->name,
      nd_shape(s, xv->shape, 4, nsp));
  if (static_have && static_want) {
    if (want <= have) return true;
    diag_error(s->d, c->loc, "%s: give it a nonzero %s", msg,
               nsp == 1 ? "length" : "height and width");
    return false;
  }
  if (!(static_have && have >= 1) && !(static_want && want == 0))
    sema_check_le(s, need, spatial, msg, c->loc);
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
  return unbatched ? sema_emit_squeeze(s, r, &d0, 1, loc) : r;
}

/* ---- conv2d, conv1d ---- */

typedef struct ConvParams {
  int nsp; /* spatial dims the user wrote: 2 (conv2d) or 1 (conv1d, whose
              parameters are the W entries; H gets stride 1, no padding) */
  int64_t stride[2], pad[2], dil[2], groups;
  bool trim[2]; /* padding="same" with an odd total: drop output row/col 0 */
} ConvParams;

/* stride/padding/dilation: a pair (conv2d) or, for conv1d, an int or a
 * one-int list for W, H getting `hval`. */
static bool conv_pair(Sema *s, CallArgs *c, const SVal *v, const char *what,
                      int64_t dflt, int64_t hval, int nsp, int64_t out[2]) {
  if (nsp == 2) return pair_arg(s, c, v, what, dflt, out);
  out[0] = hval, out[1] = dflt;
  if (absent(v)) return true;
  int64_t buf[2];
  int n = 0;
  if (!sema_int_list(s, v, what, buf, &n, 2)) return false;
  if (n != 1) {
    diag_error(s->d, v->loc,
               "%s(): %s must be an int or a list of one int (one per "
               "spatial dim), got %d values", c->name, what, n);
    return false;
  }
  out[1] = buf[0];
  return true;
}

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
               "%s(): padding must be an int, %s, \"valid\" or \"same\", "
               "not \"%s\"", c->name, cp->nsp == 1 ? "a list of one int" :
               "a pair", p);
    return false;
  }
  if (cp->stride[0] != 1 || cp->stride[1] != 1) {
    diag_error(s->d, c->loc,
               "%s(): padding=\"same\" needs stride 1 (as in PyTorch)",
               c->name);
    return false;
  }
  for (int i = 0; i < 2; i++) {
    int64_t k;
    if (!sym_is_const(wv->shape[2 + i], &k)) {
      diag_error(s->d, c->loc,
                 "%s(): padding=\"same\" with kernel %s is not "
                 "supported by tdsl (it needs a static kernel size); pass "
                 "explicit padding", c->name,
                 cp->nsp == 1 ? shape_str(s, wv->shape + 3, 1)
                              : shape_str(s, wv->shape + 2, 2));
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
  if (!conv_pair(s, c, sv, "stride", 1, 1, cp->nsp, cp->stride) ||
      !conv_pair(s, c, dv, "dilation", 1, 1, cp->nsp, cp->dil) ||
      (!absent(gv) && !sema_int_arg(s, gv, "groups", &cp->groups)))
    return false;
  if (pv && pv->kind == SV_STR) {
    if (!conv_pad_str(s, c, pv->s, wv, cp)) return false;
  } else if (!conv_pair(s, c, pv, "padding", 0, 0, cp->nsp, cp->pad)) {
    return false;
  }
  const char *bad = NULL;
  for (int i = 0; i < 2 && !bad; i++) {
    if (cp->stride[i] <= 0) bad = "stride must be positive";
    else if (cp->dil[i] <= 0) bad = "dilation must be positive";
    else if (cp->pad[i] < 0) bad = "padding must not be negative";
  }
  if (!bad && cp->groups <= 0) bad = "groups must be positive";
  if (bad) diag_error(s->d, c->loc, "%s(): %s", c->name, bad);
  return !bad;
}

static bool conv_types(Sema *s, CallArgs *c, const IrValue *xv,
                       const IrValue *wv, int nsp) {
  /* PyTorch's CPU convolution takes every dtype but bool. */
  if (xv->dtype == DT_BOOL) {
    diag_error(s->d, c->loc,
               "%s(): not implemented for bool tensors; convert with "
               ".to(f32)", c->name);
    return false;
  }
  if (wv->dtype != xv->dtype) {
    diag_error(s->d, c->loc,
               "%s(): the input has dtype %s but the weight has dtype "
               "%s; they must be the same", c->name, dtype_name(xv->dtype),
               dtype_name(wv->dtype));
    return false;
  }
  if (wv->rank != nsp + 2) {
    diag_error(s->d, c->loc,
               "%s(): the weight must be %d-D [out_channels, "
               "in_channels/groups, %s], but has shape %s", c->name, nsp + 2,
               nsp == 1 ? "kL" : "kH, kW", shape_str(s, wv->shape, wv->rank));
    return false;
  }
  return true;
}

/* C == w.shape[1] * groups; O divisible by groups. */
static bool conv_channels(Sema *s, CallArgs *c, const IrValue *xv,
                          const IrValue *wv, const ConvParams *cp) {
  int64_t groups = cp->groups;
  const Sym *want = sym_mul(s->st, wv->shape[1], K(s, groups));
  if (xv->shape[1] != want) {
    diag_error(s->d, c->loc,
               "%s(): the weight %s with groups=%lld expects an input "
               "with %s channels, but the input %s has %s channels", c->name,
               nd_shape(s, wv->shape, 4, cp->nsp), (long long)groups,
               sym_text(s, want), nd_shape(s, xv->shape, 4, cp->nsp),
               sym_text(s, xv->shape[1]));
    return false;
  }
  const Sym *rem = sym_mod(s->st, wv->shape[0], K(s, groups));
  int64_t r;
  if (sym_is_const(rem, &r) && r != 0) {
    diag_error(s->d, c->loc,
               "%s(): the weight's %s output channels are not divisible "
               "by groups=%lld", c->name, sym_text(s, wv->shape[0]),
               (long long)groups);
    return false;
  }
  if (!sym_is_const(rem, NULL))
    sema_check_eq(s, rem, K(s, 0),
                  arena_printf(s->a, "%s(): out_channels must be divisible "
                               "by groups", c->name), c->loc);
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
               "%s(): bias must have shape [%s] (one per output "
               "channel), but has shape %s", c->name,
               sym_text(s, wv->shape[0]), shape_str(s, bv.shape, bv.rank));
    return false;
  }
  if (bv.dtype != wv->dtype) {
    diag_error(s->d, c->loc,
               "%s(): bias has dtype %s but the weight has dtype %s", c->name,
               dtype_name(bv.dtype), dtype_name(wv->dtype));
    return false;
  }
  return true;
}

/* The kernel's extent as "KHxKW" ("K" for conv1d), dilated when
 * dilation > 1. */
static const char *conv_kernel_str(Sema *s, const IrValue *wv,
                                   const ConvParams *cp) {
  const Sym *e[2];
  for (int i = 0; i < 2; i++)
    e[i] = sym_add(s->st, sym_mul(s->st, K(s, cp->dil[i]),
                                  sym_sub(s->st, wv->shape[2 + i], K(s, 1))),
                   K(s, 1));
  bool dilated = cp->dil[0] != 1 || cp->dil[1] != 1;
  if (cp->nsp == 1)
    return arena_printf(s->a, "%s(%s)", dilated ? "dilated " : "",
                        sym_text(s, e[1]));
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
    IrRef t = sema_emit_op_view(s, OP_SLICE, r, &out, a, 4, loc);
    sema_val(s, t)->attrs[2] = in.shape[2 + i]; /* end: the whole dim */
    r = t;
  }
  IrValue rv = *sema_val(s, r);
  IrValue v = window_result(s, OP_COPY, rv.dtype, rv.shape[0], rv.shape[1],
                            rv.shape[2], rv.shape[3], cl, loc);
  v.flags = cl ? IRF_CL : 0;
  return sema_emit_op(s, &v, &r, 1);
}

/* conv2d (nsp 2) and conv1d (nsp 1): the weight and the input of conv1d
 * get a size-1 dim 2 and the result loses it again. */
SVal sema_conv(Sema *s, CallArgs *c, int nsp) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x, w, b;
  const SVal *wa = sema_arg(s, c, 1, "weight");
  if (!sema_input_arg(s, c, &x)) return sv_error();
  if (!wa) {
    diag_error(s->d, c->loc, "%s(): missing the weight tensor", c->name);
    return sv_error();
  }
  if (!sema_tensor_arg(s, wa, "weight", &w)) return sv_error();
  IrValue xv0 = *sema_val(s, x), wv = *sema_val(s, w);
  ConvParams cp = {.nsp = nsp};
  if (!conv_types(s, c, &xv0, &wv, nsp)) return sv_error();
  if (nsp == 1) {
    w = sema_emit_unsqueeze(s, w, 2, c->loc);
    wv = *sema_val(s, w);
  }
  if (!conv_params(s, c, &wv, &cp) ||
      !conv_bias(s, c, sema_arg(s, c, 2, "bias"), &wv, &b) ||
      !sema_args_done(s, c, 7))
    return sv_error();
  /* PyTorch's dilated CPU convolution has no kernel for these types. */
  if ((cp.dil[0] != 1 || cp.dil[1] != 1) &&
      (xv0.dtype == DT_U8 || xv0.dtype == DT_I8 || xv0.dtype == DT_I16)) {
    diag_error(s->d, c->loc,
               "%s(): dilation is not implemented for dtype %s; convert "
               "with .to(i32) or .to(f32)", c->name, dtype_name(xv0.dtype));
    return sv_error();
  }
  bool unbatched;
  if (!batched_input(s, c, &x, &unbatched, nsp)) return sv_error();
  IrValue xv = *sema_val(s, x);
  if (!conv_channels(s, c, &xv, &wv, &cp)) {
    sema_note_origin(s, x);
    return sv_error();
  }
  const Sym *oh = window_out(s, xv.shape[2], wv.shape[2], cp.stride[0],
                             cp.pad[0], cp.dil[0]);
  const Sym *ow = window_out(s, xv.shape[3], wv.shape[3], cp.stride[1],
                             cp.pad[1], cp.dil[1]);
  if (!window_fits(s, c, &xv, cp.pad, oh, ow, conv_kernel_str(s, &wv, &cp),
                   nsp) ||
      !conv_nonempty(s, c, &xv, cp.pad, nsp))
    return sv_error();
  /* PyTorch makes a conv1d input contiguous before it decides ("avoid
   * accidentally going through NHWC for permuted 3d input"): only the
   * weight can suggest channels-last there. */
  bool cl = ((nsp == 2 && suggests_cl(s, x)) || suggests_cl(s, w)) &&
            xv.dtype != DT_F64;
  IrValue v = window_result(s, OP_CONV2D, xv.dtype, xv.shape[0], wv.shape[0],
                            oh, ow, cl, c->loc);
  int64_t attrs[7] = {cp.stride[0], cp.stride[1], cp.pad[0], cp.pad[1],
                      cp.dil[0],    cp.dil[1],    cp.groups};
  sema_set_int_attrs(s, &v, attrs, 7);
  IrRef args[3] = {x, w, b};
  if (b >= 0) v.flags |= IRF_BIAS;
  IrRef r = sema_emit_op(s, &v, args, b >= 0 ? 3 : 2);
  if (cp.trim[0] || cp.trim[1]) r = conv_trim(s, r, &cp, cl, c->loc);
  if (nsp == 1) {
    int64_t d2 = 2;
    r = sema_emit_squeeze(s, r, &d2, 1, c->loc);
  }
  return sv_tensor(finish_batched(s, r, unbatched, c->loc), c->loc);
}

/* ---- Pools ---- */

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
        !sema_bool_arg(s, sema_arg(s, c, 5, "ceil_mode"), c->name,
                       "ceil_mode", false, &ceil) ||
        !sema_bool_arg(s, sema_arg(s, c, 6, "return_indices"), c->name,
                       "return_indices", false, &ri))
      return false;
    if (dil[0] != 1 || dil[1] != 1) bad = "dilation other than 1";
    else if (ri) bad = "return_indices=true";
    else if (ceil) bad = "ceil_mode=true";
    return !bad || (diag_error(s->d, c->loc, "%s(): %s is not supported by "
                               "tdsl", c->name, bad), false);
  }
  const SVal *dv = sema_arg(s, c, 6, "divisor_override");
  if (!sema_bool_arg(s, sema_arg(s, c, 4, "ceil_mode"), c->name,
                     "ceil_mode", false, &ceil) ||
      !sema_bool_arg(s, sema_arg(s, c, 5, "count_include_pad"), c->name,
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

static SVal build_pool(Sema *s, Op op, CallArgs *c) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x;
  bool unbatched;
  int64_t k[2], st[2], pad[2];
  const Sym *o[2];
  if (!sema_input_arg(s, c, &x) || !pool_dtype(s, c, op, sema_val(s, x)->dtype))
    return sv_error();
  bool adaptive = op == OP_ADAPTIVE_AVG_POOL2D;
  if (!adaptive && (!pool_params(s, c, k, st, pad) ||
                    !pool_defaults(s, c, op)))
    return sv_error();
  if (!sema_args_done(s, c, adaptive ? 2 : 7) ||
      !batched_input(s, c, &x, &unbatched, 2) || !nonzero_dims(s, c, x))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  if (adaptive && !adaptive_size(s, c, &xv, o)) return sv_error();
  if (!adaptive) {
    for (int i = 0; i < 2; i++)
      o[i] = window_out(s, xv.shape[2 + i], K(s, k[i]), st[i], pad[i], 1);
    const char *ks = arena_printf(s->a, "(%lldx%lld)", (long long)k[0],
                                  (long long)k[1]);
    if (!window_fits(s, c, &xv, pad, o[0], o[1], ks, 2)) return sv_error();
  }
  /* A rank-3 input's result is contiguous in PyTorch (it never suggests
   * channels-last). */
  bool cl = !unbatched && suggests_cl(s, x);
  IrValue v = window_result(s, op, xv.dtype, xv.shape[0], xv.shape[1], o[0],
                            o[1], cl, c->loc);
  if (!adaptive) {
    int64_t attrs[6] = {k[0], k[1], st[0], st[1], pad[0], pad[1]};
    sema_set_int_attrs(s, &v, attrs, 6);
  }
  IrRef r = sema_emit_op(s, &v, &x, 1);
  return sv_tensor(finish_batched(s, r, unbatched, c->loc), c->loc);
}

/* ---- Call handlers ---- */

static SVal h_conv2d(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  return sema_conv(s, c, 2);
}

static SVal h_pool(Sema *s, CallArgs *c, const Builtin *b) {
  return build_pool(s, b->op, c);
}

const Builtin sema_conv_builtins[] = {
    {"conv2d", h_conv2d, OP_CONV2D, BF_FUNC},
    {"max_pool2d", h_pool, OP_MAX_POOL2D, BF_FUNC},
    {"avg_pool2d", h_pool, OP_AVG_POOL2D, BF_FUNC},
    {"adaptive_avg_pool2d", h_pool, OP_ADAPTIVE_AVG_POOL2D, BF_FUNC},
    {NULL, NULL, OP_COUNT, 0},
};
