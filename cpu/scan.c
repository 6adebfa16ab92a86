/* scan.c — the CPU code of scan nests (loops.h "Scans": cumsum, cumprod,
 * logcumsumexp).  The scanned loop always runs sequentially, the
 * accumulator (PyTorch's CPU acc_type: f64 for f32) carried from one
 * step to the next and every step stored.
 *  - One row at the current outer index (cpu_emit_scan): the scanned
 *    loop alone, as PyTorch's CPU kernel walks each row.
 *  - Columns (cpu_emit_scan_columns), when the innermost outer loop is
 *    unit-stride in the store (the scanned dim is not the innermost):
 *    blocks of up to SCAN_LANES adjacent columns go through the scanned
 *    loop together, their accumulators in a small array, so each step
 *    runs a unit-stride loop over the block's columns (loads, the step,
 *    stores: LLVM's loop vectorizer widens it) instead of walking one
 *    column at a stride; each step reads whole cache lines.
 * Needs: cpu.h.  Used by: kernel.c, vloops.c, parallel.c. */
#include "cpu.h"

#define SCAN_LANES 64

/* The step at x's index with the accumulator in slot acc: acc = value,
 * stored converted to the nest's dtype. */
static void scan_step(Cg *c, NestCtx *x, LLVMValueRef acc) {
  const LfNest *n = x->n;
  DType ad = n->value->dtype;
  LLVMTypeRef t = cg_compute_type(c, ad);
  x->acc = LLVMBuildLoad2(c->b, t, acc, "");
  LLVMValueRef v = cg_eval(c, x, n->value);
  LLVMBuildStore(c->b, v, acc);
  cg_store_el(c, cg_convert(c, v, ad, n->dtype),
              cg_address(c, x, &n->store, n->dtype, n->rank + 1), n->dtype);
}

void cpu_emit_scan(Cg *c, NestCtx *x) {
  const LfNest *n = x->n;
  LLVMTypeRef t = cg_compute_type(c, n->value->dtype);
  LLVMValueRef acc = cg_entry_alloca(c, t, NULL);
  LLVMBuildStore(c->b, cg_eval(c, x, n->scan_init), acc);
  x->iv[n->rank] = cg_open_loop(c, x->ub[n->rank]);
  scan_step(c, x, acc);
  cg_close_loop(c);
}

bool cpu_scan_columns(Cg *c, const LfNest *n, const VLoops *vl) {
  (void)c;
  if (!lf_is_scan(n) || vl->nouter < 1 || n->store.lin_rank || n->store.rt_strides) return false;
  int j = vl->var[vl->nouter - 1];
  return j >= 0 && sym_is(n->store.stride[j], 1) && !sym_is(n->store.stride[n->rank], 1);
}

void cpu_emit_scan_columns(Cg *c, NestCtx *x, int j, LLVMValueRef j0, LLVMValueRef j1) {
  const LfNest *n = x->n;
  LLVMBuilderRef b = c->b;
  LLVMTypeRef t = cg_compute_type(c, n->value->dtype);
  LLVMValueRef lanes = i64c(c, SCAN_LANES);
  LLVMValueRef acc = cg_entry_alloca(c, LLVMArrayType(t, SCAN_LANES), NULL);
  LLVMValueRef nblk = LLVMBuildSDiv(b, LLVMBuildAdd(b, LLVMBuildSub(b, j1, j0, ""),
                                                   i64c(c, SCAN_LANES - 1), ""), lanes, "");
  LLVMValueRef jb = LLVMBuildAdd(b, j0, LLVMBuildMul(b, cg_open_loop(c, nblk), lanes, ""), "");
  LLVMValueRef w = cg_smin(c, LLVMBuildSub(b, j1, jb, ""), lanes, false);
  LLVMValueRef init = cg_eval(c, x, n->scan_init);
  LLVMValueRef l = cg_open_loop(c, w);
  LLVMBuildStore(b, init, LLVMBuildGEP2(b, t, acc, &l, 1, ""));
  cg_close_loop(c);
  x->iv[n->rank] = cg_open_loop(c, x->ub[n->rank]);
  l = cg_open_loop(c, w);
  x->iv[j] = LLVMBuildAdd(b, jb, l, "");
  scan_step(c, x, LLVMBuildGEP2(b, t, acc, &l, 1, ""));
  cg_close_loop(c);
  cg_close_loop(c);
  cg_close_loop(c);
}

LLVMValueRef cpu_scan_grain(Cg *c, LLVMValueRef grain) {
  return cg_smin(c, grain, i64c(c, SCAN_LANES), true);
}
