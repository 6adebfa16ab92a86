/* gemm.c — MATMUL and CONV2D for the CPU backend as a tiled, packed GEMM
 * (gemm.h), emitted through the LLVM C API.
 *
 * C[M, N] = A[M, K] x B[K, N] for each batch (matmul: the batch dims;
 * conv2d: image and group), blocked BLIS-style:
 *   for jc in N by NC:  for pc in K by KC:
 *     pack B[pc.., jc..] into NR-wide panels (parallel over panels)
 *     one work item per thread (work_split: row blocks, or column chunks
 *     when M is short), each packing its A rows into MR-high panels:
 *       for each NR panel, each MR panel: micro-kernel, store the tile.
 *   Low-precision products at T > 1 threads turn this inside out where
 *   the packing has room (k_inside): the shared operand packed for every
 *   K block in one job, then items that each run all K blocks, taken one
 *   at a time: two parallel jobs per product instead of two per K block.
 *   A skinny product (all of M in one row block, N >= 2 M: x @ W with
 *   up to a few hundred rows) skips the shared B packing: each column
 *   chunk packs its B panels itself, a group of X_BGRP panels at a time
 *   right before their micro-kernels, into slots that stay in L2 (the
 *   panel in use in L1), reading B's rows as runs over the whole group
 *   (work_split, X_BFUSE, gemm_pack_b_group).
 * MC, KC and NC come from the cache sizes the runtime reads at the first
 * call (blocking), MR and NV from the target's vector width and the
 * LfTarget row.  A matmul whose A has at most GEMM_SMALL_MAX rows, or B
 * as many columns, runs gemm_small.c's path instead when its big operand
 * is contiguous along a dim (chosen at run time per batch item).
 * The micro-kernel keeps MR x (NV vectors of VW lanes) accumulators in
 * registers (llvm.fmuladd for floats, mul+add for i64) over the packed
 * panels.  Packing absorbs strides (transposes, broadcasts of stride 0,
 * slices), converts to the compute type and pads edge panels with zeros;
 * tiles at the edges and outputs without unit column stride go through a
 * scalar store (outputs of another dtype than the compute type: full
 * tiles with unit column stride as vectors too, gemm_lowp.c).
 * An operand is addressed as MAT (lane i, k index p: off + i*si + p*sp),
 * IM2COL (lane = output pixel, p = (ci, ky, kx): the input element, 0 in
 * the padding) or WEIGHT (lane = output channel, p = (ci, ky, kx)); p is
 * (ky, kx, ci) instead when IM2COL is A (channels-last output).  IM2COL
 * packs with masked vector loads (B) or channel runs (A), no per-element
 * branch (see "im2col packing").
 * When the output dtype differs from the compute type, the partial sums
 * of all but the last K block go to scratch in the compute type and the
 * last block rounds each output element once (gemm_lowp.c's store_tile).
 * Epilogues (gemm.h GemmEmit.epi_fn): after the j and i loops of a row
 * block and column chunk, in the last K block (X_LAST), block_body calls
 * the kernel's hook on that block of C through a function pointer in the
 * context (X_EPIFN; NULL: none), so the helper functions stay shared per
 * configuration (the driver's key says ".epi") while the epilogue is the
 * kernel's own.
 * Prologues (gemm.h GemmPrologue): an operand with one is packed by
 * emit_pack_pro, which inlines the caller's expression per element; its
 * helper functions are then the kernel's own (key ".pro", always
 * emitted afresh: LLVM makes the names unique), except block_body when
 * the prologue is A's: block_body packs A through X_PACKA (the kernel's
 * pack_a, or the configuration's), or with the configuration's pack_a
 * inlined when X_PACKA is NULL, so one block_body serves the products
 * that differ only in the epilogue or A's prologue (make_fns' body key;
 * mlp's x @ w1.T and gelu(h) @ w2.T + b2).
 * Packing memory (packed B and one packed-A buffer per thread) is the
 * caller's, allocated at the kernel's entry (cg_*_pool_bytes), so a GEMM
 * that has started does not fail.
 * All run-time parameters live in a context array of 8-byte slots (X_*)
 * shared with the emitted parallel bodies.  This file: the helpers, element
 * conversion, the emitted functions' frame and the driver in the kernel;
 * packing is gemm_pack.c's, the micro-kernel and block body gemm_kernel.c's.
 * Needs: gemm_impl.h.  Produces:
 * private functions tdsl.gemm.<configuration>.* in the
 * module, one set per configuration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>

#include "gemm_impl.h"

/* An alloca at the start of the current function's entry block. */
LLVMValueRef gemm_entry_alloca(G *g, LLVMTypeRef t, int n) {
  LLVMBuilderRef b = LLVMCreateBuilderInContext(g->ctx);
  LLVMBasicBlockRef e = LLVMGetEntryBasicBlock(g->fn);
  LLVMValueRef first = LLVMGetFirstInstruction(e);
  if (first) LLVMPositionBuilderBefore(b, first);
  else LLVMPositionBuilderAtEnd(b, e);
  LLVMValueRef a = LLVMBuildArrayAlloca(b, t, LLVMConstInt(g->i32, (unsigned)n, 0), "");
  LLVMSetAlignment(a, 64);
  LLVMDisposeBuilder(b);
  return a;
}

/* ---- loops: for (iv = lo; iv < hi; iv += step) --------------------------- */

/* Marks the loop whose back edge is `br` as not for the loop vectorizer:
 * the micro-kernel is vector code already, and vectorizing the packing
 * and edge loops doubles the code LLVM optimizes and compiles (the
 * bulk of a GEMM's compile time) for no measurable speed.  The loop ID
 * is the self-referential node LLVM requires: !{!self, !{"...", i1 0}}. */
void gemm_no_vectorize(G *g, LLVMValueRef br) {
  const char *k = "llvm.loop.vectorize.enable";
  LLVMMetadataRef prop[2] = {LLVMMDStringInContext2(g->ctx, k, strlen(k)),
                             LLVMValueAsMetadata(LLVMConstInt(g->i1, 0, 0))};
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(g->ctx, NULL, 0);
  LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(g->ctx, prop, 2)};
  LLVMMetadataRef id = LLVMMDNodeInContext2(g->ctx, ops, 2);
  LLVMMetadataReplaceAllUsesWith(tmp, id); /* also disposes of tmp */
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(g->ctx, "llvm.loop", 9),
                  LLVMMetadataAsValue(g->ctx, id));
}

LLVMValueRef gemm_loop_open(G *g, GLoop *l, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef step) {
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b), body = blk(g, "gbody");
  l->head = blk(g, "gloop");
  l->exit = blk(g, "gend");
  l->step = step;
  LLVMBuildBr(g->b, l->head);
  LLVMPositionBuilderAtEnd(g->b, l->head);
  l->iv = LLVMBuildPhi(g->b, g->i64, "");
  LLVMAddIncoming(l->iv, &lo, &pre, 1);
  LLVMBuildCondBr(g->b, lt(g, l->iv, hi), body, l->exit);
  LLVMPositionBuilderAtEnd(g->b, body);
  return l->iv;
}

void gemm_loop_close(G *g, GLoop *l) {
  LLVMValueRef next = add(g, l->iv, l->step);
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
  gemm_no_vectorize(g, LLVMBuildBr(g->b, l->head));
  LLVMAddIncoming(l->iv, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(g->b, l->exit);
}

/* ---- element conversion -------------------------------------------------- */

LLVMTypeRef gemm_storage(G *g, DType t) {
  switch (t) {
  case DT_BOOL: case DT_I8: case DT_U8: return LLVMInt8TypeInContext(g->ctx);
  case DT_I16: case DT_BF16: return g->i16;
  case DT_I32: return g->i32;
  case DT_I64: return g->i64;
  case DT_F16: return LLVMHalfTypeInContext(g->ctx);
  case DT_F32: return g->f32;
  default: return LLVMDoubleTypeInContext(g->ctx);
  }
}

/* Loads element i of p (dtype t) converted to the compute type. */
LLVMValueRef gemm_load_c(G *g, LLVMValueRef p, LLVMValueRef i, DType t) {
  LLVMValueRef v = LLVMBuildLoad2(g->b, gemm_storage(g, t), gep(g, gemm_storage(g, t), p, i), "");
  switch (t) {
  case DT_F16: return LLVMBuildFPExt(g->b, v, g->ct, "");
  case DT_BF16: {
    LLVMValueRef w = LLVMBuildShl(g->b, LLVMBuildZExt(g->b, v, g->i32, ""),
                                  LLVMConstInt(g->i32, 16, 0), "");
    return LLVMBuildBitCast(g->b, w, g->f32, "");
  }
  case DT_F32: case DT_F64: return v;
  case DT_I32: case DT_I64: /* to the integer compute type, i32 or i64 */
    return LLVMTypeOf(v) == g->ct ? v : LLVMBuildIntCast2(g->b, v, g->ct, 1, "");
  case DT_BOOL: case DT_U8: return LLVMBuildZExt(g->b, v, g->ct, "");
  default: return LLVMBuildSExt(g->b, v, g->ct, "");
  }
}

/* f32 -> bf16 bits, nearest even, NaN kept quiet. */
static LLVMValueRef to_bf16(G *g, LLVMValueRef f) {
  LLVMValueRef u = LLVMBuildBitCast(g->b, f, g->i32, ""), k16 = LLVMConstInt(g->i32, 16, 0);
  LLVMValueRef hi = LLVMBuildLShr(g->b, u, k16, "");
  LLVMValueRef lsb = LLVMBuildAnd(g->b, hi, LLVMConstInt(g->i32, 1, 0), "");
  LLVMValueRef r = add(g, u, add(g, lsb, LLVMConstInt(g->i32, 0x7FFF, 0)));
  r = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, r, k16, ""), g->i16, "");
  LLVMValueRef q = LLVMBuildOr(g->b, LLVMBuildTrunc(g->b, hi, g->i16, ""),
                               LLVMConstInt(g->i16, 0x40, 0), "");
  return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealUNO, f, f, ""), q, r, "");
}

