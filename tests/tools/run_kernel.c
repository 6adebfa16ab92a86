/* run_kernel.c — runs one compiled tdsl kernel on .npy inputs (a test
 * tool for tests/pytorch/fuzz_programs.py --compiled; not installed).
 *
 *   run_kernel --so=k.so --kernel=K [--layout=plain|offset|transposed]
 *              --in NAME=VALUE ... --out PATH ...
 *
 * Needs: a shared object holding the compiled kernel, K_info() and the
 * runtime, plus `int tdsl_run_call(void *const *a)`: a shim (generated
 * per program, including the kernel's header) calling K with a[i] cast
 * to each argument's type, scalars passed as pointers to their value.
 * VALUE is a .npy path for tensor parameters (bf16 as <u2) and the value
 * as text for scalars. --layout picks the physical storage of the
 * arguments: plain (as declared, contiguous ones with strides == NULL),
 * offset (explicit strides, data starting 3 elements into the buffer) or
 * transposed (offset 1, and `strided` parameters and results stored
 * column-major).
 * Produces: one C-order .npy per result, after a shape query (every
 * output's data NULL) gave the output shapes. Checks that the kernel
 * modifies no input and writes no byte outside its outputs' elements.
 * Exit status: 0 ok; 1 the kernel returned an error code (printed); 2 bad
 * usage or I/O; 4 an input modified or a write outside an output. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tdsl/runtime.h>

#include "driver/npy.h"
#include "ir/dtype.h"

#define RK_MAX_ARGS 64
#define RK_FILL_IN 0xA5
#define RK_FILL_OUT 0x5A

typedef enum RkLayout { RK_PLAIN, RK_OFFSET, RK_TRANSPOSED } RkLayout;

/* One argument in its chosen storage: `view` addresses the same elements
 * as the descriptor `t` (strides and offset in elements). */
typedef struct RkBuf {
  DLTensor t;
  HostTensor view;
  int64_t shape[TDSL_MAX_RANK], stride[TDSL_MAX_RANK];
  unsigned char *store, *saved;
  size_t bytes;
} RkBuf;

typedef struct RkCall {
  const tdsl_kernel_info *info;
  int (*call)(void *const *);
  const char *(*last_error)(void);
  RkLayout layout;
  const char *in[RK_MAX_ARGS];  /* VALUE text per parameter */
  const char *out[RK_MAX_ARGS]; /* output path per result */
  int nin, nout;
} RkCall;

static int fail(int code, const char *msg, const char *what) {
  fprintf(stderr, "run_kernel: %s%s%s\n", msg, what ? ": " : "", what ? what : "");
  return code;
}

static DType rk_dtype(DLDataType d) {
  const char *n = tdsl_dtype_name(d);
  return n ? dtype_from_name(n) : DT_NONE;
}

/* Element strides for the storage: channels_last for declared
 * channels-last tensors, column-major for transposed strided ones,
 * row-major otherwise (size-0 dims count as 1, as in PyTorch). */
static void rk_strides(int layout, bool colmajor, int rank, const int64_t *shape,
                       int64_t *st) {
  int64_t acc = 1;
  if (layout == TDSL_LAYOUT_CHANNELS_LAST && rank == 4) {
    static const int order[4] = {1, 3, 2, 0};
    for (int j = 0; j < 4; j++) st[order[j]] = acc, acc *= shape[order[j]] > 1 ? shape[order[j]] : 1;
  } else if (colmajor) {
    for (int d = 0; d < rank; d++) st[d] = acc, acc *= shape[d] > 1 ? shape[d] : 1;
  } else {
    for (int d = rank - 1; d >= 0; d--) st[d] = acc, acc *= shape[d] > 1 ? shape[d] : 1;
  }
}

/* Byte offset of element i (row-major order) of a view. */
static int64_t rk_elem(const HostTensor *v, int64_t i) {
  int64_t off = v->offset;
  for (int d = v->rank - 1; d >= 0; d--) {
    int64_t n = v->shape[d] > 0 ? v->shape[d] : 1;
    off += (i % n) * v->stride[d];
    i /= n;
  }
  return off * dtype_size(v->dtype);
}

