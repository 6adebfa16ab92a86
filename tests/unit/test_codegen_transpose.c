/* test_codegen_transpose.c — transposing copies in register blocks
 * (cpu/transpose.c): permutes of rank 2 to 5 whose output's unit-stride
 * dim is read with a stride, for element sizes 1, 2, 4 and 8 (u8, f16,
 * bf16, i16, f32, f64, i64), extents that are not multiples of the block
 * or the tile (256), sliced and stepped inputs, constant and symbolic
 * extents, a batch dim.  Results equal the interpreter's (a copy: bit for
 * bit) at 1, 2 and 3 threads; with TDSL_STREAM_MIN_BYTES=0 (set in main)
 * the blocks of an output whose rows are aligned store non-temporally,
 * with the variable huge they do not, and both give the same bytes; the
 * host build's code holds non-temporal stores and so does an
 * x86-64-v2 build (4 x 4 f32 and 2 x 2 f64 blocks), which runs here too.
 * Needs: codegen_util.h (tdslc, a C compiler, the runtime sources). */
#include <stdint.h>

#include "codegen_util.h"

static const char src[] =
    "kernel t2_f32(x: f32[M, N]) -> f32[N, M] {\n"
    "  return x.t().contiguous()\n"
    "}\n"
    "kernel t2_f64(x: f64[M, N]) -> f64[N, M] {\n"
    "  return x.t().contiguous()\n"
    "}\n"
    "kernel t2_i64(x: i64[M, N]) -> i64[N, M] {\n"
    "  return x.t().contiguous()\n"
    "}\n"
    "kernel t2_f16(x: f16[M, N]) -> f16[N, M] {\n"
    "  return x.t().contiguous()\n"
    "}\n"
    "kernel t2_bf16(x: bf16[M, N]) -> bf16[N, M] {\n"
    "  return x.t().contiguous()\n"
    "}\n"
    "kernel t2_i16(x: i16[M, N]) -> i16[N, M] {\n"
    "  return x.t().contiguous()\n"
    "}\n"
    "kernel t2_u8(x: u8[M, N]) -> u8[N, M] {\n"
    "  return x.t().contiguous()\n"
    "}\n"
    "kernel nhwc_f32(x: f32[N, C, H, W]) -> f32[N, H, W, C] {\n"
    "  return x.permute(0, 2, 3, 1).contiguous()\n"
    "}\n"
    "kernel nhwc_u8(x: u8[N, C, H, W]) -> u8[N, H, W, C] {\n"
    "  return x.permute(0, 2, 3, 1).contiguous()\n"
    "}\n"
    "kernel nhwc_f16(x: f16[N, C, H, W]) -> f16[N, H, W, C] {\n"
    "  return x.permute(0, 2, 3, 1).contiguous()\n"
    "}\n"
    "kernel nhwc_f64(x: f64[N, C, H, W]) -> f64[N, H, W, C] {\n"
    "  return x.permute(0, 2, 3, 1).contiguous()\n"
    "}\n"
    "kernel p3(x: f32[A, B, C]) -> f32[C, A, B] {\n"
    "  return x.permute(2, 0, 1).contiguous()\n"
    "}\n"
    "kernel p5(x: f32[A, B, C, D, E]) -> f32[A, D, E, B, C] {\n"
    "  return x.permute(0, 3, 4, 1, 2).contiguous()\n"
    "}\n"
    "kernel p5_i64(x: i64[A, B, C, D, E]) -> i64[E, A, B, C, D] {\n"
    "  return x.permute(4, 0, 1, 2, 3).contiguous()\n"
    "}\n"
    "kernel sliced(x: f32[40, 300]) -> (f32[297, 39], f32[295, 20]) {\n"
    "  return x[1:, 3:].t().contiguous(), x[::2, 5:].t().contiguous()\n"
    "}\n"
    "kernel batch_const(x: f32[B, 40, 20]) -> f32[B, 20, 40] {\n"
    "  return x.permute(0, 2, 1).contiguous()\n"
    "}\n"
    "kernel fixed(x: f64[3, 45, 515]) -> f64[3, 515, 45] {\n"
    "  return x.transpose(1, 2).contiguous()\n"
    "}\n";

/* An output whose data starts on a 64-byte boundary plus `skew`
 * elements, filled with 0x5A. */
static void out_skewed(Ten *o, DType d, int rank, const int64_t *shape, int64_t skew) {
  int64_t es = (int64_t)dtype_size(d), room = 64 / es + skew;
  ten(o, d, rank, shape, NULL, room, false);
  int64_t off = (int64_t)((64 - (uintptr_t)o->store % 64) % 64) / es + skew;
  o->t.byte_offset = (uint64_t)(off * es);
  o->h.offset = off;
  memset(o->store, 0x5A, o->bytes);
}

/* Kernel `name` on a fresh input of shape is (rank r) into an output of
 * shape os, aligned and skewed by one element: threads and interpreter. */
static void check(Lib *L, const char *name, DType d, int r, const int64_t *is, const int64_t *os) {
  for (int64_t skew = 0; skew < 2; skew++) {
    Ten in, out;
    ten(&in, d, r, is, NULL, 0, false);
    out_skewed(&out, d, r, os, skew);
    threads_and_reference(L, name, &in, 1, &out, 1, false);
    ten_free(&in), ten_free(&out);
  }
}

static const struct {
  const char *name;
  DType d;
} t2[] = {{"t2_f32", DT_F32}, {"t2_f64", DT_F64}, {"t2_i64", DT_I64}, {"t2_f16", DT_F16},
          {"t2_bf16", DT_BF16}, {"t2_i16", DT_I16}, {"t2_u8", DT_U8}};

