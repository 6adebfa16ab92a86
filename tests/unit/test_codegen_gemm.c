/* test_codegen_gemm.c — the CPU backend's packed GEMM (cpu/gemm.c):
 * matmul in every numeric dtype family (f32, f64, f16, bf16, i32, i64)
 * at sizes that are not multiples of the register tiles (1, 7, 17, 33,
 * 100, and K > the K block so partial sums accumulate; the same bits at
 * 1 to 4 threads across the parallel splits), K = 0, 1-D, 2-D
 * and batched operands with broadcast (stride 0) batch dims, transposed,
 * strided and sliced operands; conv2d with stride, padding, dilation,
 * groups (incl. depthwise), bias, 1x1 / 3x3 / 7x7 kernels, NCHW,
 * channels-last and unbatched inputs, in f32, f64, f16 and i64; the small
 * path (M or N up to 32, cpu/gemm_small.c) in both its forms, also
 * with only the forms static shapes allow; a module
 * built whole (light and full parts linked back, TDSL_JOBS=1).  Each
 * kernel is compiled with tdslc for the host (AVX-512 tiles here) and
 * for --target=x86-64-v2 (SSE tiles), run through the C ABI and compared
 * with the reference interpreter.  Float tolerances grow with K
 * (codegen_util.h's tolerance(): the interpreter accumulates in double,
 * the backend in f32, spec §9).
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources). */
#include "codegen_util.h"

static const char *const TARGETS[] = {"", "--target=x86-64-v2"};

/* ---- matmul --------------------------------------------------------------- */

static const char *MM =
    "kernel mm(a: f32[M, K], b: f32[K, N]) -> f32[M, N] { return a @ b }\n";

/* Runs MM's kernel on each M x K x N of sz against the interpreter
 * (a B transposed in storage at odd i). */
static void mm_sizes(Lib *L, const int64_t (*sz)[3], size_t n) {
  for (size_t i = 0; i < n; i++) {
    int64_t sa[2] = {sz[i][0], sz[i][1]}, sb[2] = {sz[i][1], sz[i][2]};
    int64_t so[2] = {sz[i][0], sz[i][2]};
    Ten in[2], out[1];
    ten(&in[0], DT_F32, 2, sa, NULL, 3, false);
    ten(&in[1], DT_F32, 2, sb, NULL, 0, i % 2);
    out_ten(&out[0], DT_F32, 2, so);
    run_and_compare_k(L, "mm", in, 2, out, 1, false, sz[i][1]);
    ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]);
  }
}

START_TEST(matmul_f32_sizes) {
  static const int64_t sz[][3] = {{1, 1, 1}, {7, 17, 33}, {100, 33, 7}, {33, 100, 17},
                                  {17, 0, 5}, {65, 300, 70}, {1, 40, 100}, {100, 7, 1},
                                  {0, 5, 3}, {4, 5, 0}};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MM, "mm", TARGETS[t]);
    mm_sizes(&L, sz, sizeof sz / sizeof sz[0]);
    unbuild(&L);
  }
}
END_TEST

/* The parallel split (gemm.c work_split) depends on the thread count
 * and on MC (from the cache sizes: 96 to a few hundred rows): row blocks
 * rounded up to a multiple of T (M = 600, 1100), T row blocks under MC
 * rows (M = 200, 600), or column chunks (M = 40 at 4 threads); M = 20
 * and 13 take the small path (split over columns); odd K blocks (301 = 256 + 45, 513 = 2 * 256 + 1) take the
 * micro-kernel's single-step tail.  At 1 to 4 threads the results must
 * be bitwise equal, and within tolerance of the interpreter. */
