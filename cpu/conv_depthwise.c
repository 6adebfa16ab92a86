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
 *    else gathered); the last partial vector of channels masked;
 *  - NCHW output (column stride 1): a work item per output plane (image,
 *    channel); vectors of VW output columns, PX vectors at a time, each
 *    tap's weight a broadcast scalar; the input row read as contiguous
 *    vectors at stride 1 (else gathered).
 * Padding: the output columns whose taps all fall inside the input
 * (computed per call) run without checks; the border columns check each
 * tap (branch per column in channels-last, lane masks in NCHW), and rows
 * of taps outside the input are skipped.  Accumulation in the GEMM's
 * compute type (f32 for f32/f16/bf16, f64, wrapping i64), one rounding to
 * the output dtype, the bias first (PyTorch adds it to the sum; every
 * output element is summed in tap order, ky then kx).
 * Values the body needs are constants where the kernel's shapes are
 * static (LLVM then unrolls the tap loops), else read from a context.
 * Needs: conv.h, gemm_impl.h (its helpers).  Used by: gemm_nest.c. */
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "gemm_impl.h"

/* The body's values: pointers first. */
enum {
  V_X, V_OUT, V_WP, V_EPIFN, V_EPIARG, V_NPTR,
  V_N = V_NPTR, V_O, V_H, V_W, V_OH, V_OW, V_KH, V_KW, V_SH, V_SW, V_PH, V_PW, V_DH, V_DW,
  V_M, V_GROUPS, V_XOFF, V_XSN, V_XSC, V_XSH, V_XSW, V_OOFF, V_OSN, V_OSC, V_OSH, V_OSW, V_OPAD,
  V_COUNT
};

typedef struct Dw {
  G g;
  bool cl, epi;
  bool contig;       /* input vectors are contiguous (see the file comment) */
  int px;            /* pixels (channels-last) / vectors (NCHW) per block */
  DType xd;
  LLVMValueRef k[V_COUNT]; /* in the kernel */
  LLVMValueRef v[V_COUNT]; /* in the body: constants, or loads from the context */
  LLVMValueRef lanes;      /* <0, 1, .. VW-1> of i64 */
} Dw;

static void dw_setup(Dw *d, const GemmEmit *e, DType xd, DType od) {
  memset(d, 0, sizeof *d);
  G *g = &d->g;
  g->ctx = e->ctx, g->mod = e->mod, g->b = e->b, g->fn = e->fn;
  g->i1 = LLVMInt1TypeInContext(e->ctx);
  g->i16 = LLVMInt16TypeInContext(e->ctx);
  g->i32 = LLVMInt32TypeInContext(e->ctx);
  g->i64 = LLVMInt64TypeInContext(e->ctx);
  g->f32 = LLVMFloatTypeInContext(e->ctx);
  g->ptr = LLVMPointerTypeInContext(e->ctx, 0);
  g->vd = LLVMVoidTypeInContext(e->ctx);
  g->ad = xd, g->od = od;
  g->cd = od == DT_F64 ? DT_F64 : dtype_is_float(od) ? DT_F32 : DT_I64;
  g->ct = g->cd == DT_F32 ? g->f32 : g->cd == DT_F64 ? LLVMDoubleTypeInContext(e->ctx) : g->i64;
  g->vec_bits = e->vec_bits;
  g->vw = e->vec_bits / (8 * dtype_size(g->cd));
  g->vt = LLVMVectorType(g->ct, (unsigned)g->vw);
  d->xd = xd;
  d->px = 4;
}

/* ---- vectors -------------------------------------------------------------- */

static LLVMTypeRef vec(G *g, LLVMTypeRef t) { return LLVMVectorType(t, (unsigned)g->vw); }

static LLVMValueRef splat(G *g, LLVMValueRef s) {
  LLVMTypeRef vt = vec(g, LLVMTypeOf(s));
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(vt), s, LLVMConstInt(g->i32, 0, 0), "");
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(vt), LLVMConstNull(vec(g, g->i32)), "");
}

