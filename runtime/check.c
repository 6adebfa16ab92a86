/* check.c — entry checks that generated kernels run before touching data
 * (spec §7.4), one TDSL_E_* code each. Needs error.c and descriptor.c
 * (dtype names, element counts, tdsl_tensor_extent). Every failure message
 * starts "kernel K: argument 'A': " and names the dimension (where there
 * is one) and the expected and actual values. All arithmetic on sizes and
 * strides is checked: descriptors come from the caller and may hold any
 * values. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rt_internal.h"
#include "tdsl/runtime.h"

static int rt_fail(int code, const char *kernel, const char *arg,
                   const char *fmt, ...) TDSL_PRINTF(4, 5);

static int rt_fail(int code, const char *kernel, const char *arg,
                   const char *fmt, ...) {
  char what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return tdsl_set_error(code, "kernel %s: argument '%s': %s",
                        kernel ? kernel : "?", arg ? arg : "?", what);
}

static const char *rt_dtype_text(DLDataType d, char *buf, size_t cap) {
  const char *name = tdsl_dtype_name(d);
  if (name)
    return name;
  snprintf(buf, cap, "(code %u, bits %u, lanes %u)", (unsigned)d.code,
           (unsigned)d.bits, (unsigned)d.lanes);
  return buf;
}

static const char *rt_device_text(int type, char *buf, size_t cap) {
  if (type == kDLCPU)
    return "cpu";
  if (type == kDLCUDA)
    return "cuda";
  snprintf(buf, cap, "device type %d", type);
  return buf;
}

int tdsl_check_output(const char *kernel, const char *arg, const DLTensor *t,
                      DLDataType dtype, int ndim, int device_type) {
  if (!t)
    return rt_fail(TDSL_E_NULL, kernel, arg, "tensor descriptor is NULL");
  if (t->ndim != ndim)
    return rt_fail(TDSL_E_RANK, kernel, arg, "expected rank %d, got rank %d",
                   ndim, t->ndim);
  if (ndim > 0 && !t->shape)
    return rt_fail(TDSL_E_NULL, kernel, arg,
                   "shape array is NULL for rank %d", ndim);
  if (!tdsl_dtype_equal(t->dtype, dtype)) {
    char b1[64], b2[64];
    return rt_fail(TDSL_E_DTYPE, kernel, arg, "expected dtype %s, got %s",
                   rt_dtype_text(dtype, b1, sizeof b1),
                   rt_dtype_text(t->dtype, b2, sizeof b2));
  }
  if ((int)t->device.device_type != device_type) {
    char b1[32], b2[32];
    return rt_fail(TDSL_E_DEVICE, kernel, arg, "expected device %s, got %s",
                   rt_device_text(device_type, b1, sizeof b1),
                   rt_device_text((int)t->device.device_type, b2,
                                  sizeof b2));
  }
  return TDSL_OK;
}

int tdsl_check_tensor(const char *kernel, const char *arg, const DLTensor *t,
                      DLDataType dtype, int ndim, int device_type) {
  int rc = tdsl_check_output(kernel, arg, t, dtype, ndim, device_type);
  if (rc != TDSL_OK)
    return rc;
  for (int d = 0; d < ndim; d++)
    if (t->shape[d] < 0)
      return rt_fail(TDSL_E_SHAPE, kernel, arg,
                     "dim %d: expected a size >= 0, got %lld", d,
                     (long long)t->shape[d]);
  return TDSL_OK;
}

int tdsl_check_data(const char *kernel, const char *arg, const DLTensor *t) {
  if (!t)
    return rt_fail(TDSL_E_NULL, kernel, arg, "tensor descriptor is NULL");
  if (!t->data && tdsl_tensor_numel(t) != 0)
    return rt_fail(TDSL_E_NULL, kernel, arg,
                   "data is NULL but the tensor has elements");
  return TDSL_OK;
}

/* Guards the helpers below against a dim the descriptor does not have. */
static int rt_check_dim_index(const char *kernel, const char *arg,
                              const DLTensor *t, int dim) {
  if (!t || !t->shape || dim < 0 || dim >= t->ndim)
    return rt_fail(TDSL_E_INVALID, kernel, arg,
                   "dim %d: out of range for a descriptor of rank %d", dim,
                   t ? t->ndim : -1);
  return TDSL_OK;
}

