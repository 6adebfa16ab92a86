/* sema_index.c — indexing by tensors (spec §4.5a): index_select, gather,
 * take_along_dim, embedding, flip, and the one integer tensor inside
 * x[...] (sema_index_tensor, called by sema_expr.c's indexing), with
 * PyTorch's shape rules, index dtypes and errors.
 *
 * Every call becomes INDEX or GATHER values (ops.h): the index operand is
 * i64 or i32 as PyTorch accepts it for that call; indices the program
 * supplies are checked at run time (TDSL_E_INDEX, before any output is
 * written), negative ones wrapped only by advanced indexing (IRF_WRAP),
 * as PyTorch does; the indices of flip are built here, known in range
 * (IRF_INBOUNDS), from an arange that pass fuse inlines into the indexing
 * nest.  Results are contiguous, except advanced indexing (TensorIterator's
 * layout over the restrided input and index, as PyTorch's index kernel)
 * and flip (the input's layout preserved).
 *
 * Needs: sema_internal.h (sema_values.c, sema_args.c, sema_elementwise.c's
 * sema_ew_binary), geometry.c.  Used by: sema_expr.c (the builtin table
 * sema_index_builtins and x[...] with a tensor). */
#include <string.h>

#include "sema_internal.h"

/* Indices that are a constant table (tensor([...]) itself, not a view
 * of one that may leave elements out) into a dim of static size: checked
 * here, a compile-time error as the spec has errors that depend only on
 * static information; in range, the indexing needs no run-time check
 * (*flags |= IRF_INBOUNDS). */
static bool static_indices(Sema *s, const IrValue *xv, int d, IrRef idx, int flags, Loc loc,
                           int *out) {
  const IrValue *t = sema_val(s, idx);
  int64_t size, n;
  if (t->op != OP_TENSOR || !sym_is_const(xv->shape[d], &size) ||
      !sym_is_const(ir_numel(s->m, t), &n))
    return true;
  for (int64_t i = 0; i < n; i++) {
    int64_t j = scalar_load(t->dtype, (const char *)t->data + i * dtype_size(t->dtype)).i;
    if (j >= size || j < ((flags & IRF_WRAP) ? -size : 0)) {
      diag_error(s->d, loc, "index %lld is out of range for dim %d of size %lld",
                 (long long)j, d, (long long)size);
      return false;
    }
  }
  *out |= IRF_INBOUNDS;
  return true;
}

/* INDEX/GATHER of x (rank >= 1) along dim d with index idx: the result
 * dense in layout g (NULL: contiguous). */
static IrRef emit_index(Sema *s, Op op, IrRef x, int d, IrRef idx, int flags, const Geom *g,
                        Loc loc) {
  const IrValue *xv = sema_val(s, x), *iv = sema_val(s, idx);
  int rank = op == OP_GATHER ? iv->rank : xv->rank - 1 + iv->rank;
  if (!sema_rank_ok(s, rank, loc)) return -1;
  const Sym **shape = sym_array(s, rank);
  if (op == OP_GATHER) {
    for (int j = 0; j < rank; j++) shape[j] = iv->shape[j];
  } else {
    for (int j = 0; j < rank; j++)
      shape[j] = j < d ? xv->shape[j]
                 : j < d + iv->rank ? iv->shape[j - d]
                                    : xv->shape[j - iv->rank + 1];
  }
  if (!(flags & IRF_INBOUNDS) && !static_indices(s, xv, d, idx, flags, loc, &flags)) return -1;
  IrValue v = g ? sema_value_from_geom(s, op, xv->dtype, g, loc)
                : sema_new_dense(s, op, xv->dtype, rank, shape, loc);
  int64_t a = d;
  sema_set_int_attrs(s, &v, &a, 1);
  v.flags = flags;
  IrRef args[2] = {x, idx};
  return sema_emit_op(s, &v, args, 2);
}

/* The index's dtype: i64, or i32 where the call accepts it. */
static bool index_dtype(Sema *s, CallArgs *c, IrRef idx, bool i32_ok, const char *what) {
  DType dt = sema_val(s, idx)->dtype;
  if (dt == DT_I64 || (i32_ok && dt == DT_I32)) return true;
  diag_error(s->d, c->loc, "%s(): expected %s for %s, got %s", c->name,
             i32_ok ? "an i64 or i32 tensor" : "an i64 tensor", what, dtype_name(dt));
  return false;
}

/* ---- index_select, embedding ---- */

