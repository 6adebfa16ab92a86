/* gemm_pack.c — packing GEMM operands (gemm_impl.h): A into MR-high and B
 * into NR-wide panels of the compute type, from any strides (MAT), from
 * the conv input with its zero padding (IM2COL: masked vector loads for
 * B, channel runs for A) or from the conv weight (WEIGHT), or evaluating
 * a prologue's expression per element (emit_pack_pro), or, for a
 * matmul's A whose expression moves along K only through contiguous
 * loads, per row as vectors along K transposed into the panel
 * (pack_a_pro_rows); the full panels
 * of a MAT B as vectors: with contiguous rows (pack_b_rows) or with
 * lanes contiguous along K, as in x @ w.T, through VW x VW in-register
 * transposes (pack_b_kmajor); the panels of a MAT A with rows contiguous
 * along K (a row-major A) through the same transposes (pack_a_rows);
 * a group of B panels at a time for block_body's fused packing
 * (gemm_pack_b_group); row pointers opaque to loop strength reduction
 * (gemm_opaque_ptr, also for gemm_kernel.c's C tile).
 * Needs: gemm_impl.h.  Used by: gemm.c, gemm_kernel.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>

#include "gemm_impl.h"

/* ---- im2col packing ---------------------------------------------------------
 * B panels (lanes = output pixels, NV vectors of VW lanes; the NCHW
 * orientation): for each K index each vector is one masked load of the
 * input, the mask being the zero padding and the lanes past the panel's
 * end, so neither the interior nor the edges branch per element.  At
 * panel setup each vector's lane offsets iy0 * XH + ix0 * XW are
 * classified: consecutive (stride 1 over dense columns; across output
 * rows too when the rows are dense and OW == W, as for a "same" conv or
 * a 1x1 conv, which so packs like a plain matrix), every second element
 * (stride 2: one double-width masked load, even lanes kept), else a
 * masked gather.  Masked-off lanes are never read.
 * A panels (lanes = output pixels, K order (ky, kx, ci); the
 * channels-last orientation): per lane and tap one bounds test, then a
 * run of channels copied with the channel stride (1 in a channels-last
 * input) or zeros. */

LLVMTypeRef gemm_vec_of(LLVMTypeRef t, int n) { return LLVMVectorType(t, (unsigned)n); }
#define vec_of gemm_vec_of
#define splat_n gemm_splat_n
#define vconv gemm_vconv

LLVMValueRef gemm_splat_n(G *g, LLVMValueRef s, int n) {
  LLVMTypeRef t = vec_of(LLVMTypeOf(s), n);
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(t), s, LLVMConstInt(g->i32, 0, 0), "");
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(t), LLVMConstNull(vec_of(g->i32, n)), "");
}

/* <n x i64> {0, step, 2 * step, ...} (n <= 64) */
static LLVMValueRef iota(G *g, int n, long long step) {
  LLVMValueRef c[64];
  for (int i = 0; i < n; i++) c[i] = k64(g, i * step);
  return LLVMConstVector(c, (unsigned)n);
}

LLVMValueRef gemm_intrin(G *g, const char *name, LLVMTypeRef *ov, size_t nov, LLVMValueRef *a,
                           unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(g->mod, id, ov, nov);
  return LLVMBuildCall2(g->b, LLVMIntrinsicGetType(g->ctx, id, ov, nov), f, a, n, "");
}

/* Whether every lane of the i1 vector c is set. */
static LLVMValueRef all_of(G *g, LLVMValueRef c) {
  LLVMTypeRef t = LLVMTypeOf(c);
  return gemm_intrin(g, "llvm.vector.reduce.and", &t, 1, &c, 1);
}

/* A vector of storage elements (dtype t) converted to the compute type,
 * as load_c converts one. */
LLVMValueRef gemm_vconv(G *g, LLVMValueRef v, DType t) {
  switch (t) {
  case DT_F16: return LLVMBuildFPExt(g->b, v, g->vt, "");
  case DT_BF16: {
    LLVMValueRef w = LLVMBuildZExt(g->b, v, vec_of(g->i32, g->vw), "");
    w = LLVMBuildShl(g->b, w, splat_n(g, LLVMConstInt(g->i32, 16, 0), g->vw), "");
    return LLVMBuildBitCast(g->b, w, g->vt, "");
  }
  case DT_F32: return g->cd == DT_F64 ? LLVMBuildFPExt(g->b, v, g->vt, "") : v;
  case DT_F64: return v;
  case DT_I32: case DT_I64: /* to the integer compute type, i32 or i64 */
    return LLVMTypeOf(v) == g->vt ? v : LLVMBuildIntCast2(g->b, v, g->vt, 1, "");
  case DT_BOOL: case DT_U8: return LLVMBuildZExt(g->b, v, g->vt, "");
  default: return LLVMBuildSExt(g->b, v, g->vt, "");
  }
}

/* How a vector's lanes lie (offsets ofs, the first o0; lanes not in lv
 * ignored): 1 consecutive, 2 every second element, 0 otherwise. */
static LLVMValueRef lane_mode(G *g, LLVMValueRef ofs, LLVMValueRef o0, LLVMValueRef lv) {
  LLVMValueRef d = sub(g, ofs, splat_n(g, o0, g->vw)), skip = LLVMBuildNot(g->b, lv, ""), m = k64(g, 0);
  for (int s = 2; s >= 1; s--) {
    LLVMValueRef eq = LLVMBuildICmp(g->b, LLVMIntEQ, d, iota(g, g->vw, s), "");
    m = LLVMBuildSelect(g->b, all_of(g, LLVMBuildOr(g->b, eq, skip, "")), k64(g, s), m, "");
  }
  return m;
}

/* Lanes at base + ofs + delta (the first at o0 + delta) where mask m is
 * set, zeros elsewhere, converted to the compute type; mode: lane_mode. */
