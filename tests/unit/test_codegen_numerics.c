/* test_codegen_numerics.c — compiled numerics that no optimization level
 * may change (spec §9): float division is correctly rounded at -O0..-O3
 * (no reciprocal of a loop-invariant divisor: `(t / 60.0).round()` at 150
 * is 2 as in PyTorch), and float sums stay accurate over tens of millions
 * of elements (sum, mean, the statistics of softmax and layer_norm; a
 * row of 50M ones sums to exactly 50M, not 2^24).  Expected values are
 * computed here in C (division bit for bit, sums in double), not by the
 * interpreter, so the checks do not share code with the compiler.
 * var, std, var_mean, logsumexp and norm of 2^24 + 3 values far from 0
 * are checked against double sums, cumsum of 2^24 + 5 values (a row and
 * columns) against a double running sum, exactly.
 * sin and cos are checked at arguments up to 1e300 against libm, x ** k
 * for the constant exponents computed without pow against pow.
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources). */
#include "codegen_util.h"

static const char *OPTS[] = {"-O0", "-O1", "-O2", "-O3"};

/* ---- division -------------------------------------------------------------- */

static const char *DIV =
    "kernel q(t: f32[N], d: f32[], c: f32[3, 1]) -> (f32[N], f32[N], bool[N], f32[N], "
    "f32[3, N], f64[N], f32[N]) {\n"
    "  return (t / 60.0).round(), (t / 0.3).floor(), t / 60.0 == 2.5, t / d, t / c,\n"
    "         t.to(f64) / 7.0, t / 8.0\n"
    "}\n";

/* Dividends: the values of the issue (150, 390, 9) first, then integers
 * and random floats; n is not a multiple of any vector width. */
static void dividends(float *t, int64_t n) {
  static const float first[] = {150, 390, 9, 0, -150, 1e-30f, 3e38f};
  for (int64_t i = 0; i < n; i++)
    t[i] = i < 7 ? first[i] : i % 3 ? (float)(i - 500) : (float)(urand() * 2000 - 1000);
}

static void check_division(Lib *L) {
  enum { N = 1003 };
  int64_t n[1] = {N}, s0[1] = {0}, c2[2] = {3, 1}, o2[2] = {3, N};
  Ten in[3], out[7];
  ten(&in[0], DT_F32, 1, n, NULL, 0, false);
  ten(&in[1], DT_F32, 0, s0, NULL, 0, false);
  ten(&in[2], DT_F32, 2, c2, NULL, 0, false);
  float *t = in[0].store, d = 7.1f, cv[3] = {60, 0.3f, 1.7f};
  dividends(t, N);
  memcpy(in[1].store, &d, sizeof d);
  memcpy(in[2].store, cv, sizeof cv);
  DType od[7] = {DT_F32, DT_F32, DT_BOOL, DT_F32, DT_F32, DT_F64, DT_F32};
  for (int i = 0; i < 7; i++) out_ten(&out[i], od[i], i == 4 ? 2 : 1, i == 4 ? o2 : n);
  call_ok(L, "q", in, 3, out, 7);
  const float *r0 = out[0].store, *r1 = out[1].store, *r3 = out[3].store, *r4 = out[4].store,
              *r6 = out[6].store;
  const uint8_t *r2 = out[2].store;
  const double *r5 = out[5].store;
  for (int64_t i = 0; i < N; i++) {
    volatile float x = t[i];
    ck_assert_msg(r0[i] == nearbyintf(x / 60.0f), "(t / 60).round() at %g: %g", x, r0[i]);
    ck_assert_msg(r1[i] == floorf(x / 0.3f), "(t / 0.3).floor() at %g: %g", x, r1[i]);
    ck_assert_msg(r2[i] == (x / 60.0f == 2.5f), "t / 60 == 2.5 at %g", x);
    ck_assert_msg(r3[i] == x / d, "t / d at %g: %.9g", x, r3[i]);
    for (int k = 0; k < 3; k++)
      ck_assert_msg(r4[k * N + i] == x / cv[k], "t / %g at %g: %.9g", cv[k], x, r4[k * N + i]);
    ck_assert_msg(r5[i] == (double)x / 7.0, "t.to(f64) / 7 at %g", x);
    ck_assert_msg(r6[i] == x * 0.125f, "t / 8 at %g", x);
  }
  ck_assert(r0[0] == 2 && r0[1] == 6 && r1[2] == 29 && r2[0] == 1);
  for (int i = 0; i < 3; i++) ten_free(&in[i]);
  for (int i = 0; i < 7; i++) ten_free(&out[i]);
}

START_TEST(division_is_correctly_rounded) {
  Lib L;
  build_flags(&L, DIV, "q", OPTS[_i]);
  check_division(&L);
  unbuild(&L);
}
END_TEST

