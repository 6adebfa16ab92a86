/* gemm_quad.c — the GEMM's K-quad path (gemm_impl.h GP_I8): 8-bit
 * operands multiplied four K indices at a time by vpdpbusd (AVX512-VNNI
 * on zmm; AVX-VNNI, or AVX512-VNNI with VL, on ymm), i32 accumulators:
 *
 *   acc[lane] += u[4q] * s[4q][lane] + ... + u[4q + 3] * s[4q + 3][lane]
 *
 * with u unsigned and s signed bytes.  The (A, B) dtypes it takes:
 *   (u8, i8)  u = A, s = B;
 *   (i8, u8)  u = B, s = A (the broadcast operand is the signed one);
 *   (i8, i8)  u = A + 128 (A's bytes xor 0x80 as they are packed), s = B:
 *             sum_k a * b = sum_k (a + 128) * b - 128 * sum_k b, so each
 *             B panel ends with a row holding -128 times its columns'
 *             sums over the K block, where the micro-kernel's
 *             accumulators start.
 * Every product is at most 255 * 128 in magnitude, four of them and the
 * accumulator add in i32 mod 2^32, as the K-pair and generic paths add
 * (integer sums wrap mod 2^32 whatever the order): the results are
 * bit-identical to theirs.  u8 x u8 (no signed operand) and i16 stay on
 * the K-pair path (vpdpwssd), as do targets without VNNI.
 *
 * Packing: A panels as ceil(kc / 4) rows of MR i32, B panels as
 * ceil(kc / 4) rows of NR i32 then the correction row (zeros unless
 * (i8, i8)); the i32 of lane l in row q holds K indices 4q .. 4q + 3 of
 * the lane, 4q in the low byte.  Bytes past kc are zero in both (A's
 * before its flip), so a padded product has a zero B byte whatever A
 * holds.  A panel slot is gemm_quad_panel_k(kc) i32 per lane (gemm.c
 * sizes the blocks by one byte per K index and lane, and cuts K into
 * blocks of even whole quads).  The register tile with zmm is the
 * target's gemm_quad_mr_512 x gemm_quad_nv_512 (loops/schedule.c: 6 x 4,
 * a B panel row one 64-byte line), else the GEMM's.
 * Needs: gemm_impl.h.
 * Used by: gemm_lowp.c (choice, packing and micro-kernel of GP_I8),
 * gemm.c / gemm_kernel.c / gemm_pack.c (panel slots: gemm_quad_panel_k). */
#include "gemm_impl.h"

bool gemm_quad_takes(const G *g) {
  bool u8s8 = (g->ad == DT_U8 || g->ad == DT_I8) && g->bd == DT_I8;
  bool s8u8 = g->ad == DT_I8 && g->bd == DT_U8;
  bool isa = (g->vec_bits == 512 && (g->isa & GEMM_ISA_VNNI)) ||
             (g->vec_bits == 256 && (g->isa & GEMM_ISA_AVXVNNI));
  return g->cd == DT_I32 && (u8s8 || s8u8) && isa;
}

void gemm_quad_tile(G *g) {
  const LfTarget *p = g->params;
  if (g->vec_bits != 512 || !p->gemm_quad_mr_512) return;
  g->mr = p->gemm_quad_mr_512, g->nv = p->gemm_quad_nv_512;
  g->nr = g->nv * g->vw;
}

LLVMValueRef gemm_quad_panel_k(G *g, LLVMValueRef kc) {
  if (g->pairs != GP_I8) return kc;
  return add(g, cdiv(g, kc, k64(g, 4)), k64(g, 1));
}

/* Whether A's bytes are flipped to unsigned (i8 x i8), and whether the
 * operands swap roles in vpdpbusd (i8 x u8: B unsigned). */
static bool flip_a(const G *g) { return g->ad == DT_I8 && g->bd == DT_I8; }
static bool swap_us(const G *g) { return g->ad == DT_I8 && g->bd == DT_U8; }

