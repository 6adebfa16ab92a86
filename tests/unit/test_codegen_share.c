/* test_codegen_share.c — the GEMM helper functions of cpu/gemm.c are
 * emitted once per module and configuration (dtypes, operand kinds,
 * bias, vector width) and shared by every matmul / conv2d with that
 * configuration, whatever their sizes, strides and offsets (those live
 * in the run-time context); their loops carry
 * llvm.loop.vectorize.enable = false (compile time: gemm.c's
 * no_vectorize).  Checks the emitted LLVM IR for both, and that
 * kernels whose matmuls share the functions still compute what the
 * reference interpreter computes; and which functions code generation
 * treats as cold (cold_functions).
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources). */
#include "codegen_util.h"

/* Two f32 matmuls of different shapes and strides (one transposed
 * operand), one f64 matmul, and an f32 matmul again after it. */
static const char *SRC =
    "kernel two(x: f32[N, D], w1: f32[H, D], w2: f32[H, C], y: f64[N, D], z: f64[D, C]) "
    "-> (f32[N, C], f64[N, C], f32[N, H]) {\n"
    "  h = (x @ w1.T).relu()\n"
    "  return h @ w2, y @ z, x @ w1.T\n}\n";

/* Runs tdslc --emit=llvm on src and returns the IR text (malloc'd). */
static char *emit_llvm(const char *dir, const char *src, const char *flags) {
  char path[128], cmd[512];
  snprintf(path, sizeof path, "%s/k.tdsl", dir);
  write_text(path, src);
  snprintf(cmd, sizeof cmd, "%s %s/k.tdsl -o %s/k.ll --emit=llvm %s", TDSL_TDSLC, dir, dir, flags);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(path, sizeof path, "%s/k.ll", dir);
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(text);
  ck_assert_int_eq((long)fread(text, 1, (size_t)n, f), n);
  text[n] = 0;
  fclose(f);
  return text;
}

/* Lines that start with `define`, contain `what` and (attr not NULL)
 * name an attribute group that holds `attr`. */
static int count_defines_with(const char *ir, const char *what, const char *attr) {
  int n = 0;
  for (const char *l = ir; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    const char *end = strchr(l, '\n'), *hash;
    size_t len = end ? (size_t)(end - l) : strlen(l);
    char line[512], group[64];
    snprintf(line, sizeof line, "%.*s", (int)(len < 511 ? len : 511), l);
    if (strncmp(line, "define ", 7) || !strstr(line, what)) continue;
    if (!attr) {
      n++;
      continue;
    }
    if (!(hash = strrchr(line, '#'))) continue;
    snprintf(group, sizeof group, "\nattributes %.*s = {", (int)strcspn(hash, " {"), hash);
    const char *g = strstr(ir, group), *gend = g ? strchr(g + 1, '\n') : NULL;
    const char *a = g ? strstr(g, attr) : NULL;
    if (a && (!gend || a < gend)) n++;
  }
  return n;
}

/* Lines that start with `define` and contain `what`. */
static int count_defines(const char *ir, const char *what) {
  return count_defines_with(ir, what, NULL);
}

START_TEST(one_set_per_configuration) {
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/tdsl_share_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  /* -O0: the helpers stay separate functions (no inlining) */
  const char *targets[2] = {"-O0", "-O0 --target=x86-64-v2"};
  for (int t = 0; t < 2; t++) {
    char *ir = emit_llvm(dir, SRC, targets[t]);
    /* three f32 matmuls share one set, the f64 matmul has its own */
    ck_assert_int_eq(count_defines(ir, ".block_body("), 2);
    ck_assert_int_eq(count_defines(ir, ".packb_body("), 2);
    ck_assert_int_eq(count_defines(ir, ".pack_a("), 2);
    ck_assert_int_eq(count_defines(ir, ".pack_b("), 2);
    ck_assert_ptr_nonnull(strstr(ir, "!{!\"llvm.loop.vectorize.enable\", i1 false}"));
    free(ir);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  sh(cmd);
}
END_TEST


/* At -O2 the entry of a kernel without loops is generated at LLVM's
 * lowest level (optnone, machine.c cold_codegen); the GEMM's functions
 * are not (its driver's loops pack a short A, measured slower that way),
 * nor is an entry that keeps a loop (a conv2d's bias packed over a
 * channel count known at run time); at -O0 nothing is marked. */
START_TEST(cold_functions) {
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/tdsl_share_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char *ir = emit_llvm(dir, SRC, "-O2");
  ck_assert_int_eq(count_defines_with(ir, "@two(", "optnone"), 1);
  ck_assert_int_ge(count_defines(ir, ".run("), 1);
  ck_assert_int_ge(count_defines(ir, ".block_body("), 1);
  ck_assert_int_eq(count_defines_with(ir, "gemm.", "optnone"), 0);
  free(ir);
  ir = emit_llvm(dir,
                 "kernel c(x: f32[N, 8, 10, 10], w: f32[M, 8, 3, 3], b: f32[M]) -> f32[N, M, 8, 8] {\n"
                 "  return conv2d(x, w, b)\n}\n",
                 "-O2");
  ck_assert_int_eq(count_defines(ir, "@c("), 1);
  ck_assert_int_eq(count_defines_with(ir, "@c(", "optnone"), 0);
  free(ir);
  ir = emit_llvm(dir, SRC, "-O0");
  ck_assert_ptr_null(strstr(ir, "optnone"));
  free(ir);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  sh(cmd);
}
END_TEST

/* The shared functions compute each matmul with its own sizes and
 * strides: compare every result with the interpreter, on the host's
 * tiles and on SSE2's, at sizes off the register tiles. */
START_TEST(shared_functions_compute_each_matmul) {
  static const int64_t sz[][4] = {{5, 64, 128, 10}, {1, 3, 7, 2}, {33, 17, 40, 29}};
  for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
    int64_t N = sz[s][0], D = sz[s][1], H = sz[s][2], C = sz[s][3];
    Lib L;
    build(&L, SRC, "two");
    int64_t sx[2] = {N, D}, sw1[2] = {H, D}, sw2[2] = {H, C}, sz2[2] = {D, C};
    int64_t o0[2] = {N, C}, o2[2] = {N, H};
    Ten in[5], out[3];
    ten(&in[0], DT_F32, 2, sx, NULL, 1, false);
    ten(&in[1], DT_F32, 2, sw1, NULL, 0, false);
    ten(&in[2], DT_F32, 2, sw2, NULL, 2, false);
    ten(&in[3], DT_F64, 2, sx, NULL, 0, false);
    ten(&in[4], DT_F64, 2, sz2, NULL, 0, false);
    out_ten(&out[0], DT_F32, 2, o0);
    out_ten(&out[1], DT_F64, 2, o0);
    out_ten(&out[2], DT_F32, 2, o2);
    run_and_compare(&L, "two", in, 5, out, 3, true);
    for (int i = 0; i < 5; i++) ten_free(&in[i]);
    for (int i = 0; i < 3; i++) ten_free(&out[i]);
    ((void (*)(void))sym(&L, "tdsl_shutdown"))();
    unbuild(&L);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_share");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, one_set_per_configuration);
  tcase_add_test(tc, shared_functions_compute_each_matmul);
  tcase_add_test(tc, cold_functions);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed != 0;
}
