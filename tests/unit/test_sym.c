/* test_sym.c — canonical forms, folding, exact division, evaluation and
 * printing of symbolic integers (ir/sym.c).  Expected values follow the
 * sym.h contract and Python's // and % semantics. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "sym.h"

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
  ck_assert_ptr_eq(sym_var(T, 0, "other"), N); /* same id, same node */
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