static LLVMValueRef splat32(G *g, unsigned v) { return gemm_splat_n(g, LLVMConstInt(g->i32, v, 0), g->vw); }

/* acc + vpdpbusd(u, s), each <vw x i32> of four bytes per lane. */
static LLVMValueRef dpbusd(G *g, LLVMValueRef acc, LLVMValueRef u, LLVMValueRef s) {
  LLVMValueRef x[3] = {acc, u, s};
  return gemm_intrin(g, g->vw == 16 ? "llvm.x86.avx512.vpdpbusd.512" : "llvm.x86.avx512.vpdpbusd.256",
                     NULL, 0, x, 3);
}

/* The i32 of K indices k .. k + 3 of one lane (elements at pofs + k * sp
 * + lane_ofs), zero bytes past kc or when !ok (addresses clamped to
 * k < kc). */
static LLVMValueRef quad_at(G *g, LLVMValueRef base, LLVMValueRef pofs, LLVMValueRef sp,
                            LLVMValueRef lane_ofs, LLVMValueRef k, LLVMValueRef kc, LLVMValueRef ok) {
  LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx);
  LLVMValueRef q = LLVMConstInt(g->i32, 0, 0);
  for (int t = 0; t < 4; t++) {
    LLVMValueRef kt = add(g, k, k64(g, t));
    LLVMValueRef in = LLVMBuildAnd(g->b, ok, lt(g, kt, kc), "");
    LLVMValueRef kcl = imin(g, kt, sub(g, kc, k64(g, 1)));
    LLVMValueRef v = LLVMBuildLoad2(g->b, i8, gep(g, i8, base, add(g, add(g, pofs, mul(g, kcl, sp)), lane_ofs)), "");
    v = LLVMBuildZExt(g->b, LLVMBuildSelect(g->b, in, v, LLVMConstInt(i8, 0, 0), ""), g->i32, "");
    q = LLVMBuildOr(g->b, q, LLVMBuildShl(g->b, v, LLVMConstInt(g->i32, (unsigned)(8 * t), 0), ""), "");
  }
  return q;
}

/* A's panel rows [0, qend) when its rows run along K (X_AP == 1), as
 * vectors: VW quads of each lane loaded as one run, VW lanes at a time
 * transposed in registers (lanes past nvalid repeat the last valid one
 * and become zeros), stored as VW panel rows.  Returns qend (0 when A's
 * K stride is not 1). */
static LLVMValueRef pack_a_rows(G *g, LLVMValueRef cx, LLVMValueRef dst, LLVMValueRef i0,
                                LLVMValueRef nvalid, LLVMValueRef kc) {
  int n = g->vw;
  LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx);
  LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntEQ, get(g, cx, X_AP), k64(g, 1), "");
  LLVMValueRef full = sdiv(g, kc, k64(g, 4 * n));
  LLVMValueRef qend = LLVMBuildSelect(g->b, ok, mul(g, full, k64(g, n)), k64(g, 0), "");
  LLVMValueRef base = getp(g, cx, X_A), si = get(g, cx, X_AI);
  LLVMValueRef src0 = add(g, get(g, cx, X_AOFF), get(g, cx, X_PC)), last = sub(g, nvalid, k64(g, 1));
  LLVMValueRef rowo[64], live[64];
  for (int r = 0; r < g->mr; r++) {
    rowo[r] = add(g, src0, mul(g, add(g, i0, imin(g, k64(g, r), last)), si));
    live[r] = lt(g, k64(g, r), nvalid);
  }
  GLoop lq;
  LLVMValueRef q = gemm_loop_open(g, &lq, k64(g, 0), qend, k64(g, n));
  for (int r0 = 0; r0 < g->mr; r0 += n) {
    int rows = g->mr - r0 < n ? g->mr - r0 : n;
    LLVMValueRef v[64], idx[64];
    for (int i = 0; i < n; i++) {
      if (i >= rows) {
        v[i] = LLVMGetUndef(g->vt);
        continue;
      }
      LLVMValueRef x = LLVMBuildLoad2(g->b, g->vt, gep(g, i8, base, add(g, rowo[r0 + i], mul(g, q, k64(g, 4)))), "");
      LLVMSetAlignment(x, 1);
      if (flip_a(g)) x = LLVMBuildXor(g->b, x, splat32(g, 0x80808080u), "");
      v[i] = LLVMBuildSelect(g->b, live[r0 + i], x, LLVMConstNull(g->vt), "");
    }
    gemm_transpose(g, v, n);
    for (int i = 0; i < rows; i++) idx[i] = LLVMConstInt(g->i32, (unsigned)i, 0);
    LLVMValueRef mask = LLVMConstVector(idx, (unsigned)rows);
    for (int j = 0; j < n; j++) {
      LLVMValueRef x = rows == n ? v[j] : LLVMBuildShuffleVector(g->b, v[j], LLVMGetUndef(g->vt), mask, "");
      LLVMValueRef d = gep(g, g->i32, dst, add(g, mul(g, add(g, q, k64(g, j)), k64(g, g->mr)), k64(g, r0)));
      LLVMSetAlignment(LLVMBuildStore(g->b, x, d), 4);
    }
  }
  gemm_loop_close(g, &lq);
  return qend;
}

