/* backend.h — the interface between the driver of code generation
 * (codegen.c) and a backend (cpu/, cuda/): one CgBackend per
 * backend, listed in codegen.c's table.  codegen.c lowers the module to
 * the loop form and writes the header; the first backend whose accepts()
 * takes the target emits the LLVM IR, object or assembly, scheduling its
 * nests with its own row of the schedule's parameters (sched).
 * Needs: codegen.h, loops/loops.h. */
#ifndef TDSL_CODEGEN_BACKEND_H
#define TDSL_CODEGEN_BACKEND_H

#include <stdbool.h>

#include "codegen.h"
#include "../loops/loops.h"

typedef struct CgBackend {
  const char *name;
  bool (*accepts)(const char *target);
  /* The row of the schedule's parameter table (loops/schedule.c
   * lf_target_params) its nests are scheduled with; the driver's
   * --emit=loops prints the same (cg_schedule_params). */
  const char *sched;
  /* Emits every kernel (lks[i]: kernel i's loop form) and writes the
   * requested CG_OBJ / CG_ASM / CG_LLVM files; returns cg_emit's status. */
  int (*emit)(IrModule *m, LfKernel **lks, const CgOptions *o);
} CgBackend;

extern const CgBackend cg_cpu_backend; /* cpu/kernel.c */
extern const CgBackend cg_cuda_backend; /* cuda/backend.c */

#endif
