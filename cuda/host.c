/* host.c — the host function K of a CUDA kernel (cuda.h): the same
 * signature as the CPU's (spec §7.1).  It
 *  1. runs the entry checks (codegen/entry.c) for kDLCUDA tensors, and
 *     answers a shape query (every output's data NULL) without touching
 *     the driver;
 *  2. checks that every tensor is on one device (tdsl_cuda_check_device);
 *  3. does everything that can fail before the first launch: loads the
 *     driver, makes the device's primary context current and loads the
 *     module (tdsl_cuda_prepare), allocates scratch (stream-ordered,
 *     tdsl_cuda_scratch);
 *  4. launches one device kernel per launch unit (a nest, or a row
 *     group: cu_unit; a split reduction: its partial kernel, then its
 *     finish kernel when it has more than one block per output) on the
 *     runtime's current stream (units with no work are skipped), frees
 *     scratch (and the split reductions' partials) in stream order and returns
 *     without synchronizing; an index check (check.c) copies its verdict
 *     back, synchronizing, and fails the kernel with TDSL_E_INDEX there.
 * A failure before step 4 returns its code with nothing written; so does
 * a failed index check (no nest before it writes an output: loops.h).
 * Needs: cuda.h. */
#include <string.h>

#include "cuda.h"

static LLVMValueRef scratch_alloc(Cg *c, LLVMValueRef bytes) {
  LLVMTypeRef ps[2] = {c->ptr, c->i64};
  LLVMValueRef a[2] = {c->kname, bytes};
  return call(c, cg_fdecl(c, "tdsl_cuda_scratch", c->ptr, ps, 2, 0), a, 2);
}

static void scratch_free(Cg *c, LLVMValueRef p) {
  call(c, cg_fdecl(c, "tdsl_cuda_scratch_free", c->vd, &c->ptr, 1, 0), &p, 1);
}

/* The device kernels' parameter values (cuda.h's order). */
static LLVMValueRef *param_values(Cg *c, int np, LLVMValueRef partials, LLVMValueRef flags) {
  LLVMValueRef *v = arena_alloc(c->m->arena, sizeof *v * (size_t)(np + 1));
  const LfKernel *lk = c->lk;
  const IrKernel *k = c->k;
  int p = 0;
  for (int i = 0; i < lk->nbufs; i++) {
    LfBufKind kd = lk->bufs[i].kind;
    v[p++] = kd == LFB_CONST || kd == LFB_SCALAR ? LLVMConstNull(c->ptr) : c->base[i];
  }
  for (int s = 0; s < k->nsyms; s++) v[p++] = c->env[s];
  for (int r = 0; r < k->nresults; r++)
    for (int d = 0; d < k->results[r].rank; d++)
      v[p++] = cg_dl_stride(c, c->args[k->nparams + r], k->results[r].rank, d);
  for (int i = 0; i < lk->nbufs; i++) {
    const LfBuf *b = &lk->bufs[i];
    if (b->kind != LFB_SCALAR) continue;
    LLVMValueRef a = c->args[b->index];
    if (b->dtype == DT_BOOL) a = cg_to_bool(c, a);
    LLVMTypeRef t = LLVMTypeOf(a);
    if (LLVMGetTypeKind(t) != LLVMIntegerTypeKind)
      a = LLVMBuildBitCast(c->b, a, LLVMIntTypeInContext(c->ctx, LLVMGetTypeKind(t) == LLVMDoubleTypeKind ? 64 : 32), "");
    v[p++] = LLVMGetIntTypeWidth(LLVMTypeOf(a)) == 64 ? a : LLVMBuildZExt(c->b, a, c->i64, "");
  }
  if (partials) v[p++] = partials;
  if (flags) v[p++] = flags;
  return v;
}

/* ceil(a / b), at most CU_MAX_BLOCKS (grid-stride loops do the rest),
 * as i64. */
static LLVMValueRef blocks(Cg *c, LLVMValueRef a, int b, int64_t cap) {
  LLVMValueRef n = LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, a, i64c(c, b - 1), ""), i64c(c, b), "");
  return cg_smin(c, n, i64c(c, cap), false);
}

static LLVMValueRef u32(Cg *c, LLVMValueRef v) { return LLVMBuildTrunc(c->b, v, c->i32, ""); }

/* tdsl_cuda_launch of fn on grid (gx, gy, gz) of CU_BLOCK-thread blocks
 * (i64 values that fit 32 bits); a failure goes to the failure exit. */
