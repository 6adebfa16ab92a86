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
 * The micro-kernel keeps MR x (NV vectors of VW lanes) accumulators in
 * registers (llvm.fmuladd for floats, mul+add for i64) over the packed
 * panels.  Packing absorbs strides (transposes, broadcasts of stride 0,
 * slices), converts to the compute type and pads edge panels with zeros;
 * tiles at the edges, outputs without unit column stride, and outputs of
 * another dtype than the compute type go through a scalar store.
 * An operand is addressed as MAT (lane i, k index p: off + i*si + p*sp),
 * IM2COL (lane = output pixel, p = (ci, ky, kx): the input element, 0 in
 * the padding) or WEIGHT (lane = output channel, p = (ci, ky, kx)); p is
 * (ky, kx, ci) instead when IM2COL is A (channels-last output).  IM2COL
 * packs with masked vector loads (B) or channel runs (A), no per-element
 * branch (see "im2col packing").
 * When the output dtype differs from the compute type, K is not split
 * (KC = K), so every output element is rounded once.
 * Epilogues (gemm.h GemmEmit.epi_fn): after the j and i loops of a row
 * block and column chunk, in the last K block (X_LAST), block_body calls
 * the kernel's hook on that block of C through a function pointer in the
 * context, so the helper functions stay shared per configuration (the
 * key says ".epi") while the epilogue is the kernel's own.
 * Prologues (gemm.h GemmPrologue): an operand with one is packed by
 * emit_pack_pro, which inlines the caller's expression per element; its
 * helper functions are then the kernel's own (key ".pro", always
 * emitted afresh: LLVM makes the names unique).
 *
 * Packing memory (packed B and one packed-A buffer per thread) is the
 * caller's, allocated at the kernel's entry (cg_*_pool_bytes), so a GEMM
 * that has started does not fail.
 * All run-time parameters live in a context array of 8-byte slots (X_*)
 * shared with the emitted parallel bodies.  Needs: gemm.h.  Produces:
 * private functions tdsl.gemm.<configuration>.* in the
 * module, one set per configuration. */
#include "gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>

#define E_NOMEM (-15)
/* Parallel work items: X_NROWB balanced row blocks of at most MC rows,
 * each split into X_NCHUNK column chunks (each chunk repacks its A
 * block, so there are as few as balance across the threads allows:
 * work_split). */

typedef enum GemmKind { GK_MAT, GK_IM2COL, GK_WEIGHT } GemmKind;

/* Slots of the run-time context. */
enum {
  X_A, X_B, X_C, X_BIAS, X_BPACK,
  X_M, X_N, X_K,
  X_AOFF, X_AI, X_AP, /* A: offset, stride along lanes (m), along k */
  X_BOFF, X_BI, X_BP, /* B: offset, stride along lanes (n), along k */
  X_COFF, X_CM, X_CN,
  X_SOFF, X_SM, X_SN, /* bias: offset, strides along m and n (one is 0) */
  X_H, X_W, X_OW, X_SH, X_SW, X_PH, X_PW, X_DH, X_DW, /* convolution */
  X_XC, X_XH, X_XW,   /* input strides: channel, row, column */
  X_KH, X_KW, X_WC, X_WH, X_WW, /* kernel size, weight strides */
  X_PC, X_KC, X_JC, X_NC, X_FIRST, X_ERR,
  X_EPIFN, X_EPIARG, X_BT, X_LAST, /* epilogue hook (gemm.h), batch item, last K block */
  X_APOOL, X_ABYTES, X_ACOUNT, X_ANEXT, /* packed-A buffers: base, size, count, next free */
  X_PROA, X_PROB, /* prologues of A and B: GemmPrologue.arg */
  X_NROWB, X_NCHUNK, /* work items: row blocks, column chunks per row block (work_split) */
  X_COUNT
};

typedef struct G {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef i1, i16, i32, i64, f32, ptr, vd, ct, vt;
  DType cd;             /* compute dtype: F32, F64 or I64 */
  DType ad, bd, od, sd; /* A, B, output, bias storage dtypes */
  GemmKind ka, kb;
  bool bias, bias_n; /* a bias; varying along n (else along m) */
  bool epi;          /* finished blocks go through the epilogue hook */
  const GemmPrologue *pa, *pb; /* prologues of A and B, or NULL */
  int vw, nv, mr, nr, mc, kc, nc;
  char key[48]; /* names the emitted functions: one set per configuration */
  int vec_bits;
  LLVMValueRef fn;
} G;

/* ---- small helpers ------------------------------------------------------- */

static LLVMValueRef k64(G *g, long long v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }

static LLVMValueRef gep(G *g, LLVMTypeRef t, LLVMValueRef p, LLVMValueRef i) {
  return LLVMBuildGEP2(g->b, t, p, &i, 1, "");
}

static LLVMValueRef slot_ptr(G *g, LLVMValueRef cx, int s) { return gep(g, g->i64, cx, k64(g, s)); }
static LLVMValueRef get(G *g, LLVMValueRef cx, int s) {
  return LLVMBuildLoad2(g->b, g->i64, slot_ptr(g, cx, s), "");
}
static LLVMValueRef getp(G *g, LLVMValueRef cx, int s) {
  return LLVMBuildLoad2(g->b, g->ptr, slot_ptr(g, cx, s), "");
}
static void set(G *g, LLVMValueRef cx, int s, LLVMValueRef v) {
  LLVMBuildStore(g->b, v, slot_ptr(g, cx, s));
}

static LLVMValueRef add(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(g->b, a, b, ""); }
static LLVMValueRef sub(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSub(g->b, a, b, ""); }
static LLVMValueRef mul(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildMul(g->b, a, b, ""); }
static LLVMValueRef lt(G *g, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildICmp(g->b, LLVMIntSLT, a, b, "");
}
static LLVMValueRef imin(G *g, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(g->b, lt(g, a, b), a, b, "");
}
static LLVMValueRef sdiv(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSDiv(g->b, a, b, ""); }
static LLVMValueRef srem(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSRem(g->b, a, b, ""); }
/* ceil(a / b) for a >= 0, b > 0 */
static LLVMValueRef cdiv(G *g, LLVMValueRef a, LLVMValueRef b) {
  return sdiv(g, add(g, a, sub(g, b, k64(g, 1))), b);
}

static LLVMBasicBlockRef blk(G *g, const char *name) {
  return LLVMAppendBasicBlockInContext(g->ctx, g->fn, name);
}

static LLVMValueRef fdecl(G *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *ps, unsigned n) {
  LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
  if (!f) f = LLVMAddFunction(g->mod, name, LLVMFunctionType(ret, ps, n, 0));
  return f;
}

static LLVMValueRef call(G *g, LLVMValueRef f, LLVMValueRef *a, unsigned n) {
  return LLVMBuildCall2(g->b, LLVMGlobalGetValueType(f), f, a, n, "");
}

