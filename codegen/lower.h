/* lower.h — the loop form: tensor IR lowered to loop nests, shared by the
 * code generators (llvm.c today, a CUDA backend later).
 *
 * A kernel becomes a list of buffers and a list of nests run in order.
 *  - Buffers: tensor parameters (storage read through the descriptor's
 *    data + byte_offset), scalar parameters (one element), constant
 *    tables (TENSOR values), scratch (one per non-view intermediate, laid
 *    out by that value's semantic geometry, `size` elements), and the
 *    caller's outputs (addressed with the descriptor's run-time strides).
 *  - A nest iterates row-major over `rank` outer loops (`shape`) and, for
 *    reductions, `nred` inner loops (`red`); loop variable l is the l-th
 *    of these, outer first.  Its body evaluates `value` (an expression
 *    tree over loads) in the innermost loop and stores it (or the reduced
 *    accumulator, after the inner loops) through `store`.
 *  - An access (LfAccess) addresses element
 *        buf + offset + sum_l var[l] * stride[l]
 *    in elements, with Sym strides over the nest's loop variables.  A
 *    view never materializes: loading a view loads its storage root with
 *    the view's absolute geometry.  Parameters' semantic geometry equals
 *    their real one once the entry checks pass (layout checked, strides of
 *    `strided` parameters bound as symbols), so the same formula holds.
 *    `lin_rank` > 0 (RESHAPE) means: take the row-major linear index of
 *    the outer loops, split it over `lin_shape`, and apply `stride` to
 *    those coordinates instead.  `rt_strides` (outputs) means: the
 *    strides are the descriptor's, loop variable l on dim l.
 *
 * Needs: ir.h.  Produces: LfKernel in the caller's arena. */
#ifndef TDSL_LOWER_H
#define TDSL_LOWER_H

#include <stdbool.h>

#include "../ir/ir.h"

#define TDSL_LF_MAX_RANK 16

typedef enum LfBufKind {
  LFB_PARAM,   /* index: parameter number */
  LFB_SCALAR,  /* index: parameter number */
  LFB_CONST,   /* index: the TENSOR value; data: row-major elements */
  LFB_SCRATCH, /* index: the value; size: elements */
  LFB_OUTPUT   /* index: result number */
} LfBufKind;

typedef struct LfBuf {
  LfBufKind kind;
  int index;
  DType dtype;
  const Sym *size;  /* LFB_SCRATCH, LFB_CONST: elements */
  const void *data; /* LFB_CONST */
} LfBuf;

typedef struct LfAccess {
  int buf;
  const Sym *offset;   /* elements */
  const Sym **stride;  /* one per loop variable (or per lin_shape dim) */
  int lin_rank;        /* > 0: strides apply to lin_shape coordinates */
  const Sym **lin_shape;
  bool rt_strides;     /* outputs: the descriptor's strides */
} LfAccess;

typedef enum LfExprKind {
  LFE_LOAD,   /* acc; dtype = the buffer's */
  LFE_CONST,  /* value: .f for F64, .i for I64 (dtype is one of them) */
  LFE_SYM,    /* sym evaluated, I64 */
  LFE_ARANGE, /* F64: start + var[loop] * step */
  LFE_OP,     /* op (elementwise) over args, result dtype */
  LFE_CAST    /* args[0] converted to dtype (spec §5.4) */
} LfExprKind;

typedef struct LfExpr {
  LfExprKind kind;
  DType dtype;
  Op op;
  int flags; /* IRF_* of the op (GELU tanh) */
  int nargs;
  struct LfExpr *args[3];
  LfAccess acc;
  Scalar value;
  const Sym *sym;
  double start, step;
  int loop;
} LfExpr;

typedef struct LfNest {
  int rank;
  const Sym **shape;
  int nred;
  const Sym **red;
  Op reduce;       /* OP_COUNT: plain store; else SUM ... ARGMIN */
  LfExpr *value;
  LfAccess store;  /* over the outer loops */
  DType dtype;     /* stored dtype */
  IrRef src;       /* the IR value computed (-1: a result copy) */
} LfNest;

typedef struct LfKernel {
  const IrKernel *k;
  int nbufs;
  LfBuf *bufs;
  int nnests;
  LfNest *nests;
} LfKernel;

/* Lowers k.  Returns NULL with *unsupported set to the first op the loop
 * form cannot express yet (matmul, conv2d, pools, normalizations). */
LfKernel *lf_lower(IrModule *m, const IrKernel *k, Op *unsupported);

/* Prints the loop form (debugging, tests). */
void lf_print(FILE *f, const LfKernel *lk);

#endif
