/* cuda.c — the CUDA part of libtdsl_runtime (spec §7.3): loads the driver
 * (libcuda.so.1) at run time, makes devices' primary contexts current,
 * caches each generated object's PTX module per context, allocates
 * kernels' scratch (kept per context on the legacy default stream),
 * launches kernels, and gives applications device and pinned allocation,
 * copies and a per-thread stream.
 * Needs dlopen and pthreads, never the CUDA toolkit: the driver API subset
 * used is declared below, and every entry point but cuGetProcAddress is
 * resolved through cuGetProcAddress, which yields the versioned ones
 * (cuMemAlloc_v2, cuMemcpyHtoDAsync_v2, ...). The driver is searched once
 * per process; without it, or without a device, every call returns
 * TDSL_E_NO_DEVICE. Primary contexts are retained once and kept, so the
 * CUcontext handles (and the modules loaded in them) stay valid for the
 * process's life. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "tdsl/runtime.h"

/* ---- The driver API subset (values from CUDA 12's cuda.h) ------------ */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED 115
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_GET_PROC_ADDRESS_DEFAULT 0

/* The API version asked of cuGetProcAddress (lowered to the driver's). */
#define RT_CUDA_API_VERSION 12000
/* Smallest allocation: size 0 still gives a valid, distinct pointer. */
#define RT_CUDA_MIN_ALLOC 256
/* Dynamic shared memory a launch gets without opting in. */
#define RT_CUDA_DEFAULT_SHMEM (48 * 1024)

/* X(field, driver name, required, parameter list). Optional entry points
 * (stream-ordered allocation, CUDA 11.2) may stay NULL. */
#define RT_CU_API(X)                                                      \
  X(Init, "cuInit", 1, (unsigned flags))                                   \
  X(DeviceGetCount, "cuDeviceGetCount", 1, (int *count))                   \
  X(DeviceGet, "cuDeviceGet", 1, (CUdevice * dev, int ordinal))            \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", 1,                         \
    (int *value, int attr, CUdevice dev))                                  \
  X(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1,                       \
    (CUcontext * ctx, CUdevice dev))                                       \
  X(CtxGetCurrent, "cuCtxGetCurrent", 1, (CUcontext * ctx))                \
  X(CtxSetCurrent, "cuCtxSetCurrent", 1, (CUcontext ctx))                  \
  X(CtxPushCurrent, "cuCtxPushCurrent", 1, (CUcontext ctx))                \
  X(CtxPopCurrent, "cuCtxPopCurrent", 1, (CUcontext * ctx))                \
  X(CtxGetDevice, "cuCtxGetDevice", 1, (CUdevice * dev))                   \
  X(ModuleLoadDataEx, "cuModuleLoadDataEx", 1,                             \
    (CUmodule * mod, const void *image, unsigned nopts, int *opts,         \
     void **vals))                                                         \
  X(ModuleUnload, "cuModuleUnload", 1, (CUmodule mod))                     \
  X(ModuleGetFunction, "cuModuleGetFunction", 1,                           \
    (CUfunction * fn, CUmodule mod, const char *name))                     \
  X(FuncSetAttribute, "cuFuncSetAttribute", 1,                             \
    (CUfunction fn, int attr, int value))                                  \
  X(LaunchKernel, "cuLaunchKernel", 1,                                     \
    (CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,    \
     unsigned by, unsigned bz, unsigned shmem, CUstream stream,            \
     void **args, void **extra))                                           \
  X(MemAlloc, "cuMemAlloc", 1, (CUdeviceptr * p, size_t bytes))            \
  X(MemFree, "cuMemFree", 1, (CUdeviceptr p))                              \
  X(MemAllocAsync, "cuMemAllocAsync", 0,                                   \
    (CUdeviceptr * p, size_t bytes, CUstream stream))                      \
  X(MemFreeAsync, "cuMemFreeAsync", 0, (CUdeviceptr p, CUstream stream))   \
  X(MemHostAlloc, "cuMemHostAlloc", 1,                                     \
    (void **p, size_t bytes, unsigned flags))                              \
  X(MemFreeHost, "cuMemFreeHost", 1, (void *p))                            \
  X(PointerGetAttribute, "cuPointerGetAttribute", 1,                       \
    (void *value, int attr, CUdeviceptr p))                                \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync", 1,                               \
    (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))     \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync", 1,                               \
    (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))           \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync", 1,                               \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))     \
  X(MemsetD8Async, "cuMemsetD8Async", 1,                                   \
    (CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream)) \
  X(StreamSynchronize, "cuStreamSynchronize", 1, (CUstream stream))        \
  X(GetErrorName, "cuGetErrorName", 1, (CUresult r, const char **text))    \
  X(GetErrorString, "cuGetErrorString", 1, (CUresult r, const char **text))

typedef struct RtCu {
#define X(field, name, required, params) CUresult (*field) params;
  RT_CU_API(X)
#undef X
} RtCu;

