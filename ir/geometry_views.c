/* geometry_views.c — PyTorch's rules for views over symbolic sizes
 * (spec/pytorch-semantics.md §1, §2, §4), as declared in geometry.h:
 * view and reshape (computeStride, -1 inference, numel-0 views),
 * permute/transpose, expand (inferExpandGeometry), unsqueeze/squeeze,
 * slice/narrow/select with PyTorch's clamping, diagonal, unfold and
 * as_strided (checkInBoundsForStorage).
 *
 * Each rule computes the view's absolute geometry in its storage, or
 * returns PyTorch's error as a message; conditions on symbols that
 * PyTorch checks at run time become IrChecks (geom_need).
 *
 * Needs: geometry_internal.h (helpers, exact reasoning and the generic
 * comparison of geometry.c), sym.h, ir.h (run-time checks).
 * Used by: the front end (sema_views.c; sema_values.c and sema_conv.c
 * for the views their ops need). */
#include <string.h>

#include "geometry_internal.h"

/* ---- view / reshape (§1, §2) ------------------------------------------- */

/* Replaces one -1 in sizes by numel / (product of the others). */
static const char *infer_size(GeomCtx *c, const Geom *in,
                              const Sym *const *sizes, int n,
                              const Sym **res) {
  const Sym *numel = sym_prod(c->st, in->shape, in->rank);
  const Sym *p = K(c, 1);
  int infer = -1;
  for (int i = 0; i < n; i++) {
    int64_t v;
    res[i] = sizes[i];
    if (sym_is(sizes[i], -1)) {
      if (infer >= 0) return "only one dimension can be inferred (-1)";
      infer = i;
    } else if (sym_is_const(sizes[i], &v) && v < 0) {
      return arena_printf(c->arena, "invalid size %lld in shape %s",
                          (long long)v, geom_shape_str(c->arena, sizes, n));
    } else {
      p = mul(c, p, sizes[i]);
    }
  }
  const char *want = geom_shape_str(c->arena, sizes, n);
  int64_t pv, nv;
  if (infer < 0) {
    if (p == numel) return NULL;
    return arena_printf(c->arena,
                        "shape %s is invalid for a tensor of %s elements "
                        "(shape %s); the sizes must multiply to %s",
                        want, S(c, numel), shp(c, in), S(c, numel));
  }
  if (sym_is(p, 0))
    return arena_printf(c->arena,
                        "cannot infer -1 in shape %s: the other sizes "
                        "multiply to 0, so any size would fit; give it "
                        "explicitly",
                        want);
  const Sym *q;
  if (sym_div_exact(c->st, numel, p, &q)) {
    res[infer] = q;
    return NULL;
  }
  if (sym_is_const(numel, &nv) && sym_is_const(p, &pv))
    return arena_printf(c->arena,
                        "shape %s is invalid for a tensor of %lld elements "
                        "(shape %s): %lld is not a multiple of %lld",
                        want, (long long)nv, shp(c, in), (long long)nv,
                        (long long)pv);
  return arena_printf(c->arena,
                      "cannot infer -1 in shape %s for a tensor of %s "
                      "elements (shape %s) symbolically; give the size "
                      "explicitly",
                      want, S(c, numel), shp(c, in));
}

/* computeStride's "consume while view_numel < chunk_numel": exact for
 * constants; for symbols, "not equal" (the generic case). */
static bool chunk_short(const Sym *view_numel, const Sym *chunk_numel) {
  int64_t a, b;
  if (sym_is_const(view_numel, &a) && sym_is_const(chunk_numel, &b))
    return a < b;
  return view_numel != chunk_numel;
}

/* Strides for a numel == 0 view: contiguous with max(size, 1). */
static void zero_numel_strides(GeomCtx *c, const Sym *const *shape, int n,
                               const Sym **st) {
  Geom g;
  geom_contiguous(c, n, shape, &g);
  for (int d = 0; d < n; d++) st[d] = g.stride[d];
}

