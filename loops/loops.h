/* loops.h — the loop form: tensor IR lowered to loop nests, the one seam
 * between the passes and the code generators (cpu/ today, a cuda/
 * backend later, driven by codegen/codegen.c).  The layer (loops/)
 * depends only on ir/:
 *
 *   lower.c   lf_lower     optimized IR -> LfKernel
 *   print.c   lf_print     LfKernel -> text (tdslc --emit=loops, the HTML
 *                          report's loop form)
 *   stats.c   lf_stats     traffic and nest counts for the report; the
 *                          scratch sizes of an LfKernel (lf_scratch_*)
 *   conv_algo.c lf_conv_algo which conv2d kernel a target runs (implicit
 *                          GEMM, depthwise, direct); lf_gemm_mma whether
 *                          CUDA's matmul or conv2d runs on tensor cores
 *   schedule.c lf_schedule how a target runs a nest's loops (collapsing,
 *                          order, tiles, parallel loops), from the
 *                          target's parameters (lf_target_params)
 *
 * A kernel becomes a list of buffers and a list of nests run in order.
 *  - Buffers: tensor parameters (storage read through the descriptor's
 *    data + byte_offset), scalar parameters (values, not memory: a load
 *    of one is the parameter's value whatever its access, which is
 *    always of a single element; code generators pass it by value and
 *    give it no address), constant
 *    tables (TENSOR values), scratch (one per non-view intermediate, laid
 *    out by that value's semantic geometry, `size` elements; at -O1+
 *    buffers of one plan-memory slot share one block), and the
 *    caller's outputs (addressed with the descriptor's run-time strides,
 *    or with static dense strides where the result's layout fixes them).
 *    At -O1+ a value plan-memory placed in its result's output
 *    (IrValue.out) has that output as its buffer, addressed with its own
 *    semantic strides (equal to the layout's), and the result gets no
 *    copy nest.
 *  - A nest iterates row-major over `rank` outer loops (`shape`) and, for
 *    reductions, `nred` inner loops (`red`); loop variable l is the l-th
 *    of these, outer first.  Its body evaluates `value` (an expression
 *    tree over loads) in the innermost loop and stores it (or the reduced
 *    accumulator, after the inner loops) through `store`.
 *  - An access (LfAccess) addresses element
 *        buf + offset + sum_l var[l] * stride[l]
 *    in elements, with Sym strides over the nest's loop variables.  A
 *    view never materializes: loading a view loads its storage root with
 *    the view's absolute geometry.  Parameters' semantic geometry equals
 *    their real one once the entry checks pass (layout checked, strides of
 *    `strided` parameters bound as symbols), so the same formula holds.
 *    `lin_rank` > 0 (RESHAPE) means: take the row-major linear index of
 *    the outer loops, split it over `lin_shape`, and apply `stride` to
 *    those coordinates instead.  `rt_strides` (outputs) means: the
 *    strides are the descriptor's, loop variable l on dim l.
 *  - Window bounds and post-processing (pools): a reduction loop l may
 *    carry its own bounds `red_lo[l]`, `red_hi[l]` (I64 expressions over
 *    the OUTER loop variables, LFE_INDEX): it then runs over [lo, hi)
 *    instead of [0, red[l]), and red[l] is only an upper bound of its
 *    trip count.  MEAN divides by the product of the actual trip counts.
 *    `post`, when set, is evaluated after the reduction loops with LFE_ACC
 *    standing for the reduced value (in the accumulator dtype: F64 for
 *    f64, F32 for other floats, I64 for integers and bool); its result is
 *    converted to the stored dtype.  LFE_OP DIV on integers divides with
 *    truncation (C; the divisor is never 0), which integer avg pooling
 *    needs; the IR's DIV itself is float-only.
 *  - Normalizations (lower.c): softmax/log_softmax over dim d
 *    is three nests: AMAX of x over d into an auxiliary scratch buffer
 *    of statistics (row-major over the other dims, F32 or F64), SUM of
 *    exp(x - max) into a second one, then an elementwise nest reading x
 *    and both statistics with stride 0 along d.  layer_norm: MEAN of x,
 *    MEAN of (x - mean)^2 (biased variance), then the normalization with
 *    weight/bias.  Statistics buffers are LFB_SCRATCH with index = the
 *    normalized value; all three nests have src = that value, and only
 *    the last stores it (to scratch, or to an output: it assumes
 *    neither).  At -O1+ the nests form a row group (LfNest.group) over
 *    the dims before the normalized one(s), when there are any: each
 *    row's statistics are computed and used while the row is in cache;
 *    an f32/f64 softmax in a group is then four nests that evaluate exp
 *    once: AMAX, exp(x - max) stored into the value, SUM of the stored
 *    value, and the value divided by the sum in place.
 *  - Scans (lower.c, lower_scan; reduce = OP_CUMSUM, OP_CUMPROD,
 *    OP_LOGCUMSUMEXP, lf_is_scan): the outer loops are the value's other
 *    dims, in order, and the one reduction loop (red[0], loop variable
 *    `rank`) is the scanned dim, run sequentially from 0 up.  The
 *    accumulator starts at `scan_init` (dtype: PyTorch's CPU acc_type,
 *    F64 for f32/f64, F32 for f16/bf16, I64 for integers); each step sets
 *    it to `value`, an expression over LFE_ACC (the accumulator) and the
 *    loads at the current index (add / mul / logaddexp(x, acc)), and
 *    stores it, converted to `dtype`, through `store`, whose strides
 *    cover all rank + 1 loop variables: every element is stored, unlike
 *    a reduction's.  Backends keep the outer loops' schedule (collapsed,
 *    parallel) and never split the scanned loop.  When the innermost
 *    outer loop is not the scanned one and its accesses are unit-stride
 *    (a scan along a dim that is not the innermost), a backend runs
 *    several of its iterations side by side inside the scanned loop
 *    (cpu/scan.c: blocks of up to 64 columns, their accumulators in an
 *    array, the loads and stores contiguous) instead of walking each
 *    column alone.
 *  - Pools (lower.c, lower_pool): one reduction nest over N, C, OH, OW
 *    with two window loops whose bounds are the window clipped to the
 *    input (max pooling then never sees padding, as -inf padding
 *    implies); avg pooling divides in `post` by PyTorch's
 *    count_include_pad divisor, adaptive pooling by the window size.
 *
 *  - Indexing by tensors (INDEX, GATHER; lower_index): one nest over the
 *    result whose load of x has a dynamic term: dyn[t] is an I64
 *    expression over the nest's loop variables (the load of the index
 *    tensor at the index's dims, converted to I64; with IRF_WRAP a
 *    negative index i read as i + size), and the element offset adds
 *    dyn[t] * dyn_stride[t] (x's stride along the indexed dim, whose own
 *    stride entry is 0).  Lowering carries a dynamic index through index
 *    maps as a pseudo loop variable (LF_DYN + slot, lower.c) down to the
 *    loads, so every operand may be inlined: the index's elementwise
 *    producers (arange arithmetic, clamp, remainder: x.index_select(d,
 *    f(arange(n))) is one nest), x's (evaluated at the gathered
 *    positions only; another INDEX: flip(x, [0, 1]) is one load with two
 *    dynamic terms), and the INDEX/GATHER value itself into its readers,
 *    like an elementwise value.  Loops collapse only where the dynamic
 *    terms' loads collapse too; a dynamic load never takes the
 *    transposing tile path.
 *    Indices the program supplies are checked by check nests (`check`
 *    set; no store): each evaluates the raw index over the index
 *    operand's shape (as the indexing reads it) and fails the kernel
 *    with TDSL_E_INDEX and check->msg unless 0 <= i < bound (-bound <= i
 *    < bound with wrap).  The checks of index operands read from
 *    parameters or constants run before every other nest; the others at
 *    the indexing value's place in value order (before the nest that
 *    computes it, or reads it inlined), and pass plan-memory places no
 *    value computed before that point in an output, so no output is
 *    written before a check passes.  Values flagged IRF_INBOUNDS (sema
 *    built their indices, or checked constant ones) get no check.
 *
 * Ranks are at most TDSL_MAX_RANK (ir.h), so a nest has at most
 * 2 * TDSL_MAX_RANK loops.
 *
 * Needs: ir.h (storage.c: the inlining and scratch rules shared with the
 * passes).  Used by: codegen/, cpu/, driver/tdslc.c.
 * Produces: LfKernel in the IR module's arena. */