START_TEST(matmul_work_split) {
  static const int64_t sz[][3] = {{600, 301, 150}, {20, 513, 700}, {13, 3, 40}, {40, 513, 700},
                                  {200, 301, 150}, {1100, 40, 30}};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MM, "mm", TARGETS[t]);
    void (*threads)(int) = (void (*)(int))sym(&L, "tdsl_set_num_threads");
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      int64_t sa[2] = {sz[i][0], sz[i][1]}, sb[2] = {sz[i][1], sz[i][2]};
      int64_t so[2] = {sz[i][0], sz[i][2]};
      Ten in[2], out[1], one;
      ten(&in[0], DT_F32, 2, sa, NULL, 3, false);
      ten(&in[1], DT_F32, 2, sb, NULL, 0, false);
      out_ten(&out[0], DT_F32, 2, so);
      out_ten(&one, DT_F32, 2, so);
      threads(1);
      call_ok(&L, "mm", in, 2, &one, 1);
      for (int th = 4; th >= 2; th--) {
        threads(th);
        memset(out[0].store, 0x5A, out[0].bytes);
        if (th > 2) call_ok(&L, "mm", in, 2, out, 1);
        else run_and_compare_k(&L, "mm", in, 2, out, 1, false, sz[i][1]);
        ck_assert_msg(!memcmp(out[0].store, one.store, one.bytes), "%d threads differ (size %zu)",
                      th, i);
      }
      ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]), ten_free(&one);
    }
    threads(0); /* back to the default */
    unbuild(&L);
  }
}
END_TEST

/* A packing (cpu/gemm_pack.c pack_a_rows: row-major rows of A loaded as
 * K vectors and transposed in registers; MR > VW for f64 under AVX2;
 * rows past M zeroed) at M, K remainders of every kind: full and
 * partial MR panels, K below, at and above the vector width and the K
 * block; A with padded rows (a strided view, K stride 1), and A
 * transposed (the scalar path).  N >= 2 M takes work_split's fused B
 * packing (each column chunk packs its B panels itself, in groups of a
 * few panels: N = 300 and 352 at one thread make several groups, the
 * last one partial, with a partial panel or not, at K = 260 over two K
 * blocks; N = 800 makes four to eight per chunk, so a chunk's panel
 * slots are reused group after group), N < 2 M the shared packed B; the
 * bits must not depend on the thread count. */
static const char *MMP =
    "kernel pk(a: f32[M, K] strided, b: f32[K, N], c: f64[M, K], d: f64[K, N], "
    "e: i32[M, K], f: i32[K, N], t: f32[K, M]) -> (f32[M, N], f64[M, N], i32[M, N], f32[M, N]) {\n"
    "  return a @ b, c @ d, e @ f, t.T @ b\n}\n";

START_TEST(matmul_pack_paths) {
  static const int64_t sz[][3] = {{37, 7, 100}, {40, 17, 100}, {66, 9, 150}, {33, 300, 70},
                                  {37, 8, 40}, {61, 513, 64}, {45, 260, 300}, {50, 70, 352},
                                  {40, 300, 800}};
  static const DType dt[3] = {DT_F32, DT_F64, DT_I32};
  for (int tg = 0; tg < 2; tg++) {
    Lib L;
    build_flags(&L, MMP, "pk", TARGETS[tg]);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
      int64_t M = sz[i][0], K = sz[i][1], N = sz[i][2];
      int64_t sa[2] = {M, K}, sb[2] = {K, N}, so[2] = {M, N}, st[2] = {K, M}, pad[2] = {K + 3, 1};
      Ten in[7], out[4];
      ten(&in[0], DT_F32, 2, sa, pad, 2, false);
      for (int d = 0; d < 3; d++) {
        if (d) ten(&in[2 * d], dt[d], 2, sa, NULL, 0, false);
        ten(&in[2 * d + 1], dt[d], 2, sb, NULL, 0, false);
        out_ten(&out[d], dt[d], 2, so);
      }
      ten(&in[6], DT_F32, 2, st, NULL, 1, false);
      out_ten(&out[3], DT_F32, 2, so);
      same_at_threads(&L, "pk", in, 7, out, 4);
      run_and_compare_k(&L, "pk", in, 7, out, 4, false, K);
      for (int j = 0; j < 7; j++) ten_free(&in[j]);
      for (int j = 0; j < 4; j++) ten_free(&out[j]);
    }
    unbuild(&L);
  }
}
END_TEST

