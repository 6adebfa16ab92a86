/* test_codegen_fuse.c — the CPU backend's fused, parallel, vectorized
 * nests (loops.h "Fusion", cpu/parallel.c): kernels whose
 * elementwise values are inlined through expands, permutes and several
 * uses (and materialized behind slices and flattening views), large
 * enough to take the parallel path, with odd sizes (vector remainders),
 * non-contiguous and channels-last outputs, reductions over collapsed
 * loops; cat's nests (inputs fused in, the result written in place) and
 * a chunk of a symbolic size checked at entry; each compared with the
 * interpreter, with -O0 (one nest per value, serial) and across thread
 * counts (bitwise equal).
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources, the front
 * end and interpreter, dlopen). */
#include "codegen_util.h"

/* Inlining through expands (params broadcast per channel); a cheap value
 * read four times (a: recomputed); a costly one read several times (b:
 * materialized, with a inlined into its nest); a permute view of an
 * inlined value into a result (q); reductions (sum over collapsed H, W of
 * b; argmax over C of an inlined value); and a slice and a flattening
 * view that force materializing c. */
static const char *CHAIN =
    "kernel chain(x: f32[N, 7, H, W], m: f32[7], s: f32[7]) -> (f32[N, 7, H, W], "
    "f32[N, H, W, 7], f32[N, 7], i64[N, H, W], f32[N, 6, H, W], f32[N, 7, H * W]) {\n"
    "  a = (x - m[None, :, None, None]) * s[None, :, None, None]\n"
    "  b = a.relu() + a * 0.5 - a.abs()\n"
    "  q = (x * s[None, :, None, None] + 0.25).permute(0, 2, 3, 1)\n"
    "  c = x * 2.0\n"
    "  return b.exp() * b, q.contiguous() + 1.0, b.sum(dim=(2, 3)), (a + x).argmax(dim=1), "
    "c[:, 1:, :, :] + 2.0, c.flatten(2) - 1.0\n"
    "}\n";

/* How many scratch buffers the kernel allocates at -O level opt (call
 * sites of tdsl_alloc in its LLVM IR), and whether it forks. */
static int scratch_count(const char *src, int opt, bool *forks) {
  char dir[] = "/tmp/tdsl_cfs_XXXXXX", path[128], cmd[1024];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/k.tdsl", dir);
  write_text(path, src);
  snprintf(cmd, sizeof cmd, "%s %s -o %s/k.ll --emit=llvm -O%d", TDSL_TDSLC, path, dir, opt);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "grep -q 'call void @tdsl_parallel_for' %s/k.ll", dir);
  *forks = sh(cmd) == 0;
  snprintf(cmd, sizeof cmd, "exit $(grep -c 'call.*@tdsl_alloc(' %s/k.ll)", dir);
  int n = sh(cmd);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  sh(cmd);
  return n;
}

static void chain_case(Lib *L, int64_t n, int64_t c, int64_t h, int64_t w) {
  int64_t sx[4] = {n, c, h, w}, sc[1] = {c}, sp[4] = {n, h, w, c}, sr[2] = {n, c},
          sa[3] = {n, h, w}, ss[4] = {n, c - 1, h, w}, sf[3] = {n, c, h * w};
  Ten in[3], out[6];
  ten(&in[0], DT_F32, 4, sx, NULL, 0, false);
  ten(&in[1], DT_F32, 1, sc, NULL, 0, false);
  ten(&in[2], DT_F32, 1, sc, NULL, 0, false);
  for (int64_t i = 0; i < c; i++) ((float *)in[2].store)[i] = 0.5f + (float)i / 8;
  out_ten(&out[0], DT_F32, 4, sx);
  out_ten(&out[1], DT_F32, 4, sp);
  out_ten(&out[2], DT_F32, 2, sr);
  out_ten(&out[3], DT_I64, 3, sa);
  out_ten(&out[4], DT_F32, 4, ss);
  out_ten(&out[5], DT_F32, 3, sf);
  threads_and_reference(L, "chain", in, 3, out, 6, true);
  for (int i = 0; i < 3; i++) ten_free(&in[i]);
  for (int i = 0; i < 6; i++) ten_free(&out[i]);
}

