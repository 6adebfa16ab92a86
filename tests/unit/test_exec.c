/* test_exec.c — compiled code against PyTorch.
 *
 * Replays tests/pytorch/manifest.txt (inputs and the outputs PyTorch
 * computed, made by tests/pytorch/gen.py) through the CPU backend: every
 * listed kernel is compiled with `tdslc FILE --kernel=K`, linked with a
 * generated C shim (which includes the generated header, so it must
 * compile) and the runtime sources into a shared object, dlopen'ed and
 * called in a forked child (a crash fails that kernel only).  Inputs are
 * passed in several physical storages: as declared, with a byte_offset
 * into a larger buffer, and for `strided` parameters transposed and with
 * padded rows; outputs are compared with PyTorch's under spec §9, padding
 * around output elements and all input storage must stay untouched.  Every
 * kernel also answers a shape query (all outputs' data == NULL).
 *
 * Every kernel must compile; lines PyTorch rejects (tol "error") must make
 * tdslc exit 1.  A line whose file is written "f.tdsl@O0" is built at that
 * level (the default, -O2, otherwise).  Builds run
 * in parallel (one job per core), each (file, kernel) built once.
 *
 * $TDSL_EXEC_TARGET builds for that --target instead of the host's, and
 * $TDSL_EXEC_EVERY=N keeps every Nth manifest line (a subset).  For
 * x86-64 (the objects that carry a variant per ISA level, cpu/isa.c)
 * every kernel runs once per level this CPU has, forced through
 * $TDSL_ISA, and must say (K_isa) that it ran that variant: ctest's
 * test_exec_isa.  A kernel with products that extension variants are
 * built for (codegen.h cg_isa_use: int8 or bf16 operands) also runs with
 * each extension this CPU has ($TDSL_ISA=v4+avx512vnni, ...), its line
 * kept even where $TDSL_EXEC_EVERY would drop it, and K_isa() must name
 * the level with none or some of those extensions.
 *
 * Needs: tdslc (TDSL_TDSLC), a C compiler (TDSL_CC), runtime/ sources and
 * <tdsl/runtime.h>, the front end (param dtypes and layouts), driver/npy.h,
 * dlopen, fork. */
#include <check.h>
#include <dlfcn.h>
#include <signal.h>
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
#include "isa_settings.h"
#include "npy_compare.h"

#ifndef TDSL_CC
#define TDSL_CC "cc"
#endif

#define DIR TDSL_SOURCE_DIR "/tests/pytorch"
#define MAX_JOBS 512
#define MAX_ARGS 64

/* ---- manifest lines and their builds -------------------------------------- */

typedef struct Job {
  char text[8192]; /* the manifest line; l's pointers point into it */
  ManifestLine l;
  bool want_error;
  char dir[400];   /* build directory (shared by lines of the same kernel) */
  int first;       /* index of the job that builds this (file, kernel) */
  Arena *arena;
  IrModule *m;
  const IrKernel *k;
  char *fail;      /* malloc'd failure description, or NULL */
  char isa[48];    /* the $TDSL_ISA forced ("x86-64-v2", "x86-64-v4+avx512vnni"), whose
                      variant K_isa() must name (isa_allows), or "" */
} Job;

