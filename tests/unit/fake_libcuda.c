/* fake_libcuda.c — a stand-in libcuda.so.1 for test_runtime_cuda on
 * machines without a GPU (ctest test_runtime_cuda_fake puts its directory
 * first on LD_LIBRARY_PATH). It exports only cuGetProcAddress_v2 and
 * cuDriverGetVersion, as a real driver would be searched, and hands out the
 * functions runtime/cuda.c uses. "Device memory" is host memory, so copies
 * are memcpy and the one kernel it knows, set42, really writes 42.
 * Environment: FAKE_CUDA_INIT (cuInit's result), FAKE_CUDA_DEVICES (count,
 * default 2). Device 0 has memory pools, device 1 does not. The test reads
 * counters and arms faults through fake_cuda_*() (dlsym).
 * FAKE_CUDA_EMU=PATH runs kernels for real, on the CPU: every module
 * loaded is then PATH, a shared object of the module's device code made
 * x86-64 (tests/gpu/emu/to_host.py) and linked with tests/gpu/emu/emu.c;
 * a function is its symbol there, and a launch runs emu_launch3 over the
 * grid with the parameters (gpu_exec --emu, tests/gpu/CMakeLists.txt). */
#define _GNU_SOURCE /* memmem */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef struct CUstream_st *CUstream;
/* The struct tags are the ones runtime/cuda.c declares its handles with,
 * so that calls through its function pointers match these definitions
 * exactly (UBSan's function check). */
typedef struct CUctx_st {
  int dev;
} FakeCtx;
typedef struct CUmod_st {
  const char *ptx;
  FakeCtx *ctx;
  struct CUfunc_st *fns; /* looked up so far; freed with the module */
  void *emu;             /* FAKE_CUDA_EMU's shared object, or NULL */
} FakeMod;
typedef struct CUfunc_st {
  char name[64];
  FakeMod *mod;
  struct CUfunc_st *next;
  void (*emu_fn)(void); /* the function in mod->emu */
} FakeFn;
typedef struct FakeAlloc {
  struct FakeAlloc *next;
  void *p;
  void *map;   /* FAKE_CUDA_EMU: the mapping around p (guard pages), */
  size_t span; /*   its length; NULL, 0: p is calloc's */
  FakeCtx *ctx;
} FakeAlloc;

/* What the test asks for with fake_cuda_stat(name). */
typedef struct FakeStats {
  int proc_lookups;    /* cuGetProcAddress_v2 calls */
  int bad_version;     /* lookups not asking for 12000 with flags 0 */
  int inits;           /* cuInit calls */
  int retains;         /* cuDevicePrimaryCtxRetain calls */
  int set_current;     /* cuCtxSetCurrent calls */
  int module_loads;    /* successful cuModuleLoadDataEx calls */
  int launches;        /* cuLaunchKernel calls */
  int shmem_optins;    /* cuFuncSetAttribute calls */
  int allocs;          /* cuMemAlloc */
  int async_allocs;    /* cuMemAllocAsync */
  int async_frees;     /* cuMemFreeAsync */
  int syncs;           /* cuStreamSynchronize */
  int live;            /* device allocations not yet freed */
  int get_current;     /* cuCtxGetCurrent */
  int get_device;      /* cuCtxGetDevice */
  int frees;           /* cuMemFree (cuMemFreeAsync's too) */
} FakeStats;

static FakeStats st;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FakeCtx ctxs[8];
static FakeAlloc *allocs;
static _Thread_local FakeCtx *stack[8]; /* [0] is the current context */
static _Thread_local int depth;         /* pushed contexts above [0] */
static void *last_stream;
static int fail_next_sync;

int fake_cuda_stat(const char *name);
void *fake_cuda_last_stream(void);
int fake_cuda_current_device(void);
void fake_cuda_fail_next_sync(int code);
void fake_cuda_set_launch_hook(void (*hook)(const char *name, const uint64_t *params, int n));
int fake_cuda_last_launch(unsigned grid[3], unsigned block[3], uint64_t *params, int max);
CUresult cuDriverGetVersion(int *v);
CUresult cuGetProcAddress_v2(const char *sym, void **fn, int version,
                             uint64_t flags, int *status);

