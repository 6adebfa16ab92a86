/* isa_settings.h — the $TDSL_ISA settings a test runs --target=x86-64
 * objects with (cpu/isa.c, runtime/isa.c): each x86-64 level this CPU
 * has, then each extension variant's setting whose level and extensions
 * it has (for kernels that carry extension variants), and whether a
 * kernel's K_isa() fits the setting forced.
 * Needs: <tdsl/runtime.h> and the runtime linked (tdsl_cpu_level,
 * tdsl_cpu_extensions).  Used by: test_exec.c, test_random.c. */
#ifndef TDSL_TESTS_ISA_SETTINGS_H
#define TDSL_TESTS_ISA_SETTINGS_H

#include <stdbool.h>
#include <string.h>

#include "tdsl/runtime.h"

#define ISA_MAX_SETTINGS 8

/* Fills s with the settings, levels first ("x86-64-v2" ... "x86-64-vN"),
 * then the extension ones ("x86-64-v4+avx512vnni" ...); returns their
 * count and the levels' in *nlevels. */
static inline int isa_settings(const char **s, int *nlevels) {
  static const char *const level[3] = {"x86-64-v2", "x86-64-v3", "x86-64-v4"};
  static const struct {
    const char *name;
    unsigned need;
    int level;
  } ext[4] = {{"x86-64-v3+avxvnni", TDSL_ISA_AVX_VNNI, 3},
              {"x86-64-v4+avx512vnni", TDSL_ISA_AVX512_VNNI, 4},
              {"x86-64-v4+avx512bf16", TDSL_ISA_AVX512_BF16, 4},
              {"x86-64-v4+avx512bf16+avx512vnni", TDSL_ISA_AVX512_VNNI | TDSL_ISA_AVX512_BF16,
               4}};
  int cpu = tdsl_cpu_level(), n = 0;
  unsigned cext = tdsl_cpu_extensions();
  for (int lv = 2; lv <= cpu && lv <= 4; lv++) s[n++] = level[lv - 2];
  *nlevels = n;
  for (int e = 0; e < 4; e++)
    if (ext[e].level <= cpu && (cext & ext[e].need) == ext[e].need) s[n++] = ext[e].name;
  return n;
}

/* Whether K_isa() may be `got` under $TDSL_ISA=forced: the same level,
 * with none of the forced extensions or some of them (those the kernel's
 * variant needs). */
static inline bool isa_allows(const char *forced, const char *got) {
  size_t n = strcspn(forced, "+");
  if (strncmp(got, forced, n) || (got[n] && got[n] != '+')) return false;
  for (const char *e = got + n; *e == '+';) {
    size_t m = strcspn(e + 1, "+");
    bool found = false;
    for (const char *f = forced + n; *f == '+' && !found; f += 1 + strcspn(f + 1, "+"))
      found = strcspn(f + 1, "+") == m && !strncmp(f + 1, e + 1, m);
    if (!found) return false;
    e += 1 + m;
  }
  return true;
}

#endif
