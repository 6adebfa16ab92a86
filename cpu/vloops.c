/* vloops.c — the CPU loops of one nest, as its schedule (loops.h
 * lf_schedule) says: collapsed loops' extents, tiles, odometer stepping
 * of a flattened range, streaming stores of large elementwise outputs,
 * and the loops over a range of outer iterations (cpu_emit_nest_range;
 * transposing copies run as transpose.c's register blocks).
 * Needs: cpu.h, the runtime's tdsl_stream_min_bytes.  Used by: parallel.c. */
#include <string.h>

#include <llvm-c/TargetMachine.h>

#include "cpu.h"

/* The schedule (loops.h lf_schedule) as LLVM values: each virtual loop's
 * extent, the product of its loops' (x->ub; a collapsed outer loop's
 * variable is 0, a collapsed reduction loop's bound moves to the loop
 * carrying the index), then the tile applied. */
void cpu_plan_vloops(Cg *c, const LfNest *n, NestCtx *x, VLoops *v) {
  LfSchedule s = lf_schedule(c->m->st, n, c->target);
  v->n = s.n, v->nouter = s.nouter;
  for (int k = 0; k < s.n; k++) {
    const int *m = &s.order[s.first[k]];
    LLVMValueRef ub = x->ub[m[0]];
    for (int j = 1; j < s.count[k]; j++) {
      x->iv[m[j - 1]] = i64c(c, 0);
      ub = LLVMBuildMul(c->b, ub, x->ub[m[j]], "");
      if (k >= s.nouter) { /* emit_reduce runs m[j - 1] once and m[j] over both */
        x->ub[m[j]] = ub;
        x->ub[m[j - 1]] = i64c(c, 1);
      }
    }
    v->var[k] = m[s.count[k] - 1];
    v->ub[k] = ub;
  }
  v->par = s.par;
  v->tile_var = s.tile_var;
  if (s.tile_var < 0) return;
  int k = s.tile_k;
  v->tile_ub = v->ub[k];
  v->blocked = s.blocked;
  v->tile = s.tile;
  if (v->blocked) {
    v->var[k] = VL_BLOCK;
    v->ub[k] = LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, v->ub[k], i64c(c, v->tile - 1), ""),
                             i64c(c, v->tile), "");
  } else {
    for (int m = k; m + 1 < v->n; m++) v->var[m] = v->var[m + 1], v->ub[m] = v->ub[m + 1];
    v->n--, v->nouter--;
  }
}

/* Steps the odometer idx over virtual loops 0..p-1 by one. */
void cpu_odometer_step(Cg *c, const VLoops *vl, LLVMValueRef *idx, int p) {
  LLVMValueRef carry = i64c(c, 1);
  for (int j = p - 1; j >= 0; j--) {
    LLVMValueRef nv = LLVMBuildAdd(c->b, LLVMBuildLoad2(c->b, c->i64, idx[j], ""), carry, "");
    if (j == 0) {
      LLVMBuildStore(c->b, nv, idx[j]);
      break;
    }
    LLVMValueRef wrap = LLVMBuildICmp(c->b, LLVMIntEQ, nv, vl->ub[j], "");
    LLVMBuildStore(c->b, sel(c, wrap, i64c(c, 0), nv), idx[j]);
    carry = LLVMBuildZExt(c->b, wrap, c->i64, "");
  }
}

/* ---- streaming stores ---------------------------------------------------
 * An elementwise nest whose innermost loop stores unit-stride writes its
 * output around the caches (non-temporal stores) when the whole output
 * is at least tdsl_stream_min_bytes() (runtime/stream.c: half the
 * last-level cache), decided at run time: a store that misses the cache
 * first reads the line it overwrites, a third of a one-input elementwise
 * op's memory traffic, and an output that large is evicted before anyone
 * reads it anyway.  The innermost loop then runs plain up to the
 * output's first 32-byte boundary, then in chunks of STREAM_CHUNK_BYTES:
 * the loop vectorizer vectorizes each chunk's values into a buffer on the
 * stack (in L1) as it does the plain loop (it does not vectorize a loop
 * whose element stores are non-temporal), and the chunk is copied out
 * with aligned 32-byte non-temporal vector stores; the last partial chunk
 * runs plain.  Chunks are short (four cache lines) because bursts of
 * non-temporal stores wait for the write-combining buffers: on the Zen 3
 * development machine, in process CPU time, ew_chain's streamed nest was
 * 1.2x the plain one with 256-byte chunks, 1.06x with 1 KB and 1.03x with
 * 2 KB (a hand-written AVX2 loop streaming each vector as computed: 1.2x).
 * The values, and so the results, are the plain loop's.
 * The nest function ends with an sfence, so the stores are visible before
 * its chunk of the parallel loop counts as done.  x86 only (the CPU
 * backend's targets).  A row group (parallel.c) streams its last nest
 * the same way (cpu_group_stream) when that nest writes a buffer no nest
 * of the group reads again: layer_norm's result, not softmax's (its last
 * nest scales the row in place, in cache). */
