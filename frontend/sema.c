/* sema.c — semantic analysis, the driver: checks a parsed program with
 * PyTorch's rules and builds the tensor IR (one IrKernel per kernel):
 * kernel names, parameters (size symbols bound at first appearance,
 * strides by layout), declared results, the statements of the body in a
 * kernel scope, and the return values against the declared results.
 *
 * Needs: ast.h (the parser's tree), sema_expr.c (sema_eval), the helpers
 * of sema_values.c, cnames.c (names the generated C can hold),
 * geometry.c, sym.c.
 * Produces: an IrModule whose values follow ops.h's conventions —
 * elementwise operands pre-cast to the compute dtype and pre-expanded to
 * the result shape (IRF_IMPLICIT CAST/EXPAND), views carrying absolute
 * geometry in their storage root, semantic strides as PyTorch's.
 * Used by: the driver (sema_program, declared in ast.h). */
#include <string.h>

#include "sema_internal.h"

/* ---- Kernels: parameters, results, body ---- */

static int find_size_sym(const IrKernel *k, const char *name) {
  for (int j = 0; j < k->nsyms; j++)
    if (k->syms[j].kind == SYMK_SIZE && strcmp(k->syms[j].name, name) == 0)
      return j;
  return -1;
}

static bool check_layout(Sema *s, const TypeSpec *t, const char *what) {
  if (!t->is_tensor && t->layout_given) {
    diag_error(s->d, t->loc, "%s is a scalar and cannot have a layout", what);
    return false;
  }
  if (t->layout == LAYOUT_CHANNELS_LAST && t->rank != 4) {
    diag_error(s->d, t->loc,
               "channels_last needs a rank-4 tensor, but %s has rank %d", what,
               t->rank);
    return false;
  }
  return true;
}

/* A parameter dim: an int or a size symbol, bound at first appearance. */
static const Sym *param_dim(Sema *s, const AstKernel *ak, int pi, int d) {
  const Expr *e = ak->params[pi].type.dims[d];
  if (e->kind == EX_INT) return sym_const(s->st, e->u.ival);
  if (e->kind != EX_NAME) {
    diag_error(s->d, e->loc, "a parameter dim must be an int or a size "
                             "symbol; expressions are allowed in results only");
    return sema_sym0(s);
  }
  int id = find_size_sym(s->k, e->u.str);
  if (id < 0) {
    for (int j = 0; j < ak->nparams; j++)
      if (strcmp(ak->params[j].name, e->u.str) == 0) {
        diag_error(s->d, e->loc,
                   "size symbol '%s' has the same name as a parameter",
                   e->u.str);
        break;
      }
    IrSymVar sv = {e->u.str, SYMK_SIZE, pi, d, e->loc};
    id = ir_add_sym(s->m, s->k, &sv);
  }
  return sym_var(s->st, id, s->k->syms[id].name);
}

static void param_strides(Sema *s, IrParam *p, int pi, Geom *g) {
  GeomCtx c = sema_geom(s, p->loc);
  memset(g, 0, sizeof *g);
  if (p->layout == LAYOUT_STRIDED) {
    g->stride = arena_alloc(s->a, (size_t)p->rank * sizeof *g->stride + 1);
    for (int d = 0; d < p->rank; d++) {
      IrSymVar sv = {arena_printf(s->a, "%s.stride(%d)", p->name, d),
                     SYMK_STRIDE, pi, d, p->loc};
      int id = ir_add_sym(s->m, s->k, &sv);
      g->stride[d] = sym_var(s->st, id, sv.name);
    }
  } else if (p->layout == LAYOUT_CHANNELS_LAST && p->rank == 4) {
    geom_channels_last(&c, p->shape, g);
  } else {
    geom_contiguous(&c, p->rank, p->shape, g);
  }
  g->rank = p->rank;
  g->shape = p->shape;
  g->offset = sema_sym0(s);
}

