/* gemm_small.c — the GEMM's small path (gemm_impl.h): C = A x B when one
 * side is short (at most GEMM_SMALL_MAX rows of A, or columns of B: a
 * matrix-vector product, transformer inference with a few tokens), run
 * at the memory bandwidth of the big operand instead of packing it.
 *
 * Roles: S, the small operand (its rows r < QN, the short side: A, or
 * B transposed when N is the short side), and V, the big operand
 * (lanes l < VN: B's columns, or A's rows), streamed from memory once
 * in its own layout; C[r, l] through strides CR, CL.  S is packed (it
 * is small) into scratch in the compute type, zero-padded; V is read
 * with vector loads along whichever of its dims is contiguous:
 *   axpy form, V's lane stride 1 (x @ W with W [K, N] row-major): a
 *     tile of NV vectors of lanes and MG rows of S in registers; each K
 *     step loads the tile's row of V once and adds S[r, k] * V[k, lanes]
 *     for every row (masked loads for the tile past VN);
 *   dot form, V's K stride 1 (x @ W.T with W [N, K]: linear, or A @ v):
 *     NR lanes (rows of V) by MG rows of S, vectors along K, reduced to
 *     scalars at the end, all of a tile's together (hsum_lanes; a masked
 *     load for the K tail; S's padding is 0).
 * Each form (axpy or dot, MG 1 or 4) is a function of its own
 * (gemm_emit_small_form), emitted for the forms some product of the
 * module can take (gemm.c small_forms: sizes and strides known at
 * compile time rule forms out) and reached through the context
 * (X_SFORM).
 * MG is 1 when S has one row, else 4 (S padded with zero rows: the
 * padded results are computed and dropped); NV and NR follow from the
 * register file (16 or 32 vector registers).  The work is split over the
 * lanes only (tdsl_parallel_for over lane tiles), K is never split:
 * every element of C is one sum over K in K order whatever the thread
 * count, and C is written once, converted to its dtype.  Finished lane
 * ranges go through the epilogue hook (gemm.h) like the packed path's
 * blocks.  Operands with a prologue, K = 0, and strides where neither
 * of V's dims is contiguous take the packed path (gemm_small_select).
 * Needs: gemm_impl.h.  Used by: gemm.c. */
#include <stdio.h>
#include <string.h>

#include "gemm_impl.h"

/* The axpy form's sums of one lane tile (all rows of S; on the stack,
 * in L1 or L2) stay within AXPY_ACC_BYTES. */
#define AXPY_ACC_BYTES 65536

/* Row group and lane tile shapes (see above). */
static int mg_of(int four) { return four ? 4 : 1; }
static int dot_nr(const G *g, int four) {
  if (!four) return 8;
  return g->nregs >= 32 ? 4 : 2;
}

static bool isf(const G *g) { return dtype_is_float(g->cd); }

/* Bytes of the packed S: GEMM_SMALL_MAX rows (padded to 4) of K padded
 * to whole vectors, in either layout. */
LLVMValueRef gemm_small_bytes(G *g, LLVMValueRef K) {
  LLVMValueRef kp = mul(g, cdiv(g, K, k64(g, g->vw)), k64(g, g->vw));
  return mul(g, mul(g, kp, k64(g, GEMM_SMALL_MAX)), k64(g, dtype_size(g->cd)));
}

/* pack_s(ctx): S into X_SPACK, [k * QP + r] (axpy form: a K step's
 * rows side by side) or [r * KP + k] (dot form: a row's K run), in the
 * compute type, zeros in the padding.  form: X_VL == 1 picks axpy. */