/* Stores compute value v as element i of p (dtype t). */
void gemm_store_c(G *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i, DType t) {
  LLVMTypeRef st = gemm_storage(g, t);
  if (t == DT_BF16) v = to_bf16(g, v);
  else if (t == DT_F16) v = LLVMBuildFPTrunc(g->b, v, st, "");
  else if (t == DT_BOOL) v = LLVMBuildZExt(g->b, LLVMBuildICmp(g->b, LLVMIntNE, v, gemm_czero(g), ""), st, "");
  else if (!dtype_is_float(t) && st != g->ct) v = LLVMBuildTrunc(g->b, v, st, "");
  LLVMBuildStore(g->b, v, gep(g, st, p, i));
}

static bool isf(G *g) { return dtype_is_float(g->cd); }
LLVMValueRef gemm_czero(G *g) { return LLVMConstNull(g->ct); }

LLVMValueRef gemm_cadd(G *g, LLVMValueRef a, LLVMValueRef b) {
  return isf(g) ? LLVMBuildFAdd(g->b, a, b, "") : add(g, a, b);
}

/* acc + a * b, fused where the target can. */
LLVMValueRef gemm_fma(G *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc) {
  if (!isf(g)) return add(g, acc, mul(g, a, b));
  LLVMTypeRef t = LLVMTypeOf(a);
  unsigned id = LLVMLookupIntrinsicID("llvm.fmuladd", 12);
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(g->mod, id, &t, 1);
  LLVMValueRef x[3] = {a, b, acc};
  return LLVMBuildCall2(g->b, LLVMIntrinsicGetType(g->ctx, id, &t, 1), f, x, 3, "");
}

LLVMValueRef gemm_splat(G *g, LLVMValueRef s) {
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(g->vt), s,
                                          LLVMConstInt(g->i32, 0, 0), "");
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(g->vt),
                                LLVMConstNull(LLVMVectorType(g->i32, (unsigned)g->vw)), "");
}

/* ---- emitted functions --------------------------------------------------- */

LLVMValueRef gemm_new_fn(G *g, const char *what, LLVMTypeRef *ps, unsigned n) {
  char name[80];
  snprintf(name, sizeof name, "tdsl.gemm.%s.%s", g->key, what);
  LLVMValueRef f = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->vd, ps, n, 0));
  LLVMSetLinkage(f, LLVMPrivateLinkage);
  /* finished vector code: the light pipeline (machine.c); a product that
   * converts its operands (bf16, integers) packs through scalar loops
   * LLVM's full pipeline speeds up (matmul_i8_layer: 7% slower light) */
  if (g->ad == g->cd && g->bd == g->cd && !g->cscr) cpu_mark_light(f);
  if (g->vec_bits >= 512) { /* keep zmm registers for the explicit vectors */
    cg_prefer_512(g->ctx, f);
  }
  g->fn = f;
  LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, f, "entry"));
  return f;
}

/* The conv K order: (ci, ky, kx) row-major when the im2col operand is B
 * (its packer loads one tap for a vector of pixels at a time), (ky, kx,
 * ci) when it is A (a pixel's K row is then runs of Cg channels at one
 * tap, contiguous in a channels-last input).  The weight operand of the
 * same GEMM follows the same order (the orientation is in the key). */
static bool k_ci_minor(const G *g) { return g->ka == GK_IM2COL; }

/* Input channels per group: K / (KH * KW) (> 0 whenever K > 0). */
LLVMValueRef gemm_cin_per_group(G *g, LLVMValueRef cx) {
  LLVMValueRef khw = mul(g, get(g, cx, X_KH), get(g, cx, X_KW));
  khw = LLVMBuildSelect(g->b, lt(g, khw, k64(g, 1)), k64(g, 1), khw, "");
  return sdiv(g, get(g, cx, X_K), khw);
}

/* Decomposes a convolution k index into (ci, ky, kx) in the K order. */
static void split_k(G *g, LLVMValueRef cx, LLVMValueRef p, LLVMValueRef *ci, LLVMValueRef *ky,
                    LLVMValueRef *kx) {
  LLVMValueRef kw = get(g, cx, X_KW), tap;
  if (k_ci_minor(g)) {
    LLVMValueRef cg = gemm_cin_per_group(g, cx);
    *ci = srem(g, p, cg);
    tap = sdiv(g, p, cg);
  } else {
    LLVMValueRef khw = mul(g, get(g, cx, X_KH), kw);
    *ci = sdiv(g, p, khw);
    tap = srem(g, p, khw);
  }
  *ky = sdiv(g, tap, kw);
  *kx = srem(g, tap, kw);
}

/* (ci, ky, kx) of K index pc + p in a loop over p: split once before the
 * loop (kwalk_init), read in the body (kwalk_get) and advanced at its
 * end (kwalk_next) with wrap-arounds: no divisions per K index.  st:
 * three i64 allocas, which LLVM turns into loop-carried registers. */
void gemm_kwalk_init(G *g, LLVMValueRef cx, LLVMValueRef k0, LLVMValueRef st[3]) {
  LLVMValueRef v[3];
  split_k(g, cx, k0, &v[0], &v[1], &v[2]);
  for (int i = 0; i < 3; i++) {
    st[i] = gemm_entry_alloca(g, g->i64, 1);
    LLVMBuildStore(g->b, v[i], st[i]);
  }
}

void gemm_kwalk_get(G *g, LLVMValueRef st[3], LLVMValueRef v[3]) {
  for (int i = 0; i < 3; i++) v[i] = LLVMBuildLoad2(g->b, g->i64, st[i], "");
}

void gemm_kwalk_next(G *g, LLVMValueRef cx, LLVMValueRef st[3], LLVMValueRef v[3]) {
  static const int ci_major[3] = {2, 1, 0}, ci_minor[3] = {0, 2, 1}; /* fastest first */
  const int *ord = k_ci_minor(g) ? ci_minor : ci_major;
  LLVMValueRef lim[3] = {NULL, get(g, cx, X_KH), get(g, cx, X_KW)}, carry = NULL;
  if (k_ci_minor(g)) lim[0] = gemm_cin_per_group(g, cx);
  for (int j = 0; j < 3; j++) {
    int i = ord[j];
    LLVMValueRef nx = carry ? add(g, v[i], LLVMBuildZExt(g->b, carry, g->i64, "")) : add(g, v[i], k64(g, 1));
    if (j == 2) {
      LLVMBuildStore(g->b, nx, st[i]);
      break;
    }
    LLVMValueRef wrap = LLVMBuildICmp(g->b, LLVMIntEQ, nx, lim[i], "");
    if (carry) wrap = LLVMBuildAnd(g->b, wrap, carry, "");
    LLVMBuildStore(g->b, LLVMBuildSelect(g->b, wrap, k64(g, 0), nx, ""), st[i]);
    carry = wrap;
  }
}

/* iy0[lane], ix0[lane] (R-element allocas): the input row and column of
 * the top-left tap of output pixel i0 + lane; lanes >= nvalid get a row
 * that is never in bounds. */
