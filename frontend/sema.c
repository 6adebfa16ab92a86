/* sema.c — semantic analysis, core half: checks a parsed program with
 * PyTorch's rules and builds the tensor IR (one IrKernel per kernel).
 *
 * Needs: ast.h (the parser's tree), geometry.c (every view/stride rule),
 * dtype.c (promotion), sym.c (symbolic sizes), sema_ops.c (reductions,
 * normalizations, matmul, conv, pooling, factories).
 * Produces: an IrModule whose values follow ops.h's conventions —
 * elementwise operands pre-cast to the compute dtype and pre-expanded to
 * the result shape (IRF_IMPLICIT CAST/EXPAND), views carrying absolute
 * geometry in their storage root, semantic strides as PyTorch's.
 *
 * Errors go through diag_error at the operator token or the call's name;
 * an expression that failed evaluates to SV_ERROR, which every consumer
 * propagates without reporting again, so one mistake gives one error. */
#include "sema.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DIMS = TDSL_MAX_RANK }; /* ir.h: the one rank limit */

/* ------------------------------------------------------------------ */
/* SVal helpers                                                         */

static SVal sv_make(SvKind kind, Loc loc) {
  SVal v;
  memset(&v, 0, sizeof v);
  v.kind = kind;
  v.ref = -1;
  v.dt = DT_NONE;
  v.loc = loc;
  return v;
}

static SVal sv_error(void) { return sv_make(SV_ERROR, (Loc){0, 0, 0}); }

static SVal sv_tensor(IrRef r, Loc loc) {
  SVal v = sv_make(SV_TENSOR, loc);
  v.ref = r;
  return v;
}

static SVal sv_int(const Sym *sym, Loc loc) {
  SVal v = sv_make(SV_INT, loc);
  v.sym = sym;
  return v;
}

static SVal sv_float(double f, Loc loc) {
  SVal v = sv_make(SV_FLOAT, loc);
  v.f = f;
  return v;
}

static SVal sv_bool(bool b, Loc loc) {
  SVal v = sv_make(SV_BOOL, loc);
  v.b = b;
  return v;
}

static const char *sv_kind_name(const SVal *v) {
  switch (v->kind) {
  case SV_ERROR: return "an erroneous value";
  case SV_TENSOR: return "a tensor";
  case SV_INT: return "an int";
  case SV_FLOAT: return "a float";
  case SV_BOOL: return "a bool";
  case SV_NONE: return "None";
  case SV_STR: return "a string";
  case SV_DTYPE: return "a dtype";
  case SV_LAYOUT: return "a memory format";
  case SV_LIST: return "a list";
  case SV_SLICE: return "a slice";
  case SV_ELLIPSIS: return "'...'";
  }
  return "a value";
}

/* ------------------------------------------------------------------ */
/* Values and geometry                                                  */

IrValue *sema_val(Sema *s, IrRef r) {
  IR_ASSERT(r >= 0 && r < s->k->nvalues);
  return &s->k->values[r];
}

GeomCtx sema_geom(Sema *s, Loc loc) {
  GeomCtx c = {s->st, s->a, s->m, s->k, loc};
  return c;
}

Geom sema_geom_of(Sema *s, IrRef r) {
  IrValue *v = sema_val(s, r);
  Geom g = {v->rank, v->shape, v->stride, v->offset};
  return g;
}

static const Sym *sym0(Sema *s) { return sym_const(s->st, 0); }

static const Sym **syms_copy(Sema *s, const Sym *const *v, int n) {
  if (n <= 0) return NULL;
  const Sym **out = arena_alloc(s->a, (size_t)n * sizeof *out);
  memcpy(out, v, (size_t)n * sizeof *out);
  return out;
}

static const Sym **syms_from_ints(Sema *s, const int64_t *v, int n) {
  if (n <= 0) return NULL;
  const Sym **out = arena_alloc(s->a, (size_t)n * sizeof *out);
  for (int i = 0; i < n; i++) out[i] = sym_const(s->st, v[i]);
  return out;
}

/* A value of op with the geometry g (arrays must live in the arena). */
static IrValue value_from_geom(Sema *s, Op op, DType dt, const Geom *g,
                               Loc loc) {
  IrValue v;
  memset(&v, 0, sizeof v);
  v.op = op;
  v.dtype = dt;
  v.rank = g->rank;
  v.shape = g->shape;
  v.stride = g->stride;
  v.offset = g->offset ? g->offset : sym0(s);
  v.loc = loc;
  return v;
}

static void set_args(Sema *s, IrValue *v, const IrRef *refs, int n) {
  v->nargs = n;
  v->args = arena_dup(s->a, refs, (size_t)n * sizeof *refs);
}

static void set_attrs(Sema *s, IrValue *v, const Sym *const *attrs, int n) {
  v->nattrs = n;
  v->attrs = syms_copy(s, attrs, n);
}

IrValue sema_new_dense(Sema *s, Op op, DType dt, int rank,
                       const Sym *const *shape, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom g;
  memset(&g, 0, sizeof g);
  geom_contiguous(&c, rank, shape, &g);
  g.rank = rank;
  g.shape = syms_copy(s, shape, rank);
  g.offset = sym0(s);
  return value_from_geom(s, op, dt, &g, loc);
}

/* Callers hold no IrValue pointer across this call: ir_add may move the
 * value array. */
IrRef sema_emit(Sema *s, IrValue *v) {
  if (!v->offset) v->offset = sym0(s);
  if (v->rank > 0 && !v->stride) {
    GeomCtx c = sema_geom(s, v->loc);
    Geom g;
    memset(&g, 0, sizeof g);
    geom_contiguous(&c, v->rank, v->shape, &g);
    v->stride = g.stride;
  }
  return ir_add(s->m, s->k, v);
}

static IrRef emit_view(Sema *s, Op op, IrRef in, const Geom *g,
                       const Sym *const *attrs, int nattrs, int flags,
                       Loc loc) {
  DType dt = sema_val(s, in)->dtype;
  IrValue v = value_from_geom(s, op, dt, g, loc);
  set_args(s, &v, &in, 1);
  set_attrs(s, &v, attrs, nattrs);
  v.flags = flags;
  return sema_emit(s, &v);
}

static IrRef emit_view_ints(Sema *s, Op op, IrRef in, const Geom *g,
                            const int64_t *attrs, int nattrs, Loc loc) {
  const Sym **a = syms_from_ints(s, attrs, nattrs);
  return emit_view(s, op, in, g, a, nattrs, 0, loc);
}

/* A fresh copy of r (op COPY or CAST) with the strides of `g`. */
static IrRef emit_copy(Sema *s, Op op, IrRef r, DType dt, const Geom *g,
                       int flags, Loc loc) {
  Geom out = *g;
  out.offset = sym0(s);
  IrValue v = value_from_geom(s, op, dt, &out, loc);
  set_args(s, &v, &r, 1);
  v.flags = flags;
  return sema_emit(s, &v);
}

static IrRef emit_cast(Sema *s, IrRef r, DType dt, int flags, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, r), out;
  memset(&out, 0, sizeof out);
  geom_preserve(&c, &in, &out);
  out.rank = in.rank;
  out.shape = in.shape;
  return emit_copy(s, OP_CAST, r, dt, &out, flags, loc);
}

IrRef sema_cast(Sema *s, IrRef r, DType dt, Loc loc) {
  if (sema_val(s, r)->dtype == dt) return r;
  return emit_cast(s, r, dt, IRF_IMPLICIT, loc);
}

IrRef sema_expand_to(Sema *s, IrRef r, int rank, const Sym *const *shape,
                     Loc loc) {
  IrValue *v = sema_val(s, r);
  if (sym_list_equal(v->shape, v->rank, shape, rank)) return r;
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, r), out;
  const char *err = geom_expand(&c, &in, shape, rank, &out);
  if (err) ICE("implicit broadcast failed after a successful check: %s", err);
  return emit_view(s, OP_EXPAND, r, &out, out.shape, out.rank, IRF_IMPLICIT,
                   loc);
}

IrRef sema_to_tensor(Sema *s, const SVal *v, const char *what) {
  IrValue c;
  memset(&c, 0, sizeof c);
  c.op = OP_CONST;
  c.flags = IRF_WRAPPED;
  c.loc = v->loc;
  int64_t iv;
  switch (v->kind) {
  case SV_TENSOR: return v->ref;
  case SV_ERROR: return -1;
  case SV_INT:
    c.dtype = DT_I64;
    if (sym_is_const(v->sym, &iv)) {
      c.value.i = iv;
    } else {
      c.op = OP_SYMVAL;
      set_attrs(s, &c, &v->sym, 1);
    }
    break;
  case SV_FLOAT: /* a Python float is a double until promotion decides */
    c.dtype = DT_F64;
    c.value.f = v->f;
    break;
  case SV_BOOL:
    c.dtype = DT_BOOL;
    c.value.i = v->b;
    break;
  default:
    diag_error(s->d, v->loc, "%s must be a tensor or a number, got %s", what,
               sv_kind_name(v));
    return -1;
  }
  return sema_emit(s, &c);
}

/* ------------------------------------------------------------------ */
/* Type promotion (pytorch-semantics.md §5)                             */

static DType promote_skip(DType a, DType b) {
  if (a == DT_NONE) return b;
  if (b == DT_NONE) return a;
  return dtype_promote(a, b);
}

/* c10's combine_categories: a lower rank only matters when it brings a
 * higher category. */
static DType combine(DType hi, DType lo) {
  if (hi != DT_NONE && dtype_is_float(hi)) return hi;
  if (hi == DT_BOOL || (lo != DT_NONE && dtype_is_float(lo)))
    return promote_skip(hi, lo);
  return hi != DT_NONE ? hi : lo;
}

/* The dtype a wrapped Python number takes in result_type: floats the
 * default dtype (f32), ints i64, bools bool. */
static DType wrapped_dtype(DType t) {
  if (dtype_is_float(t)) return DT_F32;
  return t == DT_BOOL ? DT_BOOL : DT_I64;
}

DType sema_result_type(Sema *s, const SVal *ops, int n) {
  DType dims = DT_NONE, zero = DT_NONE, wrapped = DT_NONE;
  for (int i = 0; i < n; i++) {
    const SVal *v = &ops[i];
    if (v->kind == SV_TENSOR) {
      IrValue *x = sema_val(s, v->ref);
      if (x->rank > 0)
        dims = promote_skip(dims, x->dtype);
      else if (x->flags & IRF_WRAPPED)
        wrapped = promote_skip(wrapped, wrapped_dtype(x->dtype));
      else
        zero = promote_skip(zero, x->dtype);
    } else if (v->kind == SV_INT) {
      wrapped = promote_skip(wrapped, DT_I64);
    } else if (v->kind == SV_FLOAT) {
      wrapped = promote_skip(wrapped, DT_F32);
    } else if (v->kind == SV_BOOL) {
      wrapped = promote_skip(wrapped, DT_BOOL);
    }
  }
  return combine(dims, combine(zero, wrapped));
}

/* ------------------------------------------------------------------ */
/* Names and messages                                                   */

const char *sema_shape_str(Sema *s, IrRef r) {
  IrValue *v = sema_val(s, r);
  return geom_shape_str(s->a, v->shape, v->rank);
}

static const char *type_str(Sema *s, DType dt, int rank,
                            const Sym *const *shape) {
  return arena_printf(s->a, "%s%s", dtype_name(dt),
                      geom_shape_str(s->a, shape, rank));
}

static void bind(Sema *s, const char *name, SVal v, Loc loc) {
  if (s->nnames == s->namecap) {
    int c1 = s->namecap, c2 = s->namecap, c3 = s->namecap;
    s->names = arena_grow(s->a, s->names, &c1, sizeof *s->names);
    s->namevals = arena_grow(s->a, s->namevals, &c2, sizeof *s->namevals);
    s->nameloc = arena_grow(s->a, s->nameloc, &c3, sizeof *s->nameloc);
    s->namecap = c1;
  }
  s->names[s->nnames] = name;
  s->namevals[s->nnames] = v;
  s->nameloc[s->nnames] = loc;
  s->nnames++;
  if (v.kind == SV_TENSOR && !sema_val(s, v.ref)->name)
    sema_val(s, v.ref)->name = name;
}

