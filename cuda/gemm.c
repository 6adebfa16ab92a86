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
 * those indices.
 *
 * A block of 256 threads (16 x 16) computes a BM x BN tile of C, TM x TN
 * values per thread in registers, stepping K by BK through shared memory:
 *   128 x 128 tiles, 8 x 8 per thread, BK 8, when the sizes give at least
 *             CU_GEMM_BIG_TILES such tiles (gemm_big);
 *    64 x  64 tiles, 4 x 4 per thread, BK 16, otherwise (small M or N, or
 *             too few big tiles to fill the GPU).
 * The choice is a uniform branch on M, N and the batch count, which the
 * host makes the same way to size the grid (cu_gemm_grid); 8-byte
 * accumulators (f64, i64) always take the small tiles, and their K step
 * is a loop over k (straight-line, it spills).  A is stored transposed
 * in shared memory (As[k][m], rows padded by 4) so that a thread reads
 * its A values and its B values as 4-vectors (ld.shared.v4): its rows
 * are ty 4 + r and 64 + ty 4 + r, its columns tx 4 + r and 64 + tx 4 + r.
 * Shared memory is double-buffered: while the K step on one stage runs,
 * the next K tile is loaded from global memory into registers, then
 * stored into the other stage; one barrier per K step.  The BK x TM x TN
 * multiply-adds of an f32 step are emitted straight-line.
 *
 * Global loads: each thread loads 4 elements of A and 4 of B per K step,
 * as one 4-vector each when the operand is a plain strided view (no
 * prologue, reshape or index tensor) of f16, bf16, f32 or f64 whose
 * unit-stride dim is k (A) or n (B) with a length that is a multiple of
 * 4, the other strides multiples of 4 and the first element aligned to
 * the vector (matmul: both operands, else neither, unless one of them
 * never can: a prologue; then the other alone); a conv's weight
 * qualifies when dense over [C/groups, KH, KW] (k is then the flat
 * offset), its input for a 1 x 1 kernel with stride 1 and no padding
 * over an input dense in [H, W] (n is then the offset in the image).
 * A conv whose input is channels-last (unit channel stride) orders k
 * as (ky KW + kx) C/groups + ci instead and loads B with consecutive
 * threads on consecutive k: consecutive channels, consecutive
 * addresses (its weight then loads scalars).  Rows of the shared B
 * tile are padded by 4 as well.
 * The kernel checks this once (from its parameters: pointers and
 * strides).  Scalar loads are the fallback (odd shapes, strides,
 * offsets; a conv's input in general, whose im2col address is computed
 * per element, the output-position part once per thread).  Operands are
 * converted to the accumulator type on the way in: f32 for
 * f16/bf16/f32, f64, i64.  Each output is the fused multiply-add chain
 * over k in order (spec §9).
 *
 * Every combination of these choices is a whole kernel body of its own,
 * behind uniform branches at the kernel's start, so that each body's
 * loops keep only their own loop-invariant values in registers; f32
 * kernels are limited to 128 registers (.maxnreg: two blocks per SM).
 * -O0 has one body: the small tiles with scalar loads.
 *
 * The finished values go through the nest's epilogue (`post`) when it
 * has one and are stored through `store`.  Blocks run over batch indices
 * grid-stride in z and over row blocks grid-stride in y.
 * f16/bf16 matmuls and convs at -O1+ on sm_80+ run on tensor cores
 * instead (the section "tensor cores" below: the same grid, loops,
 * edges, epilogue and prologues).
 * Needs: cuda.h, loops.h (lf_gemm_mma).  Used by: backend.c (kernels),
 * host.c (grids). */
#include <stdio.h>
#include <string.h>

#include "cuda.h"

/* A tile shape: BM x BN outputs, K steps of BK. */
typedef struct Tile {
  int bm, bn, bk;
} Tile;

enum {
  NT = CU_BLOCK, /* threads: 16 x 16 */
  APAD = 4,      /* As row padding (elements) */
  MAXE = 4,      /* A and B elements per thread per K step */
  MAXT = 8,      /* outputs per thread per dim */
  CU_GEMM_MAXNREG = 128, /* registers per thread: two blocks per SM */
};
static const Tile SMALL = {64, 64, 16}, BIG = {128, 128, 8};

static int a_stage(Tile t) { return t.bk * (t.bm + APAD); }
static int b_stage(Tile t) { return t.bk * (t.bn + APAD); }
static int imax(int a, int b) { return a > b ? a : b; }

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

static LLVMValueRef ceil_div(Cg *c, LLVMValueRef a, LLVMValueRef d) {
  return LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, a, LLVMBuildSub(c->b, d, i64c(c, 1), ""), ""), d, "");
}

/* Whether the 128 x 128 tiles run (i1): at -O1 and above (-O0 has one
 * variant: 64 x 64 tiles, scalar loads), with f32 accumulators (64 of 8
 * bytes would spill), M and N at least 128 and at least
 * CU_GEMM_BIG_TILES of them over the batch. */
static LLVMValueRef gemm_big(Cg *c, const LfNest *n, LLVMValueRef M, LLVMValueRef N, LLVMValueRef batch) {
  LLVMBuilderRef b = c->b;
  if (c->opt == 0 || cu_acc_dtype(n->cdtype) != DT_F32) return LLVMConstInt(c->i1, 0, 0);
  LLVMValueRef big = i64c(c, BIG.bm);
  LLVMValueRef tiles = LLVMBuildMul(b, LLVMBuildMul(b, ceil_div(c, M, big), ceil_div(c, N, big), ""),
                                    batch, "");
  LLVMValueRef r = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, M, big, ""),
                                LLVMBuildICmp(b, LLVMIntSGE, N, big, ""), "");
  return LLVMBuildAnd(b, r, LLVMBuildICmp(b, LLVMIntSGE, tiles, i64c(c, CU_GEMM_BIG_TILES), ""), "");
}

LLVMValueRef cu_gemm_grid(Cg *c, const LfNest *n, LLVMValueRef *g) {
  LLVMValueRef M, N, K, batch;
  cu_gemm_dims(c, n, &M, &N, &K, &batch);
  LLVMValueRef big = gemm_big(c, n, M, N, batch);
  LLVMValueRef bm = sel(c, big, i64c(c, BIG.bm), i64c(c, SMALL.bm));
  LLVMValueRef bn = sel(c, big, i64c(c, BIG.bn), i64c(c, SMALL.bn));
  g[0] = cg_smin(c, ceil_div(c, N, bn), i64c(c, 0x7fffffff), false);
  g[1] = cg_smin(c, ceil_div(c, M, bm), i64c(c, 65535), false);
  g[2] = cg_smin(c, batch, i64c(c, 65535), false);
  return LLVMBuildMul(c->b, LLVMBuildMul(c->b, M, N, ""), batch, "");
}

typedef struct G {
  Cg *c;
  const LfNest *n;
  const IrValue *v;
  DType ad;
  LLVMTypeRef t;
  LLVMValueRef M, N, K, batch, bt, biv[TDSL_MAX_RANK];
  LLVMValueRef As, Bs, Cs, tid, vec_a, vec_b;
  bool b_kmajor; /* matmul B's vector loads run along k (b_kmajor) or n */
  bool kpix;     /* conv with a channels-last input: k runs over channels
                    fastest, and B's scalar loads put consecutive threads
                    on consecutive k (consecutive addresses) */
  LLVMValueRef **rts;
  bool mma; /* tensor cores (emit_mma); od: the operands' dtype (f16, bf16) */
  DType od;
  /* conv: */
  LLVMValueRef groups, og, cg, KH, KW, H, W, OW, attr[6], img, gi;
} G;

static LLVMValueRef lt(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildICmp(c->b, LLVMIntSLT, a, b, "");
}

static LLVMValueRef land(Cg *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAnd(c->b, a, b, ""); }

/* i when ok, else 0 (an address that stays inside the operand). */
static LLVMValueRef clamp0(Cg *c, LLVMValueRef ok, LLVMValueRef i) { return sel(c, ok, i, i64c(c, 0)); }

/* Batch indices of bt (row-major over the output's leading dims). */
static void batch_index(G *g, LLVMValueRef *iv) {
  for (int d = 0; d < g->n->rank - 2; d++) iv[d] = g->biv[d];
}

/* The address of operand j's element at iv (its own dims): a plain view. */
static LLVMValueRef opnd_addr(G *g, int j, LLVMValueRef *iv) {
  const IrValue *a = ir_val(g->c->k, g->v->args[j]);
  LfNest dims = {.rank = a->rank};
  NestCtx x = {.n = &dims};
  for (int d = 0; d < a->rank; d++) x.iv[d] = iv[d];
  return cg_address(g->c, &x, &g->n->opnd[j], a->dtype, a->rank);
}

/* Operand j at indices iv (its own dims), in the accumulator type. */
static LLVMValueRef opnd(G *g, int j, LLVMValueRef *iv) {
  Cg *c = g->c;
  const IrValue *a = ir_val(c->k, g->v->args[j]);
  if (j < 2 && g->n->pro[j]) {
    LfNest dims = {.rank = a->rank};
    NestCtx x = {.n = &dims};
    for (int d = 0; d < a->rank; d++) x.iv[d] = iv[d];
    const LfExpr *e = g->n->pro[j];
    return cg_convert(c, cg_eval(c, &x, e), e->dtype, g->ad);
  }
  int b = g->n->opnd[j].buf; /* a view of a scalar parameter: its value */
  if (b >= 0 && c->lk->bufs[b].kind == LFB_SCALAR)
    return cg_convert(c, c->scalar[b], a->dtype, g->ad);
  return cg_convert(c, cg_load_el(c, opnd_addr(g, j, iv), a->dtype), a->dtype, g->ad);
}

/* A conv's k = (ci KH + ky) KW + kx (kpix: (ky KW + kx) C/groups + ci)
 * split into ci, ky, kx. */
static void conv_k(G *g, LLVMValueRef k, LLVMValueRef *ckk) {
  LLVMBuilderRef b = g->c->b;
  if (g->kpix) { /* k = (ky KW + kx) C/groups + ci */
    LLVMValueRef r = LLVMBuildUDiv(b, k, g->cg, "");
    ckk[0] = LLVMBuildURem(b, k, g->cg, "");
    ckk[1] = LLVMBuildUDiv(b, r, g->KW, "");
    ckk[2] = LLVMBuildURem(b, r, g->KW, "");
    return;
  }
  LLVMValueRef khw = LLVMBuildMul(b, g->KH, g->KW, ""), r = LLVMBuildURem(b, k, khw, "");
  ckk[0] = LLVMBuildUDiv(b, k, khw, "");
  ckk[1] = LLVMBuildUDiv(b, r, g->KW, "");
  ckk[2] = LLVMBuildURem(b, r, g->KW, "");
}

