/* cuda.h — private to the CUDA backend (cuda/): every kernel K of a file
 * becomes device kernels in one NVPTX module (one per nest, named
 * K__nI), compiled to PTX, and a host function K in a host object that
 * embeds the PTX and launches them through the runtime
 * (<tdsl/runtime.h> tdsl_cuda_*).  Files:
 *   backend.c  the backend (backend.h cg_cuda_backend): the two modules,
 *              the NVPTX target machine, PTX and host object output;
 *   nest.c     device kernels of elementwise, reduction and scan nests,
 *              split reductions (partials and finish) and row groups;
 *   gemm.c     device kernels of matmul and conv2d nests (CUDA cores;
 *              f16/bf16 on tensor cores at sm_80+);
 *   host.c     the host function: entry checks (kDLCUDA), device,
 *              module and scratch preparation, launches;
 *   check.c    index checks: their device kernels and verdicts;
 *   variant.c  kernel variants chosen at launch (below).
 * Shared LLVM helpers, expressions, the math layer and the host entry
 * checks come from codegen/ (llvm_util.h).
 *
 * The parameters of every device kernel of K (host.c passes them, the
 * device kernels read them; cu_unpack):
 *   ptr   per buffer: its element 0 (NULL for constants and scalars);
 *   i64   per size/stride symbol: its value;
 *   i64   per result r and dim d: the output descriptor's stride;
 *   i64   per scalar buffer: the scalar's bits (zero-extended; the
 *         device kernel uses them as an SSA value, Cg.scalar, never
 *         through memory).
 *   ptr   only in a kernel with split reductions (cu_has_split): the
 *         partial results (CU_SPLIT_BYTES per output and block, device
 *         memory from tdsl_cuda_scratch);
 *   ptr   only in a kernel with index checks (check.c): the checks'
 *         flags (2 x i64 of device memory).
 * Needs: codegen/llvm_util.h, codegen/backend.h. */
#ifndef TDSL_CUDA_H
#define TDSL_CUDA_H

#include "../codegen/backend.h"
#include "../codegen/llvm_util.h"

/* Threads of a block (every kernel's blockDim.x, gemm: 16 x 16). */
#define CU_BLOCK 256
/* At most this many blocks (grid-stride loops cover the rest). */
#define CU_MAX_BLOCKS (1 << 20)
/* GEMM tiles (gemm.c): 128 x 128 outputs per block of 16 x 16 threads
 * when M and N give at least this many of them over the batch (about two
 * blocks per SM of an H100's 132), else 64 x 64. */
#define CU_GEMM_BIG_TILES 256

typedef enum CuKind { CU_ELEMWISE, CU_REDUCE, CU_GEMM } CuKind;

/* How a nest runs on the device (cu_plan, shared by host and device). */
typedef struct CuPlan {
  CuKind kind;
  int group; /* CU_REDUCE: threads per output (1, 32 or CU_BLOCK); outside
                 row groups, CU_BLOCK and reductions along columns are
                 split over several blocks (nest.c "Split reductions") */
} CuPlan;

CuPlan cu_plan(const LfNest *n);

/* The parameter list of K's device kernels (types into ps, count
 * returned; ps has room for cu_nparams). */
int cu_nparams(const IrKernel *k, const LfKernel *lk);
int cu_param_types(Cg *c, LLVMTypeRef *ps);

/* Device side: in kernel fn (builder at its entry), reads the
 * parameters: c->base, c->env, c->scalar (the scalars' values) and rts
 * (per result: its strides). */
void cu_unpack(Cg *c, LLVMValueRef fn, LLVMValueRef **rts);
/* A special register (tid.x, ntid.x, ctaid.x, nctaid.x, ...), i32. */
LLVMValueRef cu_sreg(Cg *c, const char *name);
/* __syncthreads(). */
void cu_barrier(Cg *c);
/* A __shared__ array of n elements of t. */
LLVMValueRef cu_shared(Cg *c, LLVMTypeRef t, int n, const char *name);
/* Marks fn as a kernel entry (nvvm.annotations). */
void cu_mark_kernel(Cg *c, LLVMValueRef fn);
/* A loop for (iv = start; iv < end; iv += step) (i64, step > 0). */
typedef struct CuLoop {
  LLVMBasicBlockRef header, exit;
  LLVMValueRef iv, step;
} CuLoop;
LLVMValueRef cu_loop_open(Cg *c, CuLoop *l, LLVMValueRef start, LLVMValueRef end,
                          LLVMValueRef step);