void gemm_lane_origins(G *g, LLVMValueRef cx, LLVMValueRef i0, LLVMValueRef nvalid, int R,
                         LLVMValueRef *iy0, LLVMValueRef *ix0) {
  *iy0 = gemm_entry_alloca(g, g->i64, R), *ix0 = gemm_entry_alloca(g, g->i64, R);
  LLVMValueRef ow = get(g, cx, X_OW);
  GLoop l;
  LLVMValueRef lane = gemm_loop_open(g, &l, k64(g, 0), k64(g, R), k64(g, 1));
  LLVMValueRef q = add(g, i0, lane), oy = sdiv(g, q, ow), ox = srem(g, q, ow);
  LLVMValueRef y = sub(g, mul(g, oy, get(g, cx, X_SH)), get(g, cx, X_PH));
  LLVMValueRef x = sub(g, mul(g, ox, get(g, cx, X_SW)), get(g, cx, X_PW));
  y = LLVMBuildSelect(g->b, lt(g, lane, nvalid), y, k64(g, INT64_MIN / 2), "");
  LLVMBuildStore(g->b, y, gep(g, g->i64, *iy0, lane));
  LLVMBuildStore(g->b, x, gep(g, g->i64, *ix0, lane));
  gemm_loop_close(g, &l);
}

/* ---- driver in the kernel ------------------------------------------------- */

static void setup(G *g, const GemmEmit *e, DType ad, DType bd, DType od) {
  memset(g, 0, sizeof *g);
  g->ctx = e->ctx, g->mod = e->mod;
  g->b = LLVMCreateBuilderInContext(e->ctx);
  g->i1 = LLVMInt1TypeInContext(e->ctx);
  g->i16 = LLVMInt16TypeInContext(e->ctx);
  g->i32 = LLVMInt32TypeInContext(e->ctx);
  g->i64 = LLVMInt64TypeInContext(e->ctx);
  g->f32 = LLVMFloatTypeInContext(e->ctx);
  g->ptr = LLVMPointerTypeInContext(e->ctx, 0);
  g->vd = LLVMVoidTypeInContext(e->ctx);
  g->ad = ad, g->bd = bd, g->od = od;
  g->epi = e->epi_fn != NULL;
  g->cd = gemm_lowp_compute_dtype(od);
  g->ct = g->cd == DT_F32 ? g->f32 : g->cd == DT_F64 ? LLVMDoubleTypeInContext(e->ctx)
        : g->cd == DT_I32 ? g->i32 : g->i64;
  g->isa = e->isa;
  g->cscr = od != g->cd; /* partial sums in compute-type scratch (gemm_lowp.c) */
  g->vec_bits = e->vec_bits;
  g->vw = e->vec_bits / (8 * dtype_size(g->cd));
  g->nv = e->params->gemm_nv;
  g->mr = e->vec_bits >= 512 ? e->params->gemm_mr_512 : e->params->gemm_mr;
  g->nr = g->nv * g->vw;
  g->vt = LLVMVectorType(g->ct, (unsigned)g->vw);
  g->nregs = e->vec_bits >= 512 ? 32 : 16;
  g->params = e->params;
  g->small_forms = GEMM_SMALL_FORMS_ALL;
}

typedef struct Run {
  LLVMValueRef cx, pack_body, block_body;
  LLVMValueRef pack_a; /* X_PACKA: block_body's pack_a, NULL for its own */
  LLVMValueRef kloop_pack, kloop_block, kloop_packa; /* the K loop inside (gemm_emit_kloop) */
  LLVMValueRef small_pack, small_form[4]; /* the small path's, or NULL (gemm_small.c) */
  LLVMValueRef run; /* void (ptr cx): one product (emit_run) */
} Run;

/* Whether this GEMM has the small path (gemm_small.c): matmul operands
 * read from memory. */
static bool has_small_cfg(const G *g) { return g->ka == GK_MAT && g->kb == GK_MAT && !g->pa && !g->pb; }

/* Whether this product may take the small path (needs its packing
 * bytes): the configuration has one and some form is possible. */
static bool has_small(const G *g) { return has_small_cfg(g) && g->small_forms; }

/* Whether `v == c` (eq) or `v <= c` (!eq) may hold for the i64 v:
 * always, unless v is a constant (a size or stride known at compile
 * time). */
static bool may(LLVMValueRef v, bool eq, long long c) {
  if (!v || !LLVMIsAConstantInt(v)) return true;
  long long x = LLVMConstIntGetSExtValue(v);
  return eq ? x == c : x <= c;
}

static bool may_not(LLVMValueRef v, bool eq, long long c) {
  if (!v || !LLVMIsAConstantInt(v)) return true;
  return !may(v, eq, c);
}

/* The small path's forms (gemm_small.c: bit 2 * axpy + four) a matmul
 * can take, as gemm_small_select and gemm_small_run choose them at run
 * time, less those its compile-time sizes and strides rule out: S = A
 * needs M <= GEMM_SMALL_MAX and B contiguous along a dim (axpy when its
 * lane stride is 1, else dot; four rows when M > 1), S = B^T the same
 * with N and A.  Only the forms left are emitted (mlp's x @ W.T with a
 * [128, 64] W: the dot forms), and none when no form is left. */
static void small_forms(G *g, const GemmTensor *a, const GemmTensor *b, const GemmTensor *out) {
  int R = out->rank, f = 0;
  LLVMValueRef M = out->shape[R - 2], N = out->shape[R - 1], K = a->shape[R - 1];
  bool empty = !may_not(M, false, 0) || !may_not(N, false, 0) || !may_not(K, false, 0);
  for (int swap = 0; swap < 2 && !empty; swap++) {
    /* S's rows, V's lane and K strides */
    LLVMValueRef q = swap ? N : M, vl = swap ? a->stride[R - 2] : b->stride[R - 1];
    LLVMValueRef vk = swap ? a->stride[R - 1] : b->stride[R - 2];
    if (swap && g->ad != g->bd) continue;
    if (!may(q, false, GEMM_SMALL_MAX) || !(may(vl, true, 1) || may(vk, true, 1))) continue;
    for (int axpy = 0; axpy < 2; axpy++)
      for (int four = 0; four < 2; four++)
        if ((axpy ? may(vl, true, 1) : may_not(vl, true, 1)) &&
            (four ? may_not(q, false, 1) : may(q, false, 1)))
          f |= 1 << (2 * axpy + four);
  }
  g->small_forms = f;
}

/* The helper functions depend only on the dtypes, operand kinds, bias
 * and vector width (every size, stride and offset lives in the run-time
 * context), so all GEMMs of a module with the same configuration share
 * one set: less code for LLVM to optimize and compile. */
static void make_key(G *g) {
  snprintf(g->key, sizeof g->key, "%d%d%d%d%d%d%d%d.v%d%s%s%s", (int)g->ad, (int)g->bd,
           (int)g->od, (int)g->sd, (int)g->ka, (int)g->kb, (int)g->bias, (int)g->bias_n,
           g->vec_bits, g->epi ? ".epi" : "", g->pa || g->pb ? ".pro" : "", gemm_lowp_key(g));
}

static void run_gemm(G *g, Run *r);

/* The driver of one product, C = A x B with the batch offsets in the
 * context (its only parameter): the small path when the shape is short
 * (gemm_small.c), else the packed one (run_gemm).  A helper function
 * like the others (shared per configuration, the light pipeline), so
 * the kernel's entry holds only the context's set-up and a call. */
static LLVMValueRef emit_run(G *g, Run *r) {
  LLVMValueRef f = gemm_new_fn(g, "run", &g->ptr, 1);
  Run in = *r;
  in.cx = LLVMGetParam(f, 0);
  if (has_small_cfg(g)) {
    LLVMBasicBlockRef bs = blk(g, "gemm_small"), bp = blk(g, "gemm_packed"), bj = blk(g, "gemm_done");
    LLVMBuildCondBr(g->b, gemm_small_select(g, in.cx), bs, bp);
    LLVMPositionBuilderAtEnd(g->b, bs);
    gemm_small_run(g, in.cx, in.small_pack);
    LLVMBuildBr(g->b, bj);
    LLVMPositionBuilderAtEnd(g->b, bp);
    run_gemm(g, &in);
    LLVMBuildBr(g->b, bj);
    LLVMPositionBuilderAtEnd(g->b, bj);
  } else {
    run_gemm(g, &in);
  }
  LLVMBuildRetVoid(g->b);
  return f;
}

/* The module's helper function `what` under key, or NULL. */
static LLVMValueRef named(G *g, const char *key, const char *what) {
  char name[80];
  snprintf(name, sizeof name, "tdsl.gemm.%s.%s", key, what);
  return LLVMGetNamedFunction(g->mod, name);
}

