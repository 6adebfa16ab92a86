/* gpu_exec.c — the PyTorch manifest replayed through CUDA kernels.
 *
 *   gpu_exec build OUTDIR [--target=cuda:sm_80] [--tdslc PATH] [--cc CC]
 *                  [--src DIR] [--only S1,S2..] [--jobs N] [--emu CLANG]
 *   gpu_exec run OUTDIR [--device cuda|cpu] [--only S1,S2..] [--jobs N]
 *
 * build (on a machine with tdslc and a C compiler): for every kernel line
 * of DIR/tests/pytorch/manifest.txt (not tol "error"; "f.tdsl@O0" builds
 * at -O0, else -O2) runs `tdslc f.tdsl --kernel=K --target=T
 * --emit=obj,header`, writes a shim from the generated header
 *
 *   int tdsl_case_call(void **a);          K(a[0], *(float *)a[1], ...)
 *   const tdsl_kernel_info *tdsl_case_info(void);           K_info()
 *
 * (tensors are DLTensor *, scalars pointers to a value of the kernel's C
 * type, params then results as in spec §7.1) and links object, shim and
 * the runtime (the sources in runtime/, compiled once into OUTDIR/work/rt) into
 * OUTDIR/caseNNN.so, one per (file, kernel, opt).  The .npy files the
 * lines name are copied to OUTDIR/data, and OUTDIR/cases.txt lists the
 * built lines: "caseNNN.so K tol inputs -- outputs" (and "#unbuilt LINE"
 * for the others).  A kernel that does not compile or link fails the
 * build (exit 1), the others are built.  --emu CLANG (clang 19) also
 * builds OUTDIR/caseNNN.emu.so: the case's device module as host code
 * (tests/gpu/emu/module.sh: to_host.py, linked with emu.c), which the
 * stand-in driver tests/unit/fake_libcuda.c runs when a child finds it
 * beside the case (run sets FAKE_CUDA_EMU): with that driver first on
 * LD_LIBRARY_PATH, `run --device cuda` checks the CUDA kernels on a
 * machine without a GPU (tests/gpu/exec.sh, ctest gpu_exec).
 *
 * run (on the GPU machine: needs only libc, libcuda.so.1 and OUTDIR):
 * every case runs in a forked child, so a crash or a CUDA fault (which
 * poisons the context) fails that case only; the parent never calls the
 * runtime.  The child dlopens the case, reads K_info through the shim for
 * dtypes, ranks and layouts, uploads the inputs (channels_last ones with
 * channels-last strides), asks a shape query (every output's data NULL)
 * and compares the shapes with the expected files, then calls the kernel
 * in several storages (as declared with strides NULL; a byte_offset;
 * `strided` params transposed or with padded rows), the outputs' device
 * memory first set to a sentinel byte.  After tdsl_cuda_synchronize the
 * outputs come back and are compared with PyTorch's under spec §9; bytes
 * around output elements must keep the sentinel and inputs must be
 * unchanged.  --device cpu runs the same on cases built with
 * --target=host in host memory (to test this harness without a GPU).
 * --only S1,S2 keeps the lines (manifest lines for build, cases.txt lines
 * for run) that contain one of the strings.
 * --jobs N runs N cases at once (default 1: timings stay clean).  Each
 * child creates its own CUDA context (about 0.3 s on an H100 machine) and
 * its first call JIT-compiles the PTX (0.1 to 0.6 s): the 198 cases took
 * 36 s there with --jobs 8.  The 5 slowest cases by their fastest call
 * are printed with their first call's time.
 * When tdsl_cuda_device_count fails (no driver, no GPU) run prints
 * "gpu_exec: skipped: MSG" and exits 77.  Exit: 0 all passed, 1 failures,
 * 2 usage or I/O errors, 77 skipped.
 *
 * Needs: driver/npy.c, ir/dtype.c, tests/unit/npy_compare.h, dlopen,
 * fork; no LLVM and no front end (the header and K_info tell the types). */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tdsl/runtime.h>

#include "../unit/npy_compare.h"

#ifndef TDSL_SOURCE_DIR
#define TDSL_SOURCE_DIR "."
#endif
#ifndef TDSL_TDSLC
#define TDSL_TDSLC "tdslc"
#endif
#ifndef TDSL_CC
#define TDSL_CC "cc"
#endif
#ifndef TDSL_DLPACK_INCLUDE
#define TDSL_DLPACK_INCLUDE "/usr/include"
#endif

#define MAX_CASES 1024
#define MAX_ARGS 64
#define FILL_IN 0xFF  /* bytes around input elements */
#define FILL_OUT 0xA5 /* the sentinel of output storage */
#define CASE_TIMEOUT_S 120 /* a case running longer (a hung kernel) fails */

/* ---- host tensors (what driver/npy.c needs of ir/interp.c) --------------- */

int64_t host_tensor_numel(const HostTensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) n *= t->shape[d];
  return n;
}

int host_tensor_alloc(HostTensor *t, DType dt, int rank, const int64_t *shape) {
  memset(t, 0, sizeof *t);
  if (rank < 0 || rank > TDSL_MAX_RANK) return -1;
  int64_t n = 1, st = 1;
  for (int d = rank - 1; d >= 0; d--) {
    if (shape[d] < 0 || (shape[d] > 0 && n > INT64_MAX / 16 / shape[d])) return -1;
    n *= shape[d];
    t->shape[d] = shape[d];
    t->stride[d] = st;
    st *= shape[d] > 1 ? shape[d] : 1;
  }
  t->dtype = dt;
  t->rank = rank;
  t->owned = t->data = calloc((size_t)(n > 0 ? n : 1), (size_t)dtype_size(dt));
  return t->data ? 0 : -1;
}

void host_tensor_free(HostTensor *t) {
  free(t->owned);
  memset(t, 0, sizeof *t);
}

/* ---- small helpers -------------------------------------------------------- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int sh(const char *cmd) {
  int rc = system(cmd);
  return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* printf into a fresh malloc'd string. */
static char *fmt(const char *f, ...) TDSL_PRINTF(1, 2);
static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char one[1];
  int n = vsnprintf(one, sizeof one, f, ap);
  va_end(ap);
  char *s = malloc((size_t)n + 1);
  if (!s) exit(2);
  va_start(ap, f);
  vsnprintf(s, (size_t)n + 1, f, ap);
  va_end(ap);
  return s;
}