static LLVMValueRef emit_pack_s(G *g) {
  LLVMTypeRef ps[1] = {g->ptr};
  LLVMValueRef f = gemm_new_fn(g, "pack_s", ps, 1);
  LLVMValueRef cx = LLVMGetParam(f, 0);
  LLVMValueRef dst = getp(g, cx, X_SPACK), src = getp(g, cx, X_QB), off = get(g, cx, X_QOFF);
  LLVMValueRef qr = get(g, cx, X_QR), qk = get(g, cx, X_QK), qn = get(g, cx, X_QN);
  LLVMValueRef qp = get(g, cx, X_QP), kp = get(g, cx, X_KP), K = get(g, cx, X_K);
  LLVMValueRef axpy = LLVMBuildICmp(g->b, LLVMIntEQ, get(g, cx, X_VL), k64(g, 1), "");
  /* element (r, k) goes to r * rs + k * ks */
  LLVMValueRef rs = LLVMBuildSelect(g->b, axpy, k64(g, 1), kp, "");
  LLVMValueRef ks = LLVMBuildSelect(g->b, axpy, qp, k64(g, 1), "");
  GLoop lr, lk;
  LLVMValueRef r = gemm_loop_open(g, &lr, k64(g, 0), qp, k64(g, 1));
  LLVMValueRef rok = lt(g, r, qn), rc = imin(g, r, sub(g, qn, k64(g, 1)));
  LLVMValueRef k = gemm_loop_open(g, &lk, k64(g, 0), kp, k64(g, 1));
  LLVMValueRef ok = LLVMBuildAnd(g->b, rok, lt(g, k, K), "");
  LLVMValueRef kc = imin(g, k, sub(g, K, k64(g, 1)));
  LLVMValueRef v = gemm_load_c(g, src, add(g, off, add(g, mul(g, rc, qr), mul(g, kc, qk))), g->ad);
  v = LLVMBuildSelect(g->b, ok, v, gemm_czero(g), "");
  LLVMBuildStore(g->b, v, gep(g, g->ct, dst, add(g, mul(g, r, rs), mul(g, k, ks))));
  gemm_loop_close(g, &lk);
  gemm_loop_close(g, &lr);
  LLVMBuildRetVoid(g->b);
  return f;
}

/* A vector of VW elements of V (dtype bd) at element index i, converted
 * to the compute type; mask: NULL (all lanes) or an <VW x i1>. */
static LLVMValueRef load_v(G *g, LLVMValueRef vb, LLVMValueRef i, LLVMValueRef mask) {
  LLVMTypeRef st = gemm_storage(g, g->bd), sv = gemm_vec_of(st, g->vw);
  LLVMValueRef p = gep(g, st, vb, i), v;
  if (!mask) {
    v = LLVMBuildLoad2(g->b, sv, p, "");
    LLVMSetAlignment(v, (unsigned)dtype_size(g->bd));
  } else {
    LLVMTypeRef ov[2] = {sv, g->ptr};
    LLVMValueRef a[4] = {p, LLVMConstInt(g->i32, (unsigned)dtype_size(g->bd), 0), mask,
                         LLVMConstNull(sv)};
    v = gemm_intrin(g, "llvm.masked.load", ov, 2, a, 4);
  }
  return gemm_vconv(g, v, g->bd);
}

/* <VW x i1>: lane q of the vector at lane index base is below lim. */
static LLVMValueRef lane_mask(G *g, LLVMValueRef base, LLVMValueRef lim) {
  LLVMValueRef c[64];
  for (int i = 0; i < g->vw; i++) c[i] = k64(g, i);
  LLVMValueRef idx = add(g, gemm_splat_n(g, base, g->vw), LLVMConstVector(c, (unsigned)g->vw));
  return LLVMBuildICmp(g->b, LLVMIntSLT, idx, gemm_splat_n(g, lim, g->vw), "");
}

/* C[r, l] = x (compute type) for r < QN, l < VN, converted. */
static void store_c(G *g, LLVMValueRef cx, LLVMValueRef x, LLVMValueRef r, LLVMValueRef l) {
  LLVMValueRef ci = add(g, get(g, cx, X_COFF),
                        add(g, mul(g, r, get(g, cx, X_CR)), mul(g, l, get(g, cx, X_CL))));
  gemm_store_c(g, x, getp(g, cx, X_C), ci, g->od);
}

/* Writes the tile `tile` (an alloca: MG x W values, row-major) to C
 * rows r0.. (< QN) and lanes l0 .. l0 + nvl. */
