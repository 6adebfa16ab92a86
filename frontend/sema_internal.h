/* sema_internal.h — what the files of semantic analysis share: the
 * checking context (Sema), the values expressions evaluate to (SVal), the
 * evaluated arguments of a call (CallArgs), the builtin tables, and the
 * functions each file offers the ones above it.
 *
 * Expressions evaluate to SVals: a tensor (an IR value) or one of the
 * compile-time things a PyTorch program can pass around (an int that may
 * be symbolic, a float, a dtype, a list, ...).
 *
 * The files depend one way, each only on those below it:
 *
 *   sema.c              the driver: kernels, parameters, results, body
 *   sema_expr.c         expressions, compile-time arithmetic, calls
 *   sema_layers.c       layers composed of the families' ops (calls
 *                       them through their builtin tables)
 *   sema_elementwise.c  sema_views.c  sema_reduce.c  sema_stats.c
 *   sema_scan.c  sema_matmul.c  sema_conv.c  sema_factory.c  sema_index.c
 *   sema_join.c  sema_resize.c
 *                                      the op families, each with the
 *                                      builtin table of its calls
 *   sema_args.c         argument readers, calls of another family's builtin
 *   sema_values.c       SVals, appending IR values, promotion, names
 *   cnames.c            names the generated C can hold
 *
 * Private to frontend/; the driver sees only sema_program (ast.h). */
#ifndef TDSL_SEMA_INTERNAL_H
#define TDSL_SEMA_INTERNAL_H

#include <string.h>

#include "../ir/geometry.h"
#include "ast.h"

enum { MAX_DIMS = TDSL_MAX_RANK }; /* ir.h: the one rank limit */
/* sema_arg index that never matches a positional: keyword-only argument. */
enum { KW_ONLY = 1000 };

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

/* ---- builtins: one table per op family, searched by sema_expr.c ---- */

typedef struct Builtin Builtin;
typedef SVal (*Handler)(Sema *s, CallArgs *c, const Builtin *b);
/* BF_TENSORS: binary functions whose operands must both be tensors
 * (PyTorch has no Scalar overload); BF_NUMBER: `other` may be a Python
 * number, `input` must be a tensor. */
enum { BF_FUNC = 1, BF_METHOD = 2, BF_BOTH = 3, BF_TENSORS = 4, BF_NUMBER = 8 };
struct Builtin {
  const char *name;   /* as PyTorch spells it; NULL ends a table */
  Handler fn;
  Op op;              /* the op the handler builds, for shared handlers */
  int flags;          /* BF_* */
};

/* ---- SVal constructors ---- */

static inline SVal sv_make(SvKind kind, Loc loc) {
  SVal v;
  memset(&v, 0, sizeof v);
  v.kind = kind;
  v.ref = -1;
  v.dt = DT_NONE;
  v.loc = loc;
  return v;
}

static inline SVal sv_error(void) { return sv_make(SV_ERROR, (Loc){0, 0, 0}); }

/* A tensor SVal; SV_ERROR when r < 0 (an operand that failed). */
static inline SVal sv_tensor(IrRef r, Loc loc) {
  if (r < 0) return sv_error();
  SVal v = sv_make(SV_TENSOR, loc);
  v.ref = r;
  return v;
}

static inline SVal sv_int(const Sym *sym, Loc loc) {
  SVal v = sv_make(SV_INT, loc);
  v.sym = sym;
  return v;
}

static inline SVal sv_float(double f, Loc loc) {
  SVal v = sv_make(SV_FLOAT, loc);
  v.f = f;
  return v;
}

static inline SVal sv_bool(bool b, Loc loc) {
  SVal v = sv_make(SV_BOOL, loc);
  v.b = b;
  return v;
}

/* An optional argument that was not given (or given as None). */
static inline bool absent(const SVal *v) { return !v || v->kind == SV_NONE; }

/* The constant size v. */
static inline const Sym *K(Sema *s, int64_t v) { return sym_const(s->st, v); }

static inline const Sym **sym_array(Sema *s, int n) {
  return arena_alloc(s->a, sizeof(const Sym *) * (size_t)(n > 0 ? n : 1));
}

static inline const char *shape_str(Sema *s, const Sym *const *shape, int n) {
  return geom_shape_str(s->a, shape, n);
}

static inline const char *sym_text(Sema *s, const Sym *v) {
  return sym_str(s->a, v);
}

