/* conv_algo.c — which algorithm a target's code runs for a conv2d nest
 * (loops.h lf_conv_algo): the implicit GEMM, the depthwise kernel, the
 * direct kernel or the 1x1 conv as a plain GEMM.  The choice is made from the nest's static facts alone
 * (weight shape, groups, output strides, prologues), so the loop form's
 * printer (print.c, the report) and the CPU backend (cpu/gemm_nest.c)
 * always agree on it.  Also lf_gemm_mma: whether CUDA's matmul or conv2d
 * runs on tensor cores (print.c and cuda/gemm.c agree through it).
 * Needs: loops.h.  Used by: print.c, cpu/gemm_nest.c, cuda/gemm.c. */
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

/* s as one monomial coef * atoms[0..*n) (a constant, an atom such as a
 * symbol or a `//`, or a one-term polynomial), at most 8 atoms. */
static bool monomial(const Sym *s, int64_t *coef, const Sym **atoms, int *n) {
  int64_t c0 = 0;
  int nt = 0;
  const Sym *const *at;
  switch (sym_form(s, &c0, NULL, NULL, NULL, &nt)) {
  case SYMF_CONST: *coef = c0, *n = 0; return true;
  case SYMF_POLY:
    if (c0 || nt != 1) return false;
    sym_term(s, 0, coef, n, &at);
    if (*n > 8) return false;
    for (int i = 0; i < *n; i++) atoms[i] = at[i];
    return true;
  case SYMF_ADD: case SYMF_MUL: return false;
  default: *coef = 1, *n = 1, atoms[0] = s; return true;
  }
}

/* Whether s == a * b, for monomials (canonical forms compared as a
 * coefficient and a multiset of atoms; false when not sure). */
static bool sym_is_product(const Sym *s, const Sym *a, const Sym *b) {
  int64_t cs, ca, cb;
  const Sym *as[8], *aa[16];
  int ns, na, nb;
  if (!monomial(s, &cs, as, &ns) || !monomial(a, &ca, aa, &na) || !monomial(b, &cb, aa + na, &nb) ||
      ca * cb != cs || na + nb != ns)
    return false;
  for (int i = 0; i < ns; i++) { /* each atom of s takes one equal atom of a * b */
    int j = 0;
    while (j < na + nb && aa[j] != as[i]) j++;
    if (j == na + nb) return false;
    aa[j] = NULL;
  }
  return true;
}

/* A 1x1 conv that is a plain GEMM per image (cpu/conv_1x1.c): an NCHW
 * output, one group, stride 1, no padding, the pixels of the input and
 * the output one dim each (row stride = width * column stride), and a
 * bias only where it can be added to f32/f64 outputs after the sum.  A
 * channels-last output is not one: there the pixels are A, and the plain
 * GEMM measured slower than the implicit GEMM on AVX2 (its packing of A,
 * bench/README.md) and than the direct kernel on Zen 5 (f32, below). */
static bool is_gemm_1x1(const IrKernel *k, const LfNest *n, const IrValue *v, int unit) {
  const IrValue *x = ir_val(k, v->args[0]), *w = ir_val(k, v->args[1]);
  const LfAccess *xa = &n->opnd[0], *o = &n->cstore;
  int R = n->rank;
  for (int i = 0; i < 4; i++)
    if (!sym_is(v->attrs[i], i < 2)) return false;
  if (!sym_is(v->attrs[6], 1) || !sym_is(w->shape[2], 1) || !sym_is(w->shape[3], 1) ||
      xa->rt_strides || xa->buf < 0)
    return false;
  if (!sym_is_product(xa->stride[R - 2], x->shape[R - 1], xa->stride[R - 1]) ||
      !sym_is_product(o->stride[R - 2], n->shape[R - 1], o->stride[R - 1]))
    return false;
  bool f = n->cdtype == DT_F32 || n->cdtype == DT_F64;
  return unit == 2 && (!(v->flags & IRF_BIAS) || (f && ir_val(k, v->args[2])->dtype == n->cdtype));
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
  if (!n->pro[0] && !n->pro[1] && is_gemm_1x1(k, n, v, out_unit(n))) return LF_CONV_1X1;
  /* depthwise: one input channel per group, more than one group (one
   * group with one input channel is a GEMM with K = KH * KW) */
  if (sym_is(w->shape[1], 1) && !sym_is(v->attrs[6], 1)) return LF_CONV_DEPTHWISE;
  /* direct: one group, a kernel with several taps and enough input
   * channels per tap for its inner loop (measured on AVX2,
   * bench/README.md: 3x3 over 64 channels 1.2-1.5x the implicit GEMM in
   * both layouts; 7x7 over 3 channels even, so it stays a GEMM), a block
   * of packed weights (KH * KW * C per output channel) that stays in L2
   * (the direct kernel does not block K as the GEMM does), and a
   * channels-last output, or an NCHW one read at stride 1 along columns.
   * A 1x1 kernel only with f32 operands and a channels-last output (its
   * pixels read in place, no packing of A: 1.4x the implicit GEMM on Zen
   * 5, 1.03-1.06x on AVX2; NCHW outputs take the plain GEMM above). */
  int64_t cin = 0, kh = 0, kw = 0;
  bool known = sym_is_const(w->shape[1], &cin) && sym_is_const(w->shape[2], &kh) &&
               sym_is_const(w->shape[3], &kw);
  bool few = sym_is_const(w->shape[1], &cin) && cin < 8;
  bool big = known && cin * kh * kw > 4608;
  bool one_tap = sym_is(w->shape[2], 1) && sym_is(w->shape[3], 1);
  const IrValue *x = ir_val(k, v->args[0]);
  bool f32 = !n->pro[0] && !n->pro[1] && x->dtype == DT_F32 && w->dtype == DT_F32;
  if (one_tap && f32 && out_unit(n) == 1) one_tap = false;
  if (!sym_is(v->attrs[6], 1) || one_tap || few || big) return LF_CONV_GEMM;
  if (out_unit(n) == 1) return LF_CONV_DIRECT;
  /* NCHW: vectors of output columns read input columns at stride 1 */
  const LfAccess *xa = n->pro[0] ? &lf_pro_widened(k, n, 0)->acc : &n->opnd[0];
  if (sym_is(v->attrs[1], 1) && !xa->rt_strides && sym_is(xa->stride[n->rank - 1], 1))
    return LF_CONV_DIRECT;
  return LF_CONV_GEMM;
}

const char *lf_conv_algo_name(LfConvAlgo a) {
  switch (a) {
  case LF_CONV_DEPTHWISE: return "depthwise";
  case LF_CONV_DIRECT: return "direct";
  case LF_CONV_1X1: return "GEMM (1x1, no im2col)";
  default: return "implicit GEMM";
  }
}

bool lf_gemm_mma(const IrKernel *k, const LfNest *n, int opt) {
  if (opt < 1 || (n->reduce != OP_MATMUL && n->reduce != OP_CONV2D)) return false;
  const IrValue *v = ir_val(k, n->gemm);
  DType a = ir_val(k, v->args[0])->dtype, b = ir_val(k, v->args[1])->dtype;
  return a == b && (a == DT_F16 || a == DT_BF16);
}