static const char *MMD =
    "kernel md(a: f64[M, K], b: f64[K, N], c: f16[M, K], d: f16[K, N], e: bf16[M, K], "
    "f: bf16[K, N], g: i32[M, K], h: i32[K, N], i: i64[M, K], j: i64[K, N]) -> "
    "(f64[M, N], f16[M, N], bf16[M, N], i32[M, N], i64[M, N]) {\n"
    "  return a @ b, c @ d, e @ f, g @ h, i @ j\n}\n";

START_TEST(matmul_dtypes) {
  static const int64_t sz[][3] = {{7, 17, 33}, {33, 300, 17}, {1, 1, 1}, {5, 0, 6}};
  static const DType dt[5] = {DT_F64, DT_F16, DT_BF16, DT_I32, DT_I64};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MMD, "md", TARGETS[t]);
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
      int64_t sa[2] = {sz[s][0], sz[s][1]}, sb[2] = {sz[s][1], sz[s][2]};
      int64_t so[2] = {sz[s][0], sz[s][2]};
      Ten in[10], out[5];
      for (int i = 0; i < 5; i++) {
        ten(&in[2 * i], dt[i], 2, sa, NULL, i, false);
        ten(&in[2 * i + 1], dt[i], 2, sb, NULL, 0, false);
        out_ten(&out[i], dt[i], 2, so);
      }
      run_and_compare_k(&L, "md", in, 10, out, 5, false, sz[s][1]);
      for (int i = 0; i < 10; i++) ten_free(&in[i]);
      for (int i = 0; i < 5; i++) ten_free(&out[i]);
    }
    unbuild(&L);
  }
}
END_TEST

/* Transposed, strided, sliced, broadcast-batched, 1-D operands; the
 * results go through the backend's result copies (and an elementwise
 * epilogue reads the matmul's scratch). */
static const char *MMV =
    "kernel mv(a: f32[K, M], b: f32[N, K] strided, c: f32[B, M, K], v: f32[K], "
    "w: f32[B, 1, K, N]) -> (f32[M, N], f32[B, M, N], f32[M], f32[M], f32[M, N], f32[B, B, M, N], "
    "f32[], f32[M, N], f32[N]) {\n"
    "  s = a[0:K:2, 1:].T @ b[:, 0:K:2].T\n"
    "  return a.T @ b.T, c @ b.T, a.T @ v, v @ a, (a.T @ b.T) * 2.0 - 1.0, "
    "c @ w, v @ v, (a.T @ b.T).relu(), s.sum(0)\n}\n";

START_TEST(matmul_views_and_broadcast) {
  static const int64_t sz[][4] = {{5, 9, 7, 2}, {33, 17, 20, 3}, {4, 1, 1, 1}};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MMV, "mv", TARGETS[t]);
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
      int64_t K = sz[s][0], M = sz[s][1], N = sz[s][2], B = sz[s][3];
      int64_t sa[2] = {K, M}, sb[2] = {N, K}, stb[2] = {1, N + 3}; /* b column-major */
      int64_t sc[3] = {B, M, K}, sv[1] = {K}, sw[4] = {B, 1, K, N};
      int64_t o0[2] = {M, N}, o1[3] = {B, M, N}, o2[1] = {M}, o5[4] = {B, B, M, N};
      Ten in[5], out[9];
      ten(&in[0], DT_F32, 2, sa, NULL, 1, false);
      ten(&in[1], DT_F32, 2, sb, stb, 2, false);
      ten(&in[2], DT_F32, 3, sc, NULL, 0, false);
      ten(&in[3], DT_F32, 1, sv, NULL, 5, false);
      ten(&in[4], DT_F32, 4, sw, NULL, 0, false);
      out_ten(&out[0], DT_F32, 2, o0);
      out_ten(&out[1], DT_F32, 3, o1);
      out_ten(&out[2], DT_F32, 1, o2);
      out_ten(&out[3], DT_F32, 1, o2);
      out_ten(&out[4], DT_F32, 2, o0);
      out_ten(&out[5], DT_F32, 4, o5);
      out_ten(&out[6], DT_F32, 0, NULL);
      out_ten(&out[7], DT_F32, 2, o0);
      int64_t o8[1] = {N};
      out_ten(&out[8], DT_F32, 1, o8);
      run_and_compare_k(&L, "mv", in, 5, out, 9, false, K * M);
      for (int i = 0; i < 5; i++) ten_free(&in[i]);
      for (int i = 0; i < 9; i++) ten_free(&out[i]);
    }
    unbuild(&L);
  }
}
END_TEST

