/* run.h — `tdslc run`: evaluates one kernel of a checked module with the
 * reference interpreter on .npy inputs and writes its results as .npy.
 * Needs: ir.h (the module), interp.h (interp_run), npy.h. */
#ifndef TDSL_RUN_H
#define TDSL_RUN_H

#include <stdio.h>

#include "../ir/ir.h"

/* Runs kernel `kernel` of m.  in_specs are "NAME=path.npy" for tensor
 * parameters and "NAME=VALUE" for scalar ones (bool: true/false/1/0;
 * integers in the dtype's range; floats, inf, nan); out_specs are
 * "outN=path.npy".  Results not named are written to outN.npy in the
 * current directory.  Messages go to err.  Returns the tdslc exit status:
 * 0 success, 1 bad inputs (or the kernel failed on them), 2 usage. */
int tdsl_run(const IrModule *m, const char *kernel, int nin,
             const char *const *in_specs, int nout,
             const char *const *out_specs,
             FILE *err);

#endif