/* A(m, k) when ok (else 0). */
static LLVMValueRef elem_a(G *g, LLVMValueRef m, LLVMValueRef k, LLVMValueRef ok) {
  Cg *c = g->c;
  LLVMValueRef iv[TDSL_MAX_RANK];
  if (g->n->reduce == OP_MATMUL) {
    int R = g->n->rank;
    batch_index(g, iv);
    iv[R - 2] = clamp0(c, ok, m), iv[R - 1] = clamp0(c, ok, k);
  } else { /* the weight [O, C/groups, KH, KW]; k split before clamping:
              one split for the elements of a k */
    iv[0] = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, g->gi, g->og, ""), clamp0(c, ok, m), "");
    conv_k(g, k, iv + 1);
    for (int d = 1; d < 4; d++) iv[d] = clamp0(c, ok, iv[d]);
  }
  return sel(c, ok, opnd(g, 0 + (g->n->reduce == OP_CONV2D), iv), LLVMConstNull(g->t));
}

/* Conv: the input position of output column nn before the kernel
 * offsets: oy sh - ph and ox sw - pw. */
static void conv_origin(G *g, LLVMValueRef nn, LLVMValueRef *iy0, LLVMValueRef *ix0) {
  LLVMBuilderRef b = g->c->b;
  LLVMValueRef oy = LLVMBuildUDiv(b, nn, g->OW, ""), ox = LLVMBuildURem(b, nn, g->OW, "");
  *iy0 = LLVMBuildSub(b, LLVMBuildMul(b, oy, g->attr[0], ""), g->attr[2], "");
  *ix0 = LLVMBuildSub(b, LLVMBuildMul(b, ox, g->attr[1], ""), g->attr[3], "");
}

/* B(k, n) when ok (else 0; conv: also 0 in the padding); conv: iy0, ix0
 * from conv_origin of nn. */
static LLVMValueRef conv_b(G *g, LLVMValueRef *ckk, LLVMValueRef ok, LLVMValueRef iy0, LLVMValueRef ix0);

static LLVMValueRef elem_b(G *g, LLVMValueRef k, LLVMValueRef nn, LLVMValueRef ok, LLVMValueRef iy0,
                           LLVMValueRef ix0) {
  Cg *c = g->c;
  LLVMValueRef iv[TDSL_MAX_RANK];
  if (g->n->reduce == OP_MATMUL) {
    int R = g->n->rank;
    batch_index(g, iv);
    iv[R - 2] = clamp0(c, ok, k), iv[R - 1] = clamp0(c, ok, nn);
    return sel(c, ok, opnd(g, 1, iv), LLVMConstNull(g->t));
  }
  /* k split before clamping: one split for the elements of a k */
  LLVMValueRef ckk[3];
  conv_k(g, k, ckk);
  return conv_b(g, ckk, ok, iy0, ix0);
}

/* A conv's input B(k, n) for k split into ckk (ci, ky, kx; conv_k) and
 * column n's iy0, ix0 (conv_origin), 0 when not ok or in the padding. */
static LLVMValueRef conv_b(G *g, LLVMValueRef *ckk, LLVMValueRef ok, LLVMValueRef iy0, LLVMValueRef ix0) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  LLVMValueRef iv[TDSL_MAX_RANK];
  LLVMValueRef ci = ckk[0], ky = ckk[1], kx = ckk[2];
  LLVMValueRef iy = LLVMBuildAdd(b, iy0, LLVMBuildMul(b, ky, g->attr[4], ""), "");
  LLVMValueRef ix = LLVMBuildAdd(b, ix0, LLVMBuildMul(b, kx, g->attr[5], ""), "");
  LLVMValueRef in = land(c, LLVMBuildICmp(b, LLVMIntULT, iy, g->H, ""), LLVMBuildICmp(b, LLVMIntULT, ix, g->W, ""));
  ok = land(c, ok, in);
  int xr = ir_val(c->k, g->v->args[0])->rank, d = 0;
  if (xr == 4) iv[d++] = g->img;
  iv[d++] = LLVMBuildAdd(b, LLVMBuildMul(b, g->gi, g->cg, ""), clamp0(c, ok, ci), "");
  iv[d++] = clamp0(c, ok, iy);
  iv[d] = clamp0(c, ok, ix);
  return sel(c, ok, opnd(g, 0, iv), LLVMConstNull(g->t));
}

/* Stores C(m, n) = v (accumulator type) through the epilogue; conv: oy,
 * ox of column nn. */
static void store_c(G *g, LLVMValueRef m, LLVMValueRef nn, LLVMValueRef v, LLVMValueRef oy,
                    LLVMValueRef ox) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  const LfNest *n = g->n;
  int R = n->rank;
  NestCtx x = {.n = n};
  for (int l = 0; l < R; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
  if (n->store.rt_strides) {
    const LfBuf *buf = &c->lk->bufs[n->store.buf];
    for (int l = 0; l < R; l++) x.rt_stride[l] = g->rts[buf->index][l];
  }
  if (n->reduce == OP_MATMUL) {
    batch_index(g, x.iv);
    x.iv[R - 2] = m, x.iv[R - 1] = nn;
  } else {
    LLVMValueRef ch = LLVMBuildAdd(b, LLVMBuildMul(b, g->gi, g->og, ""), m, "");
    int d = 0;
    if (R == 4) x.iv[d++] = g->img;
    x.iv[d++] = ch;
    x.iv[d++] = oy;
    x.iv[d] = ox;
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

static LLVMValueRef ld(Cg *c, LLVMTypeRef t, LLVMValueRef p) { return LLVMBuildLoad2(c->b, t, p, ""); }

/* ---- 4-vector global loads ------------------------------------------------ */

/* Bytes a 4-vector of dt is aligned to (at most 16), 0 when dt does not
 * load as vectors. */
static int vec_align(DType dt) {
  switch (dt) {
  case DT_F16: case DT_BF16: return 8;
  case DT_F32: case DT_F64: return 16;
  default: return 0;
  }
}

/* Whether operand j is a plain strided view of a buffer (no prologue,
 * scalar, reshape or index tensor) of a dtype vec_align accepts. */
static bool plain(G *g, int j) {
  const LfAccess *a = &g->n->opnd[j];
  if (g->c->opt == 0) return false; /* -O0: scalar loads only */
  if (g->n->pro[j] || a->buf < 0 || g->c->lk->bufs[a->buf].kind == LFB_SCALAR) return false;
  if (a->rt_strides || a->lin_rank || a->ndyn) return false;
  DType dt = ir_val(g->c->k, g->v->args[j])->dtype;
  return vec_align(dt) > 0 && cu_acc_dtype(dt) == g->ad;
}

static LLVMValueRef eq(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildICmp(c->b, LLVMIntEQ, a, b, "");
}

/* Whether v is a multiple of n (a power of two). */
static LLVMValueRef multn(Cg *c, LLVMValueRef v, int n) {
  return eq(c, LLVMBuildAnd(c->b, v, i64c(c, n - 1), ""), i64c(c, 0));
}

static LLVMValueRef mult4(Cg *c, LLVMValueRef v) { return multn(c, v, 4); }

/* Bytes a vector of n elements of dt is aligned to: vec_align's for 4,
 * 16 for 8 (the tensor cores' 16-byte loads of f16/bf16). */
static int vecn_align(DType dt, int n) { return n == 4 ? vec_align(dt) : 16; }

/* Whether pointer p is aligned to `al` bytes (i1). */
static LLVMValueRef aligned(Cg *c, LLVMValueRef p, int al) {
  LLVMValueRef i = LLVMBuildPtrToInt(c->b, p, c->i64, "");
  return eq(c, LLVMBuildAnd(c->b, i, i64c(c, al - 1), ""), i64c(c, 0));
}

static LLVMValueRef stride(G *g, int j, int d) { return cg_sym_val(g->c, g->n->opnd[j].stride[d]); }

/* Whether operand j of a matmul loads as n-vectors (n = 4, or 8: the
 * tensor cores' 16 bytes) along its dim unit (of length len): unit
 * stride, len and every other stride multiples of n, its first element
 * aligned (vecn_align). */
static LLVMValueRef vec_matmul(G *g, int j, int unit, LLVMValueRef len, int n) {
  Cg *c = g->c;
  if (!plain(g, j)) return LLVMConstInt(c->i1, 0, 0);
  const IrValue *a = ir_val(c->k, g->v->args[j]);
  LLVMValueRef ok = land(c, eq(c, stride(g, j, unit), i64c(c, 1)), multn(c, len, n));
  for (int d = 0; d < a->rank; d++)
    if (d != unit) ok = land(c, ok, multn(c, stride(g, j, d), n));
  LLVMValueRef zero[TDSL_MAX_RANK];
  for (int d = 0; d < a->rank; d++) zero[d] = i64c(c, 0);
  return land(c, ok, aligned(c, opnd_addr(g, j, zero), vecn_align(a->dtype, n)));
}

/* Whether a conv's weight (operand 1) loads as n-vectors along k (n as
 * vec_matmul's): dense over [C/groups, KH, KW] (k is then the flat
 * offset), K and the output-channel stride multiples of n, its first
 * element aligned. */
static LLVMValueRef vec_weight(G *g, int n) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  if (!plain(g, 1)) return LLVMConstInt(c->i1, 0, 0);
  LLVMValueRef ok = land(c, eq(c, stride(g, 1, 3), i64c(c, 1)), eq(c, stride(g, 1, 2), g->KW));
  ok = land(c, ok, eq(c, stride(g, 1, 1), LLVMBuildMul(b, g->KH, g->KW, "")));
  ok = land(c, land(c, ok, multn(c, stride(g, 1, 0), n)), multn(c, g->K, n));
  LLVMValueRef zero[4] = {i64c(c, 0), i64c(c, 0), i64c(c, 0), i64c(c, 0)};
  return land(c, ok, aligned(c, opnd_addr(g, 1, zero), vecn_align(ir_val(c->k, g->v->args[1])->dtype, n)));
}

/* Whether a conv's input (operand 0) loads as 4-vectors along n: a
 * 1 x 1 kernel with stride 1 and no padding (n is then the offset in
 * the image, oy W + ox) over an input dense in [H, W], N and the
 * channel (and image) strides multiples of 4, its first element aligned.
 * Known false when the kernel size, stride or padding is a constant
 * that does not fit. */
static LLVMValueRef vec_input(G *g) {
  Cg *c = g->c;
  const IrValue *w = ir_val(c->k, g->v->args[1]), *x = ir_val(c->k, g->v->args[0]);
  LLVMValueRef no = LLVMConstInt(c->i1, 0, 0);
  const Sym *need[6] = {w->shape[2], w->shape[3], g->v->attrs[0], g->v->attrs[1], g->v->attrs[2], g->v->attrs[3]};
  const int64_t want[6] = {1, 1, 1, 1, 0, 0};
  int64_t e;
  for (int i = 0; i < 6; i++)
    if (sym_is_const(need[i], &e) && e != want[i]) return no;
  if (!plain(g, 0)) return no;
  LLVMValueRef ok = LLVMConstInt(c->i1, 1, 0);
  LLVMValueRef val[6] = {g->KH, g->KW, g->attr[0], g->attr[1], g->attr[2], g->attr[3]};
  for (int i = 0; i < 6; i++) ok = land(c, ok, eq(c, val[i], i64c(c, want[i])));
  int r = x->rank;
  ok = land(c, ok, land(c, eq(c, stride(g, 0, r - 1), i64c(c, 1)), eq(c, stride(g, 0, r - 2), g->W)));
  for (int d = 0; d < r - 2; d++) ok = land(c, ok, mult4(c, stride(g, 0, d)));
  ok = land(c, ok, mult4(c, g->N));
  LLVMValueRef zero[4] = {i64c(c, 0), i64c(c, 0), i64c(c, 0), i64c(c, 0)};
  return land(c, ok, aligned(c, opnd_addr(g, 0, zero), vec_align(x->dtype)));
}

/* Operand j's 4 elements from address p as a 4-vector of the
 * accumulator type (0 when not ok).  Converted as a vector: the load
 * stays one 4-vector load. */
static LLVMValueRef load4(G *g, int j, LLVMValueRef p, LLVMValueRef ok) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  DType dt = ir_val(c->k, g->v->args[j])->dtype;
  LLVMTypeRef st = cg_storage_type(c, dt), vt = LLVMVectorType(g->t, 4);
  LLVMValueRef v = LLVMBuildLoad2(b, LLVMVectorType(st, 4), p, "");
  LLVMSetAlignment(v, (unsigned)vec_align(dt));
  if (dt == DT_BF16) {
    v = LLVMBuildShl(b, LLVMBuildZExt(b, v, LLVMVectorType(c->i32, 4), ""),
                     LLVMConstVector((LLVMValueRef[]){i32c(c, 16), i32c(c, 16), i32c(c, 16), i32c(c, 16)}, 4), "");
    v = LLVMBuildBitCast(b, v, LLVMVectorType(c->f32, 4), "");
  } else if (dt == DT_F16) {
    v = LLVMBuildFPExt(b, v, LLVMVectorType(c->f32, 4), "");
  }
  if (LLVMTypeOf(v) != vt) v = LLVMBuildFPExt(b, v, vt, ""); /* f32 operands, f64 accumulation */
  return sel(c, ok, v, LLVMConstNull(vt));
}

