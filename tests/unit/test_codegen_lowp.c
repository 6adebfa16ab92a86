/* test_codegen_lowp.c — low-precision GEMM compute (cpu/gemm_lowp.c,
 * cpu/gemm_quad.c):
 * i8/u8/i16 matmuls through K pairs (vpmaddwd) with i32 accumulation,
 * compiled for the host, --target=x86-64 (SSE2, 128-bit) and
 * --target=x86-64-v3 (AVX2), at sizes that are not multiples of the
 * register tiles or of the pair (odd K), K = 0 and 1, K past the K block,
 * full-range i16 values whose sums wrap, at 1 to 3 threads (bitwise
 * equal) and exactly equal to the reference interpreter; f16, bf16 and
 * i8 outputs whose sums span several K blocks (partial sums in scratch);
 * 8-bit operand pairs (i8/u8 x i8/u8) through K quads (vpdpbusd on a
 * VNNI host) or pairs, at K not a multiple of 4, strided operands and
 * extreme values, exactly as the interpreter.
 * The assembly:
 * vpmaddwd for x86-64-v3 and -v4 (zmm), the host's choice as its features
 * say (vpdpbusd with VNNI, else vpmaddwd), vcvtph2ps (F16C) and no libcall
 * for f16 on x86-64-v3; and, through the GEMM emitter's API (gemm.h) for
 * CPUs this machine need not have, vpdpwssd (i16) and vpdpbusd (i8) with
 * AVX512-VNNI (zmm) and AVX-VNNI ({vex} ymm), vdpbf16ps with AVX512-BF16.
 * The direct conv's K-pair path (cpu/conv_lowp.c): i8/u8/i16 and bf16
 * channels-last convs at odd and even channel counts, output channels
 * past the register block (100: border pixels by two and four channel
 * blocks, conv_direct.c), stride, padding, bias, wrapping i16, exactly
 * as the interpreter (integers) at 1 to 3 threads; its instructions
 * (vpmaddwd on x86-64-v3; vpdpwssd, {vex} vpdpwssd and vdpbf16ps through
 * conv.h for CPUs with VNNI and BF16).
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources), the CPU
 * backend's gemm.h, LLVM's target machine. */
#include "codegen_util.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "cpu/conv.h"
#include "cpu/gemm.h"
#include "loops/loops.h"

static const char *const TARGETS[] = {"", "--target=x86-64", "--target=x86-64-v3"};

static const char *MM =
    "kernel q(a: i8[M, K], b: i8[K, N]) -> i32[M, N] { return a.to(i32) @ b.to(i32) }\n"
    "kernel p(a: i8[M, K], b: i8[K, N]) -> i8[M, N] { return a @ b }\n"
    "kernel u(a: u8[M, K], b: u8[K, N]) -> u8[M, N] { return a @ b }\n"
    "kernel s(a: i16[M, K], b: i16[K, N]) -> i32[M, N] { return a.to(i32) @ b.to(i32) }\n"
    "kernel t(a: i16[M, K], b: i16[N, K]) -> i16[M, N] { return a @ b.t() }\n";

/* Overwrites an i16 tensor's storage with values over the whole range
 * (-32768 included), so i32 sums wrap. */
static void full_range_i16(Ten *x) {
  int16_t *p = x->store;
  for (size_t i = 0; i < x->bytes / 2; i++) p[i] = (int16_t)(int)(urand() * 65536 - 32768);
  if (x->bytes >= 2) p[0] = INT16_MIN;
}

START_TEST(pairs_match_interpreter) {
  static const int64_t sz[][3] = {{1, 1, 1}, {7, 17, 33}, {100, 33, 7}, {33, 100, 17},
                                  {17, 0, 5}, {65, 301, 70}, {13, 513, 40}, {0, 5, 3},
                                  {6, 2, 16}, {12, 3, 32}};
  static const struct { const char *k; DType a, o; bool bt; } ks[] = {
      {"q", DT_I8, DT_I32, false}, {"p", DT_I8, DT_I8, false}, {"u", DT_U8, DT_U8, false},
      {"s", DT_I16, DT_I32, false}, {"t", DT_I16, DT_I16, true}};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, MM, "q", TARGETS[t]);
    for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
      for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
        int64_t sa[2] = {sz[i][0], sz[i][1]}, sb[2] = {sz[i][1], sz[i][2]};
        int64_t sbt[2] = {sz[i][2], sz[i][1]}, so[2] = {sz[i][0], sz[i][2]};
        Ten in[2], out[1];
        ten(&in[0], ks[k].a, 2, sa, NULL, 3, false);
        ten(&in[1], ks[k].a, 2, ks[k].bt ? sbt : sb, NULL, 0, i % 2);
        if (ks[k].a == DT_I16) full_range_i16(&in[0]), full_range_i16(&in[1]);
        out_ten(&out[0], ks[k].o, 2, so);
        threads_and_reference(&L, ks[k].k, in, 2, out, 1, false);
        ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]);
      }
    unbuild(&L);
  }
}
END_TEST