int tdsl_check_dim(const char *kernel, const char *arg, const DLTensor *t,
                   int dim, int64_t expected, const char *expected_text) {
  int rc = rt_check_dim_index(kernel, arg, t, dim);
  if (rc != TDSL_OK || t->shape[dim] == expected)
    return rc;
  char num[32];
  snprintf(num, sizeof num, "%lld", (long long)expected);
  if (expected_text && strcmp(expected_text, num) != 0)
    return rt_fail(TDSL_E_SHAPE, kernel, arg,
                   "dim %d: expected %s = %lld, got %lld", dim,
                   expected_text, (long long)expected,
                   (long long)t->shape[dim]);
  return rt_fail(TDSL_E_SHAPE, kernel, arg, "dim %d: expected %lld, got %lld",
                 dim, (long long)expected, (long long)t->shape[dim]);
}

int tdsl_bind_symbol(const char *kernel, const char *arg, const DLTensor *t,
                     int dim, const char *sym, int64_t *slot, int *bound) {
  int rc = rt_check_dim_index(kernel, arg, t, dim);
  if (rc != TDSL_OK)
    return rc;
  if (!slot || !bound)
    return rt_fail(TDSL_E_INVALID, kernel, arg, "NULL symbol slot");
  if (!*bound) {
    *slot = t->shape[dim];
    *bound = 1;
    return TDSL_OK;
  }
  if (t->shape[dim] == *slot)
    return TDSL_OK;
  return rt_fail(TDSL_E_SYMBOL, kernel, arg,
                 "dim %d: expected %s = %lld (bound by an earlier dim), "
                 "got %lld",
                 dim, sym ? sym : "?", (long long)*slot,
                 (long long)t->shape[dim]);
}

/* Row-major stride of dim d (what strides == NULL means), saturating. */
static int64_t rt_stride(const DLTensor *t, int d) {
  if (t->strides)
    return t->strides[d];
  int64_t s = 1;
  for (int j = t->ndim - 1; j > d; j--)
    if (!rt_mul_ok(s, t->shape[j] > 1 ? t->shape[j] : 1, &s))
      return INT64_MAX;
  return s;
}

/* PyTorch's is_contiguous walk: dims in the given order, fastest first
 * (order == NULL: last dim first, i.e. row-major); size-1 dims are
 * skipped. Returns the first dim whose stride is wrong (with the stride it
 * should have in *want), or -1. */
static int rt_first_bad_stride(const DLTensor *t, const int *order, int n,
                               int64_t *want) {
  int64_t expected = 1;
  for (int k = 0; k < n; k++) {
    int d = order ? order[k] : n - 1 - k;
    if (t->shape[d] == 1)
      continue;
    if (rt_stride(t, d) != expected) {
      *want = expected;
      return d;
    }
    if (!rt_mul_ok(expected, t->shape[d], &expected))
      expected = INT64_MAX; /* no later stride can match: fails there */
  }
  return -1;
}

static int rt_layout_fail(const char *kernel, const char *arg,
                          const DLTensor *t, const char *layout, int d,
                          int64_t want) {
  char shape[256], strides[256];
  rt_format_dims(shape, sizeof shape, t->ndim, t->shape);
  if (t->strides)
    rt_format_dims(strides, sizeof strides, t->ndim, t->strides);
  else
    snprintf(strides, sizeof strides, "NULL (row-major)");
  return rt_fail(TDSL_E_LAYOUT, kernel, arg,
                 "dim %d: expected stride %lld for a %s tensor, got %lld "
                 "(shape %s, strides %s)",
                 d, (long long)want, layout, (long long)rt_stride(t, d),
                 shape, strides);
}

