/* run.c — `tdslc run` (spec §8): matches --input/--output specs to the
 * kernel's parameters and results by name, loads .npy inputs (checking
 * dtype and rank against the declaration) and parses scalar values in the
 * parameter's dtype (a value for a 0-dim tensor parameter makes that
 * tensor: `--input s=2.0`), lays each tensor out as its parameter
 * declares (channels_last gets channels-last strides), runs the reference
 * interpreter, and writes every result as .npy (`outN.npy` by default).
 * Every problem is a message on `err` and an exit status, never a crash.
 * Needs: interp.h, npy.h, dtype.h, sym.h (for printing declared shapes). */
#include "run.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/interp.h"
#include "npy.h"

#define RUN_ERR "tdslc: error: "

/* One NAME=VALUE command-line spec, split. */
typedef struct Spec {
  const char *name;
  size_t namelen;
  const char *value;
} Spec;

static int split_spec(const char *s, const char *flag, Spec *out, FILE *err) {
  const char *eq = s ? strchr(s, '=') : NULL;
  if (!eq || eq == s || eq[1] == '\0') {
    fprintf(err, RUN_ERR "%s expects NAME=VALUE, got '%s'\n", flag,
            s ? s : "");
    return 2;
  }
  out->name = s;
  out->namelen = (size_t)(eq - s);
  out->value = eq + 1;
  return 0;
}

static bool name_is(const Spec *s, const char *name) {
  return strlen(name) == s->namelen && memcmp(name, s->name, s->namelen) == 0;
}

/* Prints a parameter's declared type: `f32[N, 3] channels_last`, `f32`. */
static void print_type(FILE *f, const IrParam *p) {
  fputs(dtype_name(p->dtype), f);
  if (!p->is_tensor) return;
  fputc('[', f);
  for (int d = 0; d < p->rank; d++) {
    if (d) fputs(", ", f);
    sym_print(f, p->shape[d]);
  }
  fputc(']', f);
  if (p->layout != LAYOUT_CONTIGUOUS) fprintf(f, " %s", layout_name(p->layout));
}

static const IrKernel *find_kernel(const IrModule *m, const char *name,
                                   FILE *err) {
  for (int i = 0; i < m->nkernels; i++)
    if (strcmp(m->kernels[i]->name, name) == 0) return m->kernels[i];
  fprintf(err, RUN_ERR "%s has no kernel named '%s'", m->file, name);
  for (int i = 0; i < m->nkernels; i++)
    fprintf(err, "%s%s", i ? ", " : " (kernels: ", m->kernels[i]->name);
  fputs(m->nkernels ? ")\n" : "\n", err);
  return NULL;
}

/* ---- matching specs to parameters and results ----------------------- */

/* Fills which[p] with the index of the spec for parameter p (-1: none).
 * Reports every unknown, duplicate and missing name; returns status. */
static int match_inputs(const IrKernel *k, int nin, const Spec *in,
                        int *which, FILE *err) {
  int status = 0;
  for (int p = 0; p < k->nparams; p++) which[p] = -1;
  for (int i = 0; i < nin; i++) {
    int p = 0;
    while (p < k->nparams && !name_is(&in[i], k->params[p].name)) p++;
    if (p == k->nparams) {
      fprintf(err, RUN_ERR "kernel '%s' has no parameter named '%.*s'",
              k->name, (int)in[i].namelen, in[i].name);
      for (int q = 0; q < k->nparams; q++)
        fprintf(err, "%s%s", q ? ", " : " (parameters: ", k->params[q].name);
      fputs(k->nparams ? ")\n" : "; it takes no parameters\n", err);
      status = 1;
    } else if (which[p] >= 0) {
      fprintf(err, RUN_ERR "input '%s' is given twice\n", k->params[p].name);
      status = 1;
    } else {
      which[p] = i;
    }
  }
  for (int p = 0; p < k->nparams; p++) {
    if (which[p] >= 0) continue;
    fprintf(err, RUN_ERR "missing input for parameter '%s' (",
            k->params[p].name);
    print_type(err, &k->params[p]);
    fprintf(err, "); give it with --input %s=%s\n", k->params[p].name,
            k->params[p].is_tensor ? "FILE.npy" : "VALUE");
    status = 1;
  }
  return status;
}