/* cuGetProcAddress_v2 (CUDA 12) and cuGetProcAddress (11.3); the first
 * has a trailing status pointer the second lacks. */
typedef CUresult (*RtGetProc2)(const char *sym, void **fn, int version,
                               uint64_t flags, int *status);
typedef CUresult (*RtGetProc1)(const char *sym, void **fn, int version,
                               uint64_t flags);

/* What the one-time loader found; read-only once rt_cuda_once has run,
 * except primary[], whose entries go from NULL to a context once. */
typedef struct RtCudaState {
  int status;          /* TDSL_OK, or the code every call returns */
  char why[512];       /* the reason when status != TDSL_OK */
  int ndev;            /* devices the driver reports (> 0 when ready) */
  CUdevice *dev;       /* ndev device handles, by ordinal */
  int *pools;          /* ndev flags: cuMemAllocAsync usable */
  CUcontext *primary;  /* ndev primary contexts, NULL until retained */
  int loads;           /* times the loader ran: 1 (rt_cuda_load_count) */
} RtCudaState;

static pthread_once_t rt_cuda_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t rt_cuda_lock = PTHREAD_MUTEX_INITIALIZER;
static RtCudaState rt_cuda;
static RtCu rt_cu;
/* The stream kernels and copies go to; NULL is the legacy default one. */
static _Thread_local void *rt_stream;

/* ---- Messages --------------------------------------------------------- */

/* "kernel K" when there is a kernel, else the API function's name. */
static const char *rt_who(char *buf, size_t cap, const char *kernel,
                          const char *fn) {
  if (!kernel)
    return fn;
  snprintf(buf, cap, "kernel %s", kernel);
  return buf;
}

/* "CUDA_ERROR_X: text" for r. */
static const char *rt_cu_text(CUresult r, char *buf, size_t cap) {
  const char *name = NULL, *text = NULL;
  if (rt_cu.GetErrorName && rt_cu.GetErrorName(r, &name) != CUDA_SUCCESS)
    name = NULL;
  if (rt_cu.GetErrorString &&
      rt_cu.GetErrorString(r, &text) != CUDA_SUCCESS)
    text = NULL;
  if (name)
    snprintf(buf, cap, "%s: %s", name, text ? text : "no description");
  else
    snprintf(buf, cap, "CUDA error %d", r);
  return buf;
}

static int rt_cu_fail(int code, const char *who, CUresult r,
                      const char *fmt, ...) TDSL_PRINTF(4, 5);

/* Sets "WHO: what (CUDA_ERROR_X: text)" and returns code. */
static int rt_cu_fail(int code, const char *who, CUresult r,
                      const char *fmt, ...) {
  char what[512], err[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return tdsl_set_error(code, "%s: %s (%s)", who, what,
                        rt_cu_text(r, err, sizeof err));
}

/* ---- Loading the driver (once) ----------------------------------------- */

static void rt_cuda_unusable(const char *fmt, ...) TDSL_PRINTF(1, 2);

static void rt_cuda_unusable(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt_cuda.why, sizeof rt_cuda.why, fmt, ap);
  va_end(ap);
  rt_cuda.status = TDSL_E_NO_DEVICE;
}

/* Resolves every entry point of RT_CU_API; false (with why set) when a
 * required one is missing. */
static bool rt_cuda_resolve(void *lib) {
  RtGetProc2 get2 = NULL;
  RtGetProc1 get1 = NULL;
  void *sym = dlsym(lib, "cuGetProcAddress_v2");
  if (sym)
    memcpy(&get2, &sym, sizeof sym);
  else if ((sym = dlsym(lib, "cuGetProcAddress")) != NULL)
    memcpy(&get1, &sym, sizeof sym);
  else {
    rt_cuda_unusable("no CUDA driver: libcuda.so.1 has no cuGetProcAddress "
                     "(a driver for CUDA 11.3 or newer is needed)");
    return false;
  }
  int version = RT_CUDA_API_VERSION, have = 0;
  CUresult (*get_version)(int *) = NULL;
  if ((sym = dlsym(lib, "cuDriverGetVersion")) != NULL) {
    memcpy(&get_version, &sym, sizeof sym);
    if (get_version(&have) == CUDA_SUCCESS && have > 0 && have < version)
      version = have;
  }
#define X(field, name, required, params)                                  \
  {                                                                       \
    void *fn = NULL;                                                      \
    int status = 0;                                                       \
    CUresult r = get2 ? get2(name, &fn, version,                          \
                             CU_GET_PROC_ADDRESS_DEFAULT, &status)        \
                      : get1(name, &fn, version,                          \
                             CU_GET_PROC_ADDRESS_DEFAULT);                \
    if (r != CUDA_SUCCESS)                                                \
      fn = NULL;                                                          \
    if (!fn && (required)) {                                              \
      rt_cuda_unusable("no CUDA driver: libcuda.so.1 (driver API "       \
                       "version %d) lacks %s",                            \
                       have, name);                                       \
      return false;                                                       \
    }                                                                     \
    memcpy(&rt_cu.field, &fn, sizeof fn);                                 \
  }
  RT_CU_API(X)
#undef X
  return true;
}

