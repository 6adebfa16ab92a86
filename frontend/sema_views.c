/* sema_views.c — views, indexing and layout copies: view, reshape,
 * flatten/unflatten, transpose, t, .T/.mT, permute, expand, unsqueeze,
 * squeeze, narrow, select, diagonal, unfold, as_strided, x[...] with
 * ints, slices, None and ..., and the copies contiguous, clone and to.
 *
 * Every stride and size rule is geometry_views.c's (PyTorch's); this file reads
 * the arguments and appends the view op with its attrs in the form ops.h
 * documents (wrapped dims, normalized slice bounds).  A reshape that
 * cannot be a view becomes a RESHAPE copy.
 *
 * Needs: sema_internal.h, sema_values.c, sema_args.c, geometry.c,
 * geometry_views.c.
 * Used by: sema_expr.c (indexing, .T/.mT, and the call dispatch through
 * sema_view_builtins). */
#include <string.h>

#include "sema_internal.h"

/* ---- Views ---- */

static SVal geom_fail(Sema *s, const char *err, IrRef x, Loc loc) {
  diag_error(s->d, loc, "%s", err);
  sema_note_origin(s, x);
  return sv_error();
}

static int wrap_ok(Sema *s, int64_t d, int rank) {
  GeomCtx c = sema_geom(s, (Loc){0, 0, 0});
  int w = 0;
  if (geom_wrap_dim(&c, d, rank, &w)) return 0;
  return w;
}

static const Sym **syms_from_ints(Sema *s, const int64_t *v, int n) {
  if (n <= 0) return NULL;
  const Sym **out = arena_alloc(s->a, (size_t)n * sizeof *out);
  for (int i = 0; i < n; i++) out[i] = sym_const(s->st, v[i]);
  return out;
}

static IrRef emit_view_ints(Sema *s, Op op, IrRef in, const Geom *g,
                            const int64_t *attrs, int nattrs, Loc loc) {
  const Sym **a = syms_from_ints(s, attrs, nattrs);
  return sema_emit_view(s, op, in, g, a, nattrs, 0, loc);
}

static SVal do_view(Sema *s, IrRef x, const Sym *const *sizes, int n,
                    Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  const char *err = geom_view(&c, &in, sizes, n, &out);
  if (err) return geom_fail(s, err, x, loc);
  return sv_tensor(
      sema_emit_view(s, OP_VIEW, x, &out, out.shape, out.rank, 0, loc), loc);
}

static SVal do_reshape(Sema *s, IrRef x, const Sym *const *sizes, int n,
                       Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  bool is_view = false;
  const char *err = geom_reshape(&c, &in, sizes, n, &out, &is_view);
  if (err) return geom_fail(s, err, x, loc);
  if (is_view)
    return sv_tensor(
        sema_emit_view(s, OP_VIEW, x, &out, out.shape, out.rank, 0, loc), loc);
  DType dt = sema_val(s, x)->dtype;
  return sv_tensor(sema_emit_copy(s, OP_RESHAPE, x, dt, &out, 0, loc), loc);
}

SVal sema_permute(Sema *s, IrRef x, const int64_t *perm, int n, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  const char *err = geom_permute(&c, &in, perm, n, &out);
  if (err) return geom_fail(s, err, x, loc);
  int64_t p[MAX_DIMS];
  for (int i = 0; i < n; i++) p[i] = wrap_ok(s, perm[i], n);
  return sv_tensor(emit_view_ints(s, OP_PERMUTE, x, &out, p, n, loc), loc);
}

SVal sema_transpose(Sema *s, IrRef x, int64_t a, int64_t b, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  const char *err = geom_transpose(&c, &in, a, b, &out);
  if (err) return geom_fail(s, err, x, loc);
  int rank = in.rank;
  int64_t p[MAX_DIMS];
  for (int i = 0; i < rank; i++) p[i] = i;
  if (rank > 0) {
    int wa = wrap_ok(s, a, rank), wb = wrap_ok(s, b, rank);
    p[wa] = wb;
    p[wb] = wa;
  }
  return sv_tensor(emit_view_ints(s, OP_PERMUTE, x, &out, p, rank, loc), loc);
}

