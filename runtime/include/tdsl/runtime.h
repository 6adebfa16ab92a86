/* tdsl/runtime.h — public interface of libtdsl_runtime (spec §7).
 *
 * Needs: <dlpack/dlpack.h> (DLPack 0.6 or newer); links against libc,
 * libm, pthreads and dlopen only.
 * Provides: error codes and the thread-local error message, the CPU thread
 * pool, aligned host allocation, tensor helpers for applications, the
 * kernel description returned by K_info(), the entry-check helpers that
 * generated kernels call before touching any data (§7.4), and the CUDA
 * driver layer: devices, streams, device memory, module loading and
 * launches (§7.3).
 *
 * Every function is thread-safe. Runtime functions never print and never
 * exit: they return a code and leave a message for tdsl_last_error(). */
#ifndef TDSL_RUNTIME_H
#define TDSL_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

/* DLPack added kDLBool (code 6) in 0.8 as an enumerator of DLDataTypeCode.
 * Older headers (Debian ships 0.6, DLPACK_VERSION 60) lack it. DLPack 1.x
 * replaced DLPACK_VERSION by DLPACK_MAJOR_VERSION and always has it. */
#if !defined(DLPACK_MAJOR_VERSION) &&                                     \
    (!defined(DLPACK_VERSION) || DLPACK_VERSION < 80)
#define kDLBool 6
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TDSL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TDSL_PRINTF(f, a)
#endif

/* ---- Errors (error.c) ------------------------------------------------ */

/* One code per entry check of spec §7.4, plus runtime failures. */
#define TDSL_OK 0
#define TDSL_E_NULL (-1)      /* NULL descriptor, shape or data */
#define TDSL_E_RANK (-2)      /* ndim differs from the declared rank */
#define TDSL_E_DTYPE (-3)     /* code, bits or lanes != 1 differ */
#define TDSL_E_DEVICE (-4)    /* device_type differs from the target's */
#define TDSL_E_SHAPE (-5)     /* a static dim differs, or a dim < 0 */
#define TDSL_E_SYMBOL (-6)    /* a size symbol seen with two values */
#define TDSL_E_OVERFLOW (-7)  /* bytes addressed do not fit in int64 */
#define TDSL_E_LAYOUT (-8)    /* strides contradict the declared layout */
#define TDSL_E_ALIGN (-9)     /* data + byte_offset misaligned */
#define TDSL_E_OVERLAP (-10)  /* an output overlaps an input or output */
#define TDSL_E_SCALAR (-11)   /* a scalar is NaN where a size is expected */
#define TDSL_E_CHECK (-12)    /* a run-time condition PyTorch checks */
#define TDSL_E_NO_DEVICE (-13) /* no GPU / no driver on this machine */
#define TDSL_E_CUDA (-14)     /* the CUDA driver reported an error */
#define TDSL_E_NOMEM (-15)    /* an allocation failed */
#define TDSL_E_INVALID (-16)  /* bad argument to a runtime function */
#define TDSL_E_INDEX (-17)    /* an index tensor's element is out of range */
#define TDSL_E_ISA (-18)      /* no variant of a --target=x86-64 kernel runs
                                 here: the CPU lacks x86-64-v2, or $TDSL_ISA
                                 is bad or names a level the CPU lacks */

/* The code's name ("TDSL_E_RANK"); "TDSL_E_UNKNOWN" for other values. */
const char *tdsl_strerror(int code);
/* Message of the last failure on the calling thread; "" when none. The
 * pointer stays valid until the thread's next runtime call that fails. */
const char *tdsl_last_error(void);
/* Code of the last failure on the calling thread; TDSL_OK when none. */
int tdsl_last_error_code(void);
void tdsl_clear_error(void);
/* Records code and a printf-style message for this thread; returns code.
 * For generated code (TDSL_E_CHECK and friends). */
int tdsl_set_error(int code, const char *fmt, ...) TDSL_PRINTF(2, 3);

/* ---- ISA levels (isa.c) ---------------------------------------------- */

/* The highest x86-64 psABI level (1-4: x86-64, -v2, -v3, -v4) whose every
 * feature this CPU has and the OS enables (AVX and AVX-512 register
 * state through XGETBV); 0 on other architectures. */
