/* test_codegen_prologue.c — elementwise prologues fused into the operand
 * packing of matmul and conv2d (pass fuse's "prologue" decision, loops.h
 * "Prologues", gemm.c emit_pack_pro evaluating codegen/expr.c's expression):
 * relu / affine (per-column scale and shift) / cast (u8, f16) prologues on
 * A and on B, through transposed views of the producer, batched with both
 * operands' prologues, a prologue together with an epilogue (and in the
 * same module products without a prologue, sharing their block body), and 1 x 1
 * conv2d with a per-channel affine (+ relu) prologue on the input in NCHW
 * and channels-last with zero padding (which must stay 0: PyTorch pads
 * the producer's output, and affine(0) = shift != 0), with groups and
 * stride 2, and a prologue on the weight; the same producers of 3 x 3
 * convs' inputs stay materialized (fuse.c one_tap) and are checked too.  Every kernel has symbolic sizes, is
 * compiled with tdslc at -O2 for the host and for --target=x86-64-v2, run
 * through the C ABI and compared with the reference interpreter; the
 * report is checked for the decisions (and for a value read twice, which
 * stays materialized).
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources). */
#include "codegen_util.h"

static const char *const TARGETS[] = {"-O2", "-O2 --target=x86-64-v2"};

/* ---- matmul --------------------------------------------------------------- */

static const char *MM =
    "kernel ra(x: f32[M, K], w: f32[K, N]) -> f32[M, N] {\n"
    "  return relu(x) @ w\n}\n"
    "kernel af(x: f32[M, K], s: f32[K], t: f32[K], w: f32[N, K]) -> f32[M, N] {\n"
    "  return (x * s + t) @ w.T\n}\n"
    "kernel cu(x: f32[M, K], w: u8[K, N]) -> f32[M, N] {\n"
    "  return relu(x) @ w.to(f32)\n}\n" /* no cancellation: terms >= 0 */
    "kernel ch(x: f16[M, K], w: f32[K, N]) -> f32[M, N] {\n"
    "  return x.to(f32) @ w\n}\n"
    "kernel tv(x: f32[K, M], w: f32[N, K]) -> f32[M, N] {\n"
    "  return relu(x).T @ (w * 2.0 - 1.0).T\n}\n"
    "kernel pe(x: f32[M, K], w: f32[K, N]) -> f32[M, N] {\n"
    "  return relu((x - 0.25) @ w + 1.0)\n}\n"
    "kernel two(x: f32[M, K], w: f32[K, N]) -> (f32[M, N], f32[M, K]) {\n"
    "  r = relu(x)\n"
    "  return r @ w, r\n}\n"
    /* without a prologue, with and without an epilogue: pl, ep, ra and pe
     * run one block_body (gemm.c make_fns' body key), A packed by the
     * configuration's pack_a or the kernel's (X_PACKA), the hook called
     * only where X_EPIFN is set */
    "kernel pl(x: f32[M, K], w: f32[K, N]) -> f32[M, N] {\n"
    "  return x @ w\n}\n"
    "kernel ep(x: f32[M, K], w: f32[K, N]) -> f32[M, N] {\n"
    "  return relu(x @ w + 1.0)\n}\n";