static void launch_grid(Cg *c, LLVMValueRef fn, LLVMValueRef gx, LLVMValueRef gy, LLVMValueRef gz,
                        LLVMValueRef args) {
  LLVMTypeRef ps[10] = {c->ptr, c->ptr, c->i32, c->i32, c->i32, c->i32, c->i32, c->i32, c->i32, c->ptr};
  LLVMValueRef a[10] = {c->kname, fn, u32(c, gx), u32(c, gy), u32(c, gz), i32c(c, CU_BLOCK),
                        i32c(c, 1), i32c(c, 1), i32c(c, 0), args};
  cg_check_rc(c, call(c, cg_fdecl(c, "tdsl_cuda_launch", c->i32, ps, 10, 0), a, 10));
}

/* Launches the kernel fn of the unit starting at nest n (unit nests: a
 * row group when > 1; v: its variant, NULL for the general kernel), its
 * parameters in args, when it has work. */
static void launch(Cg *c, const LfNest *n, int unit, const CuVariant *v, LLVMValueRef fn,
                   LLVMValueRef args) {
  CuPlan p = cu_plan(n);
  LLVMValueRef g[3] = {NULL, i64c(c, 1), i64c(c, 1)}, work;
  if (v && v->form == CU_FORM_PLAIN) { /* a thread per v->vec elements */
    work = cu_outer_product(c, n, 0, n->rank);
    g[0] = blocks(c, work, CU_BLOCK * v->vec, CU_MAX_BLOCKS);
  } else if (unit > 1) { /* a row group: a block or a warp per row (cu_group_blocks) */
    work = cu_outer_product(c, n, 0, n->shared);
    g[0] = cu_group_blocks(c, n);
  } else if (p.kind == CU_GEMM) {
    work = cu_gemm_grid(c, n, g);
  } else if (p.kind == CU_ELEMWISE && cu_transposes(c->m->st, n, c->target)) {
    work = cu_outer_product(c, n, 0, n->rank); /* a block per 32 x 32 tile, at most */
    g[0] = blocks(c, work, 1024, CU_MAX_BLOCKS);
  } else {
    work = cu_outer_product(c, n, 0, n->rank);
    int per = p.kind == CU_ELEMWISE ? CU_BLOCK : CU_BLOCK / p.group;
    g[0] = blocks(c, work, per, CU_MAX_BLOCKS);
  }
  LLVMBasicBlockRef go = block(c, "launch"), done = block(c, "launched");
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, work, i64c(c, 0), ""), go, done);
  LLVMPositionBuilderAtEnd(c->b, go);
  launch_grid(c, fn, g[0], g[1], g[2], args);
  LLVMBuildBr(c->b, done);
  LLVMPositionBuilderAtEnd(c->b, done);
}

/* ---- split reductions (nest.c "Split reductions") ----
 * The partials: one scratch buffer (tdsl_cuda_scratch, stream-ordered)
 * sized for the largest split nest of the kernel that runs with more
 * than one block per output (the nests run in stream order, so each
 * reuses it), NULL when none does; its pointer also in *slot. */
static LLVMValueRef split_partials(Cg *c, LLVMValueRef slot) {
  const LfKernel *lk = c->lk;
  LLVMValueRef bytes = i64c(c, 0);
  for (int i = 0; i < lk->nnests; i++) {
    if (cu_unit_funcs(lk, i, c->opt) != 2) continue;
    const LfNest *n = &lk->nests[i];
    LLVMValueRef S = cu_split_count(c, n);
    LLVMValueRef k = LLVMBuildMul(c->b, cu_outer_product(c, n, 0, n->rank), S, "");
    LLVMValueRef two = LLVMBuildAnd(c->b, cu_split_used(c, n),
                                    LLVMBuildICmp(c->b, LLVMIntSGT, S, i64c(c, 1), ""), "");
    k = LLVMBuildSelect(c->b, two, k, i64c(c, 0), "");
    bytes = cg_smin(c, bytes, LLVMBuildMul(c->b, k, i64c(c, CU_SPLIT_BYTES), ""), true);
  }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), get = block(c, "partials"),
                    done = block(c, "partials_done");
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, bytes, i64c(c, 0), ""), get, done);
  LLVMPositionBuilderAtEnd(c->b, get);
  LLVMValueRef p = scratch_alloc(c, bytes);
  LLVMBuildStore(c->b, p, slot);
  cg_check_rc(c, LLVMBuildSelect(c->b, LLVMBuildIsNull(c->b, p, ""), i32c(c, E_NOMEM), i32c(c, 0), ""));
  LLVMBasicBlockRef got = LLVMGetInsertBlock(c->b);
  LLVMBuildBr(c->b, done);
  LLVMPositionBuilderAtEnd(c->b, done);
  LLVMValueRef phi = LLVMBuildPhi(c->b, c->ptr, "partials");
  LLVMValueRef null = LLVMConstNull(c->ptr);
  LLVMAddIncoming(phi, &null, &pre, 1);
  LLVMAddIncoming(phi, &p, &got, 1);
  return phi;
}

