/* test_sym.c — canonical forms, folding, exact division, evaluation and
 * printing of symbolic integers (ir/sym.c).  Expected values follow the
 * sym.h contract and Python's // and % semantics. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/sym.h"
#include "ir/symprove.h"

static Arena *A;
static SymTab *T;
static const Sym *N, *C, *H, *W, *M;

static void setup(void) {
  A = arena_new();
  T = sym_tab_new(A);
  N = sym_var(T, 0, "N");
  C = sym_var(T, 1, "C");
  H = sym_var(T, 2, "H");
  W = sym_var(T, 3, "W");
  M = sym_var(T, 4, "M");
}

static void teardown(void) { arena_free(A); }

static const Sym *K(int64_t v) { return sym_const(T, v); }
static const Sym *add(const Sym *a, const Sym *b) { return sym_add(T, a, b); }
static const Sym *sub(const Sym *a, const Sym *b) { return sym_sub(T, a, b); }
static const Sym *mul(const Sym *a, const Sym *b) { return sym_mul(T, a, b); }
static const Sym *fdiv(const Sym *a, const Sym *b) { return sym_floordiv(T, a, b); }
static const Sym *mod(const Sym *a, const Sym *b) { return sym_mod(T, a, b); }

#define ck_str(s, want) ck_assert_str_eq(sym_str(A, (s)), (want))
#define ck_const(s, want)                                                 \
  do {                                                                    \
    int64_t v_;                                                           \
    ck_assert(sym_is_const((s), &v_));                                    \
    ck_assert_int_eq(v_, (want));                                         \
  } while (0)

START_TEST(test_commutative_products) {
  const Sym *a = mul(mul(C, H), W);
  const Sym *b = mul(H, mul(W, C));
  ck_assert_ptr_eq(a, b);
  const Sym *v[] = {W, C, H};
  ck_assert_ptr_eq(sym_prod(T, v, 3), a);
  ck_assert_ptr_eq(sym_prod(T, v, 0), K(1));
  ck_assert_ptr_eq(sym_prod(T, v, 1), W);
}
END_TEST

START_TEST(test_like_terms) {
  ck_assert_ptr_eq(add(N, N), mul(K(2), N));
  ck_assert_ptr_eq(sub(N, N), K(0));
  ck_assert(sym_is(sub(N, N), 0));
  /* (N+1)*(N-1) == N*N - 1 */
  const Sym *l = mul(add(N, K(1)), sub(N, K(1)));
  ck_assert_ptr_eq(l, sub(mul(N, N), K(1)));
  /* Cancellation back down to an atom and to a constant. */
  ck_assert_ptr_eq(sub(add(N, C), C), N);
  ck_assert_ptr_eq(sub(add(mul(N, C), K(5)), mul(C, N)), K(5));
  /* Associativity of sums. */
  ck_assert_ptr_eq(add(add(N, C), H), add(N, add(H, C)));
  /* Distribution. */
  ck_assert_ptr_eq(mul(K(3), add(N, C)), add(mul(K(3), N), mul(C, K(3))));
  ck_assert_ptr_eq(sym_neg(T, sym_neg(T, N)), N);
  ck_assert_ptr_eq(mul(N, K(0)), K(0));
  ck_assert_ptr_eq(mul(K(1), N), N);
  ck_assert_ptr_ne(mul(N, N), N);
  ck_assert_ptr_ne(add(N, K(1)), N);
}
END_TEST

START_TEST(test_queries) {
  int id = -1;
  int64_t v = 0;
  ck_assert(sym_is_var(H, &id));
  ck_assert_int_eq(id, 2);
  ck_assert(!sym_is_var(mul(K(2), H), &id));
  ck_assert(!sym_is_var(K(2), &id));
  ck_assert(sym_is_const(K(-9), &v));
  ck_assert_int_eq(v, -9);
  ck_assert(!sym_is_const(N, &v));
  ck_assert(sym_is(K(7), 7));
  ck_assert(!sym_is(K(7), 8));
  ck_assert(!sym_is(N, 0));
  ck_assert_ptr_eq(sym_var(T, 0, "N"), N);         /* same id and name */
  ck_assert_ptr_ne(sym_var(T, 0, "other"), N);     /* another kernel's symbol */
  ck_assert_int_eq(sym_max_var(K(3)), 0);
  ck_assert_int_eq(sym_max_var(N), 1);
  ck_assert_int_eq(sym_max_var(add(mul(C, W), N)), 4);
  ck_assert_int_eq(sym_max_var(sym_min(T, fdiv(H, K(2)), K(3))), 3);
}
END_TEST