/* Emits operand which's packing (gemm_emit_pack) named under key. */
static LLVMValueRef emit_pack_as(G *g, const char *key, int which) {
  char own[sizeof g->key]; /* gemm_new_fn names functions by g->key */
  memcpy(own, g->key, sizeof own);
  memmove(g->key, key, sizeof own);
  LLVMValueRef f = gemm_emit_pack(g, which);
  memcpy(g->key, own, sizeof own);
  return f;
}

/* The string attribute of a block_body that packs A itself (inlines the
 * configuration's pack_a) when X_PACKA is NULL. */
static const char own_pack_a[] = "tdsl-own-pack-a";

/* Emits the helper functions (or finds the module's copy), then restores
 * the caller's builder. */
static Run make_fns(G *g, const GemmEmit *e) {
  Run r;
  char name[80];
  gemm_lowp_choose(g);
  make_key(g);
  /* block_body and the plain pack_a do not depend on the epilogue or
   * A's prologue (block_body packs A itself or through X_PACKA, and
   * calls the hook through X_EPIFN, which run_gemm sets): configurations
   * that differ only in those share them under the body key (mlp's two
   * matmuls: one block_body) */
  char body[sizeof g->key];
  snprintf(body, sizeof body, "%d%d%d%d%d%d%d%d.v%d%s%s", (int)g->ad, (int)g->bd, (int)g->od,
           (int)g->sd, (int)g->ka, (int)g->kb, (int)g->bias, (int)g->bias_n, g->vec_bits,
           g->pb ? ".pro" : "", gemm_lowp_key(g));
  /* B's packing (pack_b, packb_body) of an f32/f64 product whose B is
   * read from memory depends on B's side only (its dtype, kind, the
   * vector width): configurations that differ in A, the epilogue or the
   * bias share it under B's key (mlp's two matmuls: one copy) */
  char bkey[sizeof g->key] = "";
  if (g->kb == GK_MAT && !g->pb && g->pairs == GP_NONE && g->ad == g->cd && g->bd == g->cd &&
      !g->cscr)
    snprintf(bkey, sizeof bkey, "%d%d%d.v%d.b", (int)g->bd, (int)g->od, (int)g->kb, g->vec_bits);
  const char *pkey = *bkey ? bkey : g->key;
  r.pack_body = named(g, pkey, "packb_body");
  LLVMValueRef pb = *bkey ? named(g, pkey, "pack_b") : NULL;
  snprintf(name, sizeof name, "tdsl.gemm.%s.pack_s", g->key);
  r.small_pack = LLVMGetNamedFunction(g->mod, name);
  bool bfresh = !pb || !r.pack_body; /* B's prologue, or B's packing not shared */
  if (bfresh) {
    pb = emit_pack_as(g, pkey, 1);
    char own[sizeof g->key];
    memcpy(own, g->key, sizeof own);
    memmove(g->key, pkey, sizeof own);
    r.pack_body = gemm_emit_packb_body(g, pb);
    memcpy(g->key, own, sizeof own);
  }
  r.block_body = bfresh ? NULL : named(g, body, "block_body");
  if (!r.block_body) { /* calls its pack_b: as fresh as that */
    /* emitted for a product without A's prologue, it calls (inlines) the
     * configuration's pack_a when X_PACKA is NULL */
    LLVMValueRef plain = g->pa ? NULL : emit_pack_as(g, body, 0);
    char own[sizeof g->key];
    memcpy(own, g->key, sizeof own);
    memcpy(g->key, body, sizeof own);
    r.block_body = gemm_emit_block_body(g, plain, pb);
    memcpy(g->key, own, sizeof own);
    if (plain) cg_add_str_attr(g->ctx, r.block_body, own_pack_a, "");
  }
  /* X_PACKA: NULL for the block body's own pack_a; A's prologue: the
   * kernel's own; else the configuration's, when the block body was
   * emitted for a product with A's prologue */
  if (g->pa)
    r.pack_a = emit_pack_as(g, g->key, 0);
  else if (LLVMGetStringAttributeAtIndex(r.block_body, LLVMAttributeFunctionIndex, own_pack_a,
                                         sizeof own_pack_a - 1))
    r.pack_a = NULL;
  else if (!(r.pack_a = named(g, body, "pack_a")))
    r.pack_a = emit_pack_as(g, body, 0);
  bool fresh = bfresh || g->pa || g->pb;
  /* the K loop inside the parallel bodies (gemm_emit_kloop): around this
   * product's block_body, pack_b and pack_a, so as fresh as those */
  r.kloop_packa = r.kloop_pack = r.kloop_block = NULL;
  if (gemm_k_inside(g)) {
    if (!fresh) ICE("a K-loop product sharing its block body");
    LLVMValueRef pa = r.pack_a ? r.pack_a : named(g, body, "pack_a");
    r.kloop_packa = gemm_emit_kloop(g, gemm_emit_packa_body(g, pa), "kloop_packa");
    r.kloop_pack = gemm_emit_kloop(g, r.pack_body, "kloop_pack");
    r.kloop_block = gemm_emit_kloop(g, r.block_body, "kloop_block");
  }
  /* the small path: S's packing and a function per form this product
   * can take (the others stay NULL in X_SFORM), each emitted once per
   * configuration and module */
  if (has_small_cfg(g) && !r.small_pack) r.small_pack = gemm_emit_small_pack(g);
  for (int i = 0; i < 4; i++) {
    r.small_form[i] = NULL;
    if (!has_small(g) || !(g->small_forms >> i & 1)) continue;
    snprintf(name, sizeof name, "tdsl.gemm.%s.small_f%d", g->key, i);
    r.small_form[i] = LLVMGetNamedFunction(g->mod, name);
    if (!r.small_form[i]) r.small_form[i] = gemm_emit_small_form(g, i);
  }
  snprintf(name, sizeof name, "tdsl.gemm.%s.run", g->key);
  r.run = LLVMGetNamedFunction(g->mod, name);
  if (!r.run || fresh) r.run = emit_run(g, &r);
  LLVMDisposeBuilder(g->b);
  g->b = e->b;
  g->fn = e->fn;
  r.cx = gemm_entry_alloca(g, g->i64, X_COUNT);
  return r;
}

static void par_for(G *g, LLVMValueRef n, LLVMValueRef body, LLVMValueRef cx) {
  LLVMTypeRef ps[4] = {g->i64, g->i64, g->ptr, g->ptr};
  LLVMValueRef a[4] = {n, k64(g, 1), body, cx};
  call(g, fdecl(g, "tdsl_parallel_for", g->vd, ps, 4), a, 4);
}

/* The work items for T threads (M rows, nc columns), every row block
 * at most MC rows (the packed-A buffer's size):
 *   all of M in one row block, and B's block at least twice A's (nc >=
 *     2 M: a skinny product, x @ W with a few hundred tokens): *nrb = 1,
 *     *nch = T column chunks (at most one per NR panel), and *fuse: each
 *     chunk packs its B panels itself, a group of X_BGRP at a time
 *     right before their micro-kernels (block_body), so a panel is used
 *     from L1 and L2 and B is read once from memory, no separate packing
 *     pass; each chunk packs all of A (the small operand);
 *   at least T blocks of MC rows: *nrb = their count rounded up to a
 *     multiple of T (at most one per MR panel; even_part makes them as
 *     large as can be), *nch = 1, so each A block is packed once per K
 *     block;
 *   fewer, but at least 2 MR panels per thread: *nrb = T row blocks (each
 *     under MC rows, since M < T * MC), *nch = 1: both threads share the
 *     packed B, each packs its own rows of A;
 *   fewer still (a short M): *nrb = the blocks of MC rows and *nch
 *     column chunks (at most one per NR panel) so that there are at least
 *     T items; each chunk repacks its A block, which is small.
 * tdsl_parallel_for gives each thread a contiguous run of items, so an
 * item count that is a multiple of T balances.  Only the split of the
 * work depends on T: every tile sums the same products in the same order
 * (and every packed panel holds the same values). */