static LLVMValueRef vadd(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(g->b, a, b, ""); }
static LLVMValueRef vmul(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildMul(g->b, a, b, ""); }

static LLVMValueRef i32c(G *g, int v) { return LLVMConstInt(g->i32, (unsigned long long)v, 0); }

/* A vector of storage elements (dtype t) as compute-type lanes. */
static LLVMValueRef vconv_in(G *g, LLVMValueRef v, DType t) {
  bool cf = g->cd != DT_I64;
  switch (t) {
  case DT_BF16: {
    LLVMValueRef w = LLVMBuildZExt(g->b, v, vec(g, g->i32), "");
    w = LLVMBuildShl(g->b, w, splat(g, LLVMConstInt(g->i32, 16, 0)), "");
    w = LLVMBuildBitCast(g->b, w, vec(g, g->f32), "");
    return cf ? LLVMBuildFPCast(g->b, w, g->vt, "") : LLVMBuildFPToSI(g->b, w, g->vt, "");
  }
  case DT_F16: case DT_F32: case DT_F64:
    return cf ? LLVMBuildFPCast(g->b, v, g->vt, "") : LLVMBuildFPToSI(g->b, v, g->vt, "");
  case DT_BOOL: case DT_U8:
    return cf ? LLVMBuildUIToFP(g->b, v, g->vt, "") : LLVMBuildIntCast2(g->b, v, g->vt, 0, "");
  default:
    return cf ? LLVMBuildSIToFP(g->b, v, g->vt, "") : LLVMBuildIntCast2(g->b, v, g->vt, 1, "");
  }
}

/* Compute-type lanes as storage elements of dtype t (gemm_store_c's
 * conversions: bf16 nearest even with NaN kept quiet). */
static LLVMValueRef vconv_out(G *g, LLVMValueRef x, DType t) {
  LLVMTypeRef st = vec(g, gemm_storage(g, t));
  switch (t) {
  case DT_BF16: {
    LLVMTypeRef v32 = vec(g, g->i32);
    LLVMValueRef f = LLVMBuildFPCast(g->b, x, vec(g, g->f32), "");
    LLVMValueRef u = LLVMBuildBitCast(g->b, f, v32, ""), k16 = splat(g, LLVMConstInt(g->i32, 16, 0));
    LLVMValueRef hi = LLVMBuildLShr(g->b, u, k16, "");
    LLVMValueRef lsb = LLVMBuildAnd(g->b, hi, splat(g, LLVMConstInt(g->i32, 1, 0)), "");
    LLVMValueRef r = vadd(g, u, vadd(g, lsb, splat(g, LLVMConstInt(g->i32, 0x7FFF, 0))));
    r = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, r, k16, ""), st, "");
    LLVMValueRef q = LLVMBuildOr(g->b, LLVMBuildTrunc(g->b, hi, st, ""),
                                 splat(g, LLVMConstInt(g->i16, 0x40, 0)), "");
    return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealUNO, f, f, ""), q, r, "");
  }
  case DT_F16: case DT_F32: case DT_F64:
    return g->cd != DT_I64 ? LLVMBuildFPCast(g->b, x, st, "") : LLVMBuildSIToFP(g->b, x, st, "");
  case DT_BOOL: {
    LLVMValueRef nz = g->cd != DT_I64 ? LLVMBuildFCmp(g->b, LLVMRealUNE, x, LLVMConstNull(g->vt), "")
                                      : LLVMBuildICmp(g->b, LLVMIntNE, x, LLVMConstNull(g->vt), "");
    return LLVMBuildZExt(g->b, nz, st, "");
  }
  default:
    return g->cd != DT_I64 ? LLVMBuildFPToSI(g->b, x, st, "") : LLVMBuildIntCast2(g->b, x, st, 1, "");
  }
}

/* VW elements of dtype t as compute lanes: base[off + lane] when idx is
 * NULL, else base[idx[lane]]; lanes off in mask (NULL: all on) read 0 and
 * touch no memory. */