/* PyTorch's computeStride: false when the view is impossible. */
static bool compute_stride(GeomCtx *c, const Geom *in, const Sym *const *ns,
                           int n, const Sym **st) {
  if (in->rank == 0) {
    for (int d = 0; d < n; d++) st[d] = K(c, 1);
    return true;
  }
  if (has_zero(in->shape, in->rank)) {
    if (sym_list_equal(in->shape, in->rank, ns, n))
      for (int d = 0; d < n; d++) st[d] = in->stride[d];
    else
      zero_numel_strides(c, ns, n, st);
    return true;
  }
  int view_d = n - 1;
  const Sym *base = in->stride[in->rank - 1];
  const Sym *chunk = K(c, 1), *view = K(c, 1);
  for (int d = in->rank - 1; d >= 0; d--) {
    chunk = mul(c, chunk, in->shape[d]);
    bool end = d == 0 || (!sym_is(in->shape[d - 1], 1) &&
                          in->stride[d - 1] != mul(c, chunk, base));
    if (!end) continue;
    while (view_d >= 0 && (chunk_short(view, chunk) || sym_is(ns[view_d], 1))) {
      st[view_d] = mul(c, view, base);
      view = mul(c, view, ns[view_d]);
      view_d--;
    }
    if (view != chunk) return false;
    if (d > 0) {
      base = in->stride[d - 1];
      chunk = K(c, 1);
      view = K(c, 1);
    }
  }
  return view_d == -1;
}