int tdsl_cpu_level(void);
/* The dot-product extensions a --target=x86-64 object has variants for
 * (a kernel carries them where its products use them), as bits. */
#define TDSL_ISA_AVX512_VNNI 1u /* on x86-64-v4: vpdpbusd, vpdpwssd */
#define TDSL_ISA_AVX512_BF16 2u /* on x86-64-v4: vdpbf16ps */
#define TDSL_ISA_AVX_VNNI 4u    /* on x86-64-v3: the VEX vpdpbusd, vpdpwssd */
/* The extensions this CPU has whose level (above) it has too. */
unsigned tdsl_cpu_extensions(void);
/* The level the kernels of a --target=x86-64 object run at (each takes
 * its highest variant at or below it, at its first call): the CPU's, or
 * lower when $TDSL_ISA names one ("v2", "v3", "v4" or "x86-64-v2" ...).
 * TDSL_E_ISA with a message when $TDSL_ISA is refused (not a level, a
 * level the CPU lacks, or an extension as tdsl_isa_extensions refuses
 * it: never silently ignored), or the CPU lacks x86-64-v2. */
int tdsl_isa_level(void);
/* The extensions those kernels may use (a variant needing more is passed
 * over): the CPU's, or those $TDSL_ISA names after its level
 * ("v4+avx512vnni", "x86-64-v4+avx512bf16+avx512vnni", "v3+avxvnni"; a
 * level alone names none).  TDSL_E_ISA as tdsl_isa_level, and also for an
 * unknown extension, one above the level, or one the CPU lacks. */
int tdsl_isa_extensions(void);

/* ---- Thread pool (threadpool.c) -------------------------------------- */

/* n <= 0 restores the default: $TDSL_NUM_THREADS when it is a positive
 * integer, else the number of online cores. Read at first use. */
void tdsl_set_num_threads(int n);
int tdsl_get_num_threads(void);

typedef void (*tdsl_body_fn)(void *ctx, int64_t begin, int64_t end);

/* Runs body over [0, n) split into contiguous chunks of at least grain
 * iterations (grain <= 0 means 1), using min(threads, n / grain) chunks
 * (at least one) whose bounds depend only on n, grain and the thread
 * count. The caller runs chunks too and returns when all are done. A call
 * made from inside a body runs body(ctx, 0, n) on the calling thread. */
void tdsl_parallel_for(int64_t n, int64_t grain, tdsl_body_fn body,
                       void *ctx);
/* Size in bytes of the CPU's level-1 data, level-2 or level-3 cache
 * (level 1, 2 or 3) as the OS reports it for CPU 0 (Linux sysfs,
 * /sys/devices/system/cpu/cpu0/cache, else sysconf), read once; 0 when unknown or for
 * another level. Generated GEMMs size their blocks from it (cache.c). */
int64_t tdsl_cpu_cache_bytes(int level);
/* Stops and joins the pool's workers (the next parallel call starts new
 * ones) and gives back the allocation cache's blocks. Call it before
 * dlclose() of a shared object that contains the runtime, and never from
 * inside a body. */
void tdsl_shutdown(void);

/* ---- Streaming stores (stream.c) -------------------------------------- */

/* The size in bytes from which a compiled elementwise nest writes its
 * output with non-temporal stores: $TDSL_STREAM_MIN_BYTES when it is a
 * non-negative integer (0: always), else half the last-level cache
 * (Linux sysfs), else INT64_MAX (never).  Read at first use.  For
 * generated code. */
int64_t tdsl_stream_min_bytes(void);

/* ---- Host allocation (alloc.c) --------------------------------------- */

/* align == 0 means 64; align must be a power of two. Returns NULL and sets
 * TDSL_E_INVALID or TDSL_E_NOMEM on failure. bytes == 0 gives a valid
 * pointer. Free with tdsl_free. The default allocator keeps freed blocks
 * of 64 KiB and more (at most 32 of them, 256 MiB in all) for later
 * requests they fit, so that a kernel called again reuses its scratch
 * pages instead of faulting in fresh ones; $TDSL_ALLOC_CACHE=0 turns
 * that off. Blocks of 4 MiB and more are advised to transparent huge
 * pages. */
void *tdsl_alloc(size_t bytes, size_t align);
void tdsl_free(void *p);
/* Gives the blocks the default allocator keeps back to the C library
 * (tdsl_shutdown and tdsl_set_allocator do too). */