static int rt_check_strided(const char *kernel, const char *arg,
                            const DLTensor *t) {
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] > 1 && rt_stride(t, d) < 0)
      return rt_fail(TDSL_E_LAYOUT, kernel, arg,
                     "dim %d: expected a stride >= 0, got %lld", d,
                     (long long)rt_stride(t, d));
  return TDSL_OK;
}

int tdsl_check_layout(const char *kernel, const char *arg, const DLTensor *t,
                      int layout) {
  if (!t || (t->ndim > 0 && !t->shape))
    return rt_fail(TDSL_E_INVALID, kernel, arg, "invalid descriptor");
  if (layout < TDSL_LAYOUT_CONTIGUOUS || layout > TDSL_LAYOUT_STRIDED)
    return rt_fail(TDSL_E_INVALID, kernel, arg, "unknown layout %d", layout);
  if (tdsl_tensor_numel(t) == 0)
    return TDSL_OK; /* no element is addressed; PyTorch agrees */
  int order[4] = {1, 3, 2, 0}; /* channels-last: C, W, H, N */
  int64_t want = 0;
  int bad;
  switch (layout) {
  case TDSL_LAYOUT_CONTIGUOUS:
    if (!t->strides)
      return TDSL_OK;
    bad = rt_first_bad_stride(t, NULL, t->ndim, &want);
    return bad < 0 ? TDSL_OK
                   : rt_layout_fail(kernel, arg, t, "contiguous", bad, want);
  case TDSL_LAYOUT_CHANNELS_LAST:
    if (t->ndim != 4)
      return rt_fail(TDSL_E_RANK, kernel, arg,
                     "expected rank 4 for channels_last, got rank %d",
                     t->ndim);
    bad = rt_first_bad_stride(t, order, 4, &want);
    return bad < 0 ? TDSL_OK
                   : rt_layout_fail(kernel, arg, t, "channels_last", bad,
                                    want);
  default: /* TDSL_LAYOUT_STRIDED */
    return rt_check_strided(kernel, arg, t);
  }
}

int tdsl_check_extent(const char *kernel, const char *arg, const DLTensor *t) {
  int64_t first, end;
  int rc = tdsl_tensor_extent(t, &first, &end);
  if (rc == TDSL_OK)
    return rc;
  if (rc != TDSL_E_OVERFLOW)
    return rt_fail(rc, kernel, arg, "invalid descriptor");
  char shape[256], strides[256];
  rt_format_dims(shape, sizeof shape, t->ndim, t->shape);
  if (t->strides)
    rt_format_dims(strides, sizeof strides, t->ndim, t->strides);
  else
    snprintf(strides, sizeof strides, "NULL (row-major)");
  return rt_fail(TDSL_E_OVERFLOW, kernel, arg,
                 "expected the bytes addressed to fit in int64, but shape %s "
                 "with strides %s, element size %zu and byte_offset %llu "
                 "exceed it",
                 shape, strides, tdsl_dtype_size(t->dtype),
                 (unsigned long long)t->byte_offset);
}

int tdsl_check_align(const char *kernel, const char *arg, const DLTensor *t) {
  if (!t)
    return rt_fail(TDSL_E_NULL, kernel, arg, "tensor descriptor is NULL");
  size_t es = tdsl_dtype_size(t->dtype);
  uintptr_t addr = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
  if (es <= 1 || addr % es == 0)
    return TDSL_OK;
  char b[64];
  return rt_fail(TDSL_E_ALIGN, kernel, arg,
                 "expected data + byte_offset aligned to %zu bytes (%s), got "
                 "address %#llx (%zu bytes past a multiple)",
                 es, rt_dtype_text(t->dtype, b, sizeof b),
                 (unsigned long long)addr, (size_t)(addr % es));
}

/* |v|, with INT64_MIN saturating to INT64_MAX. */
static int64_t rt_abs64(int64_t v) {
  return v >= 0 ? v : v == INT64_MIN ? INT64_MAX : -v;
}

