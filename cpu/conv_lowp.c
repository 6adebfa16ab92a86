/* conv_lowp.c — the direct convolution's K-pair path (conv.h,
 * conv_direct.c's channels-last kernel): low-precision inputs multiplied
 * two input channels at a time, as gemm_lowp.c multiplies K pairs.
 *
 *   GP_I16   i8/u8/i16 input and weight (as stored, or widened by a
 *            prologue: conv2d(x.to(i32), w.to(i32)) of i8 tensors), i32
 *            accumulators: acc[lane] += x[c] * w[c][lane] + x[c+1] *
 *            w[c+1][lane] through gemm_lowp_dot (vpmaddwd, vpdpwssd with
 *            VNNI); exact mod 2^32, so the results (wrapping in the
 *            output's width, PyTorch's) are exact.
 *   GP_BF16  bf16 input and weight, f32 accumulators: vdpbf16ps where the
 *            target has AVX512-BF16 (its numerics: gemm_lowp.c); else
 *            (split) the input pair is taken apart into two f32 vectors
 *            (bf16 is the high half of an f32: a shift, a mask) and
 *            multiplied by two FMAs in channel order against
 *            conv_direct.c's f32 weight rows, the generic kernel's
 *            values bit for bit, with one broadcast per two channels.
 *
 * The weights are packed once per call as [O / NB][KH][KW][ceil(C / 2)][NB]
 * i32 pairs (channel 2p in the low half, 2p + 1 in the high half, zero
 * past C and past O), the bias (or zeros) after them in the compute type,
 * in the space conv_direct.c sizes for its own layout (never more); the
 * split bf16 path reads conv_direct.c's own f32 packing instead, and
 * blocks 4 pixels on 256-bit vectors (with 6, registers spilled).  For
 * each pixel of a block and pair of channels, one 32-bit broadcast of
 * (x[2p], x[2p + 1]) (an i8/u8 pair repeated across the lanes and widened to
 * two i16), then NOB dot products; an odd C's last channel pairs with a
 * zero.  Chosen only where the input's channels are contiguous (a
 * constant channel stride of 1): other inputs take the generic kernel.
 * Needs: conv_impl.h, gemm_impl.h (gemm_lowp_dot, gemm_lowp_pair_at).
 * Used by: conv_direct.c. */
#include "conv_impl.h"

int cv_lowp_choose(Cv *d, DType wd) {
  G *g = &d->g;
  d->split = false;
  g->pairs = GP_NONE;
  if (!d->cl || !cv_is_one(d->k[V_XSC]) || !(g->isa & GEMM_ISA_X86)) return GP_NONE;
  if (g->cd == DT_I32 && gemm_int_dot_dtype(d->xd) && gemm_int_dot_dtype(wd)) g->pairs = GP_I16;
  if (g->cd == DT_F32 && d->xd == DT_BF16 && wd == DT_BF16) {
    d->split = !(g->vec_bits == 512 && (g->isa & GEMM_ISA_BF16));
    g->pairs = GP_BF16;
  }
  /* split: both halves of each pixel's pair stay live until its second
   * FMA; fewer pixels per block keep them and the accumulators in
   * registers (measured on AVX2: 6 spilled) */
  if (d->split && g->vec_bits < 512 && d->px > 4) d->px = 4;
  return g->pairs;
}

static LLVMValueRef npairs(G *g, LLVMValueRef C) { return cdiv(g, C, k64(g, 2)); }

