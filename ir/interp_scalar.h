/* interp_scalar.h — the scalar semantics of the elementwise ops
 * (interp_scalar.c), private to the reference interpreter (interp.c). */
#ifndef TDSL_INTERP_SCALAR_H
#define TDSL_INTERP_SCALAR_H

#include <stdint.h>

#include "ir.h"

/* Two's-complement wrap of v into integer dtype t (bool: != 0). */
int64_t interp_int_wrap(DType t, uint64_t v);

/* One result element of elementwise value v (unary, binary, compare,
 * lerp, where) from its operands' elements x[0..2]; `in` is the compute
 * dtype (operand 0's, or the branches' for where).  Floats in .f,
 * integers and bools in .i. */
Scalar interp_elementwise(const IrValue *v, DType in, const Scalar *x);

#endif