static LLVMValueRef load_lanes(G *g, LLVMValueRef base, DType dt, LLVMValueRef mode,
                               LLVMValueRef o0, LLVMValueRef ofs, LLVMValueRef delta,
                               LLVMValueRef m) {
  int n = g->vw;
  LLVMTypeRef st = gemm_storage(g, dt), sv = vec_of(st, n), sv2 = vec_of(st, 2 * n);
  LLVMValueRef al = LLVMConstInt(g->i32, (unsigned)dtype_size(dt), 0);
  LLVMValueRef p = gep(g, st, base, add(g, o0, delta)), got[3], idx[64];
  LLVMBasicBlockRef bb[3] = {blk(g, "lanes_gather"), blk(g, "lanes_run"), blk(g, "lanes_step2")};
  LLVMBasicBlockRef join = blk(g, "lanes");
  LLVMValueRef sw = LLVMBuildSwitch(g->b, mode, bb[0], 2);
  LLVMAddCase(sw, k64(g, 1), bb[1]);
  LLVMAddCase(sw, k64(g, 2), bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[0]);
  LLVMTypeRef ov[2] = {sv, vec_of(g->ptr, n)};
  LLVMValueRef a[4] = {gep(g, st, base, add(g, ofs, splat_n(g, delta, n))), al, m, LLVMConstNull(sv)};
  got[0] = gemm_intrin(g, "llvm.masked.gather", ov, 2, a, 4);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, bb[1]);
  ov[1] = g->ptr;
  a[0] = p;
  got[1] = gemm_intrin(g, "llvm.masked.load", ov, 2, a, 4);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, bb[2]); /* lanes 2i of a double-width load */
  for (int i = 0; i < n; i++)
    idx[2 * i] = LLVMConstInt(g->i32, (unsigned)i, 0), idx[2 * i + 1] = LLVMConstInt(g->i32, (unsigned)n, 0);
  a[2] = LLVMBuildShuffleVector(g->b, m, LLVMConstNull(LLVMTypeOf(m)), LLVMConstVector(idx, (unsigned)(2 * n)), "");
  ov[0] = sv2, a[3] = LLVMConstNull(sv2);
  LLVMValueRef wide = gemm_intrin(g, "llvm.masked.load", ov, 2, a, 4);
  for (int i = 0; i < n; i++) idx[i] = LLVMConstInt(g->i32, (unsigned)(2 * i), 0);
  got[2] = LLVMBuildShuffleVector(g->b, wide, LLVMGetUndef(sv2), LLVMConstVector(idx, (unsigned)n), "");
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, join);
  LLVMValueRef v = LLVMBuildPhi(g->b, sv, "");
  LLVMAddIncoming(v, got, bb, 3);
  return vconv(g, v, dt);
}

/* pack_b for an IM2COL operand: see above. */
static LLVMValueRef emit_pack_im2col_vec(G *g) {
  LLVMTypeRef ps[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, "pack_b", ps, 5);
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  int n = g->vw;
  LLVMValueRef base = getp(g, cx, X_B), off = get(g, cx, X_BOFF), pc = get(g, cx, X_PC);
  LLVMValueRef H = splat_n(g, get(g, cx, X_H), n), W = splat_n(g, get(g, cx, X_W), n);
  LLVMValueRef xh = get(g, cx, X_XH), xw = get(g, cx, X_XW), iy0, ix0;
  gemm_lane_origins(g, cx, i0, nvalid, g->nr, &iy0, &ix0);
  LLVMValueRef iy[4], ix[4], ofs[4], o0[4], mode[4];
  for (int v = 0; v < g->nv; v++) {
    LLVMValueRef ly = LLVMBuildLoad2(g->b, vec_of(g->i64, n), gep(g, g->i64, iy0, k64(g, v * n)), "");
    LLVMValueRef lx = LLVMBuildLoad2(g->b, vec_of(g->i64, n), gep(g, g->i64, ix0, k64(g, v * n)), "");
    LLVMSetAlignment(ly, 8), LLVMSetAlignment(lx, 8);
    iy[v] = ly, ix[v] = lx;
    ofs[v] = add(g, mul(g, ly, splat_n(g, xh, n)), mul(g, lx, splat_n(g, xw, n)));
    o0[v] = LLVMBuildExtractElement(g->b, ofs[v], LLVMConstInt(g->i32, 0, 0), "");
    LLVMValueRef lane = add(g, iota(g, n, 1), splat_n(g, k64(g, v * n), n));
    mode[v] = lane_mode(g, ofs[v], o0[v], LLVMBuildICmp(g->b, LLVMIntSLT, lane, splat_n(g, nvalid, n), ""));
  }
  GLoop lp;
  LLVMValueRef kst[3], kv[3];
  gemm_kwalk_init(g, cx, pc, kst);
  LLVMValueRef p = gemm_loop_open(g, &lp, k64(g, 0), kc, k64(g, 1));
  gemm_kwalk_get(g, kst, kv);
  LLVMValueRef dy = mul(g, kv[1], get(g, cx, X_DH)), dx = mul(g, kv[2], get(g, cx, X_DW));
  LLVMValueRef delta = add(g, add(g, off, mul(g, kv[0], get(g, cx, X_XC))),
                           add(g, mul(g, dy, xh), mul(g, dx, xw)));
  LLVMValueRef row = gep(g, g->ct, dst, mul(g, p, k64(g, g->nr)));
  for (int v = 0; v < g->nv; v++) {
    LLVMValueRef my = LLVMBuildICmp(g->b, LLVMIntULT, add(g, iy[v], splat_n(g, dy, n)), H, "");
    LLVMValueRef mx = LLVMBuildICmp(g->b, LLVMIntULT, add(g, ix[v], splat_n(g, dx, n)), W, "");
    LLVMValueRef val = load_lanes(g, base, g->bd, mode[v], o0[v], ofs[v], delta,
                                  LLVMBuildAnd(g->b, my, mx, ""));
    LLVMValueRef st = LLVMBuildStore(g->b, val, gep(g, g->ct, row, k64(g, v * n)));
    LLVMSetAlignment(st, (unsigned)dtype_size(g->cd));
  }
  gemm_kwalk_next(g, cx, kst, kv);
  gemm_loop_close(g, &lp);
  LLVMBuildRetVoid(g->b);
  return f;
}

/* One lane's run of `run` K indices at tap (dy, dx) from channel offset
 * src0: copied with the channel stride, or zeros outside the input. */