/* B's quad q into dst's row q: four <NR x i8> rows of B from k = 4q
 * (with `tail`, rows past kc zero: the addresses clamped, the values
 * selected), interleaved byte by byte into NR i32. */
static void quad_row(G *g, LLVMValueRef base, LLVMValueRef pofs, LLVMValueRef sp, LLVMValueRef i0,
                     LLVMValueRef kc, LLVMValueRef dst, LLVMValueRef q, bool tail) {
  int R = g->nr;
  LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx), sv = LLVMVectorType(i8, (unsigned)R);
  LLVMValueRef cat[256], mix[256], row[4];
  for (int i = 0; i < 2 * R; i++) cat[i] = LLVMConstInt(g->i32, (unsigned)i, 0);
  for (int l = 0; l < R; l++)
    for (int t = 0; t < 4; t++) mix[4 * l + t] = LLVMConstInt(g->i32, (unsigned)(t * R + l), 0);
  for (int t = 0; t < 4; t++) {
    LLVMValueRef kt = add(g, mul(g, q, k64(g, 4)), k64(g, t));
    LLVMValueRef kcl = tail ? imin(g, kt, sub(g, kc, k64(g, 1))) : kt;
    LLVMValueRef ld = LLVMBuildLoad2(g->b, sv, gep(g, i8, base, add(g, add(g, pofs, mul(g, kcl, sp)), i0)), "");
    LLVMSetAlignment(ld, 1);
    row[t] = tail ? LLVMBuildSelect(g->b, lt(g, kt, kc), ld, LLVMConstNull(sv), "") : ld;
  }
  LLVMValueRef c = LLVMConstVector(cat, (unsigned)(2 * R));
  LLVMValueRef lo = LLVMBuildShuffleVector(g->b, row[0], row[1], c, "");
  LLVMValueRef hi = LLVMBuildShuffleVector(g->b, row[2], row[3], c, "");
  LLVMValueRef v = LLVMBuildShuffleVector(g->b, lo, hi, LLVMConstVector(mix, (unsigned)(4 * R)), "");
  LLVMSetAlignment(LLVMBuildStore(g->b, v, gep(g, g->i32, dst, mul(g, q, k64(g, R)))), 4);
}

/* B's quads when its lanes are contiguous (X_BI == 1) and all valid:
 * the whole quads, then the partial one (kc not a multiple of 4). */