START_TEST(matmul_prologues) {
  static const int64_t sz[][3] = {{1, 1, 1}, {7, 17, 33}, {100, 300, 70}, {33, 600, 17},
                                  {17, 0, 5}, {0, 5, 3}};
  /* ra, af (the add; the mul is fused into it), cu (both), ch, tv (both), pe */
  ck_assert_int_eq(report_lines(MM, "fuse: prologue:"), 8);
  ck_assert_int_eq(report_lines(MM, "fuse: epilogue:"), 2); /* pe, ep */
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MM, "ra", TARGETS[t]);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      int64_t M = sz[i][0], K = sz[i][1], N = sz[i][2];
      int64_t sx[2] = {M, K}, sxt[2] = {K, M}, sw[2] = {K, N}, swt[2] = {N, K}, sk[1] = {K};
      int64_t so[2] = {M, N};
      Ten in[4], out[2];
      ten(&in[0], DT_F32, 2, sx, NULL, 3, false);
      ten(&in[1], DT_F32, 2, sw, NULL, 0, i % 2);
      out_ten(&out[0], DT_F32, 2, so);
      run_and_compare_k(&L, "ra", in, 2, out, 1, false, K);
      run_and_compare_k(&L, "pe", in, 2, out, 1, false, K);
      run_and_compare_k(&L, "pl", in, 2, out, 1, false, K);
      run_and_compare_k(&L, "ep", in, 2, out, 1, false, K);
      out_ten(&out[1], DT_F32, 2, sx);
      run_and_compare_k(&L, "two", in, 2, out, 2, false, K);
      ten_free(&out[1]), ten_free(&in[1]);
      ten(&in[1], DT_F32, 1, sk, NULL, 0, false);
      ten(&in[2], DT_F32, 1, sk, NULL, 1, false);
      ten(&in[3], DT_F32, 2, swt, NULL, 0, false);
      run_and_compare_k(&L, "af", in, 4, out, 1, false, K);
      ten_free(&in[1]), ten_free(&in[2]);
      ten(&in[1], DT_U8, 2, sw, NULL, 0, false);
      run_and_compare_k(&L, "cu", in, 2, out, 1, false, K);
      ten_free(&in[0]), ten_free(&in[1]);
      ten(&in[0], DT_F16, 2, sx, NULL, 0, false);
      ten(&in[1], DT_F32, 2, sw, NULL, 0, false);
      run_and_compare_k(&L, "ch", in, 2, out, 1, false, K);
      ten_free(&in[0]), ten_free(&in[1]);
      ten(&in[0], DT_F32, 2, sxt, NULL, 0, false);
      in[1] = in[3];
      run_and_compare_k(&L, "tv", in, 2, out, 1, false, K);
      ten_free(&in[0]), ten_free(&in[1]);
      ten_free(&out[0]);
    }
    unbuild(&L);
  }
}
END_TEST

/* Batched, both operands with a prologue (one reading a per-batch
 * scale), K split into several K blocks. */
static const char *MMB =
    "kernel bb(a: f32[B, M, K], b: f32[B, K, N], s: f32[B, 1, 1]) -> f32[B, M, N] {\n"
    "  return (a * s).relu() @ (b - 1.0)\n}\n";

START_TEST(matmul_batched_prologues) {
  static const int64_t sz[][4] = {{3, 5, 7, 9}, {2, 40, 600, 33}, {1, 1, 1, 1}, {4, 0, 3, 2}};
  ck_assert_int_eq(report_lines(MMB, "fuse: prologue:"), 2);
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MMB, "bb", TARGETS[t]);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      int64_t B = sz[i][0], M = sz[i][1], K = sz[i][2], N = sz[i][3];
      int64_t sa[3] = {B, M, K}, sb[3] = {B, K, N}, ss[3] = {B, 1, 1}, so[3] = {B, M, N};
      Ten in[3], out[1];
      ten(&in[0], DT_F32, 3, sa, NULL, 0, false);
      ten(&in[1], DT_F32, 3, sb, NULL, 2, false);
      ten(&in[2], DT_F32, 3, ss, NULL, 0, false);
      out_ten(&out[0], DT_F32, 3, so);
      run_and_compare_k(&L, "bb", in, 3, out, 1, false, K);
      for (int j = 0; j < 3; j++) ten_free(&in[j]);
      ten_free(&out[0]);
    }
    unbuild(&L);
  }
}
END_TEST

/* Prologues on A that gemm_pack.c evaluates along K as vectors
 * (GemmPrologue.row, gemm_nest.c pro_row): transcendental (silu, gelu:
 * the math layer's exp and erf), two operands (silu(g) * u, LLaMA's gated
 * MLP), batched, a per-column vector and a per-row scalar (stride 0 along
 * K) and constants beside the row's loads; and one whose load is strided along K
 * (the scalar path).  K not a multiple of any vector width (the masked K
 * tail), M not a multiple of MR (rows past nvalid), at -O2, -O0 and for
 * the x86-64, x86-64-v3 and host vector widths. */