/* A 4-vector of e[0..3]. */
static LLVMValueRef vec4(G *g, LLVMValueRef *e) {
  LLVMValueRef x = LLVMGetUndef(LLVMVectorType(g->t, 4));
  for (int i = 0; i < 4; i++) x = LLVMBuildInsertElement(g->c->b, x, e[i], i32c(g->c, i), "");
  return x;
}

static LLVMValueRef elt(G *g, LLVMValueRef v, int i) {
  return LLVMBuildExtractElement(g->c->b, v, i32c(g->c, i), "");
}

/* ---- one tile shape --------------------------------------------------------- */

/* Per thread of a tile shape: which elements it loads and computes. */
typedef struct Map {
  Tile t;
  int ea, eb, tm, tn;
  /* scalar loads: A(am[i], ak), B(bk[i], bn[i]) */
  LLVMValueRef am[MAXE], ak, bk[MAXE], bn[MAXE];
  /* vector loads: A(vam[v], vak[v] + 0..3), B(vbk[v], vbn[v] + 0..3)
   * (b_kmajor: B(vbk[v] + 0..3, vbn[v])) */
  LLVMValueRef vam[MAXE / 4], vak[MAXE / 4], vbk[MAXE / 4], vbn[MAXE / 4];
  LLVMValueRef tx, ty, n0;
  LLVMValueRef iy0[MAXE], ix0[MAXE]; /* conv: conv_origin of B's columns */
  LLVMValueRef pix[MAXE];            /* conv, plain input: iy0 sH + ix0 sW */
  LLVMValueRef ra[MAXE / 4], rb[MAXE / 4]; /* the prefetched K tile: 4-vector allocas */
  LLVMValueRef acc[MAXT][MAXT];      /* allocas */
} Map;

static LLVMValueRef udiv(Cg *c, LLVMValueRef a, int d) { return LLVMBuildUDiv(c->b, a, i64c(c, d), ""); }
static LLVMValueRef urem(Cg *c, LLVMValueRef a, int d) { return LLVMBuildURem(c->b, a, i64c(c, d), ""); }
static LLVMValueRef addc(Cg *c, LLVMValueRef a, long long d) { return LLVMBuildAdd(c->b, a, i64c(c, d), ""); }
static LLVMValueRef add(Cg *c, LLVMValueRef a, LLVMValueRef d) { return LLVMBuildAdd(c->b, a, d, ""); }

static void map_init(G *g, Map *mp, Tile t) {
  Cg *c = g->c;
  LLVMValueRef tid = g->tid;
  mp->t = t;
  mp->ea = t.bm * t.bk / NT, mp->eb = t.bn * t.bk / NT;
  mp->tm = t.bm / 16, mp->tn = t.bn / 16;
  if (mp->ea > MAXE || mp->eb > MAXE || mp->tm > MAXT || mp->tn > MAXT) ICE("gemm tile too large");
  mp->ak = urem(c, tid, t.bk);
  for (int i = 0; i < mp->ea; i++) mp->am[i] = addc(c, udiv(c, tid, t.bk), (NT / t.bk) * i);
  LLVMValueRef lane = urem(c, tid, 32), warp = udiv(c, tid, 32);
  int ng = t.bn / 32; /* column groups of 32 */
  for (int i = 0; i < mp->eb; i++) {
    if (g->kpix) { /* as A's: k = tid % BK */
      mp->bk[i] = urem(c, tid, t.bk);
      mp->bn[i] = addc(c, udiv(c, tid, t.bk), (NT / t.bk) * i);
      continue;
    }
    mp->bn[i] = addc(c, lane, 32 * (i % ng));
    mp->bk[i] = addc(c, LLVMBuildMul(c->b, warp, i64c(c, t.bk / 8), ""), i / ng);
  }
  for (int v = 0; v < mp->ea / 4; v++) {
    LLVMValueRef e = addc(c, tid, NT * v);
    mp->vam[v] = udiv(c, e, t.bk / 4);
    mp->vak[v] = LLVMBuildMul(c->b, urem(c, e, t.bk / 4), i64c(c, 4), "");
  }
  for (int v = 0; v < mp->eb / 4; v++) {
    LLVMValueRef e = addc(c, tid, NT * v);
    if (g->b_kmajor) { /* B(vbk[v] + 0..3, vbn[v]) */
      mp->vbn[v] = udiv(c, e, t.bk / 4);
      mp->vbk[v] = LLVMBuildMul(c->b, urem(c, e, t.bk / 4), i64c(c, 4), "");
    } else {
      mp->vbk[v] = udiv(c, e, t.bn / 4);
      mp->vbn[v] = LLVMBuildMul(c->b, urem(c, e, t.bn / 4), i64c(c, 4), "");
    }
  }
  mp->tx = urem(c, tid, 16), mp->ty = udiv(c, tid, 16);
  mp->n0 = LLVMBuildMul(c->b, LLVMBuildZExt(c->b, cu_sreg(c, "ctaid.x"), c->i64, ""), i64c(c, t.bn), "");
  if (g->n->reduce == OP_CONV2D) {
    int xr = ir_val(c->k, g->v->args[0])->rank;
    for (int i = 0; i < mp->eb; i++) {
      conv_origin(g, add(c, mp->n0, mp->bn[i]), &mp->iy0[i], &mp->ix0[i]);
      if (plain(g, 0))
        mp->pix[i] = add(c, LLVMBuildMul(c->b, mp->iy0[i], stride(g, 0, xr - 2), ""),
                         LLVMBuildMul(c->b, mp->ix0[i], stride(g, 0, xr - 1), ""));
    }
  }
  for (int i = 0; i < mp->ea / 4; i++) mp->ra[i] = cg_entry_alloca(c, LLVMVectorType(g->t, 4), NULL);
  for (int i = 0; i < mp->eb / 4; i++) mp->rb[i] = cg_entry_alloca(c, LLVMVectorType(g->t, 4), NULL);
  for (int i = 0; i < mp->tm; i++)
    for (int j = 0; j < mp->tn; j++) mp->acc[i][j] = cg_entry_alloca(c, g->t, NULL);
}

/* if (cond) { then(g, mp, arg) } else { other(g, mp, arg) } (other may be NULL). */
typedef void (*Arm)(G *g, Map *mp, LLVMValueRef a0, LLVMValueRef a1);
static void branch(G *g, Map *mp, LLVMValueRef cond, Arm then, Arm other, LLVMValueRef a0,
                   LLVMValueRef a1) {
  Cg *c = g->c;
  if (LLVMIsAConstantInt(cond)) { /* known: only that arm */
    Arm arm = LLVMConstIntGetZExtValue(cond) ? then : other;
    if (arm) arm(g, mp, a0, a1);
    return;
  }
  LLVMBasicBlockRef t = block(c, "then"), e = block(c, "else"), j = block(c, "endif");
  LLVMBuildCondBr(c->b, cond, t, e);
  LLVMPositionBuilderAtEnd(c->b, t);
  then(g, mp, a0, a1);
  LLVMBuildBr(c->b, j);
  LLVMPositionBuilderAtEnd(c->b, e);
  if (other) other(g, mp, a0, a1);
  LLVMBuildBr(c->b, j);
  LLVMPositionBuilderAtEnd(c->b, j);
}