START_TEST(test_fold_constants) {
  ck_const(add(K(2), K(3)), 5);
  ck_const(sub(K(2), K(3)), -1);
  ck_const(mul(K(-4), K(3)), -12);
  ck_const(sym_neg(T, K(5)), -5);
  /* Python floor semantics. */
  ck_const(fdiv(K(7), K(2)), 3);
  ck_const(fdiv(K(-7), K(2)), -4);
  ck_const(fdiv(K(7), K(-2)), -4);
  ck_const(fdiv(K(-7), K(-2)), 3);
  ck_const(fdiv(K(-8), K(2)), -4);
  ck_const(mod(K(7), K(2)), 1);
  ck_const(mod(K(-7), K(2)), 1);
  ck_const(mod(K(7), K(-2)), -1);
  ck_const(mod(K(-7), K(-2)), -1);
  ck_const(mod(K(6), K(-3)), 0);
  ck_const(mod(K(INT64_MIN), K(-1)), 0);
  ck_const(sym_min(T, K(3), K(-2)), -2);
  ck_const(sym_max(T, K(3), K(-2)), 3);
}
END_TEST

START_TEST(test_div_mod_simplify) {
  ck_assert_ptr_eq(fdiv(N, K(1)), N);
  ck_assert_ptr_eq(mod(N, K(1)), K(0));
  ck_assert_ptr_eq(mod(N, K(-1)), K(0));
  /* (4*N + 6*C) // 2 == 2*N + 3*C */
  const Sym *e = add(mul(K(4), N), mul(K(6), C));
  ck_assert_ptr_eq(fdiv(e, K(2)), add(mul(K(2), N), mul(K(3), C)));
  ck_assert_ptr_eq(mod(e, K(2)), K(0));
  ck_assert_ptr_eq(fdiv(mul(K(6), N), K(-3)), mul(K(-2), N));
  /* Not exact: stays opaque, and stays distinct from its parts. */
  const Sym *h = fdiv(add(N, K(1)), K(2));
  ck_assert(!sym_is_const(h, NULL));
  ck_assert_ptr_eq(h, fdiv(add(K(1), N), K(2)));
  ck_assert_ptr_ne(h, fdiv(N, K(2)));
  ck_assert_ptr_ne(h, mod(add(N, K(1)), K(2)));
  /* Symbolic divisor is never cancelled (C may be 0). */
  ck_assert(!sym_is_var(fdiv(mul(N, C), C), NULL));
  /* Division by zero stays symbolic; evaluation reports it. */
  const Sym *z = fdiv(K(5), K(0));
  int64_t out;
  ck_assert(!sym_is_const(z, NULL));
  ck_assert(!sym_eval(z, NULL, &out));
  ck_assert(!sym_eval(mod(N, K(0)), (int64_t[]){3}, &out));
  /* Opaque atoms combine like any atom. */
  ck_assert_ptr_eq(add(h, h), mul(K(2), h));
  ck_assert_ptr_eq(sub(mul(h, N), mul(N, h)), K(0));
}
END_TEST

START_TEST(test_min_max) {
  ck_assert_ptr_eq(sym_min(T, N, N), N);
  ck_assert_ptr_eq(sym_max(T, N, N), N);
  ck_assert_ptr_eq(sym_min(T, N, K(4)), sym_min(T, K(4), N));
  ck_assert_ptr_eq(sym_max(T, N, C), sym_max(T, C, N));
  ck_assert_ptr_ne(sym_min(T, N, C), sym_max(T, N, C));
  int64_t env[5] = {7, 2, 0, 0, 0}, out;
  ck_assert(sym_eval(sym_min(T, N, K(4)), env, &out));
  ck_assert_int_eq(out, 4);
  ck_assert(sym_eval(sym_max(T, N, K(4)), env, &out));
  ck_assert_int_eq(out, 7);
  ck_assert(sym_eval(sym_min(T, N, C), env, &out));
  ck_assert_int_eq(out, 2);
}
END_TEST