void cv_lowp_pack(Cv *d, const GemmTensor *w, const GemmTensor *bias, int nb) {
  G *g = &d->g;
  LLVMValueRef *k = d->k, kk = mul(g, k[V_KH], k[V_KW]), opad = k[V_OPAD], C = k[V_C];
  LLVMValueRef P = npairs(g, C), nbk = k64(g, nb);
  GLoop lo, lt_, lp;
  LLVMValueRef o = gemm_loop_open(g, &lo, k64(g, 0), opad, k64(g, 1));
  LLVMValueRef ob = mul(g, mul(g, sdiv(g, o, nbk), kk), mul(g, P, nbk)), ol = srem(g, o, nbk);
  LLVMValueRef ok = lt(g, o, k[V_O]), oc = imin(g, o, sub(g, k[V_O], k64(g, 1)));
  LLVMValueRef t = gemm_loop_open(g, &lt_, k64(g, 0), kk, k64(g, 1));
  LLVMValueRef pofs = add(g, add(g, w->offset, mul(g, oc, w->stride[0])),
                          add(g, mul(g, sdiv(g, t, k[V_KW]), w->stride[2]),
                              mul(g, srem(g, t, k[V_KW]), w->stride[3])));
  LLVMValueRef p = gemm_loop_open(g, &lp, k64(g, 0), P, k64(g, 1));
  LLVMValueRef dst = add(g, add(g, ob, mul(g, add(g, mul(g, t, P), p), nbk)), ol);
  LLVMValueRef v = gemm_lowp_pair_at(g, w->base, w->dtype, pofs, w->stride[1], k64(g, 0),
                                     mul(g, p, k64(g, 2)), C, ok);
  LLVMBuildStore(g->b, v, gep(g, g->i32, k[V_WP], dst));
  gemm_loop_close(g, &lp);
  gemm_loop_close(g, &lt_);
  LLVMValueRef bdst = add(g, mul(g, mul(g, kk, P), opad), o);
  LLVMValueRef bsrc = bias ? add(g, bias->offset, mul(g, o, bias->stride[0])) : NULL;
  cv_pack_elem(g, bias, bsrc, o, k[V_O], gep(g, g->ct, k[V_WP], bdst));
  gemm_loop_close(g, &lo);
}

/* <VW x i32>: every lane the pair (x[i], x[i + 1]) (hi: x[i + 1] is
 * there; else the high half is zero), each value as 16 bits. */
static LLVMValueRef x_pair(Cv *d, LLVMValueRef i, bool hi) {
  G *g = &d->g;
  DType t = d->xd;
  LLVMTypeRef st = gemm_storage(g, t), vi = LLVMVectorType(g->i32, (unsigned)g->vw);
  LLVMValueRef s;
  if (!hi) {
    LLVMValueRef e = LLVMBuildLoad2(g->b, st, gep(g, st, d->v[V_X], i), "");
    if (st != g->i16)
      e = t == DT_U8 ? LLVMBuildZExt(g->b, e, g->i16, "") : LLVMBuildSExt(g->b, e, g->i16, "");
    s = LLVMBuildZExt(g->b, e, g->i32, "");
  } else if (st == g->i16) { /* i16, bf16: the two as one i32 */
    s = LLVMBuildLoad2(g->b, g->i32, gep(g, st, d->v[V_X], i), "");
    LLVMSetAlignment(s, 2);
  } else { /* i8, u8: the two bytes repeated, then widened (vpmovsxbw) */
    int n = 2 * g->vw;
    LLVMTypeRef v2 = LLVMVectorType(st, 2), hn = LLVMVectorType(g->i16, (unsigned)n);
    LLVMValueRef e = LLVMBuildLoad2(g->b, v2, gep(g, st, d->v[V_X], i), ""), m[64];
    LLVMSetAlignment(e, 1);
    for (int q = 0; q < n; q++) m[q] = LLVMConstInt(g->i32, (unsigned)(q & 1), 0);
    e = LLVMBuildShuffleVector(g->b, e, LLVMGetUndef(v2), LLVMConstVector(m, (unsigned)n), "");
    e = t == DT_U8 ? LLVMBuildZExt(g->b, e, hn, "") : LLVMBuildSExt(g->b, e, hn, "");
    return LLVMBuildBitCast(g->b, e, vi, "");
  }
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(vi), s, LLVMConstInt(g->i32, 0, 0), "");
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(vi), LLVMConstNull(vi), "");
}

/* bf16 pairs taken apart: the low (h = 0) or high (h = 1) value of each
 * lane as an f32 vector. */
