/* conv_common.c — the pieces the convolution kernels of conv.h share
 * (conv_impl.h): setup, vector loads and stores converting between
 * storage dtypes and the compute type (masked, or gathered for strided
 * lanes), the epilogue hook call, the interior run of output columns, the
 * loops over the taps of an output row, the direct channels-last kernel's
 * register block (accumulators from the bias, tap loops, each pixel's
 * input offsets, the stores; conv_direct.c and conv_lowp.c add the
 * channels), a generated function's frame (also conv_1x1.c's bias
 * hook), and the parallel body's: values that are LLVM constants in the
 * kernel (static shapes) are used as constants in the body, so LLVM
 * unrolls and folds with them; the others travel through a context of
 * 8-byte slots.
 * Needs: conv_impl.h.
 * Used by: conv_depthwise.c, conv_direct.c, conv_lowp.c, conv_1x1.c. */
#include <stdlib.h>
#include <string.h>

#include "conv_impl.h"

void cv_setup(Cv *d, const GemmEmit *e, DType xd, DType od) {
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
  g->cd = gemm_lowp_compute_dtype(od); /* as the GEMM's: i32 for ints of <= 32 bits */
  g->ct = g->cd == DT_F32   ? g->f32
          : g->cd == DT_F64 ? LLVMDoubleTypeInContext(e->ctx)
          : g->cd == DT_I32 ? g->i32
                            : g->i64;
  g->isa = e->isa;
  g->vec_bits = e->vec_bits;
  g->vw = e->vec_bits / (8 * dtype_size(g->cd));
  g->vt = LLVMVectorType(g->ct, (unsigned)g->vw);
  d->xd = xd;
}

void cv_operands(Cv *d, const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                 const GemmTensor *out, LLVMValueRef attr[7]) {
  G *g = &d->g;
  LLVMValueRef *k = d->k;
  int xr = x->rank, orr = out->rank;
  d->epi = e->epi_fn != NULL;
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
  k[V_XOFF] = x->offset, k[V_XSN] = xr == 4 ? x->stride[0] : k64(g, 0);
  k[V_XSC] = x->stride[xr - 3], k[V_XSH] = x->stride[xr - 2], k[V_XSW] = x->stride[xr - 1];
  k[V_OOFF] = out->offset, k[V_OSN] = orr == 4 ? out->stride[0] : k64(g, 0);
  k[V_OSC] = out->stride[orr - 3], k[V_OSH] = out->stride[orr - 2], k[V_OSW] = out->stride[orr - 1];
}

/* ---- vectors -------------------------------------------------------------- */

static LLVMTypeRef vec(G *g, LLVMTypeRef t) { return LLVMVectorType(t, (unsigned)g->vw); }

LLVMValueRef cv_splat(G *g, LLVMValueRef s) {
  LLVMTypeRef vt = vec(g, LLVMTypeOf(s));
  LLVMValueRef v =
      LLVMBuildInsertElement(g->b, LLVMGetUndef(vt), s, LLVMConstInt(g->i32, 0, 0), "");
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(vt), LLVMConstNull(vec(g, g->i32)), "");
}

LLVMValueRef cv_vadd(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(g->b, a, b, ""); }
LLVMValueRef cv_vmul(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildMul(g->b, a, b, ""); }

static LLVMValueRef i32c(G *g, int v) { return LLVMConstInt(g->i32, (unsigned long long)v, 0); }

