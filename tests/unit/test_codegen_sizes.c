/* test_codegen_sizes.c — result and broadcast sizes written another way
 * than the compiler derives them (issue 8, item 6): the Conv2d formula
 * from PyTorch's documentation, a crop img[:, 1:H-1], the finite
 * difference z[:, 1:] - z[:, :-1] and two stacked strided convs compile,
 * run through the C ABI and match the reference interpreter at sizes on
 * both sides of every min/max and parity; where equality depends on the
 * sizes (a crop of fewer than 2 columns, halves of an odd length) the
 * kernel fails at entry with TDSL_E_CHECK and leaves its output alone.
 * Issue 8, item 12: squeeze() keeps a symbolic dim, which PyTorch would
 * drop where it is 1 (another rank): such a call fails at entry too.
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources). */
#include "codegen_util.h"

static const char *SIZES =
    "kernel conv_doc(x: f32[N, 2, H, W], w: f32[4, 2, 3, 3]) -> "
    "f32[N, 4, (H + 2*1 - 1*(3-1) - 1) // 2 + 1, (W + 2*1 - 1*(3-1) - 1) // 2 + 1] {\n"
    "  return conv2d(x, w, stride=2, padding=1)\n"
    "}\n"
    "kernel crop(img: f32[C, H]) -> f32[C, H - 2] {\n"
    "  return img[:, 1:H-1]\n"
    "}\n"
    "kernel diff(z: f32[B, S]) -> f32[B, S - 1] {\n"
    "  return z[:, 1:] - z[:, :-1]\n"
    "}\n"
    "kernel convs(x: f32[N, 1, 1, L], w: f32[1, 1, 1, 3]) -> "
    "f32[N, 1, 1, ((L - 1)//2)//2 + 1] {\n"
    "  y = conv2d(x, w, stride=(1, 2), padding=(0, 1))\n"
    "  return conv2d(y, w, stride=(1, 2), padding=(0, 1))\n"
    "}\n"
    "kernel halves(x: f32[N]) -> f32[N // 2] {\n"
    "  return x[:N//2] + x[N//2:]\n"
    "}\n"
    "kernel sq(x: f32[N, 1, 3]) -> f32[N, 3] {\n"
    "  return x.squeeze()\n"
    "}\n";

/* Runs name on row-major inputs and one output, against the interpreter. */
static void run2(Lib *L, const char *name, int r0, const int64_t *s0, int r1,
                 const int64_t *s1, int ro, const int64_t *so) {
  Ten in[2], out;
  ten(&in[0], DT_F32, r0, s0, NULL, 1, false);
  if (r1 >= 0) ten(&in[1], DT_F32, r1, s1, NULL, 0, false);
  out_ten(&out, DT_F32, ro, so);
  run_and_compare(L, name, in, r1 >= 0 ? 2 : 1, &out, 1, true);
  ten_free(&in[0]), ten_free(&out);
  if (r1 >= 0) ten_free(&in[1]);
}

/* Calls a one-input kernel expecting TDSL_E_CHECK naming `what`. */
static void fails_check(Lib *L, const char *name, int r, const int64_t *s, int ro,
                        const int64_t *so, const char *what) {
  Ten x, o;
  ten(&x, DT_F32, r, s, NULL, 0, false);
  out_ten(&o, DT_F32, ro, so);
  void *a[2] = {&x.t, &o.t};
  const char *(*last)(void) = (const char *(*)(void))sym(L, "tdsl_last_error");
  ck_assert_int_eq(call(sym(L, name), a, 2), TDSL_E_CHECK);
  ck_assert_msg(strstr(last(), what) != NULL, "%s: message '%s'", name, last());
  ck_assert(untouched(&o));
  ten_free(&x), ten_free(&o);
}

START_TEST(documented_conv_formula) {
  Lib L;
  build(&L, SIZES, "conv_doc");
  int64_t w[4] = {4, 2, 3, 3};
  for (int64_t h = 1; h <= 6; h++) {
    int64_t x[4] = {2, 2, h, h + 1}, o[4] = {2, 4, (h + 1) / 2, (h + 2) / 2};
    run2(&L, "conv_doc", 4, x, 4, w, 4, o);
  }
  unbuild(&L);
}
END_TEST

START_TEST(crop_and_finite_difference) {
  Lib L;
  build(&L, SIZES, "crop");
  for (int64_t h = 2; h <= 5; h++) {
    int64_t x[2] = {3, h}, o[2] = {3, h - 2};
    run2(&L, "crop", 2, x, -1, NULL, 2, o);
  }
  int64_t x1[2] = {3, 1}, o1[2] = {3, 0};
  fails_check(&L, "crop", 2, x1, 2, o1, "declared with size H - 2");
  for (int64_t s = 1; s <= 4; s++) {
    int64_t z[2] = {2, s}, o[2] = {2, s - 1};
    run2(&L, "diff", 2, z, -1, NULL, 2, o);
  }
  /* by hand: out[b][j] = z[b][j+1] - z[b][j] */
  int64_t z[2] = {2, 5}, o[2] = {2, 4};
  Ten tz, to;
  ten(&tz, DT_F32, 2, z, NULL, 0, false);
  out_ten(&to, DT_F32, 2, o);
  call_ok(&L, "diff", &tz, 1, &to, 1);
  const float *zi = tz.store, *oi = to.store;
  for (int i = 0; i < 8; i++)
    ck_assert_float_eq(oi[i], zi[i / 4 * 5 + i % 4 + 1] - zi[i / 4 * 5 + i % 4]);
  ten_free(&tz), ten_free(&to);
  int64_t z0[2] = {2, 0}, o0[2] = {2, 0};
  fails_check(&L, "diff", 2, z0, 2, o0, "declared with size S - 1");
  unbuild(&L);
}
END_TEST

START_TEST(stacked_strided_convs) {
  Lib L;
  build(&L, SIZES, "convs");
  int64_t w[4] = {1, 1, 1, 3};
  for (int64_t l = 1; l <= 10; l++) {
    int64_t x[4] = {2, 1, 1, l}, o[4] = {2, 1, 1, (l - 1) / 2 / 2 + 1};
    run2(&L, "convs", 4, x, 4, w, 4, o);
  }
  unbuild(&L);
}
END_TEST

START_TEST(broadcast_checked_at_entry) {
  Lib L;
  build(&L, SIZES, "halves");
  for (int64_t n = 0; n <= 6; n += 2) {
    int64_t x[1] = {n}, o[1] = {n / 2};
    run2(&L, "halves", 1, x, -1, NULL, 1, o);
  }
  int64_t x[1] = {5}, o[1] = {2};
  fails_check(&L, "halves", 1, x, 1, o, "cannot broadcast");
  unbuild(&L);
}
END_TEST

START_TEST(squeeze_symbolic_one) {
  Lib L;
  build(&L, SIZES, "sq");
  for (int64_t n = 0; n <= 3; n += 2) {
    int64_t x[3] = {n, 1, 3}, o[2] = {n, 3};
    run2(&L, "sq", 3, x, -1, NULL, 2, o);
  }
  int64_t x[3] = {1, 1, 3}, o[2] = {1, 3};
  fails_check(&L, "sq", 3, x, 2, o, "PyTorch would drop it");
  unbuild(&L);
}
END_TEST

static Suite *sizes_suite(void) {
  Suite *s = suite_create("codegen_sizes");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, documented_conv_formula);
  tcase_add_test(tc, crop_and_finite_difference);
  tcase_add_test(tc, stacked_strided_convs);
  tcase_add_test(tc, broadcast_checked_at_entry);
  tcase_add_test(tc, squeeze_symbolic_one);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(sizes_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
