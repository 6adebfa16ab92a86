/* conv_direct.c — direct convolution for the CPU backend (conv.h): conv2d
 * with one group and a channels-last output (channel stride 1), any
 * kernel size, stride, padding and dilation, any input strides, without
 * the implicit GEMM's im2col packing.
 *
 * The weights are packed once per call into the pool, blocked over
 * output channels: [O / NB][KH][KW][C][NB] in the compute type, NB = NOB
 * vectors of VW lanes (zero lanes past O), then the bias (or zeros); the
 * blocks by the threads where the weights are large (pack), dense rows of
 * weights read a vector at a time and transposed in registers.  A
 * work item is an output row (image, oy); for each block of NB output
 * channels, PX output pixels at a time keep PX x NOB accumulator vectors
 * in registers: for each tap (ky, kx) and input channel c, NOB weight
 * vectors are loaded and each pixel's input value x[c] is broadcast into
 * NOB FMAs (a micro-kernel whose A operand is read in place: pixel p's
 * row of K = (ky, kx, c) is the input itself, contiguous in c for a
 * channels-last input).  The columns whose taps all fall inside the
 * input run in blocks of PX without checks, the rest of them in one block
 * each of PX / 2, PX / 4 and 2 columns where it fits, then one at a time;
 * the border column next to the interior on each side runs in an edge
 * block with PX / 2 interior columns (each tap with the border pixel
 * where its column is inside, else without it; not on the K-pair path),
 * the other border columns one at a time, skipping the taps outside, by
 * 8 / NOB channel blocks at once (the K-pair path: then half as many
 * where they fit; one pixel by NOB vectors alone would be NOB chains of
 * dependent FMAs); rows of taps outside are skipped.
 * The last block of channels (O not a multiple of NB) runs the same
 * code, its stores masked where it runs past O (cv_store_block: a branch
 * at run time, not a copy of every block).  Rows of at most IMG_OW
 * columns (small images: ResNet's 7- and 14-wide layers) run in the
 * image form instead (img_item): a work item
 * is an image by IMG_GB channel blocks, its pixels flattened by
 * rectangles that share the taps outside the input, in blocks that span
 * rows, the taps outside read from a zero row (they add 0 * w, as the
 * implicit GEMM's padded im2col columns do: a non-finite weight makes
 * such an output NaN where the row form skips the tap).
 * An NCHW output (column stride 1; stride 1 along columns and an input
 * column stride of 1) transposes the roles: vectors over output columns,
 * NOB = 2 of them by PX = 6 output channels in registers (3 by 8 with
 * 512-bit vectors), the weights packed [O / PX][KH][KW][C][PX] and
 * broadcast, each input vector loaded once per (tap, c); the border
 * vectors masked against the input's columns, NOB of them at a time
 * where the last has a column of the row (else one).  With 512-bit
 * vectors, where the output rows are as wide as the input's row stride
 * (a 3x3 conv with padding 1 over dense rows), the planes run flattened
 * instead (df_item: vectors of pixels spanning rows, no lanes left
 * empty at a row's end).  Accumulation in the compute type (f32 for f32/f16/bf16, f64,
 * wrapping i32 for integer outputs of at most 32 bits, else i64), the
 * bias first, products summed in (ky, kx, c) order,
 * one rounding to the output dtype; the GEMM's epilogue hook runs on
 * each finished row (the image form: on its item's pixels by channels;
 * conv.h).  Low-precision channels-last inputs
 * (8/16-bit integers, bf16) take conv_lowp.c's K-pair blocks instead.
 * The parallel body is finished vector code and goes through the light
 * pipeline (cpu_mark_light; not the NCHW rows of narrower vectors), so
 * does the packing body where the weights are of the compute type.
 * Needs: conv_impl.h.  Used by: gemm_nest.c. */
#include <string.h>

#include "conv_impl.h"

/* Vectors in the register block of a border pixel (channels-last): as
 * many channel blocks of NOB vectors as fit (CvBlock's 8). */
enum { WIDE_VECS = 8 };

/* A pixel's input pointer in a row block, frozen: without it loop
 * strength reduction rewrote the NP pointers, which differ by multiples
 * of the runtime pixel stride, as a chain of adds from one of them whose
 * stride it kept on the stack (spilled by the outer loops' values): 9
 * reloads per 2 channels in the 6 x 2 block, whose loop is otherwise 24
 * FMAs, 12 broadcasts and 4 weight loads (up to 1.7x slower, level in
 * some runs: bench/README.md, "Two threads, full batches").  A frozen
 * pointer is opaque to it, as the image form's selected ones are. */
static LLVMValueRef pixel_ptr(Cv *d, LLVMValueRef off) {
  G *g = &d->g;
  return LLVMBuildFreeze(g->b, gep(g, gemm_storage(g, d->xd), d->v[V_X], off), "");
}

/* NB: output channels per block (channels-last: NOB vectors; NCHW: PX
 * broadcast weights). */
static int nb_of(const Cv *d) { return d->cl ? d->nob * d->g.vw : d->px; }

/* Whether a channels-last block may run past O (cv_store_block's tail):
 * unless O is known to be a multiple of NB. */
static bool maybe_tail(const Cv *d) {
  LLVMValueRef O = d->v[V_O];
  return !LLVMIsAConstantInt(O) || LLVMConstIntGetSExtValue(O) % nb_of(d) != 0;
}

/* The channel loop of a row block (dr_block): for each input channel c,
 * NOB weight vectors by each pixel's broadcast x[c], pixel `skip` (-1:
 * none) left out. */
static void dr_chan(Cv *d, const CvBlock *bk, LLVMValueRef *xp, int skip) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  int nob = cv_nvec(d), vw = g->vw, nb = nb_of(d);
  GLoop lc;
  LLVMValueRef c = gemm_loop_open(g, &lc, k64(g, 0), v[V_C], k64(g, 1));
  LLVMValueRef wc = add(g, bk->wt, mul(g, c, k64(g, nb))), wv[8], xc = mul(g, c, v[V_XSC]);
  /* channel block j / NOB of a wide block: its weights KH * KW * C * NB further */
  LLVMValueRef bstride = mul(g, mul(g, mul(g, v[V_KH], v[V_KW]), v[V_C]), k64(g, nb));
  for (int j = 0; j < nob; j++) {
    LLVMValueRef wj = j < d->nob ? wc : add(g, wc, mul(g, k64(g, j / d->nob), bstride));
    wv[j] = cv_wvec(d, add(g, wj, k64(g, (j % d->nob) * vw)));
  }
  for (int p = 0; p < bk->np; p++) {
    if (p == skip) continue;
    LLVMValueRef xs = cv_splat(g, gemm_load_c(g, xp[p], xc, d->xd));
    for (int j = 0; j < nob; j++) {
      LLVMValueRef a = LLVMBuildLoad2(g->b, g->vt, bk->acc[p][j], "");
      LLVMBuildStore(g->b, gemm_fma(g, xs, wv[j], a), bk->acc[p][j]);
    }
  }
  gemm_loop_close(g, &lc);
}

/* np pixels from column ox (Cv.dir: ox + p * dir), output channels oc
 * .. oc + NB (tail: maybe past O, cv_store_block), of the row at input
 * offset xb, first tap row iy0, output offset ob (cv_block_open): for
 * each tap and input channel c, NOB weight vectors by each pixel's
 * broadcast x[c].
 * edge (not with checked): pixel 0 is a border column, the others
 * interior: each tap runs the channel loop with it where its column is
 * inside, else without it (it skips the taps the one-pixel border block
 * skips: the same sums). */
