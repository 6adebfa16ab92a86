/* gemm_kernel.c — the compute side of the GEMM (gemm_impl.h): the
 * register-blocked micro-kernel over packed panels, storing (or adding)
 * tiles of C through its strides with bias and dtype conversion, and the
 * parallel block body (pack A, micro-kernels, epilogue hook calls).
 * Needs: gemm_impl.h.  Used by: gemm.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>

#include "gemm_impl.h"

static void store_tile(G *g, LLVMValueRef cx, LLVMValueRef acc[][4], LLVMValueRef tile,
                       LLVMValueRef i, LLVMValueRef j, LLVMValueRef mr, LLVMValueRef nr) {
  if (g->cscr) {
    gemm_lowp_store_tile(g, cx, acc, tile, i, j, mr, nr);
    return;
  }
  LLVMValueRef c = getp(g, cx, X_C), coff = get(g, cx, X_COFF), cm = get(g, cx, X_CM),
               cn = get(g, cx, X_CN), first = LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_FIRST), k64(g, 0), "");
  LLVMValueRef sb = NULL, soff = NULL, sm = NULL, sn = NULL;
  if (g->bias)
    sb = getp(g, cx, X_BIAS), soff = get(g, cx, X_SOFF), sm = get(g, cx, X_SM), sn = get(g, cx, X_SN);
  LLVMBasicBlockRef slow = blk(g, "tile_slow"), done = blk(g, "tile_done");
  /* vector stores need the output (and bias) in the compute type */
  bool split = g->od == g->cd; /* K may be split: later blocks accumulate */
  bool same = split && (!g->bias || g->sd == g->cd);
  if (same) {
    LLVMValueRef full = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, mr, k64(g, g->mr), ""),
                                     LLVMBuildICmp(g->b, LLVMIntEQ, nr, k64(g, g->nr), ""), "");
    full = LLVMBuildAnd(g->b, full, LLVMBuildICmp(g->b, LLVMIntEQ, cn, k64(g, 1), ""), "");
    if (g->bias_n) { /* a bias along n is loaded as vectors: contiguous */
      LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntEQ, sn, k64(g, 1), "");
      full = LLVMBuildAnd(g->b, full, LLVMBuildOr(g->b, ok, LLVMBuildNot(g->b, first, ""), ""), "");
    }
    LLVMBasicBlockRef fast = blk(g, "tile_fast");
    LLVMBuildCondBr(g->b, full, fast, slow);
    LLVMPositionBuilderAtEnd(g->b, fast);
    LLVMBasicBlockRef fa = blk(g, "tile_first"), fb = blk(g, "tile_accum");
    /* the tile's first row, opaque to loop strength reduction
     * (gemm_opaque_ptr); the others at multiples of cm from it */
    LLVMValueRef row0 = gemm_opaque_ptr(g, gep(g, g->ct, c, add(g, add(g, coff, mul(g, i, cm)), j)));
    LLVMBuildCondBr(g->b, first, fa, fb);
    for (int pass = 0; pass < 2; pass++) {
      LLVMPositionBuilderAtEnd(g->b, pass ? fb : fa);
      for (int r = 0; r < g->mr; r++) {
        LLVMValueRef ri = add(g, i, k64(g, r));
        LLVMValueRef rowp = gep(g, g->ct, row0, mul(g, k64(g, r), cm));
        LLVMValueRef bsplat = NULL;
        if (!pass && g->bias && !g->bias_n)
          bsplat = gemm_splat(g, gemm_load_c(g, sb, add(g, soff, mul(g, ri, sm)), g->sd));
        for (int v = 0; v < g->nv; v++) {
          LLVMValueRef p = gep(g, g->ct, rowp, k64(g, v * g->vw)), x = acc[r][v];
          if (pass) {
            LLVMValueRef old = LLVMBuildLoad2(g->b, g->vt, p, "");
            LLVMSetAlignment(old, (unsigned)dtype_size(g->cd));
            x = gemm_cadd(g, old, x);
          } else if (g->bias_n) { /* sn == 1: lanes j + v*VW.. */
            LLVMValueRef bp = gep(g, g->ct, sb, add(g, soff, add(g, j, k64(g, v * g->vw))));
            LLVMValueRef bv = LLVMBuildLoad2(g->b, g->vt, bp, "");
            LLVMSetAlignment(bv, (unsigned)dtype_size(g->cd));
            x = gemm_cadd(g, x, bv);
          } else if (g->bias) {
            x = gemm_cadd(g, x, bsplat);
          }
          LLVMValueRef st = LLVMBuildStore(g->b, x, p);
          LLVMSetAlignment(st, (unsigned)dtype_size(g->cd));
        }
      }
      LLVMBuildBr(g->b, done);
    }
  } else {
    LLVMBuildBr(g->b, slow);
  }
  /* scalar path through the spilled tile */
  LLVMPositionBuilderAtEnd(g->b, slow);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) {
      LLVMValueRef st = LLVMBuildStore(g->b, acc[r][v],
                                       gep(g, g->ct, tile, k64(g, r * g->nr + v * g->vw)));
      LLVMSetAlignment(st, (unsigned)dtype_size(g->cd));
    }
  GLoop lr, lq;
  LLVMValueRef r = gemm_loop_open(g, &lr, k64(g, 0), mr, k64(g, 1));
  LLVMValueRef q = gemm_loop_open(g, &lq, k64(g, 0), nr, k64(g, 1));
  LLVMValueRef ri = add(g, i, r), qj = add(g, j, q);
  LLVMValueRef x = LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, tile, add(g, mul(g, r, k64(g, g->nr)), q)), "");
  LLVMValueRef ci = add(g, coff, add(g, mul(g, ri, cm), mul(g, qj, cn)));
  if (g->bias) {
    LLVMValueRef b = gemm_load_c(g, sb, add(g, soff, add(g, mul(g, ri, sm), mul(g, qj, sn))), g->sd);
    LLVMValueRef old = split ? gemm_load_c(g, c, ci, g->od) : gemm_czero(g);
    x = gemm_cadd(g, x, LLVMBuildSelect(g->b, first, b, old, ""));
  } else if (split) {
    LLVMValueRef old = gemm_load_c(g, c, ci, g->od);
    x = gemm_cadd(g, x, LLVMBuildSelect(g->b, first, gemm_czero(g), old, ""));
  }
  gemm_store_c(g, x, c, ci, g->od);
  gemm_loop_close(g, &lq);
  gemm_loop_close(g, &lr);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
}

