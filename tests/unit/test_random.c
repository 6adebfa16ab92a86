/* test_random.c — differential testing on random programs: the reference
 * interpreter, `tdslc -O0`, `-O2` and `-O1` or `-O3` (alternate seeds)
 * must agree.
 *
 * For seeds TDSL_RANDOM_SEED .. +TDSL_RANDOM_COUNT (default 1 and 40),
 * tests/random/progen.c generates a kernel `k`; it must pass the front end
 * in-process (else it is a generator bug: the program is printed).  Inputs
 * are random and deterministic in the seed; the kernel is evaluated by
 * interp_run and compiled three times by tdslc (TDSL_TDSLC) into shared objects
 * (a generated C shim including the generated header, linked with runtime
 * objects built once per run), called as declared, and the -O2 build also
 * (and the -O1/-O3 build) with byte offsets and transposed storage for
 * `strided` parameters.  A quarter of the float inputs are multiples of
 * 0.5, so that ties and quotients beside an integer expose rounding.
 * Results are compared with the interpreter's: bit-exact where the
 * generator says so (integers, bool, data movement), else under spec §9
 * (the looser set when the program reduces).  Programs run in forked
 * children, TDSL_RANDOM_JOBS at a time (default: all cores); a crash fails
 * one program.  Every failure prints the seed, the program and the first
 * differing element; the test fails at the end if any program failed.
 * A second test runs the tests/random/regress files (bugs found
 * this way) through the same comparison.
 *
 * TDSL_RANDOM_TARGET=x86-64 (ctest's test_random_isa, a smaller count of
 * other seeds): each program is built once at -O2 as an object carrying
 * a variant per ISA level (cpu/isa.c) and run at every level this CPU
 * has, forced through TDSL_ISA (a fresh copy of the shared object per
 * level: the variant is chosen at the first call), both storages, and
 * K_isa() must name the forced variant.
 *
 * TDSL_RANDOM_TARGET=cuda or cuda:sm_NN (ctest's test_random_cuda, with
 * the stand-in driver tests/unit/fake_libcuda.c first on LD_LIBRARY_PATH
 * and TDSL_EMU_CC naming clang 19): each program is built for CUDA at
 * -O0, -O2 and -O1/-O3 as the host's are, and its device module also as
 * host code (tests/gpu/emu/module.sh: to_host.py, linked with emu.c),
 * which the stand-in driver runs for every launch
 * (FAKE_CUDA_EMU); tensors are kDLCUDA, in memory from tdsl_cuda_malloc.
 * So CUDA kernels of programs nobody wrote by hand are checked on a
 * machine without a GPU.
 *
 * Thousands locally:
 *   TDSL_RANDOM_COUNT=3000 TDSL_RANDOM_SEED=1000 CK_DEFAULT_TIMEOUT=0 build/tests/test_random
 * (TDSL_RANDOM_JOBS=J runs J at a time; TDSL_TDSLC=PATH uses another tdslc,
 * e.g. a copy that a rebuild cannot replace mid-run).
 *
 * Needs: tdslc, a C compiler (TDSL_CC), runtime/ sources and
 * <tdsl/runtime.h>, the front end and interpreter, dlopen, fork. */
#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
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

#include "codegen/codegen.h"
#include "frontend/ast.h"
#include "ir/interp.h"
#include "isa_settings.h"
#include "npy_compare.h"
#include "tests/random/progen.h"

#ifndef TDSL_CC
#define TDSL_CC "cc"
#endif

#define MAXA (PG_MAXP + PG_MAXRES)

enum { R_PASS = 0, R_FAIL = 1, R_GENBUG = 3 };

static char g_work[64]; /* per-run scratch: rt/ holds the runtime objects */
static const char *g_tdslc = TDSL_TDSLC; /* env TDSL_TDSLC overrides (a snapshot) */
static const char *g_target;               /* TDSL_RANDOM_TARGET, or NULL: the host */
static bool g_cuda;                        /* g_target is cuda[:sm_NN] (emulated) */
static const char *g_emu_cc;               /* g_cuda: clang 19 ($TDSL_EMU_CC) */
/* g_cuda: where run_compiled's tensors live (the case's tdsl_cuda_malloc) */
static int (*g_dev_malloc)(void **p, size_t bytes, int device_id);
static int (*g_dev_free)(void *p);
static int g_level;                        /* g_target: the CPU's x86-64 level */
static const char *g_isa[ISA_MAX_SETTINGS]; /* g_target: the $TDSL_ISA settings */
static int g_nisa, g_nlevels;              /*   (isa_settings.h), the levels' */