static void dr_block(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef ox,
                     LLVMValueRef oc, int np, bool checked, bool tail, bool edge) {
  G *g = &d->g;
  if (g->pairs) { /* low precision, two channels at a time (conv_lowp.c) */
    cv_lowp_block(d, xb, iy0, ob, ox, oc, np, checked, tail, nb_of(d));
    return;
  }
  LLVMValueRef *v = d->v;
  CvBlock bk;
  cv_block_open(d, &bk, xb, iy0, ox, oc, np, checked, tail, nb_of(d), v[V_C]);
  LLVMValueRef xp[16];
  for (int p = 0; p < np; p++) xp[p] = pixel_ptr(d, bk.xo[p]);
  if (!edge) {
    dr_chan(d, &bk, xp, -1);
  } else {
    LLVMValueRef ix = add(g, sub(g, mul(g, ox, v[V_SW]), v[V_PW]), mul(g, bk.t.kx, v[V_DW]));
    LLVMBasicBlockRef in = blk(g, "dr_edge_in"), out = blk(g, "dr_edge_out"),
                      join = blk(g, "dr_edge_join");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntULT, ix, v[V_W], ""), in, out);
    LLVMPositionBuilderAtEnd(g->b, in);
    dr_chan(d, &bk, xp, -1);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, out);
    dr_chan(d, &bk, xp, 0);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
  }
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
  dr_block(d, xb, iy0, ob, ox, oc, 1, true, tail, false);
  gemm_loop_close(g, &l);
  ox = gemm_loop_open(g, &l, hi, d->v[V_OW], k64(g, 1));
  dr_block(d, xb, iy0, ob, ox, oc, 1, true, tail, false);
  gemm_loop_close(g, &l);
}

/* A row's columns: the interior [lo, hi) in blocks; the edge blocks
 * (where el, er: i1, else NULL) of the border column bl (left of the
 * interior) or br - 1 (right of it) and PX / 2 interior columns next to
 * it; the border columns [0, bl) and [br, OW) one at a time. */
typedef struct DrCols {
  LLVMValueRef lo, hi, bl, br, el, er;
} DrCols;

/* The row's columns with edge blocks where they fit (f32-like inputs,
 * not the K pairs): the border column left of the interior [lo, hi) and
 * the one right of it, each with PX / 2 interior columns, where the
 * interior holds PX of them (its blocks of PX then leave the rest they
 * left).  A border pixel alone is NOB chains of dependent FMAs (2 with
 * 512-bit vectors and O = 64: the two border columns of a 56-wide row
 * took a tenth of its time); in the edge block it shares its taps with
 * PX / 2 more pixels. */
static DrCols dr_edges(Cv *d, LLVMValueRef lo, LLVMValueRef hi) {
  G *g = &d->g;
  DrCols c = {lo, hi, lo, hi, NULL, NULL};
  if (g->pairs) return c;
  LLVMValueRef e = k64(g, d->px / 2), one = k64(g, 1);
  c.el = LLVMBuildAnd(g->b, lt(g, k64(g, 0), lo),
                      LLVMBuildICmp(g->b, LLVMIntSLE, add(g, lo, e), hi, ""), "");
  c.lo = LLVMBuildSelect(g->b, c.el, add(g, lo, e), lo, "");
  c.bl = LLVMBuildSelect(g->b, c.el, sub(g, lo, one), lo, "");
  c.er = LLVMBuildAnd(g->b, lt(g, hi, d->v[V_OW]),
                      LLVMBuildICmp(g->b, LLVMIntSLE, c.lo, sub(g, hi, e), ""), "");
  c.hi = LLVMBuildSelect(g->b, c.er, sub(g, hi, e), hi, "");
  c.br = LLVMBuildSelect(g->b, c.er, add(g, hi, one), hi, "");
  return c;
}

/* The edge blocks of cs for the channel block at oc: one copy of the
 * code for both sides, run by a loop over them: the left one from
 * column bl rightwards, the right one from br - 1 leftwards (Cv.dir), the
 * border column pixel 0 in each. */
static void dr_edge(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef oc,
                    const DrCols *cs, bool tail) {
  G *g = &d->g;
  GLoop l;
  LLVMValueRef s = gemm_loop_open(g, &l, k64(g, 0), k64(g, 2), k64(g, 1));
  LLVMValueRef left = LLVMBuildICmp(g->b, LLVMIntEQ, s, k64(g, 0), "");
  LLVMBasicBlockRef run = blk(g, "dr_edge"), next = blk(g, "dr_enext");
  LLVMBuildCondBr(g->b, LLVMBuildSelect(g->b, left, cs->el, cs->er, ""), run, next);
  LLVMPositionBuilderAtEnd(g->b, run);
  LLVMValueRef ox = LLVMBuildSelect(g->b, left, cs->bl, sub(g, cs->br, k64(g, 1)), "");
  d->dir = LLVMBuildSelect(g->b, left, k64(g, 1), k64(g, -1), "");
  dr_block(d, xb, iy0, ob, ox, oc, d->px / 2 + 1, false, tail, true);
  d->dir = NULL;
  LLVMBuildBr(g->b, next);
  LLVMPositionBuilderAtEnd(g->b, next);
  gemm_loop_close(g, &l);
}

/* Every column of the row for the channel block at oc: the edge blocks,
 * the interior (borders: the other border columns too). */
static void dr_cols(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef oc,
                    const DrCols *cs, bool tail, bool borders) {
  G *g = &d->g;
  GLoop l;
  LLVMValueRef ox, lo = cs->lo, hi = cs->hi;
  if (borders) dr_borders(d, xb, iy0, ob, oc, cs->bl, cs->br, tail);
  if (cs->el) dr_edge(d, xb, iy0, ob, oc, cs, tail);
  LLVMValueRef nb = sdiv(g, sub(g, hi, lo), k64(g, d->px)),
               mid = add(g, lo, mul(g, nb, k64(g, d->px)));
  ox = gemm_loop_open(g, &l, lo, mid, k64(g, d->px));
  dr_block(d, xb, iy0, ob, ox, oc, d->px, false, tail, false);
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
    dr_block(d, xb, iy0, ob, at, oc, np, false, tail, false);
    LLVMBuildBr(g->b, next);
    LLVMPositionBuilderAtEnd(g->b, next);
    at = LLVMBuildSelect(g->b, fits, end, at, "");
  }
  ox = gemm_loop_open(g, &l, at, hi, k64(g, 1));
  dr_block(d, xb, iy0, ob, ox, oc, 1, false, tail, false);
  gemm_loop_close(g, &l);
}

/* Output row t = image * OH + oy, every channel block (the last one's
 * stores masked where it runs past O: the same code, cv_store_block). */
static void dr_row(Cv *d, LLVMValueRef t) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  LLVMValueRef n = sdiv(g, t, v[V_OH]), oy = srem(g, t, v[V_OH]);
  LLVMValueRef xb = add(g, v[V_XOFF], mul(g, n, v[V_XSN]));
  LLVMValueRef ob = add(g, add(g, v[V_OOFF], mul(g, n, v[V_OSN])), mul(g, oy, v[V_OSH]));
  LLVMValueRef iy0 = sub(g, mul(g, oy, v[V_SH]), v[V_PH]), lo = k64(g, 0), hi = v[V_OW];
  /* one column of taps and no padding along columns (a 1x1 conv): every
   * column is inside, no border columns to emit */
  bool inside = cv_is_one(v[V_KW]) && LLVMIsAConstantInt(v[V_PW]) &&
                LLVMConstIntGetSExtValue(v[V_PW]) == 0;
  if (!inside) cv_interior(d, &lo, &hi);
  /* the channel blocks with edge blocks */
  DrCols plain = {lo, hi, lo, hi, NULL, NULL}, cols = inside ? plain : dr_edges(d, lo, hi);
  LLVMValueRef O = v[V_O], nbk = k64(g, nb_of(d)), full = sub(g, O, srem(g, O, nbk));
  bool tail = maybe_tail(d);
  GLoop l;
  LLVMValueRef oc = gemm_loop_open(g, &l, k64(g, 0), v[V_OPAD], nbk);
  dr_cols(d, xb, iy0, ob, oc, &cols, tail, false);
  gemm_loop_close(g, &l);
  if (!inside) {
    /* the other border pixels of the full channel blocks, 8 / NOB blocks
     * at a time (K pairs: then half as many where they fit), then one
     * (the last one, maybe past O, too):
     * one pixel by NOB vectors alone leaves NOB chains of dependent FMAs
     * (a fraction of the FMA throughput), one pixel by 8 vectors keeps
     * the FMA units busy.  With 512-bit vectors O = 64 is two blocks of
     * two: the pairs by two, 4 chains instead of 2 (bf16 3x3
     * [8,64,56,56]: 6% less time on one core; the f32 kernel measured the
     * same with it, and is left without its code: its border columns
     * are in the edge blocks) */
    int wide = WIDE_VECS / d->nob;
    LLVMValueRef at = k64(g, 0);
    for (int nw = wide; nw > (g->pairs ? 1 : wide / 2); nw /= 2) {
      LLVMValueRef wb = mul(g, nbk, k64(g, nw)),
                   wend = add(g, at, mul(g, sdiv(g, sub(g, full, at), wb), wb));
      d->nblk = nw;
      oc = gemm_loop_open(g, &l, at, wend, wb);
      dr_borders(d, xb, iy0, ob, oc, cols.bl, cols.br, false);
      gemm_loop_close(g, &l);
      at = wend;
    }
    d->nblk = 1;
    oc = gemm_loop_open(g, &l, at, v[V_OPAD], nbk);
    dr_borders(d, xb, iy0, ob, oc, cols.bl, cols.br, tail);
    gemm_loop_close(g, &l);
  }
  if (d->epi) {
    LLVMValueRef q0 = mul(g, oy, v[V_OW]);
    cv_call_epi(d, mul(g, n, v[V_GROUPS]), q0, add(g, q0, v[V_OW]), k64(g, 0), O);
  }
}

