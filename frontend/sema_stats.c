/* sema_stats.c — statistics and logical reductions built from the
 * reduction IR ops: var, std, var_mean, std_mean, logsumexp, norm, any,
 * all, count_nonzero.
 *
 * None of them is an IR op of its own: each is PyTorch's formula in terms
 * of SUM / MEAN / AMAX / AMIN (ops.h) and elementwise ops, so the
 * accuracy of the reductions (the cascade sum of cpu/reduce.c, the
 * two-pass variance) and every pass and backend apply unchanged.
 *  - var: two passes, mean first (MEAN, keepdim), then the SUM of the
 *    squared deviations divided by max(0, N - correction) (PyTorch's
 *    divisor: a correction >= N gives inf, or NaN where every deviation
 *    is 0); std is its square root.  Every float dtype computes in f64
 *    and rounds once, as PyTorch's CPU Welford accumulates in double (so
 *    the std of +-3e38 is finite in f32 too).  The other statistics
 *    compute f16/bf16 in f32, as PyTorch's reductions accumulate.
 *  - logsumexp: m = amax (keepdim), infinite maxima replaced by 0 (no
 *    identity check: an empty dim reduces to -inf, so m = 0 and the
 *    result is log(0) = -inf, as PyTorch gives), log(sum(exp(x - m))) + m.
 *  - norm: p = 2 ("fro") sqrt(sum(x * x)), 1 sum(|x|), inf / -inf
 *    amax / amin of |x|, 0 the count of non-zeros, others
 *    sum(|x|^p)^(1/p), as torch.norm (linalg.vector_norm) computes them.
 *  - any / all: the i64 SUM of (x != 0) / (x == 0) compared with 0 (NaN
 *    is non-zero), so empty reductions give false / true.
 * var_mean and std_mean return an SV_LIST of two tensors.
 *
 * Needs: sema_internal.h (sema_reduce.c's dims, emptiness check and
 * reduction builder; sema_elementwise.c's builders).
 * Used by: sema_expr.c (the call dispatch, through sema_stats_builtins). */
#include <math.h>
#include <string.h>

#include "sema_internal.h"

/* The dtype statistics compute in: f64 for f64, else f32. */
static DType compute_dtype(DType dt) { return dt == DT_F64 ? DT_F64 : DT_F32; }

static IrRef ew2(Sema *s, Op op, IrRef a, IrRef b, Loc loc) {
  SVal va = sv_tensor(a, loc), vb = sv_tensor(b, loc);
  SVal r = sema_ew_binary(s, op, &va, &vb, loc);
  return r.kind == SV_TENSOR ? r.ref : -1;
}

static IrRef ew2n(Sema *s, Op op, IrRef a, double b, Loc loc) {
  SVal va = sv_tensor(a, loc), vb = sv_float(b, loc);
  SVal r = sema_ew_binary(s, op, &va, &vb, loc);
  return r.kind == SV_TENSOR ? r.ref : -1;
}

static IrRef ew2i(Sema *s, Op op, IrRef a, int64_t b, Loc loc) {
  SVal va = sv_tensor(a, loc), vb = sv_int(K(s, b), loc);
  SVal r = sema_ew_binary(s, op, &va, &vb, loc);
  return r.kind == SV_TENSOR ? r.ref : -1;
}

static IrRef ew1(Sema *s, Op op, IrRef x, Loc loc) {
  if (x < 0) return -1;
  SVal r = sema_ew_unary(s, op, x, 0, loc);
  return r.kind == SV_TENSOR ? r.ref : -1;
}

/* sema_reduce_emit, passing on a failed operand. */
static IrRef red(Sema *s, CallArgs *c, Op op, IrRef x, DType dt,
                 const bool *mask, bool keepdim) {
  return x < 0 ? -1 : sema_reduce_emit(s, c, op, x, dt, mask, keepdim);
}