static SVal index_select(Sema *s, CallArgs *c, IrRef x, int64_t dim, IrRef idx) {
  if (!index_dtype(s, c, idx, true, "the index")) return sv_error();
  const IrValue *iv = sema_val(s, idx);
  if (iv->rank > 1) {
    diag_error(s->d, c->loc, "%s(): the index must be a vector (0-D or 1-D), got shape %s",
               c->name, sema_shape_str(s, idx));
    return sv_error();
  }
  int d, xr = sema_val(s, x)->rank;
  if (!sema_wrap_dim(s, c, dim, xr, &d)) return sv_error();
  if (iv->rank == 0) idx = sema_emit_unsqueeze(s, idx, 0, c->loc);
  if (xr == 0) { /* a 0-dim x: one index, a 0-dim result */
    int64_t n;
    if (!sym_is_const(sema_val(s, idx)->shape[0], &n) || n != 1) {
      diag_error(s->d, c->loc, "%s(): the index into a 0-dim tensor must have exactly one "
                 "element, got shape %s", c->name, sema_shape_str(s, idx));
      return sv_error();
    }
    IrRef r = emit_index(s, OP_INDEX, sema_emit_unsqueeze(s, x, 0, c->loc), 0, idx, 0, NULL,
                         c->loc);
    int64_t z = 0;
    return sv_tensor(r < 0 ? r : sema_emit_squeeze(s, r, &z, 1, c->loc), c->loc);
  }
  return sv_tensor(emit_index(s, OP_INDEX, x, d, idx, 0, NULL, c->loc), c->loc);
}

static SVal h_index_select(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x, idx;
  int64_t dim;
  if (!sema_tensor_recv(s, c, &x) || !sema_req_int(s, c, 1, "dim", &dim) ||
      !sema_req_tensor(s, c, 2, "index", &idx) || !sema_args_done(s, c, 3))
    return sv_error();
  return index_select(s, c, x, dim, idx);
}

/* F.embedding(input, weight, padding_idx=None, max_norm=None, ...): rows
 * of the 2-D weight, input.shape + [embedding_dim]. */
static SVal h_embedding(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef idx, w;
  if (!sema_req_tensor(s, c, 0, "input", &idx) || !sema_req_tensor(s, c, 1, "weight", &w))
    return sv_error();
  const SVal *pad = sema_arg(s, c, 2, "padding_idx"), *mn = sema_arg(s, c, 3, "max_norm");
  const SVal *nt = sema_arg(s, c, 4, "norm_type"), *sg = sema_arg(s, c, 5, "scale_grad_by_freq");
  const SVal *sp = sema_arg(s, c, 6, "sparse");
  if (!sema_args_done(s, c, 7)) return sv_error();
  if (!absent(mn)) {
    diag_error(s->d, mn->loc, "embedding(): max_norm is not supported: PyTorch renormalizes "
               "the weight rows in place, and kernels do not modify their inputs; "
               "renormalize the weight before the call");
    return sv_error();
  }
  if (!absent(nt) && !sv_is_number(nt)) { /* used only with max_norm */
    diag_error(s->d, nt->loc, "embedding(): norm_type must be a number, got %s",
               sv_kind_name(nt));
    return sv_error();
  }
  bool flag; /* training options: no effect on the values */
  if (!sema_bool_arg(s, sg, "embedding", "scale_grad_by_freq", false, &flag) ||
      !sema_bool_arg(s, sp, "embedding", "sparse", false, &flag))
    return sv_error();
  const IrValue *wv = sema_val(s, w);
  if (wv->rank != 2) {
    diag_error(s->d, c->loc, "embedding(): 'weight' must be 2-D, got shape %s",
               sema_shape_str(s, w));
    sema_note_origin(s, w);
    return sv_error();
  }
  if (!index_dtype(s, c, idx, true, "'input'")) return sv_error();
  if (!absent(pad)) { /* validated as PyTorch does; the forward ignores it */
    int64_t p, n;
    if (!sema_int_arg(s, pad, "embedding() argument 'padding_idx'", &p)) return sv_error();
    if (sym_is_const(wv->shape[0], &n) && (p >= n || p < -n)) {
      diag_error(s->d, pad->loc, "embedding(): padding_idx %lld must be within "
                 "num_embeddings (%lld)", (long long)p, (long long)n);
      return sv_error();
    }
    if (!sym_is_const(wv->shape[0], &n)) {
      const Sym *P = K(s, p < 0 ? -p : p + 1);
      sema_check_le(s, P, wv->shape[0], "embedding(): padding_idx must be within "
                    "num_embeddings", pad->loc);
    }
  }
  return sv_tensor(emit_index(s, OP_INDEX, w, 0, idx, 0, NULL, c->loc), c->loc);
}

