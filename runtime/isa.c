/* isa.c — the x86-64 ISA level of the CPU and the one multi-variant kernels
 * run with (spec §8: a --target=x86-64 object carries each kernel for
 * x86-64-v2, -v3 and -v4, and for v3 or v4 with the dot-product
 * extensions where its products use them, and picks one at its first
 * call).  tdsl_cpu_level reads CPUID and, for the AVX and AVX-512
 * register state, XGETBV (the OS must save it), and checks every feature
 * the x86-64 psABI puts in a level; tdsl_cpu_extensions reads the
 * extensions (AVX512-VNNI, AVX512-BF16, AVX-VNNI) on top of the level
 * that saves their registers.  tdsl_isa_level and tdsl_isa_extensions
 * lower both to $TDSL_ISA ("v4", "v4+avx512vnni", ...).  The CPU's are
 * computed once per process (an atomic int; a race computes twice).
 * Needs: libc, <cpuid.h> (GCC, Clang) on x86-64; elsewhere the level is 0.
 * Used by: generated dispatchers (cpu/isa.c), tests, applications. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tdsl/runtime.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

static unsigned long long xgetbv0(void) {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (unsigned long long)hi << 32 | lo;
}

#define BIT(r, b) (((r) >> (b)) & 1u)

/* The CPU's level (1-4) and, in *ext, its extensions (TDSL_ISA_*) whose
 * level it has: the AVX-512 ones need v4's register state, AVX-VNNI v3's. */
static int detect(unsigned *ext) {
  unsigned a, b, c, d;
  *ext = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 1;
  unsigned c1 = c;
  unsigned ce = 0, b7 = 0, c7 = 0, a71 = 0;
  if (__get_cpuid(0x80000001u, &a, &b, &c, &d)) ce = c;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    b7 = b, c7 = c;
    if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) a71 = a;
  }
  /* x86-64-v2: CMPXCHG16B, LAHF/SAHF, POPCNT, SSE3, SSE4.1, SSE4.2, SSSE3. */
  bool v2 = BIT(c1, 13) && BIT(ce, 0) && BIT(c1, 23) && BIT(c1, 0) && BIT(c1, 19) &&
            BIT(c1, 20) && BIT(c1, 9);
  if (!v2) return 1;
  /* x86-64-v3: AVX, AVX2, BMI1, BMI2, F16C, FMA, LZCNT, MOVBE, and the OS
   * saving the SSE and AVX state (OSXSAVE, XCR0 bits 1-2). */
  unsigned long long xcr0 = BIT(c1, 27) ? xgetbv0() : 0;
  bool v3 = BIT(c1, 28) && BIT(b7, 5) && BIT(b7, 3) && BIT(b7, 8) && BIT(c1, 29) &&
            BIT(c1, 12) && BIT(ce, 5) && BIT(c1, 22) && BIT(c1, 27) && (xcr0 & 0x6) == 0x6;
  if (!v3) return 2;
  if (BIT(a71, 4)) *ext |= TDSL_ISA_AVX_VNNI; /* CPUID.(7,1):EAX[4] */
  /* x86-64-v4: AVX512F, BW, CD, DQ, VL, and the opmask and ZMM state
   * saved (XCR0 bits 5-7). */
  bool v4 = BIT(b7, 16) && BIT(b7, 30) && BIT(b7, 28) && BIT(b7, 17) && BIT(b7, 31) &&
            (xcr0 & 0xe0) == 0xe0;
  if (!v4) return 3;
  if (BIT(c7, 11)) *ext |= TDSL_ISA_AVX512_VNNI; /* CPUID.(7,0):ECX[11] */
  if (BIT(a71, 5)) *ext |= TDSL_ISA_AVX512_BF16; /* CPUID.(7,1):EAX[5] */
  return 4;
}
#else
static int detect(unsigned *ext) {
  *ext = 0;
  return 0;
}
#endif

