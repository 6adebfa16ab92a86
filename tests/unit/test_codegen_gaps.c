/* test_codegen_gaps.c — inputs from PyTorch's own test suite that tdsl
 * once refused or crashed on (issue 8, item 11), compiled with tdslc and
 * run through the C ABI: unfold of a 0-dim tensor, sum/prod with a bool
 * or narrow integer dtype= (PyTorch wraps in that type), conv2d
 * padding="same" with an odd total padding (the extra row/column at the
 * end), squeeze with a list of dims (PyTorch 2); and (item 5) names
 * next to the refused C names still compile.  Expected values are
 * worked out by hand from PyTorch's rules; the conv case is also compared
 * with the reference interpreter on random inputs.
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources). */
#include "codegen_util.h"

/* A row-major f32 tensor holding v. */
static void ten_f32(Ten *t, int rank, const int64_t *shape, const float *v) {
  ten(t, DT_F32, rank, shape, NULL, 0, false);
  memcpy(t->store, v, t->bytes);
}

static const char *UNFOLD0 =
    "kernel unf(x: f32[]) -> (f32[1], f32[1]) {\n"
    "  return x.unfold(0, 1, 1), x.unfold(-1, 1, 5)\n"
    "}\n";

/* PyTorch: a 0-dim tensor unfolds as if it were [1]. */
START_TEST(unfold_zero_dim) {
  Lib L;
  build(&L, UNFOLD0, "unf");
  float v = 2.5f;
  int64_t one[1] = {1};
  Ten x, o[2];
  ten_f32(&x, 0, NULL, &v);
  for (int i = 0; i < 2; i++) out_ten(&o[i], DT_F32, 1, one);
  call_ok(&L, "unf", &x, 1, o, 2);
  for (int i = 0; i < 2; i++) {
    ck_assert_float_eq(*(float *)o[i].store, 2.5f);
    ten_free(&o[i]);
  }
  ten_free(&x);
  unbuild(&L);
}
END_TEST

static const char *NARROW_SUM =
    "kernel red(x: f32[4], y: f32[4]) -> (i8[], bool[], bool[], i16[], u8[2]) {\n"
    "  return x.sum(dtype=i8), y.sum(dtype=bool), (y * 0.0).sum(dtype=bool), "
    "x.prod(dtype=i16), y.view(2, 2).sum(1, dtype=u8)\n"
    "}\n";

/* dtype= casts each element first (toward zero), then adds or multiplies
 * in that type, wrapping: 100+100+50-3 = 247 -> -9 in i8;
 * 100*100*50*-3 = -1500000 -> 7328 in i16; 200+100 -> 44 in u8; bool
 * addition is "any nonzero". */
START_TEST(sum_prod_narrow_dtype) {
  Lib L;
  build(&L, NARROW_SUM, "red");
  float xv[4] = {100.7f, 100.2f, 50, -3.9f}, yv[4] = {0.5f, 0, 200.9f, 100};
  int64_t four[1] = {4}, two[1] = {2};
  Ten in[2], o[5];
  ten_f32(&in[0], 1, four, xv);
  ten_f32(&in[1], 1, four, yv);
  out_ten(&o[0], DT_I8, 0, NULL);
  out_ten(&o[1], DT_BOOL, 0, NULL);
  out_ten(&o[2], DT_BOOL, 0, NULL);
  out_ten(&o[3], DT_I16, 0, NULL);
  out_ten(&o[4], DT_U8, 1, two);
  call_ok(&L, "red", in, 2, o, 5);
  ck_assert_int_eq(*(int8_t *)o[0].store, -9);
  ck_assert_int_eq(*(uint8_t *)o[1].store, 1);
  ck_assert_int_eq(*(uint8_t *)o[2].store, 0);
  ck_assert_int_eq(*(int16_t *)o[3].store, 7328);
  ck_assert_int_eq(((uint8_t *)o[4].store)[0], 0);
  ck_assert_int_eq(((uint8_t *)o[4].store)[1], 44);
  for (int i = 0; i < 2; i++) ten_free(&in[i]);
  for (int i = 0; i < 5; i++) ten_free(&o[i]);
  unbuild(&L);
}
END_TEST

static const char *CONV_SAME =
    "kernel cs(x: f32[1, 1, 3, 3], w: f32[1, 1, 2, 2]) -> f32[1, 1, 3, 3] {\n"
    "  return conv2d(x, w, padding=\"same\")\n"
    "}\n"
    "kernel cr(x: f32[N, 3, H, W] strided, w: f32[4, 3, 2, 3]) -> f32[N, 4, H, W] {\n"
    "  return conv2d(x, w, padding=\"same\", dilation=(3, 1))\n"
    "}\n"
    "kernel cv(x: f32[3, H, W], w: f32[2, 3, 4, 1]) -> f32[H * W * 2] {\n"
    "  return conv2d(x, w, padding=\"same\").view(-1)\n"
    "}\n";

/* A 2x2 kernel of ones with padding="same": total padding 1 per dim, all
 * of it after the input, so out[i][j] = x[i..i+1][j..j+1] summed with
 * zeros past the end. */
