/* test_codegen_epilogue.c — elementwise epilogues fused into matmul and
 * conv2d (pass fuse's "epilogue" decision, loops.h "Epilogues", the
 * gemm.c hook built by cpu/gemm_nest.c): bias + relu after a matmul at sizes that
 * are not multiples of the register tiles and with K split into several
 * K blocks (the GEMM accumulating in place into the result), batched
 * matmul times a per-batch scale, a residual tensor read at the output
 * index, casts to f16 / bf16 (the GEMM value in scratch, read back per
 * block) and to narrower integers, conv2d with a per-channel scale and
 * shift and relu in NCHW and channels-last (in place, through scratch,
 * with groups, into a result with run-time strides), an epilogue whose value is materialized (read again
 * later), a result with run-time strides, and a matmul with several
 * readers (no epilogue).  Each kernel is compiled with tdslc at -O2 for
 * the host and for --target=x86-64-v2, run through the C ABI on symbolic
 * sizes and compared with the reference interpreter; the report is
 * checked for the decisions.
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources). */
#include "codegen_util.h"

static const char *const TARGETS[] = {"-O2", "-O2 --target=x86-64-v2"};

/* ---- matmul --------------------------------------------------------------- */

static const char *MM =
    "kernel mbr(x: f32[M, K], w: f32[N, K], b: f32[N]) -> f32[M, N] {\n"
    "  return relu(x @ w.T + b)\n}\n"
    "kernel res(x: f32[M, K], w: f32[K, N], r: f32[M, N], s: f32[]) -> f32[M, N] {\n"
    "  return x @ w + r * s\n}\n"
    "kernel half(x: f32[M, K], w: f32[K, N], b: f32[N]) -> (f16[M, N]) {\n"
    "  return (x @ w + b).sigmoid().to(f16)\n}\n"
    "kernel bf(x: f32[M, K], w: f32[K, N]) -> bf16[M, N] {\n"
    "  return (x @ w).to(bf16)\n}\n";

START_TEST(matmul_bias_relu_residual_casts) {
  static const int64_t sz[][3] = {{1, 1, 1}, {7, 17, 33}, {100, 300, 70}, {33, 600, 17},
                                  {17, 0, 5}, {0, 5, 3}, {65, 40, 1}};
  ck_assert_int_eq(report_lines(MM, "fuse: epilogue:"), 4);
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MM, "mbr", TARGETS[t]);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      int64_t M = sz[i][0], K = sz[i][1], N = sz[i][2];
      int64_t sx[2] = {M, K}, sw[2] = {N, K}, swt[2] = {K, N}, sb[1] = {N}, so[2] = {M, N};
      Ten in[4], out[1];
      ten(&in[0], DT_F32, 2, sx, NULL, 3, false);
      ten(&in[1], DT_F32, 2, sw, NULL, 0, i % 2);
      ten(&in[2], DT_F32, 1, sb, NULL, 1, false);
      out_ten(&out[0], DT_F32, 2, so);
      run_and_compare_k(&L, "mbr", in, 3, out, 1, false, K);
      ten_free(&in[1]), ten_free(&out[0]);
      ten(&in[1], DT_F32, 2, swt, NULL, 0, false);
      out_ten(&out[0], DT_F16, 2, so);
      run_and_compare_k(&L, "half", in, 3, out, 1, false, K);
      ten_free(&out[0]);
      out_ten(&out[0], DT_BF16, 2, so);
      run_and_compare_k(&L, "bf", in, 2, out, 1, false, K);
      ten_free(&out[0]), ten_free(&in[2]);
      ten(&in[2], DT_F32, 2, so, NULL, 2, false);
      ten(&in[3], DT_F32, 0, NULL, NULL, 0, false);
      out_ten(&out[0], DT_F32, 2, so);
      run_and_compare_k(&L, "res", in, 4, out, 1, false, K);
      for (int j = 0; j < 4; j++) ten_free(&in[j]);
      ten_free(&out[0]);
    }
    unbuild(&L);
  }
}
END_TEST

/* Batched with a per-batch scale; an epilogue whose value is read again
 * (materialized, the epilogue stores it); a strided result (run-time
 * strides, in place); a matmul read twice (no epilogue). */