#ifndef TDSL_LOOPS_H
#define TDSL_LOOPS_H

#include <stdbool.h>
#include <stdio.h>

#include "../ir/ir.h"

typedef enum LfBufKind {
  LFB_PARAM,   /* index: parameter number */
  LFB_SCALAR,  /* index: parameter number; a value passed by value, no
                  memory (an LFE_LOAD of it is the value) */
  LFB_CONST,   /* index: the TENSOR value; data: row-major elements */
  LFB_SCRATCH, /* index: the value (or the normalized value whose
                  statistics it holds); size: elements */
  LFB_OUTPUT   /* index: result number */
} LfBufKind;

typedef struct LfBuf {
  LfBufKind kind;
  int index;
  DType dtype;
  const Sym *size;  /* LFB_SCRATCH, LFB_CONST: elements */
  const void *data; /* LFB_CONST */
  int slot;         /* LFB_SCRATCH: plan-memory block (> 0), shared by
                       every buffer of the same slot; 0: its own memory */
  const Sym *slot_bytes; /* slot > 0: the block's size in bytes (>= this
                            buffer's size * dtype size) */
  bool stats;       /* LFB_SCRATCH: a normalization's statistics */
} LfBuf;

typedef struct LfAccess {
  int buf;
  const Sym *offset;   /* elements */
  const Sym **stride;  /* one per loop variable (or per lin_shape dim) */
  int lin_rank;        /* > 0: strides apply to lin_shape coordinates */
  const Sym **lin_shape;
  bool rt_strides;     /* outputs: the descriptor's strides */
  int ndyn;            /* dynamic terms (indexing by tensors): the offset */
  struct LfExpr **dyn; /*   adds dyn[t] * dyn_stride[t] elements for each */
  const Sym **dyn_stride;
} LfAccess;

