/* sema_join.c — joining and splitting tensors (spec §4.5a): split, chunk
 * and unbind (tuples of views), cat/concat/concatenate and stack (the
 * CAT op), and the decompositions over existing ops: roll (slices and
 * cat), repeat and tile (unsqueeze, expand, reshape), tril and triu (an
 * arange comparison and where), masked_fill (where).
 *
 * Tuples are SV_LISTs of tensors: `a, b = x.chunk(2)` binds them one by
 * one (sema.c), `x.chunk(2)[0]` indexes them (sema_expr.c).  The number
 * of pieces must be known at compile time; their sizes may be symbolic.
 *
 * Needs: sema_internal.h, sema_args.c, sema_values.c, the view builders
 * of sema_views.c, sema_ew_binary (sema_elementwise.c).
 * Used by: sema_expr.c (the call dispatch through sema_join_builtins),
 * sema.c (sema_unbind for `a, b = tensor`). */
#include <math.h>
#include <string.h>

#include "sema_internal.h"

/* ---- Tuples ---- */

static SVal tuple(Sema *s, int n, Loc loc) {
  SVal v = sv_make(SV_LIST, loc);
  v.nitems = n;
  v.items = arena_alloc(s->a, sizeof *v.items * (size_t)(n + 1));
  return v;
}

/* "[2, 3]" for messages. */
static const char *ints_str(Sema *s, const Sym *const *v, int n) {
  return shape_str(s, v, n);
}

/* The pieces of x along dim (wrapped), sizes[i] each, as narrow views. */
static SVal pieces(Sema *s, IrRef x, int dim, const Sym *const *sizes, int n,
                   Loc loc) {
  SVal t = tuple(s, n, loc);
  const Sym *at = sema_sym0(s);
  for (int i = 0; i < n; i++) {
    const Sym *end = sym_add(s->st, at, sizes[i]);
    t.items[i] = sema_view_slice(s, x, dim, at, end, NULL, loc);
    if (t.items[i].kind == SV_ERROR) return sv_error();
    at = end;
  }
  return t;
}

SVal sema_unbind(Sema *s, IrRef x, int dim, Loc loc) {
  const IrValue *v = sema_val(s, x);
  int64_t n;
  if (!sym_is_const(v->shape[dim], &n)) {
    diag_error(s->d, loc,
               "the number of tensors would be dim %d's size %s, which is only "
               "known at run time; it must be a constant",
               dim, sym_text(s, v->shape[dim]));
    sema_note_origin(s, x);
    return sv_error();
  }
  if (n > 4096) {
    diag_error(s->d, loc, "unbinding dim %d of size %lld would make too many "
               "tensors; at most 4096 are supported", dim, (long long)n);
    return sv_error();
  }
  SVal t = tuple(s, (int)n, loc);
  for (int i = 0; i < n; i++) {
    t.items[i] = sema_view_select(s, x, dim, sym_const(s->st, i), loc);
    if (t.items[i].kind == SV_ERROR) return sv_error();
  }
  return t;
}

/* The tensor argument of split/chunk/unbind: self, or `kw` positional 0. */
static bool subject(Sema *s, CallArgs *c, const char *kw, IrRef *x) {
  return sema_req_tensor(s, c, 0, c->method ? "self" : kw, x);
}

