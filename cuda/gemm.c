/* gemm.c — device kernels of matmul and conv2d nests (cuda.h): one
 * tiled GEMM, C[M, N] = A[M, K] B[K, N] per batch index, that reads its
 * operands through element functions:
 *   matmul  A = a[batch..., m, k], B = b[batch..., k, n], C = [batch..., m, n]
 *   conv2d  (implicit GEMM, one batch index per image and group)
 *           A = w[g og + m, ci, ky, kx] with k = (ci KH + ky) KW + kx,
 *           B = x[img, g C/g + ci, oy sh - ph + ky dh, ox sw - pw + kx dw]
 *               (0 outside the image: padding), n = oy OW + ox,
 *           C = out[img, g og + m, oy, ox] (+ bias[g og + m])
 * An operand with a prologue (loops.h LfNest.pro) is its expression at
 * those indices.  A block of 16 x 16 threads computes a CU_GEMM_BM x
 * CU_GEMM_BN tile of C, 4 x 4 values per thread in registers, stepping K
 * by CU_GEMM_BK through shared memory (operands converted to the
 * accumulator type on the way in: f32 for f16/bf16/f32, f64, i64).  The
 * finished values go through the nest's epilogue (`post`) when it has
 * one and are stored through `store`.  Blocks run over batch indices
 * grid-stride in z and over row blocks grid-stride in y.
 * Needs: cuda.h. */
#include "cuda.h"

enum { BM = CU_GEMM_BM, BN = CU_GEMM_BN, BK = CU_GEMM_BK, TM = BM / 16, TN = BN / 16 };

void cu_gemm_dims(Cg *c, const LfNest *n, LLVMValueRef *M, LLVMValueRef *N, LLVMValueRef *K,
                  LLVMValueRef *batch) {
  const IrValue *v = ir_val(c->k, n->gemm);
  int R = n->rank;
  LLVMBuilderRef b = c->b;
  if (n->reduce == OP_MATMUL) {
    const IrValue *a = ir_val(c->k, v->args[0]);
    *M = cg_sym_val(c, n->shape[R - 2]);
    *N = cg_sym_val(c, n->shape[R - 1]);
    *K = cg_sym_val(c, a->shape[a->rank - 1]);
    *batch = i64c(c, 1);
    for (int d = 0; d < R - 2; d++) *batch = LLVMBuildMul(b, *batch, cg_sym_val(c, n->shape[d]), "");
    return;
  }
  const IrValue *w = ir_val(c->k, v->args[1]);
  LLVMValueRef groups = cg_sym_val(c, v->attrs[6]);
  *M = LLVMBuildSDiv(b, cg_sym_val(c, w->shape[0]), groups, "");
  *N = LLVMBuildMul(b, cg_sym_val(c, n->shape[R - 2]), cg_sym_val(c, n->shape[R - 1]), "");
  *K = LLVMBuildMul(b, cg_sym_val(c, w->shape[1]),
                    LLVMBuildMul(b, cg_sym_val(c, w->shape[2]), cg_sym_val(c, w->shape[3]), ""), "");
  *batch = R == 4 ? LLVMBuildMul(b, cg_sym_val(c, n->shape[0]), groups, "") : groups;
}

typedef struct G {
  Cg *c;
  const LfNest *n;
  const IrValue *v;
  DType ad;
  LLVMTypeRef t;
  LLVMValueRef M, N, K, bt;
  /* conv: */
  LLVMValueRef groups, og, cg, KH, KW, H, W, OW, attr[6], img, gi;
} G;

/* Operand j at indices iv (its own dims), in the accumulator type. */
static LLVMValueRef opnd(G *g, int j, LLVMValueRef *iv) {
  Cg *c = g->c;
  const IrValue *a = ir_val(c->k, g->v->args[j]);
  LfNest dims = {.rank = a->rank};
  NestCtx x = {.n = &dims};
  for (int d = 0; d < a->rank; d++) x.iv[d] = iv[d];
  if (j < 2 && g->n->pro[j]) {
    const LfExpr *e = g->n->pro[j];
    return cg_convert(c, cg_eval(c, &x, e), e->dtype, g->ad);
  }
  int b = g->n->opnd[j].buf; /* a view of a scalar parameter: its value */
  if (b >= 0 && c->lk->bufs[b].kind == LFB_SCALAR)
    return cg_convert(c, c->scalar[b], a->dtype, g->ad);
  LLVMValueRef p = cg_address(c, &x, &g->n->opnd[j], a->dtype, a->rank);
  return cg_convert(c, cg_load_el(c, p, a->dtype), a->dtype, g->ad);
}

static LLVMValueRef lt(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildICmp(c->b, LLVMIntSLT, a, b, "");
}