/* ---- the K-quad path (cpu/gemm_quad.c, vpdpbusd) --------------------------
 * i8 x i8, u8 x i8 and i8 x u8 matmuls on the host take K quads where it
 * has VNNI (this machine's Zen 5 does), the K-pair path elsewhere (and
 * u8 x u8 everywhere): every target's results must be the interpreter's,
 * bit for bit, for K not a multiple of 4 (1, 2, 3 and a last K block of
 * 65), operands whose lanes or K indices are strided (the scalar
 * packing), an i8 output (partial sums), and the extremes: every byte
 * -128 (the flipped A's 0 against B's -128), 127, 255 and their mix. */
static const char *QUADS =
    "kernel ss(a: i8[M, K], b: i8[K, N]) -> i32[M, N] { return a.to(i32) @ b.to(i32) }\n"
    "kernel us(a: u8[M, K], b: i8[K, N]) -> i32[M, N] { return a.to(i32) @ b.to(i32) }\n"
    "kernel su(a: i8[M, K], b: u8[K, N]) -> i32[M, N] { return a.to(i32) @ b.to(i32) }\n"
    "kernel uu(a: u8[M, K], b: u8[K, N]) -> i32[M, N] { return a.to(i32) @ b.to(i32) }\n"
    "kernel bt(a: i8[M, K], b: i8[N, K]) -> i8[M, N] { return a @ b.t() }\n"
    "kernel at(a: i8[K, M], b: u8[K, N]) -> i32[M, N] { return a.t().to(i32) @ b.to(i32) }\n";

/* Fills an i8/u8 tensor's storage: mode 0 random over the whole range,
 * 1 the least value, 2 the greatest, 3 a random mix of the two. */
static void fill_bytes(Ten *x, DType d, int mode) {
  int lo = d == DT_U8 ? 0 : -128, hi = d == DT_U8 ? 255 : 127;
  for (size_t i = 0; i < x->bytes; i++) {
    int v = mode == 0 ? lo + (int)(urand() * 256) : mode == 1 ? lo : mode == 2 ? hi : urand() < 0.5 ? lo : hi;
    ((uint8_t *)x->store)[i] = (uint8_t)v;
  }
}

START_TEST(quads_match_interpreter) {
  /* M and N past GEMM_SMALL_MAX (the packed path; N >= 2 M: B packed
   * by the row blocks themselves), and a short one (the small path) */
  static const int64_t sz[][3] = {{33, 1, 33},   {40, 2, 70},   {37, 3, 65},    {36, 4, 96},
                                  {50, 5, 64},   {34, 63, 130}, {60, 65, 97},   {100, 130, 50},
                                  {35, 1601, 72}, {40, 0, 39},  {5, 7, 3},
                                  /* several K blocks at 2 and 3 threads: B's whole K
                                   * packed first, then row blocks taken one at a time;
                                   * A's whole K first, then groups of B panels */
                                  {120, 800, 90}, {40, 900, 400}};
  static const struct { const char *k; DType a, b, o; bool at, bt; } ks[] = {
      {"ss", DT_I8, DT_I8, DT_I32, false, false}, {"us", DT_U8, DT_I8, DT_I32, false, false},
      {"su", DT_I8, DT_U8, DT_I32, false, false}, {"uu", DT_U8, DT_U8, DT_I32, false, false},
      {"bt", DT_I8, DT_I8, DT_I8, false, true},   {"at", DT_I8, DT_U8, DT_I32, true, false}};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, QUADS, "ss", TARGETS[t]);
    for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
      for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
        for (int f = 0; f < 6; f++) {
          /* A's and B's fills: random, both least, both greatest, least x
           * greatest and back, mixed; the extremes on the shorter K */
          static const int fa[6] = {0, 1, 2, 1, 2, 3}, fb[6] = {0, 1, 2, 2, 1, 3};
          if (f && sz[i][1] > 200) continue;
          int64_t M = sz[i][0], K = sz[i][1], N = sz[i][2];
          int64_t sa[2] = {ks[k].at ? K : M, ks[k].at ? M : K}, sb[2] = {ks[k].bt ? N : K, ks[k].bt ? K : N};
          int64_t so[2] = {M, N};
          Ten in[2], out[1];
          ten(&in[0], ks[k].a, 2, sa, NULL, 0, false);
          ten(&in[1], ks[k].b, 2, sb, NULL, 0, false);
          fill_bytes(&in[0], ks[k].a, fa[f]);
          fill_bytes(&in[1], ks[k].b, fb[f]);
          out_ten(&out[0], ks[k].o, 2, so);
          threads_and_reference(&L, ks[k].k, in, 2, out, 1, false);
          ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]);
        }
    unbuild(&L);
  }
}
END_TEST