/* The dims of a reduction: dim= into mask (every dim when absent). */
static bool stats_mask(Sema *s, CallArgs *c, const SVal *dv, const IrValue *xv,
                       bool **mask) {
  bool all;
  *mask = arena_alloc(s->a, (size_t)xv->rank + 1);
  if (!sema_reduce_dims(s, c, dv, xv->rank, *mask, &all)) return false;
  if (all) memset(*mask, 1, (size_t)xv->rank + 1);
  return true;
}

/* The number of elements each reduction reads. */
static const Sym *reduced_count(Sema *s, const IrValue *xv, const bool *mask) {
  const Sym **d = sym_array(s, xv->rank);
  int n = 0;
  for (int i = 0; i < xv->rank; i++)
    if (mask[i]) d[n++] = xv->shape[i];
  return sym_prod(s->st, d, n);
}

/* ---- var, std, var_mean, std_mean ---- */

enum { ST_VAR, ST_STD, ST_VAR_MEAN, ST_STD_MEAN };

static int stat_kind(const char *name) {
  if (strcmp(name, "var") == 0) return ST_VAR;
  if (strcmp(name, "std") == 0) return ST_STD;
  if (strcmp(name, "var_mean") == 0) return ST_VAR_MEAN;
  return ST_STD_MEAN;
}

/* correction= (a number) or the legacy unbiased= (true: 1, false: 0). */
static bool read_correction(Sema *s, CallArgs *c, const SVal *uv,
                            const SVal *cv, double *corr) {
  *corr = 1;
  if (!absent(uv) && !absent(cv)) {
    diag_error(s->d, c->loc,
               "%s(): cannot take both unbiased= and correction=; "
               "correction=0 is unbiased=false, correction=1 unbiased=true",
               c->name);
    return false;
  }
  if (!absent(uv)) {
    bool u;
    if (!sema_bool_arg(s, uv, c->name, "unbiased", true, &u)) return false;
    *corr = u ? 1 : 0;
  } else if (!absent(cv)) {
    if (cv->kind == SV_BOOL || !sv_is_number(cv) ||
        (cv->kind == SV_INT && !sym_is_const(cv->sym, NULL))) {
      diag_error(s->d, cv->loc, "%s(): correction must be a number, got %s",
                 c->name, sv_kind_name(cv));
      return false;
    }
    *corr = sv_num_f(cv);
  }
  return true;
}

/* max(0, N - correction) as a number or, for a symbolic N, a 0-dim
 * tensor of dtype cd. */
static SVal dof_value(Sema *s, const Sym *n, double corr, DType cd, Loc loc) {
  int64_t k;
  if (sym_is_const(n, &k)) return sv_float(fmax(0.0, (double)k - corr), loc);
  SVal nv = sv_int(n, loc);
  IrRef t = sema_to_tensor(s, &nv, "a size");
  if (t < 0) return sv_error();
  t = sema_cast(s, t, cd, loc);
  t = ew2n(s, OP_SUB, t, corr, loc);
  if (t < 0) return sv_error();
  t = ew2n(s, OP_MAXIMUM, t, 0.0, loc);
  return sv_tensor(t, loc);
}

