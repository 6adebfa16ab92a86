/* llvm_util.h — private to the code generators (codegen/, cpu/): the
 * per-kernel emission state `Cg` and the helpers every LLVM-based backend
 * shares, grouped by the file that defines them:
 *   llvm_util.c  constants, calls, blocks, storage/compute types and casts,
 *                symbolic integers, plain loops;
 *   expr.c       scalar expressions of the loop form (loads, stores, ops);
 *   entry.c      the host entry: DLTensor checks, symbol binding, the
 *                shape query, buffers and scratch, K_info;
 *   codegen.c    output files and phase times.
 * Values are computed in a "compute type": bool as i8 holding 0/1,
 * integers in their width, f16/bf16/f32 in float, f64 in double; half
 * types are rounded (fptrunc, nearest even) when stored or cast.
 * Needs: loops/loops.h, codegen.h, llvm-c (LLVM 19). */
#ifndef TDSL_CODEGEN_LLVM_UTIL_H
#define TDSL_CODEGEN_LLVM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <llvm-c/Core.h>

#include "codegen.h"
#include "llvm_attr.h"
#include "../loops/loops.h"

#define MAXL (2 * TDSL_MAX_RANK)
/* The runtime's error codes (<tdsl/runtime.h>), for generated code. */
#define E_INDEX (-17)
#define E_ISA (-18)
#define E_NOMEM (-15)
#define E_CHECK (-12)
#define E_OVERFLOW (-7)
/* DLPack device types (dlpack.h DLDeviceType) a backend's entry checks. */
#define DL_CPU 1
#define DL_CUDA 2

typedef struct Loop {
  LLVMBasicBlockRef pre, header, exit;
  LLVMValueRef iv;
} Loop;

/* The instruction set a CPU function is emitted for (cpu/isa.c): one per
 * variant of a --target=x86-64 object, else the target's.  Code that
 * depends on the ISA asks Cg.isa (cg_isa_has(c->isa, "avx512bf16"),
 * c->isa->vec_bits), never the host: the host is not the machine the code
 * runs on. */
typedef struct CgIsa {
  const char *name;     /* "x86-64-v3"; for --target=host the host CPU
                           ("znver3") */
  const char *cpu;      /* LLVM's target-cpu */
  const char *features; /* LLVM's target-features, every one named:
                           "+sse4.2,+avx2,+fma,..." ("-avx512f" may appear) */
  int level;            /* x86-64 psABI level it meets: 1-4 */
  int vec_bits;         /* widest vector registers: 128, 256 or 512 */
  const char *suffix;   /* a variant of a multi-variant object: "__v3",
                           appended to its functions' names; else "" */
  unsigned ext;         /* a variant's extensions the CPU must have too
                           (CG_ISA_*); 0 for a level's own */
} CgIsa;
/* The runtime's extension bits (<tdsl/runtime.h> TDSL_ISA_*), for the
 * dispatchers of --target=x86-64 objects (cpu/isa.c). */
#define CG_ISA_AVX512_VNNI 1u
#define CG_ISA_AVX512_BF16 2u
#define CG_ISA_AVX_VNNI 4u

/* Whether isa has LLVM's feature f ("avx2", "avx512bf16", "amx-tile"). */
static inline bool cg_isa_has(const CgIsa *isa, const char *f) {
  size_t n = strlen(f);
  for (const char *p = isa ? isa->features : ""; (p = strstr(p, f)); p += n)
    if (p > isa->features && p[-1] == '+' && (p[n] == ',' || p[n] == '\0')) return true;
  return false;
}

struct NestCtx;

/* One module's emission state; the function fields describe the kernel
 * (or outlined function) being emitted. */
