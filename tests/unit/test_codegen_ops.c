/* test_codegen_ops.c — the CPU backend on normalizations and pools:
 * softmax/log_softmax along every dim, layer_norm with and without
 * weight/bias, max/avg/adaptive-avg pooling (float and integer dtypes,
 * channels-last and unbatched inputs, size-1 and empty dims; empty bool
 * and integer softmax inputs), each
 * compiled with tdslc, run through the C ABI and compared with the
 * reference interpreter; plus a few values checked by hand (integer
 * average pooling truncates, max pooling pads with -inf, an all -inf
 * softmax row is NaN as in PyTorch).
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources). */
#include "codegen_util.h"

/* Runs `name` with inputs of the given dtypes/shapes (strides st[i] or
 * row-major; offsets 0..) and row-major outputs, compares all. */
typedef struct Spec {
  DType dt;
  int rank;
  int64_t shape[4];
  const int64_t *stride;
} Spec;

static void run_case(Lib *L, const char *name, const Spec *in, int nin,
                     const Spec *out, int nout) {
  Ten ti[8], to[8];
  for (int i = 0; i < nin; i++)
    ten(&ti[i], in[i].dt, in[i].rank, in[i].shape, in[i].stride, i + 1,
        i == 1 && !in[i].stride);
  for (int i = 0; i < nout; i++) {
    ten(&to[i], out[i].dt, out[i].rank, out[i].shape, out[i].stride, 0, false);
    memset(to[i].store, 0x5A, to[i].bytes);
  }
  run_and_compare(L, name, ti, nin, to, nout, true);
  for (int i = 0; i < nin; i++) ten_free(&ti[i]);
  for (int i = 0; i < nout; i++) ten_free(&to[i]);
}

/* ---- softmax ----------------------------------------------------------- */

static const char *SOFTMAX =
    "kernel sm(x: f32[A, B, C] strided) -> (f32[A, B, C], f32[A, B, C], f32[A, B, C], "
    "f32[A, B, C], f32[A, B, C], f32[A, B, C]) {\n"
    "  return softmax(x, 0), softmax(x, 1), x.softmax(-1), log_softmax(x, 0), "
    "log_softmax(x, -2), x.log_softmax(2)\n"
    "}\n"
    "kernel smt(d: f64[A, B], h: f16[A, B], b: bf16[A, B]) -> (f64[A, B], f16[A, B], "
    "bf16[A, B], f32[A, B], f64[A, B]) {\n"
    "  return softmax(d, 1), softmax(h, 0), log_softmax(b, 1), softmax(h, 1, dtype=f32), "
    "log_softmax(d * 30.0, 0)\n"
    "}\n"
    "kernel sm0(x: f32[]) -> (f32[], f32[]) {\n"
    "  return softmax(x, 0), log_softmax(x, -1)\n"
    "}\n"
    "kernel smb(b: bool[A, B], i: i32[A, B]) -> (bool[0, B], i32[A, 0], i64[0, B]) {\n"
    "  return softmax(b[0:0], -1), i[:, 0:0].log_softmax(0), softmax(b[0:0], 1, "
    "dtype=i64)\n"
    "}\n";

START_TEST(softmax_every_dim) {
  Lib L;
  build(&L, SOFTMAX, "sm");
  int64_t shapes[4][3] = {{3, 4, 5}, {1, 4, 1}, {2, 1, 7}, {2, 0, 3}};
  for (int s = 0; s < 4; s++) {
    const int64_t *sh3 = shapes[s];
    int64_t tr[3] = {1, sh3[0] * sh3[2] + 1, sh3[0]}; /* permuted, padded */
    Spec in = {DT_F32, 3, {sh3[0], sh3[1], sh3[2]}, s == 0 ? tr : NULL};
    Spec out[6];
    for (int i = 0; i < 6; i++) out[i] = (Spec){DT_F32, 3, {sh3[0], sh3[1], sh3[2]}, NULL};
    run_case(&L, "sm", &in, 1, out, 6);
  }
  Spec in0 = {DT_F32, 0, {0}, NULL}, out0[2] = {{DT_F32, 0, {0}, NULL}, {DT_F32, 0, {0}, NULL}};
  run_case(&L, "sm0", &in0, 1, out0, 2);
  unbuild(&L);
}
END_TEST

