/* test_codegen_stream.c — streaming (non-temporal) stores of elementwise
 * nests (cpu/vloops.c, runtime/stream.c): with TDSL_STREAM_MIN_BYTES=0
 * every eligible nest streams, so small tensors exercise the path: the
 * code holds non-temporal stores, results equal the interpreter's for
 * outputs of each element size (bool, f16, f32, f64, i64), lengths around
 * the chunk and vector sizes, and outputs not aligned to 32 bytes, are the
 * same at 1, 2 and 3 threads, and are bitwise the results of the same
 * kernels with streaming off (TDSL_STREAM_MIN_BYTES huge).  The same for
 * the last nest of a row group (cpu_group_stream: layer_norm's result, a
 * hand-written RMSNorm's), and softmax's group, which does not stream;
 * and for a nest flattened to its one parallel loop, each thread's chunk.
 * Needs: codegen_util.h (tdslc, a C compiler, the runtime sources). */
#include "codegen_util.h"

static const char src[] =
    "kernel chain(x: f32[N, C, H, W], a: f32[C], b: f32[C]) -> f32[N, C, H, W] {\n"
    "  av = a.view(1, C, 1, 1)\n"
    "  bv = b.view(1, C, 1, 1)\n"
    "  return relu((x * av + bv) * 0.5 - bv) / av\n"
    "}\n"
    "kernel dbl(x: f64[N]) -> f64[N] {\n"
    "  return x * 2.0 + 1.0\n"
    "}\n"
    "kernel pos(x: f32[N, M]) -> bool[N, M] {\n"
    "  return x > 0.0\n"
    "}\n"
    "kernel half(x: f32[N, M]) -> f16[N, M] {\n"
    "  return (x * 3.0).to(f16)\n"
    "}\n"
    "kernel wide(x: i32[N]) -> i64[N] {\n"
    "  return x.to(i64) * 3\n"
    "}\n";

/* An output of dtype d at element offset off (off = 0: as malloc aligns),
 * filled with 0x5A. */
static void out_at(Ten *o, DType d, int rank, const int64_t *shape, int64_t off) {
  ten(o, d, rank, shape, NULL, off, false);
  memset(o->store, 0x5A, o->bytes);
}

START_TEST(code_streams) {
  /* The compiled code holds non-temporal stores (else the other tests
   * would test the plain path only). */
  ck_assert_int_ge(asm_count(src, "", "movnt"), 5); /* each kernel's output */
}
END_TEST

START_TEST(streamed_equals_interpreter) {
  Lib L;
  build(&L, src, "chain");
  /* W*H from 1 to past a few chunks (64 f32), output offsets that leave
   * it unaligned */
  const int64_t hw[][2] = {{1, 1}, {1, 7}, {3, 11}, {8, 8}, {9, 15}, {17, 31}};
  for (size_t i = 0; i < sizeof hw / sizeof *hw; i++)
    for (int64_t off = 0; off < 3; off++) {
      int64_t xs[4] = {2, 3, hw[i][0], hw[i][1]}, cs[1] = {3};
      Ten in[3], out;
      ten(&in[0], DT_F32, 4, xs, NULL, 0, false);
      ten(&in[1], DT_F32, 1, cs, NULL, 0, false);
      ten(&in[2], DT_F32, 1, cs, NULL, 0, false);
      for (int c = 0; c < 3; c++) /* a divisor away from 0 */
        ((float *)in[1].store)[c] = 0.5f + (float)c;
      out_at(&out, DT_F32, 4, xs, off);
      threads_and_reference(&L, "chain", in, 3, &out, 1, false);
      for (int k = 0; k < 3; k++) ten_free(&in[k]);
      ten_free(&out);
    }
  const int64_t lens[] = {1, 3, 31, 32, 33, 127, 129, 1000, 4099};
  struct {
    const char *name;
    DType in, out;
  } k1[] = {{"dbl", DT_F64, DT_F64}, {"wide", DT_I32, DT_I64}};
  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
      for (int64_t off = 0; off < 4; off += 3) {
        Ten in, out;
        ten(&in, k1[k].in, 1, &lens[i], NULL, 0, false);
        out_at(&out, k1[k].out, 1, &lens[i], off);
        threads_and_reference(&L, k1[k].name, &in, 1, &out, 1, false);
        ten_free(&in), ten_free(&out);
      }
  const char *k2[] = {"pos", "half"};
  DType d2[] = {DT_BOOL, DT_F16};
  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
      for (int64_t off = 0; off < 32; off += 13) {
        int64_t s[2] = {2, lens[i]};
        Ten in, out;
        ten(&in, DT_F32, 2, s, NULL, 0, false);
        out_at(&out, d2[k], 2, s, off);
        threads_and_reference(&L, k2[k], &in, 1, &out, 1, false);
        ten_free(&in), ten_free(&out);
      }
  unbuild(&L);
}
END_TEST