/* Outputs narrower than the compute type (f16, bf16 from f32 sums; i8
 * from i32) with K over several K blocks: partial sums in scratch, one
 * rounding at the end; edge tiles, full tiles over three K blocks of
 * vdpbf16ps's KC on this machine (first, middle and last blocks store
 * whole tiles as vectors; shapes past the small path's 32 rows and
 * columns: 45 x 999 x 128 packs B in the fused groups, with an odd last
 * K block, 70 x 1000 x 100 shares one packed B (bf16: in one long K
 * block, gemm.c long_k, and 70 x 2100 x 100 in three), 40 x 900 x 400
 * several groups after A's whole K; bitwise equal at 1 to 3 threads), an output written
 * through a transpose (column stride != 1), a conv with bias in both
 * layouts. */
static const char *NARROW =
    "kernel h(a: f16[M, K], b: f16[K, N]) -> f16[M, N] { return a @ b }\n"
    "kernel g(a: bf16[M, K], b: bf16[K, N]) -> bf16[M, N] { return a @ b }\n"
    "kernel tr(a: bf16[M, K], b: bf16[K, N]) -> bf16[N, M] { return (a @ b).t().contiguous() }\n"
    "kernel ti(a: i8[M, K], b: i8[K, N]) -> i8[N, M] { return (a @ b).t() + 1 }\n"
    "kernel cv(x: f16[2, 40, 9, 9], w: f16[6, 40, 3, 3], c: f16[6]) -> f16[2, 6, 9, 9] {\n"
    "  return conv2d(x, w, c, padding=1)\n}\n"
    "kernel cl(x: bf16[2, 40, 9, 9] channels_last, w: bf16[6, 40, 3, 3], c: bf16[6]) -> bf16[2, 6, 9, 9] {\n"
    "  return relu(conv2d(x, w, c, padding=1))\n}\n";

START_TEST(narrow_outputs) {
  static const int64_t sz[][3] = {{37, 600, 29}, {7, 257, 33}, {100, 513, 17}, {5, 40, 3},
                                  {45, 999, 128}, {70, 1000, 100}, {40, 900, 400}, {70, 2100, 100}};
  static const struct { const char *k; DType d; bool t; } ks[] = {
      {"h", DT_F16, false}, {"g", DT_BF16, false}, {"tr", DT_BF16, true}, {"ti", DT_I8, true}};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, NARROW, "h", TARGETS[t]);
    for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
      for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
        int64_t sa[2] = {sz[i][0], sz[i][1]}, sb[2] = {sz[i][1], sz[i][2]};
        int64_t so[2] = {ks[k].t ? sz[i][2] : sz[i][0], ks[k].t ? sz[i][0] : sz[i][2]};
        Ten in[2], out[1];
        ten(&in[0], ks[k].d, 2, sa, NULL, 0, false);
        ten(&in[1], ks[k].d, 2, sb, NULL, 0, false);
        out_ten(&out[0], ks[k].d, 2, so);
        same_at_threads(&L, ks[k].k, in, 2, out, 1);
        reset_out(&out[0]);
        set_threads(&L, 2);
        run_and_compare_k(&L, ks[k].k, in, 2, out, 1, true, sz[i][1]);
        ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]);
      }
    static const int64_t xs[4] = {2, 40, 9, 9}, ws[4] = {6, 40, 3, 3}, cs[1] = {6};
    static const int64_t os[4] = {2, 6, 9, 9};
    static const int64_t xcl[4] = {40 * 81, 1, 9 * 40, 40};
    for (int c = 0; c < 2; c++) {
      DType d = c ? DT_BF16 : DT_F16;
      Ten in[3], out[1];
      ten(&in[0], d, 4, xs, c ? xcl : NULL, 0, false);
      ten(&in[1], d, 4, ws, NULL, 0, false);
      ten(&in[2], d, 1, cs, NULL, 0, false);
      out_ten(&out[0], d, 4, os);
      run_and_compare_k(&L, c ? "cl" : "cv", in, 3, out, 1, true, 360);
      for (int q = 0; q < 3; q++) ten_free(&in[q]);
      ten_free(&out[0]);
    }
    unbuild(&L);
  }
}
END_TEST

