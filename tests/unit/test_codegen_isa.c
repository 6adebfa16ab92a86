/* test_codegen_isa.c — objects for every x86-64 (cpu/isa.c, runtime/isa.c):
 * a --target=x86-64 object carries each kernel for x86-64-v2, -v3 and
 * -v4 (and with AVX-VNNI, AVX512-VNNI, AVX512-BF16 where its int8 or bf16
 * products use them: "extension variants" below, each setting of
 * $TDSL_ISA against the interpreter) and picks one at its first call.  For each level this CPU has,
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

/* ---- extension variants ------------------------------------------------------
 * Kernels whose products take dot-product extensions carry a variant of
 * v3 and/or v4 with them (cpu/isa.c cpu_isa_use): int8/i16 operands
 * AVX-VNNI on v3 and AVX512-VNNI on v4, bf16 operands AVX512-BF16 on v4;
 * a kernel with both has v4 with both. */
static const char *LOWP =
    "kernel qmm(a: i8[M, K], b: i8[K, N]) -> i32[M, N] {\n"
    "  return a.to(i32) @ b.to(i32)\n"
    "}\n"
    "kernel bmm(a: bf16[M, K], b: bf16[K, N]) -> bf16[M, N] {\n"
    "  return a @ b\n"
    "}\n"
    "kernel mixed(a: i8[M, K], b: i8[K, N], x: bf16[M, K], y: bf16[K, N]) -> (i32[M, N], "
    "bf16[M, N]) {\n"
    "  return a.to(i32) @ b.to(i32), x @ y\n"
    "}\n"
    "kernel qconv(x: u8[N, C, H, W] channels_last, w: i8[O, C, 3, 3]) -> i32[N, O, H, W] "
    "channels_last {\n"
    "  return conv2d(x.to(i32), w.to(i32), padding=1)\n"
    "}\n"
    "kernel plain(x: f32[M, K], w: f32[K, N]) -> f32[M, N] {\n"
    "  return x @ w\n"
    "}\n";

#define X_VNNI512 1u /* <tdsl/runtime.h> TDSL_ISA_AVX512_VNNI */
#define X_BF16 2u
#define X_AVXVNNI 4u

static const struct {
  const char *name;
  unsigned v3, v4; /* the extensions of its v3 and v4 variants */
} lowp_kernels[] = {{"qmm", X_AVXVNNI, X_VNNI512},
                    {"bmm", 0, X_BF16},
                    {"mixed", X_AVXVNNI, X_VNNI512 | X_BF16},
                    {"qconv", X_AVXVNNI, X_VNNI512},
                    {"plain", 0, 0}};

/* The settings of $TDSL_ISA tried ("": unset), with the level and the
 * extensions each names (unset: the CPU's, filled in at run time). */
static const struct {
  const char *env;
  int level;
  unsigned ext;
} settings[] = {{"", 0, 0},
                {"v4", 4, 0},
                {"x86-64-v4+avx512vnni", 4, X_VNNI512},
                {"v4+avx512bf16", 4, X_BF16},
                {"v4+avx512bf16+avx512vnni", 4, X_VNNI512 | X_BF16},
                {"v4+avx512vnni+avx512bf16", 4, X_VNNI512 | X_BF16},
                {"v3+avxvnni", 3, X_AVXVNNI},
                {"v3", 3, 0},
                {"v2", 2, 0}};

/* The CPU's extensions as the C compiler's runtime sees them. */
static unsigned expected_extensions(int level) {
  __builtin_cpu_init();
  unsigned e = 0;
  if (level >= 4 && __builtin_cpu_supports("avx512vnni")) e |= X_VNNI512;
  if (level >= 4 && __builtin_cpu_supports("avx512bf16")) e |= X_BF16;
  if (level >= 3 && __builtin_cpu_supports("avxvnni")) e |= X_AVXVNNI;
  return e;
}

/* The variant kernel i runs at level lv with extensions ext: its level's
 * extension variant when ext has all it needs, else the level's own. */
static void expected_variant(int i, int lv, unsigned ext, char *out, size_t n) {
  unsigned need = lv == 4 ? lowp_kernels[i].v4 : lv == 3 ? lowp_kernels[i].v3 : 0;
  int k = snprintf(out, n, "x86-64-v%d", lv);
  if (!need || (ext & need) != need) return;
  if (need & X_AVXVNNI) k += snprintf(out + k, n - (size_t)k, "+avxvnni");
  if (need & X_BF16) k += snprintf(out + k, n - (size_t)k, "+avx512bf16");
  if (need & X_VNNI512) snprintf(out + k, n - (size_t)k, "+avx512vnni");
}

