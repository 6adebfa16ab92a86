/* gemm_lowp.c — low-precision compute for the GEMM (gemm.h, gemm_impl.h):
 * the compute dtype of integer outputs (i32 accumulation for outputs of
 * at most 32 bits), the instruction-set features of the target, and the
 * K-pair path that multiplies 16-bit values with pairwise dot products:
 *
 *   GP_I16   i8/u8/i16 operands, i32 accumulators:
 *              acc[lane] += a[2p] * b[2p][lane] + a[2p+1] * b[2p+1][lane]
 *            vpdpwssd with AVX512-VNNI (zmm) or AVX-VNNI (ymm), else
 *            vpmaddwd + vpaddd (SSE2, AVX2, AVX512BW), else the same in
 *            plain IR (non-x86 hosts).  Every 8/16-bit value fits in an
 *            i16 and each product sum in i32 except -2^15 * -2^15 * 2,
 *            which wraps to -2^31 == 2^31 mod 2^32: the i32 sums are
 *            exact mod 2^32, so the results (PyTorch's: wrapping in the
 *            output's width) are exact.
 *   GP_I8    i8 x i8, u8 x i8, i8 x u8 where the target has VNNI for the
 *            vector width: quads of bytes along K, vpdpbusd
 *            (gemm_quad.c, which packs and multiplies them).
 *   GP_BF16  bf16 operands, f32 accumulators: vdpbf16ps (AVX512-BF16),
 *            only where the target has it; its numerics differ from the
 *            generic path's f32 FMAs (docs/numerics: denormal inputs and
 *            results flushed to zero, the pair's two products added in
 *            turn, each rounded to nearest even) within spec §9's bf16
 *            tolerance.
 *
 * Packing (both paths): A panels as MR lanes x ceil(kc/2) pairs, each an
 * i32 holding (k = 2p, k = 2p + 1) as two i16 (low half first), B panels
 * as ceil(kc/2) rows of NR such pairs; an odd kc's last pair has a zero
 * high half.  The panels fit the generic layout's space (pairs of 2-byte
 * values per lane, 4 bytes per lane and K index there), so packing
 * memory and panel offsets are unchanged.  B panels from a row-major
 * operand pack two K rows at a time as vectors, interleaved (for bf16
 * also a group of panels at a time in block_body's fused packing,
 * gemm_lowp_pack_b_group, its rows prefetched a part per tile under the
 * micro-kernels before, gemm_lowp_prefetch_b_next); bf16 A panels from
 * a row-major A copy each lane's pair as one 4-byte load.  GP_BF16's K blocks count the packed
 * bytes (2 a K index, gemm_lowp_k_bytes): twice f32's KC.
 *
 * Only matmul operands read from memory take the pair path (the implicit
 * GEMM's conv2d and operands with prologues use the generic one, which
 * accumulates integers in i32 too; the direct conv's pairs are
 * conv_lowp.c's, on gemm_lowp_pair_at and gemm_lowp_dot).  On the generic path, a matmul's f16/bf16 B is
 * packed here too: a K row of contiguous lanes is converted to f32 as
 * one vector (vcvtph2ps with F16C).
 *
 * Outputs narrower than the compute type keep K blocked through partial
 * sums in scratch (store_tile, below).
 * Needs: gemm_impl.h, llvm-c's target machine (host features).
 * Used by: gemm.c (compute dtype, choice, K bytes), gemm_pack.c (pack,
 * the fused group), conv_lowp.c (the pair and the dot product of the
 * K-pair direct conv), gemm_kernel.c (micro-kernel, partial sums, their
 * prefetch), gemm_nest.c (cg_gemm_isa_features of the variant being
 * emitted, Cg.isa). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/TargetMachine.h>

#include "gemm_impl.h"

/* ---- features and choices --------------------------------------------------- */

