/* read.c — parses the textual IR printed by print.c (grammar in print.c's
 * header) back into an IrModule.
 *
 * Needs: ir.h; sym.h constructors, so every expression is rebuilt in the
 * new module's SymTab and equal expressions are pointer-equal.  Produces a
 * module whose operand refs all point to earlier values and whose arrays
 * have the lengths their counts say; semantic checks are ir_verify()'s.
 *
 * The first error is reported through diag_error() with the IR text's
 * line and column, and parsing stops (longjmp back to ir_read), which
 * then returns NULL.  Any input, however malformed, must give a module or
 * a diagnostic, never a crash: every count is bounded by the text length
 * and expression nesting is capped.
 *
 * Newlines matter in one place: a '%' that starts a line begins the next
 * value, not a modulo continuing the last expression.
 *
 * Parameter and result shapes in a kernel's header name symbols declared
 * by the `sym` lines that follow it, so the header's dim lists are
 * skipped at first and parsed once the last `sym` line has been read. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

enum {
  T_EOF = 256,
  T_IDENT,
  T_INT,
  T_FLOAT,
  T_STRING,
  T_EQEQ,     /* == */
  T_LE,       /* <= */
  T_ARROW,    /* -> */
  T_FLOORDIV, /* // */
};

enum { MAX_DEPTH = 200 };

typedef struct Token {
  int kind; /* a character for punctuation, else T_* */
  const char *start;
  int len;
  Loc loc;
  bool starts_line; /* first token of its line */
} Token;

/* The lexer's whole state; copying it is a bookmark. */
typedef struct Lex {
  const char *p;   /* next unread character */
  int line;
  const char *bol; /* start of the current line */
  Token tok;       /* current token */
} Lex;

/* A header dim list whose parse waits for the kernel's symbols. */
typedef struct Pending {
  Lex at;       /* positioned on the '[' (dims) or '(' (query strides) */
  bool result;  /* else a parameter */
  bool qstride; /* a result's query strides, else its dims */
  int index;
} Pending;

/* A number as written; converted once the dtype it belongs to is known. */
typedef struct Num {
  double f;
  int64_t i;
  bool is_int;  /* written as an integer that fits int64 */
  Loc loc;
} Num;

typedef struct Reader {
  Arena *a;
  Diag *d;
  IrModule *m;
  IrKernel *k;
  Lex lx;
  jmp_buf fail;
  int depth;           /* expression nesting */
  bool syms_done;      /* the kernel's header dims have been parsed */
  int npending, pendcap;
  Pending *pending;
} Reader;

/* ---- errors ---- */

