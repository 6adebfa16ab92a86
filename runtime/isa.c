/* isa.c — the x86-64 ISA level of the CPU and the one multi-variant kernels
 * run with (spec §8: a --target=x86-64 object carries each kernel for
 * x86-64-v2, -v3 and -v4 and picks one at its first call).
 * tdsl_cpu_level reads CPUID and, for the AVX and AVX-512 register state,
 * XGETBV (the OS must save it), and checks every feature the x86-64 psABI
 * puts in a level; tdsl_isa_level lowers it to $TDSL_ISA.  Both are
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

static int detect_level(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 1;
  unsigned c1 = c;
  unsigned ce = 0, b7 = 0;
  if (__get_cpuid(0x80000001u, &a, &b, &c, &d)) ce = c;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) b7 = b;
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
  /* x86-64-v4: AVX512F, BW, CD, DQ, VL, and the opmask and ZMM state
   * saved (XCR0 bits 5-7). */
  bool v4 = BIT(b7, 16) && BIT(b7, 30) && BIT(b7, 28) && BIT(b7, 17) && BIT(b7, 31) &&
            (xcr0 & 0xe0) == 0xe0;
  return v4 ? 4 : 3;
}
#else
static int detect_level(void) { return 0; }
#endif

int tdsl_cpu_level(void) {
  static atomic_int cached; /* 0: not yet; else level + 1 */
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v) return v - 1;
  v = detect_level();
  atomic_store_explicit(&cached, v + 1, memory_order_relaxed);
  return v;
}

/* The level $TDSL_ISA names (2-4), 0 when unset or empty, -1 when not a
 * level name. */
static int forced_level(const char *s) {
  if (!s || !*s) return 0;
  if (!strncmp(s, "x86-64-", 7)) s += 7;
  if ((s[0] == 'v' || s[0] == 'V') && s[1] >= '2' && s[1] <= '4' && !s[2]) return s[1] - '0';
  return -1;
}

int tdsl_isa_level(void) {
  int cpu = tdsl_cpu_level();
  const char *env = getenv("TDSL_ISA");
  int f = forced_level(env);
  if (f < 0)
    return tdsl_set_error(TDSL_E_ISA, "TDSL_ISA='%s' is not an ISA level: use v2, v3 or v4 "
                          "(or x86-64-v2, -v3, -v4)", env);
  if (cpu < 2)
    return tdsl_set_error(TDSL_E_ISA, "this CPU lacks x86-64-v2 (SSE4.2, POPCNT, "
                          "CMPXCHG16B), the lowest level a --target=x86-64 kernel carries");
  if (f > cpu)
    return tdsl_set_error(TDSL_E_ISA, "TDSL_ISA=%s asks for x86-64-v%d but this CPU supports "
                          "up to x86-64-v%d", env, f, cpu);
  return f ? f : cpu;
}
