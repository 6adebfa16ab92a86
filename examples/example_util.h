/* example_util.h — small helpers shared by the example programs.
 *
 * Needs: <tdsl/runtime.h> (DLPack descriptors, dtypes).
 * Provides: a deterministic pseudo-random generator (the same numbers on
 * every machine), element addressing that honours strides and
 * byte_offset, the spec §9 tolerance test, shape formatting and the
 * kernel signature read back from K_info(). Header-only (static inline)
 * so each example stays a single C file. */
#ifndef TDSL_EXAMPLE_UTIL_H
#define TDSL_EXAMPLE_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <tdsl/runtime.h>

/* xorshift64*: deterministic, no libc rand() state. */
typedef struct ex_rng {
  uint64_t s;
} ex_rng;

static inline uint64_t ex_next(ex_rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ULL;
}

/* Uniform in [lo, hi), with 24 random bits (exact in f32). */
static inline float ex_uniform(ex_rng *r, float lo, float hi) {
  float u = (float)(ex_next(r) >> 40) / 16777216.0f;
  return lo + (hi - lo) * u;
}

/* Byte address of element idx[0..ndim) of t; strides == NULL means
 * row-major (DLPack rule). */
static inline void *ex_elem(const DLTensor *t, const int64_t *idx) {
  int64_t off = 0;
  int64_t step = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t stride = t->strides ? t->strides[d] : step;
    off += idx[d] * stride;
    step *= t->shape[d];
  }
  return (char *)t->data + t->byte_offset +
         off * (int64_t)tdsl_dtype_size(t->dtype);
}

/* Spec §9: |got - want| <= atol + rtol * |want|, NaN never close. */
static inline int ex_close(double got, double want, double rtol,
                           double atol) {
  return fabs(got - want) <= atol + rtol * fabs(want);
}

/* "2x3x8x8" into buf. */
static inline const char *ex_shape_str(const DLTensor *t, char *buf,
                                       size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (int d = 0; d < t->ndim && used < n; d++)
    used += (size_t)snprintf(buf + used, n - used, "%s%lld", d ? "x" : "",
                             (long long)t->shape[d]);
  return buf;
}

/* A CPU descriptor for a shape query: data == NULL, shape to be filled. */
static inline DLTensor ex_query_tensor(DLDataType dtype, int ndim,
                                       int64_t *shape) {
  DLTensor t = {0};
  t.device.device_type = kDLCPU;
  t.dtype = dtype;
  t.ndim = ndim;
  t.shape = shape;
  return t;
}

static inline void ex_print_param(const tdsl_param_info *p) {
  const char *dt = tdsl_dtype_name(p->dtype);
  printf("%s: %s", p->name, dt ? dt : "?");
  if (!p->is_tensor)
    return;
  printf("[");
  for (int d = 0; d < p->ndim; d++)
    printf("%s%s", d ? ", " : "", p->dims[d]);
  printf("]%s", p->layout == TDSL_LAYOUT_CHANNELS_LAST ? " channels_last" : "");
}

/* Prints "kernel K(a: f32[N, 3], ...) -> (out0: f32[N])" from K_info(),
 * the description an application can use to build its descriptors. */
static inline void ex_print_signature(const tdsl_kernel_info *k) {
  printf("kernel %s(", k->name);
  for (int i = 0; i < k->nparams; i++) {
    printf("%s", i ? ", " : "");
    ex_print_param(&k->params[i]);
  }
  printf(") -> (");
  for (int i = 0; i < k->nresults; i++) {
    printf("%s", i ? ", " : "");
    ex_print_param(&k->results[i]);
  }
  printf(")\n");
}

#endif /* TDSL_EXAMPLE_UTIL_H */
