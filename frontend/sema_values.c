/* sema_values.c — the values semantic analysis works with, and the
 * helpers every sema file shares to make them: SVal kinds and numbers,
 * appending IR values (views, copies, casts, implicit broadcasts, the
 * views and op values the op builders emit, run-time checks), Python
 * numbers as wrapped tensors, the result dtype of PyTorch's promotion
 * (pytorch-semantics.md §5), the kernel scope's names and the note that
 * points at a value's declaration.
 *
 * Needs: sema_internal.h, geometry.c (strides of fresh values),
 * geometry_views.c (implicit expands), dtype.c, sym.c, ir.c (ir_add, ir_add_check).
 * Used by: every other sema file; it calls none of them. */
#include <math.h>
#include <string.h>

#include "sema_internal.h"

/* ---- SVals ---- */

const char *sv_kind_name(const SVal *v) {
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

bool sv_is_number(const SVal *v) {
  return v->kind == SV_INT || v->kind == SV_FLOAT || v->kind == SV_BOOL;
}

/* A bool or a constant int as an int64. */
bool sv_const_int(const SVal *v, int64_t *out) {
  if (v->kind == SV_BOOL) {
    *out = v->b;
    return true;
  }
  return v->kind == SV_INT && sym_is_const(v->sym, out);
}

double sv_num_f(const SVal *v) {
  int64_t i = 0;
  if (v->kind == SV_FLOAT) return v->f;
  sv_const_int(v, &i);
  return (double)i;
}

/* ---- Values and geometry ---- */

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

const Sym *sema_sym0(Sema *s) { return sym_const(s->st, 0); }

const Sym **sema_syms_copy(Sema *s, const Sym *const *v, int n) {
  if (n <= 0) return NULL;
  const Sym **out = arena_alloc(s->a, (size_t)n * sizeof *out);
  memcpy(out, v, (size_t)n * sizeof *out);
  return out;
}

/* A value of op with the geometry g (arrays must live in the arena). */
IrValue sema_value_from_geom(Sema *s, Op op, DType dt, const Geom *g,
                             Loc loc) {
  IrValue v;
  memset(&v, 0, sizeof v);
  v.op = op;
  v.dtype = dt;
  v.rank = g->rank;
  v.shape = g->shape;
  v.stride = g->stride;
  v.offset = g->offset ? g->offset : sema_sym0(s);
  v.loc = loc;
  return v;
}

void sema_set_args(Sema *s, IrValue *v, const IrRef *refs, int n) {
  v->nargs = n;
  v->args = arena_dup(s->a, refs, (size_t)n * sizeof *refs);
}

static void set_attrs(Sema *s, IrValue *v, const Sym *const *attrs, int n) {
  v->nattrs = n;
  v->attrs = sema_syms_copy(s, attrs, n);
}

void sema_set_int_attrs(Sema *s, IrValue *v, const int64_t *a, int n) {
  v->nattrs = n;
  v->attrs = sym_array(s, n);
  for (int i = 0; i < n; i++) v->attrs[i] = K(s, a[i]);
}

IrValue sema_new_dense(Sema *s, Op op, DType dt, int rank,
                       const Sym *const *shape, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom g;
  memset(&g, 0, sizeof g);
  geom_contiguous(&c, rank, shape, &g);
  g.rank = rank;
  g.shape = sema_syms_copy(s, shape, rank);
  g.offset = sema_sym0(s);
  return sema_value_from_geom(s, op, dt, &g, loc);
}

/* Callers hold no IrValue pointer across this call: ir_add may move the
 * value array. */
IrRef sema_emit(Sema *s, IrValue *v) {
  if (!v->offset) v->offset = sema_sym0(s);
  if (v->rank > 0 && !v->stride) {
    GeomCtx c = sema_geom(s, v->loc);
    Geom g;
    memset(&g, 0, sizeof g);
    geom_contiguous(&c, v->rank, v->shape, &g);
    v->stride = g.stride;
  }
  return ir_add(s->m, s->k, v);
}

IrRef sema_emit_view(Sema *s, Op op, IrRef in, const Geom *g,
                     const Sym *const *attrs, int nattrs, int flags,
                     Loc loc) {
  DType dt = sema_val(s, in)->dtype;
  IrValue v = sema_value_from_geom(s, op, dt, g, loc);
  sema_set_args(s, &v, &in, 1);
  set_attrs(s, &v, attrs, nattrs);
  v.flags = flags;
  return sema_emit(s, &v);
}

/* A fresh copy of r (op COPY or CAST) with the strides of `g`. */
IrRef sema_emit_copy(Sema *s, Op op, IrRef r, DType dt, const Geom *g,
                     int flags, Loc loc) {
  Geom out = *g;
  out.offset = sema_sym0(s);
  IrValue v = sema_value_from_geom(s, op, dt, &out, loc);
  sema_set_args(s, &v, &r, 1);
  v.flags = flags;
  return sema_emit(s, &v);
}

IrRef sema_emit_cast(Sema *s, IrRef r, DType dt, int flags, Loc loc) {
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, r), out;
  memset(&out, 0, sizeof out);
  geom_preserve(&c, &in, &out);
  out.rank = in.rank;
  out.shape = in.shape;
  return sema_emit_copy(s, OP_CAST, r, dt, &out, flags, loc);
}