/* ---- the small path (cpu/gemm_small.c) ------------------------------------
 * M or N up to 32: the big operand streamed without packing, in the axpy
 * form (its lanes contiguous: a @ b, e.T @ b with N short) or the dot form
 * (its K contiguous: a @ w.T, w @ v), with an epilogue, strided and
 * sliced operands, 1-D operands; shapes around the thresholds (32 / 33)
 * and not multiples of the vector width, tile or row group; the same bits
 * at 1 to 3 threads (the split over lanes depends on the thread count).
 * The last two shapes run the packed GEMM, a @ w.T packing w's panels by
 * in-register transposes (gemm_pack.c pack_b_kmajor) with K tails. */
static const char *MMS =
    "kernel sp(a: f32[M, K], b: f32[K, N], w: f32[N, K], v: f32[K], c: f32[N], e: f32[K, M]) -> "
    "(f32[M, N], f32[M, N], f32[N], f32[M, N], f32[M, N], f32[M, N], f32[M]) {\n"
    "  return a @ b, a @ w.T, w @ v, relu(a @ w.T + c), a[:, 0:K:2] @ b[0:K:2, :], e.T @ b, "
    "e.T @ v\n}\n";

static void small_case(Lib *L, const int64_t *sz) {
  int64_t M = sz[0], K = sz[1], N = sz[2];
  int64_t sa[2] = {M, K}, sb[2] = {K, N}, sw[2] = {N, K}, sv[1] = {K}, sc[1] = {N}, se[2] = {K, M};
  int64_t so[2] = {M, N}, sn[1] = {N}, sm[1] = {M};
  Ten in[6], out[7], one[7];
  ten(&in[0], DT_F32, 2, sa, NULL, 1, false);
  ten(&in[1], DT_F32, 2, sb, NULL, 0, false);
  ten(&in[2], DT_F32, 2, sw, NULL, 2, false);
  ten(&in[3], DT_F32, 1, sv, NULL, 0, false);
  ten(&in[4], DT_F32, 1, sc, NULL, 0, false);
  ten(&in[5], DT_F32, 2, se, NULL, 3, false);
  for (int i = 0; i < 7; i++) {
    int r = i == 2 || i == 6 ? 1 : 2;
    out_ten(&out[i], DT_F32, r, i == 2 ? sn : i == 6 ? sm : so);
    out_ten(&one[i], DT_F32, r, i == 2 ? sn : i == 6 ? sm : so);
  }
  set_threads(L, 1);
  call_ok(L, "sp", in, 6, one, 7);
  for (int th = 3; th >= 2; th--) {
    set_threads(L, th);
    for (int i = 0; i < 7; i++) reset_out(&out[i]);
    if (th == 3) call_ok(L, "sp", in, 6, out, 7);
    else run_and_compare_k(L, "sp", in, 6, out, 7, false, K);
    for (int i = 0; i < 7; i++)
      ck_assert_msg(same_bytes(&out[i], &one[i]), "out%d differs at %d threads (%lld x %lld x %lld)",
                    i, th, (long long)M, (long long)K, (long long)N);
  }
  set_threads(L, 0);
  for (int i = 0; i < 6; i++) ten_free(&in[i]);
  for (int i = 0; i < 7; i++) ten_free(&out[i]), ten_free(&one[i]);
}

START_TEST(matmul_small_path) {
  static const int64_t sz[][3] = {{1, 300, 77},  {2, 37, 1001}, {3, 64, 100}, {5, 513, 40},
                                  {8, 1, 9},     {13, 70, 33},  {32, 100, 50}, {33, 64, 70},
                                  {100, 70, 1},  {200, 65, 5},  {40, 9, 32},  {1, 1, 1},
                                  {1, 2000, 3}, {4, 130, 600}, {40, 37, 50}, {50, 300, 40}};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MMS, "sp", TARGETS[t]);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) small_case(&L, sz[i]);
    unbuild(&L);
  }
}
END_TEST