static bool has_feature(const char *features, const char *name) {
  size_t n = strlen(name);
  for (const char *p = features; (p = strstr(p, name)); p += n)
    if ((p == features || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
      return true;
  return false;
}

unsigned cg_gemm_isa_features(const char *f) {
  unsigned isa = GEMM_ISA_X86;
  if (has_feature(f, "+f16c")) isa |= GEMM_ISA_F16C;
  if (has_feature(f, "+avx512bw")) isa |= GEMM_ISA_AVX512BW;
  if (has_feature(f, "+avx512vnni")) {
    isa |= GEMM_ISA_VNNI;
    if (has_feature(f, "+avx512vl")) isa |= GEMM_ISA_AVXVNNI; /* the ymm form, EVEX */
  }
  if (has_feature(f, "+avxvnni")) isa |= GEMM_ISA_AVXVNNI;
  if (has_feature(f, "+avx512bf16")) isa |= GEMM_ISA_BF16;
  return isa;
}

DType gemm_lowp_compute_dtype(DType od) {
  if (od == DT_F64) return DT_F64;
  if (dtype_is_float(od)) return DT_F32;
  return od != DT_BOOL && dtype_size(od) <= 4 ? DT_I32 : DT_I64;
}

void gemm_lowp_choose(G *g) {
  g->pairs = GP_NONE;
  if (g->ka != GK_MAT || g->kb != GK_MAT || g->pa || g->pb) return;
  if (g->cd == DT_I32 && gemm_int_dot_dtype(g->ad) && gemm_int_dot_dtype(g->bd))
    g->pairs = gemm_quad_takes(g) ? GP_I8 : GP_I16; /* K quads: gemm_quad.c */
  if (g->pairs == GP_I8) gemm_quad_tile(g);
  if (g->cd == DT_F32 && g->ad == DT_BF16 && g->bd == DT_BF16 && g->vec_bits == 512 &&
      (g->isa & GEMM_ISA_BF16))
    g->pairs = GP_BF16;
}

int gemm_lowp_k_bytes(const G *g) {
  return g->pairs == GP_BF16 ? 2 : g->pairs == GP_I8 ? 1 : dtype_size(g->cd);
}

/* The key names the instruction too: modules with several ISA variants
 * keep their functions apart. */
const char *gemm_lowp_key(const G *g) {
  if (g->pairs == GP_BF16) return ".bf16dp";
  if (g->pairs == GP_I8) return ".dpbusd";
  if (g->pairs != GP_I16) return "";
  if (g->vec_bits == 512) return g->isa & GEMM_ISA_VNNI ? ".vnni" : ".i16dp";
  if (g->vec_bits == 256) return g->isa & GEMM_ISA_AVXVNNI ? ".vnni" : ".i16dp";
  return ".i16dp";
}

/* ---- packing ------------------------------------------------------------------ */

static LLVMValueRef splat_c(G *g, LLVMValueRef s, int n);

/* Element (lane, k) of the operand as an i16: the integer value, or a
 * bf16's bits. */
static LLVMValueRef load16(G *g, LLVMValueRef base, LLVMValueRef idx, DType dt) {
  LLVMTypeRef st = gemm_storage(g, dt);
  LLVMValueRef v = LLVMBuildLoad2(g->b, st, gep(g, st, base, idx), "");
  if (st == g->i16) return v;
  return dt == DT_U8 ? LLVMBuildZExt(g->b, v, g->i16, "") : LLVMBuildSExt(g->b, v, g->i16, "");
}

/* The pair (k, k + 1) of lane `lane`, zero past kc or nvalid: the
 * addresses are clamped inside the operand, the values selected. */
LLVMValueRef gemm_lowp_pair_at(G *g, LLVMValueRef base, DType dt, LLVMValueRef pofs,
                               LLVMValueRef sp, LLVMValueRef lane_ofs, LLVMValueRef k,
                               LLVMValueRef kc, LLVMValueRef ok) {
  LLVMValueRef z16 = LLVMConstInt(g->i16, 0, 0), h[2];
  for (int t = 0; t < 2; t++) {
    LLVMValueRef kt = add(g, k, k64(g, t));
    LLVMValueRef in = LLVMBuildAnd(g->b, ok, lt(g, kt, kc), "");
    LLVMValueRef kcl = imin(g, kt, sub(g, kc, k64(g, 1)));
    LLVMValueRef v = load16(g, base, add(g, add(g, pofs, mul(g, kcl, sp)), lane_ofs), dt);
    h[t] = LLVMBuildZExt(g->b, LLVMBuildSelect(g->b, in, v, z16, ""), g->i32, "");
  }
  return LLVMBuildOr(g->b, h[0], LLVMBuildShl(g->b, h[1], LLVMConstInt(g->i32, 16, 0), ""), "");
}

/* Vector B packing, lanes contiguous (stride 1) and all valid: the
 * pair row of K rows (k, k + 1) at lanes i0.., two <R x storage> loads
 * widened to i16 and interleaved (a row past kc: zeros, its address
 * clamped inside the operand). */
static LLVMValueRef pair_row_vec(G *g, LLVMValueRef base, DType dt, LLVMValueRef pofs,
                                 LLVMValueRef sp, LLVMValueRef i0, LLVMValueRef k,
                                 LLVMValueRef kc, int R) {
  LLVMTypeRef st = gemm_storage(g, dt), sv = LLVMVectorType(st, (unsigned)R);
  LLVMTypeRef hv = LLVMVectorType(g->i16, (unsigned)R);
  LLVMValueRef mask[128], row[2];
  for (int i = 0; i < R; i++) {
    mask[2 * i] = LLVMConstInt(g->i32, (unsigned)i, 0);
    mask[2 * i + 1] = LLVMConstInt(g->i32, (unsigned)(R + i), 0);
  }
  for (int t = 0; t < 2; t++) {
    LLVMValueRef kt = add(g, k, k64(g, t));
    LLVMValueRef in = lt(g, kt, kc), kcl = imin(g, kt, sub(g, kc, k64(g, 1)));
    LLVMValueRef ld = LLVMBuildLoad2(g->b, sv, gep(g, st, base, add(g, add(g, pofs, mul(g, kcl, sp)), i0)), "");
    LLVMSetAlignment(ld, (unsigned)dtype_size(dt));
    if (st != g->i16)
      ld = dt == DT_U8 ? LLVMBuildZExt(g->b, ld, hv, "") : LLVMBuildSExt(g->b, ld, hv, "");
    row[t] = LLVMBuildSelect(g->b, in, ld, LLVMConstNull(hv), "");
  }
  return LLVMBuildShuffleVector(g->b, row[0], row[1], LLVMConstVector(mask, (unsigned)(2 * R)), "");
}

/* One panel's pair rows (pair_row_vec) into dst. */
static void pack_rows_vec(G *g, LLVMValueRef base, DType dt, LLVMValueRef pofs,
                          LLVMValueRef sp, LLVMValueRef i0, LLVMValueRef kc,
                          LLVMValueRef dst, int R) {
  GLoop l;
  LLVMValueRef p = gemm_loop_open(g, &l, k64(g, 0), cdiv(g, kc, k64(g, 2)), k64(g, 1));
  LLVMValueRef v = pair_row_vec(g, base, dt, pofs, sp, i0, mul(g, p, k64(g, 2)), kc, R);
  LLVMValueRef s = LLVMBuildStore(g->b, v, gep(g, g->i16, dst, mul(g, p, k64(g, 2 * R))));
  LLVMSetAlignment(s, 4);
  gemm_loop_close(g, &l);
}

bool gemm_lowp_pack_b_group(G *g, LLVMValueRef cx, LLVMValueRef dst, LLVMValueRef j,
                            LLVMValueRef jend, LLVMBasicBlockRef other, LLVMBasicBlockRef done) {
  if (g->pairs != GP_BF16 || g->kb != GK_MAT || g->pb) return false;
  int R = g->nr;
  LLVMValueRef kc = get(g, cx, X_KC), w = sub(g, jend, j), nr = k64(g, R);
  LLVMValueRef pstride = mul(g, kc, nr); /* compute-type elements from one panel slot to the next */
  LLVMValueRef vec = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, get(g, cx, X_BI), k64(g, 1), ""),
                                  LLVMBuildICmp(g->b, LLVMIntEQ, srem(g, w, nr), k64(g, 0), ""), "");
  LLVMBasicBlockRef bv = blk(g, "bgroup_pairs");
  LLVMBuildCondBr(g->b, vec, bv, other);
  LLVMPositionBuilderAtEnd(g->b, bv);
  LLVMValueRef base = getp(g, cx, X_B), sp = get(g, cx, X_BP);
  LLVMValueRef pofs = add(g, get(g, cx, X_BOFF), mul(g, get(g, cx, X_PC), sp));
  LLVMValueRef i0 = add(g, get(g, cx, X_JC), j);
  GLoop lp, lt;
  LLVMValueRef p = gemm_loop_open(g, &lp, k64(g, 0), cdiv(g, kc, k64(g, 2)), k64(g, 1));
  LLVMValueRef k = mul(g, p, k64(g, 2));
  LLVMValueRef t = gemm_loop_open(g, &lt, k64(g, 0), w, nr); /* t: column in the group */
  LLVMValueRef v = pair_row_vec(g, base, g->bd, pofs, sp, add(g, i0, t), k, kc, R);
  LLVMValueRef slot = gep(g, g->ct, dst, mul(g, sdiv(g, t, nr), pstride));
  LLVMSetAlignment(LLVMBuildStore(g->b, v, gep(g, g->i32, slot, mul(g, p, nr))), 4);
  gemm_loop_close(g, &lt);
  gemm_loop_close(g, &lp);
  LLVMBuildBr(g->b, done);
  return true;
}