static const char *MMV =
    "kernel sg(g: f32[M, K], u: f32[M, K], w: f32[K, N]) -> f32[M, N] {\n"
    "  return (silu(g) * u) @ w\n}\n"
    "kernel ge(x: f32[M, K], b: f32[K], w: f32[N, K]) -> f32[M, N] {\n"
    "  return gelu(x + b) @ w.T\n}\n"
    "kernel th(x: f32[M, K], c: f32[M, 1], w: f32[K, N]) -> f32[M, N] {\n"
    "  return relu(x * c - 0.5) @ w\n}\n"
    "kernel sb(g: f32[B, M, K], u: f32[B, M, K], w: f32[K, N]) -> f32[B, M, N] {\n"
    "  return (silu(g) * u) @ w\n}\n"
    "kernel st(x: f32[K, M], w: f32[K, N]) -> f32[M, N] {\n"
    "  return sigmoid(x).T @ w\n}\n";

START_TEST(matmul_vector_prologues) {
  static const int64_t sz[][3] = {{1, 1, 1}, {7, 17, 33}, {100, 300, 70}, {33, 600, 17},
                                  {13, 16, 8}, {17, 0, 5}, {0, 5, 3}};
  static const char *const flags[] = {"-O2", "-O0", "-O2 --target=x86-64-v3",
                                      "-O2 --target=x86-64"};
  ck_assert_int_eq(report_lines(MMV, "fuse: prologue:"), 5);
  for (int t = 0; t < 4; t++) {
    Lib L;
    build_flags(&L, MMV, "sg", flags[t]);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      int64_t M = sz[i][0], K = sz[i][1], N = sz[i][2], B = 2;
      int64_t sx[2] = {M, K}, sxt[2] = {K, M}, sw[2] = {K, N}, swt[2] = {N, K}, sk[1] = {K};
      int64_t sc[2] = {M, 1}, so[2] = {M, N}, sbx[3] = {B, M, K}, sbo[3] = {B, M, N};
      Ten in[3], out[1];
      ten(&in[0], DT_F32, 2, sx, NULL, 0, false);
      ten(&in[1], DT_F32, 2, sx, NULL, 1, false);
      ten(&in[2], DT_F32, 2, sw, NULL, 0, i % 2);
      out_ten(&out[0], DT_F32, 2, so);
      run_and_compare_k(&L, "sg", in, 3, out, 1, false, K);
      ten_free(&in[1]);
      ten(&in[1], DT_F32, 2, sc, NULL, 0, false);
      run_and_compare_k(&L, "th", (Ten[]){in[0], in[1], in[2]}, 3, out, 1, false, K);
      ten_free(&in[1]), ten_free(&in[2]);
      ten(&in[1], DT_F32, 1, sk, NULL, 0, false);
      ten(&in[2], DT_F32, 2, swt, NULL, 0, false);
      run_and_compare_k(&L, "ge", in, 3, out, 1, false, K);
      for (int j = 0; j < 3; j++) ten_free(&in[j]);
      ten(&in[0], DT_F32, 2, sxt, NULL, 0, false);
      ten(&in[1], DT_F32, 2, sw, NULL, 0, false);
      run_and_compare_k(&L, "st", in, 2, out, 1, false, K);
      ten_free(&in[0]), ten_free(&out[0]);
      ten(&in[0], DT_F32, 3, sbx, NULL, 0, false);
      ten(&in[2], DT_F32, 3, sbx, NULL, 1, false);
      out_ten(&out[0], DT_F32, 3, sbo);
      run_and_compare_k(&L, "sb", (Ten[]){in[0], in[2], in[1]}, 3, out, 1, false, K);
      for (int j = 0; j < 3; j++) ten_free(&in[j]);
      ten_free(&out[0]);
    }
    unbuild(&L);
  }
}
END_TEST