static void work_split(G *g, LLVMValueRef cx, LLVMValueRef T, LLVMValueRef M, LLVMValueRef nc,
                       LLVMValueRef *nrb, LLVMValueRef *nch, LLVMValueRef *fuse) {
  LLVMValueRef rb = cdiv(g, M, get(g, cx, X_MCB)), few = lt(g, rb, T), one = k64(g, 1);
  LLVMValueRef panels = cdiv(g, M, k64(g, g->mr));
  LLVMValueRef up = imin(g, mul(g, cdiv(g, rb, T), T), panels);
  LLVMValueRef rows_ok = LLVMBuildICmp(g->b, LLVMIntSGE, panels, mul(g, T, k64(g, 2)), "");
  LLVMValueRef fewrb = LLVMBuildSelect(g->b, rows_ok, T, rb, "");
  *nrb = LLVMBuildSelect(g->b, few, fewrb, up, "");
  LLVMValueRef rb1 = LLVMBuildSelect(g->b, lt(g, rb, one), one, rb, ""); /* M = 0: no rows */
  LLVMValueRef bpan = cdiv(g, nc, k64(g, g->nr));
  LLVMValueRef ch = imin(g, cdiv(g, T, rb1), bpan);
  LLVMValueRef chunks = LLVMBuildAnd(g->b, LLVMBuildAnd(g->b, few, LLVMBuildNot(g->b, rows_ok, ""), ""),
                                     lt(g, one, ch), "");
  *nch = LLVMBuildSelect(g->b, chunks, ch, one, "");
  *fuse = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, rb, one, ""),
                       LLVMBuildICmp(g->b, LLVMIntSGE, nc, mul(g, M, k64(g, 2)), ""), "");
  *nrb = LLVMBuildSelect(g->b, *fuse, one, *nrb, "");
  *nch = LLVMBuildSelect(g->b, *fuse, imin(g, T, bpan), *nch, "");
}

/* B panels per group (block_body): packed together in the fused
 * packing, a group takes half the bytes of a packed A block (MC x KC,
 * itself half of L2), so both stay in L2. */
static LLVMValueRef b_group(G *g, LLVMValueRef cx) {
  LLVMValueRef grp = sdiv(g, get(g, cx, X_MCB), k64(g, 2 * g->nr));
  return LLVMBuildSelect(g->b, lt(g, grp, k64(g, 1)), k64(g, 1), grp, "");
}

/* The K blocks of column block jc (nc wide) one after the other: per
 * block, one parallel job packs B (unless fused), one multiplies. */
static void k_blocks(G *g, Run *r, LLVMValueRef T, LLVMValueRef nc, LLVMValueRef nkb,
                     LLVMValueRef kcap) {
  LLVMValueRef cx = r->cx, M = get(g, cx, X_M), K = get(g, cx, X_K);
  GLoop lp;
  LLVMValueRef t = gemm_loop_open(g, &lp, k64(g, 0), nkb, k64(g, 1));
  LLVMValueRef pc = mul(g, t, kcap), kc = imin(g, kcap, sub(g, K, pc));
  set(g, cx, X_PC, pc), set(g, cx, X_KC, kc);
  set(g, cx, X_FIRST, LLVMBuildZExt(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, t, k64(g, 0), ""), g->i64, ""));
  LLVMValueRef last = LLVMBuildICmp(g->b, LLVMIntEQ, t, sub(g, nkb, k64(g, 1)), "");
  set(g, cx, X_LAST, LLVMBuildZExt(g->b, last, g->i64, ""));
  LLVMValueRef nrb, nch, fuse;
  work_split(g, cx, T, M, nc, &nrb, &nch, &fuse);
  set(g, cx, X_BFUSE, LLVMBuildZExt(g->b, fuse, g->i64, ""));
  set(g, cx, X_BGRP, b_group(g, cx));
  par_for(g, LLVMBuildSelect(g->b, fuse, k64(g, 0), cdiv(g, nc, k64(g, g->nr)), ""), r->pack_body, cx);
  set(g, cx, X_ANEXT, k64(g, 0));
  set(g, cx, X_NROWB, nrb), set(g, cx, X_NCHUNK, nch);
  par_for(g, mul(g, nrb, nch), r->block_body, cx);
  gemm_loop_close(g, &lp);
}

/* Low-precision products (gemm_k_inside) at T > 1 threads, column block
 * jc (nc wide): the K loop inside the parallel bodies (gemm_emit_kloop)
 * where the operand that all items share is packed for every K block
 * first: all of A when fused (X_AWHOLE; each item a group of B panels it
 * packs itself), else all of B (X_BWHOLE; each item a row block that
 * packs its A).  A product is then two parallel jobs, not two per K
 * block (each a wake-up of the pool's workers and a wait for the slowest
 * thread; a 1024^3 int8 product takes about 1 ms), and its items, at
 * least 4 per thread where the sizes allow, are taken one at a time, so
 * a thread that starts late or loses its core holds up one item, not
 * half the work.  Else (or no room for the whole K) k_blocks. */
static void k_inside(G *g, Run *r, LLVMValueRef T, LLVMValueRef nc, LLVMValueRef nkb,
                     LLVMValueRef kcap) {
  LLVMValueRef cx = r->cx, M = get(g, cx, X_M), z = k64(g, 0);
  LLVMValueRef nrb, nch, fuse;
  work_split(g, cx, T, M, nc, &nrb, &nch, &fuse);
  LLVMValueRef whole = LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_BWHOLE), z, "");
  LLVMValueRef awhole = LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_AWHOLE), z, "");
  LLVMValueRef kin = LLVMBuildSelect(g->b, fuse, awhole, whole, "");
  kin = LLVMBuildAnd(g->b, kin, lt(g, k64(g, 1), T), "");
  LLVMBasicBlockRef bk = blk(g, "gemm_kin"), bo = blk(g, "gemm_kout"), bd = blk(g, "gemm_kdone");
  LLVMBuildCondBr(g->b, kin, bk, bo);
  LLVMPositionBuilderAtEnd(g->b, bk);
  LLVMValueRef apan = cdiv(g, M, k64(g, g->mr)), bpan = cdiv(g, nc, k64(g, g->nr));
  LLVMValueRef pk = gemm_quad_panel_k(g, kcap), grp = b_group(g, cx);
  set(g, cx, X_NKB, nkb), set(g, cx, X_KSTEP, kcap);
  set(g, cx, X_BFUSE, LLVMBuildZExt(g->b, fuse, g->i64, ""));
  set(g, cx, X_BGRP, grp);
  set(g, cx, X_BSTEP, LLVMBuildSelect(g->b, fuse, z, mul(g, pk, mul(g, bpan, k64(g, g->nr))), ""));
  set(g, cx, X_AKSTEP, LLVMBuildSelect(g->b, fuse, mul(g, pk, mul(g, apan, k64(g, g->mr))), z, ""));
  LLVMValueRef more = imin(g, apan, mul(g, T, k64(g, 4)));
  more = LLVMBuildSelect(g->b, lt(g, nrb, more), more, nrb, "");
  more = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, nch, k64(g, 1), ""), more, nrb, "");
  LLVMValueRef nrbk = LLVMBuildSelect(g->b, fuse, k64(g, 1), more, "");
  LLVMValueRef nchk = LLVMBuildSelect(g->b, fuse, cdiv(g, bpan, grp), nch, "");
  set(g, cx, X_NROWB, nrbk), set(g, cx, X_NCHUNK, nchk);
  LLVMValueRef n1 = LLVMBuildSelect(g->b, fuse, apan, bpan, "");
  set(g, cx, X_NITEMS, n1), set(g, cx, X_INEXT, z), set(g, cx, X_ANEXT, z);
  par_for(g, n1, LLVMBuildSelect(g->b, fuse, r->kloop_packa, r->kloop_pack, ""), cx);
  LLVMValueRef nit = mul(g, nrbk, nchk);
  set(g, cx, X_NITEMS, nit), set(g, cx, X_INEXT, z), set(g, cx, X_ANEXT, z);
  par_for(g, nit, r->kloop_block, cx);
  LLVMBuildBr(g->b, bd);
  LLVMPositionBuilderAtEnd(g->b, bo);
  set(g, cx, X_AKSTEP, z), set(g, cx, X_KSTEP, kcap);
  k_blocks(g, r, T, nc, nkb, kcap);
  LLVMBuildBr(g->b, bd);
  LLVMPositionBuilderAtEnd(g->b, bd);
}

/* bf16 pairs: K blocks as long as a packed A micro-panel in half of L1
 * (KC * NR / MR: 1024 where KC, a B micro-panel in half of L1, is 384),
 * cut evenly into pairs (K = 1536: 768 + 768), where that makes them
 * longer and the packed B of every K block takes no more room than KC's
 * blocks (X_BWHOLE).  Else KC. */