/* ---- long sums -------------------------------------------------------------- */

static const char *SUMS =
    "kernel s(x: f32[N] strided) -> (f32[], f32[]) {\n"
    "  return x.sum(), x.mean()\n"
    "}\n"
    "kernel rows(x: f32[R, C] strided) -> (f32[R], f32[R, 1]) {\n"
    "  return x.sum(1), x.mean(-1, keepdim=true)\n"
    "}\n"
    "kernel sq(x: f32[N]) -> (f32[], f32[]) {\n"
    "  return (x * x).mean(), x.sum(0)\n"
    "}\n"
    "kernel mse(a: f32[H, W], b: f32[H, W]) -> f32[] {\n"
    "  return ((a - b) ** 2).mean()\n"
    "}\n"
    "kernel norms(x: f32[1, C]) -> (f32[1, C], f32[1, C]) {\n"
    "  return softmax(x, -1), layer_norm(x, [C])\n"
    "}\n";

static float f32_at(const Ten *t, int64_t i) { return ((const float *)t->store)[i]; }

static void check_rel(const char *what, double got, double want, double rtol) {
  ck_assert_msg(fabs(got - want) <= rtol * fabs(want), "%s: got %.9g, want %.9g (rel %.3g)",
                what, got, want, fabs(got - want) / fabs(want));
}

/* A stride-0 parameter: 50M ones (exact: 50M) and 20M times 0.1. */
static void stride0_sums(Lib *L) {
  int64_t n[1] = {50000000}, z[1] = {0}, s0[1] = {0};
  Ten x, o[2];
  ten(&x, DT_F32, 1, n, z, 0, false);
  ((float *)x.store)[0] = 1;
  for (int i = 0; i < 2; i++) out_ten(&o[i], DT_F32, 0, s0);
  call_ok(L, "s", &x, 1, o, 2);
  ck_assert_msg(f32_at(&o[0], 0) == 5e7f, "sum of 50M ones: %.9g", f32_at(&o[0], 0));
  ck_assert_msg(f32_at(&o[1], 0) == 1.0f, "mean of 50M ones: %.9g", f32_at(&o[1], 0));
  x.shape[0] = 20000000;
  ((float *)x.store)[0] = 0.1f;
  call_ok(L, "s", &x, 1, o, 2);
  check_rel("sum of 20M x 0.1", f32_at(&o[0], 0), 2e7 * (double)0.1f, 1e-5);
  check_rel("mean of 20M x 0.1", f32_at(&o[1], 0), (double)0.1f, 1e-5);
  ten_free(&x);
  for (int i = 0; i < 2; i++) ten_free(&o[i]);
}

/* Rows of 20M ones (stride 0 in both dims) and their means. */
static void stride0_rows(Lib *L) {
  int64_t sh[2] = {3, 20000000}, z[2] = {0, 0}, r1[1] = {3}, r2[2] = {3, 1};
  Ten x, o[2];
  ten(&x, DT_F32, 2, sh, z, 0, false);
  ((float *)x.store)[0] = 1;
  out_ten(&o[0], DT_F32, 1, r1);
  out_ten(&o[1], DT_F32, 2, r2);
  call_ok(L, "rows", &x, 1, o, 2);
  for (int r = 0; r < 3; r++) {
    ck_assert_msg(f32_at(&o[0], r) == 2e7f, "row %d sum: %.9g", r, f32_at(&o[0], r));
    ck_assert_msg(f32_at(&o[1], r) == 1.0f, "row %d mean: %.9g", r, f32_at(&o[1], r));
  }
  ten_free(&x);
  for (int i = 0; i < 2; i++) ten_free(&o[i]);
}

/* 16M values in [0, 1): (x * x).mean() and x.sum(0) against double. */
static void dense_sums(Lib *L) {
  enum { N = 16000000 };
  int64_t n[1] = {N}, s0[1] = {0};
  Ten x, o[2];
  ten(&x, DT_F32, 1, n, NULL, 0, false);
  float *v = x.store;
  double sq = 0, s = 0;
  for (int64_t i = 0; i < N; i++) {
    v[i] = (float)urand();
    s += v[i], sq += (double)v[i] * v[i];
  }
  for (int i = 0; i < 2; i++) out_ten(&o[i], DT_F32, 0, s0);
  call_ok(L, "sq", &x, 1, o, 2);
  check_rel("(x * x).mean() over 16M", f32_at(&o[0], 0), sq / N, 1e-5);
  check_rel("x.sum(0) over 16M", f32_at(&o[1], 0), s, 1e-5);
  ten_free(&x);
  for (int i = 0; i < 2; i++) ten_free(&o[i]);
}