void tdsl_alloc_release_cache(void);
/* Routes tdsl_alloc/tdsl_free through the given functions (alloc gets the
 * effective alignment and must honour it). NULL alloc or free restores the
 * default. Change it only while no runtime allocation is live. */
void tdsl_set_allocator(void *(*alloc)(size_t bytes, size_t align,
                                       void *user),
                        void (*free_fn)(void *p, void *user), void *user);

/* ---- dtypes and tensors (descriptor.c, tensor.c) --------------------- */

static inline DLDataType tdsl_dtype_make(uint8_t code, uint8_t bits) {
  DLDataType d;
  d.code = code;
  d.bits = bits;
  d.lanes = 1;
  return d;
}
static inline DLDataType tdsl_dtype_bool(void) { return tdsl_dtype_make(kDLBool, 8); }
static inline DLDataType tdsl_dtype_i8(void) { return tdsl_dtype_make(kDLInt, 8); }
static inline DLDataType tdsl_dtype_u8(void) { return tdsl_dtype_make(kDLUInt, 8); }
static inline DLDataType tdsl_dtype_i16(void) { return tdsl_dtype_make(kDLInt, 16); }
static inline DLDataType tdsl_dtype_i32(void) { return tdsl_dtype_make(kDLInt, 32); }
static inline DLDataType tdsl_dtype_i64(void) { return tdsl_dtype_make(kDLInt, 64); }
static inline DLDataType tdsl_dtype_f16(void) { return tdsl_dtype_make(kDLFloat, 16); }
static inline DLDataType tdsl_dtype_bf16(void) { return tdsl_dtype_make(kDLBfloat, 16); }
static inline DLDataType tdsl_dtype_f32(void) { return tdsl_dtype_make(kDLFloat, 32); }
static inline DLDataType tdsl_dtype_f64(void) { return tdsl_dtype_make(kDLFloat, 64); }
#define TDSL_BOOL tdsl_dtype_bool()
#define TDSL_I8 tdsl_dtype_i8()
#define TDSL_U8 tdsl_dtype_u8()
#define TDSL_I16 tdsl_dtype_i16()
#define TDSL_I32 tdsl_dtype_i32()
#define TDSL_I64 tdsl_dtype_i64()
#define TDSL_F16 tdsl_dtype_f16()
#define TDSL_BF16 tdsl_dtype_bf16()
#define TDSL_F32 tdsl_dtype_f32()
#define TDSL_F64 tdsl_dtype_f64()

static inline int tdsl_dtype_equal(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}
/* tdsl's name ("f32", "bool") or NULL when not one of the ten dtypes. */
const char *tdsl_dtype_name(DLDataType d);
/* Bytes per element: (bits * lanes + 7) / 8. */
size_t tdsl_dtype_size(DLDataType d);

/* Number of elements (1 for ndim 0); -1 if t is invalid or it overflows. */
int64_t tdsl_tensor_numel(const DLTensor *t);
/* Writes row-major strides for shape (what strides == NULL means); size-0
 * dims count as size 1, as in PyTorch; saturates at INT64_MAX. */
void tdsl_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);

/* Fill *t with a CPU tensor owning zeroed data (tdsl_alloc, 64-byte
 * aligned) and shape/strides arrays (strides never NULL when ndim > 0).
 * On failure *t is zeroed and TDSL_E_INVALID (NULL t, ndim < 0, negative
 * dim, negative stride, rank != 4 for channels-last), TDSL_E_OVERFLOW or
 * TDSL_E_NOMEM is returned. Release with tdsl_tensor_free. */
int tdsl_tensor_alloc(DLTensor *t, DLDataType dtype, int ndim,
                      const int64_t *shape);
int tdsl_tensor_alloc_strided(DLTensor *t, DLDataType dtype, int ndim,
                              const int64_t *shape, const int64_t *strides);
/* NCHW shape with strides (H*W*C, 1, W*C, C); ndim must be 4. */
int tdsl_tensor_alloc_channels_last(DLTensor *t, DLDataType dtype, int ndim,
                                    const int64_t *shape);
/* Frees what tdsl_tensor_alloc* allocated and zeroes *t. NULL is fine. */
void tdsl_tensor_free(DLTensor *t);