static void store_tile(G *g, LLVMValueRef cx, LLVMValueRef tile, int mg, int w, LLVMValueRef r0,
                       LLVMValueRef l0, LLVMValueRef nvl) {
  LLVMValueRef nr = imin(g, k64(g, mg), sub(g, get(g, cx, X_QN), r0));
  GLoop lr, lq;
  LLVMValueRef r = gemm_loop_open(g, &lr, k64(g, 0), nr, k64(g, 1));
  LLVMValueRef q = gemm_loop_open(g, &lq, k64(g, 0), nvl, k64(g, 1));
  LLVMValueRef x = LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, tile, add(g, mul(g, r, k64(g, w)), q)), "");
  store_c(g, cx, x, add(g, r0, r), add(g, l0, q));
  gemm_loop_close(g, &lq);
  gemm_loop_close(g, &lr);
}

/* The axpy form's U K steps k .. k + U - 1 for rows r0 .. r0 + MG - 1
 * over lanes [l0, l0 + nvl): for each vector of lanes (the last one
 * masked when partial), acc[r][lanes] (in memory: `acc`, rows of TW
 * elements) += S[r, k + u] * V[k + u, lanes] in u order. */
static void axpy_steps(G *g, LLVMValueRef cx, int mg, int U, LLVMValueRef r0, LLVMValueRef l0,
                       LLVMValueRef nvl, LLVMValueRef k, LLVMValueRef acc, LLVMValueRef tw) {
  LLVMValueRef vb = getp(g, cx, X_VB), vk = get(g, cx, X_VK), sp = getp(g, cx, X_SPACK);
  LLVMValueRef qp = get(g, cx, X_QP), s[4][4], row[4];
  for (int u = 0; u < U; u++) {
    LLVMValueRef ku = add(g, k, k64(g, u));
    row[u] = add(g, add(g, get(g, cx, X_VOFF), mul(g, ku, vk)), l0);
    for (int r = 0; r < mg; r++) {
      LLVMValueRef x = gep(g, g->ct, sp, add(g, mul(g, ku, qp), add(g, r0, k64(g, r))));
      s[u][r] = gemm_splat(g, LLVMBuildLoad2(g->b, g->ct, x, ""));
    }
  }
  LLVMValueRef nfull = mul(g, sdiv(g, nvl, k64(g, g->vw)), k64(g, g->vw));
  for (int part = 0; part < 2; part++) { /* full vectors, then the partial one */
    GLoop lv;
    LLVMBasicBlockRef skip = NULL;
    LLVMValueRef q, mask = NULL;
    if (!part) {
      q = gemm_loop_open(g, &lv, k64(g, 0), nfull, k64(g, g->vw));
    } else {
      LLVMBasicBlockRef run = blk(g, "ax_part");
      skip = blk(g, "ax_part_done");
      LLVMBuildCondBr(g->b, lt(g, nfull, nvl), run, skip);
      LLVMPositionBuilderAtEnd(g->b, run);
      q = nfull;
      mask = lane_mask(g, q, nvl);
    }
    LLVMValueRef w[4];
    for (int u = 0; u < U; u++) w[u] = load_v(g, vb, add(g, row[u], q), mask);
    for (int r = 0; r < mg; r++) {
      LLVMValueRef ap = gep(g, g->ct, acc, add(g, mul(g, add(g, r0, k64(g, r)), tw), q));
      LLVMValueRef a = LLVMBuildLoad2(g->b, g->vt, ap, "");
      LLVMSetAlignment(a, (unsigned)dtype_size(g->cd));
      for (int u = 0; u < U; u++) a = gemm_fma(g, s[u][r], w[u], a);
      LLVMSetAlignment(LLVMBuildStore(g->b, a, ap), (unsigned)dtype_size(g->cd));
    }
    if (!part) {
      gemm_loop_close(g, &lv);
    } else {
      LLVMBuildBr(g->b, skip);
      LLVMPositionBuilderAtEnd(g->b, skip);
    }
  }
}

