/* conv_direct.c — direct convolution for the CPU backend (conv.h): conv2d
 * with one group and a channels-last output (channel stride 1), any
 * kernel size, stride, padding and dilation, any input strides, without
 * the implicit GEMM's im2col packing.
 *
 * The weights are packed once per call into the pool, blocked over
 * output channels: [O / NB][KH][KW][C][NB] in the compute type, NB = NOB
 * vectors of VW lanes (zero lanes past O), then the bias (or zeros).  A
 * work item is an output row (image, oy); for each block of NB output
 * channels, PX output pixels at a time keep PX x NOB accumulator vectors
 * in registers: for each tap (ky, kx) and input channel c, NOB weight
 * vectors are loaded and each pixel's input value x[c] is broadcast into
 * NOB FMAs (a micro-kernel whose A operand is read in place: pixel p's
 * row of K = (ky, kx, c) is the input itself, contiguous in c for a
 * channels-last input).  The columns whose taps all fall inside the
 * input run in blocks of PX without checks, the rest of them in one block
 * each of PX / 2, PX / 4 and 2 columns where it fits, then one at a time;
 * the border columns run one at a time, skipping the taps outside, by
 * WIDE channel blocks at once (one pixel by NOB vectors alone would be
 * NOB chains of dependent FMAs); rows of taps outside are skipped.
 * The last block of channels (O not a multiple of NB) stores through
 * masks.
 * An NCHW output (column stride 1; stride 1 along columns and an input
 * column stride of 1) transposes the roles: vectors over output columns,
 * NOB = 2 of them by PX = 6 output channels in registers, the weights
 * packed [O / PX][KH][KW][C][PX] and broadcast, each input vector loaded
 * once per (tap, c); the border vectors masked against the input's
 * columns.  Accumulation in the compute type (f32 for f32/f16/bf16, f64,
 * wrapping i32 for integer outputs of at most 32 bits, else i64), the
 * bias first, products summed in (ky, kx, c) order,
 * one rounding to the output dtype; the GEMM's epilogue hook runs on
 * each finished row (conv.h).  Low-precision channels-last inputs
 * (8/16-bit integers, bf16) take conv_lowp.c's K-pair blocks instead.
 * Needs: conv_impl.h.  Used by: gemm_nest.c. */
#include "conv_impl.h"

/* Channel blocks in the register block of a border pixel (channels-last). */
enum { WIDE = 4 };

/* NB: output channels per block (channels-last: NOB vectors; NCHW: PX
 * broadcast weights). */
static int nb_of(const Cv *d) { return d->cl ? d->nob * d->g.vw : d->px; }

/* np pixels from column ox, output channels oc .. oc + NB (tail: masked
 * against O), of the row at input offset xb, first tap row iy0, output
 * offset ob (cv_block_open): for each tap and input channel c, NOB
 * weight vectors by each pixel's broadcast x[c]. */
static void dr_block(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef ox,
                     LLVMValueRef oc, int np, bool checked, bool tail) {
  G *g = &d->g;
  if (g->pairs) { /* low precision, two channels at a time (conv_lowp.c) */
    cv_lowp_block(d, xb, iy0, ob, ox, oc, np, checked, tail, nb_of(d));
    return;
  }
  LLVMValueRef *v = d->v;
  int nob = cv_nvec(d), vw = g->vw, nb = nb_of(d);
  CvBlock bk;
  cv_block_open(d, &bk, xb, iy0, ox, oc, np, checked, tail, nb, v[V_C]);
  GLoop lc;
  LLVMValueRef c = gemm_loop_open(g, &lc, k64(g, 0), v[V_C], k64(g, 1));
  LLVMValueRef wc = add(g, bk.wt, mul(g, c, k64(g, nb))), wv[8], xc = mul(g, c, v[V_XSC]);
  /* channel block j / NOB of a wide block: its weights KH * KW * C * NB further */
  LLVMValueRef bstride = mul(g, mul(g, mul(g, v[V_KH], v[V_KW]), v[V_C]), k64(g, nb));
  for (int j = 0; j < nob; j++) {
    LLVMValueRef wj = j < d->nob ? wc : add(g, wc, mul(g, k64(g, j / d->nob), bstride));
    wv[j] = cv_wvec(d, add(g, wj, k64(g, (j % d->nob) * vw)));
  }
  for (int p = 0; p < np; p++) {
    LLVMValueRef xs = cv_splat(g, gemm_load_c(g, v[V_X], add(g, bk.xo[p], xc), d->xd));
    for (int j = 0; j < nob; j++) {
      LLVMValueRef a = LLVMBuildLoad2(g->b, g->vt, bk.acc[p][j], "");
      LLVMBuildStore(g->b, gemm_fma(g, xs, wv[j], a), bk.acc[p][j]);
    }
  }
  gemm_loop_close(g, &lc);
  cv_block_close(d, &bk, ob);
}

