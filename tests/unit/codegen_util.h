/* codegen_util.h — helpers for the CPU backend's end-to-end tests: compile
 * a .tdsl source with tdslc (--emit=obj,header), link the object with the
 * runtime sources into a shared object, dlopen it, call kernels on random
 * tensors with real strides and byte offsets, and compare every output
 * with the reference interpreter (interp_run) under spec §9's tolerances;
 * count lines of tdslc's assembly, build a streaming and a plain copy of a
 * library.  (Shared as static inline functions so that a test uses only
 * what it needs.)
 * Needs: check.h, dlfcn.h, <tdsl/runtime.h>, the front end and
 * interpreter, TDSL_TDSLC, TDSL_CC, TDSL_SOURCE_DIR. */
#ifndef TDSL_TEST_CODEGEN_UTIL_H
#define TDSL_TEST_CODEGEN_UTIL_H

#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tdsl/runtime.h>

#include "frontend/ast.h"
#include "ir/interp.h"

#ifndef TDSL_CC
#define TDSL_CC "cc"
#endif

/* ---- compiling a kernel --------------------------------------------------- */

typedef struct Lib {
  void *so;
  Arena *arena;
  IrModule *m;
  char dir[64];
} Lib;

static inline void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static inline int sh(const char *cmd) {
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Compiles src with tdslc (plus the extra tdslc flags, "" for none),
 * builds k.so, parses src for the interpreter.  kernel non-NULL: the .so
 * also holds a C file that includes the generated header and uses
 * kernel's info (so the header must compile); NULL: the object alone. */
static inline void build_flags(Lib *L, const char *src, const char *kernel,
                               const char *flags) {
  char cmd[4096], path[128], use_c[160] = "";
  snprintf(L->dir, sizeof L->dir, "/tmp/tdsl_cg_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(L->dir));
  snprintf(path, sizeof path, "%s/k.tdsl", L->dir);
  write_text(path, src);
  if (kernel) {
    char use[256];
    snprintf(path, sizeof path, "%s/use.c", L->dir);
    snprintf(use, sizeof use, "#include \"k.h\"\nvoid *tdsl_test_use(void);\n"
             "void *tdsl_test_use(void) { return (void *)%s_info(); }\n", kernel);
    write_text(path, use);
    snprintf(use_c, sizeof use_c, "-I%s %s/use.c", L->dir, L->dir);
  }
  snprintf(cmd, sizeof cmd, "%s %s/k.tdsl -o %s/k.o --emit=obj,header %s", TDSL_TDSLC,
           L->dir, L->dir, flags);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd,
           "%s -std=c17 -Wall -Werror -D_POSIX_C_SOURCE=200809L -shared -fPIC "
           "-I%s/runtime/include -I%s/runtime %s %s/k.o %s/runtime/*.c "
           "-o %s/k.so -lm -lpthread",
           TDSL_CC, TDSL_SOURCE_DIR, TDSL_SOURCE_DIR, use_c, L->dir, TDSL_SOURCE_DIR,
           L->dir);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(path, sizeof path, "%s/k.so", L->dir);
  L->so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(L->so != NULL, "dlopen: %s", dlerror());
  L->arena = arena_new();
  Diag d;
  diag_init(&d, "k.tdsl", src, stderr);
  AstProgram *p = parse_program(L->arena, &d, src);
  ck_assert_ptr_nonnull(p);
  L->m = sema_program(L->arena, &d, p, "k.tdsl");
  ck_assert_ptr_nonnull(L->m);
}

/* build_flags with no extra flags, the header checked through kernel. */
static inline void build(Lib *L, const char *src, const char *kernel) {
  build_flags(L, src, kernel, "");
}

/* Stops the library's thread pool and gives back its allocation cache
 * (tdsl_shutdown, runtime.h) before dlclose: the cache's blocks would
 * otherwise outlive the library that kept them (a leak to
 * LeakSanitizer). */
static inline void unbuild(Lib *L) {
  char cmd[256];
  void (*shutdown)(void);
  *(void **)&shutdown = dlsym(L->so, "tdsl_shutdown");
  if (shutdown) shutdown();
  dlclose(L->so);
  arena_free(L->arena);
  snprintf(cmd, sizeof cmd, "rm -rf %s", L->dir);
  sh(cmd);
}

static inline void *sym(Lib *L, const char *name) {
  void *p = dlsym(L->so, name);
  ck_assert_msg(p != NULL, "no symbol %s", name);
  return p;
}

static inline const IrKernel *kernel_of(Lib *L, const char *name) {
  for (int i = 0; i < L->m->nkernels; i++)
    if (!strcmp(L->m->kernels[i]->name, name)) return L->m->kernels[i];
  ck_abort_msg("no kernel %s", name);
  return NULL;
}

/* Calls a kernel whose parameters are all tensors (1 to 15 of them). */
#define P void *
static inline int call(void *fn, void **x, int n) {
  switch (n) {
  case 1: return ((int (*)(P))fn)(x[0]);
  case 2: return ((int (*)(P, P))fn)(x[0], x[1]);
  case 3: return ((int (*)(P, P, P))fn)(x[0], x[1], x[2]);
  case 4: return ((int (*)(P, P, P, P))fn)(x[0], x[1], x[2], x[3]);
  case 5: return ((int (*)(P, P, P, P, P))fn)(x[0], x[1], x[2], x[3], x[4]);
  case 6: return ((int (*)(P, P, P, P, P, P))fn)(x[0], x[1], x[2], x[3], x[4], x[5]);
  case 7:
    return ((int (*)(P, P, P, P, P, P, P))fn)(x[0], x[1], x[2], x[3], x[4], x[5], x[6]);
  case 8:
    return ((int (*)(P, P, P, P, P, P, P, P))fn)(x[0], x[1], x[2], x[3], x[4], x[5],
                                                  x[6], x[7]);
  case 9:
    return ((int (*)(P, P, P, P, P, P, P, P, P))fn)(x[0], x[1], x[2], x[3], x[4], x[5],
                                                     x[6], x[7], x[8]);
  case 10:
    return ((int (*)(P, P, P, P, P, P, P, P, P, P))fn)(x[0], x[1], x[2], x[3], x[4],
                                                        x[5], x[6], x[7], x[8], x[9]);
  case 11:
    return ((int (*)(P, P, P, P, P, P, P, P, P, P, P))fn)(x[0], x[1], x[2], x[3], x[4],
                                                           x[5], x[6], x[7], x[8], x[9],
                                                           x[10]);
  case 12:
    return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P))fn)(
        x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11]);
  case 13:
    return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P))fn)(
        x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12]);
  case 14:
    return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P))fn)(
        x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12], x[13]);
  case 15:
    return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P, P))fn)(
        x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12], x[13],
        x[14]);
  default: ck_abort_msg("unsupported arity %d", n);
  }
  return 0;
}
#undef P

