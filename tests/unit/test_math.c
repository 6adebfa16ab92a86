/* test_math.c — the math layer (codegen/math.h) against glibc's libm.
 * Every function is compiled, for f32 and f64, into a loop
 * `void k(const T *x, const T *y, T *out, int64_t n)` through the LLVM C
 * API at -O2 for the host (so the loop vectorizer widens the math), the
 * object linked into a shared object and dlopened: no JIT.  f32 results
 * are compared with libm's double function (correctly rounded to far
 * below an f32 ulp) over every 8191st f32 bit pattern of all signs and
 * magnitudes plus every 256th pattern of the key range 2^-4 <= |x| < 8
 * (TDSL_MATH_EXHAUSTIVE=all or =tanh,erf,... checks every f32 input of
 * the one-argument functions first, and a dense sample of pow and atan2:
 * minutes per function);
 * f64 results with libm's long double function on 150k samples (pow and
 * atan2: pairs, with every pair of their special values).  Each
 * function's maximum error in ulps must stay within its bound (the
 * measured maxima are in docs/numerics.md: run with TDSL_MATH_TABLE=1
 * to print them), and special values (NaN, +-inf, +-0, overflow,
 * underflow, domain errors) must be exactly libm's.
 * f32 sin, cos and tan are built in both forms (math.h CgMath.trig_lanes:
 * the CPU's long reduction out of line, whose vector variant the
 * vectorized loop must call, and the inline one) and also checked on
 * vectors that mix both reductions, through each vector variant (loops
 * on explicit vectors of 4 to 4x the register's f32 lanes).
 * Also: tdslc's kernels at -O0 and -O2 call no math library.
 * Needs: codegen/math.h, llvm-c, a C compiler (TDSL_CC), dlopen, tdslc. */
#include <check.h>
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen/math.h"

#ifndef TDSL_CC
#define TDSL_CC "cc"
#endif

typedef void (*Kernel)(const void *x, const void *y, void *out, int64_t n);

static void *so;
static char dir[64];

/* ---- building the kernels -------------------------------------------------- */

/* trig_lanes: CgMath's (the CPU form of sin, cos and tan: their long
 * reduction out of line, in vector functions the loop vectorizer calls;
 * 0: the inline form, named k_..._inline).  w > 0: the loop steps by w
 * with math on <w x T> vectors itself (n a multiple of w; named
 * k_..._wW), as a caller with vectors of its own would. */
static void add_kernel(LLVMContextRef ctx, LLVMModuleRef mod, MathFn fn, int is64,
                       unsigned trig_lanes, unsigned w, const char *approx_div) {
  LLVMTypeRef t = is64 ? LLVMDoubleTypeInContext(ctx) : LLVMFloatTypeInContext(ctx), st = t;
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0), i64 = LLVMInt64TypeInContext(ctx);
  LLVMTypeRef ps[4] = {ptr, ptr, ptr, i64};
  char name[64], wn[16] = "";
  if (w) snprintf(wn, sizeof wn, "_w%u", w), t = LLVMVectorType(st, w);
  snprintf(name, sizeof name, "k_%s_%d%s%s", math_fn_name(fn), is64 ? 64 : 32,
           approx_div ? "_approxdiv" : trig_lanes ? "" : "_inline", wn);
  LLVMValueRef f = LLVMAddFunction(mod, name, LLVMFunctionType(LLVMVoidTypeInContext(ctx), ps, 4, 0));
  for (unsigned i = 0; i < 3; i++)
    LLVMAddAttributeAtIndex(f, i + 1, LLVMCreateEnumAttribute(ctx, LLVMGetEnumAttributeKindForName("noalias", 7), 0));
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, f, "entry");
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(ctx, f, "loop");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ctx, f, "done");
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef n = LLVMGetParam(f, 3), zero = LLVMConstInt(i64, 0, 0);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, zero, ""), loop, done);
  LLVMPositionBuilderAtEnd(b, loop);
  LLVMValueRef i = LLVMBuildPhi(b, i64, "i");
  LLVMValueRef px = LLVMBuildGEP2(b, st, LLVMGetParam(f, 0), &i, 1, "");
  LLVMValueRef py = LLVMBuildGEP2(b, st, LLVMGetParam(f, 1), &i, 1, "");
  LLVMValueRef po = LLVMBuildGEP2(b, st, LLVMGetParam(f, 2), &i, 1, "");
  LLVMValueRef x = LLVMBuildLoad2(b, t, px, "");
  LLVMSetAlignment(x, 4);
  LLVMValueRef y = fn == MATH_POW || fn == MATH_ATAN2 ? LLVMBuildLoad2(b, t, py, "") : NULL;
  CgMath m = {.ctx = ctx, .mod = mod, .b = b, .opt = 2, .trig_lanes = trig_lanes, .approx_div = approx_div};
  LLVMSetAlignment(LLVMBuildStore(b, cg_math(&m, fn, x, y), po), 4);
  LLVMValueRef next = LLVMBuildAdd(b, i, LLVMConstInt(i64, w ? w : 1, 0), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b); /* cg_math may add blocks */
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, next, n, ""), loop, done);
  LLVMAddIncoming(i, &zero, &entry, 1);
  LLVMAddIncoming(i, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(b, done);
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
}