/* Loads the K tile at k0 of row block m0 into mp->ra / mp->rb. */
static void load_a_vec(G *g, Map *mp, LLVMValueRef m0, LLVMValueRef k0) {
  Cg *c = g->c;
  for (int v = 0; v < mp->ea / 4; v++) {
    LLVMValueRef m = add(c, m0, mp->vam[v]), k = add(c, k0, mp->vak[v]);
    LLVMValueRef ok = land(c, lt(c, m, g->M), lt(c, k, g->K)), p;
    m = clamp0(c, ok, m), k = clamp0(c, ok, k);
    if (g->n->reduce == OP_MATMUL) {
      LLVMValueRef iv[TDSL_MAX_RANK];
      int R = g->n->rank;
      batch_index(g, iv);
      iv[R - 2] = m, iv[R - 1] = k;
      p = opnd_addr(g, 0, iv);
    } else { /* the weight, dense over k */
      LLVMValueRef iv[4] = {add(c, LLVMBuildMul(c->b, g->gi, g->og, ""), m), i64c(c, 0), i64c(c, 0), i64c(c, 0)};
      p = opnd_addr(g, 1, iv);
      DType dt = ir_val(c->k, g->v->args[1])->dtype;
      p = at(c, cg_storage_type(c, dt), p, k);
    }
    LLVMBuildStore(c->b, load4(g, g->n->reduce == OP_MATMUL ? 0 : 1, p, ok), mp->ra[v]);
  }
}

static void load_a_scalar(G *g, Map *mp, LLVMValueRef m0, LLVMValueRef k0) {
  Cg *c = g->c;
  LLVMValueRef k = add(c, k0, mp->ak), kok = lt(c, k, g->K), e[MAXE];
  for (int i = 0; i < mp->ea; i++) {
    LLVMValueRef m = add(c, m0, mp->am[i]);
    e[i] = elem_a(g, m, k, land(c, lt(c, m, g->M), kok));
  }
  for (int v = 0; v < mp->ea / 4; v++) LLVMBuildStore(c->b, vec4(g, e + 4 * v), mp->ra[v]);
}

static void load_b_vec(G *g, Map *mp, LLVMValueRef k0, LLVMValueRef unused) {
  Cg *c = g->c;
  (void)unused;
  for (int v = 0; v < mp->eb / 4; v++) {
    LLVMValueRef k = add(c, k0, mp->vbk[v]), nn = add(c, mp->n0, mp->vbn[v]);
    LLVMValueRef ok = land(c, lt(c, k, g->K), lt(c, nn, g->N)), iv[TDSL_MAX_RANK];
    k = clamp0(c, ok, k), nn = clamp0(c, ok, nn);
    if (g->n->reduce == OP_MATMUL) {
      int R = g->n->rank;
      batch_index(g, iv);
      iv[R - 2] = k, iv[R - 1] = nn;
      LLVMBuildStore(c->b, load4(g, 1, opnd_addr(g, 1, iv), ok), mp->rb[v]);
    } else { /* a 1 x 1 conv's input: channel k of the image, offset nn */
      const IrValue *x = ir_val(c->k, g->v->args[0]);
      int d = 0;
      if (x->rank == 4) iv[d++] = g->img;
      iv[d++] = add(c, LLVMBuildMul(c->b, g->gi, g->cg, ""), k);
      iv[d++] = i64c(c, 0);
      iv[d] = i64c(c, 0);
      LLVMValueRef p = at(c, cg_storage_type(c, x->dtype), opnd_addr(g, 0, iv), nn);
      LLVMBuildStore(c->b, load4(g, 0, p, ok), mp->rb[v]);
    }
  }
}

/* A conv's input B(k, n) for a plain view: the address of k's channel
 * and kernel offset (once per k) plus the thread's column offset pix
 * (iy0 sH + ix0 sW, once per thread); 0 outside the image or when not
 * ok. */
static LLVMValueRef conv_b_plain(G *g, LLVMValueRef k, LLVMValueRef ok, LLVMValueRef iy0,
                                 LLVMValueRef ix0, LLVMValueRef pix) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  const IrValue *x = ir_val(c->k, g->v->args[0]);
  LLVMValueRef ckk[3], iv[4];
  conv_k(g, k, ckk);
  LLVMValueRef dy = LLVMBuildMul(b, ckk[1], g->attr[4], ""), dx = LLVMBuildMul(b, ckk[2], g->attr[5], "");
  LLVMValueRef iy = add(c, iy0, dy), ix = add(c, ix0, dx);
  ok = land(c, ok, land(c, LLVMBuildICmp(b, LLVMIntULT, iy, g->H, ""), LLVMBuildICmp(b, LLVMIntULT, ix, g->W, "")));
  int d = 0;
  if (x->rank == 4) iv[d++] = g->img;
  iv[d++] = add(c, LLVMBuildMul(b, g->gi, g->cg, ""), ckk[0]);
  iv[d++] = dy;
  iv[d] = dx;
  LLVMValueRef p = at(c, cg_storage_type(c, x->dtype), opnd_addr(g, 0, iv), pix);
  LLVMValueRef zero[4] = {i64c(c, 0), i64c(c, 0), i64c(c, 0), i64c(c, 0)};
  p = sel(c, ok, p, opnd_addr(g, 0, zero)); /* the first element: in range */
  LLVMValueRef v = cg_convert(c, cg_load_el(c, p, x->dtype), x->dtype, g->ad);
  return sel(c, ok, v, LLVMConstNull(g->t));
}

static void load_b_scalar(G *g, Map *mp, LLVMValueRef k0, LLVMValueRef unused) {
  Cg *c = g->c;
  (void)unused;
  LLVMValueRef e[MAXE];
  for (int i = 0; i < mp->eb; i++) {
    if (g->n->reduce == OP_CONV2D && plain(g, 0)) {
      LLVMValueRef k = add(c, k0, mp->bk[i]), nn = add(c, mp->n0, mp->bn[i]);
      e[i] = conv_b_plain(g, k, land(c, lt(c, k, g->K), lt(c, nn, g->N)), mp->iy0[i], mp->ix0[i], mp->pix[i]);
      continue;
    }
    LLVMValueRef k = add(c, k0, mp->bk[i]), nn = add(c, mp->n0, mp->bn[i]);
    LLVMValueRef ok = land(c, lt(c, k, g->K), lt(c, nn, g->N));
    bool conv = g->n->reduce == OP_CONV2D;
    e[i] = elem_b(g, k, nn, ok, conv ? mp->iy0[i] : NULL, conv ? mp->ix0[i] : NULL);
  }
  for (int v = 0; v < mp->eb / 4; v++) LLVMBuildStore(c->b, vec4(g, e + 4 * v), mp->rb[v]);
}

static void load_tile(G *g, Map *mp, LLVMValueRef m0, LLVMValueRef k0) {
  branch(g, mp, g->vec_a, load_a_vec, load_a_scalar, m0, k0);
  branch(g, mp, g->vec_b, load_b_vec, load_b_scalar, k0, NULL);
}

/* Stores the prefetched tile into stage s (i64 0 or 1). */
static void store_a_vec(G *g, Map *mp, LLVMValueRef s, LLVMValueRef unused) {
  Cg *c = g->c;
  (void)unused;
  LLVMValueRef base = at(c, g->t, g->As, LLVMBuildMul(c->b, s, i64c(c, a_stage(mp->t)), ""));
  for (int v = 0; v < mp->ea / 4; v++)
    for (int e = 0; e < 4; e++) {
      LLVMValueRef i = add(c, LLVMBuildMul(c->b, addc(c, mp->vak[v], e), i64c(c, mp->t.bm + APAD), ""), mp->vam[v]);
      LLVMBuildStore(c->b, elt(g, ld(c, LLVMVectorType(g->t, 4), mp->ra[v]), e), at(c, g->t, base, i));
    }
}

static void store_a_scalar(G *g, Map *mp, LLVMValueRef s, LLVMValueRef unused) {
  Cg *c = g->c;
  (void)unused;
  LLVMValueRef base = at(c, g->t, g->As, LLVMBuildMul(c->b, s, i64c(c, a_stage(mp->t)), ""));
  LLVMValueRef row = LLVMBuildMul(c->b, mp->ak, i64c(c, mp->t.bm + APAD), "");
  for (int i = 0; i < mp->ea; i++)
    LLVMBuildStore(c->b, elt(g, ld(c, LLVMVectorType(g->t, 4), mp->ra[i / 4]), i % 4),
                   at(c, g->t, base, add(c, row, mp->am[i])));
}

static void store_b_vec(G *g, Map *mp, LLVMValueRef s, LLVMValueRef unused) {
  Cg *c = g->c;
  (void)unused;
  LLVMValueRef base = at(c, g->t, g->Bs, LLVMBuildMul(c->b, s, i64c(c, b_stage(mp->t)), ""));
  LLVMTypeRef vt = LLVMVectorType(g->t, 4);
  for (int v = 0; v < mp->eb / 4; v++) {
    LLVMValueRef x = ld(c, vt, mp->rb[v]);
    if (g->b_kmajor) { /* 4 rows of one column */
      for (int e = 0; e < 4; e++) {
        LLVMValueRef i = add(c, LLVMBuildMul(c->b, addc(c, mp->vbk[v], e), i64c(c, mp->t.bn + APAD), ""), mp->vbn[v]);
        LLVMBuildStore(c->b, elt(g, x, e), at(c, g->t, base, i));
      }
      continue;
    }
    LLVMValueRef i = add(c, LLVMBuildMul(c->b, mp->vbk[v], i64c(c, mp->t.bn + APAD), ""), mp->vbn[v]);
    LLVMSetAlignment(LLVMBuildStore(c->b, x, at(c, g->t, base, i)), 16);
  }
}

static void store_b_scalar(G *g, Map *mp, LLVMValueRef s, LLVMValueRef unused) {
  Cg *c = g->c;
  (void)unused;
  LLVMValueRef base = at(c, g->t, g->Bs, LLVMBuildMul(c->b, s, i64c(c, b_stage(mp->t)), ""));
  for (int i = 0; i < mp->eb; i++) {
    LLVMValueRef idx = add(c, LLVMBuildMul(c->b, mp->bk[i], i64c(c, mp->t.bn + APAD), ""), mp->bn[i]);
    LLVMBuildStore(c->b, elt(g, ld(c, LLVMVectorType(g->t, 4), mp->rb[i / 4]), i % 4), at(c, g->t, base, idx));
  }
}

static void store_tile(G *g, Map *mp, LLVMValueRef s) {
  branch(g, mp, g->vec_a, store_a_vec, store_a_scalar, s, NULL);
  branch(g, mp, g->vec_b, store_b_vec, store_b_scalar, s, NULL);
}

/* The BK x TM x TN multiply-adds of stage s, straight-line (f32; 8-byte
 * accumulators: a loop over k, as straight-line code spills): per k,
 * the thread's A and B values as 4-vectors from shared memory. */
