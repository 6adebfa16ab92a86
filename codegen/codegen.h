/* codegen.h — the interface the driver calls to generate code (spec §7).
 *
 * cg_emit (codegen.c) lowers every kernel of a module to the loop form
 * (loops/loops.h) and hands it to the backend that accepts the target
 * (backend.h; the CPU's: cpu/), which generates LLVM IR, optimizes it
 * and writes the requested files; the header (header.c) is written from
 * the IR and each kernel's scratch total (the loop form's, passed in: the
 * header writer calls neither the passes nor lowering).
 * Needs: ir.h.  Messages go to stderr as "tdslc: error: ...". */
#ifndef TDSL_CODEGEN_H
#define TDSL_CODEGEN_H

#include <stdbool.h>
#include <stdio.h>

#include "../ir/ir.h"

/* The CUDA processors --target=cuda:sm_NN accepts: those LLVM 19's NVPTX
 * backend knows (cuda alone is sm_80). */
#define TDSL_CUDA_SMS \
  "sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a"

/* What to write (bit set). */
enum { CG_OBJ = 1, CG_ASM = 2, CG_LLVM = 4, CG_HEADER = 8, CG_PTX = 16 };

typedef struct CgOptions {
  const char *target;  /* host, x86-64, x86-64-v2, -v3, -v4, cuda, cuda:sm_NN */
  int opt_level;       /* 0..3 */
  unsigned emit;       /* CG_* */
  const char *stem;    /* output path without extension; names the header's
                          include guard */
  const char *path;    /* a single emit's exact path (-o), or NULL: stem plus
                          the emit's extension */
  bool to_stdout;      /* -o -: the single textual emit goes to stdout */
  bool time_passes;    /* print the LLVM phase times to stderr */
  /* Merges n relocatable objects (data[i], size[i] bytes) into one
   * (*out, malloc'd, *outsize bytes); 0, or nonzero when it cannot (no
   * message: the backend then builds the object as one module).  NULL: a
   * CPU object is built as one module; set: the backend may split it
   * across threads (a module per kernel and ISA variant; the driver's is
   * link.c link_relocatable). */
  int (*merge_objects)(const char *const *data, const size_t *size, int n, char **out,
                       size_t *outsize);
} CgOptions;

/* The schedule's parameters (loops/loops.h LfTarget, the row of
 * lf_target_params) that the backend accepting `target` schedules its
 * nests with: "cuda" for cuda and cuda:sm_NN, "cpu" otherwise.  The
 * driver prints the loop form (--emit=loops, the HTML report) with it,
 * so the printed schedule is the one the code runs. */
struct LfTarget;
const struct LfTarget *cg_schedule_params(const char *target);

/* The ISA variants a CPU object of target with m's kernels carries,
 * space-separated ("x86-64-v2 x86-64-v3 x86-64-v4" for x86-64, with
 * "x86-64-v4+avx512vnni" and the like where a kernel's int8 or bf16
 * products use them; the host CPU's name for host); NULL for a target
 * the CPU backend does not take (cpu/isa.c).  In m's arena. */
const char *cg_isa_variants(const IrModule *m, const char *target);
/* For the report: the extension variants value r of k (a matmul or
 * conv2d) is the reason for in a --target=x86-64 object, as a phrase
 * ("x86-64-v4+avx512bf16 (vdpbf16ps: ...)"); NULL when none. */
const char *cg_isa_use(const IrKernel *k, IrRef r, const char *target);

/* The vector width in bits of a CPU target with one ISA (host: the
 * host CPU's; x86-64-vN), 0 for x86-64 (its variants differ) and for
 * targets the CPU backend does not take (cpu/isa.c). */
int cg_target_vec_bits(const char *target);

/* Generates and writes the requested emits.  Returns the exit status:
 * 0, 1 (a kernel uses an op the backend cannot compile yet, or a file
 * cannot be written), or 2 (a target this backend does not serve). */
int cg_emit(IrModule *m, const CgOptions *o);

/* Writes the C header for m (header.c); scratch[i]: kernel i's scratch
 * bytes as K_info gives them (lf_scratch_total), for its comment; isa:
 * also declare `const char *K_isa(void)` (CPU objects).
 * Returns 0, or -1 on I/O error. */
int cg_write_header(const IrModule *m, FILE *f, const char *stem,
                    const Sym *const *scratch, bool isa);

#endif