/* The result index named by "outN" (no leading zeros), or -1. */
static int result_index(const IrKernel *k, const Spec *s) {
  if (s->namelen < 4 || memcmp(s->name, "out", 3) != 0) return -1;
  if (s->name[3] == '0' && s->namelen > 4) return -1;
  int n = 0;
  for (size_t i = 3; i < s->namelen; i++) {
    if (s->name[i] < '0' || s->name[i] > '9' || n > k->nresults) return -1;
    n = n * 10 + (s->name[i] - '0');
  }
  return n < k->nresults ? n : -1;
}

/* Fills path[r] for every result: its --output or "outN.npy" (in buf). */
static int match_outputs(const IrKernel *k, int nout, const Spec *out,
                         const char **path, char (*buf)[32], FILE *err) {
  int status = 0;
  for (int r = 0; r < k->nresults; r++) path[r] = NULL;
  for (int i = 0; i < nout; i++) {
    int r = result_index(k, &out[i]);
    if (r < 0) {
      fprintf(err, RUN_ERR "kernel '%s' has no result named '%.*s' ",
              k->name, (int)out[i].namelen, out[i].name);
      if (k->nresults == 1) fputs("(its result is out0)\n", err);
      else fprintf(err, "(its results are out0 to out%d)\n", k->nresults - 1);
      status = 1;
    } else if (path[r]) {
      fprintf(err, RUN_ERR "output 'out%d' is given twice\n", r);
      status = 1;
    } else {
      path[r] = out[i].value;
    }
  }
  for (int r = 0; r < k->nresults; r++) {
    snprintf(buf[r], sizeof buf[r], "out%d.npy", r);
    if (!path[r]) path[r] = buf[r];
  }
  return status;
}

/* ---- inputs ---------------------------------------------------------- */

static bool parse_bool(const char *s, Scalar *v) {
  if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "1")) v->i = 1;
  else if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "0"))
    v->i = 0;
  else return false;
  return true;
}

static bool parse_int(const char *s, DType dt, Scalar *v) {
  static const int64_t lo[] = {[DT_I8] = INT8_MIN, [DT_U8] = 0,
                               [DT_I16] = INT16_MIN, [DT_I32] = INT32_MIN,
                               [DT_I64] = INT64_MIN};
  static const int64_t hi[] = {[DT_I8] = INT8_MAX, [DT_U8] = UINT8_MAX,
                               [DT_I16] = INT16_MAX, [DT_I32] = INT32_MAX,
                               [DT_I64] = INT64_MAX};
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (end == s || *end || errno == ERANGE || x < lo[dt] || x > hi[dt])
    return false;
  v->i = x;
  return true;
}

/* Floats are rounded to the parameter's dtype (f16 0.1 is 0.0999755859). */
static bool parse_float(const char *s, DType dt, Scalar *v) {
  char *end;
  errno = 0;
  double x = strtod(s, &end);
  if (end == s || *end || (errno == ERANGE && isinf(x))) return false;
  unsigned char buf[8];
  scalar_store(dt, buf, (Scalar){.f = x});
  *v = scalar_load(dt, buf);
  return true;
}

/* text as a value of p's dtype (bool, number in range). */
static bool parse_value(const IrParam *p, const char *text, Scalar *v) {
  return p->dtype == DT_BOOL           ? parse_bool(text, v)
         : dtype_is_float(p->dtype) ? parse_float(text, p->dtype, v)
                                    : parse_int(text, p->dtype, v);
}