static LLVMValueRef vload(G *g, DType t, LLVMValueRef base, LLVMValueRef off, LLVMValueRef idx,
                          LLVMValueRef mask) {
  LLVMTypeRef st = gemm_storage(g, t), vt = vec(g, st);
  int al = dtype_size(t);
  LLVMValueRef v;
  if (!idx && !mask) {
    v = LLVMBuildLoad2(g->b, vt, gep(g, st, base, off), "");
    LLVMSetAlignment(v, (unsigned)al);
  } else if (!idx) {
    LLVMTypeRef ov[2] = {vt, g->ptr};
    LLVMValueRef a[4] = {gep(g, st, base, off), i32c(g, al), mask, LLVMConstNull(vt)};
    v = gemm_intrin(g, "llvm.masked.load", ov, 2, a, 4);
  } else {
    LLVMValueRef ps = LLVMBuildGEP2(g->b, st, base, &idx, 1, "");
    LLVMTypeRef ov[2] = {vt, vec(g, g->ptr)};
    LLVMValueRef a[4] = {ps, i32c(g, al), mask ? mask : LLVMConstAllOnes(vec(g, g->i1)),
                         LLVMConstNull(vt)};
    v = gemm_intrin(g, "llvm.masked.gather", ov, 2, a, 4);
  }
  return vconv_in(g, v, t);
}

/* Stores compute lanes x as base[off + lane] (dtype t), lanes in mask. */
static void vstore(G *g, DType t, LLVMValueRef x, LLVMValueRef base, LLVMValueRef off,
                   LLVMValueRef mask) {
  LLVMTypeRef st = gemm_storage(g, t);
  LLVMValueRef v = vconv_out(g, x, t), p = gep(g, st, base, off);
  if (!mask) {
    LLVMSetAlignment(LLVMBuildStore(g->b, v, p), (unsigned)dtype_size(t));
    return;
  }
  LLVMTypeRef ov[2] = {vec(g, st), g->ptr};
  LLVMValueRef a[4] = {v, p, i32c(g, dtype_size(t)), mask};
  gemm_intrin(g, "llvm.masked.store", ov, 2, a, 4);
}

static LLVMValueRef acc_get(G *g, LLVMValueRef a) { return LLVMBuildLoad2(g->b, g->vt, a, ""); }

/* The packed vector of the compute type at wp + i (aligned: i is a
 * multiple of VW and the pool 64-byte aligned). */
static LLVMValueRef wvec(Dw *d, LLVMValueRef i) {
  G *g = &d->g;
  LLVMValueRef l = LLVMBuildLoad2(g->b, g->vt, gep(g, g->ct, d->v[V_WP], i), "");
  LLVMSetAlignment(l, (unsigned)(g->vw * dtype_size(g->cd)));
  return l;
}

static LLVMValueRef khkw(Dw *d) { return mul(&d->g, d->v[V_KH], d->v[V_KW]); }

/* Opens `if (0 <= i < n)` (unsigned compare); returns the block after. */
static LLVMBasicBlockRef open_inside(G *g, LLVMValueRef i, LLVMValueRef n) {
  LLVMBasicBlockRef in = blk(g, "dw_in"), after = blk(g, "dw_skip");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntULT, i, n, ""), in, after);
  LLVMPositionBuilderAtEnd(g->b, in);
  return after;
}

static void close_inside(G *g, LLVMBasicBlockRef after) {
  LLVMBuildBr(g->b, after);
  LLVMPositionBuilderAtEnd(g->b, after);
}

static void call_epi(Dw *d, LLVMValueRef bt, LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef j0,
                     LLVMValueRef j1) {
  G *g = &d->g;
  LLVMTypeRef ps[6] = {g->ptr, g->i64, g->i64, g->i64, g->i64, g->i64};
  LLVMValueRef a[6] = {d->v[V_EPIARG], bt, i0, i1, j0, j1};
  LLVMBuildCall2(g->b, LLVMFunctionType(g->vd, ps, 6, 0), d->v[V_EPIFN], a, 6, "");
}