/* An index check (LfNest.check). */
typedef struct LfCheck {
  const Sym *bound; /* the size of the indexed dim */
  bool wrap;        /* negative indices allowed: [-bound, bound) */
  const char *msg;  /* ir_index_message: "%lld" index, "%lld" bound */
} LfCheck;

typedef enum LfExprKind {
  LFE_LOAD,   /* acc; dtype = the buffer's */
  LFE_CONST,  /* value: .f for F64, .i for I64 (dtype is one of them) */
  LFE_SYM,    /* sym evaluated, I64 */
  LFE_ARANGE, /* F64: start + var[loop] * step */
  LFE_OP,     /* op (elementwise) over args, result dtype */
  LFE_CAST,   /* args[0] converted to dtype (spec §5.4) */
  LFE_INDEX,  /* I64: var[loop] */
  LFE_ACC     /* in a nest's `post` only: the reduced value */
} LfExprKind;

typedef struct LfExpr {
  LfExprKind kind;
  DType dtype;
  Op op;
  int flags; /* IRF_* of the op (GELU tanh) */
  double fattr[3]; /* the op's float parameters (IrValue.fattr) */
  int nargs;
  struct LfExpr *args[3];
  LfAccess acc;
  Scalar value;
  const Sym *sym;
  double start, step;
  int loop;
} LfExpr;