/* ---- Kernel description (spec §7.1, K_info) -------------------------- */

#define TDSL_LAYOUT_CONTIGUOUS 0
#define TDSL_LAYOUT_CHANNELS_LAST 1
#define TDSL_LAYOUT_STRIDED 2

typedef struct tdsl_param_info {
  const char *name;          /* parameter name; results: "out0", ... */
  int is_tensor;             /* 0: scalar passed by value */
  DLDataType dtype;          /* element type (scalars: their type) */
  int ndim;                  /* rank; 0 for scalars and 0-dim tensors */
  const char *const *dims;   /* ndim texts: "3", "N", "C*H*W" */
  int layout;                /* TDSL_LAYOUT_*; scalars: contiguous */
} tdsl_param_info;

typedef struct tdsl_kernel_info {
  const char *name;               /* C function name */
  int nparams;                    /* parameters in declaration order */
  const tdsl_param_info *params;
  int nresults;                   /* results, after the parameters */
  const tdsl_param_info *results;
  int device_type;                /* kDLCPU or kDLCUDA */
  int64_t scratch_bytes;          /* scratch memory one call allocates
                                     (tdsl_alloc; tdsl_cuda_scratch for
                                     CUDA kernels), or -1 when it depends on
                                     the sizes: see scratch_expr */
  const char *scratch_expr;       /* the same as an expression of the size
                                     symbols ("4*N*C + 512"), or a number */
} tdsl_kernel_info;

/* ---- Entry checks for generated code (check.c) ----------------------- *
 * Each returns TDSL_OK or sets a message naming the kernel, the argument,
 * the dimension and the expected and actual values, and returns the code.
 * Preconditions: t passed tdsl_check_tensor (an input) or
 * tdsl_check_output followed by tdsl_check_dim on every dim (an output)
 * before the other checks. */

/* NULL descriptor or shape (TDSL_E_NULL), rank, dtype (lanes must be 1),
 * device type, and negative dims (TDSL_E_SHAPE). Data is not examined. */
int tdsl_check_tensor(const char *kernel, const char *arg, const DLTensor *t,
                      DLDataType dtype, int ndim, int device_type);
/* tdsl_check_tensor without the dims: an output's shape array is what a
 * shape query writes, so it may hold anything until the query branch;
 * outside a query tdsl_check_dim checks every dim against its size. */
int tdsl_check_output(const char *kernel, const char *arg, const DLTensor *t,
                      DLDataType dtype, int ndim, int device_type);
/* data == NULL is TDSL_E_NULL unless the tensor has no elements (PyTorch
 * exports empty tensors with a NULL data pointer). */
int tdsl_check_data(const char *kernel, const char *arg, const DLTensor *t);
/* shape[dim] == expected; expected_text ("3", "C*H*W") may be NULL. */
int tdsl_check_dim(const char *kernel, const char *arg, const DLTensor *t,
                   int dim, int64_t expected, const char *expected_text);
/* First appearance (*bound == 0) stores shape[dim] in *slot and sets
 * *bound; later ones must equal *slot (TDSL_E_SYMBOL). */
int tdsl_bind_symbol(const char *kernel, const char *arg, const DLTensor *t,
                     int dim, const char *sym, int64_t *slot, int *bound);
/* strides == NULL means row-major. Contiguous and channels-last follow
 * PyTorch's is_contiguous: size-1 dims are never checked and tensors with
 * no elements always pass. Strided: every stride of a dim with size > 1
 * is non-negative. */
int tdsl_check_layout(const char *kernel, const char *arg, const DLTensor *t,
                      int layout);
/* A strided output must not map two elements to one address: sorted by
 * stride, each stride is at least the extent of the smaller ones
 * (conservative). TDSL_E_OVERLAP. */
int tdsl_check_internal_overlap(const char *kernel, const char *arg,
                                const DLTensor *t);
/* (uintptr_t)data + byte_offset is a multiple of the element size. */
int tdsl_check_align(const char *kernel, const char *arg, const DLTensor *t);
/* Byte range addressed relative to data: [*first_byte, *end_byte), both
 * including byte_offset; empty tensors give first == end == byte_offset.
 * Returns TDSL_OK, TDSL_E_OVERFLOW when a value leaves int64, or
 * TDSL_E_INVALID (NULL t or shape); sets no message (descriptor.c). */