static void pack_b_rows(G *g, LLVMValueRef base, LLVMValueRef pofs, LLVMValueRef sp, LLVMValueRef i0,
                        LLVMValueRef kc, LLVMValueRef dst) {
  GLoop l;
  LLVMValueRef nq = sdiv(g, kc, k64(g, 4));
  LLVMValueRef q = gemm_loop_open(g, &l, k64(g, 0), nq, k64(g, 1));
  quad_row(g, base, pofs, sp, i0, kc, dst, q, false);
  gemm_loop_close(g, &l);
  LLVMBasicBlockRef part = blk(g, "quad_part"), done = blk(g, "quad_rows");
  LLVMBuildCondBr(g->b, lt(g, mul(g, nq, k64(g, 4)), kc), part, done);
  LLVMPositionBuilderAtEnd(g->b, part);
  quad_row(g, base, pofs, sp, i0, kc, dst, nq, true);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
}

/* B's correction row after its np quad rows: -128 * each column's sum
 * (vpdpbusd of bytes 1 and the packed rows) for i8 x i8, else zeros. */
static void pack_b_correction(G *g, LLVMValueRef dst, LLVMValueRef np) {
  LLVMValueRef crow = gep(g, g->i32, dst, mul(g, np, k64(g, g->nr)));
  for (int v = 0; v < g->nv; v++)
    LLVMSetAlignment(LLVMBuildStore(g->b, LLVMConstNull(g->vt), gep(g, g->i32, crow, k64(g, v * g->vw))), 4);
  if (!flip_a(g)) return;
  GLoop l;
  LLVMValueRef q = gemm_loop_open(g, &l, k64(g, 0), np, k64(g, 1));
  LLVMValueRef row = gep(g, g->i32, dst, mul(g, q, k64(g, g->nr)));
  for (int v = 0; v < g->nv; v++) {
    LLVMValueRef cp = gep(g, g->i32, crow, k64(g, v * g->vw));
    LLVMValueRef s = LLVMBuildLoad2(g->b, g->vt, cp, "");
    LLVMValueRef b = LLVMBuildLoad2(g->b, g->vt, gep(g, g->i32, row, k64(g, v * g->vw)), "");
    LLVMSetAlignment(s, 4), LLVMSetAlignment(b, 4);
    LLVMSetAlignment(LLVMBuildStore(g->b, dpbusd(g, s, splat32(g, 0x01010101u), b), cp), 4);
  }
  gemm_loop_close(g, &l);
  for (int v = 0; v < g->nv; v++) {
    LLVMValueRef cp = gep(g, g->i32, crow, k64(g, v * g->vw)), s = LLVMBuildLoad2(g->b, g->vt, cp, "");
    LLVMSetAlignment(s, 4);
    LLVMSetAlignment(LLVMBuildStore(g->b, LLVMBuildMul(g->b, s, splat32(g, (unsigned)-128), ""), cp), 4);
  }
}