static LLVMTargetMachineRef host_machine(char **triple) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  *triple = LLVMGetDefaultTargetTriple();
  char *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures(), *err = NULL;
  LLVMTargetRef t;
  ck_assert_msg(!LLVMGetTargetFromTriple(*triple, &t, &err), "%s", err);
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(t, *triple, cpu, feat, LLVMCodeGenLevelDefault,
                                                    LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(feat);
  return tm;
}

static int is_trig(int fn) { return fn == MATH_SIN || fn == MATH_COS || fn == MATH_TAN; }
static int has_approx_div(int fn) { return fn == MATH_TANH || fn == MATH_SIGMOID; }

/* CUDA's form of tanh and sigmoid (CgMath.approx_div) needs a division
 * within 2 ulp (div.approx.f32); this stand-in is that at its worst:
 * a / b correctly rounded, then moved by -2 to 2 ulp, by a hash of b's
 * bits (the results the kernels divide by it are positive and normal). */
static const char *APPROX_DIV = "tdsl.test.div_2ulp";
static void add_approx_div(LLVMContextRef ctx, LLVMModuleRef mod) {
  LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx), i32 = LLVMInt32TypeInContext(ctx);
  LLVMValueRef f = LLVMAddFunction(mod, APPROX_DIV, LLVMFunctionType(f32, (LLVMTypeRef[]){f32, f32}, 2, 0));
  LLVMSetLinkage(f, LLVMInternalLinkage);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, f, "entry"));
  LLVMValueRef q = LLVMBuildBitCast(b, LLVMBuildFDiv(b, LLVMGetParam(f, 0), LLVMGetParam(f, 1), ""), i32, "");
  LLVMValueRef h = LLVMBuildMul(b, LLVMBuildBitCast(b, LLVMGetParam(f, 1), i32, ""), LLVMConstInt(i32, 0x9e3779b1u, 0), "");
  h = LLVMBuildURem(b, LLVMBuildLShr(b, h, LLVMConstInt(i32, 29, 0), ""), LLVMConstInt(i32, 5, 0), "");
  q = LLVMBuildAdd(b, q, LLVMBuildSub(b, h, LLVMConstInt(i32, 2, 0), ""), "");
  LLVMBuildRet(b, LLVMBuildBitCast(b, q, f32, ""));
  LLVMDisposeBuilder(b);
}

/* All kernels in one module, -O2, object, shared object, dlopen; f32
 * sin, cos and tan in both forms. */
static void build_all(void) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("math", ctx);
  char *triple, *err = NULL, path[128], cmd[512];
  LLVMTargetMachineRef tm = host_machine(&triple);
  char *feat = LLVMGetHostCPUFeatures(); /* the f32 lanes of a vector register */
  unsigned lanes = strstr(feat, "+avx512f")                             ? 16
                   : strstr(feat, "+avx,") || strstr(feat, "+avx2") ? 8
                                                                      : 4;
  LLVMDisposeMessage(feat);
  add_approx_div(ctx, mod);
  for (int fn = 0; fn < MATH_NFNS; fn++) {
    for (int is64 = 0; is64 < 2; is64++) add_kernel(ctx, mod, (MathFn)fn, is64, lanes, 0, NULL);
    if (has_approx_div(fn)) add_kernel(ctx, mod, (MathFn)fn, 0, 0, 0, APPROX_DIV);
    if (!is_trig(fn)) continue;
    add_kernel(ctx, mod, (MathFn)fn, 0, 0, 0, NULL);
    for (unsigned w = 4; w <= 4 * lanes; w *= 2) /* narrower, as wide as and wider than the core */
      if (w != lanes) add_kernel(ctx, mod, (MathFn)fn, 0, lanes, w, NULL);
  }
  LLVMSetTarget(mod, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(mod, td);
  ck_assert_msg(!LLVMVerifyModule(mod, LLVMReturnStatusAction, &err), "%s", err);
  LLVMDisposeMessage(err);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  ck_assert(LLVMRunPasses(mod, "default<O2>", tm, po) == NULL);
  LLVMDisposePassBuilderOptions(po);
  char *ir = LLVMPrintModuleToString(mod);
  if (getenv("TDSL_MATH_IR")) fputs(ir, stderr);
  /* no call may remain but the layer's own functions: every function is plain IR */
  for (const char *c = ir; (c = strstr(c, "call ")) != NULL; c++) {
    const char *at = strchr(c, '@');
    ck_assert_msg(at && (!strncmp(at, "@llvm.", 6) || !strncmp(at, "@tdsl.math.", 11) ||
                         !strncmp(at, "@tdsl.test.", 11)),
                  "a call is left in the IR: %.60s", c);
  }
  /* the vectorized loops of sin and tan call a vector variant */
  for (int k = 0; k < 2; k++) {
    const char *fn = strstr(ir, k ? "@k_tan_32(" : "@k_sin_32(");
    const char *end = fn ? strstr(fn, "\ndefine ") : NULL;
    const char *want = k ? "@tdsl.math.tan_long.f32.v" : "@tdsl.math.sincos_long.f32.v";
    const char *v = fn ? strstr(fn, want) : NULL;
    ck_assert_msg(v && (!end || v < end), "the loop vectorizer called no vector variant (%s)",
                  k ? "tan" : "sin");
  }
  ck_assert_msg(strstr(ir, "<4 x double>") || strstr(ir, "<2 x double>") ||
                    strstr(ir, "<8 x double>"),
                "the loops were not vectorized");
  LLVMDisposeMessage(ir);
  snprintf(dir, sizeof dir, "/tmp/tdsl_math_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/m.o", dir);
  ck_assert_msg(!LLVMTargetMachineEmitToFile(tm, mod, path, LLVMObjectFile, &err), "%s", err);
  snprintf(cmd, sizeof cmd, "%s -shared -o %s/m.so %s", TDSL_CC, dir, path);
  ck_assert_int_eq(system(cmd), 0);
  snprintf(path, sizeof path, "%s/m.so", dir);
  so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(so != NULL, "%s", dlerror());
  LLVMDisposeTargetData(td);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(triple);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
}