/* Initializes the driver and records the devices; false with why set. */
static bool rt_cuda_devices(void) {
  char err[256];
  CUresult r = rt_cu.Init(0);
  if (r != CUDA_SUCCESS) {
    rt_cuda_unusable("no CUDA device: cuInit failed (%s)",
                     rt_cu_text(r, err, sizeof err));
    return false;
  }
  int n = 0;
  r = rt_cu.DeviceGetCount(&n);
  if (r != CUDA_SUCCESS || n <= 0) {
    if (r != CUDA_SUCCESS)
      rt_cuda_unusable("no CUDA device: cuDeviceGetCount failed (%s)",
                       rt_cu_text(r, err, sizeof err));
    else
      rt_cuda_unusable("no CUDA device: the driver reports 0 devices");
    return false;
  }
  rt_cuda.dev = calloc((size_t)n, sizeof *rt_cuda.dev);
  rt_cuda.pools = calloc((size_t)n, sizeof *rt_cuda.pools);
  rt_cuda.primary = calloc((size_t)n, sizeof *rt_cuda.primary);
  if (!rt_cuda.dev || !rt_cuda.pools || !rt_cuda.primary) {
    rt_cuda_unusable("no CUDA device: out of host memory while listing "
                     "%d devices", n);
    return false;
  }
  for (int i = 0; i < n; i++) {
    r = rt_cu.DeviceGet(&rt_cuda.dev[i], i);
    if (r != CUDA_SUCCESS) {
      rt_cuda_unusable("no CUDA device: cuDeviceGet(%d) failed (%s)", i,
                       rt_cu_text(r, err, sizeof err));
      return false;
    }
    int pools = 0;
    if (rt_cu.MemAllocAsync && rt_cu.MemFreeAsync &&
        rt_cu.DeviceGetAttribute(&pools,
                                 CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                 rt_cuda.dev[i]) == CUDA_SUCCESS)
      rt_cuda.pools[i] = pools != 0;
  }
  rt_cuda.ndev = n;
  return true;
}

static void rt_cuda_load(void) {
  rt_cuda.loads++;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    rt_cuda_unusable("no CUDA driver: libcuda.so.1 could not be loaded (%s)",
                     e ? e : "unknown reason");
    return;
  }
  /* The library stays loaded: resolved pointers and contexts outlive us. */
  if (!rt_cuda_resolve(lib) || !rt_cuda_devices())
    return;
  rt_cuda.status = TDSL_OK;
}

/* TDSL_OK when the driver is loaded and has a device; otherwise sets
 * "WHO: no CUDA ..." and returns TDSL_E_NO_DEVICE. */
static int rt_ready(const char *who) {
  pthread_once(&rt_cuda_once, rt_cuda_load);
  if (rt_cuda.status == TDSL_OK)
    return TDSL_OK;
  return tdsl_set_error(rt_cuda.status, "%s: %s", who, rt_cuda.why);
}

int rt_cuda_load_count(void) {
  pthread_once(&rt_cuda_once, rt_cuda_load);
  return rt_cuda.loads;
}

/* ---- Contexts ------------------------------------------------------------ */

static int rt_check_ordinal(const char *who, int device_id) {
  if (device_id >= 0 && device_id < rt_cuda.ndev)
    return TDSL_OK;
  return tdsl_set_error(TDSL_E_DEVICE,
                        "%s: device %d does not exist (%d CUDA device%s)",
                        who, device_id, rt_cuda.ndev,
                        rt_cuda.ndev == 1 ? "" : "s");
}

/* The primary context of a valid ordinal, retained on first use. */
static int rt_primary(const char *who, int device_id, CUcontext *out) {
  CUcontext c = __atomic_load_n(&rt_cuda.primary[device_id], __ATOMIC_ACQUIRE);
  if (c) {
    *out = c;
    return TDSL_OK;
  }
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&rt_cuda_lock);
  c = rt_cuda.primary[device_id];
  if (!c) {
    r = rt_cu.PrimaryCtxRetain(&c, rt_cuda.dev[device_id]);
    if (r == CUDA_SUCCESS)
      __atomic_store_n(&rt_cuda.primary[device_id], c, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&rt_cuda_lock);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, who, r,
                      "cannot retain the primary context of CUDA device %d",
                      device_id);
  *out = c;
  return TDSL_OK;
}

/* Makes device_id's primary context current on this thread, switching
 * only when another one is (as cudaSetDevice does). */
static int rt_use_device(const char *who, int device_id, CUcontext *out) {
  CUcontext want = NULL, cur = NULL;
  int rc = rt_primary(who, device_id, &want);
  if (rc != TDSL_OK)
    return rc;
  CUresult r = rt_cu.CtxGetCurrent(&cur);
  if (r == CUDA_SUCCESS && cur != want)
    r = rt_cu.CtxSetCurrent(want);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, who, r,
                      "cannot make CUDA device %d's context current",
                      device_id);
  if (out)
    *out = want;
  return TDSL_OK;
}