/* ---- small images: blocks of pixels over the whole image ------------------- */

/* A row of OW <= IMG_OW columns (ResNet's 7- and 14-wide layers) has few
 * interior columns for the row blocks above and two border pixels that
 * run one at a time; such images run as one work item per image and
 * IMG_GB channel blocks instead (the weights of a channel block then
 * serve the whole image): the image's pixels by rectangles (img_pixels),
 * each flattened (q = row * width + column) in even blocks of at most PX
 * pixels that may span rows, each pixel's input address computed per tap
 * and pointed at a zero row (in the pool) when the tap falls outside the
 * input, a tap skipped when it falls outside for every pixel of the
 * block.  An input whose channel stride is not the constant 1 (an NCHW
 * input) steps each pixel's channels by its own stride, 0 in the zero
 * row (the row holds C elements). */
enum { IMG_OW = 16, IMG_GB = 4 };

/* Whether the row (t = image * OH + oy) or the image form runs: an i1
 * from v[] (channels-last output, no pairs). */
static LLVMValueRef img_use(Cv *d, LLVMValueRef *v) {
  G *g = &d->g;
  return LLVMBuildICmp(g->b, LLVMIntSLE, v[V_OW], k64(g, IMG_OW), "");
}

/* Work items of the image form per image: groups of IMG_GB channel blocks. */
static LLVMValueRef img_groups(Cv *d, LLVMValueRef *v) {
  G *g = &d->g;
  return cdiv(g, v[V_OPAD], k64(g, (long long)nb_of(d) * IMG_GB));
}

/* The zero row after the packed weights and bias: C elements of any
 * dtype (8 bytes each reserved). */
static LLVMValueRef img_zero_row(Cv *d, LLVMValueRef *v) {
  G *g = &d->g;
  LLVMValueRef n = mul(g, add(g, mul(g, mul(g, v[V_KH], v[V_KW]), v[V_C]), k64(g, 1)), v[V_OPAD]);
  return gep(g, LLVMInt8TypeInContext(g->ctx), v[V_WP], mul(g, n, k64(g, dtype_size(g->cd))));
}

/* np pixels from q of the rectangle rect = {y0, x0, width} of image n
 * (input offset xb, output offset obn) by the output channels oc .. oc
 * + NB (tail: maybe past O, cv_store_block); zr the zero row. */
static void img_block(Cv *d, LLVMValueRef xb, LLVMValueRef obn, LLVMValueRef zr,
                      const LLVMValueRef rect[3], LLVMValueRef q, LLVMValueRef oc, int np,
                      bool tail) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  int nob = d->nob, vw = g->vw, nb = nb_of(d);
  LLVMValueRef acc[16][8], iy0[16], ix0[16], ob[16];
  LLVMValueRef kk = mul(g, v[V_KH], v[V_KW]);
  LLVMValueRef boff = add(g, mul(g, mul(g, kk, v[V_C]), v[V_OPAD]), oc);
  for (int j = 0; j < nob; j++) {
    LLVMValueRef bj = cv_wvec(d, add(g, boff, k64(g, j * vw)));
    for (int p = 0; p < np; p++) {
      acc[p][j] = gemm_entry_alloca(g, g->vt, 1);
      LLVMBuildStore(g->b, bj, acc[p][j]);
    }
  }
  for (int p = 0; p < np; p++) {
    LLVMValueRef qp = add(g, q, k64(g, p));
    LLVMValueRef oy = add(g, rect[0], sdiv(g, qp, rect[2])),
                 ox = add(g, rect[1], srem(g, qp, rect[2]));
    iy0[p] = sub(g, mul(g, oy, v[V_SH]), v[V_PH]);
    ix0[p] = sub(g, mul(g, ox, v[V_SW]), v[V_PW]);
    ob[p] = add(g, add(g, obn, add(g, mul(g, oy, v[V_OSH]), mul(g, ox, v[V_OSW]))), oc);
  }
  LLVMValueRef wblk = mul(g, mul(g, oc, kk), v[V_C]), ckn = mul(g, v[V_C], k64(g, nb));
  GLoop ly, lx;
  LLVMValueRef ky = gemm_loop_open(g, &ly, k64(g, 0), v[V_KH], k64(g, 1));
  LLVMValueRef kx = gemm_loop_open(g, &lx, k64(g, 0), v[V_KW], k64(g, 1));
  LLVMValueRef wt = add(g, wblk, mul(g, add(g, mul(g, ky, v[V_KW]), kx), ckn));
  LLVMValueRef dy = mul(g, ky, v[V_DH]), dx = mul(g, kx, v[V_DW]), xp[16], xs[16], any = NULL;
  bool c1 = cv_is_one(v[V_XSC]);
  for (int p = 0; p < np; p++) { /* the tap's input element, or the zero row */
    LLVMValueRef iy = add(g, iy0[p], dy), ix = add(g, ix0[p], dx);
    LLVMValueRef in = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntULT, iy, v[V_H], ""),
                                   LLVMBuildICmp(g->b, LLVMIntULT, ix, v[V_W], ""), "");
    LLVMValueRef off = add(g, xb, add(g, mul(g, iy, v[V_XSH]), mul(g, ix, v[V_XSW])));
    LLVMValueRef at = gep(g, gemm_storage(g, d->xd), v[V_X], off);
    xp[p] = LLVMBuildSelect(g->b, in, at, zr, "");
    xs[p] = c1 ? NULL : LLVMBuildSelect(g->b, in, v[V_XSC], k64(g, 0), "");
    any = any ? LLVMBuildOr(g->b, any, in, "") : in;
  }
  LLVMBasicBlockRef run = blk(g, "img_tap"), skip = blk(g, "img_skip");
  LLVMBuildCondBr(g->b, any, run, skip);
  LLVMPositionBuilderAtEnd(g->b, run);
  GLoop lc;
  LLVMValueRef c = gemm_loop_open(g, &lc, k64(g, 0), v[V_C], k64(g, 1));
  LLVMValueRef wc = add(g, wt, mul(g, c, k64(g, nb))), wv[8];
  for (int j = 0; j < nob; j++) wv[j] = cv_wvec(d, add(g, wc, k64(g, j * vw)));
  for (int p = 0; p < np; p++) {
    LLVMValueRef xv = cv_splat(g, gemm_load_c(g, xp[p], c1 ? c : mul(g, c, xs[p]), d->xd));
    for (int j = 0; j < nob; j++) {
      LLVMValueRef a = LLVMBuildLoad2(g->b, g->vt, acc[p][j], "");
      LLVMBuildStore(g->b, gemm_fma(g, xv, wv[j], a), acc[p][j]);
    }
  }
  gemm_loop_close(g, &lc);
  LLVMBuildBr(g->b, skip);
  LLVMPositionBuilderAtEnd(g->b, skip);
  gemm_loop_close(g, &lx);
  gemm_loop_close(g, &ly);
  cv_store_block(d, acc, ob, np, nob, oc, tail);
}

