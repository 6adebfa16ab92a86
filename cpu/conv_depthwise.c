/* conv_depthwise.c — depthwise convolution for the CPU backend (conv.h):
 * conv2d whose groups each read one input channel (w [O, 1, KH, KW],
 * O = groups * M, output channel o reading input channel o / M), any
 * kernel size, stride, padding and dilation, emitted through the LLVM C
 * API instead of the implicit GEMM's groups of tiny GEMMs.
 *
 * The kernel packs the weights (and the bias, or zeros) once into the
 * pool in the compute type, then runs one parallel body:
 *  - channels-last output (channel stride 1): a work item per output row
 *    (image, oy); vectors of VW output channels, PX output pixels at a
 *    time in registers; the weights packed [KH][KW][O rounded up to VW],
 *    so each tap is one aligned vector load; the input read as channel
 *    vectors (contiguous when M == 1 and the input's channel stride is 1,
 *    else gathered); the last partial vector of channels masked; blocks
 *    without checks prefetch the input row new to this output row and
 *    the output, two blocks ahead;
 *  - NCHW output (column stride 1): a work item per output plane (image,
 *    channel); vectors of VW output columns, PX vectors at a time, each
 *    tap's weight a broadcast scalar; the input row read as contiguous
 *    vectors at stride 1 (else gathered).
 * Padding: the output columns whose taps all fall inside the input
 * (computed per call) run without checks; the border columns check each
 * tap (branch per column in channels-last, lane masks in NCHW), and rows
 * of taps outside the input are skipped.  Accumulation in the GEMM's
 * compute type (f32 for f32/f16/bf16, f64, wrapping i32 for integers of
 * at most 32 bits, else i64), one rounding to
 * the output dtype, the bias first (PyTorch adds it to the sum; every
 * output element is summed in tap order, ky then kx).
 * Values the body needs are constants where the kernel's shapes are
 * static (LLVM then unrolls the tap loops), else read from a context.
 * Needs: conv_impl.h.  Used by: gemm_nest.c. */
#include "conv_impl.h"

static LLVMValueRef acc_get(G *g, LLVMValueRef a) { return LLVMBuildLoad2(g->b, g->vt, a, ""); }

static LLVMValueRef khkw(Cv *d) { return mul(&d->g, d->v[V_KH], d->v[V_KW]); }

/* ---- channels-last: a row of output pixels -------------------------------- */

/* Prefetches, PF_AHEAD blocks of np pixels ahead of column ox, channels
 * c .. c + VW of the input row that the last row of taps reads (read for
 * the first time: the rows above were read by the output rows before)
 * and of the output row (for writing: the line is then owned when the
 * store comes).  The row's memory streams in once per call, and the
 * hardware prefetchers alone left the kernel waiting on it (measured on
 * [8, 96, 56, 56], bench/README.md).  x86 prefetches do not fault, so
 * columns past the row's end need no check. */
enum { PF_AHEAD = 2 };
static void prefetch_ahead(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob,
                           LLVMValueRef ox, LLVMValueRef c, int np) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  LLVMValueRef iy = add(g, iy0, mul(g, sub(g, v[V_KH], k64(g, 1)), v[V_DH]));
  LLVMValueRef ax = add(g, ox, k64(g, PF_AHEAD * np));
  LLVMValueRef xo = add(g, add(g, xb, mul(g, iy, v[V_XSH])),
                        mul(g, sub(g, mul(g, ax, v[V_SW]), v[V_PW]), v[V_XSW]));
  LLVMValueRef oo = add(g, ob, mul(g, ax, v[V_OSW]));
  LLVMValueRef xs = mul(g, v[V_SW], v[V_XSW]);
  for (int p = 0; p < np; p++) {
    LLVMValueRef at[2] = {
        gep(g, gemm_storage(g, d->xd), v[V_X], add(g, add(g, xo, c), mul(g, k64(g, p), xs))),
        gep(g, gemm_storage(g, g->od), v[V_OUT],
            add(g, add(g, oo, c), mul(g, k64(g, p), v[V_OSW])))};
    for (int w = 0; w < 2; w++) {
      LLVMValueRef a[4] = {at[w], LLVMConstInt(g->i32, (unsigned)w, 0), LLVMConstInt(g->i32, 3, 0),
                           LLVMConstInt(g->i32, 1, 0)};
      gemm_intrin(g, "llvm.prefetch", &g->ptr, 1, a, 4);
    }
  }
}