#define STREAM_CHUNK_BYTES 256
#define STREAM_VEC_BYTES 32

/* Whether e loads from buffer buf. */
static bool reads_buffer(const LfExpr *e, int buf) {
  if (e->kind == LFE_LOAD && e->acc.buf == buf) return true;
  for (int a = 0; a < e->nargs; a++)
    if (reads_buffer(e->args[a], buf)) return true;
  return false;
}

/* Whether n's innermost loop (virtual loop nopen - 1 of vl, p of them
 * parallel) may stream: a loop inside the parallel ones, or the one
 * parallel loop itself (a nest flattened to one loop, whose chunk of the
 * parallel range streams). */
static bool stream_eligible(const LfNest *n, const VLoops *vl, int p, int nopen) {
  if (p > nopen || (p == nopen && p != 1) || nopen != vl->nouter || vl->tile_var >= 0 ||
      n->reduce != OP_COUNT ||
      lf_is_scan(n) || n->store.rt_strides || n->store.lin_rank || n->store.ndyn)
    return false;
  int var = vl->var[nopen - 1];
  if (var < 0 || !sym_is(n->store.stride[var], 1)) return false;
  char *t = LLVMGetDefaultTargetTriple(); /* "host" may be another ISA: sfence is x86's */
  bool x86 = !strncmp(t, "x86_64", 6);
  LLVMDisposeMessage(t);
  return x86;
}

/* Whether the whole output of n (vl's loops) is large enough to stream,
 * as an i1 at the builder's position. */
static LLVMValueRef stream_wanted(Cg *c, const LfNest *n, const VLoops *vl) {
  LLVMValueRef bytes = i64c(c, (long long)dtype_size(n->dtype));
  for (int k = 0; k < vl->n; k++) bytes = LLVMBuildMul(c->b, bytes, vl->ub[k], "");
  LLVMValueRef min = call(c, cg_fdecl(c, "tdsl_stream_min_bytes", c->i64, NULL, 0, 0), NULL, 0);
  return LLVMBuildICmp(c->b, LLVMIntSGE, bytes, min, "");
}

LLVMValueRef cpu_group_stream(Cg *c, const LfNest *g) {
  const LfNest *n = &g[g->group - 1];
  int last = n->rank - 1;
  if (g->group < 2 || n->reduce != OP_COUNT || lf_is_scan(n) || last < g->shared ||
      n->store.rt_strides || n->store.lin_rank || n->store.ndyn ||
      !sym_is(n->store.stride[last], 1) || reads_buffer(n->value, n->store.buf))
    return NULL;
  char *t = LLVMGetDefaultTargetTriple(); /* "host" may be another ISA: sfence is x86's */
  bool x86 = !strncmp(t, "x86_64", 6);
  LLVMDisposeMessage(t);
  if (!x86) return NULL;
  LLVMValueRef bytes = i64c(c, (long long)dtype_size(n->dtype));
  for (int l = 0; l < n->rank; l++) bytes = LLVMBuildMul(c->b, bytes, cg_sym_val(c, n->shape[l]), "");
  LLVMValueRef min = call(c, cg_fdecl(c, "tdsl_stream_min_bytes", c->i64, NULL, 0, 0), NULL, 0);
  return LLVMBuildICmp(c->b, LLVMIntSGE, bytes, min, "");
}

/* A plain loop of n's innermost loop var over [lo, hi). */
static void emit_inner_plain(Cg *c, const LfNest *n, NestCtx *x, int var, LLVMValueRef lo,
                             LLVMValueRef hi) {
  x->iv[var] = cg_open_loop_from(c, lo, hi);
  cg_store_el(c, cg_eval(c, x, n->value), cg_address(c, x, &n->store, n->dtype, n->rank),
              n->dtype);
  cg_close_loop(c);
}