/* An alloca at the start of the current function's entry block. */
static LLVMValueRef entry_alloca(G *g, LLVMTypeRef t, int n) {
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
static void no_vectorize(G *g, LLVMValueRef br) {
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

typedef struct GLoop {
  LLVMBasicBlockRef head, exit;
  LLVMValueRef iv, step;
} GLoop;

static LLVMValueRef loop_open(G *g, GLoop *l, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef step) {
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

static void loop_close(G *g, GLoop *l) {
  LLVMValueRef next = add(g, l->iv, l->step);
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
  no_vectorize(g, LLVMBuildBr(g->b, l->head));
  LLVMAddIncoming(l->iv, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(g->b, l->exit);
}

/* ---- element conversion -------------------------------------------------- */

static LLVMTypeRef storage(G *g, DType t) {
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
static LLVMValueRef load_c(G *g, LLVMValueRef p, LLVMValueRef i, DType t) {
  LLVMValueRef v = LLVMBuildLoad2(g->b, storage(g, t), gep(g, storage(g, t), p, i), "");
  switch (t) {
  case DT_F16: return LLVMBuildFPExt(g->b, v, g->ct, "");
  case DT_BF16: {
    LLVMValueRef w = LLVMBuildShl(g->b, LLVMBuildZExt(g->b, v, g->i32, ""),
                                  LLVMConstInt(g->i32, 16, 0), "");
    return LLVMBuildBitCast(g->b, w, g->f32, "");
  }
  case DT_F32: case DT_F64: return v;
  case DT_I64: return v;
  case DT_BOOL: case DT_U8: return LLVMBuildZExt(g->b, v, g->i64, "");
  default: return LLVMBuildSExt(g->b, v, g->i64, "");
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
static void store_c(G *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i, DType t) {
  LLVMTypeRef st = storage(g, t);
  if (t == DT_BF16) v = to_bf16(g, v);
  else if (t == DT_F16) v = LLVMBuildFPTrunc(g->b, v, st, "");
  else if (t == DT_BOOL) v = LLVMBuildZExt(g->b, LLVMBuildICmp(g->b, LLVMIntNE, v, k64(g, 0), ""), st, "");
  else if (!dtype_is_float(t) && t != DT_I64) v = LLVMBuildTrunc(g->b, v, st, "");
  LLVMBuildStore(g->b, v, gep(g, st, p, i));
}

static bool isf(G *g) { return g->cd != DT_I64; }
static LLVMValueRef czero(G *g) { return LLVMConstNull(g->ct); }

static LLVMValueRef cadd(G *g, LLVMValueRef a, LLVMValueRef b) {
  return isf(g) ? LLVMBuildFAdd(g->b, a, b, "") : add(g, a, b);
}

/* acc + a * b, fused where the target can. */
static LLVMValueRef fma_(G *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc) {
  if (!isf(g)) return add(g, acc, mul(g, a, b));
  LLVMTypeRef t = LLVMTypeOf(a);
  unsigned id = LLVMLookupIntrinsicID("llvm.fmuladd", 12);
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(g->mod, id, &t, 1);
  LLVMValueRef x[3] = {a, b, acc};
  return LLVMBuildCall2(g->b, LLVMIntrinsicGetType(g->ctx, id, &t, 1), f, x, 3, "");
}

static LLVMValueRef splat(G *g, LLVMValueRef s) {
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(g->vt), s,
                                          LLVMConstInt(g->i32, 0, 0), "");
  return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(g->vt),
                                LLVMConstNull(LLVMVectorType(g->i32, (unsigned)g->vw)), "");
}

/* ---- emitted functions --------------------------------------------------- */

static LLVMValueRef new_fn(G *g, const char *what, LLVMTypeRef *ps, unsigned n) {
  char name[80];
  snprintf(name, sizeof name, "tdsl.gemm.%s.%s", g->key, what);
  LLVMValueRef f = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->vd, ps, n, 0));
  LLVMSetLinkage(f, LLVMPrivateLinkage);
  if (g->vec_bits >= 512) { /* keep zmm registers for the explicit vectors */
    const char *k = "min-legal-vector-width", *v = "512";
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(g->ctx, k, (unsigned)strlen(k), v, 3));
    k = "prefer-vector-width";
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(g->ctx, k, (unsigned)strlen(k), v, 3));
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
static LLVMValueRef cin_per_group(G *g, LLVMValueRef cx) {
  LLVMValueRef khw = mul(g, get(g, cx, X_KH), get(g, cx, X_KW));
  khw = LLVMBuildSelect(g->b, lt(g, khw, k64(g, 1)), k64(g, 1), khw, "");
  return sdiv(g, get(g, cx, X_K), khw);
}

/* Decomposes a convolution k index into (ci, ky, kx) in the K order. */
static void split_k(G *g, LLVMValueRef cx, LLVMValueRef p, LLVMValueRef *ci, LLVMValueRef *ky,
                    LLVMValueRef *kx) {
  LLVMValueRef kw = get(g, cx, X_KW), tap;
  if (k_ci_minor(g)) {
    LLVMValueRef cg = cin_per_group(g, cx);
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
static void kwalk_init(G *g, LLVMValueRef cx, LLVMValueRef k0, LLVMValueRef st[3]) {
  LLVMValueRef v[3];
  split_k(g, cx, k0, &v[0], &v[1], &v[2]);
  for (int i = 0; i < 3; i++) {
    st[i] = entry_alloca(g, g->i64, 1);
    LLVMBuildStore(g->b, v[i], st[i]);
  }
}

static void kwalk_get(G *g, LLVMValueRef st[3], LLVMValueRef v[3]) {
  for (int i = 0; i < 3; i++) v[i] = LLVMBuildLoad2(g->b, g->i64, st[i], "");
}

static void kwalk_next(G *g, LLVMValueRef cx, LLVMValueRef st[3], LLVMValueRef v[3]) {
  static const int ci_major[3] = {2, 1, 0}, ci_minor[3] = {0, 2, 1}; /* fastest first */
  const int *ord = k_ci_minor(g) ? ci_minor : ci_major;
  LLVMValueRef lim[3] = {NULL, get(g, cx, X_KH), get(g, cx, X_KW)}, carry = NULL;
  if (k_ci_minor(g)) lim[0] = cin_per_group(g, cx);
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
static void lane_origins(G *g, LLVMValueRef cx, LLVMValueRef i0, LLVMValueRef nvalid, int R,
                         LLVMValueRef *iy0, LLVMValueRef *ix0) {
  *iy0 = entry_alloca(g, g->i64, R), *ix0 = entry_alloca(g, g->i64, R);
  LLVMValueRef ow = get(g, cx, X_OW);
  GLoop l;
  LLVMValueRef lane = loop_open(g, &l, k64(g, 0), k64(g, R), k64(g, 1));
  LLVMValueRef q = add(g, i0, lane), oy = sdiv(g, q, ow), ox = srem(g, q, ow);
  LLVMValueRef y = sub(g, mul(g, oy, get(g, cx, X_SH)), get(g, cx, X_PH));
  LLVMValueRef x = sub(g, mul(g, ox, get(g, cx, X_SW)), get(g, cx, X_PW));
  y = LLVMBuildSelect(g->b, lt(g, lane, nvalid), y, k64(g, INT64_MIN / 2), "");
  LLVMBuildStore(g->b, y, gep(g, g->i64, *iy0, lane));
  LLVMBuildStore(g->b, x, gep(g, g->i64, *ix0, lane));
  loop_close(g, &l);
}

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

static LLVMTypeRef vec_of(LLVMTypeRef t, int n) { return LLVMVectorType(t, (unsigned)n); }

static LLVMValueRef splat_n(G *g, LLVMValueRef s, int n) {
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

static LLVMValueRef intrin(G *g, const char *name, LLVMTypeRef *ov, size_t nov, LLVMValueRef *a,
                           unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(g->mod, id, ov, nov);
  return LLVMBuildCall2(g->b, LLVMIntrinsicGetType(g->ctx, id, ov, nov), f, a, n, "");
}

/* Whether every lane of the i1 vector c is set. */
static LLVMValueRef all_of(G *g, LLVMValueRef c) {
  LLVMTypeRef t = LLVMTypeOf(c);
  return intrin(g, "llvm.vector.reduce.and", &t, 1, &c, 1);
}

/* A vector of storage elements (dtype t) converted to the compute type,
 * as load_c converts one. */
static LLVMValueRef vconv(G *g, LLVMValueRef v, DType t) {
  switch (t) {
  case DT_F16: return LLVMBuildFPExt(g->b, v, g->vt, "");
  case DT_BF16: {
    LLVMValueRef w = LLVMBuildZExt(g->b, v, vec_of(g->i32, g->vw), "");
    w = LLVMBuildShl(g->b, w, splat_n(g, LLVMConstInt(g->i32, 16, 0), g->vw), "");
    return LLVMBuildBitCast(g->b, w, g->vt, "");
  }
  case DT_F32: return g->cd == DT_F64 ? LLVMBuildFPExt(g->b, v, g->vt, "") : v;
  case DT_F64: case DT_I64: return v;
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
  LLVMTypeRef st = storage(g, dt), sv = vec_of(st, n), sv2 = vec_of(st, 2 * n);
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
  got[0] = intrin(g, "llvm.masked.gather", ov, 2, a, 4);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, bb[1]);
  ov[1] = g->ptr;
  a[0] = p;
  got[1] = intrin(g, "llvm.masked.load", ov, 2, a, 4);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, bb[2]); /* lanes 2i of a double-width load */
  for (int i = 0; i < n; i++)
    idx[2 * i] = LLVMConstInt(g->i32, (unsigned)i, 0), idx[2 * i + 1] = LLVMConstInt(g->i32, (unsigned)n, 0);
  a[2] = LLVMBuildShuffleVector(g->b, m, LLVMConstNull(LLVMTypeOf(m)), LLVMConstVector(idx, (unsigned)(2 * n)), "");
  ov[0] = sv2, a[3] = LLVMConstNull(sv2);
  LLVMValueRef wide = intrin(g, "llvm.masked.load", ov, 2, a, 4);
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
  LLVMValueRef f = new_fn(g, "pack_b", ps, 5);
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  int n = g->vw;
  LLVMValueRef base = getp(g, cx, X_B), off = get(g, cx, X_BOFF), pc = get(g, cx, X_PC);
  LLVMValueRef H = splat_n(g, get(g, cx, X_H), n), W = splat_n(g, get(g, cx, X_W), n);
  LLVMValueRef xh = get(g, cx, X_XH), xw = get(g, cx, X_XW), iy0, ix0;
  lane_origins(g, cx, i0, nvalid, g->nr, &iy0, &ix0);
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
  kwalk_init(g, cx, pc, kst);
  LLVMValueRef p = loop_open(g, &lp, k64(g, 0), kc, k64(g, 1));
  kwalk_get(g, kst, kv);
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
  kwalk_next(g, cx, kst, kv);
  loop_close(g, &lp);
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
  LLVMValueRef t = loop_open(g, &l, k64(g, 0), run, k64(g, 1));
  LLVMBuildStore(g->b, load_c(g, base, add(g, s, mul(g, t, xc)), g->ad),
                 gep(g, g->ct, d0, mul(g, t, k64(g, R))));
  loop_close(g, &l);
  LLVMBuildBr(g->b, bj);
  LLVMPositionBuilderAtEnd(g->b, bz);
  t = loop_open(g, &l, k64(g, 0), run, k64(g, 1));
  LLVMBuildStore(g->b, czero(g), gep(g, g->ct, d0, mul(g, t, k64(g, R))));
  loop_close(g, &l);
  LLVMBuildBr(g->b, bj);
  LLVMPositionBuilderAtEnd(g->b, bj);
}

/* pack_a for an IM2COL operand (K order (ky, kx, ci)): see above. */
static LLVMValueRef emit_pack_im2col_rows(G *g) {
  LLVMTypeRef ps[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  LLVMValueRef f = new_fn(g, "pack_a", ps, 5);
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  int R = g->mr;
  LLVMValueRef kw = get(g, cx, X_KW), cg = cin_per_group(g, cx), iy0, ix0;
  lane_origins(g, cx, i0, nvalid, R, &iy0, &ix0);
  GLoop ls, ll;
  /* one iteration per run of channels at one tap; its step is the run */
  LLVMValueRef p = loop_open(g, &ls, k64(g, 0), kc, k64(g, 1));
  LLVMValueRef kp = add(g, get(g, cx, X_PC), p), tap = sdiv(g, kp, cg), ci0 = srem(g, kp, cg);
  LLVMValueRef run = imin(g, sub(g, cg, ci0), sub(g, kc, p));
  LLVMValueRef dy = mul(g, sdiv(g, tap, kw), get(g, cx, X_DH));
  LLVMValueRef dx = mul(g, srem(g, tap, kw), get(g, cx, X_DW));
  LLVMValueRef src0 = add(g, get(g, cx, X_AOFF), mul(g, ci0, get(g, cx, X_XC)));
  LLVMValueRef lane = loop_open(g, &ll, k64(g, 0), k64(g, R), k64(g, 1));
  LLVMValueRef y = add(g, LLVMBuildLoad2(g->b, g->i64, gep(g, g->i64, iy0, lane), ""), dy);
  LLVMValueRef x = add(g, LLVMBuildLoad2(g->b, g->i64, gep(g, g->i64, ix0, lane), ""), dx);
  LLVMValueRef d0 = gep(g, g->ct, dst, add(g, mul(g, p, k64(g, R)), lane));
  pack_lane_run(g, cx, d0, y, x, src0, run, R);
  loop_close(g, &ll);
  ls.step = run;
  loop_close(g, &ls);
  LLVMBuildRetVoid(g->b);
  return f;
}

/* pack(ctx, dst, i0, nvalid, kc): dst[p * R + lane] = X(i0 + lane, pc + p)
 * for p < kc, lane < R (0 for lane >= nvalid).  which: 0 = A, 1 = B.
 * MAT and WEIGHT operands here, IM2COL ones above. */
static LLVMValueRef emit_pack_pro(G *g, int which);

static LLVMValueRef emit_pack(G *g, int which) {
  GemmKind kind = which ? g->kb : g->ka;
  if (which ? g->pb : g->pa) return emit_pack_pro(g, which);
  if (kind == GK_IM2COL) return which ? emit_pack_im2col_vec(g) : emit_pack_im2col_rows(g);
  LLVMTypeRef ps[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  LLVMValueRef f = new_fn(g, which ? "pack_b" : "pack_a", ps, 5);
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  DType dt = which ? g->bd : g->ad;
  int R = which ? g->nr : g->mr;
  LLVMValueRef base = getp(g, cx, which ? X_B : X_A), off = get(g, cx, which ? X_BOFF : X_AOFF);
  LLVMValueRef si = get(g, cx, which ? X_BI : X_AI), sp = get(g, cx, which ? X_BP : X_AP);
  LLVMValueRef pc = get(g, cx, X_PC);
  GLoop lp, ll;
  LLVMValueRef kst[3], kv[3], pofs;
  if (kind == GK_WEIGHT) kwalk_init(g, cx, pc, kst);
  LLVMValueRef p = loop_open(g, &lp, k64(g, 0), kc, k64(g, 1));
  if (kind == GK_MAT) {
    pofs = add(g, off, mul(g, add(g, pc, p), sp));
  } else {
    kwalk_get(g, kst, kv);
    pofs = add(g, off, add(g, mul(g, kv[0], get(g, cx, X_WC)),
                           add(g, mul(g, kv[1], get(g, cx, X_WH)), mul(g, kv[2], get(g, cx, X_WW)))));
  }
  LLVMValueRef row = gep(g, g->ct, dst, mul(g, p, k64(g, R)));
  LLVMValueRef lane = loop_open(g, &ll, k64(g, 0), k64(g, R), k64(g, 1));
  /* clamp the lane so the load stays inside the operand */
  LLVMValueRef cl = imin(g, lane, sub(g, nvalid, k64(g, 1)));
  LLVMValueRef got = load_c(g, base, add(g, pofs, mul(g, add(g, i0, cl), si)), dt);
  LLVMValueRef v = LLVMBuildSelect(g->b, lt(g, lane, nvalid), got, czero(g), "");
  LLVMBuildStore(g->b, v, gep(g, g->ct, row, lane));
  loop_close(g, &ll);
  if (kind == GK_WEIGHT) kwalk_next(g, cx, kst, kv);
  loop_close(g, &lp);
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

/* pack (as emit_pack) for an operand with a prologue: each element is the
 * caller's expression at its logical position (gemm.h GemmIdx), so the
 * operand is never materialized.  Lanes >= nvalid are 0 (the expression
 * is evaluated at the last valid lane and discarded); so is the zero
 * padding of an IM2COL operand: PyTorch pads the producer's output, so a
 * padded element is 0, not the expression at 0 (it is evaluated at row
 * and column 0 and discarded).  One scalar loop for every operand kind;
 * the K order is the GEMM's (split_k). */
static LLVMValueRef emit_pack_pro(G *g, int which) {
  GemmKind kind = which ? g->kb : g->ka;
  const GemmPrologue *pr = which ? g->pb : g->pa;
  LLVMTypeRef ps[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
  LLVMValueRef f = new_fn(g, which ? "pack_b" : "pack_a", ps, 5);
  LLVMValueRef cx = LLVMGetParam(f, 0), dst = LLVMGetParam(f, 1), i0 = LLVMGetParam(f, 2),
               nvalid = LLVMGetParam(f, 3), kc = LLVMGetParam(f, 4);
  int R = which ? g->nr : g->mr;
  pr->begin(pr->user, g->b, f, getp(g, cx, which ? X_PROB : X_PROA));
  LLVMValueRef pc = get(g, cx, X_PC), iy0 = NULL, ix0 = NULL, kst[3], kv[3] = {NULL, NULL, NULL};
  if (kind == GK_IM2COL) lane_origins(g, cx, i0, nvalid, R, &iy0, &ix0);
  if (kind != GK_MAT) kwalk_init(g, cx, pc, kst);
  GLoop lp, ll;
  LLVMValueRef p = loop_open(g, &lp, k64(g, 0), kc, k64(g, 1)), y = NULL, x = NULL;
  if (kind != GK_MAT) kwalk_get(g, kst, kv);
  LLVMValueRef row = gep(g, g->ct, dst, mul(g, p, k64(g, R)));
  LLVMValueRef lane = loop_open(g, &ll, k64(g, 0), k64(g, R), k64(g, 1));
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
  LLVMValueRef v = LLVMBuildSelect(g->b, ok, pr->elem(pr->user, &ix, g->cd), czero(g), "");
  LLVMBuildStore(g->b, v, gep(g, g->ct, row, lane));
  loop_close(g, &ll);
  if (kind != GK_MAT) kwalk_next(g, cx, kst, kv);
  loop_close(g, &lp);
  LLVMBuildRetVoid(g->b);
  pr->end(pr->user);
  return f;
}

/* packb_body(ctx, begin, end): B panels [begin, end) of the current block. */
static LLVMValueRef emit_packb_body(G *g, LLVMValueRef pack_b) {
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  LLVMValueRef f = new_fn(g, "packb_body", ps, 3);
  LLVMValueRef cx = LLVMGetParam(f, 0);
  LLVMValueRef jc = get(g, cx, X_JC), nc = get(g, cx, X_NC), kc = get(g, cx, X_KC);
  LLVMValueRef bp = getp(g, cx, X_BPACK);
  GLoop l;
  LLVMValueRef t = loop_open(g, &l, LLVMGetParam(f, 1), LLVMGetParam(f, 2), k64(g, 1));
  LLVMValueRef j = mul(g, t, k64(g, g->nr));
  LLVMValueRef a[5] = {cx, gep(g, g->ct, bp, mul(g, j, kc)), add(g, jc, j),
                       imin(g, k64(g, g->nr), sub(g, nc, j)), kc};
  call(g, pack_b, a, 5);
  loop_close(g, &l);
  LLVMBuildRetVoid(g->b);
  return f;
}

/* The MR x NR tile at (i, j) (mr, nr valid): written or added to C. */
static void store_tile(G *g, LLVMValueRef cx, LLVMValueRef acc[][4], LLVMValueRef tile,
                       LLVMValueRef i, LLVMValueRef j, LLVMValueRef mr, LLVMValueRef nr) {
  LLVMValueRef c = getp(g, cx, X_C), coff = get(g, cx, X_COFF), cm = get(g, cx, X_CM),
               cn = get(g, cx, X_CN), first = LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_FIRST), k64(g, 0), "");
  LLVMValueRef sb = NULL, soff = NULL, sm = NULL, sn = NULL;
  if (g->bias)
    sb = getp(g, cx, X_BIAS), soff = get(g, cx, X_SOFF), sm = get(g, cx, X_SM), sn = get(g, cx, X_SN);
  LLVMBasicBlockRef slow = blk(g, "tile_slow"), done = blk(g, "tile_done");
  /* vector stores need the output (and bias) in the compute type */
  bool split = g->od == g->cd; /* K may be split: later blocks accumulate */
  bool same = split && (!g->bias || g->sd == g->cd);
  if (same) {
    LLVMValueRef full = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, mr, k64(g, g->mr), ""),
                                     LLVMBuildICmp(g->b, LLVMIntEQ, nr, k64(g, g->nr), ""), "");
    full = LLVMBuildAnd(g->b, full, LLVMBuildICmp(g->b, LLVMIntEQ, cn, k64(g, 1), ""), "");
    if (g->bias_n) { /* a bias along n is loaded as vectors: contiguous */
      LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntEQ, sn, k64(g, 1), "");
      full = LLVMBuildAnd(g->b, full, LLVMBuildOr(g->b, ok, LLVMBuildNot(g->b, first, ""), ""), "");
    }
    LLVMBasicBlockRef fast = blk(g, "tile_fast");
    LLVMBuildCondBr(g->b, full, fast, slow);
    LLVMPositionBuilderAtEnd(g->b, fast);
    LLVMBasicBlockRef fa = blk(g, "tile_first"), fb = blk(g, "tile_accum");
    LLVMBuildCondBr(g->b, first, fa, fb);
    for (int pass = 0; pass < 2; pass++) {
      LLVMPositionBuilderAtEnd(g->b, pass ? fb : fa);
      for (int r = 0; r < g->mr; r++) {
        LLVMValueRef ri = add(g, i, k64(g, r));
        LLVMValueRef rowp = gep(g, g->ct, c, add(g, add(g, coff, mul(g, ri, cm)), j));
        LLVMValueRef bsplat = NULL;
        if (!pass && g->bias && !g->bias_n)
          bsplat = splat(g, load_c(g, sb, add(g, soff, mul(g, ri, sm)), g->sd));
        for (int v = 0; v < g->nv; v++) {
          LLVMValueRef p = gep(g, g->ct, rowp, k64(g, v * g->vw)), x = acc[r][v];
          if (pass) {
            LLVMValueRef old = LLVMBuildLoad2(g->b, g->vt, p, "");
            LLVMSetAlignment(old, (unsigned)dtype_size(g->cd));
            x = cadd(g, old, x);
          } else if (g->bias_n) { /* sn == 1: lanes j + v*VW.. */
            LLVMValueRef bp = gep(g, g->ct, sb, add(g, soff, add(g, j, k64(g, v * g->vw))));
            LLVMValueRef bv = LLVMBuildLoad2(g->b, g->vt, bp, "");
            LLVMSetAlignment(bv, (unsigned)dtype_size(g->cd));
            x = cadd(g, x, bv);
          } else if (g->bias) {
            x = cadd(g, x, bsplat);
          }
          LLVMValueRef st = LLVMBuildStore(g->b, x, p);
          LLVMSetAlignment(st, (unsigned)dtype_size(g->cd));
        }
      }
      LLVMBuildBr(g->b, done);
    }
  } else {
    LLVMBuildBr(g->b, slow);
  }
  /* scalar path through the spilled tile */
  LLVMPositionBuilderAtEnd(g->b, slow);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) {
      LLVMValueRef st = LLVMBuildStore(g->b, acc[r][v],
                                       gep(g, g->ct, tile, k64(g, r * g->nr + v * g->vw)));
      LLVMSetAlignment(st, (unsigned)dtype_size(g->cd));
    }
  GLoop lr, lq;
  LLVMValueRef r = loop_open(g, &lr, k64(g, 0), mr, k64(g, 1));
  LLVMValueRef q = loop_open(g, &lq, k64(g, 0), nr, k64(g, 1));
  LLVMValueRef ri = add(g, i, r), qj = add(g, j, q);
  LLVMValueRef x = LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, tile, add(g, mul(g, r, k64(g, g->nr)), q)), "");
  LLVMValueRef ci = add(g, coff, add(g, mul(g, ri, cm), mul(g, qj, cn)));
  if (g->bias) {
    LLVMValueRef b = load_c(g, sb, add(g, soff, add(g, mul(g, ri, sm), mul(g, qj, sn))), g->sd);
    LLVMValueRef old = split ? load_c(g, c, ci, g->od) : czero(g);
    x = cadd(g, x, LLVMBuildSelect(g->b, first, b, old, ""));
  } else if (split) {
    LLVMValueRef old = load_c(g, c, ci, g->od);
    x = cadd(g, x, LLVMBuildSelect(g->b, first, czero(g), old, ""));
  }
  store_c(g, x, c, ci, g->od);
  loop_close(g, &lq);
  loop_close(g, &lr);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
}

/* K step p of the micro-kernel: nx = cur + A[r, p] * B[p, v*VW..]. */
static void mk_step(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef p,
                    LLVMValueRef cur[][4], LLVMValueRef nx[][4]) {
  LLVMValueRef bv[4], arow = gep(g, g->ct, ap, mul(g, p, k64(g, g->mr)));
  LLVMValueRef brow = gep(g, g->ct, bp, mul(g, p, k64(g, g->nr)));
  for (int v = 0; v < g->nv; v++) {
    bv[v] = LLVMBuildLoad2(g->b, g->vt, gep(g, g->ct, brow, k64(g, v * g->vw)), "");
    LLVMSetAlignment(bv[v], (unsigned)(g->vw * dtype_size(g->cd)));
  }
  for (int r = 0; r < g->mr; r++) {
    LLVMValueRef a = splat(g, LLVMBuildLoad2(g->b, g->ct, gep(g, g->ct, arow, k64(g, r)), ""));
    for (int v = 0; v < g->nv; v++) nx[r][v] = fma_(g, a, bv[v], cur[r][v]);
  }
}

/* MR x NV phis in the current block, each starting at init from pre. */
static void mk_phis(G *g, LLVMValueRef phi[][4], LLVMValueRef init[][4], LLVMBasicBlockRef pre) {
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) {
      phi[r][v] = LLVMBuildPhi(g->b, g->vt, "");
      LLVMAddIncoming(phi[r][v], &init[r][v], &pre, 1);
    }
}

static void mk_incoming(G *g, LLVMValueRef phi[][4], LLVMValueRef val[][4], LLVMBasicBlockRef from) {
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) LLVMAddIncoming(phi[r][v], &val[r][v], &from, 1);
}