/* The mean squared error of two 1024 x 1024 maps. */
static void mse_maps(Lib *L) {
  int64_t sh[2] = {1024, 1024}, s0[1] = {0};
  Ten in[2], o;
  ten(&in[0], DT_F32, 2, sh, NULL, 0, false);
  ten(&in[1], DT_F32, 2, sh, NULL, 0, false);
  double want = 0;
  for (int64_t i = 0; i < 1024 * 1024; i++) {
    double e = (double)((float *)in[0].store)[i] - ((float *)in[1].store)[i];
    want += e * e;
  }
  out_ten(&o, DT_F32, 0, s0);
  call_ok(L, "mse", in, 2, &o, 1);
  check_rel("mse of 1024 x 1024", f32_at(&o, 0), want / (1024 * 1024), 1e-5);
  for (int i = 0; i < 2; i++) ten_free(&in[i]);
  ten_free(&o);
}

/* softmax of a row of 20M zeros is 1/20M everywhere; layer_norm of a
 * row alternating 0 and 2 (mean 1, variance 1) is +-1/sqrt(1 + 1e-5). */
static void long_norm_rows(Lib *L) {
  enum { C = 20000000 };
  int64_t sh[2] = {1, C};
  Ten x, o[2];
  ten(&x, DT_F32, 2, sh, NULL, 0, false);
  for (int i = 0; i < 2; i++) out_ten(&o[i], DT_F32, 2, sh);
  float *v = x.store;
  for (int64_t i = 0; i < C; i++) v[i] = 0;
  call_ok(L, "norms", &x, 1, o, 2);
  check_rel("softmax of 20M zeros", f32_at(&o[0], 0), 1.0 / C, 1e-4);
  check_rel("softmax of 20M zeros, last", f32_at(&o[0], C - 1), 1.0 / C, 1e-4);
  for (int64_t i = 0; i < C; i++) v[i] = i % 2 ? 2.0f : 0.0f;
  call_ok(L, "norms", &x, 1, o, 2);
  double y = 1 / sqrt(1 + 1e-5);
  check_rel("layer_norm of 0, 2, ... (first)", f32_at(&o[1], 0), -y, 1e-4);
  check_rel("layer_norm of 0, 2, ... (last)", f32_at(&o[1], C - 1), y, 1e-4);
  ten_free(&x);
  for (int i = 0; i < 2; i++) ten_free(&o[i]);
}

START_TEST(long_sums_are_accurate) {
  Lib L;
  build_flags(&L, SUMS, NULL, OPTS[_i]);
  stride0_sums(&L);
  stride0_rows(&L);
  dense_sums(&L);
  mse_maps(&L);
  long_norm_rows(&L);
  unbuild(&L);
}
END_TEST

/* ---- long sums split over threads -------------------------------------------
 * At -O1 and above a long reduction to few outputs splits into chunks of
 * 16^m cascade blocks (cpu/reduce_split.c) whose values enter the
 * combining cascade at level m: the result is the serial cascade's bit
 * for bit.  -O0 runs the cascade serially as written and -O1 does not
 * vectorize the block sums, so -O1 at 1, 2 and 3 threads must give -O0's
 * bits; at -O2 the split must give the bits of the nest's ordinary code
 * (rows of a stride-0 matrix: 33 outputs, too many to split, each the
 * same vector as the split 1-D sum).  Lengths around chunk boundaries, at
 * each chunk size m = 1, 2, 3, and past several cascade levels. */

static const char *SPLIT =
    "kernel s(x: f32[N] strided) -> (f32[], f32[]) {\n"
    "  return x.sum(), x.mean()\n"
    "}\n"
    "kernel m2(x: f32[H, W] strided) -> f32[] {\n"
    "  return (x * x).mean()\n"
    "}\n"
    "kernel rows(x: f32[R, C] strided) -> f32[R] {\n"
    "  return x.sum(1)\n"
    "}\n"
    "kernel cols(x: f32[R, C]) -> f32[C] {\n"
    "  return x.sum(0)\n"
    "}\n"
    "kernel d(x: f64[N]) -> f64[] {\n"
    "  return x.sum()\n"
    "}\n"
    "kernel c4(x: f32[R, 4] strided) -> (f32[4], f32[4]) {\n"
    "  return x.sum(0), (x * x).mean(0)\n"
    "}\n"
    "kernel c3(x: f32[R, 3] strided) -> f32[3] {\n"
    "  return x.sum(0)\n"
    "}\n"
    "kernel c16(x: f32[R, 16]) -> f32[16] {\n"
    "  return x.mean(0)\n"
    "}\n"
    "kernel c4d(x: f64[R, 4]) -> f64[4] {\n"
    "  return x.sum(0)\n"
    "}\n"
    "kernel sv(x: f32[N]) -> (f32[], f32[], f32[]) {\n"
    "  return x.sum(), x.mean(), ((x - 0.5) ** 2).mean()\n"
    "}\n"
    "kernel rv(x: f32[R, C]) -> (f32[R], f32[R]) {\n"
    "  return x.sum(1), ((x - 0.5) ** 2).mean(1)\n"
    "}\n";