START_TEST(test_div_exact) {
  const Sym *q;
  /* (6*N*C + 4*C) / (2*C) == 3*N + 2 */
  const Sym *a = add(mul(K(6), mul(N, C)), mul(K(4), C));
  ck_assert(sym_div_exact(T, a, mul(K(2), C), &q));
  ck_assert_ptr_eq(q, add(mul(K(3), N), K(2)));
  /* C*H*W / (H*W) == C */
  ck_assert(sym_div_exact(T, mul(C, mul(H, W)), mul(W, H), &q));
  ck_assert_ptr_eq(q, C);
  ck_assert(sym_div_exact(T, mul(N, N), N, &q));
  ck_assert_ptr_eq(q, N);
  ck_assert(sym_div_exact(T, N, N, &q));
  ck_assert_ptr_eq(q, K(1));
  ck_assert(sym_div_exact(T, K(12), K(-4), &q));
  ck_assert_ptr_eq(q, K(-3));
  ck_assert(sym_div_exact(T, K(0), N, &q));
  ck_assert_ptr_eq(q, K(0));
  /* Failures: a coefficient not divisible, an atom missing, a constant
   * term with a symbolic divisor, a divisor that is not a monomial. */
  ck_assert(!sym_div_exact(T, a, mul(K(4), C), &q));
  ck_assert(!sym_div_exact(T, add(mul(N, C), N), C, &q));
  ck_assert(!sym_div_exact(T, add(N, K(2)), N, &q));
  ck_assert(!sym_div_exact(T, mul(N, N), mul(N, mul(N, N)), &q));
  ck_assert(!sym_div_exact(T, mul(N, C), add(N, K(1)), &q));
  ck_assert(!sym_div_exact(T, N, K(0), &q));
  ck_assert(!sym_div_exact(T, K(7), K(2), &q));
  ck_assert(!sym_div_exact(T, mul(K(INT64_MIN), N), K(-1), &q));
}
END_TEST

START_TEST(test_eval) {
  int64_t env[5] = {3, 4, 5, 6, -7}, out;
  ck_assert(sym_eval(mul(C, mul(H, W)), env, &out));
  ck_assert_int_eq(out, 120);
  ck_assert(sym_eval(sub(mul(N, N), K(1)), env, &out));
  ck_assert_int_eq(out, 8);
  ck_assert(sym_eval(fdiv(M, K(2)), env, &out));
  ck_assert_int_eq(out, -4);
  ck_assert(sym_eval(mod(M, K(2)), env, &out));
  ck_assert_int_eq(out, 1);
  ck_assert(sym_eval(mod(K(7), sym_neg(T, fdiv(C, K(2)))), env, &out));
  ck_assert_int_eq(out, -1); /* 7 % -2 */
  ck_assert(sym_eval(fdiv(add(N, C), H), env, &out));
  ck_assert_int_eq(out, 1);
  ck_assert(sym_eval(K(-9), NULL, &out));
  ck_assert_int_eq(out, -9);
  /* Overflow is reported, not wrapped. */
  int64_t big[5] = {INT64_MAX, 2, 0, 0, INT64_MIN};
  ck_assert(!sym_eval(add(N, K(1)), big, &out));
  ck_assert(!sym_eval(mul(N, C), big, &out));
  ck_assert(!sym_eval(sym_neg(T, M), big, &out));
  ck_assert(!sym_eval(fdiv(M, sym_neg(T, sub(C, K(1)))), big, &out)); /* MIN // -1 */
  ck_assert(sym_eval(sub(N, K(1)), big, &out));
  ck_assert_int_eq(out, INT64_MAX - 1);
}
END_TEST

START_TEST(test_overflow_keeps_opaque) {
  /* Folding that would overflow keeps the operation: the value is still
   * right where it fits and evaluation reports it where it does not. */
  const Sym *m = K(INT64_MAX);
  const Sym *s = add(m, K(1));
  ck_assert(!sym_is_const(s, NULL));
  int64_t out;
  ck_assert(!sym_eval(s, NULL, &out));
  ck_assert_ptr_eq(s, add(K(1), m));
  const Sym *big = mul(K(INT64_C(1) << 62), N);
  const Sym *d = add(big, big); /* 2^63 * N: coefficient overflows */
  ck_assert(sym_eval(d, (int64_t[]){0}, &out));
  ck_assert_int_eq(out, 0);
  ck_assert(!sym_eval(d, (int64_t[]){1}, &out));
  ck_assert(!sym_is_const(fdiv(K(INT64_MIN), K(-1)), NULL));
  const Sym *neg = sym_neg(T, K(INT64_MIN));
  ck_assert(!sym_is_const(neg, NULL));
  ck_assert(!sym_eval(neg, NULL, &out));
  ck_assert_ptr_eq(sub(s, s), K(0));
}
END_TEST