/* i when ok, else 0 (an address that stays inside the operand). */
static LLVMValueRef clamp0(Cg *c, LLVMValueRef ok, LLVMValueRef i) { return sel(c, ok, i, i64c(c, 0)); }

/* Batch indices of bt (row-major over the output's leading dims). */
static void batch_index(G *g, LLVMValueRef *iv) {
  cu_split_rowmajor(g->c, g->bt, g->n->shape, g->n->rank - 2, iv);
}

/* A conv's k = (ci KH + ky) KW + kx split into ci, ky, kx. */
static void conv_k(G *g, LLVMValueRef k, LLVMValueRef *ckk) {
  LLVMBuilderRef b = g->c->b;
  LLVMValueRef khw = LLVMBuildMul(b, g->KH, g->KW, ""), r = LLVMBuildURem(b, k, khw, "");
  ckk[0] = LLVMBuildUDiv(b, k, khw, "");
  ckk[1] = LLVMBuildUDiv(b, r, g->KW, "");
  ckk[2] = LLVMBuildURem(b, r, g->KW, "");
}

/* A(m, k) when ok (else 0). */
static LLVMValueRef elem_a(G *g, LLVMValueRef m, LLVMValueRef k, LLVMValueRef ok) {
  Cg *c = g->c;
  LLVMValueRef iv[TDSL_MAX_RANK];
  m = clamp0(c, ok, m), k = clamp0(c, ok, k);
  if (g->n->reduce == OP_MATMUL) {
    int R = g->n->rank;
    batch_index(g, iv);
    iv[R - 2] = m, iv[R - 1] = k;
  } else {
    iv[0] = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, g->gi, g->og, ""), m, "");
    conv_k(g, k, iv + 1); /* the weight [O, C/groups, KH, KW] */
  }
  return sel(c, ok, opnd(g, 0 + (g->n->reduce == OP_CONV2D), iv), LLVMConstNull(g->t));
}

/* B(k, n) when ok (else 0; conv: also 0 in the padding). */
static LLVMValueRef elem_b(G *g, LLVMValueRef k, LLVMValueRef nn, LLVMValueRef ok) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  LLVMValueRef iv[TDSL_MAX_RANK];
  k = clamp0(c, ok, k), nn = clamp0(c, ok, nn);
  if (g->n->reduce == OP_MATMUL) {
    int R = g->n->rank;
    batch_index(g, iv);
    iv[R - 2] = k, iv[R - 1] = nn;
    return sel(c, ok, opnd(g, 1, iv), LLVMConstNull(g->t));
  }
  LLVMValueRef ckk[3];
  conv_k(g, k, ckk);
  LLVMValueRef ci = ckk[0], ky = ckk[1], kx = ckk[2];
  LLVMValueRef oy = LLVMBuildUDiv(b, nn, g->OW, ""), ox = LLVMBuildURem(b, nn, g->OW, "");
  LLVMValueRef iy = LLVMBuildAdd(b, LLVMBuildSub(b, LLVMBuildMul(b, oy, g->attr[0], ""), g->attr[2], ""),
                                 LLVMBuildMul(b, ky, g->attr[4], ""), "");
  LLVMValueRef ix = LLVMBuildAdd(b, LLVMBuildSub(b, LLVMBuildMul(b, ox, g->attr[1], ""), g->attr[3], ""),
                                 LLVMBuildMul(b, kx, g->attr[5], ""), "");
  LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, iy, g->H, ""),
                                 LLVMBuildICmp(b, LLVMIntULT, ix, g->W, ""), "");
  ok = LLVMBuildAnd(b, ok, in, "");
  int xr = ir_val(c->k, g->v->args[0])->rank, d = 0;
  if (xr == 4) iv[d++] = g->img;
  iv[d++] = LLVMBuildAdd(b, LLVMBuildMul(b, g->gi, g->cg, ""), ci, "");
  iv[d++] = clamp0(c, ok, iy);
  iv[d] = clamp0(c, ok, ix);
  return sel(c, ok, opnd(g, 0, iv), LLVMConstNull(g->t));
}

