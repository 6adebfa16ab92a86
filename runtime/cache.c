/* cache.c — the CPU's cache sizes for generated code (runtime.h
 * tdsl_cpu_cache_bytes): the GEMM (cpu/gemm.c) sizes its blocks from
 * them at run time, so one object fits the caches of the machine it
 * runs on, and elementwise nests decide when to stream their stores
 * (stream.c).  Read once, at the first call: /sys/devices/system/cpu/cpu0/
 * cache/indexN (level, type, size), else sysconf where glibc knows them.
 * Needs: libc.  Used by: compiled kernels. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdsl/runtime.h"

static int64_t rt_cache[4];
static pthread_once_t rt_cache_once = PTHREAD_ONCE_INIT;

/* The first line of a small sysfs file, or "" */
static void rt_read_line(const char *path, char *buf, size_t n) {
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(buf, (int)n, f)) buf[0] = '\0';
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
}

/* sysfs: "32K", "512K", "32768K", "1M" */
static int64_t rt_parse_size(const char *s) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (end == s || v <= 0) return 0;
  if (*end == 'K') v *= 1024;
  else if (*end == 'M') v *= 1024 * 1024;
  return (int64_t)v;
}

/* sysfs first: it gives the cache a core shares (on chips with several
 * core complexes, glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) gives the whole
 * chip's: 256 MB on the Zen 3 development machine against the 32 MB a
 * core shares); sysconf where sysfs has no answer. */
static void rt_cache_read(void) {
  for (int i = 0; i < 16; i++) {
    char path[96], level[16], type[32], size[32];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    rt_read_line(path, level, sizeof level);
    if (!level[0]) break;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    rt_read_line(path, type, sizeof type);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    rt_read_line(path, size, sizeof size);
    int l = atoi(level);
    if (l < 1 || l > 3 || !strcmp(type, "Instruction") || rt_cache[l] > 0) continue;
    rt_cache[l] = rt_parse_size(size);
  }
#ifdef _SC_LEVEL1_DCACHE_SIZE
  long sc[3] = {sysconf(_SC_LEVEL1_DCACHE_SIZE), sysconf(_SC_LEVEL2_CACHE_SIZE),
                sysconf(_SC_LEVEL3_CACHE_SIZE)};
  for (int l = 0; l < 3; l++)
    if (rt_cache[l + 1] <= 0 && sc[l] > 0) rt_cache[l + 1] = sc[l];
#endif
}

int64_t tdsl_cpu_cache_bytes(int level) {
  if (level < 1 || level > 3) return 0;
  pthread_once(&rt_cache_once, rt_cache_read);
  return rt_cache[level];
}