/* Dim e sorts before dim d: smaller |stride|, ties broken by index. */
static bool rt_stride_before(const DLTensor *t, int e, int d) {
  int64_t se = rt_abs64(rt_stride(t, e)), sd = rt_abs64(rt_stride(t, d));
  return se < sd || (se == sd && e > d);
}

int tdsl_check_internal_overlap(const char *kernel, const char *arg,
                                const DLTensor *t) {
  if (!t || (t->ndim > 0 && !t->shape))
    return rt_fail(TDSL_E_INVALID, kernel, arg, "invalid descriptor");
  if (tdsl_tensor_numel(t) == 0 || !t->strides)
    return TDSL_OK;
  /* Walking dims by increasing |stride|, each |stride| must exceed the
   * span of the smaller ones; then distinct indices give distinct
   * addresses. Quadratic in ndim, which is small. */
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] <= 1)
      continue;
    int64_t below = 0, span;
    for (int e = 0; e < t->ndim; e++) {
      if (e == d || t->shape[e] <= 1 || !rt_stride_before(t, e, d))
        continue;
      if (!rt_mul_ok(t->shape[e] - 1, rt_abs64(rt_stride(t, e)), &span) ||
          !rt_add_ok(below, span, &below))
        below = INT64_MAX;
    }
    if (rt_abs64(rt_stride(t, d)) <= below) {
      char shape[256], strides[256];
      rt_format_dims(shape, sizeof shape, t->ndim, t->shape);
      rt_format_dims(strides, sizeof strides, t->ndim, t->strides);
      return rt_fail(TDSL_E_OVERLAP, kernel, arg,
                     "dim %d: expected a stride above %lld so that elements "
                     "do not share memory, got %lld (shape %s, strides %s)",
                     d, (long long)below, (long long)rt_stride(t, d), shape,
                     strides);
    }
  }
  return TDSL_OK;
}

typedef struct RtRange {
  uintptr_t lo, hi; /* [lo, hi); lo == hi: empty */
} RtRange;

/* Address range of t; empty for NULL or empty tensors. Returns the extent
 * error, if any. Negative first bytes wrap modulo 2^64 like the pointer
 * arithmetic the kernel will do. */
static int rt_range(const DLTensor *t, RtRange *r) {
  r->lo = r->hi = 0;
  if (!t)
    return TDSL_OK;
  int64_t first, end;
  int rc = tdsl_tensor_extent(t, &first, &end);
  if (rc == TDSL_OK && first != end) {
    r->lo = (uintptr_t)t->data + (uintptr_t)first;
    r->hi = (uintptr_t)t->data + (uintptr_t)end;
  }
  return rc;
}

static bool rt_ranges_meet(RtRange a, RtRange b) {
  return a.lo != a.hi && b.lo != b.hi && a.lo < b.hi && b.lo < a.hi;
}

static const char *rt_arg_name(const char *const *names, int i,
                               const char *kind, char *buf, size_t cap) {
  if (names && names[i])
    return names[i];
  snprintf(buf, cap, "%s %d", kind, i);
  return buf;
}

static int rt_overlap_fail(const char *kernel, const char *out, RtRange a,
                           const char *kind, const char *other, RtRange b) {
  return rt_fail(TDSL_E_OVERLAP, kernel, out,
                 "expected no memory shared with %s '%s', but output bytes "
                 "[%#llx, %#llx) overlap [%#llx, %#llx)",
                 kind, other, (unsigned long long)a.lo,
                 (unsigned long long)a.hi, (unsigned long long)b.lo,
                 (unsigned long long)b.hi);
}