/* ---- sema_values.c ---- */

/* "a tensor", "an int", ... for messages. */
const char *sv_kind_name(const SVal *v);
/* An int, float or bool (a Python number). */
bool sv_is_number(const SVal *v);
/* A bool or a constant int as an int64. */
bool sv_const_int(const SVal *v, int64_t *out);
/* Whether number v converts to dt as PyTorch's Scalar does (c10's checked
 * conversion); reports PyTorch's overflow message at loc when not. */
bool sema_scalar_fits(Sema *s, const SVal *v, DType dt, Loc loc);
/* A number SVal as a double. */
double sv_num_f(const SVal *v);

IrValue *sema_val(Sema *s, IrRef r);
/* Geometry context for this kernel at loc. */
GeomCtx sema_geom(Sema *s, Loc loc);
Geom sema_geom_of(Sema *s, IrRef r);
const Sym *sema_sym0(Sema *s);
const Sym **sema_syms_copy(Sema *s, const Sym *const *v, int n);
/* A value of op with the geometry g (arrays must live in the arena). */
IrValue sema_value_from_geom(Sema *s, Op op, DType dt, const Geom *g,
                             Loc loc);
void sema_set_args(Sema *s, IrValue *v, const IrRef *refs, int n);
/* Sets constant attrs a[0..n). */
void sema_set_int_attrs(Sema *s, IrValue *v, const int64_t *a, int n);
/* Allocates a fresh value of op with contiguous strides of the given
 * shape (not yet emitted). */
IrValue sema_new_dense(Sema *s, Op op, DType dt, int rank,
                       const Sym *const *shape, Loc loc);
/* Appends a value, after filling in loc; returns its ref. */
IrRef sema_emit(Sema *s, IrValue *v);
/* A view op of `in` with the geometry g and the given attrs and flags. */
IrRef sema_emit_view(Sema *s, Op op, IrRef in, const Geom *g,
                     const Sym *const *attrs, int nattrs, int flags, Loc loc);
/* A fresh copy of r (op COPY or CAST) with the strides of `g`. */
IrRef sema_emit_copy(Sema *s, Op op, IrRef r, DType dt, const Geom *g,
                     int flags, Loc loc);
/* A CAST of r to dt keeping r's layout (geom_preserve). */
IrRef sema_emit_cast(Sema *s, IrRef r, DType dt, int flags, Loc loc);
/* Casts to dt (no-op when already dt); IRF_IMPLICIT. */
IrRef sema_cast(Sema *s, IrRef r, DType dt, Loc loc);
/* Broadcast-expands r to shape (no-op when equal); IRF_IMPLICIT. */
IrRef sema_expand_to(Sema *s, IrRef r, int rank, const Sym *const *shape,
                     Loc loc);
/* Converts an SVal to a tensor (ints/floats/bools become wrapped CONSTs;
 * symbolic ints SYMVALs); reports and returns -1 otherwise. */
IrRef sema_to_tensor(Sema *s, const SVal *v, const char *what);
/* Ranks stay within MAX_DIMS; reports at loc otherwise. */
bool sema_rank_ok(Sema *s, int rank, Loc loc);
/* The views and values of the op builders (operands unsqueezed, results
 * squeezed, the op itself with its operands). */
IrRef sema_emit_op_view(Sema *s, Op op, IrRef src, const Geom *g,
                        const int64_t *attrs, int nattrs, Loc loc);
IrRef sema_emit_unsqueeze(Sema *s, IrRef r, int dim, Loc loc);
IrRef sema_emit_squeeze(Sema *s, IrRef r, const int64_t *dims, int n,
                        Loc loc);
IrRef sema_emit_op(Sema *s, IrValue *v, const IrRef *args, int n);
/* Run-time conditions lhs <= rhs and lhs == rhs (checked at entry). */
void sema_check_le(Sema *s, const Sym *lhs, const Sym *rhs, const char *msg,
                   Loc loc);
void sema_check_eq(Sema *s, const Sym *lhs, const Sym *rhs, const char *msg,
                   Loc loc);
/* The dtype of a tensor SVal or of what a Python number would become. */
DType sema_result_type(Sema *s, const SVal *ops, int n);
/* A tensor's shape as text for messages. */
const char *sema_shape_str(Sema *s, IrRef r);
/* Binds name to v in the kernel scope (the latest binding wins). */
void sema_bind(Sema *s, const char *name, SVal v, Loc loc);
/* Latest binding of name, or -1. */
int sema_find_name(const Sema *s, const char *name);
/* The note "x declared here with shape [3, 4]" when r is (a view chain
 * of) a named value. */
