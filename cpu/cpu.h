/* cpu.h — private to the CPU backend (cpu/): the loop plan of a nest
 * (VLoops) and the entry points its files share, grouped by file:
 *   kernel.c     the backend (backend.h cg_cpu_backend): kernels, serial nests;
 *   reduce.c     reductions;
 *   reduce_split.c  long reductions to few outputs split over threads;
 *   scan.c       scans;
 *   vloops.c     the loops of a nest as its schedule (loops/schedule.c) says;
 *   transpose.c  transposing copies in register blocks;
 *   outline.c    outlined functions and their packed context;
 *   parallel.c   parallel nests and row groups;
 *   gemm_nest.c  matmul/conv2d nests through gemm.h (and conv.h: the
 *                depthwise and direct conv kernels, loops/conv_algo.c);
 *   isa.c        ISA variants, their dispatch and K_isa;
 *   split.c      a module's functions split into parts for threads;
 *   machine.c    target machine, optimization, output.
 * Shared LLVM helpers, expressions and the host entry come from codegen/
 * (llvm_util.h).
 * Needs: codegen/llvm_util.h, codegen/backend.h, gemm.h. */
#ifndef TDSL_CPU_H
#define TDSL_CPU_H

#include "../codegen/backend.h"
#include "../codegen/llvm_util.h"
#include "gemm.h"

/* A nest's schedule (loops.h LfSchedule) with its extents as LLVM
 * values, after tiling. */
typedef struct VLoops {
  int n, nouter;              /* loops; the first nouter are outer loops */
  int par;                    /* the first par outer loops: the parallel index */
  int var[MAXL];              /* the loop variable that carries the index
                                 (VL_BLOCK: the tile loop's block index) */
  LLVMValueRef ub[MAXL];
  int tile_var;               /* >= 0: this outer variable runs innermost, */
  int tile;                   /*   over blocks of `tile` (plan_tile) */
  bool blocked;               /*   false: the whole extent in one block */
  LLVMValueRef tile_ub;
} VLoops;

#define VL_BLOCK (-2)

/* ---- reduce.c ------------------------------------------------------------- */

/* The float sum cascade (reduce.c): blocks of CPU_SUM_BLOCK elements,
 * CPU_SUM_LEVELS levels that each take 2^CPU_SUM_FAN_LOG2 sums. */
#define CPU_SUM_BLOCK 512
#define CPU_SUM_FAN_LOG2 4
#define CPU_SUM_LEVELS 8

/* The nest's reduced value at the current outer index (loops opened and
 * closed here). */
LLVMValueRef cpu_emit_reduce(Cg *c, NestCtx *x);

/* A reduction's accumulator while its code is emitted: the pieces of
 * cpu_emit_reduce, which reduce_split.c runs over chunks of a long
 * reduction and then again over the chunks' values. */
typedef struct RedAcc {
  const LfNest *n;
  DType in, ad;               /* the value's dtype, the accumulator's */
  LLVMTypeRef t;              /* the accumulator's type */
  bool cascade;               /* a float SUM/MEAN cascade (else plain) */
  LLVMValueRef acc, arg, pos; /* plain: allocas of the value, the taken
                                 position (ARGMAX/ARGMIN), the next one */
  LLVMValueRef lv, cnt, bs;   /* cascade: allocas of the levels, the sums
                                 level 0 took, a block's sum */
} RedAcc;
/* The accumulator's dtype for values of dtype in: f64, f32 or i64. */
DType cpu_red_acc_dtype(DType in);
/* Entry allocas of n's accumulator, their initial values stored at the
 * builder's position. */
void cpu_red_begin(Cg *c, const LfNest *n, RedAcc *a);
/* The same with `lanes` (2 .. 64) outputs' accumulators side by side: a
 * vector of them in each (no ARGMAX/ARGMIN); every step is lane-wise,
 * each lane's the same as one output's alone. */
void cpu_red_begin_lanes(Cg *c, const LfNest *n, RedAcc *a, int lanes);
/* Elements [e0, e1) of the innermost reduction loop (the others' x->iv
 * set) into a: a cascade takes them as one block (at most CPU_SUM_BLOCK
 * of them); pos0: the flattened position of e0 (NULL: a->pos's).  A
 * nest without reduction loops takes its one value (e0, e1 unused). */
void cpu_red_run(Cg *c, NestCtx *x, RedAcc *a, LLVMValueRef e0, LLVMValueRef e1,
                 LLVMValueRef pos0);
