/* sema.h — internals shared by the two halves of semantic analysis:
 *
 *   sema.c      programs, kernels, parameters, size symbols, statements,
 *               expression evaluation, type promotion, elementwise ops,
 *               views, indexing, copies, casts, and the call dispatch;
 *   sema_ops.c  reductions, softmax/log_softmax/layer_norm, matmul,
 *               conv2d, pooling, and the factories (tensor, zeros, ones,
 *               full, arange).
 *
 * Expressions evaluate to SVals: a tensor (an IR value) or one of the
 * compile-time things a PyTorch program can pass around (an int that may
 * be symbolic, a float, a dtype, a list, ...). */
#ifndef TDSL_SEMA_H
#define TDSL_SEMA_H

#include "../ir/geometry.h"
#include "ast.h"

typedef enum SvKind {
  SV_ERROR,    /* an error was already reported; propagate silently */
  SV_TENSOR,   /* ref */
  SV_INT,      /* sym: a Python int, possibly symbolic (size symbols) */
  SV_FLOAT,    /* f */
  SV_BOOL,     /* b */
  SV_NONE,
  SV_STR,      /* s */
  SV_DTYPE,    /* dt: f32, i64, ... used as a value */
  SV_LAYOUT,   /* layout: contiguous / channels_last */
  SV_LIST,     /* items */
  SV_SLICE,    /* items[0..2]: start, stop, step (SV_NONE when omitted) */
  SV_ELLIPSIS
} SvKind;

typedef struct SVal SVal;
struct SVal {
  SvKind kind;
  IrRef ref;
  const Sym *sym;
  double f;
  bool b;
  const char *s;
  DType dt;
  Layout layout;
  SVal *items;
  int nitems;
  Loc loc; /* where this value was written */
};

/* The evaluated arguments of one call. */
typedef struct CallArgs {
  const char *name;   /* function or method name */
  Loc loc;            /* of the name */
  bool method;        /* x.f(...): pos[0] is the receiver */
  SVal *pos;
  int npos;
  const char **kwname;
  SVal *kw;
  int nkw;
  bool *kwused;       /* set by sema_kwarg; unused keywords are errors */
} CallArgs;

typedef struct Sema {
  Arena *a;
  Diag *d;
  IrModule *m;
  IrKernel *k;
  SymTab *st;
  /* kernel scope: names bound so far (latest binding wins) */
  int nnames, namecap;
  const char **names;
  SVal *namevals;
  Loc *nameloc;
} Sema;

/* ---- sema.c: helpers for sema_ops.c ---- */

IrValue *sema_val(Sema *s, IrRef r);
/* Appends a value, after filling in loc; returns its ref. */
IrRef sema_emit(Sema *s, IrValue *v);
/* Geometry context for this kernel at loc. */
GeomCtx sema_geom(Sema *s, Loc loc);
Geom sema_geom_of(Sema *s, IrRef r);
/* Allocates a fresh value of op with contiguous strides of the given
 * shape (not yet emitted). */
IrValue sema_new_dense(Sema *s, Op op, DType dt, int rank,
                       const Sym *const *shape, Loc loc);
/* Casts to dt (no-op when already dt); IRF_IMPLICIT. */
IrRef sema_cast(Sema *s, IrRef r, DType dt, Loc loc);
/* Broadcast-expands r to shape (no-op when equal); IRF_IMPLICIT. */
IrRef sema_expand_to(Sema *s, IrRef r, int rank, const Sym *const *shape,
                     Loc loc);
/* Converts an SVal to a tensor (ints/floats/bools become wrapped CONSTs;
 * symbolic ints SYMVALs); reports and returns -1 otherwise. */
IrRef sema_to_tensor(Sema *s, const SVal *v, const char *what);
/* The dtype of a tensor SVal or of what a Python number would become. */
DType sema_result_type(Sema *s, const SVal *ops, int n);

/* Argument access.  sema_arg returns positional i (counting the receiver
 * for methods) or keyword kw, or NULL when absent; it reports an error when
 * given both ways. */
const SVal *sema_arg(Sema *s, CallArgs *c, int i, const char *kw);
/* Reports unknown keywords and too many positionals (max positional
 * count including the receiver); returns false on error. */
bool sema_args_done(Sema *s, CallArgs *c, int maxpos);
/* Typed argument readers: report a clear error and return false when the
 * argument has the wrong kind. */
bool sema_int_arg(Sema *s, const SVal *v, const char *what, int64_t *out);
bool sema_sym_arg(Sema *s, const SVal *v, const char *what, const Sym **out);
bool sema_tensor_arg(Sema *s, const SVal *v, const char *what, IrRef *out);
/* An int or a list of ints (a single int repeated `n` times for pairs). */
bool sema_int_list(Sema *s, const SVal *v, const char *what, int64_t *out,
                   int *count, int max);
/* Sizes: varargs `f(2, 3)` or a single list `f([2, 3])`, ints possibly
 * symbolic, starting at positional index first. */
bool sema_sizes(Sema *s, CallArgs *c, int first, const Sym ***out, int *n);
/* A tensor's shape as text for messages. */
const char *sema_shape_str(Sema *s, IrRef r);
/* The note "x declared here with shape [3, 4]" when r is (a view chain
 * of) a named value. */
void sema_note_origin(Sema *s, IrRef r);

/* ---- sema_ops.c: builders called from the dispatch table ---- */
/* Each returns the result SVal (SV_ERROR after reporting). */
/* cnames.c: why a kernel or parameter name would break the generated C
 * (keywords, reserved names, the runtime's prefixes, ...), or NULL. */
const char *sema_kernel_name_problem(const char *name);
const char *sema_param_name_problem(const char *name);

SVal sema_reduce(Sema *s, Op op, CallArgs *c);          /* sum mean amax amin prod argmax argmin */
SVal sema_softmax(Sema *s, Op op, CallArgs *c);         /* softmax log_softmax */
SVal sema_layer_norm(Sema *s, CallArgs *c);
SVal sema_matmul(Sema *s, IrRef a, IrRef b, Loc loc);   /* @ and matmul() */
SVal sema_conv2d(Sema *s, CallArgs *c);
SVal sema_pool(Sema *s, Op op, CallArgs *c);            /* max/avg/adaptive */
SVal sema_factory(Sema *s, CallArgs *c);                /* tensor zeros ones full arange */

#endif
