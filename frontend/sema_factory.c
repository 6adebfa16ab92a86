/* sema_factory.c — the factories: tensor(data), zeros, ones, full and
 * arange, with PyTorch's dtype inference (tensor() from its data, full()
 * from its fill value, arange() from its bounds) and its errors.  Results
 * are contiguous CONST, FULL and ARANGE values (ops.h).
 *
 * Needs: sema_internal.h, sema_values.c, sema_args.c.
 * Used by: sema_expr.c (the call dispatch, through sema_factory_builtins). */
#include <math.h>
#include <string.h>

#include "sema_internal.h"

/* ---- tensor(data) ---- */

/* Shape of nested lists, read along the first elements (as PyTorch). */
static int data_shape(const SVal *v, int64_t *shape, int max) {
  int rank = 0;
  while (v->kind == SV_LIST && rank < max) {
    shape[rank++] = v->nitems;
    if (v->nitems == 0) break;
    v = &v->items[0];
  }
  return rank;
}

typedef struct Flat {
  int rank;
  int64_t shape[TDSL_MAX_RANK];
  int n;
  Scalar *vals;
  DType *from;
  bool any_float, any_int;
} Flat;

static bool data_leaf(Sema *s, CallArgs *c, const SVal *v, Flat *f) {
  Scalar x;
  DType from;
  if (v->kind == SV_FLOAT) {
    x.f = v->f, from = DT_F64, f->any_float = true;
  } else if (v->kind == SV_BOOL) {
    x.i = v->b, from = DT_BOOL;
  } else if (v->kind == SV_INT && sym_is_const(v->sym, &x.i)) {
    from = DT_I64, f->any_int = true;
  } else {
    diag_error(s->d, c->loc,
               "tensor(): elements must be number or bool literals%s",
               v->kind == SV_INT ? " (a size symbol is only known at run "
                                   "time; use full() for it)" : "");
    return false;
  }
  f->vals[f->n] = x;
  f->from[f->n++] = from;
  return true;
}

static bool data_fill(Sema *s, CallArgs *c, const SVal *v, int depth,
                      Flat *f) {
  if (depth == f->rank) {
    if (v->kind != SV_LIST) return data_leaf(s, c, v, f);
    diag_error(s->d, c->loc, "tensor(): lists nested deeper than %d levels "
               "at dim %d", f->rank, depth);
    return false;
  }
  if (v->kind != SV_LIST || v->nitems != f->shape[depth]) {
    if (v->kind != SV_LIST)
      diag_error(s->d, c->loc,
                 "tensor(): expected a sequence of length %lld at dim %d "
                 "(got a single number); every row must have the same shape",
                 (long long)f->shape[depth], depth);
    else
      diag_error(s->d, c->loc,
                 "tensor(): expected sequence of length %lld at dim %d (got "
                 "%d); nested lists must be rectangular",
                 (long long)f->shape[depth], depth, v->nitems);
    return false;
  }
  for (int i = 0; i < v->nitems; i++)
    if (!data_fill(s, c, &v->items[i], depth + 1, f)) return false;
  return true;
}

/* The dtype PyTorch infers: any float -> f32, any int -> i64, else bool
 * (an empty list is f32). */
static DType data_dtype(const Flat *f) {
  if (f->any_float || f->n == 0) return DT_F32;
  return f->any_int ? DT_I64 : DT_BOOL;
}