/* Values of mixed sign and magnitude, so that every addition rounds. */
static void rounding_values(Ten *t, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double v = (urand() - 0.3) * (1 + 1000 * urand());
    if (t->h.dtype == DT_F64) ((double *)t->store)[i] = v;
    else ((float *)t->store)[i] = (float)v;
  }
}

/* Runs `name` of L0 (-O0, one thread) and of L1 (-O1) at 1, 2 and 3
 * threads: the same bytes. */
static void same_as_serial(Lib *L0, Lib *L1, const char *name, Ten *in, Ten *out, int nout) {
  Ten ref[2];
  set_threads(L0, 1);
  call_ok(L0, name, in, 1, out, nout);
  for (int i = 0; i < nout; i++) {
    ref[i] = out[i];
    ref[i].store = malloc(out[i].bytes);
    memcpy(ref[i].store, out[i].store, out[i].bytes);
  }
  for (int th = 1; th <= 3; th++) {
    set_threads(L1, th);
    for (int i = 0; i < nout; i++) memset(out[i].store, 0x5A, out[i].bytes);
    call_ok(L1, name, in, 1, out, nout);
    for (int i = 0; i < nout; i++)
      ck_assert_msg(!memcmp(out[i].store, ref[i].store, out[i].bytes),
                    "%s out%d at %d threads: %.9g, serial -O0 %.9g", name, i, th,
                    f32_at(&out[i], 0), f32_at(&ref[i], 0));
  }
  for (int i = 0; i < nout; i++) free(ref[i].store);
}

/* Columns of a tall, narrow matrix (cpu/reduce_split.c "columns": each
 * chunk of every column at once, a whole row a step): at -O1 and -O2
 * alike, at 1, 2 and 3 threads, -O0's bits (each column's own cascade,
 * its blocks summed in order).  Rows around blocks (512), groups of 4
 * blocks and the chunks' growth (m = 1 to 2: 2048 blocks of 4 columns,
 * 512 of 16, 2720 of 3); the 4- and 3-column inputs contiguous, a
 * transposed [w, R] buffer, columns 1 .. w of rows of 6 and every other
 * row of every other element. */
static void column_sums(Lib *L) {
  static const int64_t rows[] = {1000, 2048, 4 * 512 + 1, 65536, 65537, 8192 * 9 - 1,
                                 262145, 2720 * 512 + 7, 2048 * 512 + 1};
  for (size_t c = 0; c < sizeof rows / sizeof *rows; c++) {
    int64_t R = rows[c];
    for (int w = 3; w <= 4; w++) {
      int64_t sh[2] = {R, w}, ow[1] = {w};
      int64_t st[4][2] = {{w, 1}, {1, R}, {6, 1}, {4 * w, 2}}, off[4] = {0, 0, 1, 0};
      for (int lay = 0; lay < 4; lay++) {
        Ten x, o[2];
        ten(&x, DT_F32, 2, sh, st[lay], off[lay], false);
        rounding_values(&x, (int64_t)(x.bytes / 4));
        for (int i = 0; i < 2; i++) out_ten(&o[i], DT_F32, 1, ow);
        const char *k = w == 4 ? "c4" : "c3";
        same_as_serial(&L[0], &L[1], k, &x, o, w == 4 ? 2 : 1);
        same_as_serial(&L[0], &L[2], k, &x, o, w == 4 ? 2 : 1);
        ten_free(&x);
        for (int i = 0; i < 2; i++) ten_free(&o[i]);
      }
    }
    int64_t s16[2] = {R, 16}, o16[1] = {16}, sd[2] = {R, 4}, od[1] = {4};
    Ten x, o, xd, odd;
    ten(&x, DT_F32, 2, s16, NULL, 0, false);
    rounding_values(&x, R * 16);
    out_ten(&o, DT_F32, 1, o16);
    same_as_serial(&L[0], &L[1], "c16", &x, &o, 1);
    same_as_serial(&L[0], &L[2], "c16", &x, &o, 1);
    ten(&xd, DT_F64, 2, sd, NULL, 0, false);
    rounding_values(&xd, R * 4);
    out_ten(&odd, DT_F64, 1, od);
    same_as_serial(&L[0], &L[1], "c4d", &xd, &odd, 1);
    same_as_serial(&L[0], &L[2], "c4d", &xd, &odd, 1);
    ten_free(&x), ten_free(&o), ten_free(&xd), ten_free(&odd);
  }
}

