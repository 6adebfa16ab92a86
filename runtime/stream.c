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
 * finds it.  The cache size is cache.c's (tdsl_cpu_cache_bytes: L3, else
 * L2; that of the core complex where the chip has several); where it
 * cannot be read, nothing streams.
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
  int64_t llc = tdsl_cpu_cache_bytes(3);
  if (llc <= 0) llc = tdsl_cpu_cache_bytes(2);
  rt_stream_min = llc > 0 ? llc / 2 : INT64_MAX;
}

int64_t tdsl_stream_min_bytes(void) {
  pthread_once(&rt_stream_once, rt_stream_init);
  return rt_stream_min;
}