static SVal build_var(Sema *s, CallArgs *c, int kind) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x;
  if (!sema_input_arg(s, c, &x)) return sv_error();
  /* var(x, unbiased) | var(x, dim, unbiased, keepdim) |
   * var(x, dim=None, *, correction=None, keepdim=false) */
  const SVal *p1 = sema_arg(s, c, 1, "dim");
  const SVal *dv = p1, *uv, *kv;
  if (p1 && p1->kind == SV_BOOL && c->npos > 1 && &c->pos[1] == p1) {
    dv = NULL;
    uv = p1;
    kv = sema_arg(s, c, KW_ONLY, "keepdim");
    if (!sema_args_done(s, c, 2)) return sv_error();
  } else {
    uv = sema_arg(s, c, 2, "unbiased");
    kv = sema_arg(s, c, 3, "keepdim");
  }
  const SVal *cv = sema_arg(s, c, KW_ONLY, "correction");
  bool keepdim;
  double corr;
  if (!sema_bool_arg(s, kv, c->name, "keepdim", false, &keepdim) ||
      !read_correction(s, c, uv, cv, &corr) || !sema_args_done(s, c, 4))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  if (!dtype_is_float(xv.dtype)) {
    diag_error(s->d, c->loc,
               "%s(): the input has dtype %s, but std and var need a "
               "floating-point input; convert it with .to(f32)",
               c->name, dtype_name(xv.dtype));
    sema_note_origin(s, x);
    return sv_error();
  }
  bool *mask;
  if (!stats_mask(s, c, dv, &xv, &mask)) return sv_error();
  /* PyTorch's CPU variance accumulates in f64 for every float dtype */
  DType cd = DT_F64;
  Loc loc = c->loc;
  IrRef xc = sema_cast(s, x, cd, loc);
  IrRef mk = red(s, c, OP_MEAN, xc, cd, mask, true);
  IrRef dev = ew2(s, OP_SUB, xc, mk, loc);
  IrRef sq = dev < 0 ? -1 : ew2(s, OP_MUL, dev, dev, loc);
  if (sq < 0) return sv_error();
  IrRef ss = red(s, c, OP_SUM, sq, cd, mask, keepdim);
  SVal dof = dof_value(s, reduced_count(s, &xv, mask), corr, cd, loc);
  SVal ssv = sv_tensor(ss, loc);
  SVal var = sema_ew_binary(s, OP_DIV, &ssv, &dof, loc);
  if (var.kind != SV_TENSOR) return sv_error();
  IrRef r = var.ref;
  if (kind == ST_STD || kind == ST_STD_MEAN) r = ew1(s, OP_SQRT, r, loc);
  if (r < 0) return sv_error();
  r = sema_cast(s, r, xv.dtype, loc);
  if (kind == ST_VAR || kind == ST_STD) return sv_tensor(r, loc);
  IrRef mean = mk;
  if (!keepdim) {
    int64_t dims[MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < xv.rank; d++)
      if (mask[d]) dims[nd++] = d;
    mean = sema_emit_squeeze(s, mk, dims, nd, loc);
  }
  mean = sema_cast(s, mean, xv.dtype, loc);
  SVal l = sv_make(SV_LIST, loc);
  l.nitems = 2;
  l.items = arena_alloc(s->a, 2 * sizeof *l.items);
  l.items[0] = sv_tensor(r, loc);
  l.items[1] = sv_tensor(mean, loc);
  return l;
}

/* ---- logsumexp ---- */

static SVal build_logsumexp(Sema *s, CallArgs *c) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x;
  if (!sema_input_arg(s, c, &x)) return sv_error();
  const SVal *dv = sema_need_arg(s, c, 1, "dim");
  const SVal *kv = sema_arg(s, c, 2, "keepdim");
  bool keepdim;
  if (!dv || !sema_bool_arg(s, kv, c->name, "keepdim", false, &keepdim) ||
      !sema_args_done(s, c, 3))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  bool *mask;
  if (!stats_mask(s, c, dv, &xv, &mask)) return sv_error();
  /* integers and bool promote to the default float dtype */
  DType rd = dtype_is_float(xv.dtype) ? xv.dtype : DT_F32;
  DType cd = compute_dtype(rd);
  Loc loc = c->loc;
  IrRef xc = sema_cast(s, x, cd, loc);
  IrRef m = red(s, c, OP_AMAX, xc, cd, mask, true);
  /* m with +-inf read as 0 (NaN stays a NaN of the sum: the result is
   * NaN either way); nan_to_num with every replacement 0 */
  m = ew1(s, OP_NAN_TO_NUM, m, loc);
  if (m < 0) return sv_error();
  IrValue *mv = sema_val(s, m);
  mv->fattr[0] = mv->fattr[1] = mv->fattr[2] = 0;
  IrRef e = ew1(s, OP_EXP, ew2(s, OP_SUB, xc, m, loc), loc);
  if (e < 0) return sv_error();
  IrRef l = ew1(s, OP_LOG, red(s, c, OP_SUM, e, cd, mask, keepdim),
                loc);
  if (l < 0) return sv_error();
  if (!keepdim) {
    int64_t dims[MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < xv.rank; d++)
      if (mask[d]) dims[nd++] = d;
    m = sema_emit_squeeze(s, m, dims, nd, loc);
  }
  IrRef r = ew2(s, OP_ADD, l, m, loc);
  if (r < 0) return sv_error();
  return sv_tensor(sema_cast(s, r, rd, loc), loc);
}