static void pack_lane_run(G *g, LLVMValueRef cx, LLVMValueRef d0, LLVMValueRef y, LLVMValueRef x,
                          LLVMValueRef src0, LLVMValueRef run, int R) {
  LLVMValueRef xc = get(g, cx, X_XC), base = getp(g, cx, X_A);
  LLVMValueRef inb = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntULT, y, get(g, cx, X_H), ""),
                                  LLVMBuildICmp(g->b, LLVMIntULT, x, get(g, cx, X_W), ""), "");
  LLVMBasicBlockRef bc = blk(g, "run_copy"), bz = blk(g, "run_zero"), bj = blk(g, "run_done");
  LLVMBuildCondBr(g->b, inb, bc, bz);
  LLVMPositionBuilderAtEnd(g->b, bc);
  LLVMValueRef s = add(g, src0, add(g, mul(g, y, get(g, cx, X_XH)), mul(g, x, get(g, cx, X_XW))));
  GLoop l;
  LLVMValueRef t = gemm_loop_open(g, &l, k64(g, 0), run, k64(g, 1));
  LLVMBuildStore(g->b, gemm_load_c(g, base, add(g, s, mul(g, t, xc)), g->ad),
                 gep(g, g->ct, d0, mul(g, t, k64(g, R))));
  gemm_loop_close(g, &l);
  LLVMBuildBr(g->b, bj);
  LLVMPositionBuilderAtEnd(g->b, bz);
  t = gemm_loop_open(g, &l, k64(g, 0), run, k64(g, 1));
  LLVMBuildStore(g->b, gemm_czero(g), gep(g, g->ct, d0, mul(g, t, k64(g, R))));
  gemm_loop_close(g, &l);
  LLVMBuildBr(g->b, bj);
  LLVMPositionBuilderAtEnd(g->b, bj);
}

/* pack_a for an IM2COL operand (K order (ky, kx, ci)): see above. */
static LLVMValueRef emit_pack_im2col_rows(G *g) {
  LLVMTypeRef ps[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, "pack_a", ps, 5);
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  int R = g->mr;
  LLVMValueRef kw = get(g, cx, X_KW), cg = gemm_cin_per_group(g, cx), iy0, ix0;
  gemm_lane_origins(g, cx, i0, nvalid, R, &iy0, &ix0);
  GLoop ls, ll;
  /* one iteration per run of channels at one tap; its step is the run */
  LLVMValueRef p = gemm_loop_open(g, &ls, k64(g, 0), kc, k64(g, 1));
  LLVMValueRef kp = add(g, get(g, cx, X_PC), p), tap = sdiv(g, kp, cg), ci0 = srem(g, kp, cg);
  LLVMValueRef run = imin(g, sub(g, cg, ci0), sub(g, kc, p));
  LLVMValueRef dy = mul(g, sdiv(g, tap, kw), get(g, cx, X_DH));
  LLVMValueRef dx = mul(g, srem(g, tap, kw), get(g, cx, X_DW));
  LLVMValueRef src0 = add(g, get(g, cx, X_AOFF), mul(g, ci0, get(g, cx, X_XC)));
  LLVMValueRef lane = gemm_loop_open(g, &ll, k64(g, 0), k64(g, R), k64(g, 1));
  LLVMValueRef y = add(g, LLVMBuildLoad2(g->b, g->i64, gep(g, g->i64, iy0, lane), ""), dy);
  LLVMValueRef x = add(g, LLVMBuildLoad2(g->b, g->i64, gep(g, g->i64, ix0, lane), ""), dx);
  LLVMValueRef d0 = gep(g, g->ct, dst, add(g, mul(g, p, k64(g, R)), lane));
  pack_lane_run(g, cx, d0, y, x, src0, run, R);
  gemm_loop_close(g, &ll);
  ls.step = run;
  gemm_loop_close(g, &ls);
  LLVMBuildRetVoid(g->b);
  return f;
}

/* A loop that loads MR (or VW) rows of an operand with a run-time row
 * stride gave loop strength reduction one address per row, each a sum
 * over the row index, the stride and the induction variables of every
 * loop around it (the panel loops of the block body): LSR's search for
 * shared formulae over those sums was the largest part of its time,
 * half of it in the block body's inlined pack_a_rows and the fused B
 * copy (gemm_pack_b_group; mlp: LSR 108 -> 59 million of tdslc's
 * instructions, callgrind).  A row start made opaque just outside the
 * loop leaves LSR a base register and the loop's offset, the
 * addressing it chose before (the loops' instructions are the same,
 * other registers, fewer spills around them; bench/README.md).  Where
 * the rows are many (pack_b_kmajor's VW), only the first is opaque and
 * the others lie at multiples of the stride from it: 16 opaque bases
 * did not fit in the registers. */