/* The form of an f32 function that kernel() gives: "" (the CPU's), or
 * "_inline" (sin, cos, tan), or "_approxdiv" (tanh, sigmoid). */
static const char *form = "";

static Kernel kernel(MathFn fn, int is64) {
  char name[64];
  snprintf(name, sizeof name, "k_%s_%d%s", math_fn_name(fn), is64 ? 64 : 32,
           !is64 ? form : "");
  Kernel k = (Kernel)(uintptr_t)dlsym(so, name);
  ck_assert_ptr_nonnull((void *)(uintptr_t)k);
  return k;
}

/* ---- references -------------------------------------------------------------- */

/* sigmoid: PyTorch's 1 / (1 + exp(-x)), 0 where exp(-x) overflows f64. */
static long double sigmoidl(long double x) { return expl(-x) > DBL_MAX ? 0 : 1.0L / (1.0L + expl(-x)); }
static double sigmoid_d(double x) { return 1 / (1 + exp(-x)); }

/* The references of the one-argument functions: libm's long double
 * function (the sweeps) and its double function (the exhaustive check,
 * where long double is too slow; its error, below 1 double ulp, is 2^-29
 * of an f32 ulp). */
static const struct {
  long double (*l)(long double);
  double (*d)(double);
} REF1[MATH_NFNS] = {
    [MATH_EXP] = {expl, exp},       [MATH_EXP2] = {exp2l, exp2},
    [MATH_EXPM1] = {expm1l, expm1}, [MATH_LOG] = {logl, log},
    [MATH_LOG2] = {log2l, log2},    [MATH_LOG10] = {log10l, log10},
    [MATH_LOG1P] = {log1pl, log1p}, [MATH_SIN] = {sinl, sin},
    [MATH_COS] = {cosl, cos},       [MATH_TAN] = {tanl, tan},
    [MATH_TANH] = {tanhl, tanh},    [MATH_SIGMOID] = {sigmoidl, sigmoid_d},
    [MATH_ERF] = {erfl, erf},       [MATH_ASIN] = {asinl, asin},
    [MATH_ACOS] = {acosl, acos},    [MATH_ATAN] = {atanl, atan},
    [MATH_SINH] = {sinhl, sinh},    [MATH_COSH] = {coshl, cosh},
    [MATH_ASINH] = {asinhl, asinh}, [MATH_ACOSH] = {acoshl, acosh},
    [MATH_ATANH] = {atanhl, atanh},
};

static long double ref(MathFn fn, long double x, long double y) {
  if (fn == MATH_POW) return powl(x, y);
  if (fn == MATH_ATAN2) return atan2l(x, y);
  return REF1[fn].l ? REF1[fn].l(x) : NAN;
}

/* |got - want| in units of the last place of want rounded to the type
 * (52 or 23 fraction bits; subnormal ulps below the type's minimum).
 * Special results must match exactly: returns 1e9 when they do not. */