/* Ensures a current context: device 0's primary one when there is none. */
static int rt_any_context(const char *who) {
  CUcontext cur = NULL;
  CUresult r = rt_cu.CtxGetCurrent(&cur);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, who, r, "cannot read the current context");
  return cur ? TDSL_OK : rt_use_device(who, 0, NULL);
}

/* The ordinal of the current context's device; -1 when unknown. */
static int rt_current_ordinal(void) {
  CUdevice d;
  if (rt_cu.CtxGetDevice(&d) != CUDA_SUCCESS)
    return -1;
  for (int i = 0; i < rt_cuda.ndev; i++)
    if (rt_cuda.dev[i] == d)
      return i;
  return -1;
}

/* ---- Module cache (per generated object, per context) -------------------- */

typedef struct RtModEntry {
  struct RtModEntry *next; /* older entries; never changes once published */
  CUcontext ctx;           /* the context the module was loaded in */
  CUmodule mod;
  CUfunction fns[];        /* the module's nfuncs entry points, in order */
} RtModEntry;

/* Hung off tdsl_cuda_module.state; never freed (modules live as long as
 * the process, like the primary contexts they are loaded in). */
typedef struct RtModCache {
  pthread_mutex_t lock; /* serializes loads; lookups take no lock */
  RtModEntry *head;     /* newest first, published with release stores */
} RtModCache;