/* A vector of storage elements (dtype t) as compute-type lanes. */
static LLVMValueRef vconv_in(G *g, LLVMValueRef v, DType t) {
  bool cf = dtype_is_float(g->cd);
  switch (t) {
  case DT_BF16: {
    LLVMValueRef w = LLVMBuildZExt(g->b, v, vec(g, g->i32), "");
    w = LLVMBuildShl(g->b, w, cv_splat(g, LLVMConstInt(g->i32, 16, 0)), "");
    w = LLVMBuildBitCast(g->b, w, vec(g, g->f32), "");
    return cf ? LLVMBuildFPCast(g->b, w, g->vt, "") : LLVMBuildFPToSI(g->b, w, g->vt, "");
  }
  case DT_F16:
  case DT_F32:
  case DT_F64:
    return cf ? LLVMBuildFPCast(g->b, v, g->vt, "") : LLVMBuildFPToSI(g->b, v, g->vt, "");
  case DT_BOOL:
  case DT_U8:
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
    LLVMValueRef u = LLVMBuildBitCast(g->b, f, v32, ""),
                 k16 = cv_splat(g, LLVMConstInt(g->i32, 16, 0));
    LLVMValueRef hi = LLVMBuildLShr(g->b, u, k16, "");
    LLVMValueRef lsb = LLVMBuildAnd(g->b, hi, cv_splat(g, LLVMConstInt(g->i32, 1, 0)), "");
    LLVMValueRef r = cv_vadd(g, u, cv_vadd(g, lsb, cv_splat(g, LLVMConstInt(g->i32, 0x7FFF, 0))));
    r = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, r, k16, ""), st, "");
    LLVMValueRef q = LLVMBuildOr(g->b, LLVMBuildTrunc(g->b, hi, st, ""),
                                 cv_splat(g, LLVMConstInt(g->i16, 0x40, 0)), "");
    return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealUNO, f, f, ""), q, r, "");
  }
  case DT_F16:
  case DT_F32:
  case DT_F64:
    return dtype_is_float(g->cd) ? LLVMBuildFPCast(g->b, x, st, "") : LLVMBuildSIToFP(g->b, x, st, "");
  case DT_BOOL: {
    LLVMValueRef nz = dtype_is_float(g->cd)
                          ? LLVMBuildFCmp(g->b, LLVMRealUNE, x, LLVMConstNull(g->vt), "")
                          : LLVMBuildICmp(g->b, LLVMIntNE, x, LLVMConstNull(g->vt), "");
    return LLVMBuildZExt(g->b, nz, st, "");
  }
  default:
    return dtype_is_float(g->cd) ? LLVMBuildFPToSI(g->b, x, st, "")
                           : LLVMBuildIntCast2(g->b, x, st, 1, "");
  }
}

LLVMValueRef cv_vload(G *g, DType t, LLVMValueRef base, LLVMValueRef off, LLVMValueRef idx,
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

void cv_vstore(G *g, DType t, LLVMValueRef x, LLVMValueRef base, LLVMValueRef off,
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

LLVMValueRef cv_wvec(Cv *d, LLVMValueRef i) {
  G *g = &d->g;
  LLVMValueRef l = LLVMBuildLoad2(g->b, g->vt, gep(g, g->ct, d->v[V_WP], i), "");
  LLVMSetAlignment(l, (unsigned)(g->vw * dtype_size(g->cd)));
  return l;
}

LLVMBasicBlockRef cv_open_inside(G *g, LLVMValueRef i, LLVMValueRef n) {
  LLVMBasicBlockRef in = blk(g, "cv_in"), after = blk(g, "cv_skip");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntULT, i, n, ""), in, after);
  LLVMPositionBuilderAtEnd(g->b, in);
  return after;
}

void cv_close_inside(G *g, LLVMBasicBlockRef after) {
  LLVMBuildBr(g->b, after);
  LLVMPositionBuilderAtEnd(g->b, after);
}

/* ---- the taps and the register block --------------------------------------- */

void cv_taps_open(Cv *d, CvTaps *t, LLVMValueRef xb, LLVMValueRef iy0) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  t->ky = gemm_loop_open(g, &t->ly, k64(g, 0), v[V_KH], k64(g, 1));
  LLVMValueRef iy = add(g, iy0, mul(g, t->ky, v[V_DH]));
  t->rowskip = cv_open_inside(g, iy, v[V_H]);
  t->xr = add(g, xb, mul(g, iy, v[V_XSH]));
  t->kx = gemm_loop_open(g, &t->lx, k64(g, 0), v[V_KW], k64(g, 1));
}

void cv_taps_close(Cv *d, CvTaps *t) {
  G *g = &d->g;
  gemm_loop_close(g, &t->lx);
  cv_close_inside(g, t->rowskip);
  gemm_loop_close(g, &t->ly);
}

LLVMValueRef cv_col(Cv *d, LLVMValueRef ox, int p) {
  G *g = &d->g;
  return add(g, ox, d->dir ? mul(g, k64(g, p), d->dir) : k64(g, p));
}

LLVMValueRef cv_tap_col(Cv *d, const CvTaps *t, LLVMValueRef ox, int p, bool checked,
                        LLVMBasicBlockRef *skip) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  LLVMValueRef ix = sub(g, mul(g, cv_col(d, ox, p), v[V_SW]), v[V_PW]);
  ix = add(g, ix, mul(g, t->kx, v[V_DW]));
  if (checked) *skip = cv_open_inside(g, ix, v[V_W]);
  return add(g, t->xr, mul(g, ix, v[V_XSW]));
}