/* LOWP built once, in the runner's process (an unchecked fixture): each
 * test runs in a process of its own forked from it, where no kernel has
 * resolved its variant yet. */
static Lib lowp;
static void lowp_build(void) {
  ck_assert_int_eq(unsetenv("TDSL_ISA"), 0);
  build_flags(&lowp, LOWP, "qmm", "-O2 --target=x86-64");
}
static void lowp_unbuild(void) { unbuild(&lowp); }

/* Every LOWP kernel against the interpreter, at 1 and 2 threads. */
static void run_lowp(Lib *L) {
  for (int th = 1; th <= 2; th++) {
    set_threads(L, th);
    int64_t sa[2] = {19, 75}, sb[2] = {75, 37}, so[2] = {19, 37};
    Ten in[4], out[2];
    ten(&in[0], DT_I8, 2, sa, NULL, 0, false);
    ten(&in[1], DT_I8, 2, sb, NULL, 2, false);
    out_ten(&out[0], DT_I32, 2, so);
    run_and_compare(L, "qmm", in, 2, out, 1, false);
    ten_free(&out[0]);
    ten(&in[2], DT_BF16, 2, sa, NULL, 0, false);
    ten(&in[3], DT_BF16, 2, sb, NULL, 1, false);
    out_ten(&out[0], DT_BF16, 2, so);
    run_and_compare_k(L, "bmm", &in[2], 2, out, 1, false, 75);
    ten_free(&out[0]);
    out_ten(&out[0], DT_I32, 2, so);
    out_ten(&out[1], DT_BF16, 2, so);
    run_and_compare_k(L, "mixed", in, 4, out, 2, false, 75);
    for (int i = 0; i < 4; i++) ten_free(&in[i]);
    ten_free(&out[0]), ten_free(&out[1]);

    /* channels-last [2, 21, 9, 11] (strides N, C, H, W) and [13, 21, 3, 3] */
    int64_t sx[4] = {2, 21, 9, 11}, cx[4] = {21 * 9 * 11, 1, 11 * 21, 21};
    int64_t sw[4] = {13, 21, 3, 3}, sy[4] = {2, 13, 9, 11};
    ten(&in[0], DT_U8, 4, sx, cx, 0, false);
    ten(&in[1], DT_I8, 4, sw, NULL, 0, false);
    Ten y;
    int64_t cy[4] = {13 * 9 * 11, 1, 11 * 13, 13};
    ten(&y, DT_I32, 4, sy, cy, 0, false);
    memset(y.store, 0x5A, y.bytes);
    run_and_compare(L, "qconv", in, 2, &y, 1, false);
    ten_free(&in[0]), ten_free(&in[1]), ten_free(&y);

    int64_t fx[2] = {7, 33}, fw[2] = {33, 20}, fo[2] = {7, 20};
    ten(&in[0], DT_F32, 2, fx, NULL, 0, false);
    ten(&in[1], DT_F32, 2, fw, NULL, 0, false);
    out_ten(&out[0], DT_F32, 2, fo);
    run_and_compare_k(L, "plain", in, 2, out, 1, false, 33);
    ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]);
  }
  set_threads(L, 0);
}

/* _i: settings[_i].  Where the CPU has what the setting names, each
 * kernel must run the variant the resolver's rule gives (checked from
 * the table above, not from the compiler) and match the interpreter;
 * where it lacks it, every call is refused. */
START_TEST(extension_variant) {
  ck_assert_int_eq(setenv("TDSL_ISA", settings[_i].env, 1), 0);
  Lib *L = &lowp;
  int cpu = cpu_level(L);
  unsigned cext = ((unsigned (*)(void))sym(L, "tdsl_cpu_extensions"))();
  ck_assert_uint_eq(cext, expected_extensions(cpu));
  int lv = settings[_i].env[0] ? settings[_i].level : cpu;
  unsigned ext = settings[_i].env[0] ? settings[_i].ext : cext;
  int got_ext = ((int (*)(void))sym(L, "tdsl_isa_extensions"))();
  if (lv > cpu || (ext & ~cext)) {
    ck_assert_int_eq(got_ext, TDSL_E_ISA);
    ck_assert_ptr_null(isa_of(L, "qmm"));
    fprintf(stderr, "test_codegen_isa: TDSL_ISA=%s refused as expected (this CPU: v%d, "
            "extensions %#x)\n", settings[_i].env, cpu, cext);
    return;
  }
  ck_assert_int_eq(got_ext, (int)ext);
  run_lowp(L);
  for (size_t i = 0; i < sizeof lowp_kernels / sizeof *lowp_kernels; i++) {
    char want[64];
    expected_variant((int)i, lv, ext, want, sizeof want);
    ck_assert_str_eq(isa_of(L, lowp_kernels[i].name), want);
  }
}
END_TEST

