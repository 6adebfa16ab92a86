/* ir.h — the tensor IR.
 *
 * A module holds kernels; a kernel is a list of values in SSA order (an
 * operand always precedes its user), each produced by one op of ops.h.
 * Every value carries its dtype, symbolic shape, semantic strides and
 * storage offset (sym.h), exactly those PyTorch would give it (spec §5.2).
 * Views stay views; copies are explicit ops.  Values refer to each other
 * by index (IrRef), never by pointer, so passes can rebuild the list.
 *
 * Requires: arena.h (all memory), sym.h (geometry), ops.h (the op table).
 * Produced by: frontend/sema.c, ir/read.c.  Checked by: ir_verify(). */
#ifndef TDSL_IR_H
#define TDSL_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "diag.h"
#include "dtype.h"
#include "ops.h"
#include "sym.h"

typedef int IrRef; /* index into IrKernel.values; -1 = none */

/* The one rank limit: sema rejects a tensor with more dims, so the
 * interpreter, the passes and the loop form size their per-dim arrays by
 * it. */
#define TDSL_MAX_RANK 16

typedef enum Layout {
  LAYOUT_CONTIGUOUS,
  LAYOUT_CHANNELS_LAST,
  LAYOUT_STRIDED
} Layout;
const char *layout_name(Layout l); /* "contiguous", "channels_last", "strided" */

/* IrValue.flags */
enum {
  IRF_WRAPPED = 1 << 0,  /* CONST/SYMVAL from a Python number: promotion rank */
  IRF_IMPLICIT = 1 << 1, /* EXPAND/CAST inserted by sema (broadcast, promotion) */
  IRF_KEEPDIM = 1 << 2,  /* reductions */
  IRF_TANH = 1 << 3,     /* GELU approximate="tanh" */
  IRF_CL = 1 << 4,       /* COPY to channels-last */
  IRF_CLONE = 1 << 5,    /* COPY from clone() */
  IRF_WEIGHT = 1 << 6,   /* LAYER_NORM has weight; LERP's is a tensor */
  IRF_BIAS = 1 << 7,     /* LAYER_NORM/CONV2D have bias */
  IRF_INLINE = 1 << 8,   /* pass fuse: computed inside each user (no loop
                            nest, no buffer); lowering at -O1+ obeys it */
  IRF_WRAP = 1 << 9,     /* INDEX/GATHER: negative indices count from the end */
  IRF_INBOUNDS = 1 << 10, /* INDEX/GATHER: indices known in range (no check) */
};

typedef struct IrValue {
  Op op;
  DType dtype;
  int rank;
  const Sym **shape;  /* rank entries */
  const Sym **stride; /* semantic strides in elements, rank entries */
  const Sym *offset;  /* semantic storage offset in elements */
  int nargs;
  IrRef *args;        /* operands, all earlier values */
  int nattrs;
  const Sym **attrs;  /* integer attributes, meaning per op (ops.h) */
  double fattr[3];    /* float attributes (ARANGE, LAYER_NORM eps, the
                         parameters of activations and nan_to_num) */
  Scalar value;       /* CONST, FULL: .f for float dtypes, .i otherwise */
  void *data;         /* TENSOR: row-major elements of dtype */
  int flags;          /* IRF_* */
  Loc loc;            /* operator / method / function name in the source */
  const char *name;   /* source variable bound to it, or NULL */
  int slot;           /* pass plan-memory: scratch block (1-based) shared
                         with other values of the same slot; 0: none (own
                         buffer).  A block is as large as its first
                         (lowest-numbered) value, which every later one
                         provably fits. */
  int out;            /* pass plan-memory: 1 + the result whose caller
                         output this value is computed in (the result's
                         value, same dtype and dense layout): no scratch,
                         no final copy; 0: none */
  int group;          /* pass row-group: the row group (1-based) whose
                         nests run row by row together (row_groups.c);
                         0: none */
  int rows;           /* group > 0: the leading dims every member shares
                         (the rows), >= 1 */
} IrValue;

typedef enum SymKind {
  SYMK_SIZE,  /* a size symbol named in the source */
  SYMK_STRIDE /* the run-time stride of a `strided` parameter's dim */
} SymKind;

/* A symbol variable: bound at kernel entry from params[param].dim. */
typedef struct IrSymVar {
  const char *name; /* "N", or "x.stride(1)" for strides */
  SymKind kind;
  int param, dim;   /* where it is bound (first appearance) */
  Loc loc;
} IrSymVar;