/* The border columns [0, lo) and [hi, OW) of the row (some of their
 * taps fall outside the input: one pixel at a time, each tap checked)
 * for the channel block at oc. */
static void dr_borders(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef oc,
                       LLVMValueRef lo, LLVMValueRef hi, bool tail) {
  G *g = &d->g;
  GLoop l;
  LLVMValueRef ox = gemm_loop_open(g, &l, k64(g, 0), lo, k64(g, 1));
  dr_block(d, xb, iy0, ob, ox, oc, 1, true, tail);
  gemm_loop_close(g, &l);
  ox = gemm_loop_open(g, &l, hi, d->v[V_OW], k64(g, 1));
  dr_block(d, xb, iy0, ob, ox, oc, 1, true, tail);
  gemm_loop_close(g, &l);
}

/* Every column of the row for the channel block at oc (borders: its
 * border columns too). */
static void dr_cols(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef oc,
                    LLVMValueRef lo, LLVMValueRef hi, bool tail, bool borders) {
  G *g = &d->g;
  GLoop l;
  LLVMValueRef ox;
  if (borders) dr_borders(d, xb, iy0, ob, oc, lo, hi, tail);
  LLVMValueRef nb = sdiv(g, sub(g, hi, lo), k64(g, d->px)),
               mid = add(g, lo, mul(g, nb, k64(g, d->px)));
  ox = gemm_loop_open(g, &l, lo, mid, k64(g, d->px));
  dr_block(d, xb, iy0, ob, ox, oc, d->px, false, tail);
  gemm_loop_close(g, &l);
  /* the rest of the interior, fewer than PX columns: a block of PX / 2,
   * PX / 4 and 2 columns each where they fit, then one at a time (one
   * pixel alone leaves NOB chains of dependent FMAs, a fraction of the
   * FMA throughput; in 7- and 28-wide layers the rest is most of a row) */
  LLVMValueRef at = mid;
  int steps[3] = {d->px / 2, d->px / 4, 2}, last = d->px;
  for (int i = 0; i < 3; i++) {
    int np = steps[i];
    if (np < 2 || np >= last) continue;
    last = np;
    LLVMBasicBlockRef run = blk(g, "dr_rest"), next = blk(g, "dr_rnext");
    LLVMValueRef end = add(g, at, k64(g, np)), fits = LLVMBuildICmp(g->b, LLVMIntSLE, end, hi, "");
    LLVMBuildCondBr(g->b, fits, run, next);
    LLVMPositionBuilderAtEnd(g->b, run);
    dr_block(d, xb, iy0, ob, at, oc, np, false, tail);
    LLVMBuildBr(g->b, next);
    LLVMPositionBuilderAtEnd(g->b, next);
    at = LLVMBuildSelect(g->b, fits, end, at, "");
  }
  ox = gemm_loop_open(g, &l, at, hi, k64(g, 1));
  dr_block(d, xb, iy0, ob, ox, oc, 1, false, tail);
  gemm_loop_close(g, &l);
}

/* Output row t = image * OH + oy: full channel blocks, then the last one
 * masked. */