/* The first output column whose taps are all inside the input columns,
 * and the end of that run, within [0, OW]. */
static void interior(Dw *d, LLVMValueRef *lo, LLVMValueRef *hi) {
  G *g = &d->g;
  LLVMValueRef *v = d->v, ow = v[V_OW];
  *lo = imin(g, ow, cdiv(g, v[V_PW], v[V_SW]));
  LLVMValueRef num = sub(g, add(g, sub(g, v[V_W], k64(g, 1)), v[V_PW]),
                         mul(g, sub(g, v[V_KW], k64(g, 1)), v[V_DW]));
  LLVMValueRef h = add(g, sdiv(g, num, v[V_SW]), k64(g, 1));
  h = LLVMBuildSelect(g->b, lt(g, num, k64(g, 0)), k64(g, 0), h, "");
  h = imin(g, h, ow);
  *hi = LLVMBuildSelect(g->b, lt(g, h, *lo), *lo, h, "");
}

/* ---- channels-last: a row of output pixels -------------------------------- */

/* np output pixels from column ox, channels c .. c + VW (lanes in mask),
 * of the row at input row iy0 (first tap) / output offset ob. */
static void cl_block(Dw *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef ox,
                     LLVMValueRef c, int np, bool checked, LLVMValueRef mask) {
  G *g = &d->g;
  LLVMValueRef *v = d->v, acc[8];
  LLVMValueRef bias = wvec(d, add(g, mul(g, khkw(d), v[V_OPAD]), c));
  for (int p = 0; p < np; p++) {
    acc[p] = gemm_entry_alloca(g, g->vt, 1);
    LLVMBuildStore(g->b, bias, acc[p]);
  }
  LLVMValueRef cidx = NULL; /* gathered: each lane's input channel offset */
  if (!d->contig)
    cidx = vmul(g, LLVMBuildSDiv(g->b, vadd(g, splat(g, c), d->lanes), splat(g, v[V_M]), ""),
                splat(g, v[V_XSC]));
  GLoop ly, lx;
  LLVMValueRef ky = gemm_loop_open(g, &ly, k64(g, 0), v[V_KH], k64(g, 1));
  LLVMValueRef iy = add(g, iy0, mul(g, ky, v[V_DH]));
  LLVMBasicBlockRef rowskip = open_inside(g, iy, v[V_H]);
  LLVMValueRef xr = add(g, xb, mul(g, iy, v[V_XSH]));
  LLVMValueRef kx = gemm_loop_open(g, &lx, k64(g, 0), v[V_KW], k64(g, 1));
  LLVMValueRef wv = wvec(d, add(g, mul(g, add(g, mul(g, ky, v[V_KW]), kx), v[V_OPAD]), c));
  for (int p = 0; p < np; p++) {
    LLVMValueRef ix = sub(g, mul(g, add(g, ox, k64(g, p)), v[V_SW]), v[V_PW]);
    ix = add(g, ix, mul(g, kx, v[V_DW]));
    LLVMBasicBlockRef skip = checked ? open_inside(g, ix, v[V_W]) : NULL;
    LLVMValueRef off = add(g, xr, mul(g, ix, v[V_XSW])), xv;
    if (d->contig) xv = vload(g, d->xd, v[V_X], add(g, off, c), NULL, mask);
    else xv = vload(g, d->xd, v[V_X], NULL, vadd(g, splat(g, off), cidx), mask);
    LLVMBuildStore(g->b, gemm_fma(g, xv, wv, acc_get(g, acc[p])), acc[p]);
    if (skip) close_inside(g, skip);
  }
  gemm_loop_close(g, &lx);
  close_inside(g, rowskip);
  gemm_loop_close(g, &ly);
  for (int p = 0; p < np; p++) {
    LLVMValueRef o = add(g, add(g, ob, mul(g, add(g, ox, k64(g, p)), v[V_OSW])), c);
    vstore(g, g->od, acc_get(g, acc[p]), v[V_OUT], o, mask);
  }
}