/* One module written whole (TDSL_JOBS=1: no threads, as for --emit=asm):
 * the GEMM's light helpers and the kernel's full functions are optimized
 * apart and linked back into one module (cpu/machine.c,
 * cpu_optimize_parts_and_write); the packed and the small path, with a
 * batch loop around the driver's call, against the interpreter. */
START_TEST(matmul_whole_module) {
  static const int64_t sz[][3] = {{7, 17, 33}, {65, 300, 70}, {1, 40, 100}, {0, 5, 3}};
  ck_assert_int_eq(setenv("TDSL_JOBS", "1", 1), 0);
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MM, "mm", TARGETS[t]);
    mm_sizes(&L, sz, sizeof sz / sizeof sz[0]);
    unbuild(&L);
    build_flags(&L, MMS, "sp", TARGETS[t]);
    for (size_t i = 0; i < 3; i++) small_case(&L, (const int64_t[3]){2 + (int64_t)i, 37, 101});
    unbuild(&L);
  }
  unsetenv("TDSL_JOBS");
}
END_TEST

/* The small path in f64, i64 (the dot form), f16 (storage conversion
 * in the streamed loads; integer storage conversion: matmul_dtypes), batched, and f64 with N short
 * (b.T @ a.T: S is B). */
static const char *MMSD =
    "kernel sd(a: f64[M, K], b: f64[K, N], c: i64[M, K], d: i64[N, K], e: f16[M, K], "
    "f: f16[K, N], x: f32[B, M, K], y: f32[B, K, N]) -> "
    "(f64[M, N], i64[M, N], f16[M, N], f32[B, M, N], f64[N, M]) {\n"
    "  return a @ b, c @ d.T, e @ f, x @ y, b.T @ a.T\n}\n";

START_TEST(matmul_small_dtypes) {
  static const int64_t sz[][3] = {{1, 50, 37}, {6, 130, 21}, {40, 9, 3}, {3, 17, 100}};
  static const DType dt[3] = {DT_F64, DT_I64, DT_F16};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MMSD, "sd", TARGETS[t]);
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
      int64_t M = sz[s][0], K = sz[s][1], N = sz[s][2], B = 3;
      int64_t sa[2] = {M, K}, sb[2] = {K, N}, st[2] = {N, K}, so[2] = {M, N}, sot[2] = {N, M};
      int64_t sx[3] = {B, M, K}, sy[3] = {B, K, N}, sbo[3] = {B, M, N};
      Ten in[8], out[5];
      for (int i = 0; i < 3; i++) {
        ten(&in[2 * i], dt[i], 2, sa, NULL, i, false);
        ten(&in[2 * i + 1], dt[i], 2, i == 1 ? st : sb, NULL, 0, false);
        out_ten(&out[i], dt[i], 2, so);
      }
      ten(&in[6], DT_F32, 3, sx, NULL, 0, false);
      ten(&in[7], DT_F32, 3, sy, NULL, 1, false);
      out_ten(&out[3], DT_F32, 3, sbo);
      out_ten(&out[4], DT_F64, 2, sot);
      run_and_compare_k(&L, "sd", in, 8, out, 5, false, K);
      for (int i = 0; i < 8; i++) ten_free(&in[i]);
      for (int i = 0; i < 5; i++) ten_free(&out[i]);
    }
    unbuild(&L);
  }
}
END_TEST

/* Weights of static shapes: the small path then emits only the forms
 * the known sizes and strides allow (gemm.c small_forms), and products
 * whose forms a small body of the module already covers use that one:
 * x @ w.T the dot forms, x @ u the axpy forms, x @ v (N = 3: S may be
 * B^T) and x @ z (N = 1) both kinds, y @ x.T (M = 5) the dot forms;
 * M = 1 (one-row forms), 5, 32 (four-row forms) and 33, 70 (the packed
 * path), against the interpreter. */