/* The pixels of the rectangle rect = {y0, x0, width} of hgt rows of
 * image n for the channel block at oc, flattened (q = row * width +
 * column) in ceil(P / PX) blocks as even as can be: blocks of s + 1 and
 * of s pixels, P = hgt * width. */
static void img_rect(Cv *d, LLVMValueRef xb, LLVMValueRef obn, LLVMValueRef zr, LLVMValueRef oc,
                     bool tail, const LLVMValueRef rect[3], LLVMValueRef hgt) {
  G *g = &d->g;
  int px = d->px;
  LLVMValueRef P = mul(g, hgt, rect[2]);
  LLVMValueRef nblk = cdiv(g, P, k64(g, px));
  LLVMValueRef nz = LLVMBuildSelect(g->b, lt(g, k64(g, 0), nblk), nblk, k64(g, 1), "");
  LLVMValueRef sz = sdiv(g, P, nz), nbig = srem(g, P, nz), at = k64(g, 0);
  for (int np = px; np >= 1; np--) {
    /* blocks of np pixels: the nbig of s + 1, or the rest of s */
    LLVMValueRef big = LLVMBuildICmp(g->b, LLVMIntEQ, add(g, sz, k64(g, 1)), k64(g, np), "");
    LLVMValueRef small = LLVMBuildICmp(g->b, LLVMIntEQ, sz, k64(g, np), "");
    LLVMValueRef cnt = LLVMBuildSelect(
        g->b, big, nbig, LLVMBuildSelect(g->b, small, sub(g, nblk, nbig), k64(g, 0), ""), "");
    LLVMValueRef end = add(g, at, mul(g, cnt, k64(g, np)));
    GLoop l;
    LLVMValueRef q = gemm_loop_open(g, &l, at, end, k64(g, np));
    img_block(d, xb, obn, zr, rect, q, oc, np, tail);
    gemm_loop_close(g, &l);
    at = end;
  }
}

/* Every pixel of image n for the channel block at oc, by rectangles
 * whose pixels share the taps that fall outside the input: the rows
 * above and below the interior (some rows of taps outside), the columns
 * left and right of it (some columns of taps outside), the interior
 * (none), so that a block's taps are outside for all its pixels or for
 * few (a tap outside for every pixel is skipped). */
static void img_pixels(Cv *d, LLVMValueRef xb, LLVMValueRef obn, LLVMValueRef zr, LLVMValueRef oc,
                       bool tail, const LLVMValueRef in[4]) {
  G *g = &d->g;
  LLVMValueRef *v = d->v, z = k64(g, 0);
  LLVMValueRef ylo = in[0], yhi = in[1], lo = in[2], hi = in[3], mid = sub(g, yhi, ylo);
  const LLVMValueRef r[5][4] = {{z, z, v[V_OW], ylo},
                                {yhi, z, v[V_OW], sub(g, v[V_OH], yhi)},
                                {ylo, z, lo, mid},
                                {ylo, hi, sub(g, v[V_OW], hi), mid},
                                {ylo, lo, sub(g, hi, lo), mid}};
  /* one copy of the blocks for the five rectangles: their {y0, x0,
   * width, height} in a table walked by a loop (the blocks' code is
   * the same for each; unrolled it was five times the function) */
  LLVMValueRef tab = gemm_entry_alloca(g, g->i64, 20);
  for (int i = 0; i < 5; i++)
    for (int f = 0; f < 4; f++) LLVMBuildStore(g->b, r[i][f], gep(g, g->i64, tab, k64(g, i * 4 + f)));
  GLoop l;
  LLVMValueRef i = gemm_loop_open(g, &l, z, k64(g, 5), k64(g, 1)), rect[3];
  for (int f = 0; f < 3; f++)
    rect[f] = LLVMBuildLoad2(g->b, g->i64, gep(g, g->i64, tab, add(g, mul(g, i, k64(g, 4)), k64(g, f))), "");
  LLVMValueRef hgt =
      LLVMBuildLoad2(g->b, g->i64, gep(g, g->i64, tab, add(g, mul(g, i, k64(g, 4)), k64(g, 3))), "");
  img_rect(d, xb, obn, zr, oc, tail, rect, hgt);
  gemm_loop_close(g, &l);
}

/* Work item t = image * groups + group: the group's IMG_GB channel
 * blocks (the last one's stores masked where it runs past O) over the
 * whole image, then the epilogue hook on its pixels by its channels. */
static void img_item(Cv *d, LLVMValueRef t) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  LLVMValueRef ng = img_groups(d, v), n = sdiv(g, t, ng), gi = srem(g, t, ng);
  LLVMValueRef xb = add(g, v[V_XOFF], mul(g, n, v[V_XSN]));
  LLVMValueRef obn = add(g, v[V_OOFF], mul(g, n, v[V_OSN])), zr = img_zero_row(d, v);
  LLVMValueRef O = v[V_O], nbk = k64(g, nb_of(d));
  LLVMValueRef oc0 = mul(g, gi, k64(g, (long long)nb_of(d) * IMG_GB));
  LLVMValueRef oc1 = imin(g, add(g, oc0, k64(g, (long long)nb_of(d) * IMG_GB)), v[V_OPAD]);
  LLVMValueRef in[4];
  cv_interior_rows(d, &in[0], &in[1]);
  cv_interior(d, &in[2], &in[3]);
  GLoop l;
  LLVMValueRef oc = gemm_loop_open(g, &l, oc0, oc1, nbk);
  img_pixels(d, xb, obn, zr, oc, maybe_tail(d), in);
  gemm_loop_close(g, &l);
  if (d->epi)
    cv_call_epi(d, mul(g, n, v[V_GROUPS]), k64(g, 0), mul(g, v[V_OH], v[V_OW]), oc0,
                imin(g, oc1, O));
}

/* ---- NCHW output, stride 1 along columns ---------------------------------- */

/* The channel loop of an NCHW block (dn_block, df_block): for each
 * input channel c, NVEC vectors of the input at x0 + c * XSC (lanes
 * masked by mask, NULL for none) times PO weights at wt + c * PO, added
 * into the accumulators acc[p][j]. */
static void nchw_channels(Cv *d, LLVMValueRef x0, LLVMValueRef wt, int nvec, int po,
                          LLVMValueRef *mask, LLVMValueRef acc[][4]) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  int vw = g->vw;
  GLoop lc;
  LLVMValueRef c = gemm_loop_open(g, &lc, k64(g, 0), v[V_C], k64(g, 1));
  LLVMValueRef xc = add(g, x0, mul(g, c, v[V_XSC])), wc = add(g, wt, mul(g, c, k64(g, po))), xv[4];
  for (int j = 0; j < nvec; j++)
    xv[j] = cv_vload(g, d->xd, v[V_X], add(g, xc, k64(g, j * vw)), NULL, mask[j]);
  for (int p = 0; p < po; p++) {
    LLVMValueRef ws =
        cv_splat(g, LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, v[V_WP], add(g, wc, k64(g, p))), ""));
    for (int j = 0; j < nvec; j++) {
      LLVMValueRef a = LLVMBuildLoad2(g->b, g->vt, acc[p][j], "");
      LLVMBuildStore(g->b, gemm_fma(g, xv[j], ws, a), acc[p][j]);
    }
  }
  gemm_loop_close(g, &lc);
}

/* Stores an NCHW block's accumulators: channel oc + p's vectors at
 * base + (oc + p) * OSC + at, lanes masked by valid; channels past O
 * (the last block) are not stored. */
static void nchw_store(Cv *d, LLVMValueRef oc, LLVMValueRef base, LLVMValueRef at, int nvec,
                       int po, LLVMValueRef *valid, LLVMValueRef acc[][4]) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  int vw = g->vw;
  for (int p = 0; p < po; p++) {
    LLVMValueRef o = add(g, oc, k64(g, p));
    LLVMBasicBlockRef skip = cv_open_inside(g, o, v[V_O]);
    LLVMValueRef row = add(g, add(g, base, mul(g, o, v[V_OSC])), at);
    for (int j = 0; j < nvec; j++)
      cv_vstore(g, g->od, LLVMBuildLoad2(g->b, g->vt, acc[p][j], ""), v[V_OUT],
                add(g, row, k64(g, j * vw)), valid[j]);
    cv_close_inside(g, skip);
  }
}