/* The B rows that the next group's packing reads, a part per tile: the
 * next group's columns in this K block or, after the last group (and
 * in gemm_emit_kloop's items, one group each), the first group's in the
 * next K block; the rows cut into as many parts as the group has tiles,
 * the tile's part prefetched, so the loads from memory run under the
 * micro-kernels, not in a burst in the packing (which then reads from
 * L2).  Only B's contiguous lanes (X_BI == 1), which the packing reads
 * as runs. */
void gemm_lowp_prefetch_b_next(G *g, LLVMValueRef cx, LLVMValueRef fuse, LLVMValueRef mc,
                               LLVMValueRef i, LLVMValueRef j, LLVMValueRef j0, LLVMValueRef j1,
                               LLVMValueRef jg, LLVMValueRef jgend) {
  if (g->pairs != GP_BF16 || g->kb != GK_MAT || g->pb) return;
  LLVMBasicBlockRef pfb = blk(g, "bnext"), pfd = blk(g, "bnext_done");
  LLVMBuildCondBr(g->b, fuse, pfb, pfd);
  LLVMPositionBuilderAtEnd(g->b, pfb);
  LLVMValueRef ni = cdiv(g, mc, k64(g, g->mr)), nr = k64(g, g->nr);
  LLVMValueRef tix = add(g, mul(g, sdiv(g, sub(g, j, jg), nr), ni), sdiv(g, i, k64(g, g->mr)));
  LLVMValueRef ntiles = mul(g, cdiv(g, sub(g, jgend, jg), nr), ni);
  LLVMValueRef gstep = mul(g, get(g, cx, X_BGRP), k64(g, g->nr)), more = lt(g, jgend, j1);
  LLVMValueRef pc = get(g, cx, X_PC), kc = get(g, cx, X_KC), pcn = add(g, pc, kc);
  LLVMValueRef c0 = LLVMBuildSelect(g->b, more, jgend, j0, "");
  LLVMValueRef c1 = imin(g, add(g, c0, gstep), j1);
  LLVMValueRef r0 = LLVMBuildSelect(g->b, more, pc, pcn, "");
  LLVMValueRef knext = imin(g, add(g, pcn, get(g, cx, X_KSTEP)), get(g, cx, X_K));
  LLVMValueRef r1 = LLVMBuildSelect(g->b, more, pcn, knext, "");
  LLVMValueRef q = cdiv(g, sub(g, r1, r0), ntiles), rlo = add(g, r0, mul(g, tix, q));
  LLVMValueRef rhi = imin(g, add(g, rlo, q), r1);
  LLVMValueRef base = getp(g, cx, X_B), sp = get(g, cx, X_BP);
  LLVMValueRef col = add(g, get(g, cx, X_BOFF), add(g, get(g, cx, X_JC), c0));
  LLVMValueRef unit = LLVMBuildICmp(g->b, LLVMIntEQ, get(g, cx, X_BI), k64(g, 1), "");
  LLVMValueRef lanes = LLVMBuildSelect(g->b, unit, sub(g, c1, c0), k64(g, 0), ""); /* rows only */
  LLVMTypeRef st = gemm_storage(g, g->bd);
  GLoop lr, ll;
  LLVMValueRef r = gemm_loop_open(g, &lr, rlo, rhi, k64(g, 1));
  LLVMValueRef rowp = gep(g, st, base, add(g, col, mul(g, r, sp)));
  LLVMValueRef l = gemm_loop_open(g, &ll, k64(g, 0), lanes, k64(g, 64 / dtype_size(g->bd)));
  LLVMValueRef pf[4] = {gep(g, st, rowp, l), LLVMConstInt(g->i32, 0, 0), LLVMConstInt(g->i32, 3, 0),
                        LLVMConstInt(g->i32, 1, 0)};
  gemm_intrin(g, "llvm.prefetch", &g->ptr, 1, pf, 4);
  gemm_loop_close(g, &ll);
  gemm_loop_close(g, &lr);
  LLVMBuildBr(g->b, pfd);
  LLVMPositionBuilderAtEnd(g->b, pfd);
}

/* B of f16 or bf16 elements (the generic path, f32 compute) packed as
 * gemm_emit_pack does, but a panel whose lanes are contiguous and all
 * valid converts a K row at a time as one vector (vcvtph2ps with F16C;
 * bf16: a shift), the rest element by element. */