/* Latest binding of name, or -1. */
static int find_name(const Sema *s, const char *name) {
  for (int i = s->nnames - 1; i >= 0; i--)
    if (strcmp(s->names[i], name) == 0) return i;
  return -1;
}

void sema_note_origin(Sema *s, IrRef r) {
  /* Walk back through views (and implicit casts) to the named value whose
   * declaration explains the geometry. */
  while (r >= 0) {
    IrValue *v = sema_val(s, r);
    if (v->name) {
      for (int i = s->nnames - 1; i >= 0; i--) {
        if (s->namevals[i].kind == SV_TENSOR && s->namevals[i].ref == r) {
          diag_note(s->d, s->nameloc[i], "%s declared here with shape %s",
                    s->names[i], sema_shape_str(s, r));
          return;
        }
      }
      return;
    }
    bool through = op_kind(v->op) == IRK_VIEW ||
                   (v->op == OP_CAST && (v->flags & IRF_IMPLICIT));
    if (!through || v->nargs < 1) return;
    r = v->args[0];
  }
}

/* Edit distance, for "did you mean" suggestions. */
static int edit_distance(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la > 40 || lb > 40) return 99;
  int d[41][41];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      d[i][j] = best;
    }
  return d[la][lb];
}

/* Keeps the closest candidate within distance 2 (and less than the
 * name's length, so short names don't match everything). */
static void suggest(const char *name, const char *cand, const char **best,
                    int *bestd) {
  int dist = edit_distance(name, cand);
  if (dist < *bestd && dist <= 2 && dist < (int)strlen(name)) {
    *best = cand;
    *bestd = dist;
  }
}

static const char *did_you_mean(Sema *s, const char *best) {
  return best ? arena_printf(s->a, "; did you mean '%s'?", best) : "";
}

/* ------------------------------------------------------------------ */
/* Arguments                                                            */

const SVal *sema_arg(Sema *s, CallArgs *c, int i, const char *kw) {
  const SVal *p = (i >= 0 && i < c->npos) ? &c->pos[i] : NULL;
  const SVal *k = NULL;
  if (kw)
    for (int j = 0; j < c->nkw; j++)
      if (strcmp(c->kwname[j], kw) == 0) {
        k = &c->kw[j];
        c->kwused[j] = true;
      }
  if (p && k) {
    diag_error(s->d, k->loc,
               "%s() got argument '%s' both by position and by keyword",
               c->name, kw);
    return p;
  }
  return p ? p : k;
}

bool sema_args_done(Sema *s, CallArgs *c, int maxpos) {
  bool ok = true;
  if (c->npos > maxpos) {
    int skip = c->method ? 1 : 0;
    diag_error(s->d, c->pos[maxpos].loc,
               "%s() takes at most %d positional argument%s but %d were given",
               c->name, maxpos - skip, maxpos - skip == 1 ? "" : "s",
               c->npos - skip);
    ok = false;
  }
  for (int j = 0; j < c->nkw; j++)
    if (!c->kwused[j]) {
      diag_error(s->d, c->kw[j].loc,
                 "%s() got an unexpected keyword argument '%s'", c->name,
                 c->kwname[j]);
      ok = false;
    }
  return ok;
}

/* A required argument: reports its absence at the call's name. */
static const SVal *need_arg(Sema *s, CallArgs *c, int i, const char *kw) {
  const SVal *v = sema_arg(s, c, i, kw);
  if (!v)
    diag_error(s->d, c->loc, "%s() is missing its argument '%s'", c->name, kw);
  return v;
}

static bool missing(Sema *s, const char *what) {
  diag_error(s->d, (Loc){0, 0, 0}, "missing %s", what);
  return false;
}

bool sema_int_arg(Sema *s, const SVal *v, const char *what, int64_t *out) {
  if (!v) return missing(s, what);
  if (v->kind == SV_ERROR) return false;
  if (v->kind == SV_INT) {
    if (sym_is_const(v->sym, out)) return true;
    diag_error(s->d, v->loc,
               "%s must be a constant int, but %s is only known at run time",
               what, sym_str(s->a, v->sym));
    return false;
  }
  diag_error(s->d, v->loc, "%s must be an int, got %s", what,
             sv_kind_name(v));
  return false;
}

bool sema_sym_arg(Sema *s, const SVal *v, const char *what, const Sym **out) {
  if (!v) return missing(s, what);
  if (v->kind == SV_ERROR) return false;
  if (v->kind == SV_INT) {
    *out = v->sym;
    return true;
  }
  if (v->kind == SV_TENSOR && sema_val(s, v->ref)->op == OP_PARAM &&
      sema_val(s, v->ref)->rank == 0) {
    diag_error(s->d, v->loc,
               "%s must be an int or a size symbol; a scalar parameter is a "
               "0-dim tensor, not a size",
               what);
    return false;
  }
  diag_error(s->d, v->loc, "%s must be an int, got %s", what,
             sv_kind_name(v));
  return false;
}

bool sema_tensor_arg(Sema *s, const SVal *v, const char *what, IrRef *out) {
  if (!v) return missing(s, what);
  if (v->kind == SV_ERROR) return false;
  if (v->kind == SV_TENSOR) {
    *out = v->ref;
    return true;
  }
  diag_error(s->d, v->loc, "%s must be a tensor, got %s", what,
             sv_kind_name(v));
  return false;
}

/* A single int fills all `max` entries (so pair arguments like stride=2
 * read out[0] and out[1]) and sets *count = 1; a list sets *count to its
 * length. */
bool sema_int_list(Sema *s, const SVal *v, const char *what, int64_t *out,
                   int *count, int max) {
  if (!v) return missing(s, what);
  if (v->kind == SV_ERROR) return false;
  if (v->kind == SV_INT) {
    int64_t x;
    if (!sema_int_arg(s, v, what, &x)) return false;
    for (int i = 0; i < max; i++) out[i] = x;
    *count = 1;
    return true;
  }
  if (v->kind != SV_LIST) {
    diag_error(s->d, v->loc, "%s must be an int or a list of ints, got %s",
               what, sv_kind_name(v));
    return false;
  }
  if (v->nitems > max) {
    diag_error(s->d, v->loc, "%s has %d entries; at most %d are allowed",
               what, v->nitems, max);
    return false;
  }
  for (int i = 0; i < v->nitems; i++)
    if (!sema_int_arg(s, &v->items[i], what, &out[i])) return false;
  *count = v->nitems;
  return true;
}

bool sema_sizes(Sema *s, CallArgs *c, int first, const Sym ***out, int *n) {
  int np = c->npos - first;
  if (np <= 0) {  /* PyTorch: "missing 1 required positional argument" */
    diag_error(s->d, c->loc, "%s() needs sizes (as several ints or one "
               "list; [] for a 0-dim tensor)", c->name);
    return false;
  }
  const SVal *items = &c->pos[first];
  if (np == 1 && items[0].kind == SV_LIST) {
    np = items[0].nitems;
    items = items[0].items;
  }
  if (np > MAX_DIMS) {
    diag_error(s->d, c->loc, "%s() got %d sizes; at most %d dims are supported",
               c->name, np, MAX_DIMS);
    return false;
  }
  const Sym **v = arena_alloc(s->a, (size_t)(np > 0 ? np : 1) * sizeof *v);
  const char *what = arena_printf(s->a, "a size of %s()", c->name);
  for (int i = 0; i < np; i++)
    if (!sema_sym_arg(s, &items[i], what, &v[i])) return false;
  *out = v;
  *n = np;
  return true;
}

/* Constant ints given as varargs or one list (permute's dims). */
static bool int_varargs(Sema *s, CallArgs *c, int first, int64_t *out,
                        int *n) {
  const Sym **v;
  if (!sema_sizes(s, c, first, &v, n)) return false;
  for (int i = 0; i < *n; i++)
    if (!sym_is_const(v[i], &out[i])) {
      diag_error(s->d, c->loc, "%s() needs constant dims, got %s", c->name,
                 sym_str(s->a, v[i]));
      return false;
    }
  return true;
}

/* An optional constant int argument with a default. */
/* How an argument is named in messages: "narrow() argument 'start'". */
static const char *arg_what(Sema *s, const CallArgs *c, const char *kw) {
  return arena_printf(s->a, "%s() argument '%s'", c->name, kw);
}

static bool opt_int(Sema *s, CallArgs *c, int i, const char *kw, int64_t def,
                    int64_t *out) {
  const SVal *v = sema_arg(s, c, i, kw);
  if (!v || v->kind == SV_NONE) {
    *out = def;
    return true;
  }
  return sema_int_arg(s, v, arg_what(s, c, kw), out);
}

static bool req_int(Sema *s, CallArgs *c, int i, const char *kw,
                    int64_t *out) {
  const SVal *v = need_arg(s, c, i, kw);
  return v && sema_int_arg(s, v, arg_what(s, c, kw), out);
}

static bool req_sym(Sema *s, CallArgs *c, int i, const char *kw,
                    const Sym **out) {
  const SVal *v = need_arg(s, c, i, kw);
  return v && sema_sym_arg(s, v, arg_what(s, c, kw), out);
}

static bool req_tensor(Sema *s, CallArgs *c, int i, const char *kw,
                       IrRef *out) {
  const SVal *v = need_arg(s, c, i, kw);
  return v && sema_tensor_arg(s, v, arg_what(s, c, kw), out);
}

/* ------------------------------------------------------------------ */
/* Elementwise ops                                                      */

/* Broadcast shape of the operands; reports at loc on mismatch. */
static bool ew_shape(Sema *s, const IrRef *in, int n, Loc loc,
                     const Sym ***shape, int *rank) {
  GeomCtx c = sema_geom(s, loc);
  const Sym **sh = sema_val(s, in[0])->shape;
  int r = sema_val(s, in[0])->rank;
  for (int i = 1; i < n; i++) {
    IrValue *vi = sema_val(s, in[i]);
    const Sym **out = NULL;
    int nout = 0;
    const char *err = geom_broadcast(&c, sh, r, vi->shape, vi->rank, &out,
                                     &nout);
    if (err) {
      diag_error(s->d, loc, "%s", err);
      for (int j = 0; j < n; j++) sema_note_origin(s, in[j]);
      return false;
    }
    sh = out;
    r = nout;
  }
  *shape = sh;
  *rank = r;
  return true;
}

/* Builds op over the tensors in[0..n): operand i is cast to cdt[i], all
 * are expanded to the broadcast shape; the result has dtype rdt and the
 * TensorIterator layout of the original operands. */
static SVal ew_build(Sema *s, Op op, const IrRef *in, int n, const DType *cdt,
                     DType rdt, int flags, Loc loc) {
  const Sym **shape;
  int rank;
  if (!ew_shape(s, in, n, loc, &shape, &rank)) return sv_error();
  GeomCtx c = sema_geom(s, loc);
  Geom gs[3];
  const Geom *gp[3];
  for (int i = 0; i < n; i++) {
    gs[i] = sema_geom_of(s, in[i]);
    gp[i] = &gs[i];
  }
  Geom out;
  memset(&out, 0, sizeof out);
  geom_elementwise_layout(&c, gp, n, rank, shape, &out);
  out.rank = rank;
  out.shape = syms_copy(s, shape, rank);
  out.offset = sym0(s);
  IrRef args[3];
  for (int i = 0; i < n; i++) {
    IrRef r = sema_cast(s, in[i], cdt[i], loc);
    args[i] = sema_expand_to(s, r, rank, shape, loc);
  }
  IrValue v = value_from_geom(s, op, rdt, &out, loc);
  set_args(s, &v, args, n);
  v.flags = flags;
  return sv_tensor(sema_emit(s, &v), loc);
}

static const char *binop_word(Op op) {
  switch (op) {
  case OP_ADD: return "+";
  case OP_SUB: return "-";
  case OP_MUL: return "*";
  case OP_DIV: return "/";
  case OP_FLOORDIV: return "//";
  case OP_MOD: return "%";
  case OP_POW: return "**";
  case OP_AND: return "&";
  case OP_OR: return "|";
  case OP_XOR: return "^";
  case OP_EQ: return "==";
  case OP_NE: return "!=";
  case OP_LT: return "<";
  case OP_LE: return "<=";
  case OP_GT: return ">";
  case OP_GE: return ">=";
  default: return op_name(op);
  }
}