/* nvec vectors of output columns from ox (checked: their lanes masked
 * against OW and the input's columns) for the PX output channels
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
  LLVMValueRef cols[4], valid[4] = {NULL, NULL, NULL, NULL};
  for (int j = 0; j < nvec; j++) {
    cols[j] = cv_vadd(g, cv_splat(g, add(g, ox, k64(g, j * vw))), d->lanes);
    if (checked) valid[j] = LLVMBuildICmp(g->b, LLVMIntSLT, cols[j], cv_splat(g, v[V_OW]), "");
  }
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
  LLVMValueRef koff = sub(g, mul(g, tp.kx, v[V_DW]), v[V_PW]), mask[4] = {NULL, NULL, NULL, NULL};
  for (int j = 0; j < nvec && checked; j++) { /* input column ox + lane + koff inside [0, W) */
    LLVMValueRef ix = cv_vadd(g, cols[j], cv_splat(g, koff));
    mask[j] = LLVMBuildAnd(g->b, valid[j],
                           LLVMBuildICmp(g->b, LLVMIntULT, ix, cv_splat(g, v[V_W]), ""), "");
  }
  LLVMValueRef x0 = add(g, tp.xr, add(g, ox, koff)); /* column stride 1 */
  nchw_channels(d, x0, wt, nvec, po, mask, acc);
  cv_taps_close(d, &tp);
  nchw_store(d, oc, orow, ox, nvec, po, valid, acc);
}

/* Output row t = image * OH + oy, every channel block: blocks of NOB
 * vectors where every tap is inside, else NOB checked vectors where the
 * last of them has a column (one vector alone leaves PX accumulators for
 * PX + 1 loads), else one checked vector. */
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
  if (d->nob > 1) { /* NOB checked vectors where their last one has a column */
    LLVMBasicBlockRef wide = blk(g, "dn_chkw"), one = blk(g, "dn_chk1");
    LLVMValueRef has = lt(g, add(g, ox, k64(g, bw - vw)), v[V_OW]);
    LLVMBuildCondBr(g->b, has, wide, one);
    LLVMPositionBuilderAtEnd(g->b, wide);
    dn_block(d, xb, iy0, orow, ox, oc, d->nob, true);
    LLVMBuildStore(g->b, add(g, ox, k64(g, bw)), oxa);
    LLVMBuildBr(g->b, head);
    LLVMPositionBuilderAtEnd(g->b, one);
  }
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

/* ---- NCHW output, flattened planes ----------------------------------------- */

/* Where an output row is as long as the input's row stride (OW == XSH:
 * a 3x3 conv with padding 1 over dense rows) and the rows advance by one
 * input row (stride 1 along rows), output pixel q = oy * OW + ox of a
 * dense output plane (OSH == OW) reads its input at tap (ky, kx) at q +
 * (ky * DH - PH) * XSH + kx * DW - PW of its image's plane: the plane is
 * one run of pixels, and vectors of VW pixels span rows (each row of OW
 * >= VW columns in at most two of them), every lane used where the row
 * form's vectors of columns leave a row's last vector part empty (56
 * columns in 4 vectors of 16: 88%).  The lanes whose tap falls outside
 * the input (its column or row) are masked; a tap outside for every lane
 * of the block is skipped.  A work item is FLAT_BLOCKS blocks of NOB
 * vectors of one image's plane, all channel blocks, then the epilogue
 * hook on its pixels. */
enum { FLAT_BLOCKS = 2, FLAT_TAPS = 9 };

/* Whether the flattened form runs (an i1 from v[]): only with 512-bit
 * vectors (masks in mask registers; with AVX2's vector masks an
 * x86-64-v3 build ran it slower than the rows: passes/costs.c), never
 * where the kernel's taps are not known or more than FLAT_TAPS. */
static LLVMValueRef flat_use(Cv *d, LLVMValueRef *v) {
  G *g = &d->g;
  LLVMValueRef ow = v[V_OW];
  if (g->vec_bits < 512 || !LLVMIsAConstantInt(v[V_KH]) || !LLVMIsAConstantInt(v[V_KW]) ||
      LLVMConstIntGetSExtValue(v[V_KH]) * LLVMConstIntGetSExtValue(v[V_KW]) > FLAT_TAPS)
    return LLVMConstInt(g->i1, 0, 0);
  LLVMValueRef r = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, v[V_SH], k64(g, 1), ""),
                                LLVMBuildICmp(g->b, LLVMIntEQ, v[V_XSH], ow, ""), "");
  r = LLVMBuildAnd(g->b, r, LLVMBuildICmp(g->b, LLVMIntEQ, v[V_OSH], ow, ""), "");
  return LLVMBuildAnd(g->b, r, LLVMBuildICmp(g->b, LLVMIntSGE, ow, k64(g, g->vw), ""), "");
}

/* Pixels per work item of the flattened form. */
static int flat_chunk(const Cv *d) { return FLAT_BLOCKS * d->nob * d->g.vw; }

/* Work items of the flattened form per image. */
static LLVMValueRef flat_items(Cv *d, LLVMValueRef *v) {
  G *g = &d->g;
  return cdiv(g, mul(g, v[V_OH], v[V_OW]), k64(g, flat_chunk(d)));
}

/* nvec vectors of pixels from q (lanes at or past qend masked) of the
 * plane of image offset xb (input) and obn (output), for the PX output
 * channels oc .. oc + PX: dn_block's register block on the flattened
 * plane. */
static void df_block(Cv *d, LLVMValueRef xb, LLVMValueRef obn, LLVMValueRef q, LLVMValueRef qend,
                     LLVMValueRef oc, int nvec) {
  G *g = &d->g;
  LLVMValueRef *v = d->v, acc[16][4];
  int po = d->px, vw = g->vw;
  LLVMValueRef kk = mul(g, v[V_KH], v[V_KW]), ckn = mul(g, v[V_C], k64(g, po));
  LLVMValueRef boff = add(g, mul(g, mul(g, kk, v[V_C]), v[V_OPAD]), oc);
  LLVMValueRef rows[4], cols[4], valid[4], sow = cv_splat(g, v[V_OW]);
  for (int j = 0; j < nvec; j++) { /* each lane's row and column: one wrap at most */
    LLVMValueRef qj = add(g, q, k64(g, j * vw));
    LLVMValueRef c = cv_vadd(g, cv_splat(g, srem(g, qj, v[V_OW])), d->lanes);
    LLVMValueRef wrap = LLVMBuildICmp(g->b, LLVMIntSGE, c, sow, "");
    cols[j] = LLVMBuildSelect(g->b, wrap, LLVMBuildSub(g->b, c, sow, ""), c, "");
    rows[j] = cv_vadd(g, cv_splat(g, sdiv(g, qj, v[V_OW])),
                      LLVMBuildZExt(g->b, wrap, LLVMTypeOf(c), ""));
    valid[j] = LLVMBuildICmp(g->b, LLVMIntSLT, cv_vadd(g, cv_splat(g, qj), d->lanes),
                             cv_splat(g, qend), "");
  }
  for (int p = 0; p < po; p++) {
    LLVMValueRef b = cv_splat(
        g, LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, v[V_WP], add(g, boff, k64(g, p))), ""));
    for (int j = 0; j < nvec; j++) {
      acc[p][j] = gemm_entry_alloca(g, g->vt, 1);
      LLVMBuildStore(g->b, b, acc[p][j]);
    }
  }
  LLVMValueRef wblk = mul(g, mul(g, oc, kk), v[V_C]);
  GLoop ly, lx;
  LLVMValueRef ky = gemm_loop_open(g, &ly, k64(g, 0), v[V_KH], k64(g, 1));
  LLVMValueRef kx = gemm_loop_open(g, &lx, k64(g, 0), v[V_KW], k64(g, 1));
  LLVMValueRef dy = sub(g, mul(g, ky, v[V_DH]), v[V_PH]), dx = sub(g, mul(g, kx, v[V_DW]), v[V_PW]);
  LLVMValueRef mask[4], any = NULL;
  for (int j = 0; j < nvec; j++) { /* the tap's input row and column inside */
    LLVMValueRef iy = cv_vadd(g, rows[j], cv_splat(g, dy)), ix = cv_vadd(g, cols[j], cv_splat(g, dx));
    LLVMValueRef in = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntULT, iy, cv_splat(g, v[V_H]), ""),
                                   LLVMBuildICmp(g->b, LLVMIntULT, ix, cv_splat(g, v[V_W]), ""), "");
    mask[j] = LLVMBuildAnd(g->b, valid[j], in, "");
    any = any ? LLVMBuildOr(g->b, any, mask[j], "") : mask[j];
  }
  LLVMTypeRef mt = LLVMIntTypeInContext(g->ctx, (unsigned)vw);
  any = LLVMBuildICmp(g->b, LLVMIntNE, LLVMBuildBitCast(g->b, any, mt, ""), LLVMConstInt(mt, 0, 0), "");
  LLVMBasicBlockRef run = blk(g, "df_tap"), skip = blk(g, "df_skip");
  LLVMBuildCondBr(g->b, any, run, skip);
  LLVMPositionBuilderAtEnd(g->b, run);
  LLVMValueRef wt = add(g, wblk, mul(g, add(g, mul(g, ky, v[V_KW]), kx), ckn));
  LLVMValueRef x0 = add(g, add(g, xb, q), add(g, mul(g, dy, v[V_XSH]), dx));
  nchw_channels(d, x0, wt, nvec, po, mask, acc);
  LLVMBuildBr(g->b, skip);
  LLVMPositionBuilderAtEnd(g->b, skip);
  gemm_loop_close(g, &lx);
  gemm_loop_close(g, &ly);
  nchw_store(d, oc, obn, q, nvec, po, valid, acc);
}