/* The innermost loop of elementwise nest n, variable var over [lo, ub):
 * when `stream` (i1), plain up to the output's first 32-byte boundary,
 * then chunks of STREAM_CHUNK values computed into a stack buffer and
 * copied out with aligned non-temporal vector stores, the rest plain;
 * else plain throughout. */
void cpu_emit_inner_streaming(Cg *c, const LfNest *n, NestCtx *x, int var, LLVMValueRef lo,
                              LLVMValueRef ub, LLVMValueRef stream) {
  LLVMBasicBlockRef yes = block(c, "stream"), no = block(c, "plain"), join = block(c, "joined");
  LLVMBuildCondBr(c->b, stream, yes, no);
  LLVMPositionBuilderAtEnd(c->b, yes);
  LLVMTypeRef et = cg_storage_type(c, n->dtype);
  unsigned es = (unsigned)dtype_size(n->dtype), vw = STREAM_VEC_BYTES / es;
  unsigned chunk = STREAM_CHUNK_BYTES / es;
  LLVMTypeRef vt = LLVMVectorType(et, vw);
  LLVMValueRef buf = cg_entry_alloca(c, LLVMArrayType(et, chunk), NULL);
  LLVMSetAlignment(buf, STREAM_VEC_BYTES);
  /* the head: elements before the first 32-byte boundary of the output */
  x->iv[var] = lo;
  LLVMValueRef addr = LLVMBuildPtrToInt(c->b, cg_address(c, x, &n->store, n->dtype, n->rank),
                                        c->i64, "");
  LLVMValueRef mis = LLVMBuildAnd(c->b, LLVMBuildSub(c->b, i64c(c, 0), addr, ""),
                                  i64c(c, STREAM_VEC_BYTES - 1), "");
  LLVMValueRef head = LLVMBuildAdd(
      c->b, lo, cg_smin(c, LLVMBuildUDiv(c->b, mis, i64c(c, es), ""), LLVMBuildSub(c->b, ub, lo, ""), false),
      "");
  emit_inner_plain(c, n, x, var, lo, head);
  /* whole chunks, each starting at a 32-byte boundary */
  LLVMValueRef ch = i64c(c, chunk);
  LLVMValueRef nch = LLVMBuildSDiv(c->b, LLVMBuildSub(c->b, ub, head, ""), ch, "");
  LLVMValueRef i0 = LLVMBuildAdd(c->b, head, LLVMBuildMul(c->b, cg_open_loop(c, nch), ch, ""), "");
  LLVMValueRef j = cg_open_loop(c, ch);
  x->iv[var] = LLVMBuildAdd(c->b, i0, j, "");
  cg_store_el(c, cg_eval(c, x, n->value), LLVMBuildGEP2(c->b, et, buf, &j, 1, ""), n->dtype);
  cg_close_loop(c);
  x->iv[var] = i0;
  LLVMValueRef dst = cg_address(c, x, &n->store, n->dtype, n->rank);
  LLVMMetadataRef one = LLVMValueAsMetadata(i32c(c, 1));
  LLVMValueRef nt = LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, &one, 1));
  unsigned nt_kind = LLVMGetMDKindIDInContext(c->ctx, "nontemporal", 11);
  for (unsigned k = 0; k < chunk; k += vw) {
    LLVMValueRef off = i64c(c, k);
    LLVMValueRef v = LLVMBuildLoad2(c->b, vt, LLVMBuildGEP2(c->b, et, buf, &off, 1, ""), "");
    LLVMSetAlignment(v, STREAM_VEC_BYTES);
    LLVMValueRef st = LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, et, dst, &off, 1, ""));
    LLVMSetAlignment(st, STREAM_VEC_BYTES);
    LLVMSetMetadata(st, nt_kind, nt);
  }
  cg_close_loop(c);
  /* the tail */
  emit_inner_plain(c, n, x, var, LLVMBuildAdd(c->b, head, LLVMBuildMul(c->b, nch, ch, ""), ""),
                   ub);
  LLVMBuildBr(c->b, join);
  LLVMPositionBuilderAtEnd(c->b, no);
  emit_inner_plain(c, n, x, var, lo, ub);
  LLVMBuildBr(c->b, join);
  LLVMPositionBuilderAtEnd(c->b, join);
}

/* Emits the loops and body of n for parallel iterations [lo, hi) of the
 * first p virtual loops. */