/* ---- conv2d --------------------------------------------------------------- */

static const char *CONV =
    "kernel cn(x: f32[N, C, H, W], g: f32[C], b: f32[C], w: f32[O, C, 3, 3]) -> "
    "f32[N, O, H, W] {\n"
    "  return conv2d(relu(x * g.view(C, 1, 1) + b.view(C, 1, 1)), w, padding=1)\n}\n"
    "kernel ca(x: f32[N, C, H, W], g: f32[C], b: f32[C], w: f32[O, C, 3, 3]) -> "
    "f32[N, O, H, W] {\n"
    "  return conv2d(x * g.view(C, 1, 1) + b.view(C, 1, 1), w, padding=1)\n}\n"
    "kernel cc(x: f32[N, C, H, W] channels_last, g: f32[C], b: f32[C], w: f32[O, C, 3, 3]) -> "
    "f32[N, O, H, W] channels_last {\n"
    "  return conv2d(x * g.view(C, 1, 1) + b.view(C, 1, 1), w, padding=1)\n}\n"
    "kernel cs(x: f32[N, C, H, W], g: f32[C], b: f32[C], w: f32[O, C, 3, 3]) -> "
    "f32[N, O, (H + 1) // 2, (W + 1) // 2] {\n"
    "  return conv2d(relu(x * g.view(C, 1, 1) + b.view(C, 1, 1)), w, stride=2, padding=1)\n}\n"
    /* the weight's producer is materialized: a conv weight is a prologue
     * only where it widens (a prologue would make the conv an implicit
     * GEMM instead of the direct kernel) */
    "kernel cw(x: f32[N, C, H, W], g: f32[C], b: f32[C], w: f32[O, C, 3, 3]) -> "
    "f32[N, O, H, W] {\n"
    "  return conv2d(x, w * 0.5 - b.view(1, C, 1, 1), padding=1) + g.sum()\n}\n"
    "kernel cg(x: f32[N, 4, H, W], g: f32[4], b: f32[4], w: f32[O, 2, 3, 3]) -> "
    "f32[N, O, H, W] {\n"
    "  return conv2d(relu(x * g.view(4, 1, 1) + b.view(4, 1, 1)), w, padding=1, groups=2)\n}\n"
    /* 1 x 1 kernels: the input's producer is a prologue (3 x 3: materialized) */
    "kernel pn(x: f32[N, C, H, W], g: f32[C], b: f32[C], w: f32[O, C, 1, 1]) -> "
    "f32[N, O, H + 2, W + 2] {\n"
    "  return conv2d(relu(x * g.view(C, 1, 1) + b.view(C, 1, 1)), w, padding=1)\n}\n"
    "kernel pa(x: f32[N, C, H, W], g: f32[C], b: f32[C], w: f32[O, C, 1, 1]) -> "
    "f32[N, O, H + 2, W + 2] {\n"
    "  return conv2d(x * g.view(C, 1, 1) + b.view(C, 1, 1), w, padding=1)\n}\n"
    "kernel pc(x: f32[N, C, H, W] channels_last, g: f32[C], b: f32[C], w: f32[O, C, 1, 1]) -> "
    "f32[N, O, H, W] channels_last {\n"
    "  return conv2d(x * g.view(C, 1, 1) + b.view(C, 1, 1), w)\n}\n"
    "kernel ps(x: f32[N, C, H, W], g: f32[C], b: f32[C], w: f32[O, C, 1, 1]) -> "
    "f32[N, O, (H + 3) // 2, (W + 3) // 2] {\n"
    "  return conv2d(relu(x * g.view(C, 1, 1) + b.view(C, 1, 1)), w, stride=2, padding=1)\n}\n"
    "kernel pg(x: f32[N, 4, H, W], g: f32[4], b: f32[4], w: f32[O, 2, 1, 1]) -> "
    "f32[N, O, H, W] {\n"
    "  return conv2d(relu(x * g.view(4, 1, 1) + b.view(4, 1, 1)), w, groups=2)\n}\n";