/* PyTorch's dtype restrictions on binary ops (the op's dtype rule,
 * ops.h); dt is the promoted type. */
static bool binary_check(Sema *s, Op op, DType dt, DType da, DType db,
                         const SVal *b, Loc loc) {
  const char *w = binop_word(op);
  if (op == OP_SUB) {
    if (da == DT_BOOL && db == DT_BOOL) {
      diag_error(s->d, loc, "subtraction of two bool tensors is not "
                            "supported; use ^ (exclusive or) instead");
      return false;
    }
    if (da == DT_BOOL || db == DT_BOOL) {
      diag_error(s->d, loc, "subtraction with a bool tensor is not "
                            "supported; to invert a mask use ~ or "
                            "logical_not()");
      return false;
    }
  }
  switch (op_dtype_rule(op)) {
  case DR_FLOAT_ONLY:
    if (!dtype_is_float(dt)) {
      diag_error(s->d, loc,
                 "%s() needs floating-point tensors, but the operands "
                 "promote to %s; convert with .to(f32) first",
                 w, dtype_name(dt));
      return false;
    }
    return true;
  case DR_BITS:
    if (dtype_is_float(dt)) {
      diag_error(s->d, loc,
                 "operator '%s' needs bool or integer operands, but they "
                 "promote to %s",
                 w, dtype_name(dt));
      return false;
    }
    return true;
  case DR_KEEP:
    if (dt == DT_BOOL && w == op_name(op)) { /* a function: fmod() */
      diag_error(s->d, loc, "%s() is not supported for bool tensors; convert "
                 "with .to(i64) or .to(f32) first", w);
      return false;
    }
    if (dt == DT_BOOL) {
      diag_error(s->d, loc,
                 "%s '%s' is not supported for bool tensors; convert with "
                 ".to(i64) or .to(f32) first",
                 op == OP_POW ? "power" : "operator", w);
      return false;
    }
    if (op == OP_POW && !dtype_is_float(dt) && b->kind == SV_INT) {
      int64_t e;
      if (sym_is_const(b->sym, &e) && e < 0) {
        diag_error(s->d, loc,
                   "integers to negative integer powers are not allowed; "
                   "use a float exponent such as %lld.0",
                   (long long)e);
        return false;
      }
    }
    return true;
  default: return true;
  }
}

/* a and b are tensors or Python numbers. */
static SVal ew_binary(Sema *s, Op op, const SVal *a, const SVal *b, Loc loc) {
  if (a->kind == SV_ERROR || b->kind == SV_ERROR) return sv_error();
  IrRef ra = sema_to_tensor(s, a, "an operand");
  IrRef rb = sema_to_tensor(s, b, "an operand");
  if (ra < 0 || rb < 0) return sv_error();
  SVal ops[2] = {sv_tensor(ra, a->loc), sv_tensor(rb, b->loc)};
  DType dt = sema_result_type(s, ops, 2);
  DType da = sema_val(s, ra)->dtype, db = sema_val(s, rb)->dtype;
  if (!binary_check(s, op, dt, da, db, b, loc)) return sv_error();
  DType rdt = dt;
  if (op_dtype_rule(op) == DR_FLOAT && !dtype_is_float(dt)) dt = rdt = DT_F32;
  if (op_dtype_rule(op) == DR_TO_BOOL) rdt = DT_BOOL;
  IrRef in[2] = {ra, rb};
  DType cdt[2] = {dt, dt};
  return ew_build(s, op, in, 2, cdt, rdt, 0, loc);
}

static SVal ew_unary(Sema *s, Op op, IrRef x, int flags, Loc loc) {
  DType dt = sema_val(s, x)->dtype, cdt = dt, rdt = dt;
  switch (op_dtype_rule(op)) {
  case DR_FLOAT:
    if (!dtype_is_float(dt)) cdt = rdt = DT_F32;
    break;
  case DR_KEEP:
    if (dt == DT_BOOL) {
      if (op == OP_NEG)
        diag_error(s->d, loc, "negation of a bool tensor is not supported; "
                              "use ~ or logical_not()");
      else
        diag_error(s->d, loc,
                   "%s() is not supported for bool tensors; convert with "
                   ".to(i64) or .to(f32) first",
                   op_name(op));
      sema_note_origin(s, x);
      return sv_error();
    }
    break;
  case DR_ANY: break;
  case DR_FLOAT_ONLY:
    if (!dtype_is_float(dt)) {
      diag_error(s->d, loc,
                 "%s() needs a floating-point tensor, got %s; convert with "
                 ".to(f32) first",
                 op_name(op), dtype_name(dt));
      sema_note_origin(s, x);
      return sv_error();
    }
    break;
  case DR_TO_BOOL: rdt = DT_BOOL; break;
  case DR_BITS:
    if (dtype_is_float(dt)) {
      diag_error(s->d, loc,
                 "~ needs a bool or integer tensor, got %s; for a mask "
                 "compare first (x == 0)",
                 dtype_name(dt));
      sema_note_origin(s, x);
      return sv_error();
    }
    break;
  case DR_NA: ICE("%s has no dtype rule", op_name(op));
  }
  return ew_build(s, op, &x, 1, &cdt, rdt, flags, loc);
}

/* ------------------------------------------------------------------ */
/* Compile-time arithmetic on Python numbers and sizes                  */

static bool is_number(const SVal *v) {
  return v->kind == SV_INT || v->kind == SV_FLOAT || v->kind == SV_BOOL;
}

/* A bool or a constant int as an int64. */
static bool const_int(const SVal *v, int64_t *out) {
  if (v->kind == SV_BOOL) {
    *out = v->b;
    return true;
  }
  return v->kind == SV_INT && sym_is_const(v->sym, out);
}

static double num_f(const SVal *v) {
  int64_t i = 0;
  if (v->kind == SV_FLOAT) return v->f;
  const_int(v, &i);
  return (double)i;
}

static double py_fmod(double a, double b) {
  double r = fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

static SVal fold_float(Sema *s, BinOp op, double a, double b, Loc loc) {
  switch (op) {
  case BIN_ADD: return sv_float(a + b, loc);
  case BIN_SUB: return sv_float(a - b, loc);
  case BIN_MUL: return sv_float(a * b, loc);
  case BIN_POW: return sv_float(pow(a, b), loc);
  case BIN_EQ: return sv_bool(a == b, loc);
  case BIN_NE: return sv_bool(a != b, loc);
  case BIN_LT: return sv_bool(a < b, loc);
  case BIN_LE: return sv_bool(a <= b, loc);
  case BIN_GT: return sv_bool(a > b, loc);
  case BIN_GE: return sv_bool(a >= b, loc);
  default: break;
  }
  if (op == BIN_DIV || op == BIN_FLOORDIV || op == BIN_MOD) {
    if (b == 0) {
      diag_error(s->d, loc, "division by zero in a constant expression");
      return sv_error();
    }
    if (op == BIN_DIV) return sv_float(a / b, loc);
    if (op == BIN_FLOORDIV) return sv_float(floor(a / b), loc);
    return sv_float(py_fmod(a, b), loc);
  }
  diag_error(s->d, loc, "operator '%s' is not defined for floats",
             binop_spelling(op));
  return sv_error();
}

static SVal fold_int_const(Sema *s, BinOp op, int64_t a, int64_t b,
                           bool both_bool, Loc loc) {
  switch (op) {
  case BIN_AND: return both_bool ? sv_bool(a & b, loc)
                                 : sv_int(sym_const(s->st, a & b), loc);
  case BIN_OR: return both_bool ? sv_bool(a | b, loc)
                                : sv_int(sym_const(s->st, a | b), loc);
  case BIN_XOR: return both_bool ? sv_bool(a ^ b, loc)
                                 : sv_int(sym_const(s->st, a ^ b), loc);
  case BIN_EQ: return sv_bool(a == b, loc);
  case BIN_NE: return sv_bool(a != b, loc);
  case BIN_LT: return sv_bool(a < b, loc);
  case BIN_LE: return sv_bool(a <= b, loc);
  case BIN_GT: return sv_bool(a > b, loc);
  case BIN_GE: return sv_bool(a >= b, loc);
  case BIN_DIV: return fold_float(s, op, (double)a, (double)b, loc);
  case BIN_POW:
    if (b < 0) return sv_float(pow((double)a, (double)b), loc);
    {
      int64_t r = 1;
      for (int64_t i = 0; i < b && i < 64; i++) r *= a;
      return sv_int(sym_const(s->st, r), loc);
    }
  default: return sv_error(); /* not reached: handled symbolically */
  }
}

/* Both operands are ints (possibly symbolic) or bools. */
static SVal fold_int(Sema *s, BinOp op, const SVal *a, const SVal *b,
                     Loc loc) {
  const Sym *x = a->kind == SV_BOOL ? sym_const(s->st, a->b) : a->sym;
  const Sym *y = b->kind == SV_BOOL ? sym_const(s->st, b->b) : b->sym;
  if ((op == BIN_FLOORDIV || op == BIN_MOD) && sym_is(y, 0)) {
    diag_error(s->d, loc, "division by zero in a constant expression");
    return sv_error();
  }
  switch (op) {
  case BIN_ADD: return sv_int(sym_add(s->st, x, y), loc);
  case BIN_SUB: return sv_int(sym_sub(s->st, x, y), loc);
  case BIN_MUL: return sv_int(sym_mul(s->st, x, y), loc);
  case BIN_FLOORDIV: return sv_int(sym_floordiv(s->st, x, y), loc);
  case BIN_MOD: return sv_int(sym_mod(s->st, x, y), loc);
  default: break;
  }
  int64_t ca, cb;
  if (sym_is_const(x, &ca) && sym_is_const(y, &cb))
    return fold_int_const(s, op, ca, cb,
                          a->kind == SV_BOOL && b->kind == SV_BOOL, loc);
  diag_error(s->d, loc,
             "operator '%s' on sizes is only supported for constants; "
             "sizes allow + - * // %%",
             binop_spelling(op));
  return sv_error();
}

static SVal fold_numbers(Sema *s, BinOp op, const SVal *a, const SVal *b,
                         Loc loc) {
  if (op == BIN_MATMUL) {
    diag_error(s->d, loc, "operator '@' needs tensors, got %s and %s",
               sv_kind_name(a), sv_kind_name(b));
    return sv_error();
  }
  if (a->kind == SV_FLOAT || b->kind == SV_FLOAT) {
    int64_t dummy;
    if ((a->kind == SV_INT && !sym_is_const(a->sym, &dummy)) ||
        (b->kind == SV_INT && !sym_is_const(b->sym, &dummy))) {
      diag_error(s->d, loc, "cannot mix a size symbol with a float in a "
                            "constant expression");
      return sv_error();
    }
    if (op == BIN_AND || op == BIN_OR || op == BIN_XOR) {
      diag_error(s->d, loc, "operator '%s' is not defined for floats",
                 binop_spelling(op));
      return sv_error();
    }
    return fold_float(s, op, num_f(a), num_f(b), loc);
  }
  return fold_int(s, op, a, b, loc);
}

/* ------------------------------------------------------------------ */
/* Views                                                                */

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

static SVal do_view(Sema *s, IrRef x, const Sym *const *sizes, int n,
                    Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  const char *err = geom_view(&c, &in, sizes, n, &out);
  if (err) return geom_fail(s, err, x, loc);
  return sv_tensor(emit_view(s, OP_VIEW, x, &out, out.shape, out.rank, 0, loc),
                   loc);
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
        emit_view(s, OP_VIEW, x, &out, out.shape, out.rank, 0, loc), loc);
  DType dt = sema_val(s, x)->dtype;
  return sv_tensor(emit_copy(s, OP_RESHAPE, x, dt, &out, 0, loc), loc);
}

static SVal do_permute(Sema *s, IrRef x, const int64_t *perm, int n, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  const char *err = geom_permute(&c, &in, perm, n, &out);
  if (err) return geom_fail(s, err, x, loc);
  int64_t p[MAX_DIMS];
  for (int i = 0; i < n; i++) p[i] = wrap_ok(s, perm[i], n);
  return sv_tensor(emit_view_ints(s, OP_PERMUTE, x, &out, p, n, loc), loc);
}

