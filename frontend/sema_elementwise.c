/* sema_elementwise.c — elementwise ops: the arithmetic and comparison
 * operators on tensors, the unary math functions, the activations with
 * parameters (softplus, leaky_relu, elu, hardtanh, ...), nan_to_num,
 * lerp, the binary functions (maximum, pow, atan2, fmod, ...), where and
 * clamp, with PyTorch's dtype rules per op (ops.h) and its errors.
 *
 * Operands are promoted (sema_result_type), cast to the compute dtype and
 * broadcast-expanded to the result shape (IRF_IMPLICIT CAST/EXPAND); the
 * result takes TensorIterator's layout (geom_elementwise_layout).
 *
 * Needs: sema_internal.h, sema_values.c, sema_args.c, geometry.c
 * (broadcasting, result layout), dtype.c.
 * Used by: sema_expr.c (operators, and the call dispatch through
 * sema_elementwise_builtins). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "sema_internal.h"

/* ---- Building elementwise values ---- */

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
  out.shape = sema_syms_copy(s, shape, rank);
  out.offset = sema_sym0(s);
  IrRef args[3];
  for (int i = 0; i < n; i++) {
    IrRef r = sema_cast(s, in[i], cdt[i], loc);
    args[i] = sema_expand_to(s, r, rank, shape, loc);
  }
  IrValue v = sema_value_from_geom(s, op, rdt, &out, loc);
  sema_set_args(s, &v, args, n);
  v.flags = flags;
  return sv_tensor(sema_emit(s, &v), loc);
}

SVal sema_where_dense(Sema *s, IrRef cond, IrRef a, IrRef b, DType dt,
                      Loc loc) {
  IrRef in[3] = {cond, a, b}, args[3];
  DType cdt[3] = {DT_BOOL, dt, dt};
  const Sym **shape;
  int rank;
  if (!ew_shape(s, in, 3, loc, &shape, &rank)) return sv_error();
  for (int i = 0; i < 3; i++)
    args[i] = sema_expand_to(s, sema_cast(s, in[i], cdt[i], loc), rank, shape,
                             loc);
  IrValue v = sema_new_dense(s, OP_WHERE, dt, rank, shape, loc);
  return sv_tensor(sema_emit_op(s, &v, args, 3), loc);
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
SVal sema_ew_binary(Sema *s, Op op, const SVal *a, const SVal *b, Loc loc) {
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

SVal sema_ew_unary(Sema *s, Op op, IrRef x, int flags, Loc loc) {
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

/* ---- Call handlers ---- */

static SVal h_unary(Sema *s, CallArgs *c, const Builtin *b) {
  IrRef x;
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
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
  return sema_ew_unary(s, b->op, x, flags, c->loc);
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
    *out = sv_num_f(v);
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
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
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
  SVal r = sema_ew_unary(s, b->op, x, 0, c->loc);
  if (r.kind == SV_TENSOR) memcpy(sema_val(s, r.ref)->fattr, fa, sizeof fa);
  return r;
}

/* nan_to_num(x, nan=0.0, posinf=None, neginf=None): None is the dtype's
 * largest and lowest finite value; integer and bool tensors are returned
 * unchanged (the op leaves them so). */
static SVal h_nan_to_num(Sema *s, CallArgs *c, const Builtin *b) {
  IrRef x;
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
  DType dt = sema_val(s, x)->dtype;
  double big = dt == DT_F16 ? 65504.0 : dt == DT_BF16 ? 0x1.fep127 : dt == DT_F32 ? FLT_MAX : DBL_MAX;
  double fa[3];
  if (!num_arg(s, c, 1, "nan", 0, true, &fa[0]) || !num_arg(s, c, 2, "posinf", big, true, &fa[1]) ||
      !num_arg(s, c, 3, "neginf", -big, true, &fa[2]) || !sema_args_done(s, c, 4))
    return sv_error();
  SVal r = sema_ew_unary(s, b->op, x, 0, c->loc);
  if (r.kind == SV_TENSOR) memcpy(sema_val(s, r.ref)->fattr, fa, sizeof fa);
  return r;
}

/* lerp(input, end, weight): float tensors of one dtype (PyTorch does
 * not promote them); weight a tensor of that dtype or a number. */
static SVal h_lerp(Sema *s, CallArgs *c, const Builtin *b) {
  IrRef in[3];
  if (!sema_tensor_recv(s, c, &in[0]) ||
      !sema_req_tensor(s, c, 1, "end", &in[1]))
    return sv_error();
  const SVal *w = sema_need_arg(s, c, 2, "weight");
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
    fa[0] = sv_num_f(w);
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
  const SVal *x = sema_need_arg(s, c, 0, c->method ? "self" : "input");
  const SVal *y = sema_need_arg(s, c, 1, second);
  if (!x || !y || !sema_args_done(s, c, 2)) return sv_error();
  if (x->kind == SV_ERROR || y->kind == SV_ERROR) return sv_error();
  if (b->flags & (BF_TENSORS | BF_NUMBER))
    for (int i = 0; i < 2; i++) {
      const SVal *v = i ? y : x;
      if (v->kind == SV_TENSOR ||
          (i == 1 && (b->flags & BF_NUMBER) && sv_is_number(v)))
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
      if (v->kind == SV_TENSOR || (sv_is_number(v) && other->kind == SV_TENSOR))
        continue;
      diag_error(s->d, v->loc, "%s() needs a tensor and a tensor or a "
                 "number, got %s and %s", c->name, sv_kind_name(x),
                 sv_kind_name(y));
      return sv_error();
    }
  return sema_ew_binary(s, b->op, x, y, c->loc);
}

static SVal h_where(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  /* x.where(cond, y) is where(cond, x, y). */
  const SVal *cond, *x, *y;
  if (c->method) {
    x = sema_need_arg(s, c, 0, "self");
    cond = sema_need_arg(s, c, 1, "condition");
    y = sema_need_arg(s, c, 2, "other");
  } else {
    cond = sema_need_arg(s, c, 0, "condition");
    x = sema_need_arg(s, c, 1, "input");
    y = sema_need_arg(s, c, 2, "other");
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
  if (!dtype_is_int(dt) || !sv_is_number(v) || !sv_const_int(v, &x))
    return true;
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
  bool mixed = n == 3 && sv_is_number(&t[1]) != sv_is_number(&t[2]);
  for (int i = 1; mixed && i < n; i++) {
    if (sv_is_number(&t[i])) continue;
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
  if (!sema_tensor_recv(s, c, &x)) return sv_error();
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
    if (!sv_is_number(&ops[i]) && ops[i].kind != SV_TENSOR) {
      diag_error(s->d, ops[i].loc, "clamp() bounds must be numbers or "
                                   "tensors, got %s",
                 sv_kind_name(&ops[i]));
      return sv_error();
    }
  /* PyTorch's clamp has a Number-bounds and a Tensor-bounds overload:
   * two bounds must both be numbers or both tensors (a 0-dim tensor also
   * passes as a number). */
  if (n == 3 && sv_is_number(&ops[1]) != sv_is_number(&ops[2]) &&
      sema_val(s, (sv_is_number(&ops[1]) ? ops[2] : ops[1]).ref)->rank > 0) {
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
    r = sema_ew_binary(s, op, &r, &bv, c->loc);
    if (r.kind == SV_ERROR) return r;
  }
  return r;
}

const Builtin sema_elementwise_builtins[] = {
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
    {NULL, NULL, OP_COUNT, 0},
};
