/* test_codegen_isa.c — objects for every x86-64 (cpu/isa.c, runtime/isa.c):
 * a --target=x86-64 object carries each kernel for x86-64-v2, -v3 and
 * -v4 and picks one at its first call.  For each level this CPU has,
 * $TDSL_ISA forces it: K_isa() must name it, and a GEMM with an epilogue,
 * a softmax row group and an elementwise chain with the math layer must
 * match the reference interpreter at 1 and 2 threads.  A level the CPU
 * lacks, and a value that is no level, must make every call return
 * TDSL_E_ISA with a message (outputs untouched) and K_isa() NULL.
 * tdsl_cpu_level() must agree with the compiler's own view of the CPU
 * (__builtin_cpu_supports); single-variant targets ignore $TDSL_ISA; the
 * report lists the variants.  Each Check test runs in its own process,
 * so each resolves its variant afresh.
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources). */
#include "codegen_util.h"

static const char *SRC =
    "kernel mlp(x: f32[M, K], w: f32[K, N], b: f32[N]) -> f32[M, N] {\n"
    "  return relu(x @ w + b)\n"
    "}\n"
    "kernel sm(x: f32[R, C]) -> f32[R, C] {\n"
    "  e = (x - x.amax(-1, keepdim=true)).exp()\n"
    "  return e / e.sum(-1, keepdim=true)\n"
    "}\n"
    "kernel ew(x: f32[N], y: f32[N]) -> f32[N] {\n"
    "  return (x * y).tanh() + (y * y + 1.0).sqrt() * x.sigmoid()\n"
    "}\n";

/* The level the C compiler's runtime sees (libgcc/compiler-rt read CPUID
 * and XGETBV themselves): an independent check of tdsl_cpu_level. */
static int expected_level(void) {
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt") &&
        __builtin_cpu_supports("ssse3")))
    return 1;
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("bmi")))
    return 2;
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512cd")))
    return 3;
  return 4;
}

static int cpu_level(Lib *L) { return ((int (*)(void))sym(L, "tdsl_cpu_level"))(); }

static const char *isa_of(Lib *L, const char *k) {
  char name[64];
  snprintf(name, sizeof name, "%s_isa", k);
  return ((const char *(*)(void))sym(L, name))();
}

/* Every kernel of SRC against the interpreter, at 1 and 2 threads. */
static void run_all(Lib *L) {
  for (int th = 1; th <= 2; th++) {
    set_threads(L, th);
    int64_t sx[2] = {37, 70}, sw[2] = {70, 45}, sb[1] = {45}, so[2] = {37, 45};
    Ten in[3], out[1];
    ten(&in[0], DT_F32, 2, sx, NULL, 1, false);
    ten(&in[1], DT_F32, 2, sw, NULL, 0, false);
    ten(&in[2], DT_F32, 1, sb, NULL, 0, true);
    out_ten(&out[0], DT_F32, 2, so);
    run_and_compare_k(L, "mlp", in, 3, out, 1, false, 70);
    for (int i = 0; i < 3; i++) ten_free(&in[i]);
    ten_free(&out[0]);

    int64_t ss[2] = {9, 131};
    ten(&in[0], DT_F32, 2, ss, NULL, 3, false);
    out_ten(&out[0], DT_F32, 2, ss);
    run_and_compare(L, "sm", in, 1, out, 1, true);
    ten_free(&in[0]), ten_free(&out[0]);

    int64_t se[1] = {1003};
    ten(&in[0], DT_F32, 1, se, NULL, 0, false);
    ten(&in[1], DT_F32, 1, se, NULL, 5, false);
    out_ten(&out[0], DT_F32, 1, se);
    run_and_compare(L, "ew", in, 2, out, 1, false);
    ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]);
  }
  set_threads(L, 0);
}

/* A call of ew must fail with TDSL_E_ISA, its output untouched, and every
 * K_isa() be NULL; the message must contain `what`. */
static void refused(Lib *L, const char *what) {
  int64_t se[1] = {20};
  Ten in[2], out[1];
  ten(&in[0], DT_F32, 1, se, NULL, 0, false);
  ten(&in[1], DT_F32, 1, se, NULL, 0, false);
  out_ten(&out[0], DT_F32, 1, se);
  void *a[3] = {&in[0].t, &in[1].t, &out[0].t};
  int rc = call(sym(L, "ew"), a, 3);
  const char *msg = ((const char *(*)(void))sym(L, "tdsl_last_error"))();
  ck_assert_int_eq(rc, TDSL_E_ISA);
  ck_assert_msg(strstr(msg, what) != NULL, "message '%s' lacks '%s'", msg, what);
  ck_assert(untouched(&out[0]));
  ck_assert_ptr_null(isa_of(L, "ew"));
  ck_assert_ptr_null(isa_of(L, "mlp"));
  ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]);
}

