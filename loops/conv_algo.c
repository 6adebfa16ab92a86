/* conv_algo.c — which algorithm a target's code runs for a conv2d nest
 * (loops.h lf_conv_algo): the implicit GEMM, the depthwise kernel or the
 * direct kernel.  The choice is made from the nest's static facts alone
 * (weight shape, groups, output strides, prologues), so the loop form's
 * printer (print.c, the report) and the CPU backend (cpu/gemm_nest.c)
 * always agree on it.
 * Needs: loops.h.  Used by: print.c, cpu/gemm_nest.c. */
#include <string.h>

#include "loops.h"

/* The output's unit-stride dim, static: 1 channels (channels-last), 2
 * columns (NCHW with dense rows), 0 neither or run-time strides. */
static int out_unit(const LfNest *n) {
  const LfAccess *a = &n->cstore;
  if (a->rt_strides || n->rank < 3) return 0;
  if (sym_is(a->stride[n->rank - 3], 1)) return 1;
  if (sym_is(a->stride[n->rank - 1], 1)) return 2;
  return 0;
}

const LfExpr *lf_pro_widened(const IrKernel *k, const LfNest *n, int j) {
  const LfExpr *e = n->pro[j];
  if (!e || e->kind != LFE_CAST || e->args[0]->kind != LFE_LOAD) return NULL;
  const LfExpr *l = e->args[0];
  if (l->acc.ndyn || l->acc.lin_rank || l->acc.buf < 0 || !dtype_widens(l->dtype, e->dtype))
    return NULL;
  /* a tensor's memory: a scalar parameter (rank 0, passed by value) has none */
  const IrValue *cast = ir_val(k, ir_storage_root(k, ir_val(k, n->gemm)->args[j]));
  if (cast->op != OP_CAST || ir_val(k, ir_storage_root(k, cast->args[0]))->rank == 0) return NULL;
  return l;
}

LfConvAlgo lf_conv_algo(const IrKernel *k, const LfNest *n, const LfTarget *t) {
  if (n->reduce != OP_CONV2D || strcmp(t->name, "cpu") != 0) return LF_CONV_GEMM;
  const IrValue *v = ir_val(k, n->gemm), *w = ir_val(k, v->args[1]);
  /* prologues that only widen (x.to(i32) of i8) read the narrow operand */
  for (int j = 0; j < 2; j++)
    if (n->pro[j] && !lf_pro_widened(k, n, j)) return LF_CONV_GEMM;
  if (!out_unit(n)) return LF_CONV_GEMM;
  /* depthwise: one input channel per group, more than one group (one
   * group with one input channel is a GEMM with K = KH * KW) */
  if (sym_is(w->shape[1], 1) && !sym_is(v->attrs[6], 1)) return LF_CONV_DEPTHWISE;
  /* direct: one group, a kernel with several taps and enough input
   * channels per tap for its inner loop (measured on AVX2,
   * bench/README.md: 3x3 over 64 channels 1.2-1.5x the implicit GEMM in
   * both layouts; 1x1 and 7x7 over 3 channels even, so they stay GEMMs),
   * a block of packed weights (KH * KW * C per output channel) that stays
   * in L2 (the direct kernel does not block K as the GEMM does), and a
   * channels-last output, or an NCHW one read at stride 1 along columns */
  int64_t cin = 0, kh = 0, kw = 0;
  bool known = sym_is_const(w->shape[1], &cin) && sym_is_const(w->shape[2], &kh) &&
               sym_is_const(w->shape[3], &kw);
  bool few = sym_is_const(w->shape[1], &cin) && cin < 8;
  bool big = known && cin * kh * kw > 4608;
  bool one_tap = sym_is(w->shape[2], 1) && sym_is(w->shape[3], 1);
  if (!sym_is(v->attrs[6], 1) || one_tap || few || big) return LF_CONV_GEMM;
  if (out_unit(n) == 1) return LF_CONV_DIRECT;
  /* NCHW: vectors of output columns read input columns at stride 1 */
  const LfAccess *x = n->pro[0] ? &lf_pro_widened(k, n, 0)->acc : &n->opnd[0];
  if (sym_is(v->attrs[1], 1) && !x->rt_strides && sym_is(x->stride[n->rank - 1], 1))
    return LF_CONV_DIRECT;
  return LF_CONV_GEMM;
}

const char *lf_conv_algo_name(LfConvAlgo a) {
  switch (a) {
  case LF_CONV_DEPTHWISE: return "depthwise";
  case LF_CONV_DIRECT: return "direct";
  default: return "implicit GEMM";
  }
}
