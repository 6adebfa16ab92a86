/* geometry.h — PyTorch's strided-tensor rules over symbolic sizes
 * (spec/pytorch-semantics.md §1–§7): the result geometry of every view op,
 * contiguity and memory-format tests, clone strides, TensorIterator's
 * output layout, broadcasting.
 *
 * Every function is pure: it reads an input geometry and writes an output
 * geometry (arrays from the context's arena).  A function that can fail
 * returns NULL on success or an arena-allocated message in the project's
 * words ("cannot view shape [4, 3] with strides [1, 4] as [12]: ...") that
 * the caller prints at the right source location.
 *
 * Symbols: decisions that depend on a symbol's run-time value are taken
 * for the generic case, a symbol being neither 0 nor 1 (a dim that must be
 * 1 is declared as the literal 1).  Conditions PyTorch checks at run time
 * (an index within a symbolic size, -1 dividing a symbolic numel), and
 * those under which the generic decision would give another shape than
 * PyTorch's (a symbolic dim that squeeze() keeps must not be 1), are
 * added to the context's check list. */
#ifndef TDSL_GEOMETRY_H
#define TDSL_GEOMETRY_H

#include <stdbool.h>

#include "ir.h"
#include "symprove.h"

typedef struct Geom {
  int rank;
  const Sym **shape;
  const Sym **stride;
  const Sym *offset;
} Geom;

typedef struct GeomCtx {
  SymTab *st;
  Arena *arena;
  IrModule *m;  /* for run-time checks; may be NULL (then none are made) */
  IrKernel *k;
  Loc loc;      /* location given to run-time checks */
} GeomCtx;

/* Whether sizes a and b are the same size: pointer-equal, proved equal
 * under the facts the kernel's entry checks establish so far, or, when
 * undecidable and not generically different, equal by a CHK_EQ entry
 * check with msg (added once; the answer is then true, as PyTorch would
 * fail at run time where they differ).  False when they differ
 * generically or there is no kernel to check on. */
bool geom_same_size(GeomCtx *c, const Sym *a, const Sym *b, const char *msg);

/* A size as text for messages: as written, then in parentheses what it
 * reads as once every size is at least 2 where that is shorter:
 * "H - min(H, 2) (H - 2 for sizes >= 2)". */
const char *geom_size_text(GeomCtx *c, const Sym *s);

/* Shapes and strides as text: "[4, N]", "[1, 4]" (as in spec §8.1). */
char *geom_shape_str(Arena *a, const Sym *const *v, int n);
char *geom_stride_str(Arena *a, const Sym *const *v, int n);

/* Allocation strides: contiguous (stride[d] = prod of max(size_j,1) for
 * j > d) and channels-last (rank 4). */
void geom_contiguous(GeomCtx *c, int rank, const Sym *const *shape, Geom *out);
void geom_channels_last(GeomCtx *c, const Sym *const *shape, Geom *out);
bool geom_is_contiguous(const Geom *g);
bool geom_is_channels_last(const Geom *g);
bool geom_suggests_channels_last(const Geom *g);
/* Non-overlapping and dense (a permutation of contiguous strides). */
bool geom_is_dense(const Geom *g);

/* Normalizes a possibly negative dim against rank (PyTorch wrap rules);
 * returns an error message when out of range. */
const char *geom_wrap_dim(GeomCtx *c, int64_t dim, int rank, int *out);

/* view(): sizes may hold one -1; computeStride rules. */
const char *geom_view(GeomCtx *c, const Geom *in, const Sym *const *sizes,
                      int n, Geom *out);
/* reshape(): *is_view tells whether it aliases; else out is contiguous. */
const char *geom_reshape(GeomCtx *c, const Geom *in, const Sym *const *sizes,
                         int n, Geom *out, bool *is_view);
const char *geom_permute(GeomCtx *c, const Geom *in, const int64_t *perm,
                         int n, Geom *out);
const char *geom_transpose(GeomCtx *c, const Geom *in, int64_t a, int64_t b,
                           Geom *out);
const char *geom_expand(GeomCtx *c, const Geom *in, const Sym *const *sizes,
                        int n, Geom *out);
const char *geom_unsqueeze(GeomCtx *c, const Geom *in, int64_t dim, Geom *out);
/* squeeze(): all size-1 dims when dim == NULL; a kept symbolic dim gets
 * an entry check that it is not 1. */
const char *geom_squeeze(GeomCtx *c, const Geom *in, const int64_t *dim,
                         Geom *out);
/* Slice a:b:c of one dim; start/stop NULL when omitted; step >= 1. */
const char *geom_slice(GeomCtx *c, const Geom *in, int dim, const Sym *start,
                       const Sym *stop, const Sym *step, Geom *out);
const char *geom_narrow(GeomCtx *c, const Geom *in, int64_t dim,
                        const Sym *start, const Sym *length, Geom *out);
const char *geom_select(GeomCtx *c, const Geom *in, int64_t dim,
                        const Sym *index, Geom *out);
const char *geom_diagonal(GeomCtx *c, const Geom *in, int64_t offset,
                          int64_t dim1, int64_t dim2, Geom *out);
const char *geom_unfold(GeomCtx *c, const Geom *in, int64_t dim,
                        const Sym *size, const Sym *step, Geom *out);
/* as_strided(): offset NULL keeps the input's.  `storage` is the
 * geometry of in's storage root (NULL: unknown, no bound check); the
 * result must address only elements inside it (checked at run time when
 * symbolic). */
const char *geom_as_strided(GeomCtx *c, const Geom *in, const Geom *storage,
                            const Sym *const *size, const Sym *const *stride,
                            int n, const Sym *offset, Geom *out);

/* clone() / to(dtype) with preserve_format: dense inputs keep strides,
 * others get dense strides in the inputs' stride order. */
void geom_preserve(GeomCtx *c, const Geom *in, Geom *out);
/* Broadcast two shapes; error when incompatible (symbols: compatible only
 * when provably equal or one is the literal 1). */
const char *geom_broadcast(GeomCtx *c, const Sym *const *a, int na,
                           const Sym *const *b, int nb, const Sym ***out,
                           int *nout);
/* TensorIterator's output strides for operands (in argument order) whose
 * shapes broadcast to `shape`; 0-dim and wrapped operands are passed with
 * rank 0 and have no say. */
void geom_elementwise_layout(GeomCtx *c, const Geom *const *ops, int nops,
                             int rank, const Sym *const *shape, Geom *out);

#endif