/* A partial result into a: a cascade's value v enters level `level` (an
 * i64 value), a plain one's value v at position p steps it. */
void cpu_red_merge(Cg *c, RedAcc *a, LLVMValueRef v, LLVMValueRef p, LLVMValueRef level);
/* a's value: a cascade's levels added smallest first (after `start` when
 * not NULL); a plain one's accumulator and (arg non-NULL) its position. */
LLVMValueRef cpu_red_value(Cg *c, RedAcc *a, LLVMValueRef start, LLVMValueRef *arg);
/* The value stored from reduced value r (arg: ARGMAX/ARGMIN's position):
 * MEAN divided by total, the nest's post expression, the output dtype. */
LLVMValueRef cpu_red_finish(Cg *c, NestCtx *x, RedAcc *a, LLVMValueRef r, LLVMValueRef arg,
                            LLVMValueRef total);

/* ---- reduce_split.c ------------------------------------------------------- */

/* At -O1 and above, for a nest whose reduction may be long and whose
 * outputs are few: the reduction split into chunks over threads.  True
 * when that is the nest's whole code; else *join is NULL (the nest does
 * not split) or, where the outputs are few only at some shapes, the
 * block where the split (taken at those) and the nest's ordinary code
 * (the caller's, at the builder's position) meet. */
bool cpu_emit_reduce_split(Cg *c, const LfNest *n, LLVMBasicBlockRef *join);

/* ---- scan.c --------------------------------------------------------------- */

/* A scan nest's row at the current outer index: the scanned loop, each
 * step stored (loops opened and closed here). */
void cpu_emit_scan(Cg *c, NestCtx *x);
/* Whether scan nest n, planned as vl, runs its innermost outer virtual
 * loop as blocks of columns (the store unit-stride along it, not along
 * the scanned loop). */
bool cpu_scan_columns(Cg *c, const LfNest *n, const VLoops *vl);
/* The scan over outer loop variable j's range [j0, j1) in blocks of
 * columns, the other outer loop variables set. */
void cpu_emit_scan_columns(Cg *c, NestCtx *x, int j, LLVMValueRef j0, LLVMValueRef j1);
/* A parallel grain over columns: at least one block of columns. */
LLVMValueRef cpu_scan_grain(Cg *c, LLVMValueRef grain);

/* ---- vloops.c ------------------------------------------------------------- */

/* The nest's schedule, with x's bounds and variables updated for it. */
void cpu_plan_vloops(Cg *c, const LfNest *n, NestCtx *x, VLoops *v);
/* Steps the first p loop indices of vl like an odometer. */
void cpu_odometer_step(Cg *c, const VLoops *vl, LLVMValueRef *idx, int p);
/* Runs flattened outer iterations [lo, hi) of n; the first p loops of vl
 * form the flattened index. */
void cpu_emit_nest_range(Cg *c, const LfNest *n, NestCtx *x, const VLoops *vl,
                         LLVMValueRef lo, LLVMValueRef hi, int p);
/* The innermost loop of elementwise nest n, variable var over [lo, ub),
 * with non-temporal stores when `stream` (an i1) holds. */
void cpu_emit_inner_streaming(Cg *c, const LfNest *n, NestCtx *x, int var, LLVMValueRef lo,
                              LLVMValueRef ub, LLVMValueRef stream);
/* Whether row group g's last nest streams its stores (an i1 computed at
 * the builder's position, once per call); NULL: never. */
LLVMValueRef cpu_group_stream(Cg *c, const LfNest *g);

/* ---- transpose.c ---------------------------------------------------------- */

/* Whether n, planned as vl with p parallel loops, runs as register blocks. */
bool cpu_transpose_blocks(Cg *c, const LfNest *n, const VLoops *vl, int p);
/* Whether the blocks of n store non-temporally, as an i1 computed at the
 * builder's position (once per call, before the loops); NULL: never. */
LLVMValueRef cpu_transpose_stream(Cg *c, const LfNest *n);
/* The innermost loop i over [0, iub) and the tile loop j over [t0, t1)
 * of n in register blocks, the outer loop variables already set; stream:
 * cpu_transpose_stream's value or NULL. */
void cpu_emit_transpose(Cg *c, const LfNest *n, NestCtx *x, int i, int j, LLVMValueRef iub,
                        LLVMValueRef t0, LLVMValueRef t1, LLVMValueRef stream);

/* ---- outline.c ------------------------------------------------------------ */