/* Split reduction n: the partial kernel fn on grid (S, output groups),
 * then, when S > 1, the finish kernel fin on a block per output. */
static void launch_split(Cg *c, const LfNest *n, LLVMValueRef fn, LLVMValueRef fin, LLVMValueRef args) {
  LLVMValueRef outs = cu_outer_product(c, n, 0, n->rank), S = cu_split_count(c, n);
  LLVMBasicBlockRef go = block(c, "launch"), two = block(c, "launch_fin"), done = block(c, "launched");
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, outs, i64c(c, 0), ""), go, done);
  LLVMPositionBuilderAtEnd(c->b, go);
  launch_grid(c, fn, S, cg_smin(c, cu_split_groups(c, n), i64c(c, 65535), false), i64c(c, 1), args);
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, S, i64c(c, 1), ""), two, done);
  LLVMPositionBuilderAtEnd(c->b, two);
  launch_grid(c, fin, cg_smin(c, outs, i64c(c, CU_MAX_BLOCKS), false), i64c(c, 1), i64c(c, 1), args);
  LLVMBuildBr(c->b, done);
  LLVMPositionBuilderAtEnd(c->b, done);
}

/* Frees the scratch in slot: the index checks' flags or the split
 * reductions' partials (NULL when none were allocated). */
static void free_flags(Cg *c, LLVMValueRef slot) {
  scratch_free(c, LLVMBuildLoad2(c->b, c->ptr, slot, ""));
}

static void launch1(Cg *c, const LfNest *n, LLVMValueRef fn, LLVMValueRef args) {
  launch(c, n, 1, NULL, fn, args);
}

static void launch_variant(Cg *c, const LfNest *n, const CuVariant *v, LLVMValueRef fn,
                           LLVMValueRef args) {
  launch(c, n, 1, v->form == CU_FORM_DEFAULT ? NULL : v, fn, args);
}

/* Every tensor argument on one device: its id. */
static LLVMValueRef device_id(Cg *c) {
  LLVMValueRef dev = cg_entry_alloca(c, c->i32, NULL);
  LLVMBuildStore(c->b, i32c(c, -1), dev);
  int na = c->k->nparams + c->k->nresults;
  for (int i = 0; i < na; i++) {
    const char *name;
    char buf[32];
    if (i < c->k->nparams) {
      if (!c->k->params[i].is_tensor) continue;
      name = c->k->params[i].name;
    } else {
      snprintf(buf, sizeof buf, "out%d", i - c->k->nparams);
      name = buf;
    }
    LLVMTypeRef ps[4] = {c->ptr, c->ptr, c->ptr, c->ptr};
    LLVMValueRef a[4] = {c->kname, str(c, name), c->args[i], dev};
    cg_check_rc(c, call(c, cg_fdecl(c, "tdsl_cuda_check_device", c->i32, ps, 4, 0), a, 4));
  }
  return LLVMBuildLoad2(c->b, c->i32, dev, "");
}