/* ---- tensors -------------------------------------------------------------- */

typedef struct Ten {
  DLTensor t;
  HostTensor h;
  int64_t shape[8], stride[8];
  void *store;
  size_t bytes;
} Ten;

static inline DLDataType dl_of(DType d) {
  static const uint8_t code[] = {6, 0, 1, 0, 0, 0, 2, 4, 2, 2};
  return tdsl_dtype_make(code[d], (uint8_t)(8 * dtype_size(d)));
}

static unsigned long long rng = 88172645463325252ULL;
static inline double urand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static inline void fill_random(DType d, void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    Scalar v;
    if (dtype_is_float(d)) v.f = 4 * urand() - 2;
    else if (d == DT_BOOL) v.i = urand() < 0.5;
    else if (d == DT_U8) v.i = (int64_t)(urand() * 256);
    else v.i = (int64_t)(urand() * 201) - 100;
    if (d == DT_F16) v.f = f16_to_f32(f32_to_f16((float)v.f));
    if (d == DT_BF16) v.f = bf16_to_f32(f32_to_bf16((float)v.f));
    scalar_store(d, (char *)p + i * dtype_size(d), v);
  }
}

/* A tensor over fresh random storage; strides NULL: row-major (and the
 * descriptor's strides pointer is NULL too when null_strides). */