static int copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
  char buf[65536];
  size_t n;
  int rc = in && out ? 0 : -1;
  while (!rc && (n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) rc = -1;
  if (in) fclose(in);
  if (out && fclose(out)) rc = -1;
  return rc;
}

/* The first `max` bytes of a file, "" when missing (malloc'd). */
static char *read_head(const char *path, size_t max) {
  char *s = npyc_slurp(path);
  if (!s) return fmt("%s", "");
  if (strlen(s) > max) strcpy(s + max - 4, "...");
  return s;
}

/* --only: true when `line` contains one of the comma-separated `only`
 * (NULL: every line). */
static bool selected(const char *line, const char *only) {
  if (!only) return true;
  for (const char *p = only; *p;) {
    size_t n = strcspn(p, ",");
    char sub[256];
    snprintf(sub, sizeof sub, "%.*s", (int)n, p);
    if (n && strstr(line, sub)) return true;
    p += n + (p[n] == ',');
  }
  return false;
}

/* ---- build ---------------------------------------------------------------- */

typedef struct Case {
  char text[8192];  /* the manifest line, l points into it */
  char line[8192];  /* the same, unparsed */
  ManifestLine l;
  int build;        /* index of the case that builds (file, kernel, opt) */
  int num;          /* caseNNN of that build */
  int status;       /* builder's exit status (builds only) */
} Case;

typedef struct BuildOpts {
  const char *out, *target, *tdslc, *cc, *src, *only;
  const char *emu; /* --emu CLANG: clang 19 for the emulated device code */
  int jobs;
} BuildOpts;

/* Writes dir/shim.c from dir/k.h: the kernel's prototype is one line
 * "int K(ARG, ARG, ...);" whose ARGs are "const DLTensor *x",
 * "DLTensor *out0" or "CTYPE name". */
static int write_shim(const char *dir, const char *kernel) {
  char *hpath = fmt("%s/k.h", dir), *h = npyc_slurp(hpath);
  free(hpath);
  if (!h) return -1;
  char *want = fmt("\nint %s(", kernel), *p = strstr(h, want);
  char *end = p ? strstr(p, ");\n") : NULL;
  if (!end) return free(want), free(h), -1;
  p += strlen(want);
  *end = 0;
  char *spath = fmt("%s/shim.c", dir);
  FILE *f = fopen(spath, "w");
  free(spath);
  if (!f) return free(want), free(h), -1;
  fprintf(f, "/* generated by gpu_exec (tests/gpu/gpu_exec.c) */\n#include \"k.h\"\n"
             "int tdsl_case_call(void **a);\nconst tdsl_kernel_info *tdsl_case_info(void);\n"
             "int tdsl_case_call(void **a) {\n  return %s(", kernel);
  int n = 0;
  for (char *save = NULL, *arg = strtok_r(p, ",", &save); arg;
       arg = strtok_r(NULL, ",", &save), n++) {
    while (*arg == ' ' || *arg == '\n') arg++;
    char *sp = strrchr(arg, ' ');
    if (!sp) break;
    *sp = 0;
    if (strstr(arg, "DLTensor"))
      fprintf(f, "%s(%sDLTensor *)a[%d]", n ? ", " : "", strstr(arg, "const") ? "const " : "", n);
    else fprintf(f, "%s*(const %s *)a[%d]", n ? ", " : "", arg, n);
  }
  fprintf(f, ");\n}\nconst tdsl_kernel_info *tdsl_case_info(void) { return %s_info(); }\n",
          kernel);
  free(want);
  free(h);
  return fclose(f) ? -1 : 0;
}

/* --emu: caseNNN.emu.so, the case's device module as host code that
 * tests/unit/fake_libcuda.c runs on the CPU (FAKE_CUDA_EMU), made by
 * tests/gpu/emu/module.sh with clang 19. */
static int build_emu(const BuildOpts *o, const Case *c, const char *dir) {
  char *cmd = fmt("cd '%s' && '%s/tests/gpu/emu/module.sh' '%s' ../../case%03d.emu.so '%s' "
                  "'%s/tests/pytorch/%s' --kernel='%s' --target='%s' -%s > emu.err 2>&1",
                  dir, o->src, o->emu, c->num, o->tdslc, o->src, c->l.file, c->l.kernel, o->target,
                  c->l.opt[0] ? c->l.opt : "O2");
  int rc = sh(cmd);
  free(cmd);
  return rc;
}

/* Child of the build: tdslc, the shim, the shared object.  Exit status:
 * 0 built, 1 tdslc failed, 2 no shim, 3 the link failed, 5 the
 * emulation's build failed (--emu). */
static int build_one(const BuildOpts *o, const Case *c) {
  char *dir = fmt("%s/work/%03d", o->out, c->num);
  char *cmd = fmt("cd '%s' && '%s' '%s/tests/pytorch/%s' --kernel='%s' --target='%s' -%s "
                  "--emit=obj,header -o k.o > tdslc.err 2>&1",
                  dir, o->tdslc, o->src, c->l.file, c->l.kernel, o->target,
                  c->l.opt[0] ? c->l.opt : "O2");
  if (sh(cmd)) return 1;
  free(cmd);
  if (write_shim(dir, c->l.kernel)) return 2;
  cmd = fmt("cd '%s' && %s -std=c17 -O2 -Wall -Werror -shared -fPIC -s -I'%s/runtime/include' "
            "-I'%s' -I. shim.c k.o ../rt/*.o -o ../../case%03d.so -lm -lpthread -ldl "
            "> cc.err 2>&1",
            dir, o->cc, o->src, TDSL_DLPACK_INCLUDE, c->num);
  if (sh(cmd)) return 3;
  free(cmd);
  cmd = fmt("%s/k.o", dir); /* in the shared object now; OUTDIR is carried */
  unlink(cmd);
  free(cmd);
  if (o->emu && build_emu(o, c, dir)) return 5;
  return 0;
}