/* np pixels from column ox over every channel: full vectors, then the
 * last partial one masked. */
static void cl_pixels(Dw *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef ox,
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
  LLVMValueRef mask = LLVMBuildICmp(g->b, LLVMIntSLT, d->lanes, splat(g, sub(g, O, full)), "");
  cl_block(d, xb, iy0, ob, ox, full, np, checked, mask);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
}

/* Output row t = image * OH + oy. */
static void cl_row(Dw *d, LLVMValueRef t) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  LLVMValueRef n = sdiv(g, t, v[V_OH]), oy = srem(g, t, v[V_OH]);
  LLVMValueRef xb = add(g, v[V_XOFF], mul(g, n, v[V_XSN]));
  LLVMValueRef ob = add(g, add(g, v[V_OOFF], mul(g, n, v[V_OSN])), mul(g, oy, v[V_OSH]));
  LLVMValueRef iy0 = sub(g, mul(g, oy, v[V_SH]), v[V_PH]), lo, hi;
  interior(d, &lo, &hi);
  GLoop l;
  LLVMValueRef ox = gemm_loop_open(g, &l, k64(g, 0), lo, k64(g, 1));
  cl_pixels(d, xb, iy0, ob, ox, 1, true);
  gemm_loop_close(g, &l);
  LLVMValueRef nb = sdiv(g, sub(g, hi, lo), k64(g, d->px)), mid = add(g, lo, mul(g, nb, k64(g, d->px)));
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
    call_epi(d, mul(g, n, v[V_GROUPS]), q0, add(g, q0, v[V_OW]), k64(g, 0), v[V_O]);
  }
}

/* ---- NCHW: a plane of output pixels --------------------------------------- */

/* np vectors of output columns from ox (all inside: no checks) or, with
 * checked, one vector whose lanes are checked against OW and the input's
 * columns; the plane's input offset xb, first tap row iy0, output row
 * offset orow, weights at wp[wrow..], bias b (compute scalar). */
static void nchw_block(Dw *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef orow,
                       LLVMValueRef wrow, LLVMValueRef b, LLVMValueRef ox, int np, bool checked) {
  G *g = &d->g;
  LLVMValueRef *v = d->v, acc[8], bv = splat(g, b);
  int vw = g->vw;
  for (int p = 0; p < np; p++) {
    acc[p] = gemm_entry_alloca(g, g->vt, 1);
    LLVMBuildStore(g->b, bv, acc[p]);
  }
  LLVMValueRef cols = vadd(g, splat(g, ox), d->lanes), valid = NULL;
  if (checked) valid = LLVMBuildICmp(g->b, LLVMIntSLT, cols, splat(g, v[V_OW]), "");
  LLVMValueRef step = mul(g, v[V_SW], v[V_XSW]); /* input elements between lanes */
  GLoop ly, lx;
  LLVMValueRef ky = gemm_loop_open(g, &ly, k64(g, 0), v[V_KH], k64(g, 1));
  LLVMValueRef iy = add(g, iy0, mul(g, ky, v[V_DH]));
  LLVMBasicBlockRef rowskip = open_inside(g, iy, v[V_H]);
  LLVMValueRef xr = add(g, xb, mul(g, iy, v[V_XSH]));
  LLVMValueRef kx = gemm_loop_open(g, &lx, k64(g, 0), v[V_KW], k64(g, 1));
  LLVMValueRef wi = add(g, wrow, add(g, mul(g, ky, v[V_KW]), kx));
  LLVMValueRef wv = splat(g, LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, v[V_WP], wi), ""));
  LLVMValueRef koff = sub(g, mul(g, kx, v[V_DW]), v[V_PW]);
  for (int p = 0; p < np; p++) {
    LLVMValueRef ox0 = add(g, ox, k64(g, p * vw)), xv;
    LLVMValueRef ix0 = add(g, mul(g, ox0, v[V_SW]), koff), off = add(g, xr, mul(g, ix0, v[V_XSW]));
    LLVMValueRef mask = NULL;
    if (checked) {
      LLVMValueRef ix = vadd(g, vmul(g, cols, splat(g, v[V_SW])), splat(g, koff));
      mask = LLVMBuildAnd(g->b, valid, LLVMBuildICmp(g->b, LLVMIntULT, ix, splat(g, v[V_W]), ""), "");
    }
    if (d->contig) xv = vload(g, d->xd, v[V_X], off, NULL, mask);
    else xv = vload(g, d->xd, v[V_X], NULL, vadd(g, splat(g, off), vmul(g, d->lanes, splat(g, step))), mask);
    LLVMBuildStore(g->b, gemm_fma(g, xv, wv, acc_get(g, acc[p])), acc[p]);
  }
  gemm_loop_close(g, &lx);
  close_inside(g, rowskip);
  gemm_loop_close(g, &ly);
  for (int p = 0; p < np; p++)
    vstore(g, g->od, acc_get(g, acc[p]), v[V_OUT], add(g, orow, add(g, ox, k64(g, p * vw))), valid);
}