/* The assembly tdslc writes for src at the flags. */
static char *asm_of(const char *src, const char *flags) {
  char dir[] = "/tmp/tdsl_lowp_XXXXXX", path[96], cmd[512];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/k.tdsl", dir);
  write_text(path, src);
  snprintf(cmd, sizeof cmd, "%s %s -o %s/k.s --emit=asm %s", TDSL_TDSLC, path, dir, flags);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(path, sizeof path, "%s/k.s", dir);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  ck_assert_int_eq((long)fread(s, 1, (size_t)n, f), n);
  s[n] = 0;
  fclose(f);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  sh(cmd);
  return s;
}

START_TEST(asm_levels) {
  const char *i8 = "kernel q(a: i8[M, K], b: i8[K, N]) -> i32[M, N] { return a.to(i32) @ b.to(i32) }\n";
  const char *f16 = "kernel h(a: f16[M, K], b: f16[K, N]) -> f16[M, N] { return a @ b }\n";
  char *s = asm_of(i8, "--target=x86-64-v3");
  ck_assert_msg(strstr(s, "vpmaddwd\t%ymm") || strstr(s, "vpmaddwd\t(%"), "no ymm vpmaddwd");
  ck_assert_ptr_null(strstr(s, "vpdpwssd"));
  free(s);
  s = asm_of(i8, "--target=x86-64-v4");
  ck_assert_msg(strstr(s, "%zmm") && strstr(s, "vpmaddwd"), "no zmm vpmaddwd");
  ck_assert_ptr_null(strstr(s, "vpdpwssd"));
  free(s);
  s = asm_of(i8, "--target=x86-64");
  ck_assert_msg(strstr(s, "pmaddwd"), "no SSE2 pmaddwd");
  free(s);
  /* the host: whatever this CPU has decides (the generic vpmaddwd on the
   * 2-core development machine, VNNI where the CPU has it) */
  char *triple = LLVMGetDefaultTargetTriple(), *feat = LLVMGetHostCPUFeatures();
  size_t fl = strlen(feat);
  bool x86 = !strncmp(triple, "x86_64", 6);
  bool zmm = strstr(feat, "+avx512f,") || (fl >= 8 && !strcmp(feat + fl - 8, "+avx512f"));
  unsigned host = x86 ? cg_gemm_isa_features(feat) : 0;
  LLVMDisposeMessage(triple);
  LLVMDisposeMessage(feat);
  if (host & GEMM_ISA_X86) {
    s = asm_of(i8, "");
    bool vnni = zmm ? (host & GEMM_ISA_VNNI) != 0
                                                : (host & GEMM_ISA_AVXVNNI) != 0;
    /* i8 x i8 with VNNI: K quads (vpdpbusd), never K pairs */
    ck_assert_msg(!strstr(s, "vpdpbusd") == !vnni && !strstr(s, "vpdpwssd"), "host VNNI %d, asm disagrees",
                  (int)vnni);
    ck_assert_msg(vnni || strstr(s, "pmaddwd"), "host without VNNI: no pmaddwd");
    free(s);
  }
  s = asm_of(f16, "--target=x86-64-v3");
  ck_assert_msg(strstr(s, "vcvtph2ps"), "no F16C conversion");
  ck_assert_ptr_null(strstr(s, "__extendhfsf2"));
  free(s);
}
END_TEST

/* ---- the direct conv's K pairs (conv_lowp.c) ------------------------------ */