/* The micro-kernel over kc: acc[r][v] = sum_p A[r, p] * B[p, v*VW..],
 * in p order (the unrolling keeps it).  The loop does two K steps per
 * iteration (less loop overhead beside MR * NV FMAs), then one step
 * more when kc is odd. */
static void micro_kernel(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef kc,
                         LLVMValueRef acc[][4]) {
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b), head = blk(g, "mk"), body = blk(g, "mk_body"),
                    tail = blk(g, "mk_tail"), rest = blk(g, "mk_rest"), exit = blk(g, "mk_end");
  LLVMValueRef zero[16][4], phi[16][4], mid[16][4], next[16][4], z = k64(g, 0);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) zero[r][v] = LLVMConstNull(g->vt);
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, head);
  LLVMValueRef p = LLVMBuildPhi(g->b, g->i64, "");
  LLVMAddIncoming(p, &z, &pre, 1);
  mk_phis(g, phi, zero, pre);
  LLVMValueRef p1 = add(g, p, k64(g, 1));
  LLVMBuildCondBr(g->b, lt(g, p1, kc), body, tail);
  LLVMPositionBuilderAtEnd(g->b, body);
  mk_step(g, ap, bp, p, phi, mid);
  mk_step(g, ap, bp, p1, mid, next);
  LLVMValueRef p2 = add(g, p, k64(g, 2));
  LLVMAddIncoming(p, &p2, &body, 1);
  mk_incoming(g, phi, next, body);
  no_vectorize(g, LLVMBuildBr(g->b, head));
  LLVMPositionBuilderAtEnd(g->b, tail); /* p == kc or p == kc - 1 */
  LLVMBuildCondBr(g->b, lt(g, p, kc), rest, exit);
  LLVMPositionBuilderAtEnd(g->b, rest);
  mk_step(g, ap, bp, p, phi, next);
  LLVMBuildBr(g->b, exit);
  LLVMPositionBuilderAtEnd(g->b, exit);
  LLVMValueRef out[16][4];
  mk_phis(g, out, phi, tail);
  mk_incoming(g, out, next, rest);
  for (int r = 0; r < g->mr; r++)
    for (int v = 0; v < g->nv; v++) acc[r][v] = out[r][v];
}