/* Work item t = image * flat_items + chunk: the chunk's pixels [q0, q1)
 * by every channel block, in blocks of NOB vectors, the last one of as
 * many vectors as it has pixels for. */
static void df_item(Cv *d, LLVMValueRef t) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  int vw = g->vw, bw = d->nob * vw;
  LLVMValueRef ni = flat_items(d, v), n = sdiv(g, t, ni), P = mul(g, v[V_OH], v[V_OW]);
  LLVMValueRef q0 = mul(g, srem(g, t, ni), k64(g, flat_chunk(d)));
  LLVMValueRef q1 = imin(g, add(g, q0, k64(g, flat_chunk(d))), P);
  LLVMValueRef xb = add(g, v[V_XOFF], mul(g, n, v[V_XSN]));
  LLVMValueRef obn = add(g, v[V_OOFF], mul(g, n, v[V_OSN]));
  LLVMValueRef qa = gemm_entry_alloca(g, g->i64, 1);
  LLVMBuildStore(g->b, q0, qa);
  LLVMBasicBlockRef head = blk(g, "df_q"), body = blk(g, "df_qb"), end = blk(g, "df_qend");
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, head);
  LLVMValueRef q = LLVMBuildLoad2(g->b, g->i64, qa, "");
  gemm_no_vectorize(g, LLVMBuildCondBr(g->b, lt(g, q, q1), body, end));
  LLVMPositionBuilderAtEnd(g->b, body);
  /* NOB vectors while the pixels last beyond the first NOB - 1, else one
   * block of as many vectors as are left */
  LLVMValueRef left = sub(g, q1, q);
  for (int nv = d->nob; nv >= 1; nv--) {
    LLVMBasicBlockRef run = blk(g, "df_run"), next = nv > 1 ? blk(g, "df_fewer") : NULL;
    if (nv > 1)
      LLVMBuildCondBr(g->b, lt(g, k64(g, (nv - 1) * vw), left), run, next);
    else
      LLVMBuildBr(g->b, run);
    LLVMPositionBuilderAtEnd(g->b, run);
    GLoop lo_;
    LLVMValueRef oc = gemm_loop_open(g, &lo_, k64(g, 0), v[V_OPAD], k64(g, d->px));
    df_block(d, xb, obn, q, q1, oc, nv);
    gemm_loop_close(g, &lo_);
    LLVMBuildStore(g->b, add(g, q, k64(g, bw)), qa);
    LLVMBuildBr(g->b, head);
    if (next) LLVMPositionBuilderAtEnd(g->b, next);
  }
  LLVMPositionBuilderAtEnd(g->b, end);
  if (d->epi) cv_call_epi(d, mul(g, n, v[V_GROUPS]), k64(g, 0), v[V_O], q0, q1);
}

/* ---- the driver in the kernel ---------------------------------------------- */

/* The register block for the target: NOB vectors of output channels
 * (one when O fits one vector) by PX pixels, within 16 vector registers
 * (32 with 512-bit vectors), for the weights w.  An f32 1x1 conv with
 * 512-bit vectors: 4 x 6 (64 channels, each pixel's input broadcast once
 * for all of them: 10 loads per 24 FMAs against 2 x 12's 14; measured on
 * Zen 5, bench/README.md: 1.4x 2 x 12 on a [32,64,56,56] layer) where O
 * is not known to be a multiple other than of 64 (a masked last block
 * of 64 channels wastes up to half its FMAs) and C not known to be above
 * 2048 (64 channels' weights, 256 bytes per input channel, then stay in
 * L2: every block of 6 pixels reads them all).  Not with more taps: a 3x3
 * conv ran the same (within 2%), and one over 512 channels (the
 * small-image form) 8% slower, its block of weights then larger than L2.
 * any_x: for the pool's size, before the input's dtype is known (f32 or
 * not: low-precision inputs keep 2 x 12); 4 x 6's padded O is the
 * larger. */
static void blocking(Cv *d, const GemmTensor *w, bool any_x) {
  G *g = &d->g;
  LLVMValueRef O = w->shape[0];
  /* NCHW: NOB = 2 vectors of pixels by PX = 6 channels; with 512 bits 3
   * by 8 (11 loads per 24 FMAs, and O = 64 in whole blocks: the
   * flattened planes measured 4 x 6 4% and 2 x 12 10% slower, 4 x 7 and
   * 3 x 10 spill) */
  if (!d->cl) {
    d->nob = g->vec_bits >= 512 ? 3 : 2;
    d->px = g->vec_bits >= 512 ? 8 : 6;
    return;
  }
  bool known = LLVMIsAConstantInt(O);
  long long o = known ? LLVMConstIntGetSExtValue(O) : 0;
  bool one = known && o <= g->vw;
  d->nob = one ? 1 : 2;
  d->px = g->vec_bits >= 512 ? 12 : one ? 12 : 6;
  LLVMValueRef C = w->shape[1];
  bool tap1 = cv_is_one(w->shape[2]) && cv_is_one(w->shape[3]) &&
              (!LLVMIsAConstantInt(C) || LLVMConstIntGetSExtValue(C) <= 2048);
  if (tap1 && g->vec_bits >= 512 && g->cd == DT_F32 && (any_x || d->xd == DT_F32) && !one &&
      (!known || o % (4LL * g->vw) == 0))
    d->nob = 4, d->px = 6;
}

/* O rounded up to a multiple of NB. */
static LLVMValueRef opad_of(Cv *d, LLVMValueRef O) {
  G *g = &d->g;
  LLVMValueRef nb = k64(g, nb_of(d));
  return mul(g, cdiv(g, O, nb), nb);
}

/* Whether w's (c, ky, kx) are one dense run per output channel (its
 * strides [.., KH * KW, KW, 1], known when compiling). */
static bool dense_rows(const Cv *d, const GemmTensor *w) {
  const LLVMValueRef *k = d->k;
  if (!LLVMIsAConstantInt(k[V_KH]) || !LLVMIsAConstantInt(k[V_KW])) return false;
  long long kh = LLVMConstIntGetSExtValue(k[V_KH]), kw = LLVMConstIntGetSExtValue(k[V_KW]);
  const long long want[3] = {kh * kw, kw, 1};
  for (int i = 0; i < 3; i++)
    if (!LLVMIsAConstantInt(w->stride[i + 1]) ||
        LLVMConstIntGetSExtValue(w->stride[i + 1]) != want[i])
      return false;
  return true;
}

