/* sema_args.c — reading the evaluated arguments of a call (CallArgs):
 * positional or keyword, required or optional, typed (int, size, tensor,
 * bool, dtype, lists of ints, sizes as varargs or one list, dims wrapped
 * as PyTorch does), with PyTorch's errors in the project's words at the
 * argument or the call's name; and calling a builtin of another family
 * with evaluated arguments (sema_builtin_find, sema_call_builtin: the
 * layer and resize decompositions).
 *
 * Needs: sema_internal.h, sema_values.c (sv_kind_name, sema_val),
 * geometry.c (geom_wrap_dim).
 * Used by: the handlers of the op families (sema_elementwise.c,
 * sema_views.c, sema_reduce.c, sema_stats.c, sema_scan.c, sema_matmul.c,
 * sema_conv.c, sema_factory.c, sema_index.c, sema_join.c, sema_layers.c,
 * sema_resize.c) and the call dispatch (sema_expr.c). */
#include <string.h>

#include "sema_internal.h"

const SVal *sema_arg(Sema *s, CallArgs *c, int i, const char *kw) {
  const SVal *p = (i >= 0 && i < c->npos) ? &c->pos[i] : NULL;
  const SVal *k = NULL;
  if (kw)
    for (int j = 0; j < c->nkw; j++)
      if (strcmp(c->kwname[j], kw) == 0) {
        k = &c->kw[j];
        c->kwused[j] = true;
      }
  if (p && k) {
    diag_error(s->d, k->loc,
               "%s() got argument '%s' both by position and by keyword",
               c->name, kw);
    return p;
  }
  return p ? p : k;
}

bool sema_args_done(Sema *s, CallArgs *c, int maxpos) {
  bool ok = true;
  if (c->npos > maxpos) {
    int skip = c->method ? 1 : 0;
    diag_error(s->d, c->pos[maxpos].loc,
               "%s() takes at most %d positional argument%s but %d were given",
               c->name, maxpos - skip, maxpos - skip == 1 ? "" : "s",
               c->npos - skip);
    ok = false;
  }
  for (int j = 0; j < c->nkw; j++)
    if (!c->kwused[j]) {
      diag_error(s->d, c->kw[j].loc,
                 "%s() got an unexpected keyword argument '%s'", c->name,
                 c->kwname[j]);
      ok = false;
    }
  return ok;
}

/* A required argument: reports its absence at the call's name. */
const SVal *sema_need_arg(Sema *s, CallArgs *c, int i, const char *kw) {
  const SVal *v = sema_arg(s, c, i, kw);
  if (!v)
    diag_error(s->d, c->loc, "%s() is missing its argument '%s'", c->name, kw);
  return v;
}

static bool missing(Sema *s, const char *what) {
  diag_error(s->d, (Loc){0, 0, 0}, "missing %s", what);
  return false;
}

bool sema_int_arg(Sema *s, const SVal *v, const char *what, int64_t *out) {
  if (!v) return missing(s, what);
  if (v->kind == SV_ERROR) return false;
  if (v->kind == SV_INT) {
    if (sym_is_const(v->sym, out)) return true;
    diag_error(s->d, v->loc,
               "%s must be a constant int, but %s is only known at run time",
               what, sym_str(s->a, v->sym));
    return false;
  }
  diag_error(s->d, v->loc, "%s must be an int, got %s", what,
             sv_kind_name(v));
  return false;
}

bool sema_sym_arg(Sema *s, const SVal *v, const char *what, const Sym **out) {
  if (!v) return missing(s, what);
  if (v->kind == SV_ERROR) return false;
  if (v->kind == SV_INT) {
    *out = v->sym;
    return true;
  }
  if (v->kind == SV_TENSOR && sema_val(s, v->ref)->op == OP_PARAM &&
      sema_val(s, v->ref)->rank == 0) {
    diag_error(s->d, v->loc,
               "%s must be an int or a size symbol; a scalar parameter is a "
               "0-dim tensor, not a size",
               what);
    return false;
  }
  diag_error(s->d, v->loc, "%s must be an int, got %s", what,
             sv_kind_name(v));
  return false;
}