/* Output plane t = image * O + channel. */
static void nchw_plane(Dw *d, LLVMValueRef t) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  int vw = g->vw, bw = d->px * vw;
  LLVMValueRef n = sdiv(g, t, v[V_O]), o = srem(g, t, v[V_O]), ci = sdiv(g, o, v[V_M]);
  LLVMValueRef xb = add(g, add(g, v[V_XOFF], mul(g, n, v[V_XSN])), mul(g, ci, v[V_XSC]));
  LLVMValueRef ob = add(g, add(g, v[V_OOFF], mul(g, n, v[V_OSN])), mul(g, o, v[V_OSC]));
  LLVMValueRef wrow = mul(g, o, khkw(d));
  LLVMValueRef b = LLVMBuildLoad2(g->b, g->ct,
                                  gep(g, g->ct, v[V_WP], add(g, mul(g, khkw(d), v[V_OPAD]), o)), "");
  LLVMValueRef lo, hi;
  interior(d, &lo, &hi);
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
    call_epi(d, mul(g, n, v[V_GROUPS]), o, add(g, o, k64(g, 1)), k64(g, 0),
             mul(g, v[V_OH], v[V_OW]));
}

/* ---- the parallel body and the driver in the kernel ----------------------- */

static bool is_one(LLVMValueRef v) {
  return LLVMIsAConstantInt(v) && LLVMConstIntGetSExtValue(v) == 1;
}

/* body(ctx, begin, end): rows (channels-last) or planes (NCHW). */
static LLVMValueRef emit_body(Dw *d) {
  G *g = &d->g;
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  LLVMValueRef f = LLVMAddFunction(g->mod, "tdsl.conv.dw", LLVMFunctionType(g->vd, ps, 3, 0));
  LLVMSetLinkage(f, LLVMPrivateLinkage);
  if (g->vec_bits >= 512) { /* keep zmm registers for the explicit vectors */
    static const char *const kv[2] = {"min-legal-vector-width", "prefer-vector-width"};
    for (int i = 0; i < 2; i++)
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                              LLVMCreateStringAttribute(g->ctx, kv[i], (unsigned)strlen(kv[i]), "512", 3));
  }
  g->fn = f;
  g->b = LLVMCreateBuilderInContext(g->ctx);
  LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, f, "entry"));
  LLVMValueRef cx = LLVMGetParam(f, 0);
  for (int i = 0; i < V_COUNT; i++)
    d->v[i] = !d->k[i] || LLVMIsConstant(d->k[i])
                  ? d->k[i]
                  : LLVMBuildLoad2(g->b, i < V_NPTR ? g->ptr : g->i64, slot_ptr(g, cx, i), "");
  LLVMValueRef *lv = malloc(sizeof *lv * (size_t)g->vw);
  for (int l = 0; l < g->vw; l++) lv[l] = k64(g, l);
  d->lanes = LLVMConstVector(lv, (unsigned)g->vw);
  free(lv);
  GLoop l;
  LLVMValueRef t = gemm_loop_open(g, &l, LLVMGetParam(f, 1), LLVMGetParam(f, 2), k64(g, 1));
  if (d->cl) cl_row(d, t);
  else nchw_plane(d, t);
  gemm_loop_close(g, &l);
  LLVMBuildRetVoid(g->b);
  LLVMDisposeBuilder(g->b);
  return f;
}