void cu_emit_host_kernel(Cg *c, LLVMValueRef module, int nfuncs, int fn0) {
  const IrKernel *k = c->k;
  const LfKernel *lk = c->lk;
  c->scratch_alloc = scratch_alloc;
  c->scratch_free = scratch_free;
  cg_begin_kernel(c, k, lk, false);
  c->scalar = NULL; /* the host passes scalars' bits on; it evaluates none */
  LLVMValueRef fns = cg_entry_alloca(c, c->ptr, i32c(c, nfuncs ? nfuncs : 1));
  LLVMValueRef flags_slot = cg_entry_alloca(c, c->ptr, NULL);
  LLVMBuildStore(c->b, LLVMConstNull(c->ptr), flags_slot);
  LLVMValueRef split_slot = cg_entry_alloca(c, c->ptr, NULL);
  LLVMBuildStore(c->b, LLVMConstNull(c->ptr), split_slot);
  cg_emit_entry_checks(c);
  LLVMValueRef dev = device_id(c);
  LLVMTypeRef pp[4] = {c->ptr, c->ptr, c->i32, c->ptr};
  LLVMValueRef pa[4] = {c->kname, module, dev, fns};
  cg_check_rc(c, call(c, cg_fdecl(c, "tdsl_cuda_prepare", c->i32, pp, 4, 0), pa, 4));
  for (int i = 0; i < lk->nbufs; i++) {
    const LfBuf *b = &lk->bufs[i];
    if (b->kind == LFB_PARAM) c->base[i] = cg_dl_base(c, c->args[b->index]);
    else if (b->kind == LFB_OUTPUT) c->base[i] = cg_dl_base(c, c->args[k->nparams + b->index]);
    else if (b->kind == LFB_SCRATCH) cg_setup_scratch(c, i);
    else c->base[i] = LLVMConstNull(c->ptr);
  }
  LLVMValueRef flags = NULL;
  if (cu_has_checks(lk)) { /* the index checks' flags (check.c) */
    LLVMValueRef a[2] = {c->kname, i64c(c, 16)};
    LLVMTypeRef ps[2] = {c->ptr, c->i64};
    flags = call(c, cg_fdecl(c, "tdsl_cuda_scratch", c->ptr, ps, 2, 0), a, 2);
    LLVMBuildStore(c->b, flags, flags_slot);
    cg_check_rc(c, LLVMBuildSelect(c->b, LLVMBuildIsNull(c->b, flags, ""), i32c(c, E_NOMEM),
                                   i32c(c, 0), ""));
  }
  LLVMValueRef partials = cu_has_split(lk) ? split_partials(c, split_slot) : NULL;
  int np = cu_nparams(k, lk);
  LLVMValueRef *pv = param_values(c, np, partials, flags);
  LLVMValueRef args = cg_entry_alloca(c, c->ptr, i32c(c, np ? np : 1));
  for (int p = 0; p < np; p++) {
    LLVMValueRef cell = cg_entry_alloca(c, LLVMTypeOf(pv[p]), NULL);
    LLVMBuildStore(c->b, pv[p], cell);
    LLVMValueRef o = i64c(c, p);
    LLVMBuildStore(c->b, cell, LLVMBuildGEP2(c->b, c->ptr, args, &o, 1, ""));
  }
  for (int i = 0, f = fn0; i < lk->nnests; i++) {
    int unit = cu_unit(lk, i, c->opt);
    if (!unit) continue;
    CuVariant vs[CU_MAX_VARIANTS];
    int nv = cu_variants(c->m->st, lk, i, c->opt, c->target, vs);
    if (nv > 1) { /* chosen from the arguments (variant.c) */
      cu_emit_host_variants(c, &lk->nests[i], vs, nv, fns, f, launch_variant, args);
      f += nv;
      continue;
    }
    LLVMValueRef o = i64c(c, f++);
    LLVMValueRef fn = LLVMBuildLoad2(c->b, c->ptr, LLVMBuildGEP2(c->b, c->ptr, fns, &o, 1, ""), "");
    if (cu_unit_funcs(lk, i, c->opt) == 2) { /* a split reduction: its finish kernel next */
      o = i64c(c, f++);
      LLVMValueRef fin = LLVMBuildLoad2(c->b, c->ptr, LLVMBuildGEP2(c->b, c->ptr, fns, &o, 1, ""), "");
      LLVMBasicBlockRef few = block(c, "split"), many = block(c, "warps"), done = block(c, "split_done");
      LLVMBuildCondBr(c->b, cu_split_used(c, &lk->nests[i]), few, many);
      LLVMPositionBuilderAtEnd(c->b, few);
      launch_split(c, &lk->nests[i], fn, fin, args);
      LLVMBuildBr(c->b, done);
      LLVMPositionBuilderAtEnd(c->b, many);
      launch(c, &lk->nests[i], unit, NULL, fn, args);
      LLVMBuildBr(c->b, done);
      LLVMPositionBuilderAtEnd(c->b, done);
    } else if (lk->nests[i].check) {
      cu_emit_host_check(c, &lk->nests[i], flags, launch1, fn, args);
    } else {
      launch(c, &lk->nests[i], unit, NULL, fn, args);
    }
  }
  cg_free_scratch(c);
  free_flags(c, flags_slot);
  free_flags(c, split_slot);
  LLVMBuildRet(c->b, i32c(c, 0));
  LLVMPositionBuilderAtEnd(c->b, c->fail);
  cg_free_scratch(c);
  free_flags(c, flags_slot);
  free_flags(c, split_slot);
  LLVMBuildRet(c->b, c->rcphi);
}