void sema_note_origin(Sema *s, IrRef r);

/* ---- sema_args.c ---- */

/* For op families that compose other families' ops: the entry `name` of
 * a builtin table (NULL: none), and a call of builtin b as the program
 * would make it, with evaluated arguments (positionals pos, counting the
 * receiver when method; keywords kwname/kw); an error argument gives
 * sv_error() without a call. */
const Builtin *sema_builtin_find(const Builtin *table, const char *name);
SVal sema_call_builtin(Sema *s, const Builtin *b, Loc loc, bool method, SVal *pos,
                       int npos, const char **kwname, SVal *kw, int nkw);

/* sema_arg returns positional i (counting the receiver for methods) or
 * keyword kw, or NULL when absent; it reports an error when given both
 * ways.  sema_need_arg also reports its absence at the call's name. */
const SVal *sema_arg(Sema *s, CallArgs *c, int i, const char *kw);
const SVal *sema_need_arg(Sema *s, CallArgs *c, int i, const char *kw);
/* Reports unknown keywords and too many positionals (max positional
 * count including the receiver); returns false on error. */
bool sema_args_done(Sema *s, CallArgs *c, int maxpos);
/* An argument that already failed: the error was reported. */
bool sema_has_error_arg(const CallArgs *c);
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
/* Constant ints given as varargs or one list (permute's dims). */
bool sema_int_varargs(Sema *s, CallArgs *c, int first, int64_t *out, int *n);
/* Argument i / kw of the call, named "f() argument 'kw'" in messages:
 * optional (def when absent or None) or required. */
bool sema_opt_int(Sema *s, CallArgs *c, int i, const char *kw, int64_t def,
                  int64_t *out);
bool sema_req_int(Sema *s, CallArgs *c, int i, const char *kw, int64_t *out);
bool sema_req_sym(Sema *s, CallArgs *c, int i, const char *kw,
                  const Sym **out);
bool sema_req_tensor(Sema *s, CallArgs *c, int i, const char *kw,
                     IrRef *out);
/* The tensor a handler works on: the receiver (self) or input. */
bool sema_tensor_recv(Sema *s, CallArgs *c, IrRef *x);
/* The op builders' readers: a bool (keepdim=, ...; dflt when absent), an
 * optional dtype (DT_NONE when absent), the input tensor (positional 0 or
 * input=), a dim wrapped as PyTorch does (a 0-dim tensor takes -1 and
 * 0); messages start with "f(): ". */
bool sema_bool_arg(Sema *s, const SVal *v, const char *fn, const char *what,
                   bool dflt, bool *out);
bool sema_dtype_arg(Sema *s, const SVal *v, const char *fn, DType *out);
bool sema_input_arg(Sema *s, CallArgs *c, IrRef *out);
bool sema_wrap_dim(Sema *s, CallArgs *c, int64_t d, int rank, int *out);

/* ---- the op families: builders other files call, builtin tables ---- */

/* sema_elementwise.c: a and b are tensors or Python numbers. */
SVal sema_ew_binary(Sema *s, Op op, const SVal *a, const SVal *b, Loc loc);
SVal sema_ew_unary(Sema *s, Op op, IrRef x, int flags, Loc loc);
/* where(cond, a, b) computed in dt, broadcast, with a contiguous result
 * (masked_fill, tril and triu: PyTorch's results are contiguous). */
SVal sema_where_dense(Sema *s, IrRef cond, IrRef a, IrRef b, DType dt,
                      Loc loc);
extern const Builtin sema_elementwise_builtins[];

/* sema_views.c: transpose and permute (for .mT and .T); x[...] item by
 * item: sema_index_check checks the items and returns how many dims they
 * consume (-1 after reporting), sema_index_item applies one at dim *d. */
SVal sema_transpose(Sema *s, IrRef x, int64_t a, int64_t b, Loc loc);
SVal sema_permute(Sema *s, IrRef x, const int64_t *perm, int n, Loc loc);
int sema_index_check(Sema *s, IrRef x, const SVal *it, int n, Loc loc,
                     int *ellipsis);
