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
    /* a size provably divisible by chunks: chunks pieces of size / chunks
     * (also when it is 0); one chunk: the whole dim */
    const Sym *kk = sym_const(s->st, k);
    if (k != 1 && !sym_is(sym_mod(s->st, size, kk), 0)) {
      diag_error(s->d, c->loc,
                 "chunk(): the number of pieces depends on dim %d's size %s, "
                 "which is only known at run time; it is known when the size "
                 "is a multiple of chunks (use split with a list of sizes "
                 "otherwise)",
                 w, sym_text(s, size));
      sema_note_origin(s, x);
      return sv_error();
    }
    const Sym **sizes = sym_array(s, (int)k);
    for (int64_t i = 0; i < k; i++) sizes[i] = sym_floordiv(s->st, size, kk);
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
  int rank = ref->rank, w;
  if (!sema_wrap_dim(s, c, dim, rank, &w)) return sv_error();
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
    if (v->rank != rank) {
      diag_error(s->d, items[i].loc, "Tensors must have same number of "
                 "dimensions: got %d and %d", rank, v->rank);
      sema_note_origin(s, x);
      return sv_error();
    }
    for (int d = 0; d < rank; d++) {
      if (d == w) continue;
      gc.loc = items[i].loc;
      const char *msg = arena_printf(
          s->a, "Sizes of tensors must match except in dimension %d: "
          "tensor number %d in the list", w, i);
      if (!geom_same_size(&gc, v->shape[d], ref->shape[d], msg)) {
        diag_error(s->d, items[i].loc, "Sizes of tensors must match except "
                   "in dimension %d. Expected size %s but got size %s for "
                   "tensor number %d in the list.", w,
                   sym_text(s, ref->shape[d]), sym_text(s, v->shape[d]), i);
        sema_note_origin(s, x);
        return sv_error();
      }
    }
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

const Builtin sema_join_builtins[] = {
    {"cat", h_cat, OP_CAT, BF_FUNC},
    {"concat", h_cat, OP_CAT, BF_FUNC},
    {"concatenate", h_cat, OP_CAT, BF_FUNC},
    {"stack", h_stack, OP_CAT, BF_FUNC},
    {"split", h_split, OP_SLICE, BF_BOTH},
    {"chunk", h_chunk, OP_SLICE, BF_BOTH},
    {"unbind", h_unbind, OP_SELECT, BF_BOTH},
    {NULL, NULL, OP_COUNT, 0},
};