void cv_block_open(Cv *d, CvBlock *b, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ox,
                   LLVMValueRef oc, int np, bool checked, bool tail, int nb, LLVMValueRef rows) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  int nob = cv_nvec(d), vw = g->vw;
  b->ox = ox, b->oc = oc, b->np = np, b->skip = NULL, b->tail = tail;
  LLVMValueRef kk = mul(g, v[V_KH], v[V_KW]), rkn = mul(g, rows, k64(g, nb));
  LLVMValueRef boff = add(g, mul(g, mul(g, kk, rows), v[V_OPAD]), oc);
  for (int j = 0; j < nob; j++) {
    LLVMValueRef bj = cv_wvec(d, add(g, boff, k64(g, j * vw)));
    for (int p = 0; p < np; p++) {
      b->acc[p][j] = gemm_entry_alloca(g, g->vt, 1);
      LLVMBuildStore(g->b, bj, b->acc[p][j]);
    }
  }
  LLVMValueRef wblk = mul(g, mul(g, oc, kk), rows);
  cv_taps_open(d, &b->t, xb, iy0);
  b->wt = add(g, wblk, mul(g, add(g, mul(g, b->t.ky, v[V_KW]), b->t.kx), rkn));
  for (int p = 0; p < np; p++) /* checked: np == 1 */
    b->xo[p] = cv_tap_col(d, &b->t, ox, p, checked, &b->skip);
}

void cv_block_close(Cv *d, CvBlock *b, LLVMValueRef ob) {
  G *g = &d->g;
  LLVMValueRef *v = d->v, at[16];
  if (b->skip) cv_close_inside(g, b->skip);
  cv_taps_close(d, &b->t);
  for (int p = 0; p < b->np; p++)
    at[p] = add(g, add(g, ob, mul(g, cv_col(d, b->ox, p), v[V_OSW])), b->oc);
  cv_store_block(d, b->acc, at, b->np, cv_nvec(d), b->oc, b->tail);
}

/* cv_store_block's stores, lanes masked by mask[j] (NULL: none). */
static void store_acc(Cv *d, LLVMValueRef acc[][8], const LLVMValueRef *at, int np, int nvec,
                      const LLVMValueRef *mask) {
  G *g = &d->g;
  for (int p = 0; p < np; p++)
    for (int j = 0; j < nvec; j++)
      cv_vstore(g, g->od, LLVMBuildLoad2(g->b, g->vt, acc[p][j], ""), d->v[V_OUT],
                add(g, at[p], k64(g, j * g->vw)), mask ? mask[j] : NULL);
}

void cv_store_block(Cv *d, LLVMValueRef acc[][8], const LLVMValueRef *at, int np, int nvec,
                    LLVMValueRef oc, bool tail) {
  G *g = &d->g;
  LLVMValueRef *v = d->v;
  int vw = g->vw;
  if (!tail) {
    store_acc(d, acc, at, np, nvec, NULL);
    return;
  }
  LLVMBasicBlockRef last = blk(g, "cv_last"), plain = blk(g, "cv_plain"),
                    done = blk(g, "cv_stored");
  LLVMBuildCondBr(g->b, lt(g, v[V_O], add(g, oc, k64(g, nvec * vw))), last, plain);
  LLVMPositionBuilderAtEnd(g->b, plain);
  store_acc(d, acc, at, np, nvec, NULL);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, last);
  LLVMValueRef mask[8];
  for (int j = 0; j < nvec; j++)
    mask[j] = LLVMBuildICmp(g->b, LLVMIntSLT,
                            cv_vadd(g, cv_splat(g, add(g, oc, k64(g, j * vw))), d->lanes),
                            cv_splat(g, v[V_O]), "");
  store_acc(d, acc, at, np, nvec, mask);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
}

void cv_call_epi(Cv *d, LLVMValueRef bt, LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef j0,
                 LLVMValueRef j1) {
  G *g = &d->g;
  LLVMTypeRef ps[6] = {g->ptr, g->i64, g->i64, g->i64, g->i64, g->i64};
  LLVMValueRef a[6] = {d->v[V_EPIARG], bt, i0, i1, j0, j1};
  LLVMBuildCall2(g->b, LLVMFunctionType(g->vd, ps, 6, 0), d->v[V_EPIFN], a, 6, "");
}

/* The output positions [*lo, *hi) of one dim (out of them, input in,
 * padding p, stride s, kernel k, dilation dl) whose taps all fall inside
 * the input. */
static void interior(G *g, LLVMValueRef out, LLVMValueRef in, LLVMValueRef p, LLVMValueRef s,
                     LLVMValueRef k, LLVMValueRef dl, LLVMValueRef *lo, LLVMValueRef *hi) {
  *lo = imin(g, out, cdiv(g, p, s));
  LLVMValueRef num = sub(g, add(g, sub(g, in, k64(g, 1)), p), mul(g, sub(g, k, k64(g, 1)), dl));
  LLVMValueRef h = add(g, sdiv(g, num, s), k64(g, 1));
  h = LLVMBuildSelect(g->b, lt(g, num, k64(g, 0)), k64(g, 0), h, "");
  h = imin(g, h, out);
  *hi = LLVMBuildSelect(g->b, lt(g, h, *lo), *lo, h, "");
}