LLVMValueRef gemm_opaque_ptr(G *g, LLVMValueRef p) {
  if (!(g->isa & GEMM_ISA_X86)) return p;
  LLVMTypeRef ft = LLVMFunctionType(g->ptr, &g->ptr, 1, 0);
  LLVMValueRef fence = LLVMGetInlineAsm(ft, "", 0, "=r,0", 4, 0, 0, LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(g->b, ft, fence, &p, 1, "");
}

void gemm_transpose(G *g, LLVMValueRef *v, int n) {
  LLVMValueRef out[64], lo[64], hi[64];
  if (n < 2) return;
  for (int i = 0; i < n / 2; i++) {
    lo[2 * i] = LLVMConstInt(g->i32, (unsigned)i, 0), lo[2 * i + 1] = LLVMConstInt(g->i32, (unsigned)(n + i), 0);
    hi[2 * i] = LLVMConstInt(g->i32, (unsigned)(n / 2 + i), 0);
    hi[2 * i + 1] = LLVMConstInt(g->i32, (unsigned)(n + n / 2 + i), 0);
  }
  LLVMValueRef ml = LLVMConstVector(lo, (unsigned)n), mh = LLVMConstVector(hi, (unsigned)n);
  /* Between rounds each vector goes through an empty inline asm (its
   * input is its output, in the same register): X86's shuffle combiner
   * otherwise walks every round's shuffles back through all the rounds
   * before, three quarters of instruction selection for a 16 x 16
   * transpose (mlp at x86-64-v4: 1281 -> 1125 million instructions of
   * tdslc), and only turned the shuffles of rows past a short panel's
   * (MR = 12) into more instructions (blends, lane extracts). */
  LLVMTypeRef vt = LLVMTypeOf(v[0]), ft = LLVMFunctionType(vt, &vt, 1, 0);
  LLVMValueRef fence = g->isa & GEMM_ISA_X86 /* "=v" is x86's; another host goes without */
                           ? LLVMGetInlineAsm(ft, "", 0, "=v,0", 4, 0, 0, LLVMInlineAsmDialectATT, 0)
                           : NULL;
  for (int r = 1; r < n; r *= 2) {
    for (int i = 0; i < n / 2; i++) {
      out[2 * i] = LLVMBuildShuffleVector(g->b, v[i], v[i + n / 2], ml, "");
      out[2 * i + 1] = LLVMBuildShuffleVector(g->b, v[i], v[i + n / 2], mh, "");
    }
    for (int i = 0; i < n; i++)
      v[i] = 2 * r < n && fence ? LLVMBuildCall2(g->b, ft, fence, &out[i], 1, "") : out[i];
  }
}

/* A full B panel (nvalid == NR) whose lanes run along K (X_BP == 1: the
 * [N, K] weight of x @ w.T): VW x VW blocks loaded as VW runs of K,
 * transposed in registers and stored as VW panel rows.  Each block of
 * VW lanes walks all of the panel's K before the next block starts: VW
 * rows of B read as sequential streams, where stepping K outside the
 * blocks read NR rows at once one line each (measured on llama_block,
 * whose weights come from memory each call: 2-4% of its CPU time; a
 * B that stays in cache packs as fast either way).  Returns the K
 * index where the caller's scalar loop goes on (the K tail, or 0 when
 * this path does not apply). */
static LLVMValueRef pack_b_kmajor(G *g, LLVMValueRef cx, LLVMValueRef dst, LLVMValueRef i0,
                                  LLVMValueRef nvalid, LLVMValueRef kc) {
  int n = g->vw;
  LLVMValueRef ok = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, get(g, cx, X_BP), k64(g, 1), ""),
                                 LLVMBuildICmp(g->b, LLVMIntEQ, nvalid, k64(g, g->nr), ""), "");
  LLVMValueRef pend = LLVMBuildSelect(g->b, ok, sub(g, kc, srem(g, kc, k64(g, n))), k64(g, 0), "");
  LLVMValueRef base = getp(g, cx, X_B), si = get(g, cx, X_BI);
  LLVMValueRef src0 = add(g, add(g, get(g, cx, X_BOFF), get(g, cx, X_PC)), mul(g, i0, si));
  LLVMTypeRef st = gemm_storage(g, g->bd), sv = vec_of(st, n);
  GLoop lp, lv;
  /* the panel's NV blocks in a loop: one transpose for LLVM to compile */
  LLVMValueRef v = gemm_loop_open(g, &lv, k64(g, 0), k64(g, g->nv * n), k64(g, n));
  /* the block's first row, opaque (gemm_opaque_ptr); the others at
   * multiples of the stride from it */
  LLVMValueRef row0 = gemm_opaque_ptr(g, gep(g, st, base, add(g, src0, mul(g, v, si)))), r[64];
  LLVMValueRef p = gemm_loop_open(g, &lp, k64(g, 0), pend, k64(g, n));
  for (int i = 0; i < n; i++) {
    r[i] = LLVMBuildLoad2(g->b, sv, gep(g, st, row0, add(g, p, mul(g, k64(g, i), si))), "");
    LLVMSetAlignment(r[i], (unsigned)dtype_size(g->bd));
    r[i] = vconv(g, r[i], g->bd);
  }
  gemm_transpose(g, r, n);
  for (int j = 0; j < n; j++) {
    LLVMValueRef d = gep(g, g->ct, dst, add(g, mul(g, add(g, p, k64(g, j)), k64(g, g->nr)), v));
    LLVMSetAlignment(LLVMBuildStore(g->b, r[j], d), (unsigned)(n * dtype_size(g->cd)));
  }
  gemm_loop_close(g, &lp);
  gemm_loop_close(g, &lv);
  return pend;
}

/* The first `rows` lanes of the transposed vector x (a panel row's group
 * of lanes) at d: where AVX or AVX-512 masks stores, one store of the
 * whole vector under a constant mask; else a <rows x T> store, whose
 * illegal type (MR = 12 of 16 lanes, 6 of 8) costs instruction selection
 * more (mlp's compile at x86-64-v4: 2% of tdslc's instructions for one
 * prologue panel). */
static void store_rows(G *g, LLVMValueRef x, LLVMValueRef d, int rows) {
  int n = g->vw;
  unsigned al = (unsigned)dtype_size(g->cd);
  LLVMValueRef idx[64];
  if (rows == n) {
    LLVMSetAlignment(LLVMBuildStore(g->b, x, d), al);
  } else if (g->vec_bits >= 256 && (g->isa & GEMM_ISA_X86)) {
    for (int i = 0; i < n; i++) idx[i] = LLVMConstInt(g->i1, i < rows, 0);
    LLVMTypeRef ov[2] = {LLVMTypeOf(x), g->ptr};
    LLVMValueRef a[4] = {x, d, LLVMConstInt(g->i32, al, 0), LLVMConstVector(idx, (unsigned)n)};
    gemm_intrin(g, "llvm.masked.store", ov, 2, a, 4);
  } else {
    for (int i = 0; i < rows; i++) idx[i] = LLVMConstInt(g->i32, (unsigned)i, 0);
    x = LLVMBuildShuffleVector(g->b, x, LLVMGetUndef(LLVMTypeOf(x)), LLVMConstVector(idx, (unsigned)rows), "");
    LLVMSetAlignment(LLVMBuildStore(g->b, x, d), al);
  }
}

/* An A panel whose rows run along K (X_AP == 1: a row-major A), as
 * vectors: for each VW K indices, the panel's rows in groups of VW are
 * loaded as runs of K (rows past nvalid repeat the last valid row and
 * become zeros), transposed in registers (transpose) and stored as VW
 * panel rows of the group's lanes (a <rows x T> store each).  Returns
 * the K index where the caller's scalar loop goes on (the K tail, or 0
 * when this path does not apply). */