static const char *CONV =
    "kernel qc(x: i8[2, C, 7, 9] channels_last, w: i8[O, C, 3, 3], b: i32[O]) -> i32[2, O, 7, 9] channels_last {\n"
    "  return conv2d(x.to(i32), w.to(i32), b, padding=1)\n}\n"
    "kernel qs(x: i16[2, C, 7, 9] channels_last, w: i16[O, C, 3, 3]) -> i16[2, O, 4, 4] channels_last {\n"
    "  return conv2d(x, w, None, 2, [1, 0])\n}\n"
    "kernel qu(x: u8[2, C, 7, 9] channels_last, w: u8[O, C, 3, 3]) -> u8[2, O, 7, 9] channels_last {\n"
    "  return conv2d(x, w, None, 1, 1)\n}\n"
    "kernel bc(x: bf16[2, C, 7, 9] channels_last, w: bf16[O, C, 3, 3], b: bf16[O]) -> bf16[2, O, 7, 9] channels_last {\n"
    "  return conv2d(x, w, b, padding=1)\n}\n";

/* Row-major strides of a channels-last [n, c, h, w] tensor. */
static void cl_strides(const int64_t *s, int64_t *st) {
  st[1] = 1, st[3] = s[1], st[2] = s[1] * s[3], st[0] = s[1] * s[2] * s[3];
}

START_TEST(conv_pairs_match_interpreter) {
  static const int64_t co[][2] = {{8, 5}, {9, 16}, {19, 33}, {64, 17}, {16, 100}};
  static const struct { const char *k; DType d, o; int oh, ow; bool bias; } ks[] = {
      {"qc", DT_I8, DT_I32, 7, 9, true}, {"qs", DT_I16, DT_I16, 4, 4, false},
      {"qu", DT_U8, DT_U8, 7, 9, false}, {"bc", DT_BF16, DT_BF16, 7, 9, true}};
  for (int t = 0; t < 3; t++) { /* C and O symbols: the kernel's run-time channel counts */
    Lib L;
    build_flags(&L, CONV, "qc", TARGETS[t]);
    for (size_t i = 0; i < sizeof co / sizeof co[0]; i++) {
      for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
        int64_t xs[4] = {2, co[i][0], 7, 9}, ws[4] = {co[i][1], co[i][0], 3, 3}, bs[1] = {co[i][1]};
        int64_t os[4] = {2, co[i][1], ks[k].oh, ks[k].ow}, xst[4], ost[4];
        cl_strides(xs, xst), cl_strides(os, ost);
        Ten in[3], out[1];
        ten(&in[0], ks[k].d, 4, xs, xst, 0, false);
        ten(&in[1], ks[k].d, 4, ws, NULL, 0, false);
        if (ks[k].d == DT_I16) full_range_i16(&in[0]), full_range_i16(&in[1]);
        if (ks[k].bias) ten(&in[2], ks[k].o, 1, bs, NULL, 0, false);
        ten(&out[0], ks[k].o, 4, os, ost, 0, false);
        reset_out(&out[0]);
        int nin = ks[k].bias ? 3 : 2;
        threads_and_reference(&L, ks[k].k, in, nin, out, 1, true);
        for (int q = 0; q < nin; q++) ten_free(&in[q]);
        ten_free(&out[0]);
      }
    }
    unbuild(&L);
  }
}
END_TEST

/* ---- instruction selection for CPUs with VNNI and BF16 ------------------ */

/* The assembly of a module of one function f(ptr a, ptr b, ptr c, ptr
 * pool) whose body emit() writes with e (vec_bits, isa; the dtypes its
 * own), compiled for `cpu`. */