typedef struct Cg {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, ptr, vd;
  IrModule *m;
  const IrKernel *k;
  const LfKernel *lk;
  LLVMValueRef fn, kname;
  LLVMBasicBlockRef entry, fail;
  LLVMValueRef rcphi;
  LLVMValueRef *args;    /* function parameters */
  LLVMValueRef envp, boundp;
  LLVMValueRef *env;     /* symbol values (SSA) once all are bound */
  LLVMValueRef *base;    /* per buffer: element 0 (NULL for scalars) */
  LLVMValueRef *scalar;  /* per buffer: an LFB_SCALAR's value, in the
                            compute type (bool as 0/1), an SSA value of
                            the function being emitted; NULL for others */
  LLVMValueRef *slot;    /* per scratch buffer: alloca of its pointer */
  LLVMValueRef *gpool;   /* per nest: alloca of its GEMM's packing memory */
  Loop loops[MAXL];
  int nloops;
  int dl_device;         /* DLPack device type the entry checks expect */
  const LfTarget *target; /* the backend's scheduling parameters (loops.h) */
  const CgIsa *isa;      /* the ISA of the functions being emitted (CPU) */
  int vec_bits;          /* gemm.c: the ISA's vector width (isa->vec_bits) */
  int opt;               /* -O level: >= 1 runs nests in parallel */
  int nfns;              /* outlined nest functions so far */
  bool layer_trig;       /* sin, cos, tan through the math layer (targets
                            without libm: CUDA); else llvm.sin etc. */
  bool own_frem;         /* fmod by expr.c's exact loop (frem is not
                            libm's fmod: CUDA) */
  int cu_sm;             /* CUDA: the target's compute capability (80 for
                            sm_80; cuda/gemm.c's tensor cores); 0 elsewhere */
  /* Scratch memory (entry.c): NULL for the host's tdsl_alloc/tdsl_free;
   * a backend with its own memory (CUDA: stream-ordered device memory)
   * returns the block (NULL when it failed, the runtime's message set)
   * and frees it (p may be NULL). */
  LLVMValueRef (*scratch_alloc)(struct Cg *c, LLVMValueRef bytes);
  void (*scratch_free)(struct Cg *c, LLVMValueRef p);
  /* CUDA's kernel variants (cuda/variant.c): idx32: cg_address computes
   * element indices in 32 bits (the host checked that every index fits). */
  bool idx32;
  /* NULL, or asked first for every load cg_eval evaluates (not scalars'):
   * its value (compute type), or NULL for the ordinary load. CUDA's
   * vector variants load operands ahead as vectors (cuda/variant.c);
   * CUDA row groups keep a row's elements in registers (cuda/nest.c).
   * load_data is its state. */
  LLVMValueRef (*load_hook)(struct Cg *c, struct NestCtx *x, const struct LfExpr *e);
  void *load_data;
} Cg;

/* A nest's loop variables and bounds while its body is emitted. */
typedef struct NestCtx {
  const LfNest *n;
  LLVMValueRef acc; /* the reduced value, while evaluating n->post */
  LLVMValueRef iv[MAXL];
  LLVMValueRef ub[MAXL];
  LLVMValueRef rt_stride[TDSL_MAX_RANK]; /* output strides */
} NestCtx;

/* ---- small helpers ------------------------------------------------------ */

static inline LLVMValueRef ci(LLVMTypeRef t, long long v) {
  return LLVMConstInt(t, (unsigned long long)v, 1);
}
static inline LLVMValueRef i64c(Cg *c, long long v) { return ci(c->i64, v); }
static inline LLVMValueRef i32c(Cg *c, long long v) { return ci(c->i32, v); }
static inline LLVMValueRef str(Cg *c, const char *s) {
  return LLVMBuildGlobalStringPtr(c->b, s, ".str");
}
static inline LLVMValueRef call(Cg *c, LLVMValueRef f, LLVMValueRef *a, unsigned n) {
  return LLVMBuildCall2(c->b, LLVMGlobalGetValueType(f), f, a, n, "");
}
static inline LLVMBasicBlockRef block(Cg *c, const char *name) {
  return LLVMAppendBasicBlockInContext(c->ctx, c->fn, name);
}
static inline LLVMValueRef fconst(LLVMValueRef like, double v) {
  return LLVMConstReal(LLVMTypeOf(like), v);
}
static inline LLVMValueRef sel(Cg *c, LLVMValueRef cond, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(c->b, cond, a, b, "");
}
static inline LLVMValueRef fcmp(Cg *c, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFCmp(c->b, p, a, b, "");
}