static void sema_param(Sema *s, const AstKernel *ak, int pi) {
  const AstParam *ap = &ak->params[pi];
  IrParam *p = &s->k->params[pi];
  for (int j = 0; j < pi; j++)
    if (strcmp(ak->params[j].name, ap->name) == 0) {
      diag_error(s->d, ap->loc, "duplicate parameter '%s'", ap->name);
      diag_note(s->d, ak->params[j].loc, "'%s' first declared here",
                ap->name);
    }
  const char *why = sema_param_name_problem(ap->name);
  if (why)
    diag_error(s->d, ap->loc,
               "parameter name '%s' %s, so the generated header would not "
               "compile; rename the parameter", ap->name, why);
  check_layout(s, &ap->type,
               arena_printf(s->a, "parameter '%s'", ap->name));
  p->name = ap->name;
  p->dtype = ap->type.dtype;
  p->is_tensor = ap->type.is_tensor;
  p->layout = ap->type.layout;
  p->rank = ap->type.is_tensor ? ap->type.rank : 0;
  if (!sema_rank_ok(s, p->rank, ap->type.loc)) p->rank = 0;
  p->loc = ap->loc;
  p->shape = arena_alloc(s->a, (size_t)(p->rank + 1) * sizeof *p->shape);
  for (int d = 0; d < p->rank; d++) p->shape[d] = param_dim(s, ak, pi, d);
  Geom g;
  param_strides(s, p, pi, &g);
  IrValue v = sema_value_from_geom(s, OP_PARAM, p->dtype, &g, ap->loc);
  v.value.i = pi;
  v.name = ap->name;
  p->value = sema_emit(s, &v);
  sema_bind(s, ap->name, sv_tensor(p->value, ap->loc), ap->loc);
}

/* A result dim: int, bound symbol, or + - * // of those. */
static const Sym *result_dim(Sema *s, const Expr *e, bool *ok) {
  switch (e->kind) {
  case EX_INT: return sym_const(s->st, e->u.ival);
  case EX_NAME: {
    int id = find_size_sym(s->k, e->u.str);
    if (id >= 0) return sym_var(s->st, id, s->k->syms[id].name);
    diag_error(s->d, e->loc,
               "symbol '%s' is used in a result but bound by no parameter",
               e->u.str);
    *ok = false;
    return sema_sym0(s);
  }
  case EX_BINARY: {
    const Sym *a = result_dim(s, e->u.bin.lhs, ok);
    const Sym *b = result_dim(s, e->u.bin.rhs, ok);
    switch (e->u.bin.op) {
    case BIN_ADD: return sym_add(s->st, a, b);
    case BIN_SUB: return sym_sub(s->st, a, b);
    case BIN_MUL: return sym_mul(s->st, a, b);
    case BIN_FLOORDIV:
      if (sym_is(b, 0)) break;
      return sym_floordiv(s->st, a, b);
    default: break;
    }
    break;
  }
  default: break;
  }
  diag_error(s->d, e->loc, "a result dim must be an int, a size symbol, or "
                           "+ - * // of those");
  *ok = false;
  return sema_sym0(s);
}

static void sema_result(Sema *s, const AstKernel *ak, int ri) {
  const TypeSpec *t = &ak->results[ri];
  IrResult *r = &s->k->results[ri];
  r->dtype = t->dtype;
  r->layout = t->layout;
  r->rank = t->is_tensor ? t->rank : 0;
  r->loc = t->loc;
  r->value = -1;
  r->qstride = NULL;
  if (!sema_rank_ok(s, r->rank, t->loc)) return;
  if (!t->is_tensor) {
    diag_error(s->d, t->loc,
               "a kernel result must be a tensor; write %s[] for a 0-dim "
               "tensor",
               dtype_name(t->dtype));
    return;
  }
  check_layout(s, t, arena_printf(s->a, "result %d", ri));
  r->shape = arena_alloc(s->a, (size_t)(r->rank + 1) * sizeof *r->shape);
  bool ok = true;
  for (int d = 0; d < r->rank; d++) r->shape[d] = result_dim(s, t->dims[d], &ok);
  if (!ok) r->shape = NULL; /* already reported: skip the return check */
}