static char *emit_asm(void (*emit)(GemmEmit *e, LLVMValueRef fn, const DType *dt),
                      const DType *dt, int vec_bits, unsigned isa, const char *cpu) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("lowp", ctx);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
  LLVMTypeRef ps[4] = {ptr, ptr, ptr, ptr};
  LLVMValueRef fn = LLVMAddFunction(mod, "f", LLVMFunctionType(LLVMVoidTypeInContext(ctx), ps, 4, 0));
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
  GemmEmit e = {.ctx = ctx, .mod = mod, .b = b, .fn = fn, .vec_bits = vec_bits, .isa = isa,
                .params = lf_target_params("cpu"), .pool = LLVMGetParam(fn, 3)};
  emit(&e, fn, dt);
  LLVMBuildRetVoid(b);
  char *err = NULL;
  ck_assert_msg(!LLVMVerifyModule(mod, LLVMReturnStatusAction, &err), "invalid IR: %s", err);
  LLVMDisposeMessage(err);
  const char *triple = "x86_64-unknown-linux-gnu";
  LLVMTargetRef tg;
  ck_assert_int_eq(LLVMGetTargetFromTriple(triple, &tg, &err), 0);
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(tg, triple, cpu, "", LLVMCodeGenLevelDefault,
                                                    LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMSetTarget(mod, triple);
  LLVMMemoryBufferRef buf;
  ck_assert_int_eq(LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMAssemblyFile, &err, &buf), 0);
  size_t n = LLVMGetBufferSize(buf);
  char *s = malloc(n + 1);
  memcpy(s, LLVMGetBufferStart(buf), n);
  s[n] = 0;
  LLVMDisposeMemoryBuffer(buf);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeBuilder(b);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  return s;
}

/* Parameter i of fn as a tensor of dtype d, shape s, strides st (NULL:
 * row-major). */
static GemmTensor param_tensor(GemmEmit *e, LLVMValueRef fn, int i, DType d, int rank,
                               const long long *s, const long long *st) {
  LLVMTypeRef i64 = LLVMInt64TypeInContext(e->ctx);
  GemmTensor t = {.base = LLVMGetParam(fn, (unsigned)i), .offset = LLVMConstInt(i64, 0, 0),
                  .rank = rank, .dtype = d};
  long long r = 1;
  for (int k = rank - 1; k >= 0; k--) {
    t.shape[k] = LLVMConstInt(i64, (unsigned long long)s[k], 0);
    t.stride[k] = LLVMConstInt(i64, (unsigned long long)(st ? st[k] : r), 0);
    r *= s[k];
  }
  return t;
}

/* c[64, 48] = a[64, 96] @ b[96, 48] of dtypes dt[0] (both operands), dt[1]. */
static void emit_matmul(GemmEmit *e, LLVMValueRef fn, const DType *dt) {
  static const long long shape[3][2] = {{64, 96}, {96, 48}, {64, 48}};
  GemmTensor t[3];
  for (int i = 0; i < 3; i++) t[i] = param_tensor(e, fn, i, dt[i == 2], 2, shape[i], NULL);
  cg_emit_matmul(e, &t[0], &t[1], &t[2]);
}

static char *gemm_asm(DType ad, DType od, int vec_bits, unsigned isa, const char *cpu) {
  DType dt[2] = {ad, od};
  return emit_asm(emit_matmul, dt, vec_bits, isa, cpu);
}

/* c[2, 40, 8, 8] = conv2d(a[2, 32, 8, 8], b[40, 32, 3, 3], padding 1),
 * a and c channels-last: the direct kernel (conv.h). */
static void emit_conv(GemmEmit *e, LLVMValueRef fn, const DType *dt) {
  static const long long xs[4] = {2, 32, 8, 8}, xst[4] = {2048, 1, 256, 32};
  static const long long ws[4] = {40, 32, 3, 3}, os[4] = {2, 40, 8, 8}, ost[4] = {2560, 1, 320, 40};
  GemmTensor x = param_tensor(e, fn, 0, dt[0], 4, xs, xst), w = param_tensor(e, fn, 1, dt[0], 4, ws, NULL);
  GemmTensor o = param_tensor(e, fn, 2, dt[1], 4, os, ost);
  LLVMTypeRef i64 = LLVMInt64TypeInContext(e->ctx);
  LLVMValueRef attr[7];
  for (int i = 0; i < 7; i++) attr[i] = LLVMConstInt(i64, 1, 0);
  cg_emit_conv_direct(e, &x, &w, NULL, &o, attr, true);
}

static char *conv_asm(DType xd, DType od, int vec_bits, unsigned isa, const char *cpu) {
  DType dt[2] = {xd, od};
  return emit_asm(emit_conv, dt, vec_bits, isa, cpu);
}