static LLVMValueRef emit_pack_half(G *g) {
  LLVMTypeRef ps[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, "pack_b", ps, 5);
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  int R = g->nr;
  DType dt = g->bd;
  LLVMTypeRef st = gemm_storage(g, dt), sv = LLVMVectorType(st, (unsigned)R);
  LLVMTypeRef fv = LLVMVectorType(g->f32, (unsigned)R), iv = LLVMVectorType(g->i32, (unsigned)R);
  LLVMValueRef base = getp(g, cx, X_B), si = get(g, cx, X_BI), sp = get(g, cx, X_BP);
  LLVMValueRef pofs = add(g, get(g, cx, X_BOFF), mul(g, get(g, cx, X_PC), sp));
  LLVMBasicBlockRef vec = blk(g, "half_vec"), sca = blk(g, "half_scalar"), done = blk(g, "half_done");
  LLVMValueRef fast = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, si, k64(g, 1), ""),
                                   LLVMBuildICmp(g->b, LLVMIntEQ, nvalid, k64(g, R), ""), "");
  LLVMBuildCondBr(g->b, fast, vec, sca);
  LLVMPositionBuilderAtEnd(g->b, vec);
  GLoop lp, ll;
  LLVMValueRef p = gemm_loop_open(g, &lp, k64(g, 0), kc, k64(g, 1));
  LLVMValueRef ld = LLVMBuildLoad2(g->b, sv, gep(g, st, base, add(g, add(g, pofs, mul(g, p, sp)), i0)), "");
  LLVMSetAlignment(ld, 2);
  LLVMValueRef v;
  if (dt == DT_F16) {
    v = LLVMBuildFPExt(g->b, ld, fv, "");
  } else {
    v = LLVMBuildShl(g->b, LLVMBuildZExt(g->b, ld, iv, ""), splat_c(g, LLVMConstInt(g->i32, 16, 0), R), "");
    v = LLVMBuildBitCast(g->b, v, fv, "");
  }
  LLVMSetAlignment(LLVMBuildStore(g->b, v, gep(g, g->f32, dst, mul(g, p, k64(g, R)))), 4);
  gemm_loop_close(g, &lp);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, sca);
  p = gemm_loop_open(g, &lp, k64(g, 0), kc, k64(g, 1));
  LLVMValueRef row = gep(g, g->f32, dst, mul(g, p, k64(g, R)));
  LLVMValueRef lane = gemm_loop_open(g, &ll, k64(g, 0), k64(g, R), k64(g, 1));
  LLVMValueRef cl = imin(g, lane, sub(g, nvalid, k64(g, 1)));
  LLVMValueRef got = gemm_load_c(g, base, add(g, add(g, pofs, mul(g, p, sp)), mul(g, add(g, i0, cl), si)), dt);
  LLVMBuildStore(g->b, LLVMBuildSelect(g->b, lt(g, lane, nvalid), got, gemm_czero(g), ""),
                 gep(g, g->f32, row, lane));
  gemm_loop_close(g, &ll);
  gemm_loop_close(g, &lp);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
  LLVMBuildRetVoid(g->b);
  return f;
}

/* bf16 A packing, K contiguous (unit K stride), all MR lanes valid and
 * kc even: a lane's pair (k, k + 1) is adjacent in memory already, so
 * each packed i32 is one 4-byte load (the bytes are the same as
 * gemm_lowp_pair_at's).  Lane by lane, each lane's K run read in order,
 * with the row 4 lanes on prefetched (A comes from L3 or memory: twelve
 * lanes read side by side stalled on every new line). */
static void pack_a_pairs_bf16(G *g, LLVMValueRef base, LLVMValueRef pofs, LLVMValueRef si,
                              LLVMValueRef i0, LLVMValueRef kc, LLVMValueRef dst, int R) {
  GLoop ll, l;
  LLVMValueRef lane = gemm_loop_open(g, &ll, k64(g, 0), k64(g, R), k64(g, 1));
  LLVMValueRef rowp = gep(g, g->i16, base, add(g, pofs, mul(g, add(g, i0, lane), si)));
  LLVMValueRef next = gep(g, g->i16, rowp, mul(g, si, k64(g, 4)));
  LLVMValueRef q = gemm_loop_open(g, &l, k64(g, 0), kc, k64(g, 32));
  LLVMValueRef pa[4] = {gep(g, g->i16, next, q), LLVMConstInt(g->i32, 0, 0), LLVMConstInt(g->i32, 3, 0),
                        LLVMConstInt(g->i32, 1, 0)};
  gemm_intrin(g, "llvm.prefetch", &g->ptr, 1, pa, 4);
  gemm_loop_close(g, &l);
  LLVMValueRef p = gemm_loop_open(g, &l, k64(g, 0), sdiv(g, kc, k64(g, 2)), k64(g, 1));
  LLVMValueRef v = LLVMBuildLoad2(g->b, g->i32, gep(g, g->i16, rowp, mul(g, p, k64(g, 2))), "");
  LLVMSetAlignment(v, 2);
  LLVMSetAlignment(LLVMBuildStore(g->b, v, gep(g, g->i32, dst, add(g, mul(g, p, k64(g, R)), lane))), 4);
  gemm_loop_close(g, &l);
  gemm_loop_close(g, &ll);
}

bool gemm_lowp_packs(const G *g, int which) {
  if (g->pairs) return true;
  return which == 1 && g->kb == GK_MAT && !g->pb && g->cd == DT_F32 &&
         (g->bd == DT_F16 || g->bd == DT_BF16);
}

/* pack(ctx, dst, i0, nvalid, kc) as gemm_emit_pack, in pairs: the i32 at
 * dst[p * R + lane] holds X(i0 + lane, pc + 2p) and X(i0 + lane, pc + 2p + 1). */