static LLVMValueRef pack_a_rows(G *g, LLVMValueRef cx, LLVMValueRef dst, LLVMValueRef i0,
                                LLVMValueRef nvalid, LLVMValueRef kc) {
  int n = g->vw;
  LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntEQ, get(g, cx, X_AP), k64(g, 1), "");
  LLVMValueRef pend = LLVMBuildSelect(g->b, ok, sub(g, kc, srem(g, kc, k64(g, n))), k64(g, 0), "");
  LLVMValueRef base = getp(g, cx, X_A), si = get(g, cx, X_AI);
  LLVMValueRef src0 = add(g, get(g, cx, X_AOFF), get(g, cx, X_PC)), last = sub(g, nvalid, k64(g, 1));
  LLVMTypeRef st = gemm_storage(g, g->ad), sv = vec_of(st, n);
  LLVMValueRef rowp[64], live[64];
  for (int r = 0; r < g->mr; r++) { /* each lane's row, clamped to the last valid row */
    LLVMValueRef rr = imin(g, k64(g, r), last);
    rowp[r] = gemm_opaque_ptr(g, gep(g, st, base, add(g, src0, mul(g, add(g, i0, rr), si))));
    live[r] = lt(g, k64(g, r), nvalid);
  }
  GLoop lp;
  LLVMValueRef p = gemm_loop_open(g, &lp, k64(g, 0), pend, k64(g, n));
  for (int r0 = 0; r0 < g->mr; r0 += n) {
    int rows = g->mr - r0 < n ? g->mr - r0 : n;
    LLVMValueRef v[64];
    for (int i = 0; i < n; i++) {
      if (i >= rows) {
        v[i] = LLVMGetUndef(g->vt);
        continue;
      }
      LLVMValueRef x = LLVMBuildLoad2(g->b, sv, gep(g, st, rowp[r0 + i], p), "");
      LLVMSetAlignment(x, (unsigned)dtype_size(g->ad));
      v[i] = LLVMBuildSelect(g->b, live[r0 + i], vconv(g, x, g->ad), LLVMConstNull(g->vt), "");
    }
    gemm_transpose(g, v, n);
    for (int j = 0; j < n; j++)
      store_rows(g, v[j], gep(g, g->ct, dst, add(g, mul(g, add(g, p, k64(g, j)), k64(g, g->mr)), k64(g, r0))),
                 rows);
  }
  gemm_loop_close(g, &lp);
  return pend;
}

/* pack(ctx, dst, i0, nvalid, kc): dst[p * R + lane] = X(i0 + lane, pc + p)
 * for p < kc, lane < R (0 for lane >= nvalid).  which: 0 = A, 1 = B.
 * MAT and WEIGHT operands here, IM2COL ones above. */
static LLVMValueRef emit_pack_pro(G *g, int which);

LLVMValueRef gemm_emit_pack(G *g, int which) {
  GemmKind kind = which ? g->kb : g->ka;
  if (gemm_lowp_packs(g, which)) return gemm_lowp_emit_pack(g, which);
  if (which ? g->pb : g->pa) return emit_pack_pro(g, which);
  if (kind == GK_IM2COL) return which ? emit_pack_im2col_vec(g) : emit_pack_im2col_rows(g);
  LLVMTypeRef ps[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, which ? "pack_b" : "pack_a", ps, 5);
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  DType dt = which ? g->bd : g->ad;
  int R = which ? g->nr : g->mr;
  LLVMValueRef base = getp(g, cx, which ? X_B : X_A), off = get(g, cx, which ? X_BOFF : X_AOFF);
  LLVMValueRef si = get(g, cx, which ? X_BI : X_AI), sp = get(g, cx, which ? X_BP : X_AP);
  LLVMValueRef pc = get(g, cx, X_PC), p0 = k64(g, 0);
  if (kind == GK_MAT && which) p0 = pack_b_kmajor(g, cx, dst, i0, nvalid, kc);
  if (kind == GK_MAT && !which) p0 = pack_a_rows(g, cx, dst, i0, nvalid, kc);
  GLoop lp, ll;
  LLVMValueRef kst[3], kv[3], pofs;
  if (kind == GK_WEIGHT) gemm_kwalk_init(g, cx, pc, kst);
  LLVMValueRef p = gemm_loop_open(g, &lp, p0, kc, k64(g, 1));
  if (kind == GK_MAT) {
    pofs = add(g, off, mul(g, add(g, pc, p), sp));
  } else {
    gemm_kwalk_get(g, kst, kv);
    pofs = add(g, off, add(g, mul(g, kv[0], get(g, cx, X_WC)),
                           add(g, mul(g, kv[1], get(g, cx, X_WH)), mul(g, kv[2], get(g, cx, X_WW)))));
  }
  LLVMValueRef row = gep(g, g->ct, dst, mul(g, p, k64(g, R)));
  LLVMValueRef lane = gemm_loop_open(g, &ll, k64(g, 0), k64(g, R), k64(g, 1));
  /* clamp the lane so the load stays inside the operand */
  LLVMValueRef cl = imin(g, lane, sub(g, nvalid, k64(g, 1)));
  LLVMValueRef got = gemm_load_c(g, base, add(g, pofs, mul(g, add(g, i0, cl), si)), dt);
  LLVMValueRef v = LLVMBuildSelect(g->b, lt(g, lane, nvalid), got, gemm_czero(g), "");
  LLVMBuildStore(g->b, v, gep(g, g->ct, row, lane));
  gemm_loop_close(g, &ll);
  if (kind == GK_WEIGHT) gemm_kwalk_next(g, cx, kst, kv);
  gemm_loop_close(g, &lp);
  LLVMBuildRetVoid(g->b);
  return f;
}

/* The logical position (gemm.h GemmIdx) of lane q, K index k (kv: the
 * conv's (ci, ky, kx) there) of an operand of kind `kind`; y, x: an
 * IM2COL element's input row and column.  *inb (IM2COL only, else NULL):
 * whether the element lies inside the input (else the position is
 * clamped to row and column 0 and the element is padding). */
static GemmIdx pro_index(G *g, LLVMValueRef cx, GemmKind kind, int which, LLVMValueRef q,
                         LLVMValueRef k, const LLVMValueRef kv[3], LLVMValueRef y,
                         LLVMValueRef x, LLVMValueRef *inb) {
  GemmIdx ix = {.bt = get(g, cx, X_BT)};
  *inb = NULL;
  if (kind == GK_MAT) {
    ix.i = which ? k : q;
    ix.j = which ? q : k;
    return ix;
  }
  ix.ci = kv[0], ix.ky = kv[1], ix.kx = kv[2];
  if (kind == GK_WEIGHT) {
    ix.i = q;
    return ix;
  }
  *inb = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntULT, y, get(g, cx, X_H), ""),
                      LLVMBuildICmp(g->b, LLVMIntULT, x, get(g, cx, X_W), ""), "");
  ix.y = LLVMBuildSelect(g->b, *inb, y, k64(g, 0), "");
  ix.x = LLVMBuildSelect(g->b, *inb, x, k64(g, 0), "");
  return ix;
}