/* np output pixels from column ox, channels c .. c + VW (lanes in mask),
 * of the row at input row iy0 (first tap) / output offset ob. */
static void cl_block(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef ox,
                     LLVMValueRef c, int np, bool checked, LLVMValueRef mask) {
  G *g = &d->g;
  LLVMValueRef *v = d->v, acc[8];
  LLVMValueRef bias = cv_wvec(d, add(g, mul(g, khkw(d), v[V_OPAD]), c));
  for (int p = 0; p < np; p++) {
    acc[p] = gemm_entry_alloca(g, g->vt, 1);
    LLVMBuildStore(g->b, bias, acc[p]);
  }
  LLVMValueRef cidx = NULL; /* gathered: each lane's input channel offset */
  if (!d->contig)
    cidx = cv_vmul(
        g, LLVMBuildSDiv(g->b, cv_vadd(g, cv_splat(g, c), d->lanes), cv_splat(g, v[V_M]), ""),
        cv_splat(g, v[V_XSC]));
  if (!checked && d->contig) prefetch_ahead(d, xb, iy0, ob, ox, c, np);
  CvTaps tp;
  cv_taps_open(d, &tp, xb, iy0);
  LLVMValueRef wv =
      cv_wvec(d, add(g, mul(g, add(g, mul(g, tp.ky, v[V_KW]), tp.kx), v[V_OPAD]), c));
  for (int p = 0; p < np; p++) {
    LLVMBasicBlockRef skip = NULL;
    LLVMValueRef off = cv_tap_col(d, &tp, ox, p, checked, &skip), xv;
    if (d->contig)
      xv = cv_vload(g, d->xd, v[V_X], add(g, off, c), NULL, mask);
    else
      xv = cv_vload(g, d->xd, v[V_X], NULL, cv_vadd(g, cv_splat(g, off), cidx), mask);
    LLVMBuildStore(g->b, gemm_fma(g, xv, wv, acc_get(g, acc[p])), acc[p]);
    if (skip) cv_close_inside(g, skip);
  }
  cv_taps_close(d, &tp);
  for (int p = 0; p < np; p++) {
    LLVMValueRef o = add(g, add(g, ob, mul(g, add(g, ox, k64(g, p)), v[V_OSW])), c);
    cv_vstore(g, g->od, acc_get(g, acc[p]), v[V_OUT], o, mask);
  }
}

/* np pixels from column ox over every channel: full vectors, then the
 * last partial one masked. */
static void cl_pixels(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef ox,
                      int np, bool checked) {
  G *g = &d->g;
  LLVMValueRef O = d->v[V_O], full = sub(g, O, srem(g, O, k64(g, g->vw)));
  GLoop lc;
  LLVMValueRef c = gemm_loop_open(g, &lc, k64(g, 0), full, k64(g, g->vw));
  cl_block(d, xb, iy0, ob, ox, c, np, checked, NULL);
  gemm_loop_close(g, &lc);
  LLVMBasicBlockRef tail = blk(g, "dw_ctail"), done = blk(g, "dw_cdone");
  LLVMBuildCondBr(g->b, lt(g, full, O), tail, done);
  LLVMPositionBuilderAtEnd(g->b, tail);
  LLVMValueRef mask = LLVMBuildICmp(g->b, LLVMIntSLT, d->lanes, cv_splat(g, sub(g, O, full)), "");
  cl_block(d, xb, iy0, ob, ox, full, np, checked, mask);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
}