/* An outlined function's context (outline.c): { [nb x ptr] buffer bases,
 * [nv x i64] symbol values, then the caller's extra values, { the ns
 * scalar parameters' values } }. */
typedef struct OutCtx {
  LLVMTypeRef t;
  int nb, nv, ns;
  int *sidx;  /* the scalars' buffers, in buffer order */
} OutCtx;

/* K.<what>I and its wrapper K.<what>I.body while they are built. */
typedef struct Outlined {
  LLVMValueRef impl, body;
  int nlead;  /* leading i64 arguments of both (a range, a GEMM block) */
  OutCtx cx;  /* the wrapper's context */
  LLVMValueRef sfn, *sbase, *senv, *sscalar; /* the kernel's state, restored on close */
  LLVMBasicBlockRef sentry, spos, start;
} Outlined;

OutCtx cpu_ctx_type(Cg *c, int nb, int nv);
/* In the kernel: an entry alloca of the context with every buffer base,
 * symbol value and scalar value stored; the caller stores the extras
 * (cpu_ctx_set). */
LLVMValueRef cpu_ctx_fill(Cg *c, const OutCtx *x);
/* Stores field i: buffer i when i < nb, else value i - nb (i < nb + nv). */
void cpu_ctx_set(Cg *c, const OutCtx *x, LLVMValueRef ctx, int i, LLVMValueRef v);
/* Loads every field (bases, values, scalars) into v[0 .. nb + nv + ns). */
void cpu_ctx_unpack(Cg *c, const OutCtx *x, LLVMValueRef ctx, LLVMValueRef *v);
/* The per-buffer scalar values (Cg.scalar) of unpacked scalars s[0 .. ns). */
LLVMValueRef *cpu_ctx_scalars(Cg *c, const OutCtx *x, LLVMValueRef *s);
/* Creates K.<what>I(i64 x nlead, ptr noalias x nbufs, i64 x nv,
 * scalars) and positions the builder in it with c->base, c->env and
 * c->scalar bound to its arguments (nv counts the symbols first). */
void cpu_outline_open(Cg *c, Outlined *o, const char *what, int nlead, int nv);
/* Argument of value i (0: the first symbol). */
LLVMValueRef cpu_outline_value(const Outlined *o, int i);
/* Ends K.<what>I, builds its wrapper (unpacking the context into its
 * arguments) and restores the kernel's state. */
void cpu_outline_close(Cg *c, Outlined *o);

/* ---- parallel.c ----------------------------------------------------------- */

/* In the kernel: the context of an outlined function of n, its extras
 * n's output strides (0 for static ones). */
LLVMValueRef cpu_fill_nest_ctx(Cg *c, const LfNest *n, const OutCtx *cx);
void cpu_emit_nest_parallel(Cg *c, const LfNest *n);
/* index_check.c: a check nest (loops.h), in the kernel function. */
void cpu_emit_index_check(Cg *c, const LfNest *n);
void cpu_emit_group_parallel(Cg *c, const LfNest *g);

/* ---- gemm_nest.c ---------------------------------------------------------- */

/* At the kernel's entry: each GEMM nest's packing memory. */
void cpu_setup_gemm_pools(Cg *c);
void cpu_emit_gemm_nest(Cg *c, const LfNest *n);

/* ---- isa.c ---------------------------------------------------------------- */

/* Whether target is the multi-variant x86-64 (one variant per level). */
bool cpu_isa_multi(const char *target);
/* The ISA --target names: host, x86-64-v2/-v3/-v4, or x86-64's baseline
 * (level 1: a multi-variant object's dispatchers and K_info). */
const CgIsa *cpu_isa_of_target(const char *target);
/* The products a kernel has that an extension variant would compute with
 * other instructions: int8/i16 operands into i32 (VNNI), bf16 into f32
 * (AVX512-BF16); matmul and conv2d, not depthwise; operands as the GEMM
 * reads them (a widening cast of a tensor read narrow). */
#define CPU_USES_INT_DOT 1u
#define CPU_USES_BF16_DOT 2u
unsigned cpu_isa_use(const IrKernel *k, IrRef r);
unsigned cpu_isa_uses(const IrKernel *k);
/* The most variants an object carries: v2, v3, v3+avxvnni, v4, and v4
 * with avx512vnni, avx512bf16 or both. */
#define CPU_ISA_MAX_VARIANTS 7
/* The variants an object of target carries (v[0..n), in the order the
 * resolvers try them): one, or for x86-64 v2, v3, v4 and the extension
 * variants some kernel's products use.  kmask[i] (m->nkernels entries):
 * bit j set when kernel i carries v[j]. */