/* The CPU's level (low 3 bits) and extensions (above), once. */
static int cpu_isa(void) {
  static atomic_int cached; /* 0: not yet; else (ext << 3 | level) + 1 */
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v) return v - 1;
  unsigned ext;
  v = detect(&ext);
  v |= (int)(ext << 3);
  atomic_store_explicit(&cached, v + 1, memory_order_relaxed);
  return v;
}

int tdsl_cpu_level(void) { return cpu_isa() & 7; }

unsigned tdsl_cpu_extensions(void) { return (unsigned)cpu_isa() >> 3; }

/* The extensions $TDSL_ISA may name after its level, and the level each
 * needs (the registers it works on). */
static const struct {
  const char *name;
  unsigned bit;
  int level;
} exts[] = {{"avx512vnni", TDSL_ISA_AVX512_VNNI, 4},
            {"avx512bf16", TDSL_ISA_AVX512_BF16, 4},
            {"avxvnni", TDSL_ISA_AVX_VNNI, 3}};

/* The level and extensions the kernels run with: the CPU's, or those
 * $TDSL_ISA names ("v3", "x86-64-v4", "v4+avx512vnni+avx512bf16"): a
 * level alone runs no extension.  TDSL_E_ISA, with the message set, when
 * $TDSL_ISA is malformed or asks for what the CPU lacks, or the CPU lacks
 * x86-64-v2. */
static int isa_in_use(unsigned *ext) {
  int cpu = tdsl_cpu_level();
  unsigned cext = tdsl_cpu_extensions();
  const char *env = getenv("TDSL_ISA"), *s = env;
  *ext = cext;
  if (cpu < 2)
    return tdsl_set_error(TDSL_E_ISA, "this CPU lacks x86-64-v2 (SSE4.2, POPCNT, "
                          "CMPXCHG16B), the lowest level a --target=x86-64 kernel carries");
  if (!s || !*s) return cpu;
  if (!strncmp(s, "x86-64-", 7)) s += 7;
  if (!((s[0] == 'v' || s[0] == 'V') && s[1] >= '2' && s[1] <= '4' && (!s[2] || s[2] == '+')))
    return tdsl_set_error(TDSL_E_ISA, "TDSL_ISA='%s' is not an ISA level: use v2, v3 or v4 "
                          "(or x86-64-v2, -v3, -v4), optionally followed by extensions "
                          "(v4+avx512vnni+avx512bf16, v3+avxvnni)", env);
  int f = s[1] - '0';
  if (f > cpu)
    return tdsl_set_error(TDSL_E_ISA, "TDSL_ISA=%s asks for x86-64-v%d but this CPU supports "
                          "up to x86-64-v%d", env, f, cpu);
  *ext = 0;
  for (s += 2; *s == '+';) {
    size_t n = strcspn(++s, "+");
    size_t i = 0;
    while (i < sizeof exts / sizeof *exts && !(strlen(exts[i].name) == n &&
                                                !strncmp(exts[i].name, s, n)))
      i++;
    if (i == sizeof exts / sizeof *exts)
      return tdsl_set_error(TDSL_E_ISA, "TDSL_ISA=%s: '%.*s' is not an extension tdsl "
                            "builds variants for (avx512vnni, avx512bf16, avxvnni)",
                            env, (int)n, s);
    if (exts[i].level > f)
      return tdsl_set_error(TDSL_E_ISA, "TDSL_ISA=%s: %s needs x86-64-v%d", env,
                            exts[i].name, exts[i].level);
    if (!(cext & exts[i].bit))
      return tdsl_set_error(TDSL_E_ISA, "TDSL_ISA=%s asks for %s but this CPU lacks it", env,
                            exts[i].name);
    *ext |= exts[i].bit;
    s += n;
  }
  return f;
}

int tdsl_isa_level(void) {
  unsigned ext;
  return isa_in_use(&ext);
}

int tdsl_isa_extensions(void) {
  unsigned ext;
  int lv = isa_in_use(&ext);
  return lv < 0 ? lv : (int)ext;
}