/* Output row t = image * OH + oy. */
static void cl_row(Cv *d, LLVMValueRef t) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  LLVMValueRef n = sdiv(g, t, v[V_OH]), oy = srem(g, t, v[V_OH]);
  LLVMValueRef xb = add(g, v[V_XOFF], mul(g, n, v[V_XSN]));
  LLVMValueRef ob = add(g, add(g, v[V_OOFF], mul(g, n, v[V_OSN])), mul(g, oy, v[V_OSH]));
  LLVMValueRef iy0 = sub(g, mul(g, oy, v[V_SH]), v[V_PH]), lo, hi;
  cv_interior(d, &lo, &hi);
  GLoop l;
  LLVMValueRef ox = gemm_loop_open(g, &l, k64(g, 0), lo, k64(g, 1));
  cl_pixels(d, xb, iy0, ob, ox, 1, true);
  gemm_loop_close(g, &l);
  LLVMValueRef nb = sdiv(g, sub(g, hi, lo), k64(g, d->px)),
               mid = add(g, lo, mul(g, nb, k64(g, d->px)));
  ox = gemm_loop_open(g, &l, lo, mid, k64(g, d->px));
  cl_pixels(d, xb, iy0, ob, ox, d->px, false);
  gemm_loop_close(g, &l);
  ox = gemm_loop_open(g, &l, mid, hi, k64(g, 1));
  cl_pixels(d, xb, iy0, ob, ox, 1, false);
  gemm_loop_close(g, &l);
  ox = gemm_loop_open(g, &l, hi, v[V_OW], k64(g, 1));
  cl_pixels(d, xb, iy0, ob, ox, 1, true);
  gemm_loop_close(g, &l);
  if (d->epi) {
    LLVMValueRef q0 = mul(g, oy, v[V_OW]);
    cv_call_epi(d, mul(g, n, v[V_GROUPS]), q0, add(g, q0, v[V_OW]), k64(g, 0), v[V_O]);
  }
}

/* ---- NCHW: a plane of output pixels --------------------------------------- */

/* np vectors of output columns from ox (all inside: no checks) or, with
 * checked, one vector whose lanes are checked against OW and the input's
 * columns; the plane's input offset xb, first tap row iy0, output row
 * offset orow, weights at wp[wrow..], bias b (compute scalar). */
static void nchw_block(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef orow,
                       LLVMValueRef wrow, LLVMValueRef b, LLVMValueRef ox, int np, bool checked) {
  G *g = &d->g;
  LLVMValueRef *v = d->v, acc[8], bv = cv_splat(g, b);
  int vw = g->vw;
  for (int p = 0; p < np; p++) {
    acc[p] = gemm_entry_alloca(g, g->vt, 1);
    LLVMBuildStore(g->b, bv, acc[p]);
  }
  LLVMValueRef cols = cv_vadd(g, cv_splat(g, ox), d->lanes), valid = NULL;
  if (checked) valid = LLVMBuildICmp(g->b, LLVMIntSLT, cols, cv_splat(g, v[V_OW]), "");
  LLVMValueRef step = mul(g, v[V_SW], v[V_XSW]); /* input elements between lanes */
  CvTaps tp;
  cv_taps_open(d, &tp, xb, iy0);
  LLVMValueRef wi = add(g, wrow, add(g, mul(g, tp.ky, v[V_KW]), tp.kx));
  LLVMValueRef wv = cv_splat(g, LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, v[V_WP], wi), ""));
  LLVMValueRef koff = sub(g, mul(g, tp.kx, v[V_DW]), v[V_PW]);
  for (int p = 0; p < np; p++) {
    LLVMValueRef ox0 = add(g, ox, k64(g, p * vw)), xv;
    LLVMValueRef ix0 = add(g, mul(g, ox0, v[V_SW]), koff);
    LLVMValueRef off = add(g, tp.xr, mul(g, ix0, v[V_XSW]));
    LLVMValueRef mask = NULL;
    if (checked) {
      LLVMValueRef ix = cv_vadd(g, cv_vmul(g, cols, cv_splat(g, v[V_SW])), cv_splat(g, koff));
      mask = LLVMBuildAnd(g->b, valid, LLVMBuildICmp(g->b, LLVMIntULT, ix, cv_splat(g, v[V_W]), ""),
                          "");
    }
    if (d->contig)
      xv = cv_vload(g, d->xd, v[V_X], off, NULL, mask);
    else
      xv = cv_vload(g, d->xd, v[V_X], NULL,
                    cv_vadd(g, cv_splat(g, off), cv_vmul(g, d->lanes, cv_splat(g, step))), mask);
    LLVMBuildStore(g->b, gemm_fma(g, xv, wv, acc_get(g, acc[p])), acc[p]);
  }
  cv_taps_close(d, &tp);
  for (int p = 0; p < np; p++)
    cv_vstore(g, g->od, acc_get(g, acc[p]), v[V_OUT], add(g, orow, add(g, ox, k64(g, p * vw))),
              valid);
}

