/* gemm_impl.h — private to the GEMM emitter (gemm.h): the emission state
 * G, the run-time context's slots (X_*), small IR helpers, and the entry
 * points its files share:
 *   gemm.c         helpers, element conversion, emitted functions, and the
 *                  driver in the kernel (gemm.h's functions);
 *   gemm_pack.c    packing A and B panels (strided, im2col, prologues);
 *   gemm_kernel.c  the micro-kernel, tile stores, the parallel block body;
 *   gemm_small.c   the small-M / small-N path (no packing of the big
 *                  operand: matrix-vector and transformer-inference shapes);
 *   gemm_lowp.c    K-pair packing and dot-product micro-kernels for 16-bit
 *                  and 8-bit operands (vpmaddwd, VNNI, AVX512-BF16);
 *   gemm_quad.c    K-quad packing and the vpdpbusd micro-kernel for 8-bit
 *                  operands where the target has VNNI.
 * Needs: gemm.h, codegen/llvm_attr.h. */
#ifndef TDSL_CPU_GEMM_IMPL_H
#define TDSL_CPU_GEMM_IMPL_H

#include <stdbool.h>

#include "../codegen/llvm_attr.h"
#include "gemm.h"

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
  X_MCB, X_KCB, X_NCB, /* blocking MC, KC, NC for this run (gemm.c blocking) */
  /* the small path (gemm_small.c): S the small operand (rows r < X_QN,
   * k), V the streamed one (lanes l < X_VN, k), C[r, l] */
  X_QB, X_QOFF, X_QR, X_QK, X_VB, X_VOFF, X_VL, X_VK, X_CR, X_CL, X_QN, X_VN,
  X_SPACK, X_QP, X_KP, X_SWAP, X_MG4, X_TW,
  X_CSCR, /* partial sums of C in the compute type (G.cscr, gemm_lowp.c) */
  X_BFUSE, /* 1: block_body packs each B panel itself, just before its use, into its
            * chunk's first panel slots (work_split) */
  X_BGRP,  /* B panels block_body walks as one group (packed together when X_BFUSE) */
  X_PACKA, /* block_body's pack_a (gemm_emit_pack's signature): the configuration's, or
            * the kernel's own for A's prologue */
  /* the K loop inside the parallel bodies (gemm_emit_kloop): K blocks, their
   * size, the packed-B elements between K blocks (X_BWHOLE: every K block's
   * packed B kept, use_pool; else 0: one slot reused) */
  X_NKB, X_KSTEP, X_BSTEP, X_BWHOLE,
  /* A's whole K packed first (fused products, use_pool): where, its
   * elements between K blocks, whether there is room; X_AKPACK: the
   * current K block's (gemm_emit_kloop), block_body's A when X_AKSTEP != 0 */
  X_AWPACK, X_AKSTEP, X_AWHOLE, X_AKPACK,
  X_NITEMS, X_INEXT, /* gemm_emit_kloop's items, taken one at a time: count, next */
  X_SFORM, /* 4 slots: the small path's function of each form (gemm_small.c
            * small_f<2 * axpy + four>), NULL for a form the product never takes */
  X_COUNT = X_SFORM + 4
};

typedef struct G {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef i1, i16, i32, i64, f32, ptr, vd, ct, vt;
  DType cd;             /* compute dtype: F32, F64, I32 or I64 */
  DType ad, bd, od, sd; /* A, B, output, bias storage dtypes */
  GemmKind ka, kb;
  bool bias, bias_n; /* a bias; varying along n (else along m) */
  bool epi;          /* finished blocks go through the epilogue hook */
  const GemmPrologue *pa, *pb; /* prologues of A and B, or NULL */
  int vw, nv, mr, nr;
  int nregs; /* vector registers of the target (16 or 32) */
  const LfTarget *params; /* default blocking (loops.h) */
  char key[48]; /* names the emitted functions: one set per configuration */
  int vec_bits;
  unsigned isa;      /* GEMM_ISA_* of the code being emitted (gemm.h) */
  int pairs;         /* gemm_lowp.c: GP_NONE, or how K pairs are packed and multiplied */
  bool cscr;         /* output dtype != compute dtype: K blocks sum through X_CSCR */
  /* The small path's forms this product can take (gemm_small.c: bit
   * 2 * axpy + four), from the sizes and strides known at compile time
   * (GEMM_SMALL_FORMS_ALL when nothing is known; 0: none). */
  int small_forms;
  LLVMValueRef fn;
} G;

