/* codegen.c — the driver of code generation (codegen.h cg_emit): picks
 * the backend that accepts the target from a table (backend.h), lowers
 * every kernel to the loop form (loops/), writes the C header (header.c)
 * and hands the kernels to the backend, which writes the LLVM IR, object
 * or assembly.
 * Needs: codegen.h, backend.h, llvm_util.h, loops/loops.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "llvm_util.h"

/* The backends, in the order they are asked (backend.h). */
static const CgBackend *const backends[] = {&cg_cuda_backend, &cg_cpu_backend};

static const CgBackend *backend_for(const char *target) {
  for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
    if (backends[i]->accepts(target)) return backends[i];
  return NULL;
}

const LfTarget *cg_schedule_params(const char *target) {
  const CgBackend *be = backend_for(target);
  if (!be) ICE("no backend for target '%s'", target);
  return lf_target_params(be->sched);
}

/* The header, to stdout or stem.h; 0 or 1.  isa: declare K_isa() (the
 * CPU backend's objects define it). */
static int write_header(IrModule *m, LfKernel **lks, const CgOptions *o, bool isa) {
  int s;
  const Sym **scratch = arena_alloc(m->arena, sizeof *scratch * (size_t)(m->nkernels + 1));
  for (int i = 0; i < m->nkernels; i++) scratch[i] = lf_scratch_total(m->st, lks[i]);
  if (o->to_stdout) {
    s = cg_write_header(m, stdout, o->stem, scratch, isa);
  } else {
    char *path = cg_out_path(o, ".h");
    FILE *f = fopen(path, "w");
    s = f ? cg_write_header(m, f, o->stem, scratch, isa) : -1;
    if (f && fclose(f)) s = -1;
    if (s) fprintf(stderr, "tdslc: error: cannot write '%s': %s\n", path, strerror(errno));
    free(path);
  }
  return s ? 1 : 0;
}

int cg_emit(IrModule *m, const CgOptions *o) {
  const CgBackend *be = backend_for(o->target);
  if (!be) {
    fprintf(stderr, "tdslc: error: --target=%s: no backend for this target\n", o->target);
    return 2;
  }
  if ((o->emit & CG_PTX) && be != &cg_cuda_backend) {
    fprintf(stderr, "tdslc: error: --emit=ptx needs a CUDA target (--target=cuda or "
            "cuda:sm_NN), not '%s'\n", o->target);
    return 2;
  }
  double t = 0;
  cg_phase_ms(o, "", &t);
  LfKernel **lks = arena_alloc(m->arena, sizeof *lks * (size_t)(m->nkernels + 1));
  for (int i = 0; i < m->nkernels; i++) lks[i] = lf_lower(m, m->kernels[i], o->opt_level);
  cg_phase_ms(o, "lower", &t);
  if ((o->emit & CG_HEADER) && write_header(m, lks, o, be == &cg_cpu_backend)) return 1;
  if (!(o->emit & (CG_OBJ | CG_ASM | CG_LLVM | CG_PTX))) return 0;
  return be->emit(m, lks, o);
}