/* K step p of the micro-kernel: nx = cur + A[r, p] * B[p, v*VW..]. */
static void mk_step(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef p,
                    LLVMValueRef cur[][4], LLVMValueRef nx[][4]) {
  LLVMValueRef bv[4], arow = gep(g, g->ct, ap, mul(g, p, k64(g, g->mr)));
  LLVMValueRef brow = gep(g, g->ct, bp, mul(g, p, k64(g, g->nr)));
  for (int v = 0; v < g->nv; v++) {
    bv[v] = LLVMBuildLoad2(g->b, g->vt, gep(g, g->ct, brow, k64(g, v * g->vw)), "");
    LLVMSetAlignment(bv[v], (unsigned)(g->vw * dtype_size(g->cd)));
  }
  for (int r = 0; r < g->mr; r++) {
    LLVMValueRef a = gemm_splat(g, LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, arow, k64(g, r)), ""));
    for (int v = 0; v < g->nv; v++) nx[r][v] = gemm_fma(g, a, bv[v], cur[r][v]);
  }
}

/* MR x NV phis in the current block, each starting at init from pre. */
static void mk_phis(G *g, LLVMValueRef phi[][4], LLVMValueRef init[][4], LLVMBasicBlockRef pre) {
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) {
      phi[r][v] = LLVMBuildPhi(g->b, g->vt, "");
      LLVMAddIncoming(phi[r][v], &init[r][v], &pre, 1);
    }
}

static void mk_incoming(G *g, LLVMValueRef phi[][4], LLVMValueRef val[][4], LLVMBasicBlockRef from) {
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) LLVMAddIncoming(phi[r][v], &val[r][v], &from, 1);
}