IrRef sema_cast(Sema *s, IrRef r, DType dt, Loc loc) {
  if (sema_val(s, r)->dtype == dt) return r;
  return sema_emit_cast(s, r, dt, IRF_IMPLICIT, loc);
}

IrRef sema_expand_to(Sema *s, IrRef r, int rank, const Sym *const *shape,
                     Loc loc) {
  IrValue *v = sema_val(s, r);
  if (sym_list_equal(v->shape, v->rank, shape, rank)) return r;
  GeomCtx c = sema_geom(s, loc);
  Geom in = sema_geom_of(s, r), out;
  const char *err = geom_expand(&c, &in, shape, rank, &out);
  if (err) ICE("implicit broadcast failed after a successful check: %s", err);
  return sema_emit_view(s, OP_EXPAND, r, &out, out.shape, out.rank,
                        IRF_IMPLICIT, loc);
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

/* Ranks stay within MAX_DIMS (ir.h TDSL_MAX_RANK). */
bool sema_rank_ok(Sema *s, int rank, Loc loc) {
  if (rank <= MAX_DIMS) return true;
  diag_error(s->d, loc, "tensors have at most %d dims; this one would have %d",
             MAX_DIMS, rank);
  return false;
}

/* ---- Views and values of the op builders ---- */

/* Emits a view op `op` of src with the geometry g. */
IrRef sema_emit_op_view(Sema *s, Op op, IrRef src, const Geom *g,
                        const int64_t *attrs, int nattrs, Loc loc) {
  DType dt = sema_val(s, src)->dtype;
  IrValue v = sema_new_dense(s, op, dt, g->rank, g->shape, loc);
  v.stride = g->stride;
  v.offset = g->offset;
  sema_set_args(s, &v, &src, 1);
  sema_set_int_attrs(s, &v, attrs, nattrs);
  return sema_emit(s, &v);
}

IrRef sema_emit_unsqueeze(Sema *s, IrRef r, int dim, Loc loc) {
  GeomCtx gc = sema_geom(s, loc);
  Geom in = sema_geom_of(s, r), out;
  const char *msg = geom_unsqueeze(&gc, &in, dim, &out);
  if (msg) ICE("unsqueeze for an op operand: %s", msg);
  int64_t a = dim;
  return sema_emit_op_view(s, OP_UNSQUEEZE, r, &out, &a, 1, loc);
}

/* Removes the size-1 dims `dims` (ascending) in one SQUEEZE view. */
IrRef sema_emit_squeeze(Sema *s, IrRef r, const int64_t *dims, int n,
                        Loc loc) {
  GeomCtx gc = sema_geom(s, loc);
  Geom g = sema_geom_of(s, r);
  for (int i = n - 1; i >= 0; i--) { /* highest first: lower dims stay put */
    Geom out;
    const char *msg = geom_squeeze(&gc, &g, &dims[i], &out);
    if (msg) ICE("squeeze for an op result: %s", msg);
    g = out;
  }
  return sema_emit_op_view(s, OP_SQUEEZE, r, &g, dims, n, loc);
}

/* Emits v (made by sema_new_dense, attrs and flags set) with operands
 * args[0..n); returns its ref. */
IrRef sema_emit_op(Sema *s, IrValue *v, const IrRef *args, int n) {
  sema_set_args(s, v, args, n);
  return sema_emit(s, v);
}

/* A run-time condition lhs <= rhs (PyTorch checks it when it runs). */
void sema_check_le(Sema *s, const Sym *lhs, const Sym *rhs,
                   const char *msg, Loc loc) {
  IrCheck ck = {.lhs = lhs, .rhs = rhs, .op = CHK_LE, .msg = msg, .loc = loc};
  ir_add_check(s->m, s->k, &ck);
}

void sema_check_eq(Sema *s, const Sym *lhs, const Sym *rhs,
                   const char *msg, Loc loc) {
  IrCheck ck = {.lhs = lhs, .rhs = rhs, .op = CHK_EQ, .msg = msg, .loc = loc};
  ir_add_check(s->m, s->k, &ck);
}

/* ---- Type promotion (pytorch-semantics.md §5) ---- */

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

/* ---- Names and messages ---- */

const char *sema_shape_str(Sema *s, IrRef r) {
  IrValue *v = sema_val(s, r);
  return geom_shape_str(s->a, v->shape, v->rank);
}

void sema_bind(Sema *s, const char *name, SVal v, Loc loc) {
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
int sema_find_name(const Sema *s, const char *name) {
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

/* The C++ type PyTorch names in its overflow message. */
static const char *c_type(DType dt) {
  switch (dt) {
  case DT_U8: return "uint8_t";
  case DT_I8: return "int8_t";
  case DT_I16: return "int16_t";
  case DT_I32: return "int";
  case DT_I64: return "int64_t";
  case DT_F16: return "at::Half";
  case DT_BF16: return "at::BFloat16";
  case DT_F32: return "float";
  default: return "double";
  }
}

/* Whether number v converts to dt as PyTorch's Scalar does (c10's
 * checked conversion: out of range, or NaN/inf to an integer, is an
 * error; floats to integers truncate; unsigned bytes wrap from -255; any
 * number converts to bool and f64; a symbolic int is not checked here);
 * reports PyTorch's message at loc. */
bool sema_scalar_fits(Sema *s, const SVal *v, DType dt, Loc loc) {
  double f = sv_num_f(v);
  int64_t iv = 0;
  bool isint = v->kind != SV_FLOAT;
  if (isint && !sv_const_int(v, &iv)) return true; /* a symbolic size: known at run time */
  double lo = 0, hi = 0;
  switch (dt) {
  case DT_U8: lo = isint ? -255 : 0, hi = 255; break;
  case DT_I8: lo = -128, hi = 127; break;
  case DT_I16: lo = -32768, hi = 32767; break;
  case DT_I32: lo = -2147483648.0, hi = 2147483647.0; break;
  case DT_I64: lo = -9223372036854775808.0, hi = 9223372036854775807.0; break;
  case DT_F16: lo = -65504, hi = 65504; break;
  case DT_BF16: lo = -3.3895313892515355e38, hi = 3.3895313892515355e38; break;
  case DT_F32: lo = -3.4028234663852886e38, hi = 3.4028234663852886e38; break;
  default: break;
  }
  bool bad = false;
  if (dt == DT_BOOL || dt == DT_F64)
    bad = false;
  else if (dtype_is_float(dt)) /* inf and NaN convert */
    bad = isfinite(f) && (f < lo || f > hi);
  else if (isint)
    bad = dt != DT_I64 && ((double)iv < lo || (double)iv > hi);
  else /* NaN and inf do not */
    bad = !isfinite(f) || f < lo || f > hi ||
          (dt == DT_I64 && f >= 9223372036854775808.0);
  if (bad) {
    diag_error(s->d, loc, "value cannot be converted to type %s without "
               "overflow", c_type(dt));
    return false;
  }
  return true;
}