/* Runs build_one for every build, o->jobs at a time. */
static void build_parallel(const BuildOpts *o, Case *cs, int n) {
  pid_t pids[64] = {0};
  int idx[64], running = 0, next = 0, width = o->jobs < 1 ? 1 : o->jobs > 64 ? 64 : o->jobs;
  for (;;) {
    while (next < n && cs[next].build != next) next++;
    if (running < width && next < n) {
      int slot = 0;
      while (pids[slot]) slot++;
      fflush(NULL);
      pid_t p = fork();
      if (p < 0) exit(2);
      if (p == 0) _exit(build_one(o, &cs[next]));
      pids[slot] = p, idx[slot] = next++, running++;
      continue;
    }
    if (!running) break;
    int st;
    pid_t p = wait(&st);
    if (p < 0) break;
    for (int s = 0; s < width; s++)
      if (pids[s] == p) {
        cs[idx[s]].status = WIFEXITED(st) ? WEXITSTATUS(st) : 4;
        pids[s] = 0, running--;
      }
  }
}

static void report_build_failure(const BuildOpts *o, const Case *c) {
  static const char *const what[] = {"", "tdslc failed", "no prototype in the header",
                                     "linking the shared object failed", "the builder crashed",
                                     "building the emulation failed"};
  char *log = fmt("%s/work/%03d/%s", o->out, c->num,
                  c->status == 3 ? "cc.err" : c->status == 5 ? "emu.err" : "tdslc.err");
  char *text = read_head(log, 2000);
  printf("FAIL build %s%s%s %s for %s: %s:\n%s%s", c->l.file, c->l.opt[0] ? "@" : "", c->l.opt,
         c->l.kernel, o->target, what[c->status > 5 ? 4 : c->status], text,
         text[0] && text[strlen(text) - 1] != '\n' ? "\n" : "");
  free(log);
  free(text);
}

/* Copies the .npy files a line names (inputs and outputs) into OUTDIR. */
static int copy_data(const BuildOpts *o, const ManifestLine *l) {
  for (int i = 0; i < l->nin + l->nout; i++) {
    const char *spec = i < l->nin ? l->in[i] : l->out[i - l->nin];
    const char *path = strchr(spec, '=');
    if (!path || !strstr(path, ".npy")) continue; /* a scalar */
    path++;
    char *from = fmt("%s/tests/pytorch/%s", o->src, path), *to = fmt("%s/%s", o->out, path);
    int rc = copy_file(from, to);
    if (rc) fprintf(stderr, "gpu_exec: cannot copy %s to %s\n", from, to);
    free(from);
    free(to);
    if (rc) return -1;
  }
  return 0;
}

static int read_manifest(const BuildOpts *o, Case *cs) {
  char *path = fmt("%s/tests/pytorch/manifest.txt", o->src);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "gpu_exec: cannot read %s\n", path);
    exit(2);
  }
  free(path);
  int n = 0, builds = 0;
  while (n < MAX_CASES && fgets(cs[n].text, sizeof cs[n].text, f)) {
    Case *c = &cs[n];
    memcpy(c->line, c->text, sizeof c->line);
    c->line[strcspn(c->line, "\n")] = 0;
    if (!manifest_parse_line(c->text, &c->l) || !strcmp(c->l.tol, "error")) continue;
    if (!selected(c->line, o->only)) continue;
    c->build = n;
    for (int i = 0; i < n; i++)
      if (!strcmp(cs[i].l.file, c->l.file) && !strcmp(cs[i].l.kernel, c->l.kernel) &&
          !strcmp(cs[i].l.opt, c->l.opt))
        c->build = i;
    c->num = c->build == n ? builds++ : cs[c->build].num;
    n++;
  }
  fclose(f);
  return n;
}

/* The absolute form of an existing path, in buf (PATH_MAX bytes); exits
 * when it is missing. */
static const char *absolute(const char *path, char *buf) {
  if (!realpath(path, buf)) {
    fprintf(stderr, "gpu_exec: %s: %s\n", path, strerror(errno));
    exit(2);
  }
  return buf;
}

/* Makes the paths absolute (the builders run in OUTDIR/work/NNN), empties
 * OUTDIR and compiles the runtime into OUTDIR/work/rt. */
static void prepare_outdir(BuildOpts *o) {
  static char src[PATH_MAX], tdslc[PATH_MAX], out[PATH_MAX];
  o->src = absolute(o->src, src);
  if (strchr(o->tdslc, '/')) o->tdslc = absolute(o->tdslc, tdslc);
  char *cmd = fmt("mkdir -p '%s'", o->out);
  if (sh(cmd)) fprintf(stderr, "gpu_exec: cannot create %s\n", o->out), exit(2);
  free(cmd);
  o->out = absolute(o->out, out);
  cmd = fmt("cd '%s' && rm -rf work data cases.txt case*.so && "
            "mkdir -p work/rt data && cd work/rt && %s -std=c17 -O2 -fPIC "
            "-D_POSIX_C_SOURCE=200809L -I'%s/runtime/include' -I'%s/runtime' -I'%s' "
            "-c '%s'/runtime/*.c",
            o->out, o->cc, o->src, o->src, TDSL_DLPACK_INCLUDE, o->src);
  if (sh(cmd)) fprintf(stderr, "gpu_exec: compiling the runtime failed: %s\n", cmd), exit(2);
  free(cmd);
}

static int cmd_build(BuildOpts *o) {
  static Case cs[MAX_CASES];
  prepare_outdir(o);
  int n = read_manifest(o, cs);
  for (int i = 0; i < n; i++) {
    if (cs[i].build != i) continue;
    char *dir = fmt("%s/work/%03d", o->out, cs[i].num);
    if (mkdir(dir, 0755)) return fprintf(stderr, "gpu_exec: mkdir %s failed\n", dir), 2;
    free(dir);
  }
  double t0 = now();
  build_parallel(o, cs, n);
  char *list = fmt("%s/cases.txt", o->out);
  FILE *f = fopen(list, "w");
  if (!f) return fprintf(stderr, "gpu_exec: cannot write %s\n", list), 2;
  fprintf(f, "# gpu_exec cases: target=%s\n", o->target);
  int built = 0, failed = 0;
  for (int i = 0; i < n; i++) {
    const Case *b = &cs[cs[i].build];
    if (b->status) {
      if (cs[i].build == i) report_build_failure(o, b), failed++;
      fprintf(f, "#unbuilt %s\n", cs[i].line);
      continue;
    }
    if (copy_data(o, &cs[i].l)) return 2;
    const char *rest = strchr(strchr(cs[i].line, ' ') + 1, ' '); /* " tol in -- out" */
    fprintf(f, "case%03d.so %s%s\n", b->num, cs[i].l.kernel, rest);
    built += cs[i].build == i;
  }
  fclose(f);
  free(list);
  printf("gpu_exec: built %d kernels for %s (%d manifest lines) in %.1f s, %d failed\n", built,
         o->target, n, now() - t0, failed);
  return failed ? 1 : 0;
}