typedef struct IrParam {
  const char *name;
  DType dtype;
  bool is_tensor;     /* false: a scalar passed by value */
  Layout layout;
  int rank;
  const Sym **shape;  /* declared dims: constants or SYMK_SIZE variables */
  Loc loc;
  IrRef value;        /* its PARAM value */
} IrParam;

typedef struct IrResult {
  DType dtype;
  Layout layout;
  int rank;
  const Sym **shape; /* declared dims: expressions of bound symbols */
  Loc loc;
  IrRef value;       /* the returned value */
  const Sym **qstride; /* `strided` results: the strides a shape query
                          writes, PyTorch's strides of the returned value
                          as sema built it when they are dense, else
                          clone()'s (geom_preserve); NULL otherwise */
} IrResult;

/* A condition on symbol values that PyTorch would check at run time
 * (slice index in range, -1 divisible, ...): `lhs OP rhs` must hold at
 * kernel entry, else the kernel fails with `msg`. */
typedef enum IrCheckOp { CHK_EQ, CHK_LE, CHK_LT } IrCheckOp;
typedef struct IrCheck {
  const Sym *lhs, *rhs;
  IrCheckOp op;
  const char *msg;
  Loc loc;
} IrCheck;

typedef struct IrKernel {
  const char *name;
  Loc loc;
  int nparams;
  IrParam *params;
  int nsyms, symcap;
  IrSymVar *syms;
  int nvalues, valcap;
  IrValue *values;
  int nresults;
  IrResult *results;
  int nchecks, checkcap;
  IrCheck *checks;
} IrKernel;

typedef struct IrModule {
  const char *file;
  Arena *arena;
  SymTab *st;
  int nkernels, kcap;
  IrKernel **kernels;
} IrModule;

/* Construction (ir.c).  ir_add appends a copy of *v and returns its ref;
 * the arrays v points to must already live in the arena. */
IrModule *ir_module_new(Arena *a, const char *file);
IrKernel *ir_kernel_new(IrModule *m, const char *name, Loc loc);
IrRef ir_add(IrModule *m, IrKernel *k, const IrValue *v);
int ir_add_sym(IrModule *m, IrKernel *k, const IrSymVar *s);
void ir_add_check(IrModule *m, IrKernel *k, const IrCheck *c);
/* A failed check's message as a printf format (its '%' escaped) with one
 * "%lld" per symbol variable in lhs or rhs, so the message gives the
 * values it speaks of: " (= %lld)" after the symbol's first whole-word
 * mention ("size N (= 3)"), or " (N = %lld)" at the end when the message
 * does not name it. ids[] gets the symbol ids in argument order; returns
 * how many (at most IR_CHECK_MAX_SYMS; further symbols are not shown). */
#define IR_CHECK_MAX_SYMS 4
int ir_check_format(Arena *a, const IrKernel *k, const IrCheck *c, char **fmt,
                    int *ids);
static inline IrValue *ir_val(const IrKernel *k, IrRef r) {
  return &k->values[r];
}
/* Number of elements as a Sym. */
const Sym *ir_numel(IrModule *m, const IrValue *v);
/* Elements a dense buffer with v's semantic geometry needs: offset + 1 +
 * sum (size - 1) * stride over the dims; with row-major strides (or none)
 * and offset 0 that is max(numel, 1) (equal when no dim is 0, and then
 * nothing is addressed), written so. */
const Sym *ir_dense_extent(IrModule *m, const IrValue *v);
/* The run-time message of INDEX/GATHER value r's failed index check, a
 * printf format with two %lld, the index and the size of the indexed dim:
 * "index at 3:12: index %lld is out of range for dim 0 of 'x' (size
 * %lld)" (the tensor: the source name of the indexed operand or of the
 * value it views, else its op and position).  Generated code and the
 * interpreter prefix "kernel 'K': ". */
const char *ir_index_message(Arena *a, const IrKernel *k, IrRef r);
/* Follows view operands back to the value that owns the storage. */
IrRef ir_storage_root(const IrKernel *k, IrRef r);

/* Storage (storage.c): what the passes that plan it (fuse, plan-memory)
 * and lowering (loops/) must agree on.
 *
 * ir_view_map composes the index map of a read of value r (r's dim d at
 * loop variable map[d], < 0: index 0) down to r's storage root: pm[j]
 * for the root's dims.  False when the view is not such a simple map
 * (offset 0; each dim of size 1, stride 0 (expand), or a distinct dim of
 * the root with equal size and stride; every root dim of size != 1
 * covered), or a rank is above TDSL_MAX_RANK.  Pass fuse inlines a value
 * only where its reads compose; lowering follows the same maps. */