/* gemm_transpose of 16 <16 x float> rows (AVX-512) as two-source
 * permutes (vpermt2ps) whose index vectors LLVM cannot see (they pass
 * through the empty inline asm, so instcombine does not turn the permutes
 * back into shuffles): instruction selection then has no shuffle to
 * lower or combine.  The instructions are those LLVM picks for most of
 * gemm_transpose's shuffles; its lowering of the 64 shuffles cost mlp's
 * compile at x86-64-v4 1% of tdslc's instructions. */
static void transpose_permv(G *g, LLVMValueRef *v) {
  enum { N = 16 };
  LLVMValueRef out[N], lo[N], hi[N];
  for (int i = 0; i < N / 2; i++) {
    lo[2 * i] = LLVMConstInt(g->i32, (unsigned)i, 0), lo[2 * i + 1] = LLVMConstInt(g->i32, (unsigned)(N + i), 0);
    hi[2 * i] = LLVMConstInt(g->i32, (unsigned)(N / 2 + i), 0);
    hi[2 * i + 1] = LLVMConstInt(g->i32, (unsigned)(N + N / 2 + i), 0);
  }
  LLVMTypeRef it = vec_of(g->i32, N), ft = LLVMFunctionType(it, &it, 1, 0);
  LLVMValueRef fence = LLVMGetInlineAsm(ft, "", 0, "=v,0", 4, 0, 0, LLVMInlineAsmDialectATT, 0);
  LLVMValueRef m[2] = {LLVMConstVector(lo, N), LLVMConstVector(hi, N)};
  for (int h = 0; h < 2; h++) m[h] = LLVMBuildCall2(g->b, ft, fence, &m[h], 1, "");
  for (int r = 1; r < N; r *= 2) {
    for (int i = 0; i < N / 2; i++)
      for (int h = 0; h < 2; h++) {
        LLVMValueRef a[3] = {v[i], m[h], v[i + N / 2]};
        out[2 * i + h] = gemm_intrin(g, "llvm.x86.avx512.vpermi2var.ps.512", NULL, 0, a, 3);
      }
    memcpy(v, out, sizeof out);
  }
}

/* pack_a (as emit_pack) of a matmul's A whose prologue gives rows along
 * K as vectors (GemmPrologue.row): per VW columns of K, each of the MR
 * rows evaluated as one vector into a stack tile (one copy of the
 * expression, in a loop over the rows; rows >= nvalid zero), the tile
 * transposed in registers as pack_a_rows does and stored as VW panel
 * rows.  The K tail is the same code: its loads are masked to the
 * columns left, and its panel rows go through a second stack tile of
 * which only those columns are copied. */
static void pack_a_pro_rows(G *g, const GemmPrologue *pr, LLVMValueRef cx, LLVMValueRef dst,
                            LLVMValueRef i0, LLVMValueRef nvalid, LLVMValueRef kc) {
  int n = g->vw, R = g->mr, al = (int)dtype_size(g->cd);
  LLVMValueRef tile = gemm_entry_alloca(g, g->ct, R * n), tail = gemm_entry_alloca(g, g->ct, R * n);
  LLVMValueRef pc = get(g, cx, X_PC), bt = get(g, cx, X_BT), last = sub(g, nvalid, k64(g, 1));
  GLoop lp, lr;
  LLVMValueRef p = gemm_loop_open(g, &lp, k64(g, 0), kc, k64(g, n));
  LLVMValueRef left = sub(g, kc, p), full = LLVMBuildICmp(g->b, LLVMIntSGE, left, k64(g, n), "");
  LLVMValueRef mask = LLVMBuildICmp(g->b, LLVMIntSLT, iota(g, n, 1), splat_n(g, left, n), "");
  LLVMValueRef r = gemm_loop_open(g, &lr, k64(g, 0), k64(g, R), k64(g, 1));
  GemmIdx ix = {.bt = bt, .i = add(g, i0, imin(g, r, last)), .j = add(g, pc, p)};
  LLVMValueRef v = LLVMBuildSelect(g->b, lt(g, r, nvalid), pr->row(pr->user, &ix, mask),
                                   LLVMConstNull(g->vt), "");
  LLVMSetAlignment(LLVMBuildStore(g->b, v, gep(g, g->ct, tile, mul(g, r, k64(g, n)))), (unsigned)al);
  gemm_loop_close(g, &lr);
  LLVMValueRef out = LLVMBuildSelect(g->b, full, gep(g, g->ct, dst, mul(g, p, k64(g, R))), tail, "");
  for (int r0 = 0; r0 < R; r0 += n) {
    int rows = R - r0 < n ? R - r0 : n;
    LLVMValueRef t[64];
    for (int i = 0; i < n; i++) {
      if (i >= rows) {
        t[i] = LLVMGetUndef(g->vt);
        continue;
      }
      t[i] = LLVMBuildLoad2(g->b, g->vt, gep(g, g->ct, tile, k64(g, (r0 + i) * n)), "");
      LLVMSetAlignment(t[i], (unsigned)al);
    }
    if (n == 16 && (g->isa & GEMM_ISA_X86)) transpose_permv(g, t);
    else gemm_transpose(g, t, n);
    for (int j = 0; j < n; j++) store_rows(g, t[j], gep(g, g->ct, out, k64(g, j * R + r0)), rows);
  }
  LLVMBasicBlockRef bcopy = blk(g, "pro_tail"), done = blk(g, "pro_next");
  LLVMBuildCondBr(g->b, full, done, bcopy);
  LLVMPositionBuilderAtEnd(g->b, bcopy);
  LLVMBuildMemCpy(g->b, gep(g, g->ct, dst, mul(g, p, k64(g, R))), (unsigned)al, tail, (unsigned)al,
                  mul(g, left, k64(g, R * al)));
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
  gemm_loop_close(g, &lp);
}

/* pack (as emit_pack) for an operand with a prologue: each element is the
 * caller's expression at its logical position (gemm.h GemmIdx), so the
 * operand is never materialized.  Lanes >= nvalid are 0 (the expression
 * is evaluated at the last valid lane and discarded); so is the zero
 * padding of an IM2COL operand: PyTorch pads the producer's output, so a
 * padded element is 0, not the expression at 0 (it is evaluated at row
 * and column 0 and discarded).  One scalar loop for every operand kind
 * (pack_a_pro_rows' vectors where GemmPrologue.row says they apply);
 * the K order is the GEMM's (split_k). */