/* ---- memory on the device under test ------------------------------------- */

/* The runtime's CUDA functions, or host stand-ins for --device cpu. */
typedef struct Mem {
  int device_type;
  int (*malloc_fn)(void **p, size_t bytes, int device_id);
  int (*free_fn)(void *p);
  int (*htod)(void *dst, const void *src, size_t bytes);
  int (*dtoh)(void *dst, const void *src, size_t bytes);
  int (*memset_fn)(void *dst, int byte, size_t bytes);
  int (*sync)(void);
} Mem;

static int host_malloc(void **p, size_t bytes, int device_id) {
  return (*p = malloc(bytes ? bytes : 1)) ? 0 : TDSL_E_NOMEM;
}
static int host_free(void *p) { return free(p), 0; }
static int host_copy(void *dst, const void *src, size_t bytes) {
  return memcpy(dst, src, bytes), 0;
}
static int host_memset(void *dst, int byte, size_t bytes) { return memset(dst, byte, bytes), 0; }
static int host_sync(void) { return 0; }

static const char *mem_load(Mem *m, void *so, bool cuda) {
  if (!cuda) {
    *m = (Mem){kDLCPU, host_malloc, host_free, host_copy, host_copy, host_memset, host_sync};
    return NULL;
  }
  static const char *const names[] = {"tdsl_cuda_malloc", "tdsl_cuda_free",
                                      "tdsl_cuda_memcpy_htod", "tdsl_cuda_memcpy_dtoh",
                                      "tdsl_cuda_memset", "tdsl_cuda_synchronize"};
  void *f[6];
  for (int i = 0; i < 6; i++)
    if (!(f[i] = dlsym(so, names[i]))) return names[i];
  m->device_type = kDLCUDA;
  *(void **)&m->malloc_fn = f[0];
  *(void **)&m->free_fn = f[1];
  *(void **)&m->htod = f[2];
  *(void **)&m->dtoh = f[3];
  *(void **)&m->memset_fn = f[4];
  *(void **)&m->sync = f[5];
  return NULL;
}

/* ---- tensors in a chosen physical storage --------------------------------- */

typedef enum Store { ST_ROW, ST_CL, ST_COLMAJOR, ST_PADDED } Store;

/* One argument: host bytes `store` mirror the device buffer `dev`; `view`
 * addresses the elements in `store`, `t` the same ones in `dev`. */
typedef struct Buf {
  DLTensor t;
  HostTensor view;
  int64_t shape[TDSL_MAX_RANK], stride[TDSL_MAX_RANK];
  unsigned char *store, *saved;
  void *dev;
  size_t bytes;
} Buf;

static DType dtype_of(DLDataType d) {
  for (int t = 0; t < DT_COUNT; t++) {
    static const uint8_t code[DT_COUNT] = {kDLBool, kDLInt, kDLUInt, kDLInt, kDLInt,
                                           kDLInt, kDLFloat, kDLBfloat, kDLFloat, kDLFloat};
    if (d.code == code[t] && d.bits == 8 * dtype_size((DType)t) && d.lanes == 1)
      return (DType)t;
  }
  return DT_NONE;
}

static int64_t at_least1(int64_t v) { return v > 1 ? v : 1; }

/* Strides of a storage kind (as in test_exec.c); padded rows leave 3
 * unused elements after each row (a rank-1 tensor gets stride 2). */
static void strides_for(Store s, int rank, const int64_t *shape, int64_t *st) {
  int64_t acc = 1;
  if (s == ST_CL && rank == 4) {
    int order[4] = {1, 3, 2, 0}; /* C, W, H, N: innermost first */
    for (int j = 0; j < 4; j++) st[order[j]] = acc, acc *= at_least1(shape[order[j]]);
  } else if (s == ST_COLMAJOR) {
    for (int d = 0; d < rank; d++) st[d] = acc, acc *= at_least1(shape[d]);
  } else if (s == ST_PADDED) {
    for (int d = rank - 1; d >= 0; d--) {
      st[d] = acc;
      acc = d == rank - 1 ? at_least1(shape[d]) + 3 : acc * at_least1(shape[d]);
    }
    if (rank == 1) st[0] = 2;
  } else {
    for (int d = rank - 1; d >= 0; d--) st[d] = acc, acc *= at_least1(shape[d]);
  }
}

/* A descriptor over fresh host and device storage filled with `fill`,
 * elements starting `off` elements in. */
static int buf_make(const Mem *m, Buf *b, DType dt, int rank, const int64_t *shape, Store s,
                    int64_t off, bool null_strides, unsigned char fill) {
  memset(b, 0, sizeof *b);
  strides_for(s, rank, shape, b->stride);
  int64_t ext = 1;
  for (int d = 0; d < rank; d++) {
    b->shape[d] = shape[d];
    if (shape[d] == 0) ext = 0;
  }
  for (int d = 0; ext && d < rank; d++) ext += (shape[d] - 1) * b->stride[d];
  b->bytes = (size_t)(off + ext + 2) * (size_t)dtype_size(dt);
  b->store = malloc(b->bytes);
  b->saved = malloc(b->bytes);
  memset(b->store, fill, b->bytes);
  b->t.device.device_type = (DLDeviceType)m->device_type;
  b->t.ndim = rank;
  b->t.dtype = tdsl_dtype_make((uint8_t)(dt == DT_BOOL ? kDLBool : dt == DT_BF16 ? kDLBfloat
                                         : dtype_is_float(dt) ? kDLFloat
                                         : dt == DT_U8 ? kDLUInt : kDLInt),
                               (uint8_t)(8 * dtype_size(dt)));
  b->t.shape = b->shape;
  b->t.strides = null_strides ? NULL : b->stride;
  b->t.byte_offset = (uint64_t)(off * dtype_size(dt));
  b->view.dtype = dt;
  b->view.rank = rank;
  memcpy(b->view.shape, b->shape, sizeof b->shape);
  memcpy(b->view.stride, b->stride, sizeof b->stride);
  b->view.offset = off;
  b->view.data = b->store;
  if (!b->store || !b->saved) return TDSL_E_NOMEM;
  int rc = m->malloc_fn(&b->dev, b->bytes, 0);
  b->t.data = b->dev;
  return rc;
}