/* Malformed extension settings are refused, with the reason. */
START_TEST(extension_refused) {
  static const char *const bad[][2] = {
      {"v4+amx", "'amx' is not an extension"},
      {"v3+avx512vnni", "avx512vnni needs x86-64-v4"},
      {"v4+", "'' is not an extension"},
      {"v4avx512vnni", "is not an ISA level"}};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(setenv("TDSL_ISA", bad[i][0], 1), 0);
    Lib L;
    build_flags(&L, SRC, "ew", "-O2 --target=x86-64");
    if (cpu_level(&L) < 4) { /* "v4..." is refused for the level first */
      unbuild(&L);
      continue;
    }
    refused(&L, bad[i][1]);
    unbuild(&L);
  }
}
END_TEST

/* The report names the extension variants and, at each product, why;
 * the variants' code holds the extension's instructions and the plain
 * levels' does not. */
START_TEST(extension_report_and_code) {
  char dir[] = "/tmp/tdsl_isa_XXXXXX", path[64], cmd[1024];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/k.tdsl", dir);
  write_text(path, LOWP);
  snprintf(cmd, sizeof cmd,
           "%s %s --target=x86-64 --emit=report -o - | grep -q '^ISA variants built: "
           "x86-64-v2 x86-64-v3 x86-64-v3+avxvnni x86-64-v4 x86-64-v4+avx512vnni "
           "x86-64-v4+avx512bf16 x86-64-v4+avx512bf16+avx512vnni '",
           TDSL_TDSLC, path);
  ck_assert_int_eq(sh(cmd), 0);
  /* one decision per product: qmm, bmm, mixed's two, qconv */
  snprintf(cmd, sizeof cmd,
           "test $(%s %s --target=x86-64 --emit=report-json -o - | "
           "grep -c '\"pass\": \"codegen\", \"kind\": \"isa-variant\"') = 5 && "
           "%s %s --target=x86-64 --emit=report -o - | "
           "grep -q 'k.tdsl:5:12: codegen: isa-variant: matmul of bf16 into f32: built also for "
           "x86-64-v4+avx512bf16'",
           TDSL_TDSLC, path, TDSL_TDSLC, path);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s %s --target=x86-64-v4 --emit=report -o - | grep -q codegen",
           TDSL_TDSLC, path);
  ck_assert_int_ne(sh(cmd), 0);
  /* The assembly, one module: each function's instructions after its
   * .type line (private ones' labels start with .L, as blocks' do); the
   * dot products only in their variants' functions. */
  snprintf(cmd, sizeof cmd,
           "TDSL_JOBS=1 %s %s --target=x86-64 --emit=asm -o %s/k.s && awk '"
           "/\\.type.*@function/ {f = $2} "
           "/vpdpbusd|vpdpwssd/ && f !~ /(__v4_vnni|__v4_bf16_vnni|__v3_avxvnni)/ {print \"vnni in \" f; bad = 1} "
           "/vdpbf16ps/ && f !~ /(__v4_bf16|__v4_bf16_vnni)/ {print \"bf16 in \" f; bad = 1} "
           "/vdpbf16ps/ {b++} /vpdpbusd|vpdpwssd/ {v++} "
           "END {exit bad || !b || !v}' %s/k.s",
           TDSL_TDSLC, path, dir, dir);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd,
           "nm %s/k.o > %s/nm.txt && "
           "grep -q ' [tT] qmm__v4_vnni$' %s/nm.txt && grep -q ' [tT] qmm__v3_avxvnni$' %s/nm.txt && "
           "grep -q ' [tT] bmm__v4_bf16$' %s/nm.txt && grep -q ' [tT] mixed__v4_bf16_vnni$' %s/nm.txt && "
           "! grep -q ' [tT] bmm__v3_avxvnni$' %s/nm.txt && ! grep -q ' [tT] plain__v4_' %s/nm.txt",
           lowp.dir, dir, dir, dir, dir, dir, dir, dir);
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
  TCase *te = tcase_create("extensions");
  tcase_set_timeout(te, 300);
  tcase_add_unchecked_fixture(te, lowp_build, lowp_unbuild);
  tcase_add_loop_test(te, extension_variant, 0, (int)(sizeof settings / sizeof *settings));
  tcase_add_test(te, extension_refused);
  tcase_add_test(te, extension_report_and_code);
  suite_add_tcase(s, te);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int nf = srunner_ntests_failed(r);
  srunner_free(r);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
