/* transpose.c — transposing copies (a permute's .contiguous(), NCHW ->
 * NHWC) in register blocks: a tiled nest (loops/schedule.c plan_tile)
 * whose value is a plain load of its own dtype.  Along the innermost loop
 * i the store is unit-stride and the load strided; along the tile loop j
 * the load is unit-stride.  Each TB x TB block is TB vector loads along j
 * (rows i0..i0+TB-1), a transpose in registers (log2 TB rounds of
 * shuffles), TB vector stores along i.  TB comes from the vector width of
 * the ISA being emitted (Cg.isa->vec_bits, never the compiling host) and
 * the element size (1, 2, 4 or 8 bytes), at most 8: f32 and f64 fill a
 * register per row (8 x 8 f32, 4 x 4 f64 with AVX2), 1- and 2-byte
 * elements use 8-element rows.
 *
 * Walk: within a tile of j, the i-blocks go in groups that fill one
 * cache line of an output row (2 blocks of 8 x 8 f32), each group over
 * the tile's j-blocks: a group reads its 16 input rows (f32) as
 * sequential runs along j, and writes TB output rows a whole line each,
 * the stores of one line adjacent (the group's blocks are transposed
 * first, then stored row by row).  A blocked tile is the target
 * row's tile_copy elements of j (loops/schedule.c: 256 on the CPU);
 * consecutive tiles of one thread continue the same input rows; the
 * parallel range is over tiles (and the outer loops): every thread gets
 * whole tiles.
 *
 * Streaming: when the whole output is at least tdsl_stream_min_bytes()
 * (runtime/stream.c, as for elementwise nests in vloops.c), decided once
 * per call, and the output's rows are aligned to the block's vector
 * (checked per tile at run time), the block stores are non-temporal: the
 * output is not read into the cache before it is overwritten.  The edges
 * (the last i columns and j rows that do not fill a block) go element by
 * element with plain stores.  The values are the same either way: a copy.
 * Needs: cpu.h, the runtime's tdsl_stream_min_bytes.  Used by: vloops.c. */
#include <string.h>

#include <llvm-c/TargetMachine.h>

#include "cpu.h"

#define TB_MAX 8
#define LINE_BYTES 64

/* Rows (and columns) of n's register block on the ISA being emitted. */
static int block_rows(Cg *c, const LfNest *n) {
  int es = (int)dtype_size(n->dtype), vb = c->isa ? c->isa->vec_bits : 128;
  int tb = vb / (8 * es);
  return tb > TB_MAX ? TB_MAX : tb < 2 ? 2 : tb;
}

/* Whether n's value is a plain copy of a load a transpose block can move. */
static bool plain_copy(const LfNest *n) {
  const LfExpr *e = n->value;
  return n->reduce == OP_COUNT && e->kind == LFE_LOAD && e->dtype == n->dtype &&
         !e->acc.lin_rank && !e->acc.rt_strides && !e->acc.ndyn && !n->store.rt_strides &&
         !n->store.lin_rank && !n->store.ndyn && !lf_is_scan(n);
}

/* Whether a plain copy n transposes: unit-stride stores along i, loads along j. */
static bool transposes(const LfNest *n, int i, int j) {
  return i >= 0 && plain_copy(n) && sym_is(n->store.stride[i], 1) &&
         sym_is(n->value->acc.stride[j], 1);
}

bool cpu_transpose_blocks(Cg *c, const LfNest *n, const VLoops *vl, int p) {
  if (vl->tile_var < 0 || p >= vl->nouter || !transposes(n, vl->var[vl->nouter - 1], vl->tile_var))
    return false;
  return vl->blocked || (LLVMIsConstant(vl->tile_ub) &&
                         LLVMConstIntGetSExtValue(vl->tile_ub) >= block_rows(c, n));
}