START_TEST(softmax_dtypes) {
  Lib L;
  build(&L, SOFTMAX, "smt");
  int64_t shapes[2][2] = {{5, 9}, {1, 3}};
  for (int s = 0; s < 2; s++) {
    Spec in[3] = {{DT_F64, 2, {shapes[s][0], shapes[s][1]}, NULL},
                  {DT_F16, 2, {shapes[s][0], shapes[s][1]}, NULL},
                  {DT_BF16, 2, {shapes[s][0], shapes[s][1]}, NULL}};
    DType od[5] = {DT_F64, DT_F16, DT_BF16, DT_F32, DT_F64};
    Spec out[5];
    for (int i = 0; i < 5; i++) out[i] = (Spec){od[i], 2, {shapes[s][0], shapes[s][1]}, NULL};
    run_case(&L, "smt", in, 3, out, 5);
  }
  unbuild(&L);
}
END_TEST

/* PyTorch returns an empty input's softmax before dispatching on the
 * dtype: empty bool and integer slices give empty results of their dtype. */
START_TEST(softmax_empty_int_and_bool) {
  Lib L;
  build(&L, SOFTMAX, "smb");
  Spec in[2] = {{DT_BOOL, 2, {3, 4}, NULL}, {DT_I32, 2, {3, 4}, NULL}};
  Spec out[3] = {{DT_BOOL, 2, {0, 4}, NULL}, {DT_I32, 2, {3, 0}, NULL},
                 {DT_I64, 2, {0, 4}, NULL}};
  run_case(&L, "smb", in, 2, out, 3);
  unbuild(&L);
}
END_TEST

/* Rows of -inf (NaN in PyTorch: 0/0) and with NaN; a row with one +inf. */
START_TEST(softmax_special_values) {
  Lib L;
  build(&L, "kernel sp(x: f32[3, 2]) -> (f32[3, 2], f32[3, 2]) {\n"
            "  return softmax(x, 1), log_softmax(x, 1)\n}\n", "sp");
  int64_t s[2] = {3, 2};
  Ten x, o[2];
  ten(&x, DT_F32, 2, s, NULL, 0, false);
  float v[6] = {-INFINITY, -INFINITY, NAN, 1.0f, INFINITY, 2.0f};
  memcpy(x.store, v, sizeof v);
  out_ten(&o[0], DT_F32, 2, s);
  out_ten(&o[1], DT_F32, 2, s);
  run_and_compare(&L, "sp", &x, 1, o, 2, true);
  const float *y = o[0].store;
  ck_assert(isnan(y[0]) && isnan(y[1]) && isnan(y[2]) && isnan(y[3]));
  ck_assert(isnan(y[4]) && isnan(y[5])); /* inf - inf */
  ten_free(&x), ten_free(&o[0]), ten_free(&o[1]);
  unbuild(&L);
}
END_TEST

/* ---- layer_norm ---------------------------------------------------------- */

static const char *LN =
    "kernel ln(x: f32[A, B, C] strided, w: f32[C], b: f32[C], w2: f32[B, C]) -> "
    "(f32[A, B, C], f32[A, B, C], f32[A, B, C], f32[A, B, C], f32[A, B, C]) {\n"
    "  return layer_norm(x, [C], w, b), layer_norm(x, [B, C]), layer_norm(x, C, weight=w), "
    "layer_norm(x, [C], bias=b, eps=0.5), layer_norm(x, [B, C], w2, eps=1e-3)\n"
    "}\n"
    "kernel lnt(d: f64[A, C], h: f16[A, C], hw: f16[C], b: bf16[A, C], bb: bf16[C]) -> "
    "(f64[A, C], f16[A, C], bf16[A, C], f64[A, C]) {\n"
    "  return layer_norm(d, [C]), layer_norm(h, [C], hw, hw), layer_norm(b, [C], bb, bb), "
    "layer_norm(d * 1000.0 + 5.0, [A, C])\n"
    "}\n";

START_TEST(layer_norm_weight_bias) {
  Lib L;
  build(&L, LN, "ln");
  int64_t shapes[3][3] = {{3, 4, 6}, {2, 1, 1}, {0, 2, 3}};
  for (int s = 0; s < 3; s++) {
    const int64_t *d = shapes[s];
    int64_t tr[3] = {d[1] * d[2], 1, d[1]}; /* B and C swapped in memory */
    Spec in[4] = {{DT_F32, 3, {d[0], d[1], d[2]}, s == 0 ? tr : NULL},
                  {DT_F32, 1, {d[2]}, NULL},
                  {DT_F32, 1, {d[2]}, NULL},
                  {DT_F32, 2, {d[1], d[2]}, NULL}};
    Spec out[5];
    for (int i = 0; i < 5; i++) out[i] = (Spec){DT_F32, 3, {d[0], d[1], d[2]}, NULL};
    run_case(&L, "ln", in, 4, out, 5);
  }
  unbuild(&L);
}
END_TEST