/* -O2's full blocks of unit-stride f32 values as vectors (cpu/reduce.c
 * "a full block as vectors"; the 256-bit ISA's assembly has its
 * prefetches): sum, mean and a squared error of a vector at 1, 2 and 3
 * threads the same bytes, the same as a row of 3 (a split of rows) and,
 * up to 65537, of 33 (the ordinary code), and within 1e-5 of double
 * sums relative to the sum of magnitudes.  Lengths: partial blocks (the scalar loop) after
 * full ones, chunks of 16 and 256 blocks. */
static void vector_block_sums(Lib *L) {
  ck_assert_int_gt(asm_count(SPLIT, "-O2 --target=x86-64-v3 --kernel=sv", "prefetch"), 0);
  static const int64_t ns[] = {65536, 65537, 8192 * 9 - 1, 8192 * 512 + 8192 * 16 + 3, 3000001};
  for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
    int64_t N = ns[c], n[1] = {N}, s33[2] = {33, N}, s3[2] = {3, N}, r33[1] = {33}, r3[1] = {3};
    Ten x, o[3], x33, x3, o33[2], o3[2];
    ten(&x, DT_F32, 1, n, NULL, 0, false);
    rounding_values(&x, N);
    for (int i = 0; i < 3; i++) out_ten(&o[i], DT_F32, 0, NULL);
    same_at_threads(L, "sv", &x, 1, o, 3);
    const float *v = x.store;
    double s = 0, a = 0, q = 0, qa = 0;
    for (int64_t i = 0; i < N; i++) {
      double e = (double)((float)(v[i] - 0.5f)) * (float)(v[i] - 0.5f);
      s += v[i], a += fabs(v[i]), q += e, qa += fabs(e);
    }
    ck_assert_msg(fabs(f32_at(&o[0], 0) - s) <= 1e-5 * a, "sum of %lld: %.9g, want %.9g",
                  (long long)N, f32_at(&o[0], 0), s);
    ck_assert_msg(fabs(f32_at(&o[2], 0) - q / N) <= 1e-5 * qa / N, "mse of %lld: %.9g, want %.9g",
                  (long long)N, f32_at(&o[2], 0), q / N);
    if (N > 100000) s33[1] = 0; /* 33 long rows: too many bytes */
    ten(&x33, DT_F32, 2, s33, NULL, 0, false);
    ten(&x3, DT_F32, 2, s3, NULL, 0, false);
    if (s33[1]) memcpy((float *)x33.store + 32 * N, v, (size_t)N * 4);
    memcpy((float *)x3.store + 2 * N, v, (size_t)N * 4);
    for (int i = 0; i < 2; i++) out_ten(&o33[i], DT_F32, 1, r33), out_ten(&o3[i], DT_F32, 1, r3);
    set_threads(L, 2);
    call_ok(L, "rv", &x33, 1, o33, 2);
    call_ok(L, "rv", &x3, 1, o3, 2);
    for (int i = 0; i < 2; i++) {
      float want = f32_at(&o[2 * i], 0);
      ck_assert_msg((!s33[1] || f32_at(&o33[i], 32) == want) && f32_at(&o3[i], 2) == want,
                    "rows of %lld, out%d: %.9g (33 rows), %.9g (3 rows), vector %.9g",
                    (long long)N, i, f32_at(&o33[i], 32), f32_at(&o3[i], 2), want);
    }
    ten_free(&x), ten_free(&x33), ten_free(&x3);
    for (int i = 0; i < 3; i++) ten_free(&o[i]);
    for (int i = 0; i < 2; i++) ten_free(&o33[i]), ten_free(&o3[i]);
  }
}

