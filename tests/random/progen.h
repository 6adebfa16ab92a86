/* progen.h — random tdsl program generator for differential testing.
 *
 * progen_generate(seed) builds one kernel `k` that is valid by
 * construction: the generator tracks every value's dtype, symbolic shape,
 * whether its semantic strides are row-major (so view() is legal), a bound
 * on its magnitude and whether its elements are bit-exact in every
 * implementation (so discontinuous ops — comparisons, floor, casts to
 * integers, argmax — are only applied where all implementations must agree).
 * It produces the program text and the concrete parameter description the
 * caller needs to make inputs.  Deterministic in the seed.
 *
 * Needs: ir/dtype.h, ir/ir.h (Layout).  Used by tests/unit/test_random.c. */
#ifndef TDSL_TESTS_PROGEN_H
#define TDSL_TESTS_PROGEN_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/dtype.h"
#include "ir/ir.h"

#define PG_MAXR 6
#define PG_MAXP 16
#define PG_MAXRES 4

typedef struct PgParam {
  char name[8];
  DType dtype;
  bool is_tensor;
  int rank;
  int64_t shape[PG_MAXR]; /* concrete sizes (symbols at their values) */
  Layout layout;
  Scalar value;           /* scalar parameters */
} PgParam;

typedef struct PgProgram {
  char text[16384];
  int nparams;
  PgParam params[PG_MAXP];
  int nresults;
  bool exact[PG_MAXRES]; /* result must match bit for bit */
  DType tol[PG_MAXRES];  /* float dtype whose §9 tolerances apply (an f32
                            value widened to f64 keeps f32's), or DT_NONE */
  bool reduce;           /* uses reductions/@/conv/norms: spec §9's looser set */
} PgProgram;

/* Fills p with a fresh program for seed. */
void progen_generate(uint64_t seed, PgProgram *p);

#endif