START_TEST(layer_norm_dtypes) {
  Lib L;
  build(&L, LN, "lnt");
  int64_t shapes[2][2] = {{4, 33}, {1, 1}};
  for (int s = 0; s < 2; s++) {
    int64_t a = shapes[s][0], c = shapes[s][1];
    Spec in[5] = {{DT_F64, 2, {a, c}, NULL}, {DT_F16, 2, {a, c}, NULL},
                  {DT_F16, 1, {c}, NULL}, {DT_BF16, 2, {a, c}, NULL},
                  {DT_BF16, 1, {c}, NULL}};
    Spec out[4] = {{DT_F64, 2, {a, c}, NULL}, {DT_F16, 2, {a, c}, NULL},
                   {DT_BF16, 2, {a, c}, NULL}, {DT_F64, 2, {a, c}, NULL}};
    run_case(&L, "lnt", in, 5, out, 4);
  }
  unbuild(&L);
}
END_TEST

/* ---- pools ----------------------------------------------------------------- */

static const char *POOL =
    "kernel pf(x: f32[N, C, H, W]) -> (f32[N, C, (H + 1)//2, (W + 1)//2], "
    "f32[N, C, (H + 1)//2, W + 1], f32[N, C, 2, 3], f32[N, C, 5, 1], f32[N, C, H, W]) {\n"
    "  return max_pool2d(x, 3, 2, 1), avg_pool2d(x, [3, 2], [2, 1], [1, 1]), "
    "adaptive_avg_pool2d(x, [2, 3]), adaptive_avg_pool2d(x, [5, 1]), max_pool2d(x, 1)\n"
    "}\n"
    "kernel pcl(x: f32[N, C, 6, 7] channels_last) -> (f32[N, C, 3, 3] channels_last, "
    "f32[N, C, 2, 3], f32[N, C, 1, 1]) {\n"
    "  return max_pool2d(x, 2), avg_pool2d(x, 3, padding=1, stride=3), adaptive_avg_pool2d(x, 1)\n"
    "}\n"
    "kernel pt(d: f64[2, 3, 5, 4], h: f16[3, 5, 4], b: bf16[1, 2, 5, 4]) -> "
    "(f64[2, 3, 2, 2], f16[3, 3, 3], bf16[1, 2, 3, 3], f64[2, 3, 3, 2]) {\n"
    "  return avg_pool2d(d, 2, 2), max_pool2d(h, [3, 2], [2, 2], [1, 1]), "
    "adaptive_avg_pool2d(b, 3), max_pool2d(d, 3, 2, 1)\n"
    "}\n"
    "kernel pi(a: i32[2, 3, 5, 5], u: u8[1, 2, 4, 4], l: i64[2, 2, 5, 5], s: i8[1, 1, 3, 3]) -> "
    "(i32[2, 3, 3, 3], u8[1, 2, 2, 2], i64[2, 2, 3, 3], i64[2, 2, 2, 5], i8[1, 1, 2, 2], "
    "i64[2, 2, 1, 1]) {\n"
    "  return max_pool2d(a, 3, 2, 1), max_pool2d(u, 2), avg_pool2d(l, 3, 2, 1), "
    "avg_pool2d(l, [2, 3], [3, 1], [1, 1]), max_pool2d(s, 2, 1), avg_pool2d(l, 5)\n"
    "}\n";

START_TEST(pools_float_symbolic) {
  Lib L;
  build(&L, POOL, "pf");
  int64_t shapes[4][4] = {{2, 3, 7, 6}, {1, 1, 1, 1}, {1, 2, 4, 9}, {0, 2, 5, 5}};
  for (int s = 0; s < 4; s++) {
    const int64_t *d = shapes[s];
    Spec in = {DT_F32, 4, {d[0], d[1], d[2], d[3]}, NULL};
    Spec out[5] = {{DT_F32, 4, {d[0], d[1], (d[2] + 1) / 2, (d[3] + 1) / 2}, NULL},
                   {DT_F32, 4, {d[0], d[1], (d[2] + 1) / 2, d[3] + 1}, NULL},
                   {DT_F32, 4, {d[0], d[1], 2, 3}, NULL},
                   {DT_F32, 4, {d[0], d[1], 5, 1}, NULL},
                   {DT_F32, 4, {d[0], d[1], d[2], d[3]}, NULL}};
    run_case(&L, "pf", &in, 1, out, 5);
  }
  unbuild(&L);
}
END_TEST

