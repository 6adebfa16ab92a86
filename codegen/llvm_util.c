/* llvm_util.c — the LLVM helpers every backend shares (llvm_util.h):
 * declarations and calls, entry allocas, the failure exit, storage and
 * compute types and the casts between them (spec §5.4), symbolic
 * integers as i64 values, plain counted loops.
 * Needs: llvm_util.h.  Used by: codegen/, cpu/. */
#include <string.h>

#include <llvm-c/DebugInfo.h>

#include "llvm_util.h"

/* ---- declarations, calls, blocks ------------------------------------------ */

LLVMValueRef cg_fdecl(Cg *c, const char *name, LLVMTypeRef ret,
                          LLVMTypeRef *ps, unsigned n, int vararg) {
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, name);
  if (!f) f = LLVMAddFunction(c->mod, name, LLVMFunctionType(ret, ps, n, vararg));
  return f;
}

LLVMValueRef cg_rt_check(Cg *c, const char *name, LLVMValueRef *a,
                             unsigned n) {
  LLVMTypeRef ps[8];
  for (unsigned i = 0; i < n; i++) ps[i] = LLVMTypeOf(a[i]);
  return call(c, cg_fdecl(c, name, c->i32, ps, n, 0), a, n);
}

LLVMValueRef cg_intrinsic(Cg *c, const char *name, LLVMTypeRef *tys,
                              size_t nty, LLVMValueRef *a, unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) ICE("unknown intrinsic %s", name);
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(c->mod, id, tys, nty);
  LLVMTypeRef ft = LLVMIntrinsicGetType(c->ctx, id, tys, nty);
  return LLVMBuildCall2(c->b, ft, f, a, n, "");
}

LLVMValueRef cg_unary_intr(Cg *c, const char *name, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  return cg_intrinsic(c, name, &t, 1, &x, 1);
}

LLVMValueRef cg_entry_alloca(Cg *c, LLVMTypeRef t, LLVMValueRef n) {
  LLVMBuilderRef b = LLVMCreateBuilderInContext(c->ctx);
  LLVMValueRef first = LLVMGetFirstInstruction(c->entry);
  if (first) LLVMPositionBuilderBefore(b, first);
  else LLVMPositionBuilderAtEnd(b, c->entry);
  LLVMValueRef a = n ? LLVMBuildArrayAlloca(b, t, n, "") : LLVMBuildAlloca(b, t, "");
  LLVMDisposeBuilder(b);
  return a;
}

void cg_add_attr(LLVMContextRef ctx, LLVMValueRef fn, unsigned idx, const char *name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  if (!kind) ICE("unknown attribute %s", name);
  LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(ctx, kind, 0));
}

void cg_add_str_attr(LLVMContextRef ctx, LLVMValueRef fn, const char *k, const char *v) {
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(ctx, k, (unsigned)strlen(k), v,
                                                    (unsigned)strlen(v)));
}

void cg_prefer_512(LLVMContextRef ctx, LLVMValueRef fn) {
  cg_add_str_attr(ctx, fn, "min-legal-vector-width", "512");
  cg_add_str_attr(ctx, fn, "prefer-vector-width", "512");
}

void cg_check_rc(Cg *c, LLVMValueRef rc) {
  LLVMBasicBlockRef ok = block(c, "ok");
  LLVMValueRef bad = LLVMBuildICmp(c->b, LLVMIntNE, rc, i32c(c, 0), "");
  LLVMBasicBlockRef here = LLVMGetInsertBlock(c->b);
  LLVMBuildCondBr(c->b, bad, c->fail, ok);
  LLVMAddIncoming(c->rcphi, &rc, &here, 1);
  LLVMPositionBuilderAtEnd(c->b, ok);
}

/* ---- types ------------------------------------------------------------- */

LLVMTypeRef cg_storage_type(Cg *c, DType t) {
  switch (t) {
  case DT_BOOL: case DT_I8: case DT_U8: return c->i8;
  case DT_I16: return c->i16;
  case DT_I32: return c->i32;
  case DT_I64: return c->i64;
  case DT_F16: return c->f16;
  case DT_BF16: return c->i16; /* bits: converted by hand (no libcalls) */
  case DT_F32: return c->f32;
  default: return c->f64;
  }
}

/* bf16 bits -> float: the high half of an f32. */
LLVMValueRef cg_bf16_to_f32v(Cg *c, LLVMValueRef bits) {
  LLVMValueRef w = LLVMBuildShl(c->b, LLVMBuildZExt(c->b, bits, c->i32, ""),
                                LLVMConstInt(c->i32, 16, 0), "");
  return LLVMBuildBitCast(c->b, w, c->f32, "");
}

