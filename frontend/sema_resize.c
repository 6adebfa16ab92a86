/* sema_resize.c — resizing by index arithmetic: pad (F.pad: constant,
 * reflect, replicate, circular), interpolate (F.interpolate: nearest,
 * nearest-exact, linear, bilinear, bicubic) and conv_transpose2d, with
 * PyTorch's shape rules, index and weight formulas and errors.
 *
 * None of them is an op of its own: each is a decomposition into INDEX
 * values (ops.h) whose indices are built here from arange arithmetic and
 * known in range (IRF_INBOUNDS: no run-time check), plus elementwise ops.
 * The trailing dims an op moves are read through one view that merges
 * them (a copy first where they do not merge), so one INDEX with a k-D
 * index (the row-major linear position in the merged dims) reads each
 * tap, and pass fuse inlines the index arithmetic and the taps into one
 * loop nest (loops.h, "Indexing by tensors").
 *
 * interpolate follows aten/src/ATen/native/UpSample.h and
 * cpu/UpSampleKernel.cpp in PyTorch's op-math type (f32 for f32, f16 and
 * bf16 inputs; f64 for f64), so the source indices are PyTorch's bit for
 * bit: nearest and nearest-exact as the CPU kernel for the input's
 * layout computes them (nearest_taps); bilinear's clamped source index,
 * lambda and the h1p edge rule, and its shortcut for equal sizes;
 * bicubic's A = -0.75
 * coefficients with clamped taps; align_corners both ways; a given
 * scale_factor used as 1/scale (rounded to the op-math type) unless
 * recompute_scale_factor.  Sizes only known at run time compute the
 * scales at run time and choose the shortcuts by a where.
 *
 * conv_transpose2d is a conv2d per output phase (Phase below: the
 * outputs o0 + stride m of a dim are all reached by the same taps), of
 * the input itself with those taps of the weight flipped and transposed
 * per group (one conv2d for the phases that make the same conv but for
 * the weights), the phases interleaved by stacks read as the output; with
 * more than MAX_PHASES phases, the convolution of the input with zeros
 * inserted (zero_inserted: README's limitations).
 *
 * Needs: sema_internal.h (sema_values.c, sema_args.c, the builtin tables
 * of sema_elementwise.c, sema_views.c, sema_index.c, sema_conv.c and
 * sema_join.c for where, reshape, transpose, narrow, flip, conv2d and
 * stack), geometry.c, symprove.c.  Used by:
 * sema_expr.c (the builtin table sema_resize_builtins). */
#include <math.h>
#include <string.h>

#include "../ir/symprove.h"
#include "sema_internal.h"

/* ---- small builders (all return -1 after an error) ---- */

static IrRef ew2(Sema *s, Op op, SVal a, SVal b, Loc loc) {
  if (a.kind == SV_ERROR || b.kind == SV_ERROR) return -1;
  SVal r = sema_ew_binary(s, op, &a, &b, loc);
  return r.kind == SV_TENSOR ? r.ref : -1;
}

static SVal tv(IrRef r, Loc loc) { return sv_tensor(r, loc); }

/* a op b for tensors, a op int, a op size, a op float, number op a. */
static IrRef bt(Sema *s, Op op, IrRef a, IrRef b, Loc loc) {
  return a < 0 || b < 0 ? -1 : ew2(s, op, tv(a, loc), tv(b, loc), loc);
}
static IrRef bi(Sema *s, Op op, IrRef a, int64_t v, Loc loc) {
  return a < 0 ? -1 : ew2(s, op, tv(a, loc), sv_int(K(s, v), loc), loc);
}
static IrRef bsym(Sema *s, Op op, IrRef a, const Sym *v, Loc loc) {
  return a < 0 ? -1 : ew2(s, op, tv(a, loc), sv_int(v, loc), loc);
}
static IrRef bf(Sema *s, Op op, IrRef a, double v, Loc loc) {
  return a < 0 ? -1 : ew2(s, op, tv(a, loc), sv_float(v, loc), loc);
}
static IrRef fb(Sema *s, Op op, double v, IrRef a, Loc loc) {
  return a < 0 ? -1 : ew2(s, op, sv_float(v, loc), tv(a, loc), loc);
}
static IrRef un(Sema *s, Op op, IrRef a, Loc loc) {
  if (a < 0) return -1;
  SVal r = sema_ew_unary(s, op, a, 0, loc);
  return r.kind == SV_TENSOR ? r.ref : -1;
}
static IrRef to(Sema *s, IrRef a, DType dt, Loc loc) {
  return a < 0 ? -1 : sema_cast(s, a, dt, loc);
}

/* min(max(a, lo), hi) with sizes as bounds (integer tensors). */
static IrRef clamp_sym(Sema *s, IrRef a, const Sym *lo, const Sym *hi, Loc loc) {
  return bsym(s, OP_MINIMUM, bsym(s, OP_MAXIMUM, a, lo, loc), hi, loc);
}

/* A 0-dim tensor of dtype dt holding v (not a wrapped number). */
static IrRef fconst(Sema *s, double v, DType dt, Loc loc) {
  IrValue c = sema_new_dense(s, OP_CONST, dt, 0, NULL, loc);
  c.value.f = v;
  return sema_emit(s, &c);
}

/* The size v as a 0-dim tensor of dtype dt. */
static IrRef size_tensor(Sema *s, const Sym *v, DType dt, Loc loc) {
  SVal n = sv_int(v, loc);
  return to(s, sema_to_tensor(s, &n, "a size"), dt, loc);
}

/* arange(n) of dtype dt. */
static IrRef arange(Sema *s, const Sym *n, DType dt, Loc loc) {
  IrValue a = sema_new_dense(s, OP_ARANGE, dt, 1, &n, loc);
  a.fattr[0] = 0;
  a.fattr[1] = 1;
  return sema_emit(s, &a);
}

/* Calls builtin `name` of `table` as the program would (arguments
 * already evaluated). */
static SVal call_fn(Sema *s, const Builtin *table, const char *name, bool method, SVal *pos,
                    int npos, const char **kwname, SVal *kw, int nkw, Loc loc) {
  const Builtin *b = sema_builtin_find(table, name);
  if (!b) ICE("sema_resize: no builtin %s", name);
  return sema_call_builtin(s, b, loc, method, pos, npos, kwname, kw, nkw);
}

static IrRef where3(Sema *s, IrRef cond, IrRef a, IrRef b, Loc loc) {
  if (cond < 0 || a < 0 || b < 0) return -1;
  SVal p[3] = {tv(cond, loc), tv(a, loc), tv(b, loc)};
  SVal r = call_fn(s, sema_elementwise_builtins, "where", false, p, 3, NULL, NULL, 0, loc);
  return r.kind == SV_TENSOR ? r.ref : -1;
}

/* A list SVal of constant ints. */
static SVal int_list(Sema *s, const int64_t *v, int n, Loc loc) {
  SVal l = sv_make(SV_LIST, loc);
  l.items = arena_alloc(s->a, sizeof *l.items * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) l.items[i] = sv_int(K(s, v[i]), loc);
  l.nitems = n;
  return l;
}

/* The 1-D tensor r ([n]) placed at axis j of k trailing axes ([n, 1...]). */
static IrRef along(Sema *s, IrRef r, int j, int k, Loc loc) {
  for (int t = j + 1; t < k && r >= 0; t++) r = sema_emit_unsqueeze(s, r, t - j, loc);
  return r;
}

/* Whether sizes a and b are equal (SYM_YES / SYM_NO) or unknown. */
static SymTruth size_eq(Sema *s, const Sym *a, const Sym *b) {
  if (a == b) return SYM_YES;
  SymFacts f = sym_facts_new(s->a, 0);
  return sym_decide(s->st, &f, a, SYM_EQ, b);
}

/* The condition a == b on sizes as a 0-dim bool tensor (run time). */
static IrRef size_eq_t(Sema *s, const Sym *a, const Sym *b, Loc loc) {
  SVal x = sv_int(a, loc), y = sv_int(b, loc);
  return ew2(s, OP_EQ, x, y, loc);
}

/* ---- reading trailing dims through one merged view ---- */

/* x with its last k dims merged into one (a contiguous copy first when
 * they do not merge): rank - k + 1 dims. */
static IrRef merge_last(Sema *s, IrRef x, int k, Loc loc) {
  const IrValue *xv = sema_val(s, x);
  if (k <= 1) return x;
  int r = xv->rank, nr = r - k + 1;
  const Sym **sz = sym_array(s, nr);
  for (int d = 0; d < nr - 1; d++) sz[d] = xv->shape[d];
  sz[nr - 1] = sym_prod(s->st, xv->shape + (r - k), k);
  GeomCtx gc = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  if (geom_view(&gc, &in, sz, nr, &out)) {
    Geom dense;
    geom_contiguous(&gc, r, xv->shape, &dense);
    x = sema_emit_copy(s, OP_COPY, x, xv->dtype, &dense, 0, loc);
    in = sema_geom_of(s, x);
    if (geom_view(&gc, &in, sz, nr, &out)) ICE("a contiguous tensor does not merge its dims");
  }
  return sema_emit_view(s, OP_VIEW, x, &out, sz, nr, 0, loc);
}