const char *geom_view(GeomCtx *c, const Geom *in, const Sym *const *sizes,
                      int n, Geom *out) {
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  const char *err = infer_size(c, in, sizes, n, sh);
  if (err) return err;
  if (!compute_stride(c, in, sh, n, st))
    return arena_printf(c->arena,
                        "cannot view shape %s with strides %s as %s: its "
                        "dims are not contiguous in memory; use reshape() "
                        "to copy",
                        shp(c, in), strd(c, in),
                        geom_shape_str(c->arena, sh, n));
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

const char *geom_reshape(GeomCtx *c, const Geom *in, const Sym *const *sizes,
                         int n, Geom *out, bool *is_view) {
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  const char *err = infer_size(c, in, sizes, n, sh);
  if (err) return err;
  *is_view = compute_stride(c, in, sh, n, st);
  if (*is_view)
    geom_set(out, n, sh, st, in->offset);
  else
    geom_contiguous(c, n, sh, out);
  return NULL;
}

/* ---- permutations (§4) ----------------------------------------------- */

const char *geom_permute(GeomCtx *c, const Geom *in, const int64_t *perm,
                         int n, Geom *out) {
  const char *bad = arena_printf(
      c->arena, "permute() needs a permutation of %d dims, got %s", in->rank,
      geom_ints_str(c->arena, perm, n));
  if (n != in->rank) return bad;
  bool *seen = arena_alloc(c->arena, (size_t)(n > 0 ? n : 1));
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = 0; i < n; i++) {
    int d = 0;
    const char *err = geom_wrap_dim(c, perm[i], in->rank, &d);
    if (err) return arena_printf(c->arena, "%s; %s", bad, err);
    if (seen[d]) return bad;
    seen[d] = true;
    sh[i] = in->shape[d];
    st[i] = in->stride[d];
  }
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

const char *geom_transpose(GeomCtx *c, const Geom *in, int64_t a, int64_t b,
                           Geom *out) {
  int da = 0, db = 0;
  const char *err = geom_wrap_dim(c, a, in->rank, &da);
  if (!err) err = geom_wrap_dim(c, b, in->rank, &db);
  if (err) return err;
  geom_copy(c, in, out);
  if (in->rank == 0) return NULL;
  out->shape[da] = in->shape[db];
  out->shape[db] = in->shape[da];
  out->stride[da] = in->stride[db];
  out->stride[db] = in->stride[da];
  return NULL;
}

/* ---- expand (§4, PyTorch inferExpandGeometry) ------------------------- */

const char *geom_expand(GeomCtx *c, const Geom *in, const Sym *const *sizes,
                        int n, Geom *out) {
  const char *want = geom_shape_str(c->arena, sizes, n);
  if (n < in->rank)
    return arena_printf(c->arena,
                        "expand() needs at least %d sizes for a tensor of "
                        "shape %s, got %s",
                        in->rank, shp(c, in), want);
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = n - 1; i >= 0; i--) {
    int d = in->rank - n + i; /* the input's dim at i, or < 0 if new */
    const Sym *size = d >= 0 ? in->shape[d] : K(c, 1);
    const Sym *stride = d >= 0       ? in->stride[d]
                        : i == n - 1 ? K(c, 1)
                                     : mul(c, sh[i + 1], st[i + 1]);
    const Sym *target = sizes[i];
    int64_t v;
    if (sym_is(target, -1)) {
      if (d < 0)
        return arena_printf(c->arena,
                            "expand() to %s: -1 is not allowed for the new "
                            "leading dim %d; give its size",
                            want, i);
      target = size;
    } else if (sym_is_const(target, &v) && v < 0) {
      return arena_printf(c->arena, "expand() to %s: invalid size %lld", want,
                          (long long)v);
    }
    if (target != size && !sym_is(size, 1) &&
        geom_same_size(c, size, target,
                       arena_printf(c->arena,
                                    "the expanded size %s must match the "
                                    "existing size %s at dim %d (expanding "
                                    "shape %s to %s)",
                                    S(c, target), S(c, size), i, shp(c, in), want))) {
      size = target; /* the same size written two ways: no broadcast */
    } else if (target != size) {
      if (!sym_is(size, 1))
        return arena_printf(c->arena,
                            "the expanded size %s must match the existing "
                            "size %s at non-singleton dimension %d (expanding "
                            "shape %s to %s); only size-1 dims can expand",
                            S(c, target), S(c, size), i, shp(c, in), want);
      size = target;
      stride = K(c, 0);
    }
    sh[i] = size;
    st[i] = stride;
  }
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

/* ---- unsqueeze / squeeze --------------------------------------------- */

const char *geom_unsqueeze(GeomCtx *c, const Geom *in, int64_t dim,
                           Geom *out) {
  int d = 0;
  const char *err = geom_wrap_dim(c, dim, in->rank + 1, &d);
  if (err) return err;
  int n = in->rank + 1;
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = 0, j = 0; i < n; i++) {
    if (i == d) continue;
    sh[i] = in->shape[j];
    st[i] = in->stride[j++];
  }
  sh[d] = K(c, 1);
  st[d] = d == in->rank ? K(c, 1) : mul(c, in->shape[d], in->stride[d]);
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

/* squeeze() keeps a dim whose size is not the literal 1; PyTorch decides
 * with the actual size and would drop it where it is 1, giving another
 * rank than the program's.  A rank cannot depend on the call, so such a
 * size must not be 1: an entry check `1 <= (size - 1)**2` (0 stays, as
 * in PyTorch), unless the facts give size >= 2 or size is constant. */
static void kept_not_one(GeomCtx *c, const Geom *in, int d) {
  const Sym *size = in->shape[d];
  if (is_const(size) || !c->m || !c->k) return;
  SymFacts f = geom_facts(c);
  if (sym_decide(c->st, &f, K(c, 2), SYM_LE, size) == SYM_YES) return;
  const Sym *m1 = sub(c, size, K(c, 1));
  const Sym *sq = mul(c, m1, m1);
  if (geom_has_check(c->k, K(c, 1), CHK_LE, sq)) return;
  IrCheck chk = {
      .lhs = K(c, 1), .rhs = sq, .op = CHK_LE, .loc = c->loc,
      .msg = arena_printf(c->arena,
                          "squeeze(): dim %d of shape %s has size %s = 1 here; "
                          "PyTorch would drop it, so the result would not "
                          "have the rank this program was compiled for "
                          "(declare a dim that may be 1 as the literal 1)",
                          d, shp(c, in), S(c, size))};
  ir_add_check(c->m, c->k, &chk);
}

const char *geom_squeeze(GeomCtx *c, const Geom *in, const int64_t *dim,
                         Geom *out) {
  int only = -1;
  if (dim) {
    const char *err = geom_wrap_dim(c, *dim, in->rank, &only);
    if (err) return err;
    if (in->rank == 0 || !sym_is(in->shape[only], 1)) {
      if (in->rank > 0) kept_not_one(c, in, only);
      geom_copy(c, in, out);
      return NULL;
    }
  }
  for (int d = 0; !dim && d < in->rank; d++) kept_not_one(c, in, d);
  const Sym **sh = syms_new(c, in->rank), **st = syms_new(c, in->rank);
  int n = 0;
  for (int d = 0; d < in->rank; d++) {
    bool drop = dim ? d == only : sym_is(in->shape[d], 1);
    if (drop) continue;
    sh[n] = in->shape[d];
    st[n++] = in->stride[d];
  }
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

/* ---- slicing, narrow, select (§4) ------------------------------------ */

/* A bound is negative when constant and < 0, or generically negative
 * (like -N); negative bounds count from the end. */
static bool bound_negative(const Sym *b) {
  int64_t v;
  if (sym_is_const(b, &v)) return v < 0;
  return geom_num_cmp(geom_num_of(b), geom_num_const(0)) == C_LT;
}

/* x clamped into [lo, hi] where lo <= hi is known; the upper bound is
 * tried first, so x >= hi gives hi even when x vs lo is unknown. */
static const Sym *clamp(GeomCtx *c, const Sym *x, const Sym *lo,
                        const Sym *hi) {
  if (geom_prove_le(c, hi, x) == T_YES) return hi;
  if (geom_prove_le(c, x, lo) == T_YES) return lo;
  return geom_min(c, geom_max(c, x, lo), hi);
}

/* PyTorch's slice clamping: start into [0, size], end into [start, size]. */
static void slice_bounds(GeomCtx *c, const Sym *size, const Sym *start,
                         const Sym *stop, const Sym **s0, const Sym **s1) {
  start = start ? start : K(c, 0);
  stop = stop ? stop : size;
  if (bound_negative(start)) start = add(c, start, size);
  if (bound_negative(stop)) stop = add(c, stop, size);
  *s0 = clamp(c, start, K(c, 0), size);
  *s1 = clamp(c, stop, *s0, size);
}

const char *geom_slice(GeomCtx *c, const Geom *in, int dim, const Sym *start,
                       const Sym *stop, const Sym *step, Geom *out) {
  if (in->rank == 0)
    return "cannot slice a 0-dim tensor; only [...] and [None] apply to it";
  int d = 0;
  const char *err = geom_wrap_dim(c, dim, in->rank, &d);
  if (err) return err;
  step = step ? step : K(c, 1);
  int64_t sv;
  if (sym_is_const(step, &sv) && sv <= 0)
    return arena_printf(c->arena,
                        "slice step must be positive, got %lld (dim %d of "
                        "shape %s)",
                        (long long)sv, d, shp(c, in));
  geom_need(c, K(c, 1), CHK_LE, step,
            arena_printf(c->arena, "slice step %s must be positive",
                         S(c, step)));
  const Sym *s0, *s1;
  slice_bounds(c, in->shape[d], start, stop, &s0, &s1);
  geom_copy(c, in, out);
  const Sym *span = sub(c, s1, s0);
  out->shape[d] = sym_is(step, 1) ? span
                          : sym_floordiv(c->st, sub(c, add(c, span, step),
                                                    K(c, 1)),
                                         step);
  out->stride[d] = mul(c, in->stride[d], step);
  out->offset = add(c, in->offset, mul(c, s0, in->stride[d]));
  return NULL;
}

/* narrow()'s start range check and wrap; NULL or an error. */
static const char *narrow_start(GeomCtx *c, const Sym *size, int d,
                                const Sym **start) {
  const Sym *s = *start;
  const char *range = arena_printf(
      c->arena,
      "narrow(): start %s is out of range for dim %d of size %s (expected a "
      "start in [-%s, %s])",
      S(c, s), d, S(c, size), S(c, size), S(c, size));
  if (bound_negative(s)) {
    if (!geom_need(c, sym_neg(c->st, s), CHK_LE, size, range)) return range;
    *start = add(c, s, size);
  } else if (!geom_need(c, K(c, 0), CHK_LE, s, range) ||
             geom_prove_le(c, s, size) == T_NO) {
    return range; /* start <= size at run time follows from the end check */
  }
  return NULL;
}

const char *geom_narrow(GeomCtx *c, const Geom *in, int64_t dim,
                        const Sym *start, const Sym *length, Geom *out) {
  if (in->rank == 0) return "narrow() cannot be applied to a 0-dim tensor";
  int d = 0;
  const char *err = geom_wrap_dim(c, dim, in->rank, &d);
  if (err) return err;
  const Sym *size = in->shape[d];
  const char *lenmsg = arena_printf(
      c->arena, "narrow(): length %s must be non-negative", S(c, length));
  if (!geom_need(c, K(c, 0), CHK_LE, length, lenmsg)) return lenmsg;
  err = narrow_start(c, size, d, &start);
  if (err) return err;
  const char *over = arena_printf(
      c->arena,
      "narrow(): start %s + length %s exceeds the size %s of dim %d (shape "
      "%s)",
      S(c, start), S(c, length), S(c, size), d, shp(c, in));
  if (!geom_need(c, add(c, start, length), CHK_LE, size, over)) return over;
  geom_copy(c, in, out);
  out->shape[d] = length;
  out->offset = add(c, in->offset, mul(c, start, in->stride[d]));
  return NULL;
}

const char *geom_select(GeomCtx *c, const Geom *in, int64_t dim,
                        const Sym *index, Geom *out) {
  if (in->rank == 0) return "select() cannot be applied to a 0-dim tensor";
  int d = 0;
  const char *err = geom_wrap_dim(c, dim, in->rank, &d);
  if (err) return err;
  const Sym *size = in->shape[d];
  const char *range = arena_printf(
      c->arena,
      "index %s is out of range for dim %d of size %s (shape %s); valid "
      "indices are -%s to %s - 1",
      S(c, index), d, S(c, size), shp(c, in), S(c, size), S(c, size));
  if (bound_negative(index)) {
    if (!geom_need(c, sym_neg(c->st, index), CHK_LE, size, range)) return range;
    index = add(c, index, size);
  } else {
    if (!geom_need(c, K(c, 0), CHK_LE, index, range)) return range;
    if (!geom_need(c, index, CHK_LT, size, range)) return range;
  }
  const Sym *off = add(c, in->offset, mul(c, index, in->stride[d]));
  const Sym **sh = syms_new(c, in->rank - 1), **st = syms_new(c, in->rank - 1);
  for (int i = 0, j = 0; i < in->rank; i++) {
    if (i == d) continue;
    sh[j] = in->shape[i];
    st[j++] = in->stride[i];
  }
  geom_set(out, in->rank - 1, sh, st, off);
  return NULL;
}

/* ---- diagonal, unfold, as_strided ------------------------------------- */

const char *geom_diagonal(GeomCtx *c, const Geom *in, int64_t offset,
                          int64_t dim1, int64_t dim2, Geom *out) {
  int d1 = 0, d2 = 0;
  const char *err = geom_wrap_dim(c, dim1, in->rank, &d1);
  if (!err) err = geom_wrap_dim(c, dim2, in->rank, &d2);
  if (err) return err;
  if (in->rank < 2) return "diagonal() needs a tensor of at least 2 dims";
  if (d1 == d2)
    return arena_printf(c->arena,
                        "diagonal() needs two different dims, got %d and %d",
                        d1, d2);
  const Sym *s1 = in->shape[d1], *s2 = in->shape[d2], *o = K(c, offset);
  const Sym *len = offset >= 0 ? geom_min(c, s1, sub(c, s2, o))
                               : geom_min(c, add(c, s1, o), s2);
  if (offset != 0) len = geom_max(c, len, K(c, 0)); /* sizes are never < 0 */
  const Sym *off = in->offset;
  if (!sym_is(len, 0)) /* PyTorch leaves the offset alone when empty */
    off = offset >= 0 ? add(c, off, mul(c, o, in->stride[d2]))
                      : sub(c, off, mul(c, o, in->stride[d1]));
  int n = in->rank - 1;
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = 0, j = 0; i < in->rank; i++) {
    if (i == d1 || i == d2) continue;
    sh[j] = in->shape[i];
    st[j++] = in->stride[i];
  }
  sh[n - 1] = len;
  st[n - 1] = add(c, in->stride[d1], in->stride[d2]);
  geom_set(out, n, sh, st, off);
  return NULL;
}

const char *geom_unfold(GeomCtx *c, const Geom *in, int64_t dim,
                        const Sym *size, const Sym *step, Geom *out) {
  int d = 0;
  const char *err = geom_wrap_dim(c, dim, in->rank, &d);
  if (err) return err;
  const Sym *max = in->rank == 0 ? K(c, 1) : in->shape[d];
  const char *big = arena_printf(
      c->arena,
      "unfold(): size %s must be between 0 and the size %s of dim %d (shape "
      "%s)",
      S(c, size), S(c, max), d, shp(c, in));
  if (!geom_need(c, K(c, 0), CHK_LE, size, big)) return big;
  if (!geom_need(c, size, CHK_LE, max, big)) return big;
  const char *neg = arena_printf(
      c->arena, "unfold(): step %s must be positive", S(c, step));
  if (!geom_need(c, K(c, 1), CHK_LE, step, neg)) return neg;
  int n = in->rank + 1;
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = 0; i < in->rank; i++) {
    sh[i] = in->shape[i];
    st[i] = in->stride[i];
  }
  if (in->rank > 0) {
    sh[d] = add(c, sym_floordiv(c->st, sub(c, in->shape[d], size), step),
                K(c, 1));
    st[d] = mul(c, step, in->stride[d]);
  }
  sh[n - 1] = size;
  st[n - 1] = in->rank > 0 ? in->stride[d] : K(c, 1);
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

/* Elements a geometry's addresses need from offset 0: offset + 1 +
 * sum((size-1)*stride), or 0 when some size is the literal 0 (PyTorch's
 * computeStorageNbytes).  A symbolic size may be 0 at run time, where
 * nothing is needed: guarded scales the sum by min(numel, 1) then. */
static const Sym *storage_need(GeomCtx *c, const Geom *g, bool guarded) {
  const Sym *end = add(c, g->offset, K(c, 1)), *numel = K(c, 1);
  for (int d = 0; d < g->rank; d++) {
    if (sym_is(g->shape[d], 0)) return K(c, 0);
    end = add(c, end, mul(c, sub(c, g->shape[d], K(c, 1)), g->stride[d]));
    numel = mul(c, numel, g->shape[d]);
  }
  return guarded && !is_const(numel) ? mul(c, sym_min(c->st, numel, K(c, 1)), end) : end;
}

/* PyTorch's checkInBoundsForStorage: a non-empty as_strided view must
 * stay inside its input's storage, here the extent of the storage root's
 * own geometry (a parameter's descriptor, or an op's fresh result). */
static const char *as_strided_bound(GeomCtx *c, const Geom *out,
                                    const Geom *storage) {
  for (int d = 0; d < out->rank; d++)
    if (sym_is(out->shape[d], 0)) return NULL;
  const Sym *needed = storage_need(c, out, false), *have = storage_need(c, storage, false);
  const char *msg = arena_printf(
      c->arena,
      "as_strided(): sizes %s, strides %s and storage offset %s require a "
      "storage of %s elements, out of bounds for the input's storage of %s "
      "elements; offset + sum((size - 1) * stride) must stay below %s",
      shp(c, out), strd(c, out), S(c, out->offset), S(c, needed),
      S(c, have), S(c, have));
  return geom_need(c, storage_need(c, out, true), CHK_LE, storage_need(c, storage, true), msg)
             ? NULL : msg;
}

const char *geom_as_strided(GeomCtx *c, const Geom *in, const Geom *storage,
                            const Sym *const *size, const Sym *const *stride,
                            int n, const Sym *offset, Geom *out) {
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = 0; i < n; i++) {
    int64_t v;
    if (sym_is_const(size[i], &v) && v < 0)
      return arena_printf(c->arena,
                          "as_strided(): size %lld at dim %d of %s is "
                          "negative",
                          (long long)v, i, geom_shape_str(c->arena, size, n));
    if (sym_is_const(stride[i], &v) && v < 0)
      return arena_printf(c->arena,
                          "as_strided(): stride %lld at dim %d of %s is "
                          "negative; strides must be >= 0",
                          (long long)v, i,
                          geom_stride_str(c->arena, stride, n));
    sh[i] = size[i];
    st[i] = stride[i];
  }
  int64_t ov;
  if (offset && sym_is_const(offset, &ov) && ov < 0)
    return arena_printf(c->arena,
                        "as_strided(): storage offset %lld is negative",
                        (long long)ov);
  geom_set(out, n, sh, st, offset ? offset : in->offset);
  return storage ? as_strided_bound(c, out, storage) : NULL;
}