static SVal do_transpose(Sema *s, IrRef x, int64_t a, int64_t b, Loc loc) {
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
      emit_view(s, OP_EXPAND, x, &out, out.shape, out.rank, flags, loc), loc);
}

/* Ranks stay within MAX_DIMS (ir.h TDSL_MAX_RANK). */
static bool rank_ok(Sema *s, int rank, Loc loc) {
  if (rank <= MAX_DIMS) return true;
  diag_error(s->d, loc, "tensors have at most %d dims; this one would have %d",
             MAX_DIMS, rank);
  return false;
}

static SVal do_unsqueeze(Sema *s, IrRef x, int64_t d, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, x), out;
  if (!rank_ok(s, in.rank + 1, loc)) return sv_error();
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
  return sv_tensor(emit_view(s, OP_SELECT, x, &out, attrs, 2, 0, loc), loc);
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
  const Sym *st = slice_bound(s, start, size, sym0(s), sym0(s));
  const Sym *en = slice_bound(s, stop, size, st, size);
  const Sym *attrs[4] = {sym_const(s->st, d), st, en, step};
  return sv_tensor(emit_view(s, OP_SLICE, x, &out, attrs, 4, 0, loc), loc);
}

static bool tensor_recv(Sema *s, CallArgs *c, IrRef *x) {
  return req_tensor(s, c, 0, c->method ? "self" : "input", x);
}

/* ------------------------------------------------------------------ */
/* Call handlers                                                        */

typedef struct Builtin Builtin;
typedef SVal (*Handler)(Sema *s, CallArgs *c, const Builtin *b);
/* BF_TENSORS: binary functions whose operands must both be tensors
 * (PyTorch has no Scalar overload); BF_NUMBER: `other` may be a Python
 * number, `input` must be a tensor. */
enum { BF_FUNC = 1, BF_METHOD = 2, BF_BOTH = 3, BF_TENSORS = 4, BF_NUMBER = 8 };
struct Builtin {
  const char *name;
  Handler fn;
  Op op;
  int flags;
};

static SVal h_unary(Sema *s, CallArgs *c, const Builtin *b) {
  IrRef x;
  if (!tensor_recv(s, c, &x)) return sv_error();
  int flags = 0, maxpos = 1;
  if (b->op == OP_GELU) {
    maxpos = 2;
    const SVal *ap = sema_arg(s, c, 1, "approximate");
    if (ap) {
      if (ap->kind != SV_STR ||
          (strcmp(ap->s, "none") != 0 && strcmp(ap->s, "tanh") != 0)) {
        diag_error(s->d, ap->loc,
                   "gelu() argument 'approximate' must be \"none\" or "
                   "\"tanh\", got %s",
                   ap->kind == SV_STR ? arena_printf(s->a, "\"%s\"", ap->s)
                                      : sv_kind_name(ap));
        return sv_error();
      }
      if (strcmp(ap->s, "tanh") == 0) flags = IRF_TANH;
    }
  }
  if (!sema_args_done(s, c, maxpos)) return sv_error();
  return ew_unary(s, b->op, x, flags, c->loc);
}

/* A number argument (int, float or bool; a size symbol only when it is
 * constant): dflt when absent, or when none_ok and it is None. */
static bool num_arg(Sema *s, CallArgs *c, int i, const char *kw, double dflt,
                    bool none_ok, double *out) {
  const SVal *v = sema_arg(s, c, i, kw);
  int64_t k;
  *out = dflt;
  if (!v || (none_ok && v->kind == SV_NONE)) return true;
  if (v->kind == SV_ERROR) return false;
  if (v->kind == SV_FLOAT || v->kind == SV_BOOL ||
      (v->kind == SV_INT && sym_is_const(v->sym, &k))) {
    *out = num_f(v);
    return true;
  }
  diag_error(s->d, v->loc, "%s() argument '%s' must be a number%s, got %s",
             c->name, kw, none_ok ? " or None" : "", sv_kind_name(v));
  return false;
}

/* The float parameters of the torch.nn.functional activations, in
 * PyTorch's order, with its defaults. */
static const struct {
  Op op;
  const char *name[2];
  double dflt[2];
} act_params[] = {
    {OP_SOFTPLUS, {"beta", "threshold"}, {1, 20}},
    {OP_LEAKY_RELU, {"negative_slope", NULL}, {0.01, 0}},
    {OP_ELU, {"alpha", NULL}, {1, 0}},
    {OP_HARDTANH, {"min_val", "max_val"}, {-1, 1}},
};

/* hardtanh of an integer tensor: PyTorch truncates the bounds to
 * integers (toLong) and rejects negative ones for u8; they are saturated
 * to the dtype's range here (a bound beyond it has no effect). */
static bool hardtanh_int_bounds(Sema *s, CallArgs *c, DType dt, double *fa) {
  if (!dtype_is_int(dt)) return true;
  fa[0] = trunc(fa[0]), fa[1] = trunc(fa[1]);
  if (dt == DT_U8 && (fa[0] < 0 || fa[1] < 0)) {
    diag_error(s->d, c->loc, "hardtanh() of a u8 tensor needs min_val and "
               "max_val >= 0, got %g and %g", fa[0], fa[1]);
    return false;
  }
  int bits = 8 * dtype_size(dt);
  double lo = dtype_is_signed(dt) ? -ldexp(1, bits - 1) : 0;
  double hi = dtype_is_signed(dt) ? ldexp(1, bits - 1) - 1 : ldexp(1, bits) - 1;
  for (int i = 0; i < 2; i++) fa[i] = fa[i] < lo ? lo : fa[i] > hi ? hi : fa[i];
  return true;
}

/* softplus leaky_relu elu hardtanh hardswish hardsigmoid mish: the input,
 * then the op's number parameters (act_params) into fattr. */
static SVal h_act(Sema *s, CallArgs *c, const Builtin *b) {
  IrRef x;
  if (!tensor_recv(s, c, &x)) return sv_error();
  double fa[3] = {0, 0, 0};
  int n = 0;
  for (size_t i = 0; i < sizeof act_params / sizeof act_params[0]; i++)
    if (act_params[i].op == b->op)
      for (; n < 2 && act_params[i].name[n]; n++)
        if (!num_arg(s, c, 1 + n, act_params[i].name[n], act_params[i].dflt[n], false, &fa[n]))
          return sv_error();
  if (!sema_args_done(s, c, 1 + n)) return sv_error();
  DType dt = sema_val(s, x)->dtype;
  if (b->op == OP_HARDTANH && !hardtanh_int_bounds(s, c, dt, fa)) return sv_error();
  SVal r = ew_unary(s, b->op, x, 0, c->loc);
  if (r.kind == SV_TENSOR) memcpy(sema_val(s, r.ref)->fattr, fa, sizeof fa);
  return r;
}

/* nan_to_num(x, nan=0.0, posinf=None, neginf=None): None is the dtype's
 * largest and lowest finite value; integer and bool tensors are returned
 * unchanged (the op leaves them so). */
static SVal h_nan_to_num(Sema *s, CallArgs *c, const Builtin *b) {
  IrRef x;
  if (!tensor_recv(s, c, &x)) return sv_error();
  DType dt = sema_val(s, x)->dtype;
  double big = dt == DT_F16 ? 65504.0 : dt == DT_BF16 ? 0x1.fep127 : dt == DT_F32 ? FLT_MAX : DBL_MAX;
  double fa[3];
  if (!num_arg(s, c, 1, "nan", 0, true, &fa[0]) || !num_arg(s, c, 2, "posinf", big, true, &fa[1]) ||
      !num_arg(s, c, 3, "neginf", -big, true, &fa[2]) || !sema_args_done(s, c, 4))
    return sv_error();
  SVal r = ew_unary(s, b->op, x, 0, c->loc);
  if (r.kind == SV_TENSOR) memcpy(sema_val(s, r.ref)->fattr, fa, sizeof fa);
  return r;
}

/* lerp(input, end, weight): float tensors of one dtype (PyTorch does
 * not promote them); weight a tensor of that dtype or a number. */
static SVal h_lerp(Sema *s, CallArgs *c, const Builtin *b) {
  IrRef in[3];
  if (!tensor_recv(s, c, &in[0]) || !req_tensor(s, c, 1, "end", &in[1])) return sv_error();
  const SVal *w = need_arg(s, c, 2, "weight");
  if (!w || !sema_args_done(s, c, 3) || w->kind == SV_ERROR) return sv_error();
  DType dt = sema_val(s, in[0])->dtype;
  if (!dtype_is_float(dt)) {
    diag_error(s->d, c->loc, "lerp() needs a floating-point tensor, got %s; "
               "convert with .to(f32) first", dtype_name(dt));
    sema_note_origin(s, in[0]);
    return sv_error();
  }
  double fa[3] = {0, 0, 0};
  int n = 2;
  int64_t k;
  if (w->kind == SV_TENSOR) {
    in[n++] = w->ref;
  } else if (w->kind == SV_FLOAT || w->kind == SV_BOOL ||
             (w->kind == SV_INT && sym_is_const(w->sym, &k))) {
    fa[0] = num_f(w);
  } else {
    diag_error(s->d, w->loc, "lerp() argument 'weight' must be a tensor or a "
               "number, got %s", sv_kind_name(w));
    return sv_error();
  }
  static const char *names[3] = {"input", "end", "weight"};
  for (int i = 1; i < n; i++)
    if (sema_val(s, in[i])->dtype != dt) {
      diag_error(s->d, c->loc, "lerp() needs '%s' of the dtype of 'input' (%s), "
                 "got %s", names[i], dtype_name(dt),
                 dtype_name(sema_val(s, in[i])->dtype));
      sema_note_origin(s, in[i]);
      return sv_error();
    }
  DType cdt[3] = {dt, dt, dt};
  SVal r = ew_build(s, b->op, in, n, cdt, dt, n == 3 ? IRF_WEIGHT : 0, c->loc);
  if (r.kind == SV_TENSOR) memcpy(sema_val(s, r.ref)->fattr, fa, sizeof fa);
  return r;
}

static SVal h_binary(Sema *s, CallArgs *c, const Builtin *b) {
  const char *second = b->op == OP_POW ? "exponent" : "other";
  const SVal *x = need_arg(s, c, 0, c->method ? "self" : "input");
  const SVal *y = need_arg(s, c, 1, second);
  if (!x || !y || !sema_args_done(s, c, 2)) return sv_error();
  if (x->kind == SV_ERROR || y->kind == SV_ERROR) return sv_error();
  if (b->flags & (BF_TENSORS | BF_NUMBER))
    for (int i = 0; i < 2; i++) {
      const SVal *v = i ? y : x;
      if (v->kind == SV_TENSOR || (i == 1 && (b->flags & BF_NUMBER) && is_number(v)))
        continue;
      diag_error(s->d, v->loc, "%s() argument '%s' must be a tensor%s, got %s",
                 c->name, i ? "other" : "input",
                 i && (b->flags & BF_NUMBER) ? " or a number" : "", sv_kind_name(v));
      return sv_error();
    }
  /* maximum/minimum take a Python number for either operand (spec §4.3;
   * torch.maximum itself takes tensors only), which promotes as a number
   * would in `x + 2`; one operand must be a tensor. */
  else if (b->op != OP_POW)
    for (int i = 0; i < 2; i++) {
      const SVal *v = i ? y : x, *other = i ? x : y;
      if (v->kind == SV_TENSOR || (is_number(v) && other->kind == SV_TENSOR))
        continue;
      diag_error(s->d, v->loc, "%s() needs a tensor and a tensor or a "
                 "number, got %s and %s", c->name, sv_kind_name(x),
                 sv_kind_name(y));
      return sv_error();
    }
  return ew_binary(s, b->op, x, y, c->loc);
}