/* INDEX of the merged x (xf, last dim d) by the i64 index idx of rank k:
 * xf's dims before d and idx's; channels-last when `cl` (rank 4). */
static IrRef take(Sema *s, IrRef xf, IrRef idx, bool cl, Loc loc) {
  if (xf < 0 || idx < 0) return -1;
  const IrValue *xv = sema_val(s, xf), *iv = sema_val(s, idx);
  int d = xv->rank - 1, rank = d + iv->rank;
  if (!sema_rank_ok(s, rank, loc)) return -1;
  const Sym **shape = sym_array(s, rank);
  for (int j = 0; j < rank; j++) shape[j] = j < d ? xv->shape[j] : iv->shape[j - d];
  IrValue v;
  if (cl && rank == 4) {
    Geom g;
    GeomCtx gc = sema_geom(s, loc);
    geom_channels_last(&gc, shape, &g);
    v = sema_value_from_geom(s, OP_INDEX, xv->dtype, &g, loc);
  } else {
    v = sema_new_dense(s, OP_INDEX, xv->dtype, rank, shape, loc);
  }
  int64_t a = d;
  sema_set_int_attrs(s, &v, &a, 1);
  v.flags = IRF_INBOUNDS;
  IrRef args[2] = {xf, idx};
  return sema_emit_op(s, &v, args, 2);
}

/* Whether x (rank 4) should give a channels-last result (PyTorch's
 * suggest_memory_format). */
static bool suggests_cl(Sema *s, IrRef x) {
  Geom g = sema_geom_of(s, x);
  return g.rank == 4 && geom_suggests_channels_last(&g);
}

/* The row-major position in the last k dims (sizes `in`) of the taps
 * idx[j] (1-D i64 over the output's dim j): a k-D i64 index. */
static IrRef linear_index(Sema *s, IrRef *idx, const Sym *const *in, int k, Loc loc) {
  IrRef lin = -1;
  for (int j = 0; j < k; j++) {
    IrRef t = along(s, idx[j], j, k, loc);
    lin = j == 0 ? t : bt(s, OP_ADD, bsym(s, OP_MUL, lin, in[j], loc), t, loc);
  }
  return lin;
}

/* ============================== pad ============================== */

typedef enum PadMode { PAD_CONSTANT, PAD_REFLECT, PAD_REPLICATE, PAD_CIRCULAR } PadMode;
static const char *const pad_modes[] = {"constant", "reflect", "replicate", "circular"};

/* The source position of output position (arange) `ar` of one dim of
 * size `in` padded by l before and r after (i64, in range). */
static IrRef pad_source(Sema *s, PadMode m, IrRef ar, const Sym *in, int64_t l, int64_t r,
                        Loc loc) {
  IrRef p = bi(s, OP_SUB, ar, l, loc);
  const Sym *last = sym_sub(s->st, in, K(s, 1));
  switch (m) {
  case PAD_CONSTANT:
  case PAD_REPLICATE: return clamp_sym(s, p, K(s, 0), last, loc);
  case PAD_REFLECT: /* (in-1) - |(in-1) - |p||: -p before, 2(in-1) - p after */
    return ew2(s, OP_SUB, sv_int(last, loc),
               tv(un(s, OP_ABS, ew2(s, OP_SUB, sv_int(last, loc), tv(un(s, OP_ABS, p, loc), loc),
                                    loc), loc), loc), loc);
  case PAD_CIRCULAR: { /* PyTorch wraps around the cropped dim */
    int64_t cl = l < 0 ? -l : 0, cr = r < 0 ? -r : 0, pl = l > 0 ? l : 0;
    const Sym *w = sym_sub(s->st, in, K(s, cl + cr));
    IrRef q = bsym(s, OP_MOD, bi(s, OP_SUB, ar, pl, loc), w, loc);
    return bi(s, OP_ADD, q, cl, loc);
  }
  }
  return -1;
}

typedef struct PadNeed {
  int64_t lhs;
  bool on;
  const char *msg;
} PadNeed;

/* The checks of one padded dim d (size in, pads l, r), at the pad
 * argument: sizes known now are errors, others entry checks. */
static bool pad_dim_ok(Sema *s, PadMode m, int d, const IrValue *xv, int64_t l, int64_t r,
                       bool grows, Loc at) {
  const Sym *in = xv->shape[d];
  int64_t n;
  bool known = sym_is_const(in, &n);
  const char *mn = pad_modes[m];
  PadNeed need[3]; /* lhs <= in for each */
  int nn = 0;
  switch (m) {
  case PAD_CONSTANT: /* PyTorch: an empty result only when no pad is positive */
    need[nn++] = (PadNeed){-l - r + (grows ? 1 : 0), true,
                           grows ? "the negative padding leaves no element (allowed only when "
                                   "no pad is positive)"
                                 : "the negative padding leaves a negative size"};
    break;
  case PAD_REFLECT:
    need[nn++] = (PadNeed){(l > r ? l : r) + 1, true,
                                   "reflect padding must be smaller than the padded dim"};
    need[nn++] = (PadNeed){1 - l - r, true, "the padded size must be at least 1"};
    break;
  case PAD_REPLICATE:
    need[nn++] = (PadNeed){1 - l - r, true, "the padded size must be at least 1"};
    need[nn++] = (PadNeed){1, true, "replicate padding needs a non-empty dim"};
    break;
  case PAD_CIRCULAR:
    need[nn++] = (PadNeed){l > r ? l : r, true,
                                   "circular padding wraps around more than once"};
    need[nn++] = (PadNeed){-l - r, true, "the negative padding leaves a negative size"};
    need[nn++] = (PadNeed){(l < 0 ? -l : 0) + (r < 0 ? -r : 0) + 1, l > 0 || r > 0,
                                   "circular padding needs an element left after cropping"};
    break;
  }
  for (int i = 0; i < nn; i++) {
    if (!need[i].on) continue;
    if (known && need[i].lhs <= n) continue;
    if (known) {
      diag_error(s->d, at, "pad(): %s: padding (%lld, %lld) of dim %d of size %lld with mode "
                 "'%s'", need[i].msg, (long long)l, (long long)r, d, (long long)n, mn);
      return false;
    }
    sema_check_le(s, K(s, need[i].lhs), in,
                  arena_printf(s->a, "pad(): %s (padding (%lld, %lld) of dim %d, mode '%s')",
                               need[i].msg, (long long)l, (long long)r, d, mn), at);
  }
  return true;
}