/* ---- gather, take_along_dim ---- */

/* index.size(k) <= x.size(k) for k != d (PyTorch's gather). */
static bool gather_sizes(Sema *s, CallArgs *c, IrRef x, IrRef idx, int d) {
  const IrValue *xv = sema_val(s, x), *iv = sema_val(s, idx);
  for (int k = 0; k < xv->rank; k++) {
    if (k == d || iv->shape[k] == xv->shape[k]) continue;
    int64_t a, b;
    if (sym_is_const(iv->shape[k], &a) && sym_is_const(xv->shape[k], &b)) {
      if (a <= b) continue;
      diag_error(s->d, c->loc, "%s(): size does not match at dim %d: the index %s must not "
                 "be larger than the input %s apart from dim %d", c->name, k,
                 sema_shape_str(s, idx), sema_shape_str(s, x), d);
      return false;
    }
    sema_check_le(s, iv->shape[k], xv->shape[k],
                  arena_printf(s->a, "%s(): the index's dim %d must not be larger than the "
                               "input's", c->name, k), c->loc);
  }
  return true;
}

static SVal do_gather(Sema *s, CallArgs *c, IrRef x, int64_t dim, IrRef idx) {
  const IrValue *xv = sema_val(s, x), *iv = sema_val(s, idx);
  int d;
  if (!sema_wrap_dim(s, c, dim, xv->rank, &d)) return sv_error();
  if (xv->rank == 0) { /* PyTorch: a 0-D or 1-D index into a 0-dim input */
    if (iv->rank > 1) {
      diag_error(s->d, c->loc, "%s(): the index into a 0-dim tensor must be 0-D or 1-D, got "
                 "shape %s", c->name, sema_shape_str(s, idx));
      return sv_error();
    }
    bool scalar = iv->rank == 0;
    if (scalar) idx = sema_emit_unsqueeze(s, idx, 0, c->loc);
    IrRef r = emit_index(s, OP_GATHER, sema_emit_unsqueeze(s, x, 0, c->loc), 0, idx, 0, NULL,
                         c->loc);
    int64_t z = 0;
    return sv_tensor(r >= 0 && scalar ? sema_emit_squeeze(s, r, &z, 1, c->loc) : r, c->loc);
  }
  if (iv->rank != xv->rank) {
    diag_error(s->d, c->loc, "%s(): the index must have as many dims as the input: the index "
               "has shape %s, the input %s", c->name, sema_shape_str(s, idx),
               sema_shape_str(s, x));
    return sv_error();
  }
  if (!gather_sizes(s, c, x, idx, d)) return sv_error();
  return sv_tensor(emit_index(s, OP_GATHER, x, d, idx, 0, NULL, c->loc), c->loc);
}

static SVal h_gather(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x, idx;
  int64_t dim;
  bool sparse;
  if (!sema_tensor_recv(s, c, &x) || !sema_req_int(s, c, 1, "dim", &dim) ||
      !sema_req_tensor(s, c, 2, "index", &idx) ||
      !sema_bool_arg(s, sema_arg(s, c, KW_ONLY, "sparse_grad"), "gather", "sparse_grad",
                     false, &sparse) ||
      !sema_args_done(s, c, 3))
    return sv_error();
  if (!index_dtype(s, c, idx, false, "the index")) return sv_error();
  return do_gather(s, c, x, dim, idx);
}

/* r.view(-1), as PyTorch's take_along_dim without a dim does it (an
 * error where the view is impossible, as there); -1 after reporting. */
static IrRef flat(Sema *s, CallArgs *c, IrRef r, const char *what) {
  const Sym *n = ir_numel(s->m, sema_val(s, r));
  GeomCtx gc = sema_geom(s, c->loc);
  Geom in = sema_geom_of(s, r), out;
  const char *msg = geom_view(&gc, &in, &n, 1, &out);
  if (msg) {
    diag_error(s->d, c->loc, "%s(): without a dim, the %s is flattened with view(-1), which "
               "fails: %s", c->name, what, msg);
    sema_note_origin(s, r);
    return -1;
  }
  return sema_emit_view(s, OP_VIEW, r, &out, &n, 1, 0, c->loc);
}

