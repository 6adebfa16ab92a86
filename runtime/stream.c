/* stream.c — the size of this machine's last-level cache, read once, and
 * what compiled kernels derive from it: the output size from which an
 * elementwise nest writes with non-temporal (streaming) stores
 * (tdsl_stream_min_bytes).
 *
 * An output larger than about half the last-level cache is evicted before
 * anything reads it back, so writing it around the cache saves the read
 * that a normal store of a missing line costs (the line is fetched, then
 * overwritten): a third of the memory traffic of a one-input elementwise
 * op.  A smaller output is written through the cache, where its reader
 * finds it.  The cache size comes from Linux's sysfs
 * (/sys/devices/system/cpu/cpu0/cache/indexN: the highest level's data or
 * unified cache; that of the core complex where the chip has several:
 * glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) gives the whole chip's on AMD,
 * 256 MB on the Zen 3 development machine against the 32 MB a core
 * shares); where it cannot be read, nothing streams.
 *
 * Needs: libc, pthreads.  Used by: the CPU backend's elementwise nests
 * (cpu/vloops.c). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdsl/runtime.h"

static pthread_once_t rt_stream_once = PTHREAD_ONCE_INIT;
static int64_t rt_stream_min;

/* The first line of path, or "" (buf has n bytes). */
static const char *read_line(const char *path, char *buf, size_t n) {
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return buf;
  if (!fgets(buf, (int)n, f)) buf[0] = '\0';
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
  return buf;
}

/* The last-level cache of cpu0 in bytes, or 0 when unknown. */
static int64_t llc_bytes(void) {
  int64_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; i++) {
    char path[96], buf[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    int level = atoi(read_line(path, buf, sizeof buf));
    if (level <= 0) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    if (!strcmp(read_line(path, buf, sizeof buf), "Instruction")) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    char *end;
    long long size = strtoll(read_line(path, buf, sizeof buf), &end, 10);
    if (size <= 0) continue;
    if (*end == 'K') size <<= 10;
    else if (*end == 'M') size <<= 20;
    else if (*end == 'G') size <<= 30;
    if (level > best_level) best_level = level, best = size;
  }
  return best;
}

static void rt_stream_init(void) {
  const char *env = getenv("TDSL_STREAM_MIN_BYTES");
  if (env && *env) {
    char *end;
    long long v = strtoll(env, &end, 10);
    if (!*end && v >= 0) {
      rt_stream_min = v;
      return;
    }
  }
  int64_t llc = llc_bytes();
  rt_stream_min = llc > 0 ? llc / 2 : INT64_MAX;
}

int64_t tdsl_stream_min_bytes(void) {
  pthread_once(&rt_stream_once, rt_stream_init);
  return rt_stream_min;
}