static int sh(const char *cmd) {
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void job_fail(Job *j, const char *what, const char *detail) {
  size_t n = strlen(what) + strlen(detail) + strlen(j->l.file) + strlen(j->l.kernel) + 16;
  j->fail = malloc(n);
  snprintf(j->fail, n, "%s: %s: %s%s", j->l.file, j->l.kernel, what, detail);
}

/* Contents of dir/name (at most 2000 bytes), "" when missing. */
static void read_small(const char *dir, const char *name, char *buf, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *s = npyc_slurp(path);
  snprintf(buf, n, "%s", s ? s : "");
  free(s);
}

static int read_rc(const char *dir, const char *name) {
  char buf[32];
  read_small(dir, name, buf, sizeof buf);
  return buf[0] ? atoi(buf) : -1;
}

/* Parses and checks the case file in-process: the IR gives the parameter
 * dtypes and layouts the call needs. */
static bool load_ir(Job *j) {
  char *src = npyc_slurp(j->l.file);
  if (!src) {
    job_fail(j, "cannot read the file", "");
    return false;
  }
  j->arena = arena_new();
  Diag d;
  FILE *sink = tmpfile();
  diag_init(&d, j->l.file, src, sink);
  AstProgram *p = parse_program(j->arena, &d, src);
  j->m = p ? sema_program(j->arena, &d, p, j->l.file) : NULL;
  fclose(sink);
  free(src);
  for (int i = 0; j->m && i < j->m->nkernels; i++)
    if (!strcmp(j->m->kernels[i]->name, j->l.kernel)) j->k = j->m->kernels[i];
  if (!j->k) job_fail(j, "the front end rejects it or it has no such kernel", "");
  return j->k != NULL;
}

static const char *ctype_of(DType d) {
  static const char *const c[DT_COUNT] = {"bool", "int8_t", "uint8_t", "int16_t",
                                          "int32_t", "int64_t", "uint16_t", "uint16_t",
                                          "float", "double"};
  return c[d];
}

/* shim.c: int tdsl_exec_call(void *const *a) calls the kernel with a[i]
 * cast to its C type (scalars are passed as pointers to their value). */
static void write_shim(const Job *j) {
  char path[512];
  snprintf(path, sizeof path, "%s/shim.c", j->dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "/* generated by test_exec.c */\n#include <stdbool.h>\n#include <stdint.h>\n"
             "#include \"k.h\"\nconst char *tdsl_exec_isa(void);\n"
             "const char *tdsl_exec_isa(void) { return %s_isa(); }\n"
             "int tdsl_exec_call(void *const *a);\n"
             "int tdsl_exec_call(void *const *a) {\n  return %s(", j->k->name, j->k->name);
  int n = 0;
  for (int i = 0; i < j->k->nparams; i++, n++) {
    const IrParam *p = &j->k->params[i];
    if (p->is_tensor) fprintf(f, "%s(const DLTensor *)a[%d]", n ? ", " : "", n);
    else fprintf(f, "%s*(const %s *)a[%d]", n ? ", " : "", ctype_of(p->dtype), n);
  }
  for (int i = 0; i < j->k->nresults; i++, n++)
    fprintf(f, "%s(DLTensor *)a[%d]", n ? ", " : "", n);
  fprintf(f, ");\n}\n");
  fclose(f);
}

/* build.sh: tdslc, then (when it succeeded) the shared object. */
static void write_script(const Job *j, const char *work) {
  char path[512];
  snprintf(path, sizeof path, "%s/build.sh", j->dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  const char *target = getenv("TDSL_EXEC_TARGET");
  fprintf(f, "cd '%s' || exit 1\n'%s' '%s/%s' --kernel='%s' %s%s%s%s -o k.o 2> tdslc.err\n"
             "echo $? > tdslc.rc\n",
          j->dir, TDSL_TDSLC, DIR, j->l.file, j->l.kernel, j->l.opt[0] ? "-" : "", j->l.opt,
          target ? " --target=" : "", target ? target : "");
  if (!j->want_error)
    fprintf(f, "[ \"$(cat tdslc.rc)\" = 0 ] || exit 0\n"
               "'%s' -std=c17 -Wall -Werror -D_POSIX_C_SOURCE=200809L -shared -fPIC "
               "-I'%s/runtime/include' -I. shim.c k.o '%s'/rt/*.o -o k.so -lm -lpthread "
               "> cc.err 2>&1\necho $? > cc.rc\n",
            TDSL_CC, TDSL_SOURCE_DIR, work);
  fclose(f);
}

/* Runs `sh script` for every script, `width` at a time. */
static void run_parallel(char **scripts, int n, int width) {
  int running = 0, next = 0;
  while (next < n || running > 0) {
    while (running < width && next < n) {
      pid_t p = fork();
      ck_assert_int_ge(p, 0);
      if (p == 0) {
        execl("/bin/sh", "sh", scripts[next], (char *)NULL);
        _exit(127);
      }
      running++, next++;
    }
    int st;
    if (wait(&st) < 0) break;
    running--;
  }
}

/* ---- tensors in a chosen physical storage --------------------------------- */

typedef enum Store { ST_ROW, ST_CL, ST_COLMAJOR, ST_PADDED } Store;

typedef struct Buf {
  DLTensor t;
  HostTensor view; /* the same elements, for comparing */
  int64_t shape[TDSL_MAX_RANK], stride[TDSL_MAX_RANK];
  unsigned char *store, *saved;
  size_t bytes;
} Buf;

static DLDataType dl_of(DType d) {
  static const uint8_t code[DT_COUNT] = {kDLBool, kDLInt, kDLUInt, kDLInt, kDLInt,
                                         kDLInt, kDLFloat, kDLBfloat, kDLFloat, kDLFloat};
  return tdsl_dtype_make(code[d], (uint8_t)(8 * dtype_size(d)));
}

static int64_t at_least1(int64_t v) { return v > 1 ? v : 1; }

/* Strides of a storage kind; padded rows leave 3 unused elements after
 * each row (a rank-1 tensor gets stride 2). */
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

/* A descriptor over fresh storage filled with `fill`, elements starting
 * `off` elements in. */
static void buf_make(Buf *b, DType dt, int rank, const int64_t *shape, Store s,
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
  memset(b->store, fill, b->bytes);
  b->t.data = b->store;
  b->t.device.device_type = kDLCPU;
  b->t.ndim = rank;
  b->t.dtype = dl_of(dt);
  b->t.shape = b->shape;
  b->t.strides = null_strides ? NULL : b->stride;
  b->t.byte_offset = (uint64_t)(off * dtype_size(dt));
  b->view.dtype = dt;
  b->view.rank = rank;
  memcpy(b->view.shape, b->shape, sizeof b->shape);
  memcpy(b->view.stride, b->stride, sizeof b->stride);
  b->view.offset = off;
  b->view.data = b->store;
}

static void buf_fill_from(Buf *b, const HostTensor *src) {
  int sz = dtype_size(src->dtype);
  int64_t n = host_tensor_numel(src);
  for (int64_t i = 0; i < n; i++)
    memcpy(b->store + npyc_elem_offset(&b->view, i) * sz,
           (const char *)src->data + npyc_elem_offset(src, i) * sz, (size_t)sz);
  b->saved = malloc(b->bytes);
  memcpy(b->saved, b->store, b->bytes);
}

static void buf_free(Buf *b) {
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

/* ---- running one kernel --------------------------------------------------- */

/* Physical storage of one run: `strided` parameters get strided_in, all
 * tensors start `off` elements into their buffer. */
typedef struct Variant {
  const char *name;
  Store strided_in;
  int64_t off;
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
  const IrKernel *k;
  int (*call)(void *const *);
  const char *(*last_error)(void);
  HostTensor in[MAX_ARGS];  /* tensor parameters, row-major from .npy */
  Scalar scal[MAX_ARGS];    /* scalar parameters */
  HostTensor want[MAX_ARGS];
  bool reduce;
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

static int load_inputs(Exec *e, const ManifestLine *l) {
  char err[256];
  for (int i = 0; i < e->k->nparams; i++) {
    const IrParam *p = &e->k->params[i];
    const char *s = spec_of(l, p->name);
    if (!s) return snprintf(e->msg, e->msglen, "no input for '%s'", p->name), -1;
    if (!p->is_tensor) {
      e->scal[i] = parse_scalar(p->dtype, s);
      continue;
    }
    if (npy_read(s, p->dtype == DT_BF16 ? DT_BF16 : DT_NONE, &e->in[i], err, sizeof err))
      return snprintf(e->msg, e->msglen, "input '%s': %s", p->name, err), -1;
    if (e->in[i].dtype != p->dtype || e->in[i].rank != p->rank)
      return snprintf(e->msg, e->msglen, "input '%s' is not %s rank %d", p->name,
                      dtype_name(p->dtype), p->rank), -1;
  }
  if (l->nout != e->k->nresults)
    return snprintf(e->msg, e->msglen, "%d expected outputs for %d results", l->nout,
                    e->k->nresults), -1;
  for (int i = 0; i < l->nout; i++)
    if (npyc_read_any(strchr(l->out[i], '=') + 1, &e->want[i], err, sizeof err))
      return snprintf(e->msg, e->msglen, "expected out%d: %s", i, err), -1;
  return 0;
}

static Store declared_store(Layout lay) {
  return lay == LAYOUT_CHANNELS_LAST ? ST_CL : ST_ROW;
}

/* Fills a[] with the descriptors of one variant's inputs. */
static void make_inputs(Exec *e, const Variant *v, Buf *ins, void **a) {
  static unsigned char vals[MAX_ARGS][8];
  for (int i = 0; i < e->k->nparams; i++) {
    const IrParam *p = &e->k->params[i];
    if (!p->is_tensor) {
      scalar_store(p->dtype, vals[i], e->scal[i]);
      a[i] = vals[i];
      continue;
    }
    Store s = p->layout == LAYOUT_STRIDED ? v->strided_in : declared_store(p->layout);
    buf_make(&ins[i], p->dtype, p->rank, e->in[i].shape, s, v->off,
             v->null_strides && s == ST_ROW, 0xFF);
    buf_fill_from(&ins[i], &e->in[i]);
    a[i] = &ins[i].t;
  }
}

/* Calls the kernel with one variant's storage and checks every output. */
static int run_variant(Exec *e, const Variant *v) {
  Buf ins[MAX_ARGS], outs[MAX_ARGS];
  void *a[2 * MAX_ARGS];
  int np = e->k->nparams, nr = e->k->nresults, bad = 0;
  make_inputs(e, v, ins, a);
  for (int r = 0; r < nr; r++) {
    const IrResult *res = &e->k->results[r];
    Store s = res->layout == LAYOUT_STRIDED && v->pad_strided_out
                  ? ST_PADDED : declared_store(res->layout);
    buf_make(&outs[r], res->dtype, res->rank, e->want[r].shape, s, v->off,
             v->null_strides && s == ST_ROW, 0x5A);
    a[np + r] = &outs[r].t;
  }
  int rc = e->call(a);
  char err[300];
  if (rc != 0) {
    snprintf(e->msg, e->msglen, "%s: returned %d: %s", v->name, rc, e->last_error());
    bad = 1;
  }
  for (int r = 0; r < nr && !bad; r++) {
    if (npyc_compare(&outs[r].view, &e->want[r], e->reduce, err, sizeof err))
      bad = 1, snprintf(e->msg, e->msglen, "%s: out%d: %s", v->name, r, err);
    else if (!buf_only_elements_written(&outs[r], 0x5A))
      bad = 1, snprintf(e->msg, e->msglen, "%s: out%d: wrote outside its elements", v->name, r);
  }
  for (int i = 0; i < np; i++) {
    if (!e->k->params[i].is_tensor) continue;
    if (!bad && memcmp(ins[i].store, ins[i].saved, ins[i].bytes))
      bad = 1, snprintf(e->msg, e->msglen, "%s: input '%s' was modified", v->name,
                        e->k->params[i].name);
    buf_free(&ins[i]);
  }
  for (int r = 0; r < nr; r++) buf_free(&outs[r]);
  return bad ? -1 : 0;
}

/* Every output's data NULL: shapes (and canonical strides of contiguous
 * and channels_last results) written, nothing computed. */
static int shape_query(Exec *e) {
  Buf ins[MAX_ARGS];
  DLTensor outs[MAX_ARGS];
  int64_t shp[MAX_ARGS][TDSL_MAX_RANK], st[MAX_ARGS][TDSL_MAX_RANK];
  void *a[2 * MAX_ARGS];
  int np = e->k->nparams, nr = e->k->nresults, bad = 0;
  make_inputs(e, &VARIANTS[0], ins, a);
  for (int r = 0; r < nr; r++) {
    const IrResult *res = &e->k->results[r];
    memset(&outs[r], 0, sizeof outs[r]);
    memset(shp[r], 0, sizeof shp[r]);
    for (int d = 0; d < TDSL_MAX_RANK; d++) st[r][d] = -1;
    outs[r].device.device_type = kDLCPU;
    outs[r].ndim = res->rank;
    outs[r].dtype = dl_of(res->dtype);
    outs[r].shape = shp[r];
    outs[r].strides = st[r];
    a[np + r] = &outs[r];
  }
  int rc = e->call(a);
  if (rc != 0) bad = 1, snprintf(e->msg, e->msglen, "shape query: returned %d: %s", rc,
                                 e->last_error());
  for (int r = 0; r < nr && !bad; r++) {
    const IrResult *res = &e->k->results[r];
    int64_t want_st[TDSL_MAX_RANK];
    strides_for(declared_store(res->layout), res->rank, e->want[r].shape, want_st);
    for (int d = 0; d < res->rank && !bad; d++) {
      if (shp[r][d] != e->want[r].shape[d])
        bad = 1, snprintf(e->msg, e->msglen, "shape query: out%d dim %d is %lld, expected %lld",
                          r, d, (long long)shp[r][d], (long long)e->want[r].shape[d]);
      else if (res->layout != LAYOUT_STRIDED && e->want[r].shape[d] > 1 &&
               st[r][d] != want_st[d])
        bad = 1, snprintf(e->msg, e->msglen, "shape query: out%d stride %d is %lld, expected %lld",
                          r, d, (long long)st[r][d], (long long)want_st[d]);
    }
  }
  for (int i = 0; i < np; i++)
    if (e->k->params[i].is_tensor) buf_free(&ins[i]);
  return bad ? -1 : 0;
}

static bool has_strided_param(const IrKernel *k) {
  for (int i = 0; i < k->nparams; i++)
    if (k->params[i].is_tensor && k->params[i].layout == LAYOUT_STRIDED) return true;
  return false;
}

/* Runs one line's kernel in this (child) process; returns 0 or -1 with
 * the reason in msg. */

static int exec_line(const Job *j, const Job *b, char *msg, size_t msglen) {
  char path[512];
  snprintf(path, sizeof path, "%s/k.so", b->dir);
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!so) return snprintf(msg, msglen, "dlopen: %s", dlerror()), -1;
  static Exec e;
  memset(&e, 0, sizeof e);
  e.k = b->k;
  e.msg = msg, e.msglen = msglen;
  e.reduce = strcmp(j->l.tol, "reduce") == 0;
  *(void **)&e.call = dlsym(so, "tdsl_exec_call");
  *(void **)&e.last_error = dlsym(so, "tdsl_last_error");
  if (!e.call || !e.last_error) return snprintf(msg, msglen, "missing symbols"), -1;
  if (e.k->nparams > MAX_ARGS || e.k->nresults > MAX_ARGS)
    return snprintf(msg, msglen, "too many arguments"), -1;
  if (load_inputs(&e, &j->l) || shape_query(&e)) return -1;
  if (j->isa[0]) { /* the forced variant ran */
    const char *(*isa)(void);
    *(void **)&isa = dlsym(so, "tdsl_exec_isa");
    const char *got = isa ? isa() : NULL;
    if (!got || !isa_allows(j->isa, got))
      return snprintf(msg, msglen, "TDSL_ISA=%s: K_isa() is %s", j->isa, got ? got : "NULL"), -1;
  }
  bool strided = has_strided_param(e.k);
  for (size_t v = 0; v < sizeof VARIANTS / sizeof VARIANTS[0]; v++)
    if ((strided || !VARIANTS[v].needs_strided) && run_variant(&e, &VARIANTS[v])) return -1;
  void (*shutdown)(void);
  *(void **)&shutdown = dlsym(so, "tdsl_shutdown");
  if (shutdown) shutdown();
  return 0; /* the child exits: no cleanup needed */
}

/* Runs exec_line in a forked child so that a crash fails one kernel. */
static void exec_in_child(Job *j, const Job *b) {
  int fd[2];
  ck_assert_int_eq(pipe(fd), 0);
  fflush(NULL);
  pid_t p = fork();
  ck_assert_int_ge(p, 0);
  if (p == 0) {
    close(fd[0]);
    char msg[1500] = "";
    int rc = exec_line(j, b, msg, sizeof msg);
    if (rc && write(fd[1], msg, strlen(msg)) < 0) rc = 2;
    _exit(rc ? 1 : 0);
  }
  close(fd[1]);
  char msg[1600] = "";
  size_t got = 0;
  ssize_t r;
  while ((r = read(fd[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)r;
  msg[got] = 0;
  close(fd[0]);
  int st;
  ck_assert_int_eq(waitpid(p, &st, 0), p);
  if (WIFSIGNALED(st)) {
    snprintf(msg, sizeof msg, "crashed with signal %d", WTERMSIG(st));
    job_fail(j, "", msg);
  } else if (WEXITSTATUS(st) != 0) {
    job_fail(j, "", msg[0] ? msg : "failed");
  }
}

/* ---- the test ------------------------------------------------------------- */

/* Classifies a built job: error lines must be rejected by tdslc with exit
 * 1; every other kernel must build and run correctly. */
static void check_job(Job *j, Job *jobs) {
  Job *b = &jobs[j->first];
  char err[2100];
  int rc = read_rc(b->dir, "tdslc.rc");
  read_small(b->dir, "tdslc.err", err, sizeof err);
  if (j->want_error) {
    if (rc != 1 || !strstr(err, "error"))
      job_fail(j, "PyTorch rejects it; tdslc must fail with exit 1: ", err);
    return;
  }
  if (!b->k) { /* the front end failed */
    if (!j->fail) job_fail(j, "the front end rejects it", "");
    return;
  }
  if (rc != 0) {
    job_fail(j, "tdslc failed: ", err);
    return;
  }
  if (read_rc(b->dir, "cc.rc") != 0) {
    read_small(b->dir, "cc.err", err, sizeof err);
    job_fail(j, "building the shared object failed: ", err);
    return;
  }
  exec_in_child(j, b);
}

/* Whether kernel k has products that --target=x86-64 builds extension
 * variants for. */
static bool has_extensions(const IrKernel *k) {
  for (IrRef v = 0; k && v < k->nvalues; v++)
    if (cg_isa_use(k, v, "x86-64")) return true;
  return false;
}

/* Whether line j's kernel has such products (its file parsed apart). */
static bool line_has_extensions(Job *j) {
  bool e = strcmp(j->l.tol, "error") && load_ir(j) && has_extensions(j->k);
  if (j->arena) arena_free(j->arena);
  free(j->fail);
  j->arena = NULL, j->m = NULL, j->k = NULL, j->fail = NULL;
  return e;
}

/* ext: keep the lines EVERY drops whose kernels have extension variants. */
static int read_manifest(Job *jobs, const char *work, bool ext) {
  FILE *f = fopen("manifest.txt", "r");
  ck_assert_ptr_nonnull(f);
  int n = 0, every = getenv("TDSL_EXEC_EVERY") ? atoi(getenv("TDSL_EXEC_EVERY")) : 1;
  for (int line = 0; n < MAX_JOBS && fgets(jobs[n].text, sizeof jobs[n].text, f);) {
    Job *j = &jobs[n];
    if (!manifest_parse_line(j->text, &j->l)) continue;
    if (every > 1 && line++ % every && !(ext && line_has_extensions(j))) continue;
    j->want_error = strcmp(j->l.tol, "error") == 0;
    j->first = n;
    for (int i = 0; i < n; i++)
      if (!strcmp(jobs[i].l.file, j->l.file) && !strcmp(jobs[i].l.kernel, j->l.kernel) &&
          !strcmp(jobs[i].l.opt, j->l.opt))
        j->first = i;
    snprintf(j->dir, sizeof j->dir, "%s/%d", work, j->first);
    n++;
  }
  fclose(f);
  return n;
}

/* Writes build scripts for every distinct (file, kernel), compiles the
 * runtime once, and runs the scripts in parallel. */
static void build_all(Job *jobs, int n, const char *work) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s/rt' && cd '%s/rt' && '%s' -std=c17 -O2 -fPIC -D_POSIX_C_SOURCE=200809L "
           "-I'%s/runtime/include' -I'%s/runtime' -c '%s'/runtime/*.c",
           work, work, TDSL_CC, TDSL_SOURCE_DIR, TDSL_SOURCE_DIR, TDSL_SOURCE_DIR);
  ck_assert_int_eq(sh(cmd), 0);
  char **scripts = calloc((size_t)n, sizeof *scripts);
  int ns = 0;
  for (int i = 0; i < n; i++) {
    Job *j = &jobs[i];
    if (j->first != i) continue;
    ck_assert_int_eq(mkdir(j->dir, 0700), 0);
    if (!j->want_error) {
      if (!load_ir(j)) continue;
      write_shim(j);
    }
    write_script(j, work);
    scripts[ns] = malloc(strlen(j->dir) + 16);
    sprintf(scripts[ns++], "%s/build.sh", j->dir);
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  run_parallel(scripts, ns, cores > 0 ? (int)cores : 2);
  for (int i = 0; i < ns; i++) free(scripts[i]);
  free(scripts);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

START_TEST(compiled_matches_pytorch) {
  ck_assert_int_eq(chdir(DIR), 0);
  char work[] = "/tmp/tdsl_exec_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(work));
  static Job jobs[MAX_JOBS];
  /* x86-64 objects: each ISA level this CPU has, forced (cpu/isa.c), and
   * for kernels with extension variants each extension setting it has */
  const char *target = getenv("TDSL_EXEC_TARGET");
  bool multi = target && !strcmp(target, "x86-64");
  int n = read_manifest(jobs, work, multi);
  double t0 = now();
  build_all(jobs, n, work);
  double t1 = now();
  int ran = 0, errors = 0, failed = 0, calls = 0, ext_runs = 0;
  const char *settings[ISA_MAX_SETTINGS];
  int nlevels = 0, nset = multi ? isa_settings(settings, &nlevels) : 0;
  if (multi) {
    fprintf(stderr, "x86-64 objects: running each kernel at %s .. %s", settings[0],
            settings[nlevels - 1]);
    for (int e = nlevels; e < nset; e++) fprintf(stderr, "%s %s", e > nlevels ? "," : ";", settings[e]);
    fprintf(stderr, "%s\n", nset > nlevels ? " for kernels with extension variants" : "");
  }
  for (int i = 0; i < n; i++) {
    Job *j = &jobs[i];
    int runs = 1;
    if (multi) {
      runs = has_extensions(jobs[j->first].k) ? nset : nlevels;
      if (runs > nlevels) ext_runs++;
    }
    for (int r = 0; r < runs && !j->fail; r++) {
      if (multi) {
        ck_assert_int_eq(setenv("TDSL_ISA", settings[r], 1), 0);
        snprintf(j->isa, sizeof j->isa, "%s", settings[r]);
      }
      check_job(j, jobs);
    }
    if (j->fail) {
      failed++;
      fprintf(stderr, "FAIL %s\n", j->fail);
    } else if (j->want_error) {
      errors++;
    } else {
      ran++;
      calls += (has_strided_param(jobs[j->first].k) ? 5 : 3) * runs;
    }
  }
  fprintf(stderr, "building took %.1f s, running %.1f s\n", t1 - t0, now() - t1);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
  ck_assert_int_eq(sh(cmd), 0);
  fprintf(stderr, "compiled vs PyTorch: %d kernels passed (%d calls: shape queries and "
                  "storage variants), %d rejected as expected, %d failed\n",
          ran, calls, errors, failed);
  if (nset > nlevels)
    fprintf(stderr, "%d kernels with extension variants ran with each extension\n", ext_runs);
  for (int i = 0; i < n; i++) {
    free(jobs[i].fail);
    if (jobs[i].arena) arena_free(jobs[i].arena);
  }
  ck_assert_int_gt(ran + failed, 90 / (getenv("TDSL_EXEC_EVERY") ? atoi(getenv("TDSL_EXEC_EVERY")) : 1));
  ck_assert_int_gt(errors, 0);
  ck_assert_int_eq(failed, 0);
  if (nset > nlevels) ck_assert_int_gt(ext_runs, 10); /* the lowp lines are kept */
}
END_TEST

int main(void) {
  Suite *s = suite_create("exec");
  TCase *tc = tcase_create("manifest");
  /* compiles every manifest kernel (about 1,000 at -O2 and -O0) on the
   * machine's cores: minutes on two busy ones */
  tcase_set_timeout(tc, 1200);
  tcase_add_test(tc, compiled_matches_pytorch);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int nf = srunner_ntests_failed(r);
  srunner_free(r);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