static inline void ten(Ten *x, DType d, int rank, const int64_t *shape,
                const int64_t *strides, int64_t off, bool null_strides) {
  memset(x, 0, sizeof *x);
  int64_t st = 1, ext = off;
  for (int i = rank - 1; i >= 0; i--) {
    x->shape[i] = shape[i];
    x->stride[i] = strides ? strides[i] : st;
    st *= shape[i] > 1 ? shape[i] : 1;
    if (shape[i] > 0) ext += (shape[i] - 1) * x->stride[i];
  }
  x->bytes = (size_t)(ext + 1) * (size_t)dtype_size(d);
  x->store = malloc(x->bytes + 64);
  fill_random(d, x->store, ext + 1);
  x->t.data = x->store;
  x->t.device.device_type = kDLCPU;
  x->t.ndim = rank;
  x->t.dtype = dl_of(d);
  x->t.shape = x->shape;
  x->t.strides = null_strides ? NULL : x->stride;
  x->t.byte_offset = (uint64_t)(off * dtype_size(d));
  x->h.dtype = d;
  x->h.rank = rank;
  memcpy(x->h.shape, x->shape, sizeof x->shape);
  memcpy(x->h.stride, x->stride, sizeof x->stride);
  x->h.offset = off;
  x->h.data = x->store;
}

/* An output: row-major, filled with the byte 0x5A. */
static inline void out_ten(Ten *x, DType d, int rank, const int64_t *shape) {
  ten(x, d, rank, shape, NULL, 0, false);
  memset(x->store, 0x5A, x->bytes);
}

static inline void ten_free(Ten *x) { free(x->store); }

static inline bool untouched(const Ten *x) {
  for (size_t i = 0; i < x->bytes; i++)
    if (((unsigned char *)x->store)[i] != 0x5A) return false;
  return true;
}

/* Tolerances for comparing with the interpreter.  k < 0: spec §9's by
 * dtype (looser for reductions).  k >= 0: a sum of k products of values
 * in [-2, 2] (matmul, conv2d), whose f32 accumulation error grows with k
 * while the interpreter accumulates in double. */
static inline void tolerance(DType d, bool reduction, int64_t k, double *rtol,
                             double *atol) {
  *rtol = *atol = 0;
  if (k >= 0) {
    if (d == DT_F64) *rtol = 1e-12, *atol = 1e-12 * (double)(k + 1);
    if (d == DT_F32) *rtol = 1e-5, *atol = 4e-7 * (double)(k + 1);
    if (d == DT_F16 || d == DT_BF16) *rtol = 1e-2, *atol = 1e-2 + 4e-7 * (double)(k + 1);
    return;
  }
  if (d == DT_F64) *rtol = 1e-10, *atol = 1e-12;
  if (d == DT_F32) *rtol = reduction ? 1e-4 : 1e-5, *atol = reduction ? 1e-5 : 1e-6;
  if (d == DT_F16 || d == DT_BF16) *rtol = *atol = 1e-2;
}

/* Compares out (row-major) with the interpreter's ref within tolerance()
 * (reduction, k); NaN matches NaN and equal values (infinities) match. */
