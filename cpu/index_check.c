/* index_check.c — the index checks of the loop form (loops.h "Indexing
 * by tensors"): a check nest runs in the kernel's host function, before
 * any nest that writes an output (lowering and plan-memory put it there).
 * Two passes over the index: the first ORs "out of range" over every
 * element (no early exit, so LLVM vectorizes it); only when that finds
 * one, the second walks again to the first bad index and fails the
 * kernel with TDSL_E_INDEX and a message naming the kernel, the op and
 * its position, the indexed tensor, the dim, the index and the size.
 * Needs: cpu.h.  Used by: kernel.c. */
#include "cpu.h"

/* Whether index v is out of [lo, lo + span): (unsigned)(v - lo) >= span. */
static LLVMValueRef out_of_range(Cg *c, LLVMValueRef v, LLVMValueRef lo, LLVMValueRef span) {
  return LLVMBuildICmp(c->b, LLVMIntUGE, LLVMBuildSub(c->b, v, lo, ""), span, "");
}

static void open_loops(Cg *c, const LfNest *n, NestCtx *x) {
  for (int l = 0; l < n->rank; l++) x->ub[l] = cg_sym_val(c, n->shape[l]);
  for (int l = 0; l < n->rank; l++) x->iv[l] = cg_open_loop(c, x->ub[l]);
}

void cpu_emit_index_check(Cg *c, const LfNest *n) {
  const LfCheck *ck = n->check;
  NestCtx x = {.n = n};
  LLVMValueRef bound = cg_sym_val(c, ck->bound);
  LLVMValueRef lo = ck->wrap ? LLVMBuildNeg(c->b, bound, "") : i64c(c, 0);
  LLVMValueRef span = LLVMBuildSub(c->b, bound, lo, "");
  LLVMValueRef any = cg_entry_alloca(c, c->i8, NULL);
  LLVMBuildStore(c->b, ci(c->i8, 0), any);
  open_loops(c, n, &x);
  LLVMValueRef bad = out_of_range(c, cg_eval(c, &x, n->value), lo, span);
  LLVMBuildStore(c->b, LLVMBuildOr(c->b, LLVMBuildLoad2(c->b, c->i8, any, ""),
                                   LLVMBuildZExt(c->b, bad, c->i8, ""), ""), any);
  for (int l = 0; l < n->rank; l++) cg_close_loop(c);
  LLVMBasicBlockRef find = block(c, "index_bad"), ok = block(c, "index_ok");
  LLVMValueRef seen = LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildLoad2(c->b, c->i8, any, ""),
                                    ci(c->i8, 0), "");
  LLVMBuildCondBr(c->b, seen, find, ok);
  /* the first bad index, for the message */
  LLVMPositionBuilderAtEnd(c->b, find);
  open_loops(c, n, &x);
  LLVMValueRef v = cg_eval(c, &x, n->value);
  LLVMBasicBlockRef report = block(c, "index_report"), next = block(c, "index_next");
  LLVMBuildCondBr(c->b, out_of_range(c, v, lo, span), report, next);
  LLVMPositionBuilderAtEnd(c->b, report);
  LLVMTypeRef ps[2] = {c->i32, c->ptr};
  LLVMValueRef a[5] = {i32c(c, E_INDEX),
                       str(c, arena_printf(c->m->arena, "kernel '%%s': %s", ck->msg)),
                       c->kname, v, bound};
  LLVMValueRef rc = call(c, cg_fdecl(c, "tdsl_set_error", c->i32, ps, 2, 1), a, 5);
  LLVMBuildBr(c->b, c->fail);
  LLVMAddIncoming(c->rcphi, &rc, &report, 1);
  LLVMPositionBuilderAtEnd(c->b, next);
  for (int l = 0; l < n->rank; l++) cg_close_loop(c);
  LLVMBuildBr(c->b, ok); /* not reached: the first pass saw a bad index */
  LLVMPositionBuilderAtEnd(c->b, ok);
}
