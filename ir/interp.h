/* interp.h — the reference interpreter: naive, obviously correct
 * evaluation of a kernel on host buffers with real strides and offsets.
 * It is the oracle for every other test, so clarity beats speed.
 *
 * Values are computed one op at a time exactly as PyTorch eager would:
 * views share their operand's storage with the value's semantic geometry
 * evaluated for the bound symbols; every other op allocates a dense
 * buffer laid out by its semantic strides. */
#ifndef TDSL_INTERP_H
#define TDSL_INTERP_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/* A host tensor: element (i0, i1, ...) lives at
 * data + (offset + sum i_d * stride[d]) * dtype_size(dtype). */
typedef struct HostTensor {
  DType dtype;
  int rank;
  int64_t shape[TDSL_MAX_RANK];
  int64_t stride[TDSL_MAX_RANK]; /* elements */
  int64_t offset;                /* elements */
  void *data;
  void *owned;                   /* malloc'd block to free, or NULL */
} HostTensor;

/* One argument per kernel parameter: tensors by HostTensor, scalars by
 * value (already converted to the parameter's dtype). */
typedef struct InterpArg {
  HostTensor t; /* tensor parameters */
  Scalar s;     /* scalar parameters */
} InterpArg;

/* Runs kernel k.  On success returns 0 and fills outs[i] (one per result,
 * freshly allocated, row-major contiguous; free with host_tensor_free).
 * On failure (shape/dtype/symbol mismatch with the declaration, a failed
 * run-time check) returns -1 with a message in err naming the parameter,
 * dim, expected and actual values. */
int interp_run(const IrModule *m, const IrKernel *k, const InterpArg *args,
               HostTensor *outs, char *err, size_t errlen);

/* Allocates a row-major contiguous tensor; returns -1 on overflow/OOM. */
int host_tensor_alloc(HostTensor *t, DType dt, int rank, const int64_t *shape);
void host_tensor_free(HostTensor *t);
int64_t host_tensor_numel(const HostTensor *t);

#endif