bool sema_tensor_arg(Sema *s, const SVal *v, const char *what, IrRef *out) {
  if (!v) return missing(s, what);
  if (v->kind == SV_ERROR) return false;
  if (v->kind == SV_TENSOR) {
    *out = v->ref;
    return true;
  }
  diag_error(s->d, v->loc, "%s must be a tensor, got %s", what,
             sv_kind_name(v));
  return false;
}

/* A single int fills all `max` entries (so pair arguments like stride=2
 * read out[0] and out[1]) and sets *count = 1; a list sets *count to its
 * length. */
bool sema_int_list(Sema *s, const SVal *v, const char *what, int64_t *out,
                   int *count, int max) {
  if (!v) return missing(s, what);
  if (v->kind == SV_ERROR) return false;
  if (v->kind == SV_INT) {
    int64_t x;
    if (!sema_int_arg(s, v, what, &x)) return false;
    for (int i = 0; i < max; i++) out[i] = x;
    *count = 1;
    return true;
  }
  if (v->kind != SV_LIST) {
    diag_error(s->d, v->loc, "%s must be an int or a list of ints, got %s",
               what, sv_kind_name(v));
    return false;
  }
  if (v->nitems > max) {
    diag_error(s->d, v->loc, "%s has %d entries; at most %d are allowed",
               what, v->nitems, max);
    return false;
  }
  for (int i = 0; i < v->nitems; i++)
    if (!sema_int_arg(s, &v->items[i], what, &out[i])) return false;
  *count = v->nitems;
  return true;
}

bool sema_sizes(Sema *s, CallArgs *c, int first, const Sym ***out, int *n) {
  int np = c->npos - first;
  if (np <= 0) {  /* PyTorch: "missing 1 required positional argument" */
    diag_error(s->d, c->loc, "%s() needs sizes (as several ints or one "
               "list; [] for a 0-dim tensor)", c->name);
    return false;
  }
  const SVal *items = &c->pos[first];
  if (np == 1 && items[0].kind == SV_LIST) {
    np = items[0].nitems;
    items = items[0].items;
  }
  if (np > MAX_DIMS) {
    diag_error(s->d, c->loc, "%s() got %d sizes; at most %d dims are supported",
               c->name, np, MAX_DIMS);
    return false;
  }
  const Sym **v = arena_alloc(s->a, (size_t)(np > 0 ? np : 1) * sizeof *v);
  const char *what = arena_printf(s->a, "a size of %s()", c->name);
  for (int i = 0; i < np; i++)
    if (!sema_sym_arg(s, &items[i], what, &v[i])) return false;
  *out = v;
  *n = np;
  return true;
}

/* Constant ints given as varargs or one list (permute's dims). */
bool sema_int_varargs(Sema *s, CallArgs *c, int first, int64_t *out,
                      int *n) {
  const Sym **v;
  if (!sema_sizes(s, c, first, &v, n)) return false;
  for (int i = 0; i < *n; i++)
    if (!sym_is_const(v[i], &out[i])) {
      diag_error(s->d, c->loc, "%s() needs constant dims, got %s", c->name,
                 sym_str(s->a, v[i]));
      return false;
    }
  return true;
}

/* How an argument is named in messages: "narrow() argument 'start'". */
static const char *arg_what(Sema *s, const CallArgs *c, const char *kw) {
  return arena_printf(s->a, "%s() argument '%s'", c->name, kw);
}

/* An optional constant int argument with a default. */
bool sema_opt_int(Sema *s, CallArgs *c, int i, const char *kw, int64_t def,
                  int64_t *out) {
  const SVal *v = sema_arg(s, c, i, kw);
  if (!v || v->kind == SV_NONE) {
    *out = def;
    return true;
  }
  return sema_int_arg(s, v, arg_what(s, c, kw), out);
}

bool sema_req_int(Sema *s, CallArgs *c, int i, const char *kw,
                  int64_t *out) {
  const SVal *v = sema_need_arg(s, c, i, kw);
  return v && sema_int_arg(s, v, arg_what(s, c, kw), out);
}