/* The micro-kernel over kc: acc[r][v] = sum_p A[r, p] * B[p, v*VW..],
 * in p order (the unrolling keeps it).  The loop does two K steps per
 * iteration (less loop overhead beside MR * NV FMAs), then one step
 * more when kc is odd. */
static void micro_kernel(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef kc,
                         LLVMValueRef acc[][4]) {
  if (g->pairs) {
    gemm_lowp_micro_kernel(g, ap, bp, kc, acc);
    return;
  }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b), head = blk(g, "mk"), body = blk(g, "mk_body"),
                    tail = blk(g, "mk_tail"), rest = blk(g, "mk_rest"), exit = blk(g, "mk_end");
  LLVMValueRef zero[16][4], phi[16][4], mid[16][4], next[16][4], z = k64(g, 0);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) zero[r][v] = LLVMConstNull(g->vt);
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, head);
  LLVMValueRef p = LLVMBuildPhi(g->b, g->i64, "");
  LLVMAddIncoming(p, &z, &pre, 1);
  mk_phis(g, phi, zero, pre);
  LLVMValueRef p1 = add(g, p, k64(g, 1));
  LLVMBuildCondBr(g->b, lt(g, p1, kc), body, tail);
  LLVMPositionBuilderAtEnd(g->b, body);
  mk_step(g, ap, bp, p, phi, mid);
  mk_step(g, ap, bp, p1, mid, next);
  LLVMValueRef p2 = add(g, p, k64(g, 2));
  LLVMAddIncoming(p, &p2, &body, 1);
  mk_incoming(g, phi, next, body);
  gemm_no_vectorize(g, LLVMBuildBr(g->b, head));
  LLVMPositionBuilderAtEnd(g->b, tail); /* p == kc or p == kc - 1 */
  LLVMBuildCondBr(g->b, lt(g, p, kc), rest, exit);
  LLVMPositionBuilderAtEnd(g->b, rest);
  mk_step(g, ap, bp, p, phi, next);
  LLVMBuildBr(g->b, exit);
  LLVMPositionBuilderAtEnd(g->b, exit);
  LLVMValueRef out[16][4];
  mk_phis(g, out, phi, tail);
  mk_incoming(g, out, next, rest);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) acc[r][v] = out[r][v];
}

static LLVMValueRef alloc_fn(G *g) {
  LLVMTypeRef ps[2] = {g->i64, g->i64};
  return fdecl(g, "tdsl_alloc", g->ptr, ps, 2);
}

static void free_(G *g, LLVMValueRef p) {
  call(g, fdecl(g, "tdsl_free", g->vd, &g->ptr, 1), &p, 1);
}

/* After the last K block: the hook, if any, on C rows [i0, i1) x columns
 * [j0, j1). */
static void call_epilogue(G *g, LLVMValueRef cx, LLVMValueRef i0, LLVMValueRef i1,
                          LLVMValueRef j0, LLVMValueRef j1) {
  LLVMBasicBlockRef run = blk(g, "epi"), skip = blk(g, "epi_done");
  LLVMValueRef fn = getp(g, cx, X_EPIFN);
  LLVMValueRef go = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_LAST), k64(g, 0), ""),
                                 LLVMBuildIsNotNull(g->b, fn, ""), "");
  LLVMBuildCondBr(g->b, go, run, skip);
  LLVMPositionBuilderAtEnd(g->b, run);
  LLVMTypeRef ps[6] = {g->ptr, g->i64, g->i64, g->i64, g->i64, g->i64};
  LLVMValueRef a[6] = {getp(g, cx, X_EPIARG), get(g, cx, X_BT), i0, i1, j0, j1};
  LLVMBuildCall2(g->b, LLVMFunctionType(g->vd, ps, 6, 0), fn, a, 6, "");
  LLVMBuildBr(g->b, skip);
  LLVMPositionBuilderAtEnd(g->b, skip);
}

/* A packed-A buffer for one block_body call: the next of the X_ACOUNT
 * buffers allocated with packed B (a parallel_for makes at most one call
 * per thread, and run_gemm resets X_ANEXT before each; gemm_emit_kloop
 * takes one per call and hands it to each of its block_body calls), so a GEMM that
 * has started never fails; only if the thread count changed meanwhile
 * does a call allocate its own (*own: it must free it; NULL on failure). */