static LLVMValueRef alloc_fn(G *g) {
  LLVMTypeRef ps[2] = {g->i64, g->i64};
  return fdecl(g, "tdsl_alloc", g->ptr, ps, 2);
}

static void free_(G *g, LLVMValueRef p) {
  call(g, fdecl(g, "tdsl_free", g->vd, &g->ptr, 1), &p, 1);
}

/* After the last K block: the hook on C rows [i0, i1) x columns [j0, j1). */
static void call_epilogue(G *g, LLVMValueRef cx, LLVMValueRef i0, LLVMValueRef i1,
                          LLVMValueRef j0, LLVMValueRef j1) {
  LLVMBasicBlockRef run = blk(g, "epi"), skip = blk(g, "epi_done");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, get(g, cx, X_LAST), k64(g, 0), ""),
                  run, skip);
  LLVMPositionBuilderAtEnd(g->b, run);
  LLVMTypeRef ps[6] = {g->ptr, g->i64, g->i64, g->i64, g->i64, g->i64};
  LLVMValueRef a[6] = {getp(g, cx, X_EPIARG), get(g, cx, X_BT), i0, i1, j0, j1};
  LLVMBuildCall2(g->b, LLVMFunctionType(g->vd, ps, 6, 0), getp(g, cx, X_EPIFN), a, 6, "");
  LLVMBuildBr(g->b, skip);
  LLVMPositionBuilderAtEnd(g->b, skip);
}