static const char *MMB =
    "kernel bs(a: f32[B, M, K], b: f32[B, K, N], s: f32[B, 1, 1]) -> f32[B, M, N] {\n"
    "  return (a @ b) * s - 0.5\n}\n"
    "kernel mat(x: f32[M, K], w: f32[K, N]) -> (f32[M], f32[M, N]) {\n"
    "  t = (x @ w).tanh().exp() * 2.0\n"
    "  return t.sum(1), t\n}\n"
    "kernel st(x: f32[M, K], w: f32[K, N]) -> f32[M, N] strided {\n"
    "  return (x @ w).abs()\n}\n"
    "kernel two(x: f32[M, K], w: f32[K, N]) -> (f32[M, N], f32[M, N]) {\n"
    "  y = x @ w\n"
    "  return y + 1.0, y.relu()\n}\n";

START_TEST(matmul_batched_materialized_strided_multi) {
  static const int64_t sz[][4] = {{2, 7, 17, 33}, {3, 40, 300, 20}, {1, 1, 1, 1}};
  ck_assert_int_eq(report_lines(MMB, "fuse: epilogue:"), 3);
  ck_assert_int_eq(report_lines(MMB, "read by 2 readers, no epilogue"), 1);
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MMB, "bs", TARGETS[t]);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      int64_t B = sz[i][0], M = sz[i][1], K = sz[i][2], N = sz[i][3];
      int64_t sa[3] = {B, M, K}, sb[3] = {B, K, N}, ss[3] = {B, 1, 1}, so[3] = {B, M, N};
      Ten in[3], out[2];
      ten(&in[0], DT_F32, 3, sa, NULL, 1, false);
      ten(&in[1], DT_F32, 3, sb, NULL, 0, false);
      ten(&in[2], DT_F32, 3, ss, NULL, 0, false);
      out_ten(&out[0], DT_F32, 3, so);
      run_and_compare_k(&L, "bs", in, 3, out, 1, false, K);
      for (int j = 0; j < 3; j++) ten_free(&in[j]);
      ten_free(&out[0]);
      int64_t sx[2] = {M, K}, sw[2] = {K, N}, sm[1] = {M}, s2[2] = {M, N};
      int64_t stt[2] = {1, M + 2}; /* column-major, padded */
      ten(&in[0], DT_F32, 2, sx, NULL, 0, false);
      ten(&in[1], DT_F32, 2, sw, NULL, 2, false);
      out_ten(&out[0], DT_F32, 1, sm);
      out_ten(&out[1], DT_F32, 2, s2);
      run_and_compare_k(&L, "mat", in, 2, out, 2, false, K * N);
      ten_free(&out[0]), ten_free(&out[1]);
      ten(&out[0], DT_F32, 2, s2, stt, 1, false);
      run_and_compare_k(&L, "st", in, 2, out, 1, false, K);
      ten_free(&out[0]);
      out_ten(&out[0], DT_F32, 2, s2);
      out_ten(&out[1], DT_F32, 2, s2);
      run_and_compare_k(&L, "two", in, 2, out, 2, false, K);
      for (int j = 0; j < 2; j++) ten_free(&in[j]), ten_free(&out[j]);
    }
    unbuild(&L);
  }
}
END_TEST

/* Integer GEMMs: i64 in place; i32 (accumulated in i64, wrapped to i32
 * before the epilogue) through scratch; casts to narrower integers. */
static const char *MMI =
    "kernel mi(a: i64[M, K], b: i64[K, N], c: i64[N], d: i32[M, K], e: i32[K, N]) -> "
    "(i64[M, N], i8[M, N], i16[M, N]) {\n"
    "  return (a @ b) * 3 + c, (a @ b).relu().to(i8), ((d @ e) + 7).to(i16)\n}\n";