static LLVMValueRef take_apack(G *g, LLVMValueRef cx, LLVMValueRef kc, LLVMValueRef *own) {
  LLVMValueRef idx = LLVMBuildAtomicRMW(g->b, LLVMAtomicRMWBinOpAdd, slot_ptr(g, cx, X_ANEXT),
                                        k64(g, 1), LLVMAtomicOrderingMonotonic, 0);
  *own = LLVMBuildICmp(g->b, LLVMIntSGE, idx, get(g, cx, X_ACOUNT), "");
  LLVMBasicBlockRef here = LLVMGetInsertBlock(g->b), mk = blk(g, "apack_alloc"), got = blk(g, "apack");
  LLVMValueRef pooled = gep(g, LLVMInt8TypeInContext(g->ctx), getp(g, cx, X_APOOL),
                            mul(g, idx, get(g, cx, X_ABYTES)));
  LLVMBuildCondBr(g->b, *own, mk, got);
  LLVMPositionBuilderAtEnd(g->b, mk);
  LLVMValueRef bytes = mul(g, mul(g, get(g, cx, X_MCB), gemm_quad_panel_k(g, kc)),
                           k64(g, dtype_size(g->cd)));
  LLVMValueRef a2[2] = {add(g, bytes, k64(g, 64)), k64(g, 64)};
  LLVMValueRef fresh = call(g, alloc_fn(g), a2, 2);
  LLVMBuildBr(g->b, got);
  LLVMPositionBuilderAtEnd(g->b, got);
  LLVMValueRef p = LLVMBuildPhi(g->b, g->ptr, "");
  LLVMValueRef vals[2] = {pooled, fresh};
  LLVMBasicBlockRef bbs[2] = {here, mk};
  LLVMAddIncoming(p, vals, bbs, 2);
  return p;
}

/* Part t of `parts` of [0, size) cut at multiples of `width` (panels):
 * [*lo, *hi), the parts' panel counts differing by at most one.  With
 * parts = cdiv(size, MC) a row part has at most MC / MR panels. */
static void even_part(G *g, LLVMValueRef t, LLVMValueRef parts, LLVMValueRef size, int width,
                      LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef n = cdiv(g, size, k64(g, width)), w = k64(g, width);
  *lo = mul(g, sdiv(g, mul(g, t, n), parts), w);
  *hi = imin(g, size, mul(g, sdiv(g, mul(g, add(g, t, k64(g, 1)), n), parts), w));
}

/* Prefetches C's MR x NR tile at (i, j) for writing while the
 * micro-kernel runs (store_tile reads it back after the first K block):
 * each row's 64-byte lines, assuming unit column stride (else it only
 * misses).  Rows past M are never read: x86 prefetches do not fault. */
static void prefetch_tile(G *g, LLVMValueRef cx, LLVMValueRef i, LLVMValueRef j) {
  LLVMValueRef c = getp(g, cx, X_C), cm = get(g, cx, X_CM);
  LLVMTypeRef st = gemm_storage(g, g->od);
  /* the tile's first row opaque (gemm_opaque_ptr), the others at
   * multiples of cm from it */
  LLVMValueRef row0 = gemm_opaque_ptr(
      g, gep(g, st, c, add(g, add(g, get(g, cx, X_COFF), mul(g, i, cm)), mul(g, j, get(g, cx, X_CN)))));
  int es = dtype_size(g->od), lines = (g->nr * es + 63) / 64;
  LLVMValueRef row = k64(g, 0);
  for (int r = 0; r < g->mr; r++, row = add(g, row, cm))
    for (int l = 0; l < lines; l++) {
      LLVMValueRef a[4] = {gep(g, st, row0, add(g, row, k64(g, l * 64 / es))),
                           LLVMConstInt(g->i32, 1, 0), LLVMConstInt(g->i32, 3, 0),
                           LLVMConstInt(g->i32, 1, 0)};
      gemm_intrin(g, "llvm.prefetch", &g->ptr, 1, a, 4);
    }
}