/* Copies src's elements into b's host storage and uploads it. */
static int buf_upload(const Mem *m, Buf *b, const HostTensor *src) {
  int sz = dtype_size(src->dtype);
  int64_t n = host_tensor_numel(src);
  for (int64_t i = 0; i < n; i++)
    memcpy(b->store + npyc_elem_offset(&b->view, i) * sz,
           (const char *)src->data + npyc_elem_offset(src, i) * sz, (size_t)sz);
  memcpy(b->saved, b->store, b->bytes);
  return m->htod(b->dev, b->store, b->bytes);
}

static void buf_free(const Mem *m, Buf *b) {
  if (b->dev) m->free_fn(b->dev);
  free(b->store);
  free(b->saved);
}

/* True when every byte outside b's elements still holds `fill` (the
 * elements are overwritten with it to check). */
static bool buf_only_elements_written(Buf *b, unsigned char fill) {
  int sz = dtype_size(b->view.dtype);
  int64_t n = host_tensor_numel(&b->view);
  for (int64_t i = 0; i < n; i++)
    memset(b->store + npyc_elem_offset(&b->view, i) * sz, fill, (size_t)sz);
  for (size_t i = 0; i < b->bytes; i++)
    if (b->store[i] != fill) return false;
  return true;
}

/* ---- running one case ----------------------------------------------------- */

/* Physical storage of one call (as in test_exec.c). */
typedef struct Variant {
  const char *name;
  Store strided_in;     /* storage of `strided` parameters */
  int64_t off;          /* elements before every tensor's first */
  bool null_strides;    /* contiguous descriptors pass strides == NULL */
  bool pad_strided_out; /* `strided` results get padded rows */
  bool needs_strided;   /* only when some parameter is `strided` */
} Variant;

static const Variant VARIANTS[] = {
    {"as declared", ST_ROW, 0, true, false, false},
    {"byte_offset", ST_ROW, 3, false, true, false},
    {"strided params transposed", ST_COLMAJOR, 1, false, false, true},
    {"strided params with padded rows", ST_PADDED, 2, false, false, true},
};

typedef struct Exec {
  const tdsl_kernel_info *k;
  int (*call)(void **);
  const char *(*last_error)(void);
  Mem mem;
  DType pdt[MAX_ARGS], rdt[MAX_ARGS]; /* params' and results' dtypes */
  HostTensor in[MAX_ARGS];            /* tensor parameters, from .npy */
  _Alignas(8) unsigned char scal[MAX_ARGS][8]; /* scalar params, in their C type */
  HostTensor want[MAX_ARGS];
  bool reduce;
  double first_s, best_s;             /* seconds of the first and fastest call */
  char *msg;
  size_t msglen;
} Exec;

static const char *spec_of(const ManifestLine *l, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < l->nin; i++)
    if (!strncmp(l->in[i], name, n) && l->in[i][n] == '=') return l->in[i] + n + 1;
  return NULL;
}

/* A scalar parameter's value as `tdslc run` reads it (driver/run.c). */
static Scalar parse_scalar(DType dt, const char *s) {
  Scalar v = {.i = 0};
  if (dt == DT_BOOL) v.i = !strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "1");
  else if (dtype_is_float(dt)) v.f = strtod(s, NULL);
  else v.i = strtoll(s, NULL, 10);
  return v;
}

#define FAIL(...) (snprintf(e->msg, e->msglen, __VA_ARGS__), -1)

static int load_inputs(Exec *e, const ManifestLine *l) {
  char err[256];
  for (int i = 0; i < e->k->nparams; i++) {
    const tdsl_param_info *p = &e->k->params[i];
    const char *s = spec_of(l, p->name);
    if ((e->pdt[i] = dtype_of(p->dtype)) == DT_NONE)
      return FAIL("parameter '%s': unknown dtype", p->name);
    if (!s) return FAIL("no input for '%s'", p->name);
    if (!p->is_tensor) {
      scalar_store(e->pdt[i], e->scal[i], parse_scalar(e->pdt[i], s));
      continue;
    }
    if (npy_read(s, e->pdt[i] == DT_BF16 ? DT_BF16 : DT_NONE, &e->in[i], err, sizeof err))
      return FAIL("input '%s': %s", p->name, err);
    if (e->in[i].dtype != e->pdt[i] || e->in[i].rank != p->ndim)
      return FAIL("input '%s' is not %s rank %d", p->name, dtype_name(e->pdt[i]), p->ndim);
  }
  if (l->nout != e->k->nresults)
    return FAIL("%d expected outputs for %d results", l->nout, e->k->nresults);
  for (int i = 0; i < l->nout; i++) {
    if ((e->rdt[i] = dtype_of(e->k->results[i].dtype)) == DT_NONE)
      return FAIL("out%d: unknown dtype", i);
    if (npyc_read_any(strchr(l->out[i], '=') + 1, &e->want[i], err, sizeof err))
      return FAIL("expected out%d: %s", i, err);
  }
  return 0;
}

static Store declared_store(int layout) {
  return layout == TDSL_LAYOUT_CHANNELS_LAST ? ST_CL : ST_ROW;
}