START_TEST(matmul_integer) {
  static const int64_t sz[][3] = {{7, 17, 33}, {40, 300, 20}, {1, 1, 1}};
  ck_assert_int_eq(report_lines(MMI, "fuse: epilogue:"), 3);
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MMI, "mi", TARGETS[t]);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      int64_t M = sz[i][0], K = sz[i][1], N = sz[i][2];
      int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[1] = {N}, so[2] = {M, N};
      Ten in[5], out[3];
      ten(&in[0], DT_I64, 2, sa, NULL, 0, false);
      ten(&in[1], DT_I64, 2, sb, NULL, 1, false);
      ten(&in[2], DT_I64, 1, sc, NULL, 0, false);
      ten(&in[3], DT_I32, 2, sa, NULL, 0, false);
      ten(&in[4], DT_I32, 2, sb, NULL, 3, false);
      out_ten(&out[0], DT_I64, 2, so);
      out_ten(&out[1], DT_I8, 2, so);
      out_ten(&out[2], DT_I16, 2, so);
      run_and_compare(&L, "mi", in, 5, out, 3, false);
      for (int j = 0; j < 5; j++) ten_free(&in[j]);
      for (int j = 0; j < 3; j++) ten_free(&out[j]);
    }
    unbuild(&L);
  }
}
END_TEST

/* ---- conv2d --------------------------------------------------------------- */

static const char *CONV =
    "kernel cn(x: f32[N, C, H, W], w: f32[O, C, 3, 3], s: f32[O], t: f32[O]) -> "
    "f32[N, O, H, W] {\n"
    "  return relu(conv2d(x, w, padding=1) * s.view(1, O, 1, 1) + t[None, :, None, None])\n}\n"
    "kernel cc(x: f32[N, C, H, W] channels_last, w: f32[O, C, 3, 3], b: f32[O]) -> "
    "f32[N, O, H, W] channels_last {\n"
    "  return relu(conv2d(x, w, padding=1) + b.view(1, O, 1, 1))\n}\n"
    "kernel cx(x: f32[N, C, H, W] channels_last, w: f32[O, C, 3, 3], b: f32[O]) -> "
    "f16[N, O, (H - 1) // 2, (W - 1) // 2] {\n"
    "  return relu(conv2d(x, w, b, stride=2) + 1.0).to(f16)\n}\n"
    "kernel cg(x: f32[N, 4, H, W], w: f32[O, 2, 3, 3], b: f32[O]) -> f32[N, O, H, W] {\n"
    "  return conv2d(x, w, b, padding=1, groups=2).relu() * b.view(1, O, 1, 1)\n}\n"
    "kernel cs(x: f32[N, C, H, W], w: f32[O, C, 3, 3], b: f32[O]) -> f32[N, O, H, W] strided {\n"
    "  return (conv2d(x, w, padding=1) - b.view(1, O, 1, 1)).abs()\n}\n";

static void conv_case(Lib *L, const char *k, int64_t N, int64_t C, int64_t H, int64_t W,
                      int64_t O, int64_t wc, bool cl_in, const int64_t *so, bool cl_out,
                      DType od) {
  int64_t sx[4] = {N, C, H, W}, sw[4] = {O, wc, 3, 3}, sb[1] = {O};
  int64_t cx[4] = {C * H * W, 1, W * C, C};
  int64_t co[4] = {so[1] * so[2] * so[3], 1, so[3] * so[1], so[1]};
  Ten in[4], out[1];
  ten(&in[0], DT_F32, 4, sx, cl_in ? cx : NULL, 0, false);
  ten(&in[1], DT_F32, 4, sw, NULL, 1, false);
  ten(&in[2], DT_F32, 1, sb, NULL, 0, false);
  ten(&in[3], DT_F32, 1, sb, NULL, 2, false);
  if (cl_out) {
    ten(&out[0], od, 4, so, co, 0, false);
    memset(out[0].store, 0x5A, out[0].bytes);
  } else {
    out_ten(&out[0], od, 4, so);
  }
  run_and_compare_k(L, k, in, strcmp(k, "cn") ? 3 : 4, out, 1, false, wc * 9);
  for (int j = 0; j < 4; j++) ten_free(&in[j]);
  ten_free(&out[0]);
}