static inline void compare_k(const Ten *out, const HostTensor *ref, bool reduction,
                             int64_t k, const char *what) {
  DType d = ref->dtype;
  int64_t n = host_tensor_numel(ref);
  ck_assert_int_eq(out->h.dtype, d);
  double rtol, atol;
  tolerance(d, reduction, k, &rtol, &atol);
  for (int64_t i = 0; i < n; i++) {
    int64_t addr = out->h.offset, rest = i;
    for (int j = ref->rank - 1; j >= 0; j--) {
      addr += rest % ref->shape[j] * out->stride[j];
      rest /= ref->shape[j];
    }
    Scalar a = scalar_load(d, (char *)out->store + addr * dtype_size(d));
    Scalar b = scalar_load(d, (char *)ref->data + i * dtype_size(d));
    if (dtype_is_float(d)) {
      bool ok = (isnan(a.f) && isnan(b.f)) || a.f == b.f ||
                fabs(a.f - b.f) <= atol + rtol * fabs(b.f);
      ck_assert_msg(ok, "%s: element %lld: got %.9g, want %.9g", what,
                    (long long)i, a.f, b.f);
    } else {
      ck_assert_msg(a.i == b.i, "%s: element %lld: got %lld, want %lld", what,
                    (long long)i, (long long)a.i, (long long)b.i);
    }
  }
}

/* compare_k with spec §9's tolerances. */
static inline void compare(const Ten *out, const HostTensor *ref, bool reduction,
                           const char *what) {
  compare_k(out, ref, reduction, -1, what);
}

/* Calls kernel `name` (tensor parameters only) on ins then outs; it must
 * return 0. */
static inline void call_ok(Lib *L, const char *name, Ten *ins, int nin, Ten *outs,
                           int nout) {
  void *a[16];
  ck_assert_int_le(nin + nout, 16);
  for (int i = 0; i < nin; i++) a[i] = &ins[i].t;
  for (int i = 0; i < nout; i++) a[nin + i] = &outs[i].t;
  int rc = call(sym(L, name), a, nin + nout);
  const char *(*last)(void) = (const char *(*)(void))sym(L, "tdsl_last_error");
  ck_assert_msg(rc == 0, "%s returned %d: %s", name, rc, last());
}

/* Runs kernel `name` on ins and checks every output against the
 * interpreter within tolerance(reduction, k). */
static inline void run_and_compare_k(Lib *L, const char *name, Ten *ins, int nin,
                                     Ten *outs, int nout, bool reduction, int64_t k) {
  const IrKernel *kn = kernel_of(L, name);
  InterpArg ia[16];
  HostTensor ref[16];
  memset(ia, 0, sizeof ia);
  call_ok(L, name, ins, nin, outs, nout);
  for (int i = 0; i < nin; i++) ia[i].t = ins[i].h;
  char err[256];
  ck_assert_int_eq(interp_run(L->m, kn, ia, ref, err, sizeof err), 0);
  for (int i = 0; i < nout; i++) {
    char what[64];
    snprintf(what, sizeof what, "%s out%d", name, i);
    compare_k(&outs[i], &ref[i], reduction, k, what);
    host_tensor_free(&ref[i]);
  }
}

/* run_and_compare_k with spec §9's tolerances. */
static inline void run_and_compare(Lib *L, const char *name, Ten *ins, int nin,
                                   Ten *outs, int nout, bool reduction) {
  run_and_compare_k(L, name, ins, nin, outs, nout, reduction, -1);
}

/* ---- thread counts and reports ------------------------------------------ */

static inline void set_threads(Lib *L, int n) {
  ((void (*)(int))sym(L, "tdsl_set_num_threads"))(n);
}

static inline void reset_out(Ten *o) { memset(o->store, 0x5A, o->bytes); }

static inline bool same_bytes(const Ten *a, const Ten *b) {
  return a->bytes == b->bytes && !memcmp(a->store, b->store, a->bytes);
}

/* Runs `name` at 1, 3 and 2 threads: every output bitwise equal to the
 * 1-thread run (the split of work never changes a sum); the outputs hold
 * the last run's values. */
