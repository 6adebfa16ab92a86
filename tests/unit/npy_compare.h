/* npy_compare.h — shared by the tests that replay tests/pytorch/manifest.txt
 * (test_pytorch.c through the interpreter, test_exec.c through compiled
 * code): parsing a manifest line, reading result files, and comparing a
 * result tensor with PyTorch's within the tolerances of spec §9.
 *
 * Header-only (static inline), for test executables only.
 * Needs: driver/npy.h (npy_read, HostTensor), ir/dtype.h. */
#ifndef TDSL_TESTS_NPY_COMPARE_H
#define TDSL_TESTS_NPY_COMPARE_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/npy.h"

/* One manifest line: "file kernel tol in... -- out...".  in/out point into
 * the buffer given to manifest_parse_line, which must outlive the line.
 * A file written "f.tdsl@O0" asks compiled replays to also build the
 * kernel at that -O level (opt = "O0"; the interpreter has no levels). */
typedef struct ManifestLine {
  char file[256], kernel[128], tol[32], opt[8];
  int nin, nout;
  char *in[16], *out[16];
} ManifestLine;

/* Returns 1 for a kernel line, 0 for comments and blank lines. */
static inline int manifest_parse_line(char *s, ManifestLine *l) {
  memset(l, 0, sizeof *l);
  char *save = NULL, *tok = strtok_r(s, " \n", &save);
  if (!tok || tok[0] == '#') return 0;
  snprintf(l->file, sizeof l->file, "%s", tok);
  char *at = strchr(l->file, '@');
  if (at) {
    snprintf(l->opt, sizeof l->opt, "%s", at + 1);
    *at = 0;
  }
  tok = strtok_r(NULL, " \n", &save);
  snprintf(l->kernel, sizeof l->kernel, "%s", tok ? tok : "");
  tok = strtok_r(NULL, " \n", &save);
  snprintf(l->tol, sizeof l->tol, "%s", tok ? tok : "");
  bool outs = false;
  while ((tok = strtok_r(NULL, " \n", &save))) {
    if (strcmp(tok, "--") == 0) outs = true;
    else if (outs && l->nout < 16) l->out[l->nout++] = tok;
    else if (!outs && l->nin < 16) l->in[l->nin++] = tok;
  }
  return 1;
}

/* The whole file as a NUL-terminated string (malloc'd), or NULL. */
static inline char *npyc_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)(n < 0 ? 0 : n) + 1);
  size_t got = n > 0 ? fread(s, 1, (size_t)n, f) : 0;
  s[got] = 0;
  fclose(f);
  return s;
}

/* Compares one element; tolerances from spec §9 (reduce: reductions, @,
 * conv and normalizations). */
static inline int npyc_close_enough(DType dt, bool reduce, Scalar a, Scalar b) {
  if (!dtype_is_float(dt)) return a.i == b.i;
  double x = a.f, y = b.f;
  if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
  if (isinf(x) || isinf(y)) return x == y;
  double rtol, atol;
  if (dt == DT_F64) rtol = 1e-10, atol = 1e-12;
  else if (dt == DT_F32) rtol = reduce ? 1e-4 : 1e-5, atol = reduce ? 1e-5 : 1e-6;
  else rtol = 1e-2, atol = 1e-2;
  return fabs(x - y) <= atol + rtol * fabs(y);
}

/* Storage offset (elements) of the flat row-major index `flat` of t. */
static inline int64_t npyc_elem_offset(const HostTensor *t, int64_t flat) {
  int64_t off = t->offset;
  for (int d = t->rank - 1; d >= 0; d--) {
    off += (flat % t->shape[d]) * t->stride[d];
    flat /= t->shape[d];
  }
  return off;
}

/* Reads a result file; <u2 data can only be bf16 bits (spec §8). */
static inline int npyc_read_any(const char *path, HostTensor *t, char *err, size_t n) {
  if (npy_read(path, DT_NONE, t, err, n) == 0) return 0;
  return npy_read(path, DT_BF16, t, err, n);
}

/* Compares got (any strides) with want: dtype, rank, shape, then every
 * element.  Returns 0, or -1 with the first difference in msg. */
static inline int npyc_compare(const HostTensor *got, const HostTensor *want,
                               bool reduce, char *msg, size_t n) {
  if (got->dtype != want->dtype || got->rank != want->rank) {
    snprintf(msg, n, "dtype/rank %s/%d, expected %s/%d", dtype_name(got->dtype),
             got->rank, dtype_name(want->dtype), want->rank);
    return -1;
  }
  for (int d = 0; d < got->rank; d++)
    if (got->shape[d] != want->shape[d]) {
      snprintf(msg, n, "dim %d is %lld, expected %lld", d, (long long)got->shape[d],
               (long long)want->shape[d]);
      return -1;
    }
  DType dt = got->dtype;
  int64_t numel = host_tensor_numel(want);
  int sz = dtype_size(dt);
  for (int64_t i = 0; i < numel; i++) {
    Scalar a = scalar_load(dt, (const char *)got->data + npyc_elem_offset(got, i) * sz);
    Scalar b = scalar_load(dt, (const char *)want->data + npyc_elem_offset(want, i) * sz);
    if (!npyc_close_enough(dt, reduce, a, b)) {
      snprintf(msg, n, "element %lld is %.9g (%lld), expected %.9g (%lld)", (long long)i,
               a.f, (long long)a.i, b.f, (long long)b.i);
      return -1;
    }
  }
  return 0;
}

#endif