LLVMValueRef gemm_lowp_emit_pack(G *g, int which) {
  if (!g->pairs) return emit_pack_half(g);
  if (g->pairs == GP_I8) return gemm_quad_emit_pack(g, which);
  LLVMTypeRef ps[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, which ? "pack_b" : "pack_a", ps, 5);
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  DType dt = which ? g->bd : g->ad;
  int R = which ? g->nr : g->mr;
  LLVMValueRef base = getp(g, cx, which ? X_B : X_A), off = get(g, cx, which ? X_BOFF : X_AOFF);
  LLVMValueRef si = get(g, cx, which ? X_BI : X_AI), sp = get(g, cx, which ? X_BP : X_AP);
  LLVMValueRef pofs = add(g, off, mul(g, get(g, cx, X_PC), sp));
  LLVMBasicBlockRef sca = blk(g, "pair_scalar"), done = blk(g, "pair_done");
  if (which) { /* B: rows of contiguous lanes as vectors */
    LLVMBasicBlockRef vec = blk(g, "pair_vec");
    LLVMValueRef fast = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, si, k64(g, 1), ""),
                                     LLVMBuildICmp(g->b, LLVMIntEQ, nvalid, k64(g, R), ""), "");
    LLVMBuildCondBr(g->b, fast, vec, sca);
    LLVMPositionBuilderAtEnd(g->b, vec);
    pack_rows_vec(g, base, dt, pofs, sp, i0, kc, dst, R);
    LLVMBuildBr(g->b, done);
  } else if (g->pairs == GP_BF16) { /* A: lanes' K runs as 4-byte pairs */
    LLVMBasicBlockRef vec = blk(g, "pair_rows");
    LLVMValueRef fast = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, sp, k64(g, 1), ""),
                                     LLVMBuildICmp(g->b, LLVMIntEQ, nvalid, k64(g, R), ""), "");
    fast = LLVMBuildAnd(g->b, fast, LLVMBuildICmp(g->b, LLVMIntEQ, srem(g, kc, k64(g, 2)), k64(g, 0), ""), "");
    LLVMBuildCondBr(g->b, fast, vec, sca);
    LLVMPositionBuilderAtEnd(g->b, vec);
    pack_a_pairs_bf16(g, base, pofs, si, i0, kc, dst, R);
    LLVMBuildBr(g->b, done);
  } else {
    LLVMBuildBr(g->b, sca);
  }
  LLVMPositionBuilderAtEnd(g->b, sca);
  GLoop lp, ll;
  LLVMValueRef p = gemm_loop_open(g, &lp, k64(g, 0), cdiv(g, kc, k64(g, 2)), k64(g, 1));
  LLVMValueRef k = mul(g, p, k64(g, 2)), row = gep(g, g->i32, dst, mul(g, p, k64(g, R)));
  LLVMValueRef lane = gemm_loop_open(g, &ll, k64(g, 0), k64(g, R), k64(g, 1));
  LLVMValueRef cl = imin(g, lane, sub(g, nvalid, k64(g, 1)));
  LLVMValueRef v = gemm_lowp_pair_at(g, base, dt, pofs, sp, mul(g, add(g, i0, cl), si), k, kc,
                           lt(g, lane, nvalid));
  LLVMBuildStore(g->b, v, gep(g, g->i32, row, lane));
  gemm_loop_close(g, &ll);
  gemm_loop_close(g, &lp);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
  LLVMBuildRetVoid(g->b);
  return f;
}

/* ---- the micro-kernel ------------------------------------------------------- */

/* acc + the pairwise dot product of a and b (<vw x i32> each holding
 * 2 * vw 16-bit values). */
LLVMValueRef gemm_lowp_dot(G *g, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b) {
  int n = g->vw;
  LLVMTypeRef h = LLVMVectorType(g->pairs == GP_BF16 ? LLVMBFloatTypeInContext(g->ctx) : g->i16,
                                 (unsigned)(2 * n));
  if (g->pairs == GP_BF16) { /* chosen only for 512-bit vectors */
    LLVMValueRef x[3] = {acc, LLVMBuildBitCast(g->b, a, h, ""), LLVMBuildBitCast(g->b, b, h, "")};
    return gemm_intrin(g, "llvm.x86.avx512bf16.dpbf16ps.512", NULL, 0, x, 3);
  }
  if ((n == 16 && (g->isa & GEMM_ISA_VNNI)) || (n == 8 && (g->isa & GEMM_ISA_AVXVNNI))) {
    LLVMValueRef x[3] = {acc, a, b};
    return gemm_intrin(g, n == 16 ? "llvm.x86.avx512.vpdpwssd.512" : "llvm.x86.avx512.vpdpwssd.256",
                       NULL, 0, x, 3);
  }
  const char *pm = n == 4 ? "llvm.x86.sse2.pmadd.wd" : n == 8 ? "llvm.x86.avx2.pmadd.wd"
                                                              : "llvm.x86.avx512.pmaddw.d.512";
  bool native = (g->isa & GEMM_ISA_X86) && (n == 4 || (n == 8 && g->vec_bits >= 256) ||
                                            (n == 16 && (g->isa & GEMM_ISA_AVX512BW)));
  LLVMValueRef ah = LLVMBuildBitCast(g->b, a, h, ""), bh = LLVMBuildBitCast(g->b, b, h, "");
  if (native) {
    LLVMValueRef x[2] = {ah, bh};
    return add(g, acc, gemm_intrin(g, pm, NULL, 0, x, 2));
  }
  /* the same in plain IR: widen, multiply, add the even and odd lanes */
  LLVMTypeRef w = LLVMVectorType(g->i32, (unsigned)(2 * n));
  LLVMValueRef prod = LLVMBuildMul(g->b, LLVMBuildSExt(g->b, ah, w, ""), LLVMBuildSExt(g->b, bh, w, ""), "");
  LLVMValueRef ev[64], od[64];
  for (int i = 0; i < n; i++)
    ev[i] = LLVMConstInt(g->i32, (unsigned)(2 * i), 0), od[i] = LLVMConstInt(g->i32, (unsigned)(2 * i + 1), 0);
  LLVMValueRef e = LLVMBuildShuffleVector(g->b, prod, LLVMGetUndef(w), LLVMConstVector(ev, (unsigned)n), "");
  LLVMValueRef o = LLVMBuildShuffleVector(g->b, prod, LLVMGetUndef(w), LLVMConstVector(od, (unsigned)n), "");
  return add(g, acc, add(g, e, o));
}