static void compute(G *g, Map *mp, LLVMValueRef s) {
  Cg *c = g->c;
  Tile t = mp->t;
  LLVMTypeRef vt = LLVMVectorType(g->t, 4);
  LLVMValueRef abase = at(c, g->t, g->As, add(c, LLVMBuildMul(c->b, s, i64c(c, a_stage(t)), ""),
                                               LLVMBuildMul(c->b, mp->ty, i64c(c, 4), "")));
  LLVMValueRef bbase = at(c, g->t, g->Bs, add(c, LLVMBuildMul(c->b, s, i64c(c, b_stage(t)), ""),
                                               LLVMBuildMul(c->b, mp->tx, i64c(c, 4), "")));
  LLVMValueRef acc[MAXT][MAXT], av[MAXT], bv[MAXT];
  for (int i = 0; i < mp->tm; i++)
    for (int j = 0; j < mp->tn; j++) acc[i][j] = ld(c, g->t, mp->acc[i][j]);
  bool loop = g->ad != DT_F32;
  LLVMValueRef kv = NULL;
  if (loop) {
    for (int i = 0; i < mp->tm; i++)
      for (int j = 0; j < mp->tn; j++) LLVMBuildStore(c->b, acc[i][j], mp->acc[i][j]);
    kv = cg_open_loop(c, i64c(c, t.bk));
    for (int i = 0; i < mp->tm; i++)
      for (int j = 0; j < mp->tn; j++) acc[i][j] = ld(c, g->t, mp->acc[i][j]);
  }
  for (int kk = 0; kk < (loop ? 1 : t.bk); kk++) {
    LLVMValueRef ka = loop ? LLVMBuildMul(c->b, kv, i64c(c, t.bm + APAD), "") : i64c(c, kk * (t.bm + APAD));
    LLVMValueRef kb = loop ? LLVMBuildMul(c->b, kv, i64c(c, t.bn + APAD), "") : i64c(c, kk * (t.bn + APAD));
    for (int q = 0; q < mp->tm / 4; q++) {
      LLVMValueRef v = LLVMBuildLoad2(c->b, vt, at(c, g->t, abase, addc(c, ka, 64 * q)), "");
      LLVMSetAlignment(v, 16);
      for (int e = 0; e < 4; e++) av[4 * q + e] = LLVMBuildExtractElement(c->b, v, i32c(c, e), "");
    }
    for (int q = 0; q < mp->tn / 4; q++) {
      LLVMValueRef v = LLVMBuildLoad2(c->b, vt, at(c, g->t, bbase, addc(c, kb, 64 * q)), "");
      LLVMSetAlignment(v, 16);
      for (int e = 0; e < 4; e++) bv[4 * q + e] = LLVMBuildExtractElement(c->b, v, i32c(c, e), "");
    }
    for (int i = 0; i < mp->tm; i++)
      for (int j = 0; j < mp->tn; j++) acc[i][j] = mac(g, av[i], bv[j], acc[i][j]);
  }
  for (int i = 0; i < mp->tm; i++)
    for (int j = 0; j < mp->tn; j++) LLVMBuildStore(c->b, acc[i][j], mp->acc[i][j]);
  if (loop) cg_close_loop(c);
}

static void store_arm(G *g, Map *mp, LLVMValueRef s, LLVMValueRef unused) {
  (void)unused;
  store_tile(g, mp, s);
}
static void load_arm(G *g, Map *mp, LLVMValueRef m0, LLVMValueRef k0) { load_tile(g, mp, m0, k0); }

/* Special register `name` (i64), read by an inline-asm mov with side
 * effects: not hoisted or merged with earlier reads, so what is computed
 * from it is not kept in registers from the kernel's start. */
static LLVMValueRef fresh_sreg(Cg *c, const char *name) {
  char text[32];
  snprintf(text, sizeof text, "mov.u32 $0, %%%s;", name);
  LLVMTypeRef ft = LLVMFunctionType(c->i32, NULL, 0, 0);
  LLVMValueRef asmv = LLVMGetInlineAsm(ft, text, strlen(text), "=r", 2, 1, 0, LLVMInlineAsmDialectATT, 0);
  return LLVMBuildZExt(c->b, LLVMBuildCall2(c->b, ft, asmv, NULL, 0, ""), c->i64, "");
}

/* After the block wrote rows 64 h .. 64 h + 63 of its BM x BN tile
 * (at m0, n0) to Cs (64 x BN f32): a barrier, then the block stores
 * them through store_c, consecutive threads on consecutive columns
 * (tid: the thread's index), and a barrier before Cs is written again. */
static void store_rows(G *g, Tile t, LLVMValueRef tid, LLVMValueRef m0, LLVMValueRef n0, int h) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  cu_barrier(c);
  LLVMValueRef it = cg_open_loop(c, i64c(c, 64 * t.bn / NT));
  LLVMValueRef e = add(c, tid, LLVMBuildMul(b, it, i64c(c, NT), ""));
  LLVMValueRef m = add(c, m0, addc(c, udiv(c, e, t.bn), 64 * h)), col = add(c, n0, urem(c, e, t.bn));
  LLVMBasicBlockRef st = block(c, "store"), stored = block(c, "stored");
  LLVMBuildCondBr(b, land(c, lt(c, m, g->M), lt(c, col, g->N)), st, stored);
  LLVMPositionBuilderAtEnd(b, st);
  LLVMValueRef oy = NULL, ox = NULL;
  if (g->n->reduce == OP_CONV2D) oy = LLVMBuildUDiv(b, col, g->OW, ""), ox = LLVMBuildURem(b, col, g->OW, "");
  store_c(g, m, col, ld(c, g->t, at(c, g->t, g->Cs, e)), oy, ox);
  LLVMBuildBr(b, stored);
  LLVMPositionBuilderAtEnd(b, stored);
  cg_close_loop(c);
  cu_barrier(c); /* before the next rows (or tiles) overwrite it */
}

/* The whole kernel body for tile shape t. */
static void emit_tile(G *g, Tile t) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  Map mp;
  map_init(g, &mp, t);
  const LfNest *n = g->n;
  LLVMValueRef mblocks = LLVMBuildUDiv(b, addc(c, g->M, t.bm - 1), i64c(c, t.bm), "");
  CuLoop lb, lm, lk;
  g->bt = cu_loop_open(c, &lb, LLVMBuildZExt(b, cu_sreg(c, "ctaid.z"), c->i64, ""), g->batch,
                       LLVMBuildZExt(b, cu_sreg(c, "nctaid.z"), c->i64, ""));
  if (n->reduce == OP_CONV2D) {
    g->img = LLVMBuildUDiv(b, g->bt, g->groups, "");
    g->gi = LLVMBuildURem(b, g->bt, g->groups, "");
  } else {
    cu_split_rowmajor(c, g->bt, n->shape, n->rank - 2, g->biv);
  }
  /* row blocks grid-stride in y (a grid's y extent is at most 65535) */
  LLVMValueRef mb = cu_loop_open(c, &lm, LLVMBuildZExt(b, cu_sreg(c, "ctaid.y"), c->i64, ""), mblocks,
                                 LLVMBuildZExt(b, cu_sreg(c, "nctaid.y"), c->i64, ""));
  LLVMValueRef m0 = LLVMBuildMul(b, mb, i64c(c, t.bm), "");
  for (int i = 0; i < mp.tm; i++)
    for (int j = 0; j < mp.tn; j++) LLVMBuildStore(b, LLVMConstNull(g->t), mp.acc[i][j]);
  /* the first K tile into stage 0 (zeros when K is 0) */
  load_tile(g, &mp, m0, i64c(c, 0));
  store_tile(g, &mp, i64c(c, 0));
  cu_barrier(c);
  LLVMValueRef k0 = cu_loop_open(c, &lk, i64c(c, 0), g->K, i64c(c, t.bk));
  int lg = t.bk == 8 ? 3 : 4;
  LLVMValueRef s = LLVMBuildAnd(b, LLVMBuildLShr(b, k0, i64c(c, lg), ""), i64c(c, 1), "");
  LLVMValueRef k1 = addc(c, k0, t.bk), more = lt(c, k1, g->K);
  branch(g, &mp, more, load_arm, NULL, m0, k1); /* the next tile into registers */
  compute(g, &mp, s);
  branch(g, &mp, more, store_arm, NULL, LLVMBuildXor(b, s, i64c(c, 1), ""), NULL);
  cu_barrier(c);
  cu_loop_close(c, &lk);
  /* the outputs through shared memory, 64 rows at a time: each thread
   * writes its values there (4-vectors), then the block stores the rows
   * with consecutive threads on consecutive columns (one store_c in a
   * loop).  The K loop's last barrier freed the operand tiles; indices
   * come from fresh reads of tid.x and ctaid.x, so that they take no
   * registers during the K loop. */
  LLVMValueRef tid = fresh_sreg(c, "tid.x");
  LLVMValueRef tx = urem(c, tid, 16), ty = udiv(c, tid, 16);
  LLVMValueRef n0 = LLVMBuildMul(b, fresh_sreg(c, "ctaid.x"), i64c(c, t.bn), "");
  for (int h = 0; h < mp.tm / 4; h++) {
    for (int r = 0; r < 4; r++)
      for (int q = 0; q < mp.tn / 4; q++) {
        LLVMValueRef e[4];
        for (int j = 0; j < 4; j++) e[j] = ld(c, g->t, mp.acc[4 * h + r][4 * q + j]);
        LLVMValueRef row = addc(c, LLVMBuildMul(b, ty, i64c(c, 4), ""), r);
        LLVMValueRef i = add(c, LLVMBuildMul(b, row, i64c(c, t.bn), ""), addc(c, LLVMBuildMul(b, tx, i64c(c, 4), ""), 64 * q));
        LLVMSetAlignment(LLVMBuildStore(b, vec4(g, e), at(c, g->t, g->Cs, i)), 16);
      }
    store_rows(g, t, tid, m0, n0, h);
  }
  cu_loop_close(c, &lm);
  cu_loop_close(c, &lb);
}