/* block_body(ctx, begin, end): row blocks [begin, end) against the packed
 * B block.  A blocks are packed into the call's packed-A buffer
 * (take_apack) by the pack_a at X_PACKA (a prologue's, or the
 * configuration's), or by pack_a, inlined, when X_PACKA is NULL: one
 * block_body serves products with and without A's prologue; a failed
 * fallback allocation sets X_ERR. */
LLVMValueRef gemm_emit_block_body(G *g, LLVMValueRef pack_a, LLVMValueRef pack_b) {
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, "block_body", ps, 3);
  LLVMValueRef cx = LLVMGetParam(f, 0);
  LLVMValueRef tile = gemm_entry_alloca(g, g->ct, g->mr * g->nr);
  LLVMValueRef M = get(g, cx, X_M), kc = get(g, cx, X_KC), jc = get(g, cx, X_JC),
               nc = get(g, cx, X_NC), bp = getp(g, cx, X_BPACK);
  LLVMValueRef own, apack = take_apack(g, cx, kc, &own);
  LLVMValueRef pk = gemm_quad_panel_k(g, kc); /* a panel slot's elements per lane */
  LLVMBasicBlockRef bad = blk(g, "nomem"), ok = blk(g, "mem");
  LLVMBuildCondBr(g->b, LLVMBuildIsNull(g->b, apack, ""), bad, ok);
  LLVMPositionBuilderAtEnd(g->b, bad);
  set(g, cx, X_ERR, k64(g, 1));
  LLVMBuildRetVoid(g->b);
  LLVMPositionBuilderAtEnd(g->b, ok);
  GLoop lb, lpa, lg, lj, li;
  /* iteration t: row block t / nch, column chunk t % nch (work_chunks) */
  LLVMValueRef nch = get(g, cx, X_NCHUNK), nrb = get(g, cx, X_NROWB), i0, i1, j0, j1;
  /* A packed already (all of M, every K block: X_AKSTEP != 0) */
  LLVMValueRef apre = LLVMConstInt(g->i1, 0, 0);
  if (gemm_k_inside(g)) {
    apre = LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_AKSTEP), k64(g, 0), "");
    apack = LLVMBuildSelect(g->b, apre, getp(g, cx, X_AKPACK), apack, "");
  }
  LLVMValueRef t = gemm_loop_open(g, &lb, LLVMGetParam(f, 1), LLVMGetParam(f, 2), k64(g, 1));
  even_part(g, sdiv(g, t, nch), nrb, M, g->mr, &i0, &i1);
  even_part(g, srem(g, t, nch), nch, nc, g->nr, &j0, &j1);
  LLVMValueRef mc = sub(g, i1, i0);
  LLVMValueRef rend = gemm_k_inside(g) ? LLVMBuildSelect(g->b, apre, k64(g, 0), mc, "") : mc;
  LLVMValueRef r = gemm_loop_open(g, &lpa, k64(g, 0), rend, k64(g, g->mr));
  LLVMValueRef pa[5] = {cx, gep(g, g->ct, apack, mul(g, r, pk)), add(g, i0, r),
                        imin(g, k64(g, g->mr), sub(g, mc, r)), kc};
  LLVMValueRef pf = getp(g, cx, X_PACKA);
  LLVMTypeRef pts[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  if (pack_a) { /* X_PACKA NULL: pack_a, inlined (the product it was made for) */
    LLVMBasicBlockRef own_a = blk(g, "pack_own"), other_a = blk(g, "pack_other"), packed = blk(g, "packed_a");
    LLVMBuildCondBr(g->b, LLVMBuildIsNull(g->b, pf, ""), own_a, other_a);
    LLVMPositionBuilderAtEnd(g->b, own_a);
    call(g, pack_a, pa, 5);
    LLVMBuildBr(g->b, packed);
    LLVMPositionBuilderAtEnd(g->b, other_a);
    LLVMBuildCall2(g->b, LLVMFunctionType(g->vd, pts, 5, 0), pf, pa, 5, "");
    LLVMBuildBr(g->b, packed);
    LLVMPositionBuilderAtEnd(g->b, packed);
  } else {
    LLVMBuildCall2(g->b, LLVMFunctionType(g->vd, pts, 5, 0), pf, pa, 5, "");
  }
  gemm_loop_close(g, &lpa);
  /* the panels in groups of X_BGRP; work_split's fused B packing packs
   * each group just before its micro-kernels into the chunk's first
   * panel slots (no other item uses them), so it is used from L1 and L2 */
  LLVMValueRef fuse = LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_BFUSE), k64(g, 0), "");
  /* the chunk's slots from j0 panels of a full K block (X_KSTEP, or K
   * when shorter): with the K loop inside (gemm_emit_kloop) another
   * chunk may be at another K block, whose kc is not this one's */
  LLVMValueRef kfull = gemm_k_inside(g) ? imin(g, get(g, cx, X_KSTEP), get(g, cx, X_K)) : kc;
  LLVMValueRef slot = gep(g, g->ct, bp, mul(g, j0, gemm_quad_panel_k(g, kfull)));
  LLVMValueRef gstep = mul(g, get(g, cx, X_BGRP), k64(g, g->nr));
  LLVMValueRef jg = gemm_loop_open(g, &lg, j0, j1, gstep), jgend = imin(g, add(g, jg, gstep), j1);
  LLVMBasicBlockRef bpk = blk(g, "bpack"), bgo = blk(g, "bpacked");
  LLVMBuildCondBr(g->b, fuse, bpk, bgo);
  LLVMPositionBuilderAtEnd(g->b, bpk);
  gemm_pack_b_group(g, cx, pack_b, slot, jg, jgend);
  LLVMBuildBr(g->b, bgo);
  LLVMPositionBuilderAtEnd(g->b, bgo);
  LLVMValueRef j = gemm_loop_open(g, &lj, jg, jgend, k64(g, g->nr));
  LLVMValueRef bpan = LLVMBuildSelect(g->b, fuse, gep(g, g->ct, slot, mul(g, sub(g, j, jg), pk)),
                                      gep(g, g->ct, bp, mul(g, j, pk)), "");
  LLVMValueRef i = gemm_loop_open(g, &li, k64(g, 0), mc, k64(g, g->mr));
  LLVMValueRef acc[16][4];
  prefetch_tile(g, cx, add(g, i0, i), add(g, jc, j));
  if (g->cscr) gemm_lowp_prefetch(g, cx, add(g, i0, i), add(g, jc, j));
  gemm_lowp_prefetch_b_next(g, cx, fuse, mc, i, j, j0, j1, jg, jgend);
  micro_kernel(g, gep(g, g->ct, apack, mul(g, i, pk)), bpan, kc, acc);
  store_tile(g, cx, acc, tile, add(g, i0, i), add(g, jc, j), imin(g, k64(g, g->mr), sub(g, mc, i)),
             imin(g, k64(g, g->nr), sub(g, nc, j)));
  gemm_loop_close(g, &li);
  gemm_loop_close(g, &lj);
  gemm_loop_close(g, &lg);
  call_epilogue(g, cx, i0, add(g, i0, mc), add(g, jc, j0), add(g, jc, j1));
  gemm_loop_close(g, &lb);
  LLVMBasicBlockRef fr = blk(g, "free_apack"), out = blk(g, "ret");
  LLVMBuildCondBr(g->b, own, fr, out);
  LLVMPositionBuilderAtEnd(g->b, fr);
  free_(g, apack);
  LLVMBuildBr(g->b, out);
  LLVMPositionBuilderAtEnd(g->b, out);
  LLVMBuildRetVoid(g->b);
  return f;
}

