/* geometry_internal.h — what the two files of PyTorch's geometry rules
 * share: small Sym helpers, exact reasoning with a SymTab (provable order,
 * run-time checks), the facts of the entry checks, and the generic
 * numeric comparison.
 *
 *   geometry.c        the shared reasoning, printing, allocation strides,
 *                     layout predicates, dims, clone's preserve_format,
 *                     broadcasting, TensorIterator's output layout
 *   geometry_views.c  the view rules: view/reshape, permute/transpose,
 *                     expand, unsqueeze/squeeze, slice/narrow/select,
 *                     diagonal, unfold, as_strided
 *
 * geometry_views.c calls into geometry.c, never the reverse.  Private to
 * ir/geometry*.c; the rest of the compiler includes geometry.h. */
#ifndef TDSL_GEOMETRY_INTERNAL_H
#define TDSL_GEOMETRY_INTERNAL_H

#include "geometry.h"

/* ---- small helpers ---- */

static inline const Sym *K(GeomCtx *c, int64_t v) {
  return sym_const(c->st, v);
}
static inline const Sym *mul(GeomCtx *c, const Sym *a, const Sym *b) {
  return sym_mul(c->st, a, b);
}
static inline const Sym *add(GeomCtx *c, const Sym *a, const Sym *b) {
  return sym_add(c->st, a, b);
}
static inline const Sym *sub(GeomCtx *c, const Sym *a, const Sym *b) {
  return sym_sub(c->st, a, b);
}

static inline const Sym **syms_new(GeomCtx *c, int n) {
  return arena_alloc(c->arena, sizeof(const Sym *) * (size_t)(n > 0 ? n : 1));
}

/* Builds *out from freshly allocated arrays (so out may alias the input). */
static inline void geom_set(Geom *out, int rank, const Sym **shape,
                            const Sym **stride, const Sym *offset) {
  out->rank = rank;
  out->shape = shape;
  out->stride = stride;
  out->offset = offset;
}

static inline void geom_copy(GeomCtx *c, const Geom *in, Geom *out) {
  const Sym **sh = syms_new(c, in->rank), **st = syms_new(c, in->rank);
  for (int d = 0; d < in->rank; d++) {
    sh[d] = in->shape[d];
    st[d] = in->stride[d];
  }
  geom_set(out, in->rank, sh, st, in->offset);
}

static inline const char *S(GeomCtx *c, const Sym *s) {
  return sym_str(c->arena, s);
}

static inline const char *shp(GeomCtx *c, const Geom *g) {
  return geom_shape_str(c->arena, g->shape, g->rank);
}
static inline const char *strd(GeomCtx *c, const Geom *g) {
  return geom_stride_str(c->arena, g->stride, g->rank);
}

static inline bool is_const(const Sym *s) {
  int64_t v;
  return sym_is_const(s, &v);
}

static inline bool has_zero(const Sym *const *shape, int n) {
  for (int i = 0; i < n; i++)
    if (sym_is(shape[i], 0)) return true;
  return false;
}

/* ---- geometry.c: exact reasoning (with a SymTab) ---- */

typedef enum Tri { T_NO, T_YES, T_UNKNOWN } Tri;

/* a <= b: proved, disproved or unknown. */
Tri geom_prove_le(GeomCtx *c, const Sym *a, const Sym *b);
/* min/max folded when the order is provable, else an opaque atom. */
const Sym *geom_min(GeomCtx *c, const Sym *a, const Sym *b);
const Sym *geom_max(GeomCtx *c, const Sym *a, const Sym *b);
/* Records `lhs op rhs` as a run-time check unless it is provable; returns
 * false when it is provably violated (the caller reports the error). */
bool geom_need(GeomCtx *c, const Sym *lhs, IrCheckOp op, const Sym *rhs,
               const char *msg);
/* Facts the context kernel's entry checks establish so far. */
SymFacts geom_facts(GeomCtx *c);
/* Whether k already has the check a op b (either order for CHK_EQ). */
bool geom_has_check(const IrKernel *k, const Sym *a, IrCheckOp op,
                    const Sym *b);

/* ---- geometry.c: generic numeric comparison (no SymTab needed) ---- */

enum { NPTS = 3 };

/* A Sym's values at NPTS assignments of the variables: all 2 (the
 * smallest generic size), increasing with the id, decreasing with it, so
 * that distinct variables compare both ways. */
typedef struct Num {
  bool ok;          /* false when a value overflowed or is unknown */
  int64_t v[NPTS];
} Num;

typedef enum Cmp { C_LT, C_EQ, C_GT, C_UNKNOWN } Cmp;

Num geom_num_of(const Sym *s);
Num geom_num_const(int64_t v);
/* The order of a and b at every point, or C_UNKNOWN. */
Cmp geom_num_cmp(Num a, Num b);

/* ---- geometry.c: printing ---- */

char *geom_ints_str(Arena *a, const int64_t *v, int n);

#endif