/* Every kernel of src over shapes around the block (2..8) and the tile. */
static void check_all(Lib *L) {
  const int64_t mn[][2] = {{1, 1}, {3, 5}, {8, 8}, {7, 9}, {16, 40}, {9, 300}, {37, 257}, {64, 513}, {300, 37}};
  for (size_t k = 0; k < sizeof t2 / sizeof *t2; k++)
    for (size_t i = 0; i < sizeof mn / sizeof *mn; i++) {
      int64_t os[2] = {mn[i][1], mn[i][0]};
      check(L, t2[k].name, t2[k].d, 2, mn[i], os);
    }
  const struct {
    const char *name;
    DType d;
  } nhwc[] = {{"nhwc_f32", DT_F32}, {"nhwc_u8", DT_U8}, {"nhwc_f16", DT_F16}, {"nhwc_f64", DT_F64}};
  const int64_t nchw[][4] = {{2, 3, 5, 7}, {2, 13, 9, 11}, {1, 64, 17, 17}, {3, 16, 2, 150}};
  for (size_t k = 0; k < sizeof nhwc / sizeof *nhwc; k++)
    for (size_t i = 0; i < sizeof nchw / sizeof *nchw; i++) {
      const int64_t *s = nchw[i];
      int64_t os[4] = {s[0], s[2], s[3], s[1]};
      check(L, nhwc[k].name, nhwc[k].d, 4, s, os);
    }
  const int64_t abc[][3] = {{2, 9, 40}, {3, 17, 300}};
  for (size_t i = 0; i < 2; i++) {
    int64_t os[3] = {abc[i][2], abc[i][0], abc[i][1]};
    check(L, "p3", DT_F32, 3, abc[i], os);
  }
  const int64_t a5[5] = {2, 3, 11, 6, 7}, o5[5] = {2, 6, 7, 3, 11};
  check(L, "p5", DT_F32, 5, a5, o5);
  const int64_t b5[5] = {2, 3, 2, 5, 19}, q5[5] = {19, 2, 3, 2, 5};
  check(L, "p5_i64", DT_I64, 5, b5, q5);
  const int64_t bs[3] = {3, 40, 20}, bo[3] = {3, 20, 40};
  check(L, "batch_const", DT_F32, 3, bs, bo);
  const int64_t fs[3] = {3, 45, 515}, fo[3] = {3, 515, 45};
  check(L, "fixed", DT_F64, 3, fs, fo);
  int64_t xs[2] = {40, 300}, s1[2] = {297, 39}, s2[2] = {295, 20};
  Ten in, out[2];
  ten(&in, DT_F32, 2, xs, NULL, 0, false);
  out_skewed(&out[0], DT_F32, 2, s1, 0);
  out_skewed(&out[1], DT_F32, 2, s2, 0);
  threads_and_reference(L, "sliced", &in, 1, out, 2, false);
  ten_free(&in), ten_free(&out[0]), ten_free(&out[1]);
}

START_TEST(code_streams) {
  const char *k = "--kernel=t2_f32 --kernel=t2_f64";
  char v2[64];
  snprintf(v2, sizeof v2, "--target=x86-64-v2 %s", k);
  ck_assert_int_ge(asm_count(src, k, "movnt"), 2);
  ck_assert_int_ge(asm_count(src, v2, "movnt"), 2);
}
END_TEST

START_TEST(host_equals_interpreter) {
  Lib L;
  build(&L, src, "t2_f32");
  check_all(&L);
  unbuild(&L);
}
END_TEST

START_TEST(v2_equals_interpreter) {
  Lib L;
  build_flags(&L, src, "t2_f32", "--target=x86-64-v2");
  check_all(&L);
  unbuild(&L);
}
END_TEST

START_TEST(streamed_equals_plain) {
  /* The same kernels with streaming off (a library whose runtime read
   * TDSL_STREAM_MIN_BYTES huge at its first call): bitwise the same. */
  Lib S, P;
  build_stream_pair(&S, &P, src, "t2_f32");
  for (size_t k = 0; k < sizeof t2 / sizeof *t2; k++) {
    int64_t is[2] = {67, 600}, os[2] = {600, 67};
    Ten in, o1, o2;
    ten(&in, t2[k].d, 2, is, NULL, 0, false);
    out_skewed(&o1, t2[k].d, 2, os, 0);
    out_skewed(&o2, t2[k].d, 2, os, 0);
    call_ok(&S, t2[k].name, &in, 1, &o1, 1);
    call_ok(&P, t2[k].name, &in, 1, &o2, 1);
    ck_assert_msg(!memcmp((char *)o1.store + o1.t.byte_offset, (char *)o2.store + o2.t.byte_offset,
                          (size_t)(600 * 67) * dtype_size(t2[k].d)),
                  "%s: streamed and plain differ", t2[k].name);
    ten_free(&in), ten_free(&o1), ten_free(&o2);
  }
  unbuild(&S);
  unbuild(&P);
}
END_TEST

static Suite *transpose_suite(void) {
  Suite *s = suite_create("codegen_transpose");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, code_streams);
  tcase_add_test(tc, host_equals_interpreter);
  tcase_add_test(tc, v2_equals_interpreter);
  tcase_add_test(tc, streamed_equals_plain);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  setenv("TDSL_STREAM_MIN_BYTES", "0", 1); /* every output large enough to stream */
  SRunner *sr = srunner_create(transpose_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