void cu_loop_close(Cg *c, CuLoop *l);
/* iv[0 .. n) from linear index i, row-major over extents ext (iv[0]
 * takes what is left, unreduced). */
void cu_split_rowmajor(Cg *c, LLVMValueRef i, const Sym *const *ext, int n, LLVMValueRef *iv);
/* The product of nest n's outer extents [from, to), i64. */
LLVMValueRef cu_outer_product(Cg *c, const LfNest *n, int from, int to);
/* The global thread index and the grid's thread count, i64. */
LLVMValueRef cu_global_tid(Cg *c);
LLVMValueRef cu_grid_threads(Cg *c);
/* Accumulator dtype of a reduction of `in` (F64, F32, I64). */
DType cu_acc_dtype(DType in);

/* nest.c: the device kernel of an elementwise or reduction nest. */
void cu_emit_nest_kernel(Cg *c, const LfNest *n, LLVMValueRef fn);
/* nest.c: whether elementwise nest n runs as transposing 32 x 32 tiles
 * (a block per tile, grid-stride; the host sizes its grid by tiles). */
bool cu_transposes(SymTab *st, const LfNest *n, const LfTarget *t);
/* nest.c: the one kernel of a row group (first: its first nest). */
void cu_emit_group_kernel(Cg *c, const LfNest *first, LLVMValueRef fn);
/* nest.c: the grid of that kernel (host or device, from c->env): a
 * block per row, or per 8 rows where a warp takes a row; i64. */
LLVMValueRef cu_group_blocks(Cg *c, const LfNest *first);
/* Launch units: nest i starts one (its kernel runs nests i .. i + size
 * - 1: a row group at -O1+, else the nest alone) when cu_unit returns
 * size > 0; nests inside a group return 0. */
int cu_unit(const LfKernel *lk, int i, int opt);
/* gemm.c: the device kernel of a matmul or conv2d nest. */
void cu_emit_gemm_kernel(Cg *c, const LfNest *n, LLVMValueRef fn);
/* gemm.c: M, N, K and the batch count of gemm nest n (host or device,
 * from c->env). */
void cu_gemm_dims(Cg *c, const LfNest *n, LLVMValueRef *M, LLVMValueRef *N, LLVMValueRef *K,
                  LLVMValueRef *batch);
/* gemm.c: the grid (blocks in x, y, z, i64) of gemm nest n for the tile
 * shape its kernel picks from the sizes; returns the outputs (M N batch). */
LLVMValueRef cu_gemm_grid(Cg *c, const LfNest *n, LLVMValueRef *g);

/* check.c: index checks (loops.h "Indexing by tensors").  Whether lk
 * has check nests (then every device kernel takes the flags pointer as
 * its last parameter); a check nest's device kernel; in the host
 * function, a check nest's launch (through `launch`) and its verdict:
 * TDSL_E_INDEX with the CPU's message when an index is out of range. */
bool cu_has_checks(const LfKernel *lk);
void cu_emit_check_kernel(Cg *c, const LfNest *n, LLVMValueRef fn);
void cu_emit_host_check(Cg *c, const LfNest *n, LLVMValueRef flags,
                        void (*launch)(Cg *c, const LfNest *n, LLVMValueRef fn, LLVMValueRef args),
                        LLVMValueRef fn, LLVMValueRef args);

/* Split reductions (nest.c): at most CU_SPLIT_BLOCKS blocks over all
 * the outputs of a nest, each partial result CU_SPLIT_BYTES of scratch
 * (the accumulator at 0, the position at 8). */
#define CU_SPLIT_BLOCKS 512
#define CU_SPLIT_BYTES 16
/* Fewer outputs than this are split (a constant count: cu_plan's group
 * CU_BLOCK; a symbolic one: decided at run time, cu_split_used). */