static SVal h_pad(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (sema_has_error_arg(c) || !sema_tensor_recv(s, c, &x)) return sv_error();
  const SVal *pv = sema_need_arg(s, c, 1, "pad"), *mv = sema_arg(s, c, 2, "mode");
  const SVal *vv = sema_arg(s, c, 3, "value");
  if (!pv || !sema_args_done(s, c, 4)) return sv_error();
  if (pv->kind != SV_LIST) {
    diag_error(s->d, pv->loc, "pad(): 'pad' must be a list of ints (pairs from the last dim "
               "backwards), got %s", sv_kind_name(pv));
    return sv_error();
  }
  int64_t pad[2 * MAX_DIMS + 2];
  int np = pv->nitems;
  if (np > 2 * MAX_DIMS + 2) np = 2 * MAX_DIMS + 2;
  for (int i = 0; i < np; i++)
    if (!sema_int_arg(s, &pv->items[i], "pad() argument 'pad'", &pad[i])) return sv_error();
  PadMode m = PAD_CONSTANT;
  if (!absent(mv)) {
    if (mv->kind != SV_STR) {
      diag_error(s->d, mv->loc, "pad(): mode must be a string, got %s", sv_kind_name(mv));
      return sv_error();
    }
    int i = 0;
    while (i < 4 && strcmp(mv->s, pad_modes[i]) != 0) i++;
    if (i == 4) {
      diag_error(s->d, mv->loc, "pad(): unknown padding mode '%s'; the modes are 'constant', "
                 "'reflect', 'replicate' and 'circular'", mv->s);
      return sv_error();
    }
    m = (PadMode)i;
  }
  const IrValue *xv = sema_val(s, x);
  int rank = xv->rank, k = pv->nitems / 2;
  if (pv->nitems % 2) {
    diag_error(s->d, pv->loc, "pad(): 'pad' must have an even length (a before and an after "
               "amount per dim), got %d value%s", pv->nitems, pv->nitems == 1 ? "" : "s");
    return sv_error();
  }
  if (k > rank) {
    diag_error(s->d, pv->loc, "pad(): %d pad values pad %d dims, but the input has only %d "
               "(shape %s)", pv->nitems, k, rank, sema_shape_str(s, x));
    return sv_error();
  }
  if (m != PAD_CONSTANT && !absent(vv)) {
    diag_error(s->d, vv->loc, "pad(): mode '%s' takes no value (only mode 'constant' fills)",
               pad_modes[m]);
    return sv_error();
  }
  if (!absent(vv) && !sv_is_number(vv)) {
    diag_error(s->d, vv->loc, "pad(): value must be a number, got %s", sv_kind_name(vv));
    return sv_error();
  }
  if (m != PAD_CONSTANT) {
    if (k < 1 || k > 3 || (rank != k + 1 && rank != k + 2)) {
      diag_error(s->d, c->loc, "pad(): mode '%s' pads the last 1, 2 or 3 dims of an input with "
                 "1 or 2 more dims (unbatched or batched), so %d pad values need a %d-D or %d-D "
                 "input; got shape %s", pad_modes[m], pv->nitems, k + 1, k + 2,
                 sema_shape_str(s, x));
      sema_note_origin(s, x);
      return sv_error();
    }
    if (m != PAD_CIRCULAR && xv->dtype == DT_BOOL) {
      diag_error(s->d, c->loc, "pad(): mode '%s' is not implemented for bool tensors; pad "
                 "x.to(u8) and compare", pad_modes[m]);
      return sv_error();
    }
  }
  /* dim rank-1-i takes pad[2i], pad[2i+1] */
  int first = rank; /* the first dim with a nonzero pair */
  bool grows = false;
  for (int i = 0; i < 2 * k; i++) grows |= pad[i] > 0;
  for (int i = 0; i < k; i++) {
    int d = rank - 1 - i;
    if (!pad_dim_ok(s, m, d, xv, pad[2 * i], pad[2 * i + 1], grows, pv->loc)) return sv_error();
    if (pad[2 * i] || pad[2 * i + 1]) first = d;
  }
  Geom keep;
  GeomCtx gc = sema_geom(s, c->loc);
  bool cl = suggests_cl(s, x);
  if (first == rank) { /* nothing to pad: a fresh copy, as PyTorch's */
    if (cl) geom_channels_last(&gc, xv->shape, &keep);
    else geom_contiguous(&gc, rank, xv->shape, &keep);
    return sv_tensor(sema_emit_copy(s, OP_COPY, x, xv->dtype, &keep, IRF_CLONE, c->loc), c->loc);
  }
  int kk = rank - first;
  IrRef src[MAX_DIMS] = {-1}, mask = -1;
  const Sym *ins[MAX_DIMS] = {NULL};
  bool empty = false;
  for (int j = 0; j < kk; j++) {
    int d = first + j, i = rank - 1 - d;
    int64_t l = pad[2 * i], r = pad[2 * i + 1], n;
    const Sym *size = xv->shape[d], *out = sym_add(s->st, size, K(s, l + r));
    ins[j] = size;
    IrRef ar = arange(s, out, DT_I64, c->loc);
    src[j] = pad_source(s, m, ar, size, l, r, c->loc);
    if (m != PAD_CONSTANT) continue;
    if (sym_is_const(size, &n) && n == 0) empty = true;
    else if (!sym_is_const(size, &n))
      sema_check_le(s, K(s, 1), size, arena_printf(s->a, "pad(): constant padding of dim %d "
                    "needs it non-empty when its size is only known at run time", d), pv->loc);
    if (l <= 0 && r <= 0) continue; /* no fill along this dim */
    IrRef p = bi(s, OP_SUB, ar, l, c->loc);
    IrRef ok = bt(s, OP_AND, bi(s, OP_GE, p, 0, c->loc), bsym(s, OP_LT, p, size, c->loc), c->loc);
    ok = along(s, ok, j, kk, c->loc);
    mask = mask < 0 ? ok : bt(s, OP_AND, mask, ok, c->loc);
  }
  DType dt = xv->dtype;
  /* F.pad's value is a Python float: converted to dt as a double Scalar
   * (so -1 overflows u8, where masked_fill's int -1 wraps) */
  if (!absent(vv)) {
    SVal fv = *vv;
    fv.kind = SV_FLOAT, fv.f = sv_num_f(vv);
    if (!sema_scalar_fits(s, &fv, dt, vv->loc)) return sv_error();
  }
  IrRef fill = -1;
  if (m == PAD_CONSTANT) {
    SVal zero = sv_int(K(s, 0), c->loc);
    fill = to(s, sema_to_tensor(s, absent(vv) ? &zero : vv, "pad() value"), dt, c->loc);
  }
  if (empty) { /* a padded dim of size 0: every element is the fill */
    const Sym **shape = sym_array(s, rank);
    for (int d = 0; d < rank; d++) {
      int i = rank - 1 - d;
      shape[d] = i < k ? sym_add(s->st, xv->shape[d], K(s, pad[2 * i] + pad[2 * i + 1]))
                       : xv->shape[d];
    }
    return sv_tensor(sema_expand_to(s, fill, rank, shape, c->loc), c->loc);
  }
  IrRef g = take(s, merge_last(s, x, kk, c->loc), linear_index(s, src, ins, kk, c->loc), cl,
                 c->loc);
  if (m == PAD_CONSTANT && mask >= 0) g = where3(s, mask, g, fill, c->loc);
  return sv_tensor(g, c->loc);
}

/* =========================== interpolate =========================== */

typedef enum InterpMode { IM_NEAREST, IM_NEAREST_EXACT, IM_LINEAR, IM_BILINEAR, IM_BICUBIC,
                          IM_TRILINEAR, IM_AREA } InterpMode;
static const char *const interp_modes[] = {"nearest", "linear", "bilinear", "bicubic",
                                           "trilinear", "area", "nearest-exact"};
static const InterpMode interp_mode_of[] = {IM_NEAREST, IM_LINEAR, IM_BILINEAR, IM_BICUBIC,
                                            IM_TRILINEAR, IM_AREA, IM_NEAREST_EXACT};

/* One spatial dim: its sizes, the scale_factor given for it (have), and
 * the taps the mode reads: index (i64 over the output dim) and weight. */
typedef struct Dim {
  const Sym *in, *out;
  bool have;
  double sf;
  int ntaps;
  IrRef idx[4], w[4];
} Dim;

/* PyTorch's area_pixel_compute_scale in dtype T: align_corners: (in - 1)
 * / (out - 1) (0 for out == 1); else 1 / scale_factor when given (in
 * double, rounded to T), else in / out (both rounded to T). */
static IrRef pixel_scale(Sema *s, const Dim *d, bool ac, DType T, Loc loc) {
  int64_t ni, no;
  bool k = sym_is_const(d->in, &ni) && sym_is_const(d->out, &no);
  if (ac) {
    if (k) {
      double v = no > 1 ? (T == DT_F64 ? (double)(ni - 1) / (double)(no - 1)
                                       : (double)((float)(ni - 1) / (float)(no - 1)))
                        : 0.0;
      return fconst(s, v, T, loc);
    }
    const Sym *im1 = sym_sub(s->st, d->in, K(s, 1)), *om1 = sym_sub(s->st, d->out, K(s, 1));
    IrRef ratio = bt(s, OP_DIV, size_tensor(s, im1, T, loc), size_tensor(s, om1, T, loc), loc);
    SVal o = sv_int(d->out, loc);
    IrRef big = ew2(s, OP_GT, o, sv_int(K(s, 1), loc), loc);
    return where3(s, big, ratio, fconst(s, 0, T, loc), loc);
  }
  if (d->have) {
    double v = 1.0 / d->sf;
    return fconst(s, T == DT_F64 ? v : (double)(float)v, T, loc);
  }
  if (k)
    return fconst(s, T == DT_F64 ? (double)ni / (double)no : (double)((float)ni / (float)no), T,
                  loc);
  return bt(s, OP_DIV, size_tensor(s, d->in, T, loc), size_tensor(s, d->out, T, loc), loc);
}

/* nearest and nearest-exact as PyTorch's CPU kernels compute them, which
 * differ by the input's layout (UpSampleKernel.cpp):
 *  - channels-last inputs (nearest_idx, nearest_exact_idx): always in
 *    f32: floorf(i * scale), with the shortcuts out == in (i) and out ==
 *    2 in (i >> 1); floorf((i + 0.5) * scale), the product in double;
 *  - others (HelperInterpNearest*): in the op-math type T: floorf(scale *
 *    i); floorf(max(scale * (i + 0.5) - 0.5, 0) + 0.5) (the sum in
 *    double), floorf rounding a double to f32 first.
 * Clamped to in - 1. */