/* One pair step p: nx = cur + A[r, pair p] . B[pair p, v*VW..]. */
static void pair_step(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef p,
                      LLVMValueRef cur[][4], LLVMValueRef nx[][4]) {
  LLVMTypeRef vi = LLVMVectorType(g->i32, (unsigned)g->vw);
  LLVMValueRef bv[4], arow = gep(g, g->i32, ap, mul(g, p, k64(g, g->mr)));
  LLVMValueRef brow = gep(g, g->i32, bp, mul(g, p, k64(g, g->nr)));
  for (int v = 0; v < g->nv; v++) {
    bv[v] = LLVMBuildLoad2(g->b, vi, gep(g, g->i32, brow, k64(g, v * g->vw)), "");
    LLVMSetAlignment(bv[v], 4);
  }
  for (int r = 0; r < g->mr; r++) {
    LLVMValueRef s = LLVMBuildLoad2(g->b, g->i32, gep(g, g->i32, arow, k64(g, r)), "");
    LLVMValueRef a = LLVMBuildInsertElement(g->b, LLVMGetUndef(vi), s, LLVMConstInt(g->i32, 0, 0), "");
    a = LLVMBuildShuffleVector(g->b, a, LLVMGetUndef(vi),
                               LLVMConstNull(LLVMVectorType(g->i32, (unsigned)g->vw)), "");
    for (int v = 0; v < g->nv; v++) nx[r][v] = gemm_lowp_dot(g, cur[r][v], a, bv[v]);
  }
}

void gemm_lowp_step_loop(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef n,
                         const LLVMValueRef *init, GemmLowpStep step, const char *name,
                         LLVMValueRef acc[][4]) {
  char nm[3][16];
  snprintf(nm[0], sizeof nm[0], "%s", name);
  snprintf(nm[1], sizeof nm[1], "%s_body", name);
  snprintf(nm[2], sizeof nm[2], "%s_end", name);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b), head = blk(g, nm[0]), body = blk(g, nm[1]),
                    exit = blk(g, nm[2]);
  LLVMValueRef z = k64(g, 0), phi[16][4], next[16][4];
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, head);
  LLVMValueRef p = LLVMBuildPhi(g->b, g->i64, "");
  LLVMAddIncoming(p, &z, &pre, 1);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) {
      LLVMValueRef start = init ? init[v] : LLVMConstNull(g->vt);
      phi[r][v] = LLVMBuildPhi(g->b, g->vt, "");
      LLVMAddIncoming(phi[r][v], &start, &pre, 1);
    }
  LLVMBuildCondBr(g->b, lt(g, p, n), body, exit);
  LLVMPositionBuilderAtEnd(g->b, body);
  step(g, ap, bp, p, phi, next);
  LLVMValueRef p1 = add(g, p, k64(g, 1));
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
  LLVMAddIncoming(p, &p1, &latch, 1);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) LLVMAddIncoming(phi[r][v], &next[r][v], &latch, 1);
  gemm_no_vectorize(g, LLVMBuildBr(g->b, head));
  LLVMPositionBuilderAtEnd(g->b, exit);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) acc[r][v] = phi[r][v];
}

/* acc[r][v] over ceil(kc / 2) pairs, one pair step per iteration. */
void gemm_lowp_micro_kernel(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef kc,
                            LLVMValueRef acc[][4]) {
  if (g->pairs == GP_I8) {
    gemm_quad_micro_kernel(g, ap, bp, kc, acc);
    return;
  }
  gemm_lowp_step_loop(g, ap, bp, cdiv(g, kc, k64(g, 2)), NULL, pair_step, "pk", acc);
}

/* ---- partial sums for narrow outputs ----------------------------------------
 * An output narrower than the compute type (f16/bf16 from f32, i8/u8/i16
 * from i32) must be rounded (or wrapped) once, from the whole sum.  So
 * that K can still be blocked (packed panels of KC, not K, in cache), a
 * K block other than the last adds its tile to partial sums in the
 * compute type (X_CSCR), and the last one adds them to its tile and
 * stores the rounded value in C.  A single K block stores directly.
 * X_CSCR holds the column block (its padded width, below) as whole
 * MR x NR tiles, each contiguous: the tile of rows i.. (i a multiple of
 * MR) and columns jb.. of the block (jb a multiple of NR) at
 * ((i / MR) * (width / NR) + jb / NR) * MR * NR, its element (r, q) at
 * r * NR + q (an edge tile's too, its rows and columns past the edge
 * holding sums of the packing's zeros, never read into C).  So a tile's
 * partial sums are MR * NR * 4 contiguous bytes (24 cache lines at 512
 * bits), read and written as a stream, not MR rows a row stride apart
 * (which at 4 KiB strides share an L1 set), and block_body prefetches
 * them while the micro-kernel runs (gemm_lowp_prefetch). */

/* The column block's padded width: min(N, the target's largest NC) rounded up to
 * NR (an upper bound of the run's NC, gemm.c blocking: one row stride for
 * sizing and indexing). */
static LLVMValueRef scratch_width(G *g, LLVMValueRef N) {
  return mul(g, cdiv(g, imin(g, N, k64(g, g->params->gemm_nc)), k64(g, g->nr)), k64(g, g->nr));
}

LLVMValueRef gemm_lowp_scratch_bytes(G *g, LLVMValueRef M, LLVMValueRef N) {
  if (!g->cscr) return k64(g, 0);
  LLVMValueRef rows = mul(g, cdiv(g, M, k64(g, g->mr)), k64(g, g->mr));
  LLVMValueRef b = mul(g, mul(g, rows, scratch_width(g, N)), k64(g, dtype_size(g->cd)));
  return LLVMBuildAnd(g->b, add(g, b, k64(g, 63)), k64(g, ~63LL), "");
}

