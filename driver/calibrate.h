/* calibrate.h — tdslc --calibrate: measures the CPU cost model's numbers
 * on this machine (calibrate.c). */
#ifndef TDSL_CALIBRATE_H
#define TDSL_CALIBRATE_H

#include <stdbool.h>

typedef struct CalibrateOptions {
  const char *target; /* host or x86-64*: what the calibration kernels are
                         compiled for (the cpu family) */
  int opt_level;      /* what they are compiled at (1..3) */
  bool quick;         /* --calibrate=quick: small problems, few rounds
                         (for tests; the numbers are rough) */
  const char *out;    /* the cost file; NULL or "-": stdout */
} CalibrateOptions;

/* Compiles the calibration kernels through the whole pipeline (once with
 * --layout=nchw, once with nhwc), links them into shared libraries
 * (link.c), loads and times them, and writes the cost file
 * (passes/costs_file.c) with the measured row.  Progress goes to stderr.
 * Returns the exit status: 0, or 1 after a message (no C compiler or
 * runtime to link with, a kernel that failed, an unwritable file). */
int calibrate(const CalibrateOptions *o);

#endif
