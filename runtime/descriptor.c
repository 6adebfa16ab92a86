/* descriptor.c — what a DLTensor descriptor says, computed without
 * trusting it: dtype names and sizes, element count, row-major strides,
 * and tdsl_tensor_extent, the byte range the descriptor addresses. Also
 * the dimension formatting the other runtime files share
 * (rt_internal.h). Needs only libc: tensor.c
 * (allocation) and check.c (entry checks) build on it, and it calls
 * neither. Sets no error message; callers report. */
#include <stdio.h>

#include "rt_internal.h"
#include "tdsl/runtime.h"

void rt_format_dims(char *buf, size_t cap, int n, const int64_t *v) {
  if (cap == 0)
    return;
  if (!v && n > 0) {
    snprintf(buf, cap, "NULL");
    return;
  }
  size_t len = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < n && len < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "",
                            (long long)v[i]);
  if (len < cap)
    snprintf(buf + len, cap - len, "]");
}

const char *tdsl_dtype_name(DLDataType d) {
  static const struct {
    uint8_t code, bits;
    const char *name;
  } names[] = {{kDLBool, 8, "bool"},   {kDLInt, 8, "i8"},
               {kDLUInt, 8, "u8"},     {kDLInt, 16, "i16"},
               {kDLInt, 32, "i32"},    {kDLInt, 64, "i64"},
               {kDLFloat, 16, "f16"},  {kDLBfloat, 16, "bf16"},
               {kDLFloat, 32, "f32"},  {kDLFloat, 64, "f64"}};
  if (d.lanes != 1)
    return NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].code == d.code && names[i].bits == d.bits)
      return names[i].name;
  return NULL;
}

size_t tdsl_dtype_size(DLDataType d) {
  return ((size_t)d.bits * d.lanes + 7) / 8;
}

int64_t tdsl_tensor_numel(const DLTensor *t) {
  if (!t || t->ndim < 0 || (t->ndim > 0 && !t->shape))
    return -1;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0 || !rt_mul_ok(n, t->shape[i], &n))
      return -1;
  return n;
}

void tdsl_contiguous_strides(int ndim, const int64_t *shape,
                             int64_t *strides) {
  /* PyTorch multiplies by max(size, 1), so a size-0 dim does not zero the
   * outer strides. Products saturate at INT64_MAX; only a tensor with no
   * elements can reach that. */
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    if (!rt_mul_ok(s, shape[i] > 1 ? shape[i] : 1, &s))
      s = INT64_MAX;
  }
}

int tdsl_tensor_extent(const DLTensor *t, int64_t *first_byte,
                       int64_t *end_byte) {
  if (!t || t->ndim < 0 || (t->ndim > 0 && !t->shape))
    return TDSL_E_INVALID;
  if (t->byte_offset > (uint64_t)INT64_MAX)
    return TDSL_E_OVERFLOW;
  int64_t off = (int64_t)t->byte_offset;
  *first_byte = *end_byte = off;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] < 0)
      return TDSL_E_INVALID;
    if (t->shape[d] == 0)
      return TDSL_OK; /* empty: addresses nothing */
  }
  /* lo/hi: smallest and largest element offset (elements, from data +
   * byte_offset); NULL strides are row-major, built here with checks. */
  int64_t lo = 0, hi = 0, rowmajor = 1, span;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t stride = t->strides ? t->strides[d] : rowmajor;
    if (!rt_mul_ok(t->shape[d] - 1, stride, &span) ||
        !rt_add_ok(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
      return TDSL_E_OVERFLOW;
    if (!t->strides && !rt_mul_ok(rowmajor, t->shape[d], &rowmajor))
      rowmajor = INT64_MAX; /* a later dim of size > 1 then overflows */
  }
  int64_t es = (int64_t)tdsl_dtype_size(t->dtype), first, end;
  if (!rt_mul_ok(lo, es, &first) || !rt_add_ok(off, first, &first) ||
      !rt_add_ok(hi, 1, &end) || !rt_mul_ok(end, es, &end) ||
      !rt_add_ok(off, end, &end))
    return TDSL_E_OVERFLOW;
  *first_byte = first;
  *end_byte = end;
  return TDSL_OK;
}
