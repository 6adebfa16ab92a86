/* scan.c — the CPU code of scan nests (loops.h "Scans": cumsum, cumprod,
 * logcumsumexp).  The scanned loop always runs sequentially, the
 * accumulator (PyTorch's CPU acc_type: f64 for f32) carried from one
 * step to the next and every step stored.
 *  - One row at the current outer index (cpu_emit_scan): the scanned
 *    loop alone, as PyTorch's CPU kernel walks each row.
 *  - Columns (cpu_emit_scan_columns), when the innermost outer loop is
 *    unit-stride in the store (the scanned dim is not the innermost):
 *    blocks of SCAN_LANES adjacent columns go through the scanned loop
 *    together, one accumulator per lane, so each step loads and stores
 *    SCAN_LANES contiguous elements (LLVM's SLP vectorizer widens the
 *    lanes) instead of walking one column at a stride; the last columns
 *    that fill no block run one by one.
 * Needs: cpu.h.  Used by: kernel.c, vloops.c, parallel.c. */
#include "cpu.h"

#define SCAN_LANES 8

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
  LLVMValueRef nblk = LLVMBuildSDiv(b, LLVMBuildSub(b, j1, j0, ""), lanes, "");
  LLVMValueRef acc[SCAN_LANES];
  for (int l = 0; l < SCAN_LANES; l++) acc[l] = cg_entry_alloca(c, t, NULL);
  /* full blocks */
  LLVMValueRef jb = LLVMBuildAdd(b, j0, LLVMBuildMul(b, cg_open_loop(c, nblk), lanes, ""), "");
  LLVMValueRef init = cg_eval(c, x, n->scan_init);
  for (int l = 0; l < SCAN_LANES; l++) LLVMBuildStore(b, init, acc[l]);
  x->iv[n->rank] = cg_open_loop(c, x->ub[n->rank]);
  for (int l = 0; l < SCAN_LANES; l++) {
    x->iv[j] = LLVMBuildAdd(b, jb, i64c(c, l), "");
    scan_step(c, x, acc[l]);
  }
  cg_close_loop(c);
  cg_close_loop(c);
  /* the last columns, one by one */
  x->iv[j] = cg_open_loop_from(c, LLVMBuildAdd(b, j0, LLVMBuildMul(b, nblk, lanes, ""), ""), j1);
  cpu_emit_scan(c, x);
  cg_close_loop(c);
}

LLVMValueRef cpu_scan_grain(Cg *c, LLVMValueRef grain) {
  return cg_smin(c, grain, i64c(c, SCAN_LANES), true);
}