/* Stores C(m, n) = v (accumulator type) through the epilogue. */
static void store_c(G *g, LLVMValueRef m, LLVMValueRef nn, LLVMValueRef v, LLVMValueRef **rts) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  const LfNest *n = g->n;
  int R = n->rank;
  NestCtx x = {.n = n};
  for (int l = 0; l < R; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
  if (n->store.rt_strides) {
    const LfBuf *buf = &c->lk->bufs[n->store.buf];
    for (int l = 0; l < R; l++) x.rt_stride[l] = rts[buf->index][l];
  }
  if (n->reduce == OP_MATMUL) {
    batch_index(g, x.iv);
    x.iv[R - 2] = m, x.iv[R - 1] = nn;
  } else {
    LLVMValueRef ch = LLVMBuildAdd(b, LLVMBuildMul(b, g->gi, g->og, ""), m, "");
    int d = 0;
    if (R == 4) x.iv[d++] = g->img;
    x.iv[d++] = ch;
    x.iv[d++] = LLVMBuildUDiv(b, nn, g->OW, "");
    x.iv[d] = LLVMBuildURem(b, nn, g->OW, "");
    if (g->v->flags & IRF_BIAS) {
      LLVMValueRef bi[1] = {ch};
      LLVMValueRef bv = opnd(g, 2, bi);
      v = dtype_is_float(g->ad) ? LLVMBuildFAdd(b, v, bv, "") : LLVMBuildAdd(b, v, bv, "");
    }
  }
  LLVMValueRef out;
  if (n->post) {
    x.acc = cg_convert(c, v, g->ad, n->cdtype);
    out = cg_convert(c, cg_eval(c, &x, n->post), n->post->dtype, n->dtype);
  } else {
    out = cg_convert(c, v, g->ad, n->dtype);
  }
  cg_store_el(c, out, cg_address(c, &x, &n->store, n->dtype, R), n->dtype);
}

static LLVMValueRef mac(G *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc) {
  Cg *c = g->c;
  if (!dtype_is_float(g->ad)) return LLVMBuildAdd(c->b, acc, LLVMBuildMul(c->b, a, b, ""), "");
  LLVMValueRef args[3] = {a, b, acc};
  return cg_intrinsic(c, "llvm.fmuladd", &g->t, 1, args, 3);
}

static LLVMValueRef at(Cg *c, LLVMTypeRef t, LLVMValueRef arr, LLVMValueRef i) {
  return LLVMBuildGEP2(c->b, t, arr, &i, 1, "");
}