START_TEST(streamed_equals_plain) {
  /* The same kernels with streaming off (a library whose runtime read
   * TDSL_STREAM_MIN_BYTES huge at its first call): bitwise the same. */
  Lib S, P;
  build_stream_pair(&S, &P, src, "chain");
  int64_t xs[4] = {3, 5, 13, 29}, cs[1] = {5};
  Ten in[3], o1, o2;
  ten(&in[0], DT_F32, 4, xs, NULL, 0, false);
  ten(&in[1], DT_F32, 1, cs, NULL, 0, false);
  ten(&in[2], DT_F32, 1, cs, NULL, 0, false);
  out_at(&o1, DT_F32, 4, xs, 1);
  out_at(&o2, DT_F32, 4, xs, 1);
  call_ok(&S, "chain", in, 3, &o1, 1);
  call_ok(&P, "chain", in, 3, &o2, 1);
  ck_assert(same_bytes(&o1, &o2));
  for (int k = 0; k < 3; k++) ten_free(&in[k]);
  ten_free(&o1), ten_free(&o2);
  unbuild(&S);
  unbuild(&P);
}
END_TEST

/* A nest flattened to its one parallel loop streams each thread's chunk
 * of that loop (cpu_emit_nest_range): chunks that start anywhere in an
 * output line, with the math layer's sin and cos (whose long reduction
 * is branched around, codegen/math.c) in the chunk loop. */
static const char flat[] =
    "kernel rope(x: f32[M, K], y: f32[M, K], t: f32[M, K]) -> f32[M, K] {\n"
    "  return x * t.cos() + y * t.sin()\n"
    "}\n";

START_TEST(flat_nest_streams) {
  ck_assert_int_ge(asm_count(flat, "", "movnt"), 1);
  Lib S, P;
  build_stream_pair(&S, &P, flat, "rope");
  const int64_t shapes[][2] = {{1, 5}, {3, 37}, {7, 20011}, {4, 65537}};
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
    for (int64_t off = 0; off < 3; off += 2) {
      Ten in[3], o1, o2;
      for (int k = 0; k < 3; k++) ten(&in[k], DT_F32, 2, shapes[i], NULL, 0, false);
      float *t = in[2].store; /* some angles past the short reduction's 6144 */
      for (int64_t e = 0; e < shapes[i][0] * shapes[i][1]; e += 97) t[e] = 1e5f + (float)e;
      out_at(&o1, DT_F32, 2, shapes[i], off);
      out_at(&o2, DT_F32, 2, shapes[i], off);
      threads_and_reference(&S, "rope", in, 3, &o1, 1, false);
      call_ok(&P, "rope", in, 3, &o2, 1);
      ck_assert(same_bytes(&o1, &o2));
      for (int k = 0; k < 3; k++) ten_free(&in[k]);
      ten_free(&o1), ten_free(&o2);
    }
  unbuild(&S);
  unbuild(&P);
}
END_TEST