static RtModCache *rt_mod_cache(tdsl_cuda_module *m) {
  void *s = __atomic_load_n(&m->state, __ATOMIC_ACQUIRE);
  if (s)
    return s;
  RtModCache *fresh = malloc(sizeof *fresh);
  if (!fresh)
    return NULL;
  pthread_mutex_init(&fresh->lock, NULL);
  fresh->head = NULL;
  void *expected = NULL;
  if (__atomic_compare_exchange_n(&m->state, &expected, (void *)fresh, false,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return fresh;
  pthread_mutex_destroy(&fresh->lock); /* another thread installed one */
  free(fresh);
  return expected;
}

static RtModEntry *rt_mod_find(RtModEntry *e, CUcontext ctx) {
  for (; e; e = e->next)
    if (e->ctx == ctx)
      return e;
  return NULL;
}

/* Loads m's PTX in the current context ctx and looks up its entry points;
 * on failure the message carries the JIT's error log. */
static int rt_mod_load(const char *who, const tdsl_cuda_module *m,
                       int device_id, CUcontext ctx, RtModEntry **out) {
  RtModEntry *e = malloc(sizeof *e + (size_t)m->nfuncs * sizeof(CUfunction));
  if (!e)
    return tdsl_set_error(TDSL_E_NOMEM,
                          "%s: out of host memory for the module cache", who);
  char log[2048] = "", err[256];
  int opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
  CUresult r = rt_cu.ModuleLoadDataEx(&e->mod, m->ptx, 2, opts, vals);
  if (r != CUDA_SUCCESS) {
    free(e);
    log[sizeof log - 1] = '\0';
    return tdsl_set_error(TDSL_E_CUDA,
                          "%s: cannot load the PTX module on CUDA device %d "
                          "(%s)%s%s",
                          who, device_id, rt_cu_text(r, err, sizeof err),
                          log[0] ? "; JIT log: " : "", log);
  }
  for (int i = 0; i < m->nfuncs; i++) {
    r = rt_cu.ModuleGetFunction(&e->fns[i], e->mod, m->names[i]);
    if (r != CUDA_SUCCESS) {
      rt_cu.ModuleUnload(e->mod);
      free(e);
      return rt_cu_fail(TDSL_E_CUDA, who, r,
                        "the PTX module has no entry point '%s'",
                        m->names[i]);
    }
  }
  e->ctx = ctx;
  *out = e;
  return TDSL_OK;
}

/* tdsl_cuda_prepare's common case, with no message to format: the driver
 * ready, device_id's primary context retained (made current when another
 * is), the module loaded in it. One driver call (cuCtxGetCurrent); false
 * sends the caller the long way, which redoes and explains. */
static bool rt_prepare_fast(tdsl_cuda_module *m, int device_id, void **fns) {
  pthread_once(&rt_cuda_once, rt_cuda_load);
  if (rt_cuda.status != TDSL_OK || !m || !m->ptx || m->nfuncs < 0 ||
      (m->nfuncs > 0 && (!m->names || !fns)) || device_id < 0 ||
      device_id >= rt_cuda.ndev)
    return false;
  CUcontext want = __atomic_load_n(&rt_cuda.primary[device_id], __ATOMIC_ACQUIRE);
  RtModCache *c = __atomic_load_n(&m->state, __ATOMIC_ACQUIRE);
  if (!want || !c)
    return false;
  RtModEntry *e = rt_mod_find(__atomic_load_n(&c->head, __ATOMIC_ACQUIRE), want);
  CUcontext cur = NULL;
  if (!e || rt_cu.CtxGetCurrent(&cur) != CUDA_SUCCESS ||
      (cur != want && rt_cu.CtxSetCurrent(want) != CUDA_SUCCESS))
    return false;
  for (int i = 0; i < m->nfuncs; i++)
    fns[i] = (void *)e->fns[i];
  return true;
}

int tdsl_cuda_prepare(const char *kernel, tdsl_cuda_module *m, int device_id,
                      void **fns) {
  if (rt_prepare_fast(m, device_id, fns))
    return TDSL_OK;
  char buf[160];
  const char *who = rt_who(buf, sizeof buf, kernel, "tdsl_cuda_prepare");
  int rc = rt_ready(who);
  if (rc != TDSL_OK)
    return rc;
  if (!m || !m->ptx || m->nfuncs < 0 || (m->nfuncs > 0 && (!m->names || !fns)))
    return tdsl_set_error(TDSL_E_INVALID, "%s: invalid CUDA module", who);
  CUcontext ctx;
  if ((rc = rt_check_ordinal(who, device_id)) != TDSL_OK ||
      (rc = rt_use_device(who, device_id, &ctx)) != TDSL_OK)
    return rc;
  RtModCache *c = rt_mod_cache(m);
  if (!c)
    return tdsl_set_error(TDSL_E_NOMEM,
                          "%s: out of host memory for the module cache", who);
  RtModEntry *e = rt_mod_find(__atomic_load_n(&c->head, __ATOMIC_ACQUIRE), ctx);
  if (!e) {
    pthread_mutex_lock(&c->lock);
    e = rt_mod_find(c->head, ctx);
    if (!e && (rc = rt_mod_load(who, m, device_id, ctx, &e)) == TDSL_OK) {
      e->next = c->head;
      __atomic_store_n(&c->head, e, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&c->lock);
    if (rc != TDSL_OK)
      return rc;
  }
  for (int i = 0; i < m->nfuncs; i++)
    fns[i] = (void *)e->fns[i];
  return TDSL_OK;
}

int tdsl_cuda_check_device(const char *kernel, const char *arg,
                           const DLTensor *t, int32_t *device_id) {
  if (!t || !device_id)
    return tdsl_set_error(TDSL_E_NULL,
                          "kernel %s: argument '%s': tensor descriptor is "
                          "NULL",
                          kernel ? kernel : "?", arg ? arg : "?");
  if (*device_id < 0) {
    *device_id = t->device.device_id;
    return TDSL_OK;
  }
  if (t->device.device_id == *device_id)
    return TDSL_OK;
  return tdsl_set_error(TDSL_E_DEVICE,
                        "kernel %s: argument '%s': expected CUDA device %d "
                        "(that of the arguments before it), got device %d",
                        kernel ? kernel : "?", arg ? arg : "?",
                        (int)*device_id, (int)t->device.device_id);
}

/* ---- Scratch and launches ------------------------------------------------- */

/* ---- Kept scratch (the legacy default stream) ----------------------------
 * A kernel's scratch on the legacy default stream (NULL or
 * CU_STREAM_LEGACY: PyTorch's default, one per context, never destroyed)
 * is taken from blocks kept per context instead of a cuMemAllocAsync /
 * cuMemFreeAsync pair per call (microseconds of host time each): a block
 * is busy from tdsl_cuda_scratch to tdsl_cuda_scratch_free, and every use
 * of it is enqueued on that one stream, so the next call's kernels run
 * after the last ones that used it (stream order, as with stream-ordered
 * allocation), from whatever thread. Other streams (which an application
 * may destroy, whose handles may be reused, or which may be capturing a
 * graph) allocate per call as before. A block grows (freed in stream order
 * and allocated anew, to a power of two) when a call needs more;
 * scratch over RT_SCRATCH_MAX bytes is never kept. The blocks live as long
 * as the process, like the primary contexts: at most RT_SCRATCH_SLOTS x
 * RT_SCRATCH_MAX bytes in all. */
#define RT_SCRATCH_SLOTS 8
#define RT_SCRATCH_MAX ((size_t)4 << 20)
#define RT_CU_STREAM_LEGACY ((void *)0x1)

typedef struct RtKept {
  CUcontext ctx;  /* NULL: a free slot */
  CUdeviceptr p;
  size_t size;
  int busy;
} RtKept;

static RtKept rt_kept[RT_SCRATCH_SLOTS];
static pthread_mutex_t rt_kept_lock = PTHREAD_MUTEX_INITIALIZER;

/* Frees p of the legacy stream in stream order (pools: cuMemFreeAsync;
 * else after a synchronization). */
static CUresult rt_legacy_free(CUdeviceptr p, bool pools) {
  CUresult r;
  if (pools)
    return rt_cu.MemFreeAsync(p, NULL);
  if ((r = rt_cu.StreamSynchronize(NULL)) != CUDA_SUCCESS)
    return r;
  return rt_cu.MemFree(p);
}

/* A kept block of at least n bytes of context ctx (the current one), now
 * busy; 0 when none can be had (the caller allocates as usual). */
static CUdeviceptr rt_kept_take(CUcontext ctx, size_t n) {
  bool primary = false; /* only primary contexts: never destroyed by us */
  for (int i = 0; i < rt_cuda.ndev && !primary; i++)
    primary = __atomic_load_n(&rt_cuda.primary[i], __ATOMIC_ACQUIRE) == ctx;
  if (!primary)
    return 0;
  CUdeviceptr got = 0;
  pthread_mutex_lock(&rt_kept_lock);
  RtKept *small = NULL, *empty = NULL;
  for (int i = 0; i < RT_SCRATCH_SLOTS; i++) {
    RtKept *k = &rt_kept[i];
    if (!k->ctx) {
      if (!empty)
        empty = k;
    } else if (k->ctx == ctx && !k->busy) {
      if (k->size >= n) {
        k->busy = 1;
        got = k->p;
        break;
      }
      if (!small)
        small = k;
    }
  }
  RtKept *k = small ? small : empty;
  if (!got && k) {
    int dev = rt_current_ordinal();
    bool pools = dev >= 0 && rt_cuda.pools[dev];
    size_t size = 4096;
    while (size < n)
      size *= 2;
    CUresult r = CUDA_SUCCESS;
    if (k == small && (r = rt_legacy_free(k->p, pools)) == CUDA_SUCCESS)
      *k = (RtKept){0};
    CUdeviceptr p = 0;
    if (r == CUDA_SUCCESS && dev >= 0 &&
        (pools ? rt_cu.MemAllocAsync(&p, size, NULL) : rt_cu.MemAlloc(&p, size)) ==
            CUDA_SUCCESS) {
      *k = (RtKept){ctx, p, size, 1};
      got = p;
    }
  }
  pthread_mutex_unlock(&rt_kept_lock);
  return got;
}

/* Gives a kept block back (no driver call); false when p is not one. */
static bool rt_kept_give(void *p) {
  bool found = false;
  pthread_mutex_lock(&rt_kept_lock);
  for (int i = 0; i < RT_SCRATCH_SLOTS && !found; i++)
    if (rt_kept[i].ctx && rt_kept[i].busy &&
        rt_kept[i].p == (CUdeviceptr)(uintptr_t)p) {
      rt_kept[i].busy = 0;
      found = true;
    }
  pthread_mutex_unlock(&rt_kept_lock);
  return found;
}

/* The bytes of kept scratch blocks (for tests). */
size_t rt_cuda_kept_bytes(void) {
  size_t n = 0;
  pthread_mutex_lock(&rt_kept_lock);
  for (int i = 0; i < RT_SCRATCH_SLOTS; i++)
    n += rt_kept[i].ctx ? rt_kept[i].size : 0;
  pthread_mutex_unlock(&rt_kept_lock);
  return n;
}

void *tdsl_cuda_scratch(const char *kernel, int64_t bytes) {
  size_t n = bytes < RT_CUDA_MIN_ALLOC ? RT_CUDA_MIN_ALLOC : (size_t)bytes;
  if ((rt_stream == NULL || rt_stream == RT_CU_STREAM_LEGACY) && bytes >= 0 &&
      n <= RT_SCRATCH_MAX) {
    pthread_once(&rt_cuda_once, rt_cuda_load);
    CUcontext cur = NULL;
    CUdeviceptr p;
    if (rt_cuda.status == TDSL_OK && rt_cu.CtxGetCurrent(&cur) == CUDA_SUCCESS &&
        cur && (p = rt_kept_take(cur, n)) != 0)
      return (void *)(uintptr_t)p;
  }
  char buf[160];
  const char *who = rt_who(buf, sizeof buf, kernel, "tdsl_cuda_scratch");
  if (rt_ready(who) != TDSL_OK || rt_any_context(who) != TDSL_OK)
    return NULL;
  if (bytes < 0 || (uint64_t)bytes > SIZE_MAX) {
    tdsl_set_error(TDSL_E_INVALID, "%s: invalid scratch size %lld bytes",
                   who, (long long)bytes);
    return NULL;
  }
  int dev = rt_current_ordinal();
  CUdeviceptr p = 0;
  CUresult r = dev >= 0 && rt_cuda.pools[dev]
                   ? rt_cu.MemAllocAsync(&p, n, (CUstream)rt_stream)
                   : rt_cu.MemAlloc(&p, n);
  if (r == CUDA_SUCCESS)
    return (void *)(uintptr_t)p;
  rt_cu_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? TDSL_E_NOMEM : TDSL_E_CUDA, who,
             r, "cannot allocate %lld bytes of scratch on CUDA device %d",
             (long long)bytes, dev);
  return NULL;
}

void tdsl_cuda_scratch_free(void *p) {
  const char *who = "tdsl_cuda_scratch_free";
  if (!p || rt_ready(who) != TDSL_OK || rt_kept_give(p))
    return;
  CUstream s = (CUstream)rt_stream;
  int dev = rt_current_ordinal();
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
  CUresult r;
  if (dev >= 0 && rt_cuda.pools[dev])
    r = rt_cu.MemFreeAsync(d, s);
  else if ((r = rt_cu.StreamSynchronize(s)) == CUDA_SUCCESS)
    r = rt_cu.MemFree(d);
  if (r != CUDA_SUCCESS) /* recorded only: there is no code to return */
    rt_cu_fail(TDSL_E_CUDA, who, r, "cannot free scratch %p", p);
}

int tdsl_cuda_launch(const char *kernel, void *fn, uint32_t gx, uint32_t gy,
                     uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                     uint32_t shmem_bytes, void **args) {
  char buf[160]; /* "kernel K", formatted only for a message */
  pthread_once(&rt_cuda_once, rt_cuda_load);
  int rc = rt_cuda.status == TDSL_OK
               ? TDSL_OK
               : rt_ready(rt_who(buf, sizeof buf, kernel, "tdsl_cuda_launch"));
  if (rc != TDSL_OK)
    return rc;
  if (!fn)
    return tdsl_set_error(TDSL_E_INVALID, "%s: NULL CUDA function",
                          rt_who(buf, sizeof buf, kernel, "tdsl_cuda_launch"));
  if (gx == 0 || gy == 0 || gz == 0)
    return TDSL_OK; /* an empty grid: nothing to run */
  CUfunction f = (CUfunction)fn;
  CUresult r = CUDA_SUCCESS;
  if (shmem_bytes > RT_CUDA_DEFAULT_SHMEM)
    r = rt_cu.FuncSetAttribute(f,
                               CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               (int)shmem_bytes);
  if (r == CUDA_SUCCESS)
    r = rt_cu.LaunchKernel(f, gx, gy, gz, bx, by, bz, shmem_bytes,
                           (CUstream)rt_stream, args, NULL);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, rt_who(buf, sizeof buf, kernel, "tdsl_cuda_launch"), r,
                      "cannot launch grid [%u, %u, %u] of blocks [%u, %u, "
                      "%u] with %u bytes of shared memory",
                      gx, gy, gz, bx, by, bz, shmem_bytes);
  return TDSL_OK;
}

/* ---- Devices, streams, memory for applications ---------------------------- */

int tdsl_cuda_device_count(int *n) {
  if (n)
    *n = 0;
  int rc = rt_ready("tdsl_cuda_device_count");
  if (rc != TDSL_OK)
    return rc;
  if (!n)
    return tdsl_set_error(TDSL_E_INVALID, "tdsl_cuda_device_count: n is NULL");
  *n = rt_cuda.ndev;
  return TDSL_OK;
}

int tdsl_cuda_set_stream(void *stream) {
  rt_stream = stream;
  return TDSL_OK;
}

void *tdsl_cuda_get_stream(void) { return rt_stream; }

int tdsl_cuda_malloc(void **p, size_t bytes, int device_id) {
  const char *who = "tdsl_cuda_malloc";
  if (p)
    *p = NULL;
  int rc = rt_ready(who);
  if (rc != TDSL_OK)
    return rc;
  if (!p)
    return tdsl_set_error(TDSL_E_INVALID, "%s: p is NULL", who);
  CUcontext ctx = NULL, cur = NULL;
  if ((rc = rt_check_ordinal(who, device_id)) != TDSL_OK ||
      (rc = rt_primary(who, device_id, &ctx)) != TDSL_OK)
    return rc;
  /* Allocate in device_id's context without changing the caller's. */
  CUresult r = rt_cu.CtxGetCurrent(&cur);
  bool push = r == CUDA_SUCCESS && cur != ctx;
  if (push)
    r = rt_cu.CtxPushCurrent(ctx);
  CUdeviceptr d = 0;
  if (r == CUDA_SUCCESS)
    r = rt_cu.MemAlloc(&d, bytes < RT_CUDA_MIN_ALLOC ? RT_CUDA_MIN_ALLOC
                                                     : bytes);
  if (push)
    rt_cu.CtxPopCurrent(&cur);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? TDSL_E_NOMEM
                                                    : TDSL_E_CUDA,
                      who, r, "cannot allocate %zu bytes on CUDA device %d",
                      bytes, device_id);
  *p = (void *)(uintptr_t)d;
  return TDSL_OK;
}