/* A descriptor over fresh storage filled with `fill`. */
static void rk_buf_make(RkBuf *b, const tdsl_param_info *p, const int64_t *shape,
                        RkLayout lay, unsigned char fill) {
  memset(b, 0, sizeof *b);
  DType dt = rk_dtype(p->dtype);
  int rank = p->ndim;
  bool colmajor = lay == RK_TRANSPOSED && p->layout == TDSL_LAYOUT_STRIDED;
  int64_t off = lay == RK_PLAIN ? 0 : lay == RK_OFFSET ? 3 : 1;
  memcpy(b->shape, shape, (size_t)rank * sizeof *shape);
  rk_strides(p->layout, colmajor, rank, shape, b->stride);
  int64_t ext = 1;
  for (int d = 0; d < rank; d++)
    if (shape[d] == 0) ext = 0;
  for (int d = 0; ext && d < rank; d++) ext += (shape[d] - 1) * b->stride[d];
  b->bytes = (size_t)(off + ext + 2) * (size_t)dtype_size(dt);
  b->store = malloc(b->bytes);
  if (!b->store) exit(fail(2, "out of memory", NULL));
  memset(b->store, fill, b->bytes);
  b->t.data = b->store;
  b->t.device.device_type = kDLCPU;
  b->t.ndim = rank;
  b->t.dtype = p->dtype;
  b->t.shape = b->shape;
  bool row = p->layout == TDSL_LAYOUT_CONTIGUOUS || (p->layout == TDSL_LAYOUT_STRIDED && !colmajor);
  b->t.strides = lay == RK_PLAIN && row ? NULL : b->stride;
  b->t.byte_offset = (uint64_t)(off * dtype_size(dt));
  b->view.dtype = dt;
  b->view.rank = rank;
  memcpy(b->view.shape, b->shape, sizeof b->shape);
  memcpy(b->view.stride, b->stride, sizeof b->stride);
  b->view.offset = off;
  b->view.data = b->store;
}

static void rk_buf_fill(RkBuf *b, const HostTensor *src) {
  int sz = dtype_size(src->dtype);
  int64_t n = host_tensor_numel(src);
  for (int64_t i = 0; i < n; i++)
    memcpy(b->store + rk_elem(&b->view, i), (const char *)src->data + rk_elem(src, i),
           (size_t)sz);
  b->saved = malloc(b->bytes);
  if (!b->saved) exit(fail(2, "out of memory", NULL));
  memcpy(b->saved, b->store, b->bytes);
}

/* True when no byte outside b's elements differs from `fill`. */
static bool rk_only_elements_written(const RkBuf *b, unsigned char fill) {
  unsigned char *copy = malloc(b->bytes);
  if (!copy) exit(fail(2, "out of memory", NULL));
  memcpy(copy, b->store, b->bytes);
  int sz = dtype_size(b->view.dtype);
  int64_t n = host_tensor_numel(&b->view);
  for (int64_t i = 0; i < n; i++) memset(copy + rk_elem(&b->view, i), fill, (size_t)sz);
  bool ok = true;
  for (size_t i = 0; i < b->bytes && ok; i++) ok = copy[i] == fill;
  free(copy);
  return ok;
}

/* A scalar parameter's value as `tdslc run` reads it. */
static void rk_scalar(DType dt, const char *s, void *dst) {
  Scalar v = {.i = 0};
  if (dt == DT_BOOL) v.i = !strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "1");
  else if (dtype_is_float(dt)) v.f = strtod(s, NULL);
  else v.i = strtoll(s, NULL, 10);
  scalar_store(dt, dst, v);
}

/* Reads the inputs into bufs (tensors) and vals (scalars); a[] points at
 * what the shim passes. */
static int rk_inputs(const RkCall *c, HostTensor *host, RkBuf *bufs,
                     unsigned char (*vals)[8], void **a) {
  char err[300];
  for (int i = 0; i < c->info->nparams; i++) {
    const tdsl_param_info *p = &c->info->params[i];
    DType dt = rk_dtype(p->dtype);
    if (!p->is_tensor) {
      rk_scalar(dt, c->in[i], vals[i]);
      a[i] = vals[i];
      continue;
    }
    if (npy_read(c->in[i], dt == DT_BF16 ? DT_BF16 : DT_NONE, &host[i], err, sizeof err))
      return fail(2, "input", err);
    if (host[i].dtype != dt || host[i].rank != p->ndim)
      return fail(2, "input has the wrong dtype or rank", p->name);
    rk_buf_make(&bufs[i], p, host[i].shape, c->layout, RK_FILL_IN);
    rk_buf_fill(&bufs[i], &host[i]);
    a[i] = &bufs[i].t;
  }
  return 0;
}

/* Shape query: every output's data NULL; fills shapes[r]. */
static int rk_query(const RkCall *c, void **a, int64_t (*shapes)[TDSL_MAX_RANK]) {
  DLTensor q[RK_MAX_ARGS];
  int64_t st[RK_MAX_ARGS][TDSL_MAX_RANK];
  int np = c->info->nparams;
  for (int r = 0; r < c->info->nresults; r++) {
    memset(&q[r], 0, sizeof q[r]);
    q[r].device.device_type = kDLCPU;
    q[r].ndim = c->info->results[r].ndim;
    q[r].dtype = c->info->results[r].dtype;
    q[r].shape = shapes[r];
    q[r].strides = st[r];
    a[np + r] = &q[r];
  }
  int rc = c->call(a);
  if (rc) {
    fprintf(stderr, "run_kernel: shape query returned %d (%s): %s\n", rc,
            tdsl_strerror(rc), c->last_error());
    return 1;
  }
  return 0;
}

