/* sema_matmul.c — matrix products: the @ operator and matmul(), with
 * PyTorch's rules for 1-D operands (unsqueezed, and the added dim squeezed
 * from the result), batch broadcasting and dtypes.
 *
 * The builder reads the evaluated call arguments (CallArgs), checks them
 * with PyTorch's rules (every error PyTorch raises is a diagnostic at the
 * function or method name, in the project's own words), and appends the
 * IR of ops.h: the op itself plus the CASTs and UNSQUEEZE/EXPAND/SQUEEZE
 * views its operand conventions need.  The result is contiguous.
 *
 * Needs: sema_internal.h, sema_values.c, sema_args.c, geometry.c.
 * Used by: sema_expr.c (the @ operator, and the call dispatch through
 * sema_matmul_builtins). */
#include <string.h>

#include "sema_internal.h"

static bool matmul_types(Sema *s, const IrValue *a, const IrValue *b,
                         Loc loc) {
  if (a->rank == 0 || b->rank == 0) {
    diag_error(s->d, loc,
               "matmul: both operands must be at least 1-D, but they are "
               "%d-D and %d-D; use * to multiply by a scalar", a->rank,
               b->rank);
    return false;
  }
  if (a->dtype != b->dtype) {
    diag_error(s->d, loc,
               "matmul: operands must have the same dtype, but got %s and "
               "%s (matmul does not promote); convert one with .to()",
               dtype_name(a->dtype), dtype_name(b->dtype));
    return false;
  }
  if (a->dtype == DT_BOOL) {
    diag_error(s->d, loc,
               "matmul: not implemented for bool operands; convert them "
               "with .to(i64) or .to(f32)");
    return false;
  }
  return true;
}

/* Checks that a's last dim equals b's contracted dim (provably). */
static bool matmul_inner(Sema *s, const IrValue *a, const IrValue *b,
                         Loc loc) {
  const Sym *ka = a->shape[a->rank - 1];
  const Sym *kb = b->shape[b->rank == 1 ? 0 : b->rank - 2];
  if (ka == kb) return true;
  const char *which = b->rank == 1 ? "its only" : "its second-to-last";
  diag_error(s->d, loc,
             "matmul: cannot multiply shapes %s and %s: the first operand's "
             "last dim (%s) must equal the second's contracted dim, %s dim "
             "(%s)%s", shape_str(s, a->shape, a->rank),
             shape_str(s, b->shape, b->rank), sym_text(s, ka), which,
             sym_text(s, kb),
             sym_is_const(ka, NULL) && sym_is_const(kb, NULL)
                 ? ""
                 : "; symbolic dims must be the same expression");
  return false;
}

static void matmul_notes(Sema *s, IrRef a, IrRef b) {
  sema_note_origin(s, a);
  sema_note_origin(s, b);
}

SVal sema_matmul(Sema *s, IrRef a, IrRef b, Loc loc) {
  IrValue av = *sema_val(s, a), bv = *sema_val(s, b);
  if (!matmul_types(s, &av, &bv, loc)) return sv_error();
  if (!matmul_inner(s, &av, &bv, loc)) {
    matmul_notes(s, a, b);
    return sv_error();
  }
  /* 1-D operands become [1, K] and [K, 1]; squeezed off at the end. */
  if (av.rank == 1) a = sema_emit_unsqueeze(s, a, 0, loc);
  if (bv.rank == 1) b = sema_emit_unsqueeze(s, b, 1, loc);
  IrValue A = *sema_val(s, a), B = *sema_val(s, b);
  GeomCtx gc = sema_geom(s, loc);
  const Sym **batch;
  int nb;
  const char *msg = geom_broadcast(&gc, A.shape, A.rank - 2, B.shape,
                                   B.rank - 2, &batch, &nb);
  if (msg) {
    diag_error(s->d, loc,
               "matmul: the batch dims of %s and %s do not broadcast: %s",
               shape_str(s, av.shape, av.rank),
               shape_str(s, bv.shape, bv.rank), msg);
    return sv_error();
  }
  const Sym **sa = sym_array(s, nb + 2), **sb = sym_array(s, nb + 2),
            **sr = sym_array(s, nb + 2);
  for (int i = 0; i < nb; i++) sa[i] = sb[i] = sr[i] = batch[i];
  const Sym *M = A.shape[A.rank - 2], *Kd = A.shape[A.rank - 1],
            *N = B.shape[B.rank - 1];
  sa[nb] = M, sa[nb + 1] = Kd;
  sb[nb] = Kd, sb[nb + 1] = N;
  sr[nb] = M, sr[nb + 1] = N;
  a = sema_expand_to(s, a, nb + 2, sa, loc);
  b = sema_expand_to(s, b, nb + 2, sb, loc);
  IrValue v = sema_new_dense(s, OP_MATMUL, av.dtype, nb + 2, sr, loc);
  IrRef args[2] = {a, b};
  IrRef r = sema_emit_op(s, &v, args, 2);
  int64_t sq[2];
  int nsq = 0;
  if (av.rank == 1) sq[nsq++] = nb;
  if (bv.rank == 1) sq[nsq++] = nb + 1;
  if (nsq) r = sema_emit_squeeze(s, r, sq, nsq, loc);
  return sv_tensor(r, loc);
}

/* ---- Call handlers ---- */

static SVal h_matmul(Sema *s, CallArgs *c, const Builtin *b) {
  (void)b;
  IrRef x, y;
  if (!sema_tensor_recv(s, c, &x) || !sema_req_tensor(s, c, 1, "other", &y) ||
      !sema_args_done(s, c, 2))
    return sv_error();
  return sema_matmul(s, x, y, c->loc);
}

const Builtin sema_matmul_builtins[] = {
    {"matmul", h_matmul, OP_MATMUL, BF_BOTH},
    {NULL, NULL, OP_COUNT, 0},
};