/* One axpy tile: lanes [l0, l0 + nvl) (nvl <= TW), every row of S, the
 * sums in `acc` (QP rows of TW elements): zeroed, then for each four K
 * steps every row group's update, then written to C.  V is read in its
 * memory order, four rows at a time over the tile (whole rows of a
 * thread's lanes: long sequential runs), once, whatever the rows of S:
 * the row groups reuse the four rows from L1. */
static void axpy_tile(G *g, LLVMValueRef cx, int four, LLVMValueRef acc, LLVMValueRef l0,
                      LLVMValueRef nvl) {
  int mg = mg_of(four);
  LLVMValueRef K = get(g, cx, X_K), qn = get(g, cx, X_QN), qp = get(g, cx, X_QP), tw = get(g, cx, X_TW);
  GLoop lz, lg, lk, lk1, lg1;
  LLVMValueRef zi = gemm_loop_open(g, &lz, k64(g, 0), mul(g, qp, tw), k64(g, g->vw));
  LLVMSetAlignment(LLVMBuildStore(g->b, LLVMConstNull(g->vt), gep(g, g->ct, acc, zi)), (unsigned)dtype_size(g->cd));
  gemm_loop_close(g, &lz);
  LLVMValueRef k4 = sub(g, K, srem(g, K, k64(g, 4)));
  LLVMValueRef k = gemm_loop_open(g, &lk, k64(g, 0), k4, k64(g, 4));
  LLVMValueRef r0 = gemm_loop_open(g, &lg, k64(g, 0), qn, k64(g, mg));
  axpy_steps(g, cx, mg, 4, r0, l0, nvl, k, acc, tw);
  gemm_loop_close(g, &lg);
  gemm_loop_close(g, &lk);
  k = gemm_loop_open(g, &lk1, k4, K, k64(g, 1));
  r0 = gemm_loop_open(g, &lg1, k64(g, 0), qn, k64(g, mg));
  axpy_steps(g, cx, mg, 1, r0, l0, nvl, k, acc, tw);
  gemm_loop_close(g, &lg1);
  gemm_loop_close(g, &lk1);
  GLoop lr, lq;
  LLVMValueRef r = gemm_loop_open(g, &lr, k64(g, 0), qn, k64(g, 1));
  LLVMValueRef q = gemm_loop_open(g, &lq, k64(g, 0), nvl, k64(g, 1));
  LLVMValueRef x = LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, acc, add(g, mul(g, r, tw), q)), "");
  store_c(g, cx, x, r, add(g, l0, q));
  gemm_loop_close(g, &lq);
  gemm_loop_close(g, &lr);
}

/* The sum of each vector v[t] of v[0..m) (m <= VW) in lane t of one
 * vector, each summed by halves (a fixed order: lane i plus lane i +
 * VW/2, then i + VW/4, ...).  VW vectors (past m: undefined) halve in
 * count each round: a pair's lanes regrouped by two shuffles, so that
 * one vector add does that round for every sum the pair holds (the
 * first n lanes of each group of 2n plus its last n).  It replaced a
 * reduction per vector (log2(VW) rounds of two shuffles and an add
 * each, then an extract): the same adds of the same lanes, so the same
 * sums, for a fraction of the instruction selection (bench/README.md). */