/* pack(ctx, dst, i0, nvalid, kc) as gemm_emit_pack, in quads (above). */
LLVMValueRef gemm_quad_emit_pack(G *g, int which) {
  LLVMTypeRef ps[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  LLVMValueRef f = gemm_new_fn(g, which ? "pack_b" : "pack_a", ps, 5);
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  int R = which ? g->nr : g->mr;
  LLVMValueRef base = getp(g, cx, which ? X_B : X_A), off = get(g, cx, which ? X_BOFF : X_AOFF);
  LLVMValueRef si = get(g, cx, which ? X_BI : X_AI), sp = get(g, cx, which ? X_BP : X_AP);
  LLVMValueRef pofs = add(g, off, mul(g, get(g, cx, X_PC), sp)), np = cdiv(g, kc, k64(g, 4));
  LLVMBasicBlockRef sca = blk(g, "quad_scalar"), done = blk(g, "quad_done");
  LLVMValueRef q0 = k64(g, 0);
  LLVMBasicBlockRef from = LLVMGetInsertBlock(g->b);
  if (which) { /* B: rows of contiguous lanes as vectors */
    LLVMBasicBlockRef vec = blk(g, "quad_vec");
    LLVMValueRef fast = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, si, k64(g, 1), ""),
                                     LLVMBuildICmp(g->b, LLVMIntEQ, nvalid, k64(g, R), ""), "");
    LLVMBuildCondBr(g->b, fast, vec, sca);
    LLVMPositionBuilderAtEnd(g->b, vec);
    pack_b_rows(g, base, pofs, sp, i0, kc, dst);
    LLVMBuildBr(g->b, done);
  } else { /* A: whole runs of VW quads as vectors, the rest below */
    q0 = pack_a_rows(g, cx, dst, i0, nvalid, kc);
    from = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, sca);
  }
  LLVMPositionBuilderAtEnd(g->b, sca);
  LLVMValueRef start = LLVMBuildPhi(g->b, g->i64, "");
  LLVMAddIncoming(start, &q0, &from, 1);
  GLoop lq, ll;
  LLVMValueRef q = gemm_loop_open(g, &lq, start, np, k64(g, 1));
  LLVMValueRef row = gep(g, g->i32, dst, mul(g, q, k64(g, R)));
  LLVMValueRef lane = gemm_loop_open(g, &ll, k64(g, 0), k64(g, R), k64(g, 1));
  LLVMValueRef cl = imin(g, lane, sub(g, nvalid, k64(g, 1)));
  LLVMValueRef v = quad_at(g, base, pofs, sp, mul(g, add(g, i0, cl), si), mul(g, q, k64(g, 4)), kc,
                           lt(g, lane, nvalid));
  if (!which && flip_a(g)) v = LLVMBuildXor(g->b, v, LLVMConstInt(g->i32, 0x80808080u, 0), "");
  LLVMBuildStore(g->b, v, gep(g, g->i32, row, lane));
  gemm_loop_close(g, &ll);
  gemm_loop_close(g, &lq);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
  if (which) pack_b_correction(g, dst, np);
  LLVMBuildRetVoid(g->b);
  return f;
}

/* One quad step q: nx = cur + A[r, quad q] . B[quad q, v*VW..]. */
static void quad_step(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef q,
                      LLVMValueRef cur[][4], LLVMValueRef nx[][4]) {
  LLVMValueRef bv[4], arow = gep(g, g->i32, ap, mul(g, q, k64(g, g->mr)));
  LLVMValueRef brow = gep(g, g->i32, bp, mul(g, q, k64(g, g->nr)));
  for (int v = 0; v < g->nv; v++) {
    bv[v] = LLVMBuildLoad2(g->b, g->vt, gep(g, g->i32, brow, k64(g, v * g->vw)), "");
    LLVMSetAlignment(bv[v], 4);
  }
  for (int r = 0; r < g->mr; r++) {
    LLVMValueRef s = LLVMBuildLoad2(g->b, g->i32, gep(g, g->i32, arow, k64(g, r)), "");
    LLVMValueRef a = gemm_splat_n(g, s, g->vw);
    for (int v = 0; v < g->nv; v++)
      nx[r][v] = swap_us(g) ? dpbusd(g, cur[r][v], bv[v], a) : dpbusd(g, cur[r][v], a, bv[v]);
  }
}

/* acc[r][v] over ceil(kc / 4) quads, one quad step per iteration, from
 * B's correction row. */
void gemm_quad_micro_kernel(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef kc,
                            LLVMValueRef acc[][4]) {
  LLVMValueRef np = cdiv(g, kc, k64(g, 4)), init[4];
  LLVMValueRef crow = gep(g, g->i32, bp, mul(g, np, k64(g, g->nr)));
  for (int v = 0; v < g->nv; v++) {
    init[v] = LLVMConstNull(g->vt);
    if (!flip_a(g)) continue;
    init[v] = LLVMBuildLoad2(g->b, g->vt, gep(g, g->i32, crow, k64(g, v * g->vw)), "");
    LLVMSetAlignment(init[v], 4);
  }
  gemm_lowp_step_loop(g, ap, bp, np, init, quad_step, "qk", acc);
}