static SVal factory_tensor(Sema *s, CallArgs *c) {
  const SVal *dv = sema_arg(s, c, 0, "data");
  DType dt;
  if (!sema_dtype_arg(s, sema_arg(s, c, 1, "dtype"), "tensor", &dt) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  if (!dv) {
    diag_error(s->d, c->loc, "tensor(): missing the data");
    return sv_error();
  }
  Flat f;
  memset(&f, 0, sizeof f);
  f.rank = data_shape(dv, f.shape, TDSL_MAX_RANK);
  int64_t numel = 1;
  for (int i = 0; i < f.rank; i++) numel *= f.shape[i];
  f.vals = arena_alloc(s->a, sizeof(Scalar) * (size_t)(numel + 1));
  f.from = arena_alloc(s->a, sizeof(DType) * (size_t)(numel + 1));
  if (!data_fill(s, c, dv, 0, &f)) return sv_error();
  if (dt == DT_NONE) dt = data_dtype(&f);
  size_t es = (size_t)dtype_size(dt);
  unsigned char *data = arena_alloc(s->a, es * (size_t)(numel + 1));
  for (int i = 0; i < f.n; i++)
    scalar_store(dt, data + es * (size_t)i,
                 scalar_cast(f.vals[i], f.from[i], dt));
  const Sym **shape = sym_array(s, f.rank);
  for (int i = 0; i < f.rank; i++) shape[i] = K(s, f.shape[i]);
  IrValue v = sema_new_dense(s, OP_TENSOR, dt, f.rank, shape, c->loc);
  v.data = data;
  return sv_tensor(sema_emit(s, &v), c->loc);
}

/* ---- zeros, ones, full ---- */

/* A trailing positional dtype (`zeros([2, 3], f16)`) is taken off the
 * positionals; returns it or NULL. */
static const SVal *pop_dtype(CallArgs *c, int min) {
  if (c->npos > min && c->pos[c->npos - 1].kind == SV_DTYPE)
    return &c->pos[--c->npos];
  return NULL;
}

/* The dtype given positionally (tv) or as dtype= (kv), not both. */
static bool pick_dtype(Sema *s, CallArgs *c, const SVal *tv, const SVal *kv,
                       DType *dt) {
  if (tv && kv) {
    diag_error(s->d, c->loc, "%s(): dtype given twice", c->name);
    return false;
  }
  return sema_dtype_arg(s, tv ? tv : kv, c->name, dt);
}

/* Ends a factory call whose trailing dtype pop_dtype took off: at most
 * maxpos other positionals (npos: the count before popping). */
static bool factory_done(Sema *s, CallArgs *c, int npos, int maxpos) {
  bool ok = sema_args_done(s, c, maxpos);
  c->npos = npos;
  return ok;
}

static bool check_sizes(Sema *s, CallArgs *c, const Sym *const *shape,
                        int n) {
  for (int i = 0; i < n; i++) {
    int64_t v;
    if (!sym_is_const(shape[i], &v) || v >= 0) continue;
    diag_error(s->d, c->loc, "%s(): size %lld at dim %d of %s is negative",
               c->name, (long long)v, i, shape_str(s, shape, n));
    return false;
  }
  return true;
}

/* A FULL of `shape` holding x (of dtype `from`) converted to dt. */
static SVal emit_full(Sema *s, CallArgs *c, DType dt, const Sym **shape,
                      int n, Scalar x, DType from) {
  if (!check_sizes(s, c, shape, n)) return sv_error();
  IrValue v = sema_new_dense(s, OP_FULL, dt, n, shape, c->loc);
  v.value = scalar_cast(x, from, dt);
  return sv_tensor(sema_emit(s, &v), c->loc);
}

/* zeros(*size, dtype=f32) / ones(...). */
static SVal factory_fill(Sema *s, CallArgs *c, int64_t value) {
  int npos = c->npos;
  const SVal *tv = pop_dtype(c, 1);
  const SVal *kv = sema_arg(s, c, KW_ONLY, "dtype");
  const Sym **shape;
  int n;
  DType dt;
  bool ok = sema_sizes(s, c, 0, &shape, &n) && pick_dtype(s, c, tv, kv, &dt);
  if (!factory_done(s, c, npos, c->npos) || !ok) return sv_error();
  Scalar x = {.i = value};
  return emit_full(s, c, dt == DT_NONE ? DT_F32 : dt, shape, n, x, DT_I64);
}

/* The fill value of full(): a number or bool literal. */
static bool fill_value(Sema *s, CallArgs *c, const SVal *v, Scalar *x,
                       DType *from) {
  if (v && v->kind == SV_FLOAT) {
    x->f = v->f, *from = DT_F64;
    return true;
  }
  if (v && v->kind == SV_BOOL) {
    x->i = v->b, *from = DT_BOOL;
    return true;
  }
  if (v && v->kind == SV_INT && sym_is_const(v->sym, &x->i)) {
    *from = DT_I64;
    return true;
  }
  diag_error(s->d, c->loc, "full(): fill_value must be a number or bool "
             "literal%s", v && v->kind == SV_INT ? " (not a size symbol)" :
             "");
  return false;
}

/* full(size, fill_value, dtype=None): dtype from the value by default. */
static SVal factory_full(Sema *s, CallArgs *c) {
  int npos = c->npos;
  const SVal *tv = pop_dtype(c, 2);
  const SVal *sv = sema_arg(s, c, 0, "size");
  const SVal *fv = sema_arg(s, c, 1, "fill_value");
  const SVal *kv = sema_arg(s, c, KW_ONLY, "dtype");
  if (!factory_done(s, c, npos, 2)) return sv_error();
  if (!sv || !fv) {
    diag_error(s->d, c->loc, "full(): expected full(size, fill_value)");
    return sv_error();
  }
  Scalar x;
  DType from, dt;
  if (!fill_value(s, c, fv, &x, &from) || !pick_dtype(s, c, tv, kv, &dt))
    return sv_error();
  /* Read the size through a call of its own: sema_sizes takes an int or a
   * list at positional 0. */
  CallArgs one = *c;
  one.pos = (SVal *)sv;
  one.npos = 1;
  one.nkw = 0;
  const Sym **shape;
  int n;
  if (!sema_sizes(s, &one, 0, &shape, &n)) return sv_error();
  if (dt == DT_NONE) dt = from == DT_F64 ? DT_F32 : from;
  return emit_full(s, c, dt, shape, n, x, from);
}

/* ---- arange ---- */

/* arange bounds: ints (end possibly symbolic) or floats. */
typedef struct Bound {
  bool is_float;
  double f;
  const Sym *sym; /* ints */
} Bound;

static bool bound_arg(Sema *s, CallArgs *c, const SVal *v, const char *what,
                      Bound *b) {
  b->is_float = v->kind == SV_FLOAT;
  b->f = v->f;
  b->sym = NULL;
  if (b->is_float) return true;
  if (v->kind != SV_INT) {
    diag_error(s->d, c->loc,
               "arange(): %s must be a number or a size symbol%s", what,
               v->kind == SV_TENSOR ? " (a scalar parameter is only known "
                                      "at run time)" : "");
    return false;
  }
  if (!sema_sym_arg(s, v, what, &b->sym)) return false;
  int64_t cv;
  if (sym_is_const(b->sym, &cv)) b->f = (double)cv;
  return true;
}

/* Length of arange for constant bounds, PyTorch's formula. */
static bool arange_static(Sema *s, CallArgs *c, const Bound *st,
                          const Bound *en, const Bound *sp, bool fl,
                          int64_t *len) {
  double a = st->f, b = en->f, d = sp->f;
  if ((d > 0 && b < a) || (d < 0 && b > a)) {
    diag_error(s->d, c->loc,
               "arange(): the range from %g to %g is inconsistent with the "
               "step %g's sign", a, b, d);
    return false;
  }
  if (!fl) {
    int64_t ia, ib, id;
    sym_is_const(st->sym, &ia), sym_is_const(en->sym, &ib);
    sym_is_const(sp->sym, &id);
    int64_t sgn = id > 0 ? 1 : -1;
    *len = (ib - ia + id - sgn) / id;
  } else {
    *len = (int64_t)ceil((b - a) / d);
  }
  return true;
}

/* Length with a symbolic end: ceil((end - start) / step) for an integer
 * step, plus the run-time sign check PyTorch does. */
static const Sym *arange_symbolic(Sema *s, CallArgs *c, const Bound *st,
                                  const Bound *en, int64_t step) {
  const Sym *span = step > 0 ? sym_sub(s->st, en->sym, st->sym)
                             : sym_sub(s->st, st->sym, en->sym);
  int64_t as = step > 0 ? step : -step;
  sema_check_le(s, K(s, 0), span,
                "arange(): the range is inconsistent with the step's sign",
                c->loc);
  return sym_floordiv(s->st, sym_add(s->st, span, K(s, as - 1)), K(s, as));
}

static bool arange_bounds(Sema *s, CallArgs *c, Bound *st, Bound *en,
                          Bound *sp) {
  const SVal *a0 = sema_arg(s, c, 0, "start"), *a1 = sema_arg(s, c, 1, "end");
  const SVal *a2 = sema_arg(s, c, 2, "step");
  if (!a0 && !a1) {
    diag_error(s->d, c->loc, "arange(): missing end");
    return false;
  }
  st->is_float = false, st->f = 0, st->sym = K(s, 0);
  sp->is_float = false, sp->f = 1, sp->sym = K(s, 1);
  if (!a1) return bound_arg(s, c, a0, "end", en); /* arange(end) */
  return (!a0 || bound_arg(s, c, a0, "start", st)) &&
         bound_arg(s, c, a1, "end", en) &&
         (absent(a2) || bound_arg(s, c, a2, "step", sp));
}

static SVal factory_arange(Sema *s, CallArgs *c) {
  int npos = c->npos;
  const SVal *tv = pop_dtype(c, 1);
  Bound st, en, sp;
  DType dt;
  bool ok = arange_bounds(s, c, &st, &en, &sp) &&
            pick_dtype(s, c, tv, sema_arg(s, c, KW_ONLY, "dtype"), &dt);
  if (!factory_done(s, c, npos, 3) || !ok) return sv_error();
  bool fl = st.is_float || en.is_float || sp.is_float;
  if (dt == DT_NONE) dt = fl ? DT_F32 : DT_I64;
  if (dt == DT_BOOL) {
    diag_error(s->d, c->loc, "arange(): not implemented for dtype bool");
    return sv_error();
  }
  if (sp.f == 0) {
    diag_error(s->d, c->loc, "arange(): step must be nonzero");
    return sv_error();
  }
  if ((st.sym && !sym_is_const(st.sym, NULL)) ||
      (sp.sym && !sym_is_const(sp.sym, NULL))) {
    diag_error(s->d, c->loc,
               "arange(): start and step must be constants; only end may "
               "be a size symbol");
    return sv_error();
  }
  const Sym *len;
  if (en.sym && !sym_is_const(en.sym, NULL)) {
    if (fl) {
      diag_error(s->d, c->loc, "arange(): a symbolic end needs integer "
                 "start and step");
      return sv_error();
    }
    len = arange_symbolic(s, c, &st, &en, (int64_t)sp.f);
  } else {
    int64_t n;
    if (!arange_static(s, c, &st, &en, &sp, fl, &n)) return sv_error();
    len = K(s, n);
  }
  const Sym **shape = sym_array(s, 1);
  shape[0] = len;
  IrValue v = sema_new_dense(s, OP_ARANGE, dt, 1, shape, c->loc);
  v.fattr[0] = st.f;
  v.fattr[1] = sp.f;
  return sv_tensor(sema_emit(s, &v), c->loc);
}

static SVal build_factory(Sema *s, CallArgs *c) {
  if (sema_has_error_arg(c)) return sv_error();
  if (strcmp(c->name, "tensor") == 0) return factory_tensor(s, c);
  if (strcmp(c->name, "zeros") == 0) return factory_fill(s, c, 0);
  if (strcmp(c->name, "ones") == 0) return factory_fill(s, c, 1);
  if (strcmp(c->name, "full") == 0) return factory_full(s, c);
  if (strcmp(c->name, "arange") == 0) return factory_arange(s, c);
  ICE("build_factory: unknown factory %s", c->name);
}

/* ---- Call handlers ---- */

static SVal h_factory(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  return build_factory(s, c);
}

const Builtin sema_factory_builtins[] = {
    {"tensor", h_factory, OP_TENSOR, BF_FUNC},
    {"zeros", h_factory, OP_FULL, BF_FUNC},
    {"ones", h_factory, OP_FULL, BF_FUNC},
    {"full", h_factory, OP_FULL, BF_FUNC},
    {"arange", h_factory, OP_ARANGE, BF_FUNC},
    {NULL, NULL, OP_COUNT, 0},
};