/* A packed-A buffer for one block_body call: the next of the X_ACOUNT
 * buffers allocated with packed B (a parallel_for makes at most one call
 * per thread, and run_gemm resets X_ANEXT before each), so a GEMM that
 * has started never fails; only if the thread count changed meanwhile
 * does a call allocate its own (*own: it must free it; NULL on failure). */
static LLVMValueRef take_apack(G *g, LLVMValueRef cx, LLVMValueRef kc, LLVMValueRef *own) {
  LLVMValueRef idx = LLVMBuildAtomicRMW(g->b, LLVMAtomicRMWBinOpAdd, slot_ptr(g, cx, X_ANEXT),
                                        k64(g, 1), LLVMAtomicOrderingMonotonic, 0);
  *own = LLVMBuildICmp(g->b, LLVMIntSGE, idx, get(g, cx, X_ACOUNT), "");
  LLVMBasicBlockRef here = LLVMGetInsertBlock(g->b), mk = blk(g, "apack_alloc"), got = blk(g, "apack");
  LLVMValueRef pooled = gep(g, LLVMInt8TypeInContext(g->ctx), getp(g, cx, X_APOOL),
                            mul(g, idx, get(g, cx, X_ABYTES)));
  LLVMBuildCondBr(g->b, *own, mk, got);
  LLVMPositionBuilderAtEnd(g->b, mk);
  LLVMValueRef bytes = mul(g, mul(g, k64(g, g->mc), kc), k64(g, dtype_size(g->cd)));
  LLVMValueRef a2[2] = {add(g, bytes, k64(g, 64)), k64(g, 64)};
  LLVMValueRef fresh = call(g, alloc_fn(g), a2, 2);
  LLVMBuildBr(g->b, got);
  LLVMPositionBuilderAtEnd(g->b, got);
  LLVMValueRef p = LLVMBuildPhi(g->b, g->ptr, "");
  LLVMValueRef vals[2] = {pooled, fresh};
  LLVMBasicBlockRef bbs[2] = {here, mk};
  LLVMAddIncoming(p, vals, bbs, 2);
  return p;
}