int tdsl_tensor_extent(const DLTensor *t, int64_t *first_byte,
                       int64_t *end_byte);
int tdsl_check_extent(const char *kernel, const char *arg, const DLTensor *t);
/* No output's byte range intersects an input's or another output's; empty
 * tensors and NULL entries never overlap. Inputs may overlap each other.
 * The names may be NULL ("output 0", "input 1" are used instead). */
int tdsl_check_overlap(const char *kernel, const DLTensor *const *outs,
                       int nout, const DLTensor *const *ins, int nin);
int tdsl_check_overlap_named(const char *kernel, const DLTensor *const *outs,
                             const char *const *out_names, int nout,
                             const DLTensor *const *ins,
                             const char *const *in_names, int nin);
/* A scalar used as a size must not be NaN or infinite (TDSL_E_SCALAR). */
int tdsl_check_size_scalar(const char *kernel, const char *arg, double v);

/* A run of the checks above as one call from a constant table (what a
 * kernel's entry emits: less code than a call and a branch per check).
 * The ops run in order; the first that fails returns its code, its
 * message set, exactly as the calls one by one would. Each names its
 * tensor t[arg] and that argument's name names[arg]; a, x and s are the
 * check's operands:
 *   TENSOR, OUTPUT  tdsl_check_tensor / _output: a = the DLDataType as
 *                   code | bits << 8 | lanes << 16, x = ndim << 32 |
 *                   device_type
 *   DIM             tdsl_check_dim: a = dim, x = expected, s = its text
 *   DIM_AT          the same with expected want[x]
 *   BIND            tdsl_bind_symbol: a = dim, s = the symbol, slot
 *                   env + x, bound + x
 *   LAYOUT          tdsl_check_layout: a = layout
 *   INTERNAL_OVERLAP, DATA, ALIGN, EXTENT: the check of that name. */
enum {
  TDSL_CK_TENSOR, TDSL_CK_OUTPUT, TDSL_CK_DIM, TDSL_CK_DIM_AT, TDSL_CK_BIND,
  TDSL_CK_LAYOUT, TDSL_CK_INTERNAL_OVERLAP, TDSL_CK_DATA, TDSL_CK_ALIGN,
  TDSL_CK_EXTENT
};
typedef struct tdsl_check_op {
  int32_t op, arg, a, pad;
  int64_t x;
  const char *s;
} tdsl_check_op;
int tdsl_check_ops(const char *kernel, const tdsl_check_op *ops, int nops,
                   const DLTensor *const *t, const char *const *names,
                   const int64_t *want, int64_t *env, int *bound);

/* ---- CUDA (cuda.c) ---------------------------------------------------- *
 * The driver (libcuda.so.1) is loaded with dlopen at the first call and
 * searched for only once; no CUDA toolkit is needed to build or link.
 * Without a driver, when cuInit fails, or with 0 devices, every call below
 * except the stream pair returns TDSL_E_NO_DEVICE ("no CUDA driver:
 * libcuda.so.1 could not be loaded (...)", "no CUDA device: ..."). Other
 * driver failures are TDSL_E_CUDA with the driver's error name and text
 * and what was being done. Kernels, copies and memset are asynchronous on
 * the calling thread's current stream: a fault in them is reported by the
 * next synchronizing call (tdsl_cuda_synchronize), not by the call that
 * enqueued the work.
 * Contexts: every device is used through its primary context (the one the
 * CUDA runtime API uses), retained once and kept for the process. A call
 * that needs a context and finds none current on the thread makes device
 * 0's current, as the CUDA runtime does. */

/* One per generated object file: the embedded PTX of all its device
 * kernels. Generated code defines it as a writable static with
 * state = NULL. */
typedef struct tdsl_cuda_module {
  const char *ptx;                 /* NUL-terminated PTX text */
  int nfuncs;                      /* device entry points */
  const char *const *names;        /* their names in the PTX */
  void *state;                     /* the runtime's cache; NULL at first */
} tdsl_cuda_module;