START_TEST(test_print) {
  ck_str(mul(C, mul(H, W)), "C*H*W");
  ck_str(mul(W, mul(C, H)), "C*H*W");
  ck_str(add(mul(K(2), N), K(1)), "2*N + 1");
  ck_str(sub(N, K(1)), "N - 1");
  ck_str(K(-3), "-3");
  ck_str(K(0), "0");
  ck_str(mul(N, N), "N*N");
  ck_str(sub(mul(N, N), K(1)), "N*N - 1");
  ck_str(fdiv(add(N, K(1)), K(2)), "(N + 1)//2");
  ck_str(fdiv(N, K(2)), "N//2");
  ck_str(mod(N, K(3)), "N%3");
  ck_str(sym_min(T, N, K(4)), "min(N, 4)");
  ck_str(sym_max(T, K(4), N), "max(N, 4)");
  ck_str(sym_neg(T, N), "-N");
  ck_str(sub(K(1), N), "-N + 1");
  ck_str(sub(mul(K(-3), C), N), "-N - 3*C");
  ck_str(add(mul(mul(K(2), N), N), sub(C, K(5))), "2*N*N + C - 5");
  ck_str(mul(K(2), fdiv(N, K(3))), "2*(N//3)");
  ck_str(sym_neg(T, fdiv(N, K(3))), "-(N//3)");
  ck_str(mul(C, fdiv(N, K(3))), "C*(N//3)");
  ck_str(fdiv(N, mul(C, H)), "N//(C*H)");
  ck_str(fdiv(fdiv(N, K(2)), K(3)), "N//2//3");
  ck_str(fdiv(N, fdiv(C, K(2))), "N//(C//2)");
  ck_str(fdiv(mul(K(3), N), K(2)), "3*N//2");
  ck_str(fdiv(N, sub(K(0), C)), "N//(-C)");
  ck_str(sym_min(T, add(N, K(1)), mul(C, H)), "min(C*H, N + 1)");
  ck_str(K(INT64_MIN), "(-9223372036854775807 - 1)");
}
END_TEST

START_TEST(test_print_stable) {
  /* Variables print by name and order by id, whatever the build order. */
  const Sym *e1 = add(add(W, mul(N, C)), fdiv(H, K(2)));
  const Sym *e2 = add(fdiv(H, K(2)), add(mul(C, N), W));
  ck_assert_ptr_eq(e1, e2);
  ck_str(e1, "N*C + W + H//2");
}
END_TEST


/* ---- a reader for the printed syntax, to check that printing is
 * unambiguous: parse(print(e)) must give e back (the same pointer). ---- */

typedef struct Rd {
  const char *p;
  bool ok;
} Rd;

static const Sym *rd_expr(Rd *r);

static void rd_ws(Rd *r) {
  while (*r->p == ' ') r->p++;
}

static bool rd_eat(Rd *r, const char *tok) {
  rd_ws(r);
  size_t n = strlen(tok);
  if (strncmp(r->p, tok, n) != 0) return false;
  r->p += n;
  return true;
}

static const Sym *rd_atom(Rd *r) {
  rd_ws(r);
  if (rd_eat(r, "min(") || rd_eat(r, "max(")) {
    bool is_min = r->p[-3] == 'i';
    const Sym *a = rd_expr(r);
    if (!rd_eat(r, ",")) r->ok = false;
    const Sym *b = rd_expr(r);
    if (!rd_eat(r, ")")) r->ok = false;
    return is_min ? sym_min(T, a, b) : sym_max(T, a, b);
  }
  if (rd_eat(r, "(")) {
    const Sym *e = rd_expr(r);
    if (!rd_eat(r, ")")) r->ok = false;
    return e;
  }
  if (*r->p >= '0' && *r->p <= '9') {
    int64_t v = 0;
    while (*r->p >= '0' && *r->p <= '9') {
      int d = *r->p++ - '0';
      if (v > (INT64_MAX - d) / 10) r->ok = false;
      else v = v * 10 + d;
    }
    return K(v);
  }
  static const char *const names[] = {"N", "C", "H", "W", "M"};
  for (int i = 0; i < 5; i++)
    if (*r->p == names[i][0]) {
      r->p++;
      return sym_var(T, i, names[i]);
    }
  r->ok = false;
  return K(0);
}

static const Sym *rd_unary(Rd *r) {
  if (rd_eat(r, "-")) return sym_neg(T, rd_unary(r));
  return rd_atom(r);
}

static const Sym *rd_term(Rd *r) {
  const Sym *e = rd_unary(r);
  for (;;) {
    if (rd_eat(r, "//")) e = fdiv(e, rd_unary(r));
    else if (rd_eat(r, "*")) e = mul(e, rd_unary(r));
    else if (rd_eat(r, "%")) e = mod(e, rd_unary(r));
    else return e;
  }
}