/* The partial-sum tile of C's rows i.. and columns j.. (i a multiple of
 * MR, j - jc of NR). */
static LLVMValueRef scratch_tile(G *g, LLVMValueRef cx, LLVMValueRef i, LLVMValueRef j) {
  LLVMValueRef panels = sdiv(g, scratch_width(g, get(g, cx, X_N)), k64(g, g->nr));
  LLVMValueRef jb = sdiv(g, sub(g, j, get(g, cx, X_JC)), k64(g, g->nr));
  LLVMValueRef t = add(g, mul(g, sdiv(g, i, k64(g, g->mr)), panels), jb);
  return gep(g, g->ct, getp(g, cx, X_CSCR), mul(g, t, k64(g, g->mr * g->nr)));
}

void gemm_lowp_prefetch(G *g, LLVMValueRef cx, LLVMValueRef i, LLVMValueRef j) {
  LLVMValueRef tp = scratch_tile(g, cx, i, j);
  int lines = (g->mr * g->nr * dtype_size(g->cd) + 63) / 64;
  for (int l = 0; l < lines; l++) {
    LLVMValueRef a[4] = {gep(g, LLVMInt8TypeInContext(g->ctx), tp, k64(g, 64 * l)),
                         LLVMConstInt(g->i32, 1, 0), LLVMConstInt(g->i32, 3, 0),
                         LLVMConstInt(g->i32, 1, 0)};
    gemm_intrin(g, "llvm.prefetch", &g->ptr, 1, a, 4);
  }
}

static LLVMValueRef splat_c(G *g, LLVMValueRef s, int n) {
  LLVMTypeRef t = LLVMVectorType(LLVMTypeOf(s), (unsigned)n);
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(t), s, LLVMConstInt(g->i32, 0, 0), "");
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(t), LLVMConstNull(LLVMVectorType(g->i32, (unsigned)n)), "");
}

/* A compute-type vector converted to C's dtype (as gemm_store_c converts
 * one element: bf16 nearest even with NaN kept quiet, f16 by fptrunc,
 * integers wrapped). */
static LLVMValueRef vec_to_out(G *g, LLVMValueRef x) {
  int n = g->vw;
  LLVMTypeRef st = LLVMVectorType(gemm_storage(g, g->od), (unsigned)n);
  if (g->od == DT_F16) return LLVMBuildFPTrunc(g->b, x, st, "");
  if (g->od != DT_BF16) return LLVMBuildTrunc(g->b, x, st, "");
  LLVMTypeRef vi = LLVMVectorType(g->i32, (unsigned)n);
  LLVMValueRef u = LLVMBuildBitCast(g->b, x, vi, ""), k16 = splat_c(g, LLVMConstInt(g->i32, 16, 0), n);
  LLVMValueRef hi = LLVMBuildLShr(g->b, u, k16, "");
  LLVMValueRef lsb = LLVMBuildAnd(g->b, hi, splat_c(g, LLVMConstInt(g->i32, 1, 0), n), "");
  LLVMValueRef r = add(g, u, add(g, lsb, splat_c(g, LLVMConstInt(g->i32, 0x7FFF, 0), n)));
  r = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, r, k16, ""), st, "");
  LLVMValueRef q = LLVMBuildOr(g->b, LLVMBuildTrunc(g->b, hi, st, ""),
                               splat_c(g, LLVMConstInt(g->i16, 0x40, 0), n), "");
  return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealUNO, x, x, ""), q, r, "");
}

/* Where store_tile's tile goes: C (base, offset, strides), its
 * partial-sum tile, whether this is the first / last K block. */
typedef struct PTile {
  LLVMValueRef c, coff, cm, cn, tp, first, last;
} PTile;

/* The partial sum of the tile's element (r, q). */
static LLVMValueRef scr_at(G *g, const PTile *t, LLVMValueRef r, LLVMValueRef q) {
  return gep(g, g->ct, t->tp, add(g, mul(g, r, k64(g, g->nr)), q));
}

/* A tile as vectors (a first K block only without a bias; the last
 * block only a tile of full width, its mr valid rows): acc, plus the
 * partial sums after the first block, back to the scratch, or (last
 * block, C's columns contiguous) rounded into C; other C strides branch
 * to `slow`. */
static void ptile_vectors(G *g, const PTile *t, LLVMValueRef acc[][4], LLVMValueRef i,
                          LLVMValueRef j, LLVMValueRef mr, LLVMBasicBlockRef slow,
                          LLVMBasicBlockRef done) {
  LLVMBasicBlockRef to_s = blk(g, "ptile_sum"), to_c = blk(g, "ptile_out"), to_cv = blk(g, "ptile_outv");
  LLVMBasicBlockRef rd = blk(g, "ptile_vrd"), got = blk(g, "ptile_vgot"), here = LLVMGetInsertBlock(g->b);
  LLVMValueRef x[16][4], sum[16][4];
  LLVMBuildCondBr(g->b, t->first, got, rd);
  LLVMPositionBuilderAtEnd(g->b, rd);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) {
      LLVMValueRef old = LLVMBuildLoad2(g->b, g->vt, scr_at(g, t, k64(g, r), k64(g, v * g->vw)), "");
      LLVMSetAlignment(old, (unsigned)dtype_size(g->cd));
      sum[r][v] = gemm_cadd(g, old, acc[r][v]);
    }
  LLVMBuildBr(g->b, got);
  LLVMPositionBuilderAtEnd(g->b, got);
  LLVMBasicBlockRef bbs[2] = {here, rd};
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) {
      LLVMValueRef vals[2] = {acc[r][v], sum[r][v]};
      x[r][v] = LLVMBuildPhi(g->b, g->vt, "");
      LLVMAddIncoming(x[r][v], vals, bbs, 2);
    }
  LLVMBuildCondBr(g->b, t->last, to_c, to_s);
  LLVMPositionBuilderAtEnd(g->b, to_s);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++)
      LLVMSetAlignment(LLVMBuildStore(g->b, x[r][v], scr_at(g, t, k64(g, r), k64(g, v * g->vw))),
                       (unsigned)dtype_size(g->cd));
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, to_c);
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, t->cn, k64(g, 1), ""), to_cv, slow);
  LLVMPositionBuilderAtEnd(g->b, to_cv);
  LLVMTypeRef st = gemm_storage(g, g->od);
  for (int r = 0; r < g->mr; r++) {
    if (r) { /* rows past the edge (mr < MR) are not C's */
      LLVMBasicBlockRef row = blk(g, "ptile_row");
      LLVMBuildCondBr(g->b, lt(g, k64(g, r), mr), row, done);
      LLVMPositionBuilderAtEnd(g->b, row);
    }
    for (int v = 0; v < g->nv; v++) {
      LLVMValueRef p = gep(g, st, t->c, add(g, add(g, t->coff, mul(g, add(g, i, k64(g, r)), t->cm)),
                                            add(g, j, k64(g, v * g->vw))));
      LLVMSetAlignment(LLVMBuildStore(g->b, vec_to_out(g, x[r][v]), p), (unsigned)dtype_size(g->od));
    }
  }
  LLVMBuildBr(g->b, done);
}