/* ---- llvm_util.c ---------------------------------------------------------- */

void cg_init_types(Cg *c);
/* Declares (once) an external function. */
LLVMValueRef cg_fdecl(Cg *c, const char *name, LLVMTypeRef ret, LLVMTypeRef *ps, unsigned n,
                      int vararg);
/* Runtime check helper `int name(kernel, arg, t, extra...)`. */
LLVMValueRef cg_rt_check(Cg *c, const char *name, LLVMValueRef *a, unsigned n);
LLVMValueRef cg_intrinsic(Cg *c, const char *name, LLVMTypeRef *tys, size_t nty,
                          LLVMValueRef *a, unsigned n);
LLVMValueRef cg_unary_intr(Cg *c, const char *name, LLVMValueRef x);
/* An alloca in the entry block (promotable by mem2reg). */
LLVMValueRef cg_entry_alloca(Cg *c, LLVMTypeRef t, LLVMValueRef n);
/* Branches to the failure exit with rc when rc != 0. */
void cg_check_rc(Cg *c, LLVMValueRef rc);

LLVMTypeRef cg_storage_type(Cg *c, DType t);
LLVMTypeRef cg_compute_type(Cg *c, DType t);
bool cg_is_unsigned(DType t);
LLVMValueRef cg_bf16_to_f32v(Cg *c, LLVMValueRef bits);
LLVMValueRef cg_f32_to_bf16v(Cg *c, LLVMValueRef f);
LLVMValueRef cg_to_bool(Cg *c, LLVMValueRef v);
/* v (compute type of `from`) in the compute type of `to` (spec §5.4). */
LLVMValueRef cg_convert(Cg *c, LLVMValueRef v, DType from, DType to);

/* The scalar s in every one of `lanes` lanes. */
LLVMValueRef cg_splat(Cg *c, LLVMValueRef s, unsigned lanes);
/* min(a, b), or max when max (signed). */
LLVMValueRef cg_smin(Cg *c, LLVMValueRef a, LLVMValueRef b, bool max);
/* Python // (or % when mod) on signed integers; x // 0 gives 0. */
LLVMValueRef cg_py_divmod(Cg *c, LLVMValueRef a, LLVMValueRef b, bool mod);
/* A symbolic integer's i64 value at the builder's position. */
LLVMValueRef cg_sym_val(Cg *c, const Sym *s);
/* Its magnitude as a double (to refuse sizes whose i64 math wraps). */
LLVMValueRef cg_sym_mag(Cg *c, const Sym *s);

/* A loop over [0, n) / [lo, n); returns its variable.  Nested in c->loops. */
LLVMValueRef cg_open_loop(Cg *c, LLVMValueRef n);
LLVMValueRef cg_open_loop_from(Cg *c, LLVMValueRef lo, LLVMValueRef n);
void cg_close_loop(Cg *c);

/* ---- expr.c --------------------------------------------------------------- */

/* Address of a's element at the current loop variables; n: how many loop
 * variables a's strides cover (loads: all, stores: the outer ones). */
LLVMValueRef cg_address(Cg *c, NestCtx *x, const LfAccess *a, DType dt, int n);
LLVMValueRef cg_load_el(Cg *c, LLVMValueRef p, DType dt);
void cg_store_el(Cg *c, LLVMValueRef v, LLVMValueRef p, DType dt);
/* A loaded storage value of dt in its compute type (what cg_load_el
 * returns), and a compute-type value in dt's storage type (what
 * cg_store_el stores). */
