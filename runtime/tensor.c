/* tensor.c — DLTensor helpers for applications: allocating CPU tensors
 * with contiguous, channels-last or given strides, and freeing them.
 * Needs alloc.c (data), error.c and descriptor.c (strides, and
 * tdsl_tensor_extent to size strided buffers). A tensor from these
 * helpers owns one malloc block holding shape then strides, and one
 * tdsl_alloc block of zeroed data; tdsl_tensor_free releases both. */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "tdsl/runtime.h"

/* Allocates t's shape/strides block and copies shape; strides are left
 * for the caller. */
static int rt_alloc_dims(DLTensor *t, int ndim, const int64_t *shape) {
  if (ndim == 0)
    return TDSL_OK;
  int64_t *blk = malloc(2 * (size_t)ndim * sizeof *blk);
  if (!blk)
    return tdsl_set_error(TDSL_E_NOMEM,
                          "tdsl_tensor_alloc: out of memory for %d dims",
                          ndim);
  memcpy(blk, shape, (size_t)ndim * sizeof *blk);
  t->shape = blk;
  t->strides = blk + ndim;
  return TDSL_OK;
}

static int rt_check_args(DLTensor *t, int ndim, const int64_t *shape) {
  if (!t)
    return tdsl_set_error(TDSL_E_INVALID, "tdsl_tensor_alloc: NULL tensor");
  memset(t, 0, sizeof *t);
  if (ndim < 0 || (ndim > 0 && !shape))
    return tdsl_set_error(TDSL_E_INVALID,
                          "tdsl_tensor_alloc: ndim %d with %s shape", ndim,
                          shape ? "a" : "a NULL");
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0)
      return tdsl_set_error(TDSL_E_INVALID,
                            "tdsl_tensor_alloc: dim %d has negative size "
                            "%lld",
                            i, (long long)shape[i]);
  return TDSL_OK;
}

/* Common tail: t has shape and strides; size the buffer from its extent. */
static int rt_alloc_data(DLTensor *t, DLDataType dtype) {
  t->dtype = dtype;
  t->device.device_type = kDLCPU;
  t->device.device_id = 0;
  int64_t first, end;
  if (tdsl_tensor_extent(t, &first, &end) != TDSL_OK) {
    char dims[256];
    rt_format_dims(dims, sizeof dims, t->ndim, t->shape);
    tdsl_tensor_free(t);
    return tdsl_set_error(TDSL_E_OVERFLOW,
                          "tdsl_tensor_alloc: shape %s is too large", dims);
  }
  size_t bytes = (size_t)end;
  t->data = tdsl_alloc(bytes, 0);
  if (!t->data) {
    tdsl_tensor_free(t);
    return tdsl_set_error(TDSL_E_NOMEM,
                          "tdsl_tensor_alloc: cannot allocate %zu bytes",
                          bytes);
  }
  memset(t->data, 0, bytes);
  return TDSL_OK;
}

int tdsl_tensor_alloc(DLTensor *t, DLDataType dtype, int ndim,
                      const int64_t *shape) {
  int rc = rt_check_args(t, ndim, shape);
  if (rc == TDSL_OK)
    rc = rt_alloc_dims(t, ndim, shape);
  if (rc != TDSL_OK)
    return rc;
  t->ndim = ndim;
  if (ndim > 0)
    tdsl_contiguous_strides(ndim, shape, t->strides);
  return rt_alloc_data(t, dtype);
}

int tdsl_tensor_alloc_strided(DLTensor *t, DLDataType dtype, int ndim,
                              const int64_t *shape, const int64_t *strides) {
  int rc = rt_check_args(t, ndim, shape);
  if (rc != TDSL_OK)
    return rc;
  if (ndim > 0 && !strides)
    return tdsl_set_error(TDSL_E_INVALID,
                          "tdsl_tensor_alloc_strided: NULL strides");
  for (int i = 0; i < ndim; i++)
    if (strides[i] < 0)
      return tdsl_set_error(TDSL_E_INVALID,
                            "tdsl_tensor_alloc_strided: dim %d has negative "
                            "stride %lld",
                            i, (long long)strides[i]);
  if ((rc = rt_alloc_dims(t, ndim, shape)) != TDSL_OK)
    return rc;
  t->ndim = ndim;
  if (ndim > 0)
    memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
  return rt_alloc_data(t, dtype);
}

int tdsl_tensor_alloc_channels_last(DLTensor *t, DLDataType dtype, int ndim,
                                    const int64_t *shape) {
  int rc = rt_check_args(t, ndim, shape);
  if (rc != TDSL_OK)
    return rc;
  if (ndim != 4)
    return tdsl_set_error(TDSL_E_INVALID,
                          "tdsl_tensor_alloc_channels_last: rank %d, "
                          "expected 4",
                          ndim);
  /* NCHW sizes, NHWC order in memory: C fastest, then W, H, N. Computed
   * through the same max(size, 1) rule as contiguous strides. */
  int64_t nhwc[4] = {shape[0], shape[2], shape[3], shape[1]}, s[4];
  tdsl_contiguous_strides(4, nhwc, s);
  int64_t strides[4] = {s[0], s[3], s[1], s[2]};
  return tdsl_tensor_alloc_strided(t, dtype, 4, shape, strides);
}

void tdsl_tensor_free(DLTensor *t) {
  if (!t)
    return;
  tdsl_free(t->data);
  free(t->shape);
  memset(t, 0, sizeof *t);
}