/* Whether the returned shape is the declared one: dim by dim the same
 * size, possibly written another way (`(H - 1)//2 + 1` for `(H + 1)//2`),
 * proved so or checked at kernel entry.  The declared dims then take the
 * returned value's expressions, so the IR's result shapes stay
 * pointer-equal to their values' (which verify.c requires). */
static bool return_shape_ok(Sema *s, int i, const IrValue *x, Loc loc) {
  IrResult *r = &s->k->results[i];
  if (x->rank != r->rank) return false;
  GeomCtx c = sema_geom(s, loc);
  for (int d = 0; d < r->rank; d++) {
    const char *msg = arena_printf(
        s->a, "return value %d has size %s at dim %d but result %d is declared "
        "with size %s there",
        i, sym_str(s->a, x->shape[d]), d, i, sym_str(s->a, r->shape[d]));
    if (!geom_same_size(&c, x->shape[d], r->shape[d], msg)) return false;
  }
  for (int d = 0; d < r->rank; d++) r->shape[d] = x->shape[d];
  return true;
}

/* "; its dim 1 is (H + 1)//2 where the declaration says H//2" for the
 * first differing dim with a symbol in it, else "". */
static const char *dim_mismatch(Sema *s, const IrValue *x, const IrResult *r) {
  if (x->rank != r->rank) return "";
  GeomCtx c = sema_geom(s, r->loc);
  for (int d = 0; d < r->rank; d++) {
    const Sym *have = x->shape[d], *want = r->shape[d];
    if (have == want || (sym_is_const(have, NULL) && sym_is_const(want, NULL)))
      continue;
    return arena_printf(s->a, "; its dim %d is %s where the declaration says %s",
                        d, geom_size_text(&c, have), sym_str(s->a, want));
  }
  return "";
}

/* True when e depends on a `strided` parameter's run-time strides. */
static bool uses_stride_sym(const IrKernel *k, const Sym *e) {
  int64_t c;
  int id, n;
  const Sym *a, *b;
  switch (sym_form(e, &c, &id, &a, &b, &n)) {
  case SYMF_CONST: return false;
  case SYMF_VAR: return id < k->nsyms && k->syms[id].kind == SYMK_STRIDE;
  case SYMF_POLY:
    for (int i = 0; i < n; i++) {
      int na;
      const Sym *const *atoms;
      sym_term(e, i, &c, &na, &atoms);
      for (int j = 0; j < na; j++)
        if (uses_stride_sym(k, atoms[j])) return true;
    }
    return false;
  default: return uses_stride_sym(k, a) || uses_stride_sym(k, b);
  }
}

/* The strides a shape query writes for a `strided` result returning r:
 * PyTorch's strides of r where they are dense (`(x - y).t()` of [4, 6]
 * operands: (1, 6)), else those clone() gives (dense, in r's stride
 * order).  Where r's strides come from a `strided` parameter's run-time
 * strides, which PyTorch would compare at run time, row-major.  Taken
 * now: passes may return another value with the same elements (a dropped
 * copy) but other semantic strides. */
static const Sym **query_strides(Sema *s, IrRef r, Loc loc) {
  GeomCtx gc = sema_geom(s, loc);
  Geom in = sema_geom_of(s, r), out;
  bool runtime = false;
  for (int d = 0; d < in.rank; d++)
    runtime = runtime || uses_stride_sym(s->k, in.stride[d]);
  if (runtime) geom_contiguous(&gc, in.rank, in.shape, &out);
  else geom_preserve(&gc, &in, &out);
  return out.stride;
}

static const char *type_str(Sema *s, DType dt, int rank,
                            const Sym *const *shape) {
  return arena_printf(s->a, "%s%s", dtype_name(dt),
                      geom_shape_str(s->a, shape, rank));
}