typedef struct GLoop {
  LLVMBasicBlockRef head, exit;
  LLVMValueRef iv, step;
} GLoop;

/* ---- small helpers ------------------------------------------------------- */

static inline LLVMValueRef k64(G *g, long long v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }

static inline LLVMValueRef gep(G *g, LLVMTypeRef t, LLVMValueRef p, LLVMValueRef i) {
  return LLVMBuildGEP2(g->b, t, p, &i, 1, "");
}

static inline LLVMValueRef slot_ptr(G *g, LLVMValueRef cx, int s) { return gep(g, g->i64, cx, k64(g, s)); }
static inline LLVMValueRef get(G *g, LLVMValueRef cx, int s) {
  return LLVMBuildLoad2(g->b, g->i64, slot_ptr(g, cx, s), "");
}
static inline LLVMValueRef getp(G *g, LLVMValueRef cx, int s) {
  return LLVMBuildLoad2(g->b, g->ptr, slot_ptr(g, cx, s), "");
}
static inline void set(G *g, LLVMValueRef cx, int s, LLVMValueRef v) {
  LLVMBuildStore(g->b, v, slot_ptr(g, cx, s));
}

static inline LLVMValueRef add(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(g->b, a, b, ""); }
static inline LLVMValueRef sub(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSub(g->b, a, b, ""); }
static inline LLVMValueRef mul(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildMul(g->b, a, b, ""); }
static inline LLVMValueRef lt(G *g, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildICmp(g->b, LLVMIntSLT, a, b, "");
}
static inline LLVMValueRef imin(G *g, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(g->b, lt(g, a, b), a, b, "");
}
static inline LLVMValueRef sdiv(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSDiv(g->b, a, b, ""); }
static inline LLVMValueRef srem(G *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSRem(g->b, a, b, ""); }
/* ceil(a / b) for a >= 0, b > 0 */
static inline LLVMValueRef cdiv(G *g, LLVMValueRef a, LLVMValueRef b) {
  return sdiv(g, add(g, a, sub(g, b, k64(g, 1))), b);
}

static inline LLVMBasicBlockRef blk(G *g, const char *name) {
  return LLVMAppendBasicBlockInContext(g->ctx, g->fn, name);
}

static inline LLVMValueRef fdecl(G *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *ps, unsigned n) {
  LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
  if (!f) f = LLVMAddFunction(g->mod, name, LLVMFunctionType(ret, ps, n, 0));
  return f;
}

static inline LLVMValueRef call(G *g, LLVMValueRef f, LLVMValueRef *a, unsigned n) {
  return LLVMBuildCall2(g->b, LLVMGlobalGetValueType(f), f, a, n, "");
}

/* ---- gemm.c ------------------------------------------------------------ */