static LLVMValueRef emit_pack_pro(G *g, int which) {
  GemmKind kind = which ? g->kb : g->ka;
  const GemmPrologue *pr = which ? g->pb : g->pa;
  LLVMTypeRef ps[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, which ? "pack_b" : "pack_a", ps, 5);
  cpu_mark_full(f); /* scalar code: LLVM's unrolling and SLP vectorizer make it fast */
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  int R = which ? g->nr : g->mr;
  pr->begin(pr->user, g->b, f, getp(g, cx, which ? X_PROB : X_PROA));
  if (kind == GK_MAT && !which && pr->row && g->cd == DT_F32) {
    cpu_mark_light(f); /* vector code: no loop vectorizer or unrolling to run */
    pack_a_pro_rows(g, pr, cx, dst, i0, nvalid, kc);
    LLVMBuildRetVoid(g->b);
    pr->end(pr->user);
    return f;
  }
  LLVMValueRef pc = get(g, cx, X_PC), iy0 = NULL, ix0 = NULL, kst[3], kv[3] = {NULL, NULL, NULL};
  if (kind == GK_IM2COL) gemm_lane_origins(g, cx, i0, nvalid, R, &iy0, &ix0);
  if (kind != GK_MAT) gemm_kwalk_init(g, cx, pc, kst);
  GLoop lp, ll;
  LLVMValueRef p = gemm_loop_open(g, &lp, k64(g, 0), kc, k64(g, 1)), y = NULL, x = NULL;
  if (kind != GK_MAT) gemm_kwalk_get(g, kst, kv);
  LLVMValueRef row = gep(g, g->ct, dst, mul(g, p, k64(g, R)));
  LLVMValueRef lane = gemm_loop_open(g, &ll, k64(g, 0), k64(g, R), k64(g, 1));
  LLVMValueRef q = add(g, i0, imin(g, lane, sub(g, nvalid, k64(g, 1)))), inb;
  if (kind == GK_IM2COL) {
    y = add(g, LLVMBuildLoad2(g->b, g->i64, gep(g, g->i64, iy0, lane), ""),
            mul(g, kv[1], get(g, cx, X_DH)));
    x = add(g, LLVMBuildLoad2(g->b, g->i64, gep(g, g->i64, ix0, lane), ""),
            mul(g, kv[2], get(g, cx, X_DW)));
  }
  GemmIdx ix = pro_index(g, cx, kind, which, q, add(g, pc, p), kv, y, x, &inb);
  LLVMValueRef ok = lt(g, lane, nvalid);
  if (inb) ok = LLVMBuildAnd(g->b, ok, inb, "");
  LLVMValueRef v = LLVMBuildSelect(g->b, ok, pr->elem(pr->user, &ix, g->cd), gemm_czero(g), "");
  LLVMBuildStore(g->b, v, gep(g, g->ct, row, lane));
  gemm_loop_close(g, &ll);
  if (kind != GK_MAT) gemm_kwalk_next(g, cx, kst, kv);
  gemm_loop_close(g, &lp);
  LLVMBuildRetVoid(g->b);
  pr->end(pr->user);
  return f;
}

/* One panel row of a MAT B with contiguous lanes: NR elements of B from
 * element src of base, converted, into the packed row dst (NV vectors). */
static void copy_b_row(G *g, LLVMValueRef base, LLVMValueRef src, LLVMValueRef dst) {
  LLVMTypeRef st = gemm_storage(g, g->bd), sv = vec_of(st, g->vw);
  for (int v = 0; v < g->nv; v++) {
    LLVMValueRef x = LLVMBuildLoad2(g->b, sv, gep(g, st, base, add(g, src, k64(g, v * g->vw))), "");
    LLVMSetAlignment(x, (unsigned)dtype_size(g->bd));
    LLVMValueRef y = LLVMBuildStore(g->b, vconv(g, x, g->bd), gep(g, g->ct, dst, k64(g, v * g->vw)));
    LLVMSetAlignment(y, (unsigned)(g->vw * dtype_size(g->cd)));
  }
}

/* Full panels [t0, t1) of a MAT B whose lanes are contiguous (X_BI ==
 * 1), vectorized: in groups of 8 K rows, for each panel, each row's NV
 * vectors are loaded from B, converted and stored into the panel.  Each
 * group reads 8 rows of B as runs over the panels (sequential streams,
 * not one 4-KiB-strided column per panel) and writes 8 rows of each
 * panel at once. */
static void pack_b_rows(G *g, LLVMValueRef cx, LLVMValueRef t0, LLVMValueRef t1) {
  LLVMValueRef kc = get(g, cx, X_KC), bp = getp(g, cx, X_BPACK), base = getp(g, cx, X_B);
  LLVMValueRef src0 = add(g, add(g, get(g, cx, X_BOFF), mul(g, get(g, cx, X_PC), get(g, cx, X_BP))),
                          get(g, cx, X_JC));
  LLVMValueRef sp = get(g, cx, X_BP);
  GLoop lg, lt, lp;
  LLVMValueRef p0 = gemm_loop_open(g, &lg, k64(g, 0), kc, k64(g, 8));
  LLVMValueRef p1 = imin(g, add(g, p0, k64(g, 8)), kc);
  LLVMValueRef t = gemm_loop_open(g, &lt, t0, t1, k64(g, 1));
  LLVMValueRef panel = gep(g, g->ct, bp, mul(g, mul(g, t, k64(g, g->nr)), kc));
  LLVMValueRef p = gemm_loop_open(g, &lp, p0, p1, k64(g, 1));
  LLVMValueRef src = add(g, add(g, src0, mul(g, p, sp)), mul(g, t, k64(g, g->nr)));
  LLVMValueRef dst = gep(g, g->ct, panel, mul(g, p, k64(g, g->nr)));
  copy_b_row(g, base, src, dst);
  gemm_loop_close(g, &lp);
  gemm_loop_close(g, &lt);
  gemm_loop_close(g, &lg);
}

/* At the builder: B's panel at column j of the current block into dst,
 * through pack_b. */
static void pack_b_call(G *g, LLVMValueRef cx, LLVMValueRef pack_b, LLVMValueRef dst, LLVMValueRef j) {
  LLVMValueRef nvalid = imin(g, k64(g, g->nr), sub(g, get(g, cx, X_NC), j));
  LLVMValueRef a[5] = {cx, dst, add(g, get(g, cx, X_JC), j), nvalid, get(g, cx, X_KC)};
  call(g, pack_b, a, 5);
}