void cu_emit_gemm_kernel(Cg *c, const LfNest *n, LLVMValueRef fn) {
  LLVMValueRef *rts[64];
  if (c->k->nresults > 64) ICE("more than 64 results");
  cu_unpack(c, fn, rts);
  LLVMBuilderRef b = c->b;
  G g = {.c = c, .n = n, .v = ir_val(c->k, n->gemm)};
  g.ad = cu_acc_dtype(n->cdtype);
  g.t = cg_compute_type(c, g.ad);
  LLVMValueRef batch;
  cu_gemm_dims(c, n, &g.M, &g.N, &g.K, &batch);
  if (n->reduce == OP_CONV2D) {
    const IrValue *w = ir_val(c->k, g.v->args[1]), *xv = ir_val(c->k, g.v->args[0]);
    g.groups = cg_sym_val(c, g.v->attrs[6]);
    g.og = g.M;
    g.cg = cg_sym_val(c, w->shape[1]);
    g.KH = cg_sym_val(c, w->shape[2]), g.KW = cg_sym_val(c, w->shape[3]);
    g.H = cg_sym_val(c, xv->shape[xv->rank - 2]), g.W = cg_sym_val(c, xv->shape[xv->rank - 1]);
    g.OW = cg_sym_val(c, n->shape[n->rank - 1]);
    for (int i = 0; i < 6; i++) g.attr[i] = cg_sym_val(c, g.v->attrs[i]);
  }
  LLVMValueRef As = cu_shared(c, g.t, BK * BM, "gemm_a"), Bs = cu_shared(c, g.t, BK * BN, "gemm_b");
  LLVMValueRef acc[TM][TN];
  for (int i = 0; i < TM; i++)
    for (int j = 0; j < TN; j++) acc[i][j] = cg_entry_alloca(c, g.t, NULL);
  LLVMValueRef tid = LLVMBuildZExt(b, cu_sreg(c, "tid.x"), c->i64, "");
  LLVMValueRef tx = LLVMBuildURem(b, tid, i64c(c, 16), ""), ty = LLVMBuildUDiv(b, tid, i64c(c, 16), "");
  LLVMValueRef n0 = LLVMBuildMul(b, LLVMBuildZExt(b, cu_sreg(c, "ctaid.x"), c->i64, ""), i64c(c, BN), "");
  LLVMValueRef mblocks = LLVMBuildUDiv(b, LLVMBuildAdd(b, g.M, i64c(c, BM - 1), ""), i64c(c, BM), "");
  CuLoop lb, lm, lk;
  g.bt = cu_loop_open(c, &lb, LLVMBuildZExt(b, cu_sreg(c, "ctaid.z"), c->i64, ""), batch,
                      LLVMBuildZExt(b, cu_sreg(c, "nctaid.z"), c->i64, ""));
  if (n->reduce == OP_CONV2D) {
    g.img = LLVMBuildUDiv(b, g.bt, g.groups, "");
    g.gi = LLVMBuildURem(b, g.bt, g.groups, "");
  }
  /* row blocks grid-stride in y (a grid's y extent is at most 65535) */
  LLVMValueRef mb = cu_loop_open(c, &lm, LLVMBuildZExt(b, cu_sreg(c, "ctaid.y"), c->i64, ""), mblocks,
                                 LLVMBuildZExt(b, cu_sreg(c, "nctaid.y"), c->i64, ""));
  LLVMValueRef m0 = LLVMBuildMul(b, mb, i64c(c, BM), "");
  for (int i = 0; i < TM; i++)
    for (int j = 0; j < TN; j++) LLVMBuildStore(b, LLVMConstNull(g.t), acc[i][j]);
  LLVMValueRef k0 = cu_loop_open(c, &lk, i64c(c, 0), g.K, i64c(c, BK));
  for (int q = 0; q < BM * BK / CU_BLOCK; q++) { /* the A tile: k fastest */
    LLVMValueRef e = LLVMBuildAdd(b, tid, i64c(c, q * CU_BLOCK), "");
    LLVMValueRef mm = LLVMBuildUDiv(b, e, i64c(c, BK), ""), kk = LLVMBuildURem(b, e, i64c(c, BK), "");
    LLVMValueRef m = LLVMBuildAdd(b, m0, mm, ""), k = LLVMBuildAdd(b, k0, kk, "");
    LLVMValueRef v = elem_a(&g, m, k, LLVMBuildAnd(b, lt(c, m, g.M), lt(c, k, g.K), ""));
    LLVMBuildStore(b, v, at(c, g.t, As, LLVMBuildAdd(b, LLVMBuildMul(b, kk, i64c(c, BM), ""), mm, "")));
  }
  for (int q = 0; q < BN * BK / CU_BLOCK; q++) { /* the B tile: n fastest */
    LLVMValueRef e = LLVMBuildAdd(b, tid, i64c(c, q * CU_BLOCK), "");
    LLVMValueRef kk = LLVMBuildUDiv(b, e, i64c(c, BN), ""), nn = LLVMBuildURem(b, e, i64c(c, BN), "");
    LLVMValueRef k = LLVMBuildAdd(b, k0, kk, ""), col = LLVMBuildAdd(b, n0, nn, "");
    LLVMValueRef v = elem_b(&g, k, col, LLVMBuildAnd(b, lt(c, k, g.K), lt(c, col, g.N), ""));
    LLVMBuildStore(b, v, at(c, g.t, Bs, LLVMBuildAdd(b, LLVMBuildMul(b, kk, i64c(c, BN), ""), nn, "")));
  }
  cu_barrier(c);
  LLVMValueRef kk = cg_open_loop(c, i64c(c, BK));
  LLVMValueRef av[TM], bv[TN];
  for (int i = 0; i < TM; i++)
    av[i] = LLVMBuildLoad2(b, g.t, at(c, g.t, As, LLVMBuildAdd(b, LLVMBuildMul(b, kk, i64c(c, BM), ""),
                                                               LLVMBuildAdd(b, ty, i64c(c, 16 * i), ""), "")), "");
  for (int j = 0; j < TN; j++)
    bv[j] = LLVMBuildLoad2(b, g.t, at(c, g.t, Bs, LLVMBuildAdd(b, LLVMBuildMul(b, kk, i64c(c, BN), ""),
                                                               LLVMBuildAdd(b, tx, i64c(c, 16 * j), ""), "")), "");
  for (int i = 0; i < TM; i++)
    for (int j = 0; j < TN; j++)
      LLVMBuildStore(b, mac(&g, av[i], bv[j], LLVMBuildLoad2(b, g.t, acc[i][j], "")), acc[i][j]);
  cg_close_loop(c);
  cu_barrier(c);
  cu_loop_close(c, &lk);
  for (int i = 0; i < TM; i++)
    for (int j = 0; j < TN; j++) {
      LLVMValueRef m = LLVMBuildAdd(b, m0, LLVMBuildAdd(b, ty, i64c(c, 16 * i), ""), "");
      LLVMValueRef col = LLVMBuildAdd(b, n0, LLVMBuildAdd(b, tx, i64c(c, 16 * j), ""), "");
      LLVMBasicBlockRef st = block(c, "store"), next = block(c, "stored");
      LLVMBuildCondBr(b, LLVMBuildAnd(b, lt(c, m, g.M), lt(c, col, g.N), ""), st, next);
      LLVMPositionBuilderAtEnd(b, st);
      store_c(&g, m, col, LLVMBuildLoad2(b, g.t, acc[i][j], ""), rts);
      LLVMBuildBr(b, next);
      LLVMPositionBuilderAtEnd(b, next);
    }
  cu_loop_close(c, &lm);
  cu_loop_close(c, &lb);
  LLVMBuildRetVoid(b);
}