START_TEST(split_sums_are_serial) {
  Lib L[3];
  for (int o = 0; o < 3; o++) build_flags(&L[o], SPLIT, NULL, OPTS[o]);
  /* 8192 elements are 16 blocks: m = 1 up to 512 chunks, m = 2 beyond */
  static const int64_t ns[] = {65536, 65537, 8192 * 9 - 1, 8192 * 9 + 1, 8192 * 512,
                               8192 * 512 + 1, 8192 * 512 + 8192 * 16 + 3, 9000011};
  for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
    int64_t n[1] = {ns[c]}, rs[2] = {33, ns[c]}, rst[2] = {0, 1}, r33[1] = {33};
    Ten x, o[2], xr, orr;
    ten(&x, DT_F32, 1, n, NULL, 0, false);
    rounding_values(&x, n[0]);
    for (int i = 0; i < 2; i++) out_ten(&o[i], DT_F32, 0, NULL);
    same_as_serial(&L[0], &L[1], "s", &x, o, 2);
    same_at_threads(&L[2], "s", &x, 1, o, 2);
    xr = x; /* the same vector as 33 rows */
    xr.t.ndim = xr.h.rank = 2;
    memcpy(xr.shape, rs, sizeof rs), memcpy(xr.stride, rst, sizeof rst);
    memcpy(xr.h.shape, rs, sizeof rs), memcpy(xr.h.stride, rst, sizeof rst);
    xr.t.shape = xr.shape, xr.t.strides = xr.stride;
    out_ten(&orr, DT_F32, 1, r33);
    call_ok(&L[2], "rows", &xr, 1, &orr, 1);
    ck_assert_msg(f32_at(&orr, 32) == f32_at(&o[0], 0), "-O2 split sum of %lld: %.9g, whole %.9g",
                  (long long)n[0], f32_at(&o[0], 0), f32_at(&orr, 32));
    ten_free(&x), ten_free(&orr);
    for (int i = 0; i < 2; i++) ten_free(&o[i]);
  }
  /* 48 lengths at random up to 600 chunks of 16 blocks (the chunks'
   * values in levels 1 to 3 and a partial chunk: a flush in another
   * order changes about one sum in six) */
  for (int c = 0; c < 48; c++) {
    int64_t n[1] = {65536 + (int64_t)(urand() * 8192 * 600)};
    Ten x, o[2];
    ten(&x, DT_F32, 1, n, NULL, 0, false);
    rounding_values(&x, n[0]);
    for (int i = 0; i < 2; i++) out_ten(&o[i], DT_F32, 0, NULL);
    same_as_serial(&L[0], &L[1], "s", &x, o, 2);
    ten_free(&x);
    for (int i = 0; i < 2; i++) ten_free(&o[i]);
  }
  /* f64; 16^4 blocks and more: levels 0 to 4 of the cascade, m = 2 */
  int64_t nd[1] = {65536 * 512 + 12345};
  Ten xd, od;
  ten(&xd, DT_F64, 1, nd, NULL, 0, false);
  rounding_values(&xd, nd[0]);
  out_ten(&od, DT_F64, 0, NULL);
  same_as_serial(&L[0], &L[1], "d", &xd, &od, 1);
  same_at_threads(&L[2], "d", &xd, 1, &od, 1);
  ten_free(&xd), ten_free(&od);
  /* 70000 rows of 1100 (3 blocks, the last partial) repeating one row:
   * 210000 blocks, chunks of 16^3 */
  int64_t hw[2] = {70000, 1100}, hws[2] = {0, 1};
  Ten xm, om;
  ten(&xm, DT_F32, 2, hw, hws, 0, false);
  rounding_values(&xm, 1100);
  out_ten(&om, DT_F32, 0, NULL);
  same_as_serial(&L[0], &L[1], "m2", &xm, &om, 1);
  same_at_threads(&L[2], "m2", &xm, 1, &om, 1);
  ten_free(&xm), ten_free(&om);
  /* a few columns and a few rows */
  static const int64_t rc[][2] = {{70001, 3}, {2, 8192 * 40 + 5}};
  for (size_t c = 0; c < 2; c++) {
    int64_t oc[1] = {rc[c][1]}, orow[1] = {rc[c][0]};
    Ten xc, oo;
    ten(&xc, DT_F32, 2, rc[c], NULL, 0, false);
    rounding_values(&xc, rc[c][0] * rc[c][1]);
    out_ten(&oo, DT_F32, 1, c ? orow : oc);
    same_as_serial(&L[0], &L[1], c ? "rows" : "cols", &xc, &oo, 1);
    same_at_threads(&L[2], c ? "rows" : "cols", &xc, 1, &oo, 1);
    ten_free(&xc), ten_free(&oo);
  }
  column_sums(L);
  vector_block_sums(&L[2]);
  for (int o = 0; o < 3; o++) unbuild(&L[o]);
}
END_TEST

/* ---- statistics over long rows ---------------------------------------------- */

static const char *STATS =
    "kernel st(x: f32[N]) -> (f32[], f32[], f32[], f32[], f32[]) {\n"
    "  vm = var_mean(x)\n"
    "  return x.var(), x.std(correction=0), logsumexp(x, 0), x.norm(), vm[1]\n"
    "}\n";

/* 2^24 + 3 values 1e4 + [0, 1): the two-pass variance of values far from
 * 0, logsumexp and the 2-norm against double sums. */