static SVal h_where(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  /* x.where(cond, y) is where(cond, x, y). */
  const SVal *cond, *x, *y;
  if (c->method) {
    x = need_arg(s, c, 0, "self");
    cond = need_arg(s, c, 1, "condition");
    y = need_arg(s, c, 2, "other");
  } else {
    cond = need_arg(s, c, 0, "condition");
    x = need_arg(s, c, 1, "input");
    y = need_arg(s, c, 2, "other");
  }
  if (!cond || !x || !y || !sema_args_done(s, c, 3)) return sv_error();
  IrRef in[3];
  in[0] = sema_to_tensor(s, cond, "where() condition");
  in[1] = sema_to_tensor(s, x, "where() input");
  in[2] = sema_to_tensor(s, y, "where() other");
  if (in[0] < 0 || in[1] < 0 || in[2] < 0) return sv_error();
  DType cd = sema_val(s, in[0])->dtype;
  if (cd != DT_BOOL) {
    diag_error(s->d, c->loc,
               "where() needs a bool condition, got %s; compare first "
               "(c != 0)",
               dtype_name(cd));
    return sv_error();
  }
  SVal ops[2] = {sv_tensor(in[1], x->loc), sv_tensor(in[2], y->loc)};
  DType dt = sema_result_type(s, ops, 2);
  DType cdt[3] = {DT_BOOL, dt, dt};
  return ew_build(s, OP_WHERE, in, 3, cdt, dt, 0, c->loc);
}

/* PyTorch (2.x) checks a number bound of an integer clamp against the
 * result dtype's range: a min below it or a max above it has no effect
 * and is dropped (*keep = false); a min above it or a max below it is an
 * error. Symbolic ints and tensor bounds are not checked. */
static bool clamp_bound_in_range(Sema *s, const SVal *v, bool is_min,
                                 DType dt, Loc loc, bool *keep) {
  int64_t x;
  if (!dtype_is_int(dt) || !is_number(v) || !const_int(v, &x)) return true;
  int bits = 8 * dtype_size(dt);
  if (bits == 64) return true;  /* a literal always fits i64 */
  int64_t lo = dtype_is_signed(dt) ? -((int64_t)1 << (bits - 1)) : 0;
  int64_t hi = dtype_is_signed(dt) ? ((int64_t)1 << (bits - 1)) - 1
                                   : ((int64_t)1 << bits) - 1;
  if (x >= lo && x <= hi) return true;
  if (is_min ? x < lo : x > hi) {
    *keep = false;
    return true;
  }
  diag_error(s->d, loc, "clamp() %s value %lld is outside the range of the "
             "result dtype %s", is_min ? "min" : "max", (long long)x,
             dtype_name(dt));
  return false;
}

/* clamp's result dtype.  A number bound beside a 0-dim tensor bound
 * selects PyTorch's Number overload, which reads the tensor as a number
 * (item()): it promotes as a Python number of its category would, so
 * clamp(i32 x, 0, f64 0-dim) is f32 where the Tensor overload (two tensor
 * bounds, or one) would give f64. */
static DType clamp_result_type(Sema *s, const SVal *ops, int n) {
  SVal t[3];
  memcpy(t, ops, sizeof(SVal) * (size_t)n);
  bool mixed = n == 3 && is_number(&t[1]) != is_number(&t[2]);
  for (int i = 1; mixed && i < n; i++) {
    if (is_number(&t[i])) continue;
    DType bt = sema_val(s, t[i].ref)->dtype;
    t[i].kind = dtype_is_float(bt) ? SV_FLOAT
                : bt == DT_BOOL    ? SV_BOOL
                                   : SV_INT;
  }
  return sema_result_type(s, t, n);
}

static SVal h_clamp(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (!tensor_recv(s, c, &x)) return sv_error();
  const SVal *lo = sema_arg(s, c, 1, "min");
  const SVal *hi = sema_arg(s, c, 2, "max");
  if (!sema_args_done(s, c, 3)) return sv_error();
  if (lo && lo->kind == SV_NONE) lo = NULL;
  if (hi && hi->kind == SV_NONE) hi = NULL;
  if (!lo && !hi) {
    diag_error(s->d, c->loc, "clamp() needs at least one of 'min' and 'max'");
    return sv_error();
  }
  /* One result_type over all three (PyTorch's clamp), then max/min. */
  SVal ops[3];
  int n = 0;
  ops[n++] = sv_tensor(x, c->loc);
  if (lo) ops[n++] = *lo;
  if (hi) ops[n++] = *hi;
  for (int i = 1; i < n; i++)
    if (!is_number(&ops[i]) && ops[i].kind != SV_TENSOR) {
      diag_error(s->d, ops[i].loc, "clamp() bounds must be numbers or "
                                   "tensors, got %s",
                 sv_kind_name(&ops[i]));
      return sv_error();
    }
  /* PyTorch's clamp has a Number-bounds and a Tensor-bounds overload:
   * two bounds must both be numbers or both tensors (a 0-dim tensor also
   * passes as a number). */
  if (n == 3 && is_number(&ops[1]) != is_number(&ops[2]) &&
      sema_val(s, (is_number(&ops[1]) ? ops[2] : ops[1]).ref)->rank > 0) {
    diag_error(s->d, c->loc, "clamp() bounds must both be numbers or both "
               "tensors, got %s and %s; convert the number with tensor() or "
               "use maximum()/minimum()",
               sv_kind_name(&ops[1]), sv_kind_name(&ops[2]));
    return sv_error();
  }
  DType dt = clamp_result_type(s, ops, n);
  bool keep[3] = {true, true, true};
  for (int i = 1; i < n; i++)
    if (!clamp_bound_in_range(s, &ops[i], lo && i == 1, dt, c->loc, &keep[i]))
      return sv_error();
  SVal r = sv_tensor(sema_cast(s, x, dt, c->loc), c->loc);
  for (int i = 1; i < n; i++) {
    if (!keep[i]) continue;
    IrRef bnd = sema_to_tensor(s, &ops[i], "a clamp() bound");
    if (bnd < 0) return sv_error();
    SVal bv = sv_tensor(sema_cast(s, bnd, dt, c->loc), ops[i].loc);
    Op op = (lo && i == 1) ? OP_MAXIMUM : OP_MINIMUM;
    r = ew_binary(s, op, &r, &bv, c->loc);
    if (r.kind == SV_ERROR) return r;
  }
  return r;
}

static SVal h_view(Sema *s, CallArgs *c, const Builtin *b) {
  IrRef x;
  const Sym **sizes;
  int n;
  if (!tensor_recv(s, c, &x) || !sema_sizes(s, c, 1, &sizes, &n) ||
      !sema_args_done(s, c, c->npos))
    return sv_error();
  if (b->op == OP_RESHAPE) return do_reshape(s, x, sizes, n, c->loc);
  return do_view(s, x, sizes, n, c->loc);
}

static SVal h_flatten(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t st, en;
  if (!tensor_recv(s, c, &x) || !opt_int(s, c, 1, "start_dim", 0, &st) ||
      !opt_int(s, c, 2, "end_dim", -1, &en) || !sema_args_done(s, c, 3))
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
  if (!tensor_recv(s, c, &x) || !req_int(s, c, 1, "dim", &d)) return sv_error();
  const SVal *sz = need_arg(s, c, 2, "sizes");
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
  if (!tensor_recv(s, c, &x) || !req_int(s, c, 1, "dim0", &a) ||
      !req_int(s, c, 2, "dim1", &d) || !sema_args_done(s, c, 3))
    return sv_error();
  return do_transpose(s, x, a, d, c->loc);
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
  return do_transpose(s, x, 0, 1, loc);
}

static SVal h_t(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (!tensor_recv(s, c, &x) || !sema_args_done(s, c, 1)) return sv_error();
  return do_t(s, x, c->loc);
}

static SVal h_permute(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t p[MAX_DIMS];
  int n;
  if (!tensor_recv(s, c, &x) || !int_varargs(s, c, 1, p, &n) ||
      !sema_args_done(s, c, c->npos))
    return sv_error();
  return do_permute(s, x, p, n, c->loc);
}

static SVal h_expand(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  const Sym **sizes;
  int n;
  if (!tensor_recv(s, c, &x) || !sema_sizes(s, c, 1, &sizes, &n) ||
      !sema_args_done(s, c, c->npos))
    return sv_error();
  return do_expand(s, x, sizes, n, 0, c->loc);
}