START_TEST(pools_channels_last) {
  Lib L;
  build(&L, POOL, "pcl");
  for (int n = 1; n <= 2; n++) {
    int64_t c = 3, st[4] = {6 * 7 * c, 1, 7 * c, c}, so[4] = {9 * c, 1, 3 * c, c};
    Spec in = {DT_F32, 4, {n, c, 6, 7}, st};
    Spec out[3] = {{DT_F32, 4, {n, c, 3, 3}, so}, {DT_F32, 4, {n, c, 2, 3}, NULL},
                   {DT_F32, 4, {n, c, 1, 1}, NULL}};
    run_case(&L, "pcl", &in, 1, out, 3);
  }
  unbuild(&L);
}
END_TEST

START_TEST(pools_dtypes) {
  Lib L;
  build(&L, POOL, "pt");
  Spec in[3] = {{DT_F64, 4, {2, 3, 5, 4}, NULL}, {DT_F16, 3, {3, 5, 4}, NULL},
                {DT_BF16, 4, {1, 2, 5, 4}, NULL}};
  Spec out[4] = {{DT_F64, 4, {2, 3, 2, 2}, NULL}, {DT_F16, 3, {3, 3, 3}, NULL},
                 {DT_BF16, 4, {1, 2, 3, 3}, NULL}, {DT_F64, 4, {2, 3, 3, 2}, NULL}};
  run_case(&L, "pt", in, 3, out, 4);
  unbuild(&L);
  build(&L, POOL, "pi");
  Spec ii[4] = {{DT_I32, 4, {2, 3, 5, 5}, NULL}, {DT_U8, 4, {1, 2, 4, 4}, NULL},
                {DT_I64, 4, {2, 2, 5, 5}, NULL}, {DT_I8, 4, {1, 1, 3, 3}, NULL}};
  Spec io[6] = {{DT_I32, 4, {2, 3, 3, 3}, NULL}, {DT_U8, 4, {1, 2, 2, 2}, NULL},
                {DT_I64, 4, {2, 2, 3, 3}, NULL}, {DT_I64, 4, {2, 2, 2, 5}, NULL},
                {DT_I8, 4, {1, 1, 2, 2}, NULL}, {DT_I64, 4, {2, 2, 1, 1}, NULL}};
  run_case(&L, "pi", ii, 4, io, 6);
  unbuild(&L);
}
END_TEST

/* Hand-checked: avg of {-7, 2, 3, 1} is -1/4, truncated to 0 (not -1);
 * with padding 1 and kernel 2 the corner windows of a 2x2 input hold one
 * element, and count_include_pad divides by 4: -7/4 -> -1.  Max pooling
 * (kernel 2, stride 1, padding 1) of all-negative values never sees a 0:
 * the 3x3 result's windows are the 1, 2 or 4 real elements under it. */
