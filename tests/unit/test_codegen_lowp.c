/* test_codegen_lowp.c — low-precision GEMM compute (cpu/gemm_lowp.c):
 * i8/u8/i16 matmuls through K pairs (vpmaddwd) with i32 accumulation,
 * compiled for the host, --target=x86-64 (SSE2, 128-bit) and
 * --target=x86-64-v3 (AVX2), at sizes that are not multiples of the
 * register tiles or of the pair (odd K), K = 0 and 1, K past the K block,
 * full-range i16 values whose sums wrap, at 1 to 3 threads (bitwise
 * equal) and exactly equal to the reference interpreter; f16, bf16 and
 * i8 outputs whose sums span several K blocks (partial sums in scratch).
 * The assembly:
 * vpmaddwd for x86-64-v3 and -v4 (zmm), the host's choice as its features
 * say (here vpmaddwd), vcvtph2ps (F16C) and no libcall
 * for f16 on x86-64-v3; and, through the GEMM emitter's API (gemm.h) for
 * CPUs this machine need not have, vpdpwssd with AVX512-VNNI (zmm) and
 * AVX-VNNI ({vex} ymm), vdpbf16ps with AVX512-BF16.
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources), the CPU
 * backend's gemm.h, LLVM's target machine. */
#include "codegen_util.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

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
    unbuild_pool(&L);
  }
}
END_TEST

/* Outputs narrower than the compute type (f16, bf16 from f32 sums; i8
 * from i32) with K over several K blocks: partial sums in scratch, one
 * rounding at the end; edge tiles, an output written through a
 * transpose (column stride != 1), a conv with bias in both layouts. */
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
  static const int64_t sz[][3] = {{37, 600, 29}, {7, 257, 33}, {100, 513, 17}, {5, 40, 3}};
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
    unbuild_pool(&L);
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
    ck_assert_msg(!strstr(s, "vpdpwssd") == !vnni, "host VNNI %d, asm disagrees", (int)vnni);
    ck_assert_msg(vnni || strstr(s, "pmaddwd"), "host without VNNI: no pmaddwd");
    free(s);
  }
  s = asm_of(f16, "--target=x86-64-v3");
  ck_assert_msg(strstr(s, "vcvtph2ps"), "no F16C conversion");
  ck_assert_ptr_null(strstr(s, "__extendhfsf2"));
  free(s);
}
END_TEST

/* ---- instruction selection for CPUs with VNNI and BF16 ------------------ */

/* void f(ptr a, ptr b, ptr c, ptr pool): c[64, 48] = a[64, 96] @ b[96, 48]
 * of dtypes ad (both operands) and od, emitted with gemm.h for vec_bits
 * and isa, then compiled for `cpu`; returns the assembly. */
static char *gemm_asm(DType ad, DType od, int vec_bits, unsigned isa, const char *cpu) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("lowp", ctx);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0), i64 = LLVMInt64TypeInContext(ctx);
  LLVMTypeRef ps[4] = {ptr, ptr, ptr, ptr};
  LLVMValueRef fn = LLVMAddFunction(mod, "f", LLVMFunctionType(LLVMVoidTypeInContext(ctx), ps, 4, 0));
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
  static const long long shape[3][2] = {{64, 96}, {96, 48}, {64, 48}};
  GemmTensor t[3];
  DType dt[3] = {ad, ad, od};
  for (int i = 0; i < 3; i++) {
    t[i] = (GemmTensor){.base = LLVMGetParam(fn, (unsigned)i), .offset = LLVMConstInt(i64, 0, 0),
                        .rank = 2, .dtype = dt[i]};
    for (int d = 0; d < 2; d++) t[i].shape[d] = LLVMConstInt(i64, (unsigned long long)shape[i][d], 0);
    t[i].stride[0] = t[i].shape[1];
    t[i].stride[1] = LLVMConstInt(i64, 1, 0);
  }
  GemmEmit e = {.ctx = ctx, .mod = mod, .b = b, .fn = fn, .vec_bits = vec_bits, .isa = isa,
                .params = lf_target_params("cpu"), .pool = LLVMGetParam(fn, 3)};
  cg_emit_matmul(&e, &t[0], &t[1], &t[2]);
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

START_TEST(asm_vnni_bf16) {
  unsigned spr = cg_gemm_isa_features("+avx512f,+avx512bw,+avx512vl,+avx512vnni,+avx512bf16,+f16c");
  ck_assert_uint_eq(spr, GEMM_ISA_X86 | GEMM_ISA_F16C | GEMM_ISA_AVX512BW | GEMM_ISA_VNNI |
                             GEMM_ISA_AVXVNNI | GEMM_ISA_BF16);
  ck_assert_uint_eq(cg_gemm_isa_features("+avx2,+avxvnni,-avx512vnni,-avx512bf16"),
                    GEMM_ISA_X86 | GEMM_ISA_AVXVNNI);
  char *s = gemm_asm(DT_I8, DT_I32, 512, spr, "sapphirerapids");
  ck_assert_msg(strstr(s, "vpdpwssd\t%zmm") || strstr(s, "vpdpwssd\t(%"), "no zmm vpdpwssd");
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
}
END_TEST

int main(void) {
  Suite *su = suite_create("codegen_lowp");
  TCase *tc = tcase_create("lowp");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, pairs_match_interpreter);
  tcase_add_test(tc, narrow_outputs);
  tcase_add_test(tc, asm_levels);
  tcase_add_test(tc, asm_vnni_bf16);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