static const char *MMF =
    "kernel sf(x: f32[M, 64], w: f32[96, 64], u: f32[64, 40], v: f32[64, 3], y: f32[5, 64], "
    "z: f32[64, 1]) -> (f32[M, 96], f32[M, 40], f32[M, 3], f32[5, M], f32[M, 1]) {\n"
    "  return x @ w.T, x @ u, x @ v, y @ x.T, x @ z\n}\n";

START_TEST(matmul_small_static_forms) {
  static const int64_t ms[] = {1, 5, 32, 33, 70};
  static const int64_t ws[5][2] = {{96, 64}, {64, 40}, {64, 3}, {5, 64}, {64, 1}};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, MMF, "sf", TARGETS[t]);
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
      int64_t M = ms[i], sx[2] = {M, 64};
      int64_t so[5][2] = {{M, 96}, {M, 40}, {M, 3}, {5, M}, {M, 1}};
      Ten in[6], out[5];
      ten(&in[0], DT_F32, 2, sx, NULL, 1, false);
      for (int j = 0; j < 5; j++) {
        ten(&in[j + 1], DT_F32, 2, ws[j], NULL, j + 2, false);
        out_ten(&out[j], DT_F32, 2, so[j]);
      }
      run_and_compare_k(&L, "sf", in, 6, out, 5, false, 64);
      for (int j = 0; j < 6; j++) ten_free(&in[j]);
      for (int j = 0; j < 5; j++) ten_free(&out[j]);
    }
    unbuild(&L);
  }
}
END_TEST

/* ---- conv2d --------------------------------------------------------------- */

static const char *CONV =
    "kernel cv(x: f32[2, 4, 9, 11], w: f32[6, 4, 3, 3], b: f32[6], w1: f32[16, 4, 1, 1], "
    "w7: f32[5, 4, 7, 7], wg: f32[6, 2, 3, 3], wd: f32[4, 1, 3, 3]) -> "
    "(f32[2, 6, 9, 11], f32[2, 16, 9, 11], f32[2, 5, 5, 6], f32[2, 6, 7, 11], f32[2, 4, 9, 11], "
    "f32[2, 6, 5, 11]) {\n"
    "  return conv2d(x, w, b, padding=1), conv2d(x, w1), conv2d(x, w7, None, 2, 3), "
    "conv2d(x, wg, None, 1, [1, 2], [2, 2], 2), conv2d(x, wd, None, 1, 1, 1, 4), "
    "conv2d(x, w, b, [2, 1], [1, 1])\n}\n";

static const char *CONV_CL =
    "kernel cl(x: f32[2, 4, 9, 11] channels_last, w: f32[6, 4, 3, 3], b: f32[6], "
    "w1: f32[16, 4, 1, 1], wg: f32[6, 2, 3, 3]) -> "
    "(f32[2, 6, 9, 11] channels_last, f32[2, 16, 9, 11], f32[2, 6, 5, 6] channels_last) {\n"
    "  return conv2d(x, w, b, padding=1), conv2d(x, w1, w1[:, 1, 0, 0] * 2.0), "
    "conv2d(x, wg, b, 2, 1, 1, 2)\n}\n";

static void conv_inputs(Ten *in, int nin, const int64_t (*shape)[4], const int *rank,
                        DType dt, bool cl) {
  for (int i = 0; i < nin; i++) {
    int64_t st[4];
    const int64_t *s = shape[i];
    if (cl && i == 0) { /* N H W C storage, padded */
      st[1] = 1, st[3] = s[1], st[2] = s[1] * s[3], st[0] = s[1] * s[2] * s[3];
      ten(&in[i], dt, 4, s, st, 0, false);
    } else {
      ten(&in[i], dt, rank[i], s, NULL, i, false);
    }
  }
}