/* _i = 2, 3, 4: TDSL_ISA=v<_i>. */
START_TEST(forced_level) {
  char v[8];
  snprintf(v, sizeof v, "v%d", _i);
  ck_assert_int_eq(setenv("TDSL_ISA", v, 1), 0);
  Lib L;
  build_flags(&L, SRC, "ew", "-O2 --target=x86-64");
  int cpu = cpu_level(&L);
  if (_i > cpu) {
    char what[64];
    snprintf(what, sizeof what, "TDSL_ISA=%s asks for x86-64-v%d", v, _i);
    refused(&L, what);
    fprintf(stderr, "test_codegen_isa: x86-64-v%d refused as expected (this CPU: v%d)\n", _i, cpu);
  } else {
    char want[16];
    snprintf(want, sizeof want, "x86-64-v%d", _i);
    ck_assert_str_eq(isa_of(&L, "mlp"), want);
    run_all(&L);
    ck_assert_str_eq(isa_of(&L, "mlp"), want);
    ck_assert_str_eq(isa_of(&L, "sm"), want);
    ck_assert_str_eq(isa_of(&L, "ew"), want);
  }
  unbuild(&L);
}
END_TEST

/* Unset (or empty): the CPU's level, as the C compiler's runtime sees it. */
START_TEST(best_level) {
  ck_assert_int_eq(setenv("TDSL_ISA", "", 1), 0);
  Lib L;
  build_flags(&L, SRC, "ew", "-O2 --target=x86-64");
  int cpu = cpu_level(&L);
  ck_assert_int_eq(cpu, expected_level());
  ck_assert_int_eq(((int (*)(void))sym(&L, "tdsl_isa_level"))(), cpu);
  char want[16];
  snprintf(want, sizeof want, "x86-64-v%d", cpu);
  run_all(&L);
  ck_assert_str_eq(isa_of(&L, "ew"), want);
  ck_assert_str_eq(isa_of(&L, "sm"), want);
  unbuild(&L);
}
END_TEST

START_TEST(bad_value) {
  ck_assert_int_eq(setenv("TDSL_ISA", "avx2", 1), 0);
  Lib L;
  build_flags(&L, SRC, "ew", "-O2 --target=x86-64");
  refused(&L, "TDSL_ISA='avx2' is not an ISA level");
  ck_assert_int_eq(((int (*)(void))sym(&L, "tdsl_last_error_code"))(), TDSL_E_ISA);
  unbuild(&L);
}
END_TEST

/* One variant: $TDSL_ISA does not apply; K_isa names the target. */
START_TEST(single_variant) {
  ck_assert_int_eq(setenv("TDSL_ISA", "nonsense", 1), 0);
  const char *flags[2] = {"-O2 --target=x86-64-v2", "-O1"};
  for (int t = 0; t < 2; t++) {
    Lib L;
    build_flags(&L, SRC, "ew", flags[t]);
    run_all(&L);
    const char *isa = isa_of(&L, "ew");
    ck_assert_ptr_nonnull(isa);
    if (t == 0) ck_assert_str_eq(isa, "x86-64-v2");
    else ck_assert_int_gt((int)strlen(isa), 0); /* the host CPU's name */
    unbuild(&L);
  }
}
END_TEST

/* The report names the variants; the object holds each kernel's three
 * variants behind one public entry point. */
START_TEST(report_and_symbols) {
  char dir[] = "/tmp/tdsl_isa_XXXXXX", path[64], cmd[512];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/k.tdsl", dir);
  write_text(path, SRC);
  snprintf(cmd, sizeof cmd,
           "%s %s --target=x86-64 --emit=report -o - | grep -q '^ISA variants built: "
           "x86-64-v2 x86-64-v3 x86-64-v4 '",
           TDSL_TDSLC, path);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd,
           "%s %s --target=x86-64 --emit=report-json -o - | grep -q '\"isa_variants\": "
           "\\[\"x86-64-v2\", \"x86-64-v3\", \"x86-64-v4\"\\]'",
           TDSL_TDSLC, path);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s %s --target=x86-64-v3 --emit=report -o - | grep -q 'ISA variants'",
           TDSL_TDSLC, path);
  ck_assert_int_ne(sh(cmd), 0);
  snprintf(cmd, sizeof cmd,
           "%s %s --target=x86-64 -o %s/k.o && nm %s/k.o > %s/nm.txt && "
           "grep -q ' T sm$' %s/nm.txt && grep -q ' [tT] sm__v2$' %s/nm.txt && "
           "grep -q ' [tT] sm__v3$' %s/nm.txt && grep -q ' [tT] sm__v4$' %s/nm.txt && "
           "grep -q ' T sm_isa$' %s/nm.txt",
           TDSL_TDSLC, path, dir, dir, dir, dir, dir, dir, dir, dir);
  ck_assert_int_eq(sh(cmd), 0);
  /* One module (TDSL_JOBS=1): the variants are local symbols; split
   * across threads they are hidden globals, never exported by --emit=so. */
  snprintf(cmd, sizeof cmd,
           "TDSL_JOBS=1 %s %s --target=x86-64 -o %s/k.o && nm %s/k.o | grep -q ' t sm__v3$' && "
           "TDSL_JOBS=2 %s %s --target=x86-64 --emit=so -o %s/k.so && "
           "! nm -D %s/k.so | grep -q 'sm__v' && nm -D %s/k.so | grep -q ' T sm_isa$'",
           TDSL_TDSLC, path, dir, dir, TDSL_TDSLC, path, dir, dir, dir);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  sh(cmd);
}
END_TEST

int main(void) {
  Suite *s = suite_create("isa");
  TCase *tc = tcase_create("variants");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, forced_level, 2, 5);
  tcase_add_test(tc, best_level);
  tcase_add_test(tc, bad_value);
  tcase_add_test(tc, single_variant);
  tcase_add_test(tc, report_and_symbols);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int nf = srunner_ntests_failed(r);
  srunner_free(r);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