static void dr_row(Cv *d, LLVMValueRef t) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  LLVMValueRef n = sdiv(g, t, v[V_OH]), oy = srem(g, t, v[V_OH]);
  LLVMValueRef xb = add(g, v[V_XOFF], mul(g, n, v[V_XSN]));
  LLVMValueRef ob = add(g, add(g, v[V_OOFF], mul(g, n, v[V_OSN])), mul(g, oy, v[V_OSH]));
  LLVMValueRef iy0 = sub(g, mul(g, oy, v[V_SH]), v[V_PH]), lo, hi;
  cv_interior(d, &lo, &hi);
  LLVMValueRef O = v[V_O], nbk = k64(g, nb_of(d)), full = sub(g, O, srem(g, O, nbk));
  GLoop l;
  LLVMValueRef oc = gemm_loop_open(g, &l, k64(g, 0), full, nbk);
  dr_cols(d, xb, iy0, ob, oc, lo, hi, false, g->pairs);
  gemm_loop_close(g, &l);
  if (!g->pairs) {
    /* the border pixels of the full channel blocks, WIDE blocks at a
     * time: one pixel by NOB vectors alone leaves NOB chains of dependent
     * FMAs (a fraction of the FMA throughput), one pixel by WIDE * NOB
     * vectors keeps the FMA units busy */
    LLVMValueRef wb = mul(g, nbk, k64(g, WIDE)),
                 wfull = mul(g, sdiv(g, full, wb), wb);
    d->nblk = WIDE;
    oc = gemm_loop_open(g, &l, k64(g, 0), wfull, wb);
    dr_borders(d, xb, iy0, ob, oc, lo, hi, false);
    gemm_loop_close(g, &l);
    d->nblk = 1;
    oc = gemm_loop_open(g, &l, wfull, full, nbk);
    dr_borders(d, xb, iy0, ob, oc, lo, hi, false);
    gemm_loop_close(g, &l);
  }
  LLVMBasicBlockRef tail = blk(g, "dr_tail"), done = blk(g, "dr_done");
  LLVMBuildCondBr(g->b, lt(g, full, O), tail, done);
  LLVMPositionBuilderAtEnd(g->b, tail);
  dr_cols(d, xb, iy0, ob, full, lo, hi, true, true);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
  if (d->epi) {
    LLVMValueRef q0 = mul(g, oy, v[V_OW]);
    cv_call_epi(d, mul(g, n, v[V_GROUPS]), q0, add(g, q0, v[V_OW]), k64(g, 0), O);
  }
}

/* ---- NCHW output, stride 1 along columns ---------------------------------- */

/* nvec vectors of output columns from ox (checked: one vector, its lanes
 * masked against OW and the input's columns) for the PX output channels
 * oc .. oc + PX of the row at input offset xb (image), first tap row iy0,
 * output row offset orow: PX x NOB accumulators, each input vector
 * loaded once per (tap, c) and multiplied by PX broadcast weights. */
static void dn_block(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef orow, LLVMValueRef ox,
                     LLVMValueRef oc, int nvec, bool checked) {
  G *g = &d->g;
  LLVMValueRef *v = d->v, acc[16][4];
  int po = d->px, vw = g->vw;
  LLVMValueRef kk = mul(g, v[V_KH], v[V_KW]), ckn = mul(g, v[V_C], k64(g, po));
  LLVMValueRef boff = add(g, mul(g, mul(g, kk, v[V_C]), v[V_OPAD]), oc);
  LLVMValueRef cols = cv_vadd(g, cv_splat(g, ox), d->lanes), valid = NULL;
  if (checked) valid = LLVMBuildICmp(g->b, LLVMIntSLT, cols, cv_splat(g, v[V_OW]), "");
  for (int p = 0; p < po; p++) {
    LLVMValueRef b = cv_splat(
        g, LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, v[V_WP], add(g, boff, k64(g, p))), ""));
    for (int j = 0; j < nvec; j++) {
      acc[p][j] = gemm_entry_alloca(g, g->vt, 1);
      LLVMBuildStore(g->b, b, acc[p][j]);
    }
  }
  LLVMValueRef wblk = mul(g, mul(g, oc, kk), v[V_C]);
  CvTaps tp;
  cv_taps_open(d, &tp, xb, iy0);
  LLVMValueRef wt = add(g, wblk, mul(g, add(g, mul(g, tp.ky, v[V_KW]), tp.kx), ckn));
  LLVMValueRef koff = sub(g, mul(g, tp.kx, v[V_DW]), v[V_PW]), mask = NULL;
  if (checked) { /* input column ox + lane + koff inside [0, W) */
    LLVMValueRef ix = cv_vadd(g, cols, cv_splat(g, koff));
    mask =
        LLVMBuildAnd(g->b, valid, LLVMBuildICmp(g->b, LLVMIntULT, ix, cv_splat(g, v[V_W]), ""), "");
  }
  LLVMValueRef x0 = add(g, tp.xr, add(g, ox, koff)); /* column stride 1 */
  GLoop lc;
  LLVMValueRef c = gemm_loop_open(g, &lc, k64(g, 0), v[V_C], k64(g, 1));
  LLVMValueRef xc = add(g, x0, mul(g, c, v[V_XSC])), wc = add(g, wt, mul(g, c, k64(g, po))), xv[4];
  for (int j = 0; j < nvec; j++)
    xv[j] = cv_vload(g, d->xd, v[V_X], add(g, xc, k64(g, j * vw)), NULL, mask);
  for (int p = 0; p < po; p++) {
    LLVMValueRef ws =
        cv_splat(g, LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, v[V_WP], add(g, wc, k64(g, p))), ""));
    for (int j = 0; j < nvec; j++) {
      LLVMValueRef a = LLVMBuildLoad2(g->b, g->vt, acc[p][j], "");
      LLVMBuildStore(g->b, gemm_fma(g, xv[j], ws, a), acc[p][j]);
    }
  }
  gemm_loop_close(g, &lc);
  cv_taps_close(d, &tp);
  for (int p = 0; p < po; p++) { /* channels past O (the last block) are not stored */
    LLVMValueRef o = add(g, oc, k64(g, p));
    LLVMBasicBlockRef skip = cv_open_inside(g, o, v[V_O]);
    LLVMValueRef row = add(g, add(g, orow, mul(g, o, v[V_OSC])), ox);
    for (int j = 0; j < nvec; j++)
      cv_vstore(g, g->od, LLVMBuildLoad2(g->b, g->vt, acc[p][j], ""), v[V_OUT],
                add(g, row, k64(g, j * vw)), valid);
    cv_close_inside(g, skip);
  }
}