START_TEST(inlined_chain_parallel) {
  bool forks;
  /* -O0: a, b, q's add and mul, c, the other elementwise values, the
   * contiguous copy, the two reductions; -O2: b and c (the reductions
   * are computed in their outputs, plan-memory's in-place results) */
  ck_assert_int_ge(scratch_count(CHAIN, 0, &forks), 10);
  ck_assert(!forks);
  ck_assert_int_eq(scratch_count(CHAIN, 2, &forks), 2);
  ck_assert(forks);
  Lib L;
  build_flags(&L, CHAIN, NULL, "-O2");
  chain_case(&L, 8, 7, 67, 61); /* 229K elements: parallel, odd rows */
  chain_case(&L, 2, 7, 5, 3);   /* small: serial */
  unbuild(&L);
}
END_TEST

/* Every output of the -O0 build (one nest per value, serial) equals the
 * -O2 build's within §9's tolerances (and both equal the interpreter). */
START_TEST(o0_equals_o2) {
  Lib L0, L2;
  build_flags(&L0, CHAIN, NULL, "-O0");
  build_flags(&L2, CHAIN, NULL, "-O2");
  int64_t sx[4] = {4, 7, 33, 45}, sc[1] = {7}, sp[4] = {4, 33, 45, 7}, sr[2] = {4, 7},
          sa[3] = {4, 33, 45}, ss[4] = {4, 6, 33, 45}, sf[3] = {4, 7, 33 * 45};
  Ten in[3], o0[6], o2[6];
  ten(&in[0], DT_F32, 4, sx, NULL, 0, false);
  ten(&in[1], DT_F32, 1, sc, NULL, 0, false);
  ten(&in[2], DT_F32, 1, sc, NULL, 0, false);
  for (int i = 0; i < 7; i++) ((float *)in[2].store)[i] = 1.0f + (float)i / 4;
  for (int k = 0; k < 2; k++) {
    Ten *o = k ? o2 : o0;
    out_ten(&o[0], DT_F32, 4, sx);
    out_ten(&o[1], DT_F32, 4, sp);
    out_ten(&o[2], DT_F32, 2, sr);
    out_ten(&o[3], DT_I64, 3, sa);
    out_ten(&o[4], DT_F32, 4, ss);
    out_ten(&o[5], DT_F32, 3, sf);
  }
  call_ok(&L0, "chain", in, 3, o0, 6);
  call_ok(&L2, "chain", in, 3, o2, 6);
  for (int i = 0; i < 6; i++) {
    /* the sum (reassociated at -O2) and out0's exp (at -O2 cpu/reduce.c's own
     * f32 exp, within 1 ulp of libm's): compared with the interpreter below */
    if (i == 0 || i == 2) continue;
    ck_assert_msg(same_bytes(&o0[i], &o2[i]), "-O0 and -O2 differ in out%d", i);
  }
  run_and_compare(&L0, "chain", in, 3, o0, 6, true);
  run_and_compare(&L2, "chain", in, 3, o2, 6, true);
  for (int i = 0; i < 3; i++) ten_free(&in[i]);
  for (int i = 0; i < 6; i++) ten_free(&o0[i]), ten_free(&o2[i]);
  unbuild(&L0);
  unbuild(&L2);
}
END_TEST

/* A strided (column-major) output, a channels-last output written from a
 * contiguous input, a rank-1 nest split over elements, and f16 values
 * inlined with several uses (rounded to f16 as if stored). */
static const char *LAYOUTS =
    "kernel lay(x: f32[N, M], y: f32[M], z: f32[B, C, H, W], v: f32[K]) -> "
    "(f32[N, M] strided, f32[B, C, H, W] channels_last, f32[K], f32[K]) {\n"
    "  h = v.to(f16) * 3.0\n"
    "  return (x * y[None, :]).sigmoid(), z * 2.0 - 1.0, v * 2.0 + 1.0, (h + h * h).to(f32)\n"
    "}\n";