LLVMValueRef cpu_transpose_stream(Cg *c, const LfNest *n) {
  int es = (int)dtype_size(n->dtype);
  if (es * block_rows(c, n) < 16) return NULL; /* no non-temporal store of the block */
  char *t = LLVMGetDefaultTargetTriple(); /* the sfence after the nest is x86's */
  bool x86 = !strncmp(t, "x86_64", 6);
  LLVMDisposeMessage(t);
  if (!x86) return NULL;
  LLVMValueRef bytes = i64c(c, es);
  for (int l = 0; l < n->rank; l++) bytes = LLVMBuildMul(c->b, bytes, cg_sym_val(c, n->shape[l]), "");
  LLVMValueRef min = call(c, cg_fdecl(c, "tdsl_stream_min_bytes", c->i64, NULL, 0, 0), NULL, 0);
  return LLVMBuildICmp(c->b, LLVMIntSGE, bytes, min, "");
}

static LLVMValueRef shuffle(Cg *c, LLVMValueRef a, LLVMValueRef b, const int *m, int tb) {
  LLVMValueRef mask[TB_MAX];
  for (int k = 0; k < tb; k++) mask[k] = i32c(c, m[k]);
  return LLVMBuildShuffleVector(c->b, a, b, LLVMConstVector(mask, (unsigned)tb), "");
}

/* r[0..7] = the columns of the 8 x 8 block whose rows are r[0..7]: the
 * unpack pattern of x86 (within 128-bit halves, then across them). */
static void transpose8(Cg *c, LLVMValueRef *r) {
  static const int lo[8] = {0, 8, 1, 9, 4, 12, 5, 13}, hi[8] = {2, 10, 3, 11, 6, 14, 7, 15};
  static const int q0[8] = {0, 1, 8, 9, 4, 5, 12, 13}, q1[8] = {2, 3, 10, 11, 6, 7, 14, 15};
  static const int h0[8] = {0, 1, 2, 3, 8, 9, 10, 11}, h1[8] = {4, 5, 6, 7, 12, 13, 14, 15};
  LLVMValueRef t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = shuffle(c, r[k], r[k + 1], lo, 8);
    t[k + 1] = shuffle(c, r[k], r[k + 1], hi, 8);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = shuffle(c, t[k], t[k + 2], q0, 8);
    u[k + 1] = shuffle(c, t[k], t[k + 2], q1, 8);
    u[k + 2] = shuffle(c, t[k + 1], t[k + 3], q0, 8);
    u[k + 3] = shuffle(c, t[k + 1], t[k + 3], q1, 8);
  }
  for (int k = 0; k < 4; k++) {
    r[k] = shuffle(c, u[k], u[k + 4], h0, 8);
    r[k + 4] = shuffle(c, u[k], u[k + 4], h1, 8);
  }
}

/* r[0..tb-1] transposed for tb 2 or 4: at each level h (tb/2 down to 1)
 * rows a and a + h swap their off-diagonal h x h blocks. */
static void transpose_small(Cg *c, LLVMValueRef *r, int tb) {
  for (int h = tb / 2; h >= 1; h /= 2) {
    int ma[TB_MAX], mb[TB_MAX];
    for (int q = 0; q < tb; q++) {
      ma[q] = q & h ? tb + q - h : q;
      mb[q] = q & h ? tb + q : q + h;
    }
    for (int a = 0; a < tb; a++) {
      if (a & h) continue;
      LLVMValueRef na = shuffle(c, r[a], r[a + h], ma, tb), nb = shuffle(c, r[a], r[a + h], mb, tb);
      r[a] = na, r[a + h] = nb;
    }
  }
}

/* One element at the current loop variables (the edges). */
static void copy_element(Cg *c, NestCtx *x, const LfNest *n) {
  LLVMValueRef v = cg_eval(c, x, n->value);
  cg_store_el(c, v, cg_address(c, x, &n->store, n->dtype, n->rank), n->dtype);
}

/* The tb x tb block at rows i0 (of the load) and j0 (of the store),
 * transposed into r[0..tb-1] (r[k]: output row j0 + k); src: the load's
 * address at i = j = 0, si its stride along i. */