typedef struct LfNest {
  int rank;
  const Sym **shape;
  int nred;
  const Sym **red;
  Op reduce;       /* OP_COUNT: plain store; else SUM ... ARGMIN, or a
                      scan (CUMSUM ... LOGCUMSUMEXP, see "Scans") */
  LfExpr **red_lo, **red_hi; /* NULL, or per reduction loop NULL or its
                                bounds (see above) */
  LfExpr *post;    /* NULL, or the stored value in terms of LFE_ACC */
  LfExpr *value;
  LfAccess store;  /* over the outer loops */
  DType dtype;     /* stored dtype */
  IrRef src;       /* the IR value computed (-1: a result copy) */
  const int *order; /* outer loops in memory order: order[i] is the loop
                       variable at depth i (outermost first); NULL: 0..rank-1 */
  /* reduce == OP_MATMUL / OP_CONV2D (cpu/gemm.c computes the whole
   * value): the IR operands (a, b / x, w[, bias]), each addressed over its own
   * dims (loop variable l = dim l, shapes those of the IR operands);
   * `store` is the value's dense store over its dims; `value` is just a
   * load of operand 0 (for printing) and red/nred are unused. */
  int nopnd;
  LfAccess opnd[3];
  /* Prologues (see below): per operand 0 / 1 NULL, or the operand's
   * value as an expression over its own dims (loop variable l = dim l)
   * whose loads are the producer's operands; opnd[j].buf is then -1 (no
   * buffer holds the operand). */
  LfExpr *pro[2];
  /* Gemm nests: `gemm` is the MATMUL/CONV2D value, and the GEMM writes
   * its value (dtype `cdtype`, over its dims) through `cstore`.  Without
   * an epilogue gemm == src, cstore == store, cdtype == dtype and post is
   * NULL.  With one (see "Epilogues" below) `post` is the stored value in
   * terms of LFE_ACC, the GEMM's value at the output index (dtype
   * cdtype, read back through cstore), and src/store/dtype are those of
   * the value (or result copy, src -1) the epilogue computes. */
  IrRef gemm;
  LfAccess cstore;
  DType cdtype;
  /* Scans (see "Scans" above): the accumulator's first value. */
  LfExpr *scan_init;
  /* Row groups (see "Normalizations" above, and pass row-group's groups:
   * lf_lower emits the nests of an IR row group (IrValue.group, ir.h
   * "Row groups") consecutively where ir_exec_order places them, one per
   * member, sharing the group's `rows` leading loops; every read of one
   * member by another is row-local, so a row's nests need only that row
   * of earlier members): group > 1 on the first nest
   * of a group says that it and the next group - 1 nests share their
   * first `shared` outer loops (same extents; loop variable l < shared is
   * the same index in each).  The code generator may run them as one
   * loop over those shared iterations that runs each nest's remaining
   * loops in turn; it must keep their order for each shared index.  0 on
   * every other nest. */
  int group, shared;
  /* An index check (loops.h "Indexing by tensors"): stores nothing;
   * `value` is the raw index (I64) at each outer index. */
  const LfCheck *check;
} LfNest;

/* Whether n is a scan nest (loops.h "Scans"). */
static inline bool lf_is_scan(const LfNest *n) {
  return n->reduce != OP_COUNT && op_kind(n->reduce) == IRK_SCAN;
}

typedef struct LfKernel {
  const IrKernel *k;
  int nbufs;
  LfBuf *bufs;
  int nnests;
  LfNest *nests;
} LfKernel;

/* Lowers k at opt_level (0..3); every op of the IR has a loop form.
 *
 * Fusion (opt_level >= 1 and flagged by pass fuse; -O0 keeps one nest
 * and scratch per value).  A value computed by an elementwise, copy/cast or constant op (not
 * RESHAPE) is *inlined*: it gets no nest and no scratch, and every load
 * of it (directly or through views) becomes its expression tree evaluated
 * at the consumer's index.  Elementwise operands are pre-expanded to the
 * result's shape (ops.h), so producer and consumer share the index space;
 * through a view the index map is composed: the view must be offset 0
 * and each of its dims either size 1, stride 0 (expand) or a distinct dim
 * of the producer with equal size and stride (permute, (un)squeeze,
 * expand); every producer dim of size != 1 covered.  Otherwise (slices,
 * reshaping views, RESHAPE's linear reads) the producer is materialized.
 * Consumers may be elementwise/copy ops, reductions (their element
 * reads) and result copies.  A value read more than once is inlined
 * (recomputed) only while its expression tree is cheap (a node budget
 * where transcendental ops count extra); else it is materialized.
 * Result copies of dense-layout outputs store with static strides and
 * loop in the layout's memory order (LfNest.order). */
LfKernel *lf_lower(IrModule *m, const IrKernel *k, int opt_level);

