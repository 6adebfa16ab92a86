/* conv_impl.h — private to the convolution kernels of conv.h: their
 * emission state Cv (the GEMM's G for its helpers, plus the values the
 * parallel body reads), and the pieces they share (conv_common.c):
 * vector loads and stores with dtype conversion, masks and gathers, the
 * run of output columns whose taps need no checks, the tap loops, the
 * direct channels-last register block, the epilogue hook call, a
 * generated function's frame, the parallel body's and its launch from
 * the kernel.
 *   conv_common.c    the shared pieces;
 *   conv_depthwise.c one input channel per group;
 *   conv_direct.c    groups = 1, register-blocked;
 *   conv_lowp.c      its K-pair path for low-precision inputs;
 *   conv_1x1.c       a 1x1 conv as a matmul per image.
 * Needs: conv.h, gemm_impl.h. */
#ifndef TDSL_CPU_CONV_IMPL_H
#define TDSL_CPU_CONV_IMPL_H

#include "conv.h"
#include "gemm_impl.h"

/* The body's values (Cv.k in the kernel, Cv.v in the body): pointers
 * first.  V_C: input channels (per group); V_M: channel multiplier. */
enum {
  V_X, V_OUT, V_WP, V_EPIFN, V_EPIARG, V_NPTR,
  V_N = V_NPTR, V_O, V_C, V_H, V_W, V_OH, V_OW, V_KH, V_KW, V_SH, V_SW, V_PH, V_PW, V_DH, V_DW,
  V_M, V_GROUPS, V_XOFF, V_XSN, V_XSC, V_XSH, V_XSW, V_OOFF, V_OSN, V_OSC, V_OSH, V_OSW, V_OPAD,
  V_COUNT
};

typedef struct Cv {
  G g;
  bool cl, epi;
  bool contig;       /* input vectors are contiguous (the kernel's comment) */
  int px, nob;       /* pixels (or vectors) per block; output vectors per block */
  int nblk;          /* conv_direct.c: channel blocks of NOB vectors in the register
                      * block (its border columns), 0 or 1 otherwise */
  LLVMValueRef dir;  /* conv_direct.c: pixel p of a register block is column ox +
                      * p * dir (its edge blocks: 1 or -1), NULL: ox + p */
  DType xd;
  bool split;        /* conv_lowp.c: bf16 pairs taken apart into f32 FMAs */
  LLVMValueRef k[V_COUNT]; /* in the kernel */
  LLVMValueRef v[V_COUNT]; /* in the body: constants, or loads from the context */
  LLVMValueRef lanes;      /* <0, 1, .. VW-1> of i64 */
} Cv;

/* Vectors of output channels in a register block: NOB by Cv.nblk. */
static inline int cv_nvec(const Cv *d) { return d->nob * (d->nblk > 1 ? d->nblk : 1); }

/* Types and vector width of the compute type of output dtype od. */
void cv_setup(Cv *d, const GemmEmit *e, DType xd, DType od);
/* Fills k[] from the operands (k[V_WP] = the pool past its header;
 * k[V_OPAD], k[V_C], k[V_M] are the caller's). */
void cv_operands(Cv *d, const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                 const GemmTensor *out, LLVMValueRef attr[7]);
/* One element of the packed weights (or their bias slot) at p: t's
 * element at offset src in the compute type for output channel o < limit
 * (a real channel), zero for padding channels and when t is NULL. */
void cv_pack_elem(G *g, const GemmTensor *t, LLVMValueRef src, LLVMValueRef o,
                  LLVMValueRef limit, LLVMValueRef p);