LLVMValueRef cg_from_storage(Cg *c, LLVMValueRef v, DType dt);
LLVMValueRef cg_to_storage(Cg *c, LLVMValueRef v, DType dt);
/* A loop-form expression's value (compute type of e->dtype). */
LLVMValueRef cg_eval(Cg *c, NestCtx *x, const LfExpr *e);
/* How e evaluates as lanes of f32 along loop kd, for code that runs
 * cg_eval with a load hook giving vectors (a GEMM's A prologue, a long
 * sum's blocks, a short argmax row): 1 it moves along kd as a vector
 * (unit-stride f32 loads and operations on them that op_lanes accepts:
 * it is asked about an operation node with a moving operand and says
 * 1 or -1); 0 it does not move along kd (a scalar beside the vectors,
 * in every lane); -1 neither (the caller's scalar code). */
int cg_lane_kind(const Cg *c, const LfExpr *e, int kd, int (*op_lanes)(const LfExpr *e));

/* ---- entry.c -------------------------------------------------------------- */

/* data + byte_offset of DLTensor t. */
LLVMValueRef cg_dl_base(Cg *c, LLVMValueRef t);
/* device.device_id of DLTensor t (i32). */
LLVMValueRef cg_dl_device_id(Cg *c, LLVMValueRef t);
/* Starts kernel k's host function `i32 K(args...)` (spec §7.1): its
 * parameters (named), the entry block with the scratch slots (and, with
 * gemm_pools, a packing-memory slot per GEMM nest) and the symbol
 * arrays, the one failure exit (c->fail, c->rcphi) and c->kname; leaves
 * the builder in the block after the entry, where the checks go. */
void cg_begin_kernel(Cg *c, const IrKernel *k, const LfKernel *lk, bool gemm_pools);
/* Stride of dim d of DLTensor t: strides[d], or row-major when NULL. */
LLVMValueRef cg_dl_stride(Cg *c, LLVMValueRef t, int rank, int d);
/* Every entry check; leaves the builder where computing starts, after a
 * shape query has returned. */
void cg_emit_entry_checks(Cg *c);
/* The type a host entry takes scalar parameter t in: its storage type,
 * f16 and bf16 as their i16 bits. */
LLVMTypeRef cg_scalar_arg_type(Cg *c, DType t);
/* Scalar parameter a (cg_scalar_arg_type of t; bool any i8) as its value
 * in the compute type of t, as cg_load_el would load it. */
LLVMValueRef cg_scalar_value(Cg *c, LLVMValueRef a, DType t);
/* A constant table's data (LFB_CONST) as a private global in address
 * space addrspace (CUDA: 1, global memory), as a generic pointer. */
LLVMValueRef cg_const_tensor(Cg *c, const LfBuf *b, unsigned addrspace);
/* c->base of every buffer, c->scalar of every scalar (from the
 * arguments, by value: scalars have no memory); allocates scratch. */
void cg_setup_buffers(Cg *c);
/* c->base of scratch buffer i (allocated, or the block of its slot). */
void cg_setup_scratch(Cg *c, int i);
/* Frees scratch and GEMM packing memory. */
void cg_free_scratch(Cg *c);
/* K_info of k. */
void cg_emit_info(Cg *c, const IrKernel *k);

/* A loop ID (the self-referential node that "llvm.loop" metadata names)
 * with the n property nodes props ({!"llvm.loop.unroll.disable"}, ...). */
LLVMMetadataRef cg_loop_id(LLVMContextRef ctx, const LLVMMetadataRef *props, unsigned n);

/* ---- output.c ------------------------------------------------------------- */

/* The emit's path: o->path when set (one emit), else stem + ext.
 * Malloc'd. */
char *cg_out_path(const CgOptions *o, const char *ext);
/* Writes data to the emit's file (extension ext) or stdout; 0 or 1. */
int cg_write_file(const CgOptions *o, const char *ext, const char *data, size_t n);
/* --time-passes: prints the milliseconds since *t0 as phase `name` and
 * restarts the clock. */
void cg_phase_ms(const CgOptions *o, const char *name, double *t0);

#endif