static void load_block(Cg *c, const LfNest *n, int tb, LLVMValueRef src, LLVMValueRef si,
                       LLVMValueRef i0, LLVMValueRef j0, LLVMValueRef *r) {
  LLVMTypeRef et = cg_storage_type(c, n->dtype), vt = LLVMVectorType(et, (unsigned)tb);
  for (int k = 0; k < tb; k++) {
    LLVMValueRef off = LLVMBuildAdd(
        c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, i0, i64c(c, k), ""), si, ""), j0, "");
    r[k] = LLVMBuildLoad2(c->b, vt, LLVMBuildGEP2(c->b, et, src, &off, 1, ""), "");
    LLVMSetAlignment(r[k], (unsigned)dtype_size(n->dtype));
  }
  if (tb == 8) transpose8(c, r);
  else transpose_small(c, r, tb);
}

/* The tile's whole blocks: i-blocks [ib0, ib1) in groups of g whose
 * blocks fill whole cache lines of tb output rows, each group over the
 * j-blocks [0, njb) from t0.  A group's blocks are loaded and transposed
 * first, then stored row by row, so the stores that fill one output line
 * are adjacent (non-temporal stores, nt, then leave the write-combining
 * buffers as whole lines).  dst: the store's address at i = j = 0, sj its
 * stride along j; nt stores are aligned to the block row's size. */
static void emit_block_range(Cg *c, const LfNest *n, int tb, int g, LLVMValueRef src,
                             LLVMValueRef dst, LLVMValueRef si, LLVMValueRef sj, LLVMValueRef t0,
                             LLVMValueRef njb, LLVMValueRef ib0, LLVMValueRef ngroups, bool nt) {
  LLVMTypeRef et = cg_storage_type(c, n->dtype);
  unsigned es = (unsigned)dtype_size(n->dtype);
  LLVMValueRef ktb = i64c(c, tb);
  LLVMValueRef ig = LLVMBuildAdd(c->b, ib0, LLVMBuildMul(c->b, cg_open_loop(c, ngroups), i64c(c, g), ""), "");
  LLVMValueRef j0 = LLVMBuildAdd(c->b, t0, LLVMBuildMul(c->b, cg_open_loop(c, njb), ktb, ""), "");
  LLVMValueRef r[LINE_BYTES / 8][TB_MAX], i0[LINE_BYTES / 8];
  for (int b = 0; b < g; b++) {
    i0[b] = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, ig, i64c(c, b), ""), ktb, "");
    load_block(c, n, tb, src, si, i0[b], j0, r[b]);
  }
  LLVMValueRef md = NULL;
  unsigned nt_kind = 0;
  if (nt) {
    LLVMMetadataRef one = LLVMValueAsMetadata(i32c(c, 1));
    md = LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, &one, 1));
    nt_kind = LLVMGetMDKindIDInContext(c->ctx, "nontemporal", 11);
  }
  for (int k = 0; k < tb; k++) {
    LLVMValueRef row = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, j0, i64c(c, k), ""), sj, "");
    for (int b = 0; b < g; b++) {
      LLVMValueRef off = LLVMBuildAdd(c->b, row, i0[b], "");
      LLVMValueRef st = LLVMBuildStore(c->b, r[b][k], LLVMBuildGEP2(c->b, et, dst, &off, 1, ""));
      LLVMSetAlignment(st, nt ? es * (unsigned)tb : es);
      if (nt) LLVMSetMetadata(st, nt_kind, md);
    }
  }
  cg_close_loop(c);
  cg_close_loop(c);
}

/* The tile's whole blocks (i-blocks [0, nib), j-blocks [0, njb) from
 * t0): groups of blocks that fill a cache line of each output row, then
 * the remaining i-blocks one at a time. */