/* pack_block's full channels-last block from o0 for dense rows of w:
 * for each vector of VW output channels, VW rows of w read VW elements
 * at a time (element f = c * KH * KW + tap of each row), transposed into
 * VW vectors of channels, each stored at its (tap, c); the elements past
 * the last multiple of VW gathered one (tap, c) at a time.  (Gathering a
 * vector of channels from VW rows for every (tap, c), which LLVM
 * scalarizes on AVX2, packed a [512,512,3,3] layer's 9.4 MB at about 3
 * GB/s.) */
static void pack_rows(Cv *d, const GemmTensor *w, LLVMValueRef o0) {
  G *g = &d->g;
  LLVMValueRef *k = d->k, wp = k[V_WP], kk = mul(g, k[V_KH], k[V_KW]), C = k[V_C];
  int vw = g->vw, nbi = nb_of(d);
  LLVMValueRef nb = k64(g, nbi), L = mul(g, C, kk), Lv = mul(g, sdiv(g, L, k64(g, vw)), k64(g, vw));
  LLVMValueRef blk0 = mul(g, mul(g, o0, kk), C);
  unsigned al = (unsigned)(vw * dtype_size(g->cd));
  for (int j = 0; j < d->nob; j++) {
    LLVMValueRef rb[16], x[16], oj = add(g, o0, k64(g, j * vw));
    for (int r = 0; r < vw; r++)
      rb[r] = add(g, w->offset, mul(g, add(g, oj, k64(g, r)), w->stride[0]));
    GLoop ls, lr;
    LLVMValueRef s = gemm_loop_open(g, &ls, k64(g, 0), Lv, k64(g, vw));
    for (int r = 0; r < vw; r++)
      x[r] = cv_vload(g, w->dtype, w->base, add(g, rb[r], s), NULL, NULL);
    gemm_transpose(g, x, g->vw);
    for (int q = 0; q < vw; q++) {
      LLVMValueRef f = add(g, s, k64(g, q)), c = sdiv(g, f, kk), t = srem(g, f, kk);
      LLVMValueRef dst = add(g, add(g, blk0, mul(g, mul(g, t, nb), C)),
                             add(g, mul(g, c, nb), k64(g, j * vw)));
      LLVMSetAlignment(LLVMBuildStore(g->b, x[q], gep(g, g->ct, wp, dst)), al);
    }
    gemm_loop_close(g, &ls);
    LLVMValueRef f = gemm_loop_open(g, &lr, Lv, L, k64(g, 1));
    LLVMValueRef c = sdiv(g, f, kk), t = srem(g, f, kk);
    LLVMValueRef lanes = cv_vadd(g, cv_splat(g, oj), d->lanes);
    LLVMValueRef idx = cv_vadd(g, cv_splat(g, add(g, w->offset, f)),
                               cv_vmul(g, lanes, cv_splat(g, w->stride[0])));
    LLVMValueRef dst = add(g, add(g, blk0, mul(g, mul(g, t, nb), C)),
                           add(g, mul(g, c, nb), k64(g, j * vw)));
    LLVMSetAlignment(LLVMBuildStore(g->b, cv_vload(g, w->dtype, w->base, NULL, idx, NULL),
                                    gep(g, g->ct, wp, dst)), al);
    gemm_loop_close(g, &lr);
  }
}

/* The block of NB output channels from o0 of the weights packed (pack):
 * tail: O < o0 + NB, the channels past O zero (checked, else not). */
static void pack_block(Cv *d, const GemmTensor *w, LLVMValueRef o0, bool tail) {
  G *g = &d->g;
  LLVMValueRef *k = d->k, wp = k[V_WP], kk = mul(g, k[V_KH], k[V_KW]);
  LLVMValueRef nb = k64(g, nb_of(d)), C = k[V_C];
  if (d->cl && !tail && dense_rows(d, w)) {
    pack_rows(d, w, o0);
    return;
  }
  GLoop lt_, lc, lo;
  LLVMValueRef t = gemm_loop_open(g, &lt_, k64(g, 0), kk, k64(g, 1));
  LLVMValueRef tsrc = add(g, add(g, w->offset, mul(g, sdiv(g, t, k[V_KW]), w->stride[2])),
                          mul(g, srem(g, t, k[V_KW]), w->stride[3]));
  LLVMValueRef c = gemm_loop_open(g, &lc, k64(g, 0), C, k64(g, 1));
  LLVMValueRef row = add(g, mul(g, add(g, mul(g, o0, kk), mul(g, t, nb)), C), mul(g, c, nb));
  LLVMValueRef csrc = add(g, tsrc, mul(g, c, w->stride[1]));
  if (d->cl && !tail) { /* NB = NOB vectors, each gathered from NB rows of w */
    int vw = g->vw;
    for (int j = 0; j < d->nob; j++) {
      LLVMValueRef oj = cv_vadd(g, cv_splat(g, add(g, o0, k64(g, j * vw))), d->lanes);
      LLVMValueRef idx = cv_vadd(g, cv_splat(g, csrc), cv_vmul(g, oj, cv_splat(g, w->stride[0])));
      LLVMValueRef x = cv_vload(g, w->dtype, w->base, NULL, idx, NULL);
      LLVMValueRef st = LLVMBuildStore(g->b, x, gep(g, g->ct, wp, add(g, row, k64(g, j * vw))));
      LLVMSetAlignment(st, (unsigned)(vw * dtype_size(g->cd)));
    }
  } else {
    LLVMValueRef ol = gemm_loop_open(g, &lo, k64(g, 0), nb, k64(g, 1));
    LLVMValueRef o = add(g, o0, ol);
    LLVMValueRef src = add(g, csrc, mul(g, o, w->stride[0]));
    LLVMValueRef p = gep(g, g->ct, wp, add(g, row, ol));
    if (tail) cv_pack_elem(g, w, src, o, k[V_O], p);
    else LLVMBuildStore(g->b, gemm_load_c(g, w->base, src, w->dtype), p);
    gemm_loop_close(g, &lo);
  }
  gemm_loop_close(g, &lc);
  gemm_loop_close(g, &lt_);
}

/* Slots of the packing body's context (pack): the weights' base, offset
 * and strides, the pool, the shapes. */
enum { PK_W, PK_WP, PK_OFF, PK_S0, PK_S1, PK_S2, PK_S3, PK_KH, PK_KW, PK_C, PK_O, PK_COUNT };

/* Weights of at least this many elements (KH * KW * C * OPAD) are packed
 * by the threads, blocks of NB channels each (a [512,512,3,3] layer's 9.4
 * MB took a tenth of a one-thread [8,512,7,7] call, packed by one thread). */
enum { PACK_PAR = 1 << 16 };

/* The weights into wp as [O / NB][KH][KW][C][NB] (zeros past O), then
 * the bias (or zeros) at wp[OPAD * KH * KW * C ..]: the destination in
 * order (output channel innermost; channels-last: NOB vectors gathered
 * at a time), the NB channels of a block read from NB rows of w that
 * stay in cache across the block's (tap, c); the last block, where O is
 * not a multiple of NB, checked.  The blocks are a body of
 * tdsl_parallel_for ("tdsl.conv.pack", grain: blocks of PACK_PAR
 * elements, so that small weights stay on the calling thread); the bias
 * is packed in the kernel. */