/* Fills a[] with the descriptors of one variant's inputs, uploaded. */
static int make_inputs(Exec *e, const Variant *v, Buf *ins, void **a) {
  memset(ins, 0, (size_t)e->k->nparams * sizeof *ins);
  for (int i = 0; i < e->k->nparams; i++) {
    const tdsl_param_info *p = &e->k->params[i];
    a[i] = e->scal[i];
    if (!p->is_tensor) continue;
    Store s = p->layout == TDSL_LAYOUT_STRIDED ? v->strided_in : declared_store(p->layout);
    int rc = buf_make(&e->mem, &ins[i], e->pdt[i], p->ndim, e->in[i].shape, s, v->off,
                      v->null_strides && s == ST_ROW, FILL_IN);
    if (!rc) rc = buf_upload(&e->mem, &ins[i], &e->in[i]);
    if (rc) return FAIL("%s: uploading '%s': %d: %s", v->name, p->name, rc, e->last_error());
    a[i] = &ins[i].t;
  }
  return 0;
}

static void free_bufs(Exec *e, Buf *b, int n, bool tensors_only) {
  for (int i = 0; i < n; i++)
    if (!tensors_only || e->k->params[i].is_tensor) buf_free(&e->mem, &b[i]);
}

/* The kernel call, synchronized and timed. */
static int timed_call(Exec *e, void **a) {
  double t0 = now();
  int rc = e->call(a);
  int src = e->mem.sync();
  double t = now() - t0;
  if (e->first_s < 0) e->first_s = t;
  if (e->best_s < 0 || t < e->best_s) e->best_s = t;
  return rc ? rc : src;
}

/* Checks outputs (values, bytes around them) and inputs (unchanged). */
static int check_variant(Exec *e, const Variant *v, Buf *ins, Buf *outs) {
  char err[300];
  for (int r = 0; r < e->k->nresults; r++) {
    int rc = e->mem.dtoh(outs[r].store, outs[r].dev, outs[r].bytes);
    if (rc) return FAIL("%s: downloading out%d: %d: %s", v->name, r, rc, e->last_error());
    if (npyc_compare(&outs[r].view, &e->want[r], e->reduce, err, sizeof err))
      return FAIL("%s: out%d: %s", v->name, r, err);
    if (!buf_only_elements_written(&outs[r], FILL_OUT))
      return FAIL("%s: out%d: wrote outside its elements", v->name, r);
  }
  for (int i = 0; i < e->k->nparams; i++) {
    if (!e->k->params[i].is_tensor) continue;
    int rc = e->mem.dtoh(ins[i].store, ins[i].dev, ins[i].bytes);
    if (rc) return FAIL("%s: downloading '%s': %d", v->name, e->k->params[i].name, rc);
    if (memcmp(ins[i].store, ins[i].saved, ins[i].bytes))
      return FAIL("%s: input '%s' was modified", v->name, e->k->params[i].name);
  }
  return 0;
}

/* Calls the kernel with one variant's storage and checks every output. */
static int run_variant(Exec *e, const Variant *v) {
  Buf ins[MAX_ARGS], outs[MAX_ARGS];
  void *a[2 * MAX_ARGS];
  int np = e->k->nparams, nr = e->k->nresults, bad = make_inputs(e, v, ins, a);
  memset(outs, 0, sizeof outs);
  for (int r = 0; r < nr && !bad; r++) {
    const tdsl_param_info *res = &e->k->results[r];
    Store s = res->layout == TDSL_LAYOUT_STRIDED && v->pad_strided_out
                  ? ST_PADDED : declared_store(res->layout);
    int rc = buf_make(&e->mem, &outs[r], e->rdt[r], res->ndim, e->want[r].shape, s, v->off,
                      v->null_strides && s == ST_ROW, FILL_OUT);
    if (!rc) rc = e->mem.memset_fn(outs[r].dev, FILL_OUT, outs[r].bytes);
    if (rc) bad = FAIL("%s: out%d: allocating: %d: %s", v->name, r, rc, e->last_error());
    a[np + r] = &outs[r].t;
  }
  int rc = bad ? 0 : timed_call(e, a);
  if (rc) bad = FAIL("%s: returned %d: %s", v->name, rc, e->last_error());
  if (!bad) bad = check_variant(e, v, ins, outs);
  free_bufs(e, ins, np, true);
  free_bufs(e, outs, nr, false);
  return bad;
}

/* Every output's data NULL: shapes (and canonical strides of contiguous
 * and channels_last results) written, nothing computed. */
static int shape_query(Exec *e) {
  Buf ins[MAX_ARGS];
  DLTensor outs[MAX_ARGS];
  int64_t shp[MAX_ARGS][TDSL_MAX_RANK], st[MAX_ARGS][TDSL_MAX_RANK];
  void *a[2 * MAX_ARGS];
  int np = e->k->nparams, nr = e->k->nresults, bad = make_inputs(e, &VARIANTS[0], ins, a);
  for (int r = 0; r < nr; r++) {
    memset(&outs[r], 0, sizeof outs[r]);
    memset(shp[r], 0, sizeof shp[r]);
    for (int d = 0; d < TDSL_MAX_RANK; d++) st[r][d] = -1;
    outs[r].device.device_type = (DLDeviceType)e->mem.device_type;
    outs[r].ndim = e->k->results[r].ndim;
    outs[r].dtype = e->k->results[r].dtype;
    outs[r].shape = shp[r];
    outs[r].strides = st[r];
    a[np + r] = &outs[r];
  }
  int rc = bad ? 0 : e->call(a);
  if (rc) bad = FAIL("shape query: returned %d: %s", rc, e->last_error());
  for (int r = 0; r < nr && !bad; r++) {
    const tdsl_param_info *res = &e->k->results[r];
    int64_t want_st[TDSL_MAX_RANK];
    if (res->ndim != e->want[r].rank)
      bad = FAIL("out%d has rank %d, expected %d", r, res->ndim, e->want[r].rank);
    strides_for(declared_store(res->layout), res->ndim, e->want[r].shape, want_st);
    for (int d = 0; d < res->ndim && !bad; d++) {
      if (shp[r][d] != e->want[r].shape[d])
        bad = FAIL("shape query: out%d dim %d is %lld, expected %lld", r, d,
                   (long long)shp[r][d], (long long)e->want[r].shape[d]);
      else if (res->layout != TDSL_LAYOUT_STRIDED && e->want[r].shape[d] > 1 &&
               st[r][d] != want_st[d])
        bad = FAIL("shape query: out%d stride %d is %lld, expected %lld", r, d,
                   (long long)st[r][d], (long long)want_st[d]);
    }
  }
  free_bufs(e, ins, np, true);
  return bad;
}