/* At the builder (block_body's fused packing, work_split): B's panels at
 * columns [j, jend) of the current block into consecutive panel slots
 * from dst.  When they are all full panels of a MAT B with contiguous
 * lanes (X_BI == 1), they are copied as vectors row by row of B: each row
 * of K gives a contiguous run over the whole group (several cache lines,
 * where one panel at a time read one line per row: measured faster on a
 * B whose rows lie 3 to 16 KiB apart), and the same run one group on is
 * prefetched; K pairs of bf16 likewise (gemm_lowp_pack_b_group), their
 * runs prefetched under the group before's micro-kernels instead
 * (gemm_lowp_prefetch_b_next).
 * Otherwise each panel goes through pack_b. */
void gemm_pack_b_group(G *g, LLVMValueRef cx, LLVMValueRef pack_b, LLVMValueRef dst, LLVMValueRef j,
                       LLVMValueRef jend) {
  LLVMValueRef kc = get(g, cx, X_KC), w = sub(g, jend, j), nr = k64(g, g->nr);
  LLVMValueRef pstride = mul(g, gemm_quad_panel_k(g, kc), nr); /* elements from one panel slot to the next */
  LLVMBasicBlockRef bc = blk(g, "bgroup_call"), done = blk(g, "bgroup_done");
  if (g->kb == GK_MAT && !g->pb && !gemm_lowp_packs(g, 1)) {
    LLVMValueRef vec = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, get(g, cx, X_BI), k64(g, 1), ""),
                                    LLVMBuildICmp(g->b, LLVMIntEQ, srem(g, w, nr), k64(g, 0), ""), "");
    LLVMBasicBlockRef bv = blk(g, "bgroup_vec");
    LLVMBuildCondBr(g->b, vec, bv, bc);
    LLVMPositionBuilderAtEnd(g->b, bv);
    LLVMValueRef base = getp(g, cx, X_B), sp = get(g, cx, X_BP);
    LLVMValueRef src0 = add(g, add(g, get(g, cx, X_BOFF), mul(g, get(g, cx, X_PC), sp)),
                            add(g, get(g, cx, X_JC), j));
    LLVMValueRef ahead = mul(g, get(g, cx, X_BGRP), nr);
    LLVMTypeRef st = gemm_storage(g, g->bd);
    GLoop lp, lt;
    LLVMValueRef p = gemm_loop_open(g, &lp, k64(g, 0), kc, k64(g, 1));
    /* B's row p, opaque to loop strength reduction (gemm_opaque_ptr) */
    LLVMValueRef src = gemm_opaque_ptr(g, gep(g, st, base, add(g, src0, mul(g, p, sp))));
    LLVMValueRef row = gep(g, g->ct, dst, mul(g, p, nr));
    LLVMValueRef t = gemm_loop_open(g, &lt, k64(g, 0), w, nr); /* t: column in the group */
    LLVMValueRef pf[4] = {gep(g, st, src, add(g, t, ahead)), LLVMConstInt(g->i32, 0, 0),
                          LLVMConstInt(g->i32, 3, 0), LLVMConstInt(g->i32, 1, 0)};
    gemm_intrin(g, "llvm.prefetch", &g->ptr, 1, pf, 4);
    copy_b_row(g, src, t, gep(g, g->ct, row, mul(g, sdiv(g, t, nr), pstride)));
    gemm_loop_close(g, &lt);
    gemm_loop_close(g, &lp);
    LLVMBuildBr(g->b, done);
  } else if (!gemm_lowp_pack_b_group(g, cx, dst, j, jend, bc, done)) {
    LLVMBuildBr(g->b, bc);
  }
  LLVMPositionBuilderAtEnd(g->b, bc);
  GLoop lq;
  LLVMValueRef q = gemm_loop_open(g, &lq, j, jend, nr);
  pack_b_call(g, cx, pack_b, gep(g, g->ct, dst, mul(g, sdiv(g, sub(g, q, j), nr), pstride)), q);
  gemm_loop_close(g, &lq);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
}

/* packb_body(ctx, begin, end): B panels [begin, end) of the current block
 * (pack_b_rows for the full panels of a MAT B with contiguous lanes,
 * unless gemm_lowp.c packs B: K pairs, or half-precision rows). */
LLVMValueRef gemm_emit_packb_body(G *g, LLVMValueRef pack_b) {
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, "packb_body", ps, 3);
  LLVMValueRef cx = LLVMGetParam(f, 0);
  LLVMValueRef jc = get(g, cx, X_JC), nc = get(g, cx, X_NC), kc = get(g, cx, X_KC);
  LLVMValueRef bp = getp(g, cx, X_BPACK), begin = LLVMGetParam(f, 1);
  if (g->kb == GK_MAT && !g->pb && !gemm_lowp_packs(g, 1)) {
    LLVMValueRef tf = imin(g, LLVMGetParam(f, 2), sdiv(g, nc, k64(g, g->nr)));
    LLVMValueRef vec = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, get(g, cx, X_BI), k64(g, 1), ""),
                                    lt(g, begin, tf), "");
    LLVMBasicBlockRef bv = blk(g, "packb_vec"), bs = blk(g, "packb_rest");
    LLVMBasicBlockRef here = LLVMGetInsertBlock(g->b);
    LLVMBuildCondBr(g->b, vec, bv, bs);
    LLVMPositionBuilderAtEnd(g->b, bv);
    pack_b_rows(g, cx, begin, tf);
    LLVMBasicBlockRef vend = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, bs);
    LLVMPositionBuilderAtEnd(g->b, bs);
    LLVMValueRef from = LLVMBuildPhi(g->b, g->i64, "");
    LLVMValueRef in[2] = {begin, tf};
    LLVMBasicBlockRef bb[2] = {here, vend};
    LLVMAddIncoming(from, in, bb, 2);
    begin = from;
  }
  GLoop l;
  LLVMValueRef t = gemm_loop_open(g, &l, begin, LLVMGetParam(f, 2), k64(g, 1));
  LLVMValueRef j = mul(g, t, k64(g, g->nr));
  LLVMValueRef a[5] = {cx, gep(g, g->ct, bp, mul(g, j, gemm_quad_panel_k(g, kc))), add(g, jc, j),
                       imin(g, k64(g, g->nr), sub(g, nc, j)), kc};
  call(g, pack_b, a, 5);
  gemm_loop_close(g, &l);
  LLVMBuildRetVoid(g->b);
  return f;
}

/* The MR x NR tile at (i, j) (mr, nr valid): written or added to C. */