/* ---- messages ------------------------------------------------------------- */

typedef struct Msg {
  char s[24000];
  size_t n;
} Msg;

static void say(Msg *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(Msg *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(m->s + m->n, sizeof m->s - m->n, fmt, ap);
  va_end(ap);
  if (k > 0) m->n += (size_t)k;
  if (m->n >= sizeof m->s) m->n = sizeof m->s - 1;
}

static int sh(const char *cmd) {
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp_small(const char *dir, const char *name) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *s = npyc_slurp(path);
  return s ? s : calloc(1, 1);
}

/* ---- inputs --------------------------------------------------------------- */

static uint64_t xs(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static Scalar rand_elem(uint64_t *s, DType d) {
  Scalar v;
  double u = (double)(xs(s) >> 11) / 9007199254740992.0;
  /* floats: one in four a multiple of 0.5, where rounding decides ties
   * and quotients by 3, 0.3 or 60 land just beside an integer */
  if (dtype_is_float(d)) v.f = u < 0.25 ? floor(u * 36) / 2 - 2 : 4 * u - 2;
  else if (d == DT_BOOL) v.i = u < 0.5;
  else if (d == DT_U8) v.i = (int64_t)(u * 256);
  else v.i = (int64_t)(u * 201) - 100;
  if (d == DT_F16) v.f = f16_to_f32(f32_to_f16((float)v.f));
  if (d == DT_BF16) v.f = bf16_to_f32(f32_to_bf16((float)v.f));
  return v;
}

/* One tensor argument in some physical storage. */
typedef struct TArg {
  DLTensor t;
  HostTensor h; /* same storage, for the interpreter and comparisons */
  int64_t shape[TDSL_MAX_RANK], stride[TDSL_MAX_RANK];
  unsigned char *store, *saved;
  size_t bytes;
} TArg;

typedef enum Store { S_ROW, S_CL, S_COLMAJOR } Store;

static void strides_of(Store st, int rank, const int64_t *shape, int64_t *out) {
  int order[TDSL_MAX_RANK]; /* dims from innermost to outermost */
  for (int i = 0; i < rank; i++) order[i] = rank - 1 - i;
  if (st == S_CL && rank == 4) order[0] = 1, order[1] = 3, order[2] = 2, order[3] = 0;
  if (st == S_COLMAJOR)
    for (int i = 0; i < rank; i++) order[i] = i;
  int64_t s = 1;
  for (int i = 0; i < rank; i++) {
    out[order[i]] = s;
    s *= shape[order[i]] > 1 ? shape[order[i]] : 1;
  }
}

static DLDataType dl_of(DType d) {
  static const uint8_t code[] = {6, 0, 1, 0, 0, 0, 2, 4, 2, 2};
  return tdsl_dtype_make(code[d], (uint8_t)(8 * dtype_size(d)));
}

/* A tensor of p's shape holding `vals` (row-major logical values) in
 * storage st, `off` elements into its buffer; other bytes are 0xEE. */
static void targ_make(TArg *a, const PgParam *p, const Scalar *vals, Store st, int64_t off) {
  memset(a, 0, sizeof *a);
  int r = p->rank, sz = dtype_size(p->dtype);
  memcpy(a->shape, p->shape, sizeof(int64_t) * (size_t)r);
  strides_of(st, r, p->shape, a->stride);
  int64_t ext = off, n = 1;
  for (int i = 0; i < r; i++) {
    ext += (a->shape[i] - 1) * a->stride[i];
    n *= a->shape[i];
  }
  a->bytes = (size_t)(ext + 1) * (size_t)sz + 16;
  if (g_dev_malloc) { /* "device" memory of the stand-in driver: host memory it knows */
    void *d = NULL;
    a->store = g_dev_malloc(&d, a->bytes, 0) ? NULL : d;
  } else a->store = malloc(a->bytes);
  ck_assert_ptr_nonnull(a->store);
  memset(a->store, 0xEE, a->bytes);
  a->h.dtype = p->dtype, a->h.rank = r, a->h.offset = off, a->h.data = a->store;
  memcpy(a->h.shape, a->shape, sizeof a->shape);
  memcpy(a->h.stride, a->stride, sizeof a->stride);
  for (int64_t i = 0; vals && i < n; i++)
    scalar_store(p->dtype, a->store + npyc_elem_offset(&a->h, i) * sz, vals[i]);
  a->saved = malloc(a->bytes);
  memcpy(a->saved, a->store, a->bytes);
  a->t.data = a->store;
  a->t.device.device_type = g_dev_malloc ? kDLCUDA : kDLCPU;
  a->t.ndim = r;
  a->t.dtype = dl_of(p->dtype);
  a->t.shape = a->shape;
  a->t.strides = a->stride;
  a->t.byte_offset = (uint64_t)(off * sz);
}

static void targ_free(TArg *a) {
  if (a->t.device.device_type == kDLCUDA) g_dev_free(a->store);
  else free(a->store);
  free(a->saved);
}

/* ---- one program ------------------------------------------------------------ */

typedef struct Case {
  const char *name;      /* "seed 17" or a file name */
  const char *text;
  PgProgram *pg;         /* params, exactness, tolerance set */
  uint64_t seed;
  Arena *arena;
  IrModule *m;
  const IrKernel *k;
  Scalar *vals[PG_MAXP]; /* logical input values */
  char dir[128];
  Msg *msg;
} Case;

static void print_failure(Case *c, const char *what) {
  say(c->msg, "FAIL %s: %s\n--- program ---\n%s---------------\n", c->name, what, c->text);
}

static int front_end(Case *c) {
  c->arena = arena_new();
  FILE *sink = tmpfile();
  Diag d;
  diag_init(&d, "k.tdsl", c->text, sink);
  AstProgram *p = parse_program(c->arena, &d, c->text);
  c->m = p ? sema_program(c->arena, &d, p, "k.tdsl") : NULL;
  char diag[1500] = "";
  rewind(sink);
  size_t got = fread(diag, 1, sizeof diag - 1, sink);
  diag[got] = 0;
  fclose(sink);
  if (!c->m || c->m->nkernels < 1) {
    say(c->msg, "%s", diag);
    print_failure(c, "the front end rejects a generated program (generator or front-end bug)");
    return R_GENBUG;
  }
  c->k = c->m->kernels[0];
  return R_PASS;
}

static const char *ctype_of(DType d) {
  static const char *const t[DT_COUNT] = {"bool", "int8_t", "uint8_t", "int16_t",
                                          "int32_t", "int64_t", "uint16_t", "uint16_t",
                                          "float", "double"};
  return t[d];
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

/* shimN.c: int tdsl_exec_call(void *const *a) calls kernel k of kN.h. */
static void write_shim(Case *c, int opt) {
  char s[4096], name[32];
  size_t at = (size_t)snprintf(s, sizeof s,
      "#include <stdbool.h>\n#include <stdint.h>\n#include \"k%d.h\"\n"
      "const char *tdsl_exec_isa(void);\n"
      "const char *tdsl_exec_isa(void) { return %s%s; }\n"
      "int tdsl_exec_call(void *const *a);\nint tdsl_exec_call(void *const *a) {\n"
      "  return %s(", opt, g_target && !g_cuda ? c->k->name : g_cuda ? "\"cuda\"" : "\"host\"",
      g_target && !g_cuda ? "_isa()" : "", c->k->name);
  int n = 0;
  for (int i = 0; i < c->k->nparams; i++, n++) {
    const IrParam *p = &c->k->params[i];
    if (p->is_tensor) at += (size_t)snprintf(s + at, sizeof s - at, "%s(const DLTensor *)a[%d]", n ? ", " : "", n);
    else at += (size_t)snprintf(s + at, sizeof s - at, "%s*(const %s *)a[%d]", n ? ", " : "", ctype_of(p->dtype), n);
  }
  for (int i = 0; i < c->k->nresults; i++, n++)
    at += (size_t)snprintf(s + at, sizeof s - at, "%s(DLTensor *)a[%d]", n ? ", " : "", n);
  snprintf(s + at, sizeof s - at, ");\n}\n");
  snprintf(name, sizeof name, "shim%d.c", opt);
  write_file(c->dir, name, s);
}

/* One build step in c->dir; when it fails, its log <log><opt>.err and
 * "WHAT -O<opt> exited with N" are reported and R_FAIL returned. */
static int build_step(Case *c, const char *cmd, const char *log, int opt, const char *what) {
  int rc = sh(cmd);
  if (!rc) return R_PASS;
  char name[32], why[128];
  snprintf(name, sizeof name, "%s%d.err", log, opt);
  char *err = slurp_small(c->dir, name);
  say(c->msg, "%s", err);
  free(err);
  snprintf(why, sizeof why, "%s -O%d exited with %d", what, opt, rc);
  print_failure(c, why);
  return R_FAIL;
}

/* Compiles at -O<opt> into k<opt>.so (and, for cuda, k<opt>.emu.so);
 * every program must compile. */
static int build_opt(Case *c, int opt) {
  char cmd[2048];
  write_shim(c, opt);
  snprintf(cmd, sizeof cmd,
           "cd '%s' && '%s' k.tdsl -O%d%s%s -o k%d.o --emit=obj,header 2> tdslc%d.err", c->dir,
           g_tdslc, opt, g_target ? " --target=" : "", g_target ? g_target : "", opt, opt);
  if (build_step(c, cmd, "tdslc", opt, "tdslc")) return R_FAIL;
  snprintf(cmd, sizeof cmd,
           "cd '%s' && '%s' -std=c17 -Wall -Werror -shared -fPIC -I'%s/runtime/include' -I. "
           "shim%d.c k%d.o '%s'/rt/*.o -o k%d.so -lm -lpthread 2> cc%d.err",
           c->dir, TDSL_CC, TDSL_SOURCE_DIR, opt, opt, g_work, opt, opt);
  if (build_step(c, cmd, "cc", opt, "linking the shared object of")) return R_FAIL;
  if (!g_cuda) return R_PASS;
  /* the device module as host code, for the stand-in driver */
  snprintf(cmd, sizeof cmd,
           "cd '%s' && '%s/tests/gpu/emu/module.sh' '%s' k%d.emu.so '%s' k.tdsl -O%d --target=%s "
           "2> emu%d.err",
           c->dir, TDSL_SOURCE_DIR, g_emu_cc, opt, g_tdslc, opt, g_target, opt);
  return build_step(c, cmd, "emu", opt, "building the emulated device module of");
}

/* Compares got with the interpreter's ref; false (with a message) on the
 * first difference. */
static bool same(Case *c, const HostTensor *got, const HostTensor *ref, int r, const char *run) {
  char why[300];
  bool exact = c->pg->exact[r];
  DType tol = dtype_is_float(ref->dtype) && c->pg->tol[r] != DT_NONE ? c->pg->tol[r] : ref->dtype;
  if (got->rank != ref->rank) {
    snprintf(why, sizeof why, "%s: out%d rank %d, interpreter %d", run, r, got->rank, ref->rank);
    print_failure(c, why);
    return false;
  }
  int sz = dtype_size(ref->dtype);
  int64_t n = host_tensor_numel(ref);
  for (int64_t i = 0; i < n; i++) {
    Scalar a = scalar_load(ref->dtype, (const char *)got->data + npyc_elem_offset(got, i) * sz);
    Scalar b = scalar_load(ref->dtype, (const char *)ref->data + npyc_elem_offset(ref, i) * sz);
    bool ok;
    if (dtype_is_float(ref->dtype) && exact)
      ok = a.f == b.f || (isnan(a.f) && isnan(b.f));
    else ok = npyc_close_enough(tol, c->pg->reduce, a, b) ||
              (dtype_is_float(ref->dtype) && isinf(a.f) && a.f == b.f);
    if (!ok) {
      snprintf(why, sizeof why, "%s: out%d (%s%s) element %lld of %lld: got %.9g (%lld), "
               "interpreter %.9g (%lld)", run, r, dtype_name(ref->dtype),
               exact ? ", exact" : "", (long long)i, (long long)n, a.f, (long long)a.i, b.f,
               (long long)b.i);
      print_failure(c, why);
      return false;
    }
  }
  return true;
}

/* Runs k<opt>.so (set >= 0: its copy kv<set>.so, TDSL_ISA=g_isa[set]) on
 * one storage variant and compares with ref. */
static int run_compiled(Case *c, int opt, int set, bool variant, HostTensor *ref) {
  char path[256], run[128];
  snprintf(run, sizeof run, "-O%d%s%s%s", opt,
           variant ? " (offsets, strided params transposed)" : "",
           set >= 0 ? " x86-64, TDSL_ISA=" : "", set >= 0 ? g_isa[set] : "");
  snprintf(path, sizeof path, set >= 0 ? "%s/kv%d.so" : "%s/k%d.so", c->dir,
           set >= 0 ? set : opt);
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    say(c->msg, "dlopen: %s\n", dlerror());
    print_failure(c, "dlopen failed");
    return R_FAIL;
  }
  int (*call)(void *const *);
  const char *(*last)(void);
  *(void **)&call = dlsym(so, "tdsl_exec_call");
  *(void **)&last = dlsym(so, "tdsl_last_error");
  int (*sync)(void) = NULL;
  if (g_cuda) { /* this build's emulated module; tensors in the driver's memory */
    snprintf(path, sizeof path, "%s/k%d.emu.so", c->dir, opt);
    setenv("FAKE_CUDA_EMU", path, 1);
    *(void **)&g_dev_malloc = dlsym(so, "tdsl_cuda_malloc");
    *(void **)&g_dev_free = dlsym(so, "tdsl_cuda_free");
    *(void **)&sync = dlsym(so, "tdsl_cuda_synchronize");
    ck_assert(g_dev_malloc && g_dev_free && sync);
  }
  const PgProgram *pg = c->pg;
  static TArg ins[PG_MAXP], outs[PG_MAXRES];
  static unsigned char scal[PG_MAXP][8];
  void *a[MAXA];
  for (int i = 0; i < pg->nparams; i++) {
    const PgParam *p = &pg->params[i];
    if (!p->is_tensor) {
      scalar_store(p->dtype, scal[i], p->value);
      a[i] = scal[i];
      continue;
    }
    Store st = p->layout == LAYOUT_CHANNELS_LAST ? S_CL
               : variant && p->layout == LAYOUT_STRIDED ? S_COLMAJOR : S_ROW;
    targ_make(&ins[i], p, c->vals[i], st, variant ? 3 : 0);
    a[i] = &ins[i].t;
  }
  for (int r = 0; r < pg->nresults; r++) {
    PgParam q = {.dtype = ref[r].dtype, .rank = ref[r].rank};
    memcpy(q.shape, ref[r].shape, sizeof q.shape);
    Layout lay = c->k->results[r].layout;
    Store st = lay == LAYOUT_CHANNELS_LAST ? S_CL
               : variant && lay == LAYOUT_STRIDED ? S_COLMAJOR : S_ROW;
    targ_make(&outs[r], &q, NULL, st, variant ? 2 : 0);
    memset(outs[r].store, 0x5A, outs[r].bytes);
    a[pg->nparams + r] = &outs[r].t;
  }
  int rc = call(a), res = R_PASS;
  if (!rc && sync) rc = sync();
  if (rc) {
    char why[400];
    snprintf(why, sizeof why, "%s: the kernel returned %d: %s", run, rc, last());
    print_failure(c, why);
    res = R_FAIL;
  }
  const char *(*isa)(void);
  *(void **)&isa = dlsym(so, "tdsl_exec_isa");
  if (!res && set >= 0 && !isa_allows(g_isa[set], isa())) {
    char why[256];
    snprintf(why, sizeof why, "TDSL_ISA=%s: K_isa() is %s", g_isa[set], isa());
    print_failure(c, why);
    res = R_FAIL;
  }
  for (int r = 0; r < pg->nresults && res == R_PASS; r++)
    if (!same(c, &outs[r].h, &ref[r], r, run)) res = R_FAIL;
  for (int i = 0; i < pg->nparams; i++) {
    if (!pg->params[i].is_tensor) continue;
    if (res == R_PASS && memcmp(ins[i].store, ins[i].saved, ins[i].bytes)) {
      char why[256];
      snprintf(why, sizeof why, "%s: input %s was modified", run, pg->params[i].name);
      print_failure(c, why);
      res = R_FAIL;
    }
    targ_free(&ins[i]);
  }
  for (int r = 0; r < pg->nresults; r++) targ_free(&outs[r]);
  g_dev_malloc = NULL;
  return res;
}

/* Random logical inputs for every tensor parameter. */
static void make_values(Case *c) {
  uint64_t s = c->seed * 0xD1B54A32D192ED03ULL + 99;
  for (int i = 0; i < c->pg->nparams; i++) {
    const PgParam *p = &c->pg->params[i];
    if (!p->is_tensor) continue;
    int64_t n = 1;
    for (int d = 0; d < p->rank; d++) n *= p->shape[d];
    c->vals[i] = malloc(sizeof(Scalar) * (size_t)(n ? n : 1));
    for (int64_t k = 0; k < n; k++) c->vals[i][k] = rand_elem(&s, p->dtype);
  }
}

/* The whole comparison for one program (in a child process). */
static int run_case(Case *c) {
  int res = front_end(c);
  if (res) return res;
  if (c->k->nparams != c->pg->nparams || c->k->nresults != c->pg->nresults) {
    print_failure(c, "parameter/result count differs from the generator's");
    return R_GENBUG;
  }
  char cmd[256];
  snprintf(c->dir, sizeof c->dir, "%s/%s", g_work, "XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(c->dir));
  write_file(c->dir, "k.tdsl", c->text);
  make_values(c);
  /* the interpreter, on inputs as declared */
  static TArg ins[PG_MAXP];
  InterpArg ia[PG_MAXP];
  memset(ia, 0, sizeof ia);
  for (int i = 0; i < c->pg->nparams; i++) {
    const PgParam *p = &c->pg->params[i];
    if (!p->is_tensor) {
      ia[i].s = p->value;
      continue;
    }
    targ_make(&ins[i], p, c->vals[i], p->layout == LAYOUT_CHANNELS_LAST ? S_CL : S_ROW, 0);
    ia[i].t = ins[i].h;
  }
  HostTensor ref[PG_MAXRES];
  char err[256];
  if (interp_run(c->m, c->k, ia, ref, err, sizeof err)) {
    char why[320];
    snprintf(why, sizeof why, "the interpreter failed: %s", err);
    print_failure(c, why);
    return R_FAIL;
  }
  for (int i = 0; i < c->pg->nresults; i++)
    if (ref[i].dtype != c->k->results[i].dtype) {
      print_failure(c, "the interpreter's result dtype differs from the declared one");
      return R_FAIL;
    }
  int other = c->seed % 2 ? 1 : 3; /* -O1 and -O3 on alternate seeds */
  if (g_target && !g_cuda) { /* one x86-64 object, every level this CPU has (and
                     each extension setting for a program with extension
                     variants: codegen.h cg_isa_use) */
    res = build_opt(c, 2);
    bool ext = false;
    for (IrRef v = 0; v < c->k->nvalues && !ext; v++) ext = cg_isa_use(c->k, v, "x86-64");
    for (int i = 0; i < (ext ? g_nisa : g_nlevels) && !res; i++) {
      char big[600];
      snprintf(big, sizeof big, "cp '%s/k2.so' '%s/kv%d.so'", c->dir, c->dir, i);
      if (sh(big) || setenv("TDSL_ISA", g_isa[i], 1)) res = R_FAIL;
      if (!res) res = run_compiled(c, 2, i, false, ref);
      if (!res) res = run_compiled(c, 2, i, true, ref);
    }
    other = -1;
  }
  if (other >= 0) res = build_opt(c, 0);
  if (!res && other >= 0) res = build_opt(c, 2);
  if (!res && other >= 0) res = build_opt(c, other);
  if (!res && other >= 0) res = run_compiled(c, 0, -1, false, ref);
  if (!res && other >= 0) res = run_compiled(c, 2, -1, false, ref);
  if (!res && other >= 0) res = run_compiled(c, 2, -1, true, ref);
  if (!res && other >= 0) res = run_compiled(c, other, -1, true, ref);
  if (res != R_FAIL) {
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
    sh(cmd);
  } else {
    say(c->msg, "(build directory kept: %s)\n", c->dir);
  }
  return res;
}

/* Concrete parameters of a hand-written kernel: symbols are 3, 4, 5 ... */
static bool params_from_ir(const IrKernel *k, PgProgram *pg) {
  if (k->nparams > PG_MAXP || k->nresults > PG_MAXRES) return false;
  pg->nparams = k->nparams, pg->nresults = k->nresults, pg->reduce = true;
  for (int i = 0; i < k->nparams; i++) {
    const IrParam *p = &k->params[i];
    PgParam *q = &pg->params[i];
    snprintf(q->name, sizeof q->name, "%.7s", p->name);
    q->dtype = p->dtype, q->is_tensor = p->is_tensor, q->rank = p->rank;
    q->layout = p->layout;
    if (!p->is_tensor) {
      if (dtype_is_float(p->dtype)) q->value.f = 0.75;
      else q->value.i = p->dtype == DT_BOOL ? 1 : 3;
    }
    for (int d = 0; d < p->rank; d++) {
      int id;
      if (!sym_is_const(p->shape[d], &q->shape[d]))
        q->shape[d] = sym_is_var(p->shape[d], &id) ? 3 + id : 4;
    }
  }
  return true;
}

/* ---- driving: a forked child per program ---------------------------------- */

static int child_seed(uint64_t seed) {
  static PgProgram pg;
  static Msg msg;
  progen_generate(seed, &pg);
  char name[32];
  snprintf(name, sizeof name, "seed %llu", (unsigned long long)seed);
  Case c = {.name = name, .text = pg.text, .pg = &pg, .seed = seed, .msg = &msg};
  int res = run_case(&c);
  if (msg.n && write(2, msg.s, msg.n) < 0) res = R_FAIL;
  return res;
}

static int child_file(const char *path) {
  static PgProgram pg;
  static Msg msg;
  char *text = npyc_slurp(path);
  ck_assert_ptr_nonnull(text);
  Case c = {.name = path, .text = text, .pg = &pg, .seed = 7, .msg = &msg};
  int res = front_end(&c);
  if (!res && !params_from_ir(c.k, &pg)) res = R_FAIL;
  if (!res) {
    memset(pg.exact, 0, sizeof pg.exact);
    for (int i = 0; i < PG_MAXRES; i++) pg.tol[i] = DT_NONE;
    arena_free(c.arena); /* run_case parses again */
    res = run_case(&c);
  }
  if (msg.n && write(2, msg.s, msg.n) < 0) res = R_FAIL;
  return res;
}

typedef struct Tally {
  int pass, fail, genbug;
} Tally;

static void count(Tally *t, int st, const char *what) {
  if (WIFSIGNALED(st)) {
    fprintf(stderr, "FAIL %s: crashed with signal %d (rerun it alone to see the program)\n",
            what, WTERMSIG(st));
    t->fail++;
    return;
  }
  int rc = WEXITSTATUS(st);
  if (rc == R_PASS) t->pass++;
  else if (rc == R_GENBUG) t->genbug++;
  else t->fail++;
}

static long env_long(const char *name, long dflt) {
  const char *s = getenv(name);
  return s && *s ? strtol(s, NULL, 10) : dflt;
}

/* Runs n jobs (job(i) in a child), `jobs` at a time. */
static Tally run_all(int n, int (*job)(int, void *), void *ctx, const char *(*label)(int, void *)) {
  Tally t = {0, 0, 0};
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int jobs = (int)env_long("TDSL_RANDOM_JOBS", cores > 0 ? cores : 2), running = 0;
  pid_t pids[256];
  int which[256];
  if (jobs < 1) jobs = 1;
  if (jobs > 256) jobs = 256;
  for (int i = 0; i < n || running; ) {
    if (i < n && running < jobs) {
      fflush(NULL);
      pid_t p = fork();
      ck_assert_int_ge(p, 0);
      if (p == 0) _exit(job(i, ctx));
      pids[running] = p, which[running++] = i++;
      continue;
    }
    int st;
    pid_t p = waitpid(-1, &st, 0);
    ck_assert_int_gt(p, 0);
    for (int j = 0; j < running; j++)
      if (pids[j] == p) {
        count(&t, st, label(which[j], ctx));
        pids[j] = pids[running - 1], which[j] = which[--running];
        break;
      }
  }
  return t;
}

static void setup_work(void) {
  snprintf(g_work, sizeof g_work, "/tmp/tdsl_random_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_work));
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s/rt' && cd '%s/rt' && '%s' -std=c17 -O2 -fPIC -D_POSIX_C_SOURCE=200809L "
           "-I'%s/runtime/include' -I'%s/runtime' -c '%s'/runtime/*.c",
           g_work, g_work, TDSL_CC, TDSL_SOURCE_DIR, TDSL_SOURCE_DIR, TDSL_SOURCE_DIR);
  ck_assert_int_eq(sh(cmd), 0);
}

static void teardown_work(bool keep) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, keep ? "rm -rf '%s/rt'" : "rm -rf '%s'", g_work);
  sh(cmd);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static long g_first;

static int seed_job(int i, void *ctx) {
  (void)ctx;
  return child_seed((uint64_t)(g_first + i));
}
static const char *seed_label(int i, void *ctx) {
  (void)ctx;
  static char b[48];
  snprintf(b, sizeof b, "seed %ld", g_first + i);
  return b;
}

START_TEST(random_programs_agree) {
  long count_ = env_long("TDSL_RANDOM_COUNT", 40);
  g_first = env_long("TDSL_RANDOM_SEED", 1);
  setup_work();
  double t0 = now();
  Tally t = run_all((int)count_, seed_job, NULL, seed_label);
  fprintf(stderr, "random programs (seeds %ld..%ld): %d agree, %d failed, %d rejected by "
                  "the front end; %.1f s\n",
          g_first, g_first + count_ - 1, t.pass, t.fail, t.genbug, now() - t0);
  teardown_work(t.fail || t.genbug);
  ck_assert_int_eq(t.genbug, 0);
  ck_assert_int_eq(t.fail, 0);
  ck_assert_int_ge(t.pass, count_ / 2);
}
END_TEST

static char g_files[64][256];

static int file_job(int i, void *ctx) {
  (void)ctx;
  return child_file(g_files[i]);
}
static const char *file_label(int i, void *ctx) {
  (void)ctx;
  return g_files[i];
}

START_TEST(regressions_agree) {
  DIR *d = opendir(TDSL_SOURCE_DIR "/tests/random/regress");
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 64) {
    size_t len = strlen(e->d_name);
    if (len > 5 && !strcmp(e->d_name + len - 5, ".tdsl"))
      snprintf(g_files[n++], sizeof g_files[0], "%s/tests/random/regress/%s", TDSL_SOURCE_DIR,
               e->d_name);
  }
  closedir(d);
  ck_assert_int_ge(n, 1);
  setup_work();
  Tally t = run_all(n, file_job, NULL, file_label);
  fprintf(stderr, "random regressions: %d files, %d agree, %d failed\n", n, t.pass,
          t.fail + t.genbug);
  teardown_work(t.fail || t.genbug);
  ck_assert_int_eq(t.fail + t.genbug, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("random");
  TCase *tc = tcase_create("differential");
  long n = env_long("TDSL_RANDOM_COUNT", 40);
  if (getenv("TDSL_TDSLC") && *getenv("TDSL_TDSLC")) g_tdslc = getenv("TDSL_TDSLC");
  if (getenv("TDSL_RANDOM_TARGET") && *getenv("TDSL_RANDOM_TARGET")) {
    g_target = getenv("TDSL_RANDOM_TARGET");
    unsetenv("TDSL_ISA");
    g_cuda = !strncmp(g_target, "cuda", 4);
    g_level = strcmp(g_target, "x86-64") ? 0 : tdsl_cpu_level();
    g_emu_cc = getenv("TDSL_EMU_CC");
    if (g_cuda && !(g_emu_cc && *g_emu_cc)) {
      fprintf(stderr, "TDSL_RANDOM_TARGET=%s: TDSL_EMU_CC must name clang 19\n", g_target);
      return EXIT_FAILURE;
    }
    if (g_cuda) fprintf(stderr, "%s: each program's CUDA kernels emulated on the CPU\n", g_target);
    else if (!g_level) {
      fprintf(stderr, "TDSL_RANDOM_TARGET=%s: only x86-64 runs per level (or cuda, emulated)\n", g_target);
      return EXIT_FAILURE;
    } else {
      g_nisa = isa_settings(g_isa, &g_nlevels);
      fprintf(stderr, "x86-64 objects: each program at x86-64-v2 .. v%d%s\n", g_level,
              g_nisa > g_nlevels ? ", and with each extension this CPU has where a program has "
                                   "extension variants" : "");
    }
  }
  tcase_set_timeout(tc, (double)(120 + 2 * n));
  tcase_add_test(tc, regressions_agree);
  tcase_add_test(tc, random_programs_agree);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int nf = srunner_ntests_failed(r);
  srunner_free(r);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