static double ulp_err(long double got, long double want, int is64) {
  int mant = is64 ? 52 : 23, emin = is64 ? -1074 : -149;
  long double maxv = is64 ? DBL_MAX : FLT_MAX;
  if (isnan(want)) return isnan(got) ? 0 : 1e9;
  if (isnan(got)) return 1e9;
  /* want beyond the largest finite value rounds to inf */
  if (fabsl(want) > maxv * (1 + ldexpl(1, -mant - 1))) return got == copysignl(INFINITY, want) ? 0 : 1e9;
  if (isinf(got)) return fabsl(want) >= maxv ? 0.5 : 1e9;
  if (want == 0) return got == 0 && signbit(got) == signbit(want) ? 0 : got == 0 ? 1e9 : fabsl(got) / ldexpl(1, emin);
  int e = ilogbl(want) - mant;
  if (e < emin) e = emin;
  return (double)(fabsl(got - want) / ldexpl(1, e));
}

/* ---- sweeps -------------------------------------------------------------------- */

typedef struct Worst {
  double ulps;
  long double x, y;
} Worst;

static void run32(MathFn fn, const float *x, const float *y, int64_t n, Worst *w) {
  float *o = malloc(sizeof *o * (size_t)n);
  kernel(fn, 0)(x, y, o, n);
  for (int64_t i = 0; i < n; i++) {
    double e = ulp_err(o[i], (double)ref(fn, (double)x[i], y ? (double)y[i] : 0), 0);
    if (e > w->ulps) w->ulps = e, w->x = x[i], w->y = y ? y[i] : 0;
  }
  free(o);
}

static void run64(MathFn fn, const double *x, const double *y, int64_t n, Worst *w) {
  double *o = malloc(sizeof *o * (size_t)n);
  kernel(fn, 1)(x, y, o, n);
  for (int64_t i = 0; i < n; i++) {
    double e = ulp_err(o[i], ref(fn, x[i], y ? y[i] : 0), 1);
    if (e > w->ulps) w->ulps = e, w->x = x[i], w->y = y ? y[i] : 0;
  }
  free(o);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static double urand(void) { return (double)(next() >> 11) * 0x1p-53; }

static float f_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static double d_of(uint64_t u) {
  double d;
  memcpy(&d, &u, 8);
  return d;
}

/* |x| bound where the function is specified to be accurate: every
 * function at every magnitude (sin, cos and tan reduce their argument
 * with Payne-Hanek beyond 1e8, docs/numerics.md). */
static double bound(MathFn fn) {
  (void)fn;
  return INFINITY;
}

/* f32: every 8191st bit pattern, then every 256th with 2^-4 <= |x| < 8. */
static Worst sweep32(MathFn fn) {
  enum { CAP = 1 << 21 };
  float *x = malloc(sizeof *x * CAP);
  Worst w = {0, 0, 0};
  int64_t n = 0;
  for (int pass = 0; pass < 2; pass++) {
    uint64_t lo = pass ? 0x3d800000u : 0, hi = pass ? 0x41000000u : 0x100000000u;
    uint64_t step = pass ? 256 : 8191;
    for (int sgn = 0; sgn < (pass ? 2 : 1); sgn++)
      for (uint64_t u = lo; u < hi; u += step) {
        float v = f_of((uint32_t)u | (sgn ? 0x80000000u : 0));
        if (!(fabsf(v) <= bound(fn)) && !isnan(v)) continue;
        x[n++] = v;
        if (n == CAP) run32(fn, x, NULL, n, &w), n = 0;
      }
  }
  /* the special values and the edges, exactly */
  static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, FLT_MIN, -FLT_MIN,
                             0x1p-149f, -0x1p-149f, FLT_MAX, -FLT_MAX, 88.72283f, 88.72284f,
                             -103.97208f, -87.33654f, 9.1f, 3.921875f, 0.921875f, 0.625f};
  if (n + 64 > CAP) run32(fn, x, NULL, n, &w), n = 0;
  for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) x[n++] = sp[i];
  run32(fn, x, NULL, n, &w);
  free(x);
  return w;
}

/* A double with a random sign, significand and exponent in [lo, hi). */
static double rand_exp(int lo, int hi) {
  int e = lo + (int)(urand() * (hi - lo));
  uint64_t bits = (next() & 0x800fffffffffffffULL) | ((uint64_t)(e + 1023) << 52);
  return d_of(bits);
}

/* f64: 50k random bit patterns (all magnitudes), 50k with exponents in
 * [-30, 10), 50k uniform in [-4, 4]. */
static Worst sweep64(MathFn fn) {
  enum { N = 150000 };
  double *x = malloc(sizeof *x * N);
  int64_t n = 0;
  while (n < N) {
    double v = n < N / 3 ? d_of(next()) : n < 2 * N / 3 ? rand_exp(-30, 10) : 8 * urand() - 4;
    if (fabs(v) <= bound(fn) || isnan(v)) x[n++] = v;
  }
  Worst w = {0, 0, 0};
  run64(fn, x, NULL, n, &w);
  free(x);
  return w;
}