/* Runs conv kernel k (kk x kk taps) with input channels C (wc per
 * group), output so. */
static void conv_case(Lib *L, const char *k, int kk, int64_t N, int64_t C, int64_t H, int64_t W,
                      int64_t O, int64_t wc, bool cl, const int64_t *so) {
  int64_t sx[4] = {N, C, H, W}, sw[4] = {O, wc, kk, kk}, sc[1] = {C};
  int64_t cx[4] = {C * H * W, 1, W * C, C};
  int64_t co[4] = {so[1] * so[2] * so[3], 1, so[3] * so[1], so[1]};
  Ten in[4], out[1];
  ten(&in[0], DT_F32, 4, sx, cl ? cx : NULL, 0, false);
  ten(&in[1], DT_F32, 1, sc, NULL, 0, false);
  ten(&in[2], DT_F32, 1, sc, NULL, 1, false);
  ten(&in[3], DT_F32, 4, sw, NULL, 1, false);
  if (cl) {
    ten(&out[0], DT_F32, 4, so, co, 0, false);
    memset(out[0].store, 0x5A, out[0].bytes);
  } else {
    out_ten(&out[0], DT_F32, 4, so);
  }
  run_and_compare_k(L, k, in, 4, out, 1, false, wc * kk * kk);
  for (int j = 0; j < 4; j++) ten_free(&in[j]);
  ten_free(&out[0]);
}

START_TEST(conv_affine_relu_prologues) {
  static const int64_t sz[][5] = {{2, 3, 9, 11, 6}, {1, 8, 17, 5, 20}, {3, 4, 1, 1, 1},
                                  {1, 16, 6, 6, 40}};
  ck_assert_int_eq(report_lines(CONV, "fuse: prologue:"), 5);
  ck_assert_int_eq(report_lines(CONV, "fuse: materialized: sub("), 1); /* cw's weight */
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, CONV, "cn", TARGETS[t]);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      int64_t N = sz[i][0], C = sz[i][1], H = sz[i][2], W = sz[i][3], O = sz[i][4];
      int64_t so[4] = {N, O, H, W}, s2[4] = {N, O, (H - 1) / 2 + 1, (W - 1) / 2 + 1};
      conv_case(&L, "cn", 3, N, C, H, W, O, C, false, so);
      conv_case(&L, "ca", 3, N, C, H, W, O, C, false, so);
      conv_case(&L, "cc", 3, N, C, H, W, O, C, true, so);
      conv_case(&L, "cs", 3, N, C, H, W, O, C, false, s2);
      conv_case(&L, "cw", 3, N, C, H, W, O, C, false, so);
      int64_t Og = 2 * ((O + 1) / 2), sg[4] = {N, Og, H, W};
      conv_case(&L, "cg", 3, N, 4, H, W, Og, 2, false, sg);
      int64_t sp[4] = {N, O, H + 2, W + 2}, sps[4] = {N, O, (H + 1) / 2 + 1, (W + 1) / 2 + 1};
      conv_case(&L, "pn", 1, N, C, H, W, O, C, false, sp);
      conv_case(&L, "pa", 1, N, C, H, W, O, C, false, sp);
      conv_case(&L, "pc", 1, N, C, H, W, O, C, true, so);
      conv_case(&L, "ps", 1, N, C, H, W, O, C, false, sps);
      conv_case(&L, "pg", 1, N, 4, H, W, Og, 2, false, sg);
    }
    unbuild(&L);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_prologue");
  TCase *t = tcase_create("prologue");
  tcase_set_timeout(t, 300);
  tcase_add_test(t, matmul_prologues);
  tcase_add_test(t, matmul_batched_prologues);
  tcase_add_test(t, matmul_vector_prologues);
  tcase_add_test(t, conv_affine_relu_prologues);
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