/* float -> bf16 bits, round to nearest even; NaN stays a quiet NaN. */
LLVMValueRef cg_f32_to_bf16v(Cg *c, LLVMValueRef f) {
  LLVMValueRef u = LLVMBuildBitCast(c->b, f, c->i32, "");
  LLVMValueRef lsb = LLVMBuildAnd(c->b, LLVMBuildLShr(c->b, u, LLVMConstInt(c->i32, 16, 0), ""),
                                  LLVMConstInt(c->i32, 1, 0), "");
  LLVMValueRef r = LLVMBuildAdd(c->b, u, LLVMBuildAdd(c->b, lsb, LLVMConstInt(c->i32, 0x7FFF, 0), ""), "");
  r = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, r, LLVMConstInt(c->i32, 16, 0), ""), c->i16, "");
  LLVMValueRef nan = LLVMBuildFCmp(c->b, LLVMRealUNO, f, f, "");
  LLVMValueRef q = LLVMBuildOr(c->b, LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, u, LLVMConstInt(c->i32, 16, 0), ""), c->i16, ""),
                               LLVMConstInt(c->i16, 0x40, 0), "");
  return LLVMBuildSelect(c->b, nan, q, r, "");
}

/* double -> float rounded to odd, so that a later rounding to bf16 is
 * the single correctly rounded double -> bf16 conversion. */
static LLVMValueRef f64_to_f32_odd(Cg *c, LLVMValueRef d) {
  LLVMValueRef f = LLVMBuildFPTrunc(c->b, d, c->f32, "");
  LLVMValueRef back = LLVMBuildFPExt(c->b, f, c->f64, "");
  LLVMValueRef inexact = LLVMBuildFCmp(c->b, LLVMRealONE, back, d, "");
  LLVMValueRef ab = cg_unary_intr(c, "llvm.fabs", back), ad = cg_unary_intr(c, "llvm.fabs", d);
  LLVMValueRef u = LLVMBuildBitCast(c->b, f, c->i32, "");
  LLVMValueRef down = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, ab, ad, ""),
                                      LLVMBuildSub(c->b, u, LLVMConstInt(c->i32, 1, 0), ""), u, "");
  LLVMValueRef odd = LLVMBuildOr(c->b, down, LLVMConstInt(c->i32, 1, 0), "");
  return LLVMBuildBitCast(c->b, LLVMBuildSelect(c->b, inexact, odd, u, ""), c->f32, "");
}

LLVMTypeRef cg_compute_type(Cg *c, DType t) {
  if (t == DT_F16 || t == DT_BF16) return c->f32;
  return cg_storage_type(c, t);
}

bool cg_is_unsigned(DType t) { return t == DT_BOOL || t == DT_U8; }

LLVMValueRef cg_to_bool(Cg *c, LLVMValueRef v) {
  LLVMValueRef nz = LLVMTypeOf(v) == c->f32 || LLVMTypeOf(v) == c->f64
                        ? LLVMBuildFCmp(c->b, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0), "")
                        : LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
  return LLVMBuildZExt(c->b, nz, c->i8, "");
}

/* Converts v (compute type of `from`) to the compute type of `to` with
 * the cast rules of spec §5.4. */
LLVMValueRef cg_convert(Cg *c, LLVMValueRef v, DType from, DType to) {
  if (from == to) return v;
  if (to == DT_BOOL) return cg_to_bool(c, v);
  if (to == DT_BF16) {
    LLVMValueRef f = v;
    if (!dtype_is_float(from))
      f = cg_is_unsigned(from) ? LLVMBuildUIToFP(c->b, v, c->f64, "") : LLVMBuildSIToFP(c->b, v, c->f64, "");
    if (LLVMTypeOf(f) == c->f64) f = f64_to_f32_odd(c, f);
    return cg_bf16_to_f32v(c, cg_f32_to_bf16v(c, f));
  }
  LLVMTypeRef st = cg_storage_type(c, to), ct = cg_compute_type(c, to);
  if (dtype_is_float(from)) {
    if (dtype_is_float(to)) {
      LLVMTypeRef ft = LLVMTypeOf(v);
      if (st == ft) return v;
      LLVMValueRef r = st == c->f64 ? LLVMBuildFPExt(c->b, v, st, "")
                                    : LLVMBuildFPTrunc(c->b, v, st, "");
      return st == ct ? r : LLVMBuildFPExt(c->b, r, ct, "");
    }
    LLVMTypeRef tys[2] = {st, LLVMTypeOf(v)};
    return cg_intrinsic(c, cg_is_unsigned(to) ? "llvm.fptoui.sat" : "llvm.fptosi.sat",
                     tys, 2, &v, 1);
  }
  if (dtype_is_float(to)) {
    LLVMValueRef r = cg_is_unsigned(from) ? LLVMBuildUIToFP(c->b, v, st, "")
                                       : LLVMBuildSIToFP(c->b, v, st, "");
    return st == ct ? r : LLVMBuildFPExt(c->b, r, ct, "");
  }
  unsigned fw = LLVMGetIntTypeWidth(LLVMTypeOf(v)), tw = LLVMGetIntTypeWidth(st);
  if (fw == tw) return v;
  if (fw > tw) return LLVMBuildTrunc(c->b, v, st, "");
  return cg_is_unsigned(from) ? LLVMBuildZExt(c->b, v, st, "")
                           : LLVMBuildSExt(c->b, v, st, "");
}

