/* test_codegen_norms.c — the CPU backend's fast normalizations at -O2:
 * codegen/math.c's own f32 exp (its error against libm's expf over a sweep of
 * bit patterns and the special values, f16/bf16 and sigmoid through it),
 * softmax/log_softmax/layer_norm as row groups (loops.h LfNest.group:
 * last and non-last dims, sizes that do and do not split evenly across
 * threads, rows of -inf, NaN and +inf, symbolic sizes), and the
 * vectorized float reductions (sum/mean reassociated, amax/amin
 * propagating NaN).  Results are compared with the reference interpreter
 * and must be bitwise equal at 1, 2 and 3 threads; -O0 (one nest per
 * step, serial) is compared with the interpreter too.
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources, the front
 * end and interpreter, dlopen). */
#include <float.h>

#include "codegen_util.h"

/* ---- exp ------------------------------------------------------------------ */

static const char *EXP =
    "kernel ex(x: f32[N]) -> f32[N] {\n  return x.exp()\n}\n"
    "kernel exh(h: f16[N], b: bf16[N], x: f32[N]) -> (f16[N], bf16[N], f32[N], f32[N]) {\n"
    "  return h.exp(), b.exp(), x.sigmoid(), x.silu()\n}\n";

/* Distance in ulps of two non-negative, non-NaN floats. */
static int64_t ulps(float a, float b) {
  int32_t ia, ib;
  memcpy(&ia, &a, 4);
  memcpy(&ib, &b, 4);
  return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

/* Runs ex on n floats in x, checks each result against expf: NaN for
 * NaN, else within 2 ulps; returns the largest distance. */
static int64_t exp_batch(Lib *L, const float *x, int64_t n) {
  Ten in, out;
  int64_t shape[1] = {n};
  ten(&in, DT_F32, 1, shape, NULL, 0, false);
  memcpy(in.store, x, (size_t)n * 4);
  out_ten(&out, DT_F32, 1, shape);
  call_ok(L, "ex", &in, 1, &out, 1);
  const float *y = out.store;
  int64_t worst = 0;
  for (int64_t i = 0; i < n; i++) {
    float want = expf(x[i]);
    /* plain ifs: a passing ck_assert costs Check a write per call */
    if (isnan(want)) {
      if (!isnan(y[i])) ck_abort_msg("exp(%a) = %a, want NaN", x[i], y[i]);
      continue;
    }
    int64_t d = ulps(y[i], want);
    if (d > 2) ck_abort_msg("exp(%a) = %a, want %a (%lld ulps)", x[i], y[i], want, (long long)d);
    if (d > worst) worst = d;
  }
  ten_free(&in), ten_free(&out);
  return worst;
}

/* Every 101st f32 bit pattern (all signs, exponents and both ends of the
 * range), in batches large enough for the parallel, vectorized path. */
static void exp_sweep(Lib *L) {
  enum { BATCH = 1 << 20 };
  float *x = malloc(sizeof *x * BATCH);
  int64_t n = 0, worst = 0;
  for (uint64_t bits = 0; bits <= UINT32_MAX; bits += 101) {
    uint32_t u = (uint32_t)bits;
    memcpy(&x[n++], &u, 4);
    if (n == BATCH) {
      int64_t w = exp_batch(L, x, n);
      worst = w > worst ? w : worst;
      n = 0;
    }
  }
  if (n) {
    int64_t w = exp_batch(L, x, n);
    worst = w > worst ? w : worst;
  }
  ck_assert_int_le(worst, 2);
  free(x);
}

/* Special values exactly; the ends of the range; subnormal results. */
static void exp_special(Lib *L) {
  float x[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX,
               0x1.62e42ep6f /* largest finite result */, 0x1.62e430p6f /* overflows */,
               89.0f, 100.0f, -87.33654f /* about FLT_MIN */, -90.0f, -100.0f,
               -103.27893f /* 2^-149 */, -103.97208f, -104.0f, -110.0f, 1e-30f, -1e-30f,
               0x1p-149f, 1.0f, -1.0f, 0.5f, 10.0f, -10.0f};
  int64_t n = (int64_t)(sizeof x / sizeof x[0]);
  exp_batch(L, x, n);
  Ten in, out;
  ten(&in, DT_F32, 1, &n, NULL, 0, false);
  memcpy(in.store, x, sizeof x);
  out_ten(&out, DT_F32, 1, &n);
  call_ok(L, "ex", &in, 1, &out, 1);
  const float *y = out.store;
  ck_assert(y[0] == 1.0f && y[1] == 1.0f && y[2] == INFINITY && y[3] == 0.0f && !signbit(y[3]));
  ck_assert(isnan(y[4]) && isnan(y[5]) && y[6] == INFINITY && y[7] == 0.0f);
  ck_assert(isfinite(y[8]) && y[9] == INFINITY && y[10] == INFINITY && y[11] == INFINITY);
  ck_assert(y[17] == 0.0f && y[18] == 0.0f); /* deep underflow */
  ck_assert(y[13] > 0 && y[13] < FLT_MIN && y[14] > 0); /* subnormal results */
  ten_free(&in), ten_free(&out);
}

/* f16/bf16 exp compute in f32; sigmoid and silu build on exp: all
 * against the interpreter over [-2, 2] and a few larger magnitudes. */
static void exp_half_sigmoid(Lib *L) {
  int64_t s[1] = {70001};
  Ten in[3], out[4];
  ten(&in[0], DT_F16, 1, s, NULL, 0, false);
  ten(&in[1], DT_BF16, 1, s, NULL, 0, false);
  ten(&in[2], DT_F32, 1, s, NULL, 0, false);
  float *x = in[2].store;
  for (int i = 0; i < 1000; i++) x[i] = (float)(i - 500) * 0.25f;
  x[1000] = INFINITY, x[1001] = -INFINITY, x[1002] = NAN;
  out_ten(&out[0], DT_F16, 1, s);
  out_ten(&out[1], DT_BF16, 1, s);
  out_ten(&out[2], DT_F32, 1, s);
  out_ten(&out[3], DT_F32, 1, s);
  run_and_compare(L, "exh", in, 3, out, 4, false);
  const float *sg = out[2].store;
  ck_assert(sg[1000] == 1.0f && sg[1001] == 0.0f && isnan(sg[1002]));
  for (int i = 0; i < 3; i++) ten_free(&in[i]);
  for (int i = 0; i < 4; i++) ten_free(&out[i]);
}

START_TEST(exp_f32) {
  Lib L;
  build_flags(&L, EXP, NULL, "-O2");
  exp_special(&L);
  exp_half_sigmoid(&L);
  exp_sweep(&L);
  unbuild(&L);
}
END_TEST

/* ---- normalizations as row groups ------------------------------------------ */

static const char *NORMS =
    "kernel sm(x: f32[M, K]) -> (f32[M, K], f32[M, K]) {\n"
    "  return softmax(x, -1), log_softmax(x, 1)\n}\n"
    "kernel sm4(x: f32[N, C, H, W]) -> (f32[N, C, H, W], f32[N, C, H, W], f32[N, C, H, W], "
    "f32[N, C, H, W]) {\n"
    "  return softmax(x, 1), log_softmax(x, 2), softmax(x * 0.5 + 1.0, 3), softmax(x, 0)\n}\n"
    "kernel ln(x: f32[A, B, C], w: f32[B, C], b: f32[B, C], g: f32[C]) -> "
    "(f32[A, B, C], f32[A, B, C], f32[A, B, C]) {\n"
    "  return layer_norm(x, [B, C], w, b), layer_norm(x, [C], g), layer_norm(x, [A, B, C])\n}\n"
    "kernel red(x: f32[M, K]) -> (f32[M], f32[M], f32[M], f32[M], f32[K]) {\n"
    "  return x.sum(1), x.mean(-1), x.amax(1), x.amin(1), x.sum(0)\n}\n";

/* Row r of an [M, K] f32 tensor (row-major storage at offset 0). */
static float *row(Ten *x, int64_t r) { return (float *)x->store + r * x->stride[0]; }

/* Rows 0..4 of x: all -inf, one NaN, one +inf, two -inf among finite
 * values, values near the overflow of exp. */
static void special_rows(Ten *x, int64_t k) {
  for (int64_t j = 0; j < k; j++) row(x, 0)[j] = -INFINITY;
  row(x, 1)[k / 2] = NAN;
  row(x, 2)[k - 1] = INFINITY;
  row(x, 3)[0] = row(x, 3)[k - 1] = -INFINITY;
  for (int64_t j = 0; j < k; j++) row(x, 4)[j] = 80.0f + (float)(j % 13);
}

static void sm_case(Lib *L, int64_t m, int64_t k, bool special, bool threads) {
  int64_t s[2] = {m, k};
  Ten x, o[2];
  ten(&x, DT_F32, 2, s, NULL, 0, false);
  if (special) special_rows(&x, k);
  out_ten(&o[0], DT_F32, 2, s);
  out_ten(&o[1], DT_F32, 2, s);
  if (threads) threads_and_reference(L, "sm", &x, 1, o, 2, true);
  else run_and_compare(L, "sm", &x, 1, o, 2, true);
  if (special) {
    const float *y = o[0].store, *ly = o[1].store;
    ck_assert(isnan(y[0]) && isnan(y[k + k / 2]) && isnan(y[2 * k]) && isnan(ly[0]));
    ck_assert(y[3 * k] == 0.0f && ly[3 * k] == -INFINITY && y[3 * k + 1] > 0);
  }
  ten_free(&x), ten_free(&o[0]), ten_free(&o[1]);
}

/* Softmax over the last dim: parallel with rows that split unevenly over
 * 2 and 3 threads (257 rows), short and long rows (vector remainders),
 * special rows, and small serial cases; at -O2 and -O0. */
static void softmax_last_rows(Lib *L, bool threads) {
  sm_case(L, 257, 301, true, threads);
  sm_case(L, 4099, 9, true, threads);
  sm_case(L, 40, 2053, true, threads);
  sm_case(L, 5, 7, true, false);
  sm_case(L, 1, 1, false, false);
  sm_case(L, 3, 0, false, false);
  sm_case(L, 0, 4, false, false);
}

/* Softmax over non-last dims of [N, C, H, W] (groups sharing only the
 * loops before the dim; dim 0: no shared loop, plain nests), and over the
 * last dim of an inlined expression. */
static void softmax_inner_dims(Lib *L) {
  int64_t shapes[3][4] = {{3, 37, 21, 17}, {2, 3, 4, 5}, {1, 1, 1, 1}};
  for (int i = 0; i < 3; i++) {
    Ten x, o[4];
    ten(&x, DT_F32, 4, shapes[i], NULL, 0, false);
    if (i == 0) {
      float *v = x.store;
      v[5] = NAN, v[1000] = -INFINITY, v[2000] = INFINITY;
    }
    for (int j = 0; j < 4; j++) out_ten(&o[j], DT_F32, 4, shapes[i]);
    threads_and_reference(L, "sm4", &x, 1, o, 4, true);
    ten_free(&x);
    for (int j = 0; j < 4; j++) ten_free(&o[j]);
  }
}

/* layer_norm over the last one and two dims (groups) and over all dims
 * (no shared loop: plain nests). */
static void layer_norm_rows(Lib *L, bool threads) {
  int64_t shapes[3][3] = {{129, 7, 61}, {2, 3, 5}, {300, 1, 1}};
  for (int i = 0; i < 3; i++) {
    int64_t *s = shapes[i], sw[2] = {s[1], s[2]}, sg[1] = {s[2]};
    Ten in[4], o[3];
    ten(&in[0], DT_F32, 3, s, NULL, 0, false);
    ten(&in[1], DT_F32, 2, sw, NULL, 0, false);
    ten(&in[2], DT_F32, 2, sw, NULL, 0, false);
    ten(&in[3], DT_F32, 1, sg, NULL, 0, false);
    if (i == 0) {
      float *v = in[0].store;
      v[3] = NAN;
      for (int j = 0; j < 61; j++) v[61 * 10 + j] = 1e4f + (float)j; /* a large mean */
    }
    for (int j = 0; j < 3; j++) out_ten(&o[j], DT_F32, 3, s);
    if (threads) threads_and_reference(L, "ln", in, 4, o, 3, true);
    else run_and_compare(L, "ln", in, 4, o, 3, true);
    for (int j = 0; j < 4; j++) ten_free(&in[j]);
    for (int j = 0; j < 3; j++) ten_free(&o[j]);
  }
}

/* Rows of one repeated value normalize to exactly the bias (x - mean is
 * 0, as with PyTorch's Welford moments): the mean accumulates in f64, an
 * f32 sum of n copies of v not being n * v (found by test_random, seed
 * 5807: exp(4) repeated, off by 1e-3 after the 1/sqrt(eps) scaling). */
static void layer_norm_constant_rows(Lib *L) {
  static const float vals[] = {54.59815f, 0.1f, 1e5f, -3.3f};
  for (int64_t c = 1; c <= 67; c += 11) {
    int64_t s[3] = {4, 1, c}, sw[2] = {1, c}, sg[1] = {c};
    Ten in[4], o[3];
    ten(&in[0], DT_F32, 3, s, NULL, 0, false);
    ten(&in[1], DT_F32, 2, sw, NULL, 0, false);
    ten(&in[2], DT_F32, 2, sw, NULL, 0, false);
    ten(&in[3], DT_F32, 1, sg, NULL, 0, false);
    for (int64_t r = 0; r < 4; r++)
      for (int64_t j = 0; j < c; j++) ((float *)in[0].store)[r * c + j] = vals[r];
    for (int j = 0; j < 3; j++) out_ten(&o[j], DT_F32, 3, s);
    call_ok(L, "ln", in, 4, o, 3);
    for (int64_t r = 0; r < 4; r++)
      for (int64_t j = 0; j < c; j++) {
        float got = ((float *)o[0].store)[r * c + j], want = ((float *)in[2].store)[j];
        ck_assert_msg(got == want, "row of %g, C=%lld, element %lld: %.9g, want the bias %.9g",
                      (double)vals[r], (long long)c, (long long)j, (double)got, (double)want);
      }
    for (int j = 0; j < 4; j++) ten_free(&in[j]);
    for (int j = 0; j < 3; j++) ten_free(&o[j]);
  }
}

/* Reassociated sums and means, NaN-propagating amax/amin, over rows long
 * and short (vector remainders) and down columns. */
static void vector_reductions(Lib *L) {
  int64_t shapes[3][2] = {{257, 301}, {40, 2053}, {3, 5}};
  for (int i = 0; i < 3; i++) {
    int64_t m = shapes[i][0], k = shapes[i][1], sm[1] = {m}, sk[1] = {k};
    Ten x, o[5];
    ten(&x, DT_F32, 2, shapes[i], NULL, 0, false);
    row(&x, 1)[k - 1] = NAN;
    row(&x, 2)[0] = INFINITY;
    for (int j = 0; j < 4; j++) out_ten(&o[j], DT_F32, 1, sm);
    out_ten(&o[4], DT_F32, 1, sk);
    threads_and_reference(L, "red", &x, 1, o, 5, true);
    const float *mx = o[2].store, *mn = o[3].store;
    ck_assert(isnan(mx[1]) && isnan(mn[1]) && mx[2] == INFINITY && isfinite(mn[2]));
    ten_free(&x);
    for (int j = 0; j < 5; j++) ten_free(&o[j]);
  }
}

/* -O2: everything above, bitwise equal across thread counts. */
START_TEST(norms_o2) {
  Lib L;
  build_flags(&L, NORMS, NULL, "-O2");
  softmax_last_rows(&L, true);
  softmax_inner_dims(&L);
  layer_norm_rows(&L, true);
  layer_norm_constant_rows(&L);
  vector_reductions(&L);
  unbuild(&L);
}
END_TEST

/* -O0 keeps one serial nest per step: the same rows against the
 * interpreter. */
START_TEST(norms_o0) {
  Lib L;
  build_flags(&L, NORMS, NULL, "-O0");
  softmax_last_rows(&L, false);
  layer_norm_rows(&L, false);
  unbuild(&L);
}
END_TEST

/* Lines of `path` that start with `prefix` (grep -c). */
static int count_lines(const char *path, const char *prefix) {
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f)) n += !strncmp(line, prefix, strlen(prefix));
  fclose(f);
  return n;
}