static LLVMValueRef hsum_lanes(G *g, LLVMValueRef *v, int m) {
  int w = g->vw;
  LLVMValueRef cur[64], ix[64], iy[64];
  for (int i = 0; i < w; i++) cur[i] = i < m ? v[i] : LLVMGetUndef(g->vt);
  for (int n = w / 2, c = w; n >= 1; n /= 2, c /= 2) {
    int groups = w / (2 * n); /* per vector, of 2n lanes each */
    for (int gi = 0; gi < groups; gi++)
      for (int j = 0; j < n; j++)
        for (int h = 0; h < 2; h++) { /* h: lanes of the pair's first or second vector */
          ix[(h * groups + gi) * n + j] = LLVMConstInt(g->i32, (unsigned)(h * w + gi * 2 * n + j), 0);
          iy[(h * groups + gi) * n + j] = LLVMConstInt(g->i32, (unsigned)(h * w + gi * 2 * n + n + j), 0);
        }
    LLVMValueRef mx = LLVMConstVector(ix, (unsigned)w), my = LLVMConstVector(iy, (unsigned)w);
    for (int i = 0; i < c / 2; i++) {
      LLVMValueRef lo = LLVMBuildShuffleVector(g->b, cur[2 * i], cur[2 * i + 1], mx, "");
      LLVMValueRef hi = LLVMBuildShuffleVector(g->b, cur[2 * i], cur[2 * i + 1], my, "");
      cur[i] = isf(g) ? LLVMBuildFAdd(g->b, lo, hi, "") : add(g, lo, hi);
    }
  }
  return cur[0];
}

/* One K step of the dot form at k (kmask: NULL, or the K tail's mask). */
static void dot_step(G *g, LLVMValueRef cx, int mg, int nr, LLVMValueRef r0, LLVMValueRef *vrow,
                     LLVMValueRef k, LLVMValueRef kmask, LLVMValueRef cur[][8], LLVMValueRef nx[][8]) {
  LLVMValueRef sp = getp(g, cx, X_SPACK), kp = get(g, cx, X_KP), vb = getp(g, cx, X_VB), sv[4], wv[8];
  for (int r = 0; r < mg; r++) {
    LLVMValueRef p = gep(g, g->ct, sp, add(g, mul(g, add(g, r0, k64(g, r)), kp), k));
    sv[r] = LLVMBuildLoad2(g->b, g->vt, p, "");
    LLVMSetAlignment(sv[r], (unsigned)dtype_size(g->cd));
  }
  for (int q = 0; q < nr; q++) wv[q] = load_v(g, vb, add(g, vrow[q], k), kmask);
  for (int r = 0; r < mg; r++)
    for (int q = 0; q < nr; q++) nx[r][q] = gemm_fma(g, sv[r], wv[q], cur[r][q]);
}

/* One dot tile: lanes [l0, l0 + nvl) (nvl <= NR; lanes past it repeat
 * the last one and are dropped), all row groups. */