/* ---- tensor cores ------------------------------------------------------------
 * A matmul or conv2d whose operands are both f16 or both bf16, at -O1
 * and up on sm_80 and up (lf_gemm_mma), runs on tensor cores: the same grid,
 * batch and row-block loops, epilogue (store_rows, store_c) and edge
 * handling as above, but the block's 8 warps each compute a WM x WN warp
 * tile (2 x 4 warps: 64 x 32 of the 128 x 128 tiles, 32 x 16 of the
 * 64 x 64 ones) as 16 x 8 fragments with
 * mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (NVVM's
 * llvm.nvvm.mma.m16n8k16.row.col.f32.f32 and .bf16), accumulating in
 * f32 registers (the fragment layout is the PTX ISA's "Matrix Fragments
 * for mma.m16n8k16 with floating point type").  K steps by MK = 32.
 * Shared memory holds the operands' 16-bit bits, A as As[m][k] and B
 * as Bs[n][k] (k contiguous, rows of MROW = 40 elements: the 32-bit
 * fragment loads of a warp's 8 rows x 4 pairs fall on 32 different
 * banks), double-buffered as above.  Each thread loads 8 consecutive
 * elements per vector: A along k; B along k when its k stride is 1 and
 * its n stride is not (x @ w.T), and a conv's input (k runs
 * (ci KH + ky) KW + kx in either layout), else along n (stored into Bs
 * one by one); as one 16-byte load when the operand is a plain view with
 * a unit stride there, that length and the other strides multiples of 8
 * and an aligned start (a conv's weight: dense over [C/groups, KH, KW];
 * checked once, uniform branches as above), else as 8 element loads
 * (elem_a / elem_b: any view, prologues, edges, a conv's im2col).
 * Elements outside M, N or K are zeros in shared memory.  Each output
 * is rounded once, from the f32 accumulator, in the epilogue. */

static const Tile MBIG = {128, 128, 32}, MSMALL = {64, 64, 32};
enum {
  MK = 32,       /* K step */
  MROW = MK + 8, /* a shared row, 16-bit elements */
};

/* 16-bit elements of one stage (A then B). */
static int mma_stage(Tile t) { return (t.bm + t.bn) * MROW; }

typedef struct MMap {
  Tile t;
  int wm, wn, mt, nt;          /* warp tile WM x WN: mt x nt fragments of 16 x 8 */
  int va, vb;                  /* 8-element vectors of A and B per thread and K step */
  LLVMValueRef ar[2], ak[2];   /* A vector v: A(m0 + ar, k0 + ak + 0..7) */
  LLVMValueRef br[2], bk[2];   /* B vector v: B(k0 + bk + 0..7, n0 + br) when b_kmajor,
                                  else B(k0 + bk, n0 + br + 0..7) */
  LLVMValueRef ra[2], rb[2];   /* the prefetched K tile: <8 x i16> allocas */
  LLVMValueRef fa, fb;         /* the thread's fragment offsets in a stage */
  LLVMValueRef warp, g4, t4;   /* warp, lane / 4, lane % 4 */
  LLVMValueRef n0;
  LLVMValueRef iy0[2], ix0[2]; /* conv: conv_origin of B vector v's column */
  LLVMValueRef acc[4][4][4];   /* [i][j][q]: fragment (i, j)'s c_q, allocas */
} MMap;




static void mma_map(G *g, MMap *mp, Tile t) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  mp->t = t;
  mp->wm = t.bm / 2, mp->wn = t.bn / 4;
  mp->mt = mp->wm / 16, mp->nt = mp->wn / 8;
  mp->va = t.bm * MK / 8 / NT, mp->vb = t.bn * MK / 8 / NT;
  if (mp->mt > 4 || mp->nt > 4 || mp->va > 2 || mp->vb > 2) ICE("mma tile too large");
  for (int v = 0; v < mp->va; v++) {
    LLVMValueRef e = addc(c, g->tid, NT * v);
    mp->ar[v] = udiv(c, e, MK / 8);
    mp->ak[v] = LLVMBuildMul(b, urem(c, e, MK / 8), i64c(c, 8), "");
  }
  for (int v = 0; v < mp->vb; v++) {
    LLVMValueRef e = addc(c, g->tid, NT * v);
    if (g->b_kmajor) {
      mp->br[v] = udiv(c, e, MK / 8);
      mp->bk[v] = LLVMBuildMul(b, urem(c, e, MK / 8), i64c(c, 8), "");
    } else {
      mp->bk[v] = udiv(c, e, t.bn / 8);
      mp->br[v] = LLVMBuildMul(b, urem(c, e, t.bn / 8), i64c(c, 8), "");
    }
  }
  LLVMValueRef lane = urem(c, g->tid, 32);
  mp->warp = udiv(c, g->tid, 32), mp->g4 = udiv(c, lane, 4), mp->t4 = urem(c, lane, 4);
  LLVMValueRef wr = LLVMBuildMul(b, udiv(c, mp->warp, 4), i64c(c, mp->wm), "");
  LLVMValueRef wc = LLVMBuildMul(b, urem(c, mp->warp, 4), i64c(c, mp->wn), "");
  LLVMValueRef t2 = LLVMBuildMul(b, mp->t4, i64c(c, 2), "");
  mp->fa = add(c, LLVMBuildMul(b, add(c, wr, mp->g4), i64c(c, MROW), ""), t2);
  mp->fb = add(c, LLVMBuildMul(b, addc(c, add(c, wc, mp->g4), t.bm), i64c(c, MROW), ""), t2);
  mp->n0 = LLVMBuildMul(b, LLVMBuildZExt(b, cu_sreg(c, "ctaid.x"), c->i64, ""), i64c(c, t.bn), "");
  if (g->n->reduce == OP_CONV2D)
    for (int v = 0; v < mp->vb; v++) conv_origin(g, add(c, mp->n0, mp->br[v]), &mp->iy0[v], &mp->ix0[v]);
  LLVMTypeRef vt = LLVMVectorType(c->i16, 8);
  for (int v = 0; v < mp->va; v++) mp->ra[v] = cg_entry_alloca(c, vt, NULL);
  for (int v = 0; v < mp->vb; v++) mp->rb[v] = cg_entry_alloca(c, vt, NULL);
  for (int i = 0; i < mp->mt; i++)
    for (int j = 0; j < mp->nt; j++)
      for (int q = 0; q < 4; q++) mp->acc[i][j][q] = cg_entry_alloca(c, c->f32, NULL);
}

/* An operand element (the accumulator type, as elem_a / elem_b give
 * it) as its 16-bit bits. */
static LLVMValueRef bits16(G *g, LLVMValueRef v) {
  Cg *c = g->c;
  LLVMValueRef s = cg_to_storage(c, cg_convert(c, v, g->ad, g->od), g->od);
  return LLVMTypeOf(s) == c->i16 ? s : LLVMBuildBitCast(c->b, s, c->i16, "");
}

/* 8 elements of operand j from address p (16 bytes), zeros when not ok. */
static LLVMValueRef load8(G *g, LLVMValueRef p, LLVMValueRef ok) {
  Cg *c = g->c;
  LLVMTypeRef vt = LLVMVectorType(c->i16, 8);
  LLVMValueRef v = LLVMBuildLoad2(c->b, vt, p, "");
  LLVMSetAlignment(v, 16);
  return sel(c, ok, v, LLVMConstNull(vt));
}

static LLVMValueRef ins(Cg *c, LLVMValueRef v, LLVMValueRef e, int i) {
  return LLVMBuildInsertElement(c->b, v, e, i32c(c, i), "");
}

/* Operand indices of a matmul: the batch, then r, s. */
static void mm_index(G *g, LLVMValueRef r, LLVMValueRef s, LLVMValueRef *iv) {
  int R = g->n->rank;
  batch_index(g, iv);
  iv[R - 2] = r, iv[R - 1] = s;
}

/* The K tile at k0 of row block m0 into mp->ra / mp->rb. */
static void mma_load(G *g, MMap *mp, LLVMValueRef m0, LLVMValueRef k0) {
  Cg *c = g->c;
  bool va = LLVMConstIntGetZExtValue(g->vec_a), vb = LLVMConstIntGetZExtValue(g->vec_b);
  LLVMTypeRef vt = LLVMVectorType(c->i16, 8);
  LLVMValueRef iv[TDSL_MAX_RANK];
  for (int v = 0; v < mp->va; v++) {
    LLVMValueRef m = add(c, m0, mp->ar[v]), k = add(c, k0, mp->ak[v]), x;
    LLVMValueRef mok = lt(c, m, g->M);
    if (va && g->n->reduce == OP_CONV2D) { /* the weight, dense over k */
      LLVMValueRef ok = land(c, mok, lt(c, k, g->K));
      LLVMValueRef w[4] = {add(c, LLVMBuildMul(c->b, g->gi, g->og, ""), clamp0(c, ok, m)), i64c(c, 0), i64c(c, 0),
                           i64c(c, 0)};
      x = load8(g, at(c, c->i16, opnd_addr(g, 1, w), clamp0(c, ok, k)), ok);
    } else if (va) { /* K is a multiple of 8: k < K covers k .. k + 7 */
      LLVMValueRef ok = land(c, mok, lt(c, k, g->K));
      mm_index(g, clamp0(c, ok, m), clamp0(c, ok, k), iv);
      x = load8(g, opnd_addr(g, 0, iv), ok);
    } else {
      x = LLVMGetUndef(vt);
      for (int i = 0; i < 8; i++) {
        LLVMValueRef ki = addc(c, k, i);
        x = ins(c, x, bits16(g, elem_a(g, m, ki, land(c, mok, lt(c, ki, g->K)))), i);
      }
    }
    LLVMBuildStore(c->b, x, mp->ra[v]);
  }
  for (int v = 0; v < mp->vb; v++) {
    LLVMValueRef nn = add(c, mp->n0, mp->br[v]), k = add(c, k0, mp->bk[v]), x;
    if (vb) { /* the vector's dim (k or n) is a multiple of 8 long */
      LLVMValueRef ok = land(c, lt(c, nn, g->N), lt(c, k, g->K));
      mm_index(g, clamp0(c, ok, k), clamp0(c, ok, nn), iv);
      x = load8(g, opnd_addr(g, 1, iv), ok);
    } else if (g->n->reduce == OP_CONV2D) { /* 8 consecutive k of column nn: k split once,
                                               then stepped (kx, then ky, then ci) */
      LLVMBuilderRef b = c->b;
      LLVMValueRef ckk[3], nok = lt(c, nn, g->N);
      conv_k(g, k, ckk);
      x = LLVMGetUndef(vt);
      for (int i = 0; i < 8; i++) {
        LLVMValueRef ok = land(c, lt(c, addc(c, k, i), g->K), nok);
        x = ins(c, x, bits16(g, conv_b(g, ckk, ok, mp->iy0[v], mp->ix0[v])), i);
        if (i == 7) break;
        LLVMValueRef kx = addc(c, ckk[2], 1), wx = eq(c, kx, g->KW);
        LLVMValueRef ky = LLVMBuildAdd(b, ckk[1], LLVMBuildZExt(b, wx, c->i64, ""), ""), wy = eq(c, ky, g->KH);
        ckk[2] = sel(c, wx, i64c(c, 0), kx);
        ckk[1] = sel(c, wy, i64c(c, 0), ky);
        ckk[0] = LLVMBuildAdd(b, ckk[0], LLVMBuildZExt(b, wy, c->i64, ""), "");
      }
    } else {
      x = LLVMGetUndef(vt);
      for (int i = 0; i < 8; i++) {
        LLVMValueRef ki = g->b_kmajor ? addc(c, k, i) : k, ni = g->b_kmajor ? nn : addc(c, nn, i);
        LLVMValueRef ok = land(c, lt(c, ki, g->K), lt(c, ni, g->N));
        x = ins(c, x, bits16(g, elem_b(g, ki, ni, ok, NULL, NULL)), i);
      }
    }
    LLVMBuildStore(c->b, x, mp->rb[v]);
  }
}