/* ---- symbolic integers ------------------------------------------------- */

LLVMValueRef cg_splat(Cg *c, LLVMValueRef s, unsigned lanes) {
  LLVMTypeRef t = LLVMVectorType(LLVMTypeOf(s), lanes);
  LLVMValueRef v = LLVMBuildInsertElement(c->b, LLVMGetUndef(t), s, i32c(c, 0), "");
  return LLVMBuildShuffleVector(c->b, v, LLVMGetUndef(t), LLVMConstNull(LLVMVectorType(c->i32, lanes)), "");
}

LLVMValueRef cg_smin(Cg *c, LLVMValueRef a, LLVMValueRef b, bool max) {
  LLVMValueRef lt = LLVMBuildICmp(c->b, max ? LLVMIntSGT : LLVMIntSLT, a, b, "");
  return LLVMBuildSelect(c->b, lt, a, b, "");
}

/* Python // and % on signed integers of any width; x // 0 and x % 0 give
 * 0 (no trap), x // -1 wraps. */
LLVMValueRef cg_py_divmod(Cg *c, LLVMValueRef a, LLVMValueRef b, bool mod) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0);
  LLVMValueRef m1 = LLVMConstAllOnes(t);
  LLVMValueRef b0 = LLVMBuildICmp(c->b, LLVMIntEQ, b, zero, "");
  LLVMValueRef bm1 = LLVMBuildICmp(c->b, LLVMIntEQ, b, m1, "");
  LLVMValueRef safe = LLVMBuildSelect(c->b, LLVMBuildOr(c->b, b0, bm1, ""), one, b, "");
  LLVMValueRef q = LLVMBuildSDiv(c->b, a, safe, ""), r = LLVMBuildSRem(c->b, a, safe, "");
  LLVMValueRef adj = LLVMBuildAnd(
      c->b, LLVMBuildICmp(c->b, LLVMIntNE, r, zero, ""),
      LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildICmp(c->b, LLVMIntSLT, r, zero, ""),
                    LLVMBuildICmp(c->b, LLVMIntSLT, b, zero, ""), ""), "");
  if (mod) {
    LLVMValueRef res = LLVMBuildSelect(c->b, adj, LLVMBuildAdd(c->b, r, b, ""), r, "");
    return LLVMBuildSelect(c->b, LLVMBuildOr(c->b, b0, bm1, ""), zero, res, "");
  }
  LLVMValueRef res = LLVMBuildSelect(c->b, adj, LLVMBuildSub(c->b, q, one, ""), q, "");
  res = LLVMBuildSelect(c->b, bm1, LLVMBuildSub(c->b, zero, a, ""), res, "");
  return LLVMBuildSelect(c->b, b0, zero, res, "");
}

LLVMValueRef cg_sym_val(Cg *c, const Sym *s) {
  int64_t v;
  int id, n;
  const Sym *a, *b;
  switch (sym_form(s, &v, &id, &a, &b, &n)) {
  case SYMF_CONST: return i64c(c, v);
  case SYMF_VAR:
    if (!c->env || id < 0 || id >= c->k->nsyms) ICE("symbol %d used before it is bound", id);
    return c->env[id];
  case SYMF_FLOORDIV: return cg_py_divmod(c, cg_sym_val(c, a), cg_sym_val(c, b), false);
  case SYMF_MOD: return cg_py_divmod(c, cg_sym_val(c, a), cg_sym_val(c, b), true);
  case SYMF_MIN: return cg_smin(c, cg_sym_val(c, a), cg_sym_val(c, b), false);
  case SYMF_MAX: return cg_smin(c, cg_sym_val(c, a), cg_sym_val(c, b), true);
  case SYMF_ADD: return LLVMBuildAdd(c->b, cg_sym_val(c, a), cg_sym_val(c, b), "");
  case SYMF_MUL: return LLVMBuildMul(c->b, cg_sym_val(c, a), cg_sym_val(c, b), "");
  case SYMF_POLY: break;
  }
  LLVMValueRef acc = i64c(c, v);
  for (int i = 0; i < n; i++) {
    int64_t coef;
    int na;
    const Sym *const *atoms;
    sym_term(s, i, &coef, &na, &atoms);
    LLVMValueRef t = i64c(c, coef);
    for (int j = 0; j < na; j++) t = LLVMBuildMul(c->b, t, cg_sym_val(c, atoms[j]), "");
    acc = LLVMBuildAdd(c->b, acc, t, "");
  }
  return acc;
}

