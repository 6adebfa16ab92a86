/* sema_expr.c — expressions: evaluates an AST expression to an SVal.
 * Literals, names (bound values, size symbols, dtypes, memory formats),
 * operators (on tensors: elementwise ops and @; on Python numbers and
 * sizes: folded at compile time with Python's semantics), .T/.mT,
 * lists, indexing, and calls: the arguments are evaluated into CallArgs
 * and dispatched to the handler that the families' builtin tables name.
 *
 * Errors go through diag_error at the operator token or the call's name;
 * an expression that failed evaluates to SV_ERROR, which every consumer
 * propagates without reporting again, so one mistake gives one error.
 *
 * Needs: sema_internal.h, sema_values.c, and the op families
 * (sema_elementwise.c, sema_views.c, sema_reduce.c, sema_matmul.c,
 * sema_conv.c, sema_factory.c, sema_layers.c): their builtin tables and
 * the builders operators and indexing use.
 * Used by: sema.c (statements and return values). */
#include <math.h>
#include <string.h>

#include "sema_internal.h"

/* ---- "Did you mean" ---- */

/* Edit distance, for "did you mean" suggestions. */
static int edit_distance(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la > 40 || lb > 40) return 99;
  int d[41][41];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      d[i][j] = best;
    }
  return d[la][lb];
}

/* Keeps the closest candidate within distance 2 (and less than the
 * name's length, so short names don't match everything). */
static void suggest(const char *name, const char *cand, const char **best,
                    int *bestd) {
  int dist = edit_distance(name, cand);
  if (dist < *bestd && dist <= 2 && dist < (int)strlen(name)) {
    *best = cand;
    *bestd = dist;
  }
}

static const char *did_you_mean(Sema *s, const char *best) {
  return best ? arena_printf(s->a, "; did you mean '%s'?", best) : "";
}

/* ---- Compile-time arithmetic on Python numbers and sizes ---- */