START_TEST(conv_scale_bias_relu_layouts) {
  static const int64_t sz[][5] = {{2, 3, 9, 11, 6}, {1, 8, 17, 5, 20}, {3, 4, 1, 1, 1}};
  ck_assert_int_eq(report_lines(CONV, "fuse: epilogue:"), 5);
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, CONV, "cn", TARGETS[t]);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      int64_t N = sz[i][0], C = sz[i][1], H = sz[i][2], W = sz[i][3], O = sz[i][4];
      int64_t so[4] = {N, O, H, W}, s2[4] = {N, O, 0, 0};
      conv_case(&L, "cn", N, C, H, W, O, C, false, so, false, DT_F32);
      conv_case(&L, "cc", N, C, H, W, O, C, true, so, true, DT_F32);
      conv_case(&L, "cs", N, C, H, W, O, C, false, so, true, DT_F32);
      if (H >= 3 && W >= 3) {
        s2[2] = (H - 3) / 2 + 1, s2[3] = (W - 3) / 2 + 1;
        conv_case(&L, "cx", N, C, H, W, O, C, true, s2, false, DT_F16);
      }
      int64_t Cg = 2 * 2, Og = 2 * ((O + 1) / 2);
      int64_t sg[4] = {N, Og, H, W};
      conv_case(&L, "cg", N, Cg, H, W, Og, 2, false, sg, false, DT_F32);
    }
    unbuild(&L);
  }
}
END_TEST

/* An allocator that fails from its n-th call on (spec §7.2: a kernel that
 * fails writes no output). */
typedef struct FailAfter {
  int calls, fail_from;
} FailAfter;

static void *fail_alloc(size_t bytes, size_t align, void *user) {
  FailAfter *f = user;
  if (f->calls++ >= f->fail_from) return NULL;
  return aligned_alloc(align, (bytes + align - 1) / align * align);
}

static void fail_free(void *p, void *user) {
  (void)user;
  free(p);
}

/* Results computed in the caller's outputs (plan-memory) and an epilogue
 * GEMM storing into an output: whichever allocation fails, the kernel
 * returns TDSL_E_NOMEM with both outputs untouched; once all succeed the
 * results are right. */
START_TEST(failed_allocation_writes_nothing) {
  Lib L;
  build_flags(&L, "kernel f(x: f32[40, 70], w: f32[70, 50], y: f32[9, 33]) -> (f32[9, 33], f32[40, 50], f16[40, 50]) {\n"
                  "  return softmax(y, 1), relu(x @ w) * 0.5, (x @ w + 1.0).to(f16)\n}\n",
              NULL, "-O2");
  void (*set_alloc)(void *(*)(size_t, size_t, void *), void (*)(void *, void *), void *) =
      (void (*)(void *(*)(size_t, size_t, void *), void (*)(void *, void *), void *))sym(&L, "tdsl_set_allocator");
  int64_t sx[2] = {40, 70}, sw[2] = {70, 50}, sy[2] = {9, 33}, so[2] = {40, 50};
  Ten in[3], out[3];
  ten(&in[0], DT_F32, 2, sx, NULL, 0, true);
  ten(&in[1], DT_F32, 2, sw, NULL, 0, true);
  ten(&in[2], DT_F32, 2, sy, NULL, 0, true);
  out_ten(&out[0], DT_F32, 2, sy);
  out_ten(&out[1], DT_F32, 2, so);
  out_ten(&out[2], DT_F16, 2, so);
  void *a[6] = {&in[0].t, &in[1].t, &in[2].t, &out[0].t, &out[1].t, &out[2].t};
  int n = 0, rc;
  do {
    FailAfter fa = {0, n};
    set_alloc(fail_alloc, fail_free, &fa);
    rc = call(sym(&L, "f"), a, 6);
    set_alloc(NULL, NULL, NULL);
    if (rc != 0) {
      ck_assert_int_eq(rc, TDSL_E_NOMEM);
      for (int i = 0; i < 3; i++) ck_assert_msg(untouched(&out[i]), "out%d written when allocation %d failed", i, n);
    }
  } while (rc != 0 && ++n < 64);
  ck_assert_int_eq(rc, 0);
  ck_assert_int_ge(n, 2); /* the statistics and at least one GEMM allocate */
  for (int i = 0; i < 3; i++) memset(out[i].store, 0x5A, out[i].bytes);
  run_and_compare_k(&L, "f", in, 3, out, 3, true, 70);
  for (int i = 0; i < 3; i++) ten_free(&in[i]), ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_epilogue");
  TCase *t = tcase_create("epilogue");
  tcase_set_timeout(t, 300);
  tcase_add_test(t, matmul_bias_relu_residual_casts);
  tcase_add_test(t, matmul_batched_materialized_strided_multi);
  tcase_add_test(t, matmul_integer);
  tcase_add_test(t, conv_scale_bias_relu_layouts);
  tcase_add_test(t, failed_allocation_writes_nothing);
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