/* The prefetched tile into stage s (i64 0 or 1). */
static void mma_store(G *g, MMap *mp, LLVMValueRef s) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  LLVMTypeRef vt = LLVMVectorType(c->i16, 8);
  LLVMValueRef base = at(c, c->i16, g->As, LLVMBuildMul(b, s, i64c(c, mma_stage(mp->t)), ""));
  for (int v = 0; v < mp->va; v++) {
    LLVMValueRef i = add(c, LLVMBuildMul(b, mp->ar[v], i64c(c, MROW), ""), mp->ak[v]);
    LLVMSetAlignment(LLVMBuildStore(b, ld(c, vt, mp->ra[v]), at(c, c->i16, base, i)), 16);
  }
  LLVMValueRef bs = at(c, c->i16, base, i64c(c, mp->t.bm * MROW));
  for (int v = 0; v < mp->vb; v++) {
    LLVMValueRef x = ld(c, vt, mp->rb[v]);
    if (g->b_kmajor) { /* Bs[n][k .. k + 7] */
      LLVMValueRef i = add(c, LLVMBuildMul(b, mp->br[v], i64c(c, MROW), ""), mp->bk[v]);
      LLVMSetAlignment(LLVMBuildStore(b, x, at(c, c->i16, bs, i)), 16);
      continue;
    }
    for (int e = 0; e < 8; e++) { /* Bs[n + e][k] */
      LLVMValueRef i = add(c, LLVMBuildMul(b, addc(c, mp->br[v], e), i64c(c, MROW), ""), mp->bk[v]);
      LLVMBuildStore(b, elt(g, x, e), at(c, c->i16, bs, i));
    }
  }
}

/* A 32-bit word (two 16-bit elements) of shared memory at element i of base. */
static LLVMValueRef word(Cg *c, LLVMValueRef base, LLVMValueRef i) {
  LLVMValueRef v = ld(c, c->i32, at(c, c->i16, base, i));
  LLVMSetAlignment(v, 4);
  return v;
}

/* acc[0..3] += A fragment a[0..3] x B fragment b[0..1] (one mma.sync). */
static void mma_op(G *g, LLVMValueRef *a, LLVMValueRef *bf, LLVMValueRef *acc) {
  Cg *c = g->c;
  bool bf16 = g->od == DT_BF16;
  LLVMTypeRef h2 = LLVMVectorType(c->f16, 2);
  LLVMValueRef args[10];
  for (int i = 0; i < 4; i++) args[i] = bf16 ? a[i] : LLVMBuildBitCast(c->b, a[i], h2, "");
  for (int i = 0; i < 2; i++) args[4 + i] = bf16 ? bf[i] : LLVMBuildBitCast(c->b, bf[i], h2, "");
  for (int i = 0; i < 4; i++) args[6 + i] = acc[i];
  LLVMValueRef r = cg_intrinsic(c, bf16 ? "llvm.nvvm.mma.m16n8k16.row.col.bf16" : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
                                NULL, 0, args, 10);
  for (int i = 0; i < 4; i++) acc[i] = LLVMBuildExtractValue(c->b, r, (unsigned)i, "");
}

/* The mma.sync operations of stage s: per 16 of k, the warp's B
 * fragments, then per 16 rows its A fragment and the row's nt mmas.
 * Fragment (i, j) of the warp: rows WM (warp / 4) + 16 i + .., columns
 * WN (warp % 4) + 8 j + ..; a thread's words: A at rows g4 and g4 + 8,
 * k 2 t4 and 2 t4 + 8; B at column g4, the same k (PTX ISA layout). */
static void mma_compute(G *g, MMap *mp, LLVMValueRef s) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  LLVMValueRef base = at(c, c->i16, g->As, LLVMBuildMul(b, s, i64c(c, mma_stage(mp->t)), ""));
  LLVMValueRef pa = at(c, c->i16, base, mp->fa), pb = at(c, c->i16, base, mp->fb);
  LLVMValueRef acc[4][4][4];
  for (int i = 0; i < mp->mt; i++)
    for (int j = 0; j < mp->nt; j++)
      for (int q = 0; q < 4; q++) acc[i][j][q] = ld(c, c->f32, mp->acc[i][j][q]);
  for (int kk = 0; kk < MK; kk += 16) {
    LLVMValueRef bfr[4][2];
    for (int j = 0; j < mp->nt; j++)
      for (int h = 0; h < 2; h++) bfr[j][h] = word(c, pb, i64c(c, j * 8 * MROW + kk + 8 * h));
    for (int i = 0; i < mp->mt; i++) {
      LLVMValueRef afr[4];
      for (int r = 0; r < 4; r++) /* a0: (g4, 2 t4), a1: (g4 + 8, ..), a2: (g4, 2 t4 + 8), a3 */
        afr[r] = word(c, pa, i64c(c, (i * 16 + 8 * (r & 1)) * MROW + kk + 8 * (r >> 1)));
      for (int j = 0; j < mp->nt; j++) mma_op(g, afr, bfr[j], acc[i][j]);
    }
  }
  for (int i = 0; i < mp->mt; i++)
    for (int j = 0; j < mp->nt; j++)
      for (int q = 0; q < 4; q++) LLVMBuildStore(b, acc[i][j][q], mp->acc[i][j][q]);
}

/* if (cond) { load (or store) the tile } */
static void mma_if(G *g, MMap *mp, LLVMValueRef cond, LLVMValueRef m0, LLVMValueRef k1, LLVMValueRef s) {
  Cg *c = g->c;
  LLVMBasicBlockRef t = block(c, "then"), j = block(c, "endif");
  LLVMBuildCondBr(c->b, cond, t, j);
  LLVMPositionBuilderAtEnd(c->b, t);
  if (s) mma_store(g, mp, s);
  else mma_load(g, mp, m0, k1);
  LLVMBuildBr(c->b, j);
  LLVMPositionBuilderAtEnd(c->b, j);
}

/* The whole tensor-core kernel body for tile shape t. */
static void emit_mma(G *g, Tile t) {
  Cg *c = g->c;
  LLVMBuilderRef b = c->b;
  MMap mp;
  mma_map(g, &mp, t);
  LLVMValueRef mblocks = LLVMBuildUDiv(b, addc(c, g->M, t.bm - 1), i64c(c, t.bm), "");
  CuLoop lb, lm, lk;
  g->bt = cu_loop_open(c, &lb, LLVMBuildZExt(b, cu_sreg(c, "ctaid.z"), c->i64, ""), g->batch,
                       LLVMBuildZExt(b, cu_sreg(c, "nctaid.z"), c->i64, ""));
  if (g->n->reduce == OP_CONV2D) {
    g->img = LLVMBuildUDiv(b, g->bt, g->groups, "");
    g->gi = LLVMBuildURem(b, g->bt, g->groups, "");
  } else {
    cu_split_rowmajor(c, g->bt, g->n->shape, g->n->rank - 2, g->biv);
  }
  LLVMValueRef mb = cu_loop_open(c, &lm, LLVMBuildZExt(b, cu_sreg(c, "ctaid.y"), c->i64, ""), mblocks,
                                 LLVMBuildZExt(b, cu_sreg(c, "nctaid.y"), c->i64, ""));
  LLVMValueRef m0 = LLVMBuildMul(b, mb, i64c(c, t.bm), "");
  for (int i = 0; i < mp.mt; i++)
    for (int j = 0; j < mp.nt; j++)
      for (int q = 0; q < 4; q++) LLVMBuildStore(b, LLVMConstNull(c->f32), mp.acc[i][j][q]);
  mma_load(g, &mp, m0, i64c(c, 0)); /* zeros when K is 0 */
  mma_store(g, &mp, i64c(c, 0));
  cu_barrier(c);
  LLVMValueRef k0 = cu_loop_open(c, &lk, i64c(c, 0), g->K, i64c(c, MK));
  LLVMValueRef s = LLVMBuildAnd(b, LLVMBuildLShr(b, k0, i64c(c, 5), ""), i64c(c, 1), "");
  LLVMValueRef k1 = addc(c, k0, MK), more = lt(c, k1, g->K);
  mma_if(g, &mp, more, m0, k1, NULL);
  mma_compute(g, &mp, s);
  mma_if(g, &mp, more, NULL, NULL, LLVMBuildXor(b, s, i64c(c, 1), ""));
  cu_barrier(c);
  cu_loop_close(c, &lk);
  /* the outputs through shared memory, 64 rows at a time (the warps
   * whose rows they are write them), as the CUDA-core kernel does */
  LLVMValueRef tid = fresh_sreg(c, "tid.x"), lane = urem(c, tid, 32), warp = udiv(c, tid, 32);
  LLVMValueRef g4 = udiv(c, lane, 4), t2 = LLVMBuildMul(b, urem(c, lane, 4), i64c(c, 2), "");
  LLVMValueRef wr = LLVMBuildMul(b, udiv(c, warp, 4), i64c(c, mp.wm), "");
  LLVMValueRef wc = LLVMBuildMul(b, urem(c, warp, 4), i64c(c, mp.wn), "");
  LLVMValueRef n0 = LLVMBuildMul(b, fresh_sreg(c, "ctaid.x"), i64c(c, t.bn), "");
  LLVMTypeRef v2 = LLVMVectorType(c->f32, 2);
  for (int h = 0; h < t.bm / 64; h++) {
    LLVMBasicBlockRef w = block(c, "mine"), done = block(c, "written");
    LLVMBuildCondBr(b, eq(c, udiv(c, wr, 64), i64c(c, h)), w, done);
    LLVMPositionBuilderAtEnd(b, w);
    for (int i = 0; i < mp.mt; i++)
      for (int j = 0; j < mp.nt; j++)
        for (int q = 0; q < 2; q++) { /* c0, c1 at row g4; c2, c3 at g4 + 8 */
          LLVMValueRef row = add(c, addc(c, wr, i * 16 + 8 * q - 64 * h), g4);
          LLVMValueRef col = add(c, addc(c, wc, j * 8), t2);
          LLVMValueRef e[2] = {ld(c, c->f32, mp.acc[i][j][2 * q]), ld(c, c->f32, mp.acc[i][j][2 * q + 1])};
          LLVMValueRef x = ins(c, ins(c, LLVMGetUndef(v2), e[0], 0), e[1], 1);
          LLVMValueRef p = at(c, c->f32, g->Cs, add(c, LLVMBuildMul(b, row, i64c(c, t.bn), ""), col));
          LLVMSetAlignment(LLVMBuildStore(b, x, p), 8);
        }
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, done);
    store_rows(g, t, tid, m0, n0, h);
  }
  cu_loop_close(c, &lm);
  cu_loop_close(c, &lb);
}