static void pack(Cv *d, const GemmEmit *e, const GemmTensor *w, const GemmTensor *bias) {
  G *g = &d->g;
  LLVMValueRef *k = d->k, wp = k[V_WP], kk = mul(g, k[V_KH], k[V_KW]), opad = k[V_OPAD];
  LLVMValueRef nb = k64(g, nb_of(d)), O = k[V_O];
  LLVMValueRef kv[PK_COUNT] = {w->base, wp, w->offset, w->stride[0], w->stride[1], w->stride[2],
                               w->stride[3], k[V_KH], k[V_KW], k[V_C], O};
  LLVMValueRef cx = gemm_entry_alloca(g, g->i64, PK_COUNT);
  for (int i = 0; i < PK_COUNT; i++)
    if (!LLVMIsConstant(kv[i])) set(g, cx, i, kv[i]);
  LLVMValueRef items = sdiv(g, opad, nb);
  LLVMValueRef per = mul(g, mul(g, kk, k[V_C]), nb); /* elements per block, 0 when C is */
  per = LLVMBuildSelect(g->b, lt(g, per, k64(g, 1)), k64(g, 1), per, "");
  LLVMValueRef grain = cdiv(g, k64(g, PACK_PAR), per);
  /* the body: its values from the context, d->k and w in its terms */
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  LLVMValueRef saved[V_COUNT], f = cv_fn_open(g, "tdsl.conv.pack", ps, 3), bv[PK_COUNT];
  memcpy(saved, k, sizeof saved);
  for (int i = 0; i < PK_COUNT; i++)
    bv[i] = LLVMIsConstant(kv[i]) ? kv[i]
                                  : LLVMBuildLoad2(g->b, i < PK_OFF ? g->ptr : g->i64,
                                                   slot_ptr(g, LLVMGetParam(f, 0), i), "");
  GemmTensor wb = *w;
  wb.base = bv[PK_W], wb.offset = bv[PK_OFF];
  for (int i = 0; i < 4; i++) wb.stride[i] = bv[PK_S0 + i];
  k[V_WP] = bv[PK_WP], k[V_KH] = bv[PK_KH], k[V_KW] = bv[PK_KW];
  k[V_C] = bv[PK_C], k[V_O] = bv[PK_O];
  LLVMValueRef b0 = LLVMGetParam(f, 1), b1 = LLVMGetParam(f, 2);
  LLVMValueRef nfull = sdiv(g, k[V_O], nb);
  GLoop l;
  LLVMValueRef i = gemm_loop_open(g, &l, b0, imin(g, b1, nfull), k64(g, 1));
  pack_block(d, &wb, mul(g, i, nb), false);
  gemm_loop_close(g, &l);
  /* the last block, checked, where O is not a multiple of NB and it is ours */
  LLVMBasicBlockRef tail = blk(g, "pk_tail"), done = blk(g, "pk_done");
  LLVMValueRef mine = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSLE, b0, nfull, ""),
                                   lt(g, nfull, b1), "");
  LLVMBuildCondBr(g->b, mine, tail, done);
  LLVMPositionBuilderAtEnd(g->b, tail);
  pack_block(d, &wb, mul(g, nfull, nb), true);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
  LLVMBuildRetVoid(g->b);
  LLVMDisposeBuilder(g->b);
  /* weights of the compute type: vector loads, transposes and stores
   * (pack_rows), the light pipeline (conv3x3_nhwc: 8% less of tdslc's
   * instructions, the [8,512,7,7] layer as fast); ones it converts keep
   * the full one, as the GEMM's packing does (gemm.c gemm_new_fn) */
  if (w->dtype == g->cd) cpu_mark_light(f);
  memcpy(k, saved, sizeof saved);
  g->b = e->b, g->fn = e->fn;
  LLVMTypeRef pf[4] = {g->i64, g->i64, g->ptr, g->ptr};
  LLVMValueRef a[4] = {items, grain, f, cx};
  call(g, fdecl(g, "tdsl_parallel_for", g->vd, pf, 4), a, 4);
  GLoop lb;
  LLVMValueRef o0 = gemm_loop_open(g, &lb, k64(g, 0), opad, k64(g, 1));
  LLVMValueRef bdst = add(g, mul(g, mul(g, kk, k[V_C]), opad), o0);
  LLVMValueRef bsrc = bias ? add(g, bias->offset, mul(g, o0, bias->stride[0])) : NULL;
  cv_pack_elem(g, bias, bsrc, o0, O, gep(g, g->ct, wp, bdst));
  gemm_loop_close(g, &lb);
}

LLVMValueRef cg_conv_direct_pool_bytes(const GemmEmit *e, const GemmTensor *w,
                                       const GemmTensor *out, bool channels_last,
                                       LLVMValueRef *threads) {
  Cv d;
  cv_setup(&d, e, w->dtype, out->dtype);
  G *g = &d.g;
  d.cl = channels_last;
  blocking(&d, w, true);
  LLVMValueRef kkc = mul(g, mul(g, w->shape[2], w->shape[3]), w->shape[1]);
  LLVMValueRef n = mul(g, add(g, kkc, k64(g, 1)), opad_of(&d, w->shape[0]));
  *threads = k64(g, 1);
  LLVMValueRef zrow = channels_last ? mul(g, w->shape[1], k64(g, 8)) : k64(g, 0); /* img_zero_row */
  return add(g, add(g, k64(g, 64), mul(g, n, k64(g, dtype_size(g->cd)))), zrow);
}

LLVMValueRef cg_emit_conv_direct(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                 const GemmTensor *bias, const GemmTensor *out,
                                 LLVMValueRef attr[7], bool channels_last) {
  Cv d;
  cv_setup(&d, e, x->dtype, out->dtype);
  G *g = &d.g;
  LLVMValueRef *k = d.k;
  d.cl = channels_last;
  blocking(&d, w, false);
  cv_operands(&d, e, x, w, out, attr);
  k[V_C] = w->shape[1];
  k[V_M] = k64(g, 1);
  k[V_OPAD] = opad_of(&d, w->shape[0]);
  d.lanes = cv_lanes(g);
  if (cv_lowp_choose(&d, w->dtype) && !d.split) cv_lowp_pack(&d, w, bias, nb_of(&d));
  else pack(&d, e, w, bias);
  /* small channels-last images: the image form (img_item) where the
   * input's channels are contiguous, chosen at run time unless the shapes
   * decide it */
  LLVMValueRef img = d.cl && !g->pairs ? img_use(&d, k) : LLVMConstInt(g->i1, 0, 0);
  bool img_only = cv_is_one(LLVMBuildZExt(g->b, img, g->i64, "")),
       img_never = LLVMIsAConstantInt(img) && !img_only;
  if (!img_never)
    LLVMBuildMemSet(g->b, img_zero_row(&d, k), LLVMConstInt(LLVMInt8TypeInContext(g->ctx), 0, 0),
                    mul(g, k[V_C], k64(g, 8)), 1);
  LLVMValueRef items = mul(g, k[V_N], k[V_OH]);
  if (!d.cl) items = LLVMBuildSelect(g->b, flat_use(&d, k), mul(g, k[V_N], flat_items(&d, k)), items, "");
  if (!img_never)
    items = LLVMBuildSelect(g->b, img, mul(g, k[V_N], img_groups(&d, k)), items, "");
  GLoop l;
  LLVMValueRef t = cv_body_open(&d, "tdsl.conv.direct", &l);
  LLVMValueRef flat = d.cl ? NULL : flat_use(&d, d.v);
  if (!d.cl && LLVMIsAConstantInt(flat) && !cv_is_one(LLVMBuildZExt(g->b, flat, g->i64, ""))) {
    dn_row(&d, t);
  } else if (!d.cl) {
    LLVMBasicBlockRef bf = blk(g, "flat"), br = blk(g, "rows"), join = blk(g, "form_done");
    LLVMBuildCondBr(g->b, flat, bf, br);
    LLVMPositionBuilderAtEnd(g->b, bf);
    df_item(&d, t);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, br);
    dn_row(&d, t);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
  } else if (img_never) {
    dr_row(&d, t);
  } else if (img_only) {
    img_item(&d, t);
  } else {
    LLVMBasicBlockRef bi = blk(g, "img"), br = blk(g, "rows"), join = blk(g, "form_done");
    LLVMBuildCondBr(g->b, img_use(&d, d.v), bi, br);
    LLVMPositionBuilderAtEnd(g->b, bi);
    img_item(&d, t);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, br);
    dr_row(&d, t);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
  }
  LLVMValueRef body = cv_body_close(&d, &l);
  /* finished vector code: the light pipeline (machine.c), without the
   * full one's unrolling of the tap and channel loops (5x the FMAs of the
   * emitted IR, most of conv3x3_nhwc's compile time) and vectorizers;
   * the kernels ran as fast (bench/README.md, "Compile cost of the
   * direct kernel").  Not the NCHW rows alone (vectors narrower than
   * 512 bits: no flattened planes), whose channel loop LLVM's runtime
   * unrolling sped up by 1-2% (x86-64-v3) */
  if (d.cl || g->vec_bits >= 512) cpu_mark_light(body);
  return cv_launch_items(&d, e, body, items);
}