int tdsl_cuda_free(void *p) {
  const char *who = "tdsl_cuda_free";
  if (!p)
    return TDSL_OK;
  int rc = rt_ready(who);
  if (rc != TDSL_OK)
    return rc;
  /* Free in the allocation's own context, whatever is current. */
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
  CUcontext ctx = NULL, cur = NULL;
  CUresult r = rt_cu.PointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, d);
  if (r != CUDA_SUCCESS || !ctx)
    return tdsl_set_error(TDSL_E_INVALID,
                          "%s: %p is not CUDA device memory", who, p);
  r = rt_cu.CtxGetCurrent(&cur);
  bool push = r == CUDA_SUCCESS && cur != ctx;
  if (push)
    r = rt_cu.CtxPushCurrent(ctx);
  if (r == CUDA_SUCCESS)
    r = rt_cu.MemFree(d);
  if (push)
    rt_cu.CtxPopCurrent(&cur);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, who, r, "cannot free %p", p);
  return TDSL_OK;
}

int tdsl_cuda_malloc_host(void **p, size_t bytes) {
  const char *who = "tdsl_cuda_malloc_host";
  if (p)
    *p = NULL;
  int rc = rt_ready(who);
  if (rc != TDSL_OK)
    return rc;
  if (!p)
    return tdsl_set_error(TDSL_E_INVALID, "%s: p is NULL", who);
  if ((rc = rt_any_context(who)) != TDSL_OK)
    return rc;
  CUresult r = rt_cu.MemHostAlloc(
      p, bytes < RT_CUDA_MIN_ALLOC ? RT_CUDA_MIN_ALLOC : bytes,
      CU_MEMHOSTALLOC_PORTABLE);
  if (r != CUDA_SUCCESS) {
    *p = NULL;
    return rt_cu_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? TDSL_E_NOMEM
                                                    : TDSL_E_CUDA,
                      who, r, "cannot allocate %zu bytes of pinned host "
                      "memory", bytes);
  }
  return TDSL_OK;
}

