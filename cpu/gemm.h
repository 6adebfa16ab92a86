/* gemm.h — tiled, packed GEMM emitted into a kernel's LLVM module: the
 * CPU code of MATMUL and CONV2D (implicit GEMM), called by gemm_nest.c for the
 * nests whose `reduce` is OP_MATMUL or OP_CONV2D (loops/loops.h).
 *
 * The caller describes each tensor at run time (GemmTensor: element 0 of
 * its storage, offset, shape and strides in elements as i64 values) and
 * the builder's position; the emitted code packs operand panels into
 * scratch (any strides, dtype converted to the compute type), runs a
 * register-blocked micro-kernel and writes the output through its strides,
 * in parallel over row blocks (tdsl_parallel_for); a matmul with at most
 * 32 rows of A or columns of B streams the other operand unpacked
 * instead (gemm_small.c), split over its long dim.  Accumulation: f32 for
 * f32/f16/bf16, f64 for f64, i32 (wrapping) for integer outputs of at most
 * 32 bits, i64 (wrapping) for i64: PyTorch's results, which wrap in the
 * output's width (sums mod 2^32 agree mod 2^8 and 2^16).  With GemmEmit.isa's
 * features, 8/16-bit integer and bf16 matmuls use pairwise dot products
 * (gemm_lowp.c).
 *
 * Needs: llvm-c (LLVM 19), dtype.h, the runtime's tdsl_alloc, tdsl_free,
 * tdsl_parallel_for, tdsl_get_num_threads, tdsl_cpu_cache_bytes.  Produces: IR at the builder's position, which it
 * leaves at the end of the emitted code. */
#ifndef TDSL_GEMM_H
#define TDSL_GEMM_H

#include <stdbool.h>

#include <llvm-c/Core.h>

#include "../ir/dtype.h"
#include "../loops/loops.h"

typedef struct GemmTensor {
  LLVMValueRef base;   /* ptr: element 0 of the storage */
  LLVMValueRef offset; /* i64, elements */
  LLVMValueRef shape[TDSL_MAX_RANK], stride[TDSL_MAX_RANK]; /* i64 */
  int rank;
  DType dtype;
} GemmTensor;

/* Prologues: an operand computed by an elementwise expression is not
 * read from memory; its pack function evaluates the expression per
 * element instead (loops.h LfNest.pro).  The logical position of the
 * element being packed, as i64 values: bt as for the epilogue hook; a
 * matmul operand's row `i` and column `j` within the batch item; a conv
 * input's channel within the group `ci` and coordinates `y`, `x` (always
 * inside the input: the packer substitutes 0 for padding itself); a conv
 * weight's output channel within the group `i` and (ci, ky, kx). */
typedef struct GemmIdx {
  LLVMValueRef bt, i, j, ci, y, x, ky, kx;
} GemmIdx;

typedef struct GemmPrologue {
  /* Called once at the start of each pack function that uses the
   * prologue, with gemm.c's builder positioned in it and `arg` (the
   * pointer below, read back from the run-time context): loads what the
   * expression needs (buffers, symbols).  `elem` then emits, at the
   * builder's position, the element at *ix converted to compute dtype cd
   * (F32, F64, I32 or I64); `end` closes the pack function's use. */
  void (*begin)(void *user, LLVMBuilderRef b, LLVMValueRef fn, LLVMValueRef arg);
  LLVMValueRef (*elem)(void *user, const GemmIdx *ix, DType cd);
  /* NULL, or (a matmul's A in f32 whose expression reads memory only
   * contiguously or not at all along K) the elements at row ix->i,
   * columns ix->j + lane for the lanes of the <n x i1> mask as an
   * <n x float> vector (lanes off the mask: any value, nothing read
   * there); the same operations and math-layer functions as elem. */
  LLVMValueRef (*row)(void *user, const GemmIdx *ix, LLVMValueRef mask);
  void (*end)(void *user);
  void *user;
  LLVMValueRef arg; /* ptr, in the kernel: the caller's data for begin */
} GemmPrologue;

typedef struct GemmEmit {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;  /* positioned inside fn */
  LLVMValueRef fn;   /* the kernel function being emitted */
  int vec_bits;      /* cg_gemm_vec_bits() */
  unsigned isa;      /* GEMM_ISA_* of the code being emitted (cg_gemm_isa_features) */
  const LfTarget *params; /* blocking sizes (loops.h lf_target_params) */
  /* Epilogue hook, or NULL: the emitted code calls
   *   void epi_fn(ptr epi_arg, i64 bt, i64 i0, i64 i1, i64 j0, i64 j1)
   * from the parallel bodies once rows [i0, i1) x columns [j0, j1) of C
   * for batch item bt are final (after their last K block, while they
   * are in cache); calls cover disjoint blocks, possibly concurrently.
   * bt: matmul: the row-major index over out's batch dims; conv2d:
   * image * groups + group (C's rows and columns are then within the
   * group, as in cg_emit_conv2d's orientation). */
  LLVMValueRef epi_fn, epi_arg;
  /* The GEMM's packing memory (cg_*_pool_bytes), allocated by the caller
   * before the kernel computes anything: a GEMM then cannot fail midway
   * and leave outputs half written (spec §7.2). */
  LLVMValueRef pool;
  /* Per IR operand (0: a / x, 1: b / w): its prologue, or NULL (the
   * operand is read from memory).  With one, the GEMM's helper functions
   * are the kernel's own (emitted afresh, not shared per configuration),
   * and the operand's GemmTensor needs only its shape and dtype. */
  const GemmPrologue *pro[2];
} GemmEmit;

