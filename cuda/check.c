/* check.c — index checks on the device (loops.h "Indexing by tensors").
 *
 * A check nest is a device kernel like an elementwise one: a thread per
 * element of the index (grid-stride, row-major position p).  A thread
 * whose index is out of range lowers flags[0] to its p (an unsigned
 * atomic min: flags[0] starts as all ones), and a thread that then reads
 * its own p in flags[0] writes its index into flags[1].  One launch may
 * leave flags[1] from a thread that a smaller p overtook later; the host
 * (cu_emit_host_check) therefore copies flags[0] back and, only when an
 * index failed, launches the kernel once more: flags[0] is then already
 * the smallest failing p, so exactly that thread writes flags[1].  The
 * host reports it as the CPU does (TDSL_E_INDEX, the same message, the
 * first bad index in row-major order) before any later nest runs: the
 * check sits before every nest that writes an output.
 *
 * flags: 2 x i64 of device memory (tdsl_cuda_scratch), the last
 * parameter of every device kernel of a kernel with checks (cuda.h).
 * Needs: cuda.h. */
#include "cuda.h"

/* Index v out of [lo, lo + span) as (unsigned)(v - lo) >= span. */
static LLVMValueRef out_of_range(Cg *c, LLVMValueRef v, LLVMValueRef lo, LLVMValueRef span) {
  return LLVMBuildICmp(c->b, LLVMIntUGE, LLVMBuildSub(c->b, v, lo, ""), span, "");
}

static void bounds(Cg *c, const LfCheck *ck, LLVMValueRef *lo, LLVMValueRef *span) {
  LLVMValueRef bound = cg_sym_val(c, ck->bound);
  *lo = ck->wrap ? LLVMBuildNeg(c->b, bound, "") : i64c(c, 0);
  *span = LLVMBuildSub(c->b, bound, *lo, "");
}

bool cu_has_checks(const LfKernel *lk) {
  for (int i = 0; i < lk->nnests; i++)
    if (lk->nests[i].check) return true;
  return false;
}

void cu_emit_check_kernel(Cg *c, const LfNest *n, LLVMValueRef fn) {
  LLVMValueRef *rts[64];
  if (c->k->nresults > 64) ICE("more than 64 results");
  cu_unpack(c, fn, rts);
  LLVMValueRef flags = LLVMGetParam(fn, LLVMCountParams(fn) - 1);
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
  LLVMValueRef lo, span;
  bounds(c, n->check, &lo, &span);
  CuLoop l;
  LLVMValueRef p = cu_loop_open(c, &l, cu_global_tid(c), cu_outer_product(c, n, 0, n->rank),
                                cu_grid_threads(c));
  cu_split_rowmajor(c, p, n->shape, n->rank, x.iv);
  LLVMValueRef v = cg_eval(c, &x, n->value);
  LLVMBasicBlockRef bad = block(c, "index_bad"), mine = block(c, "index_first"),
                    next = block(c, "index_next");
  LLVMBuildCondBr(c->b, out_of_range(c, v, lo, span), bad, next);
  LLVMPositionBuilderAtEnd(c->b, bad);
  LLVMBuildAtomicRMW(c->b, LLVMAtomicRMWBinOpUMin, flags, p, LLVMAtomicOrderingMonotonic, 0);
  LLVMValueRef first = LLVMBuildLoad2(c->b, c->i64, flags, "");
  LLVMSetVolatile(first, 1);
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, first, p, ""), mine, next);
  LLVMPositionBuilderAtEnd(c->b, mine);
  LLVMValueRef one = i64c(c, 1);
  LLVMValueRef st = LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, c->i64, flags, &one, 1, ""));
  LLVMSetVolatile(st, 1);
  LLVMBuildBr(c->b, next);
  LLVMPositionBuilderAtEnd(c->b, next);
  cu_loop_close(c, &l);
  LLVMBuildRetVoid(c->b);
}

/* The host's rc check of a runtime call: nonzero goes to the failure exit. */
static void copy_back(Cg *c, LLVMValueRef host, LLVMValueRef flags) {
  LLVMTypeRef ps[3] = {c->ptr, c->ptr, c->i64};
  LLVMValueRef a[3] = {host, flags, i64c(c, 16)};
  cg_check_rc(c, call(c, cg_fdecl(c, "tdsl_cuda_memcpy_dtoh", c->i32, ps, 3, 0), a, 3));
  cg_check_rc(c, call(c, cg_fdecl(c, "tdsl_cuda_synchronize", c->i32, NULL, 0, 0), NULL, 0));
}

void cu_emit_host_check(Cg *c, const LfNest *n, LLVMValueRef flags,
                        void (*launch)(Cg *c, const LfNest *n, LLVMValueRef fn, LLVMValueRef args),
                        LLVMValueRef fn, LLVMValueRef args) {
  LLVMTypeRef ms[3] = {c->ptr, c->i32, c->i64};
  LLVMValueRef ma[3] = {flags, i32c(c, 0xff), i64c(c, 16)};
  cg_check_rc(c, call(c, cg_fdecl(c, "tdsl_cuda_memset", c->i32, ms, 3, 0), ma, 3));
  launch(c, n, fn, args);
  LLVMValueRef host = cg_entry_alloca(c, c->i64, i32c(c, 2));
  copy_back(c, host, flags);
  LLVMBasicBlockRef bad = block(c, "index_bad"), ok = block(c, "index_ok");
  LLVMValueRef f0 = LLVMBuildLoad2(c->b, c->i64, host, "");
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, f0, i64c(c, -1), ""), ok, bad);
  LLVMPositionBuilderAtEnd(c->b, bad);
  launch(c, n, fn, args); /* again: now only the first bad index writes flags[1] */
  copy_back(c, host, flags);
  LLVMValueRef one = i64c(c, 1);
  LLVMValueRef v = LLVMBuildLoad2(c->b, c->i64, LLVMBuildGEP2(c->b, c->i64, host, &one, 1, ""), "");
  LLVMTypeRef ps[2] = {c->i32, c->ptr};
  LLVMValueRef a[5] = {i32c(c, E_INDEX),
                       str(c, arena_printf(c->m->arena, "kernel '%%s': %s", n->check->msg)),
                       c->kname, v, cg_sym_val(c, n->check->bound)};
  LLVMValueRef rc = call(c, cg_fdecl(c, "tdsl_set_error", c->i32, ps, 2, 1), a, 5);
  LLVMBasicBlockRef at = LLVMGetInsertBlock(c->b);
  LLVMBuildBr(c->b, c->fail);
  LLVMAddIncoming(c->rcphi, &rc, &at, 1);
  LLVMPositionBuilderAtEnd(c->b, ok);
}
