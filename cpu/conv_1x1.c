/* conv_1x1.c — a 1x1 convolution at stride 1 without padding and with
 * one group, NCHW output (loops.h LF_CONV_1X1), as a plain matmul per
 * image, no im2col: the pixels of an image are one dim of the input and
 * of the output (lf_conv_algo checks the row strides), so
 *   out[n][O, P] = W[O, C] @ X[n][C, P]   (P = OH * OW)
 * with M = O and N = P (B's rows are contiguous pixels of an NCHW input,
 * packed by vector runs), through gemm.h's cg_emit_matmul (its packing,
 * work split, micro-kernel and small-M path) over the batch dim N, the
 * weights broadcast along it (stride 0).  The orientation is the
 * implicit GEMM's (cg_emit_conv2d), so the kernel's epilogue hook sees
 * the same rows (channels), columns (pixels) and bt (= image, one
 * group).  A bias is added by a hook of this file wrapped around the
 * kernel's (f32/f64 outputs only, lf_conv_algo), vectorized along C's
 * unit-stride columns; the PyTorch reference adds it after the sum too.
 * Needs: conv_impl.h (Cv, vector loads and stores, cv_fn_open), gemm.h.
 * Used by: gemm_nest.c. */
#include <stdio.h>

#include "conv_impl.h"

/* The matmul operands of the conv: a @ b = c, rank 3 ([N, .., ..]) for a
 * batched conv, else 2. */
static void views(const GemmTensor *x, const GemmTensor *w, const GemmTensor *out, GemmTensor *a,
                  GemmTensor *b, GemmTensor *c, LLVMBuilderRef bld) {
  int xr = x->rank, orr = out->rank, B = xr == 4, R = 2 + B;
  LLVMValueRef zero = LLVMConstInt(LLVMTypeOf(x->stride[0]), 0, 0);
  LLVMValueRef P = LLVMBuildMul(bld, out->shape[orr - 2], out->shape[orr - 1], "");
  GemmTensor X = {.base = x->base, .offset = x->offset, .rank = R, .dtype = x->dtype};
  GemmTensor Wt = {.base = w->base, .offset = w->offset, .rank = R, .dtype = w->dtype};
  GemmTensor C = {.base = out->base, .offset = out->offset, .rank = R, .dtype = out->dtype};
  if (B) {
    X.shape[0] = x->shape[0], X.stride[0] = x->stride[0];
    Wt.shape[0] = x->shape[0], Wt.stride[0] = zero;
    C.shape[0] = out->shape[0], C.stride[0] = out->stride[0];
  }
  /* pixel p of an image: column stride (the row stride is OW times it) */
  LLVMValueRef xc = x->stride[xr - 3], xp = x->stride[xr - 1];
  LLVMValueRef oc = out->stride[orr - 3], op = out->stride[orr - 1];
  int i = B, j = B + 1; /* the matrix dims: W[O, C] @ X[C, P] */
  Wt.shape[i] = w->shape[0], Wt.stride[i] = w->stride[0];
  Wt.shape[j] = w->shape[1], Wt.stride[j] = w->stride[1];
  X.shape[i] = x->shape[xr - 3], X.stride[i] = xc;
  X.shape[j] = P, X.stride[j] = xp;
  C.shape[i] = w->shape[0], C.stride[i] = oc;
  C.shape[j] = P, C.stride[j] = op;
  *a = Wt, *b = X;
  *c = C;
}

LLVMValueRef cg_conv_1x1_pool_bytes(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                    const GemmTensor *out, LLVMValueRef *threads) {
  GemmTensor a, b, c;
  views(x, w, out, &a, &b, &c, e->b);
  GemmEmit m = *e;
  m.pro[0] = m.pro[1] = NULL;
  return cg_matmul_pool_bytes(&m, &a, &b, &c, threads);
}

/* The bias hook's context: 8-byte slots. */
enum { B_FN, B_ARG, B_OUT, B_OFF, B_SBT, B_CM, B_BIAS, B_BOFF, B_BS, B_COUNT };

/* The bias of each row (channel) added to C's rows [i0, i1) x columns
 * from jlo (step VW) below jhi; jend: the masked last vector's end,
 * else NULL (full vectors).  ctx: out, off, cm, bias, boff, bs. */
static void bias_cols(G *g, LLVMValueRef *ctx, LLVMValueRef lanes, DType od,
                      LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef jlo, LLVMValueRef jhi,
                      LLVMValueRef jend) {
  LLVMValueRef out = ctx[0], off = ctx[1], cm = ctx[2], bias = ctx[3], boff = ctx[4], bs = ctx[5];
  GLoop li, lj;
  LLVMValueRef i = gemm_loop_open(g, &li, i0, i1, k64(g, 1));
  LLVMValueRef bv = cv_splat(g, gemm_load_c(g, bias, add(g, boff, mul(g, i, bs)), od));
  LLVMValueRef row = add(g, off, mul(g, i, cm));
  LLVMValueRef j = gemm_loop_open(g, &lj, jlo, jhi, k64(g, g->vw));
  LLVMValueRef mask = NULL;
  if (jend) {
    LLVMValueRef jl = LLVMBuildAdd(g->b, cv_splat(g, j), lanes, "");
    mask = LLVMBuildICmp(g->b, LLVMIntSLT, jl, cv_splat(g, jend), "");
  }
  LLVMValueRef at = add(g, row, j);
  LLVMValueRef v = cv_vload(g, od, out, at, NULL, mask);
  cv_vstore(g, od, LLVMBuildFAdd(g->b, v, bv, ""), out, at, mask);
  gemm_loop_close(g, &lj);
  gemm_loop_close(g, &li);
}