static void dot_tile(G *g, LLVMValueRef cx, int four, LLVMValueRef tile, LLVMValueRef l0,
                     LLVMValueRef nvl) {
  int mg = mg_of(four), nr = dot_nr(g, four);
  LLVMValueRef K = get(g, cx, X_K), vrow[8];
  for (int q = 0; q < nr; q++) {
    LLVMValueRef l = add(g, l0, imin(g, k64(g, q), sub(g, nvl, k64(g, 1))));
    vrow[q] = add(g, get(g, cx, X_VOFF), mul(g, l, get(g, cx, X_VL)));
  }
  LLVMValueRef kfull = mul(g, sdiv(g, K, k64(g, g->vw)), k64(g, g->vw));
  GLoop lg;
  LLVMValueRef r0 = gemm_loop_open(g, &lg, k64(g, 0), get(g, cx, X_QN), k64(g, mg));
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b), head = blk(g, "dot"), body = blk(g, "dot_body"),
                    tail = blk(g, "dot_tail"), rest = blk(g, "dot_rest"), exit = blk(g, "dot_end");
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, head);
  LLVMValueRef k = LLVMBuildPhi(g->b, g->i64, ""), z = k64(g, 0), phi[4][8], nx[4][8], zero = LLVMConstNull(g->vt);
  LLVMAddIncoming(k, &z, &pre, 1);
  for (int r = 0; r < mg; r++)
    for (int q = 0; q < nr; q++) {
      phi[r][q] = LLVMBuildPhi(g->b, g->vt, "");
      LLVMAddIncoming(phi[r][q], &zero, &pre, 1);
    }
  LLVMBuildCondBr(g->b, lt(g, k, kfull), body, tail);
  LLVMPositionBuilderAtEnd(g->b, body);
  dot_step(g, cx, mg, nr, r0, vrow, k, NULL, phi, nx);
  LLVMValueRef k1 = add(g, k, k64(g, g->vw));
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
  LLVMAddIncoming(k, &k1, &latch, 1);
  for (int r = 0; r < mg; r++)
    for (int q = 0; q < nr; q++) LLVMAddIncoming(phi[r][q], &nx[r][q], &latch, 1);
  gemm_no_vectorize(g, LLVMBuildBr(g->b, head));
  LLVMPositionBuilderAtEnd(g->b, tail); /* k == kfull: the K tail, if any */
  LLVMBuildCondBr(g->b, lt(g, k, K), rest, exit);
  LLVMPositionBuilderAtEnd(g->b, rest);
  LLVMValueRef tl[4][8];
  dot_step(g, cx, mg, nr, r0, vrow, k, lane_mask(g, k, K), phi, tl);
  LLVMBasicBlockRef rest_end = LLVMGetInsertBlock(g->b);
  LLVMBuildBr(g->b, exit);
  LLVMPositionBuilderAtEnd(g->b, exit);
  LLVMValueRef x[4][8];
  for (int r = 0; r < mg; r++)
    for (int q = 0; q < nr; q++) {
      x[r][q] = LLVMBuildPhi(g->b, g->vt, "");
      LLVMValueRef in[2] = {phi[r][q], tl[r][q]};
      LLVMBasicBlockRef bb[2] = {tail, rest_end};
      LLVMAddIncoming(x[r][q], in, bb, 2);
    }
  /* the tile's sums (row-major, as x) VW at a time (hsum_lanes) */
  LLVMValueRef all[32];
  for (int r = 0; r < mg; r++)
    for (int q = 0; q < nr; q++) all[r * nr + q] = x[r][q];
  for (int t0 = 0; t0 < mg * nr; t0 += g->vw) {
    int m = mg * nr - t0 < g->vw ? mg * nr - t0 : g->vw;
    LLVMValueRef sums = hsum_lanes(g, all + t0, m);
    for (int t = 0; t < m; t++)
      LLVMBuildStore(g->b, LLVMBuildExtractElement(g->b, sums, LLVMConstInt(g->i32, (unsigned)t, 0), ""),
                     gep(g, g->ct, tile, k64(g, t0 + t)));
  }
  store_tile(g, cx, tile, mg, nr, r0, l0, nvl);
  gemm_loop_close(g, &lg);
}

/* The lane tile width (gemm_small_run sets X_TW): axpy form (X_VL ==
 * 1) whole vectors of lanes; dot form at most NR of the row group (fewer
 * when the lanes are too few for every thread to get a tile: dot_tile
 * then repeats the last lane, which reads no more of V). */
static LLVMValueRef tile_width(G *g, LLVMValueRef cx) { return get(g, cx, X_TW); }

/* After a body's lanes [l0, l1) are final: the epilogue hook on them
 * (rows and columns as the caller's C: swapped back when S is B). */
static void small_epilogue(G *g, LLVMValueRef cx, LLVMValueRef l0, LLVMValueRef l1) {
  LLVMValueRef sw = LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_SWAP), k64(g, 0), "");
  LLVMValueRef z = k64(g, 0), qn = get(g, cx, X_QN);
  LLVMTypeRef ps[6] = {g->ptr, g->i64, g->i64, g->i64, g->i64, g->i64};
  LLVMValueRef a[6] = {getp(g, cx, X_EPIARG), get(g, cx, X_BT),
                       LLVMBuildSelect(g->b, sw, l0, z, ""), LLVMBuildSelect(g->b, sw, l1, qn, ""),
                       LLVMBuildSelect(g->b, sw, z, l0, ""), LLVMBuildSelect(g->b, sw, qn, l1, "")};
  LLVMBuildCall2(g->b, LLVMFunctionType(g->vd, ps, 6, 0), getp(g, cx, X_EPIFN), a, 6, "");
}

/* small_f<form>(ctx, begin, end): lane tiles [begin, end) in one form
 * (2 * axpy + four): a function per form, emitted only for the forms
 * some product of the module can take (gemm.c small_forms), reached
 * through the context (X_SFORM). */