static _Noreturn void fail(Reader *R, Loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static _Noreturn void fail(Reader *R, Loc loc, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(R->d, loc, "%s", msg);
  longjmp(R->fail, 1);
}

/* The current token for messages: 'text' or "end of input". */
static const char *tok_desc(Reader *R) {
  const Token *t = &R->lx.tok;
  if (t->kind == T_EOF) return "end of input";
  int n = t->len > 40 ? 40 : t->len;
  return arena_printf(R->a, "'%.*s'", n, t->start);
}

static _Noreturn void fail_expected(Reader *R, const char *what) {
  fail(R, R->lx.tok.loc, "expected %s but found %s", what, tok_desc(R));
}

/* ---- lexer ---- */

static Loc loc_at(const Lex *L, const char *p, int len) {
  return (Loc){L->line, (int)(p - L->bol) + 1, len};
}

static void skip_space(Lex *L) {
  for (;;) {
    char c = *L->p;
    if (c == '\n') {
      L->line++;
      L->bol = ++L->p;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      L->p++;
    } else if (c == '#') {
      while (*L->p && *L->p != '\n') L->p++;
    } else {
      return;
    }
  }
}

static bool is_ident_char(char c) {
  return isalnum((unsigned char)c) || c == '_';
}

/* Digits, optional fraction, optional exponent (only when digits follow). */
static int lex_number(const char *p, bool *is_float) {
  const char *q = p;
  while (isdigit((unsigned char)*q)) q++;
  *is_float = false;
  if (*q == '.') {
    *is_float = true;
    q++;
    while (isdigit((unsigned char)*q)) q++;
  }
  if (*q == 'e' || *q == 'E') {
    const char *e = q + 1;
    if (*e == '+' || *e == '-') e++;
    if (isdigit((unsigned char)*e)) {
      *is_float = true;
      while (isdigit((unsigned char)*e)) e++;
      q = e;
    }
  }
  return (int)(q - p);
}

/* Length of a string literal starting at p (the opening quote), or -1
 * when it is not closed on its line. */
static int lex_string(const char *p) {
  const char *q = p + 1;
  while (*q && *q != '"' && *q != '\n') q += (*q == '\\' && q[1]) ? 2 : 1;
  return *q == '"' ? (int)(q - p) + 1 : -1;
}

static int lex_punct(const char *p, int *kind) {
  static const struct {
    const char *s;
    int kind;
  } two[] = {{"==", T_EQEQ}, {"<=", T_LE}, {"->", T_ARROW}, {"//", T_FLOORDIV}};
  for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
    if (p[0] == two[i].s[0] && p[1] == two[i].s[1]) {
      *kind = two[i].kind;
      return 2;
    }
  if (*p && strchr("()[]{},:=<+-*%@.", *p)) {
    *kind = (unsigned char)*p;
    return 1;
  }
  return 0;
}

static void next(Reader *R) {
  Lex *L = &R->lx;
  int line = L->line;
  skip_space(L);
  Token *t = &L->tok;
  const char *p = L->p;
  bool is_float;
  int len;
  if (*p == '\0') {
    t->kind = T_EOF, len = 0;
  } else if (isalpha((unsigned char)*p) || *p == '_') {
    for (len = 1; is_ident_char(p[len]); len++) {}
    t->kind = T_IDENT;
  } else if (isdigit((unsigned char)*p)) {
    len = lex_number(p, &is_float);
    t->kind = is_float ? T_FLOAT : T_INT;
  } else if (*p == '"') {
    len = lex_string(p);
    if (len < 0) fail(R, loc_at(L, p, 1), "unterminated string");
    t->kind = T_STRING;
  } else if ((len = lex_punct(p, &t->kind)) == 0) {
    fail(R, loc_at(L, p, 1), "unexpected character '%c' (0x%02x)",
         isprint((unsigned char)*p) ? *p : '?', (unsigned char)*p);
  }
  t->start = p;
  t->len = len;
  t->starts_line = L->line != line || p == L->bol;
  t->loc = loc_at(L, p, len);
  L->p = p + len;
}

/* Restarts lexing at p, which lies on the current token's line. */
static void relex_at(Reader *R, const char *p) {
  R->lx.p = p;
  next(R);
}

static bool is(Reader *R, int kind) { return R->lx.tok.kind == kind; }

static bool is_word(Reader *R, const char *w) {
  const Token *t = &R->lx.tok;
  return t->kind == T_IDENT && (size_t)t->len == strlen(w) &&
         memcmp(t->start, w, t->len) == 0;
}

static bool accept(Reader *R, int kind) {
  if (!is(R, kind)) return false;
  next(R);
  return true;
}

static void expect(Reader *R, int kind, const char *what) {
  if (!accept(R, kind)) fail_expected(R, what);
}

static void expect_word(Reader *R, const char *w) {
  if (!is_word(R, w)) fail_expected(R, arena_printf(R->a, "'%s'", w));
  next(R);
}

static char *ident(Reader *R, const char *what) {
  if (!is(R, T_IDENT)) fail_expected(R, what);
  char *s = arena_strndup(R->a, R->lx.tok.start, R->lx.tok.len);
  next(R);
  return s;
}

/* ---- literals ---- */

/* A non-negative integer token that fits in int (locs, refs, dims). */
static int small_int(Reader *R, const char *what) {
  if (!is(R, T_INT)) fail_expected(R, what);
  const Token *t = &R->lx.tok;
  if (t->len > 9) fail(R, t->loc, "integer %.*s is too large", t->len, t->start);
  int v = atoi(t->start);
  next(R);
  return v;
}

static int hex_digit(char c) {
  if (isdigit((unsigned char)c)) return c - '0';
  c = (char)tolower((unsigned char)c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes the current string token's escapes into the arena. */
static char *string_lit(Reader *R) {
  if (!is(R, T_STRING)) fail_expected(R, "a string");
  const Token *t = &R->lx.tok;
  char *out = arena_alloc(R->a, (size_t)t->len), *o = out;
  for (const char *p = t->start + 1; p < t->start + t->len - 1; p++) {
    if (*p != '\\') {
      *o++ = *p;
      continue;
    }
    Loc at = loc_at(&R->lx, p, 2);
    p++;
    if (*p == 'n') *o++ = '\n';
    else if (*p == 't') *o++ = '\t';
    else if (*p == '"' || *p == '\\') *o++ = *p;
    else if (*p == 'x' && hex_digit(p[1]) >= 0 && hex_digit(p[2]) >= 0 &&
             hex_digit(p[1]) * 16 + hex_digit(p[2]) != 0) {
      *o++ = (char)(hex_digit(p[1]) * 16 + hex_digit(p[2]));
      p += 2;
    } else fail(R, at, "bad escape in string");
  }
  next(R);
  return out;
}

/* Unsigned magnitude of an integer token; false when over 2^63. */
static bool int_magnitude(const Token *t, uint64_t *v) {
  char buf[32];
  if (t->len >= (int)sizeof buf) return false;
  memcpy(buf, t->start, t->len);
  buf[t->len] = '\0';
  errno = 0;
  unsigned long long u = strtoull(buf, NULL, 10);
  *v = u;
  return errno == 0 && u <= (1ULL << 63);
}

/* Applies a sign to a magnitude of at most 2^63; false when it does not
 * fit int64. */
static bool signed_value(uint64_t mag, bool neg, int64_t *out) {
  if (neg) {
    *out = mag == (1ULL << 63) ? INT64_MIN : -(int64_t)mag;
    return true;
  }
  if (mag > (uint64_t)INT64_MAX) return false;
  *out = (int64_t)mag;
  return true;
}

/* ['-'] (INT | FLOAT | nan | inf), kept both ways until its dtype is known. */
static Num number(Reader *R) {
  Num n = {0};
  n.loc = R->lx.tok.loc;
  bool neg = accept(R, '-');
  const Token *t = &R->lx.tok;
  if (is_word(R, "nan") || is_word(R, "inf")) {
    n.f = t->start[0] == 'n' ? NAN : INFINITY;
  } else if (is(R, T_INT) || is(R, T_FLOAT)) {
    char buf[400];
    if (t->len >= (int)sizeof buf) fail(R, t->loc, "number is too long");
    memcpy(buf, t->start, t->len);
    buf[t->len] = '\0';
    n.f = strtod(buf, NULL);
    uint64_t mag;
    n.is_int = is(R, T_INT) && int_magnitude(t, &mag) &&
               signed_value(mag, neg, &n.i);
  } else {
    fail_expected(R, "a number");
  }
  if (neg) n.f = -n.f;
  next(R);
  return n;
}

static int64_t num_int(Reader *R, const Num *n) {
  if (!n->is_int) fail(R, n->loc, "expected an integer that fits in 64 bits");
  return n->i;
}

/* The scalar of dtype t a number stands for. */
static Scalar num_scalar(Reader *R, const Num *n, DType t) {
  Scalar s;
  if (dtype_is_float(t)) s.f = n->f; /* "-0" stays negative zero */
  else s.i = num_int(R, n);
  return s;
}

static Loc opt_loc(Reader *R) {
  Loc l = {0, 0, 0};
  if (!accept(R, '@')) return l;
  l.line = small_int(R, "a line number");
  expect(R, ':', "':'");
  l.col = small_int(R, "a column number");
  if (accept(R, ':')) l.len = small_int(R, "a length");
  return l;
}

static DType dtype(Reader *R) {
  char buf[16] = "";
  const Token *t = &R->lx.tok;
  if (t->kind == T_IDENT && t->len < (int)sizeof buf)
    memcpy(buf, t->start, t->len);
  DType dt = t->kind == T_IDENT ? dtype_from_name(buf) : DT_NONE;
  if (dt == DT_NONE) fail_expected(R, "a dtype");
  next(R);
  return dt;
}

static Layout layout(Reader *R) {
  for (Layout l = LAYOUT_CONTIGUOUS; l <= LAYOUT_STRIDED; l++)
    if (is_word(R, layout_name(l))) {
      next(R);
      return l;
    }
  fail_expected(R, "a layout");
}

/* ---- symbolic expressions ---- */

static const Sym *expr(Reader *R);

/* The longest kernel symbol whose name starts the current token's text
 * and ends at an identifier boundary, or -1. */
static int match_sym(Reader *R) {
  const char *p = R->lx.tok.start;
  int best = -1;
  size_t bestlen = 0;
  for (int i = 0; i < R->k->nsyms; i++) {
    const char *name = R->k->syms[i].name;
    size_t n = strlen(name);
    if (n > bestlen && strncmp(p, name, n) == 0 &&
        !(is_ident_char(name[n - 1]) && is_ident_char(p[n])))
      best = i, bestlen = n;
  }
  return best;
}

/* min(a, b) / max(a, b); the current token is the function name. */
static const Sym *minmax(Reader *R) {
  bool is_min = is_word(R, "min");
  next(R);
  expect(R, '(', "'('");
  const Sym *a = expr(R);
  expect(R, ',', "','");
  const Sym *b = expr(R);
  expect(R, ')', "')'");
  return is_min ? sym_min(R->m->st, a, b) : sym_max(R->m->st, a, b);
}

static bool next_char_is(const Reader *R, char c) {
  const char *p = R->lx.p;
  while (*p == ' ' || *p == '\t') p++;
  return *p == c;
}

static const Sym *unary(Reader *R);

static const Sym *primary(Reader *R) {
  const Token *t = &R->lx.tok;
  if (is(R, T_INT)) {
    uint64_t mag;
    int64_t v;
    if (!int_magnitude(t, &mag) || !signed_value(mag, false, &v))
      fail(R, t->loc, "integer %.*s is out of range", t->len, t->start);
    next(R);
    return sym_const(R->m->st, v);
  }
  if (accept(R, '(')) {
    const Sym *s = expr(R);
    expect(R, ')', "')'");
    return s;
  }
  if ((is_word(R, "min") || is_word(R, "max")) && next_char_is(R, '('))
    return minmax(R);
  if (!is(R, T_IDENT)) fail_expected(R, "an expression");
  int id = match_sym(R);
  if (id < 0)
    fail(R, t->loc, "unknown symbol '%.*s'", t->len, t->start);
  const char *name = R->k->syms[id].name;
  relex_at(R, t->start + strlen(name));
  return sym_var(R->m->st, id, name);
}

/* ['-'] unary | primary; a minus before a literal folds into it, so
 * INT64_MIN reads back. */
static const Sym *unary_body(Reader *R) {
  if (!accept(R, '-')) return primary(R);
  if (is(R, T_INT)) {
    uint64_t mag;
    int64_t v;
    const Token *t = &R->lx.tok;
    if (!int_magnitude(t, &mag) || !signed_value(mag, true, &v))
      fail(R, t->loc, "integer %.*s is out of range", t->len, t->start);
    next(R);
    return sym_const(R->m->st, v);
  }
  return sym_neg(R->m->st, unary(R));
}

/* Every recursion of the expression grammar passes through here. */
static const Sym *unary(Reader *R) {
  if (++R->depth > MAX_DEPTH)
    fail(R, R->lx.tok.loc, "expression nested too deeply");
  const Sym *s = unary_body(R);
  R->depth--;
  return s;
}

static const Sym *term(Reader *R) {
  const Sym *s = unary(R);
  for (;;) {
    if (accept(R, '*')) s = sym_mul(R->m->st, s, unary(R));
    else if (accept(R, T_FLOORDIV)) s = sym_floordiv(R->m->st, s, unary(R));
    else if (!R->lx.tok.starts_line && accept(R, '%'))
      s = sym_mod(R->m->st, s, unary(R));
    else return s;
  }
}

static const Sym *expr(Reader *R) {
  const Sym *s = term(R);
  for (;;) {
    if (accept(R, '+')) s = sym_add(R->m->st, s, term(R));
    else if (accept(R, '-')) s = sym_sub(R->m->st, s, term(R));
    else return s;
  }
}

/* open expr,* close; returns the count and the arena array in *out. */
static int expr_list(Reader *R, int open, int close, const Sym ***out) {
  expect(R, open, open == '[' ? "'['" : "'('");
  int n = 0, cap = 0;
  const Sym **v = NULL;
  if (!is(R, close)) {
    do {
      if (n == cap) v = arena_grow(R->a, v, &cap, sizeof *v);
      v[n++] = expr(R);
    } while (accept(R, ','));
  }
  expect(R, close, close == ']' ? "']'" : "')'");
  *out = v;
  return n;
}

/* ---- kernel header ---- */

/* Records a dim list for later and skips to just past its ']'. */
/* Skips a header list of expressions (dims in [], a strided result's
 * query strides in ()), to be parsed by finish_syms. */
static void defer_list(Reader *R, bool result, bool qstride, int index) {
  int open = qstride ? '(' : '[', close = qstride ? ')' : ']';
  if (!is(R, open)) fail_expected(R, qstride ? "'('" : "'['");
  if (R->npending == R->pendcap)
    R->pending = arena_grow(R->a, R->pending, &R->pendcap, sizeof *R->pending);
  R->pending[R->npending++] = (Pending){R->lx, result, qstride, index};
  while (!is(R, close)) {
    if (is(R, T_EOF)) fail_expected(R, qstride ? "')'" : "']'");
    next(R);
  }
  next(R);
}

static void defer_dims(Reader *R, bool result, int index) {
  defer_list(R, result, false, index);
}

/* Parses the header's dim lists, now that every symbol is declared. */
static void finish_syms(Reader *R) {
  if (R->syms_done) return;
  R->syms_done = true;
  Lex here = R->lx;
  for (int i = 0; i < R->npending; i++) {
    Pending *p = &R->pending[i];
    R->lx = p->at;
    if (p->result && p->qstride) {
      IrResult *res = &R->k->results[p->index];
      if (expr_list(R, '(', ')', &res->qstride) != res->rank)
        fail(R, p->at.tok.loc, "query strides and dims differ in count");
    } else if (p->result) {
      IrResult *res = &R->k->results[p->index];
      res->rank = expr_list(R, '[', ']', &res->shape);
    } else {
      IrParam *par = &R->k->params[p->index];
      par->rank = expr_list(R, '[', ']', &par->shape);
    }
  }
  R->lx = here;
}

/* A %N reference; 'none' is -1 when allowed. */
static IrRef ref(Reader *R, bool allow_none) {
  if (allow_none && is_word(R, "none")) {
    next(R);
    return -1;
  }
  expect(R, '%', "a value reference '%N'");
  return small_int(R, "a value number");
}

static void param(Reader *R, IrParam *p, int index, Loc *refloc) {
  p->name = ident(R, "a parameter name");
  for (int i = 0; i < index; i++)
    if (strcmp(R->k->params[i].name, p->name) == 0)
      fail(R, R->lx.tok.loc, "duplicate parameter '%s'", p->name);
  expect(R, ':', "':'");
  p->dtype = dtype(R);
  p->is_tensor = is(R, '[');
  if (p->is_tensor) {
    defer_dims(R, false, index);
    p->layout = layout(R);
  }
  *refloc = R->lx.tok.loc;
  p->value = is(R, '%') ? ref(R, false) : -1;
  p->loc = opt_loc(R);
}

static void params(Reader *R, Loc **reflocs) {
  IrKernel *k = R->k;
  int cap = 0, lcap = 0;
  expect(R, '(', "'('");
  if (!is(R, ')')) {
    do {
      if (k->nparams == cap) {
        k->params = arena_grow(R->a, k->params, &cap, sizeof *k->params);
        *reflocs = arena_grow(R->a, *reflocs, &lcap, sizeof **reflocs);
      }
      param(R, &k->params[k->nparams], k->nparams, &(*reflocs)[k->nparams]);
      k->nparams++;
    } while (accept(R, ','));
  }
  expect(R, ')', "')'");
}

static void results(Reader *R) {
  IrKernel *k = R->k;
  int cap = 0;
  expect(R, '(', "'('");
  if (!is(R, ')')) {
    do {
      if (k->nresults == cap)
        k->results = arena_grow(R->a, k->results, &cap, sizeof *k->results);
      IrResult *res = &k->results[k->nresults];
      res->dtype = dtype(R);
      defer_dims(R, true, k->nresults);
      res->layout = layout(R);
      res->qstride = NULL;
      if (res->layout == LAYOUT_STRIDED && is(R, '('))
        defer_list(R, true, true, k->nresults);
      res->loc = opt_loc(R);
      res->value = -1;
      k->nresults++;
    } while (accept(R, ','));
  }
  expect(R, ')', "')'");
}

/* ---- kernel body ---- */

/* sym NAME = size|stride PARAM.DIM loc?  NAME runs to a space or '='
 * (stride symbols are named like `x.stride(1)`). */
static void sym_line(Reader *R) {
  if (R->syms_done)
    fail(R, R->lx.tok.loc, "'sym' lines must come before checks and values");
  next(R);
  if (!is(R, T_IDENT)) fail_expected(R, "a symbol name");
  const char *s = R->lx.tok.start, *e = s;
  while (*e && !isspace((unsigned char)*e) && *e != '=') e++;
  IrSymVar v = {0};
  v.name = arena_strndup(R->a, s, (size_t)(e - s));
  for (int i = 0; i < R->k->nsyms; i++)
    if (strcmp(R->k->syms[i].name, v.name) == 0)
      fail(R, R->lx.tok.loc, "duplicate symbol '%s'", v.name);
  relex_at(R, e);
  expect(R, '=', "'='");
  if (is_word(R, "size")) v.kind = SYMK_SIZE;
  else if (is_word(R, "stride")) v.kind = SYMK_STRIDE;
  else fail_expected(R, "'size' or 'stride'");
  next(R);
  if (is(R, T_INT)) {
    v.param = small_int(R, "a parameter");
  } else {
    Loc at = R->lx.tok.loc;
    const char *pname = ident(R, "a parameter name");
    for (v.param = 0; v.param < R->k->nparams; v.param++)
      if (strcmp(R->k->params[v.param].name, pname) == 0) break;
    if (v.param == R->k->nparams) fail(R, at, "unknown parameter '%s'", pname);
  }
  expect(R, '.', "'.'");
  v.dim = small_int(R, "a dim");
  v.loc = opt_loc(R);
  ir_add_sym(R->m, R->k, &v);
}

static void check_line(Reader *R) {
  next(R);
  IrCheck c = {0};
  c.lhs = expr(R);
  if (accept(R, T_EQEQ)) c.op = CHK_EQ;
  else if (accept(R, T_LE)) c.op = CHK_LE;
  else if (accept(R, '<')) c.op = CHK_LT;
  else fail_expected(R, "'==', '<=' or '<'");
  c.rhs = expr(R);
  c.msg = string_lit(R);
  c.loc = opt_loc(R);
  ir_add_check(R->m, R->k, &c);
}

static Op op_word(Reader *R) {
  char buf[32] = "";
  const Token *t = &R->lx.tok;
  if (!is(R, T_IDENT)) fail_expected(R, "an op name");
  if (t->len < (int)sizeof buf) memcpy(buf, t->start, t->len);
  Op op = op_from_name(buf);
  if (op == OP_COUNT) fail(R, t->loc, "unknown op '%.*s'", t->len, t->start);
  next(R);
  return op;
}

/* Operands: each must name an earlier value. */
static void operands(Reader *R, IrValue *v, int self) {
  if (!is(R, '%')) return;
  int cap = 0;
  do {
    Loc at = R->lx.tok.loc;
    IrRef r = ref(R, false);
    if (r >= self)
      fail(R, at, "operand %%%d of %%%d is not an earlier value", r, self);
    if (v->nargs == cap) v->args = arena_grow(R->a, v->args, &cap, sizeof(IrRef));
    v->args[v->nargs++] = r;
  } while (accept(R, ','));
}

/* {key=number, ...}: start|eps|f0 set fattr[0], step|f1 set fattr[1],
 * f2 fattr[2]. */
static void fattrs(Reader *R, IrValue *v) {
  if (!accept(R, '{')) return;
  do {
    int slot = -1;
    if (is_word(R, "start") || is_word(R, "eps") || is_word(R, "f0")) slot = 0;
    else if (is_word(R, "step") || is_word(R, "f1")) slot = 1;
    else if (is_word(R, "f2")) slot = 2;
    else fail_expected(R, "'start', 'step', 'eps', 'f0', 'f1' or 'f2'");
    next(R);
    expect(R, '=', "'='");
    Num n = number(R);
    v->fattr[slot] = n.f;
  } while (accept(R, ','));
  expect(R, '}', "'}'");
}

/* data [n, ...]; stored once the dtype and shape are known. */
static int data_list(Reader *R, Num **out) {
  expect(R, '[', "'['");
  int n = 0, cap = 0;
  Num *v = NULL;
  if (!is(R, ']')) {
    do {
      if (n == cap) v = arena_grow(R->a, v, &cap, sizeof *v);
      v[n++] = number(R);
    } while (accept(R, ','));
  }
  expect(R, ']', "']'");
  *out = v;
  return n;
}

/* The element count of a constant shape, or -1 (symbolic or huge). */
static int64_t const_numel(const IrValue *v) {
  int64_t numel = 1, dim;
  for (int i = 0; i < v->rank; i++) {
    if (!sym_is_const(v->shape[i], &dim) || dim < 0) return -1;
    if (dim != 0 && numel > INT32_MAX / dim) return -1;
    numel *= dim;
  }
  return numel;
}

static void store_data(Reader *R, IrValue *v, const Num *d, int n, Loc at) {
  int64_t numel = const_numel(v);
  if (numel != n)
    fail(R, at, "tensor data has %d elements for shape of %s elements", n,
         numel < 0 ? "a symbolic or huge number of" :
                     arena_printf(R->a, "%lld", (long long)numel));
  size_t size = (size_t)dtype_size(v->dtype);
  char *p = arena_alloc(R->a, n ? (size_t)n * size : 1);
  v->data = p;
  for (int i = 0; i < n; i++)
    scalar_store(v->dtype, p + i * size, num_scalar(R, &d[i], v->dtype));
}

static int flag_bit(Reader *R) {
  static const char *const names[] = {"wrapped", "implicit", "keepdim",
                                      "tanh",    "cl",       "clone",
                                      "weight",  "bias",     "inline",
                                      "wrap",    "inbounds"};
  for (int i = 0; i < 11; i++)
    if (is_word(R, names[i])) return 1 << i;
  return 0;
}

/* : dtype [shape] (strides) +offset */
static void geometry(Reader *R, IrValue *v) {
  expect(R, ':', "':'");
  v->dtype = dtype(R);
  v->rank = expr_list(R, '[', ']', &v->shape);
  Loc at = R->lx.tok.loc;
  int n = expr_list(R, '(', ')', &v->stride);
  if (n != v->rank)
    fail(R, at, "%d strides given for rank %d", n, v->rank);
  expect(R, '+', "'+' and the storage offset");
  v->offset = expr(R);
}

static void value_line(Reader *R) {
  IrKernel *k = R->k;
  next(R);
  if (!is(R, T_INT) || R->lx.tok.len > 9 ||
      atoi(R->lx.tok.start) != k->nvalues)
    fail_expected(R, arena_printf(R->a, "value number %d", k->nvalues));
  next(R);
  expect(R, '=', "'='");
  IrValue v = {0};
  v.op = op_word(R);
  operands(R, &v, k->nvalues);
  if (is(R, '[')) v.nattrs = expr_list(R, '[', ']', &v.attrs);
  fattrs(R, &v);
  Num val = {0};
  if (v.op == OP_PARAM || v.op == OP_CONST || v.op == OP_FULL) val = number(R);
  Num *data = NULL;
  int ndata = -1;
  Loc data_at = R->lx.tok.loc;
  if (is_word(R, "data")) {
    if (v.op != OP_TENSOR) fail(R, data_at, "only 'tensor' values have data");
    next(R);
    ndata = data_list(R, &data);
  }
  for (int bit; (bit = flag_bit(R)) != 0; next(R)) v.flags |= bit;
  if (is_word(R, "slot")) { /* plan-memory's scratch block */
    next(R);
    Loc at = R->lx.tok.loc;
    v.slot = small_int(R, "a scratch slot");
    if (v.slot < 1) fail(R, at, "scratch slots start at 1");
  }
  if (is_word(R, "out")) { /* plan-memory: computed in a result's output */
    next(R);
    Loc at = R->lx.tok.loc;
    v.out = small_int(R, "a result number") + 1;
    if (v.out < 1) fail(R, at, "result numbers start at 0");
  }
  if (is_word(R, "group")) { /* pass row-group: its group and rows */
    next(R);
    Loc at = R->lx.tok.loc;
    v.group = small_int(R, "a row group");
    if (v.group < 1) fail(R, at, "row groups start at 1");
    expect_word(R, "rows");
    at = R->lx.tok.loc;
    v.rows = small_int(R, "a number of rows");
    if (v.rows < 1) fail(R, at, "a row group shares at least 1 dim");
  }
  geometry(R, &v);
  v.loc = opt_loc(R);
  if (is(R, T_STRING)) v.name = string_lit(R);
  if (v.op == OP_PARAM) v.value.i = num_int(R, &val);
  else if (v.op == OP_CONST || v.op == OP_FULL)
    v.value = num_scalar(R, &val, v.dtype);
  if (ndata >= 0) store_data(R, &v, data, ndata, data_at);
  ir_add(R->m, k, &v);
}

static void return_line(Reader *R) {
  IrKernel *k = R->k;
  Loc at = R->lx.tok.loc;
  next(R);
  int n = 0;
  if (is(R, '%') || is_word(R, "none")) {
    do {
      Loc rat = R->lx.tok.loc;
      IrRef r = ref(R, true);
      if (r >= k->nvalues) fail(R, rat, "returned value %%%d is not defined", r);
      if (n < k->nresults) k->results[n].value = r;
      n++;
    } while (accept(R, ','));
  }
  if (n != k->nresults)
    fail(R, at, "'return' gives %d values but the kernel declares %d results",
         n, k->nresults);
}

static void body(Reader *R) {
  expect(R, '{', "'{'");
  while (is_word(R, "sym")) sym_line(R);
  finish_syms(R);
  for (;;) {
    if (is_word(R, "sym")) sym_line(R);
    else if (is_word(R, "check")) check_line(R);
    else if (is(R, '%')) value_line(R);
    else if (is_word(R, "return")) break;
    else fail_expected(R, "'check', a value or 'return'");
  }
  return_line(R);
  expect(R, '}', "'}'");
}

static void kernel(Reader *R) {
  expect_word(R, "kernel");
  Token name = R->lx.tok;
  char *kname = ident(R, "a kernel name");
  R->k = ir_kernel_new(R->m, kname, name.loc);
  R->syms_done = false;
  R->npending = 0;
  Loc *reflocs = NULL;
  params(R, &reflocs);
  expect(R, T_ARROW, "'->'");
  results(R);
  R->k->loc = opt_loc(R);
  body(R);
  for (int i = 0; i < R->k->nparams; i++)
    if (R->k->params[i].value >= R->k->nvalues)
      fail(R, reflocs[i], "parameter value %%%d is not defined",
           R->k->params[i].value);
}

IrModule *ir_read(Arena *a, Diag *d, const char *file, const char *text) {
  Reader R = {0};
  R.a = a;
  R.d = d;
  R.m = ir_module_new(a, file);
  R.lx.p = R.lx.bol = text;
  R.lx.line = 1;
  if (setjmp(R.fail)) return NULL;
  next(&R);
  if (is_word(&R, "module")) {
    next(&R);
    R.m->file = string_lit(&R);
  }
  while (!is(&R, T_EOF)) kernel(&R);
  return R.m;
}