/* pow: x over magnitudes 2^-20..2^20 and both signs, y with |y log2 x|
 * up to about 300 (f32: 126), integer y for negative x, then the special
 * pairs of C99's Annex F (checked exactly). */
static void pow_inputs(double *x, double *y, int64_t n, int is64) {
  double lim = is64 ? 1000 : 126;
  for (int64_t i = 0; i < n; i++) {
    x[i] = ldexp(1 + urand(), (int)(urand() * 40) - 20);
    double l2 = fabs(log2(x[i])) + 1e-3;
    y[i] = (2 * urand() - 1) * fmin(lim / l2, 1e6) * urand();
    if (i % 4 == 0) x[i] = -x[i], y[i] = round(y[i]);
  }
  static const double sp[] = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, INFINITY, -INFINITY, NAN};
  int k = 0, ns = (int)(sizeof sp / sizeof sp[0]);
  for (int a = 0; a < ns; a++)
    for (int b = 0; b < ns; b++) x[k] = sp[a], y[k] = sp[b], k++;
}

static Worst sweep_pow(int is64) {
  enum { N = 200000 };
  double *x = malloc(sizeof *x * N), *y = malloc(sizeof *y * N);
  pow_inputs(x, y, N, is64);
  Worst w = {0, 0, 0};
  if (is64) {
    run64(MATH_POW, x, y, N, &w);
  } else {
    float *xf = malloc(sizeof *xf * N), *yf = malloc(sizeof *yf * N);
    for (int i = 0; i < N; i++) xf[i] = (float)x[i], yf[i] = (float)y[i];
    run32(MATH_POW, xf, yf, N, &w);
    free(xf), free(yf);
  }
  free(x), free(y);
  return w;
}

/* atan2(x, y): x and y over all magnitudes and signs (random bit
 * patterns, exponents in [-30, 10), uniform in [-4, 4], each side drawn
 * from its own class), then every pair of the special values (checked
 * exactly: C99's quadrants, +-0, +-inf, NaN). */
static Worst sweep_atan2(int is64) {
  enum { N = 150000 };
  double *x = malloc(sizeof *x * N), *y = malloc(sizeof *y * N);
  for (int i = 0; i < N; i++) {
    int cx = (int)(next() % 3), cy = (int)(next() % 3);
    x[i] = cx == 0 ? d_of(next()) : cx == 1 ? rand_exp(-30, 10) : 8 * urand() - 4;
    y[i] = cy == 0 ? d_of(next()) : cy == 1 ? rand_exp(-30, 10) : 8 * urand() - 4;
  }
  static const double sp[] = {0.0, -0.0, 1.0, -1.0, 1e-300, -3.5, INFINITY, -INFINITY, NAN};
  int k = 0, ns = (int)(sizeof sp / sizeof sp[0]);
  for (int a = 0; a < ns; a++)
    for (int b = 0; b < ns; b++) x[k] = sp[a], y[k] = sp[b], k++;
  Worst w = {0, 0, 0};
  if (is64) {
    run64(MATH_ATAN2, x, y, N, &w);
  } else {
    float *xf = malloc(sizeof *xf * N), *yf = malloc(sizeof *yf * N);
    for (int i = 0; i < N; i++) xf[i] = (float)x[i], yf[i] = (float)y[i];
    run32(MATH_ATAN2, xf, yf, N, &w);
    free(xf), free(yf);
  }
  free(x), free(y);
  return w;
}

/* sin, cos, tan on vectors that mix both reductions: runs of 1-40
 * arguments below F_TRIG_SMALL (6144) and at or above it (up to FLT_MAX,
 * with inf and NaN) alternating, so every lane position meets both
 * kinds and the vectors have one, some or all lanes long. */
static Worst mixed32(MathFn fn) {
  enum { N = 1 << 18 };
  float *x = malloc(sizeof *x * N);
  int64_t i = 0;
  for (int big = 0; i < N; big = !big)
    for (int64_t run = 1 + (int64_t)(next() % 40); run > 0 && i < N; run--) {
      uint64_t r = next();
      float scale = r & 1 ? 1.0f : 1.0f / (float)(1 + (r >> 40) % 1000);
      float v = big ? f_of(0x45c00000u + (uint32_t)(r % (0x7f800000u - 0x45c00000u)))
                    : (float)(urand() * 6144.0) * scale;
      if (big && r % 997 == 0) v = r % 2 ? INFINITY : NAN;
      x[i++] = r & 2 ? -v : v;
    }
  Worst w = {0, 0, 0};
  run32(fn, x, NULL, N, &w);
  free(x);
  return w;
}