LLVMValueRef cv_splat(G *g, LLVMValueRef s);
LLVMValueRef cv_vadd(G *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cv_vmul(G *g, LLVMValueRef a, LLVMValueRef b);
/* VW elements of dtype t as compute lanes: base[off + lane] when idx is
 * NULL, else base[idx[lane]]; lanes off in mask (NULL: all on) read 0 and
 * touch no memory. */
LLVMValueRef cv_vload(G *g, DType t, LLVMValueRef base, LLVMValueRef off, LLVMValueRef idx,
                      LLVMValueRef mask);
/* Stores compute lanes x as base[off + lane] (dtype t), lanes in mask. */
void cv_vstore(G *g, DType t, LLVMValueRef x, LLVMValueRef base, LLVMValueRef off,
               LLVMValueRef mask);
/* The packed compute-type vector at wp + i (i a multiple of VW). */
LLVMValueRef cv_wvec(Cv *d, LLVMValueRef i);
/* `if (0 <= i < n)` (unsigned compare): opens it, returns the block after. */
LLVMBasicBlockRef cv_open_inside(G *g, LLVMValueRef i, LLVMValueRef n);
void cv_close_inside(G *g, LLVMBasicBlockRef after);

/* The loops over the taps of an output row: ky (rows of taps outside the
 * input skipped), then kx, the builder inside. */
typedef struct CvTaps {
  GLoop ly, lx;
  LLVMBasicBlockRef rowskip;
  LLVMValueRef ky, kx; /* the tap */
  LLVMValueRef xr;     /* the input row's offset (input offset xb + iy * XSH) */
} CvTaps;
/* Opens them for the output row whose first tap row is iy0 (input offset
 * xb of its image); cv_taps_close ends them. */
void cv_taps_open(Cv *d, CvTaps *t, LLVMValueRef xb, LLVMValueRef iy0);
void cv_taps_close(Cv *d, CvTaps *t);
/* Pixel p's output column from ox: ox + p (Cv.dir: ox + p * dir). */
LLVMValueRef cv_col(Cv *d, LLVMValueRef ox, int p);
/* The input offset of pixel p's column from ox at tap t (channel 0); checked:
 * opens `if` the input column is inside, its block after in *skip. */
LLVMValueRef cv_tap_col(Cv *d, const CvTaps *t, LLVMValueRef ox, int p, bool checked,
                        LLVMBasicBlockRef *skip);

/* Stores a register block: np pixels by nvec vectors of accumulators
 * acc[p][j] (allocas) at output offsets at[p] + j * VW (at[p]: pixel p's
 * channel oc).  tail: the block may be the last one of a row, past O
 * (O not known to be a multiple of the block's channels): decided at
 * run time, it then stores through masks against O, else plainly, so
 * that one copy of a block's code serves every channel block. */
void cv_store_block(Cv *d, LLVMValueRef acc[][8], const LLVMValueRef *at, int np, int nvec,
                    LLVMValueRef oc, bool tail);

/* conv_direct.c's channels-last register block, also conv_lowp.c's: np
 * pixels from column ox by the output channels oc .. oc + NB (NOB
 * vectors; tail: maybe the last block, cv_store_block), their
 * accumulators starting at the bias, inside the tap loops; the caller
 * adds each tap's channels. */
typedef struct CvBlock {
  CvTaps t;
  LLVMValueRef acc[16][8]; /* [pixel][vector]: allocas of the compute vectors */
  LLVMValueRef xo[16];     /* each pixel's input offset at this tap */
  LLVMValueRef wt;         /* this tap's first weight row in wp */
  LLVMValueRef ox, oc;
  LLVMBasicBlockRef skip; /* checked (np == 1): the column check's block after */
  int np;
  bool tail; /* cv_store_block's */
} CvBlock;
/* Opens the block for weights packed [O / NB][KH][KW][rows][NB] (rows:
 * C, or conv_lowp.c's pairs), the bias after them (at KH * KW * rows *
 * OPAD); cv_block_close closes the loops and stores the block at output
 * offset ob (the row's).  With Cv.nblk > 1 the block spans that many
 * channel blocks (NOB * nblk vectors from oc; not with tail). */
void cv_block_open(Cv *d, CvBlock *b, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ox,
                   LLVMValueRef oc, int np, bool checked, bool tail, int nb, LLVMValueRef rows);
void cv_block_close(Cv *d, CvBlock *b, LLVMValueRef ob);
/* The epilogue hook (gemm.h) on rows [i0, i1) x columns [j0, j1). */
void cv_call_epi(Cv *d, LLVMValueRef bt, LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef j0,
                 LLVMValueRef j1);
/* The output columns [*lo, *hi) whose taps all fall inside the input. */
void cv_interior(Cv *d, LLVMValueRef *lo, LLVMValueRef *hi);
/* The same for the output rows. */
void cv_interior_rows(Cv *d, LLVMValueRef *lo, LLVMValueRef *hi);
bool cv_is_one(LLVMValueRef v);
/* A private function `name`(ps[0 .. n)) returning void, with the 512-bit
 * vector attributes when g's vectors are that wide: g->fn, and a new
 * builder g->b at its entry block (the caller disposes of it). */
LLVMValueRef cv_fn_open(G *g, const char *name, LLVMTypeRef *ps, unsigned n);
/* <0, 1, .. VW-1> of i64. */
LLVMValueRef cv_lanes(G *g);
/* Opens body `name`(ctx, begin, end) with v[] bound, the builder inside
 * its loop over items; returns the item index.  cv_body_close ends it. */
LLVMValueRef cv_body_open(Cv *d, const char *name, GLoop *l);
LLVMValueRef cv_body_close(Cv *d, GLoop *l);
/* In the kernel: stores the non-constant values in a context and runs
 * body in parallel over N * OH output rows (planes: N * O output planes);
 * returns the i32 0. */
LLVMValueRef cv_launch(Cv *d, const GemmEmit *e, LLVMValueRef body, bool planes);
/* The same over `items` work items (computed in the kernel). */
LLVMValueRef cv_launch_items(Cv *d, const GemmEmit *e, LLVMValueRef body, LLVMValueRef items);

/* ---- conv_lowp.c: the direct kernel's K-pair path ---- */

/* The pair path (gemm_impl.h GP_I16, GP_BF16; g.pairs set) for a
 * channels-last direct conv of input d->xd and weight dtype wd, or
 * GP_NONE (after cv_operands). */
int cv_lowp_choose(Cv *d, DType wd);
/* The weights as pairs [O / NB][KH][KW][ceil(C / 2)][NB], then the bias. */
void cv_lowp_pack(Cv *d, const GemmTensor *w, const GemmTensor *bias, int nb);
/* conv_direct.c's block (cv_block_open's: np pixels from ox, channels
 * oc .. oc + nb) on the pairs. */
void cv_lowp_block(Cv *d, LLVMValueRef xb, LLVMValueRef iy0, LLVMValueRef ob, LLVMValueRef ox,
                   LLVMValueRef oc, int np, bool checked, bool tail, int nb);

#endif