/* Output plane t = image * O + channel. */
static void nchw_plane(Cv *d, LLVMValueRef t) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  int vw = g->vw, bw = d->px * vw;
  LLVMValueRef n = sdiv(g, t, v[V_O]), o = srem(g, t, v[V_O]), ci = sdiv(g, o, v[V_M]);
  LLVMValueRef xb = add(g, add(g, v[V_XOFF], mul(g, n, v[V_XSN])), mul(g, ci, v[V_XSC]));
  LLVMValueRef ob = add(g, add(g, v[V_OOFF], mul(g, n, v[V_OSN])), mul(g, o, v[V_OSC]));
  LLVMValueRef wrow = mul(g, o, khkw(d));
  LLVMValueRef b = LLVMBuildLoad2(
      g->b, g->ct, gep(g, g->ct, v[V_WP], add(g, mul(g, khkw(d), v[V_OPAD]), o)), "");
  LLVMValueRef lo, hi;
  cv_interior(d, &lo, &hi);
  GLoop ly;
  LLVMValueRef oy = gemm_loop_open(g, &ly, k64(g, 0), v[V_OH], k64(g, 1));
  LLVMValueRef iy0 = sub(g, mul(g, oy, v[V_SH]), v[V_PH]), orow = add(g, ob, mul(g, oy, v[V_OSH]));
  /* while (ox < OW): a block of PX vectors, one vector, or one checked */
  LLVMValueRef oxa = gemm_entry_alloca(g, g->i64, 1);
  LLVMBuildStore(g->b, k64(g, 0), oxa);
  LLVMBasicBlockRef head = blk(g, "dw_ox"), body = blk(g, "dw_oxb"), big = blk(g, "dw_big"),
                    one = blk(g, "dw_one"), one_in = blk(g, "dw_onein"), chk = blk(g, "dw_chk"),
                    end = blk(g, "dw_oxend");
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, head);
  LLVMValueRef ox = LLVMBuildLoad2(g->b, g->i64, oxa, "");
  gemm_no_vectorize(g, LLVMBuildCondBr(g->b, lt(g, ox, v[V_OW]), body, end));
  LLVMPositionBuilderAtEnd(g->b, body);
  LLVMValueRef inl = LLVMBuildICmp(g->b, LLVMIntSGE, ox, lo, "");
  LLVMValueRef fits = LLVMBuildICmp(g->b, LLVMIntSLE, add(g, ox, k64(g, bw)), hi, "");
  LLVMBuildCondBr(g->b, LLVMBuildAnd(g->b, inl, fits, ""), big, one);
  LLVMPositionBuilderAtEnd(g->b, big);
  nchw_block(d, xb, iy0, orow, wrow, b, ox, d->px, false);
  LLVMBuildStore(g->b, add(g, ox, k64(g, bw)), oxa);
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, one);
  fits = LLVMBuildICmp(g->b, LLVMIntSLE, add(g, ox, k64(g, vw)), hi, "");
  LLVMBuildCondBr(g->b, LLVMBuildAnd(g->b, inl, fits, ""), one_in, chk);
  LLVMPositionBuilderAtEnd(g->b, one_in);
  nchw_block(d, xb, iy0, orow, wrow, b, ox, 1, false);
  LLVMBuildStore(g->b, add(g, ox, k64(g, vw)), oxa);
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, chk);
  nchw_block(d, xb, iy0, orow, wrow, b, ox, 1, true);
  LLVMBuildStore(g->b, add(g, ox, k64(g, vw)), oxa);
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, end);
  gemm_loop_close(g, &ly);
  if (d->epi)
    cv_call_epi(d, mul(g, n, v[V_GROUPS]), o, add(g, o, k64(g, 1)), k64(g, 0),
                mul(g, v[V_OH], v[V_OW]));
}