static const Sym *rd_expr(Rd *r) {
  const Sym *e = rd_term(r);
  for (;;) {
    if (rd_eat(r, "+")) e = add(e, rd_term(r));
    else if (rd_eat(r, "-")) e = sub(e, rd_term(r));
    else return e;
  }
}

static const Sym *reparse(const Sym *e) {
  const char *text = sym_str(A, e);
  Rd r = {text, true};
  const Sym *back = rd_expr(&r);
  rd_ws(&r);
  ck_assert_msg(r.ok && *r.p == 0, "cannot read back '%s'", text);
  return back;
}

/* ---- random expressions checked against direct evaluation ---- */

enum { NENV = 6 };
static int64_t envs[NENV][5];

/* A random expression and its value in each env, computed directly with
 * Python semantics (ok[k] false on overflow or division by zero). */
typedef struct RExpr {
  const Sym *s;
  int64_t v[NENV];
  bool ok[NENV];
} RExpr;

static uint64_t rng = 88172645463325252u;
static unsigned rnd(unsigned n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (unsigned)(rng % n);
}

static bool ref_op(int op, int64_t a, int64_t b, int64_t *r) {
  /* Operands stay far below 2^31 where ok, so only /0 can fail here
   * except for products, which are checked. */
  switch (op) {
  case 0: *r = a + b; return true;
  case 1: *r = a - b; return true;
  case 2:
    if (a != 0 && (b > INT32_MAX || b < -INT32_MAX || a > INT32_MAX || a < -INT32_MAX))
      return false;
    *r = a * b;
    return true;
  case 3:
    if (b == 0) return false;
    *r = a / b - (a % b != 0 && ((a < 0) != (b < 0)));
    return true;
  case 4:
    if (b == 0) return false;
    *r = a % b;
    if (*r != 0 && ((*r < 0) != (b < 0))) *r += b;
    return true;
  case 5: *r = a < b ? a : b; return true;
  default: *r = a > b ? a : b; return true;
  }
}

static RExpr rand_expr(int depth) {
  RExpr e = {0};
  if (depth == 0 || rnd(4) == 0) {
    bool is_var = rnd(2);
    int64_t c = (int64_t)rnd(9) - 3;
    int id = (int)rnd(5);
    static const char *const names[] = {"N", "C", "H", "W", "M"};
    e.s = is_var ? sym_var(T, id, names[id]) : K(c);
    for (int k = 0; k < NENV; k++) {
      e.v[k] = is_var ? envs[k][id] : c;
      e.ok[k] = true;
    }
    return e;
  }
  int op = (int)rnd(7);
  RExpr a = rand_expr(depth - 1), b = rand_expr(depth - 1);
  if ((op == 3 || op == 4) && rnd(2)) b = (RExpr){.s = K((int64_t)rnd(5) + 1)};
  if ((op == 3 || op == 4) && sym_is_const(b.s, NULL))
    for (int k = 0; k < NENV; k++) {
      sym_is_const(b.s, &b.v[k]);
      b.ok[k] = true;
    }
  static const Sym *(*const fn[])(SymTab *, const Sym *, const Sym *) = {
      sym_add, sym_sub, sym_mul, sym_floordiv, sym_mod, sym_min, sym_max};
  e.s = fn[op](T, a.s, b.s);
  for (int k = 0; k < NENV; k++) {
    e.ok[k] = a.ok[k] && b.ok[k] && ref_op(op, a.v[k], b.v[k], &e.v[k]);
    if (e.ok[k] && (e.v[k] > INT32_MAX || e.v[k] < -INT32_MAX)) e.ok[k] = false;
  }
  return e;
}

START_TEST(test_random_against_direct) {
  for (int k = 0; k < NENV; k++)
    for (int i = 0; i < 5; i++) envs[k][i] = (int64_t)rnd(13) - 4;
  for (int iter = 0; iter < 3000; iter++) {
    RExpr e = rand_expr(4);
    for (int k = 0; k < NENV; k++) {
      if (!e.ok[k]) continue;
      int64_t got;
      ck_assert_msg(sym_eval(e.s, envs[k], &got), "eval failed: %s", sym_str(A, e.s));
      ck_assert_msg(got == e.v[k], "%s: got %lld want %lld", sym_str(A, e.s),
                    (long long)got, (long long)e.v[k]);
    }
    ck_assert_ptr_eq(reparse(e.s), e.s);
    /* Commuted and re-associated constructions agree. */
    RExpr f = rand_expr(2);
    ck_assert_ptr_eq(add(e.s, f.s), add(f.s, e.s));
    ck_assert_ptr_eq(mul(e.s, f.s), mul(f.s, e.s));
    ck_assert_ptr_eq(sub(add(e.s, f.s), f.s), e.s);
    ck_assert_ptr_eq(mul(add(e.s, K(1)), f.s), add(mul(e.s, f.s), f.s));
  }
}
END_TEST