static SVal do_expand(Sema *s, IrRef x, const Sym *const *sizes, int n,
                      int flags, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  const char *err = geom_expand(&c, &in, sizes, n, &out);
  if (err) return geom_fail(s, err, x, loc);
  return sv_tensor(
      sema_emit_view(s, OP_EXPAND, x, &out, out.shape, out.rank, flags, loc),
      loc);
}

static SVal do_unsqueeze(Sema *s, IrRef x, int64_t d, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  if (!sema_rank_ok(s, in.rank + 1, loc)) return sv_error();
  const char *err = geom_unsqueeze(&c, &in, d, &out);
  if (err) return geom_fail(s, err, x, loc);
  int64_t w = wrap_ok(s, d, in.rank + 1);
  return sv_tensor(emit_view_ints(s, OP_UNSQUEEZE, x, &out, &w, 1, loc), loc);
}

/* A possibly negative index against a size (constant wrap only). */
static const Sym *wrap_index(Sema *s, const Sym *i, const Sym *size) {
  int64_t v;
  if (sym_is_const(i, &v) && v < 0) return sym_add(s->st, size, i);
  return i;
}

static SVal do_select(Sema *s, IrRef x, int64_t d, const Sym *i, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  const char *err = geom_select(&c, &in, d, i, &out);
  if (err) return geom_fail(s, err, x, loc);
  int w = wrap_ok(s, d, in.rank);
  const Sym *attrs[2] = {sym_const(s->st, w), wrap_index(s, i, in.shape[w])};
  return sv_tensor(sema_emit_view(s, OP_SELECT, x, &out, attrs, 2, 0, loc),
                   loc);
}

/* Python's slice normalization when everything is constant; otherwise
 * the wrapped bound (the geometry adds the run-time checks). */
static const Sym *slice_bound(Sema *s, const Sym *b, const Sym *size,
                              const Sym *lo, const Sym *dflt) {
  if (!b) return dflt;
  int64_t v, n, l;
  if (sym_is_const(b, &v) && sym_is_const(size, &n) && sym_is_const(lo, &l)) {
    if (v < 0) v += n;
    if (v < l) v = l;
    if (v > n) v = n;
    return sym_const(s->st, v);
  }
  return wrap_index(s, b, size);
}

static SVal do_slice(Sema *s, IrRef x, int d, const Sym *start,
                     const Sym *stop, const Sym *step, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  if (!step) step = sym_const(s->st, 1);
  const char *err = geom_slice(&c, &in, d, start, stop, step, &out);
  if (err) return geom_fail(s, err, x, loc);
  const Sym *size = in.shape[d];
  const Sym *st = slice_bound(s, start, size, sema_sym0(s), sema_sym0(s));
  const Sym *en = slice_bound(s, stop, size, st, size);
  const Sym *attrs[4] = {sym_const(s->st, d), st, en, step};
  return sv_tensor(sema_emit_view(s, OP_SLICE, x, &out, attrs, 4, 0, loc), loc);
}

/* ---- View handlers ---- */

static SVal h_view(Sema *s, CallArgs *c, const Builtin *b) {
  IrRef x;
  const Sym **sizes;
  int n;
  if (!sema_tensor_recv(s, c, &x) || !sema_sizes(s, c, 1, &sizes, &n) ||
      !sema_args_done(s, c, c->npos))
    return sv_error();
  if (b->op == OP_RESHAPE) return do_reshape(s, x, sizes, n, c->loc);
  return do_view(s, x, sizes, n, c->loc);
}