/* ---- norm ---- */

/* p= of norm: "fro" (2 over at most 2 dims) or a number. */
static bool norm_p(Sema *s, CallArgs *c, const SVal *pv, double *p, bool *fro) {
  *p = 2;
  *fro = true;
  if (absent(pv)) return true;
  if (pv->kind == SV_STR) {
    if (strcmp(pv->s, "fro") == 0) return true;
    diag_error(s->d, pv->loc,
               strcmp(pv->s, "nuc") == 0
                   ? "%s(): the nuclear norm (p=\"nuc\") is not supported; "
                     "p may be a number or \"fro\""
                   : "%s(): unknown norm p=\"%s\"; p may be a number or \"fro\"",
               c->name, pv->s);
    return false;
  }
  if (pv->kind == SV_BOOL || !sv_is_number(pv) ||
      (pv->kind == SV_INT && !sym_is_const(pv->sym, NULL))) {
    diag_error(s->d, pv->loc, "%s(): p must be a number or \"fro\", got %s",
               c->name, sv_kind_name(pv));
    return false;
  }
  *fro = false;
  *p = sv_num_f(pv);
  return true;
}

static SVal build_norm(Sema *s, CallArgs *c) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x;
  if (!sema_input_arg(s, c, &x)) return sv_error();
  const SVal *pv = sema_arg(s, c, 1, "p");
  const SVal *dv = sema_arg(s, c, 2, "dim");
  const SVal *kv = sema_arg(s, c, 3, "keepdim");
  const SVal *tv = sema_arg(s, c, KW_ONLY, "dtype");
  bool keepdim, fro;
  double p;
  DType given;
  if (!norm_p(s, c, pv, &p, &fro) ||
      !sema_bool_arg(s, kv, c->name, "keepdim", false, &keepdim) ||
      !sema_dtype_arg(s, tv, c->name, &given) || !sema_args_done(s, c, 4))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  if (!dtype_is_float(xv.dtype)) {
    diag_error(s->d, c->loc,
               "%s(): the input has dtype %s, but a norm needs a "
               "floating-point input; convert it with .to(f32)",
               c->name, dtype_name(xv.dtype));
    sema_note_origin(s, x);
    return sv_error();
  }
  if (given != DT_NONE && !dtype_is_float(given)) {
    diag_error(s->d, c->loc,
               "%s(): dtype=%s is not a floating-point dtype", c->name,
               dtype_name(given));
    return sv_error();
  }
  if (fro && dv && dv->kind == SV_LIST && dv->nitems > 2) {
    diag_error(s->d, c->loc,
               "%s(): the Frobenius norm takes at most 2 dims, got %d",
               c->name, dv->nitems);
    return sv_error();
  }
  bool *mask;
  if (!stats_mask(s, c, dv, &xv, &mask)) return sv_error();
  /* inf and negative norms have no identity: no empty reduced dim */
  if ((p < 0 || isinf(p)) && !sema_reduce_nonempty(s, c, &xv, mask))
    return sv_error();
  DType rd = given != DT_NONE ? given : xv.dtype, cd = compute_dtype(rd);
  Loc loc = c->loc;
  IrRef xc = sema_cast(s, x, cd, loc), r;
  if (p == 0) {
    IrRef nz = sema_cast(s, ew2i(s, OP_NE, xc, 0, loc), cd, loc);
    r = red(s, c, OP_SUM, nz, cd, mask, keepdim);
  } else if (p == 2) {
    r = ew1(s, OP_SQRT, red(s, c, OP_SUM, ew2(s, OP_MUL, xc, xc, loc),
                                         cd, mask, keepdim),
            loc);
  } else {
    IrRef a = ew1(s, OP_ABS, xc, loc);
    if (isinf(p))
      r = red(s, c, p > 0 ? OP_AMAX : OP_AMIN, a, cd, mask,
                           keepdim);
    else if (p == 1)
      r = red(s, c, OP_SUM, a, cd, mask, keepdim);
    else
      r = ew2n(s, OP_POW,
               red(s, c, OP_SUM, ew2n(s, OP_POW, a, p, loc), cd,
                                mask, keepdim),
               1.0 / p, loc);
  }
  if (r < 0) return sv_error();
  return sv_tensor(sema_cast(s, r, rd, loc), loc);
}