START_TEST(test_reparse_fixed) {
  const Sym *cases[] = {
      sub(K(0), fdiv(N, K(2))),
      mul(sym_neg(T, N), fdiv(C, K(3))),
      fdiv(sym_neg(T, N), K(2)),
      fdiv(mul(K(-2), N), K(3)),
      mod(fdiv(N, K(2)), C),
      fdiv(mod(N, K(2)), C),
      fdiv(N, mod(C, K(2))),
      fdiv(K(7), sub(N, K(1))),
      sym_max(T, sym_neg(T, N), K(-4)),
      add(mul(K(INT64_MIN), N), K(INT64_MIN)),
      add(K(INT64_MAX), K(1)),                      /* overflow: opaque sum */
      mul(K(INT64_C(1) << 40), mul(K(INT64_C(1) << 40), N)), /* opaque product */
      fdiv(K(INT64_MIN), K(-1)),
      sub(mul(K(3), mul(N, fdiv(H, K(2)))), mul(M, sym_min(T, C, K(0)))),
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    ck_assert_msg(reparse(cases[i]) == cases[i], "round trip of '%s'", sym_str(A, cases[i]));
}
END_TEST

START_TEST(test_print_independent_of_addresses) {
  /* A second table, with variables created in another order and lots of
   * unrelated nodes first, prints the same text. */
  const Sym *e = add(sub(mul(W, mul(N, C)), fdiv(H, K(4))), sym_max(T, M, N));
  Arena *a2 = arena_new();
  SymTab *t2 = sym_tab_new(a2);
  for (int i = 0; i < 1000; i++) sym_const(t2, i * 7919);
  const Sym *m2 = sym_var(t2, 4, "M"), *w2 = sym_var(t2, 3, "W"), *h2 = sym_var(t2, 2, "H");
  const Sym *c2 = sym_var(t2, 1, "C"), *n2 = sym_var(t2, 0, "N");
  const Sym *e2 = sym_add(t2, sym_max(t2, n2, m2),
                          sym_sub(t2, sym_mul(t2, sym_mul(t2, c2, w2), n2),
                                  sym_floordiv(t2, h2, sym_const(t2, 4))));
  ck_assert_str_eq(sym_str(A, e), sym_str(a2, e2));
  ck_assert_str_eq(sym_str(A, e), "N*C*W - H//4 + max(N, M)");
  arena_free(a2);
}
END_TEST

START_TEST(test_many_nodes) {
  /* Enough nodes to grow the hash table many times; all stay unique. */
  const Sym *first[5000];
  for (int i = 0; i < 5000; i++) first[i] = add(mul(K(i), N), K(i - 2500));
  for (int i = 0; i < 5000; i++) ck_assert_ptr_eq(add(K(i - 2500), mul(N, K(i))), first[i]);
  ck_assert_ptr_eq(first[0], K(-2500));
  ck_assert_ptr_eq(first[1], sub(N, K(2499)));
}
END_TEST


/* ---- symprove: normal forms and decisions under facts ---------------- */

static SymTruth decide_eq(const SymFacts *f, const Sym *a, const Sym *b) {
  return sym_decide(T, f, a, SYM_EQ, b);
}

static const Sym *smin(const Sym *a, const Sym *b) { return sym_min(T, a, b); }
static const Sym *smax(const Sym *a, const Sym *b) { return sym_max(T, a, b); }

/* The four size pairs of issue 8, item 6. */
START_TEST(test_prove_issue_sizes) {
  /* Conv2d's documented formula vs the compiler's (H + 1)//2. */
  const Sym *doc = add(fdiv(sub(sub(add(H, K(2)), K(2)), K(1)), K(2)), K(1));
  ck_assert_int_eq(decide_eq(NULL, doc, fdiv(add(H, K(1)), K(2))), SYM_YES);
  ck_str(sym_simplify(T, NULL, doc), "(H + 1)//2");
  /* z[:, 1:] - z[:, :-1] with a symbolic S. */
  const Sym *S = N;
  const Sym *tail = sub(S, smin(S, K(1)));
  const Sym *head = smin(S, smax(sub(S, K(1)), K(0)));
  ck_assert_int_eq(decide_eq(NULL, tail, head), SYM_YES);
  /* Two stacked stride-2 convs. */
  const Sym *L = C;
  const Sym *user = add(fdiv(fdiv(sub(L, K(1)), K(2)), K(2)), K(1));
  const Sym *mine = fdiv(add(fdiv(add(L, K(1)), K(2)), K(1)), K(2));
  ck_assert_int_eq(decide_eq(NULL, user, mine), SYM_YES);
  ck_assert_ptr_eq(sym_simplify(T, NULL, user), sym_simplify(T, NULL, mine));
  /* img[:, 1:H-1]: H - 2 only once H >= 2 is a fact. */
  const Sym *m1 = smin(H, K(1));
  const Sym *slice = sub(smin(H, smax(m1, sub(H, K(1)))), m1);
  ck_assert_int_eq(decide_eq(NULL, slice, sub(H, K(2))), SYM_UNKNOWN);
  ck_assert_int_eq(decide_eq(NULL, slice, smax(sub(H, K(2)), K(0))), SYM_YES);
  SymFacts f = sym_facts_new(A, 5);
  sym_facts_add(T, &f, K(2), SYM_LE, H);
  ck_assert_int_eq(decide_eq(&f, slice, sub(H, K(2))), SYM_YES);
  ck_str(sym_simplify(T, &f, slice), "H - 2");
}
END_TEST

START_TEST(test_prove_no_and_unknown) {
  ck_assert_int_eq(decide_eq(NULL, N, add(N, K(1))), SYM_NO);
  ck_assert_int_eq(decide_eq(NULL, add(N, K(1)), K(0)), SYM_NO); /* N >= 0 */
  ck_assert_int_eq(decide_eq(NULL, N, M), SYM_UNKNOWN);
  ck_assert_int_eq(decide_eq(NULL, fdiv(H, K(2)), fdiv(add(H, K(1)), K(2))), SYM_UNKNOWN);
  ck_assert_int_eq(decide_eq(NULL, mod(add(H, K(4)), K(2)), mod(H, K(2))), SYM_YES);
  ck_assert_int_eq(decide_eq(NULL, fdiv(mul(K(2), add(H, K(1))), K(4)),
                             fdiv(add(H, K(1)), K(2))), SYM_YES);
  ck_assert_int_eq(sym_decide(T, NULL, smin(N, K(1)), SYM_LE, K(1)), SYM_YES);
  ck_assert_int_eq(sym_decide(T, NULL, K(0), SYM_LT, add(N, K(1))), SYM_YES);
  ck_assert_int_eq(sym_decide(T, NULL, N, SYM_LT, N), SYM_NO);
  ck_assert(sym_differ_generically(NULL, N, M));
  ck_assert(sym_differ_generically(NULL, H, K(5)));
  ck_assert(!sym_differ_generically(NULL, fdiv(H, K(2)), fdiv(add(H, K(1)), K(2))));
  ck_assert(!sym_differ_generically(NULL, H, smax(H, K(1))));
}
END_TEST

START_TEST(test_facts_from_checks) {
  SymFacts f = sym_facts_new(A, 5);
  /* conv's `1 <= (H + 1)//2`: H >= 1. */
  sym_facts_add(T, &f, K(1), SYM_LE, fdiv(add(H, K(1)), K(2)));
  ck_assert_int_eq(f.lo[2], 1);
  sym_facts_add(T, &f, mul(K(3), W), SYM_LT, K(10)); /* W <= 3 */
  ck_assert_int_eq(f.hi[3], 3);
  sym_facts_add(T, &f, C, SYM_EQ, K(4));
  ck_assert_int_eq(f.lo[1], 4);
  ck_assert_int_eq(f.hi[1], 4);
  ck_str(sym_simplify(T, &f, add(C, smin(H, K(1)))), "5");
  sym_facts_add(T, &f, N, SYM_LE, M); /* two variables: ignored */
  ck_assert_int_eq(f.lo[0], 0);
  ck_assert_int_eq(f.hi[4], INT64_MAX);
}
END_TEST

/* Random size expressions over N, C, H: soundness of simplify and decide
 * by brute force over every assignment in [0, 9]^3 within the facts. */
static const Sym *rand_size(int depth) {
  static const char *const names[] = {"N", "C", "H"};
  if (depth == 0 || rnd(4) == 0) {
    int id = (int)rnd(3);
    return rnd(3) ? sym_var(T, id, names[id]) : K((int64_t)rnd(8) - 2);
  }
  const Sym *a = rand_size(depth - 1), *b = rand_size(depth - 1);
  switch (rnd(8)) {
  case 0: return add(a, b);
  case 1: return sub(a, b);
  case 2: return mul(a, K((int64_t)rnd(5) - 1));
  case 3: return fdiv(a, K((int64_t)rnd(4) + 1));
  case 4: return mod(a, K((int64_t)rnd(4) + 1));
  case 5: return smin(a, b);
  case 6: return smax(a, b);
  default: return add(fdiv(add(a, K((int64_t)rnd(5))), K((int64_t)rnd(3) + 1)), b);
  }
}

/* 1 equal everywhere, 0 different everywhere, -1 mixed or no point. */
static int brute_eq(const SymFacts *f, const Sym *a, const Sym *b) {
  int eq = 0, ne = 0;
  for (int i = 0; i < 1000; i++) {
    int64_t env[3] = {i % 10, i / 10 % 10, i / 100}, x, y;
    bool in = true;
    for (int v = 0; v < 3; v++) in &= env[v] >= f->lo[v] && env[v] <= f->hi[v];
    if (!in) continue;
    /* ck_assert logs every call: checked by hand in this hot loop */
    if (!sym_eval(a, env, &x) || !sym_eval(b, env, &y)) ck_abort_msg("eval failed");
    if (x == y) eq++;
    else ne++;
  }
  return eq && !ne ? 1 : ne && !eq ? 0 : -1;
}

START_TEST(test_prove_random_sound) {
  int yes = 0, no = 0;
  for (int i = 0; i < 3000; i++) {
    SymFacts f = sym_facts_new(A, 3);
    if (rnd(2)) f.lo[rnd(3)] = (int64_t)rnd(4);
    if (rnd(3) == 0) f.hi[rnd(3)] = 9;
    const Sym *a = rand_size(3), *b;
    switch (rnd(3)) {
    case 0: b = rand_size(3); break;
    case 1: b = add(a, K((int64_t)rnd(3) - 1)); break;
    default: b = sym_simplify(T, &f, add(a, sub(rand_size(1), rand_size(1)))); break;
    }
    ck_assert_msg(brute_eq(&f, a, sym_simplify(T, &f, a)) == 1, "simplify(%s) = %s",
                  sym_str(A, a), sym_str(A, sym_simplify(T, &f, a)));
    SymTruth t = decide_eq(&f, a, b);
    int truth = brute_eq(&f, a, b);
    if (t == SYM_YES) yes++, ck_assert_msg(truth == 1, "%s == %s", sym_str(A, a), sym_str(A, b));
    if (t == SYM_NO) no++, ck_assert_msg(truth == 0, "%s != %s", sym_str(A, a), sym_str(A, b));
    SymTruth le = sym_decide(T, &f, a, SYM_LE, b);
    for (int j = 0; j < 1000 && le != SYM_UNKNOWN; j++) {
      int64_t env[3] = {j % 10, j / 10 % 10, j / 100}, x, y;
      bool in = true;
      for (int v = 0; v < 3; v++) in &= env[v] >= f.lo[v] && env[v] <= f.hi[v];
      if (!in || !sym_eval(a, env, &x) || !sym_eval(b, env, &y)) continue;
      if ((x <= y) != (le == SYM_YES))
        ck_abort_msg("%s <= %s decided %d", sym_str(A, a), sym_str(A, b), (int)le);
    }
  }
  ck_assert_int_gt(yes, 300); /* the decisions are not vacuous */
  ck_assert_int_gt(no, 300);
}
END_TEST

static Suite *sym_suite(void) {
  Suite *s = suite_create("sym");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_commutative_products);
  tcase_add_test(tc, test_like_terms);
  tcase_add_test(tc, test_queries);
  tcase_add_test(tc, test_fold_constants);
  tcase_add_test(tc, test_div_mod_simplify);
  tcase_add_test(tc, test_min_max);
  tcase_add_test(tc, test_div_exact);
  tcase_add_test(tc, test_eval);
  tcase_add_test(tc, test_overflow_keeps_opaque);
  tcase_add_test(tc, test_print);
  tcase_add_test(tc, test_print_stable);
  tcase_add_test(tc, test_random_against_direct);
  tcase_add_test(tc, test_reparse_fixed);
  tcase_add_test(tc, test_print_independent_of_addresses);
  tcase_add_test(tc, test_many_nodes);
  tcase_add_test(tc, test_prove_issue_sizes);
  tcase_add_test(tc, test_prove_no_and_unknown);
  tcase_add_test(tc, test_facts_from_checks);
  tcase_add_test(tc, test_prove_random_sound);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(sym_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