static SVal h_flatten(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t st, en;
  if (!sema_tensor_recv(s, c, &x) ||
      !sema_opt_int(s, c, 1, "start_dim", 0, &st) ||
      !sema_opt_int(s, c, 2, "end_dim", -1, &en) || !sema_args_done(s, c, 3))
    return sv_error();
  IrValue *v = sema_val(s, x);
  int rank = v->rank;
  const Sym *one = sym_const(s->st, 1);
  if (rank == 0) return do_reshape(s, x, &one, 1, c->loc);
  GeomCtx g = sema_geom(s, c->loc);
  int ws, we;
  const char *err = geom_wrap_dim(&g, st, rank, &ws);
  if (!err) err = geom_wrap_dim(&g, en, rank, &we);
  if (err) return geom_fail(s, err, x, c->loc);
  if (ws > we) {
    diag_error(s->d, c->loc,
               "flatten() has start_dim %d after end_dim %d", ws, we);
    return sv_error();
  }
  if (ws == we) return sv_tensor(x, c->loc);
  const Sym *shape[MAX_DIMS];
  int n = 0;
  for (int i = 0; i < ws; i++) shape[n++] = v->shape[i];
  shape[n++] = sym_prod(s->st, v->shape + ws, we - ws + 1);
  for (int i = we + 1; i < rank; i++) shape[n++] = v->shape[i];
  return do_reshape(s, x, shape, n, c->loc);
}

/* PyTorch infers unflatten's -1 from the size of the unflattened dim
 * alone, not from the whole tensor's numel (which may be 0 because of
 * another dim). Replaces a single -1 when the others divide `size`;
 * anything else is left to reshape's own checks and messages. */
static void unflatten_infer(Sema *s, const Sym **sizes, int n,
                            const Sym *size) {
  int at = -1;
  const Sym *rest[MAX_DIMS];
  int nrest = 0;
  for (int i = 0; i < n; i++) {
    if (!sym_is(sizes[i], -1)) rest[nrest++] = sizes[i];
    else if (at >= 0) return;  /* two -1: reshape reports it */
    else at = i;
  }
  const Sym *p = sym_prod(s->st, rest, nrest), *q;
  if (at < 0 || sym_is(p, 0)) return;
  if (sym_div_exact(s->st, size, p, &q)) sizes[at] = q;
}

static SVal h_unflatten(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t d;
  if (!sema_tensor_recv(s, c, &x) || !sema_req_int(s, c, 1, "dim", &d))
    return sv_error();
  const SVal *sz = sema_need_arg(s, c, 2, "sizes");
  if (!sz || !sema_args_done(s, c, 3)) return sv_error();
  if (sz->kind != SV_LIST) {
    diag_error(s->d, sz->loc, "unflatten() sizes must be a list, got %s",
               sv_kind_name(sz));
    return sv_error();
  }
  IrValue *v = sema_val(s, x);
  int rank = v->rank, w;
  GeomCtx g = sema_geom(s, c->loc);
  const char *err = geom_wrap_dim(&g, d, rank, &w);
  if (err) return geom_fail(s, err, x, c->loc);
  if (rank - 1 + sz->nitems > MAX_DIMS || sz->nitems == 0) {
    diag_error(s->d, sz->loc, "unflatten() needs between 1 and %d sizes",
               MAX_DIMS - rank + 1);
    return sv_error();
  }
  const Sym *shape[MAX_DIMS];
  const Sym *sizes[MAX_DIMS];
  bool infer = false;
  int n = 0;
  for (int i = 0; i < sz->nitems; i++) {
    if (!sema_sym_arg(s, &sz->items[i], "an unflatten() size", &sizes[i]))
      return sv_error();
    if (sym_is(sizes[i], -1)) infer = true;
  }
  if (infer) unflatten_infer(s, sizes, sz->nitems, v->shape[w]);
  if (!infer && sym_prod(s->st, sizes, sz->nitems) != v->shape[w]) {
    diag_error(s->d, sz->loc,
               "unflatten() sizes %s don't multiply up to the size of dim %d "
               "(%s) of the input with shape %s",
               geom_shape_str(s->a, sizes, sz->nitems), w,
               sym_str(s->a, v->shape[w]), sema_shape_str(s, x));
    return sv_error();
  }
  for (int i = 0; i < w; i++) shape[n++] = v->shape[i];
  for (int i = 0; i < sz->nitems; i++) shape[n++] = sizes[i];
  for (int i = w + 1; i < rank; i++) shape[n++] = v->shape[i];
  return do_reshape(s, x, shape, n, c->loc);
}