static inline void same_at_threads(Lib *L, const char *name, Ten *ins, int nin, Ten *outs,
                                   int nout) {
  Ten one[8];
  ck_assert_int_le(nout, 8);
  set_threads(L, 1);
  call_ok(L, name, ins, nin, outs, nout);
  for (int i = 0; i < nout; i++) {
    one[i] = outs[i];
    one[i].store = malloc(outs[i].bytes);
    memcpy(one[i].store, outs[i].store, outs[i].bytes);
  }
  for (int th = 3; th >= 2; th--) {
    set_threads(L, th);
    for (int i = 0; i < nout; i++) reset_out(&outs[i]);
    call_ok(L, name, ins, nin, outs, nout);
    for (int i = 0; i < nout; i++)
      ck_assert_msg(same_bytes(&outs[i], &one[i]), "%s out%d differs at %d threads", name, i, th);
  }
  for (int i = 0; i < nout; i++) free(one[i].store);
}

/* same_at_threads, then a run compared with the interpreter. */
static inline void threads_and_reference(Lib *L, const char *name, Ten *ins, int nin,
                                         Ten *outs, int nout, bool reduction) {
  same_at_threads(L, name, ins, nin, outs, nout);
  for (int i = 0; i < nout; i++) reset_out(&outs[i]);
  run_and_compare(L, name, ins, nin, outs, nout, reduction);
}

/* Occurrences of `what` in tdslc's text report on src at -O2. */
static inline int report_lines(const char *src, const char *what) {
  char dir[] = "/tmp/tdsl_rep_XXXXXX", path[64], cmd[512], line[4096];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/k.tdsl", dir);
  write_text(path, src);
  snprintf(cmd, sizeof cmd, "%s %s --emit=report -o - -O2", TDSL_TDSLC, path);
  FILE *f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  int n = 0;
  while (fgets(line, sizeof line, f)) n += strstr(line, what) != NULL;
  ck_assert_int_eq(pclose(f), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ck_assert_int_eq(sh(cmd), 0);
  return n;
}

/* ---- assembly and streaming stores --------------------------------------- */

/* Occurrences of `what` (a grep pattern) in the assembly tdslc writes for
 * src with the extra tdslc flags ("" for none). */
static inline int asm_count(const char *src, const char *flags, const char *what) {
  char cmd[1024], path[] = "/tmp/tdsl_asm_XXXXXX", file[128];
  ck_assert_ptr_nonnull(mkdtemp(path));
  snprintf(file, sizeof file, "%s/k.tdsl", path);
  write_text(file, src);
  snprintf(cmd, sizeof cmd, "%s %s %s --emit=asm -o - | grep -c '%s' > %s/n.txt", TDSL_TDSLC,
           file, flags, what, path);
  sh(cmd); /* grep -c exits 1 when it counts 0; the count says it */
  snprintf(file, sizeof file, "%s/n.txt", path);
  FILE *f = fopen(file, "r");
  int n = -1;
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fscanf(f, "%d", &n), 1);
  fclose(f);
  snprintf(cmd, sizeof cmd, "rm -rf %s", path);
  sh(cmd);
  return n;
}

/* Two builds of src (build(): header checked through kernel) whose
 * runtimes read TDSL_STREAM_MIN_BYTES at their first call: *S with it 0
 * (every eligible output streams), *P with it huge (none does); the
 * variable is 0 afterwards. */
static inline void build_stream_pair(Lib *S, Lib *P, const char *src, const char *kernel) {
  build(S, src, kernel);
  build(P, src, kernel);
  setenv("TDSL_STREAM_MIN_BYTES", "999999999999999", 1);
  int64_t (*plain_min)(void) = (int64_t(*)(void))sym(P, "tdsl_stream_min_bytes");
  ck_assert(plain_min() == 999999999999999);
  setenv("TDSL_STREAM_MIN_BYTES", "0", 1);
  int64_t (*stream_min)(void) = (int64_t(*)(void))sym(S, "tdsl_stream_min_bytes");
  ck_assert(stream_min() == 0);
}

#endif