/* Widest vector register of the target in bits (128, 256 or 512): its
 * ISA's (cpu/isa.c; for x86-64, the baseline's).  Emission takes each
 * variant's from Cg.isa. */
int cg_gemm_vec_bits(const char *target);

/* Instruction-set features the GEMM uses beyond the vector width
 * (GemmEmit.isa).  They describe the code being emitted, so a module
 * compiled for a feature runs only where the CPU has it: the target
 * machine (or the function's target-features) must have them too. */
enum {
  GEMM_ISA_X86 = 1,         /* x86-64 (SSE2 vpmaddwd) */
  GEMM_ISA_F16C = 2,        /* vcvtph2ps */
  GEMM_ISA_AVX512BW = 4,    /* 512-bit vpmaddwd */
  GEMM_ISA_VNNI = 8,        /* AVX512-VNNI: vpdpwssd zmm (ymm with AVX512VL) */
  GEMM_ISA_AVXVNNI = 16,    /* AVX-VNNI: {vex} vpdpwssd ymm */
  GEMM_ISA_BF16 = 32,       /* AVX512-BF16: vdpbf16ps zmm */
};
/* The features of an LLVM feature string ("+avx2,+f16c,...": CgIsa.features
 * of the variant being emitted, llvm_util.h), gemm_lowp.c. */
unsigned cg_gemm_isa_features(const char *features);

/* Bytes of packing memory the matmul / conv2d with these operands needs,
 * as an i64 computed at the builder's position (the kernel's entry, where
 * every operand's shape is known).  The caller allocates them 64-byte
 * aligned, stores *threads (an i64, the thread count they were sized
 * for) in the first 8 bytes and passes the block as GemmEmit.pool. */
LLVMValueRef cg_matmul_pool_bytes(const GemmEmit *e, const GemmTensor *a, const GemmTensor *b,
                                  const GemmTensor *out, LLVMValueRef *threads);
LLVMValueRef cg_conv2d_pool_bytes(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                  const GemmTensor *out, LLVMValueRef attr[7],
                                  bool channels_last, LLVMValueRef *threads);

/* out[B..., M, N] = a[B..., M, K] @ b[B..., K, N] (equal ranks >= 2, equal
 * batch shapes), packing in e->pool.  Returns an i32: 0, or TDSL_E_NOMEM
 * only if the thread count changed since the pool was sized and a work
 * item could not allocate its own panel. */
LLVMValueRef cg_emit_matmul(const GemmEmit *e, const GemmTensor *a,
                            const GemmTensor *b, const GemmTensor *out);

/* out = conv2d(x, w, bias) (bias NULL when absent); x and out of rank 3
 * or 4 ([N,] C, H, W), w [O, C/groups, KH, KW]; attr: stride h,w,
 * padding h,w, dilation h,w, groups (i64 values).  The output's pixels
 * must be dense within a channel plane (stride h == OW * stride w), as for
 * every fresh value; channels_last: the output's channel stride is 1,
 * which picks the GEMM orientation.  Returns an i32 as cg_emit_matmul. */
LLVMValueRef cg_emit_conv2d(const GemmEmit *e, const GemmTensor *x,
                            const GemmTensor *w, const GemmTensor *bias,
                            const GemmTensor *out, LLVMValueRef attr[7],
                            bool channels_last);

/* Marks fn as finished vector code for the light pipeline (split.c,
 * machine.c; cpu.h declares it too): every helper function the GEMM
 * emits. */
void cpu_mark_light(LLVMValueRef fn);
/* Undoes cpu_mark_light: fn goes through the full pipeline (a prologue's
 * scalar packing loop). */
void cpu_mark_full(LLVMValueRef fn);

/* The compute dtype of a product with output dtype od (F32, F64, I32 or
 * I64; gemm_lowp.c). */
DType gemm_lowp_compute_dtype(DType od);

/* An operand dtype whose products with another such sum into i32 in
 * pairs or quads (vpmaddwd, VNNI): i8, u8, i16 (gemm_lowp.c, conv_lowp.c,
 * and isa.c's extension variants). */
static inline bool gemm_int_dot_dtype(DType t) { return t == DT_I8 || t == DT_U8 || t == DT_I16; }

#endif