/* The same expression in double: only a magnitude, used to refuse scratch
 * sizes whose int64 arithmetic would wrap. */
LLVMValueRef cg_sym_mag(Cg *c, const Sym *s) {
  int64_t v;
  int id, n;
  const Sym *a, *b;
  LLVMValueRef x, y;
  switch (sym_form(s, &v, &id, &a, &b, &n)) {
  case SYMF_CONST: return LLVMConstReal(c->f64, (double)v);
  case SYMF_VAR: return LLVMBuildSIToFP(c->b, cg_sym_val(c, s), c->f64, "");
  case SYMF_POLY: break;
  default:
    x = cg_sym_mag(c, a), y = cg_sym_mag(c, b);
    switch (sym_form(s, NULL, NULL, NULL, NULL, NULL)) {
    case SYMF_ADD: return LLVMBuildFAdd(c->b, x, y, "");
    case SYMF_MUL: return LLVMBuildFMul(c->b, x, y, "");
    case SYMF_MOD: return y; /* |a % b| < |b| */
    case SYMF_FLOORDIV: return x; /* sizes: b >= 1 */
    default: return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, x, y, ""), x, y, "");
    }
  }
  LLVMValueRef acc = LLVMConstReal(c->f64, (double)v);
  for (int i = 0; i < n; i++) {
    int64_t coef;
    int na;
    const Sym *const *atoms;
    sym_term(s, i, &coef, &na, &atoms);
    LLVMValueRef t = LLVMConstReal(c->f64, (double)coef);
    for (int j = 0; j < na; j++) t = LLVMBuildFMul(c->b, t, cg_sym_mag(c, atoms[j]), "");
    acc = LLVMBuildFAdd(c->b, acc, t, "");
  }
  return acc;
}

/* ---- loops ------------------------------------------------------------ */

/* A loop over [lo, n). */
LLVMValueRef cg_open_loop_from(Cg *c, LLVMValueRef lo, LLVMValueRef n);

LLVMValueRef cg_open_loop(Cg *c, LLVMValueRef n) {
  return cg_open_loop_from(c, i64c(c, 0), n);
}

LLVMValueRef cg_open_loop_from(Cg *c, LLVMValueRef lo, LLVMValueRef n) {
  Loop *l = &c->loops[c->nloops++];
  l->pre = LLVMGetInsertBlock(c->b);
  l->header = block(c, "loop");
  LLVMBasicBlockRef body = block(c, "body");
  l->exit = block(c, "endloop");
  LLVMBuildBr(c->b, l->header);
  LLVMPositionBuilderAtEnd(c->b, l->header);
  l->iv = LLVMBuildPhi(c->b, c->i64, "i");
  LLVMAddIncoming(l->iv, &lo, &l->pre, 1);
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, l->iv, n, ""), body, l->exit);
  LLVMPositionBuilderAtEnd(c->b, body);
  return l->iv;
}

void cg_close_loop(Cg *c) {
  Loop *l = &c->loops[--c->nloops];
  LLVMValueRef next = LLVMBuildAdd(c->b, l->iv, i64c(c, 1), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
  LLVMBuildBr(c->b, l->header);
  LLVMAddIncoming(l->iv, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(c->b, l->exit);
}

/* ---- module, target, output ---------------------------------------------- */

void cg_init_types(Cg *c) {
  c->i1 = LLVMInt1TypeInContext(c->ctx);
  c->i8 = LLVMInt8TypeInContext(c->ctx);
  c->i16 = LLVMInt16TypeInContext(c->ctx);
  c->i32 = LLVMInt32TypeInContext(c->ctx);
  c->i64 = LLVMInt64TypeInContext(c->ctx);
  c->f16 = LLVMHalfTypeInContext(c->ctx);
  c->f32 = LLVMFloatTypeInContext(c->ctx);
  c->f64 = LLVMDoubleTypeInContext(c->ctx);
  c->ptr = LLVMPointerTypeInContext(c->ctx, 0);
  c->vd = LLVMVoidTypeInContext(c->ctx);
}

/* ---- loop metadata ------------------------------------------------------ */

LLVMMetadataRef cg_loop_id(LLVMContextRef ctx, const LLVMMetadataRef *props, unsigned n) {
  LLVMMetadataRef md[17], tmp = LLVMTemporaryMDNode(ctx, NULL, 0);
  if (n > 16) ICE("cg_loop_id: %u loop properties", n);
  md[0] = tmp;
  for (unsigned i = 0; i < n; i++) md[i + 1] = props[i];
  LLVMMetadataRef id = LLVMMDNodeInContext2(ctx, md, n + 1);
  LLVMMetadataReplaceAllUsesWith(tmp, id); /* the self-reference; disposes of tmp */
  return id;
}