START_TEST(pools_by_hand) {
  Lib L;
  build(&L, "kernel h(x: i64[1, 1, 2, 2], y: f32[1, 1, 2, 2]) -> "
            "(i64[1, 1, 1, 1], i64[1, 1, 2, 2], f32[1, 1, 3, 3], f32[1, 1, 1, 1]) {\n"
            "  return avg_pool2d(x, 2), avg_pool2d(x, 2, 2, 1), max_pool2d(y, 2, 1, 1), "
            "adaptive_avg_pool2d(y, 1)\n}\n", "h");
  int64_t s[4] = {1, 1, 2, 2}, s1[4] = {1, 1, 1, 1};
  Ten in[2], out[4];
  ten(&in[0], DT_I64, 4, s, NULL, 0, false);
  ten(&in[1], DT_F32, 4, s, NULL, 0, false);
  int64_t xv[4] = {-7, 2, 3, 1};
  float yv[4] = {-1.5f, -2.5f, -3.5f, -0.5f};
  memcpy(in[0].store, xv, sizeof xv);
  memcpy(in[1].store, yv, sizeof yv);
  out_ten(&out[0], DT_I64, 4, s1);
  out_ten(&out[1], DT_I64, 4, s);
  int64_t s3[4] = {1, 1, 3, 3};
  out_ten(&out[2], DT_F32, 4, s3);
  out_ten(&out[3], DT_F32, 4, s1);
  run_and_compare(&L, "h", in, 2, out, 4, true);
  ck_assert_int_eq(((int64_t *)out[0].store)[0], 0);
  const int64_t *p = out[1].store;
  ck_assert(p[0] == -1 && p[1] == 0 && p[2] == 0 && p[3] == 0); /* -7/4, 2/4, 3/4, 1/4 */
  const float *m = out[2].store;
  float want[9] = {-1.5f, -1.5f, -2.5f, -1.5f, -0.5f, -0.5f, -3.5f, -0.5f, -0.5f};
  for (int i = 0; i < 9; i++) ck_assert_float_eq(m[i], want[i]);
  ck_assert(((float *)out[3].store)[0] == -2.0f);
  for (int i = 0; i < 2; i++) ten_free(&in[i]);
  for (int i = 0; i < 4; i++) ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

/* Operands that are views and expressions, results read by more ops. */
START_TEST(norm_pool_of_views_and_expressions) {
  Lib L;
  build(&L, "kernel mix(x: f32[A, B], y: f32[N, H, W, C]) -> (f32[B, A], f32[B, A], "
            "f32[N, C, H // 2, W // 2], f32[N, C, 1, 1]) {\n"
            "  s = softmax((x * 2.0).t(), 1)\n"
            "  return s * 3.0 + s.log(), layer_norm(x.t() + 1.0, [A]) * 2.0, "
            "max_pool2d(y.permute(0, 3, 1, 2).relu(), 2) + 1.0, "
            "adaptive_avg_pool2d(y.permute(0, 3, 1, 2), 1)\n}\n", "mix");
  Spec in[2] = {{DT_F32, 2, {5, 7}, NULL}, {DT_F32, 4, {2, 5, 4, 3}, NULL}};
  Spec out[4] = {{DT_F32, 2, {7, 5}, NULL}, {DT_F32, 2, {7, 5}, NULL},
                 {DT_F32, 4, {2, 3, 2, 2}, NULL}, {DT_F32, 4, {2, 3, 1, 1}, NULL}};
  run_case(&L, "mix", in, 2, out, 4);
  unbuild(&L);
}
END_TEST

/* NaN wins a max-pooling window, as in PyTorch. */
START_TEST(max_pool_nan) {
  Lib L;
  build(&L, "kernel mn(x: f32[1, 1, 2, 4]) -> f32[1, 1, 1, 2] {\n"
            "  return max_pool2d(x, 2)\n}\n", "mn");
  int64_t s[4] = {1, 1, 2, 4}, so[4] = {1, 1, 1, 2};
  Ten x, o;
  ten(&x, DT_F32, 4, s, NULL, 0, false);
  float v[8] = {1, 5, NAN, 0, 2, 3, 9, 1};
  memcpy(x.store, v, sizeof v);
  out_ten(&o, DT_F32, 4, so);
  run_and_compare(&L, "mn", &x, 1, &o, 1, true);
  ck_assert(((float *)o.store)[0] == 5.0f && isnan(((float *)o.store)[1]));
  ten_free(&x), ten_free(&o);
  unbuild(&L);
}
END_TEST

/* examples/conv_block.tdsl now stops at conv2d only (not max_pool2d), and
 * its pooling half compiles. */
START_TEST(conv_block_needs_only_conv) {
  char dir[] = "/tmp/tdsl_cgo_XXXXXX", cmd[1024], path[128];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(cmd, sizeof cmd, "%s %s/examples/conv_block.tdsl -o %s/cb.o --emit=obj > %s/err.txt 2>&1; "
           "grep -q \"op 'max_pool2d'\" %s/err.txt", TDSL_TDSLC, TDSL_SOURCE_DIR, dir, dir, dir);
  ck_assert_int_ne(sh(cmd), 0);
  snprintf(path, sizeof path, "%s/p.tdsl", dir);
  write_text(path, "kernel cb(y: f32[N, 16, 32, 32] channels_last) -> f32[N, 16, 16, 16] {\n"
                   "  return max_pool2d(relu(y), 2)\n}\n");
  snprintf(cmd, sizeof cmd, "%s %s -o %s/p.o", TDSL_TDSLC, path, dir);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  sh(cmd);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_ops");
  TCase *t = tcase_create("cpu");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, softmax_every_dim);
  tcase_add_test(t, softmax_dtypes);
  tcase_add_test(t, softmax_empty_int_and_bool);
  tcase_add_test(t, softmax_special_values);
  tcase_add_test(t, layer_norm_weight_bias);
  tcase_add_test(t, layer_norm_dtypes);
  tcase_add_test(t, pools_float_symbolic);
  tcase_add_test(t, pools_channels_last);
  tcase_add_test(t, pools_dtypes);
  tcase_add_test(t, pools_by_hand);
  tcase_add_test(t, norm_pool_of_views_and_expressions);
  tcase_add_test(t, max_pool_nan);
  tcase_add_test(t, conv_block_needs_only_conv);
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
