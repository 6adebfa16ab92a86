/* kernel.c — the CPU backend (backend.h cg_cpu_backend): each kernel K
 * becomes `i32 K(ptr..., scalars..., ptr...)` (scalars by value: SSA
 * values from the arguments on, never in memory) that
 *  1. runs the entry checks (codegen/entry.c), binding symbols into an env
 *     array; every failure branches to one exit that frees scratch and
 *     returns the code, before any output byte is written;
 *  2. answers a shape query (every output's data NULL) by writing shapes;
 *  3. allocates scratch and GEMM packing memory, runs the nests (serial
 *     loops here; parallel nests and row groups: parallel.c; matmul and
 *     conv2d: gemm_nest.c), frees scratch;
 * and `K_info` returns a constant tdsl_kernel_info.  The module then goes
 * through "default<On>" and object/assembly emission (machine.c).
 * Needs: cpu.h.  Used by: codegen/codegen.c (the backend table). */
#include <string.h>

#include "cpu.h"

static void emit_nest(Cg *c, const LfNest *n) {
  if (n->check) {
    cpu_emit_index_check(c, n);
    return;
  }
  if (n->reduce == OP_MATMUL || n->reduce == OP_CONV2D) {
    cpu_emit_gemm_nest(c, n);
    return;
  }
  if (c->opt > 0 && n->rank > 0) {
    cpu_emit_nest_parallel(c, n);
    return;
  }
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = cg_sym_val(c, n->red[l]);
  if (n->store.rt_strides) {
    const LfBuf *b = &c->lk->bufs[n->store.buf];
    for (int l = 0; l < n->rank; l++)
      x.rt_stride[l] = cg_dl_stride(c, c->args[c->k->nparams + b->index], n->rank, l);
  }
  for (int l = 0; l < n->rank; l++) x.iv[l] = cg_open_loop(c, x.ub[l]);
  if (lf_is_scan(n)) {
    cpu_emit_scan(c, &x);
  } else {
    LLVMValueRef v = n->reduce == OP_COUNT ? cg_eval(c, &x, n->value) : cpu_emit_reduce(c, &x);
    cg_store_el(c, v, cg_address(c, &x, &n->store, n->dtype, n->rank), n->dtype);
  }
  for (int l = 0; l < n->rank; l++) cg_close_loop(c);
}

/* ---- kernels ------------------------------------------------------------ */

static void emit_kernel(Cg *c, const IrKernel *k, const LfKernel *lk) {
  cg_begin_kernel(c, k, lk, true);
  cg_emit_entry_checks(c);
  cg_setup_buffers(c);
  cpu_setup_gemm_pools(c);
  for (int i = 0; i < lk->nnests; i++) {
    if (c->opt > 0 && lk->nests[i].group > 1) { /* a row group: its nests at once */
      cpu_emit_group_parallel(c, &lk->nests[i]);
      i += lk->nests[i].group - 1;
      continue;
    }
    emit_nest(c, &lk->nests[i]);
  }
  cg_free_scratch(c);
  LLVMBuildRet(c->b, i32c(c, 0));
  LLVMPositionBuilderAtEnd(c->b, c->fail);
  cg_free_scratch(c);
  LLVMBuildRet(c->b, c->rcphi);
}

static bool cpu_accepts(const char *target) { return strncmp(target, "cuda", 4) != 0; }

static int cpu_emit(IrModule *m, LfKernel **lks, const CgOptions *o) {
  double t = 0;
  cg_phase_ms(o, "", &t);
  Cg c = {.m = m, .vec_bits = cg_gemm_vec_bits(o->target), .isa = cg_gemm_isa(o->target),
          .opt = o->opt_level,
          .dl_device = DL_CPU, .target = lf_target_params(cg_cpu_backend.sched)};
  c.ctx = LLVMContextCreate();
  c.mod = LLVMModuleCreateWithNameInContext(m->file ? m->file : "tdsl", c.ctx);
  c.b = LLVMCreateBuilderInContext(c.ctx);
  cg_init_types(&c);
  for (int i = 0; i < m->nkernels; i++) {
    emit_kernel(&c, m->kernels[i], lks[i]);
    cg_emit_info(&c, m->kernels[i]);
  }
  cg_phase_ms(o, "llvm-build", &t);
  int s = cpu_optimize_and_write(c.mod, o);
  LLVMDisposeBuilder(c.b);
  LLVMDisposeModule(c.mod);
  LLVMContextDispose(c.ctx);
  return s;
}

const CgBackend cg_cpu_backend = {
    .name = "cpu", .accepts = cpu_accepts, .sched = "cpu", .emit = cpu_emit};