int tdsl_cuda_free_host(void *p) {
  const char *who = "tdsl_cuda_free_host";
  if (!p)
    return TDSL_OK;
  int rc = rt_ready(who);
  if (rc != TDSL_OK || (rc = rt_any_context(who)) != TDSL_OK)
    return rc;
  CUresult r = rt_cu.MemFreeHost(p);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, who, r, "cannot free pinned memory %p", p);
  return TDSL_OK;
}

/* The common start of copies, memset and synchronize: a driver, a current
 * context, and non-NULL pointers when there are bytes to touch. */
static int rt_stream_op(const char *who, const void *dst, const void *src,
                        size_t bytes) {
  int rc = rt_ready(who);
  if (rc != TDSL_OK || (rc = rt_any_context(who)) != TDSL_OK)
    return rc;
  if (bytes > 0 && (!dst || !src))
    return tdsl_set_error(TDSL_E_INVALID, "%s: NULL %s for %zu bytes", who,
                          dst ? "source" : "destination", bytes);
  return TDSL_OK;
}

int tdsl_cuda_memcpy_htod(void *dst, const void *src, size_t bytes) {
  const char *who = "tdsl_cuda_memcpy_htod";
  int rc = rt_stream_op(who, dst, src, bytes);
  if (rc != TDSL_OK || bytes == 0)
    return rc;
  CUresult r = rt_cu.MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, bytes,
                                     (CUstream)rt_stream);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, who, r,
                      "cannot copy %zu bytes from host %p to device %p",
                      bytes, src, dst);
  return TDSL_OK;
}