LLVMValueRef gemm_emit_small_form(G *g, int form) {
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  char what[16];
  snprintf(what, sizeof what, "small_f%d", form & 3);
  LLVMValueRef f = gemm_new_fn(g, what, ps, 3);
  LLVMValueRef cx = LLVMGetParam(f, 0), vn = get(g, cx, X_VN);
  bool axpy = form >= 2;
  int four = form & 1;
  LLVMValueRef buf = axpy ? gemm_entry_alloca(g, g->ct, AXPY_ACC_BYTES / dtype_size(g->cd))
                          : gemm_entry_alloca(g, g->ct, mg_of(four) * dot_nr(g, four));
  LLVMValueRef tw = tile_width(g, cx);
  LLVMValueRef l0 = mul(g, LLVMGetParam(f, 1), tw), l1 = imin(g, vn, mul(g, LLVMGetParam(f, 2), tw));
  GLoop lt_;
  LLVMValueRef l = gemm_loop_open(g, &lt_, l0, l1, tw);
  LLVMValueRef nvl = imin(g, tw, sub(g, vn, l));
  if (axpy) axpy_tile(g, cx, four, buf, l, nvl);
  else dot_tile(g, cx, four, buf, l, nvl);
  gemm_loop_close(g, &lt_);
  if (g->epi) small_epilogue(g, cx, l0, l1);
  LLVMBuildRetVoid(g->b);
  return f;
}

LLVMValueRef gemm_emit_small_pack(G *g) { return emit_pack_s(g); }

/* Sets the roles for S = rows of A (swap 0) or columns of B (swap 1). */
static void set_roles(G *g, LLVMValueRef cx, LLVMValueRef swap) {
  LLVMValueRef s = LLVMBuildICmp(g->b, LLVMIntNE, swap, k64(g, 0), "");
#define PICK(slot, sa, sb) set(g, cx, slot, LLVMBuildSelect(g->b, s, get(g, cx, sb), get(g, cx, sa), ""))
  /* S: A (rows AI, k AP) or B^T (rows BI, k BP); V the other */
  set(g, cx, X_QB, LLVMBuildSelect(g->b, s, getp(g, cx, X_B), getp(g, cx, X_A), ""));
  set(g, cx, X_VB, LLVMBuildSelect(g->b, s, getp(g, cx, X_A), getp(g, cx, X_B), ""));
  PICK(X_QOFF, X_AOFF, X_BOFF);
  PICK(X_QR, X_AI, X_BI);
  PICK(X_QK, X_AP, X_BP);
  PICK(X_VOFF, X_BOFF, X_AOFF);
  PICK(X_VL, X_BI, X_AI);
  PICK(X_VK, X_BP, X_AP);
  PICK(X_CR, X_CM, X_CN);
  PICK(X_CL, X_CN, X_CM);
  PICK(X_QN, X_M, X_N);
  PICK(X_VN, X_N, X_M);
#undef PICK
  set(g, cx, X_SWAP, swap);
}

/* Whether V (lane stride vl, K stride vk) can be streamed: one of its
 * dims contiguous. */
static LLVMValueRef streamable(G *g, LLVMValueRef vl, LLVMValueRef vk) {
  return LLVMBuildOr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, vl, k64(g, 1), ""),
                     LLVMBuildICmp(g->b, LLVMIntEQ, vk, k64(g, 1), ""), "");
}