static bool known_false(LLVMValueRef v) { return LLVMIsAConstantInt(v) && !LLVMConstIntGetZExtValue(v); }

/* nvvm.annotations: fn's `key` is v (.maxntid, .maxnreg in the PTX). */
static void annotate(Cg *c, LLVMValueRef fn, const char *key, int v) {
  LLVMValueRef md[3] = {fn, LLVMMDStringInContext(c->ctx, key, (unsigned)strlen(key)), i32c(c, v)};
  LLVMAddNamedMetadataOperand(c->mod, "nvvm.annotations", LLVMMDNodeInContext(c->ctx, md, 3));
}

enum { V_BIG = 1, V_VEC_A = 2, V_VEC_B = 4 };

/* One whole kernel body per combination of the uniform conditions
 * conds[i .. n) that are not known (cond k, when true, sets the flags
 * masks[k] in `flags`): each body's loops hold only their own
 * loop-invariant values (registers). */
static void variants(G *g, LLVMValueRef *conds, const int *masks, int i, int n, int flags) {
  Cg *c = g->c;
  if (i == n) {
    g->vec_a = LLVMConstInt(c->i1, (flags & V_VEC_A) != 0, 0);
    g->vec_b = LLVMConstInt(c->i1, (flags & V_VEC_B) != 0, 0);
    if (g->mma) emit_mma(g, flags & V_BIG ? MBIG : MSMALL);
    else emit_tile(g, flags & V_BIG ? BIG : SMALL);
    return;
  }
  if (LLVMIsAConstantInt(conds[i])) {
    variants(g, conds, masks, i + 1, n, flags | (LLVMConstIntGetZExtValue(conds[i]) ? masks[i] : 0));
    return;
  }
  LLVMBasicBlockRef t = block(c, "yes"), e = block(c, "no"), j = block(c, "joined");
  LLVMBuildCondBr(c->b, conds[i], t, e);
  for (int v = 1; v >= 0; v--) {
    LLVMPositionBuilderAtEnd(c->b, v ? t : e);
    variants(g, conds, masks, i + 1, n, flags | (v ? masks[i] : 0));
    LLVMBuildBr(c->b, j);
  }
  LLVMPositionBuilderAtEnd(c->b, j);
}

/* The tensor-core kernel of matmul nest g->n (lf_gemm_mma). */
static void emit_mma_kernel(G *g, LLVMValueRef fn) {
  Cg *c = g->c;
  const LfNest *n = g->n;
  const IrValue *av = ir_val(c->k, g->v->args[0]), *bv = ir_val(c->k, g->v->args[1]);
  const Sym *const *bs = n->opnd[1].stride;
  g->mma = true;
  g->od = av->dtype;
  if (n->reduce == OP_CONV2D) { /* k = (ci KH + ky) KW + kx; B along k */
    g->kpix = false;
    g->b_kmajor = true;
    g->vec_a = vec_weight(g, 8);
    g->vec_b = LLVMConstInt(c->i1, 0, 0);
  } else {
    g->b_kmajor = plain(g, 1) && sym_is(bs[bv->rank - 2], 1) && !sym_is(bs[bv->rank - 1], 1);
    g->vec_a = vec_matmul(g, 0, av->rank - 1, g->K, 8);
    g->vec_b = g->b_kmajor ? vec_matmul(g, 1, bv->rank - 2, g->K, 8) : vec_matmul(g, 1, bv->rank - 1, g->N, 8);
  }
  /* one shared array (f32 elements): the two stages of the operand
   * tiles (16-bit), or 64 rows of outputs in the epilogue */
  g->Cs = cu_shared(c, c->f32, imax(mma_stage(MBIG), 64 * MBIG.bn), "gemm_mma_smem");
  g->As = g->Cs;
  g->tid = LLVMBuildZExt(c->b, cu_sreg(c, "tid.x"), c->i64, "");
  annotate(c, fn, "maxntidx", NT);
  annotate(c, fn, "maxnreg", CU_GEMM_MAXNREG);
  LLVMValueRef bigc = gemm_big(c, n, g->M, g->N, g->batch);
  if (known_false(g->vec_a) || known_false(g->vec_b)) { /* the other one alone (a prologue, a conv) */
    LLVMValueRef conds[3] = {bigc, g->vec_a, g->vec_b};
    variants(g, conds, (const int[3]){V_BIG, V_VEC_A, V_VEC_B}, 0, 3, 0);
  } else { /* vector loads when both operands qualify */
    LLVMValueRef conds[2] = {bigc, land(c, g->vec_a, g->vec_b)};
    variants(g, conds, (const int[2]){V_BIG, V_VEC_A | V_VEC_B}, 0, 2, 0);
  }
  LLVMBuildRetVoid(c->b);
}

void cu_emit_gemm_kernel(Cg *c, const LfNest *n, LLVMValueRef fn) {
  LLVMValueRef *rts[64];
  if (c->k->nresults > 64) ICE("more than 64 results");
  cu_unpack(c, fn, rts);
  LLVMBuilderRef b = c->b;
  G g = {.c = c, .n = n, .v = ir_val(c->k, n->gemm), .rts = rts};
  g.ad = cu_acc_dtype(n->cdtype);
  g.t = cg_compute_type(c, g.ad);
  cu_gemm_dims(c, n, &g.M, &g.N, &g.K, &g.batch);
  bool mma = c->cu_sm >= 80 && lf_gemm_mma(c->k, n, c->opt); /* tensor cores */
  if (n->reduce == OP_CONV2D) {
    const IrValue *w = ir_val(c->k, g.v->args[1]), *xv = ir_val(c->k, g.v->args[0]);
    g.groups = cg_sym_val(c, g.v->attrs[6]);
    g.og = g.M;
    g.cg = cg_sym_val(c, w->shape[1]);
    g.KH = cg_sym_val(c, w->shape[2]), g.KW = cg_sym_val(c, w->shape[3]);
    g.H = cg_sym_val(c, xv->shape[xv->rank - 2]), g.W = cg_sym_val(c, xv->shape[xv->rank - 1]);
    g.OW = cg_sym_val(c, n->shape[n->rank - 1]);
    for (int i = 0; i < 6; i++) g.attr[i] = cg_sym_val(c, g.v->attrs[i]);
    if (mma) {
      emit_mma_kernel(&g, fn);
      return;
    }
    const LfAccess *xa = &n->opnd[0];
    g.kpix = c->opt > 0 && !n->pro[0] && xa->buf >= 0 && !xa->lin_rank && !xa->rt_strides &&
             sym_is(xa->stride[xv->rank - 3], 1);
    g.vec_a = g.kpix ? LLVMConstInt(c->i1, 0, 0) : vec_weight(&g, 4);
    g.vec_b = vec_input(&g);
  } else if (mma) {
    emit_mma_kernel(&g, fn);
    return;
  } else {
    /* B along n, or along k when its k stride is the constant 1 and its
     * n stride is not (x @ w.T) */
    const IrValue *bv = ir_val(c->k, g.v->args[1]);
    const Sym *const *bs = n->opnd[1].stride;
    g.b_kmajor = plain(&g, 1) && sym_is(bs[bv->rank - 2], 1) && !sym_is(bs[bv->rank - 1], 1);
    g.vec_a = vec_matmul(&g, 0, ir_val(c->k, g.v->args[0])->rank - 1, g.K, 4);
    g.vec_b = g.b_kmajor ? vec_matmul(&g, 1, bv->rank - 2, g.K, 4) : vec_matmul(&g, 1, bv->rank - 1, g.N, 4);
  }
  /* one shared array: the two stages of the A and B tiles, or 64 rows
   * of outputs in the epilogue (8-byte accumulators: small tiles only) */
  int as = 2 * imax(a_stage(SMALL), a_stage(BIG)), bs = 2 * imax(b_stage(SMALL), b_stage(BIG));
  int cs = 64 * (g.ad == DT_F32 ? BIG.bn : SMALL.bn);
  g.Cs = cu_shared(c, g.t, imax(as + bs, cs), "gemm_smem");
  g.As = g.Cs;
  g.Bs = at(c, g.t, g.Cs, i64c(c, as));
  g.tid = LLVMBuildZExt(b, cu_sreg(c, "tid.x"), c->i64, "");
  annotate(c, fn, "maxntidx", NT);
  if (g.ad == DT_F32) annotate(c, fn, "maxnreg", CU_GEMM_MAXNREG);
  LLVMValueRef bigc = gemm_big(c, n, g.M, g.N, g.batch);
  if (n->reduce == OP_CONV2D) { /* the weight and the input each */
    LLVMValueRef conds[3] = {bigc, g.vec_a, g.vec_b};
    variants(&g, conds, (const int[3]){V_BIG, V_VEC_A, V_VEC_B}, 0, 3, 0);
  } else if (known_false(g.vec_a) || known_false(g.vec_b)) { /* the other one alone (a prologue) */
    LLVMValueRef conds[3] = {bigc, g.vec_a, g.vec_b};
    variants(&g, conds, (const int[3]){V_BIG, V_VEC_A, V_VEC_B}, 0, 3, 0);
  } else { /* vector loads when both operands qualify */
    LLVMValueRef conds[2] = {bigc, land(c, g.vec_a, g.vec_b)};
    variants(&g, conds, (const int[2]){V_BIG, V_VEC_A | V_VEC_B}, 0, 2, 0);
  }
  LLVMBuildRetVoid(b);
}