LLVMValueRef gemm_emit_kloop(G *g, LLVMValueRef inner, const char *what) {
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, what, ps, 3);
  LLVMValueRef cx = LLVMGetParam(f, 0), loc = gemm_entry_alloca(g, g->i64, X_COUNT);
  LLVMBuildMemCpy(g->b, loc, 8, cx, 8, k64(g, X_COUNT * 8));
  /* the packed-A buffer of this call (take_apack), the same in every K
   * block's block_body: each call takes one index, as block_body does */
  LLVMValueRef idx = LLVMBuildAtomicRMW(g->b, LLVMAtomicRMWBinOpAdd, slot_ptr(g, cx, X_ANEXT),
                                        k64(g, 1), LLVMAtomicOrderingMonotonic, 0);
  LLVMValueRef nkb = get(g, cx, X_NKB), ks = get(g, cx, X_KSTEP), K = get(g, cx, X_K);
  LLVMValueRef bp = getp(g, cx, X_BPACK), bstep = get(g, cx, X_BSTEP), z = k64(g, 0);
  LLVMValueRef ap = getp(g, cx, X_AWPACK);
  LLVMValueRef nit = get(g, cx, X_NITEMS);
  LLVMBasicBlockRef take = blk(g, "take"), item = blk(g, "item");
  LLVMBasicBlockRef done = blk(g, "items_done");
  LLVMBuildBr(g->b, take);
  LLVMPositionBuilderAtEnd(g->b, take);
  LLVMValueRef i = LLVMBuildAtomicRMW(g->b, LLVMAtomicRMWBinOpAdd, slot_ptr(g, cx, X_INEXT),
                                      k64(g, 1), LLVMAtomicOrderingMonotonic, 0);
  LLVMBuildCondBr(g->b, lt(g, i, nit), item, done);
  LLVMPositionBuilderAtEnd(g->b, item);
  LLVMValueRef a[3] = {loc, i, add(g, i, k64(g, 1))};
  GLoop l;
  LLVMValueRef t = gemm_loop_open(g, &l, z, nkb, k64(g, 1)), pc = mul(g, t, ks);
  set(g, loc, X_PC, pc), set(g, loc, X_KC, imin(g, ks, sub(g, K, pc)));
  set(g, loc, X_FIRST, LLVMBuildZExt(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, t, z, ""), g->i64, ""));
  LLVMValueRef last = LLVMBuildICmp(g->b, LLVMIntEQ, t, sub(g, nkb, k64(g, 1)), "");
  set(g, loc, X_LAST, LLVMBuildZExt(g->b, last, g->i64, ""));
  set(g, loc, X_ANEXT, idx);
  set(g, loc, X_BPACK, gep(g, g->ct, bp, mul(g, t, bstep)));
  set(g, loc, X_AKPACK, gep(g, g->ct, ap, mul(g, t, get(g, cx, X_AKSTEP))));
  call(g, inner, a, 3);
  gemm_loop_close(g, &l);
  gemm_no_vectorize(g, LLVMBuildBr(g->b, take));
  LLVMPositionBuilderAtEnd(g->b, done);
  LLVMBasicBlockRef bad = blk(g, "nomem"), out = blk(g, "ret");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, get(g, loc, X_ERR), z, ""), bad, out);
  LLVMPositionBuilderAtEnd(g->b, bad);
  set(g, cx, X_ERR, k64(g, 1));
  LLVMBuildBr(g->b, out);
  LLVMPositionBuilderAtEnd(g->b, out);
  LLVMBuildRetVoid(g->b);
  return f;
}

LLVMValueRef gemm_emit_packa_body(G *g, LLVMValueRef pack_a) {
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, "packa_body", ps, 3);
  LLVMValueRef cx = LLVMGetParam(f, 0), M = get(g, cx, X_M), kc = get(g, cx, X_KC);
  LLVMValueRef ap = getp(g, cx, X_AKPACK), pk = gemm_quad_panel_k(g, kc);
  GLoop l;
  LLVMValueRef t = gemm_loop_open(g, &l, LLVMGetParam(f, 1), LLVMGetParam(f, 2), k64(g, 1));
  LLVMValueRef r = mul(g, t, k64(g, g->mr));
  LLVMValueRef a[5] = {cx, gep(g, g->ct, ap, mul(g, r, pk)), r, imin(g, k64(g, g->mr), sub(g, M, r)), kc};
  call(g, pack_a, a, 5);
  gemm_loop_close(g, &l);
  LLVMBuildRetVoid(g->b);
  return f;
}