LLVMValueRef gemm_small_select(G *g, LLVMValueRef cx) {
  LLVMValueRef M = get(g, cx, X_M), N = get(g, cx, X_N), K = get(g, cx, X_K), lim = k64(g, GEMM_SMALL_MAX);
  LLVMValueRef kok = LLVMBuildAnd(g->b, lt(g, k64(g, 0), K),
                                  LLVMBuildAnd(g->b, lt(g, k64(g, 0), M), lt(g, k64(g, 0), N), ""), "");
  /* S = A: M short, B streamable */
  LLVMValueRef a_ok = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSLE, M, lim, ""),
                                   streamable(g, get(g, cx, X_BI), get(g, cx, X_BP)), "");
  /* S = B^T: N short (and shorter than M), A streamable; S and V then
   * trade dtypes, so only when A and B have the same */
  LLVMValueRef b_ok = LLVMConstInt(g->i1, 0, 0);
  if (g->ad == g->bd) {
    b_ok = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSLE, N, lim, ""),
                        streamable(g, get(g, cx, X_AI), get(g, cx, X_AP)), "");
    b_ok = LLVMBuildAnd(g->b, b_ok, LLVMBuildOr(g->b, LLVMBuildNot(g->b, a_ok, ""), lt(g, N, M), ""), "");
  }
  LLVMValueRef swap = LLVMBuildZExt(g->b, b_ok, g->i64, "");
  set_roles(g, cx, swap);
  return LLVMBuildAnd(g->b, kok, LLVMBuildOr(g->b, a_ok, b_ok, ""), "");
}

void gemm_small_run(G *g, LLVMValueRef cx, LLVMValueRef pack) {
  LLVMValueRef qn = get(g, cx, X_QN), K = get(g, cx, X_K);
  LLVMValueRef four = lt(g, k64(g, 1), qn);
  set(g, cx, X_MG4, LLVMBuildZExt(g->b, four, g->i64, ""));
  set(g, cx, X_QP, LLVMBuildSelect(g->b, four, mul(g, cdiv(g, qn, k64(g, 4)), k64(g, 4)), k64(g, 1), ""));
  set(g, cx, X_KP, mul(g, cdiv(g, K, k64(g, g->vw)), k64(g, g->vw)));
  LLVMValueRef cxa = cx;
  call(g, pack, &cxa, 1);
  /* axpy tiles: whole vectors, at least one tile per thread, the sums
   * of a tile (QP rows) within AXPY_ACC_BYTES */
  LLVMValueRef T = LLVMBuildSExt(g->b, call(g, fdecl(g, "tdsl_get_num_threads", g->i32, NULL, 0), NULL, 0),
                                 g->i64, "");
  T = LLVMBuildSelect(g->b, lt(g, T, k64(g, 1)), k64(g, 1), T, "");
  LLVMValueRef tw = mul(g, cdiv(g, cdiv(g, get(g, cx, X_VN), T), k64(g, g->vw)), k64(g, g->vw));
  LLVMValueRef most = sdiv(g, k64(g, AXPY_ACC_BYTES / dtype_size(g->cd)), get(g, cx, X_QP));
  most = mul(g, sdiv(g, most, k64(g, g->vw)), k64(g, g->vw));
  LLVMValueRef axpy = LLVMBuildICmp(g->b, LLVMIntEQ, get(g, cx, X_VL), k64(g, 1), "");
  LLVMValueRef nr = LLVMBuildSelect(g->b, four, k64(g, dot_nr(g, 1)), k64(g, dot_nr(g, 0)), "");
  LLVMValueRef dw = imin(g, nr, cdiv(g, get(g, cx, X_VN), T));
  set(g, cx, X_TW, LLVMBuildSelect(g->b, axpy, imin(g, tw, most), dw, ""));
  LLVMValueRef tiles = cdiv(g, get(g, cx, X_VN), tile_width(g, cx));
  /* the form's function: X_SFORM + 2 * axpy + four */
  LLVMValueRef form = add(g, mul(g, LLVMBuildZExt(g->b, axpy, g->i64, ""), k64(g, 2)),
                          LLVMBuildZExt(g->b, four, g->i64, ""));
  LLVMValueRef body = LLVMBuildLoad2(g->b, g->ptr, gep(g, g->i64, cx, add(g, k64(g, X_SFORM), form)), "");
  LLVMTypeRef ps[4] = {g->i64, g->i64, g->ptr, g->ptr};
  LLVMValueRef a[4] = {tiles, k64(g, 1), body, cx};
  call(g, fdecl(g, "tdsl_parallel_for", g->vd, ps, 4), a, 4);
}