static void nearest_taps(Sema *s, Dim *d, bool exact, bool cl_path, DType T, Loc loc) {
  IrRef ar = arange(s, d->out, DT_I64, loc);
  d->ntaps = 1;
  d->w[0] = -1;
  SymTruth same = SYM_NO, twice = SYM_NO;
  const Sym *in2 = sym_mul(s->st, K(s, 2), d->in);
  if (!exact && cl_path) {
    same = size_eq(s, d->out, d->in);
    twice = size_eq(s, d->out, in2);
    if (same == SYM_YES) {
      d->idx[0] = ar;
      return;
    }
    if (twice == SYM_YES) {
      d->idx[0] = bi(s, OP_FLOORDIV, ar, 2, loc);
      return;
    }
  }
  if (cl_path) T = DT_F32;
  IrRef scale = pixel_scale(s, d, false, T, loc), v;
  if (exact && cl_path) {
    v = to(s, bt(s, OP_MUL, bf(s, OP_ADD, to(s, ar, DT_F64, loc), 0.5, loc),
                 to(s, scale, DT_F64, loc), loc), DT_F32, loc);
  } else if (exact) {
    IrRef real = bf(s, OP_SUB, bt(s, OP_MUL, scale, bf(s, OP_ADD, to(s, ar, T, loc), 0.5, loc),
                                  loc), 0.5, loc);
    real = bf(s, OP_MAXIMUM, real, 0.0, loc);
    v = to(s, bf(s, OP_ADD, to(s, real, DT_F64, loc), 0.5, loc), DT_F32, loc);
  } else {
    v = to(s, bt(s, OP_MUL, scale, to(s, ar, T, loc), loc), DT_F32, loc);
  }
  IrRef src = bsym(s, OP_MINIMUM, to(s, un(s, OP_FLOOR, v, loc), DT_I64, loc),
                   sym_sub(s->st, d->in, K(s, 1)), loc);
  if (twice == SYM_UNKNOWN)
    src = where3(s, size_eq_t(s, d->out, in2, loc), bi(s, OP_FLOORDIV, ar, 2, loc), src, loc);
  if (same == SYM_UNKNOWN) src = where3(s, size_eq_t(s, d->out, d->in, loc), ar, src, loc);
  d->idx[0] = src;
}

/* area_pixel_compute_source_index in T over the output dim: scale * i
 * (align_corners), else scale * (i + 0.5) - 0.5, clamped at 0 unless
 * cubic. */
static IrRef source_index(Sema *s, const Dim *d, bool ac, bool cubic, DType T, Loc loc) {
  IrRef scale = pixel_scale(s, d, ac, T, loc), i = arange(s, d->out, T, loc);
  if (ac) return bt(s, OP_MUL, scale, i, loc);
  IrRef r = bf(s, OP_SUB, bt(s, OP_MUL, scale, bf(s, OP_ADD, i, 0.5, loc), loc), 0.5, loc);
  return cubic ? r : bf(s, OP_MAXIMUM, r, 0.0, loc);
}

/* floorf(real) as i64: PyTorch floors in f32 (a double is rounded to
 * float first). */
static IrRef floor_f32(Sema *s, IrRef real, Loc loc) {
  return to(s, un(s, OP_FLOOR, to(s, real, DT_F32, loc), loc), DT_I64, loc);
}

/* linear: i0 = min(floor(real), in - 1), i1 = i0 + (i0 < in - 1), lambda1
 * = clamp(real - i0, 0, 1), lambda0 = 1 - lambda1; out == in copies. */
static void linear_taps(Sema *s, Dim *d, bool ac, DType T, Loc loc) {
  const Sym *last = sym_sub(s->st, d->in, K(s, 1));
  IrRef real = source_index(s, d, ac, false, T, loc);
  IrRef i0 = bsym(s, OP_MINIMUM, floor_f32(s, real, loc), last, loc);
  IrRef i1 = bsym(s, OP_MINIMUM, bi(s, OP_ADD, i0, 1, loc), last, loc);
  IrRef l1 = bf(s, OP_MINIMUM, bf(s, OP_MAXIMUM, bt(s, OP_SUB, real, to(s, i0, T, loc), loc),
                                  0.0, loc), 1.0, loc);
  SymTruth same = size_eq(s, d->out, d->in);
  if (same != SYM_NO) {
    IrRef ar = arange(s, d->out, DT_I64, loc);
    if (same == SYM_YES) {
      i0 = i1 = ar;
      l1 = bf(s, OP_MUL, arange(s, d->out, T, loc), 0.0, loc);
    } else {
      IrRef eq = size_eq_t(s, d->out, d->in, loc);
      i0 = where3(s, eq, ar, i0, loc);
      i1 = where3(s, eq, ar, i1, loc);
      l1 = where3(s, eq, fconst(s, 0, T, loc), l1, loc);
    }
  }
  d->ntaps = 2;
  d->idx[0] = i0, d->idx[1] = i1;
  d->w[1] = l1;
  d->w[0] = fb(s, OP_SUB, 1.0, l1, loc);
}

/* PyTorch's cubic_convolution1 ((A+2) x - (A+3)) x x + 1 and
 * cubic_convolution2 ((A x - 5A) x + 8A) x - 4A, A = -0.75. */
static IrRef cubic1(Sema *s, IrRef x, Loc loc) {
  const double A = -0.75;
  IrRef t = bf(s, OP_SUB, fb(s, OP_MUL, A + 2, x, loc), A + 3, loc);
  return bf(s, OP_ADD, bt(s, OP_MUL, bt(s, OP_MUL, t, x, loc), x, loc), 1.0, loc);
}
static IrRef cubic2(Sema *s, IrRef x, Loc loc) {
  const double A = -0.75;
  IrRef t = bf(s, OP_SUB, fb(s, OP_MUL, A, x, loc), 5 * A, loc);
  t = bf(s, OP_ADD, bt(s, OP_MUL, t, x, loc), 8 * A, loc);
  return bf(s, OP_SUB, bt(s, OP_MUL, t, x, loc), 4 * A, loc);
}

/* bicubic: taps floor(real) - 1 .. + 2 clamped to [0, in - 1], weights
 * of t = real - floor(real). */
static void cubic_taps(Sema *s, Dim *d, bool ac, DType T, Loc loc) {
  IrRef real = source_index(s, d, ac, true, T, loc);
  IrRef i0 = floor_f32(s, real, loc);
  IrRef t = bt(s, OP_SUB, real, to(s, i0, T, loc), loc);
  IrRef u = fb(s, OP_SUB, 1.0, t, loc);
  d->w[0] = cubic2(s, bf(s, OP_ADD, t, 1.0, loc), loc);
  d->w[1] = cubic1(s, t, loc);
  d->w[2] = cubic1(s, u, loc);
  d->w[3] = cubic2(s, bf(s, OP_ADD, u, 1.0, loc), loc);
  for (int j = 0; j < 4; j++)
    d->idx[j] = clamp_sym(s, bi(s, OP_ADD, i0, j - 1, loc), K(s, 0),
                          sym_sub(s->st, d->in, K(s, 1)), loc);
  d->ntaps = 4;
}

/* The interpolation over spatial dims j.. given the linear position of
 * dims ..j-1 (lin, or -1): sum over dim j's taps of weight * the rest,
 * as PyTorch nests it (the outer dim outermost). */
static IrRef interp_rec(Sema *s, IrRef xf, const Dim *dims, int j, int k, IrRef lin, DType T,
                        bool cl, Loc loc) {
  if (j == k) {
    IrRef g = take(s, xf, lin, cl, loc);
    return T == DT_NONE ? g : to(s, g, T, loc);
  }
  IrRef acc = -1, base = lin < 0 ? -1 : bsym(s, OP_MUL, lin, dims[j].in, loc);
  for (int t = 0; t < dims[j].ntaps; t++) {
    IrRef p = along(s, dims[j].idx[t], j, k, loc);
    IrRef l = lin < 0 ? p : bt(s, OP_ADD, base, p, loc);
    IrRef v = interp_rec(s, xf, dims, j + 1, k, l, T, cl, loc);
    if (dims[j].w[t] >= 0) v = bt(s, OP_MUL, v, along(s, dims[j].w[t], j, k, loc), loc);
    acc = acc < 0 ? v : bt(s, OP_ADD, acc, v, loc);
  }
  return acc;
}

/* An int, float or list of them for scale_factor; ints or sizes for size. */
static bool interp_sizes(Sema *s, const SVal *v, int k, const char *what, bool floats,
                         const Sym **syms, double *f) {
  const SVal *items = v;
  int n = k; /* one number: every spatial dim */
  if (v->kind == SV_LIST) items = v->items, n = v->nitems;
  if (n != k) {
    diag_error(s->d, v->loc, "interpolate(): %s has %d entries, but the input has %d spatial "
               "dims (those after N and C)", what, n, k);
    return false;
  }
  for (int i = 0; i < k; i++) {
    const SVal *it = &items[v->kind == SV_LIST ? i : 0];
    if (floats) {
      int64_t iv;
      if (it->kind == SV_FLOAT) f[i] = it->f;
      else if (it->kind == SV_INT && sym_is_const(it->sym, &iv)) f[i] = (double)iv;
      else {
        diag_error(s->d, it->loc, "interpolate(): scale_factor must be a number or a list of "
                   "numbers, got %s", sv_kind_name(it));
        return false;
      }
    } else if (it->kind != SV_INT) {
      diag_error(s->d, it->loc, "interpolate(): size must be an int or a list of ints, got %s",
                 sv_kind_name(it));
      return false;
    } else {
      syms[i] = it->sym;
    }
  }
  return true;
}

/* floor(in * sf) as PyTorch computes the output size (in double); for a
 * size only known at run time, when sf is p / 2^e exactly. */
