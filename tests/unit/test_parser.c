/* test_parser.c — the lexer and parser (frontend/lexer.l, parser.y):
 * tree shapes for Python's precedence and associativity (spec §4), every
 * expression form, kernel headers (params, layouts, several results,
 * result-dim expressions), token locations, and syntax errors (count,
 * line:col, message) with recovery.  Trees are compared as S-expressions
 * printed by ast_sexpr() below. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

/* ---- helpers ---- */

static Arena *arena;
static char diag_text[8192];

static void setup(void) { arena = arena_new(); }
static void teardown(void) { arena_free(arena); }

/* Parses src; the diagnostics land in diag_text, their count in *nerr. */
static AstProgram *parse(const char *src, int *nerr) {
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  Diag d;
  diag_init(&d, "t.tdsl", src, f);
  AstProgram *p = parse_program(arena, &d, src);
  size_t n = 0;
  rewind(f);
  n = fread(diag_text, 1, sizeof diag_text - 1, f);
  diag_text[n] = 0;
  fclose(f);
  if (nerr) *nerr = d.nerrors;
  return p;
}

static AstProgram *parse_ok(const char *src) {
  int nerr;
  AstProgram *p = parse(src, &nerr);
  ck_assert_msg(p != NULL && nerr == 0, "unexpected errors for:\n%s\n%s",
                src, diag_text);
  return p;
}

typedef struct Buf {
  char s[4096];
  size_t n;
} Buf;

