/* sema_scan.c — the scans cumsum, cumprod and logcumsumexp (ops.h
 * IRK_SCAN) with PyTorch's signatures and dtype rules:
 *  - cumsum(x, dim, *, dtype=None), cumprod(...), also as methods: the
 *    dim is required; dtype= casts the input first; integer and bool
 *    inputs give i64 (PyTorch's default for both);
 *  - logcumsumexp(x, dim): floating-point inputs only.
 * The result is a fresh contiguous tensor of the input's shape; a 0-dim
 * input (dim 0 or -1) is its own scan.
 *
 * Needs: sema_internal.h.  Used by: sema_expr.c (the call dispatch,
 * through sema_scan_builtins). */
#include "sema_internal.h"

static SVal build_scan(Sema *s, Op op, CallArgs *c) {
  if (sema_has_error_arg(c)) return sv_error();
  IrRef x;
  if (!sema_input_arg(s, c, &x)) return sv_error();
  const SVal *dv = sema_need_arg(s, c, 1, "dim");
  const SVal *tv = op == OP_LOGCUMSUMEXP ? NULL : sema_arg(s, c, KW_ONLY, "dtype");
  DType given;
  if (!dv || !sema_dtype_arg(s, tv, c->name, &given) || !sema_args_done(s, c, 2))
    return sv_error();
  IrValue xv = *sema_val(s, x);
  int64_t d;
  int w;
  if (!sema_int_arg(s, dv, "dim", &d) || !sema_wrap_dim(s, c, d, xv.rank, &w))
    return sv_error();
  DType dt = given != DT_NONE ? given : xv.dtype;
  if (op == OP_LOGCUMSUMEXP && !dtype_is_float(dt)) {
    diag_error(s->d, c->loc,
               "logcumsumexp(): not implemented for dtype %s; it needs a "
               "floating-point input: convert with .to(f32)",
               dtype_name(dt));
    sema_note_origin(s, x);
    return sv_error();
  }
  /* integers and bool accumulate in i64, as PyTorch's default dtype; a
   * narrower integer dtype= wraps, which the i64 scan cast back gives */
  DType sd = dtype_is_float(dt) ? dt : DT_I64;
  x = sema_cast(s, x, dt, c->loc);
  x = sema_cast(s, x, sd, c->loc);
  DType rd = given != DT_NONE ? given : sd;
  if (xv.rank == 0) return sv_tensor(sema_cast(s, x, rd, c->loc), c->loc);
  IrValue v = sema_new_dense(s, op, sd, xv.rank, xv.shape, c->loc);
  int64_t a = w;
  sema_set_int_attrs(s, &v, &a, 1);
  IrRef r = sema_emit_op(s, &v, &x, 1);
  return sv_tensor(sema_cast(s, r, rd, c->loc), c->loc);
}

static SVal h_scan(Sema *s, CallArgs *c, const Builtin *b) {
  return build_scan(s, b->op, c);
}

const Builtin sema_scan_builtins[] = {
    {"cumsum", h_scan, OP_CUMSUM, BF_BOTH},
    {"cumprod", h_scan, OP_CUMPROD, BF_BOTH},
    {"logcumsumexp", h_scan, OP_LOGCUMSUMEXP, BF_BOTH},
    {NULL, NULL, OP_COUNT, 0},
};