/* take_along_dim(input, indices, dim=None): with a dim, both broadcast
 * apart from that dim, then gather; without, over the flattened input. */
static SVal h_take_along_dim(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x, idx;
  if (!sema_tensor_recv(s, c, &x) || !sema_req_tensor(s, c, 1, "indices", &idx)) return sv_error();
  const SVal *dv = sema_arg(s, c, 2, "dim");
  if (!sema_args_done(s, c, 3)) return sv_error();
  DType dt = sema_val(s, idx)->dtype;
  if (dt != DT_I64) {
    diag_error(s->d, c->loc, "take_along_dim(): the indices must be an i64 tensor, got %s",
               dtype_name(dt));
    return sv_error();
  }
  if (absent(dv)) {
    if ((x = flat(s, c, x, "input")) < 0 || (idx = flat(s, c, idx, "indices")) < 0)
      return sv_error();
    return do_gather(s, c, x, 0, idx);
  }
  int64_t dim;
  if (!sema_int_arg(s, dv, "take_along_dim() argument 'dim'", &dim)) return sv_error();
  const IrValue *xv = sema_val(s, x), *iv = sema_val(s, idx);
  if (xv->rank != iv->rank) {
    diag_error(s->d, c->loc, "take_along_dim(): input and indices must have the same number "
               "of dims, got %d for the input and %d for the indices", xv->rank, iv->rank);
    return sv_error();
  }
  int d;
  if (!sema_wrap_dim(s, c, dim, xv->rank, &d)) return sv_error();
  if (xv->rank == 0) return do_gather(s, c, x, d, idx);
  const Sym *xs[MAX_DIMS], *is[MAX_DIMS], **bs;
  int nb;
  for (int k = 0; k < xv->rank; k++) xs[k] = xv->shape[k], is[k] = iv->shape[k];
  xs[d] = is[d] = K(s, 1);
  GeomCtx gc = sema_geom(s, c->loc);
  const char *msg = geom_broadcast(&gc, xs, xv->rank, is, iv->rank, &bs, &nb);
  if (msg) {
    diag_error(s->d, c->loc, "take_along_dim(): the shapes of input %s and indices %s do not "
               "broadcast apart from dim %d: %s", sema_shape_str(s, x), sema_shape_str(s, idx),
               d, msg);
    return sv_error();
  }
  const Sym **sx = sym_array(s, nb), **si = sym_array(s, nb);
  for (int k = 0; k < nb; k++) sx[k] = si[k] = bs[k];
  sx[d] = xv->shape[d];
  si[d] = iv->shape[d];
  x = sema_expand_to(s, x, nb, sx, c->loc);
  idx = sema_expand_to(s, idx, nb, si, c->loc);
  return do_gather(s, c, x, d, idx);
}

/* ---- flip ---- */

/* size - 1 - arange(size), i64: indices known in range. */
static IrRef reversed(Sema *s, const Sym *size, Loc loc) {
  IrValue a = sema_new_dense(s, OP_ARANGE, DT_I64, 1, &size, loc);
  a.fattr[0] = 0;
  a.fattr[1] = 1;
  IrRef ar = sema_emit(s, &a);
  SVal last = sv_int(sym_sub(s->st, size, K(s, 1)), loc), at = sv_tensor(ar, loc);
  SVal r = sema_ew_binary(s, OP_SUB, &last, &at, loc);
  return r.kind == SV_TENSOR ? r.ref : -1;
}