static LLVMValueRef long_kc(G *g, LLVMValueRef K, LLVMValueRef kcb) {
  LLVMValueRef two = k64(g, 2), one = k64(g, 1);
  LLVMValueRef big = mul(g, sdiv(g, mul(g, kcb, k64(g, g->nr)), k64(g, 2 * g->mr)), two);
  LLVMValueRef n = cdiv(g, K, big);
  n = LLVMBuildSelect(g->b, lt(g, n, one), one, n, "");
  LLVMValueRef kc = mul(g, cdiv(g, cdiv(g, K, n), two), two);
  LLVMValueRef room = LLVMBuildICmp(g->b, LLVMIntSLE, mul(g, n, kc), mul(g, cdiv(g, K, kcb), kcb), "");
  LLVMValueRef ok = LLVMBuildAnd(g->b, lt(g, kcb, kc), room, "");
  return LLVMBuildSelect(g->b, ok, kc, kcb, "");
}

/* A bf16 product whose B is not packed in the fused groups (work_split's
 * fuse, which needs short K blocks: its groups and partial sums stay in
 * L2) takes long_kc's K blocks: a K up to 1024 is then one block whose
 * tiles round straight into C, with no partial sums in scratch (at
 * 1024^3 they went through L3: 4% of the call), the B micro-panel coming
 * from L2.  Row blocks (X_MCB, mcb: KC's, which run_gemm restores)
 * shrink so that a packed A block takes half of its bytes at KC, a
 * quarter of L2, next to the B micro-panels that now pass through L2
 * (1024^3 at 2 threads: row blocks of at most 126 rows, 10 items, ran
 * 4% faster than of 252, 8 items).  Decided from the shape alone, not
 * the thread count, so every thread count sums the same blocks. */
static void long_k(G *g, LLVMValueRef cx, LLVMValueRef mcb, LLVMValueRef nc, LLVMValueRef *nkb,
                   LLVMValueRef *kcap) {
  LLVMValueRef M = get(g, cx, X_M), K = get(g, cx, X_K), kc = long_kc(g, K, *kcap);
  LLVMValueRef fuse = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSLE, M, mcb, ""),
                                   LLVMBuildICmp(g->b, LLVMIntSGE, nc, mul(g, M, k64(g, 2)), ""), "");
  LLVMValueRef mr = k64(g, g->mr);
  LLVMValueRef mc = mul(g, sdiv(g, sdiv(g, mul(g, mcb, *kcap), mul(g, kc, k64(g, 2))), mr), mr);
  LLVMValueRef use = LLVMBuildAnd(g->b, LLVMBuildNot(g->b, fuse, ""), lt(g, *kcap, kc), "");
  use = LLVMBuildAnd(g->b, use, LLVMBuildICmp(g->b, LLVMIntSGE, mc, mr, ""), "");
  set(g, cx, X_MCB, LLVMBuildSelect(g->b, use, mc, mcb, ""));
  *nkb = LLVMBuildSelect(g->b, use, cdiv(g, K, kc), *nkb, "");
  *kcap = LLVMBuildSelect(g->b, use, kc, *kcap, "");
}

/* One C = A x B with the batch offsets already in the context: the jc
 * loop over k_blocks or k_inside (K = 0 still runs one block, writing
 * zeros or the bias). */
static void run_gemm(G *g, Run *r) {
  LLVMValueRef cx = r->cx, N = get(g, cx, X_N), K = get(g, cx, X_K);
  LLVMValueRef kcap = get(g, cx, X_KCB); /* an output of another dtype sums in scratch (cscr) */
  LLVMValueRef nkb = cdiv(g, K, kcap), ncb = get(g, cx, X_NCB);
  nkb = LLVMBuildSelect(g->b, lt(g, nkb, k64(g, 1)), k64(g, 1), nkb, "");
  if (g->pairs == GP_I8) { /* K quads: as many K blocks, of even whole quads
                            * (K = 1024, KC = 768: 512 + 512, not 768 + 256), at least one */
    LLVMValueRef even = mul(g, cdiv(g, cdiv(g, K, nkb), k64(g, 4)), k64(g, 4));
    even = LLVMBuildSelect(g->b, lt(g, even, k64(g, 4)), k64(g, 4), even, "");
    kcap = LLVMBuildSelect(g->b, lt(g, even, kcap), even, kcap, "");
  }
  LLVMValueRef T = LLVMBuildSExt(g->b, call(g, fdecl(g, "tdsl_get_num_threads", g->i32, NULL, 0), NULL, 0),
                                 g->i64, "");
  T = LLVMBuildSelect(g->b, lt(g, T, k64(g, 1)), k64(g, 1), T, "");
  GLoop lj;
  LLVMValueRef mcb = get(g, cx, X_MCB);
  LLVMValueRef jc = gemm_loop_open(g, &lj, k64(g, 0), N, ncb);
  LLVMValueRef nc = imin(g, ncb, sub(g, N, jc));
  set(g, cx, X_JC, jc), set(g, cx, X_NC, nc);
  if (g->pairs == GP_BF16) long_k(g, cx, mcb, nc, &nkb, &kcap);
  set(g, cx, X_PACKA, r->pack_a ? r->pack_a : LLVMConstNull(g->ptr));
  if (!g->epi) set(g, cx, X_EPIFN, LLVMConstNull(g->ptr)); /* block_body: no hook */
  if (gemm_k_inside(g)) k_inside(g, r, T, nc, nkb, kcap);
  else k_blocks(g, r, T, nc, nkb, kcap);
  gemm_loop_close(g, &lj);
  if (g->pairs == GP_BF16) set(g, cx, X_MCB, mcb); /* the next batch item's: long_k's from KC's */
}

/* The blocking for this machine, from the cache sizes the runtime reads
 * once (tdsl_cpu_cache_bytes; 0 when unknown: the target's defaults,
 * loops.h LfTarget): KC so that a packed B micro-panel (KC x NR) fills
 * half of L1, MC (a multiple of MR) so that a packed A block (MC x KC)
 * fills half of L2, NC (a multiple of NR) so that a packed B block
 * (KC x NC) fills a quarter of L3, capped at the target's gemm_nc, each
 * K index of a lane taking gemm_lowp_k_bytes in the panels.  The
 * same values wherever they are computed (pool sizes, the run), and
 * independent of the thread count. */
static void blocking(G *g, LLVMValueRef *mc, LLVMValueRef *kc, LLVMValueRef *nc) {
  LLVMValueRef c[3], sz = k64(g, gemm_lowp_k_bytes(g));
  LLVMValueRef f = fdecl(g, "tdsl_cpu_cache_bytes", g->i64, &g->i32, 1);
  /* the same value at every call (read once): calls LLVM may merge, so
   * the kernel's entry computes the blocking once, not at each use */
  static const char *const pure[3] = {"memory", "nounwind", "willreturn"};
  for (int a = 0; a < 3; a++) cg_add_attr(g->ctx, f, LLVMAttributeFunctionIndex, pure[a]);
  for (int l = 0; l < 3; l++) {
    LLVMValueRef a = LLVMConstInt(g->i32, (unsigned)(l + 1), 0);
    c[l] = call(g, f, &a, 1);
  }
  const LfTarget *p = g->params;
  LLVMValueRef z = k64(g, 0);
#define CLAMP(v, lo, hi) imin(g, LLVMBuildSelect(g->b, lt(g, v, k64(g, lo)), k64(g, lo), v, ""), k64(g, hi))
  LLVMValueRef k = sdiv(g, c[0], mul(g, k64(g, 2 * g->nr), sz));
  k = CLAMP(k, 64, 1024);
  *kc = LLVMBuildSelect(g->b, lt(g, z, c[0]), k, k64(g, p->gemm_kc), "");
  LLVMValueRef m = sdiv(g, sdiv(g, c[1], k64(g, 2)), mul(g, *kc, sz));
  m = mul(g, sdiv(g, CLAMP(m, g->mr, 64 * g->mr), k64(g, g->mr)), k64(g, g->mr));
  *mc = LLVMBuildSelect(g->b, lt(g, z, c[1]), m, k64(g, g->mr * p->gemm_mc_panels), "");
  LLVMValueRef n = sdiv(g, sdiv(g, c[2], k64(g, 4)), mul(g, *kc, sz));
  n = mul(g, sdiv(g, CLAMP(n, 4 * g->nr, p->gemm_nc), k64(g, g->nr)), k64(g, g->nr));
  *nc = LLVMBuildSelect(g->b, lt(g, z, c[2]), n, k64(g, p->gemm_nc), "");
#undef CLAMP
}

/* The packing memory (gemm.h cg_*_pool_bytes): a 64-byte header holding
 * the thread count T it was sized for, the packed-B buffer (KC x NC of
 * the compute type; K quads: gemm_quad_panel_k(KC) x NC; bf16 pairs:
 * long_kc's K block where that is longer), then T
 * packed-A buffers (MC x KC, take_apack, the same way); the small path
 * (gemm_small.c) uses the same bytes for its packed S.  *whole (X_BWHOLE):
 * the packed-B buffer holds every K block's panels instead, for T > 1
 * threads and more than one K block when that takes no more bytes than
 * one block of the full width NC (run_gemm's K loop inside the parallel
 * bodies; 1024^3 int8 or bf16, not f32). */