int cpu_isa_variants(const char *target, const IrModule *m, const CgIsa **v, unsigned *kmask);
/* After a variant's kernels are emitted (c->isa its ISA): every function
 * defined since the previous call gets the variant's target-cpu and
 * target-features and its suffix ("K" becomes internal "K__v3"; split:
 * K's entry points are in another module, so hidden "K__v3"). */
void cpu_isa_seal_variant(Cg *c, bool split);
/* After every variant: K_isa() and, with several variants, the public K
 * that resolves the variant at its first call and calls it. */
void cpu_isa_emit_entry(Cg *c, const IrKernel *k, const CgIsa *const *v, int nv);

/* ---- split.c -------------------------------------------------------------- */

/* One part of a split module: its pipeline (light: every function in it
 * marked cpu_mark_light) and its estimated compile cost (instructions,
 * a light one weighing less, a cold entry without loops less still),
 * for ordering the parts on threads. */
typedef struct CpuPart {
  bool light;
  long cost;
} CpuPart;

/* Splits mod's functions into parts (kernel: the name that makes the
 * hidden globals it creates unique): functions joined by direct calls or
 * a writable global stay together; a group whose functions are all light
 * and one that is not never share a part; each of the two is split into
 * up to nparts parts when mod has at least min_insts instructions, else
 * kept whole.  Returns the number of parts (>= 2) with *owner (malloc'd:
 * each defined function's part, in module order), *bc (the module as
 * bitcode, after the renaming) and parts[] (room for 2 * nparts), or 0
 * when it does not split (parts[0] then says whether mod is light). */
/* Marks fn as finished vector code (the GEMM's helpers): at -O1 and above
 * it goes through the light pipeline (machine.c) instead of the full one,
 * in a part of its own. */
void cpu_mark_light(LLVMValueRef fn);
void cpu_mark_full(LLVMValueRef fn); /* undoes cpu_mark_light */
bool cpu_is_light(LLVMValueRef fn);
/* Marks fn as code that runs once per call (a kernel's entry: checks,
 * shapes, scratch, calls): at -O1 and above, after the pass pipeline, it
 * is generated at LLVM's lowest code generation level when it has no
 * loop (machine.c cold_codegen). */
void cpu_mark_cold(LLVMValueRef fn);
bool cpu_is_cold(LLVMValueRef fn);
/* Whether fn is marked cold and has no loop: what machine.c's
 * cold_codegen generates at LLVM's lowest level after the pass pipeline
 * (cpu_split_module weighs such a function's instructions less). */
bool cpu_is_cold_acyclic(LLVMValueRef fn);
int cpu_split_module(LLVMModuleRef mod, const char *kernel, int nparts, int min_insts,
                     int **owner, LLVMMemoryBufferRef *bc, CpuPart *parts);
/* Part `part` of a split module, read into ctx (any thread); it refers
 * to bc, which must outlive it. */
LLVMModuleRef cpu_split_part(LLVMContextRef ctx, LLVMMemoryBufferRef bc, const int *owner,
                             int part);

/* ---- machine.c ------------------------------------------------------------ */

/* Verifies, optimizes and writes the module; returns cg_emit's status. */
int cpu_optimize_and_write(LLVMModuleRef mod, const CgOptions *o);
/* The same for a module split into n parts (cpu_split_module): each part
 * optimized with its pipeline, then linked back into one module (what
 * the split made hidden is private again) and written. */
int cpu_optimize_parts_and_write(LLVMMemoryBufferRef bc, const int *owner, const CpuPart *parts,
                                 int n, const CgOptions *o);
/* LLVM's native target, initialized once (before threads start), and
 * $TDSL_LLVM_PASSES checked: one that LLVM cannot parse exits 2. */
void cpu_init_llvm(void);
/* Verifies and optimizes mod (light: with the light pipeline) and emits
 * its object into *obj; prints no phase times but adds the calling
 * thread's CPU milliseconds spent in the pass pipeline and in code
 * generation to ms[0] and ms[1].  Safe on several threads at once, each
 * module in its own LLVMContext.  Returns 0 or 2 (no target). */
int cpu_compile_to_memory(LLVMModuleRef mod, const CgOptions *o, bool light,
                          LLVMMemoryBufferRef *obj, double ms[2]);
/* The calling thread's CPU time in milliseconds. */
double cpu_thread_ms(void);

#endif