/* Element by element through the spilled tile (edges, the first K block
 * with its bias, C's other strides): start from the bias or zero (first
 * block) or the partial sum, add, and keep the sum or round it into C. */
static void ptile_elements(G *g, const PTile *t, LLVMValueRef cx, LLVMValueRef acc[][4],
                           LLVMValueRef tile, LLVMValueRef i, LLVMValueRef j, LLVMValueRef mr,
                           LLVMValueRef nr) {
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++)
      LLVMSetAlignment(LLVMBuildStore(g->b, acc[r][v], gep(g, g->ct, tile, k64(g, r * g->nr + v * g->vw))),
                       (unsigned)dtype_size(g->cd));
  GLoop lr, lq;
  LLVMValueRef r = gemm_loop_open(g, &lr, k64(g, 0), mr, k64(g, 1));
  LLVMValueRef q = gemm_loop_open(g, &lq, k64(g, 0), nr, k64(g, 1));
  LLVMValueRef ri = add(g, i, r), qj = add(g, j, q), sp = scr_at(g, t, r, q);
  LLVMValueRef v = LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, tile, add(g, mul(g, r, k64(g, g->nr)), q)), "");
  LLVMValueRef init = gemm_czero(g);
  if (g->bias)
    init = gemm_load_c(g, getp(g, cx, X_BIAS),
                       add(g, get(g, cx, X_SOFF), add(g, mul(g, ri, get(g, cx, X_SM)),
                                                      mul(g, qj, get(g, cx, X_SN)))), g->sd);
  /* the scratch is read only after an earlier block wrote it */
  LLVMBasicBlockRef rd = blk(g, "ptile_rd"), got = blk(g, "ptile_got"), here = LLVMGetInsertBlock(g->b);
  LLVMBuildCondBr(g->b, t->first, got, rd);
  LLVMPositionBuilderAtEnd(g->b, rd);
  LLVMValueRef old = LLVMBuildLoad2(g->b, g->ct, sp, "");
  LLVMBuildBr(g->b, got);
  LLVMPositionBuilderAtEnd(g->b, got);
  LLVMValueRef prev = LLVMBuildPhi(g->b, g->ct, "");
  LLVMValueRef vals[2] = {init, old};
  LLVMBasicBlockRef bbs[2] = {here, rd};
  LLVMAddIncoming(prev, vals, bbs, 2);
  v = gemm_cadd(g, prev, v);
  LLVMBasicBlockRef out = blk(g, "ptile_c"), keep = blk(g, "ptile_s"), next = blk(g, "ptile_next");
  LLVMBuildCondBr(g->b, t->last, out, keep);
  LLVMPositionBuilderAtEnd(g->b, out);
  gemm_store_c(g, v, t->c, add(g, t->coff, add(g, mul(g, ri, t->cm), mul(g, qj, t->cn))), g->od);
  LLVMBuildBr(g->b, next);
  LLVMPositionBuilderAtEnd(g->b, keep);
  LLVMBuildStore(g->b, v, sp);
  LLVMBuildBr(g->b, next);
  LLVMPositionBuilderAtEnd(g->b, next);
  gemm_loop_close(g, &lq);
  gemm_loop_close(g, &lr);
}

void gemm_lowp_store_tile(G *g, LLVMValueRef cx, LLVMValueRef acc[][4], LLVMValueRef tile,
                          LLVMValueRef i, LLVMValueRef j, LLVMValueRef mr, LLVMValueRef nr) {
  PTile t = {.c = getp(g, cx, X_C), .coff = get(g, cx, X_COFF), .cm = get(g, cx, X_CM),
             .cn = get(g, cx, X_CN), .tp = scratch_tile(g, cx, i, j)};
  t.first = LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_FIRST), k64(g, 0), "");
  t.last = LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_LAST), k64(g, 0), "");
  LLVMBasicBlockRef fast = blk(g, "ptile_fast"), slow = blk(g, "ptile_slow"), done = blk(g, "ptile_done");
  LLVMValueRef full = LLVMBuildICmp(g->b, LLVMIntEQ, nr, k64(g, g->nr), "");
  /* an edge tile's partial sums as vectors too: only C must not see
   * its rows and columns past the edge (its valid rows of full width
   * are stored as vectors, row by row) */
  LLVMValueRef vec = LLVMBuildOr(g->b, full, LLVMBuildNot(g->b, t.last, ""), "");
  if (g->bias) vec = LLVMBuildAnd(g->b, vec, LLVMBuildNot(g->b, t.first, ""), "");
  LLVMBuildCondBr(g->b, vec, fast, slow);
  LLVMPositionBuilderAtEnd(g->b, fast);
  ptile_vectors(g, &t, acc, i, j, mr, slow, done);
  LLVMPositionBuilderAtEnd(g->b, slow);
  ptile_elements(g, &t, cx, acc, tile, i, j, mr, nr);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
}