/* Epilogues (opt_level >= 1): a MATMUL/CONV2D value flagged IRF_INLINE
 * by pass fuse has no nest of its own; the one nest that reads it (an
 * elementwise nest or a result copy, reading it once at the output index
 * through a chain of inlined values) becomes its gemm nest, with the
 * nest's expression as `post` (the GEMM value replaced by LFE_ACC).  The
 * nest stays where it was in nest order (every operand of the epilogue
 * is ready there; plan-memory keeps the GEMM's operands alive up to it,
 * as for any inlined value).  cstore is `store` itself (in place: the
 * GEMM accumulates into the final destination and the epilogue rewrites
 * each finished block) when the stored dtype is the GEMM value's dtype,
 * one of f32, f64, i64, and the GEMM can address the destination (a
 * matmul: any strides; a conv2d: exactly its own dense strides); else
 * the GEMM value's own scratch buffer (outside plan-memory's plan),
 * which the epilogue reads back block by block while it is in cache.
 * A GEMM's packing memory is allocated at the kernel's entry with the
 * scratch (cpu/gemm_nest.c cpu_setup_gemm_pools, cpu/gemm.h
 * cg_*_pool_bytes), so storing
 * into a caller's output is safe: a failed allocation leaves every
 * output untouched (spec §7.2). */

/* Prologues (opt_level >= 1): a value computed by an elementwise,
 * copy/cast or constant op that pass fuse flags IRF_INLINE and whose one
 * reader is operand 0 or 1 of a MATMUL/CONV2D (read directly or through a
 * view whose index map composes, ir_view_map) gets no nest and no buffer:
 * the gemm nest carries its expression (LfNest.pro), which the code
 * generator evaluates while packing the operand (cpu/gemm.h
 * GemmPrologue).
 * A conv input's zero padding stays 0 (PyTorch pads the producer's
 * output), it is not the expression at the padded position. */

/* Which values are inlined is decided by the pass "fuse" (passes/fuse.c)
 * and recorded as IRF_INLINE; lowering at opt_level >= 1 inlines exactly
 * the flagged values (none when the pass did not run), and ignores the
 * flags at level 0.  Likewise values with a plan-memory slot (IrValue.slot)
 * share one scratch block per slot at level >= 1 (LfBuf.slot). */

/* Traffic estimate for the optimization report: lowers k at opt_level
 * and sets the number of nests, the bytes all nests read and write
 * (each load counts once per distinct address: once per iteration of
 * the loops its address depends on, so a broadcast operand counts its
 * own size; each store once per outer iteration; gemm nests read each
 * operand once, a prologue's loads once per distinct address) and
 * the scratch bytes. */
void lf_stats(IrModule *m, const IrKernel *k, int opt_level, int *nests,
             const Sym **bytes, const Sym **scratch);

/* Scratch buffer i of a slot another buffer j < i already holds: j + 1
 * (the code generator allocates the block once, for j); else 0. */
int lf_slot_shared(const LfKernel *lk, int i);
/* Bytes to allocate for scratch buffer b (its slot's block when planned). */
const Sym *lf_scratch_bytes(SymTab *st, const LfBuf *b);
/* Bytes of all of lk's scratch blocks, each once: K_info's scratch_expr,
 * the header's comment and the report's scratch line (GEMM packing
 * memory, sized at run time, is not included). */
const Sym *lf_scratch_total(SymTab *st, const LfKernel *lk);

/* ---- schedules (schedule.c) ------------------------------------------------
 * How a target runs a nest's loops, decided here, not while emitting:
 * the nest's loops in the order they run (outer loops in memory order,
 * then the reduction loops), grouped into "virtual" loops: adjacent loops
 * (outer a, inner b) whose every access has stride[a] == stride[b] *
 * max(extent[b], 1) run as one loop of extent[a] * extent[b] on variable
 * b (a's variable is 0): the same addresses, one long unit-stride inner
 * loop instead of short rows.  A transposing nest has a tile loop: outer
 * loop tile_var runs innermost, over tiles of `tile` iterations; its
 * virtual loop tile_k then runs over the tiles (blocked) or, when its
 * extent is a constant <= tile, disappears (one tile covers it).  A
 * blocked plain copy (the value a load of the nest's dtype, the store
 * unit-stride along the innermost loop) tiles by tile_copy instead. */
#define LF_MAXL (2 * TDSL_MAX_RANK)