int tdsl_check_overlap_named(const char *kernel, const DLTensor *const *outs,
                             const char *const *out_names, int nout,
                             const DLTensor *const *ins,
                             const char *const *in_names, int nin) {
  char b1[32], b2[32];
  for (int i = 0; i < nout; i++) {
    const char *name = rt_arg_name(out_names, i, "output", b1, sizeof b1);
    RtRange a, b;
    if (rt_range(outs[i], &a) != TDSL_OK)
      return tdsl_check_extent(kernel, name, outs[i]);
    for (int j = 0; j < nin; j++) {
      if (rt_range(ins[j], &b) != TDSL_OK)
        return tdsl_check_extent(
            kernel, rt_arg_name(in_names, j, "input", b2, sizeof b2), ins[j]);
      if (rt_ranges_meet(a, b))
        return rt_overlap_fail(
            kernel, name, a, "input",
            rt_arg_name(in_names, j, "input", b2, sizeof b2), b);
    }
    for (int j = i + 1; j < nout; j++) {
      if (rt_range(outs[j], &b) != TDSL_OK)
        return tdsl_check_extent(
            kernel, rt_arg_name(out_names, j, "output", b2, sizeof b2),
            outs[j]);
      if (rt_ranges_meet(a, b))
        return rt_overlap_fail(
            kernel, name, a, "output",
            rt_arg_name(out_names, j, "output", b2, sizeof b2), b);
    }
  }
  return TDSL_OK;
}

int tdsl_check_overlap(const char *kernel, const DLTensor *const *outs,
                       int nout, const DLTensor *const *ins, int nin) {
  return tdsl_check_overlap_named(kernel, outs, NULL, nout, ins, NULL, nin);
}

int tdsl_check_size_scalar(const char *kernel, const char *arg, double v) {
  if (isfinite(v))
    return TDSL_OK;
  return rt_fail(TDSL_E_SCALAR, kernel, arg,
                 "expected a finite number for a size, got %g", v);
}

int tdsl_check_ops(const char *kernel, const tdsl_check_op *ops, int nops,
                   const DLTensor *const *t, const char *const *names,
                   const int64_t *want, int64_t *env, int *bound) {
  for (int i = 0; i < nops; i++) {
    const tdsl_check_op *o = &ops[i];
    const DLTensor *x = t[o->arg];
    const char *arg = names[o->arg];
    DLDataType dt = {(uint8_t)(o->a & 255), (uint8_t)(o->a >> 8 & 255),
                     (uint16_t)((uint32_t)o->a >> 16)};
    int rc = TDSL_E_INVALID;
    switch (o->op) {
    case TDSL_CK_TENSOR:
      rc = tdsl_check_tensor(kernel, arg, x, dt, (int)(o->x >> 32), (int)(o->x & 0xFFFFFFFF));
      break;
    case TDSL_CK_OUTPUT:
      rc = tdsl_check_output(kernel, arg, x, dt, (int)(o->x >> 32), (int)(o->x & 0xFFFFFFFF));
      break;
    case TDSL_CK_DIM: rc = tdsl_check_dim(kernel, arg, x, o->a, o->x, o->s); break;
    case TDSL_CK_DIM_AT: rc = tdsl_check_dim(kernel, arg, x, o->a, want[o->x], o->s); break;
    case TDSL_CK_BIND:
      rc = tdsl_bind_symbol(kernel, arg, x, o->a, o->s, env + o->x, bound + o->x);
      break;
    case TDSL_CK_LAYOUT: rc = tdsl_check_layout(kernel, arg, x, o->a); break;
    case TDSL_CK_INTERNAL_OVERLAP: rc = tdsl_check_internal_overlap(kernel, arg, x); break;
    case TDSL_CK_DATA: rc = tdsl_check_data(kernel, arg, x); break;
    case TDSL_CK_ALIGN: rc = tdsl_check_align(kernel, arg, x); break;
    case TDSL_CK_EXTENT: rc = tdsl_check_extent(kernel, arg, x); break;
    default:
      return tdsl_set_error(TDSL_E_INVALID, "kernel %s: unknown entry check %d",
                            kernel ? kernel : "?", (int)o->op);
    }
    if (rc != TDSL_OK)
      return rc;
  }
  return TDSL_OK;
}