static int parse_scalar(const IrParam *p, const char *text, Scalar *v,
                        FILE *err) {
  if (parse_value(p, text, v)) return 0;
  const char *want = p->dtype == DT_BOOL ? "true, false, 1 or 0"
                     : dtype_is_float(p->dtype) ? "a number"
                     : "an integer in the dtype's range";
  fprintf(err, RUN_ERR "parameter '%s' is a %s scalar: expected %s, got "
          "'%s'\n", p->name, dtype_name(p->dtype), want, text);
  return 1;
}

/* Copies every element of src into dst (same dtype and shape). */
static void copy_elements(HostTensor *dst, const HostTensor *src) {
  int64_t n = host_tensor_numel(src), idx[TDSL_MAX_RANK] = {0};
  int es = dtype_size(src->dtype);
  for (int64_t i = 0; i < n; i++) {
    int64_t so = src->offset, d_o = dst->offset;
    for (int d = 0; d < src->rank; d++) {
      so += idx[d] * src->stride[d];
      d_o += idx[d] * dst->stride[d];
    }
    memcpy((char *)dst->data + d_o * es, (const char *)src->data + so * es,
           (size_t)es);
    for (int d = src->rank - 1; d >= 0 && ++idx[d] == src->shape[d]; d--)
      idx[d] = 0;
  }
}

/* Re-lays a row-major NCHW tensor with channels-last strides
 * (H*W*C, 1, W*C, C), as a channels_last parameter requires. */
static int to_channels_last(HostTensor *t) {
  HostTensor cl;
  if (host_tensor_alloc(&cl, t->dtype, 4, t->shape)) return -1;
  int64_t C = t->shape[1], H = t->shape[2], W = t->shape[3];
  cl.stride[0] = H * W * C;
  cl.stride[1] = 1;
  cl.stride[2] = W * C;
  cl.stride[3] = C;
  copy_elements(&cl, t);
  host_tensor_free(t);
  *t = cl;
  return 0;
}

static void print_shape(FILE *f, const HostTensor *t) {
  fputc('(', f);
  for (int d = 0; d < t->rank; d++)
    fprintf(f, "%s%" PRId64, d ? ", " : "", t->shape[d]);
  fputs(t->rank == 1 ? ",)" : ")", f);
}

/* A value given where a tensor is expected: for a 0-dim parameter it
 * makes that tensor (*made = true); for others it is an error, unless a
 * file of that name exists. Returns the status. */
static int value_tensor(const IrParam *p, const char *text, HostTensor *t,
                        bool *made, FILE *err) {
  Scalar v;
  *made = false;
  if (!parse_value(p, text, &v)) return 0;
  if (p->rank == 0) {
    if (host_tensor_alloc(t, p->dtype, 0, NULL)) {
      fprintf(err, RUN_ERR "parameter '%s': out of memory\n", p->name);
      return 1;
    }
    scalar_store(p->dtype, t->data, v);
    *made = true;
    return 0;
  }
  FILE *f = fopen(text, "rb");
  if (f) return fclose(f), 0;
  fprintf(err, RUN_ERR "parameter '%s' is ", p->name);
  print_type(err, p);
  fprintf(err, " (rank %d): a number (%s) only makes a 0-dim tensor; give a "
          ".npy file\n", p->rank, text);
  return 1;
}

static int load_tensor(const IrParam *p, const char *path, HostTensor *t,
                       FILE *err) {
  char msg[600];
  bool made;
  int s = value_tensor(p, path, t, &made, err);
  if (s || made) return s;
  if (npy_read(path, p->dtype == DT_BF16 ? DT_BF16 : DT_NONE, t, msg,
               sizeof msg)) {
    fprintf(err, RUN_ERR "%s\n", msg);
    return 1;
  }
  if (t->dtype != p->dtype) {
    fprintf(err, RUN_ERR "parameter '%s' is %s but %s holds %s\n", p->name,
            dtype_name(p->dtype), path, dtype_name(t->dtype));
    return 1;
  }
  if (t->rank != p->rank) {
    fprintf(err, RUN_ERR "parameter '%s' is ", p->name);
    print_type(err, p);
    fprintf(err, " (rank %d) but %s has shape ", p->rank, path);
    print_shape(err, t);
    fprintf(err, " (rank %d)\n", t->rank);
    return 1;
  }
  if (p->layout == LAYOUT_CHANNELS_LAST && t->rank == 4 &&
      to_channels_last(t)) {
    fprintf(err, RUN_ERR "%s: out of memory\n", path);
    return 1;
  }
  return 0;
}