/* A target's scheduling parameters (schedule.c's table). */
typedef struct LfTarget {
  const char *name;
  int64_t par_min_elems; /* elements of work per parallel chunk, at least */
  bool par_all;          /* every outer loop forms the parallel index (a GPU
                            thread per outer iteration: cuda/nest.c); else
                            all but the innermost, which a CPU vectorizes */
  int tile;              /* tile of transposing nests */
  int tile_copy;         /* a blocked tile of a transposing plain copy
                            (cpu/transpose.c's register blocks); 0: tile */
  /* GEMM blocking (cpu/gemm.c): micro-kernel rows MR (with 512-bit
   * vectors: gemm_mr_512) by gemm_nv vectors; row blocks of
   * gemm_mc_panels MR panels, K blocks of gemm_kc and column blocks of
   * gemm_nc where the runtime does not know the cache sizes (else they
   * follow from them at run time, gemm_nc still the largest NC); the
   * K-quad path (cpu/gemm_quad.c) with 512-bit vectors: gemm_quad_mr_512
   * rows by gemm_quad_nv_512 vectors (0: as the others) */
  int gemm_mr, gemm_mr_512, gemm_nv, gemm_mc_panels, gemm_kc, gemm_nc;
  int gemm_quad_mr_512, gemm_quad_nv_512;
} LfTarget;

typedef struct LfSchedule {
  int n, nouter;         /* virtual loops; the first nouter are outer */
  int order[LF_MAXL];    /* the nest's loops in the order they run */
  int first[LF_MAXL];    /* per virtual loop: its first loop in order[], */
  int count[LF_MAXL];    /*   how many it covers (the last carries its index) */
  int tile_var;          /* >= 0: this outer loop runs innermost, in tiles */
  int tile_k;            /*   its virtual loop */
  int tile;              /*   iterations per tile */
  bool blocked;          /*   false: tile_k's extent fits one tile */
  int par;               /* leading outer loops (after tiling) forming the
                            parallel index: all but the innermost (at
                            least 1), or all with LfTarget.par_all */
} LfSchedule;

const LfTarget *lf_target_params(const char *name);
LfSchedule lf_schedule(SymTab *st, const LfNest *n, const LfTarget *t);
/* The loop carrying virtual loop k's index. */
int lf_schedule_var(const LfSchedule *s, int k);
/* Extent of loop l (outer, then reduction loops). */
const Sym *lf_loop_extent(const LfNest *n, int l);
/* Whether access a / every access of e allows collapsing loops oa, ib. */
bool lf_acc_collapses(SymTab *st, const LfNest *n, const LfAccess *a, int oa, int ib);
bool lf_expr_collapses(SymTab *st, const LfNest *n, const LfExpr *e, int oa, int ib);

/* The algorithm a target's code runs for conv2d nest n (conv_algo.c):
 * the implicit GEMM (every conv, and every nest of a non-CPU target), a
 * depthwise kernel (one input channel per group, several groups), a
 * direct kernel, or a plain GEMM per image for a 1x1 conv at stride 1
 * with an NCHW output (no im2col); from static facts only, so the loop form and the
 * backend agree. */
typedef enum LfConvAlgo { LF_CONV_GEMM, LF_CONV_DEPTHWISE, LF_CONV_DIRECT, LF_CONV_1X1 } LfConvAlgo;
LfConvAlgo lf_conv_algo(const IrKernel *k, const LfNest *n, const LfTarget *t);
const char *lf_conv_algo_name(LfConvAlgo a);
/* Whether CUDA runs matmul or conv2d nest n at -O opt on tensor cores
 * (cuda/gemm.c: mma.m16n8k16, f32 accumulation) on a target of sm_80 and
 * up: both operands f16, or both bf16, at -O1 and up. */
bool lf_gemm_mma(const IrKernel *k, const LfNest *n, int opt);
/* The load under gemm nest n's prologue j when the prologue only widens
 * a tensor's elements (ir/dtype.h dtype_widens; `x.to(i32)` of an i8
 * tensor): the GEMM and the conv kernels read that narrow operand and
 * convert while packing, as if there were no prologue (conv_algo.c);
 * else NULL. */
const LfExpr *lf_pro_widened(const IrKernel *k, const LfNest *n, int j);

/* Prints the loop form as text, one section per kernel (the format:
 * print.c), each nest with its schedule for target t; opt_level is only
 * shown in the section's heading. */
void lf_print(FILE *f, IrModule *m, const LfKernel *lk, int opt_level, const LfTarget *t);

#endif