/* Output row t = image * OH + oy, every channel block: blocks of NOB
 * vectors where every tap is inside, else one checked vector. */
static void dn_row(Cv *d, LLVMValueRef t) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  int vw = g->vw, bw = d->nob * vw;
  LLVMValueRef n = sdiv(g, t, v[V_OH]), oy = srem(g, t, v[V_OH]);
  LLVMValueRef xb = add(g, v[V_XOFF], mul(g, n, v[V_XSN]));
  LLVMValueRef orow = add(g, add(g, v[V_OOFF], mul(g, n, v[V_OSN])), mul(g, oy, v[V_OSH]));
  LLVMValueRef iy0 = sub(g, mul(g, oy, v[V_SH]), v[V_PH]), lo, hi;
  cv_interior(d, &lo, &hi);
  GLoop lo_;
  LLVMValueRef oc = gemm_loop_open(g, &lo_, k64(g, 0), v[V_OPAD], k64(g, d->px));
  LLVMValueRef oxa = gemm_entry_alloca(g, g->i64, 1);
  LLVMBuildStore(g->b, k64(g, 0), oxa);
  LLVMBasicBlockRef head = blk(g, "dn_ox"), body = blk(g, "dn_oxb"), big = blk(g, "dn_big"),
                    chk = blk(g, "dn_chk"), end = blk(g, "dn_oxend");
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, head);
  LLVMValueRef ox = LLVMBuildLoad2(g->b, g->i64, oxa, "");
  gemm_no_vectorize(g, LLVMBuildCondBr(g->b, lt(g, ox, v[V_OW]), body, end));
  LLVMPositionBuilderAtEnd(g->b, body);
  LLVMValueRef inl = LLVMBuildICmp(g->b, LLVMIntSGE, ox, lo, "");
  LLVMValueRef fits = LLVMBuildICmp(g->b, LLVMIntSLE, add(g, ox, k64(g, bw)), hi, "");
  LLVMBuildCondBr(g->b, LLVMBuildAnd(g->b, inl, fits, ""), big, chk);
  LLVMPositionBuilderAtEnd(g->b, big);
  dn_block(d, xb, iy0, orow, ox, oc, d->nob, false);
  LLVMBuildStore(g->b, add(g, ox, k64(g, bw)), oxa);
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, chk);
  dn_block(d, xb, iy0, orow, ox, oc, 1, true);
  LLVMBuildStore(g->b, add(g, ox, k64(g, vw)), oxa);
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, end);
  gemm_loop_close(g, &lo_);
  if (d->epi) {
    LLVMValueRef q0 = mul(g, oy, v[V_OW]);
    cv_call_epi(d, mul(g, n, v[V_GROUPS]), k64(g, 0), v[V_O], q0, add(g, q0, v[V_OW]));
  }
}

/* ---- the driver in the kernel ---------------------------------------------- */

/* The register block for the target: NOB vectors of output channels
 * (one when O fits one vector) by PX pixels, within 16 vector registers
 * (32 with 512-bit vectors). */
static void blocking(Cv *d, LLVMValueRef O) {
  G *g = &d->g;
  if (!d->cl) { /* NCHW: NOB = 2 vectors of columns by PX = 6 channels (12 with 512 bits) */
    d->nob = 2;
    d->px = g->vec_bits >= 512 ? 12 : 6;
    return;
  }
  bool one = LLVMIsAConstantInt(O) && LLVMConstIntGetSExtValue(O) <= g->vw;
  d->nob = one ? 1 : 2;
  d->px = g->vec_bits >= 512 ? 12 : one ? 12 : 6;
}