START_TEST(conv2d_f32_forms) {
  static const int64_t si[7][4] = {{2, 4, 9, 11}, {6, 4, 3, 3}, {6}, {16, 4, 1, 1},
                                   {5, 4, 7, 7}, {6, 2, 3, 3}, {4, 1, 3, 3}};
  static const int rk[7] = {4, 4, 1, 4, 4, 4, 4};
  static const int64_t so[6][4] = {{2, 6, 9, 11}, {2, 16, 9, 11}, {2, 5, 5, 6},
                                   {2, 6, 7, 11}, {2, 4, 9, 11}, {2, 6, 5, 11}};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, CONV, "cv", TARGETS[t]);
    Ten in[7], out[6];
    conv_inputs(in, 7, si, rk, DT_F32, false);
    for (int i = 0; i < 6; i++) out_ten(&out[i], DT_F32, 4, so[i]);
    run_and_compare_k(&L, "cv", in, 7, out, 6, false, 4 * 49);
    for (int i = 0; i < 7; i++) ten_free(&in[i]);
    for (int i = 0; i < 6; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

START_TEST(conv2d_channels_last) {
  static const int64_t si[5][4] = {{2, 4, 9, 11}, {6, 4, 3, 3}, {6}, {16, 4, 1, 1}, {6, 2, 3, 3}};
  static const int rk[5] = {4, 4, 1, 4, 4};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, CONV_CL, "cl", TARGETS[t]);
    Ten in[5], out[3];
    conv_inputs(in, 5, si, rk, DT_F32, true);
    int64_t s0[4] = {2, 6, 9, 11}, s1[4] = {2, 16, 9, 11}, s2[4] = {2, 6, 5, 6};
    int64_t c0[4] = {6 * 99, 1, 66, 6}, c2[4] = {6 * 30, 1, 36, 6};
    ten(&out[0], DT_F32, 4, s0, c0, 0, false);
    memset(out[0].store, 0x5A, out[0].bytes);
    out_ten(&out[1], DT_F32, 4, s1);
    ten(&out[2], DT_F32, 4, s2, c2, 0, false);
    memset(out[2].store, 0x5A, out[2].bytes);
    run_and_compare_k(&L, "cl", in, 5, out, 3, false, 36);
    for (int i = 0; i < 5; i++) ten_free(&in[i]);
    for (int i = 0; i < 3; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

static const char *CONV_DT =
    "kernel cd(x: f64[3, 8, 7], w: f64[5, 3, 3, 3], b: f64[5], h: f16[1, 3, 8, 7], "
    "wh: f16[5, 3, 3, 3], bh: f16[5], i: i64[2, 3, 8, 7], wi: i64[6, 1, 2, 2], "
    "bi: i64[6]) -> (f64[5, 4, 3], f16[1, 5, 8, 7], i64[2, 6, 9, 6]) {\n"
    "  return conv2d(x, w, b, 2, [1, 0], 1), conv2d(h, wh, bh, padding=1), "
    "conv2d(i, wi, bi, 1, [1, 0], 1, 3)\n}\n";

START_TEST(conv2d_dtypes) {
  static const int64_t si[9][4] = {{3, 8, 7}, {5, 3, 3, 3}, {5}, {1, 3, 8, 7}, {5, 3, 3, 3},
                                   {5}, {2, 3, 8, 7}, {6, 1, 2, 2}, {6}};
  static const int rk[9] = {3, 4, 1, 4, 4, 1, 4, 4, 1};
  static const DType dt[9] = {DT_F64, DT_F64, DT_F64, DT_F16, DT_F16,
                              DT_F16, DT_I64, DT_I64, DT_I64};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, CONV_DT, "cd", TARGETS[t]);
    Ten in[9], out[3];
    for (int i = 0; i < 9; i++) ten(&in[i], dt[i], rk[i], si[i], NULL, i, false);
    int64_t s0[3] = {5, 4, 3}, s1[4] = {1, 5, 8, 7}, s2[4] = {2, 6, 9, 6};
    out_ten(&out[0], DT_F64, 3, s0);
    out_ten(&out[1], DT_F16, 4, s1);
    out_ten(&out[2], DT_I64, 4, s2);
    run_and_compare_k(&L, "cd", in, 9, out, 3, false, 27);
    for (int i = 0; i < 9; i++) ten_free(&in[i]);
    for (int i = 0; i < 3; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* The im2col packers' edges (gemm.c): a kernel wider than the input
 * (OW == W: vectors run on across output rows), padding larger than the
 * input, stride 2 and 3 with odd sizes, dilation, 1x1 with stride 2,
 * sliced inputs (offset, rows not dense, a column stride of 2), each
 * with an NCHW and a channels-last input, each compiled with both conv
 * layouts (--layout: the vector packer of pixel panels, the run packer
 * of channel runs) for AVX-512 and SSE2 tiles. */
static const char *CONV_EDGE =
    "kernel ce(x: f32[2, 3, 7, 37]%s, y: f32[1, 3, 6, 5]%s, w7: f32[4, 3, 7, 7], "
    "w3: f32[4, 3, 3, 3], w1: f32[4, 3, 1, 1]) -> (f32[1, 4, 6, 5], f32[1, 4, 16, 15], "
    "f32[2, 4, 4, 19], f32[2, 4, 1, 13], f32[2, 4, 4, 19], f32[2, 4, 6, 36], f32[2, 4, 7, 37], "
    "f32[2, 4, 7, 19]) {\n"
    "  return conv2d(y, w7, None, 1, 3), conv2d(y, w3, None, 1, 6), conv2d(x, w3, None, 2, 1), "
    "conv2d(x, w3, None, 3, [0, 2], 2), conv2d(x, w1, None, 2), "
    "conv2d(x[:, :, 1:, 1:], w3, None, 1, 1), conv2d(x, w1), "
    "conv2d(x[:, :, :, 0:37:2], w3, None, 1, 1)\n}\n";

START_TEST(conv2d_pack_edges) {
  static const int64_t si[5][4] = {{2, 3, 7, 37}, {1, 3, 6, 5}, {4, 3, 7, 7}, {4, 3, 3, 3},
                                   {4, 3, 1, 1}};
  static const int rk[5] = {4, 4, 4, 4, 4};
  static const int64_t so[8][4] = {{1, 4, 6, 5}, {1, 4, 16, 15}, {2, 4, 4, 19}, {2, 4, 1, 13},
                                   {2, 4, 4, 19}, {2, 4, 6, 36}, {2, 4, 7, 37}, {2, 4, 7, 19}};
  static const char *const layouts[2] = {"--layout=nchw", "--layout=nhwc"};
  for (int cl = 0; cl < 2; cl++) {
    char src[1024], flags[64];
    const char *lay = cl ? " channels_last" : "";
    snprintf(src, sizeof src, CONV_EDGE, lay, lay);
    for (int t = 0; t < 4; t++) {
      Lib L;
      snprintf(flags, sizeof flags, "%s %s", TARGETS[t % 2], layouts[t / 2]);
      build_flags(&L, src, "ce", flags);
      Ten in[5], out[8];
      conv_inputs(in, 5, si, rk, DT_F32, cl);
      if (cl) { /* conv_inputs makes only input 0 channels-last */
        int64_t st[4] = {90, 1, 15, 3};
        ten_free(&in[1]);
        ten(&in[1], DT_F32, 4, si[1], st, 1, false);
      }
      for (int i = 0; i < 8; i++) out_ten(&out[i], DT_F32, 4, so[i]);
      run_and_compare_k(&L, "ce", in, 5, out, 8, false, 3 * 49);
      for (int i = 0; i < 5; i++) ten_free(&in[i]);
      for (int i = 0; i < 8; i++) ten_free(&out[i]);
      unbuild(&L);
    }
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_gemm");
  TCase *t = tcase_create("gemm");
  tcase_set_timeout(t, 300);
  tcase_add_test(t, matmul_f32_sizes);
  tcase_add_test(t, matmul_work_split);
  tcase_add_test(t, matmul_dtypes);
  tcase_add_test(t, matmul_pack_paths);
  tcase_add_test(t, matmul_views_and_broadcast);
  tcase_add_test(t, matmul_small_path);
  tcase_add_test(t, matmul_small_dtypes);
  tcase_add_test(t, conv2d_f32_forms);
  tcase_add_test(t, conv2d_channels_last);
  tcase_add_test(t, conv2d_dtypes);
  tcase_add_test(t, conv2d_pack_edges);
  tcase_add_test(t, matmul_whole_module);
  tcase_add_test(t, matmul_small_static_forms);
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