int tdsl_cuda_memcpy_dtoh(void *dst, const void *src, size_t bytes) {
  const char *who = "tdsl_cuda_memcpy_dtoh";
  int rc = rt_stream_op(who, dst, src, bytes);
  if (rc != TDSL_OK || bytes == 0)
    return rc;
  CUresult r = rt_cu.MemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, bytes,
                                     (CUstream)rt_stream);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, who, r,
                      "cannot copy %zu bytes from device %p to host %p",
                      bytes, src, dst);
  return TDSL_OK;
}

int tdsl_cuda_memcpy_dtod(void *dst, const void *src, size_t bytes) {
  const char *who = "tdsl_cuda_memcpy_dtod";
  int rc = rt_stream_op(who, dst, src, bytes);
  if (rc != TDSL_OK || bytes == 0)
    return rc;
  CUresult r = rt_cu.MemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst,
                                     (CUdeviceptr)(uintptr_t)src, bytes,
                                     (CUstream)rt_stream);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, who, r,
                      "cannot copy %zu bytes from device %p to device %p",
                      bytes, src, dst);
  return TDSL_OK;
}

int tdsl_cuda_memset(void *dst, int byte, size_t bytes) {
  const char *who = "tdsl_cuda_memset";
  int rc = rt_stream_op(who, dst, dst, bytes);
  if (rc != TDSL_OK || bytes == 0)
    return rc;
  CUresult r = rt_cu.MemsetD8Async((CUdeviceptr)(uintptr_t)dst,
                                   (unsigned char)byte, bytes,
                                   (CUstream)rt_stream);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, who, r, "cannot set %zu bytes at %p",
                      bytes, dst);
  return TDSL_OK;
}

int tdsl_cuda_synchronize(void) {
  const char *who = "tdsl_cuda_synchronize";
  int rc = rt_stream_op(who, NULL, NULL, 0);
  if (rc != TDSL_OK)
    return rc;
  CUresult r = rt_cu.StreamSynchronize((CUstream)rt_stream);
  if (r != CUDA_SUCCESS)
    return rt_cu_fail(TDSL_E_CUDA, who, r,
                      "work on the current stream failed (a kernel or copy "
                      "enqueued since the last synchronization)");
  return TDSL_OK;
}