static double py_fmod(double a, double b) {
  double r = fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

static SVal fold_float(Sema *s, BinOp op, double a, double b, Loc loc) {
  switch (op) {
  case BIN_ADD: return sv_float(a + b, loc);
  case BIN_SUB: return sv_float(a - b, loc);
  case BIN_MUL: return sv_float(a * b, loc);
  case BIN_POW: return sv_float(pow(a, b), loc);
  case BIN_EQ: return sv_bool(a == b, loc);
  case BIN_NE: return sv_bool(a != b, loc);
  case BIN_LT: return sv_bool(a < b, loc);
  case BIN_LE: return sv_bool(a <= b, loc);
  case BIN_GT: return sv_bool(a > b, loc);
  case BIN_GE: return sv_bool(a >= b, loc);
  default: break;
  }
  if (op == BIN_DIV || op == BIN_FLOORDIV || op == BIN_MOD) {
    if (b == 0) {
      diag_error(s->d, loc, "division by zero in a constant expression");
      return sv_error();
    }
    if (op == BIN_DIV) return sv_float(a / b, loc);
    if (op == BIN_FLOORDIV) return sv_float(floor(a / b), loc);
    return sv_float(py_fmod(a, b), loc);
  }
  diag_error(s->d, loc, "operator '%s' is not defined for floats",
             binop_spelling(op));
  return sv_error();
}

static SVal fold_int_const(Sema *s, BinOp op, int64_t a, int64_t b,
                           bool both_bool, Loc loc) {
  switch (op) {
  case BIN_AND: return both_bool ? sv_bool(a & b, loc)
                                 : sv_int(sym_const(s->st, a & b), loc);
  case BIN_OR: return both_bool ? sv_bool(a | b, loc)
                                : sv_int(sym_const(s->st, a | b), loc);
  case BIN_XOR: return both_bool ? sv_bool(a ^ b, loc)
                                 : sv_int(sym_const(s->st, a ^ b), loc);
  case BIN_EQ: return sv_bool(a == b, loc);
  case BIN_NE: return sv_bool(a != b, loc);
  case BIN_LT: return sv_bool(a < b, loc);
  case BIN_LE: return sv_bool(a <= b, loc);
  case BIN_GT: return sv_bool(a > b, loc);
  case BIN_GE: return sv_bool(a >= b, loc);
  case BIN_DIV: return fold_float(s, op, (double)a, (double)b, loc);
  case BIN_POW:
    if (b < 0) return sv_float(pow((double)a, (double)b), loc);
    {
      int64_t r = 1;
      for (int64_t i = 0; i < b && i < 64; i++) r *= a;
      return sv_int(sym_const(s->st, r), loc);
    }
  default: return sv_error(); /* not reached: handled symbolically */
  }
}

/* Both operands are ints (possibly symbolic) or bools. */
static SVal fold_int(Sema *s, BinOp op, const SVal *a, const SVal *b,
                     Loc loc) {
  const Sym *x = a->kind == SV_BOOL ? sym_const(s->st, a->b) : a->sym;
  const Sym *y = b->kind == SV_BOOL ? sym_const(s->st, b->b) : b->sym;
  if ((op == BIN_FLOORDIV || op == BIN_MOD) && sym_is(y, 0)) {
    diag_error(s->d, loc, "division by zero in a constant expression");
    return sv_error();
  }
  switch (op) {
  case BIN_ADD: return sv_int(sym_add(s->st, x, y), loc);
  case BIN_SUB: return sv_int(sym_sub(s->st, x, y), loc);
  case BIN_MUL: return sv_int(sym_mul(s->st, x, y), loc);
  case BIN_FLOORDIV: return sv_int(sym_floordiv(s->st, x, y), loc);
  case BIN_MOD: return sv_int(sym_mod(s->st, x, y), loc);
  default: break;
  }
  int64_t ca, cb;
  if (sym_is_const(x, &ca) && sym_is_const(y, &cb))
    return fold_int_const(s, op, ca, cb,
                          a->kind == SV_BOOL && b->kind == SV_BOOL, loc);
  diag_error(s->d, loc,
             "operator '%s' on sizes is only supported for constants; "
             "sizes allow + - * // %%",
             binop_spelling(op));
  return sv_error();
}

static SVal fold_numbers(Sema *s, BinOp op, const SVal *a, const SVal *b,
                         Loc loc) {
  if (op == BIN_MATMUL) {
    diag_error(s->d, loc, "operator '@' needs tensors, got %s and %s",
               sv_kind_name(a), sv_kind_name(b));
    return sv_error();
  }
  if (a->kind == SV_FLOAT || b->kind == SV_FLOAT) {
    int64_t dummy;
    if ((a->kind == SV_INT && !sym_is_const(a->sym, &dummy)) ||
        (b->kind == SV_INT && !sym_is_const(b->sym, &dummy))) {
      diag_error(s->d, loc, "cannot mix a size symbol with a float in a "
                            "constant expression");
      return sv_error();
    }
    if (op == BIN_AND || op == BIN_OR || op == BIN_XOR) {
      diag_error(s->d, loc, "operator '%s' is not defined for floats",
                 binop_spelling(op));
      return sv_error();
    }
    return fold_float(s, op, sv_num_f(a), sv_num_f(b), loc);
  }
  return fold_int(s, op, a, b, loc);
}

/* ---- Calls ---- */

/* The builtins of every family, in one search order: the first match
 * wins, and the first of the closest names is the suggestion. */
static const Builtin *const families[] = {
    sema_elementwise_builtins, sema_view_builtins, sema_reduce_builtins,
    sema_matmul_builtins,      sema_conv_builtins, sema_factory_builtins,
    sema_index_builtins,
    sema_join_builtins,
    sema_stats_builtins,       sema_scan_builtins,
    sema_layer_builtins,       sema_resize_builtins,
};
enum { NFAMILIES = sizeof families / sizeof families[0] };

static const Builtin *find_builtin(const char *name) {
  for (int f = 0; f < NFAMILIES; f++)
    for (const Builtin *b = families[f]; b->name; b++)
      if (strcmp(b->name, name) == 0) return b;
  return NULL;
}

static SVal unknown_call(Sema *s, const char *name, bool method, Loc loc) {
  const char *best = NULL;
  int bestd = 99;
  int want = method ? BF_METHOD : BF_FUNC;
  for (int f = 0; f < NFAMILIES; f++)
    for (const Builtin *b = families[f]; b->name; b++)
      if (b->flags & want) suggest(name, b->name, &best, &bestd);
  if (method)
    diag_error(s->d, loc, "unknown method '%s' of a tensor%s", name,
               did_you_mean(s, best));
  else
    diag_error(s->d, loc, "unknown function '%s'%s", name,
               did_you_mean(s, best));
  return sv_error();
}

static bool build_args(Sema *s, const Expr *e, SVal *recv, CallArgs *c) {
  memset(c, 0, sizeof *c);
  c->name = e->u.call.name;
  c->loc = e->loc;
  c->method = recv != NULL;
  int na = e->u.call.nargs, npos = c->method ? 1 : 0, nkw = 0;
  for (int i = 0; i < na; i++) e->u.call.args[i].kw ? nkw++ : npos++;
  c->pos = arena_alloc(s->a, (size_t)(npos + 1) * sizeof *c->pos);
  c->kw = arena_alloc(s->a, (size_t)(nkw + 1) * sizeof *c->kw);
  c->kwname = arena_alloc(s->a, (size_t)(nkw + 1) * sizeof *c->kwname);
  c->kwused = arena_alloc(s->a, (size_t)(nkw + 1) * sizeof *c->kwused);
  bool ok = true;
  if (recv) c->pos[c->npos++] = *recv;
  for (int i = 0; i < na; i++) {
    const Arg *a = &e->u.call.args[i];
    SVal v = sema_eval(s, a->value);
    if (v.kind == SV_ERROR) ok = false;
    if (!a->kw) {
      c->pos[c->npos++] = v;
      continue;
    }
    for (int j = 0; j < c->nkw; j++)
      if (strcmp(c->kwname[j], a->kw) == 0) {
        diag_error(s->d, a->loc, "keyword argument '%s' given twice", a->kw);
        ok = false;
      }
    c->kwname[c->nkw] = a->kw;
    c->kw[c->nkw++] = v;
  }
  return ok;
}

static SVal eval_call(Sema *s, const Expr *e) {
  SVal recv;
  bool method = e->u.call.recv != NULL;
  if (method) recv = sema_eval(s, e->u.call.recv);
  CallArgs c;
  bool ok = build_args(s, e, method ? &recv : NULL, &c);
  if ((method && recv.kind == SV_ERROR) || !ok) return sv_error();
  const char *n = e->u.call.name;
  const Builtin *b = find_builtin(n);
  if (method && recv.kind != SV_TENSOR) {
    diag_error(s->d, e->loc, "method '%s' needs a tensor receiver, got %s", n,
               sv_kind_name(&recv));
    return sv_error();
  }
  if (!b) return unknown_call(s, n, method, e->loc);
  if (method && !(b->flags & BF_METHOD)) {
    diag_error(s->d, e->loc,
               "'%s' is a function, not a tensor method; write %s(x, ...)", n,
               n);
    return sv_error();
  }
  if (!method && !(b->flags & BF_FUNC)) {
    diag_error(s->d, e->loc,
               "'%s' is a tensor method, not a function; write x.%s(...)", n,
               n);
    return sv_error();
  }
  SVal r = b->fn(s, &c, b);
  if (r.kind != SV_ERROR) r.loc = e->loc;
  return r;
}

/* ---- Expressions ---- */

static SVal eval_name(Sema *s, const Expr *e) {
  const char *n = e->u.str;
  int i = sema_find_name(s, n);
  if (i >= 0) {
    SVal v = s->namevals[i];
    if (v.kind == SV_ERROR) return v;
    v.loc = e->loc;
    return v;
  }
  for (int j = 0; j < s->k->nsyms; j++)
    if (s->k->syms[j].kind == SYMK_SIZE && strcmp(s->k->syms[j].name, n) == 0)
      return sv_int(sym_var(s->st, j, s->k->syms[j].name), e->loc);
  /* inf and nan: Python's float("inf") and float("nan"); like the dtype
   * names they are predefined, and a binding of the name shadows them */
  if (strcmp(n, "inf") == 0) return sv_float(INFINITY, e->loc);
  if (strcmp(n, "nan") == 0) return sv_float(NAN, e->loc);
  DType dt = dtype_from_name(n);
  if (dt != DT_NONE) {
    SVal v = sv_make(SV_DTYPE, e->loc);
    v.dt = dt;
    return v;
  }
  if (strcmp(n, "contiguous") == 0 || strcmp(n, "channels_last") == 0) {
    SVal v = sv_make(SV_LAYOUT, e->loc);
    v.layout = n[0] == 'c' && n[1] == 'o' ? LAYOUT_CONTIGUOUS
                                          : LAYOUT_CHANNELS_LAST;
    return v;
  }
  const char *best = NULL;
  int bestd = 99;
  for (int j = 0; j < s->nnames; j++) suggest(n, s->names[j], &best, &bestd);
  for (int j = 0; j < s->k->nsyms; j++)
    if (s->k->syms[j].kind == SYMK_SIZE)
      suggest(n, s->k->syms[j].name, &best, &bestd);
  diag_error(s->d, e->loc, "unknown name '%s'%s", n, did_you_mean(s, best));
  return sv_error();
}

static Op binop_to_op(BinOp op) {
  switch (op) {
  case BIN_ADD: return OP_ADD;
  case BIN_SUB: return OP_SUB;
  case BIN_MUL: return OP_MUL;
  case BIN_DIV: return OP_DIV;
  case BIN_FLOORDIV: return OP_FLOORDIV;
  case BIN_MOD: return OP_MOD;
  case BIN_POW: return OP_POW;
  case BIN_AND: return OP_AND;
  case BIN_OR: return OP_OR;
  case BIN_XOR: return OP_XOR;
  case BIN_EQ: return OP_EQ;
  case BIN_NE: return OP_NE;
  case BIN_LT: return OP_LT;
  case BIN_LE: return OP_LE;
  case BIN_GT: return OP_GT;
  case BIN_GE: return OP_GE;
  case BIN_MATMUL: return OP_MATMUL;
  }
  ICE("bad binary operator %d", (int)op);
}

static SVal eval_binary(Sema *s, const Expr *e) {
  SVal a = sema_eval(s, e->u.bin.lhs);
  SVal b = sema_eval(s, e->u.bin.rhs);
  if (a.kind == SV_ERROR || b.kind == SV_ERROR) return sv_error();
  BinOp op = e->u.bin.op;
  bool ta = a.kind == SV_TENSOR, tb = b.kind == SV_TENSOR;
  if ((!ta && !sv_is_number(&a)) || (!tb && !sv_is_number(&b))) {
    diag_error(s->d, e->loc, "operator '%s' cannot be applied to %s and %s",
               binop_spelling(op), sv_kind_name(&a), sv_kind_name(&b));
    return sv_error();
  }
  if (!ta && !tb) return fold_numbers(s, op, &a, &b, e->loc);
  if (op == BIN_MATMUL) {
    if (!ta || !tb) {
      diag_error(s->d, e->loc, "operator '@' needs two tensors, got %s and %s",
                 sv_kind_name(&a), sv_kind_name(&b));
      return sv_error();
    }
    return sema_matmul(s, a.ref, b.ref, e->loc);
  }
  return sema_ew_binary(s, binop_to_op(op), &a, &b, e->loc);
}

static SVal eval_unary(Sema *s, const Expr *e) {
  SVal a = sema_eval(s, e->u.un.operand);
  if (a.kind == SV_ERROR) return a;
  bool neg = e->u.un.op == UN_NEG;
  if (a.kind == SV_TENSOR)
    return sema_ew_unary(s, neg ? OP_NEG : OP_BITNOT, a.ref, 0, e->loc);
  if (a.kind == SV_FLOAT) {
    if (neg) return sv_float(-a.f, e->loc);
    diag_error(s->d, e->loc, "operator '~' is not defined for floats");
    return sv_error();
  }
  if (a.kind == SV_INT || a.kind == SV_BOOL) {
    const Sym *x = a.kind == SV_BOOL ? sym_const(s->st, a.b) : a.sym;
    if (neg) return sv_int(sym_neg(s->st, x), e->loc);
    int64_t v;
    if (sym_is_const(x, &v)) return sv_int(sym_const(s->st, ~v), e->loc);
    diag_error(s->d, e->loc, "operator '~' on a size symbol is not supported");
    return sv_error();
  }
  diag_error(s->d, e->loc, "operator '%s' cannot be applied to %s",
             neg ? "-" : "~", sv_kind_name(&a));
  return sv_error();
}

static SVal eval_attr(Sema *s, const Expr *e) {
  SVal a = sema_eval(s, e->u.attr.recv);
  if (a.kind == SV_ERROR) return a;
  const char *n = e->u.attr.name;
  bool is_t = strcmp(n, "T") == 0, is_mt = strcmp(n, "mT") == 0;
  if (!is_t && !is_mt) {
    const char *best = NULL;
    int bestd = 99;
    suggest(n, "T", &best, &bestd);
    suggest(n, "mT", &best, &bestd);
    diag_error(s->d, e->loc, "unknown attribute '%s' of a tensor%s", n,
               did_you_mean(s, best));
    return sv_error();
  }
  if (a.kind != SV_TENSOR) {
    diag_error(s->d, e->loc, ".%s needs a tensor, got %s", n,
               sv_kind_name(&a));
    return sv_error();
  }
  int rank = sema_val(s, a.ref)->rank;
  if (is_mt) {
    /* PyTorch keeps .mT of a 0-dim tensor as the identity (deprecated),
     * but rejects it on 1-D tensors. */
    if (rank == 0) return sv_tensor(a.ref, e->loc);
    if (rank < 2) {
      diag_error(s->d, e->loc,
                 ".mT needs a tensor with at least 2 dims, but this one has "
                 "shape %s",
                 sema_shape_str(s, a.ref));
      sema_note_origin(s, a.ref);
      return sv_error();
    }
    return sema_transpose(s, a.ref, -2, -1, e->loc);
  }
  if (rank < 2) return sv_tensor(a.ref, e->loc);
  int64_t p[MAX_DIMS];
  for (int i = 0; i < rank; i++) p[i] = rank - 1 - i;
  return sema_permute(s, a.ref, p, rank, e->loc);
}

static SVal eval_list(Sema *s, const Expr *e) {
  SVal v = sv_make(SV_LIST, e->loc);
  v.nitems = e->u.list.nitems;
  v.items = arena_alloc(s->a, (size_t)(v.nitems + 1) * sizeof *v.items);
  bool err = false;
  for (int i = 0; i < v.nitems; i++) {
    v.items[i] = sema_eval(s, e->u.list.items[i]);
    if (v.items[i].kind == SV_ERROR) err = true;
  }
  return err ? sv_error() : v;
}

static SVal eval_slice(Sema *s, const Expr *e) {
  SVal v = sv_make(SV_SLICE, e->loc);
  v.nitems = 3;
  v.items = arena_alloc(s->a, 3 * sizeof *v.items);
  const Expr *parts[3] = {e->u.slice.start, e->u.slice.stop, e->u.slice.step};
  for (int i = 0; i < 3; i++) {
    v.items[i] = parts[i] ? sema_eval(s, parts[i]) : sv_make(SV_NONE, e->loc);
    if (v.items[i].kind == SV_ERROR) return sv_error();
  }
  return v;
}

/* A tuple (split, chunk, ...) indexed by one int or slice, as Python
 * indexes a tuple. */
static SVal index_tuple(Sema *s, const Expr *e, const SVal *base,
                        const SVal *it, int n) {
  int64_t i, len = base->nitems;
  if (n != 1 || (it[0].kind != SV_INT && it[0].kind != SV_SLICE &&
                 it[0].kind != SV_BOOL)) {
    diag_error(s->d, e->loc, "tuple indices must be an int or a slice");
    return sv_error();
  }
  if (it[0].kind != SV_SLICE) {
    if (!sema_int_arg(s, &it[0], "a tuple index", &i)) return sv_error();
    if (i < -len || i >= len) {
      diag_error(s->d, it[0].loc, "tuple index out of range (index %lld, "
                 "%lld element%s)", (long long)i, (long long)len,
                 len == 1 ? "" : "s");
      return sv_error();
    }
    SVal r = base->items[i < 0 ? i + len : i];
    r.loc = e->loc;
    return r;
  }
  /* Python's slice.indices(len): defaults and clamping by the step's sign */
  int64_t b[3] = {0, 0, 1};
  bool given[3];
  for (int j = 0; j < 3; j++) {
    const SVal *p = &it[0].items[j];
    given[j] = p->kind != SV_NONE;
    if (given[j] && !sema_int_arg(s, p, "a tuple slice bound", &b[j]))
      return sv_error();
  }
  if (b[2] == 0) {
    diag_error(s->d, it[0].items[2].loc, "slice step cannot be zero");
    return sv_error();
  }
  bool back = b[2] < 0;
  int64_t lo = back ? -1 : 0, hi = back ? len - 1 : len;
  for (int j = 0; j < 2; j++) {
    if (!given[j]) {
      b[j] = j == 0 ? (back ? hi : lo) : (back ? lo : hi);
      continue;
    }
    if (b[j] < 0) b[j] += len;
    b[j] = b[j] < lo ? lo : b[j] > hi ? hi : b[j];
  }
  SVal r = sv_make(SV_LIST, e->loc);
  r.items = arena_alloc(s->a, sizeof *r.items * (size_t)(len + 1));
  for (int64_t k = b[0]; back ? k > b[1] : k < b[1]; k += b[2])
    r.items[r.nitems++] = base->items[k];
  return r;
}

static SVal eval_index(Sema *s, const Expr *e) {
  SVal base = sema_eval(s, e->u.index.base);
  int n = e->u.index.nitems;
  SVal *it = arena_alloc(s->a, (size_t)(n + 1) * sizeof *it);
  bool err = base.kind == SV_ERROR;
  for (int i = 0; i < n; i++) {
    const Expr *x = e->u.index.items[i];
    if (x->kind == EX_SLICE)
      it[i] = eval_slice(s, x);
    else if (x->kind == EX_ELLIPSIS)
      it[i] = sv_make(SV_ELLIPSIS, x->loc);
    else
      it[i] = sema_eval(s, x);
    if (it[i].kind == SV_ERROR) err = true;
  }
  if (err) return sv_error();
  if (base.kind == SV_LIST) return index_tuple(s, e, &base, it, n);
  if (base.kind != SV_TENSOR) {
    diag_error(s->d, e->loc, "only tensors can be indexed, got %s",
               sv_kind_name(&base));
    return sv_error();
  }
  int ell;
  int consumed = sema_index_check(s, base.ref, it, n, e->loc, &ell);
  if (consumed < 0) return sv_error();
  int rank = sema_val(s, base.ref)->rank;
  SVal cur = base;
  int d = 0, td = -1, ti = -1;
  for (int i = 0; i < n && cur.kind != SV_ERROR; i++) {
    if (i == ell) {
      d += rank - consumed; /* the ellipsis stands for the unindexed dims */
      continue;
    }
    if (it[i].kind == SV_TENSOR) { /* after the basic items, as PyTorch: its dim td */
      td = d++, ti = i;
      continue;
    }
    cur = sema_index_item(s, cur.ref, &it[i], &d);
  }
  if (ti >= 0 && cur.kind == SV_TENSOR) cur = sema_index_tensor(s, cur.ref, &td, &it[ti]);
  if (cur.kind == SV_TENSOR) cur.loc = e->loc;
  return cur;
}

SVal sema_eval(Sema *s, const Expr *e) {
  switch (e->kind) {
  case EX_INT: return sv_int(sym_const(s->st, e->u.ival), e->loc);
  case EX_FLOAT: return sv_float(e->u.fval, e->loc);
  case EX_BOOL: return sv_bool(e->u.bval, e->loc);
  case EX_NONE: return sv_make(SV_NONE, e->loc);
  case EX_STR: {
    SVal v = sv_make(SV_STR, e->loc);
    v.s = e->u.str;
    return v;
  }
  case EX_NAME: return eval_name(s, e);
  case EX_BINARY: return eval_binary(s, e);
  case EX_UNARY: return eval_unary(s, e);
  case EX_CALL: return eval_call(s, e);
  case EX_ATTR: return eval_attr(s, e);
  case EX_INDEX: return eval_index(s, e);
  case EX_LIST: return eval_list(s, e);
  case EX_SLICE:
    diag_error(s->d, e->loc, "a slice is only allowed inside [...]");
    return sv_error();
  case EX_ELLIPSIS:
    diag_error(s->d, e->loc, "'...' is only allowed inside [...]");
    return sv_error();
  }
  ICE("bad expression kind %d", (int)e->kind);
}