static const Sym *scaled_size(Sema *s, const Sym *in, double sf, Loc at, bool *ok) {
  int64_t n;
  if (sym_is_const(in, &n)) return K(s, (int64_t)((double)n * sf));
  for (int e = 0; e <= 20; e++) {
    double p = ldexp(sf, e);
    if (p == floor(p) && fabs(p) < 1e9)
      return sym_floordiv(s->st, sym_mul(s->st, in, K(s, (int64_t)p)), K(s, (int64_t)1 << e));
  }
  diag_error(s->d, at, "interpolate(): scale_factor %g of a size only known at run time (%s): "
             "the output size floor(%s * %g) is not a size expression; use a scale_factor "
             "p / 2^k (such as 1.5 or 0.25) or give size=", sf, sym_text(s, in),
             sym_text(s, in), sf);
  *ok = false;
  return NULL;
}

static SVal h_interpolate(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (sema_has_error_arg(c) || !sema_tensor_recv(s, c, &x)) return sv_error();
  const SVal *sz = sema_arg(s, c, 1, "size"), *sfv = sema_arg(s, c, 2, "scale_factor");
  const SVal *mv = sema_arg(s, c, 3, "mode"), *acv = sema_arg(s, c, 4, "align_corners");
  const SVal *rv = sema_arg(s, c, 5, "recompute_scale_factor");
  const SVal *aav = sema_arg(s, c, 6, "antialias");
  if (!sema_args_done(s, c, 7)) return sv_error();
  InterpMode m = IM_NEAREST;
  const char *mname = "nearest";
  if (!absent(mv)) {
    if (mv->kind != SV_STR) {
      diag_error(s->d, mv->loc, "interpolate(): mode must be a string, got %s",
                 sv_kind_name(mv));
      return sv_error();
    }
    int i = 0;
    while (i < 7 && strcmp(mv->s, interp_modes[i]) != 0) i++;
    if (i == 7) {
      diag_error(s->d, mv->loc, "interpolate(): unknown mode '%s'; the modes are 'nearest', "
                 "'nearest-exact', 'linear', 'bilinear', 'bicubic', 'trilinear' and 'area'",
                 mv->s);
      return sv_error();
    }
    m = interp_mode_of[i];
    mname = mv->s;
  }
  bool ac = false, recompute = false, aa = false;
  bool nearestish = m == IM_NEAREST || m == IM_NEAREST_EXACT || m == IM_AREA;
  if (nearestish && !absent(acv)) {
    diag_error(s->d, acv->loc, "interpolate(): align_corners can only be set with the "
               "interpolating modes 'linear', 'bilinear', 'bicubic' and 'trilinear', not "
               "'%s'", mname);
    return sv_error();
  }
  if (!sema_bool_arg(s, acv, "interpolate", "align_corners", false, &ac) ||
      !sema_bool_arg(s, rv, "interpolate", "recompute_scale_factor", false, &recompute) ||
      !sema_bool_arg(s, aav, "interpolate", "antialias", false, &aa))
    return sv_error();
  const IrValue *xv = sema_val(s, x);
  int rank = xv->rank, k = rank - 2;
  if (!absent(sz) && !absent(sfv)) {
    diag_error(s->d, sfv->loc, "interpolate(): give only one of size and scale_factor");
    return sv_error();
  }
  if (absent(sz) && absent(sfv)) {
    diag_error(s->d, c->loc, "interpolate(): give size or scale_factor");
    return sv_error();
  }
  if (rank < 3 || rank > 5) {
    diag_error(s->d, c->loc, "interpolate(): expected a 3-D, 4-D or 5-D input [N, C, ...] "
               "with 1, 2 or 3 spatial dims, got shape %s", sema_shape_str(s, x));
    sema_note_origin(s, x);
    return sv_error();
  }
  Dim dims[3];
  memset(dims, 0, sizeof dims);
  const Sym *osz[3];
  double sf[3];
  if (!absent(sz)) {
    if (!interp_sizes(s, sz, k, "size", false, osz, sf)) return sv_error();
    if (!absent(rv) && recompute) {
      diag_error(s->d, rv->loc, "interpolate(): recompute_scale_factor is not meaningful with "
                 "an explicit size");
      return sv_error();
    }
  } else if (!interp_sizes(s, sfv, k, "scale_factor", true, osz, sf)) {
    return sv_error();
  }
  if (aa) {
    diag_error(s->d, aav->loc, "interpolate(): antialias=true is not supported");
    return sv_error();
  }
  int want = m == IM_LINEAR ? 3 : m == IM_BILINEAR || m == IM_BICUBIC ? 4
             : m == IM_TRILINEAR ? 5 : 0;
  if (want && rank != want) {
    diag_error(s->d, c->loc, "interpolate(): mode '%s' needs a %d-D input [N, C, %s], got "
               "shape %s", mname, want, want == 3 ? "L" : want == 4 ? "H, W" : "D, H, W",
               sema_shape_str(s, x));
    sema_note_origin(s, x);
    return sv_error();
  }
  if (m == IM_TRILINEAR || m == IM_AREA) {
    diag_error(s->d, mv->loc, "interpolate(): mode '%s' is not supported; use %s", mname,
               m == IM_AREA ? "adaptive_avg_pool2d" : "'nearest'");
    return sv_error();
  }
  DType dt = xv->dtype;
  bool floaty = dtype_is_float(dt);
  if (!(floaty || (nearestish && dt == DT_U8))) {
    diag_error(s->d, c->loc, "interpolate(): mode '%s' is not implemented for %s tensors "
               "(%s); convert with .to(f32)", mname, dtype_name(dt),
               nearestish ? "nearest modes take floating-point and u8 tensors"
                          : "interpolating modes take floating-point tensors");
    return sv_error();
  }
  int64_t nc;
  if (sym_is_const(xv->shape[1], &nc) && nc == 0) { /* PyTorch: N may be 0, C not */
    diag_error(s->d, c->loc, "interpolate(): expected a non-empty input (only N may be 0), got "
               "shape %s", sema_shape_str(s, x));
    return sv_error();
  }
  bool ok = true;
  for (int j = 0; j < k; j++) {
    dims[j].in = xv->shape[2 + j];
    if (!absent(sz)) {
      dims[j].out = osz[j];
    } else {
      dims[j].out = scaled_size(s, dims[j].in, sf[j], sfv->loc, &ok);
      if (!ok) return sv_error();
      dims[j].have = !recompute;
      dims[j].sf = sf[j];
    }
  }
  /* sizes > 0, in and out */
  const char *names[3] = {"D", "H", "W"};
  int base = 3 - k;
  for (int j = 0; j < k; j++) {
    int64_t ni, no;
    bool ki = sym_is_const(dims[j].in, &ni), ko = sym_is_const(dims[j].out, &no);
    if ((ki && ni <= 0) || (ko && no <= 0)) {
      diag_error(s->d, ki && ni <= 0 ? c->loc : absent(sz) ? sfv->loc : sz->loc, "interpolate(): input and output sizes must be greater than 0, "
                 "but dim %s has input size %s and output size %s", names[base + j],
                 sym_text(s, dims[j].in), sym_text(s, dims[j].out));
      return sv_error();
    }
    const char *msg = arena_printf(s->a, "interpolate(): input and output sizes must be "
                                   "greater than 0 (dim %s)", names[base + j]);
    if (!ki) sema_check_le(s, K(s, 1), dims[j].in, msg, c->loc);
    if (!ko) sema_check_le(s, K(s, 1), dims[j].out, msg, c->loc);
  }
  DType T = dt == DT_F64 ? DT_F64 : DT_F32;
  /* PyTorch's nearest kernels for channels-last inputs compute their own
   * way (nearest_taps) */
  bool cl = suggests_cl(s, x), cl_path = false;
  if (rank == 4) {
    Geom g = sema_geom_of(s, x);
    cl_path = geom_is_channels_last(&g);
  }
  for (int j = 0; j < k; j++) {
    if (m == IM_NEAREST || m == IM_NEAREST_EXACT)
      nearest_taps(s, &dims[j], m != IM_NEAREST, cl_path, T, c->loc);
    else if (m == IM_BICUBIC) cubic_taps(s, &dims[j], ac, T, c->loc);
    else linear_taps(s, &dims[j], ac, T, c->loc);
  }
  IrRef xf = merge_last(s, x, k, c->loc);
  IrRef r = interp_rec(s, xf, dims, 0, k, -1, nearestish ? DT_NONE : T, cl, c->loc);
  if (!nearestish) r = to(s, r, dt, c->loc);
  return sv_tensor(r, c->loc);
}

/* ========================= conv_transpose2d ========================= */

/* An int or a pair of ints (dflt when absent). */
static bool pair(Sema *s, CallArgs *c, int i, const char *kw, int64_t dflt, int64_t out[2],
                 Loc *at) {
  const SVal *v = sema_arg(s, c, i, kw);
  out[0] = out[1] = dflt;
  *at = c->loc;
  if (absent(v)) return true;
  *at = v->loc;
  int64_t buf[2];
  int n = 0;
  const char *what = arena_printf(s->a, "conv_transpose2d() argument '%s'", kw);
  if (v->kind == SV_LIST && v->nitems > 2) {
    diag_error(s->d, v->loc, "conv_transpose2d(): %s must be an int or a pair of ints, got %d "
               "values", kw, v->nitems);
    return false;
  }
  if (!sema_int_list(s, v, what, buf, &n, 2)) return false;
  if (n == 1) buf[1] = buf[0];
  else if (n != 2) {
    diag_error(s->d, v->loc, "conv_transpose2d(): %s must be an int or a pair of ints", kw);
    return false;
  }
  out[0] = buf[0], out[1] = buf[1];
  return true;
}