/* For generated code. Everything that can fail before a kernel's first
 * launch: loads the driver, makes device_id's primary context current on
 * the calling thread (switching only when another context is current, as
 * cudaSetDevice does), loads m's PTX once per context (cached in m->state,
 * thread-safe; the JIT error log is in the message when loading fails)
 * and stores the nfuncs entry points in fns[0..nfuncs). On failure fns is
 * untouched. TDSL_E_NO_DEVICE, TDSL_E_DEVICE ("device 3 does not exist
 * (2 CUDA devices)"), TDSL_E_CUDA, TDSL_E_INVALID (NULL m or ptx). */
int tdsl_cuda_prepare(const char *kernel, tdsl_cuda_module *m, int device_id,
                      void **fns);
/* The device id every tensor argument must share: *device_id < 0 (first
 * call) takes t->device.device_id; later calls compare, TDSL_E_DEVICE
 * naming kernel, arg and both ids. Needs no driver. */
int tdsl_cuda_check_device(const char *kernel, const char *arg,
                           const DLTensor *t, int32_t *device_id);
/* Stream-ordered scratch on the current stream (cuMemAllocAsync; where the
 * device lacks memory pools, cuMemAlloc, and tdsl_cuda_scratch_free then
 * synchronizes the stream before cuMemFree). On the legacy default stream
 * (NULL or CU_STREAM_LEGACY) up to 4 MiB come from blocks kept per
 * primary context, reused in stream order without a driver allocation
 * (docs/cuda.md). bytes 0 gives a valid pointer. NULL with the error set on failure: TDSL_E_NOMEM naming the
 * kernel and the bytes, TDSL_E_NO_DEVICE, TDSL_E_CUDA. */
void *tdsl_cuda_scratch(const char *kernel, int64_t bytes);
/* NULL: nothing. Call it on the thread, context and stream that
 * allocated. A failure is recorded for tdsl_last_error only. */
void tdsl_cuda_scratch_free(void *p);
/* cuLaunchKernel of fn (from tdsl_cuda_prepare) on the current stream;
 * args as cuLaunchKernel's kernelParams. shmem_bytes over 48 KiB opts the
 * function in first. A grid with a 0 dim launches nothing and returns 0.
 * TDSL_E_CUDA naming the kernel and the launch shape. */
int tdsl_cuda_launch(const char *kernel, void *fn, uint32_t gx, uint32_t gy,
                     uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                     uint32_t shmem_bytes, void **args);

/* For applications. *n = devices the driver reports (0 on failure). */
int tdsl_cuda_device_count(int *n);
/* The stream kernels, copies, memset and synchronize use: per calling
 * thread, initially NULL (the legacy default stream of the current
 * context). stream is a CUstream of the context the work runs in. Needs
 * no driver; set_stream always returns 0. */
int tdsl_cuda_set_stream(void *stream);
void *tdsl_cuda_get_stream(void);
/* Device memory in device_id's primary context, leaving the calling
 * thread's current context as it was. bytes 0 gives a valid pointer
 * (256 bytes). TDSL_E_NOMEM when the device is out of memory. */
int tdsl_cuda_malloc(void **p, size_t bytes, int device_id);
/* Frees tdsl_cuda_malloc memory in its own context. NULL: returns 0. */
int tdsl_cuda_free(void *p);
/* Pinned (page-locked, portable) host memory for fast asynchronous
 * copies; bytes 0 gives a valid pointer. */
int tdsl_cuda_malloc_host(void **p, size_t bytes);
int tdsl_cuda_free_host(void *p); /* NULL: returns 0 */
/* Asynchronous on the current stream: dst (host) holds the data only after
 * tdsl_cuda_synchronize. With pageable host memory the driver may block
 * until the copy is done; use tdsl_cuda_malloc_host for overlap. 0 bytes
 * enqueue nothing. */
int tdsl_cuda_memcpy_htod(void *dst, const void *src, size_t bytes);
int tdsl_cuda_memcpy_dtoh(void *dst, const void *src, size_t bytes);
int tdsl_cuda_memcpy_dtod(void *dst, const void *src, size_t bytes);
/* Sets bytes bytes at dst to (unsigned char)byte, asynchronously. */
int tdsl_cuda_memset(void *dst, int byte, size_t bytes);
/* Waits for the current stream: where faults of kernels and copies
 * enqueued before it are reported (TDSL_E_CUDA). A fault such as an
 * illegal address leaves the context unusable for the process. */
int tdsl_cuda_synchronize(void);

#ifdef __cplusplus
}
#endif

#endif /* TDSL_RUNTIME_H */