/* Part t of `parts` of [0, size) cut at multiples of `width` (panels):
 * [*lo, *hi), the parts' panel counts differing by at most one.  With
 * parts = cdiv(size, MC) a row part has at most MC / MR panels. */
static void even_part(G *g, LLVMValueRef t, LLVMValueRef parts, LLVMValueRef size, int width,
                      LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef n = cdiv(g, size, k64(g, width)), w = k64(g, width);
  *lo = mul(g, sdiv(g, mul(g, t, n), parts), w);
  *hi = imin(g, size, mul(g, sdiv(g, mul(g, add(g, t, k64(g, 1)), n), parts), w));
}

/* Prefetches C's MR x NR tile at (i, j) for writing while the
 * micro-kernel runs (store_tile reads it back after the first K block):
 * each row's 64-byte lines, assuming unit column stride (else it only
 * misses).  Rows past M are never read: x86 prefetches do not fault. */
static void prefetch_tile(G *g, LLVMValueRef cx, LLVMValueRef i, LLVMValueRef j) {
  LLVMValueRef c = getp(g, cx, X_C), cm = get(g, cx, X_CM);
  LLVMValueRef row = add(g, add(g, get(g, cx, X_COFF), mul(g, i, cm)), mul(g, j, get(g, cx, X_CN)));
  LLVMTypeRef st = storage(g, g->od);
  int es = dtype_size(g->od), lines = (g->nr * es + 63) / 64;
  for (int r = 0; r < g->mr; r++, row = add(g, row, cm))
    for (int l = 0; l < lines; l++) {
      LLVMValueRef a[4] = {gep(g, st, c, add(g, row, k64(g, l * 64 / es))),
                           LLVMConstInt(g->i32, 1, 0), LLVMConstInt(g->i32, 3, 0),
                           LLVMConstInt(g->i32, 1, 0)};
      intrin(g, "llvm.prefetch", &g->ptr, 1, a, 4);
    }
}

/* block_body(ctx, begin, end): row blocks [begin, end) against the packed
 * B block.  A blocks are packed into the call's packed-A buffer
 * (take_apack); a failed fallback allocation sets X_ERR. */
static LLVMValueRef emit_block_body(G *g, LLVMValueRef pack_a) {
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  LLVMValueRef f = new_fn(g, "block_body", ps, 3);
  LLVMValueRef cx = LLVMGetParam(f, 0);
  LLVMValueRef tile = entry_alloca(g, g->ct, g->mr * g->nr);
  LLVMValueRef M = get(g, cx, X_M), kc = get(g, cx, X_KC), jc = get(g, cx, X_JC),
               nc = get(g, cx, X_NC), bp = getp(g, cx, X_BPACK);
  LLVMValueRef own, apack = take_apack(g, cx, kc, &own);
  LLVMBasicBlockRef bad = blk(g, "nomem"), ok = blk(g, "mem");
  LLVMBuildCondBr(g->b, LLVMBuildIsNull(g->b, apack, ""), bad, ok);
  LLVMPositionBuilderAtEnd(g->b, bad);
  set(g, cx, X_ERR, k64(g, 1));
  LLVMBuildRetVoid(g->b);
  LLVMPositionBuilderAtEnd(g->b, ok);
  GLoop lb, lpa, lj, li;
  /* iteration t: row block t / nch, column chunk t % nch (work_chunks) */
  LLVMValueRef nch = get(g, cx, X_NCHUNK), nrb = get(g, cx, X_NROWB), i0, i1, j0, j1;
  LLVMValueRef t = loop_open(g, &lb, LLVMGetParam(f, 1), LLVMGetParam(f, 2), k64(g, 1));
  even_part(g, sdiv(g, t, nch), nrb, M, g->mr, &i0, &i1);
  even_part(g, srem(g, t, nch), nch, nc, g->nr, &j0, &j1);
  LLVMValueRef mc = sub(g, i1, i0);
  LLVMValueRef r = loop_open(g, &lpa, k64(g, 0), mc, k64(g, g->mr));
  LLVMValueRef pa[5] = {cx, gep(g, g->ct, apack, mul(g, r, kc)), add(g, i0, r),
                        imin(g, k64(g, g->mr), sub(g, mc, r)), kc};
  call(g, pack_a, pa, 5);
  loop_close(g, &lpa);
  LLVMValueRef j = loop_open(g, &lj, j0, j1, k64(g, g->nr));
  LLVMValueRef i = loop_open(g, &li, k64(g, 0), mc, k64(g, g->mr));
  LLVMValueRef acc[16][4];
  prefetch_tile(g, cx, add(g, i0, i), add(g, jc, j));
  micro_kernel(g, gep(g, g->ct, apack, mul(g, i, kc)), gep(g, g->ct, bp, mul(g, j, kc)), kc, acc);
  store_tile(g, cx, acc, tile, add(g, i0, i), add(g, jc, j), imin(g, k64(g, g->mr), sub(g, mc, i)),
             imin(g, k64(g, g->nr), sub(g, nc, j)));
  loop_close(g, &li);
  loop_close(g, &lj);
  if (g->epi) call_epilogue(g, cx, i0, add(g, i0, mc), add(g, jc, j0), add(g, jc, j1));
  loop_close(g, &lb);
  LLVMBasicBlockRef fr = blk(g, "free_apack"), out = blk(g, "ret");
  LLVMBuildCondBr(g->b, own, fr, out);
  LLVMPositionBuilderAtEnd(g->b, fr);
  free_(g, apack);
  LLVMBuildBr(g->b, out);
  LLVMPositionBuilderAtEnd(g->b, out);
  LLVMBuildRetVoid(g->b);
  return f;
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
  g->cd = od == DT_F64 ? DT_F64 : dtype_is_float(od) ? DT_F32 : DT_I64;
  g->ct = g->cd == DT_F32 ? g->f32 : g->cd == DT_F64 ? LLVMDoubleTypeInContext(e->ctx) : g->i64;
  g->vec_bits = e->vec_bits;
  g->vw = e->vec_bits / (8 * dtype_size(g->cd));
  g->nv = 2;
  g->mr = e->vec_bits >= 512 ? 12 : 6;
  g->nr = g->nv * g->vw;
  g->vt = LLVMVectorType(g->ct, (unsigned)g->vw);
  g->mc = g->mr * 16;
  g->kc = 256;
  g->nc = 4096;
}