static void check_return_value(Sema *s, Loc loc, int i, SVal v) {
  IrResult *r = &s->k->results[i];
  if (v.kind == SV_ERROR || !r->shape) return;
  if (v.kind != SV_TENSOR) {
    diag_error(s->d, loc, "return value %d is %s, not a tensor", i,
               sv_kind_name(&v));
    return;
  }
  IrValue *x = sema_val(s, v.ref);
  const char *decl = type_str(s, r->dtype, r->rank, r->shape);
  if (x->dtype != r->dtype) {
    diag_error(s->d, loc,
               "return value %d has dtype %s but the result is declared as "
               "%s; convert with .to(%s)",
               i, dtype_name(x->dtype), decl, dtype_name(r->dtype));
    diag_note(s->d, r->loc, "result %d declared here", i);
  } else if (!return_shape_ok(s, i, x, loc)) {
    diag_error(s->d, loc,
               "return value %d has shape %s but the result is declared as "
               "%s%s",
               i, sema_shape_str(s, v.ref), decl, dim_mismatch(s, x, r));
    diag_note(s->d, r->loc, "result %d declared here", i);
  }
  r->value = v.ref;
  if (r->layout == LAYOUT_STRIDED) r->qstride = query_strides(s, v.ref, loc);
}

static void sema_return(Sema *s, const AstKernel *ak, const Stmt *st) {
  SVal *vals = arena_alloc(s->a, (size_t)(st->nvalues + 1) * sizeof *vals);
  for (int i = 0; i < st->nvalues; i++) vals[i] = sema_eval(s, st->values[i]);
  int nvalues = st->nvalues;
  if (nvalues == 1 && ak->nresults > 1 && vals[0].kind == SV_LIST) {
    nvalues = vals[0].nitems; /* `return x.chunk(2)`: the tuple's values */
    vals = vals[0].items;
  }
  if (nvalues != ak->nresults) {
    diag_error(s->d, st->loc,
               "kernel '%s' returns %d value%s but declares %d result%s",
               ak->name, nvalues, nvalues == 1 ? "" : "s",
               ak->nresults, ak->nresults == 1 ? "" : "s");
    if (ak->nresults > 0)
      diag_note(s->d, ak->results[0].loc, "results declared here");
    return;
  }
  for (int i = 0; i < nvalues; i++)
    check_return_value(s, nvalues == st->nvalues ? st->values[i]->loc
                                                 : st->values[0]->loc,
                       i, vals[i]);
}

/* Python's name for a value that cannot be unpacked. */
static const char *py_type(const SVal *v) {
  switch (v->kind) {
  case SV_INT: return "int";
  case SV_FLOAT: return "float";
  case SV_BOOL: return "bool";
  case SV_NONE: return "NoneType";
  case SV_STR: return "str";
  default: return sv_kind_name(v);
  }
}

/* `a = e`, or `a, b, ... = e` unpacking a tuple (split, chunk, unbind,
 * var_mean, a list) or a tensor along dim 0, with Python's errors at the
 * value. */
static void sema_assign(Sema *s, const Stmt *st) {
  SVal v = sema_eval(s, st->values[0]);
  int n = st->ntargets > 0 ? st->ntargets : 1;
  if (n == 1) {
    sema_bind(s, st->name, v, st->loc);
    return;
  }
  Loc at = st->values[0]->loc;
  int64_t len;
  if (v.kind == SV_TENSOR) {
    const IrValue *x = sema_val(s, v.ref);
    if (x->rank == 0) {
      diag_error(s->d, at, "iteration over a 0-d tensor");
      sema_note_origin(s, v.ref);
      v = sv_error();
    } else if (sym_is_const(x->shape[0], &len) && len != n) {
      v.kind = SV_LIST; /* only the count matters: reported below */
      v.nitems = (int)(len > n ? n + 1 : len);
    } else {
      v = sema_unbind(s, v.ref, 0, at);
    }
  } else if (v.kind != SV_LIST && v.kind != SV_ERROR) {
    diag_error(s->d, at, "cannot unpack non-iterable %s object", py_type(&v));
    v = sv_error();
  }
  if (v.kind == SV_LIST && v.nitems != n) {
    if (v.nitems > n)
      diag_error(s->d, at, "too many values to unpack (expected %d)", n);
    else
      diag_error(s->d, at, "not enough values to unpack (expected %d, got %d)",
                 n, v.nitems);
    v = sv_error();
  }
  for (int i = 0; i < n; i++)
    sema_bind(s, st->names[i], v.kind == SV_LIST ? v.items[i] : sv_error(),
              st->name_locs[i]);
}