/* A softmax over the last dim is one parallel loop at -O2 (its row
 * group; at most one more for a result copy) where three nests would
 * be three; -O0 runs its nests serially. */
START_TEST(softmax_is_one_parallel_loop) {
  char dir[] = "/tmp/tdsl_cgn_XXXXXX", path[128], ll[128], cmd[1024];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/s.tdsl", dir);
  snprintf(ll, sizeof ll, "%s/s.ll", dir);
  write_text(path, "kernel s(x: f32[M, K]) -> f32[M, K] {\n  return softmax(x, -1)\n}\n");
  for (int opt = 0; opt <= 2; opt += 2) {
    snprintf(cmd, sizeof cmd, "%s %s -O%d --emit=llvm -o %s/s.ll", TDSL_TDSLC, path, opt, dir);
    ck_assert_int_eq(sh(cmd), 0);
    int bodies = count_lines(ll, "define private void @s.nest");
    if (opt) ck_assert_msg(bodies >= 1 && bodies <= 2, "-O2: %d parallel loops", bodies);
    else ck_assert_int_eq(bodies, 0);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  sh(cmd);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_norms");
  TCase *t = tcase_create("cpu");
  tcase_set_timeout(t, 240);
  tcase_add_test(t, exp_f32);
  tcase_add_test(t, norms_o2);
  tcase_add_test(t, norms_o0);
  tcase_add_test(t, softmax_is_one_parallel_loop);
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