static int load_inputs(const IrKernel *k, const Spec *in, const int *which,
                       InterpArg *args, FILE *err) {
  int status = 0;
  for (int p = 0; p < k->nparams; p++) {
    const IrParam *par = &k->params[p];
    const char *text = in[which[p]].value;
    int s = par->is_tensor ? load_tensor(par, text, &args[p].t, err)
                           : parse_scalar(par, text, &args[p].s, err);
    if (s) status = s;
  }
  return status;
}

/* ---- the whole run ---------------------------------------------------- */

static int write_results(const IrKernel *k, HostTensor *outs,
                         const char **path, FILE *err) {
  int status = 0;
  for (int r = 0; r < k->nresults; r++) {
    char msg[600];
    if (npy_write(path[r], &outs[r], msg, sizeof msg)) {
      fprintf(err, RUN_ERR "%s\n", msg);
      status = 1;
    }
  }
  return status;
}

/* Matches, loads, runs and writes; arrays sized by the caller. */
static int run_kernel(const IrModule *m, const IrKernel *k, int nin,
                      const Spec *in, int nout, const Spec *out, int *which,
                      InterpArg *args, HostTensor *outs, const char **path,
                      char (*pathbuf)[32], FILE *err) {
  int s1 = match_inputs(k, nin, in, which, err);
  int s2 = match_outputs(k, nout, out, path, pathbuf, err);
  if (s1 || s2) return 1;
  if (load_inputs(k, in, which, args, err)) return 1;
  char msg[1024] = "";
  if (interp_run(m, k, args, outs, msg, sizeof msg)) {
    /* the interpreter's messages already name the kernel */
    fprintf(err, RUN_ERR "%s\n",
            msg[0] ? msg : "the interpreter failed without a message");
    return 1;
  }
  return write_results(k, outs, path, err);
}

int tdsl_run(const IrModule *m, const char *kernel, int nin,
             const char *const *in_specs, int nout,
             const char *const *out_specs,
             FILE *err) {
  if (!kernel) {
    fprintf(err, RUN_ERR "tdslc run needs --kernel=NAME\n");
    return 2;
  }
  Spec *in = calloc((size_t)nin + 1, sizeof *in);
  Spec *out = calloc((size_t)nout + 1, sizeof *out);
  int status = in && out ? 0 : 1;
  for (int i = 0; i < nin && !status; i++)
    status = split_spec(in_specs[i], "--input", &in[i], err);
  for (int i = 0; i < nout && !status; i++)
    status = split_spec(out_specs[i], "--output", &out[i], err);
  const IrKernel *k = status ? NULL : find_kernel(m, kernel, err);
  if (!status && !k) status = 1;
  if (!status) {
    size_t np = (size_t)k->nparams + 1, nr = (size_t)k->nresults + 1;
    int *which = calloc(np, sizeof *which);
    InterpArg *args = calloc(np, sizeof *args);
    HostTensor *outs = calloc(nr, sizeof *outs);
    const char **path = calloc(nr, sizeof *path);
    char (*pathbuf)[32] = calloc(nr, sizeof *pathbuf);
    status = which && args && outs && path && pathbuf
                 ? run_kernel(m, k, nin, in, nout, out, which, args, outs,
                              path, pathbuf, err)
                 : 1;
    for (int p = 0; args && p < k->nparams; p++)
      if (k->params[p].is_tensor) host_tensor_free(&args[p].t);
    for (int r = 0; outs && r < k->nresults; r++) host_tensor_free(&outs[r]);
    free(which);
    free(args);
    free(outs);
    free(path);
    free(pathbuf);
  }
  free(in);
  free(out);
  return status;
}