bool sema_req_sym(Sema *s, CallArgs *c, int i, const char *kw,
                  const Sym **out) {
  const SVal *v = sema_need_arg(s, c, i, kw);
  return v && sema_sym_arg(s, v, arg_what(s, c, kw), out);
}

bool sema_req_tensor(Sema *s, CallArgs *c, int i, const char *kw,
                     IrRef *out) {
  const SVal *v = sema_need_arg(s, c, i, kw);
  return v && sema_tensor_arg(s, v, arg_what(s, c, kw), out);
}

bool sema_tensor_recv(Sema *s, CallArgs *c, IrRef *x) {
  return sema_req_tensor(s, c, 0, c->method ? "self" : "input", x);
}

/* An argument that already failed: the error was reported. */
bool sema_has_error_arg(const CallArgs *c) {
  for (int i = 0; i < c->npos; i++)
    if (c->pos[i].kind == SV_ERROR) return true;
  for (int i = 0; i < c->nkw; i++)
    if (c->kw[i].kind == SV_ERROR) return true;
  return false;
}

/* A bool argument (keepdim=, ceil_mode=, ...); `dflt` when absent. */
bool sema_bool_arg(Sema *s, const SVal *v, const char *fn, const char *what,
                   bool dflt, bool *out) {
  if (absent(v)) {
    *out = dflt;
    return true;
  }
  if (v->kind != SV_BOOL) {
    diag_error(s->d, v->loc, "%s(): %s must be true or false", fn, what);
    return false;
  }
  *out = v->b;
  return true;
}

/* An optional dtype argument (`dtype=f64`); DT_NONE when absent. */
bool sema_dtype_arg(Sema *s, const SVal *v, const char *fn, DType *out) {
  *out = DT_NONE;
  if (absent(v)) return true;
  if (v->kind != SV_DTYPE) {
    diag_error(s->d, v->loc, "%s(): dtype must be a dtype such as f32", fn);
    return false;
  }
  *out = v->dt;
  return true;
}

/* The input tensor (positional 0 or input=); reports when missing. */
bool sema_input_arg(Sema *s, CallArgs *c, IrRef *out) {
  const SVal *v = sema_arg(s, c, 0, "input");
  if (!v) {
    diag_error(s->d, c->loc, "%s(): missing the input tensor", c->name);
    return false;
  }
  return sema_tensor_arg(s, v, "input", out);
}

/* Wraps a dim as PyTorch does; a 0-dim tensor accepts -1 and 0. */
bool sema_wrap_dim(Sema *s, CallArgs *c, int64_t d, int rank, int *out) {
  if (rank == 0) {
    if (d == 0 || d == -1) {
      *out = 0;
      return true;
    }
    diag_error(s->d, c->loc,
               "%s(): dim %lld is out of range for a 0-dim tensor "
               "(expected -1 or 0)", c->name, (long long)d);
    return false;
  }
  GeomCtx gc = sema_geom(s, c->loc);
  const char *msg = geom_wrap_dim(&gc, d, rank, out);
  if (msg) {
    diag_error(s->d, c->loc, "%s(): %s", c->name, msg);
    return false;
  }
  return true;
}

const Builtin *sema_builtin_find(const Builtin *table, const char *name) {
  for (const Builtin *b = table; b->name; b++)
    if (strcmp(b->name, name) == 0) return b;
  return NULL;
}

SVal sema_call_builtin(Sema *s, const Builtin *b, Loc loc, bool method, SVal *pos,
                       int npos, const char **kwname, SVal *kw, int nkw) {
  for (int i = 0; i < npos; i++)
    if (pos[i].kind == SV_ERROR) return sv_error();
  for (int i = 0; i < nkw; i++)
    if (kw[i].kind == SV_ERROR) return sv_error();
  CallArgs c;
  memset(&c, 0, sizeof c);
  c.name = b->name;
  c.loc = loc;
  c.method = method;
  c.pos = pos;
  c.npos = npos;
  c.kwname = kwname;
  c.kw = kw;
  c.nkw = nkw;
  c.kwused = arena_alloc(s->a, sizeof *c.kwused * (size_t)(nkw + 1));
  memset(c.kwused, 0, sizeof *c.kwused * (size_t)(nkw + 1));
  return b->fn(s, &c, b);
}