bool ir_view_map(IrModule *m, const IrKernel *k, IrRef r, const int *map, int *pm);
/* Whether v gets a scratch buffer of its own at -O1+: computed (not a
 * view, parameter or constant table), not IRF_INLINE, not placed in a
 * caller's output (IrValue.out). */
bool ir_owns_scratch(const IrValue *v);
/* Bytes of v's scratch buffer: its dense extent times its dtype size. */
const Sym *ir_scratch_bytes(IrModule *m, const IrValue *v);
/* Bytes of plan-memory block `slot` (> 0): its first value's scratch
 * bytes (IrValue.slot). */
const Sym *ir_slot_bytes(IrModule *m, const IrKernel *k, int slot);
/* Scratch bytes of k's values as planned: each block once, values
 * without a slot alone.  Lowering's extras (normalization statistics,
 * GEMM packing panels) are not included. */
const Sym *ir_planned_scratch_bytes(IrModule *m, const IrKernel *k);

/* Removes the values nothing uses any more (transitively: not a result,
 * not an operand of a kept value) for which drop_ok[r] is true (all of
 * them when drop_ok is NULL); PARAM values always stay.  Renumbers the
 * rest in order and updates operands, params and results.  Returns the
 * number removed.  Passes call it after redirecting users. */
int ir_compact(IrModule *m, IrKernel *k, const bool *drop_ok);

/* Row groups (row_groups.c; pass row-group decides them, lowering
 * runs them, plan-memory plans their scratch).  A group's members are
 * computed values that lowering gives one nest each (the reductions of
 * ir_group_reduce, elementwise/copy values not IRF_INLINE); they share
 * the extents of their first `rows` dims (a reduction's input keeps
 * those dims, it reduces only later ones), every read of one member by
 * another is row-local, and lowering emits their nests consecutively at
 * the place of the first member (ir_exec_order).  Non-members between
 * the first and the last member run after the group; none of them is
 * read by a member. */
bool ir_group_reduce(Op op);
/* The order in which lowering emits k's values' nests: value order, but
 * each row group's members consecutively where its first member is.
 * order[i] = the i-th value, pos[r] = its place (either may be NULL);
 * pos[k->nvalues] = k->nvalues. */
void ir_exec_order(const IrKernel *k, IrRef *order, int *pos);
/* The first problem with k's row groups (for ir_verify), or NULL:
 * *at = the value it is about.  (m: ir_view_map's symbols.) */
const char *ir_check_groups(IrModule *m, const IrKernel *k, IrRef *at);
/* Reduced dims of reduction v over an operand of rank n: red[d]. */
void ir_reduced_dims(const IrValue *v, int n, bool *red);
/* Calls fn for each read of the nest lowering gives value c (an
 * elementwise/copy value or an ir_group_reduce reduction): the storage
 * root p read (following inlined values into their operands) and pm, p's
 * dims as loop variables of c's nest (-1: index 0; loop l < c's rank is
 * c's dim l, a reduction's reduced dims follow), or NULL where the index
 * map does not compose (ir_view_map).  An inlined GEMM is read as
 * itself.  Stops and returns false when fn does. */
typedef bool (*IrLoadFn)(void *ctx, IrRef p, const int *pm);
bool ir_nest_loads(IrModule *m, const IrKernel *k, IrRef c, IrLoadFn fn, void *ctx);
/* Whether a read of member p with index map pm stays in the row: p's
 * first `rows` dims at the same loop variables, its others at none of
 * them. */
bool ir_row_local(const IrValue *p, const int *pm, int rows);
/* Whether value r can be a member of a group over `rows` leading dims
 * of extents ext: its first dims are those; a reduction keeps them (its
 * operand's first dims are ext too, reduced dims all later). */
bool ir_group_shape_ok(const IrKernel *k, IrRef r, int rows, const Sym *const *ext);

/* Printer (print.c): the textual form read back by ir_read(). */
void ir_print_module(FILE *f, const IrModule *m);
void ir_print_kernel(FILE *f, const IrModule *m, const IrKernel *k);

/* Reader (read.c): parses the printed form.  Errors go to d with the
 * line and column in the IR text; returns NULL if there were any. */
IrModule *ir_read(Arena *a, Diag *d, const char *file, const char *text);

/* Verifier (verify.c): checks every structural invariant (operand order,
 * arity, shapes of elementwise operands, view geometry within bounds where
 * static, dtypes per op).  Returns 0 when the module is well formed; else
 * prints each violation to `out` and returns their number. */
int ir_verify(const IrModule *m, FILE *out);

#endif