static void pool_sizes(G *g, LLVMValueRef M, LLVMValueRef N, LLVMValueRef K, LLVMValueRef T,
                       LLVMValueRef *bbytes, LLVMValueRef *abytes, LLVMValueRef *whole,
                       LLVMValueRef *awbytes) {
  LLVMValueRef mcb, kcb, ncb;
  blocking(g, &mcb, &kcb, &ncb);
  LLVMValueRef kcap = imin(g, K, kcb);
  kcap = gemm_quad_panel_k(g, kcap); /* elements per lane of a panel slot */
  LLVMValueRef ncap = mul(g, cdiv(g, imin(g, N, ncb), k64(g, g->nr)), k64(g, g->nr));
  LLVMValueRef sz = k64(g, dtype_size(g->cd)), r64 = k64(g, ~63LL), one = k64(g, 1);
  LLVMValueRef kb = kcap;
  if (g->pairs == GP_BF16) { /* run_gemm's long K blocks (long_k) */
    LLVMValueRef kl = long_kc(g, K, kcb);
    kb = LLVMBuildSelect(g->b, lt(g, kcap, kl), kl, kcap, "");
  }
  LLVMValueRef block = mul(g, mul(g, kb, ncap), sz), nkb = cdiv(g, K, kcb);
  *whole = *awbytes = NULL;
  if (!gemm_k_inside(g)) {
    *bbytes = LLVMBuildAnd(g->b, add(g, block, k64(g, 127)), r64, "");
    *abytes = LLVMBuildAnd(g->b, add(g, mul(g, mul(g, mcb, kcap), sz), k64(g, 127)), r64, "");
    return;
  }
  LLVMValueRef all = mul(g, mul(g, mul(g, gemm_quad_panel_k(g, kcb), ncap), sz), nkb);
  LLVMValueRef full = mul(g, mul(g, gemm_quad_panel_k(g, kcb), ncb), sz);
  LLVMValueRef many = LLVMBuildAnd(g->b, lt(g, one, T), lt(g, one, nkb), "");
  *whole = LLVMBuildAnd(g->b, many, LLVMBuildICmp(g->b, LLVMIntSLE, all, full, ""), "");
  block = LLVMBuildSelect(g->b, *whole, all, block, "");
  /* A's whole K (X_AWHOLE) where M fits one row block, within the same bytes */
  LLVMValueRef mp = mul(g, cdiv(g, M, k64(g, g->mr)), k64(g, g->mr));
  LLVMValueRef aall = mul(g, mul(g, mul(g, gemm_quad_panel_k(g, kcb), mp), sz), nkb);
  LLVMValueRef aok = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSLE, mp, mcb, ""),
                                  LLVMBuildICmp(g->b, LLVMIntSLE, aall, full, ""), "");
  aok = LLVMBuildAnd(g->b, many, aok, "");
  *awbytes = LLVMBuildSelect(g->b, aok, LLVMBuildAnd(g->b, add(g, aall, k64(g, 127)), r64, ""),
                             k64(g, 0), "");
  *bbytes = LLVMBuildAnd(g->b, add(g, block, k64(g, 127)), r64, "");
  *abytes = LLVMBuildAnd(g->b, add(g, mul(g, mul(g, mcb, kcap), sz), k64(g, 127)), r64, "");
}

/* The packing's bytes after the header for T threads: the packed B and
 * T packed A blocks, or the small path's packed S where that is larger
 * (they share the bytes); the lowp partial sums (X_CSCR) follow. */
static LLVMValueRef packed_bytes(G *g, LLVMValueRef bb, LLVMValueRef ab, LLVMValueRef aw,
                                 LLVMValueRef T, LLVMValueRef K) {
  LLVMValueRef packed = add(g, bb, mul(g, T, ab));
  if (aw) packed = add(g, packed, aw);
  if (has_small(g)) {
    LLVMValueRef sb = gemm_small_bytes(g, K);
    packed = LLVMBuildSelect(g->b, lt(g, packed, sb), sb, packed, "");
  }
  return packed;
}

static LLVMValueRef pool_bytes(G *g, const GemmEmit *e, LLVMValueRef M, LLVMValueRef N,
                               LLVMValueRef K, LLVMValueRef *threads) {
  LLVMDisposeBuilder(g->b); /* setup's; emit at the caller's position */
  g->b = e->b;
  LLVMValueRef bb, ab, whole, aw;
  gemm_lowp_choose(g); /* as make_fns: the blocking and panel slots depend on it */
  *threads = LLVMBuildSExt(g->b, call(g, fdecl(g, "tdsl_get_num_threads", g->i32, NULL, 0), NULL, 0),
                           g->i64, "");
  pool_sizes(g, M, N, K, *threads, &bb, &ab, &whole, &aw);
  LLVMValueRef packed = packed_bytes(g, bb, ab, aw, *threads, K);
  LLVMValueRef sb = gemm_lowp_scratch_bytes(g, M, N); /* after the packing (use_pool) */
  return add(g, add(g, k64(g, 64), packed), sb);
}

LLVMValueRef cg_matmul_pool_bytes(const GemmEmit *e, const GemmTensor *a, const GemmTensor *b,
                                  const GemmTensor *out, LLVMValueRef *threads) {
  G g;
  setup(&g, e, a->dtype, b->dtype, out->dtype);
  g.ka = g.kb = GK_MAT;
  g.pa = e->pro[0], g.pb = e->pro[1];
  small_forms(&g, a, b, out);
  int R = out->rank;
  return pool_bytes(&g, e, out->shape[R - 2], out->shape[R - 1], a->shape[R - 1], threads);
}

LLVMValueRef cg_conv2d_pool_bytes(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                  const GemmTensor *out, LLVMValueRef attr[7], bool channels_last,
                                  LLVMValueRef *threads) {
  G g;
  bool pix_m = channels_last; /* as cg_emit_conv2d */
  setup(&g, e, pix_m ? x->dtype : w->dtype, pix_m ? w->dtype : x->dtype, out->dtype);
  g.ka = pix_m ? GK_IM2COL : GK_WEIGHT;
  g.kb = pix_m ? GK_WEIGHT : GK_IM2COL;
  LLVMBuilderRef b = e->b;
  LLVMValueRef og = LLVMBuildSDiv(b, w->shape[0], attr[6], "");
  LLVMValueRef pix = LLVMBuildMul(b, out->shape[out->rank - 2], out->shape[out->rank - 1], "");
  LLVMValueRef K = LLVMBuildMul(b, w->shape[1], LLVMBuildMul(b, w->shape[2], w->shape[3], ""), "");
  return pool_bytes(&g, e, pix_m ? pix : og, pix_m ? og : pix, K, threads);
}

/* Points the context at the caller's pool (allocated before any nest,
 * so a GEMM never fails once the kernel computes) and records T in its
 * header. */
static void use_pool(G *g, Run *r, LLVMValueRef M, LLVMValueRef N, LLVMValueRef K,
                     LLVMValueRef pool) {
  LLVMValueRef bb, ab, mcb, kcb, ncb, whole, aw;
  LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx);
  LLVMValueRef p = gep(g, i8, pool, k64(g, 64)), T = LLVMBuildLoad2(g->b, g->i64, pool, "");
  pool_sizes(g, M, N, K, T, &bb, &ab, &whole, &aw);
  blocking(g, &mcb, &kcb, &ncb);
  set(g, r->cx, X_MCB, mcb), set(g, r->cx, X_KCB, kcb), set(g, r->cx, X_NCB, ncb);
  if (whole) set(g, r->cx, X_BWHOLE, LLVMBuildZExt(g->b, whole, g->i64, ""));
  set(g, r->cx, X_BPACK, p);
  set(g, r->cx, X_SPACK, p);
  set(g, r->cx, X_APOOL, gep(g, i8, p, bb));
  set(g, r->cx, X_ABYTES, ab);
  set(g, r->cx, X_ACOUNT, T);
  if (aw) {
    set(g, r->cx, X_AWPACK, gep(g, i8, p, add(g, bb, mul(g, T, ab))));
    set(g, r->cx, X_AWHOLE, LLVMBuildZExt(g->b, LLVMBuildICmp(g->b, LLVMIntNE, aw, k64(g, 0), ""),
                                          g->i64, ""));
  }
  if (g->cscr) set(g, r->cx, X_CSCR, gep(g, i8, p, packed_bytes(g, bb, ab, aw, T, K)));
  set(g, r->cx, X_ERR, k64(g, 0));
}