START_TEST(threshold_from_the_cache) {
  /* Without the variable: half the last-level cache sysfs gives, or
   * never (INT64_MAX) where it gives none. */
  Lib L;
  unsetenv("TDSL_STREAM_MIN_BYTES");
  build(&L, src, "chain");
  int64_t (*min)(void) = (int64_t(*)(void))sym(&L, "tdsl_stream_min_bytes");
  int64_t v = min();
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
  if (f && access("/sys/devices/system/cpu/cpu0/cache/index4", F_OK) == 0) fclose(f), f = NULL;
  if (f) {
    long long kb = 0;
    char unit = 0;
    if (fscanf(f, "%lld%c", &kb, &unit) == 2 && unit == 'K') ck_assert(v == kb * 1024 / 2);
    fclose(f);
  }
  ck_assert(v > 0);
  unbuild(&L);
  setenv("TDSL_STREAM_MIN_BYTES", "0", 1);
}
END_TEST

static const char rows[] =
    "kernel ln(x: f32[M, K], g: f32[K], b: f32[K]) -> f32[M, K] {\n"
    "  return layer_norm(x, [K], g, b)\n"
    "}\n"
    "kernel rms(x: f32[M, K], w: f32[K]) -> f32[M, K] {\n"
    "  return x * rsqrt((x * x).mean(-1, keepdim=true) + 1e-6) * w\n"
    "}\n"
    "kernel sm(x: f32[M, K]) -> f32[M, K] {\n"
    "  return softmax(x, dim=-1)\n"
    "}\n";

START_TEST(row_groups_stream) {
  ck_assert_int_ge(asm_count(rows, "--kernel=ln", "movnt"), 1);
  ck_assert_int_ge(asm_count(rows, "--kernel=rms", "movnt"), 1);
  /* softmax's last nest scales the row in place */
  ck_assert_int_eq(asm_count(rows, "--kernel=sm", "movnt"), 0);
  Lib S, P;
  build_stream_pair(&S, &P, rows, "ln");
  const int64_t ks[] = {1, 7, 64, 100, 300};
  for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
    for (int64_t off = 0; off < 3; off += 2) {
      int64_t xs[2] = {37, ks[i]}, ws[1] = {ks[i]};
      Ten in[3], o1, o2;
      ten(&in[0], DT_F32, 2, xs, NULL, 0, false);
      ten(&in[1], DT_F32, 1, ws, NULL, 0, false);
      ten(&in[2], DT_F32, 1, ws, NULL, 0, false);
      out_at(&o1, DT_F32, 2, xs, off);
      out_at(&o2, DT_F32, 2, xs, off);
      threads_and_reference(&S, "ln", in, 3, &o1, 1, true);
      call_ok(&P, "ln", in, 3, &o2, 1);
      ck_assert(same_bytes(&o1, &o2));
      threads_and_reference(&S, "rms", in, 2, &o1, 1, true);
      call_ok(&P, "rms", in, 2, &o2, 1);
      ck_assert(same_bytes(&o1, &o2));
      threads_and_reference(&S, "sm", in, 1, &o1, 1, true);
      for (int k = 0; k < 3; k++) ten_free(&in[k]);
      ten_free(&o1), ten_free(&o2);
    }
  unbuild(&S);
  unbuild(&P);
}
END_TEST

static Suite *stream_suite(void) {
  Suite *s = suite_create("codegen_stream");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, code_streams);
  tcase_add_test(tc, streamed_equals_interpreter);
  tcase_add_test(tc, streamed_equals_plain);
  tcase_add_test(tc, row_groups_stream);
  tcase_add_test(tc, flat_nest_streams);
  tcase_add_test(tc, threshold_from_the_cache);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  setenv("TDSL_STREAM_MIN_BYTES", "0", 1); /* every eligible nest streams */
  SRunner *sr = srunner_create(stream_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
