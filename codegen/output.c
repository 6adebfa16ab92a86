/* output.c — what every backend writes with (llvm_util.h): an emit's
 * file (or stdout) and the phase times of --time-passes.
 * Needs: llvm_util.h (CgOptions).  Used by: cpu/machine.c, cpu/kernel.c,
 * cuda/, codegen.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llvm_util.h"

/* o->path when set (one emit), else stem + ext. Malloc'd. */
char *cg_out_path(const CgOptions *o, const char *ext) {
  if (o->path) ext = "";
  const char *base = o->path ? o->path : o->stem;
  size_t len = strlen(base) + strlen(ext) + 1;
  char *path = malloc(len);
  if (!path) ICE("out of memory");
  snprintf(path, len, "%s%s", base, ext);
  return path;
}

int cg_write_file(const CgOptions *o, const char *ext, const char *data, size_t n) {
  if (o->to_stdout) return fwrite(data, 1, n, stdout) == n && !fflush(stdout) ? 0 : 1;
  char *path = cg_out_path(o, ext);
  FILE *f = fopen(path, "wb");
  int bad = !f || fwrite(data, 1, n, f) != n;
  if (f && fclose(f)) bad = 1;
  if (bad) fprintf(stderr, "tdslc: error: cannot write '%s': %s\n", path, strerror(errno));
  free(path);
  return bad;
}

void cg_phase_ms(const CgOptions *o, const char *name, double *t0) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double t = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  if (o->time_passes && *t0 > 0) fprintf(stderr, "tdslc: %-12s %8.3f ms\n", name, t - *t0);
  *t0 = t;
}