void cpu_emit_nest_range(Cg *c, const LfNest *n, NestCtx *x, const VLoops *vl,
                            LLVMValueRef lo, LLVMValueRef hi, int p) {
  LLVMValueRef idx[MAXL], blk = NULL;
  bool cols = cpu_scan_columns(c, n, vl);
  if (cols && p == vl->nouter) { /* the parallel range is the columns' */
    cpu_emit_scan_columns(c, x, vl->var[p - 1], lo, hi);
    return;
  }
  bool blocks = cpu_transpose_blocks(c, n, vl, p);
  if (blocks) cpu_mark_light(c->fn); /* register blocks: the light pipeline (split.c) */
  LLVMValueRef stream = NULL; /* decided once per call, before the loops */
  if (blocks) stream = cpu_transpose_stream(c, n);
  else if (!cols && stream_eligible(n, vl, p, vl->nouter)) stream = stream_wanted(c, n, vl);
  if (stream && !blocks && p == vl->nouter) { /* one loop, the parallel one: it streams */
    cpu_emit_inner_streaming(c, n, x, vl->var[0], lo, hi, stream);
    cg_intrinsic(c, "llvm.x86.sse.sfence", NULL, 0, NULL, 0);
    return;
  }
  if (p == 1) {
    LLVMValueRef iv = cg_open_loop_from(c, lo, hi);
    if (vl->var[0] == VL_BLOCK) blk = iv;
    else x->iv[vl->var[0]] = iv;
  } else {
    LLVMValueRef rest = lo;
    for (int j = p - 1; j >= 0; j--) {
      idx[j] = cg_entry_alloca(c, c->i64, NULL);
      LLVMValueRef ub = vl->ub[j];
      LLVMBuildStore(c->b, j ? LLVMBuildURem(c->b, rest, ub, "") : rest, idx[j]);
      if (j) rest = LLVMBuildUDiv(c->b, rest, ub, "");
    }
    cg_open_loop_from(c, lo, hi);
    for (int j = 0; j < p; j++) {
      LLVMValueRef iv = LLVMBuildLoad2(c->b, c->i64, idx[j], "");
      if (vl->var[j] == VL_BLOCK) blk = iv;
      else x->iv[vl->var[j]] = iv;
    }
  }
  int nopen = blocks || cols ? vl->nouter - 1 : vl->nouter; /* blocks, cols: i is theirs */
  if (stream && !blocks) nopen--; /* the innermost loop is cpu_emit_inner_streaming's */
  for (int i = p; i < nopen; i++) {
    LLVMValueRef iv = cg_open_loop(c, vl->ub[i]);
    if (vl->var[i] == VL_BLOCK) blk = iv;
    else x->iv[vl->var[i]] = iv;
  }
  LLVMValueRef t0 = i64c(c, 0), t1 = vl->tile_ub;
  if (vl->tile_var >= 0 && vl->blocked) {
    t0 = LLVMBuildMul(c->b, blk, i64c(c, vl->tile), "");
    t1 = cg_smin(c, LLVMBuildAdd(c->b, t0, i64c(c, vl->tile), ""), vl->tile_ub, false);
  }
  if (blocks) {
    cpu_emit_transpose(c, n, x, vl->var[vl->nouter - 1], vl->tile_var, vl->ub[vl->nouter - 1],
                       t0, t1, stream);
  } else if (cols) {
    cpu_emit_scan_columns(c, x, vl->var[vl->nouter - 1], i64c(c, 0), vl->ub[vl->nouter - 1]);
  } else if (stream) {
    cpu_emit_inner_streaming(c, n, x, vl->var[nopen], i64c(c, 0), vl->ub[nopen], stream);
  } else if (lf_is_scan(n)) {
    cpu_emit_scan(c, x);
  } else {
    if (vl->tile_var >= 0) x->iv[vl->tile_var] = cg_open_loop_from(c, t0, t1);
    LLVMValueRef v = n->reduce == OP_COUNT ? cg_eval(c, x, n->value) : cpu_emit_reduce(c, x);
    cg_store_el(c, v, cg_address(c, x, &n->store, n->dtype, n->rank), n->dtype);
    if (vl->tile_var >= 0) cg_close_loop(c);
  }
  for (int i = p; i < nopen; i++) cg_close_loop(c);
  if (p > 1) cpu_odometer_step(c, vl, idx, p);
  cg_close_loop(c);
  if (stream) cg_intrinsic(c, "llvm.x86.sse.sfence", NULL, 0, NULL, 0);
}