static SVal h_transpose(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t a, d;
  if (!sema_tensor_recv(s, c, &x) || !sema_req_int(s, c, 1, "dim0", &a) ||
      !sema_req_int(s, c, 2, "dim1", &d) || !sema_args_done(s, c, 3))
    return sv_error();
  return sema_transpose(s, x, a, d, c->loc);
}

static SVal do_t(Sema *s, IrRef x, Loc loc) {
  int rank = sema_val(s, x)->rank;
  if (rank > 2) {
    diag_error(s->d, loc,
               "t() expects a tensor with at most 2 dims, but this one has "
               "shape %s; use transpose(a, b) or permute()",
               sema_shape_str(s, x));
    sema_note_origin(s, x);
    return sv_error();
  }
  if (rank < 2) return sv_tensor(x, loc);
  return sema_transpose(s, x, 0, 1, loc);
}

static SVal h_t(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (!sema_tensor_recv(s, c, &x) || !sema_args_done(s, c, 1))
    return sv_error();
  return do_t(s, x, c->loc);
}

static SVal h_permute(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t p[MAX_DIMS];
  int n;
  if (!sema_tensor_recv(s, c, &x) || !sema_int_varargs(s, c, 1, p, &n) ||
      !sema_args_done(s, c, c->npos))
    return sv_error();
  return sema_permute(s, x, p, n, c->loc);
}

static SVal h_expand(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  const Sym **sizes;
  int n;
  if (!sema_tensor_recv(s, c, &x) || !sema_sizes(s, c, 1, &sizes, &n) ||
      !sema_args_done(s, c, c->npos))
    return sv_error();
  return do_expand(s, x, sizes, n, 0, c->loc);
}