/* The exhaustive f32 check (TDSL_MATH_EXHAUSTIVE, not part of ctest: it
 * takes minutes per function): every one of the 2^32 bit patterns,
 * against glibc's double function (REF1). */
static Worst exhaust32(MathFn fn) {
  enum { CH = 1 << 22 };
  float *x = malloc(sizeof *x * CH), *o = malloc(sizeof *o * CH);
  Worst w = {0, 0, 0};
  for (uint64_t base = 0; base < 0x100000000ull; base += CH) {
    for (uint32_t i = 0; i < CH; i++) x[i] = f_of((uint32_t)(base + i));
    kernel(fn, 0)(x, NULL, o, CH);
    for (uint32_t i = 0; i < CH; i++) {
      double want = REF1[fn].d(x[i]), e;
      int ex;
      /* the common case in double (ulp_err's long double is slow) */
      if (isfinite(o[i]) && want != 0 && fabs(want) < FLT_MAX && frexp(want, &ex) != 0)
        e = fabs((double)o[i] - want) / ldexp(1, ex - 24 < -149 ? -149 : ex - 24);
      else e = ulp_err(o[i], want, 0);
      if (e > w.ulps) w.ulps = e, w.x = x[i];
    }
  }
  free(x), free(o);
  return w;
}

/* The dense check of the two-argument f32 functions (TDSL_MATH_EXHAUSTIVE
 * names pow or atan2, or all; 2^32 x 2^32 pairs are too many): 2^26
 * pairs of random bit patterns (pow: a third with |y log2 |x|| <= 150,
 * where results are neither 0 nor inf, a third with integer y for
 * negative x), then grids: every 100003rd f32 x against 97 y (the
 * special values, small integers and halves, the edges of the result
 * range) and the same y against every 100003rd x the other way round;
 * against glibc's double pow and atan2. */
static float grid_val(int i) {
  static const float g[] = {0.0f, 1.0f, 2.0f, 3.0f, 0.5f, 1.5f, 10.0f, 0.25f, 1e-10f, 1e10f,
                            126.0f, 127.0f, 128.0f, 149.0f, 150.0f, 0x1p-149f, FLT_MIN, FLT_MAX,
                            INFINITY, 1.0f / 3, 7.0f, 31.0f, 64.0f, 1000.0f, 0.1f, 0.75f, 2.5f,
                            1 + 0x1p-23f, 1 - 0x1p-24f, 0x1p24f, 0x1p24f + 2, 0x1p25f + 4, 5.0f, 6.0f,
                            9.0f, 11.0f, 12.5f, 13.0f, 17.0f, 33.0f, 63.0f, 65.0f, 100.0f, 255.0f,
                            0.125f, 0.375f, 0.0625f, 4.0f};
  int n = (int)(sizeof g / sizeof g[0]);
  return i < n ? g[i] : i < 2 * n ? -g[i - n] : NAN;
}

static Worst exhaust2(MathFn fn) {
  enum { CH = 1 << 22 };
  float *x = malloc(sizeof *x * CH), *y = malloc(sizeof *y * CH), *o = malloc(sizeof *o * CH);
  Worst w = {0, 0, 0};
  for (int pass = 0; pass < 18; pass++) {
    int64_t n = 0;
    if (pass < 16) {
      for (; n < CH; n++) {
        x[n] = f_of((uint32_t)next()), y[n] = f_of((uint32_t)next());
        if (fn == MATH_POW && n % 3 == 1 && isfinite(x[n]) && x[n] != 0) {
          double l2 = fabs(log2(fabs((double)x[n]))) + 1e-3;
          y[n] = (float)((2 * urand() - 1) * fmin(150 / l2, 1e7));
        } else if (fn == MATH_POW && n % 3 == 2) {
          y[n] = (float)round((2 * urand() - 1) * 300), x[n] = -fabsf(x[n]);
        }
      }
    } else {
      for (int64_t u = 0; u < 0x100000000ll && n + 97 <= CH; u += 100003)
        for (int j = 0; j < 97; j++) {
          float a = f_of((uint32_t)u), g = grid_val(j);
          x[n] = pass == 16 ? a : g, y[n] = pass == 16 ? g : a, n++;
        }
    }
    kernel(fn, 0)(x, y, o, n);
    for (int64_t i = 0; i < n; i++) {
      double want = fn == MATH_POW ? pow(x[i], y[i]) : atan2(x[i], y[i]);
      double e = ulp_err(o[i], want, 0);
      if (e > w.ulps) w.ulps = e, w.x = x[i], w.y = y[i];
    }
  }
  free(x), free(y), free(o);
  return w;
}

/* The bound per function and dtype, in ulps.  f32: the functions with
 * their own f32 algorithm (codegen/math.c) are bounded by their maximum
 * over all 2^32 inputs (docs/numerics.md) plus a margin; the others are
 * computed in f64 and rounded once (0.5 ulp plus a trace).  f64: see
 * docs/numerics.md. */