static bool has_strided_param(const tdsl_kernel_info *k) {
  for (int i = 0; i < k->nparams; i++)
    if (k->params[i].is_tensor && k->params[i].layout == TDSL_LAYOUT_STRIDED) return true;
  return false;
}

/* Runs one case in this (child) process; 0 or -1 with the reason in e. */
static int exec_case(Exec *e, const char *so_path, const ManifestLine *l, bool cuda) {
  void *so = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  if (!so) return FAIL("dlopen: %s", dlerror());
  const tdsl_kernel_info *(*info)(void);
  *(void **)&info = dlsym(so, "tdsl_case_info");
  *(void **)&e->call = dlsym(so, "tdsl_case_call");
  *(void **)&e->last_error = dlsym(so, "tdsl_last_error");
  if (!info || !e->call || !e->last_error) return FAIL("%s: missing symbols", so_path);
  const char *missing = mem_load(&e->mem, so, cuda);
  if (missing) return FAIL("%s: no %s (runtime without CUDA)", so_path, missing);
  e->k = info();
  if (e->k->device_type != e->mem.device_type)
    return FAIL("built for device type %d, running on %d", e->k->device_type,
                e->mem.device_type);
  if (e->k->nparams > MAX_ARGS || e->k->nresults > MAX_ARGS)
    return FAIL("too many arguments");
  e->reduce = strcmp(l->tol, "reduce") == 0;
  e->first_s = e->best_s = -1;
  if (load_inputs(e, l) || shape_query(e)) return -1;
  bool strided = has_strided_param(e->k);
  for (size_t v = 0; v < sizeof VARIANTS / sizeof VARIANTS[0]; v++)
    if ((strided || !VARIANTS[v].needs_strided) && run_variant(e, &VARIANTS[v])) return -1;
  return 0; /* the child exits: no cleanup needed */
}

/* ---- run ------------------------------------------------------------------ */

typedef struct Result {
  char *name;     /* "caseNNN.so K" */
  double first_s, best_s;
  bool failed;
} Result;

/* A forked child and the pipe its message (at most 2000 bytes, which
 * fits a pipe's buffer: it never blocks) comes through. */
typedef struct Child {
  pid_t pid;
  int fd;
} Child;

typedef int (*ChildFn)(void *arg, char *msg, size_t n);

static Child child_start(ChildFn fn, void *arg) {
  int fd[2];
  if (pipe(fd)) exit(2);
  fflush(NULL);
  pid_t p = fork();
  if (p < 0) exit(2);
  if (p == 0) {
    close(fd[0]);
    char m[2000] = "";
    int rc = fn(arg, m, sizeof m);
    if (write(fd[1], m, strlen(m)) < 0) rc = 2;
    _exit(rc);
  }
  close(fd[1]);
  return (Child){p, fd[0]};
}

/* Waits for the child; its message goes to msg.  Returns its exit status
 * (128 + signal when killed). */
static int child_finish(Child c, char *msg, size_t n) {
  size_t got = 0;
  ssize_t r;
  while ((r = read(c.fd, msg + got, n - 1 - got)) > 0) got += (size_t)r;
  msg[got] = 0;
  close(c.fd);
  int st;
  while (waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* Child: is there a CUDA device?  0 yes, 77 no (message), 1 no runtime. */
static int probe_device(void *arg, char *msg, size_t n) {
  void *so = dlopen((const char *)arg, RTLD_NOW | RTLD_LOCAL);
  if (!so) return snprintf(msg, n, "dlopen: %s", dlerror()), 1;
  int (*count)(int *);
  const char *(*last_error)(void);
  *(void **)&count = dlsym(so, "tdsl_cuda_device_count");
  *(void **)&last_error = dlsym(so, "tdsl_last_error");
  if (!count || !last_error)
    return snprintf(msg, n, "%s: no tdsl_cuda_device_count (runtime without CUDA)",
                    (const char *)arg), 1;
  int devs = 0, rc = count(&devs);
  if (rc) return snprintf(msg, n, "%s", last_error()), 77;
  if (devs < 1) return snprintf(msg, n, "no CUDA device"), 77;
  return 0;
}

typedef struct CaseRun {
  const char *so; /* "./caseNNN.so" */
  ManifestLine l;
  bool cuda;
} CaseRun;

/* Child: one case; the message is "FIRST BEST\n" and the failure, if any. */
static int run_case_child(void *arg, char *msg, size_t n) {
  const CaseRun *c = arg;
  static Exec e;
  char why[1500] = "";
  memset(&e, 0, sizeof e);
  e.msg = why, e.msglen = sizeof why;
  alarm(CASE_TIMEOUT_S);
  /* built with --emu: the stand-in driver runs this module on the CPU */
  char emu[PATH_MAX];
  snprintf(emu, sizeof emu, "%.*s.emu.so", (int)(strlen(c->so) - 3), c->so);
  if (c->cuda && access(emu, R_OK) == 0) {
    char abs[PATH_MAX];
    if (realpath(emu, abs)) setenv("FAKE_CUDA_EMU", abs, 1);
  }
  int rc = exec_case(&e, c->so, &c->l, c->cuda);
  snprintf(msg, n, "%.9f %.9f\n%s", e.first_s, e.best_s, why);
  return rc ? 1 : 0;
}

static int by_time(const void *a, const void *b) {
  double x = ((const Result *)a)->best_s, y = ((const Result *)b)->best_s;
  return (x < y) - (x > y);
}

/* Reads OUTDIR/cases.txt; checks its target against the device and
 * counts the lines that did not build in *unbuilt. */
static int read_cases(const char *out, bool cuda, const char *only, Case *cs, int *unbuilt) {
  char *path = fmt("%s/cases.txt", out);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "gpu_exec: cannot read %s (run gpu_exec build first)\n", path);
    exit(2);
  }
  free(path);
  int n = 0;
  while (n < MAX_CASES && fgets(cs[n].text, sizeof cs[n].text, f)) {
    char *t = strstr(cs[n].text, "target=");
    if (cs[n].text[0] == '#' && t && (strncmp(t + 7, "cuda", 4) == 0) != cuda) {
      fprintf(stderr, "gpu_exec: %s was built for %s", out, t + 7);
      exit(2);
    }
    memcpy(cs[n].line, cs[n].text, sizeof cs[n].line);
    cs[n].line[strcspn(cs[n].line, "\n")] = 0;
    if (!selected(cs[n].line, only)) continue;
    if (!strncmp(cs[n].line, "#unbuilt ", 9)) ++*unbuilt;
    else if (manifest_parse_line(cs[n].text, &cs[n].l)) n++;
  }
  fclose(f);
  return n;
}