static void put(Buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void put(Buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
  va_end(ap);
  if (k > 0) b->n += (size_t)k;
  if (b->n >= sizeof b->s) b->n = sizeof b->s - 1;
}

static void sexpr(Buf *b, const Expr *e);

static void sexpr_list(Buf *b, Expr **items, int n) {
  for (int i = 0; i < n; i++) {
    put(b, " ");
    sexpr(b, items[i]);
  }
}

/* One canonical text per tree: (op lhs rhs), (neg x), (call f args),
 * (call .m recv args), (. recv name), (idx base items), [items],
 * (: start stop step) with _ for an omitted part. */
static void sexpr(Buf *b, const Expr *e) {
  if (!e) {
    put(b, "_");
    return;
  }
  switch (e->kind) {
  case EX_INT: put(b, "%lld", (long long)e->u.ival); break;
  case EX_FLOAT: put(b, "%gf", e->u.fval); break;
  case EX_BOOL: put(b, e->u.bval ? "true" : "false"); break;
  case EX_NONE: put(b, "None"); break;
  case EX_STR: put(b, "\"%s\"", e->u.str); break;
  case EX_NAME: put(b, "%s", e->u.str); break;
  case EX_ELLIPSIS: put(b, "..."); break;
  case EX_BINARY:
    put(b, "(%s ", binop_spelling(e->u.bin.op));
    sexpr(b, e->u.bin.lhs);
    put(b, " ");
    sexpr(b, e->u.bin.rhs);
    put(b, ")");
    break;
  case EX_UNARY:
    put(b, "(%s ", e->u.un.op == UN_NEG ? "neg" : "~");
    sexpr(b, e->u.un.operand);
    put(b, ")");
    break;
  case EX_CALL:
    put(b, "(call %s%s", e->u.call.recv ? "." : "", e->u.call.name);
    if (e->u.call.recv) {
      put(b, " ");
      sexpr(b, e->u.call.recv);
    }
    for (int i = 0; i < e->u.call.nargs; i++) {
      const Arg *a = &e->u.call.args[i];
      put(b, " %s%s", a->kw ? a->kw : "", a->kw ? "=" : "");
      sexpr(b, a->value);
    }
    put(b, ")");
    break;
  case EX_ATTR:
    put(b, "(. ");
    sexpr(b, e->u.attr.recv);
    put(b, " %s)", e->u.attr.name);
    break;
  case EX_INDEX:
    put(b, "(idx ");
    sexpr(b, e->u.index.base);
    sexpr_list(b, e->u.index.items, e->u.index.nitems);
    put(b, ")");
    break;
  case EX_LIST:
    put(b, "[");
    for (int i = 0; i < e->u.list.nitems; i++) {
      if (i) put(b, " ");
      sexpr(b, e->u.list.items[i]);
    }
    put(b, "]");
    break;
  case EX_SLICE:
    put(b, "(: ");
    sexpr(b, e->u.slice.start);
    put(b, " ");
    sexpr(b, e->u.slice.stop);
    put(b, " ");
    sexpr(b, e->u.slice.step);
    put(b, ")");
    break;
  }
}

#define PREFIX "kernel k(x: f32) -> f32 {\n  r = "

/* The tree of one expression, parsed as `r = EXPR` in a kernel body. */
static const Expr *expr_of(const char *text) {
  static char src[2048];
  snprintf(src, sizeof src, PREFIX "%s\n  return r\n}\n", text);
  AstProgram *p = parse_ok(src);
  ck_assert_int_eq(p->nkernels, 1);
  ck_assert_int_ge(p->kernels[0].nbody, 1);
  const Stmt *s = &p->kernels[0].body[0];
  ck_assert_int_eq(s->kind, ST_ASSIGN);
  ck_assert_int_eq(s->nvalues, 1);
  return s->values[0];
}

static const char *tree(const char *text) {
  static Buf b;
  b.n = 0;
  b.s[0] = 0;
  sexpr(&b, expr_of(text));
  return b.s;
}

#define TREE(text, want) ck_assert_str_eq(tree(text), want)

/* Number of errors for src; asserts that parsing failed. */
static int errors(const char *src) {
  int nerr;
  AstProgram *p = parse(src, &nerr);
  ck_assert_msg(p == NULL, "expected an error for:\n%s", src);
  ck_assert_int_gt(nerr, 0);
  return nerr;
}

#define HAS(text)                                                        \
  ck_assert_msg(strstr(diag_text, text) != NULL, "missing \"%s\" in:\n%s", \
                text, diag_text)

/* ---- precedence and associativity ---- */

START_TEST(test_arith_precedence) {
  TREE("a + b * c", "(+ a (* b c))");
  TREE("a * b + c", "(+ (* a b) c)");
  TREE("a - b - c", "(- (- a b) c)");
  TREE("a / b / c", "(/ (/ a b) c)");
  TREE("a // b % c * d", "(* (% (// a b) c) d)");
  TREE("a @ b @ c", "(@ (@ a b) c)");
  TREE("a + b @ c", "(+ a (@ b c))");
  TREE("(a + b) * c", "(* (+ a b) c)");
}
END_TEST

START_TEST(test_power_and_unary) {
  TREE("-x ** 2", "(neg (** x 2))");
  TREE("a ** b ** c", "(** a (** b c))");
  TREE("2 ** -1", "(** 2 (neg 1))");
  TREE("2 ** -x ** 2", "(** 2 (neg (** x 2)))");
  TREE("-a * b", "(* (neg a) b)");
  TREE("- - a", "(neg (neg a))");
  TREE("~a & b", "(& (~ a) b)");
  TREE("(-x) ** 2", "(** (neg x) 2)");
  TREE("a * -b", "(* a (neg b))");
  TREE("x.T ** 2", "(** (. x T) 2)");
}
END_TEST

START_TEST(test_bitwise_and_comparison) {
  TREE("a | b ^ c & d", "(| a (^ b (& c d)))");
  TREE("a & b + c", "(& a (+ b c))");
  TREE("a ^ b | c", "(| (^ a b) c)");
  TREE("a + 1 < b | c", "(< (+ a 1) (| b c))");
  TREE("a == b", "(== a b)");
  TREE("a != b", "(!= a b)");
  TREE("a <= b", "(<= a b)");
  TREE("a >= b", "(>= a b)");
  TREE("a > b", "(> a b)");
  TREE("(a < b) < c", "(< (< a b) c)");
  TREE("(a < b) & (b < c)", "(& (< a b) (< b c))");
}
END_TEST

START_TEST(test_chained_comparison_is_error) {
  ck_assert_int_eq(errors(PREFIX "a < b < c\n  return r\n}\n"), 1);
  HAS("t.tdsl:2:13: error: comparisons cannot be chained");
  /* Reported once per chain. */
  ck_assert_int_eq(errors(PREFIX "a < b == c > d\n  return r\n}\n"), 1);
}
END_TEST

/* ---- expression forms ---- */

START_TEST(test_literals) {
  TREE("1_000", "1000");
  TREE("0", "0");
  TREE("9223372036854775807", "9223372036854775807");
  TREE("1.0", "1f");
  TREE(".5", "0.5f");
  TREE("1.", "1f");
  TREE("1e-3", "0.001f");
  TREE("2.5e+4", "25000f");
  TREE("1_0.2_5", "10.25f");
  TREE("\"tanh\"", "\"tanh\"");
  TREE("'tanh'", "\"tanh\"");
  TREE("true", "true");
  TREE("false", "false");
  TREE("None", "None");
  TREE("x_1", "x_1");
  /* inf and nan are names the front end resolves (a binding shadows
   * them, sema); -inf is unary minus on one */
  TREE("inf", "inf");
  TREE("-inf", "(neg inf)");
  TREE("f(x, -nan)", "(call f x (neg nan))");
}
END_TEST

START_TEST(test_calls_and_methods) {
  TREE("f()", "(call f)");
  TREE("f(a, b, k=v)", "(call f a b k=v)");
  TREE("gelu(x, approximate=\"tanh\")", "(call gelu x approximate=\"tanh\")");
  TREE("f(a,)", "(call f a)");
  TREE("x.sum(1, keepdim=true)", "(call .sum x 1 keepdim=true)");
  TREE("x.t().view(12)", "(call .view (call .t x) 12)");
  TREE("x.mT", "(. x mT)");
  TREE("x.T.contiguous()", "(call .contiguous (. x T))");
  TREE("f(a)[0].exp()", "(call .exp (idx (call f a) 0))");
  TREE("x.view(N, C * H * W)", "(call .view x N (* (* C H) W))");
  TREE("f(k=a == b)", "(call f k=(== a b))");
}
END_TEST

START_TEST(test_index_and_slices) {
  TREE("x[i, a:b:c, None, ..., :]",
       "(idx x i (: a b c) None ... (: _ _ _))");
  TREE("x[::2]", "(idx x (: _ _ 2))");
  TREE("x[1:]", "(idx x (: 1 _ _))");
  TREE("x[:-1]", "(idx x (: _ (neg 1) _))");
  TREE("x[1::]", "(idx x (: 1 _ _))");
  TREE("x[0][1]", "(idx (idx x 0) 1)");
  TREE("x[n - 1:n + 1]", "(idx x (: (- n 1) (+ n 1) _))");
  TREE("x[0,]", "(idx x 0)");
}
END_TEST

START_TEST(test_lists_and_tuples) {
  TREE("[a, b]", "[a b]");
  TREE("[[1, 2], [3, 4]]", "[[1 2] [3 4]]");
  TREE("[]", "[]");
  TREE("[1,]", "[1]");
  TREE("(a)", "a");
  TREE("(2, 2)", "[2 2]");
  TREE("(2,)", "[2]");
  TREE("()", "[]");
  TREE("tensor([[1, 2], [3, 4]], f16)", "(call tensor [[1 2] [3 4]] f16)");
  TREE("conv2d(x, w, stride=(2, 2))", "(call conv2d x w stride=[2 2])");
}
END_TEST

START_TEST(test_comments_and_newlines) {
  TREE("a +  # a comment\n  b\n  # another", "(+ a b)");
  TREE("f(a,\n\n  b)", "(call f a b)");
}
END_TEST

/* ---- kernels ---- */

START_TEST(test_kernel_header) {
  AstProgram *p = parse_ok(
      "kernel conv(x: f32[N, C, H, W] channels_last, w: f16[O, C, 3, 3],\n"
      "            alpha: f64, s: bool[], t: i64[N] strided)\n"
      "    -> (f32[N * 2, C*H*W] channels_last, f32[N // 2 + 1], i8) {\n"
      "  return x, x, alpha\n"
      "}\n"
      "kernel second() -> bf16[(N + 1) * 2] { return y }\n");
  ck_assert_int_eq(p->nkernels, 2);
  const AstKernel *k = &p->kernels[0];
  ck_assert_str_eq(k->name, "conv");
  ck_assert_int_eq(k->nparams, 5);
  ck_assert_str_eq(k->params[0].name, "x");
  ck_assert_int_eq(k->params[0].type.dtype, DT_F32);
  ck_assert(k->params[0].type.is_tensor);
  ck_assert_int_eq(k->params[0].type.rank, 4);
  ck_assert(k->params[0].type.layout_given);
  ck_assert_int_eq(k->params[0].type.layout, LAYOUT_CHANNELS_LAST);
  ck_assert_str_eq(k->params[0].type.dims[3]->u.str, "W");
  ck_assert_int_eq(k->params[1].type.dtype, DT_F16);
  ck_assert_int_eq(k->params[1].type.dims[2]->u.ival, 3);
  ck_assert(!k->params[1].type.layout_given);
  ck_assert_int_eq(k->params[1].type.layout, LAYOUT_CONTIGUOUS);
  ck_assert(!k->params[2].type.is_tensor);
  ck_assert_int_eq(k->params[2].type.dtype, DT_F64);
  ck_assert(k->params[3].type.is_tensor);
  ck_assert_int_eq(k->params[3].type.rank, 0);
  ck_assert_int_eq(k->params[3].type.dtype, DT_BOOL);
  ck_assert_int_eq(k->params[4].type.layout, LAYOUT_STRIDED);

  ck_assert_int_eq(k->nresults, 3);
  Buf b = {0};
  sexpr(&b, k->results[0].dims[0]);
  put(&b, ",");
  sexpr(&b, k->results[0].dims[1]);
  put(&b, ",");
  sexpr(&b, k->results[1].dims[0]);
  ck_assert_str_eq(b.s, "(* N 2),(* (* C H) W),(+ (// N 2) 1)");
  ck_assert_int_eq(k->results[0].layout, LAYOUT_CHANNELS_LAST);
  ck_assert(!k->results[2].is_tensor);
  ck_assert_int_eq(k->results[2].dtype, DT_I8);

  ck_assert_int_eq(k->nbody, 1);
  ck_assert_int_eq(k->body[0].kind, ST_RETURN);
  ck_assert_int_eq(k->body[0].nvalues, 3);

  const AstKernel *k2 = &p->kernels[1];
  ck_assert_int_eq(k2->nparams, 0);
  ck_assert_int_eq(k2->nresults, 1);
  ck_assert_int_eq(k2->results[0].dtype, DT_BF16);
  b.n = 0;
  sexpr(&b, k2->results[0].dims[0]);
  ck_assert_str_eq(b.s, "(* (+ N 1) 2)");
}
END_TEST

START_TEST(test_kernel_body) {
  AstProgram *p = parse_ok("kernel f(x: f32[N]) -> (f32[N]) {\n"
                           "  y = x + 1 z = y * 2\n"
                           "  y = y\n"
                           "  return z\n"
                           "}\n");
  const AstKernel *k = &p->kernels[0];
  ck_assert_int_eq(k->nresults, 1);
  ck_assert_int_eq(k->nbody, 4);
  ck_assert_str_eq(k->body[0].name, "y");
  ck_assert_str_eq(k->body[1].name, "z");
  ck_assert_int_eq(k->body[1].loc.line, 2);
  ck_assert_int_eq(k->body[1].loc.col, 13);
  ck_assert_int_eq(k->body[3].kind, ST_RETURN);
  ck_assert_int_eq(k->body[3].loc.line, 4);
  ck_assert_int_eq(k->body[3].loc.col, 3);
  ck_assert_int_eq(k->body[3].loc.len, 6);
  /* An empty file is an empty program. */
  p = parse_ok("  # nothing\n");
  ck_assert_int_eq(p->nkernels, 0);
}
END_TEST

START_TEST(test_all_dtypes_and_layouts) {
  const char *names[] = {"bool", "i8", "u8", "i16", "i32",
                         "i64", "f16", "bf16", "f32", "f64"};
  DType want[] = {DT_BOOL, DT_I8, DT_U8, DT_I16, DT_I32,
                  DT_I64, DT_F16, DT_BF16, DT_F32, DT_F64};
  for (int i = 0; i < 10; i++) {
    char src[200];
    snprintf(src, sizeof src,
             "kernel k(x: %s[2] contiguous) -> %s { return x }", names[i],
             names[i]);
    AstProgram *p = parse_ok(src);
    ck_assert_int_eq(p->kernels[0].params[0].type.dtype, want[i]);
    ck_assert_int_eq(p->kernels[0].results[0].dtype, want[i]);
    ck_assert(p->kernels[0].params[0].type.layout_given);
  }
}
END_TEST

/* ---- locations ---- */

START_TEST(test_locations) {
  /*          1234567890123456789012345678 */
  AstProgram *p = parse_ok("kernel k(x: f32) -> f32 {\n"
                           "  y = x.t().view(12) ** 2\n"
                           "\tz = y // sum(y, dim=1) @ x[0]\n"
                           "  w = x.mT == -1\n"
                           "  return y\n"
                           "}\n");
  const AstKernel *k = &p->kernels[0];
  ck_assert_int_eq(k->loc.line, 1);
  ck_assert_int_eq(k->loc.col, 8);
  ck_assert_int_eq(k->params[0].loc.col, 10);
  ck_assert_int_eq(k->params[0].type.loc.col, 13);
  ck_assert_int_eq(k->params[0].type.loc.len, 3);
  ck_assert_int_eq(k->results[0].loc.col, 21);

  const Expr *pow = k->body[0].values[0];
  ck_assert_int_eq(pow->kind, EX_BINARY);
  ck_assert_int_eq(pow->loc.line, 2);
  ck_assert_int_eq(pow->loc.col, 22);
  ck_assert_int_eq(pow->loc.len, 2);
  const Expr *view = pow->u.bin.lhs;
  ck_assert_str_eq(view->u.call.name, "view");
  ck_assert_int_eq(view->loc.col, 13);
  ck_assert_int_eq(view->loc.len, 4);
  const Expr *t = view->u.call.recv;
  ck_assert_int_eq(t->loc.col, 9);
  ck_assert_int_eq(t->loc.len, 1);
  ck_assert_int_eq(t->u.call.recv->loc.col, 7);
  ck_assert_int_eq(view->u.call.args[0].loc.col, 18);
  ck_assert_int_eq(view->u.call.args[0].loc.len, 2);
  ck_assert_int_eq(pow->u.bin.rhs->loc.col, 25);

  /* A tab counts as one column. */
  const Expr *at = k->body[1].values[0]; /* (y // sum) @ x[0] */
  ck_assert_int_eq(k->body[1].loc.col, 2);
  ck_assert_int_eq(at->u.bin.op, BIN_MATMUL);
  ck_assert_int_eq(at->loc.line, 3);
  ck_assert_int_eq(at->loc.col, 25);
  ck_assert_int_eq(at->loc.len, 1);
  const Expr *fd = at->u.bin.lhs;
  ck_assert_int_eq(fd->u.bin.op, BIN_FLOORDIV);
  ck_assert_int_eq(fd->loc.col, 8);
  ck_assert_int_eq(fd->loc.len, 2);
  const Expr *sum = fd->u.bin.rhs;
  ck_assert_int_eq(sum->loc.col, 11);
  ck_assert_int_eq(sum->loc.len, 3);
  ck_assert_str_eq(sum->u.call.args[1].kw, "dim");
  ck_assert_int_eq(sum->u.call.args[1].loc.col, 18);
  ck_assert_int_eq(sum->u.call.args[0].loc.col, 15);
  ck_assert_int_eq(sum->u.call.args[1].loc.len, 3);
  const Expr *idx = at->u.bin.rhs;
  ck_assert_int_eq(idx->kind, EX_INDEX);
  ck_assert_int_eq(idx->loc.col, 28);
  ck_assert_int_eq(idx->u.index.base->loc.col, 27);

  const Expr *eq = k->body[2].values[0];
  ck_assert_int_eq(eq->loc.col, 12);
  ck_assert_int_eq(eq->loc.len, 2);
  ck_assert_int_eq(eq->u.bin.lhs->kind, EX_ATTR);
  ck_assert_int_eq(eq->u.bin.lhs->loc.col, 9);
  ck_assert_int_eq(eq->u.bin.lhs->loc.len, 2);
  ck_assert_int_eq(eq->u.bin.rhs->loc.col, 15); /* the '-' */
}
END_TEST

/* ---- errors ---- */

START_TEST(test_error_unknown_dtype_and_layout) {
  ck_assert_int_eq(
      errors("kernel k(x: f33[N], y: f32[N] channel_last) -> f32 {\n"
             "  return x\n}\n"),
      2);
  HAS("t.tdsl:1:13: error: unknown dtype 'f33'");
  HAS("t.tdsl:1:31: error: unknown layout 'channel_last'");
}
END_TEST

START_TEST(test_error_dims) {
  ck_assert_int_eq(errors("kernel k(x: f32[N * 2]) -> f32[N % 2, -N] {\n"
                          "  return x\n}\n"),
                   3);
  HAS("t.tdsl:1:19: error: a parameter dim must be");
  HAS("t.tdsl:1:34: error: '%' is not allowed in a result dim");
  HAS("t.tdsl:1:39: error: a result dim must be");
}
END_TEST

START_TEST(test_error_unclosed_paren) {
  ck_assert_int_eq(errors("kernel k(x: f32) -> f32 {\n"
                          "  y = f(x, 1\n"
                          "  z = y\n"
                          "  return (z\n"
                          "}\n"),
                   2);
  HAS("t.tdsl:3:3: error: expected ')' to close the '(' at 2:8, found name "
      "'z'");
  HAS("t.tdsl:5:1: error: expected ')' to close the '(' at 4:10, found '}'");
}
END_TEST

START_TEST(test_error_mismatched_bracket) {
  ck_assert_int_eq(errors("kernel k(x: f32) -> f32 { return x[0) }"), 1);
  HAS("t.tdsl:1:37: error: expected ']' to close the '[' at 1:35, found ')'");
}
END_TEST

START_TEST(test_error_unexpected_assign) {
  ck_assert_int_eq(errors("kernel k(x: f32) -> f32 {\n  y = x = 2\n"
                          "  return y\n}\n"),
                   1);
  HAS("t.tdsl:2:9: error: unexpected '='");
  ck_assert_int_eq(errors("kernel k(x: f32) -> f32 {\n  y == 2\n}\n"), 1);
  HAS("t.tdsl:2:5: error: expected '=', found '=='");
}
END_TEST

START_TEST(test_error_keyword_args) {
  ck_assert_int_eq(
      errors("kernel k(x: f32) -> f32 { return f(a=1, 2, a=3) }"), 2);
  HAS("t.tdsl:1:41: error: positional argument follows keyword argument");
  HAS("t.tdsl:1:44: error: keyword argument 'a' repeated");
}
END_TEST

START_TEST(test_error_lexical) {
  ck_assert_int_eq(errors("kernel k(x: f32) -> f32 {\n"
                          "  a = 1e + 1__0 + 0x10\n"
                          "  b = 99999999999999999999\n"
                          "  c = x $ 2\n"
                          "  d = \"tanh\n"
                          "  e = \x01\n"
                          "  return x\n}\n"),
                   7);
  HAS("t.tdsl:2:7: error: malformed number '1e'");
  HAS("t.tdsl:2:12: error: malformed number '1__0'");
  HAS("t.tdsl:2:19: error: malformed number '0x10'");
  HAS("t.tdsl:3:7: error: integer literal 99999999999999999999 is too large");
  HAS("t.tdsl:4:9: error: unexpected character '$'");
  HAS("t.tdsl:5:7: error: unterminated string literal");
  HAS("t.tdsl:6:7: error: unexpected byte 0x01");
}
END_TEST

START_TEST(test_error_recovery_several) {
  /* One error per broken statement, and the next kernel is still read. */
  ck_assert_int_eq(errors("kernel a(x: f32) -> f32 {\n"
                          "  y = x +* 2\n"
                          "  z = (x + ) * 3\n"
                          "  w = x\n"
                          "  return x }\n"
                          "kernel b(x: f32 -> f32 { return x }\n"
                          "kernel c(x: f32) -> f32 { return x +  }\n"),
                   4);
  HAS("t.tdsl:2:10: error: expected an expression, found '*'");
  HAS("t.tdsl:3:12: error: expected an expression, found ')'");
  HAS("t.tdsl:6:17: error: expected ')' to close the '(' at 6:9, found '->'");
  HAS("t.tdsl:7:39: error: expected an expression, found '}'");
}
END_TEST

START_TEST(test_error_missing_brace_before_kernel) {
  ck_assert_int_eq(errors("kernel a(x: f32) -> f32 {\n"
                          "  return (x\n"
                          "kernel b(x: f32) -> f32 { return x +* 1 }\n"),
                   2);
  HAS("t.tdsl:3:1: error: expected ')' to close the '(' at 2:10 before the "
      "next kernel");
  HAS("t.tdsl:3:37: error: expected an expression, found '*'");
}
END_TEST

START_TEST(test_error_eof) {
  ck_assert_int_eq(errors("kernel a(x: f32) -> f32 {\n  return x\n"), 1);
  HAS("t.tdsl:2:11: error: expected '}' to close the '{' at 1:25, found end "
      "of file");
  ck_assert_int_eq(errors("kernel"), 1);
  HAS("expected a name, found end of file");
}
END_TEST

START_TEST(test_error_nesting_limit) {
  /* 300 open brackets: one error, no crash. */
  char src[1024];
  int n = snprintf(src, sizeof src, "kernel k(x: f32) -> f32 { return ");
  for (int i = 0; i < 300; i++) src[n++] = '(';
  src[n] = 0;
  ck_assert_int_eq(errors(src), 1);
  HAS("nested too deeply");
  /* A long flat chain is fine; a 300-deep unary chain is reported. */
  static char big[8192];
  n = snprintf(big, sizeof big, "kernel k(x: f32) -> f32 { return ");
  for (int i = 0; i < 300; i++) n += snprintf(big + n, sizeof big - n, "-");
  snprintf(big + n, sizeof big - n, "x }");
  ck_assert_int_eq(errors(big), 1);
  HAS("expression nested too deeply (more than 200 levels)");
}
END_TEST

START_TEST(test_error_limit) {
  /* Many broken statements: reporting stops at Diag's limit. */
  static char src[20000];
  int n = snprintf(src, sizeof src, "kernel k(x: f32) -> f32 {\n");
  for (int i = 0; i < 500; i++)
    n += snprintf(src + n, sizeof src - n, "  y = * 2\n");
  snprintf(src + n, sizeof src - n, "}\n");
  int nerr = errors(src);
  ck_assert_int_ge(nerr, 20);
  ck_assert_int_le(nerr, 21);
  HAS("too many errors");
}
END_TEST

START_TEST(test_error_python_statement) {
  ck_assert_int_eq(errors("kernel k(x: f32) -> f32 {\n  if x > 0:\n"
                          "    return x\n}\n"),
                   1);
  HAS("t.tdsl:2:3: error: 'if' is not part of tdsl");
}
END_TEST

START_TEST(test_tuple_assignment) {
  AstProgram *p = parse_ok("kernel f(x: f32[N]) -> f32[N] {\n"
                           "  a, b = x.chunk(2)\n"
                           "  q ,k,  v = x\n"
                           "  y = a\n"
                           "  return y\n"
                           "}\n");
  const AstKernel *k = &p->kernels[0];
  ck_assert_int_eq(k->nbody, 4);
  ck_assert_int_eq(k->body[0].ntargets, 2);
  ck_assert_str_eq(k->body[0].names[0], "a");
  ck_assert_str_eq(k->body[0].names[1], "b");
  ck_assert_str_eq(k->body[0].name, "a");
  ck_assert_int_eq(k->body[0].name_locs[1].col, 6);
  ck_assert_int_eq(k->body[0].nvalues, 1);
  ck_assert_int_eq(k->body[1].ntargets, 3);
  ck_assert_str_eq(k->body[1].names[2], "v");
  ck_assert_int_eq(k->body[1].name_locs[2].line, 3);
  ck_assert_int_eq(k->body[1].name_locs[2].col, 10);
  ck_assert_int_eq(k->body[2].ntargets, 1);
  /* a target must be a name; a missing '=' still names '=' */
  ck_assert_int_eq(errors("kernel k(x: f32) -> f32 {\n  a, 1 = x\n  return x\n}\n"), 1);
  HAS("t.tdsl:2:6: error: expected a name, found integer '1'");
  ck_assert_int_eq(errors("kernel k(x: f32) -> f32 {\n  a b\n  return x\n}\n"), 1);
  HAS("t.tdsl:2:5: error: expected '=', found name 'b'");
}
END_TEST

static Suite *parser_suite(void) {
  Suite *s = suite_create("parser");
  TCase *t = tcase_create("trees");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_arith_precedence);
  tcase_add_test(t, test_power_and_unary);
  tcase_add_test(t, test_bitwise_and_comparison);
  tcase_add_test(t, test_chained_comparison_is_error);
  tcase_add_test(t, test_literals);
  tcase_add_test(t, test_calls_and_methods);
  tcase_add_test(t, test_index_and_slices);
  tcase_add_test(t, test_lists_and_tuples);
  tcase_add_test(t, test_comments_and_newlines);
  tcase_add_test(t, test_kernel_header);
  tcase_add_test(t, test_kernel_body);
  tcase_add_test(t, test_tuple_assignment);
  tcase_add_test(t, test_all_dtypes_and_layouts);
  tcase_add_test(t, test_locations);
  suite_add_tcase(s, t);
  TCase *e = tcase_create("errors");
  tcase_add_checked_fixture(e, setup, teardown);
  tcase_add_test(e, test_error_unknown_dtype_and_layout);
  tcase_add_test(e, test_error_dims);
  tcase_add_test(e, test_error_unclosed_paren);
  tcase_add_test(e, test_error_mismatched_bracket);
  tcase_add_test(e, test_error_unexpected_assign);
  tcase_add_test(e, test_error_keyword_args);
  tcase_add_test(e, test_error_lexical);
  tcase_add_test(e, test_error_recovery_several);
  tcase_add_test(e, test_error_missing_brace_before_kernel);
  tcase_add_test(e, test_error_eof);
  tcase_add_test(e, test_error_nesting_limit);
  tcase_add_test(e, test_error_limit);
  tcase_add_test(e, test_error_python_statement);
  suite_add_tcase(s, e);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(parser_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