static double limit32(MathFn fn) {
  switch (fn) {
  case MATH_EXP: return 1.05;
  case MATH_EXP2: case MATH_ERF: case MATH_LOG: return 1.5;
  case MATH_EXPM1: case MATH_LOG2: case MATH_LOG1P: case MATH_TANH: return 2;
  case MATH_LOG10: return 2.5;
  case MATH_SIGMOID: return 3;
  case MATH_SIN: case MATH_COS: return 1.5;
  case MATH_TAN: return 2.5;
  case MATH_ATAN: return 2;
  case MATH_ATAN2: return 2;
  case MATH_SINH: case MATH_COSH: return 2;
  case MATH_POW: return 1;
  case MATH_ASIN: case MATH_ACOS: case MATH_ASINH: case MATH_ACOSH: case MATH_ATANH: return 0.75;
  default: return 0.51;
  }
}

static double limit(MathFn fn, int is64) {
  if (!is64) return limit32(fn);
  switch (fn) {
  case MATH_POW: return 32;
  case MATH_ERF: return 6;
  case MATH_TANH: case MATH_SINH: case MATH_COSH: case MATH_ASINH: case MATH_ACOSH:
  case MATH_ATANH: case MATH_TAN: case MATH_ASIN: case MATH_ACOS: case MATH_ATAN:
  case MATH_ATAN2: return 4;
  default: return 2.5;
  }
}