/* The i32 code: TDSL_E_NOMEM only when a block body had to allocate its
 * own packed-A buffer (take_apack) and could not. */
static LLVMValueRef finish(G *g, Run *r) {
  LLVMValueRef err = LLVMBuildICmp(g->b, LLVMIntNE, get(g, r->cx, X_ERR), k64(g, 0), "");
  return LLVMBuildSelect(g->b, err, LLVMConstInt(g->i32, (unsigned long long)E_NOMEM, 1),
                         LLVMConstInt(g->i32, 0, 0), "");
}

/* The prologues' slots (gemm.h GemmPrologue.arg), A's and B's. */
static void set_prologues(G *g, LLVMValueRef cx) {
  if (g->pa) set(g, cx, X_PROA, g->pa->arg);
  if (g->pb) set(g, cx, X_PROB, g->pb->arg);
}

/* The epilogue hook's slots (gemm.h), when there is one. */
static void set_epilogue(G *g, const GemmEmit *e, LLVMValueRef cx) {
  if (!g->epi) return;
  set(g, cx, X_EPIFN, e->epi_fn);
  set(g, cx, X_EPIARG, e->epi_arg);
}

LLVMValueRef cg_emit_matmul(const GemmEmit *e, const GemmTensor *a, const GemmTensor *b,
                            const GemmTensor *out) {
  G g;
  setup(&g, e, a->dtype, b->dtype, out->dtype);
  g.ka = g.kb = GK_MAT;
  g.pa = e->pro[0], g.pb = e->pro[1];
  small_forms(&g, a, b, out);
  Run r = make_fns(&g, e);
  set_prologues(&g, r.cx);
  for (int i = 0; i < 4 && has_small_cfg(&g); i++)
    set(&g, r.cx, X_SFORM + i, r.small_form[i] ? r.small_form[i] : LLVMConstNull(g.ptr));
  int R = out->rank;
  LLVMValueRef cx = r.cx, M = out->shape[R - 2], N = out->shape[R - 1], K = a->shape[R - 1];
  set(&g, cx, X_A, a->base), set(&g, cx, X_B, b->base), set(&g, cx, X_C, out->base);
  set(&g, cx, X_M, M), set(&g, cx, X_N, N), set(&g, cx, X_K, K);
  set(&g, cx, X_AI, a->stride[R - 2]), set(&g, cx, X_AP, a->stride[R - 1]);
  set(&g, cx, X_BI, b->stride[R - 1]), set(&g, cx, X_BP, b->stride[R - 2]);
  set(&g, cx, X_CM, out->stride[R - 2]), set(&g, cx, X_CN, out->stride[R - 1]);
  use_pool(&g, &r, M, N, K, e->pool);
  GLoop l[TDSL_MAX_RANK];
  LLVMValueRef ao = a->offset, bo = b->offset, co = out->offset, bt = k64(&g, 0);
  set_epilogue(&g, e, cx);
  for (int d = 0; d < R - 2; d++) {
    LLVMValueRef i = gemm_loop_open(&g, &l[d], k64(&g, 0), out->shape[d], k64(&g, 1));
    ao = add(&g, ao, mul(&g, i, a->stride[d]));
    bo = add(&g, bo, mul(&g, i, b->stride[d]));
    co = add(&g, co, mul(&g, i, out->stride[d]));
    bt = add(&g, mul(&g, bt, out->shape[d]), i);
  }
  set(&g, cx, X_AOFF, ao), set(&g, cx, X_BOFF, bo), set(&g, cx, X_COFF, co);
  set(&g, cx, X_BT, bt);
  call(&g, r.run, &cx, 1);
  for (int d = R - 3; d >= 0; d--) gemm_loop_close(&g, &l[d]);
  return finish(&g, &r);
}

LLVMValueRef cg_emit_conv2d(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                            const GemmTensor *bias, const GemmTensor *out, LLVMValueRef attr[7],
                            bool channels_last) {
  G g;
  /* orientation: channels-last output: M = pixels, N = channels */
  bool pix_m = channels_last;
  setup(&g, e, pix_m ? x->dtype : w->dtype, pix_m ? w->dtype : x->dtype, out->dtype);
  g.ka = pix_m ? GK_IM2COL : GK_WEIGHT;
  g.kb = pix_m ? GK_WEIGHT : GK_IM2COL;
  g.bias = bias != NULL;
  g.bias_n = bias && pix_m;
  g.sd = bias ? bias->dtype : out->dtype;
  g.pa = e->pro[pix_m ? 0 : 1], g.pb = e->pro[pix_m ? 1 : 0];
  Run r = make_fns(&g, e);
  set_prologues(&g, r.cx);
  LLVMValueRef cx = r.cx;
  int xr = x->rank, orr = out->rank;
  LLVMValueRef groups = attr[6], O = w->shape[0];
  LLVMValueRef og = sdiv(&g, O, groups), cg = w->shape[1];
  LLVMValueRef OH = out->shape[orr - 2], OW = out->shape[orr - 1];
  LLVMValueRef pix = mul(&g, OH, OW), K = mul(&g, cg, mul(&g, w->shape[2], w->shape[3]));
  set(&g, cx, pix_m ? X_A : X_B, x->base), set(&g, cx, pix_m ? X_B : X_A, w->base);
  set(&g, cx, X_C, out->base);
  set(&g, cx, X_M, pix_m ? pix : og), set(&g, cx, X_N, pix_m ? og : pix), set(&g, cx, X_K, K);
  set(&g, cx, pix_m ? X_BI : X_AI, w->stride[0]);
  LLVMValueRef so_c = out->stride[orr - 3], so_w = out->stride[orr - 1];
  set(&g, cx, X_CM, pix_m ? so_w : so_c), set(&g, cx, X_CN, pix_m ? so_c : so_w);
  static const int conv_slots[6] = {X_SH, X_SW, X_PH, X_PW, X_DH, X_DW};
  for (int i = 0; i < 6; i++) set(&g, cx, conv_slots[i], attr[i]);
  set(&g, cx, X_H, x->shape[xr - 2]), set(&g, cx, X_W, x->shape[xr - 1]), set(&g, cx, X_OW, OW);
  set(&g, cx, X_XC, x->stride[xr - 3]), set(&g, cx, X_XH, x->stride[xr - 2]);
  set(&g, cx, X_XW, x->stride[xr - 1]);
  set(&g, cx, X_KH, w->shape[2]), set(&g, cx, X_KW, w->shape[3]);
  set(&g, cx, X_WC, w->stride[1]), set(&g, cx, X_WH, w->stride[2]), set(&g, cx, X_WW, w->stride[3]);
  if (bias) {
    set(&g, cx, X_BIAS, bias->base);
    set(&g, cx, pix_m ? X_SM : X_SN, k64(&g, 0));
    set(&g, cx, pix_m ? X_SN : X_SM, bias->stride[0]);
  }
  use_pool(&g, &r, pix_m ? pix : og, pix_m ? og : pix, K, e->pool);
  GLoop ln, lg;
  LLVMValueRef n = k64(&g, 0);
  if (xr == 4) n = gemm_loop_open(&g, &ln, k64(&g, 0), x->shape[0], k64(&g, 1));
  LLVMValueRef gi = gemm_loop_open(&g, &lg, k64(&g, 0), groups, k64(&g, 1));
  LLVMValueRef xo = add(&g, x->offset, mul(&g, mul(&g, gi, cg), x->stride[xr - 3]));
  LLVMValueRef co = add(&g, out->offset, mul(&g, mul(&g, gi, og), so_c));
  if (xr == 4) {
    xo = add(&g, xo, mul(&g, n, x->stride[0]));
    co = add(&g, co, mul(&g, n, out->stride[0]));
  }
  LLVMValueRef wo = add(&g, w->offset, mul(&g, mul(&g, gi, og), w->stride[0]));
  set(&g, cx, pix_m ? X_AOFF : X_BOFF, xo), set(&g, cx, pix_m ? X_BOFF : X_AOFF, wo);
  set(&g, cx, X_COFF, co);
  if (bias) set(&g, cx, X_SOFF, add(&g, bias->offset, mul(&g, mul(&g, gi, og), bias->stride[0])));
  set_epilogue(&g, e, cx);
  set(&g, cx, X_BT, add(&g, mul(&g, n, groups), gi));
  call(&g, r.run, &cx, 1);
  gemm_loop_close(&g, &lg);
  if (xr == 4) gemm_loop_close(&g, &ln);
  return finish(&g, &r);
}