/* ---- the driver in the kernel ---------------------------------------------- */

/* Weights into wp (channels-last: [KH*KW][OPAD], zero lanes past O; NCHW:
 * [O][KH*KW]), then the bias (or zeros) at wp[KH*KW*OPAD ..]. */
static void pack(Cv *d, const GemmTensor *w, const GemmTensor *bias) {
  G *g = &d->g;
  LLVMValueRef *k = d->k, wp = k[V_WP], kk = mul(g, k[V_KH], k[V_KW]), opad = k[V_OPAD];
  GLoop lo, lt_;
  LLVMValueRef o = gemm_loop_open(g, &lo, k64(g, 0), opad, k64(g, 1));
  LLVMValueRef t = gemm_loop_open(g, &lt_, k64(g, 0), kk, k64(g, 1));
  LLVMValueRef dst = d->cl ? add(g, mul(g, t, opad), o) : add(g, mul(g, o, kk), t);
  LLVMValueRef src = add(g, w->offset, mul(g, o, w->stride[0]));
  src = add(
      g, src,
      add(g, mul(g, sdiv(g, t, k[V_KW]), w->stride[2]), mul(g, srem(g, t, k[V_KW]), w->stride[3])));
  cv_pack_elem(g, w, src, o, k[V_O], gep(g, g->ct, wp, dst));
  gemm_loop_close(g, &lt_);
  LLVMValueRef bdst = add(g, mul(g, kk, opad), o);
  LLVMValueRef bsrc = bias ? add(g, bias->offset, mul(g, o, bias->stride[0])) : NULL;
  cv_pack_elem(g, bias, bsrc, o, k[V_O], gep(g, g->ct, wp, bdst));
  gemm_loop_close(g, &lo);
}

/* O rounded up to a multiple of VW (channels-last), else O. */
static LLVMValueRef opad_of(G *g, LLVMValueRef O, bool cl) {
  if (!cl) return O;
  return mul(g, cdiv(g, O, k64(g, g->vw)), k64(g, g->vw));
}

LLVMValueRef cg_conv_dw_pool_bytes(const GemmEmit *e, const GemmTensor *w, const GemmTensor *out,
                                   bool channels_last, LLVMValueRef *threads) {
  Cv d;
  cv_setup(&d, e, w->dtype, out->dtype);
  G *g = &d.g;
  LLVMValueRef kk = mul(g, w->shape[2], w->shape[3]);
  LLVMValueRef n = mul(g, add(g, kk, k64(g, 1)), opad_of(g, w->shape[0], channels_last));
  *threads = k64(g, 1);
  return add(g, k64(g, 64), mul(g, n, k64(g, dtype_size(g->cd))));
}

LLVMValueRef cg_emit_conv_depthwise(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                    const GemmTensor *bias, const GemmTensor *out,
                                    LLVMValueRef attr[7], LLVMValueRef mult, bool channels_last) {
  Cv d;
  cv_setup(&d, e, x->dtype, out->dtype);
  G *g = &d.g;
  LLVMValueRef *k = d.k;
  d.cl = channels_last;
  d.px = 4;
  cv_operands(&d, e, x, w, out, attr);
  k[V_C] = k64(g, 1);
  k[V_M] = mult ? mult : sdiv(g, w->shape[0], attr[6]);
  k[V_OPAD] = opad_of(g, w->shape[0], d.cl);
  d.contig =
      d.cl ? cv_is_one(k[V_M]) && cv_is_one(k[V_XSC]) : cv_is_one(k[V_SW]) && cv_is_one(k[V_XSW]);
  pack(&d, w, bias);
  GLoop l;
  LLVMValueRef t = cv_body_open(&d, "tdsl.conv.dw", &l);
  if (d.cl)
    cl_row(&d, t);
  else
    nchw_plane(&d, t);
  LLVMValueRef body = cv_body_close(&d, &l);
  return cv_launch(&d, e, body, !d.cl);
}