/* Weights into wp (channels-last: [KH*KW][OPAD], zero lanes past O; NCHW:
 * [O][KH*KW]), then the bias (or zeros) at wp[KH*KW*OPAD ..]. */
static void pack(Dw *d, const GemmTensor *w, const GemmTensor *bias) {
  G *g = &d->g;
  LLVMValueRef *k = d->k, wp = k[V_WP], kk = mul(g, k[V_KH], k[V_KW]), opad = k[V_OPAD];
  GLoop lo, lt_;
  LLVMValueRef o = gemm_loop_open(g, &lo, k64(g, 0), opad, k64(g, 1));
  LLVMValueRef t = gemm_loop_open(g, &lt_, k64(g, 0), kk, k64(g, 1));
  LLVMValueRef dst = d->cl ? add(g, mul(g, t, opad), o) : add(g, mul(g, o, kk), t);
  LLVMBasicBlockRef ld = blk(g, "dw_wload"), zero = blk(g, "dw_wzero"), next = blk(g, "dw_wnext");
  LLVMBuildCondBr(g->b, lt(g, o, k[V_O]), ld, zero);
  LLVMPositionBuilderAtEnd(g->b, ld);
  LLVMValueRef src = add(g, w->offset, mul(g, o, w->stride[0]));
  src = add(g, src, add(g, mul(g, sdiv(g, t, k[V_KW]), w->stride[2]), mul(g, srem(g, t, k[V_KW]), w->stride[3])));
  LLVMBuildStore(g->b, gemm_load_c(g, w->base, src, w->dtype), gep(g, g->ct, wp, dst));
  LLVMBuildBr(g->b, next);
  LLVMPositionBuilderAtEnd(g->b, zero);
  LLVMBuildStore(g->b, gemm_czero(g), gep(g, g->ct, wp, dst));
  LLVMBuildBr(g->b, next);
  LLVMPositionBuilderAtEnd(g->b, next);
  gemm_loop_close(g, &lt_);
  LLVMValueRef bdst = add(g, mul(g, kk, opad), o);
  if (bias) {
    LLVMBasicBlockRef bl = blk(g, "dw_bload"), bz = blk(g, "dw_bzero"), bn = blk(g, "dw_bnext");
    LLVMBuildCondBr(g->b, lt(g, o, k[V_O]), bl, bz);
    LLVMPositionBuilderAtEnd(g->b, bl);
    LLVMValueRef bsrc = add(g, bias->offset, mul(g, o, bias->stride[0]));
    LLVMBuildStore(g->b, gemm_load_c(g, bias->base, bsrc, bias->dtype), gep(g, g->ct, wp, bdst));
    LLVMBuildBr(g->b, bn);
    LLVMPositionBuilderAtEnd(g->b, bz);
    LLVMBuildStore(g->b, gemm_czero(g), gep(g, g->ct, wp, bdst));
    LLVMBuildBr(g->b, bn);
    LLVMPositionBuilderAtEnd(g->b, bn);
  } else {
    LLVMBuildStore(g->b, gemm_czero(g), gep(g, g->ct, wp, bdst));
  }
  gemm_loop_close(g, &lo);
}