typedef struct Run {
  LLVMValueRef cx, pack_body, block_body;
} Run;

/* The helper functions depend only on the dtypes, operand kinds, bias
 * and vector width (every size, stride and offset lives in the run-time
 * context), so all GEMMs of a module with the same configuration share
 * one set: less code for LLVM to optimize and compile. */
static void make_key(G *g) {
  snprintf(g->key, sizeof g->key, "%d%d%d%d%d%d%d%d.v%d%s%s", (int)g->ad, (int)g->bd,
           (int)g->od, (int)g->sd, (int)g->ka, (int)g->kb, (int)g->bias, (int)g->bias_n,
           g->vec_bits, g->epi ? ".epi" : "", g->pa || g->pb ? ".pro" : "");
}

/* Emits the helper functions (or finds the module's copy), then restores
 * the caller's builder. */
static Run make_fns(G *g, const GemmEmit *e) {
  Run r;
  char name[80];
  make_key(g);
  snprintf(name, sizeof name, "tdsl.gemm.%s.block_body", g->key);
  r.block_body = LLVMGetNamedFunction(g->mod, name);
  snprintf(name, sizeof name, "tdsl.gemm.%s.packb_body", g->key);
  r.pack_body = LLVMGetNamedFunction(g->mod, name);
  if (!r.block_body || !r.pack_body || g->pa || g->pb) { /* prologues: the kernel's own */
    LLVMValueRef pa = emit_pack(g, 0), pb = emit_pack(g, 1);
    r.pack_body = emit_packb_body(g, pb);
    r.block_body = emit_block_body(g, pa);
  }
  LLVMDisposeBuilder(g->b);
  g->b = e->b;
  g->fn = e->fn;
  r.cx = entry_alloca(g, g->i64, X_COUNT);
  return r;
}

static void par_for(G *g, LLVMValueRef n, LLVMValueRef body, LLVMValueRef cx) {
  LLVMTypeRef ps[4] = {g->i64, g->i64, g->ptr, g->ptr};
  LLVMValueRef a[4] = {n, k64(g, 1), body, cx};
  call(g, fdecl(g, "tdsl_parallel_for", g->vd, ps, 4), a, 4);
}

/* The work items for T threads (M rows, nc columns): with at least T
 * blocks of MC rows, *nrb = their count rounded up to a multiple of T
 * (at most one per MR panel; even_part makes them as large as can be)
 * and *nch = 1, so each A block is packed once per K block; with fewer,
 * *nrb = 1 block and *nch = T column chunks (at most one per NR panel).
 * tdsl_parallel_for gives each thread a contiguous run of items, so an
 * item count that is a multiple of T balances.  Only the split of the
 * work depends on T: every tile sums the same products in the same order. */
static void work_split(G *g, LLVMValueRef M, LLVMValueRef nc, LLVMValueRef *nrb, LLVMValueRef *nch) {
  LLVMValueRef T = LLVMBuildSExt(g->b, call(g, fdecl(g, "tdsl_get_num_threads", g->i32, NULL, 0), NULL, 0),
                                 g->i64, "");
  T = LLVMBuildSelect(g->b, lt(g, T, k64(g, 1)), k64(g, 1), T, "");
  LLVMValueRef rb = cdiv(g, M, k64(g, g->mc)), few = lt(g, rb, T), one = k64(g, 1);
  LLVMValueRef up = imin(g, mul(g, cdiv(g, rb, T), T), cdiv(g, M, k64(g, g->mr)));
  *nrb = LLVMBuildSelect(g->b, few, imin(g, rb, one), up, "");
  LLVMValueRef ch = imin(g, T, cdiv(g, nc, k64(g, g->nr)));
  *nch = LLVMBuildSelect(g->b, LLVMBuildAnd(g->b, few, lt(g, one, ch), ""), ch, one, "");
}

/* One C = A x B with the batch offsets already in the context: the jc /
 * pc loops (K = 0 still runs one block, writing zeros or the bias). */
static void run_gemm(G *g, Run *r) {
  LLVMValueRef cx = r->cx, M = get(g, cx, X_M), N = get(g, cx, X_N), K = get(g, cx, X_K);
  LLVMValueRef kcap = g->od == g->cd ? k64(g, g->kc) : LLVMBuildSelect(g->b, lt(g, K, k64(g, 1)), k64(g, 1), K, "");
  LLVMValueRef nkb = cdiv(g, K, kcap);
  nkb = LLVMBuildSelect(g->b, lt(g, nkb, k64(g, 1)), k64(g, 1), nkb, "");
  GLoop lj, lp;
  LLVMValueRef jc = loop_open(g, &lj, k64(g, 0), N, k64(g, g->nc));
  LLVMValueRef nc = imin(g, k64(g, g->nc), sub(g, N, jc));
  LLVMValueRef t = loop_open(g, &lp, k64(g, 0), nkb, k64(g, 1));
  LLVMValueRef pc = mul(g, t, kcap), kc = imin(g, kcap, sub(g, K, pc));
  set(g, cx, X_JC, jc), set(g, cx, X_NC, nc), set(g, cx, X_PC, pc), set(g, cx, X_KC, kc);
  set(g, cx, X_FIRST, LLVMBuildZExt(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, t, k64(g, 0), ""), g->i64, ""));
  LLVMValueRef last = LLVMBuildICmp(g->b, LLVMIntEQ, t, sub(g, nkb, k64(g, 1)), "");
  set(g, cx, X_LAST, LLVMBuildZExt(g->b, last, g->i64, ""));
  par_for(g, cdiv(g, nc, k64(g, g->nr)), r->pack_body, cx);
  LLVMValueRef nrb, nch;
  work_split(g, M, nc, &nrb, &nch);
  set(g, cx, X_ANEXT, k64(g, 0));
  set(g, cx, X_NROWB, nrb), set(g, cx, X_NCHUNK, nch);
  par_for(g, mul(g, nrb, nch), r->block_body, cx);
  loop_close(g, &lp);
  loop_close(g, &lj);
}