START_TEST(layouts_and_rank1) {
  Lib L;
  build_flags(&L, LAYOUTS, NULL, "-O2");
  int64_t n = 301, m = 257, sx[2] = {n, m}, sy[1] = {m}, cm[2] = {1, n};
  int64_t sz[4] = {3, 17, 41, 39}, cl[4] = {17 * 41 * 39, 1, 39 * 17, 17};
  int64_t k = 100003, sv[1] = {k};
  Ten in[4], out[4];
  ten(&in[0], DT_F32, 2, sx, NULL, 5, false);
  ten(&in[1], DT_F32, 1, sy, NULL, 0, false);
  ten(&in[2], DT_F32, 4, sz, NULL, 0, false);
  ten(&in[3], DT_F32, 1, sv, NULL, 0, false);
  ten(&out[0], DT_F32, 2, sx, cm, 0, false);
  ten(&out[1], DT_F32, 4, sz, cl, 0, false);
  out_ten(&out[2], DT_F32, 1, sv);
  out_ten(&out[3], DT_F32, 1, sv);
  reset_out(&out[0]);
  reset_out(&out[1]);
  threads_and_reference(&L, "lay", in, 4, out, 4, false);
  for (int i = 0; i < 4; i++) ten_free(&in[i]), ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

/* The permute copy (transpose) and a reduction over the outer dim. */
START_TEST(permute_copy_and_outer_reduction) {
  Lib L;
  build_flags(&L, "kernel pc(x: f32[N, C, H, W]) -> (f32[N, H, W, C], f32[C, H, W], f32[N, C]) {\n"
                  "  return x.permute(0, 2, 3, 1).contiguous(), x.amax(dim=0), x.mean(dim=(2, 3))\n}\n",
              NULL, "-O2");
  int64_t s[4] = {5, 19, 37, 43}, sp[4] = {5, 37, 43, 19}, sm[3] = {19, 37, 43}, sr[2] = {5, 19};
  Ten in, out[3];
  ten(&in, DT_F32, 4, s, NULL, 0, true);
  out_ten(&out[0], DT_F32, 4, sp);
  out_ten(&out[1], DT_F32, 3, sm);
  out_ten(&out[2], DT_F32, 2, sr);
  threads_and_reference(&L, "pc", &in, 1, out, 3, true);
  ten_free(&in);
  for (int i = 0; i < 3; i++) ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

/* Transposing copies of every element size run in 8 x 8 register blocks
 * with element-wise edges (cpu/vloops.c emit_transpose_blocks): sizes below,
 * at and off multiples of 8 and of the tile, symbolic and static, input
 * at a byte offset. */
START_TEST(transpose_blocks_all_sizes) {
  static const DType dts[] = {DT_F32, DT_F64, DT_F16, DT_U8, DT_BOOL, DT_I32};
  static const char *const names[] = {"f32", "f64", "f16", "u8", "bool", "i32"};
  static const int64_t sizes[][2] = {{8, 8}, {7, 9}, {16, 40}, {33, 65}, {1, 70}, {70, 3}, {100, 257}};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    char src[512];
    snprintf(src, sizeof src,
             "kernel t(x: %s[M, K]) -> %s[K, M] {\n  return x.T.contiguous()\n}\n"
             "kernel s(x: %s[24, 40]) -> %s[40, 24] {\n  return x.transpose(0, 1).clone()\n}\n",
             names[d], names[d], names[d], names[d]);
    Lib L;
    build_flags(&L, src, NULL, "-O2");
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      int64_t m = sizes[z][0], k = sizes[z][1], so[2] = {k, m};
      Ten in, out;
      ten(&in, dts[d], 2, sizes[z], NULL, 3, false);
      out_ten(&out, dts[d], 2, so);
      threads_and_reference(&L, "t", &in, 1, &out, 1, false);
      ten_free(&in), ten_free(&out);
    }
    int64_t s1[2] = {24, 40}, s2[2] = {40, 24};
    Ten in, out;
    ten(&in, dts[d], 2, s1, NULL, 0, true);
    out_ten(&out, dts[d], 2, s2);
    threads_and_reference(&L, "s", &in, 1, &out, 1, false);
    ten_free(&in), ten_free(&out);
    unbuild(&L);
  }
}
END_TEST

/* cat (loops/lower.c): one nest per input storing its slice; an
 * elementwise input is computed inside its nest, a cat that is a result
 * is written straight into the output (no scratch, no copy), a cat that
 * feeds an elementwise consumer is materialized once (its one scratch
 * buffer); large enough for the parallel path, odd sizes. */