static SVal h_expand_as(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x, y;
  if (!tensor_recv(s, c, &x) || !req_tensor(s, c, 1, "other", &y) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  IrValue *v = sema_val(s, y);
  return do_expand(s, x, v->shape, v->rank, 0, c->loc);
}

static SVal h_unsqueeze(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t d;
  if (!tensor_recv(s, c, &x) || !req_int(s, c, 1, "dim", &d) ||
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
  if (!tensor_recv(s, c, &x)) return sv_error();
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
  if (!tensor_recv(s, c, &v->x) || !req_int(s, c, 1, names[0], &v->d) ||
      !req_sym(s, c, 2, names[1], &v->a) || !req_sym(s, c, 3, names[2], &v->b) ||
      !sema_args_done(s, c, 4))
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
  return sv_tensor(emit_view(s, OP_SLICE, v.x, &v.out, attrs, 4, 0, c->loc),
                   c->loc);
}

static SVal h_select(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t d;
  const Sym *i;
  if (!tensor_recv(s, c, &x) || !req_int(s, c, 1, "dim", &d) ||
      !req_sym(s, c, 2, "index", &i) || !sema_args_done(s, c, 3))
    return sv_error();
  return do_select(s, x, d, i, c->loc);
}

static SVal h_diagonal(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  int64_t o, d1, d2;
  if (!tensor_recv(s, c, &x) || !opt_int(s, c, 1, "offset", 0, &o) ||
      !opt_int(s, c, 2, "dim1", 0, &d1) || !opt_int(s, c, 3, "dim2", 1, &d2) ||
      !sema_args_done(s, c, 4))
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
  return sv_tensor(emit_view(s, OP_UNFOLD, v.x, &v.out, attrs, 3, 0, c->loc),
                   c->loc);
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
  if (!tensor_recv(s, c, &x)) return sv_error();
  const SVal *sz = need_arg(s, c, 1, "size");
  const SVal *sd = need_arg(s, c, 2, "stride");
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
  return sv_tensor(emit_view(s, OP_AS_STRIDED, x, &out, NULL, 0, 0, c->loc),
                   c->loc);
}

/* ------------------------------------------------------------------ */
/* Copies                                                               */

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
  return sv_tensor(emit_copy(s, OP_COPY, x, dt, &out, flags, loc), loc);
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
  if (!tensor_recv(s, c, &x)) return sv_error();
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
  if (!tensor_recv(s, c, &x) || !sema_args_done(s, c, 1)) return sv_error();
  GeomCtx g = sema_geom(s, c->loc);
  Geom in = sema_geom_of(s, x), out;
  memset(&out, 0, sizeof out);
  geom_preserve(&g, &in, &out);
  out.rank = in.rank;
  out.shape = in.shape;
  DType dt = sema_val(s, x)->dtype;
  return sv_tensor(emit_copy(s, OP_COPY, x, dt, &out, IRF_CLONE, c->loc),
                   c->loc);
}

/* x.to(DTYPE), x.to(FORMAT), x.to(DTYPE, FORMAT), dtype=/memory_format=. */
static SVal h_to(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x;
  if (!tensor_recv(s, c, &x)) return sv_error();
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
    x = emit_cast(s, x, dt, 0, c->loc);
  return sv_tensor(x, c->loc);
}

/* ------------------------------------------------------------------ */
/* Handlers forwarding to sema_ops.c                                    */

static SVal h_reduce(Sema *s, CallArgs *c, const Builtin *b) {
  return sema_reduce(s, b->op, c);
}
static SVal h_softmax(Sema *s, CallArgs *c, const Builtin *b) {
  return sema_softmax(s, b->op, c);
}
static SVal h_layer_norm(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  return sema_layer_norm(s, c);
}
static SVal h_conv2d(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  return sema_conv2d(s, c);
}
static SVal h_pool(Sema *s, CallArgs *c, const Builtin *b) {
  return sema_pool(s, b->op, c);
}
static SVal h_factory(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  return sema_factory(s, c);
}
static SVal h_matmul(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x, y;
  if (!tensor_recv(s, c, &x) || !req_tensor(s, c, 1, "other", &y) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  return sema_matmul(s, x, y, c->loc);
}

static const Builtin builtins[] = {
    {"abs", h_unary, OP_ABS, BF_BOTH},
    {"neg", h_unary, OP_NEG, BF_BOTH},
    {"exp", h_unary, OP_EXP, BF_BOTH},
    {"log", h_unary, OP_LOG, BF_BOTH},
    {"log1p", h_unary, OP_LOG1P, BF_BOTH},
    {"expm1", h_unary, OP_EXPM1, BF_BOTH},
    {"sqrt", h_unary, OP_SQRT, BF_BOTH},
    {"rsqrt", h_unary, OP_RSQRT, BF_BOTH},
    {"sin", h_unary, OP_SIN, BF_BOTH},
    {"cos", h_unary, OP_COS, BF_BOTH},
    {"tanh", h_unary, OP_TANH, BF_BOTH},
    {"sigmoid", h_unary, OP_SIGMOID, BF_BOTH},
    {"relu", h_unary, OP_RELU, BF_BOTH},
    {"gelu", h_unary, OP_GELU, BF_BOTH},
    {"silu", h_unary, OP_SILU, BF_BOTH},
    {"erf", h_unary, OP_ERF, BF_BOTH},
    {"floor", h_unary, OP_FLOOR, BF_BOTH},
    {"ceil", h_unary, OP_CEIL, BF_BOTH},
    {"round", h_unary, OP_ROUND, BF_BOTH},
    {"sign", h_unary, OP_SIGN, BF_BOTH},
    {"reciprocal", h_unary, OP_RECIPROCAL, BF_BOTH},
    {"logical_not", h_unary, OP_LOGICAL_NOT, BF_BOTH},
    {"tan", h_unary, OP_TAN, BF_BOTH},
    {"asin", h_unary, OP_ASIN, BF_BOTH},
    {"acos", h_unary, OP_ACOS, BF_BOTH},
    {"atan", h_unary, OP_ATAN, BF_BOTH},
    {"sinh", h_unary, OP_SINH, BF_BOTH},
    {"cosh", h_unary, OP_COSH, BF_BOTH},
    {"asinh", h_unary, OP_ASINH, BF_BOTH},
    {"acosh", h_unary, OP_ACOSH, BF_BOTH},
    {"atanh", h_unary, OP_ATANH, BF_BOTH},
    {"exp2", h_unary, OP_EXP2, BF_BOTH},
    {"log2", h_unary, OP_LOG2, BF_BOTH},
    {"log10", h_unary, OP_LOG10, BF_BOTH},
    {"trunc", h_unary, OP_TRUNC, BF_BOTH},
    {"frac", h_unary, OP_FRAC, BF_BOTH},
    {"atan2", h_binary, OP_ATAN2, BF_BOTH | BF_TENSORS},
    {"softplus", h_act, OP_SOFTPLUS, BF_FUNC},
    {"leaky_relu", h_act, OP_LEAKY_RELU, BF_FUNC},
    {"elu", h_act, OP_ELU, BF_FUNC},
    {"hardtanh", h_act, OP_HARDTANH, BF_FUNC},
    {"hardswish", h_act, OP_HARDSWISH, BF_FUNC},
    {"hardsigmoid", h_act, OP_HARDSIGMOID, BF_FUNC},
    {"mish", h_act, OP_MISH, BF_FUNC},
    {"isnan", h_unary, OP_ISNAN, BF_BOTH},
    {"isinf", h_unary, OP_ISINF, BF_BOTH},
    {"isfinite", h_unary, OP_ISFINITE, BF_BOTH},
    {"nan_to_num", h_nan_to_num, OP_NAN_TO_NUM, BF_BOTH},
    {"hypot", h_binary, OP_HYPOT, BF_BOTH | BF_TENSORS},
    {"fmod", h_binary, OP_FMOD, BF_BOTH | BF_NUMBER},
    {"remainder", h_binary, OP_MOD, BF_BOTH},
    {"copysign", h_binary, OP_COPYSIGN, BF_BOTH | BF_NUMBER},
    {"logaddexp", h_binary, OP_LOGADDEXP, BF_BOTH | BF_TENSORS},
    {"lerp", h_lerp, OP_LERP, BF_BOTH},
    {"maximum", h_binary, OP_MAXIMUM, BF_BOTH},
    {"minimum", h_binary, OP_MINIMUM, BF_BOTH},
    {"pow", h_binary, OP_POW, BF_BOTH},
    {"where", h_where, OP_WHERE, BF_BOTH},
    {"clamp", h_clamp, OP_COUNT, BF_BOTH},
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
    {"sum", h_reduce, OP_SUM, BF_BOTH},
    {"mean", h_reduce, OP_MEAN, BF_BOTH},
    {"prod", h_reduce, OP_PROD, BF_BOTH},
    {"amax", h_reduce, OP_AMAX, BF_BOTH},
    {"amin", h_reduce, OP_AMIN, BF_BOTH},
    {"argmax", h_reduce, OP_ARGMAX, BF_BOTH},
    {"argmin", h_reduce, OP_ARGMIN, BF_BOTH},
    {"softmax", h_softmax, OP_SOFTMAX, BF_BOTH},
    {"log_softmax", h_softmax, OP_LOG_SOFTMAX, BF_BOTH},
    {"layer_norm", h_layer_norm, OP_LAYER_NORM, BF_FUNC},
    {"matmul", h_matmul, OP_MATMUL, BF_BOTH},
    {"conv2d", h_conv2d, OP_CONV2D, BF_FUNC},
    {"max_pool2d", h_pool, OP_MAX_POOL2D, BF_FUNC},
    {"avg_pool2d", h_pool, OP_AVG_POOL2D, BF_FUNC},
    {"adaptive_avg_pool2d", h_pool, OP_ADAPTIVE_AVG_POOL2D, BF_FUNC},
    {"tensor", h_factory, OP_TENSOR, BF_FUNC},
    {"zeros", h_factory, OP_FULL, BF_FUNC},
    {"ones", h_factory, OP_FULL, BF_FUNC},
    {"full", h_factory, OP_FULL, BF_FUNC},
    {"arange", h_factory, OP_ARANGE, BF_FUNC},
};

static const Builtin *find_builtin(const char *name) {
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (strcmp(builtins[i].name, name) == 0) return &builtins[i];
  return NULL;
}

static SVal unknown_call(Sema *s, const char *name, bool method, Loc loc) {
  const char *best = NULL;
  int bestd = 99;
  int want = method ? BF_METHOD : BF_FUNC;
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (builtins[i].flags & want) suggest(name, builtins[i].name, &best, &bestd);
  if (method)
    diag_error(s->d, loc, "unknown method '%s' of a tensor%s", name,
               did_you_mean(s, best));
  else
    diag_error(s->d, loc, "unknown function '%s'%s", name,
               did_you_mean(s, best));
  return sv_error();
}

/* ------------------------------------------------------------------ */
/* Expressions                                                          */

static SVal eval(Sema *s, const Expr *e);

static SVal eval_name(Sema *s, const Expr *e) {
  const char *n = e->u.str;
  int i = find_name(s, n);
  if (i >= 0) {
    SVal v = s->namevals[i];
    if (v.kind == SV_ERROR) return v;
    v.loc = e->loc;
    return v;
  }
  for (int j = 0; j < s->k->nsyms; j++)
    if (s->k->syms[j].kind == SYMK_SIZE && strcmp(s->k->syms[j].name, n) == 0)
      return sv_int(sym_var(s->st, j, s->k->syms[j].name), e->loc);
  DType dt = dtype_from_name(n);
  if (dt != DT_NONE) {
    SVal v = sv_make(SV_DTYPE, e->loc);
    v.dt = dt;
    return v;
  }
  if (strcmp(n, "contiguous") == 0 || strcmp(n, "channels_last") == 0) {
    SVal v = sv_make(SV_LAYOUT, e->loc);
    v.layout = n[0] == 'c' && n[1] == 'o' ? LAYOUT_CONTIGUOUS
                                          : LAYOUT_CHANNELS_LAST;
    return v;
  }
  const char *best = NULL;
  int bestd = 99;
  for (int j = 0; j < s->nnames; j++) suggest(n, s->names[j], &best, &bestd);
  for (int j = 0; j < s->k->nsyms; j++)
    if (s->k->syms[j].kind == SYMK_SIZE)
      suggest(n, s->k->syms[j].name, &best, &bestd);
  diag_error(s->d, e->loc, "unknown name '%s'%s", n, did_you_mean(s, best));
  return sv_error();
}

static Op binop_to_op(BinOp op) {
  switch (op) {
  case BIN_ADD: return OP_ADD;
  case BIN_SUB: return OP_SUB;
  case BIN_MUL: return OP_MUL;
  case BIN_DIV: return OP_DIV;
  case BIN_FLOORDIV: return OP_FLOORDIV;
  case BIN_MOD: return OP_MOD;
  case BIN_POW: return OP_POW;
  case BIN_AND: return OP_AND;
  case BIN_OR: return OP_OR;
  case BIN_XOR: return OP_XOR;
  case BIN_EQ: return OP_EQ;
  case BIN_NE: return OP_NE;
  case BIN_LT: return OP_LT;
  case BIN_LE: return OP_LE;
  case BIN_GT: return OP_GT;
  case BIN_GE: return OP_GE;
  case BIN_MATMUL: return OP_MATMUL;
  }
  ICE("bad binary operator %d", (int)op);
}

static SVal eval_binary(Sema *s, const Expr *e) {
  SVal a = eval(s, e->u.bin.lhs);
  SVal b = eval(s, e->u.bin.rhs);
  if (a.kind == SV_ERROR || b.kind == SV_ERROR) return sv_error();
  BinOp op = e->u.bin.op;
  bool ta = a.kind == SV_TENSOR, tb = b.kind == SV_TENSOR;
  if ((!ta && !is_number(&a)) || (!tb && !is_number(&b))) {
    diag_error(s->d, e->loc, "operator '%s' cannot be applied to %s and %s",
               binop_spelling(op), sv_kind_name(&a), sv_kind_name(&b));
    return sv_error();
  }
  if (!ta && !tb) return fold_numbers(s, op, &a, &b, e->loc);
  if (op == BIN_MATMUL) {
    if (!ta || !tb) {
      diag_error(s->d, e->loc, "operator '@' needs two tensors, got %s and %s",
                 sv_kind_name(&a), sv_kind_name(&b));
      return sv_error();
    }
    return sema_matmul(s, a.ref, b.ref, e->loc);
  }
  return ew_binary(s, binop_to_op(op), &a, &b, e->loc);
}

static SVal eval_unary(Sema *s, const Expr *e) {
  SVal a = eval(s, e->u.un.operand);
  if (a.kind == SV_ERROR) return a;
  bool neg = e->u.un.op == UN_NEG;
  if (a.kind == SV_TENSOR)
    return ew_unary(s, neg ? OP_NEG : OP_BITNOT, a.ref, 0, e->loc);
  if (a.kind == SV_FLOAT) {
    if (neg) return sv_float(-a.f, e->loc);
    diag_error(s->d, e->loc, "operator '~' is not defined for floats");
    return sv_error();
  }
  if (a.kind == SV_INT || a.kind == SV_BOOL) {
    const Sym *x = a.kind == SV_BOOL ? sym_const(s->st, a.b) : a.sym;
    if (neg) return sv_int(sym_neg(s->st, x), e->loc);
    int64_t v;
    if (sym_is_const(x, &v)) return sv_int(sym_const(s->st, ~v), e->loc);
    diag_error(s->d, e->loc, "operator '~' on a size symbol is not supported");
    return sv_error();
  }
  diag_error(s->d, e->loc, "operator '%s' cannot be applied to %s",
             neg ? "-" : "~", sv_kind_name(&a));
  return sv_error();
}

static SVal eval_attr(Sema *s, const Expr *e) {
  SVal a = eval(s, e->u.attr.recv);
  if (a.kind == SV_ERROR) return a;
  const char *n = e->u.attr.name;
  bool is_t = strcmp(n, "T") == 0, is_mt = strcmp(n, "mT") == 0;
  if (!is_t && !is_mt) {
    const char *best = NULL;
    int bestd = 99;
    suggest(n, "T", &best, &bestd);
    suggest(n, "mT", &best, &bestd);
    diag_error(s->d, e->loc, "unknown attribute '%s' of a tensor%s", n,
               did_you_mean(s, best));
    return sv_error();
  }
  if (a.kind != SV_TENSOR) {
    diag_error(s->d, e->loc, ".%s needs a tensor, got %s", n,
               sv_kind_name(&a));
    return sv_error();
  }
  int rank = sema_val(s, a.ref)->rank;
  if (is_mt) {
    /* PyTorch keeps .mT of a 0-dim tensor as the identity (deprecated),
     * but rejects it on 1-D tensors. */
    if (rank == 0) return sv_tensor(a.ref, e->loc);
    if (rank < 2) {
      diag_error(s->d, e->loc,
                 ".mT needs a tensor with at least 2 dims, but this one has "
                 "shape %s",
                 sema_shape_str(s, a.ref));
      sema_note_origin(s, a.ref);
      return sv_error();
    }
    return do_transpose(s, a.ref, -2, -1, e->loc);
  }
  if (rank < 2) return sv_tensor(a.ref, e->loc);
  int64_t p[MAX_DIMS];
  for (int i = 0; i < rank; i++) p[i] = rank - 1 - i;
  return do_permute(s, a.ref, p, rank, e->loc);
}

static SVal eval_list(Sema *s, const Expr *e) {
  SVal v = sv_make(SV_LIST, e->loc);
  v.nitems = e->u.list.nitems;
  v.items = arena_alloc(s->a, (size_t)(v.nitems + 1) * sizeof *v.items);
  bool err = false;
  for (int i = 0; i < v.nitems; i++) {
    v.items[i] = eval(s, e->u.list.items[i]);
    if (v.items[i].kind == SV_ERROR) err = true;
  }
  return err ? sv_error() : v;
}

static SVal eval_slice(Sema *s, const Expr *e) {
  SVal v = sv_make(SV_SLICE, e->loc);
  v.nitems = 3;
  v.items = arena_alloc(s->a, 3 * sizeof *v.items);
  const Expr *parts[3] = {e->u.slice.start, e->u.slice.stop, e->u.slice.step};
  for (int i = 0; i < 3; i++) {
    v.items[i] = parts[i] ? eval(s, parts[i]) : sv_make(SV_NONE, e->loc);
    if (v.items[i].kind == SV_ERROR) return sv_error();
  }
  return v;
}

/* ---- indexing ---- */

static bool slice_part(Sema *s, const SVal *v, const char *what,
                       const Sym **out) {
  if (v->kind == SV_NONE) {
    *out = NULL;
    return true;
  }
  return sema_sym_arg(s, v, what, out);
}

/* Applies one index item at dim *d of cur. */
static SVal index_item(Sema *s, IrRef cur, const SVal *it, int *d) {
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
static int index_check(Sema *s, IrRef x, const SVal *it, int n, Loc loc,
                       int *ellipsis) {
  int consumed = 0;
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
    case SV_TENSOR:
      diag_error(s->d, it[i].loc,
                 "indexing with a tensor is not supported; use ints, slices, "
                 "None and ...");
      return -1;
    default:
      diag_error(s->d, it[i].loc,
                 "an index must be an int, a slice, None or ..., got %s",
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

static SVal eval_index(Sema *s, const Expr *e) {
  SVal base = eval(s, e->u.index.base);
  int n = e->u.index.nitems;
  SVal *it = arena_alloc(s->a, (size_t)(n + 1) * sizeof *it);
  bool err = base.kind == SV_ERROR;
  for (int i = 0; i < n; i++) {
    const Expr *x = e->u.index.items[i];
    if (x->kind == EX_SLICE)
      it[i] = eval_slice(s, x);
    else if (x->kind == EX_ELLIPSIS)
      it[i] = sv_make(SV_ELLIPSIS, x->loc);
    else
      it[i] = eval(s, x);
    if (it[i].kind == SV_ERROR) err = true;
  }
  if (err) return sv_error();
  if (base.kind != SV_TENSOR) {
    diag_error(s->d, e->loc, "only tensors can be indexed, got %s",
               sv_kind_name(&base));
    return sv_error();
  }
  int ell;
  int consumed = index_check(s, base.ref, it, n, e->loc, &ell);
  if (consumed < 0) return sv_error();
  int rank = sema_val(s, base.ref)->rank;
  SVal cur = base;
  int d = 0;
  for (int i = 0; i < n && cur.kind != SV_ERROR; i++) {
    if (i == ell) {
      d += rank - consumed; /* the ellipsis stands for the unindexed dims */
      continue;
    }
    cur = index_item(s, cur.ref, &it[i], &d);
  }
  if (cur.kind == SV_TENSOR) cur.loc = e->loc;
  return cur;
}

/* ---- calls ---- */

static bool build_args(Sema *s, const Expr *e, SVal *recv, CallArgs *c) {
  memset(c, 0, sizeof *c);
  c->name = e->u.call.name;
  c->loc = e->loc;
  c->method = recv != NULL;
  int na = e->u.call.nargs, npos = c->method ? 1 : 0, nkw = 0;
  for (int i = 0; i < na; i++) e->u.call.args[i].kw ? nkw++ : npos++;
  c->pos = arena_alloc(s->a, (size_t)(npos + 1) * sizeof *c->pos);
  c->kw = arena_alloc(s->a, (size_t)(nkw + 1) * sizeof *c->kw);
  c->kwname = arena_alloc(s->a, (size_t)(nkw + 1) * sizeof *c->kwname);
  c->kwused = arena_alloc(s->a, (size_t)(nkw + 1) * sizeof *c->kwused);
  bool ok = true;
  if (recv) c->pos[c->npos++] = *recv;
  for (int i = 0; i < na; i++) {
    const Arg *a = &e->u.call.args[i];
    SVal v = eval(s, a->value);
    if (v.kind == SV_ERROR) ok = false;
    if (!a->kw) {
      c->pos[c->npos++] = v;
      continue;
    }
    for (int j = 0; j < c->nkw; j++)
      if (strcmp(c->kwname[j], a->kw) == 0) {
        diag_error(s->d, a->loc, "keyword argument '%s' given twice", a->kw);
        ok = false;
      }
    c->kwname[c->nkw] = a->kw;
    c->kw[c->nkw++] = v;
  }
  return ok;
}

static SVal eval_call(Sema *s, const Expr *e) {
  SVal recv;
  bool method = e->u.call.recv != NULL;
  if (method) recv = eval(s, e->u.call.recv);
  CallArgs c;
  bool ok = build_args(s, e, method ? &recv : NULL, &c);
  if ((method && recv.kind == SV_ERROR) || !ok) return sv_error();
  const char *n = e->u.call.name;
  const Builtin *b = find_builtin(n);
  if (method && recv.kind != SV_TENSOR) {
    diag_error(s->d, e->loc, "method '%s' needs a tensor receiver, got %s", n,
               sv_kind_name(&recv));
    return sv_error();
  }
  if (!b) return unknown_call(s, n, method, e->loc);
  if (method && !(b->flags & BF_METHOD)) {
    diag_error(s->d, e->loc,
               "'%s' is a function, not a tensor method; write %s(x, ...)", n,
               n);
    return sv_error();
  }
  if (!method && !(b->flags & BF_FUNC)) {
    diag_error(s->d, e->loc,
               "'%s' is a tensor method, not a function; write x.%s(...)", n,
               n);
    return sv_error();
  }
  SVal r = b->fn(s, &c, b);
  if (r.kind != SV_ERROR) r.loc = e->loc;
  return r;
}

static SVal eval(Sema *s, const Expr *e) {
  switch (e->kind) {
  case EX_INT: return sv_int(sym_const(s->st, e->u.ival), e->loc);
  case EX_FLOAT: return sv_float(e->u.fval, e->loc);
  case EX_BOOL: return sv_bool(e->u.bval, e->loc);
  case EX_NONE: return sv_make(SV_NONE, e->loc);
  case EX_STR: {
    SVal v = sv_make(SV_STR, e->loc);
    v.s = e->u.str;
    return v;
  }
  case EX_NAME: return eval_name(s, e);
  case EX_BINARY: return eval_binary(s, e);
  case EX_UNARY: return eval_unary(s, e);
  case EX_CALL: return eval_call(s, e);
  case EX_ATTR: return eval_attr(s, e);
  case EX_INDEX: return eval_index(s, e);
  case EX_LIST: return eval_list(s, e);
  case EX_SLICE:
    diag_error(s->d, e->loc, "a slice is only allowed inside [...]");
    return sv_error();
  case EX_ELLIPSIS:
    diag_error(s->d, e->loc, "'...' is only allowed inside [...]");
    return sv_error();
  }
  ICE("bad expression kind %d", (int)e->kind);
}

/* ------------------------------------------------------------------ */
/* Kernels: parameters, results, body                                   */

static int find_size_sym(const IrKernel *k, const char *name) {
  for (int j = 0; j < k->nsyms; j++)
    if (k->syms[j].kind == SYMK_SIZE && strcmp(k->syms[j].name, name) == 0)
      return j;
  return -1;
}

static bool check_layout(Sema *s, const TypeSpec *t, const char *what) {
  if (!t->is_tensor && t->layout_given) {
    diag_error(s->d, t->loc, "%s is a scalar and cannot have a layout", what);
    return false;
  }
  if (t->layout == LAYOUT_CHANNELS_LAST && t->rank != 4) {
    diag_error(s->d, t->loc,
               "channels_last needs a rank-4 tensor, but %s has rank %d", what,
               t->rank);
    return false;
  }
  return true;
}

/* A parameter dim: an int or a size symbol, bound at first appearance. */
static const Sym *param_dim(Sema *s, const AstKernel *ak, int pi, int d) {
  const Expr *e = ak->params[pi].type.dims[d];
  if (e->kind == EX_INT) return sym_const(s->st, e->u.ival);
  if (e->kind != EX_NAME) {
    diag_error(s->d, e->loc, "a parameter dim must be an int or a size "
                             "symbol; expressions are allowed in results only");
    return sym0(s);
  }
  int id = find_size_sym(s->k, e->u.str);
  if (id < 0) {
    for (int j = 0; j < ak->nparams; j++)
      if (strcmp(ak->params[j].name, e->u.str) == 0) {
        diag_error(s->d, e->loc,
                   "size symbol '%s' has the same name as a parameter",
                   e->u.str);
        break;
      }
    IrSymVar sv = {e->u.str, SYMK_SIZE, pi, d, e->loc};
    id = ir_add_sym(s->m, s->k, &sv);
  }
  return sym_var(s->st, id, s->k->syms[id].name);
}

static void param_strides(Sema *s, IrParam *p, int pi, Geom *g) {
  GeomCtx c = sema_geom(s, p->loc);
  memset(g, 0, sizeof *g);
  if (p->layout == LAYOUT_STRIDED) {
    g->stride = arena_alloc(s->a, (size_t)p->rank * sizeof *g->stride + 1);
    for (int d = 0; d < p->rank; d++) {
      IrSymVar sv = {arena_printf(s->a, "%s.stride(%d)", p->name, d),
                     SYMK_STRIDE, pi, d, p->loc};
      int id = ir_add_sym(s->m, s->k, &sv);
      g->stride[d] = sym_var(s->st, id, sv.name);
    }
  } else if (p->layout == LAYOUT_CHANNELS_LAST && p->rank == 4) {
    geom_channels_last(&c, p->shape, g);
  } else {
    geom_contiguous(&c, p->rank, p->shape, g);
  }
  g->rank = p->rank;
  g->shape = p->shape;
  g->offset = sym0(s);
}

static void sema_param(Sema *s, const AstKernel *ak, int pi) {
  const AstParam *ap = &ak->params[pi];
  IrParam *p = &s->k->params[pi];
  for (int j = 0; j < pi; j++)
    if (strcmp(ak->params[j].name, ap->name) == 0) {
      diag_error(s->d, ap->loc, "duplicate parameter '%s'", ap->name);
      diag_note(s->d, ak->params[j].loc, "'%s' first declared here",
                ap->name);
    }
  const char *why = sema_param_name_problem(ap->name);
  if (why)
    diag_error(s->d, ap->loc,
               "parameter name '%s' %s, so the generated header would not "
               "compile; rename the parameter", ap->name, why);
  check_layout(s, &ap->type,
               arena_printf(s->a, "parameter '%s'", ap->name));
  p->name = ap->name;
  p->dtype = ap->type.dtype;
  p->is_tensor = ap->type.is_tensor;
  p->layout = ap->type.layout;
  p->rank = ap->type.is_tensor ? ap->type.rank : 0;
  if (!rank_ok(s, p->rank, ap->type.loc)) p->rank = 0;
  p->loc = ap->loc;
  p->shape = arena_alloc(s->a, (size_t)(p->rank + 1) * sizeof *p->shape);
  for (int d = 0; d < p->rank; d++) p->shape[d] = param_dim(s, ak, pi, d);
  Geom g;
  param_strides(s, p, pi, &g);
  IrValue v = value_from_geom(s, OP_PARAM, p->dtype, &g, ap->loc);
  v.value.i = pi;
  v.name = ap->name;
  p->value = sema_emit(s, &v);
  bind(s, ap->name, sv_tensor(p->value, ap->loc), ap->loc);
}

/* A result dim: int, bound symbol, or + - * // of those. */
static const Sym *result_dim(Sema *s, const Expr *e, bool *ok) {
  switch (e->kind) {
  case EX_INT: return sym_const(s->st, e->u.ival);
  case EX_NAME: {
    int id = find_size_sym(s->k, e->u.str);
    if (id >= 0) return sym_var(s->st, id, s->k->syms[id].name);
    diag_error(s->d, e->loc,
               "symbol '%s' is used in a result but bound by no parameter",
               e->u.str);
    *ok = false;
    return sym0(s);
  }
  case EX_BINARY: {
    const Sym *a = result_dim(s, e->u.bin.lhs, ok);
    const Sym *b = result_dim(s, e->u.bin.rhs, ok);
    switch (e->u.bin.op) {
    case BIN_ADD: return sym_add(s->st, a, b);
    case BIN_SUB: return sym_sub(s->st, a, b);
    case BIN_MUL: return sym_mul(s->st, a, b);
    case BIN_FLOORDIV:
      if (sym_is(b, 0)) break;
      return sym_floordiv(s->st, a, b);
    default: break;
    }
    break;
  }
  default: break;
  }
  diag_error(s->d, e->loc, "a result dim must be an int, a size symbol, or "
                           "+ - * // of those");
  *ok = false;
  return sym0(s);
}

static void sema_result(Sema *s, const AstKernel *ak, int ri) {
  const TypeSpec *t = &ak->results[ri];
  IrResult *r = &s->k->results[ri];
  r->dtype = t->dtype;
  r->layout = t->layout;
  r->rank = t->is_tensor ? t->rank : 0;
  r->loc = t->loc;
  r->value = -1;
  r->qstride = NULL;
  if (!rank_ok(s, r->rank, t->loc)) return;
  if (!t->is_tensor) {
    diag_error(s->d, t->loc,
               "a kernel result must be a tensor; write %s[] for a 0-dim "
               "tensor",
               dtype_name(t->dtype));
    return;
  }
  check_layout(s, t, arena_printf(s->a, "result %d", ri));
  r->shape = arena_alloc(s->a, (size_t)(r->rank + 1) * sizeof *r->shape);
  bool ok = true;
  for (int d = 0; d < r->rank; d++) r->shape[d] = result_dim(s, t->dims[d], &ok);
  if (!ok) r->shape = NULL; /* already reported: skip the return check */
}

/* Whether the returned shape is the declared one: dim by dim the same
 * size, possibly written another way (`(H - 1)//2 + 1` for `(H + 1)//2`),
 * proved so or checked at kernel entry.  The declared dims then take the
 * returned value's expressions, so the IR's result shapes stay
 * pointer-equal to their values' (which verify.c requires). */
static bool return_shape_ok(Sema *s, int i, const IrValue *x, Loc loc) {
  IrResult *r = &s->k->results[i];
  if (x->rank != r->rank) return false;
  GeomCtx c = sema_geom(s, loc);
  for (int d = 0; d < r->rank; d++) {
    const char *msg = arena_printf(
        s->a, "return value %d has size %s at dim %d but result %d is declared "
        "with size %s there",
        i, sym_str(s->a, x->shape[d]), d, i, sym_str(s->a, r->shape[d]));
    if (!geom_same_size(&c, x->shape[d], r->shape[d], msg)) return false;
  }
  for (int d = 0; d < r->rank; d++) r->shape[d] = x->shape[d];
  return true;
}

/* "; its dim 1 is (H + 1)//2 where the declaration says H//2" for the
 * first differing dim with a symbol in it, else "". */
static const char *dim_mismatch(Sema *s, const IrValue *x, const IrResult *r) {
  if (x->rank != r->rank) return "";
  GeomCtx c = sema_geom(s, r->loc);
  for (int d = 0; d < r->rank; d++) {
    const Sym *have = x->shape[d], *want = r->shape[d];
    if (have == want || (sym_is_const(have, NULL) && sym_is_const(want, NULL)))
      continue;
    return arena_printf(s->a, "; its dim %d is %s where the declaration says %s",
                        d, geom_size_text(&c, have), sym_str(s->a, want));
  }
  return "";
}

/* True when e depends on a `strided` parameter's run-time strides. */
static bool uses_stride_sym(const IrKernel *k, const Sym *e) {
  int64_t c;
  int id, n;
  const Sym *a, *b;
  switch (sym_form(e, &c, &id, &a, &b, &n)) {
  case SYMF_CONST: return false;
  case SYMF_VAR: return id < k->nsyms && k->syms[id].kind == SYMK_STRIDE;
  case SYMF_POLY:
    for (int i = 0; i < n; i++) {
      int na;
      const Sym *const *atoms;
      sym_term(e, i, &c, &na, &atoms);
      for (int j = 0; j < na; j++)
        if (uses_stride_sym(k, atoms[j])) return true;
    }
    return false;
  default: return uses_stride_sym(k, a) || uses_stride_sym(k, b);
  }
}

/* The strides a shape query writes for a `strided` result returning r:
 * PyTorch's strides of r where they are dense (`(x - y).t()` of [4, 6]
 * operands: (1, 6)), else those clone() gives (dense, in r's stride
 * order).  Where r's strides come from a `strided` parameter's run-time
 * strides, which PyTorch would compare at run time, row-major.  Taken
 * now: passes may return another value with the same elements (a dropped
 * copy) but other semantic strides. */
static const Sym **query_strides(Sema *s, IrRef r, Loc loc) {
  GeomCtx gc = sema_geom(s, loc);
  Geom in = sema_geom_of(s, r), out;
  bool runtime = false;
  for (int d = 0; d < in.rank; d++)
    runtime = runtime || uses_stride_sym(s->k, in.stride[d]);
  if (runtime) geom_contiguous(&gc, in.rank, in.shape, &out);
  else geom_preserve(&gc, &in, &out);
  return out.stride;
}

static void check_return_value(Sema *s, const Stmt *st, int i, SVal v) {
  IrResult *r = &s->k->results[i];
  Loc loc = st->values[i]->loc;
  if (v.kind == SV_ERROR || !r->shape) return;
  if (v.kind != SV_TENSOR) {
    diag_error(s->d, loc, "return value %d is %s, not a tensor", i,
               sv_kind_name(&v));
    return;
  }
  IrValue *x = sema_val(s, v.ref);
  const char *decl = type_str(s, r->dtype, r->rank, r->shape);
  if (x->dtype != r->dtype) {
    diag_error(s->d, loc,
               "return value %d has dtype %s but the result is declared as "
               "%s; convert with .to(%s)",
               i, dtype_name(x->dtype), decl, dtype_name(r->dtype));
    diag_note(s->d, r->loc, "result %d declared here", i);
  } else if (!return_shape_ok(s, i, x, loc)) {
    diag_error(s->d, loc,
               "return value %d has shape %s but the result is declared as "
               "%s%s",
               i, sema_shape_str(s, v.ref), decl, dim_mismatch(s, x, r));
    diag_note(s->d, r->loc, "result %d declared here", i);
  }
  r->value = v.ref;
  if (r->layout == LAYOUT_STRIDED) r->qstride = query_strides(s, v.ref, loc);
}

static void sema_return(Sema *s, const AstKernel *ak, const Stmt *st) {
  SVal *vals = arena_alloc(s->a, (size_t)(st->nvalues + 1) * sizeof *vals);
  for (int i = 0; i < st->nvalues; i++) vals[i] = eval(s, st->values[i]);
  if (st->nvalues != ak->nresults) {
    diag_error(s->d, st->loc,
               "kernel '%s' returns %d value%s but declares %d result%s",
               ak->name, st->nvalues, st->nvalues == 1 ? "" : "s",
               ak->nresults, ak->nresults == 1 ? "" : "s");
    if (ak->nresults > 0)
      diag_note(s->d, ak->results[0].loc, "results declared here");
    return;
  }
  for (int i = 0; i < st->nvalues; i++) check_return_value(s, st, i, vals[i]);
}

static void sema_body(Sema *s, const AstKernel *ak) {
  int ret = -1;
  for (int i = 0; i < ak->nbody; i++) {
    const Stmt *st = &ak->body[i];
    if (ret >= 0) {
      diag_error(s->d, st->loc,
                 "statement after return; return must be the last statement "
                 "of kernel '%s'",
                 ak->name);
      diag_note(s->d, ak->body[ret].loc, "kernel returns here");
      return;
    }
    if (st->kind == ST_RETURN) {
      ret = i;
      sema_return(s, ak, st);
      continue;
    }
    SVal v = eval(s, st->values[0]);
    bind(s, st->name, v, st->loc);
  }
  if (ret < 0)
    diag_error(s->d, ak->loc, "kernel '%s' has no return statement",
               ak->name);
}

static void sema_kernel(Arena *a, Diag *d, IrModule *m, const AstKernel *ak) {
  Sema s;
  memset(&s, 0, sizeof s);
  s.a = a;
  s.d = d;
  s.m = m;
  s.st = m->st;
  s.k = ir_kernel_new(m, ak->name, ak->loc);
  s.k->nparams = ak->nparams;
  s.k->params = arena_alloc(a, (size_t)(ak->nparams + 1) * sizeof(IrParam));
  for (int i = 0; i < ak->nparams; i++) sema_param(&s, ak, i);
  s.k->nresults = ak->nresults;
  s.k->results = arena_alloc(a, (size_t)(ak->nresults + 1) * sizeof(IrResult));
  for (int i = 0; i < ak->nresults; i++) sema_result(&s, ak, i);
  sema_body(&s, ak);
}

/* The kernel's name becomes the C functions NAME and NAME_info. */
static void check_kernel_name(Diag *d, const AstProgram *p, int i) {
  const AstKernel *ak = &p->kernels[i];
  const char *why = sema_kernel_name_problem(ak->name);
  if (why)
    diag_error(d, ak->loc,
               "kernel name '%s' %s; the kernel becomes a C function of "
               "that name, so rename it", ak->name, why);
  size_t n = strlen(ak->name);
  for (int j = 0; j < p->nkernels; j++) {
    const char *o = p->kernels[j].name;
    if (strncmp(o, ak->name, n) != 0 || strcmp(o + n, "_info") != 0) continue;
    diag_error(d, p->kernels[j].loc,
               "kernel name '%s' clashes with the function %s_info() that "
               "tdslc generates for kernel '%s'; rename one of them", o,
               ak->name, ak->name);
    diag_note(d, ak->loc, "kernel '%s' is defined here", ak->name);
  }
}

IrModule *sema_program(Arena *a, Diag *d, const AstProgram *p,
                       const char *file) {
  int errors_before = d->nerrors;
  IrModule *m = ir_module_new(a, file);
  for (int i = 0; i < p->nkernels; i++) {
    const AstKernel *ak = &p->kernels[i];
    check_kernel_name(d, p, i);
    bool dup = false;
    for (int j = 0; j < i && !dup; j++)
      if (strcmp(p->kernels[j].name, ak->name) == 0) {
        diag_error(d, ak->loc, "kernel '%s' is defined twice", ak->name);
        diag_note(d, p->kernels[j].loc, "first definition of '%s' is here",
                  ak->name);
        dup = true;
      }
    if (!dup) sema_kernel(a, d, m, ak);
  }
  return d->nerrors > errors_before ? NULL : m;
}