static SVal h_unbind(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t d;
  int w;
  if (!subject(s, c, "input", &x) || !sema_opt_int(s, c, 1, "dim", 0, &d) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  if (sema_val(s, x)->rank == 0) {
    diag_error(s->d, c->loc, "Dimension specified as %lld but tensor has no "
               "dimensions", (long long)d);
    sema_note_origin(s, x);
    return sv_error();
  }
  if (!sema_wrap_dim(s, c, d, sema_val(s, x)->rank, &w)) return sv_error();
  return sema_unbind(s, x, w, c->loc);
}

/* split(int): PyTorch's pieces of split_size, the last one shorter. */
static SVal split_even(Sema *s, CallArgs *c, IrRef x, int w, const SVal *sv) {
  const Sym *size = sema_val(s, x)->shape[w];
  int64_t ss, n;
  if (!sema_int_arg(s, sv, "split() argument 'split_size'", &ss))
    return sv_error();
  if (ss < 0) {
    diag_error(s->d, sv->loc, "split expects split_size be non-negative, but "
               "got split_size=%lld", (long long)ss);
    return sv_error();
  }
  if (!sym_is_const(size, &n)) {
    diag_error(s->d, c->loc,
               "%s(): the number of pieces depends on dim %d's size %s, which "
               "is only known at run time; give the sizes as a list",
               c->name, w, sym_text(s, size));
    sema_note_origin(s, x);
    return sv_error();
  }
  if (ss == 0 && n != 0) {
    diag_error(s->d, sv->loc, "split_size can only be 0 if dimension size is "
               "0, but got dimension size of %lld", (long long)n);
    sema_note_origin(s, x);
    return sv_error();
  }
  int64_t np = ss == 0 ? 1 : (n + ss - 1) / ss;
  if (np < 1) np = 1;
  if (np > 4096) {
    diag_error(s->d, c->loc, "%s() would make %lld tensors; at most 4096 are "
               "supported", c->name, (long long)np);
    return sv_error();
  }
  const Sym **sizes = sym_array(s, (int)np);
  for (int64_t i = 0; i < np; i++)
    sizes[i] = sym_const(s->st, i == np - 1 ? n - ss * (np - 1) : ss);
  return pieces(s, x, w, sizes, (int)np, c->loc);
}

/* split([sizes]): they must add up to the dim's size (checked at entry
 * when symbolic). */
static SVal split_sizes(Sema *s, CallArgs *c, IrRef x, int w, const SVal *sv) {
  const Sym *size = sema_val(s, x)->shape[w];
  int n = sv->nitems;
  const Sym **sizes = sym_array(s, n);
  const Sym *sum = sema_sym0(s);
  bool neg = false;
  for (int i = 0; i < n; i++) {
    if (!sema_sym_arg(s, &sv->items[i], "split() argument 'split_size'",
                      &sizes[i]))
      return sv_error();
    int64_t v;
    neg |= sym_is_const(sizes[i], &v) && v < 0;
    sum = sym_add(s->st, sum, sizes[i]);
  }
  if (neg) {
    diag_error(s->d, sv->loc, "split_with_sizes expects split_sizes have only "
               "non-negative entries, but got split_sizes=%s",
               ints_str(s, sizes, n));
    return sv_error();
  }
  int64_t a, bb;
  if (sym_is_const(sum, &a) && sym_is_const(size, &bb) && a != bb) {
    diag_error(s->d, sv->loc, "split_with_sizes expects split_sizes to sum "
               "exactly to %lld (input tensor's size at dimension %d), but "
               "got split_sizes=%s", (long long)bb, w, ints_str(s, sizes, n));
    sema_note_origin(s, x);
    return sv_error();
  }
  for (int i = 0; i < n; i++)
    if (!sym_is_const(sizes[i], &a))
      sema_check_le(s, sema_sym0(s), sizes[i],
                    "split_with_sizes expects split_sizes have only "
                    "non-negative entries", sv->items[i].loc);
  if (sum != size)
    sema_check_eq(s, sum, size,
                  arena_printf(s->a, "split_with_sizes expects split_sizes to "
                               "sum exactly to the input tensor's size at "
                               "dimension %d", w),
                  sv->loc);
  return pieces(s, x, w, sizes, n, c->loc);
}

static SVal h_split(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t d;
  int w;
  const char *kw = c->method ? "split_size" : "split_size_or_sections";
  if (!subject(s, c, "tensor", &x)) return sv_error();
  const SVal *sv = sema_need_arg(s, c, 1, kw);
  if (!sv || !sema_opt_int(s, c, 2, "dim", 0, &d) || !sema_args_done(s, c, 3))
    return sv_error();
  if (sema_val(s, x)->rank == 0) {
    diag_error(s->d, c->loc, "split expects at least a 1-dimensional tensor");
    sema_note_origin(s, x);
    return sv_error();
  }
  if (!sema_wrap_dim(s, c, d, sema_val(s, x)->rank, &w)) return sv_error();
  if (sv->kind == SV_LIST) return split_sizes(s, c, x, w, sv);
  return split_even(s, c, x, w, sv);
}

static SVal h_chunk(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t d, k;
  int w;
  if (!subject(s, c, "input", &x) || !sema_req_int(s, c, 1, "chunks", &k) ||
      !sema_opt_int(s, c, 2, "dim", 0, &d) || !sema_args_done(s, c, 3))
    return sv_error();
  const IrValue *v = sema_val(s, x);
  if (v->rank == 0) {
    diag_error(s->d, c->loc, "chunk expects at least a 1-dimensional tensor");
    sema_note_origin(s, x);
    return sv_error();
  }
  if (k <= 0) {
    diag_error(s->d, sema_arg(s, c, 1, "chunks")->loc,
               "chunk expects `chunks` to be greater than 0, got: %lld",
               (long long)k);
    return sv_error();
  }
  if (!sema_wrap_dim(s, c, d, v->rank, &w)) return sv_error();
  const Sym *size = v->shape[w];
  int64_t n;
  if (k > 4096) {
    diag_error(s->d, c->loc, "chunk() would make up to %lld tensors; at most "
               "4096 are supported", (long long)k);
    return sv_error();
  }
  if (!sym_is_const(size, &n)) {
    /* A symbolic size: chunks pieces, the generic case (spec: view
     * decisions on symbols assume it).  Divisible: size / chunks each.
     * Otherwise PyTorch's ceil(size / chunks) each and the rest last,
     * which is chunks pieces unless the rest would be empty (size 1 in
     * 2 chunks gives one piece): that is checked at entry. */
    const Sym *kk = K(s, k), **sizes = sym_array(s, (int)k);
    bool even = sym_is(sym_mod(s->st, size, kk), 0);
    const Sym *ss = even ? sym_floordiv(s->st, size, kk)
                         : sym_floordiv(s->st, sym_add(s->st, size, K(s, k - 1)), kk);
    const Sym *before = sym_mul(s->st, K(s, k - 1), ss);
    for (int64_t i = 0; i < k; i++)
      sizes[i] = i < k - 1 || even ? ss : sym_sub(s->st, size, before);
    if (!even)
      sema_check_le(s, before, sym_max(s->st, sym_sub(s->st, size, K(s, 1)), K(s, 0)),
                    arena_printf(s->a, "chunk(): dim %d's size gives fewer than %lld "
                                 "chunks (as PyTorch would); tdsl needs exactly %lld", w,
                                 (long long)k, (long long)k),
                    c->loc);
    return pieces(s, x, w, sizes, (int)k, c->loc);
  }
  int64_t ss = (n + k - 1) / k;
  if (ss == 0 && n == 0) { /* k empty pieces, as PyTorch's split_with_sizes */
    const Sym **sizes = sym_array(s, (int)k);
    for (int64_t i = 0; i < k; i++) sizes[i] = sema_sym0(s);
    return pieces(s, x, w, sizes, (int)k, c->loc);
  }
  int64_t np = (n + ss - 1) / ss;
  if (np < 1) np = 1;
  const Sym **sizes = sym_array(s, (int)np);
  for (int64_t i = 0; i < np; i++)
    sizes[i] = sym_const(s->st, i == np - 1 ? n - ss * (np - 1) : ss);
  return pieces(s, x, w, sizes, (int)np, c->loc);
}

/* ---- cat, stack ---- */

/* The tensors of cat/stack's first argument (a list or tuple, not empty);
 * *items and *n. */
static bool tensor_list(Sema *s, CallArgs *c, const char *empty,
                        const SVal **items, int *n) {
  const SVal *v = sema_need_arg(s, c, 0, "tensors");
  if (!v || v->kind == SV_ERROR) return false;
  if (v->kind != SV_LIST) {
    diag_error(s->d, v->loc, "%s(): argument 'tensors' must be a list or "
               "tuple of tensors, got %s", c->name, sv_kind_name(v));
    return false;
  }
  if (v->nitems == 0) {
    diag_error(s->d, v->loc, "%s", empty);
    return false;
  }
  for (int i = 0; i < v->nitems; i++)
    if (v->items[i].kind != SV_TENSOR) {
      diag_error(s->d, v->items[i].loc, "%s(): expected a tensor at position "
                 "%d of 'tensors', got %s", c->name, i,
                 sv_kind_name(&v->items[i]));
      return false;
    }
  *items = v->items;
  *n = v->nitems;
  return true;
}

/* PyTorch's legacy rule: a 1-D tensor of size 0 takes no part in cat
 * (only when its size is the constant 0). */
static bool skipped(Sema *s, IrRef x) {
  const IrValue *v = sema_val(s, x);
  return v->rank == 1 && sym_is(v->shape[0], 0);
}

/* Input i of a cat has the first input's rank and sizes but along dim w
 * (symbolic ones checked at entry where they may differ); reports. */
static bool cat_fits(Sema *s, const SVal *item, int i, const IrValue *ref,
                     int w) {
  const IrValue *v = sema_val(s, item->ref);
  if (v->rank != ref->rank) {
    diag_error(s->d, item->loc, "Tensors must have same number of "
               "dimensions: got %d and %d", ref->rank, v->rank);
    sema_note_origin(s, item->ref);
    return false;
  }
  GeomCtx gc = sema_geom(s, item->loc);
  for (int d = 0; d < v->rank; d++) {
    if (d == w) continue;
    const char *msg = arena_printf(
        s->a, "Sizes of tensors must match except in dimension %d: "
        "tensor number %d in the list", w, i);
    if (geom_same_size(&gc, v->shape[d], ref->shape[d], msg)) continue;
    diag_error(s->d, item->loc, "Sizes of tensors must match except in "
               "dimension %d. Expected size %s but got size %s for tensor "
               "number %d in the list.", w, sym_text(s, ref->shape[d]),
               sym_text(s, v->shape[d]), i);
    sema_note_origin(s, item->ref);
    return false;
  }
  return true;
}

/* cat of the tensors items[0..n) along dim (not yet wrapped): PyTorch's
 * checks in its order, the promoted dtype, the CAT value. */
static SVal build_cat(Sema *s, CallArgs *c, const SVal *items, int n,
                      int64_t dim) {
  for (int i = 0; i < n; i++)
    if (sema_val(s, items[i].ref)->rank == 0) {
      diag_error(s->d, items[i].loc, "zero-dimensional tensor (at position "
                 "%d) cannot be concatenated", i);
      sema_note_origin(s, items[i].ref);
      return sv_error();
    }
  DType dt = sema_result_type(s, items, n);
  int first = -1, all_skipped = 1;
  for (int i = 0; i < n && first < 0; i++)
    if (!skipped(s, items[i].ref)) first = i, all_skipped = 0;
  if (all_skipped) first = 0;
  const IrValue *ref = sema_val(s, items[first].ref);
  int rank = ref->rank, w = 0;
  /* every input skipped: PyTorch wraps no dim (any is fine), gives [0] */
  if (!all_skipped && !sema_wrap_dim(s, c, dim, rank, &w)) return sv_error();
  const Sym **shape = sema_syms_copy(s, ref->shape, rank);
  IrRef *args = arena_alloc(s->a, sizeof *args * (size_t)(n + 1));
  int nargs = 0;
  bool cl = rank == 4;
  shape[w] = sema_sym0(s);
  GeomCtx gc = sema_geom(s, c->loc);
  for (int i = 0; i < n; i++) {
    IrRef x = items[i].ref;
    if (!all_skipped && skipped(s, x)) continue;
    const IrValue *v = sema_val(s, x);
    if (!cat_fits(s, &items[i], i, ref, w)) return sv_error();
    Geom g = sema_geom_of(s, x);
    cl = cl && geom_suggests_channels_last(&g);
    shape[w] = sym_add(s->st, shape[w], v->shape[w]);
    args[nargs++] = sema_cast(s, x, dt, c->loc);
  }
  IrValue v = sema_new_dense(s, OP_CAT, dt, rank, shape, c->loc);
  if (cl) { /* every input channels-last: so is the result (PyTorch) */
    Geom g;
    geom_channels_last(&gc, shape, &g);
    v.stride = g.stride;
  }
  int64_t a = w;
  sema_set_int_attrs(s, &v, &a, 1);
  return sv_tensor(sema_emit_op(s, &v, args, nargs), c->loc);
}

static SVal h_cat(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  const SVal *items;
  int n;
  int64_t d;
  if (!tensor_list(s, c, "torch.cat(): expected a non-empty list of Tensors",
                   &items, &n) ||
      !sema_opt_int(s, c, 1, "dim", 0, &d) || !sema_args_done(s, c, 2))
    return sv_error();
  return build_cat(s, c, items, n, d);
}

static SVal h_stack(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  const SVal *items;
  int n;
  int64_t d;
  int w;
  if (!tensor_list(s, c, "stack expects a non-empty TensorList", &items,
                   &n) ||
      !sema_opt_int(s, c, 1, "dim", 0, &d) || !sema_args_done(s, c, 2))
    return sv_error();
  const IrValue *ref = sema_val(s, items[0].ref);
  GeomCtx gc = sema_geom(s, c->loc);
  for (int i = 1; i < n; i++) {
    const IrValue *v = sema_val(s, items[i].ref);
    bool same = v->rank == ref->rank;
    gc.loc = items[i].loc;
    for (int j = 0; same && j < v->rank; j++)
      same = geom_same_size(&gc, v->shape[j], ref->shape[j],
                            arena_printf(s->a, "stack expects each tensor to "
                                         "be equal size: entry %d", i));
    if (!same) {
      diag_error(s->d, items[i].loc, "stack expects each tensor to be equal "
                 "size, but got %s at entry 0 and %s at entry %d",
                 sema_shape_str(s, items[0].ref),
                 sema_shape_str(s, items[i].ref), i);
      sema_note_origin(s, items[i].ref);
      return sv_error();
    }
  }
  if (!sema_rank_ok(s, ref->rank + 1, c->loc) ||
      !sema_wrap_dim(s, c, d, ref->rank + 1, &w))
    return sv_error();
  SVal *u = arena_alloc(s->a, sizeof *u * (size_t)n);
  for (int i = 0; i < n; i++) {
    u[i] = sema_view_unsqueeze(s, items[i].ref, w, items[i].loc);
    if (u[i].kind == SV_ERROR) return u[i];
  }
  return build_cat(s, c, u, n, w);
}

/* A new tensor with x's values (PyTorch's ops that return a copy even
 * where nothing moves: roll by 0, repeat by ones). */
static SVal copy_of(Sema *s, IrRef x, Loc loc) {
  const IrValue *v = sema_val(s, x);
  GeomCtx gc = sema_geom(s, loc);
  Geom g;
  geom_contiguous(&gc, v->rank, v->shape, &g);
  return sv_tensor(sema_emit_copy(s, OP_COPY, x, v->dtype, &g, IRF_CLONE, loc), loc);
}

/* ---- roll ---- */

/* x rolled by shift along dim w: cat of its last shift elements and the
 * rest (a size-0 dim, or a shift of a multiple of the size: a copy). */
static SVal roll_dim(Sema *s, CallArgs *c, IrRef x, int w, const Sym *shift) {
  const Sym *n = sema_val(s, x)->shape[w];
  /* Python's shift % n, with a 0-size dim rolling by 0 */
  const Sym *k = sym_mod(s->st, shift, sym_max(s->st, n, K(s, 1)));
  const Sym *cut = sym_sub(s->st, n, k);
  int64_t kv;
  if (sym_is_const(k, &kv) && kv == 0) return copy_of(s, x, c->loc);
  SVal parts[2];
  parts[0] = sema_view_slice(s, x, w, cut, n, NULL, c->loc);
  parts[1] = sema_view_slice(s, x, w, sema_sym0(s), cut, NULL, c->loc);
  if (parts[0].kind == SV_ERROR || parts[1].kind == SV_ERROR) return sv_error();
  return build_cat(s, c, parts, 2, w);
}

/* roll without dims: x flattened, rolled, viewed back. */
static SVal roll_flat(Sema *s, CallArgs *c, IrRef x, const Sym *shift) {
  const IrValue *v = sema_val(s, x);
  const Sym *numel = K(s, 1);
  for (int d = 0; d < v->rank; d++) numel = sym_mul(s->st, numel, v->shape[d]);
  const Sym **shape = sema_syms_copy(s, v->shape, v->rank);
  int rank = v->rank;
  SVal f = sema_view_reshape(s, x, &numel, 1, c->loc);
  if (f.kind == SV_ERROR) return f;
  SVal r = roll_dim(s, c, f.ref, 0, shift);
  if (r.kind == SV_ERROR) return r;
  return sema_view_reshape(s, r.ref, shape, rank, c->loc);
}

/* An int or a list of ints (possibly empty) as Syms. */
static bool int_or_list(Sema *s, const SVal *v, const char *what,
                        const Sym ***out, int *n) {
  const SVal *items = v;
  *n = 1;
  if (v->kind == SV_LIST) items = v->items, *n = v->nitems;
  *out = sym_array(s, *n);
  for (int i = 0; i < *n; i++)
    if (!sema_sym_arg(s, &items[i], what, &(*out)[i])) return false;
  return true;
}

static SVal h_roll(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  const Sym **shifts, **dims = NULL;
  int ns, nd = 0;
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
  const SVal *sv = sema_need_arg(s, c, 1, "shifts");
  const SVal *dv = sema_arg(s, c, 2, "dims");
  if (!sv || !sema_args_done(s, c, 3) ||
      !int_or_list(s, sv, "roll() argument 'shifts'", &shifts, &ns) ||
      (!absent(dv) && !int_or_list(s, dv, "roll() argument 'dims'", &dims, &nd)))
    return sv_error();
  if (ns == 0) {
    diag_error(s->d, sv->loc, "`shifts` required");
    return sv_error();
  }
  if (ns != nd && (nd > 0 || ns != 1)) {
    diag_error(s->d, c->loc, "shifts and dimensions must align. shifts: %d, "
               "dims:%d", ns, nd);
    return sv_error();
  }
  const IrValue *v = sema_val(s, x);
  if (nd == 0) return roll_flat(s, c, x, shifts[0]);
  SVal cur = sv_tensor(x, c->loc);
  for (int i = 0; i < nd && cur.kind == SV_TENSOR; i++) {
    int64_t d;
    int w;
    if (!sym_is_const(dims[i], &d)) {
      diag_error(s->d, dv->loc, "roll(): dims must be constant ints");
      return sv_error();
    }
    if (!sema_wrap_dim(s, c, d, v->rank, &w)) return sv_error();
    /* a 0-dim tensor rolls as its flattened self */
    cur = v->rank == 0 ? roll_flat(s, c, cur.ref, shifts[i])
                       : roll_dim(s, c, cur.ref, w, shifts[i]);
  }
  return cur;
}

/* ---- repeat, tile ---- */

/* x repeated reps[i] times along each dim (n >= x's rank; x's dims are
 * the last ones): unsqueeze a dim before each repeated one, expand it to
 * the count, reshape the pairs into one dim. */
static SVal repeat(Sema *s, CallArgs *c, IrRef x, const Sym **reps, int n) {
  const IrValue *v = sema_val(s, x);
  if (n < v->rank) {
    diag_error(s->d, c->loc, "Number of dimensions of repeat dims can not be "
               "smaller than number of dimensions of tensor");
    sema_note_origin(s, x);
    return sv_error();
  }
  const Sym **shape = sym_array(s, n), **out = sym_array(s, n);
  int pad = n - v->rank, nrep = 0;
  bool neg = false;
  for (int i = 0; i < n; i++) {
    shape[i] = i < pad ? K(s, 1) : v->shape[i - pad];
    out[i] = sym_mul(s->st, reps[i], shape[i]);
    int64_t r;
    neg |= sym_is_const(reps[i], &r) && r < 0;
    nrep += !sym_is(reps[i], 1);
  }
  if (neg) {
    int64_t o = 0;
    for (int i = 0; i < n && !o; i++)
      if (sym_is_const(out[i], &o) && o >= 0) o = 0;
    diag_error(s->d, c->loc, "Trying to create tensor with negative dimension "
               "%lld: %s", (long long)o, shape_str(s, out, n));
    return sv_error();
  }
  if (!sema_rank_ok(s, n + nrep, c->loc)) return sv_error();
  for (int i = 0; i < n; i++) {
    int64_t r;
    if (!sym_is_const(reps[i], &r))
      sema_check_le(s, sema_sym0(s), reps[i],
                    "Trying to create tensor with negative dimension", c->loc);
  }
  SVal cur = sema_view_reshape(s, x, shape, n, c->loc);
  const Sym **wide = sym_array(s, n + nrep);
  int at = 0;
  for (int i = 0; i < n && cur.kind == SV_TENSOR; i++) {
    if (!sym_is(reps[i], 1)) {
      cur = sema_view_unsqueeze(s, cur.ref, at, c->loc);
      wide[at++] = reps[i];
    }
    wide[at++] = shape[i];
  }
  if (cur.kind != SV_TENSOR) return cur;
  if (nrep > 0) cur = sema_view_expand(s, cur.ref, wide, n + nrep, c->loc);
  if (cur.kind != SV_TENSOR) return cur;
  cur = sema_view_reshape(s, cur.ref, out, n, c->loc);
  if (cur.kind != SV_TENSOR) return cur;
  /* a new tensor, as PyTorch's: a contiguous copy when the reshape was
   * a view */
  if (op_kind(sema_val(s, cur.ref)->op) == IRK_VIEW)
    return copy_of(s, cur.ref, c->loc);
  return cur;
}

/* f(x, kw=[...]): the sizes given by keyword, read as the positional
 * list they can also be (tile(x, dims=(2, 2)), x.repeat(repeats=...)). */
static void sizes_keyword(CallArgs *c, const char *kw) {
  if (c->npos != 1 || c->nkw != 1 || strcmp(c->kwname[0], kw) != 0) return;
  c->pos[c->npos++] = c->kw[0]; /* build_args left room for one more */
  c->kwused[0] = true;
}

static SVal h_repeat(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  const Sym **reps;
  int n;
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
  sizes_keyword(c, "repeats");
  if (c->npos < 2) {
    diag_error(s->d, c->loc, "repeat() missing 1 required positional "
               "argument: \"repeats\"");
    return sv_error();
  }
  if (!sema_sizes(s, c, 1, &reps, &n) || !sema_args_done(s, c, c->npos))
    return sv_error();
  if (sema_val(s, x)->rank == 0 && n == 0) return copy_of(s, x, c->loc);
  return repeat(s, c, x, reps, n);
}

static SVal h_tile(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  const Sym **dims, **reps;
  int n;
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
  sizes_keyword(c, "dims");
  if (c->npos < 2) {
    diag_error(s->d, c->loc, "tile() missing 1 required positional argument: "
               "\"dims\"");
    return sv_error();
  }
  if (!sema_sizes(s, c, 1, &dims, &n) ||
      !sema_args_done(s, c, c->method ? c->npos : 2))
    return sv_error();
  int rank = sema_val(s, x)->rank, m = n > rank ? n : rank;
  if (m > MAX_DIMS) {
    diag_error(s->d, c->loc, "tile() got %d dims; at most %d are supported", m,
               MAX_DIMS);
    return sv_error();
  }
  reps = sym_array(s, m); /* fewer dims than the tensor's: leading 1s */
  for (int i = 0; i < m; i++) reps[i] = i < m - n ? K(s, 1) : dims[i - (m - n)];
  if (m == 0) return copy_of(s, x, c->loc);
  return repeat(s, c, x, reps, m);
}

/* ---- tril, triu, masked_fill ---- */

static SVal h_tri(Sema *s, CallArgs *c, const Builtin *b) {
  IrRef x;
  const Sym *k = sema_sym0(s);
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
  const SVal *kv = sema_arg(s, c, 1, "diagonal");
  if ((!absent(kv) &&
       !sema_sym_arg(s, kv, arena_printf(s->a, "%s() argument 'diagonal'",
                                         c->name), &k)) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  const IrValue *v = sema_val(s, x);
  if (v->rank < 2) {
    diag_error(s->d, c->loc, "%s: input tensor must have at least 2 "
               "dimensions", c->name);
    sema_note_origin(s, x);
    return sv_error();
  }
  /* keep x[..., i, j] where j - i <= k (tril) or j - i >= k (triu) */
  const Sym *hw[2] = {v->shape[v->rank - 2], v->shape[v->rank - 1]};
  IrRef ar[2];
  for (int i = 0; i < 2; i++) {
    IrValue a = sema_new_dense(s, OP_ARANGE, DT_I64, 1, &hw[i], c->loc);
    a.fattr[0] = 0;
    a.fattr[1] = 1;
    ar[i] = sema_emit(s, &a);
  }
  SVal rows = sema_view_unsqueeze(s, ar[0], 1, c->loc);
  SVal cols = sema_view_unsqueeze(s, ar[1], 0, c->loc);
  if (rows.kind == SV_ERROR || cols.kind == SV_ERROR) return sv_error();
  SVal diff = sema_ew_binary(s, OP_SUB, &cols, &rows, c->loc);
  SVal kk = sv_int(k, c->loc);
  SVal mask = sema_ew_binary(s, b->op == OP_LE ? OP_LE : OP_GE, &diff, &kk,
                             c->loc);
  if (mask.kind == SV_ERROR) return mask;
  SVal zero = sv_int(sema_sym0(s), c->loc);
  IrRef z = sema_to_tensor(s, &zero, "zero");
  return sema_where_dense(s, mask.ref, x, z, v->dtype, c->loc);
}

/* A Python number converted to dt as PyTorch's Scalar is
 * (sema_scalar_fits); a CONST of dt. */
static IrRef fill_value(Sema *s, const SVal *v, DType dt, Loc loc) {
  if (!sema_scalar_fits(s, v, dt, loc)) return -1;
  double f = sv_num_f(v);
  int64_t iv = 0;
  bool isint = v->kind != SV_FLOAT;
  if (isint) sv_const_int(v, &iv);
  IrValue cv = sema_new_dense(s, OP_CONST, dt, 0, NULL, loc);
  if (dtype_is_float(dt))
    cv.value.f = isint ? (double)iv : f;
  else if (dt == DT_BOOL)
    cv.value.i = isint ? iv != 0 : f != 0;
  else
    cv.value.i = isint ? iv : (int64_t)f;
  if (dt == DT_U8) cv.value.i &= 0xff;
  return sema_emit(s, &cv);
}

static SVal h_masked_fill(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x, mask, val;
  if (!sema_tensor_recv(s, c, &x) || !sema_req_tensor(s, c, 1, "mask", &mask))
    return sv_error();
  const SVal *vv = sema_need_arg(s, c, 2, "value");
  if (!vv || !sema_args_done(s, c, 3)) return sv_error();
  DType dt = sema_val(s, x)->dtype, md = sema_val(s, mask)->dtype;
  if (md != DT_BOOL) {
    diag_error(s->d, sema_arg(s, c, 1, "mask")->loc, "masked_fill_ only "
               "supports boolean masks, but got mask with dtype %s",
               dtype_name(md));
    sema_note_origin(s, mask);
    return sv_error();
  }
  if (vv->kind == SV_TENSOR) {
    int r = sema_val(s, vv->ref)->rank;
    if (r != 0) {
      diag_error(s->d, vv->loc, "masked_fill_ only supports a 0-dimensional "
                 "value tensor, but got tensor with %d dimension(s).", r);
      sema_note_origin(s, vv->ref);
      return sv_error();
    }
    val = vv->ref;
  } else if (vv->kind == SV_INT && !sv_const_int(vv, &(int64_t){0})) {
    val = sema_to_tensor(s, vv, "masked_fill() argument 'value'");
  } else if (sv_is_number(vv)) {
    val = fill_value(s, vv, dt, vv->loc);
  } else {
    diag_error(s->d, vv->loc, "masked_fill() argument 'value' must be a "
               "number or a 0-dim tensor, got %s", sv_kind_name(vv));
    return sv_error();
  }
  if (val < 0) return sv_error();
  return sema_where_dense(s, mask, val, x, dt, c->loc);
}

const Builtin sema_join_builtins[] = {
    {"roll", h_roll, OP_CAT, BF_BOTH},
    {"repeat", h_repeat, OP_CAT, BF_METHOD},
    {"tile", h_tile, OP_CAT, BF_BOTH},
    {"tril", h_tri, OP_LE, BF_BOTH},
    {"triu", h_tri, OP_GE, BF_BOTH},
    {"masked_fill", h_masked_fill, OP_WHERE, BF_BOTH},
    {"cat", h_cat, OP_CAT, BF_FUNC},
    {"concat", h_cat, OP_CAT, BF_FUNC},
    {"concatenate", h_cat, OP_CAT, BF_FUNC},
    {"stack", h_stack, OP_CAT, BF_FUNC},
    {"split", h_split, OP_SLICE, BF_BOTH},
    {"chunk", h_chunk, OP_SLICE, BF_BOTH},
    {"unbind", h_unbind, OP_SELECT, BF_BOTH},
    {NULL, NULL, OP_COUNT, 0},
};