static const char *CAT =
    "kernel cat2(x: f32[N, M], y: f32[N, K]) -> (f32[N, M + K], f32[N, M + K + M]) {\n"
    "  return cat([x.exp(), y * 2.0], 1), cat([x, y.abs(), x - 1.0], 1).sigmoid()\n"
    "}\n";

static void cat_case(Lib *L, int64_t n, int64_t m, int64_t k) {
  int64_t sx[2] = {n, m}, sy[2] = {n, k}, s0[2] = {n, m + k}, s1[2] = {n, m + k + m};
  Ten in[2], out[2];
  ten(&in[0], DT_F32, 2, sx, NULL, 0, false);
  ten(&in[1], DT_F32, 2, sy, NULL, 3, false);
  out_ten(&out[0], DT_F32, 2, s0);
  out_ten(&out[1], DT_F32, 2, s1);
  threads_and_reference(L, "cat2", in, 2, out, 2, true);
  for (int i = 0; i < 2; i++) ten_free(&in[i]), ten_free(&out[i]);
}

START_TEST(cat_written_once) {
  bool forks;
  /* -O0: exp, mul, both cats, abs, sub, sigmoid; -O2: only the second
   * cat (read by sigmoid); the first is computed in out0 */
  ck_assert_int_ge(scratch_count(CAT, 0, &forks), 7);
  ck_assert_int_eq(scratch_count(CAT, 2, &forks), 1);
  Lib L;
  build_flags(&L, CAT, NULL, "-O2");
  cat_case(&L, 301, 257, 131); /* parallel, odd rows */
  cat_case(&L, 3, 1, 2);       /* small: serial */
  cat_case(&L, 4, 0, 5);       /* an empty input */
  unbuild(&L);
}
END_TEST

/* chunk of a symbolic size into exactly 2 pieces (ceil(N/2) and the
 * rest), joined back in the other order: every N but 1, where PyTorch
 * would give one piece and the kernel fails at entry, untouched output. */
static const char *CHUNK =
    "kernel swap_halves(x: f32[N]) -> f32[N] {\n"
    "  a, b = x.chunk(2)\n"
    "  return cat([b, a * 2.0])\n"
    "}\n";

START_TEST(chunk_symbolic_checked) {
  Lib L;
  build_flags(&L, CHUNK, NULL, "-O2");
  for (int64_t n = 0; n <= 9; n++) {
    if (n == 1) continue;
    int64_t sx[1] = {n};
    Ten in, out;
    ten(&in, DT_F32, 1, sx, NULL, 0, false);
    out_ten(&out, DT_F32, 1, sx);
    run_and_compare(&L, "swap_halves", &in, 1, &out, 1, true);
    const float *x = in.store, *o = out.store;
    int64_t h = (n + 1) / 2;
    for (int64_t i = 0; i < n; i++)
      ck_assert_float_eq(o[i], i < n - h ? x[h + i] : 2.0f * x[i - (n - h)]);
    ten_free(&in), ten_free(&out);
  }
  int64_t s1[1] = {1};
  Ten x1, o1;
  ten(&x1, DT_F32, 1, s1, NULL, 0, false);
  out_ten(&o1, DT_F32, 1, s1);
  void *a[2] = {&x1.t, &o1.t};
  const char *(*last)(void) = (const char *(*)(void))sym(&L, "tdsl_last_error");
  ck_assert_int_eq(call(sym(&L, "swap_halves"), a, 2), TDSL_E_CHECK);
  ck_assert_msg(strstr(last(), "fewer than 2 chunks") != NULL, "message '%s'", last());
  ck_assert(untouched(&o1));
  ten_free(&x1), ten_free(&o1);
  unbuild(&L);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_fuse");
  TCase *t = tcase_create("cpu");
  tcase_set_timeout(t, 240);
  tcase_add_test(t, inlined_chain_parallel);
  tcase_add_test(t, cat_written_once);
  tcase_add_test(t, chunk_symbolic_checked);
  tcase_add_test(t, o0_equals_o2);
  tcase_add_test(t, layouts_and_rank1);
  tcase_add_test(t, permute_copy_and_outer_reduction);
  tcase_add_test(t, transpose_blocks_all_sizes);
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