/* O rounded up to a multiple of NB. */
static LLVMValueRef opad_of(Cv *d, LLVMValueRef O) {
  G *g = &d->g;
  LLVMValueRef nb = k64(g, nb_of(d));
  return mul(g, cdiv(g, O, nb), nb);
}

/* The weights into wp as [O / NB][KH][KW][C][NB] (zeros past O), then
 * the bias (or zeros) at wp[OPAD * KH * KW * C ..]. */
static void pack(Cv *d, const GemmTensor *w, const GemmTensor *bias) {
  G *g = &d->g;
  LLVMValueRef *k = d->k, wp = k[V_WP], kk = mul(g, k[V_KH], k[V_KW]), opad = k[V_OPAD];
  LLVMValueRef nb = k64(g, nb_of(d)), C = k[V_C];
  GLoop lo, lt_, lc;
  LLVMValueRef o = gemm_loop_open(g, &lo, k64(g, 0), opad, k64(g, 1));
  LLVMValueRef ob = mul(g, mul(g, sdiv(g, o, nb), kk), mul(g, C, nb)), ol = srem(g, o, nb);
  LLVMValueRef t = gemm_loop_open(g, &lt_, k64(g, 0), kk, k64(g, 1));
  LLVMValueRef c = gemm_loop_open(g, &lc, k64(g, 0), C, k64(g, 1));
  LLVMValueRef dst = add(g, add(g, ob, mul(g, add(g, mul(g, t, C), c), nb)), ol);
  LLVMValueRef src = add(g, add(g, w->offset, mul(g, o, w->stride[0])), mul(g, c, w->stride[1]));
  src = add(
      g, src,
      add(g, mul(g, sdiv(g, t, k[V_KW]), w->stride[2]), mul(g, srem(g, t, k[V_KW]), w->stride[3])));
  cv_pack_elem(g, w, src, o, k[V_O], gep(g, g->ct, wp, dst));
  gemm_loop_close(g, &lc);
  gemm_loop_close(g, &lt_);
  LLVMValueRef bdst = add(g, mul(g, mul(g, kk, C), opad), o);
  LLVMValueRef bsrc = bias ? add(g, bias->offset, mul(g, o, bias->stride[0])) : NULL;
  cv_pack_elem(g, bias, bsrc, o, k[V_O], gep(g, g->ct, wp, bdst));
  gemm_loop_close(g, &lo);
}

LLVMValueRef cg_conv_direct_pool_bytes(const GemmEmit *e, const GemmTensor *w,
                                       const GemmTensor *out, bool channels_last,
                                       LLVMValueRef *threads) {
  Cv d;
  cv_setup(&d, e, w->dtype, out->dtype);
  G *g = &d.g;
  d.cl = channels_last;
  blocking(&d, w->shape[0]);
  LLVMValueRef kkc = mul(g, mul(g, w->shape[2], w->shape[3]), w->shape[1]);
  LLVMValueRef n = mul(g, add(g, kkc, k64(g, 1)), opad_of(&d, w->shape[0]));
  *threads = k64(g, 1);
  return add(g, k64(g, 64), mul(g, n, k64(g, dtype_size(g->cd))));
}

LLVMValueRef cg_emit_conv_direct(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                 const GemmTensor *bias, const GemmTensor *out,
                                 LLVMValueRef attr[7], bool channels_last) {
  Cv d;
  cv_setup(&d, e, x->dtype, out->dtype);
  G *g = &d.g;
  LLVMValueRef *k = d.k;
  d.cl = channels_last;
  blocking(&d, w->shape[0]);
  cv_operands(&d, e, x, w, out, attr);
  k[V_C] = w->shape[1];
  k[V_M] = k64(g, 1);
  k[V_OPAD] = opad_of(&d, w->shape[0]);
  if (cv_lowp_choose(&d, w->dtype) && !d.split) cv_lowp_pack(&d, w, bias, nb_of(&d));
  else pack(&d, w, bias);
  GLoop l;
  LLVMValueRef t = cv_body_open(&d, "tdsl.conv.direct", &l);
  if (d.cl)
    dr_row(&d, t);
  else
    dn_row(&d, t);
  LLVMValueRef body = cv_body_close(&d, &l);
  return cv_launch(&d, e, body, false);
}