void cv_interior(Cv *d, LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef *v = d->v;
  interior(&d->g, v[V_OW], v[V_W], v[V_PW], v[V_SW], v[V_KW], v[V_DW], lo, hi);
}

void cv_interior_rows(Cv *d, LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef *v = d->v;
  interior(&d->g, v[V_OH], v[V_H], v[V_PH], v[V_SH], v[V_KH], v[V_DH], lo, hi);
}

bool cv_is_one(LLVMValueRef v) { return LLVMIsAConstantInt(v) && LLVMConstIntGetSExtValue(v) == 1; }

/* ---- the parallel body ---------------------------------------------------- */

LLVMValueRef cv_fn_open(G *g, const char *name, LLVMTypeRef *ps, unsigned n) {
  LLVMValueRef f = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->vd, ps, n, 0));
  LLVMSetLinkage(f, LLVMPrivateLinkage);
  if (g->vec_bits >= 512) cg_prefer_512(g->ctx, f); /* keep zmm registers for the explicit vectors */
  g->fn = f;
  g->b = LLVMCreateBuilderInContext(g->ctx);
  LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, f, "entry"));
  return f;
}

LLVMValueRef cv_lanes(G *g) {
  LLVMValueRef *lv = malloc(sizeof *lv * (size_t)g->vw);
  for (int i = 0; i < g->vw; i++) lv[i] = k64(g, i);
  LLVMValueRef lanes = LLVMConstVector(lv, (unsigned)g->vw);
  free(lv);
  return lanes;
}

LLVMValueRef cv_body_open(Cv *d, const char *name, GLoop *l) {
  G *g = &d->g;
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  LLVMValueRef f = cv_fn_open(g, name, ps, 3);
  LLVMValueRef cx = LLVMGetParam(f, 0);
  for (int i = 0; i < V_COUNT; i++)
    d->v[i] = !d->k[i] || LLVMIsConstant(d->k[i])
                  ? d->k[i]
                  : LLVMBuildLoad2(g->b, i < V_NPTR ? g->ptr : g->i64, slot_ptr(g, cx, i), "");
  d->lanes = cv_lanes(g);
  return gemm_loop_open(g, l, LLVMGetParam(f, 1), LLVMGetParam(f, 2), k64(g, 1));
}

LLVMValueRef cv_body_close(Cv *d, GLoop *l) {
  G *g = &d->g;
  gemm_loop_close(g, l);
  LLVMBuildRetVoid(g->b);
  LLVMDisposeBuilder(g->b);
  return g->fn;
}

LLVMValueRef cv_launch(Cv *d, const GemmEmit *e, LLVMValueRef body, bool planes) {
  G *g = &d->g;
  g->b = e->b, g->fn = e->fn;
  return cv_launch_items(d, e, body, mul(g, d->k[V_N], d->k[planes ? V_O : V_OH]));
}

LLVMValueRef cv_launch_items(Cv *d, const GemmEmit *e, LLVMValueRef body, LLVMValueRef items) {
  G *g = &d->g;
  g->b = e->b, g->fn = e->fn;
  LLVMValueRef cx = gemm_entry_alloca(g, g->i64, V_COUNT);
  for (int i = 0; i < V_COUNT; i++)
    if (d->k[i] && !LLVMIsConstant(d->k[i])) set(g, cx, i, d->k[i]);
  LLVMTypeRef ps[4] = {g->i64, g->i64, g->ptr, g->ptr};
  LLVMValueRef a[4] = {items, k64(g, 1), body, cx};
  call(g, fdecl(g, "tdsl_parallel_for", g->vd, ps, 4), a, 4);
  return LLVMConstInt(g->i32, 0, 0);
}

void cv_pack_elem(G *g, const GemmTensor *t, LLVMValueRef src, LLVMValueRef o,
                  LLVMValueRef limit, LLVMValueRef p) {
  if (!t) {
    LLVMBuildStore(g->b, gemm_czero(g), p);
    return;
  }
  LLVMBasicBlockRef bl = blk(g, "cv_load"), bz = blk(g, "cv_zero"), bn = blk(g, "cv_next");
  LLVMBuildCondBr(g->b, lt(g, o, limit), bl, bz);
  LLVMPositionBuilderAtEnd(g->b, bl);
  LLVMBuildStore(g->b, gemm_load_c(g, t->base, src, t->dtype), p);
  LLVMBuildBr(g->b, bn);
  LLVMPositionBuilderAtEnd(g->b, bz);
  LLVMBuildStore(g->b, gemm_czero(g), p);
  LLVMBuildBr(g->b, bn);
  LLVMPositionBuilderAtEnd(g->b, bn);
}