static void emit_blocks(Cg *c, const LfNest *n, int tb, LLVMValueRef src, LLVMValueRef dst,
                        LLVMValueRef si, LLVMValueRef sj, LLVMValueRef t0, LLVMValueRef njb,
                        LLVMValueRef nib, bool nt) {
  int g = LINE_BYTES / ((int)dtype_size(n->dtype) * tb);
  if (g < 1) g = 1;
  LLVMValueRef ng = LLVMBuildSDiv(c->b, nib, i64c(c, g), "");
  emit_block_range(c, n, tb, g, src, dst, si, sj, t0, njb, i64c(c, 0), ng, nt);
  if (g > 1) {
    LLVMValueRef done = LLVMBuildMul(c->b, ng, i64c(c, g), "");
    emit_block_range(c, n, tb, 1, src, dst, si, sj, t0, njb, done, LLVMBuildSub(c->b, nib, done, ""), nt);
  }
}

void cpu_emit_transpose(Cg *c, const LfNest *n, NestCtx *x, int i, int j, LLVMValueRef iub,
                        LLVMValueRef t0, LLVMValueRef t1, LLVMValueRef stream) {
  int tb = block_rows(c, n);
  x->iv[i] = x->iv[j] = i64c(c, 0);
  LLVMValueRef src = cg_address(c, x, &n->value->acc, n->dtype, n->rank);
  LLVMValueRef dst = cg_address(c, x, &n->store, n->dtype, n->rank);
  LLVMValueRef si = cg_sym_val(c, n->value->acc.stride[i]), sj = cg_sym_val(c, n->store.stride[j]);
  LLVMValueRef ktb = i64c(c, tb), nib = LLVMBuildSDiv(c->b, iub, ktb, "");
  LLVMValueRef ifull = LLVMBuildMul(c->b, nib, ktb, "");
  LLVMValueRef njb = LLVMBuildSDiv(c->b, LLVMBuildSub(c->b, t1, t0, ""), ktb, "");
  LLVMValueRef jfull = LLVMBuildAdd(c->b, t0, LLVMBuildMul(c->b, njb, ktb, ""), "");
  if (stream) {
    /* non-temporal only where every block store is aligned to its size */
    unsigned es = (unsigned)dtype_size(n->dtype);
    LLVMValueRef mis = LLVMBuildOr(c->b, LLVMBuildPtrToInt(c->b, dst, c->i64, ""),
                                   LLVMBuildMul(c->b, sj, i64c(c, es), ""), "");
    mis = LLVMBuildAnd(c->b, mis, i64c(c, (long long)es * tb - 1), "");
    LLVMValueRef ok = LLVMBuildAnd(c->b, stream, LLVMBuildICmp(c->b, LLVMIntEQ, mis, i64c(c, 0), ""), "");
    LLVMBasicBlockRef yes = block(c, "nt_blocks"), no = block(c, "blocks"), join = block(c, "blocks_done");
    LLVMBuildCondBr(c->b, ok, yes, no);
    LLVMPositionBuilderAtEnd(c->b, yes);
    emit_blocks(c, n, tb, src, dst, si, sj, t0, njb, nib, true);
    LLVMBuildBr(c->b, join);
    LLVMPositionBuilderAtEnd(c->b, no);
    emit_blocks(c, n, tb, src, dst, si, sj, t0, njb, nib, false);
    LLVMBuildBr(c->b, join);
    LLVMPositionBuilderAtEnd(c->b, join);
  } else {
    emit_blocks(c, n, tb, src, dst, si, sj, t0, njb, nib, false);
  }
  /* the last i columns of the whole j-blocks, then the tile's last rows of j */
  x->iv[j] = cg_open_loop_from(c, t0, jfull);
  x->iv[i] = cg_open_loop_from(c, ifull, iub);
  copy_element(c, x, n);
  cg_close_loop(c);
  cg_close_loop(c);
  x->iv[j] = cg_open_loop_from(c, jfull, t1);
  x->iv[i] = cg_open_loop(c, iub);
  copy_element(c, x, n);
  cg_close_loop(c);
  cg_close_loop(c);
}