START_TEST(conv_same_odd_padding) {
  Lib L;
  build(&L, CONV_SAME, "cs");
  float xv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, wv[4] = {1, 1, 1, 1};
  float want[9] = {12, 16, 9, 24, 28, 15, 15, 17, 9};
  int64_t sx[4] = {1, 1, 3, 3}, sw[4] = {1, 1, 2, 2};
  Ten in[2], o;
  ten_f32(&in[0], 4, sx, xv);
  ten_f32(&in[1], 4, sw, wv);
  out_ten(&o, DT_F32, 4, sx);
  call_ok(&L, "cs", in, 2, &o, 1);
  ck_assert_mem_eq(o.store, want, sizeof want);
  ten_free(&in[0]), ten_free(&in[1]), ten_free(&o);
  /* odd totals along one dim (dilated: 3 rows, 2 columns), channels-last
   * input, symbolic sizes; and a trimmed unbatched result viewed flat */
  for (int trial = 0; trial < 2; trial++) {
    int64_t n = 2, h = 5 + trial, w = 4;
    int64_t shx[4] = {n, 3, h, w}, shw[4] = {4, 3, 2, 3}, sho[4] = {n, 4, h, w};
    int64_t cl[4] = {h * w * 3, 1, w * 3, 3};
    ten(&in[0], DT_F32, 4, shx, trial ? cl : NULL, 1, false);
    ten(&in[1], DT_F32, 4, shw, NULL, 0, false);
    out_ten(&o, DT_F32, 4, sho);
    run_and_compare(&L, "cr", in, 2, &o, 1, true);
    ten_free(&in[0]), ten_free(&in[1]), ten_free(&o);
  }
  int64_t s3[3] = {3, 4, 5}, sv[4] = {2, 3, 4, 1}, sf[1] = {40};
  ten(&in[0], DT_F32, 3, s3, NULL, 0, false);
  ten(&in[1], DT_F32, 4, sv, NULL, 0, false);
  out_ten(&o, DT_F32, 1, sf);
  run_and_compare(&L, "cv", in, 2, &o, 1, true);
  ten_free(&in[0]), ten_free(&in[1]), ten_free(&o);
  unbuild(&L);
}
END_TEST

static const char *SQUEEZE =
    "kernel sq(x: f32[2, 1, 3, 1]) -> (f32[2, 3], f32[2, 3, 1], f32[2, 1, 3, 1]) {\n"
    "  return x.squeeze([1, 3]), x.squeeze([0, -3]), x.squeeze([])\n"
    "}\n";

/* PyTorch 2: only the listed size-1 dims go; [] removes none. */
START_TEST(squeeze_dim_list) {
  Lib L;
  build(&L, SQUEEZE, "sq");
  float xv[6] = {1, 2, 3, 4, 5, 6};
  int64_t sx[4] = {2, 1, 3, 1}, s2[2] = {2, 3}, s3[3] = {2, 3, 1};
  Ten x, o[3];
  ten_f32(&x, 4, sx, xv);
  out_ten(&o[0], DT_F32, 2, s2);
  out_ten(&o[1], DT_F32, 3, s3);
  out_ten(&o[2], DT_F32, 4, sx);
  call_ok(&L, "sq", &x, 1, o, 3);
  for (int i = 0; i < 3; i++) {
    ck_assert_mem_eq(o[i].store, xv, sizeof xv);
    ten_free(&o[i]);
  }
  ten_free(&x);
  unbuild(&L);
}
END_TEST

/* Names close to the refused ones (spec §3) stay usable: parameters may
 * share a C library function's name (they are block-scope in the
 * prototype), and only out<digits> is a generated result name.  The
 * header must compile (build includes it) and the kernel must run. */
static const char *NEAR_NAMES =
    "kernel outf(exp: f32[2], main: f32[2], out_0: f32[2], outx: f32[2], "
    "out: f32[2], _x: f32[2]) -> f32[2] {\n"
    "  return exp + main + out_0 + outx + out + _x\n"
    "}\n";

START_TEST(near_reserved_names) {
  Lib L;
  build(&L, NEAR_NAMES, "outf");
  int64_t two[1] = {2};
  Ten in[6], o;
  for (int i = 0; i < 6; i++) {
    float v[2] = {(float)i, (float)(10 * i)};
    ten_f32(&in[i], 1, two, v);
  }
  out_ten(&o, DT_F32, 1, two);
  call_ok(&L, "outf", in, 6, &o, 1);
  float want[2] = {15, 150};
  ck_assert_mem_eq(o.store, want, sizeof want);
  for (int i = 0; i < 6; i++) ten_free(&in[i]);
  ten_free(&o);
  unbuild(&L);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_gaps");
  TCase *t = tcase_create("gaps");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, unfold_zero_dim);
  tcase_add_test(t, sum_prod_narrow_dtype);
  tcase_add_test(t, conv_same_odd_padding);
  tcase_add_test(t, squeeze_dim_list);
  tcase_add_test(t, near_reserved_names);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