LLVMValueRef gemm_entry_alloca(G *g, LLVMTypeRef t, int n);
void gemm_no_vectorize(G *g, LLVMValueRef br);
LLVMValueRef gemm_loop_open(G *g, GLoop *l, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef step);
void gemm_loop_close(G *g, GLoop *l);
LLVMTypeRef gemm_storage(G *g, DType t);
LLVMValueRef gemm_load_c(G *g, LLVMValueRef p, LLVMValueRef i, DType t);
void gemm_store_c(G *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i, DType t);
LLVMValueRef gemm_czero(G *g);
LLVMValueRef gemm_cadd(G *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef gemm_fma(G *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc);
LLVMValueRef gemm_splat(G *g, LLVMValueRef s);
LLVMValueRef gemm_new_fn(G *g, const char *what, LLVMTypeRef *ps, unsigned n);
LLVMValueRef gemm_cin_per_group(G *g, LLVMValueRef cx);
void gemm_kwalk_init(G *g, LLVMValueRef cx, LLVMValueRef k0, LLVMValueRef st[3]);
void gemm_kwalk_get(G *g, LLVMValueRef st[3], LLVMValueRef v[3]);
void gemm_kwalk_next(G *g, LLVMValueRef cx, LLVMValueRef st[3], LLVMValueRef v[3]);
void gemm_lane_origins(G *g, LLVMValueRef cx, LLVMValueRef i0, LLVMValueRef nvalid, int R,
                         LLVMValueRef *iy0, LLVMValueRef *ix0);

/* ---- gemm_pack.c ------------------------------------------------------- */

LLVMValueRef gemm_intrin(G *g, const char *name, LLVMTypeRef *ov, size_t nov, LLVMValueRef *a,
                           unsigned n);
LLVMValueRef gemm_emit_pack(G *g, int which);
LLVMValueRef gemm_emit_packb_body(G *g, LLVMValueRef pack_b);
LLVMTypeRef gemm_vec_of(LLVMTypeRef t, int n);
LLVMValueRef gemm_splat_n(G *g, LLVMValueRef s, int n);
LLVMValueRef gemm_vconv(G *g, LLVMValueRef v, DType t);
/* Transposes n vectors of n lanes in place (lane l of v[q] becomes lane
 * q of the old v[l]): log2(n) rounds of interleaving v[i] with
 * v[i + n/2].  Used by B's K-major panels, row-major A and the direct
 * conv's weight packing. */
void gemm_transpose(G *g, LLVMValueRef *v, int n);
/* The pointer p through an empty inline asm (x86; elsewhere p itself):
 * no instruction, but loop strength reduction sees an opaque base, not
 * a sum over the strides of every loop around it (gemm_pack.c). */
LLVMValueRef gemm_opaque_ptr(G *g, LLVMValueRef p);
/* At the builder (block_body's fused packing): B's panels at columns
 * [j, jend) of the block into consecutive panel slots from dst. */
void gemm_pack_b_group(G *g, LLVMValueRef cx, LLVMValueRef pack_b, LLVMValueRef dst, LLVMValueRef j,
                       LLVMValueRef jend);

/* ---- gemm_lowp.c ------------------------------------------------------- */

/* G.pairs: GP_NONE (the generic path), or operands packed as adjacent
 * pairs of 16-bit values along K, multiplied by a pairwise dot product:
 * GP_I16 (i8/u8/i16 operands, i32 accumulators: vpmaddwd, or vpdpwssd
 * with VNNI), GP_BF16 (bf16 operands, f32 accumulators: vdpbf16ps); or
 * GP_I8: quads of 8-bit values along K, vpdpbusd (gemm_quad.c). */
enum { GP_NONE, GP_I16, GP_BF16, GP_I8 };

/* Whether the product's K loop may run inside the parallel bodies
 * (gemm.c k_inside, gemm_emit_kloop): the low-precision ones, whose
 * short calls (a 1024^3 int8 product takes about 1 ms on two cores)
 * made two parallel jobs per K block a large part of their time at two
 * threads; the f32 GEMM keeps its code (and compile time). */
static inline bool gemm_k_inside(const G *g) { return g->pairs != GP_NONE; }

/* Sets g->pairs from the dtypes, operand kinds, prologues and g->isa. */
void gemm_lowp_choose(G *g);
/* The suffix of the function key for g->pairs ("" for GP_NONE). */
const char *gemm_lowp_key(const G *g);
/* The bytes a lane's K index takes in packed panels, as the blocking
 * counts them: 2 for GP_BF16 (a pair in 4 bytes, so its KC is twice
 * f32's for the same bytes in L1), 1 for GP_I8 (a quad in 4 bytes),
 * else the compute type's size. */
int gemm_lowp_k_bytes(const G *g);
/* Whether gemm_lowp_emit_pack packs operand `which` (0 A, 1 B): K pairs
 * (g->pairs), or a half-precision matrix B (vector conversion). */
bool gemm_lowp_packs(const G *g, int which);
/* gemm_pack_b_group's runs for GP_BF16 (a MAT B without a prologue):
 * when the group's panels are full and B's lanes contiguous, its pair
 * rows over the whole group (prefetched by gemm_lowp_prefetch_b_next
 * while the group before it ran), then a
 * branch to `done`, else a branch to `other`; false (nothing emitted)
 * for other products. */
bool gemm_lowp_pack_b_group(G *g, LLVMValueRef cx, LLVMValueRef dst, LLVMValueRef j,
                            LLVMValueRef jend, LLVMBasicBlockRef other, LLVMBasicBlockRef done);
/* block_body's fused packing (GP_BF16, else nothing), before the
 * micro-kernel of the tile at (i, j) of the group at columns
 * [jg, jgend) of the chunk [j0, j1) (mc rows), when fuse: a part of the
 * B rows that the next group's packing reads, prefetched. */
void gemm_lowp_prefetch_b_next(G *g, LLVMValueRef cx, LLVMValueRef fuse, LLVMValueRef mc,
                               LLVMValueRef i, LLVMValueRef j, LLVMValueRef j0, LLVMValueRef j1,
                               LLVMValueRef jg, LLVMValueRef jgend);
/* pack_a / pack_b (gemm_emit_pack's signature) when gemm_lowp_packs. */
LLVMValueRef gemm_lowp_emit_pack(G *g, int which);
/* Bytes of X_CSCR for an M x N product (0 unless g->cscr): M rows
 * (rounded up to MR) of the column block (min(N, NC) rounded up to NR)
 * in the compute type. */
LLVMValueRef gemm_lowp_scratch_bytes(G *g, LLVMValueRef M, LLVMValueRef N);
/* Prefetches (for writing) the partial sums of the tile at C's (i, j)
 * when g->cscr (block_body, before the micro-kernel). */
void gemm_lowp_prefetch(G *g, LLVMValueRef cx, LLVMValueRef i, LLVMValueRef j);
/* store_tile (gemm_kernel.c's) when g->cscr: the MR x NR tile acc at C's
 * (i, j), mr x nr valid, added to the partial sums, or rounded into C
 * after the last K block. */
void gemm_lowp_store_tile(G *g, LLVMValueRef cx, LLVMValueRef acc[][4], LLVMValueRef tile,
                          LLVMValueRef i, LLVMValueRef j, LLVMValueRef mr, LLVMValueRef nr);
/* The i32 holding (k, k + 1) of an operand as two 16-bit values (low
 * half first): elements at pofs + k * sp + lane_ofs, zero past kc or
 * when !ok (the address clamped to k < kc; lane_ofs must be valid). */
LLVMValueRef gemm_lowp_pair_at(G *g, LLVMValueRef base, DType dt, LLVMValueRef pofs,
                               LLVMValueRef sp, LLVMValueRef lane_ofs, LLVMValueRef k,
                               LLVMValueRef kc, LLVMValueRef ok);
/* acc + the pairwise dot product of a and b (<vw x i32>, each lane two
 * 16-bit values) for g->pairs and g->isa (vpmaddwd, vpdpwssd, vdpbf16ps). */
LLVMValueRef gemm_lowp_dot(G *g, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b);
/* One step i of a low-precision micro-kernel: nx = cur + A's and B's
 * products at step i (a K pair, a K quad). */
typedef void (*GemmLowpStep)(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef i,
                             LLVMValueRef cur[][4], LLVMValueRef nx[][4]);
/* acc[r][v] after n steps from init[v] (NULL: zeros) in a loop of MR x NV
 * accumulator phis, blocks named after `name`, not vectorized again. */
void gemm_lowp_step_loop(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef n,
                         const LLVMValueRef *init, GemmLowpStep step, const char *name,
                         LLVMValueRef acc[][4]);
/* The micro-kernel (gemm_kernel.c's) when g->pairs: acc[r][v] over kc. */
void gemm_lowp_micro_kernel(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef kc,
                            LLVMValueRef acc[][4]);

/* ---- gemm_quad.c ------------------------------------------------------- */

/* Whether the K-quad path (GP_I8) multiplies this product: i32 compute,
 * (A, B) of (u8, i8), (i8, i8) or (i8, u8), VNNI for g->vec_bits. */
bool gemm_quad_takes(const G *g);
/* Sets g->mr, g->nv, g->nr to the K-quad path's register tile (the
 * target's gemm_quad_*_512 with 512-bit vectors). */
void gemm_quad_tile(G *g);
/* The compute-type elements per lane of a packed panel slot for a K
 * block of kc (an i64 at the builder): kc, or for GP_I8 ceil(kc / 4)
 * quad rows and B's correction row. */
LLVMValueRef gemm_quad_panel_k(G *g, LLVMValueRef kc);
/* pack_a / pack_b (gemm_emit_pack's signature) for GP_I8. */
LLVMValueRef gemm_quad_emit_pack(G *g, int which);
/* The micro-kernel (gemm_kernel.c's) for GP_I8: acc[r][v] over kc. */
void gemm_quad_micro_kernel(G *g, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef kc,
                            LLVMValueRef acc[][4]);

/* ---- gemm_kernel.c ----------------------------------------------------- */

/* block_body; pack_b (gemm_emit_pack's) packs B panels when X_BFUSE; A's
 * panels through X_PACKA, or pack_a (a direct call; none if NULL) when
 * X_PACKA is NULL; finished blocks through the hook at X_EPIFN when it
 * is not NULL. */
LLVMValueRef gemm_emit_block_body(G *g, LLVMValueRef pack_a, LLVMValueRef pack_b);
/* kloop_<what>(ctx, begin, end): items of `inner` (packb_body or
 * block_body) taken one at a time from the shared counter X_INEXT until
 * X_NITEMS are taken ([begin, end) unused), each run for every one of
 * the X_NKB K blocks in order through a private copy of the context with
 * that block's slots (X_PC, X_KC, X_FIRST, X_LAST, X_BPACK advanced by
 * X_BSTEP per block): one parallel job for all K blocks where the items
 * share no packed data within a K block, and a thread that starts late
 * or is descheduled holds up at most one item. */
LLVMValueRef gemm_emit_kloop(G *g, LLVMValueRef inner, const char *what);
/* packa_body(ctx, begin, end): A's MR-row panels [begin, end) of the
 * current K block into X_AKPACK (pack_a: gemm_emit_pack's). */
LLVMValueRef gemm_emit_packa_body(G *g, LLVMValueRef pack_a);

/* ---- gemm_small.c ------------------------------------------------------ */

/* Rows of the small operand up to which the small path runs. */
#define GEMM_SMALL_MAX 32
#define GEMM_SMALL_FORMS_ALL 15
/* Bytes of the packed small operand for K (an i64 at the builder). */
LLVMValueRef gemm_small_bytes(G *g, LLVMValueRef K);
/* The small path's functions (shared per configuration like the packed
 * path's): pack_s packs S; small_f<form> computes lane tiles [begin,
 * end) in one form (2 * axpy + four), found through X_SFORM. */
LLVMValueRef gemm_emit_small_pack(G *g);
LLVMValueRef gemm_emit_small_form(G *g, int form);
/* In the kernel, for one batch item whose slots (X_A.., X_M.., X_CM..,
 * offsets) are set: the i1 "the small path takes this GEMM", after
 * setting its slots; gemm_small_run then runs it. */
LLVMValueRef gemm_small_select(G *g, LLVMValueRef cx);
void gemm_small_run(G *g, LLVMValueRef cx, LLVMValueRef pack);

#endif