#define CU_SPLIT_FEW 2048
/* Whether lk has a split reduction (its kernels take the partials). */
bool cu_has_split(const LfKernel *lk);
/* Device kernels of nest i's launch unit: 2 for a split reduction (the
 * partial kernel K__nI and the finish kernel K__nI_fin), else 1; 0
 * inside a row group. */
int cu_unit_funcs(const LfKernel *lk, int i, int opt);
/* Split reduction n: its blocks per output S, i64 (host or device,
 * from c->env; the same on both, so the finish kernel knows it), and
 * its output groups (the partial kernel's grid is (S, groups)). */
LLVMValueRef cu_split_count(Cg *c, const LfNest *n);
LLVMValueRef cu_split_groups(Cg *c, const LfNest *n);
/* Whether split reduction n runs split (i1): true, except for a symbolic
 * output count of at least CU_SPLIT_FEW (then a warp per output). */
LLVMValueRef cu_split_used(Cg *c, const LfNest *n);
/* The finish kernel of split reduction n: a block per output combines
 * the S partials in a fixed order and stores. */
void cu_emit_split_finish_kernel(Cg *c, const LfNest *n, LLVMValueRef fn);
/* ---- variants (variant.c) ---------------------------------------------------
 * A launch unit may have several device kernels computing the same
 * result: variants specialized for what only the actual arguments tell
 * (sizes that fit 32 bits, aligned pointers and strides, a tile loop's
 * extent).  cu_variants lists a unit's variants, the most specialized
 * first; the last is always the general kernel (CU_FORM_DEFAULT, named
 * K__nI, no condition), the others are named K__nI_<tag>, and the
 * module holds them in that order (cu_nfuncs counts them).  At each
 * launch the host function evaluates the variants' conditions in order
 * (cu_variant_ok, on the entry's values) and launches the first that
 * holds (cu_emit_host_variants); the general kernel catches the rest.
 * A new kind of variant needs: an entry in cu_variants, its condition in
 * cu_variant_ok, its device kernel in cu_emit_variant_kernel and its
 * grid in host.c's launch.  The list depends on the nest, the -O level
 * and the target only, so device and host agree. */
typedef enum CuForm {
  CU_FORM_DEFAULT, /* the unit's general kernel (cu_emit_nest_kernel and the others) */
  CU_FORM_PLAIN,   /* elementwise, untiled: a thread per `vec` elements, grid-stride */
  CU_FORM_TILE     /* elementwise, transposing tiles (nest.c) */
} CuForm;
typedef struct CuVariant {
  CuForm form;
  int vec;      /* elements per thread and step, as one vector access (1: scalar) */
  bool i32;     /* 32-bit index arithmetic (Cg.idx32) */
  char tag[12]; /* the name's suffix ("" for the general kernel) */
} CuVariant;
#define CU_MAX_VARIANTS 4
/* Unit i's variants into v (room for CU_MAX_VARIANTS); returns how many
 * (>= 1). */
int cu_variants(SymTab *st, const LfKernel *lk, int i, int opt, const LfTarget *t, CuVariant *v);
/* Device: variant v's kernel of nest n (not the general one). */
void cu_emit_variant_kernel(Cg *c, const LfNest *n, const CuVariant *v, LLVMValueRef fn);
/* Host: whether v may run nest n with the entry's arguments (i1). */
LLVMValueRef cu_variant_ok(Cg *c, const LfNest *n, const CuVariant *v);
/* Host: launches the first of the nv variants whose condition holds; the
 * kernel of v[i] is fns[f0 + i]. */
void cu_emit_host_variants(Cg *c, const LfNest *n, const CuVariant *v, int nv, LLVMValueRef fns,
                           int f0, void (*launch)(Cg *c, const LfNest *n, const CuVariant *v,
                                                  LLVMValueRef fn, LLVMValueRef args),
                           LLVMValueRef args);

/* host.c: the host function K; module: the tdsl_cuda_module global,
 * fn0: the index of K's first device kernel in it. */
void cu_emit_host_kernel(Cg *c, LLVMValueRef module, int nfuncs, int fn0);

#endif