/* The packing memory (gemm.h cg_*_pool_bytes): a 64-byte header holding
 * the thread count T it was sized for, the packed-B buffer (KC x NC of
 * the compute type), then T packed-A buffers (MC x KC, take_apack). */
static void pool_sizes(G *g, LLVMValueRef N, LLVMValueRef K, LLVMValueRef *bbytes,
                       LLVMValueRef *abytes) {
  LLVMValueRef kcap = g->od == g->cd ? imin(g, K, k64(g, g->kc)) : K;
  LLVMValueRef ncap = mul(g, cdiv(g, imin(g, N, k64(g, g->nc)), k64(g, g->nr)), k64(g, g->nr));
  LLVMValueRef sz = k64(g, dtype_size(g->cd)), r64 = k64(g, ~63LL);
  *bbytes = LLVMBuildAnd(g->b, add(g, mul(g, mul(g, kcap, ncap), sz), k64(g, 127)), r64, "");
  *abytes = LLVMBuildAnd(g->b, add(g, mul(g, mul(g, k64(g, g->mc), kcap), sz), k64(g, 127)), r64, "");
}

static LLVMValueRef pool_bytes(G *g, const GemmEmit *e, LLVMValueRef N, LLVMValueRef K,
                               LLVMValueRef *threads) {
  LLVMDisposeBuilder(g->b); /* setup's; emit at the caller's position */
  g->b = e->b;
  LLVMValueRef bb, ab;
  pool_sizes(g, N, K, &bb, &ab);
  *threads = LLVMBuildSExt(g->b, call(g, fdecl(g, "tdsl_get_num_threads", g->i32, NULL, 0), NULL, 0),
                           g->i64, "");
  return add(g, k64(g, 64), add(g, bb, mul(g, *threads, ab)));
}

LLVMValueRef cg_matmul_pool_bytes(const GemmEmit *e, const GemmTensor *a, const GemmTensor *b,
                                  const GemmTensor *out, LLVMValueRef *threads) {
  G g;
  setup(&g, e, a->dtype, b->dtype, out->dtype);
  int R = out->rank;
  return pool_bytes(&g, e, out->shape[R - 1], a->shape[R - 1], threads);
}

LLVMValueRef cg_conv2d_pool_bytes(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                  const GemmTensor *out, LLVMValueRef attr[7], bool channels_last,
                                  LLVMValueRef *threads) {
  G g;
  bool pix_m = channels_last; /* as cg_emit_conv2d */
  setup(&g, e, pix_m ? x->dtype : w->dtype, pix_m ? w->dtype : x->dtype, out->dtype);
  LLVMBuilderRef b = e->b;
  LLVMValueRef og = LLVMBuildSDiv(b, w->shape[0], attr[6], "");
  LLVMValueRef pix = LLVMBuildMul(b, out->shape[out->rank - 2], out->shape[out->rank - 1], "");
  LLVMValueRef K = LLVMBuildMul(b, w->shape[1], LLVMBuildMul(b, w->shape[2], w->shape[3], ""), "");
  return pool_bytes(&g, e, pix_m ? og : pix, K, threads);
}

/* Points the context at the caller's pool (allocated before any nest,
 * so a GEMM never fails once the kernel computes) and records T in its
 * header. */
static void use_pool(G *g, Run *r, LLVMValueRef N, LLVMValueRef K, LLVMValueRef pool) {
  LLVMValueRef bb, ab;
  LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx);
  pool_sizes(g, N, K, &bb, &ab);
  LLVMValueRef p = gep(g, i8, pool, k64(g, 64));
  set(g, r->cx, X_BPACK, p);
  set(g, r->cx, X_APOOL, gep(g, i8, p, bb));
  set(g, r->cx, X_ABYTES, ab);
  set(g, r->cx, X_ACOUNT, LLVMBuildLoad2(g->b, g->i64, pool, ""));
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
  Run r = make_fns(&g, e);
  set_prologues(&g, r.cx);
  int R = out->rank;
  LLVMValueRef cx = r.cx, M = out->shape[R - 2], N = out->shape[R - 1], K = a->shape[R - 1];
  set(&g, cx, X_A, a->base), set(&g, cx, X_B, b->base), set(&g, cx, X_C, out->base);
  set(&g, cx, X_M, M), set(&g, cx, X_N, N), set(&g, cx, X_K, K);
  set(&g, cx, X_AI, a->stride[R - 2]), set(&g, cx, X_AP, a->stride[R - 1]);
  set(&g, cx, X_BI, b->stride[R - 1]), set(&g, cx, X_BP, b->stride[R - 2]);
  set(&g, cx, X_CM, out->stride[R - 2]), set(&g, cx, X_CN, out->stride[R - 1]);
  use_pool(&g, &r, N, K, e->pool);
  GLoop l[TDSL_MAX_RANK];
  LLVMValueRef ao = a->offset, bo = b->offset, co = out->offset, bt = k64(&g, 0);
  set_epilogue(&g, e, cx);
  for (int d = 0; d < R - 2; d++) {
    LLVMValueRef i = loop_open(&g, &l[d], k64(&g, 0), out->shape[d], k64(&g, 1));
    ao = add(&g, ao, mul(&g, i, a->stride[d]));
    bo = add(&g, bo, mul(&g, i, b->stride[d]));
    co = add(&g, co, mul(&g, i, out->stride[d]));
    bt = add(&g, mul(&g, bt, out->shape[d]), i);
  }
  set(&g, cx, X_AOFF, ao), set(&g, cx, X_BOFF, bo), set(&g, cx, X_COFF, co);
  set(&g, cx, X_BT, bt);
  run_gemm(&g, &r);
  for (int d = R - 3; d >= 0; d--) loop_close(&g, &l[d]);
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
  use_pool(&g, &r, pix_m ? og : pix, K, e->pool);
  GLoop ln, lg;
  LLVMValueRef n = k64(&g, 0);
  if (xr == 4) n = loop_open(&g, &ln, k64(&g, 0), x->shape[0], k64(&g, 1));
  LLVMValueRef gi = loop_open(&g, &lg, k64(&g, 0), groups, k64(&g, 1));
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
  run_gemm(&g, &r);
  loop_close(&g, &lg);
  if (xr == 4) loop_close(&g, &ln);
  return finish(&g, &r);
}

int cg_gemm_vec_bits(const char *target) {
  if (!strcmp(target, "x86-64-v4")) return 512;
  if (!strcmp(target, "x86-64-v3")) return 256;
  if (strcmp(target, "host")) return 128;
  char *f = LLVMGetHostCPUFeatures();
  int bits = strstr(f, "+avx512f") ? 512 : strstr(f, "+avx") ? 256 : 128;
  LLVMDisposeMessage(f);
  return bits;
}