/* O rounded up to a multiple of VW (channels-last), else O. */
static LLVMValueRef opad_of(G *g, LLVMValueRef O, bool cl) {
  if (!cl) return O;
  return mul(g, cdiv(g, O, k64(g, g->vw)), k64(g, g->vw));
}

LLVMValueRef cg_conv_dw_pool_bytes(const GemmEmit *e, const GemmTensor *w, const GemmTensor *out,
                                   bool channels_last, LLVMValueRef *threads) {
  Dw d;
  dw_setup(&d, e, w->dtype, out->dtype);
  G *g = &d.g;
  LLVMValueRef kk = mul(g, w->shape[2], w->shape[3]);
  LLVMValueRef n = mul(g, add(g, kk, k64(g, 1)), opad_of(g, w->shape[0], channels_last));
  *threads = k64(g, 1);
  return add(g, k64(g, 64), mul(g, n, k64(g, dtype_size(g->cd))));
}

LLVMValueRef cg_emit_conv_depthwise(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                    const GemmTensor *bias, const GemmTensor *out,
                                    LLVMValueRef attr[7], LLVMValueRef mult, bool channels_last) {
  Dw d;
  dw_setup(&d, e, x->dtype, out->dtype);
  G *g = &d.g;
  LLVMValueRef *k = d.k;
  int xr = x->rank, orr = out->rank;
  d.cl = channels_last;
  d.epi = e->epi_fn != NULL;
  k[V_X] = x->base, k[V_OUT] = out->base;
  k[V_WP] = gep(g, LLVMInt8TypeInContext(g->ctx), e->pool, k64(g, 64));
  k[V_EPIFN] = e->epi_fn, k[V_EPIARG] = e->epi_arg;
  k[V_N] = xr == 4 ? x->shape[0] : k64(g, 1);
  k[V_O] = w->shape[0];
  k[V_H] = x->shape[xr - 2], k[V_W] = x->shape[xr - 1];
  k[V_OH] = out->shape[orr - 2], k[V_OW] = out->shape[orr - 1];
  k[V_KH] = w->shape[2], k[V_KW] = w->shape[3];
  static const int slots[6] = {V_SH, V_SW, V_PH, V_PW, V_DH, V_DW};
  for (int i = 0; i < 6; i++) k[slots[i]] = attr[i];
  k[V_GROUPS] = attr[6];
  k[V_M] = mult ? mult : sdiv(g, w->shape[0], attr[6]);
  k[V_XOFF] = x->offset, k[V_XSN] = xr == 4 ? x->stride[0] : k64(g, 0);
  k[V_XSC] = x->stride[xr - 3], k[V_XSH] = x->stride[xr - 2], k[V_XSW] = x->stride[xr - 1];
  k[V_OOFF] = out->offset, k[V_OSN] = orr == 4 ? out->stride[0] : k64(g, 0);
  k[V_OSC] = out->stride[orr - 3], k[V_OSH] = out->stride[orr - 2], k[V_OSW] = out->stride[orr - 1];
  k[V_OPAD] = opad_of(g, w->shape[0], d.cl);
  d.contig = d.cl ? is_one(k[V_M]) && is_one(k[V_XSC]) : is_one(k[V_SW]) && is_one(k[V_XSW]);
  pack(&d, w, bias);
  LLVMValueRef body = emit_body(&d);
  g->b = e->b, g->fn = e->fn;
  LLVMValueRef cx = gemm_entry_alloca(g, g->i64, V_COUNT);
  for (int i = 0; i < V_COUNT; i++)
    if (k[i] && !LLVMIsConstant(k[i])) set(g, cx, i, k[i]);
  LLVMValueRef items = mul(g, k[V_N], d.cl ? k[V_OH] : k[V_O]);
  LLVMTypeRef ps[4] = {g->i64, g->i64, g->ptr, g->ptr};
  LLVMValueRef a[4] = {items, k64(g, 1), body, cx};
  call(g, fdecl(g, "tdsl_parallel_for", g->vd, ps, 4), a, 4);
  return LLVMConstInt(g->i32, 0, 0);
}