START_TEST(asm_vnni_bf16) {
  unsigned spr = cg_gemm_isa_features("+avx512f,+avx512bw,+avx512vl,+avx512vnni,+avx512bf16,+f16c");
  ck_assert_uint_eq(spr, GEMM_ISA_X86 | GEMM_ISA_F16C | GEMM_ISA_AVX512BW | GEMM_ISA_VNNI |
                             GEMM_ISA_AVXVNNI | GEMM_ISA_BF16);
  ck_assert_uint_eq(cg_gemm_isa_features("+avx2,+avxvnni,-avx512vnni,-avx512bf16"),
                    GEMM_ISA_X86 | GEMM_ISA_AVXVNNI);
  char *s = gemm_asm(DT_I16, DT_I32, 512, spr, "sapphirerapids");
  ck_assert_msg(strstr(s, "vpdpwssd\t%zmm") || strstr(s, "vpdpwssd\t(%"), "no zmm vpdpwssd");
  free(s);
  /* 8-bit operands with VNNI: K quads (gemm_quad.c), no K pairs */
  s = gemm_asm(DT_I8, DT_I32, 512, spr, "sapphirerapids");
  ck_assert_msg((strstr(s, "vpdpbusd\t%zmm") || strstr(s, "vpdpbusd\t(%")) && !strstr(s, "vpdpwssd"),
                "no zmm vpdpbusd");
  free(s);
  s = gemm_asm(DT_I8, DT_I8, 256, GEMM_ISA_X86 | GEMM_ISA_AVXVNNI, "alderlake");
  ck_assert_msg(strstr(s, "{vex}\tvpdpbusd") && !strstr(s, "vpdpwssd"), "no AVX-VNNI vpdpbusd");
  free(s);
  s = gemm_asm(DT_U8, DT_U8, 256, GEMM_ISA_X86 | GEMM_ISA_AVXVNNI, "alderlake");
  ck_assert_msg(strstr(s, "{vex}\tvpdpwssd"), "no AVX-VNNI vpdpwssd");
  free(s);
  s = gemm_asm(DT_BF16, DT_BF16, 512, spr, "sapphirerapids");
  ck_assert_msg(strstr(s, "vdpbf16ps\t%zmm") || strstr(s, "vdpbf16ps\t(%"), "no vdpbf16ps");
  free(s);
  s = gemm_asm(DT_BF16, DT_F32, 512, spr & ~(unsigned)GEMM_ISA_BF16, "skylake-avx512");
  ck_assert_ptr_null(strstr(s, "vdpbf16ps"));
  free(s);
  s = gemm_asm(DT_I16, DT_I32, 512, spr & ~(unsigned)GEMM_ISA_VNNI, "skylake-avx512");
  ck_assert_msg(strstr(s, "vpmaddwd") && !strstr(s, "vpdpwssd"), "VNNI without the feature");
  free(s);
  /* the direct conv's pairs (conv_lowp.c) */
  s = conv_asm(DT_I8, DT_I32, 512, spr, "sapphirerapids");
  ck_assert_msg(strstr(s, "vpdpwssd\t%zmm") || strstr(s, "vpdpwssd\t(%"), "conv: no zmm vpdpwssd");
  free(s);
  s = conv_asm(DT_U8, DT_I32, 256, GEMM_ISA_X86 | GEMM_ISA_AVXVNNI, "alderlake");
  ck_assert_msg(strstr(s, "{vex}\tvpdpwssd"), "conv: no AVX-VNNI vpdpwssd");
  free(s);
  s = conv_asm(DT_I16, DT_I16, 256, GEMM_ISA_X86, "haswell");
  ck_assert_msg(strstr(s, "vpmaddwd") && !strstr(s, "vpdpwssd"), "conv: no vpmaddwd");
  free(s);
  s = conv_asm(DT_BF16, DT_BF16, 512, spr, "sapphirerapids");
  ck_assert_msg(strstr(s, "vdpbf16ps\t%zmm") || strstr(s, "vdpbf16ps\t(%"), "conv: no vdpbf16ps");
  free(s);
  s = conv_asm(DT_BF16, DT_F32, 256, GEMM_ISA_X86 | GEMM_ISA_F16C, "haswell");
  ck_assert_msg(!strstr(s, "vdpbf16ps") && strstr(s, "vfmadd"), "conv: bf16 split into FMAs");
  free(s);
}
END_TEST

int main(void) {
  Suite *su = suite_create("codegen_lowp");
  TCase *tc = tcase_create("lowp");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, pairs_match_interpreter);
  tcase_add_test(tc, quads_match_interpreter);
  tcase_add_test(tc, narrow_outputs);
  tcase_add_test(tc, asm_levels);
  tcase_add_test(tc, asm_vnni_bf16);
  tcase_add_test(tc, conv_pairs_match_interpreter);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