static SVal h_expand_as(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x, y;
  if (!sema_tensor_recv(s, c, &x) || !sema_req_tensor(s, c, 1, "other", &y) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  IrValue *v = sema_val(s, y);
  return do_expand(s, x, v->shape, v->rank, 0, c->loc);
}

static SVal h_unsqueeze(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t d;
  if (!sema_tensor_recv(s, c, &x) || !sema_req_int(s, c, 1, "dim", &d) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  return do_unsqueeze(s, x, d, c->loc);
}

/* squeeze's dim= as a mask of the dims to try (wrapped; a 0-dim input
 * takes dim 0 or -1): one int, or a list (PyTorch 2) without repeats. */
static bool squeeze_dims(Sema *s, CallArgs *c, const SVal *dv, int rank,
                         bool *mask) {
  int64_t d[MAX_DIMS];
  int n = 0;
  const char *what = "squeeze() argument 'dim'";
  if (dv->kind == SV_LIST ? !sema_int_list(s, dv, what, d, &n, MAX_DIMS)
                          : !sema_int_arg(s, dv, what, &d[n++]))
    return false;
  GeomCtx g = sema_geom(s, c->loc);
  for (int i = 0; i < n; i++) {
    int w = 0;
    const char *err = geom_wrap_dim(&g, d[i], rank, &w);
    if (err) {
      diag_error(s->d, c->loc, "%s", err);
      return false;
    }
    if (mask[w]) {
      diag_error(s->d, c->loc,
                 "squeeze(): dim %d appears multiple times in the list of "
                 "dims; name each dim once", w);
      return false;
    }
    mask[w] = true;
  }
  return true;
}

static SVal h_squeeze(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
  const SVal *dv = sema_arg(s, c, 1, "dim");
  Geom in = sema_geom_of(s, x);
  bool mask[MAX_DIMS + 1] = {false};
  bool has_dim = dv && dv->kind != SV_NONE;
  if ((has_dim && !squeeze_dims(s, c, dv, in.rank, mask)) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  /* attrs: the removed dims, in order; only size-1 dims go.  A kept
   * symbolic dim gets geom_squeeze's entry check that it is not 1. */
  int64_t removed[MAX_DIMS];
  int nr = 0;
  GeomCtx g = sema_geom(s, c->loc);
  Geom out = in;
  for (int64_t i = 0; i < in.rank; i++) {
    if (has_dim && !mask[i]) continue;
    if (sym_is(in.shape[i], 1)) removed[nr++] = i;
    else geom_squeeze(&g, &in, &i, &out);
  }
  out = in;
  if (nr == 0) return sv_tensor(x, c->loc);
  for (int i = nr - 1; i >= 0; i--) { /* highest first: lower dims stay */
    const char *err = geom_squeeze(&g, &out, &removed[i], &out);
    if (err) return geom_fail(s, err, x, c->loc);
  }
  return sv_tensor(emit_view_ints(s, OP_SQUEEZE, x, &out, removed, nr, c->loc),
                   c->loc);
}

/* A view call x.op(dim, a, b) with a and b possibly symbolic (narrow,
 * unfold): its parsed arguments and geometries. */
typedef struct DimSymSym {
  IrRef x;
  int64_t d;
  const Sym *a, *b;
  Geom in, out;
} DimSymSym;

typedef const char *(*GeomDimSymSym)(GeomCtx *, const Geom *, int64_t, const Sym *,
                                     const Sym *, Geom *);

/* Parses x.op(dim, a, b) (the names say which) and computes its output
 * geometry with geom; false after reporting, *fail the value to return. */
static bool dim_sym_sym(Sema *s, CallArgs *c, const char *const names[3],
                        GeomDimSymSym geom, DimSymSym *v, SVal *fail) {
  *fail = sv_error();
  if (!sema_tensor_recv(s, c, &v->x) ||
      !sema_req_int(s, c, 1, names[0], &v->d) ||
      !sema_req_sym(s, c, 2, names[1], &v->a) ||
      !sema_req_sym(s, c, 3, names[2], &v->b) || !sema_args_done(s, c, 4))
    return false;
  GeomCtx g = sema_geom(s, c->loc);
  v->in = sema_geom_of(s, v->x);
  const char *err = geom(&g, &v->in, v->d, v->a, v->b, &v->out);
  if (err) *fail = geom_fail(s, err, v->x, c->loc);
  return !err;
}

static SVal h_narrow(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  static const char *const names[3] = {"dim", "start", "length"};
  DimSymSym v;
  SVal fail;
  if (!dim_sym_sym(s, c, names, geom_narrow, &v, &fail)) return fail;
  int w = wrap_ok(s, v.d, v.in.rank);
  const Sym *start = wrap_index(s, v.a, v.in.shape[w]);
  const Sym *attrs[4] = {sym_const(s->st, w), start,
                         sym_add(s->st, start, v.b), sym_const(s->st, 1)};
  return sv_tensor(
      sema_emit_view(s, OP_SLICE, v.x, &v.out, attrs, 4, 0, c->loc), c->loc);
}

static SVal h_select(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t d;
  const Sym *i;
  if (!sema_tensor_recv(s, c, &x) || !sema_req_int(s, c, 1, "dim", &d) ||
      !sema_req_sym(s, c, 2, "index", &i) || !sema_args_done(s, c, 3))
    return sv_error();
  return do_select(s, x, d, i, c->loc);
}

static SVal h_diagonal(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t o, d1, d2;
  if (!sema_tensor_recv(s, c, &x) || !sema_opt_int(s, c, 1, "offset", 0, &o) ||
      !sema_opt_int(s, c, 2, "dim1", 0, &d1) ||
      !sema_opt_int(s, c, 3, "dim2", 1, &d2) || !sema_args_done(s, c, 4))
    return sv_error();
  GeomCtx g = sema_geom(s, c->loc);
  Geom in = sema_geom_of(s, x), out;
  const char *err = geom_diagonal(&g, &in, o, d1, d2, &out);
  if (err) return geom_fail(s, err, x, c->loc);
  int64_t attrs[3] = {o, wrap_ok(s, d1, in.rank), wrap_ok(s, d2, in.rank)};
  return sv_tensor(emit_view_ints(s, OP_DIAGONAL, x, &out, attrs, 3, c->loc),
                   c->loc);
}

static SVal h_unfold(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  static const char *const names[3] = {"dimension", "size", "step"};
  DimSymSym v;
  SVal fail;
  if (!dim_sym_sym(s, c, names, geom_unfold, &v, &fail)) return fail;
  const Sym *attrs[3] = {
      sym_const(s->st, v.in.rank == 0 ? 0 : wrap_ok(s, v.d, v.in.rank)), v.a, v.b};
  return sv_tensor(
      sema_emit_view(s, OP_UNFOLD, v.x, &v.out, attrs, 3, 0, c->loc), c->loc);
}

/* A list of ints (possibly symbolic) for as_strided. */
static bool sym_list(Sema *s, const SVal *v, const char *what,
                     const Sym **out, int *n) {
  if (v->kind != SV_LIST) {
    diag_error(s->d, v->loc, "%s must be a list, got %s", what,
               sv_kind_name(v));
    return false;
  }
  if (v->nitems > MAX_DIMS) {
    diag_error(s->d, v->loc, "%s has more than %d entries", what, MAX_DIMS);
    return false;
  }
  for (int i = 0; i < v->nitems; i++)
    if (!sema_sym_arg(s, &v->items[i], what, &out[i])) return false;
  *n = v->nitems;
  return true;
}

static SVal h_as_strided(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
  const SVal *sz = sema_need_arg(s, c, 1, "size");
  const SVal *sd = sema_need_arg(s, c, 2, "stride");
  const SVal *of = sema_arg(s, c, 3, "storage_offset");
  if (!sz || !sd || !sema_args_done(s, c, 4)) return sv_error();
  const Sym *size[MAX_DIMS], *stride[MAX_DIMS], *off = NULL;
  int n, ns;
  if (!sym_list(s, sz, "as_strided() size", size, &n) ||
      !sym_list(s, sd, "as_strided() stride", stride, &ns))
    return sv_error();
  if (n != ns) {
    diag_error(s->d, c->loc,
               "as_strided() got %d sizes but %d strides; they must match", n,
               ns);
    return sv_error();
  }
  if (of && of->kind != SV_NONE &&
      !sema_sym_arg(s, of, "as_strided() storage_offset", &off))
    return sv_error();
  GeomCtx g = sema_geom(s, c->loc);
  /* The bound is against the whole storage x views (PyTorch's
   * setStorage), not x's own extent. */
  Geom in = sema_geom_of(s, x), out;
  Geom root = sema_geom_of(s, ir_storage_root(s->k, x));
  const char *err =
      geom_as_strided(&g, &in, &root, size, stride, n, off, &out);
  if (err) return geom_fail(s, err, x, c->loc);
  return sv_tensor(
      sema_emit_view(s, OP_AS_STRIDED, x, &out, NULL, 0, 0, c->loc), c->loc);
}

/* ---- Copies ---- */

static SVal to_format(Sema *s, IrRef x, Layout fmt, Loc loc) {
  GeomCtx g = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  memset(&out, 0, sizeof out);
  DType dt = sema_val(s, x)->dtype;
  if (fmt == LAYOUT_CHANNELS_LAST) {
    if (in.rank != 4) {
      diag_error(s->d, loc,
                 "channels_last needs a rank-4 tensor, but this one has "
                 "shape %s",
                 sema_shape_str(s, x));
      sema_note_origin(s, x);
      return sv_error();
    }
    if (geom_is_channels_last(&in)) return sv_tensor(x, loc);
    geom_channels_last(&g, in.shape, &out);
  } else {
    if (geom_is_contiguous(&in)) return sv_tensor(x, loc);
    geom_contiguous(&g, in.rank, in.shape, &out);
  }
  out.rank = in.rank;
  out.shape = in.shape;
  int flags = fmt == LAYOUT_CHANNELS_LAST ? IRF_CL : 0;
  return sv_tensor(sema_emit_copy(s, OP_COPY, x, dt, &out, flags, loc), loc);
}

static bool layout_arg(Sema *s, const SVal *v, const char *what, Layout *out) {
  if (v->kind == SV_ERROR) return false;
  if (v->kind == SV_LAYOUT) {
    *out = v->layout;
    return true;
  }
  diag_error(s->d, v->loc,
             "%s must be contiguous or channels_last, got %s", what,
             sv_kind_name(v));
  return false;
}

static SVal h_contiguous(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
  const SVal *f = sema_arg(s, c, 1, "memory_format");
  Layout fmt = LAYOUT_CONTIGUOUS;
  if ((f && !layout_arg(s, f, "contiguous() memory_format", &fmt)) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  return to_format(s, x, fmt, c->loc);
}

static SVal h_clone(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (!sema_tensor_recv(s, c, &x) || !sema_args_done(s, c, 1))
    return sv_error();
  GeomCtx g = sema_geom(s, c->loc);
  Geom in = sema_geom_of(s, x), out;
  memset(&out, 0, sizeof out);
  geom_preserve(&g, &in, &out);
  out.rank = in.rank;
  out.shape = in.shape;
  DType dt = sema_val(s, x)->dtype;
  return sv_tensor(sema_emit_copy(s, OP_COPY, x, dt, &out, IRF_CLONE, c->loc),
                   c->loc);
}

/* x.to(DTYPE), x.to(FORMAT), x.to(DTYPE, FORMAT), dtype=/memory_format=. */
static SVal h_to(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
  const SVal *a1 = sema_arg(s, c, 1, NULL), *a2 = sema_arg(s, c, 2, NULL);
  const SVal *kd = sema_arg(s, c, -1, "dtype");
  const SVal *kf = sema_arg(s, c, -1, "memory_format");
  if (!sema_args_done(s, c, 3)) return sv_error();
  DType dt = DT_NONE;
  bool has_fmt = false;
  Layout fmt = LAYOUT_CONTIGUOUS;
  const SVal *all[4] = {a1, a2, kd, kf};
  for (int i = 0; i < 4; i++) {
    const SVal *v = all[i];
    if (!v) continue;
    if (v->kind == SV_ERROR) return sv_error();
    if (v->kind == SV_DTYPE && dt == DT_NONE && i != 3) {
      dt = v->dt;
    } else if (v->kind == SV_LAYOUT && !has_fmt && i != 2) {
      has_fmt = true;
      fmt = v->layout;
    } else {
      diag_error(s->d, v->loc,
                 "to() takes a dtype and/or a memory format, got %s",
                 sv_kind_name(v));
      return sv_error();
    }
  }
  if (dt == DT_NONE && !has_fmt) {
    diag_error(s->d, c->loc, "to() needs a dtype or a memory format");
    return sv_error();
  }
  if (has_fmt) {
    SVal r = to_format(s, x, fmt, c->loc);
    if (r.kind == SV_ERROR) return r;
    x = r.ref;
  }
  if (dt != DT_NONE && sema_val(s, x)->dtype != dt)
    x = sema_emit_cast(s, x, dt, 0, c->loc);
  return sv_tensor(x, c->loc);
}

/* ---- Indexing ---- */

static bool slice_part(Sema *s, const SVal *v, const char *what,
                       const Sym **out) {
  if (v->kind == SV_NONE) {
    *out = NULL;
    return true;
  }
  return sema_sym_arg(s, v, what, out);
}

/* Applies one index item at dim *d of cur. */
SVal sema_index_item(Sema *s, IrRef cur, const SVal *it, int *d) {
  switch (it->kind) {
  case SV_INT: return do_select(s, cur, *d, it->sym, it->loc);
  case SV_NONE: {
    SVal r = do_unsqueeze(s, cur, *d, it->loc);
    (*d)++;
    return r;
  }
  case SV_SLICE: {
    const Sym *st, *en, *sp;
    if (!slice_part(s, &it->items[0], "a slice start", &st) ||
        !slice_part(s, &it->items[1], "a slice stop", &en) ||
        !slice_part(s, &it->items[2], "a slice step", &sp))
      return sv_error();
    int64_t stepv;
    if (sp && sym_is_const(sp, &stepv) && stepv <= 0) {
      diag_error(s->d, it->items[2].loc,
                 "slice step must be positive, got %lld",
                 (long long)stepv);
      return sv_error();
    }
    int dim = (*d)++;
    if (!st && !en && !sp) return sv_tensor(cur, it->loc);
    return do_slice(s, cur, dim, st, en, sp, it->loc);
  }
  default: ICE("bad index item kind %d", (int)it->kind);
  }
}

/* Checks the items' kinds and counts; returns the number of dims they
 * consume, or -1 after reporting. */
int sema_index_check(Sema *s, IrRef x, const SVal *it, int n, Loc loc,
                     int *ellipsis) {
  int consumed = 0, ntensors = 0;
  *ellipsis = -1;
  for (int i = 0; i < n; i++) {
    switch (it[i].kind) {
    case SV_INT: case SV_SLICE: consumed++; break;
    case SV_NONE: break;
    case SV_ELLIPSIS:
      if (*ellipsis >= 0) {
        diag_error(s->d, it[i].loc, "an index can only have a single "
                                    "ellipsis ('...')");
        return -1;
      }
      *ellipsis = i;
      break;
    case SV_TENSOR: /* one integer tensor (sema_index.c) */
      if (ntensors++) {
        diag_error(s->d, it[i].loc,
                   "indexing with more than one tensor is not supported; "
                   "index with one tensor (and ints, slices, None, ...)");
        return -1;
      }
      if (!sema_index_tensor_ok(s, &it[i])) return -1;
      consumed++;
      break;
    default:
      diag_error(s->d, it[i].loc,
                 "an index must be an int, a slice, None, ... or a tensor, got %s",
                 sv_kind_name(&it[i]));
      return -1;
    }
  }
  int rank = sema_val(s, x)->rank;
  if (consumed > rank) {
    diag_error(s->d, loc,
               "too many indices for a tensor of shape %s: %d given, it has "
               "%d dim%s",
               sema_shape_str(s, x), consumed, rank, rank == 1 ? "" : "s");
    sema_note_origin(s, x);
    return -1;
  }
  return consumed;
}

/* ---- Builders for the other families (sema_join.c) ---- */

SVal sema_view_slice(Sema *s, IrRef x, int dim, const Sym *start,
                     const Sym *stop, const Sym *step, Loc loc) {
  return do_slice(s, x, dim, start, stop, step, loc);
}

SVal sema_view_select(Sema *s, IrRef x, int64_t dim, const Sym *i, Loc loc) {
  return do_select(s, x, dim, i, loc);
}

SVal sema_view_unsqueeze(Sema *s, IrRef x, int64_t dim, Loc loc) {
  return do_unsqueeze(s, x, dim, loc);
}

SVal sema_view_expand(Sema *s, IrRef x, const Sym *const *sizes, int n,
                      Loc loc) {
  return do_expand(s, x, sizes, n, 0, loc);
}

SVal sema_view_reshape(Sema *s, IrRef x, const Sym *const *sizes, int n,
                       Loc loc) {
  return do_reshape(s, x, sizes, n, loc);
}

const Builtin sema_view_builtins[] = {
    {"view", h_view, OP_VIEW, BF_METHOD},
    {"reshape", h_view, OP_RESHAPE, BF_BOTH},
    {"flatten", h_flatten, OP_VIEW, BF_BOTH},
    {"unflatten", h_unflatten, OP_VIEW, BF_BOTH},
    {"transpose", h_transpose, OP_PERMUTE, BF_BOTH},
    {"t", h_t, OP_PERMUTE, BF_BOTH},
    {"permute", h_permute, OP_PERMUTE, BF_BOTH},
    {"expand", h_expand, OP_EXPAND, BF_METHOD},
    {"expand_as", h_expand_as, OP_EXPAND, BF_METHOD},
    {"unsqueeze", h_unsqueeze, OP_UNSQUEEZE, BF_BOTH},
    {"squeeze", h_squeeze, OP_SQUEEZE, BF_BOTH},
    {"narrow", h_narrow, OP_SLICE, BF_BOTH},
    {"select", h_select, OP_SELECT, BF_BOTH},
    {"diagonal", h_diagonal, OP_DIAGONAL, BF_BOTH},
    {"unfold", h_unfold, OP_UNFOLD, BF_METHOD},
    {"as_strided", h_as_strided, OP_AS_STRIDED, BF_BOTH},
    {"contiguous", h_contiguous, OP_COPY, BF_METHOD},
    {"clone", h_clone, OP_COPY, BF_BOTH},
    {"to", h_to, OP_CAST, BF_METHOD},
    {NULL, NULL, OP_COUNT, 0},
};