/* ---- any, all, count_nonzero ---- */

static SVal build_anyall(Sema *s, CallArgs *c, bool any) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x;
  if (!sema_input_arg(s, c, &x)) return sv_error();
  const SVal *dv = sema_arg(s, c, 1, "dim");
  const SVal *kv = sema_arg(s, c, 2, "keepdim");
  bool keepdim;
  if (!sema_bool_arg(s, kv, c->name, "keepdim", false, &keepdim) ||
      !sema_args_done(s, c, 3))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  bool *mask;
  if (!stats_mask(s, c, dv, &xv, &mask)) return sv_error();
  Loc loc = c->loc;
  /* any: some element != 0; all: no element == 0 */
  IrRef t = sema_cast(s, ew2i(s, any ? OP_NE : OP_EQ, x, 0, loc), DT_I64, loc);
  IrRef n = red(s, c, OP_SUM, t, DT_I64, mask, keepdim);
  IrRef r = ew2i(s, any ? OP_GT : OP_EQ, n, 0, loc);
  if (r < 0) return sv_error();
  /* PyTorch keeps uint8 for uint8 inputs */
  if (xv.dtype == DT_U8) r = sema_cast(s, r, DT_U8, loc);
  return sv_tensor(r, loc);
}

static SVal build_count_nonzero(Sema *s, CallArgs *c) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x;
  if (!sema_input_arg(s, c, &x)) return sv_error();
  const SVal *dv = sema_arg(s, c, 1, "dim");
  if (!sema_args_done(s, c, 2)) return sv_error();
  IrValue xv = *sema_val(s, x);
  bool *mask;
  if (!stats_mask(s, c, dv, &xv, &mask)) return sv_error();
  IrRef t = sema_cast(s, ew2i(s, OP_NE, x, 0, c->loc), DT_I64, c->loc);
  return sv_tensor(red(s, c, OP_SUM, t, DT_I64, mask, false),
                   c->loc);
}

/* ---- Call handlers ---- */

static SVal h_var(Sema *s, CallArgs *c, const Builtin *b) {
  return build_var(s, c, stat_kind(b->name));
}

static SVal h_logsumexp(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  return build_logsumexp(s, c);
}

static SVal h_norm(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  return build_norm(s, c);
}

static SVal h_anyall(Sema *s, CallArgs *c, const Builtin *b) {
  return build_anyall(s, c, strcmp(b->name, "any") == 0);
}

static SVal h_count_nonzero(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  return build_count_nonzero(s, c);
}

const Builtin sema_stats_builtins[] = {
    {"var", h_var, OP_COUNT, BF_BOTH},
    {"std", h_var, OP_COUNT, BF_BOTH},
    {"var_mean", h_var, OP_COUNT, BF_FUNC},
    {"std_mean", h_var, OP_COUNT, BF_FUNC},
    {"logsumexp", h_logsumexp, OP_COUNT, BF_BOTH},
    {"norm", h_norm, OP_COUNT, BF_BOTH},
    {"any", h_anyall, OP_COUNT, BF_BOTH},
    {"all", h_anyall, OP_COUNT, BF_BOTH},
    {"count_nonzero", h_count_nonzero, OP_COUNT, BF_BOTH},
    {NULL, NULL, OP_COUNT, 0},
};