START_TEST(long_stats_are_accurate) {
  enum { N = (1 << 24) + 3 };
  Lib L;
  build_flags(&L, STATS, NULL, OPTS[_i]);
  int64_t n[1] = {N}, s0[1] = {0};
  Ten x, o[5];
  ten(&x, DT_F32, 1, n, NULL, 0, false);
  float *v = x.store;
  double s = 0, mx = -INFINITY;
  for (int64_t i = 0; i < N; i++) {
    v[i] = (float)(1e4 + urand());
    s += v[i];
    mx = fmax(mx, v[i]);
  }
  double mean = s / N, m2 = 0, sq = 0, se = 0;
  for (int64_t i = 0; i < N; i++) {
    m2 += (v[i] - mean) * (v[i] - mean);
    sq += (double)v[i] * v[i];
    se += exp(v[i] - mx);
  }
  for (int i = 0; i < 5; i++) out_ten(&o[i], DT_F32, 0, s0);
  call_ok(&L, "st", &x, 1, o, 5);
  check_rel("var of 2^24 + 3", f32_at(&o[0], 0), m2 / (N - 1), 1e-5);
  check_rel("std(correction=0) of 2^24 + 3", f32_at(&o[1], 0), sqrt(m2 / N), 1e-5);
  check_rel("logsumexp of 2^24 + 3", f32_at(&o[2], 0), log(se) + mx, 1e-5);
  check_rel("norm of 2^24 + 3", f32_at(&o[3], 0), sqrt(sq), 1e-5);
  check_rel("var_mean's mean of 2^24 + 3", f32_at(&o[4], 0), mean, 1e-6);
  ten_free(&x);
  for (int i = 0; i < 5; i++) ten_free(&o[i]);
  unbuild(&L);
}
END_TEST

/* ---- scans over long rows and columns ---------------------------------------- */

static const char *SCANS =
    "kernel cs(x: f32[N], y: f32[R, C]) -> (f32[N], f32[R, C], f64[N]) {\n"
    "  return x.cumsum(0), y.cumsum(0), x.to(f64).cumsum(0)\n"
    "}\n";

/* cumsum of 2^24 + 5 values in [0, 1) along a row, and down 9 columns of
 * 2^20 + 1 (one block of adjacent columns on the CPU, vectorized):
 * each element is the running sum in double rounded once, as PyTorch's
 * CPU kernel accumulates f32 in double, so they equal a double reference
 * exactly (where a running f32 sum would be off by 2^-24 relative per
 * step). */
START_TEST(long_scans_are_exact) {
  enum { N = (1 << 24) + 5, R = (1 << 20) + 1, C = 9 };
  Lib L;
  build_flags(&L, SCANS, NULL, OPTS[_i]);
  int64_t n[1] = {N}, rc[2] = {R, C};
  Ten in[2], o[3];
  ten(&in[0], DT_F32, 1, n, NULL, 0, false);
  ten(&in[1], DT_F32, 2, rc, NULL, 0, false);
  float *x = in[0].store, *y = in[1].store;
  for (int64_t i = 0; i < N; i++) x[i] = (float)urand();
  for (int64_t i = 0; i < (int64_t)R * C; i++) y[i] = (float)urand();
  out_ten(&o[0], DT_F32, 1, n);
  out_ten(&o[1], DT_F32, 2, rc);
  out_ten(&o[2], DT_F64, 1, n);
  call_ok(&L, "cs", in, 2, o, 3);
  const float *r0 = o[0].store, *r1 = o[1].store;
  const double *r2 = o[2].store;
  double s = 0;
  for (int64_t i = 0; i < N; i++) {
    s += x[i];
    if (r0[i] != (float)s || r2[i] != s)
      ck_abort_msg("%s: cumsum of %lld values at %lld: %.9g / %.17g, want %.17g", OPTS[_i],
                   (long long)N, (long long)i, r0[i], r2[i], s);
  }
  for (int j = 0; j < C; j++) {
    double t = 0;
    for (int64_t i = 0; i < R; i++) {
      t += y[i * C + j];
      if (r1[i * C + j] != (float)t)
        ck_abort_msg("%s: cumsum down column %d at %lld: %.9g, want %.17g", OPTS[_i], j,
                     (long long)i, r1[i * C + j], t);
    }
  }
  for (int i = 0; i < 2; i++) ten_free(&in[i]);
  for (int i = 0; i < 3; i++) ten_free(&o[i]);
  unbuild(&L);
}
END_TEST

/* ---- trigonometry at large arguments ---------------------------------------- */

static const char *TRIG =
    "kernel t(x: f32[N], d: f64[N]) -> (f32[N], f32[N], f64[N], f64[N]) {\n"
    "  return x.sin(), x.cos(), d.sin(), d.cos()\n"
    "}\n";

/* sin and cos reduce every argument exactly, as PyTorch's do: 1e9,
 * 3e38 and 1e300 included (within spec §9 of libm's values; 1e300 is
 * inf in f32, whose sine is NaN). */