/* The output phases of one dim.  Output position o of a transposed
 * convolution sums x[i] w[k] over i s + k d = o + pad: the taps k of o
 * are those with k d = o + pad (mod s), the same for every o of a phase
 * o0 + s m (o0 < s).  Within a phase they are every q-th tap (q = s /
 * gcd(s, d)), and phase o0's outputs are the stride-1 correlation
 *   y[m] = sum_j x[m + j D - Pad] wf[a0 + j q]   (j < J)
 * of x with the flipped weight wf's taps a0, a0 + q, ... (dilation D = d
 * / gcd(s, d)).  Every phase computes M = ceil(O / s) outputs (the output
 * has O = s in + c0) as a conv2d padded by p on both sides and read from
 * off = p - Pad: outputs past O are cut off after the interleaving. */
typedef struct {
  int64_t taps, a0, q, dil, pad, off; /* taps (J) 0: no tap reaches the phase */
} Phase;

typedef struct {
  int64_t cm; /* M = in + cm */
  Phase *p;   /* [s], by o0 */
} Phases;

static int64_t floor_div(int64_t a, int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

/* C0 of the output size O = s in + C0 along one dim. */
static int64_t out_c0(int64_t s, int64_t pd, int64_t d, int64_t k, int64_t op) {
  return -s - 2 * pd + d * (k - 1) + op + 1;
}

static void phases_of(Arena *a, Phases *ps, int64_t s, int64_t pd, int64_t d, int64_t k,
                      int64_t op) {
  ps->cm = floor_div(out_c0(s, pd, d, k, op) + s - 1, s);
  ps->p = arena_alloc(a, sizeof *ps->p * (size_t)s);
  int64_t g = gcd(s, d), q = s / g;
  for (int64_t o0 = 0; o0 < s; o0++) {
    Phase *p = &ps->p[o0];
    memset(p, 0, sizeof *p);
    int64_t r = (o0 + pd) % s, first = -1;
    for (int64_t t = 0; t < k && t < q && first < 0; t++)
      if (t * d % s == r) first = t;
    if (first < 0) continue;
    p->taps = (k - 1 - first) / q + 1;
    int64_t last = first + (p->taps - 1) * q;
    p->a0 = k - 1 - last, p->q = q, p->dil = d / g;
    p->pad = (last * d - o0 - pd) / s; /* exact: last d = o0 + pd (mod s) */
    int64_t need = ps->cm + p->dil * (p->taps - 1) - p->pad, pc = 0; /* conv2d's padding */
    if (p->pad > pc) pc = p->pad;
    if (need > pc) pc = need;
    p->off = pc - p->pad;
  }
}

/* x.narrow(dim, start, length): sizes exact where a slice's clamps to
 * the dim's size would leave min/max terms. */
static SVal narrow(Sema *s, IrRef x, int dim, const Sym *start, const Sym *length, Loc loc) {
  SVal p[4] = {tv(x, loc), sv_int(K(s, dim), loc), sv_int(start, loc), sv_int(length, loc)};
  return call_fn(s, sema_view_builtins, "narrow", true, p, 4, NULL, NULL, 0, loc);
}

/* The weight per group transposed and flipped: [C_out, C_in/g, kH, kW]. */
static IrRef flipped_weight(Sema *s, IrRef w, int64_t groups, int64_t cin, int64_t coutg,
                            int64_t kh, int64_t kw, Loc loc) {
  int64_t sh5[5] = {groups, cin / groups, coutg, kh, kw};
  SVal p[3];
  p[0] = tv(w, loc);
  p[1] = int_list(s, sh5, 5, loc);
  SVal w5 = call_fn(s, sema_view_builtins, "reshape", true, p, 2, NULL, NULL, 0, loc);
  p[0] = w5, p[1] = sv_int(K(s, 1), loc), p[2] = sv_int(K(s, 2), loc);
  SVal wt = call_fn(s, sema_view_builtins, "transpose", true, p, 3, NULL, NULL, 0, loc);
  p[0] = wt, p[1] = sv_int(K(s, 3), loc), p[2] = sv_int(K(s, 4), loc);
  SVal wf = call_fn(s, sema_index_builtins, "flip", true, p, 3, NULL, NULL, 0, loc);
  int64_t sh4[4] = {coutg * groups, cin / groups, kh, kw};
  p[0] = wf, p[1] = int_list(s, sh4, 4, loc);
  SVal w4 = call_fn(s, sema_view_builtins, "reshape", true, p, 2, NULL, NULL, 0, loc);
  return w4.kind == SV_TENSOR ? w4.ref : -1;
}

/* stack(items, dim) or cat(items, dim) */
static SVal join(Sema *s, const char *fn, SVal *items, int n, int dim, Loc loc) {
  SVal l = sv_make(SV_LIST, loc);
  l.items = items, l.nitems = n;
  const char *kwn[1] = {"dim"};
  SVal kwv[1] = {sv_int(K(s, dim), loc)};
  return call_fn(s, sema_join_builtins, fn, false, &l, 1, kwn, kwv, 1, loc);
}

/* Phase pp[0] x pp[1]'s taps of the flipped weight wf: [C_out, C_in/g,
 * J_h, J_w]. */
static SVal phase_weight(Sema *s, IrRef wf, const Phase *const *pp, Loc loc) {
  SVal wv = tv(wf, loc);
  for (int i = 0; i < 2 && wv.kind == SV_TENSOR; i++) {
    const Phase *p = pp[i];
    int64_t k;
    if (sym_is_const(sema_val(s, wf)->shape[2 + i], &k) && p->taps == k) continue;
    wv = sema_view_slice(s, wv.ref, 2 + i, K(s, p->a0), K(s, p->a0 + (p->taps - 1) * p->q + 1),
                         K(s, p->q), loc);
  }
  return wv;
}

/* Whether phases a and b (pairs) make the same conv2d but for its
 * weights: the same number of taps, dilation and padding. */
static bool same_conv(const Phase *const *a, const Phase *const *b) {
  for (int i = 0; i < 2; i++)
    if (a[i]->taps != b[i]->taps || a[i]->dil != b[i]->dil ||
        a[i]->pad + a[i]->off != b[i]->pad + b[i]->off)
      return false;
  return true;
}

/* One conv2d for the n phases pp[0..n) that make the same conv: their
 * weights (and biases) concatenated along the output channels, so the
 * input is read once; [N, n C_out, Z_h, Z_w]. */
static IrRef phases_conv(Sema *s, IrRef x, IrRef wf, IrRef bias, const Phase *const (*pp)[2],
                         int n, int64_t groups, Loc loc) {
  SVal *ws = arena_alloc(s->a, sizeof *ws * (size_t)n);
  SVal *bs = arena_alloc(s->a, sizeof *bs * (size_t)n);
  for (int t = 0; t < n; t++) {
    ws[t] = phase_weight(s, wf, pp[t], loc);
    if (ws[t].kind != SV_TENSOR) return -1;
    bs[t] = bias >= 0 ? tv(bias, loc) : sv_make(SV_NONE, loc);
  }
  SVal w = ws[0], b = bs[0];
  if (n > 1) {
    w = join(s, "cat", ws, n, 0, loc);
    if (bias >= 0) b = join(s, "cat", bs, n, 0, loc);
  }
  if (w.kind != SV_TENSOR || b.kind == SV_ERROR) return -1;
  int64_t pad[2], dil[2];
  for (int i = 0; i < 2; i++) pad[i] = pp[0][i]->off + pp[0][i]->pad, dil[i] = pp[0][i]->dil;
  SVal args[3] = {tv(x, loc), w, b};
  const char *kwn[3] = {"padding", "dilation", "groups"};
  SVal kwv[3] = {int_list(s, pad, 2, loc), int_list(s, dil, 2, loc), sv_int(K(s, groups), loc)};
  SVal r = call_fn(s, sema_conv_builtins, "conv2d", false, args, 3, kwn, kwv, 3, loc);
  return r.kind == SV_TENSOR ? r.ref : -1;
}

/* Phase pp[0] x pp[1]'s outputs [N, C_out, m[0], m[1]]: channels
 * [at C_out, (at + 1) C_out) of its conv (conv >= 0), read from the
 * phase's offsets, or the bias (zeros) where no tap reaches it. */
static IrRef phase_out(Sema *s, IrRef x, IrRef conv, int at, IrRef bias, const Phase *const *pp,
                       const Sym *const *m, int64_t cout, Loc loc) {
  if (conv < 0) {
    const IrValue *xv = sema_val(s, x);
    const Sym *shape[4] = {xv->shape[0], K(s, cout), m[0], m[1]};
    IrRef f = fconst(s, 0, xv->dtype, loc);
    if (bias >= 0) {
      const Sym *c11[3] = {K(s, cout), K(s, 1), K(s, 1)};
      SVal b = sema_view_reshape(s, bias, c11, 3, loc);
      f = b.kind == SV_TENSOR ? b.ref : -1;
    }
    return f < 0 ? -1 : sema_expand_to(s, f, 4, shape, loc);
  }
  SVal r = tv(conv, loc);
  if (!sym_is(sema_val(s, conv)->shape[1], cout))
    r = narrow(s, conv, 1, K(s, at * cout), K(s, cout), loc);
  for (int i = 0; i < 2 && r.kind == SV_TENSOR; i++)
    if (pp[i]->off != 0 || size_eq(s, sema_val(s, r.ref)->shape[2 + i], m[i]) != SYM_YES)
      r = narrow(s, r.ref, 2 + i, K(s, pp[i]->off), m[i], loc);
  return r.kind == SV_TENSOR ? r.ref : -1;
}

/* Strides of more phases than this (s_h s_w) take the zero-inserted
 * form: one conv2d per phase would make as many GEMM calls, and code. */
#define MAX_PHASES 16

/* The transposed conv as the conv2d of the input with zeros inserted
 * (stride - 1 between elements) and padded by P = dilation (k - 1) -
 * padding (cropped where that is negative; output_padding more at the
 * bottom and right), with the flipped weight wf: it multiplies the
 * inserted zeros too, stride_h stride_w times the phases' arithmetic. */
static SVal zero_inserted(Sema *s, IrRef x, IrRef wf, IrRef bias, const int64_t *st,
                          const int64_t *pd, const int64_t *op, const int64_t *dil,
                          const int64_t *k2, int64_t groups, Loc loc) {
  const IrValue xv = *sema_val(s, x);
  IrRef src[2], mask = -1;
  for (int i = 0; i < 2; i++) {
    /* position u of dim i reads q = u - P when 0 <= q <= (in-1) stride and
     * stride divides q */
    int64_t P = dil[i] * (k2[i] - 1) - pd[i];
    const Sym *span = sym_mul(s->st, sym_sub(s->st, xv.shape[2 + i], K(s, 1)), K(s, st[i]));
    const Sym *zsz = sym_add(s->st, span, K(s, 1 + 2 * P + op[i]));
    IrRef q = bi(s, OP_SUB, arange(s, zsz, DT_I64, loc), P, loc);
    IrRef okq = bt(s, OP_AND, bi(s, OP_GE, q, 0, loc), bsym(s, OP_LE, q, span, loc), loc);
    okq = bt(s, OP_AND, okq, bi(s, OP_EQ, bi(s, OP_MOD, q, st[i], loc), 0, loc), loc);
    src[i] = bi(s, OP_FLOORDIV, clamp_sym(s, q, K(s, 0), span, loc), st[i], loc);
    okq = along(s, okq, i, 2, loc);
    mask = mask < 0 ? okq : bt(s, OP_AND, mask, okq, loc);
  }
  const Sym *ins[2] = {xv.shape[2], xv.shape[3]};
  IrRef z = take(s, merge_last(s, x, 2, loc), linear_index(s, src, ins, 2, loc),
                 suggests_cl(s, x), loc);
  SVal zero = sv_int(K(s, 0), loc);
  z = where3(s, mask, z, to(s, sema_to_tensor(s, &zero, "zero"), xv.dtype, loc), loc);
  if (z < 0) return sv_error();
  SVal args[3] = {tv(z, loc), tv(wf, loc), bias >= 0 ? tv(bias, loc) : sv_make(SV_NONE, loc)};
  const char *kwn[2] = {"dilation", "groups"};
  SVal kwv[2] = {int_list(s, dil, 2, loc), sv_int(K(s, groups), loc)};
  return call_fn(s, sema_conv_builtins, "conv2d", false, args, 3, kwn, kwv, 2, loc);
}

/* r, or a copy of it with PyTorch's strides for the result: dense,
 * channels-last where the input or the weight suggests it (the phases'
 * interleaving is an NCHW view, cut to the output's size). */
static IrRef with_layout(Sema *s, IrRef r, bool cl, Loc loc) {
  Geom have = sema_geom_of(s, r);
  if ((!have.offset || sym_is(have.offset, 0)) &&
      (cl ? geom_is_channels_last(&have) : geom_is_contiguous(&have)))
    return r;
  const IrValue *v = sema_val(s, r);
  GeomCtx gc = sema_geom(s, loc);
  Geom want;
  if (cl) geom_channels_last(&gc, v->shape, &want);
  else geom_contiguous(&gc, v->rank, v->shape, &want);
  return sema_emit_copy(s, OP_COPY, r, v->dtype, &want, 0, loc);
}

/* The transposed conv by phases: each phase pair's outputs [N, C_out,
 * M_h, M_w] (from a conv2d it may share with other phases), interleaved:
 * a stack along a new last dim per phase
 * row o0_h, [N, C, M_h, M_w, s_w] read as [N, C, M_h, M_w s_w], and of
 * those along dim 3, [N, C, M_h, s_h, M_w s_w] read as [N, C, M_h s_h,
 * M_w s_w] (pass plan-memory computes that stack in the caller's
 * output); cut to the output's size osz. */
static SVal by_phases(Sema *s, IrRef x, IrRef wf, IrRef bias, const int64_t *st,
                      const int64_t *pd, const int64_t *op, const int64_t *dil,
                      const int64_t *k2, int64_t groups, int64_t cout, const Sym *const *osz,
                      Loc loc) {
  const IrValue *xv = sema_val(s, x);
  const Sym *n = xv->shape[0];
  Phases ph[2];
  for (int i = 0; i < 2; i++) phases_of(s->a, &ph[i], st[i], pd[i], dil[i], k2[i], op[i]);
  const Sym *m[2] = {sym_add(s->st, xv->shape[2], K(s, ph[0].cm)),
                     sym_add(s->st, xv->shape[3], K(s, ph[1].cm))};
  /* the phases' convs: one per set of phases that make the same conv
   * (with one group: more would interleave the groups' channels) */
  int np = (int)(st[0] * st[1]);
  const Phase *(*pp)[2] = arena_alloc(s->a, sizeof *pp * (size_t)np);
  const Phase *(*mem)[2] = arena_alloc(s->a, sizeof *mem * (size_t)np);
  IrRef *conv = arena_alloc(s->a, sizeof *conv * (size_t)np);
  int *at = arena_alloc(s->a, sizeof *at * (size_t)np);
  for (int t = 0; t < np; t++) {
    pp[t][0] = &ph[0].p[t / st[1]], pp[t][1] = &ph[1].p[t % st[1]];
    conv[t] = -2, at[t] = 0; /* -2: not made yet; -1: no tap */
    if (!pp[t][0]->taps || !pp[t][1]->taps) conv[t] = -1;
  }
  for (int t = 0; t < np; t++) {
    if (conv[t] != -2) continue;
    int nm = 0;
    for (int u = t; u < np; u++)
      if (conv[u] == -2 && (u == t || (groups == 1 && same_conv(pp[t], pp[u])))) {
        mem[nm][0] = pp[u][0], mem[nm][1] = pp[u][1];
        at[u] = nm++;
        conv[u] = -3; /* member of the conv being made */
      }
    IrRef r = phases_conv(s, x, wf, bias, (const Phase *const (*)[2])mem, nm, groups, loc);
    if (r < 0) return sv_error();
    for (int u = t; u < np; u++)
      if (conv[u] == -3) conv[u] = r;
  }
  const Sym *wide = sym_mul(s->st, m[1], K(s, st[1]));
  SVal *rows = arena_alloc(s->a, sizeof *rows * (size_t)st[0]);
  for (int64_t a = 0; a < st[0]; a++) {
    SVal *cols = arena_alloc(s->a, sizeof *cols * (size_t)st[1]);
    for (int64_t b2 = 0; b2 < st[1]; b2++) {
      int t = (int)(a * st[1] + b2);
      IrRef r = phase_out(s, x, conv[t], at[t], bias, pp[t], m, cout, loc);
      if (r < 0) return sv_error();
      cols[b2] = tv(r, loc);
    }
    rows[a] = cols[0];
    if (st[1] > 1) {
      const Sym *sz[4] = {n, K(s, cout), m[0], wide};
      rows[a] = join(s, "stack", cols, (int)st[1], 4, loc);
      if (rows[a].kind == SV_TENSOR) rows[a] = sema_view_reshape(s, rows[a].ref, sz, 4, loc);
      if (rows[a].kind != SV_TENSOR) return sv_error();
    }
  }
  SVal r = rows[0];
  if (st[0] > 1) {
    const Sym *sz[4] = {n, K(s, cout), sym_mul(s->st, m[0], K(s, st[0])), wide};
    r = join(s, "stack", rows, (int)st[0], 3, loc);
    if (r.kind == SV_TENSOR) r = sema_view_reshape(s, r.ref, sz, 4, loc);
  }
  for (int i = 0; i < 2 && r.kind == SV_TENSOR; i++)
    if (size_eq(s, sema_val(s, r.ref)->shape[2 + i], osz[i]) != SYM_YES)
      r = narrow(s, r.ref, 2 + i, K(s, 0), osz[i], loc);
  return r;
}

static SVal h_conv_transpose2d(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x, w, bias = -1;
  if (sema_has_error_arg(c) || !sema_input_arg(s, c, &x) ||
      !sema_req_tensor(s, c, 1, "weight", &w))
    return sv_error();
  const SVal *bv = sema_arg(s, c, 2, "bias");
  int64_t st[2], pd[2], op[2], dil[2], groups;
  Loc lst, lpd, lop, ldil;
  if (!pair(s, c, 3, "stride", 1, st, &lst) || !pair(s, c, 4, "padding", 0, pd, &lpd) ||
      !pair(s, c, 5, "output_padding", 0, op, &lop) ||
      !sema_opt_int(s, c, 6, "groups", 1, &groups) || !pair(s, c, 7, "dilation", 1, dil, &ldil) ||
      !sema_args_done(s, c, 8))
    return sv_error();
  const SVal *gv = sema_arg(s, c, 6, "groups");
  Loc lg = absent(gv) ? c->loc : gv->loc;
  if (!absent(bv) && !sema_tensor_arg(s, bv, "conv_transpose2d() argument 'bias'", &bias))
    return sv_error();
  IrValue xv = *sema_val(s, x), wv = *sema_val(s, w);
  if (xv.rank != 3 && xv.rank != 4) {
    diag_error(s->d, c->loc, "conv_transpose2d(): expected a 3-D (unbatched) or 4-D (batched) "
               "input [N, C, H, W], got shape %s", sema_shape_str(s, x));
    sema_note_origin(s, x);
    return sv_error();
  }
  if (wv.rank != 4) {
    diag_error(s->d, c->loc, "conv_transpose2d(): the weight must be 4-D [C_in, C_out / groups, "
               "kH, kW], got shape %s", sema_shape_str(s, w));
    sema_note_origin(s, w);
    return sv_error();
  }
  if (xv.dtype != wv.dtype || (bias >= 0 && sema_val(s, bias)->dtype != xv.dtype)) {
    diag_error(s->d, c->loc, "conv_transpose2d(): input, weight and bias must have the same "
               "dtype, got %s%s%s%s%s", dtype_name(xv.dtype), bias >= 0 ? ", " : " and ",
               dtype_name(wv.dtype), bias >= 0 ? " and " : "",
               bias >= 0 ? dtype_name(sema_val(s, bias)->dtype) : "");
    return sv_error();
  }
  if (xv.dtype == DT_BOOL) {
    diag_error(s->d, c->loc, "conv_transpose2d(): bool tensors are not supported");
    return sv_error();
  }
  for (int i = 0; i < 2; i++) {
    const char *bad = st[i] <= 0 ? "stride must be positive"
                      : pd[i] < 0 ? "padding must not be negative"
                      : op[i] < 0 ? "output_padding must not be negative"
                      : dil[i] <= 0 ? "dilation must be positive" : NULL;
    Loc at = st[i] <= 0 ? lst : pd[i] < 0 ? lpd : op[i] < 0 ? lop : ldil;
    if (bad) {
      diag_error(s->d, at, "conv_transpose2d(): %s, got stride (%lld, %lld), padding "
                 "(%lld, %lld), output_padding (%lld, %lld), dilation (%lld, %lld)", bad,
                 (long long)st[0], (long long)st[1], (long long)pd[0], (long long)pd[1],
                 (long long)op[0], (long long)op[1], (long long)dil[0], (long long)dil[1]);
      return sv_error();
    }
  }
  if (groups <= 0) {
    diag_error(s->d, lg, "conv_transpose2d(): groups must be positive, got %lld",
               (long long)groups);
    return sv_error();
  }
  for (int i = 0; i < 2; i++)
    if (op[i] >= st[i] && op[i] >= dil[i]) {
      diag_error(s->d, lop, "conv_transpose2d(): output_padding must be smaller than the "
                 "stride or the dilation, got output_padding (%lld, %lld), stride (%lld, %lld), "
                 "dilation (%lld, %lld)", (long long)op[0], (long long)op[1], (long long)st[0],
                 (long long)st[1], (long long)dil[0], (long long)dil[1]);
      return sv_error();
    }
  int64_t cin, coutg, kh, kw, n;
  if (!sym_is_const(wv.shape[0], &cin) || !sym_is_const(wv.shape[1], &coutg) ||
      !sym_is_const(wv.shape[2], &kh) || !sym_is_const(wv.shape[3], &kw)) {
    diag_error(s->d, c->loc, "conv_transpose2d(): the weight's shape must be known at compile "
               "time, got %s", sema_shape_str(s, w));
    return sv_error();
  }
  if (kh <= 0 || kw <= 0) {
    diag_error(s->d, c->loc, "conv_transpose2d(): the kernel must not be empty, got weight "
               "shape %s", sema_shape_str(s, w));
    return sv_error();
  }
  if (cin % groups) {
    diag_error(s->d, lg, "conv_transpose2d(): groups=%lld must divide the weight's dim 0 "
               "(C_in), got weight shape %s", (long long)groups, sema_shape_str(s, w));
    return sv_error();
  }
  const Sym *xc = xv.shape[xv.rank - 3];
  if (!(sym_is_const(xc, &n) && n == cin)) {
    if (sym_is_const(xc, &n)) {
      diag_error(s->d, c->loc, "conv_transpose2d(): the weight %s expects %lld input channels, "
                 "but the input %s has %lld", sema_shape_str(s, w), (long long)cin,
                 sema_shape_str(s, x), (long long)n);
      sema_note_origin(s, x);
      return sv_error();
    }
    sema_check_eq(s, xc, K(s, cin), "conv_transpose2d(): the input's channels must match the "
                  "weight's dim 0", c->loc);
  }
  int64_t cout = coutg * groups;
  if (bias >= 0) {
    const IrValue *bb = sema_val(s, bias);
    if (bb->rank != 1 || !sym_is(bb->shape[0], cout)) {
      diag_error(s->d, bv->loc, "conv_transpose2d(): bias must be 1-D with %lld elements "
                 "(C_out), got shape %s", (long long)cout, sema_shape_str(s, bias));
      return sv_error();
    }
  }
  bool unbatched = xv.rank == 3;
  if (unbatched) x = sema_emit_unsqueeze(s, x, 0, c->loc);
  xv = *sema_val(s, x);
  int64_t k2[2] = {kh, kw};
  const Sym *osz[2];
  for (int i = 0; i < 2; i++) {
    const Sym *in = xv.shape[2 + i];
    osz[i] = sym_add(s->st, sym_mul(s->st, in, K(s, st[i])),
                     K(s, out_c0(st[i], pd[i], dil[i], k2[i], op[i])));
    int64_t o;
    /* (PyTorch's CPU kernels differ on one empty dim: one accepts it, one
     * does not) */
    if (sym_is_const(osz[i], &o) && o < 1) {
      diag_error(s->d, c->loc, "conv_transpose2d(): the output would have size %lld in dim %s "
                 "(input %s, stride %lld, padding %lld, dilation %lld, kernel %lld, "
                 "output_padding %lld): it must be at least 1", (long long)o, i ? "W" : "H",
                 sym_text(s, in), (long long)st[i], (long long)pd[i], (long long)dil[i],
                 (long long)k2[i], (long long)op[i]);
      return sv_error();
    }
    if (!sym_is_const(osz[i], &o))
      sema_check_le(s, K(s, 1), osz[i], "conv_transpose2d(): the output size must be at least 1",
                    c->loc);
  }
  IrRef wf = flipped_weight(s, w, groups, cin, coutg, kh, kw, c->loc);
  if (wf < 0) return sv_error();
  bool cl = suggests_cl(s, x) || suggests_cl(s, w); /* PyTorch: either suggests it */
  /* (each stride first: their product could overflow) */
  SVal r = st[0] > MAX_PHASES || st[1] > MAX_PHASES || st[0] * st[1] > MAX_PHASES
               ? zero_inserted(s, x, wf, bias, st, pd, op, dil, k2, groups, c->loc)
               : by_phases(s, x, wf, bias, st, pd, op, dil, k2, groups, cout, osz, c->loc);
  if (r.kind != SV_TENSOR) return r;
  r.ref = with_layout(s, r.ref, cl, c->loc);
  if (unbatched) {
    int64_t z0 = 0;
    return sv_tensor(sema_emit_squeeze(s, r.ref, &z0, 1, c->loc), c->loc);
  }
  return r;
}

const Builtin sema_resize_builtins[] = {
    {"pad", h_pad, OP_INDEX, BF_FUNC},
    {"interpolate", h_interpolate, OP_INDEX, BF_FUNC},
    {"conv_transpose2d", h_conv_transpose2d, OP_CONV2D, BF_FUNC},
    {NULL, NULL, OP_COUNT, 0},
};