START_TEST(math_ulps) {
  build_all();
  int table = getenv("TDSL_MATH_TABLE") != NULL, bad = 0;
  /* TDSL_MATH_EXHAUSTIVE=all or a comma-separated list of names */
  const char *ex = getenv("TDSL_MATH_EXHAUSTIVE");
  if (ex) {
    printf("| function | f32 max ulp, all 2^32 inputs (pow, atan2: dense) | at x, y |\n|---|---|---|\n");
    for (int fn = 0; fn < MATH_NFNS; fn++) {
      const char *name = math_fn_name((MathFn)fn);
      size_t len = strlen(name);
      const char *p = ex;
      int want = !strcmp(ex, "all");
      while (!want && (p = strstr(p, name)) != NULL) {
        want = (p == ex || p[-1] == ',') && (p[len] == ',' || !p[len]);
        p += len;
      }
      if (!want) continue;
      for (int f = 0; f < 1 + has_approx_div(fn); f++) {
        form = f ? "_approxdiv" : "";
        Worst w = REF1[fn].d ? exhaust32((MathFn)fn) : exhaust2((MathFn)fn);
        printf("| %s%s | %.3f | %a, %a |\n", name, form, w.ulps, (double)w.x, (double)w.y), fflush(stdout);
        if (w.ulps > limit((MathFn)fn, 0)) bad = 1;
      }
      form = "";
    }
  }
  if (table) printf("| function | f32 max ulp | f64 max ulp |\n|---|---|---|\n"), fflush(stdout);
  for (int fn = 0; fn < MATH_NFNS; fn++) {
    Worst w[2];
    for (int is64 = 0; is64 < 2; is64++)
      w[is64] = fn == MATH_POW     ? sweep_pow(is64)
                : fn == MATH_ATAN2 ? sweep_atan2(is64)
                : is64             ? sweep64((MathFn)fn)
                                   : sweep32((MathFn)fn);
    if (table) printf("| %s | %.3f | %.3f |\n", math_fn_name((MathFn)fn), w[0].ulps, w[1].ulps), fflush(stdout);
    for (int is64 = 0; is64 < 2; is64++)
      if (w[is64].ulps > limit((MathFn)fn, is64)) {
        fprintf(stderr, "%s f%d: %.3g ulps at x = %La, y = %La\n", math_fn_name((MathFn)fn),
                is64 ? 64 : 32, w[is64].ulps, w[is64].x, w[is64].y);
        bad = 1;
      }
  }
  /* both forms of f32 sin, cos and tan: the inline one's sweep, and
   * vectors that mix lanes of the short and the long reduction, also
   * through each vector variant of the long functions */
  static const char *forms[] = {"", "_inline", "_w4", "_w8", "_w16", "_w32", "_w64"};
  for (int fn = 0; fn < MATH_NFNS; fn++)
    for (int f = 0; f < 7 && is_trig(fn); f++) {
      char name[64];
      snprintf(name, sizeof name, "k_%s_32%s", math_fn_name((MathFn)fn), forms[f]);
      if (!dlsym(so, name)) continue;
      form = forms[f];
      Worst w[2] = {f == 1 ? sweep32((MathFn)fn) : (Worst){0, 0, 0}, mixed32((MathFn)fn)};
      for (int k = 0; k < 2; k++)
        if (w[k].ulps > limit32((MathFn)fn)) {
          fprintf(stderr, "%s f32%s (%s): %.3g ulps at x = %La\n", math_fn_name((MathFn)fn),
                  form, k ? "mixed lanes" : "sweep", w[k].ulps, w[k].x);
          bad = 1;
        }
      form = "";
    }
  /* CUDA's form of tanh and sigmoid, with the worst division it may get */
  for (int fn = 0; fn < MATH_NFNS; fn++) {
    if (!has_approx_div(fn)) continue;
    form = "_approxdiv";
    Worst w = sweep32((MathFn)fn);
    if (table) printf("| %s%s | %.3f | |\n", math_fn_name((MathFn)fn), form, w.ulps), fflush(stdout);
    if (w.ulps > limit32((MathFn)fn)) {
      fprintf(stderr, "%s f32%s: %.3g ulps at x = %La\n", math_fn_name((MathFn)fn), form, w.ulps, w.x);
      bad = 1;
    }
    form = "";
  }
  ck_assert_msg(!bad, "a math function is beyond its ulp bound (see above)");
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* tdslc's kernels call no math library at -O0 and -O2: every call is
 * to an llvm.* intrinsic that needs no libcall, or to the runtime.
 * (f64 sin, cos and tan stay libm's on the CPU: codegen/expr.c.) */
static const char *USES =
    "kernel f(x: f32[N], d: f64[N], h: f16[N]) -> (f32[N], f64[N], f16[N]) {\n"
    "  return x.exp() + x.log() + x.log1p() + x.expm1() + x.tanh()"
    " + x.erf() + x.sigmoid() + x.gelu() + x.gelu(approximate=\"tanh\") + x.pow(x)"
    " + x.sin() + x.cos() + x.tan() + x.atan() + x.atan2(x) + x.asin() + x.acos()"
    " + x.sinh() + x.cosh() + x.asinh() + x.acosh() + x.atanh(),"
    " d.exp() + d.log() + d.tanh() + d.erf() + d.pow(d) + d.log1p()"
    " + d.expm1() + d.asin() + d.acos() + d.atan() + d.atan2(d) + d.sinh() + d.cosh()"
    " + d.asinh() + d.acosh() + d.atanh() + d.exp2() + d.log2() + d.log10() + d.hypot(d)"
    " + d.logaddexp(d) + softplus(d) + mish(d) + elu(d),"
    " h.exp() + h.tanh() + h.erf() + h.pow(h) + h.atan2(h) + h.log2() + h.hypot(h) + h.sin()\n}\n";

static void no_libm_calls(const char *opt) {
  char d[64] = "/tmp/tdsl_mathk_XXXXXX", cmd[512], path[128];
  ck_assert_ptr_nonnull(mkdtemp(d));
  snprintf(path, sizeof path, "%s/k.tdsl", d);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(USES, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s %s %s --emit=llvm -o %s/k.ll", TDSL_TDSLC, path, opt, d);
  ck_assert_int_eq(system(cmd), 0);
  snprintf(path, sizeof path, "%s/k.ll", d);
  f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  char line[4096];
  int calls = 0;
  while (fgets(line, sizeof line, f))
    for (const char *c = line; (c = strstr(c, "call ")) != NULL; c++) {
      const char *at = strchr(c, '@');
      if (!at) continue;
      calls++;
      ck_assert_msg(!strncmp(at, "@llvm.fmuladd", 13) || !strncmp(at, "@llvm.fabs", 10) ||
                        !strncmp(at, "@llvm.floor", 11) || !strncmp(at, "@llvm.copysign", 14) ||
                        !strncmp(at, "@llvm.sqrt", 10) || !strncmp(at, "@llvm.experimental", 18) ||
                        !strncmp(at, "@llvm.smin", 10) || !strncmp(at, "@llvm.smax", 10) ||
                        !strncmp(at, "@llvm.umin", 10) || !strncmp(at, "@llvm.umax", 10) ||
                        !strncmp(at, "@llvm.fshl", 10) || !strncmp(at, "@llvm.fshr", 10) ||
                        !strncmp(at, "@llvm.vector.reduce", 19) || !strncmp(at, "@llvm.lifetime", 14) ||
                        !strncmp(at, "@llvm.x86.sse.sfence", 20) ||
                        !strncmp(at, "@tdsl", 5),
                    "%s: a call that needs a math library: %.60s", opt, at);
    }
  fclose(f);
  ck_assert_int_gt(calls, 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", d);
  ck_assert_int_eq(system(cmd), 0);
}

START_TEST(kernels_call_no_libm) {
  no_libm_calls("-O0");
  no_libm_calls("-O2");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("math");
  TCase *t = tcase_create("core");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, math_ulps);
  tcase_add_test(t, kernels_call_no_libm);
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