START_TEST(trig_large_arguments) {
  Lib L;
  build_flags(&L, TRIG, "t", OPTS[_i]);
  static const double xs[] = {0.5, 3.0, 1e5, 2.2e8, 1e9, 123456789.0, 3e38, 1e300, -7e12};
  enum { N = sizeof xs / sizeof xs[0] };
  int64_t n[1] = {N};
  Ten in[2], out[4];
  ten(&in[0], DT_F32, 1, n, NULL, 0, false);
  ten(&in[1], DT_F64, 1, n, NULL, 0, false);
  for (int i = 0; i < N; i++) {
    ((float *)in[0].store)[i] = (float)xs[i];
    ((double *)in[1].store)[i] = xs[i];
  }
  for (int i = 0; i < 4; i++) out_ten(&out[i], i < 2 ? DT_F32 : DT_F64, 1, n);
  call_ok(&L, "t", in, 2, out, 4);
  for (int i = 0; i < N; i++) {
    double xf = (float)xs[i];
    double want[4] = {sin(xf), cos(xf), sin(xs[i]), cos(xs[i])};
    double tol[4] = {1e-6, 1e-6, 1e-12, 1e-12};
    for (int k = 0; k < 4; k++) {
      double got = k < 2 ? ((float *)out[k].store)[i] : ((double *)out[k].store)[i];
      ck_assert_msg((isnan(got) && isnan(want[k])) ||
                        fabs(got - want[k]) <= tol[k] + 1e-5 * fabs(want[k]),
                    "%s(%g) (f%d): got %.17g, want %.17g", k % 2 ? "cos" : "sin", xs[i],
                    k < 2 ? 32 : 64, got, want[k]);
    }
  }
  for (int i = 0; i < 2; i++) ten_free(&in[i]);
  for (int i = 0; i < 4; i++) ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

/* ---- constant exponents ------------------------------------------------------
 * x ** k for the exponents computed without pow (1, 2, 3, -1, -2, 0.5,
 * -0.5; fast at -O1+, where the exponent is a constant in the loop):
 * within 1 ulp of pow (in double, rounded to f32) at every level, with
 * C's special values exactly (pow(-0, 0.5) = +0 and pow(-inf, 0.5) =
 * +inf, not sqrt's -0 and NaN), and 1, 2 and -1 bit for bit. */
static const char *POW =
    "kernel p(x: f32[N]) -> (f32[N], f32[N], f32[N], f32[N], f32[N], f32[N], f32[N]) {\n"
    "  return x ** 1, x ** 2, x ** 3, x ** -1, x ** -2, x ** 0.5, x ** -0.5\n"
    "}\n";

static bool within_ulp(float got, float want) {
  if (isnan(want)) return isnan(got);
  if (isinf(want) || want == 0) return got == want && signbit(got) == signbit(want);
  return fabsf(got - want) <= nextafterf(fabsf(want), INFINITY) - fabsf(want);
}

START_TEST(pow_constant_exponents) {
  Lib L;
  build_flags(&L, POW, "p", OPTS[_i]);
  enum { N = 1001 };
  static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -2.0f, 1.0f,
                                  -1.0f, 1e-30f, 3e38f, 1e-45f, 0.1f};
  static const float ks[7] = {1, 2, 3, -1, -2, 0.5f, -0.5f};
  int64_t n[1] = {N};
  Ten in, out[7];
  ten(&in, DT_F32, 1, n, NULL, 0, false);
  float *x = in.store;
  for (int64_t i = 0; i < N; i++)
    x[i] = i < 12 ? special[i] : (float)((urand() - 0.5) * pow(10, (int)(i % 21) - 10));
  for (int k = 0; k < 7; k++) out_ten(&out[k], DT_F32, 1, n);
  call_ok(&L, "p", &in, 1, out, 7);
  for (int k = 0; k < 7; k++)
    for (int64_t i = 0; i < N; i++) {
      float got = ((float *)out[k].store)[i], want = (float)pow(x[i], ks[k]);
      bool exact = ks[k] == 1 || ks[k] == 2 || ks[k] == -1;
      ck_assert_msg(exact ? (isnan(want) ? isnan(got) : memcmp(&got, &want, 4) == 0)
                          : within_ulp(got, want),
                    "%s: %a ** %g = %a, want %a", OPTS[_i], x[i], ks[k], got, want);
    }
  ten_free(&in);
  for (int k = 0; k < 7; k++) ten_free(&out[k]);
  unbuild(&L);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_numerics");
  TCase *t = tcase_create("cpu");
  tcase_set_timeout(t, 300);
  tcase_add_loop_test(t, division_is_correctly_rounded, 0, 4);
  tcase_add_loop_test(t, long_sums_are_accurate, 0, 4);
  tcase_add_test(t, split_sums_are_serial);
  tcase_add_loop_test(t, long_stats_are_accurate, 0, 4);
  tcase_add_loop_test(t, long_scans_are_exact, 0, 4);
  tcase_add_loop_test(t, trig_large_arguments, 0, 4);
  tcase_add_loop_test(t, pow_constant_exponents, 0, 4);
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