int fake_cuda_stat(const char *name) {
#define S(f)                                                              \
  if (strcmp(name, #f) == 0)                                              \
    return st.f;
  S(proc_lookups) S(bad_version) S(inits) S(retains) S(set_current)
  S(module_loads) S(launches) S(shmem_optins) S(allocs) S(async_allocs)
  S(async_frees) S(syncs) S(live) S(get_current) S(get_device) S(frees)
#undef S
  return -1;
}
void *fake_cuda_last_stream(void) { return last_stream; }
static FakeCtx *cur(void);
/* The calling thread's current context's device; -1 when none. */
int fake_cuda_current_device(void) { return cur() ? cur()->dev : -1; }
void fake_cuda_fail_next_sync(int code) { fail_next_sync = code; }
/* Called at each launch with the kernel's name and parameters (as
 * fake_cuda_last_launch gives them): a test's stand-in for a kernel's
 * effect on "device" (host) memory. */
static void (*launch_hook)(const char *name, const uint64_t *params, int n);
void fake_cuda_set_launch_hook(void (*hook)(const char *name, const uint64_t *params, int n)) {
  launch_hook = hook;
}

static int ndev(void) {
  const char *e = getenv("FAKE_CUDA_DEVICES");
  return e ? atoi(e) : 2;
}
static FakeCtx *cur(void) { return stack[depth]; }

static CUresult Init(unsigned flags) {
  st.inits++;
  const char *e = getenv("FAKE_CUDA_INIT");
  return e ? atoi(e) : 0;
}
static CUresult DeviceGetCount(int *n) {
  *n = ndev();
  return 0;
}
static CUresult DeviceGet(int *d, int i) {
  *d = i;
  return i >= 0 && i < ndev() ? 0 : 101;
}
static CUresult DeviceGetAttribute(int *v, int attr, int d) {
  *v = attr == 115 && d == 0;
  return 0;
}
static CUresult PrimaryCtxRetain(FakeCtx **c, int d) {
  st.retains++;
  ctxs[d].dev = d;
  *c = &ctxs[d];
  return 0;
}
static CUresult CtxGetCurrent(FakeCtx **c) {
  __atomic_fetch_add(&st.get_current, 1, __ATOMIC_RELAXED);
  *c = cur();
  return 0;
}
static CUresult CtxSetCurrent(FakeCtx *c) {
  st.set_current++;
  stack[depth] = c;
  return 0;
}
static CUresult CtxPushCurrent(FakeCtx *c) {
  stack[++depth] = c;
  return 0;
}
static CUresult CtxPopCurrent(FakeCtx **c) {
  if (depth == 0)
    return 201;
  *c = stack[depth--];
  return 0;
}
static CUresult CtxGetDevice(int *d) {
  __atomic_fetch_add(&st.get_device, 1, __ATOMIC_RELAXED);
  if (!cur())
    return 201;
  *d = cur()->dev;
  return 0;
}
static CUresult ModuleLoadDataEx(FakeMod **m, const void *image, unsigned n,
                                 int *opts, void **vals) {
  if (!cur())
    return 201;
  if (strstr(image, "bogus")) {
    for (unsigned i = 0; i < n; i++)
      if (opts[i] == 5) /* CU_JIT_ERROR_LOG_BUFFER */
        strcpy(vals[i], "fake ptxas: unknown instruction 'bogus'");
    return 218; /* CUDA_ERROR_INVALID_PTX */
  }
  const char *emu = getenv("FAKE_CUDA_EMU");
  void *h = NULL;
  if (emu && !(h = dlopen(emu, RTLD_NOW | RTLD_LOCAL))) {
    fprintf(stderr, "fake libcuda: %s\n", dlerror());
    return 218;
  }
  *m = malloc(sizeof **m);
  (*m)->ptx = image;
  (*m)->ctx = cur();
  (*m)->fns = NULL;
  (*m)->emu = h;
  pthread_mutex_lock(&lock);
  st.module_loads++;
  pthread_mutex_unlock(&lock);
  return 0;
}
static CUresult ModuleUnload(FakeMod *m) {
  while (m->fns) {
    FakeFn *f = m->fns;
    m->fns = f->next;
    free(f);
  }
  if (m->emu)
    dlclose(m->emu);
  free(m);
  return 0;
}
static CUresult ModuleGetFunction(FakeFn **f, FakeMod *m, const char *name) {
  char entry[80] = ".entry ";
  strncat(entry, name, 60);
  if (!strstr(m->ptx, entry))
    return 500; /* CUDA_ERROR_NOT_FOUND */
  void (*emu_fn)(void) = NULL;
  if (m->emu) {
    void *sym = dlsym(m->emu, name);
    if (!sym)
      return 500;
    memcpy(&emu_fn, &sym, sizeof sym);
  }
  *f = malloc(sizeof **f);
  strncpy((*f)->name, name, sizeof (*f)->name - 1);
  (*f)->name[sizeof (*f)->name - 1] = '\0';
  (*f)->mod = m;
  (*f)->emu_fn = emu_fn;
  (*f)->next = m->fns;
  m->fns = *f;
  return 0;
}
static CUresult FuncSetAttribute(FakeFn *f, int attr, int v) {
  st.shmem_optins++;
  return attr == 8 && v <= 227 * 1024 ? 0 : 1;
}
/* The last launch (test_cuda_host): its grid, block and parameters, each
 * read as 8 bytes (every parameter tdsl's kernels take is a .u64), as
 * many as the PTX declares for the entry. */
static struct {
  unsigned grid[3], block[3];
  int nparams;
  uint64_t params[512];
} last;

/* Parameters of `.entry name(` in ptx: its `.param` lines. */
static int entry_params(const char *ptx, const char *name) {
  char head[96];
  snprintf(head, sizeof head, ".entry %s(", name);
  const char *p = strstr(ptx, head);
  if (!p) return -1;
  const char *end = strchr(p, ')');
  int n = 0;
  /* memmem within the list: strstr over the rest of a large PTX text per
   * parameter is quadratic (and slow under ASan's strstr) */
  for (const char *q = p; end && (q = memmem(q, (size_t)(end - q), ".param", 6)); q += 6) n++;
  return n;
}

int fake_cuda_last_launch(unsigned grid[3], unsigned block[3], uint64_t *params, int max) {
  memcpy(grid, last.grid, sizeof last.grid);
  memcpy(block, last.block, sizeof last.block);
  for (int i = 0; i < last.nparams && i < max; i++) params[i] = last.params[i];
  return last.nparams;
}

/* FAKE_CUDA_EMU: the launch as emu.c runs it (blocks of its 256
 * threads; tdsl's kernels launch no other shape), synchronously. */
static CUresult emulate(FakeFn *f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz) {
  void (*launch3)(void (*)(void), const int[3], const uint64_t *, int);
  void *sym = dlsym(f->mod->emu, "emu_launch3");
  if (!sym || bx != 256 || by != 1 || bz != 1 || last.nparams > 512) { /* emu.h's limits */
    fprintf(stderr, "fake libcuda: cannot emulate %s: block [%u, %u, %u], %d parameters\n", f->name,
            bx, by, bz, last.nparams);
    return 1;
  }
  memcpy(&launch3, &sym, sizeof sym);
  launch3(f->emu_fn, (int[3]){(int)gx, (int)gy, (int)gz}, last.params, last.nparams);
  return 0;
}

static CUresult LaunchKernel(FakeFn *f, unsigned gx, unsigned gy, unsigned gz,
                             unsigned bx, unsigned by, unsigned bz,
                             unsigned shmem, CUstream stream, void **args,
                             void **extra) {
  if (!cur())
    return 201;
  if (bx * by * bz > 1024 || !gx || !gy || !gz)
    return 1; /* CUDA_ERROR_INVALID_VALUE */
  st.launches++;
  last.grid[0] = gx, last.grid[1] = gy, last.grid[2] = gz;
  last.block[0] = bx, last.block[1] = by, last.block[2] = bz;
  last.nparams = strcmp(f->name, "set42") && strcmp(f->name, "iota")
                     ? entry_params(f->mod->ptx, f->name) : 0;
  for (int i = 0; i < last.nparams && i < 512; i++)
    memcpy(&last.params[i], args[i], 8);
  last_stream = stream;
  if (launch_hook) launch_hook(f->name, last.params, last.nparams < 512 ? last.nparams : 512);
  if (strcmp(f->name, "set42") == 0)
    **(int **)args[0] = 42;
  if (f->emu_fn)
    return emulate(f, gx, gy, gz, bx, by, bz);
  return 0;
}
/* Device memory: calloc's, or under FAKE_CUDA_EMU a mapping whose last
 * readable byte is within 255 of the allocation's end (starts 256-byte
 * aligned, as cuMemAlloc's), between two inaccessible pages: an emulated
 * kernel that reads or writes past either end of a buffer faults. */
static void *dev_calloc(size_t n, void **map, size_t *span) {
  *map = NULL, *span = 0;
  if (!getenv("FAKE_CUDA_EMU"))
    return calloc(1, n);
  size_t pg = 4096, body = (n + 255) / 256 * 256;
  size_t len = (body + pg - 1) / pg * pg + 2 * pg;
  char *m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return NULL;
  if (mprotect(m + pg, len - 2 * pg, PROT_READ | PROT_WRITE)) {
    munmap(m, len);
    return NULL;
  }
  *map = m, *span = len;
  return m + len - pg - body;
}
static CUresult track(void *p, void *map, size_t span, int *counter) {
  if (!cur())
    return 201;
  FakeAlloc *a = malloc(sizeof *a);
  a->p = p;
  a->map = map, a->span = span;
  a->ctx = cur();
  pthread_mutex_lock(&lock);
  a->next = allocs;
  allocs = a;
  (*counter)++;
  st.live++;
  pthread_mutex_unlock(&lock);
  return 0;
}
static FakeAlloc *find(void *p, int unlink) {
  pthread_mutex_lock(&lock);
  FakeAlloc **pp = &allocs, *a = NULL;
  for (; *pp; pp = &(*pp)->next)
    if ((*pp)->p == p) {
      a = *pp;
      if (unlink) {
        *pp = a->next;
        st.live--;
      }
      break;
    }
  pthread_mutex_unlock(&lock);
  return a;
}
/* cuMemAlloc and cuMemAllocAsync: n bytes of device memory, counted in
 * *counter. */
static CUresult dev_alloc(unsigned long long *p, size_t n, int *counter) {
  if (n > ((size_t)1 << 40))
    return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  void *map;
  size_t span;
  void *m = dev_calloc(n, &map, &span);
  if (!m)
    return 2;
  *p = (unsigned long long)(uintptr_t)m;
  return track(m, map, span, counter);
}
static CUresult MemAlloc(unsigned long long *p, size_t n) { return dev_alloc(p, n, &st.allocs); }
static CUresult MemAllocAsync(unsigned long long *p, size_t n, CUstream s) {
  last_stream = s;
  return dev_alloc(p, n, &st.async_allocs);
}
static CUresult MemFree(unsigned long long p) {
  if (!cur())
    return 201;
  __atomic_fetch_add(&st.frees, 1, __ATOMIC_RELAXED);
  FakeAlloc *a = find((void *)(uintptr_t)p, 1);
  if (!a)
    return 1;
  if (a->map)
    munmap(a->map, a->span);
  else
    free(a->p);
  free(a);
  return 0;
}
static CUresult MemFreeAsync(unsigned long long p, CUstream s) {
  last_stream = s;
  st.async_frees++;
  return MemFree(p);
}
static CUresult MemHostAlloc(void **p, size_t n, unsigned flags) {
  if (!cur())
    return 201;
  *p = calloc(1, n);
  return 0;
}
static CUresult MemFreeHost(void *p) {
  free(p);
  return 0;
}
static CUresult PointerGetAttribute(void *v, int attr, unsigned long long p) {
  FakeAlloc *a = find((void *)(uintptr_t)p, 0);
  if (!a || attr != 1)
    return 1;
  *(FakeCtx **)v = a->ctx;
  return 0;
}
static CUresult MemcpyHtoDAsync(unsigned long long d, const void *s, size_t n,
                                CUstream stream) {
  last_stream = stream;
  memcpy((void *)(uintptr_t)d, s, n);
  return cur() ? 0 : 201;
}
static CUresult MemcpyDtoHAsync(void *d, unsigned long long s, size_t n,
                                CUstream stream) {
  last_stream = stream;
  memcpy(d, (void *)(uintptr_t)s, n);
  return cur() ? 0 : 201;
}
static CUresult MemcpyDtoDAsync(unsigned long long d, unsigned long long s,
                                size_t n, CUstream stream) {
  last_stream = stream;
  memcpy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
  return cur() ? 0 : 201;
}
static CUresult MemsetD8Async(unsigned long long d, unsigned char v, size_t n,
                              CUstream stream) {
  last_stream = stream;
  memset((void *)(uintptr_t)d, v, n);
  return cur() ? 0 : 201;
}
static CUresult StreamSynchronize(CUstream s) {
  if (!cur())
    return 201;
  st.syncs++;
  last_stream = s;
  int r = fail_next_sync;
  fail_next_sync = 0;
  return r;
}
static const struct {
  int code;
  const char *name, *text;
} errs[] = {{1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
            {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
            {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
            {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
            {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
            {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
            {700, "CUDA_ERROR_ILLEGAL_ADDRESS",
             "an illegal memory access was encountered"}};
static CUresult GetErrorName(CUresult r, const char **s) {
  for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
    if (errs[i].code == r) {
      *s = errs[i].name;
      return 0;
    }
  return 1;
}
static CUresult GetErrorString(CUresult r, const char **s) {
  for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
    if (errs[i].code == r) {
      *s = errs[i].text;
      return 0;
    }
  return 1;
}

CUresult cuDriverGetVersion(int *v) {
  *v = 12040;
  return 0;
}

#define FAKE_API(X)                                                       \
  X(cuInit, Init) X(cuDeviceGetCount, DeviceGetCount)                      \
  X(cuDeviceGet, DeviceGet) X(cuDeviceGetAttribute, DeviceGetAttribute)    \
  X(cuDevicePrimaryCtxRetain, PrimaryCtxRetain)                            \
  X(cuCtxGetCurrent, CtxGetCurrent) X(cuCtxSetCurrent, CtxSetCurrent)      \
  X(cuCtxPushCurrent, CtxPushCurrent) X(cuCtxPopCurrent, CtxPopCurrent)    \
  X(cuCtxGetDevice, CtxGetDevice)                                          \
  X(cuModuleLoadDataEx, ModuleLoadDataEx) X(cuModuleUnload, ModuleUnload)  \
  X(cuModuleGetFunction, ModuleGetFunction)                                \
  X(cuFuncSetAttribute, FuncSetAttribute) X(cuLaunchKernel, LaunchKernel)  \
  X(cuMemAlloc, MemAlloc) X(cuMemFree, MemFree)                            \
  X(cuMemAllocAsync, MemAllocAsync) X(cuMemFreeAsync, MemFreeAsync)        \
  X(cuMemHostAlloc, MemHostAlloc) X(cuMemFreeHost, MemFreeHost)            \
  X(cuPointerGetAttribute, PointerGetAttribute)                            \
  X(cuMemcpyHtoDAsync, MemcpyHtoDAsync)                                    \
  X(cuMemcpyDtoHAsync, MemcpyDtoHAsync)                                    \
  X(cuMemcpyDtoDAsync, MemcpyDtoDAsync) X(cuMemsetD8Async, MemsetD8Async)  \
  X(cuStreamSynchronize, StreamSynchronize)                                \
  X(cuGetErrorName, GetErrorName) X(cuGetErrorString, GetErrorString)

CUresult cuGetProcAddress_v2(const char *sym, void **fn, int version,
                             uint64_t flags, int *status) {
  st.proc_lookups++;
  if (version != 12000 || flags != 0)
    st.bad_version++;
  *fn = NULL;
#define X(name, impl)                                                     \
  if (strcmp(sym, #name) == 0) {                                          \
    void (*f)(void) = (void (*)(void))impl;                               \
    memcpy(fn, &f, sizeof f);                                             \
  }
  FAKE_API(X)
#undef X
  if (status)
    *status = *fn ? 0 : 1;
  return *fn ? 0 : 500;
}