static int rk_run(const RkCall *c) {
  static HostTensor host[RK_MAX_ARGS];
  static RkBuf ins[RK_MAX_ARGS], outs[RK_MAX_ARGS];
  static unsigned char vals[RK_MAX_ARGS][8];
  static int64_t shapes[RK_MAX_ARGS][TDSL_MAX_RANK];
  void *a[2 * RK_MAX_ARGS];
  int np = c->info->nparams, nr = c->info->nresults;
  int rc = rk_inputs(c, host, ins, vals, a);
  if (rc || (rc = rk_query(c, a, shapes))) return rc;
  for (int r = 0; r < nr; r++) {
    rk_buf_make(&outs[r], &c->info->results[r], shapes[r], c->layout, RK_FILL_OUT);
    a[np + r] = &outs[r].t;
  }
  rc = c->call(a);
  if (rc) {
    fprintf(stderr, "run_kernel: kernel returned %d (%s): %s\n", rc, tdsl_strerror(rc),
            c->last_error());
    return 1;
  }
  for (int i = 0; i < np; i++)
    if (c->info->params[i].is_tensor && memcmp(ins[i].store, ins[i].saved, ins[i].bytes))
      return fail(4, "the kernel modified input", c->info->params[i].name);
  char err[300];
  for (int r = 0; r < nr; r++) {
    if (!rk_only_elements_written(&outs[r], RK_FILL_OUT))
      return fail(4, "the kernel wrote outside output", c->info->results[r].name);
    if (npy_write(c->out[r], &outs[r].view, err, sizeof err)) return fail(2, "output", err);
  }
  return 0;
}

static int rk_parse(RkCall *c, int argc, char **argv, const char **so, const char **kernel) {
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!strncmp(s, "--so=", 5)) *so = s + 5;
    else if (!strncmp(s, "--kernel=", 9)) *kernel = s + 9;
    else if (!strcmp(s, "--layout=plain")) c->layout = RK_PLAIN;
    else if (!strcmp(s, "--layout=offset")) c->layout = RK_OFFSET;
    else if (!strcmp(s, "--layout=transposed")) c->layout = RK_TRANSPOSED;
    else if (!strcmp(s, "--in") && i + 1 < argc && c->nin < RK_MAX_ARGS) c->in[c->nin++] = argv[++i];
    else if (!strcmp(s, "--out") && i + 1 < argc && c->nout < RK_MAX_ARGS) c->out[c->nout++] = argv[++i];
    else return fail(2, "bad argument", s);
  }
  if (!*so || !*kernel) return fail(2, "usage: run_kernel --so=K.so --kernel=K "
                                       "[--layout=plain|offset|transposed] --in NAME=VALUE... "
                                       "--out PATH...", NULL);
  return 0;
}

/* Orders the --in values by the kernel's parameters (NAME=VALUE). */
static int rk_match_inputs(RkCall *c) {
  const char *by_param[RK_MAX_ARGS] = {0};
  if (c->info->nparams > RK_MAX_ARGS || c->info->nresults > RK_MAX_ARGS)
    return fail(2, "too many arguments", NULL);
  for (int i = 0; i < c->info->nparams; i++) {
    size_t n = strlen(c->info->params[i].name);
    for (int j = 0; j < c->nin; j++)
      if (!strncmp(c->in[j], c->info->params[i].name, n) && c->in[j][n] == '=')
        by_param[i] = c->in[j] + n + 1;
    if (!by_param[i]) return fail(2, "no --in for parameter", c->info->params[i].name);
  }
  memcpy(c->in, by_param, sizeof by_param);
  if (c->nout != c->info->nresults) return fail(2, "need one --out per result", NULL);
  return 0;
}

int main(int argc, char **argv) {
  RkCall c;
  memset(&c, 0, sizeof c);
  const char *so = NULL, *kernel = NULL;
  if (rk_parse(&c, argc, argv, &so, &kernel)) return 2;
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!h) return fail(2, "dlopen", dlerror());
  char sym[300];
  snprintf(sym, sizeof sym, "%s_info", kernel);
  const tdsl_kernel_info *(*info)(void);
  *(void **)&info = dlsym(h, sym);
  *(void **)&c.call = dlsym(h, "tdsl_run_call");
  *(void **)&c.last_error = dlsym(h, "tdsl_last_error");
  if (!info || !c.call || !c.last_error || !dlsym(h, kernel))
    return fail(2, "missing K, K_info, tdsl_run_call or tdsl_last_error in", so);
  c.info = info();
  if (rk_match_inputs(&c)) return 2;
  int rc = rk_run(&c);
  void (*shutdown)(void);
  *(void **)&shutdown = dlsym(h, "tdsl_shutdown");
  if (shutdown) shutdown();
  return rc;
}