/* Records case i's outcome (the child's status and message). */
static bool case_result(const Case *c, Result *r, int rc, const char *msg) {
  r->name = fmt("%s %s", c->l.file, c->l.kernel);
  r->first_s = r->best_s = -1;
  sscanf(msg, "%lf %lf", &r->first_s, &r->best_s);
  const char *why = strchr(msg, '\n');
  why = why ? why + 1 : "";
  if (rc == 0) return false;
  if (rc == 128 + SIGALRM) printf("FAIL %s: timed out after %d s\n", c->line, CASE_TIMEOUT_S);
  else if (rc > 128) printf("FAIL %s: crashed with signal %d (%s)\n", c->line, rc - 128, why);
  else printf("FAIL %s: %s\n", c->line, why[0] ? why : "failed");
  return r->failed = true;
}

/* Runs the cases, `jobs` children at a time, reaped in order (so the
 * report is in manifest order); returns the number that failed. */
static int run_cases(Case *cs, Result *res, int n, bool cuda, int jobs) {
  static CaseRun runs[MAX_CASES];
  static Child kids[MAX_CASES];
  char msg[2100];
  int failed = 0;
  for (int i = 0, next = 0; i < n; i++) {
    for (; next < n && next < i + jobs; next++) {
      runs[next] = (CaseRun){fmt("./%s", cs[next].l.file), cs[next].l, cuda};
      kids[next] = child_start(run_case_child, &runs[next]);
    }
    int rc = child_finish(kids[i], msg, sizeof msg);
    free((char *)runs[i].so);
    failed += case_result(&cs[i], &res[i], rc, msg);
  }
  return failed;
}

static int cmd_run(const char *out, bool cuda, const char *only, int jobs) {
  static Case cs[MAX_CASES];
  static Result res[MAX_CASES];
  int unbuilt = 0, n = read_cases(out, cuda, only, cs, &unbuilt);
  if (chdir(out)) return fprintf(stderr, "gpu_exec: cannot enter %s\n", out), 2;
  if (n == 0 && unbuilt > 0)
    return printf("gpu_exec: nothing to run: %d cases did not build\n", unbuilt), 1;
  char msg[2100];
  if (cuda && n > 0) {
    char *so = fmt("./%s", cs[0].l.file);
    int rc = child_finish(child_start(probe_device, so), msg, sizeof msg);
    free(so);
    if (rc == 77) return printf("gpu_exec: skipped: %s\n", msg), 77;
    if (rc) return printf("gpu_exec: %s\n", msg[0] ? msg : "probing the device failed"), 1;
  }
  double t0 = now();
  int failed = run_cases(cs, res, n, cuda, jobs < 1 ? 1 : jobs);
  double total = now() - t0;
  qsort(res, (size_t)n, sizeof *res, by_time);
  if (n > 0)
    printf("gpu_exec: slowest kernels (first call, incl. module load, / fastest call, each synchronized)%s:\n",
           jobs > 1 ? ", cases run in parallel" : "");
  for (int i = 0; i < n && i < 5; i++)
    if (res[i].best_s >= 0)
      printf("  %9.3f ms / %9.3f ms  %s\n", 1e3 * res[i].first_s, 1e3 * res[i].best_s,
             res[i].name);
  printf("gpu_exec: %d passed, %d failed (%d skipped: not built) on %s in %.1f s\n",
         n - failed, failed, unbuilt, cuda ? "cuda" : "cpu", total);
  for (int i = 0; i < n; i++) free(res[i].name);
  return failed ? 1 : 0;
}

/* ---- command line --------------------------------------------------------- */

static int usage(void) {
  fprintf(stderr,
          "usage: gpu_exec build OUTDIR [--target=cuda:sm_80] [--tdslc PATH] [--cc CC]\n"
          "                      [--src DIR] [--only S1,S2..] [--jobs N] [--emu CLANG]\n"
          "       gpu_exec run OUTDIR [--device cuda|cpu] [--only S1,S2..] [--jobs N]\n");
  return 2;
}

/* "--name=value" or "--name value": the value, else NULL. */
static const char *opt_value(int argc, char **argv, int *i, const char *name) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n)) return NULL;
  if (argv[*i][n] == '=') return argv[*i] + n + 1;
  if (argv[*i][n] == 0 && *i + 1 < argc) return argv[++*i];
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  bool build = !strcmp(argv[1], "build");
  if (!build && strcmp(argv[1], "run")) return usage();
  BuildOpts o = {argv[2], "cuda:sm_80", TDSL_TDSLC, TDSL_CC, TDSL_SOURCE_DIR, NULL, NULL, build ? 2 : 1};
  const char *device = "cuda", *v;
  for (int i = 3; i < argc; i++) {
    if ((v = opt_value(argc, argv, &i, "--only"))) o.only = v;
    else if (build && (v = opt_value(argc, argv, &i, "--target"))) o.target = v;
    else if (build && (v = opt_value(argc, argv, &i, "--tdslc"))) o.tdslc = v;
    else if (build && (v = opt_value(argc, argv, &i, "--cc"))) o.cc = v;
    else if (build && (v = opt_value(argc, argv, &i, "--src"))) o.src = v;
    else if (build && (v = opt_value(argc, argv, &i, "--emu"))) o.emu = v;
    else if ((v = opt_value(argc, argv, &i, "--jobs"))) o.jobs = atoi(v);
    else if (!build && (v = opt_value(argc, argv, &i, "--device"))) device = v;
    else return usage();
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (build) return cmd_build(&o);
  if (strcmp(device, "cuda") && strcmp(device, "cpu")) return usage();
  return cmd_run(o.out, !strcmp(device, "cuda"), o.only, o.jobs);
}