static LLVMValueRef half_of(G *g, LLVMValueRef pv, int h) {
  LLVMValueRef r = h ? LLVMBuildAnd(g->b, pv, cv_splat(g, LLVMConstInt(g->i32, 0xFFFF0000u, 0)), "")
                     : LLVMBuildShl(g->b, pv, cv_splat(g, LLVMConstInt(g->i32, 16, 0)), "");
  return LLVMBuildBitCast(g->b, r, g->vt, "");
}

/* acc += the pair step of pixel vector xp against weight vector wv. */
static LLVMValueRef step(Cv *d, LLVMValueRef acc, LLVMValueRef xp, LLVMValueRef wv,
                         LLVMValueRef wl, LLVMValueRef wh, bool hi) {
  G *g = &d->g;
  if (!d->split) return gemm_lowp_dot(g, acc, xp, wv);
  acc = gemm_fma(g, half_of(g, xp, 0), wl, acc);
  return hi ? gemm_fma(g, half_of(g, xp, 1), wh, acc) : acc; /* no +0 for an odd C's last */
}

void cv_lowp_block(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef ox,
                   LLVMValueRef oc, int np, bool checked, bool tail, int nb) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  LLVMTypeRef vi = LLVMVectorType(g->i32, (unsigned)g->vw);
  int nob = cv_nvec(d), vw = g->vw;
  CvBlock bk; /* weight rows per tap: pairs, or (split) conv_direct.c's f32 rows */
  LLVMValueRef rows = d->split ? v[V_C] : npairs(g, v[V_C]);
  cv_block_open(d, &bk, xb, iy0, ox, oc, np, checked, tail, nb, rows);
  /* channel block j / NOB of a wide block: its weights KH * KW * rows * NB further */
  LLVMValueRef bstride = mul(g, mul(g, mul(g, v[V_KH], v[V_KW]), rows), k64(g, nb));
  /* full pairs, then an odd C's last channel (channel stride 1) */
  LLVMValueRef full = sdiv(g, v[V_C], k64(g, 2));
  GLoop lc;
  for (int part = 0; part < 2; part++) {
    LLVMValueRef q;
    LLVMBasicBlockRef after = NULL;
    if (part == 0) {
      q = gemm_loop_open(g, &lc, k64(g, 0), full, k64(g, 1));
    } else {
      q = full;
      LLVMBasicBlockRef odd = blk(g, "cvl_odd");
      after = blk(g, "cvl_even");
      LLVMBuildCondBr(g->b, lt(g, mul(g, full, k64(g, 2)), v[V_C]), odd, after);
      LLVMPositionBuilderAtEnd(g->b, odd);
    }
    LLVMValueRef wc = add(g, bk.wt, mul(g, q, k64(g, d->split ? 2 * nb : nb)));
    LLVMValueRef wv[8] = {0}, wl[8] = {0}, wh[8] = {0};
    for (int j = 0; j < nob; j++) {
      LLVMValueRef wj = j < d->nob ? wc : add(g, wc, mul(g, k64(g, j / d->nob), bstride));
      int jo = (j % d->nob) * vw;
      if (d->split) { /* channels 2q and 2q + 1 as f32 rows */
        wl[j] = cv_wvec(d, add(g, wj, k64(g, jo)));
        if (part == 0) wh[j] = cv_wvec(d, add(g, wj, k64(g, nb + jo)));
        continue;
      }
      wv[j] = LLVMBuildLoad2(g->b, vi, gep(g, g->i32, v[V_WP], add(g, wj, k64(g, jo))), "");
      LLVMSetAlignment(wv[j], 4);
    }
    for (int p = 0; p < np; p++) {
      LLVMValueRef xp = x_pair(d, add(g, bk.xo[p], mul(g, q, k64(g, 2))), part == 0);
      for (int j = 0; j < nob; j++) {
        LLVMValueRef a = LLVMBuildLoad2(g->b, g->vt, bk.acc[p][j], "");
        LLVMBuildStore(g->b, step(d, a, xp, wv[j], wl[j], wh[j], part == 0), bk.acc[p][j]);
      }
    }
    if (part == 0) gemm_loop_close(g, &lc);
    else cv_close_inside(g, after);
  }
  cv_block_close(d, &bk, ob);
}