static SVal h_flip(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t dims[MAX_DIMS];
  int n;
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
  const SVal *kw = sema_arg(s, c, KW_ONLY, "dims"); /* flip(x, dims=[0, 1]) */
  if (kw && c->npos > 1) {
    diag_error(s->d, c->loc, "flip(): dims given both as arguments and as dims=");
    return sv_error();
  }
  if (kw ? !sema_int_list(s, kw, "flip() argument 'dims'", dims, &n, MAX_DIMS)
         : !sema_int_varargs(s, c, 1, dims, &n))
    return sv_error();
  if (!sema_args_done(s, c, c->npos)) return sv_error();
  const IrValue *xv = sema_val(s, x);
  bool seen[MAX_DIMS] = {false};
  int nd = 0, flip[MAX_DIMS];
  for (int i = 0; i < n; i++) {
    int d;
    if (!sema_wrap_dim(s, c, dims[i], xv->rank, &d)) return sv_error();
    if (seen[d]) {
      diag_error(s->d, c->loc, "flip(): dim %d appears more than once in the list of dims", d);
      return sv_error();
    }
    seen[d] = true;
    if (xv->rank > 0 && !sym_is(xv->shape[d], 1)) flip[nd++] = d;
  }
  Geom in = sema_geom_of(s, x), out;
  GeomCtx gc = sema_geom(s, c->loc);
  geom_preserve(&gc, &in, &out); /* PyTorch: the input's layout */
  if (nd == 0) return sv_tensor(sema_emit_copy(s, OP_COPY, x, xv->dtype, &out, IRF_CLONE, c->loc),
                                c->loc);
  for (int i = 0; i < nd && x >= 0; i++) {
    IrRef idx = reversed(s, sema_val(s, x)->shape[flip[i]], c->loc);
    if (idx < 0) return sv_error();
    x = emit_index(s, OP_INDEX, x, flip[i], idx, IRF_INBOUNDS, i == nd - 1 ? &out : NULL, c->loc);
  }
  return sv_tensor(x, c->loc);
}

/* ---- indices sema builds (decompositions) ---- */

IrRef sema_index_inbounds(Sema *s, IrRef x, int dim, IrRef idx, Loc loc) {
  const IrValue *xv = sema_val(s, x), *iv = sema_val(s, idx);
  if (xv->rank < 1 || dim < 0 || dim >= xv->rank || iv->rank > 1 ||
      (iv->dtype != DT_I64 && iv->dtype != DT_I32))
    ICE("sema_index_inbounds: bad operands");
  return emit_index(s, OP_INDEX, x, dim, idx, IRF_INBOUNDS, NULL, loc);
}

/* ---- x[...] with one integer tensor ---- */

bool sema_index_tensor_ok(Sema *s, const SVal *it) {
  DType dt = sema_val(s, it->ref)->dtype;
  if (dt == DT_I64) return true;
  if (dt == DT_BOOL || dt == DT_U8)
    diag_error(s->d, it->loc, "indexing with a %s mask is not supported: the result's size "
               "would depend on the mask's values; use where(mask, x, 0) or index with an "
               "i64 tensor of positions", dtype_name(dt));
  else
    diag_error(s->d, it->loc, "tensors used as indices must be i64 (or bool/u8 masks, not "
               "supported), got %s", dtype_name(dt));
  return false;
}

SVal sema_index_tensor(Sema *s, IrRef x, int *d, const SVal *it) {
  IrRef idx = it->ref;
  const IrValue *xv = sema_val(s, x), *iv = sema_val(s, idx);
  int dim = (*d)++, rank = xv->rank - 1 + iv->rank;
  if (!sema_rank_ok(s, rank, it->loc)) return sv_error();
  /* PyTorch's index kernel: TensorIterator over x restrided (0 along the
   * index's dims) and the index (0 along x's) decides the layout */
  const Sym **shape = sym_array(s, rank), **xs = sym_array(s, rank), **is = sym_array(s, rank);
  Geom xg = sema_geom_of(s, x), ig = sema_geom_of(s, idx);
  for (int j = 0; j < rank; j++) {
    bool in_idx = j >= dim && j < dim + iv->rank;
    int xd = j < dim ? j : j - iv->rank + 1;
    shape[j] = in_idx ? iv->shape[j - dim] : xv->shape[xd];
    xs[j] = in_idx ? K(s, 0) : xg.stride[xd];
    is[j] = in_idx ? ig.stride[j - dim] : K(s, 0);
  }
  Geom a = {rank, shape, xs, K(s, 0)}, bi = {rank, shape, is, K(s, 0)}, out;
  const Geom *ops[2] = {&a, &bi};
  GeomCtx gc = sema_geom(s, it->loc);
  geom_elementwise_layout(&gc, ops, 2, rank, shape, &out);
  *d += iv->rank - 1;
  return sv_tensor(emit_index(s, OP_INDEX, x, dim, idx, IRF_WRAP, &out, it->loc), it->loc);
}

const Builtin sema_index_builtins[] = {
    {"index_select", h_index_select, OP_INDEX, BF_BOTH},
    {"gather", h_gather, OP_GATHER, BF_BOTH},
    {"take_along_dim", h_take_along_dim, OP_GATHER, BF_BOTH},
    {"embedding", h_embedding, OP_INDEX, BF_FUNC},
    {"flip", h_flip, OP_INDEX, BF_BOTH},
    {NULL, NULL, OP_COUNT, 0},
};