SVal sema_index_item(Sema *s, IrRef cur, const SVal *it, int *d);
extern const Builtin sema_view_builtins[];
/* The view builders (sema_views.c) for sema_join.c's decompositions:
 * x[start:stop:step] along dim (wrapped), select, unsqueeze, expand,
 * reshape (a view where PyTorch's is one, else a RESHAPE copy). */
SVal sema_view_slice(Sema *s, IrRef x, int dim, const Sym *start,
                     const Sym *stop, const Sym *step, Loc loc);
SVal sema_view_select(Sema *s, IrRef x, int64_t dim, const Sym *i, Loc loc);
SVal sema_view_unsqueeze(Sema *s, IrRef x, int64_t dim, Loc loc);
SVal sema_view_expand(Sema *s, IrRef x, const Sym *const *sizes, int n,
                      Loc loc);
SVal sema_view_reshape(Sema *s, IrRef x, const Sym *const *sizes, int n,
                       Loc loc);

/* sema_reduce.c: the pieces of a reduction that sema_stats.c reuses:
 * dim= (an int, a list, None) read into mask (*all when absent, None or
 * []); the error (static) or run-time check (symbolic) that no reduced
 * dim is empty; the reduction value of op over mask (NULL: all dims). */
bool sema_reduce_dims(Sema *s, CallArgs *c, const SVal *dv, int rank,
                      bool *mask, bool *all);
bool sema_reduce_nonempty(Sema *s, CallArgs *c, const IrValue *xv,
                          const bool *mask);
IrRef sema_reduce_emit(Sema *s, CallArgs *c, Op op, IrRef x, DType dt,
                       const bool *mask, bool keepdim);
extern const Builtin sema_reduce_builtins[];
extern const Builtin sema_stats_builtins[];     /* sema_stats.c */
extern const Builtin sema_scan_builtins[];      /* sema_scan.c */

SVal sema_matmul(Sema *s, IrRef a, IrRef b, Loc loc); /* sema_matmul.c: @ */
extern const Builtin sema_matmul_builtins[];

/* sema_conv.c: conv2d (nsp 2) and conv1d (nsp 1) from their call. */
SVal sema_conv(Sema *s, CallArgs *c, int nsp);
extern const Builtin sema_conv_builtins[];
extern const Builtin sema_factory_builtins[];   /* sema_factory.c */
/* sema_index.c: index_select & co.; x[...] with one integer tensor at
 * dim *d (advanced indexing: negative indices wrap), which
 * sema_index_tensor_ok checks first (i64; masks are not supported). */
extern const Builtin sema_index_builtins[];
bool sema_index_tensor_ok(Sema *s, const SVal *it);
SVal sema_index_tensor(Sema *s, IrRef x, int *d, const SVal *it);
/* x.index_select(dim, idx) for an index the caller built and knows in
 * range (IRF_INBOUNDS: no run-time check), e.g. a pad or interpolate
 * decomposition's clamp(arange(n) - p, 0, size - 1); idx 1-D i64/i32
 * (its elementwise arithmetic is inlined into the one indexing nest),
 * x of rank >= 1, dim normalized.  Contiguous result. */
IrRef sema_index_inbounds(Sema *s, IrRef x, int dim, IrRef idx, Loc loc);
/* sema_resize.c: pad, interpolate, conv_transpose2d (decompositions into
 * INDEX with indices known in range, elementwise ops and conv2d). */
extern const Builtin sema_resize_builtins[];

/* sema_join.c: joining and splitting (cat, stack, split, chunk, unbind,
 * roll, repeat, tile, tril, triu, masked_fill); sema_unbind gives the
 * SV_LIST of x's slices along dim (tuple assignment of a tensor). */
SVal sema_unbind(Sema *s, IrRef x, int dim, Loc loc);
extern const Builtin sema_join_builtins[];

/* sema_layers.c: linear, addmm, bmm, baddbmm, einsum, conv1d, batch_norm,
 * group_norm, rms_norm, scaled_dot_product_attention, built from the ops
 * of the families above. */
extern const Builtin sema_layer_builtins[];

/* ---- sema_expr.c ---- */

SVal sema_eval(Sema *s, const Expr *e);

/* ---- cnames.c: why a kernel or parameter name would break the
 * generated C (keywords, reserved names, the runtime's prefixes, ...),
 * or NULL ---- */
const char *sema_kernel_name_problem(const char *name);
const char *sema_param_name_problem(const char *name);

#endif