/* void hook(ptr cx, i64 bt, i64 i0, i64 i1, i64 j0, i64 j1): C[bt][i][j]
 * += bias[i] over the block (C's column stride is 1), then the kernel's
 * hook (slot B_FN) when there is one.  One per output dtype in a
 * module. */
static LLVMValueRef bias_hook(const GemmEmit *e, DType od) {
  char name[48];
  snprintf(name, sizeof name, "tdsl.conv1x1.bias.%d.v%d", (int)od, e->vec_bits);
  LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
  if (f) return f;
  Cv d;
  cv_setup(&d, e, od, od);
  G *g = &d.g;
  LLVMTypeRef ps[6] = {g->ptr, g->i64, g->i64, g->i64, g->i64, g->i64};
  f = cv_fn_open(g, name, ps, 6);
  LLVMValueRef cx = LLVMGetParam(f, 0), bt = LLVMGetParam(f, 1);
  LLVMValueRef i0 = LLVMGetParam(f, 2), i1 = LLVMGetParam(f, 3);
  LLVMValueRef j0 = LLVMGetParam(f, 4), j1 = LLVMGetParam(f, 5);
  LLVMValueRef out = getp(g, cx, B_OUT), bias = getp(g, cx, B_BIAS);
  LLVMValueRef off = add(g, get(g, cx, B_OFF), mul(g, bt, get(g, cx, B_SBT)));
  LLVMValueRef cm = get(g, cx, B_CM), boff = get(g, cx, B_BOFF), bs = get(g, cx, B_BS);
  LLVMValueRef lanes = cv_lanes(g);
  /* full vectors of columns, then the masked rest */
  LLVMValueRef nfull = mul(g, sdiv(g, sub(g, j1, j0), k64(g, g->vw)), k64(g, g->vw));
  LLVMValueRef jm = add(g, j0, nfull);
  LLVMValueRef ctx[6] = {out, off, cm, bias, boff, bs};
  bias_cols(g, ctx, lanes, od, i0, i1, j0, jm, NULL);
  LLVMBasicBlockRef btail = blk(g, "c1_tail"), bn = blk(g, "c1_hook");
  LLVMBuildCondBr(g->b, lt(g, jm, j1), btail, bn);
  LLVMPositionBuilderAtEnd(g->b, btail);
  bias_cols(g, ctx, lanes, od, i0, i1, jm, add(g, jm, k64(g, 1)), j1);
  LLVMBuildBr(g->b, bn);
  LLVMPositionBuilderAtEnd(g->b, bn);
  LLVMValueRef inner = getp(g, cx, B_FN);
  LLVMBasicBlockRef bc = blk(g, "c1_epi"), bd = blk(g, "c1_done");
  LLVMBuildCondBr(g->b, LLVMBuildIsNull(g->b, inner, ""), bd, bc);
  LLVMPositionBuilderAtEnd(g->b, bc);
  LLVMValueRef a[6] = {getp(g, cx, B_ARG), bt, i0, i1, j0, j1};
  LLVMBuildCall2(g->b, LLVMFunctionType(g->vd, ps, 6, 0), inner, a, 6, "");
  LLVMBuildBr(g->b, bd);
  LLVMPositionBuilderAtEnd(g->b, bd);
  LLVMBuildRetVoid(g->b);
  LLVMDisposeBuilder(g->b);
  return f;
}

LLVMValueRef cg_emit_conv_1x1(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                              const GemmTensor *bias, const GemmTensor *out) {
  GemmTensor a, b, c;
  views(x, w, out, &a, &b, &c, e->b);
  GemmEmit m = *e;
  m.pro[0] = m.pro[1] = NULL;
  if (bias) {
    LLVMValueRef hook = bias_hook(e, out->dtype);
    Cv d;
    cv_setup(&d, e, out->dtype, out->dtype);
    G *g = &d.g;
    LLVMValueRef cx = gemm_entry_alloca(g, g->i64, B_COUNT);
    LLVMValueRef ptrnull = LLVMConstNull(g->ptr), z = k64(g, 0);
    int R = c.rank;
    set(g, cx, B_FN, e->epi_fn ? e->epi_fn : ptrnull);
    set(g, cx, B_ARG, e->epi_arg ? e->epi_arg : ptrnull);
    set(g, cx, B_OUT, c.base), set(g, cx, B_OFF, c.offset);
    set(g, cx, B_SBT, R == 3 ? c.stride[0] : z), set(g, cx, B_CM, c.stride[R - 2]);
    set(g, cx, B_BIAS, bias->base), set(g, cx, B_BOFF, bias->offset);
    set(g, cx, B_BS, bias->stride[0]);
    m.epi_fn = hook, m.epi_arg = cx;
  }
  return cg_emit_matmul(&m, &a, &b, &c);
}