static void sema_body(Sema *s, const AstKernel *ak) {
  int ret = -1;
  for (int i = 0; i < ak->nbody; i++) {
    const Stmt *st = &ak->body[i];
    if (ret >= 0) {
      diag_error(s->d, st->loc,
                 "statement after return; return must be the last statement "
                 "of kernel '%s'",
                 ak->name);
      diag_note(s->d, ak->body[ret].loc, "kernel returns here");
      return;
    }
    if (st->kind == ST_RETURN) {
      ret = i;
      sema_return(s, ak, st);
      continue;
    }
    sema_assign(s, st);
  }
  if (ret < 0)
    diag_error(s->d, ak->loc, "kernel '%s' has no return statement",
               ak->name);
}

static void sema_kernel(Arena *a, Diag *d, IrModule *m, const AstKernel *ak) {
  Sema s;
  memset(&s, 0, sizeof s);
  s.a = a;
  s.d = d;
  s.m = m;
  s.st = m->st;
  s.k = ir_kernel_new(m, ak->name, ak->loc);
  s.k->nparams = ak->nparams;
  s.k->params = arena_alloc(a, (size_t)(ak->nparams + 1) * sizeof(IrParam));
  for (int i = 0; i < ak->nparams; i++) sema_param(&s, ak, i);
  s.k->nresults = ak->nresults;
  s.k->results = arena_alloc(a, (size_t)(ak->nresults + 1) * sizeof(IrResult));
  for (int i = 0; i < ak->nresults; i++) sema_result(&s, ak, i);
  sema_body(&s, ak);
}

/* The kernel's name becomes the C functions NAME and NAME_info. */
static void check_kernel_name(Diag *d, const AstProgram *p, int i) {
  const AstKernel *ak = &p->kernels[i];
  const char *why = sema_kernel_name_problem(ak->name);
  if (why)
    diag_error(d, ak->loc,
               "kernel name '%s' %s; the kernel becomes a C function of "
               "that name, so rename it", ak->name, why);
  size_t n = strlen(ak->name);
  for (int j = 0; j < p->nkernels; j++) {
    const char *o = p->kernels[j].name;
    if (strncmp(o, ak->name, n) != 0 || strcmp(o + n, "_info") != 0) continue;
    diag_error(d, p->kernels[j].loc,
               "kernel name '%s' clashes with the function %s_info() that "
               "tdslc generates for kernel '%s'; rename one of them", o,
               ak->name, ak->name);
    diag_note(d, ak->loc, "kernel '%s' is defined here", ak->name);
  }
}

IrModule *sema_program(Arena *a, Diag *d, const AstProgram *p,
                       const char *file) {
  int errors_before = d->nerrors;
  IrModule *m = ir_module_new(a, file);
  for (int i = 0; i < p->nkernels; i++) {
    const AstKernel *ak = &p->kernels[i];
    check_kernel_name(d, p, i);
    bool dup = false;
    for (int j = 0; j < i && !dup; j++)
      if (strcmp(p->kernels[j].name, ak->name) == 0) {
        diag_error(d, ak->loc, "kernel '%s' is defined twice", ak->name);
        diag_note(d, p->kernels[j].loc, "first definition of '%s' is here",
                  ak->name);
        dup = true;
      }
    if (!dup) sema_kernel(a, d, m, ak);
  }
  return d->nerrors > errors_before ? NULL : m;
}
