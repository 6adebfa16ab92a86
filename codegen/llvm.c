/* llvm.c — the CPU backend: loop form (loops/loops.h) to LLVM IR through the
 * LLVM C API, then "default<On>" and object/assembly emission.
 *
 * Each kernel K becomes `i32 K(ptr..., scalars..., ptr...)` that
 *  1. runs the entry checks of spec §7.4 by calling the runtime's helpers
 *     (tdsl_check_*, tdsl_bind_symbol), binding symbols into an env array;
 *     every failure branches to one exit that frees scratch and returns
 *     the code, before any output byte is written;
 *  2. answers a shape query (every output's data NULL) by writing shapes
 *     (and strides when the caller gave a strides array);
 *  3. allocates scratch (tdsl_alloc), runs the nests, frees scratch.
 * Values are computed in a "compute type": bool as i8 holding 0/1,
 * integers in their width, f16/bf16/f32 in float, f64 in double; half
 * types are rounded (fptrunc, nearest even) when stored or cast.
 * `K_info` returns a constant tdsl_kernel_info.
 *
 * Needs: loops/loops.h, codegen.h, llvm-c (LLVM 19), the runtime ABI of
 * <tdsl/runtime.h> (declared here by hand: generated code only links to
 * it).  Produces: object, assembly or textual IR. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen.h"
#include "../loops/loops.h"
#include "gemm.h"
#include "math.h"

#define MAXL (2 * TDSL_MAX_RANK)
#define E_NOMEM (-15)
#define E_CHECK (-12)
#define E_OVERFLOW (-7)
#define DL_CPU 1

typedef struct Loop {
  LLVMBasicBlockRef pre, header, exit;
  LLVMValueRef iv;
} Loop;

typedef struct Cg {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, ptr, vd;
  IrModule *m;
  const IrKernel *k;
  const LfKernel *lk;
  LLVMValueRef fn, kname;
  LLVMBasicBlockRef entry, fail;
  LLVMValueRef rcphi;
  LLVMValueRef *args;    /* function parameters */
  LLVMValueRef envp, boundp;
  LLVMValueRef *env;     /* symbol values (SSA) once all are bound */
  LLVMValueRef *base;    /* per buffer: element 0 */
  LLVMValueRef *slot;    /* per scratch buffer: alloca of its pointer */
  LLVMValueRef *gpool;   /* per nest: alloca of its GEMM's packing memory */
  Loop loops[MAXL];
  int nloops;
  int vec_bits;          /* gemm.c: the target's vector width */
  int opt;               /* -O level: >= 1 runs nests in parallel */
  int nfns;              /* outlined nest functions so far */
} Cg;

/* ---- small helpers ------------------------------------------------------ */

static LLVMValueRef ci(LLVMTypeRef t, long long v) {
  return LLVMConstInt(t, (unsigned long long)v, 1);
}

static LLVMValueRef i64c(Cg *c, long long v) { return ci(c->i64, v); }
static LLVMValueRef i32c(Cg *c, long long v) { return ci(c->i32, v); }

static LLVMValueRef str(Cg *c, const char *s) {
  return LLVMBuildGlobalStringPtr(c->b, s, ".str");
}

/* Declares (once) an external function. */
static LLVMValueRef fdecl(Cg *c, const char *name, LLVMTypeRef ret,
                          LLVMTypeRef *ps, unsigned n, int vararg) {
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, name);
  if (!f) f = LLVMAddFunction(c->mod, name, LLVMFunctionType(ret, ps, n, vararg));
  return f;
}

static LLVMValueRef call(Cg *c, LLVMValueRef f, LLVMValueRef *a, unsigned n) {
  return LLVMBuildCall2(c->b, LLVMGlobalGetValueType(f), f, a, n, "");
}

/* Runtime check helper `int name(kernel, arg, t, extra...)`. */
static LLVMValueRef rt_check(Cg *c, const char *name, LLVMValueRef *a,
                             unsigned n) {
  LLVMTypeRef ps[8];
  for (unsigned i = 0; i < n; i++) ps[i] = LLVMTypeOf(a[i]);
  return call(c, fdecl(c, name, c->i32, ps, n, 0), a, n);
}

static LLVMValueRef intrinsic(Cg *c, const char *name, LLVMTypeRef *tys,
                              size_t nty, LLVMValueRef *a, unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) ICE("unknown intrinsic %s", name);
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(c->mod, id, tys, nty);
  LLVMTypeRef ft = LLVMIntrinsicGetType(c->ctx, id, tys, nty);
  return LLVMBuildCall2(c->b, ft, f, a, n, "");
}

static LLVMValueRef unary_intr(Cg *c, const char *name, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  return intrinsic(c, name, &t, 1, &x, 1);
}

/* An alloca in the entry block (promotable by mem2reg). */
static LLVMValueRef entry_alloca(Cg *c, LLVMTypeRef t, LLVMValueRef n) {
  LLVMBuilderRef b = LLVMCreateBuilderInContext(c->ctx);
  LLVMValueRef first = LLVMGetFirstInstruction(c->entry);
  if (first) LLVMPositionBuilderBefore(b, first);
  else LLVMPositionBuilderAtEnd(b, c->entry);
  LLVMValueRef a = n ? LLVMBuildArrayAlloca(b, t, n, "") : LLVMBuildAlloca(b, t, "");
  LLVMDisposeBuilder(b);
  return a;
}

static LLVMBasicBlockRef block(Cg *c, const char *name) {
  return LLVMAppendBasicBlockInContext(c->ctx, c->fn, name);
}

/* Branches to the failure exit with rc when rc != 0. */
static void check_rc(Cg *c, LLVMValueRef rc) {
  LLVMBasicBlockRef ok = block(c, "ok");
  LLVMValueRef bad = LLVMBuildICmp(c->b, LLVMIntNE, rc, i32c(c, 0), "");
  LLVMBasicBlockRef here = LLVMGetInsertBlock(c->b);
  LLVMBuildCondBr(c->b, bad, c->fail, ok);
  LLVMAddIncoming(c->rcphi, &rc, &here, 1);
  LLVMPositionBuilderAtEnd(c->b, ok);
}

/* ---- types ------------------------------------------------------------- */

static LLVMTypeRef storage_type(Cg *c, DType t) {
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
static LLVMValueRef bf16_to_f32v(Cg *c, LLVMValueRef bits) {
  LLVMValueRef w = LLVMBuildShl(c->b, LLVMBuildZExt(c->b, bits, c->i32, ""),
                                LLVMConstInt(c->i32, 16, 0), "");
  return LLVMBuildBitCast(c->b, w, c->f32, "");
}

/* float -> bf16 bits, round to nearest even; NaN stays a quiet NaN. */
static LLVMValueRef f32_to_bf16v(Cg *c, LLVMValueRef f) {
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
  LLVMValueRef ab = unary_intr(c, "llvm.fabs", back), ad = unary_intr(c, "llvm.fabs", d);
  LLVMValueRef u = LLVMBuildBitCast(c->b, f, c->i32, "");
  LLVMValueRef down = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, ab, ad, ""),
                                      LLVMBuildSub(c->b, u, LLVMConstInt(c->i32, 1, 0), ""), u, "");
  LLVMValueRef odd = LLVMBuildOr(c->b, down, LLVMConstInt(c->i32, 1, 0), "");
  return LLVMBuildBitCast(c->b, LLVMBuildSelect(c->b, inexact, odd, u, ""), c->f32, "");
}

static LLVMTypeRef compute_type(Cg *c, DType t) {
  if (t == DT_F16 || t == DT_BF16) return c->f32;
  return storage_type(c, t);
}

static bool is_unsigned(DType t) { return t == DT_BOOL || t == DT_U8; }

static LLVMValueRef to_bool(Cg *c, LLVMValueRef v) {
  LLVMValueRef nz = LLVMTypeOf(v) == c->f32 || LLVMTypeOf(v) == c->f64
                        ? LLVMBuildFCmp(c->b, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0), "")
                        : LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
  return LLVMBuildZExt(c->b, nz, c->i8, "");
}

/* Converts v (compute type of `from`) to the compute type of `to` with
 * the cast rules of spec §5.4. */
static LLVMValueRef convert(Cg *c, LLVMValueRef v, DType from, DType to) {
  if (from == to) return v;
  if (to == DT_BOOL) return to_bool(c, v);
  if (to == DT_BF16) {
    LLVMValueRef f = v;
    if (!dtype_is_float(from))
      f = is_unsigned(from) ? LLVMBuildUIToFP(c->b, v, c->f64, "") : LLVMBuildSIToFP(c->b, v, c->f64, "");
    if (LLVMTypeOf(f) == c->f64) f = f64_to_f32_odd(c, f);
    return bf16_to_f32v(c, f32_to_bf16v(c, f));
  }
  LLVMTypeRef st = storage_type(c, to), ct = compute_type(c, to);
  if (dtype_is_float(from)) {
    if (dtype_is_float(to)) {
      LLVMTypeRef ft = LLVMTypeOf(v);
      if (st == ft) return v;
      LLVMValueRef r = st == c->f64 ? LLVMBuildFPExt(c->b, v, st, "")
                                    : LLVMBuildFPTrunc(c->b, v, st, "");
      return st == ct ? r : LLVMBuildFPExt(c->b, r, ct, "");
    }
    LLVMTypeRef tys[2] = {st, LLVMTypeOf(v)};
    return intrinsic(c, is_unsigned(to) ? "llvm.fptoui.sat" : "llvm.fptosi.sat",
                     tys, 2, &v, 1);
  }
  if (dtype_is_float(to)) {
    LLVMValueRef r = is_unsigned(from) ? LLVMBuildUIToFP(c->b, v, st, "")
                                       : LLVMBuildSIToFP(c->b, v, st, "");
    return st == ct ? r : LLVMBuildFPExt(c->b, r, ct, "");
  }
  unsigned fw = LLVMGetIntTypeWidth(LLVMTypeOf(v)), tw = LLVMGetIntTypeWidth(st);
  if (fw == tw) return v;
  if (fw > tw) return LLVMBuildTrunc(c->b, v, st, "");
  return is_unsigned(from) ? LLVMBuildZExt(c->b, v, st, "")
                           : LLVMBuildSExt(c->b, v, st, "");
}

/* ---- symbolic integers ------------------------------------------------- */

static LLVMValueRef smin(Cg *c, LLVMValueRef a, LLVMValueRef b, bool max) {
  LLVMValueRef lt = LLVMBuildICmp(c->b, max ? LLVMIntSGT : LLVMIntSLT, a, b, "");
  return LLVMBuildSelect(c->b, lt, a, b, "");
}

/* Python // and % on signed integers of any width; x // 0 and x % 0 give
 * 0 (no trap), x // -1 wraps. */
static LLVMValueRef py_divmod(Cg *c, LLVMValueRef a, LLVMValueRef b, bool mod) {
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

static LLVMValueRef sym_val(Cg *c, const Sym *s) {
  int64_t v;
  int id, n;
  const Sym *a, *b;
  switch (sym_form(s, &v, &id, &a, &b, &n)) {
  case SYMF_CONST: return i64c(c, v);
  case SYMF_VAR:
    if (!c->env || id < 0 || id >= c->k->nsyms) ICE("symbol %d used before it is bound", id);
    return c->env[id];
  case SYMF_FLOORDIV: return py_divmod(c, sym_val(c, a), sym_val(c, b), false);
  case SYMF_MOD: return py_divmod(c, sym_val(c, a), sym_val(c, b), true);
  case SYMF_MIN: return smin(c, sym_val(c, a), sym_val(c, b), false);
  case SYMF_MAX: return smin(c, sym_val(c, a), sym_val(c, b), true);
  case SYMF_ADD: return LLVMBuildAdd(c->b, sym_val(c, a), sym_val(c, b), "");
  case SYMF_MUL: return LLVMBuildMul(c->b, sym_val(c, a), sym_val(c, b), "");
  case SYMF_POLY: break;
  }
  LLVMValueRef acc = i64c(c, v);
  for (int i = 0; i < n; i++) {
    int64_t coef;
    int na;
    const Sym *const *atoms;
    sym_term(s, i, &coef, &na, &atoms);
    LLVMValueRef t = i64c(c, coef);
    for (int j = 0; j < na; j++) t = LLVMBuildMul(c->b, t, sym_val(c, atoms[j]), "");
    acc = LLVMBuildAdd(c->b, acc, t, "");
  }
  return acc;
}

/* The same expression in double: only a magnitude, used to refuse scratch
 * sizes whose int64 arithmetic would wrap. */
static LLVMValueRef sym_mag(Cg *c, const Sym *s) {
  int64_t v;
  int id, n;
  const Sym *a, *b;
  LLVMValueRef x, y;
  switch (sym_form(s, &v, &id, &a, &b, &n)) {
  case SYMF_CONST: return LLVMConstReal(c->f64, (double)v);
  case SYMF_VAR: return LLVMBuildSIToFP(c->b, sym_val(c, s), c->f64, "");
  case SYMF_POLY: break;
  default:
    x = sym_mag(c, a), y = sym_mag(c, b);
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
    for (int j = 0; j < na; j++) t = LLVMBuildFMul(c->b, t, sym_mag(c, atoms[j]), "");
    acc = LLVMBuildFAdd(c->b, acc, t, "");
  }
  return acc;
}

/* ---- DLTensor fields (x86-64 / AArch64 LP64 layout) --------------------- */

static LLVMValueRef field(Cg *c, LLVMValueRef t, int off, LLVMTypeRef ty) {
  LLVMValueRef o = i64c(c, off);
  LLVMValueRef p = LLVMBuildGEP2(c->b, c->i8, t, &o, 1, "");
  return LLVMBuildLoad2(c->b, ty, p, "");
}

static LLVMValueRef dl_data(Cg *c, LLVMValueRef t) { return field(c, t, 0, c->ptr); }
static LLVMValueRef dl_shape(Cg *c, LLVMValueRef t) { return field(c, t, 24, c->ptr); }
static LLVMValueRef dl_strides(Cg *c, LLVMValueRef t) { return field(c, t, 32, c->ptr); }

static LLVMValueRef idx_load(Cg *c, LLVMValueRef arr, int i) {
  LLVMValueRef o = i64c(c, i);
  return LLVMBuildLoad2(c->b, c->i64, LLVMBuildGEP2(c->b, c->i64, arr, &o, 1, ""), "");
}

/* data + byte_offset. */
static LLVMValueRef dl_base(Cg *c, LLVMValueRef t) {
  LLVMValueRef off = field(c, t, 40, c->i64);
  return LLVMBuildGEP2(c->b, c->i8, dl_data(c, t), &off, 1, "");
}

/* Stride of dim d: strides[d], or row-major when strides == NULL (size-0
 * dims count as 1). */
static LLVMValueRef dl_stride(Cg *c, LLVMValueRef t, int rank, int d) {
  LLVMValueRef st = dl_strides(c, t);
  LLVMBasicBlockRef given = block(c, "strides"), dflt = block(c, "rowmajor"),
                    join = block(c, "stride");
  LLVMBuildCondBr(c->b, LLVMBuildIsNull(c->b, st, ""), dflt, given);
  LLVMPositionBuilderAtEnd(c->b, given);
  LLVMValueRef a = idx_load(c, st, d);
  LLVMBuildBr(c->b, join);
  LLVMPositionBuilderAtEnd(c->b, dflt);
  LLVMValueRef sh = dl_shape(c, t), p = i64c(c, 1);
  for (int j = d + 1; j < rank; j++)
    p = LLVMBuildMul(c->b, p, smin(c, idx_load(c, sh, j), i64c(c, 1), true), "");
  LLVMBuildBr(c->b, join);
  LLVMPositionBuilderAtEnd(c->b, join);
  LLVMValueRef phi = LLVMBuildPhi(c->b, c->i64, "");
  LLVMValueRef vals[2] = {a, p};
  LLVMBasicBlockRef bbs[2] = {given, dflt};
  LLVMAddIncoming(phi, vals, bbs, 2);
  return phi;
}

/* DLDataType passed by value: {code, bits, lanes} packed in an i32. */
static LLVMValueRef dl_dtype(Cg *c, DType t) {
  int code = t == DT_BOOL ? 6 : t == DT_BF16 ? 4 : dtype_is_float(t) ? 2
           : t == DT_U8 ? 1 : 0;
  return i32c(c, code | (8 * dtype_size(t)) << 8 | 1 << 16);
}

/* ---- entry checks --------------------------------------------------------- */

typedef struct Arg {
  const char *cname;
  LLVMValueRef t, name;
  DType dtype;
  int rank, layout;
  const Sym **shape;
  const Sym **qstride; /* a strided result's shape-query strides, or NULL */
} Arg;

static Arg param_arg(Cg *c, int i) {
  const IrParam *p = &c->k->params[i];
  return (Arg){p->name, c->args[i], str(c, p->name), p->dtype, p->rank, (int)p->layout,
               p->shape, NULL};
}

static Arg result_arg(Cg *c, int i) {
  const IrResult *r = &c->k->results[i];
  char name[32];
  snprintf(name, sizeof name, "out%d", i);
  return (Arg){"result", c->args[c->k->nparams + i], str(c, name), r->dtype, r->rank,
               (int)r->layout, r->shape, r->qstride};
}

static void check3(Cg *c, const char *fn, const Arg *a) {
  LLVMValueRef v[3] = {c->kname, a->name, a->t};
  check_rc(c, rt_check(c, fn, v, 3));
}

/* fn: tdsl_check_tensor, or tdsl_check_output, which leaves the dims
 * alone (a shape query's output shape arrays are uninitialized). */
static void check_tensor(Cg *c, const char *fn, const Arg *a) {
  LLVMValueRef v[6] = {c->kname, a->name, a->t, dl_dtype(c, a->dtype),
                       i32c(c, a->rank), i32c(c, DL_CPU)};
  check_rc(c, rt_check(c, fn, v, 6));
}

static void check_dim(Cg *c, const Arg *a, int d, LLVMValueRef want, const Sym *text) {
  LLVMValueRef v[6] = {c->kname, a->name, a->t, i32c(c, d), want,
                       str(c, sym_str(c->m->arena, text))};
  check_rc(c, rt_check(c, "tdsl_check_dim", v, 6));
}

/* Binds size symbols from parameter dims, checks the static ones. */
static void bind_param_dims(Cg *c, const Arg *a) {
  for (int d = 0; d < a->rank; d++) {
    int id;
    if (sym_is_var(a->shape[d], &id) && c->k->syms[id].kind == SYMK_SIZE) {
      LLVMValueRef o = i64c(c, id);
      LLVMValueRef v[7] = {c->kname, a->name, a->t, i32c(c, d),
                           str(c, c->k->syms[id].name),
                           LLVMBuildGEP2(c->b, c->i64, c->envp, &o, 1, ""),
                           LLVMBuildGEP2(c->b, c->i32, c->boundp, &o, 1, "")};
      check_rc(c, rt_check(c, "tdsl_bind_symbol", v, 7));
    } else {
      int64_t want;
      if (!sym_is_const(a->shape[d], &want))
        ICE("parameter '%s' dim %d is neither a constant nor a symbol", a->cname, d);
      check_dim(c, a, d, i64c(c, want), a->shape[d]);
    }
  }
}

/* Stride symbols, then every symbol loaded into SSA values. */
static void bind_strides(Cg *c) {
  for (int s = 0; s < c->k->nsyms; s++) {
    const IrSymVar *sv = &c->k->syms[s];
    if (sv->kind != SYMK_STRIDE) continue;
    const IrParam *p = &c->k->params[sv->param];
    LLVMValueRef o = i64c(c, s);
    LLVMBuildStore(c->b, dl_stride(c, c->args[sv->param], p->rank, sv->dim),
                   LLVMBuildGEP2(c->b, c->i64, c->envp, &o, 1, ""));
  }
  c->env = arena_alloc(c->m->arena, sizeof *c->env * (size_t)(c->k->nsyms + 1));
  for (int s = 0; s < c->k->nsyms; s++) c->env[s] = idx_load(c, c->envp, s);
}

static void run_ir_checks(Cg *c) {
  for (int i = 0; i < c->k->nchecks; i++) {
    const IrCheck *ck = &c->k->checks[i];
    LLVMValueRef l = sym_val(c, ck->lhs), r = sym_val(c, ck->rhs);
    LLVMIntPredicate pr = ck->op == CHK_EQ ? LLVMIntEQ : ck->op == CHK_LE ? LLVMIntSLE : LLVMIntSLT;
    LLVMValueRef ok = LLVMBuildICmp(c->b, pr, l, r, "");
    LLVMBasicBlockRef bad = block(c, "check_failed"), next = block(c, "checked");
    LLVMBuildCondBr(c->b, ok, next, bad);
    LLVMPositionBuilderAtEnd(c->b, bad);
    LLVMTypeRef ps[2] = {c->i32, c->ptr};
    LLVMValueRef f = fdecl(c, "tdsl_set_error", c->i32, ps, 2, 1);
    char *fmt;
    int ids[IR_CHECK_MAX_SYMS];
    int n = ir_check_format(c->m->arena, c->k, ck, &fmt, ids);
    /* the message gives the symbols' values: "size N (= 3)" */
    LLVMValueRef a[3 + IR_CHECK_MAX_SYMS] = {
        i32c(c, E_CHECK), str(c, arena_printf(c->m->arena, "kernel '%%s': %s", fmt)),
        c->kname};
    for (int j = 0; j < n; j++) a[3 + j] = c->env[ids[j]];
    LLVMValueRef rc = call(c, f, a, (unsigned)(3 + n));
    LLVMBuildBr(c->b, c->fail);
    LLVMAddIncoming(c->rcphi, &rc, &bad, 1);
    LLVMPositionBuilderAtEnd(c->b, next);
  }
}

static LLVMValueRef ptr_array(Cg *c, LLVMValueRef *v, int n) {
  if (n == 0) return LLVMConstNull(c->ptr);
  LLVMValueRef a = entry_alloca(c, c->ptr, i32c(c, n));
  for (int i = 0; i < n; i++) {
    LLVMValueRef o = i64c(c, i);
    LLVMBuildStore(c->b, v[i], LLVMBuildGEP2(c->b, c->ptr, a, &o, 1, ""));
  }
  return a;
}

/* Arrays sized by the kernel: any number of tensor parameters. */
static LLVMValueRef *value_list(Cg *c, int n) {
  return arena_alloc(c->m->arena, sizeof(LLVMValueRef) * (size_t)(n + 1));
}

static void check_overlap(Cg *c, Arg *in, int nin, Arg *out, int nout) {
  LLVMValueRef *t[2] = {value_list(c, nin), value_list(c, nout)};
  LLVMValueRef *nm[2] = {value_list(c, nin), value_list(c, nout)};
  for (int i = 0; i < nin; i++) t[0][i] = in[i].t, nm[0][i] = in[i].name;
  for (int i = 0; i < nout; i++) t[1][i] = out[i].t, nm[1][i] = out[i].name;
  LLVMValueRef v[7] = {c->kname, ptr_array(c, t[1], nout), ptr_array(c, nm[1], nout),
                       i32c(c, nout), ptr_array(c, t[0], nin),
                       ptr_array(c, nm[0], nin), i32c(c, nin)};
  check_rc(c, rt_check(c, "tdsl_check_overlap_named", v, 7));
}

/* Writes output shapes (and strides when given): the shape query. */
static void write_shapes(Cg *c, const Arg *a) {
  LLVMValueRef sh = dl_shape(c, a->t), dims[TDSL_MAX_RANK];
  for (int d = 0; d < a->rank; d++) {
    dims[d] = sym_val(c, a->shape[d]);
    LLVMValueRef o = i64c(c, d);
    LLVMBuildStore(c->b, dims[d], LLVMBuildGEP2(c->b, c->i64, sh, &o, 1, ""));
  }
  LLVMValueRef st = dl_strides(c, a->t);
  LLVMBasicBlockRef wr = block(c, "write_strides"), done = block(c, "strides_done");
  LLVMBuildCondBr(c->b, LLVMBuildIsNull(c->b, st, ""), done, wr);
  LLVMPositionBuilderAtEnd(c->b, wr);
  if (a->qstride) { /* strided: PyTorch's strides (IrResult.qstride) */
    for (int d = 0; d < a->rank; d++) {
      LLVMValueRef o = i64c(c, d);
      LLVMBuildStore(c->b, sym_val(c, a->qstride[d]),
                     LLVMBuildGEP2(c->b, c->i64, st, &o, 1, ""));
    }
    LLVMBuildBr(c->b, done);
    LLVMPositionBuilderAtEnd(c->b, done);
    return;
  }
  int order[TDSL_MAX_RANK] = {0, 1, 2, 3};
  bool cl = a->layout == LAYOUT_CHANNELS_LAST && a->rank == 4;
  if (cl) order[1] = 2, order[2] = 3, order[3] = 1; /* N H W C */
  else for (int d = 0; d < a->rank; d++) order[d] = d;
  LLVMValueRef acc = i64c(c, 1);
  for (int j = a->rank - 1; j >= 0; j--) {
    LLVMValueRef o = i64c(c, order[j]);
    LLVMBuildStore(c->b, acc, LLVMBuildGEP2(c->b, c->i64, st, &o, 1, ""));
    acc = LLVMBuildMul(c->b, acc, smin(c, dims[order[j]], i64c(c, 1), true), "");
  }
  LLVMBuildBr(c->b, done);
  LLVMPositionBuilderAtEnd(c->b, done);
}

/* Emits every check; leaves the builder where computing starts, after a
 * shape query has returned. */
static void emit_entry_checks(Cg *c) {
  int nin = 0, nout = c->k->nresults;
  Arg *in = arena_alloc(c->m->arena, sizeof *in * (size_t)(c->k->nparams + 1));
  Arg *out = arena_alloc(c->m->arena, sizeof *out * (size_t)(nout + 1));
  for (int i = 0; i < c->k->nparams; i++)
    if (c->k->params[i].is_tensor) in[nin++] = param_arg(c, i);
  for (int i = 0; i < nout; i++) out[i] = result_arg(c, i);
  for (int i = 0; i < nin; i++) check_tensor(c, "tdsl_check_tensor", &in[i]);
  for (int i = 0; i < nout; i++) check_tensor(c, "tdsl_check_output", &out[i]);
  for (int i = 0; i < nin; i++) bind_param_dims(c, &in[i]);
  bind_strides(c);
  run_ir_checks(c);
  for (int i = 0; i < nin; i++) {
    LLVMValueRef v[4] = {c->kname, in[i].name, in[i].t, i32c(c, in[i].layout)};
    check_rc(c, rt_check(c, "tdsl_check_layout", v, 4));
    check3(c, "tdsl_check_data", &in[i]);
    check3(c, "tdsl_check_align", &in[i]);
    check3(c, "tdsl_check_extent", &in[i]);
  }
  /* shape query: every output's data is NULL */
  LLVMValueRef all = LLVMConstInt(c->i1, 1, 0);
  for (int i = 0; i < nout; i++)
    all = LLVMBuildAnd(c->b, all, LLVMBuildIsNull(c->b, dl_data(c, out[i].t), ""), "");
  LLVMBasicBlockRef q = block(c, "shape_query"), run = block(c, "run");
  LLVMBuildCondBr(c->b, all, q, run);
  LLVMPositionBuilderAtEnd(c->b, q);
  for (int i = 0; i < nout; i++) write_shapes(c, &out[i]);
  LLVMBuildRet(c->b, i32c(c, 0));
  LLVMPositionBuilderAtEnd(c->b, run);
  for (int i = 0; i < nout; i++) {
    for (int d = 0; d < out[i].rank; d++)
      check_dim(c, &out[i], d, sym_val(c, out[i].shape[d]), out[i].shape[d]);
    LLVMValueRef v[4] = {c->kname, out[i].name, out[i].t, i32c(c, out[i].layout)};
    check_rc(c, rt_check(c, "tdsl_check_layout", v, 4));
    if (out[i].layout == LAYOUT_STRIDED)
      check3(c, "tdsl_check_internal_overlap", &out[i]);
    check3(c, "tdsl_check_data", &out[i]);
    check3(c, "tdsl_check_align", &out[i]);
    check3(c, "tdsl_check_extent", &out[i]);
  }
  check_overlap(c, in, nin, out, nout);
}

/* ---- buffers ---------------------------------------------------------- */

static LLVMValueRef const_buffer(Cg *c, const LfBuf *b) {
  int64_t n;
  if (!sym_is_const(b->size, &n)) ICE("tensor constant of symbolic size");
  size_t bytes = (size_t)n * (size_t)dtype_size(b->dtype);
  LLVMValueRef init = LLVMConstStringInContext(c->ctx, b->data, (unsigned)bytes, 1);
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), ".tensor");
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMSetAlignment(g, 16);
  return g;
}

static void setup_buffers(Cg *c) {
  const LfKernel *lk = c->lk;
  for (int i = 0; i < lk->nbufs; i++) {
    const LfBuf *b = &lk->bufs[i];
    switch (b->kind) {
    case LFB_PARAM: c->base[i] = dl_base(c, c->args[b->index]); break;
    case LFB_OUTPUT: c->base[i] = dl_base(c, c->args[c->k->nparams + b->index]); break;
    case LFB_CONST: c->base[i] = const_buffer(c, b); break;
    case LFB_SCALAR: {
      LLVMValueRef a = c->args[b->index];
      c->base[i] = entry_alloca(c, LLVMTypeOf(a), NULL);
      if (b->dtype == DT_BOOL) a = to_bool(c, a);
      LLVMBuildStore(c->b, a, c->base[i]);
      break;
    }
    case LFB_SCRATCH: {
      int shared = lf_slot_shared(c->lk, i); /* plan-memory: one block per slot */
      if (shared) {
        c->base[i] = c->base[shared - 1];
        break;
      }
      const Sym *nbytes = lf_scratch_bytes(c->m->st, b);
      LLVMValueRef mag = sym_mag(c, nbytes);
      LLVMBasicBlockRef big = block(c, "scratch_overflow"), fits = block(c, "scratch_fits");
      LLVMBuildCondBr(c->b, LLVMBuildFCmp(c->b, LLVMRealOLT, mag, LLVMConstReal(c->f64, 0x1p62), ""),
                      fits, big);
      LLVMPositionBuilderAtEnd(c->b, big);
      LLVMTypeRef ps[2] = {c->i32, c->ptr};
      LLVMValueRef ea[3] = {i32c(c, E_OVERFLOW), str(c, "kernel '%s': an intermediate "
                            "tensor is too large (its size overflows int64)"), c->kname};
      LLVMValueRef erc = call(c, fdecl(c, "tdsl_set_error", c->i32, ps, 2, 1), ea, 3);
      LLVMBuildBr(c->b, c->fail);
      LLVMAddIncoming(c->rcphi, &erc, &big, 1);
      LLVMPositionBuilderAtEnd(c->b, fits);
      LLVMValueRef bytes = sym_val(c, nbytes);
      LLVMTypeRef ps2[2] = {c->i64, c->i64};
      LLVMValueRef a[2] = {bytes, i64c(c, 64)};
      LLVMValueRef p = call(c, fdecl(c, "tdsl_alloc", c->ptr, ps2, 2, 0), a, 2);
      LLVMBuildStore(c->b, p, c->slot[i]);
      LLVMValueRef rc = LLVMBuildSelect(c->b, LLVMBuildIsNull(c->b, p, ""),
                                        i32c(c, E_NOMEM), i32c(c, 0), "");
      check_rc(c, rc);
      c->base[i] = p;
      break;
    }
    }
  }
}

static void free_scratch(Cg *c) {
  for (int i = 0; i < c->lk->nbufs; i++)
    if (c->lk->bufs[i].kind == LFB_SCRATCH && !lf_slot_shared(c->lk, i)) {
      LLVMValueRef p = LLVMBuildLoad2(c->b, c->ptr, c->slot[i], "");
      call(c, fdecl(c, "tdsl_free", c->vd, &c->ptr, 1, 0), &p, 1);
    }
  for (int i = 0; i < c->lk->nnests; i++)
    if (c->gpool[i]) {
      LLVMValueRef p = LLVMBuildLoad2(c->b, c->ptr, c->gpool[i], "");
      call(c, fdecl(c, "tdsl_free", c->vd, &c->ptr, 1, 0), &p, 1);
    }
}

/* ---- loops ------------------------------------------------------------ */

/* A loop over [lo, n). */
static LLVMValueRef open_loop_from(Cg *c, LLVMValueRef lo, LLVMValueRef n);

static LLVMValueRef open_loop(Cg *c, LLVMValueRef n) {
  return open_loop_from(c, i64c(c, 0), n);
}

static LLVMValueRef open_loop_from(Cg *c, LLVMValueRef lo, LLVMValueRef n) {
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

static void close_loop(Cg *c) {
  Loop *l = &c->loops[--c->nloops];
  LLVMValueRef next = LLVMBuildAdd(c->b, l->iv, i64c(c, 1), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
  LLVMBuildBr(c->b, l->header);
  LLVMAddIncoming(l->iv, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(c->b, l->exit);
}

/* ---- expressions -------------------------------------------------------- */

typedef struct NestCtx {
  const LfNest *n;
  LLVMValueRef acc; /* the reduced value, while evaluating n->post */
  LLVMValueRef iv[MAXL];
  LLVMValueRef ub[MAXL];
  LLVMValueRef rt_stride[TDSL_MAX_RANK]; /* output strides */
} NestCtx;

/* Address of a's element at the current loop variables; n: how many loop
 * variables a's strides cover (loads: all, stores: the outer ones). */
static LLVMValueRef address(Cg *c, NestCtx *x, const LfAccess *a, DType dt, int n) {
  LLVMValueRef idx = sym_val(c, a->offset);
  if (a->rt_strides) {
    for (int l = 0; l < x->n->rank; l++)
      idx = LLVMBuildAdd(c->b, idx, LLVMBuildMul(c->b, x->iv[l], x->rt_stride[l], ""), "");
  } else if (a->lin_rank) {
    LLVMValueRef lin = i64c(c, 0);
    for (int l = 0; l < x->n->rank; l++)
      lin = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, lin, x->ub[l], ""), x->iv[l], "");
    for (int e = a->lin_rank - 1; e >= 0; e--) {
      LLVMValueRef sz = smin(c, sym_val(c, a->lin_shape[e]), i64c(c, 1), true);
      LLVMValueRef co = e ? LLVMBuildURem(c->b, lin, sz, "") : lin;
      idx = LLVMBuildAdd(c->b, idx, LLVMBuildMul(c->b, co, sym_val(c, a->stride[e]), ""), "");
      if (e) lin = LLVMBuildUDiv(c->b, lin, sz, "");
    }
  } else {
    for (int l = 0; l < n; l++)
      if (!sym_is(a->stride[l], 0))
        idx = LLVMBuildAdd(c->b, idx, LLVMBuildMul(c->b, x->iv[l], sym_val(c, a->stride[l]), ""), "");
  }
  return LLVMBuildGEP2(c->b, storage_type(c, dt), c->base[a->buf], &idx, 1, "");
}

static LLVMValueRef load_el(Cg *c, LLVMValueRef p, DType dt) {
  LLVMValueRef v = LLVMBuildLoad2(c->b, storage_type(c, dt), p, "");
  if (dt == DT_BOOL) return to_bool(c, v);
  if (dt == DT_BF16) return bf16_to_f32v(c, v);
  if (dt == DT_F16) return LLVMBuildFPExt(c->b, v, c->f32, "");
  return v;
}

static void store_el(Cg *c, LLVMValueRef v, LLVMValueRef p, DType dt) {
  if (dt == DT_BOOL) v = to_bool(c, v);
  if (dt == DT_BF16) v = f32_to_bf16v(c, v);
  if (dt == DT_F16) v = LLVMBuildFPTrunc(c->b, v, storage_type(c, dt), "");
  LLVMBuildStore(c->b, v, p);
}

static LLVMValueRef fconst(LLVMValueRef like, double v) {
  return LLVMConstReal(LLVMTypeOf(like), v);
}

static LLVMValueRef sel(Cg *c, LLVMValueRef cond, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(c->b, cond, a, b, "");
}

static LLVMValueRef fcmp(Cg *c, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFCmp(c->b, p, a, b, "");
}

/* ---- transcendental functions ----------------------------------------------
 * All but sin, cos and tan go through the math layer (math.h): plain IR, no
 * libm, vectorized by the loop vectorizer, the same on every target.
 * sin, cos and tan stay libm's on the CPU: the layer's argument reduction is
 * exact only for |x| < 2^27 pi/2, and PyTorch's results are correctly
 * reduced for every argument (sin(1e9) included). */
static LLVMValueRef math_fn(Cg *c, MathFn fn, LLVMValueRef x, LLVMValueRef y) {
  CgMath m = {c->ctx, c->mod, c->b, c->opt};
  return cg_math(&m, fn, x, y);
}

static LLVMValueRef exp_f(Cg *c, LLVMValueRef x) { return math_fn(c, MATH_EXP, x, NULL); }

/* The op table's MATH column (ir/ops.h): ops computed by one math-layer
 * function for floating-point dtypes. */
static const MathFn op_math[OP_COUNT] = {
#define OP(e, n, a, k, r, cost, m) [OP_##e] = MATH_##m,
    OP_LIST(OP)
#undef OP
};

/* min(max(x, 0), 6) keeping NaN (hardswish, hardsigmoid). */
static LLVMValueRef relu6(Cg *c, LLVMValueRef x) {
  LLVMValueRef r = sel(c, fcmp(c, LLVMRealOLT, x, fconst(x, 0)), fconst(x, 0), x);
  return sel(c, fcmp(c, LLVMRealOGT, r, fconst(x, 6)), fconst(x, 6), r);
}

static LLVMValueRef unary_f(Cg *c, Op op, int flags, const double *fa, LLVMValueRef x) {
  LLVMBuilderRef b = c->b;
  LLVMValueRef one = fconst(x, 1), zero = fconst(x, 0);
  if (op_math[op] != MATH_NONE) return math_fn(c, op_math[op], x, NULL);
  switch (op) {
  case OP_NEG: return LLVMBuildFNeg(b, x, "");
  case OP_ABS: return unary_intr(c, "llvm.fabs", x);
  case OP_SQRT: return unary_intr(c, "llvm.sqrt", x);
  case OP_RSQRT: return LLVMBuildFDiv(b, one, unary_intr(c, "llvm.sqrt", x), "");
  case OP_SIN: return unary_intr(c, "llvm.sin", x);
  case OP_COS: return unary_intr(c, "llvm.cos", x);
  case OP_SIGMOID:
  case OP_SILU: {
    LLVMValueRef d = LLVMBuildFAdd(b, one, exp_f(c, LLVMBuildFNeg(b, x, "")), "");
    return LLVMBuildFDiv(b, op == OP_SILU ? x : one, d, "");
  }
  case OP_RELU: return sel(c, fcmp(c, LLVMRealUGT, x, zero), x, zero);
  case OP_GELU: {
    LLVMValueRef t;
    if (flags & IRF_TANH) {
      LLVMValueRef x3 = LLVMBuildFMul(b, x, LLVMBuildFMul(b, x, x, ""), "");
      LLVMValueRef in = LLVMBuildFAdd(b, x, LLVMBuildFMul(b, fconst(x, 0.044715), x3, ""), "");
      t = math_fn(c, MATH_TANH, LLVMBuildFMul(b, fconst(x, 0.79788456080286535588), in, ""), NULL);
    } else {
      t = math_fn(c, MATH_ERF, LLVMBuildFMul(b, x, fconst(x, 0.70710678118654752440), ""), NULL);
    }
    return LLVMBuildFMul(b, LLVMBuildFMul(b, x, fconst(x, 0.5), ""),
                         LLVMBuildFAdd(b, one, t, ""), "");
  }
  case OP_FLOOR: return unary_intr(c, "llvm.floor", x);
  case OP_CEIL: return unary_intr(c, "llvm.ceil", x);
  case OP_ROUND: return unary_intr(c, "llvm.roundeven", x);
  case OP_SIGN:
    return sel(c, fcmp(c, LLVMRealOGT, x, zero), one,
               sel(c, fcmp(c, LLVMRealOLT, x, zero), fconst(x, -1), zero));
  case OP_RECIPROCAL: return LLVMBuildFDiv(b, one, x, "");
  case OP_TAN: return unary_intr(c, "llvm.tan", x); /* libm's, as sin and cos */
  case OP_TRUNC: return unary_intr(c, "llvm.trunc", x);
  case OP_FRAC: return LLVMBuildFSub(b, x, unary_intr(c, "llvm.trunc", x), "");
  case OP_SOFTPLUS: { /* PyTorch's: x beta > threshold ? x : log1p(exp(x beta)) / beta */
    LLVMValueRef xb = LLVMBuildFMul(b, x, fconst(x, fa[0]), "");
    LLVMValueRef sp = LLVMBuildFDiv(b, math_fn(c, MATH_LOG1P, exp_f(c, xb), NULL), fconst(x, fa[0]), "");
    return sel(c, fcmp(c, LLVMRealOGT, xb, fconst(x, fa[1])), x, sp);
  }
  case OP_LEAKY_RELU:
    return sel(c, fcmp(c, LLVMRealOGT, x, zero), x, LLVMBuildFMul(b, x, fconst(x, fa[0]), ""));
  case OP_ELU:
    return sel(c, fcmp(c, LLVMRealOLE, x, zero),
               LLVMBuildFMul(b, math_fn(c, MATH_EXPM1, x, NULL), fconst(x, fa[0]), ""), x);
  case OP_HARDTANH: {
    LLVMValueRef r = sel(c, fcmp(c, LLVMRealOLT, x, fconst(x, fa[0])), fconst(x, fa[0]), x);
    return sel(c, fcmp(c, LLVMRealOGT, r, fconst(x, fa[1])), fconst(x, fa[1]), r);
  }
  case OP_HARDSWISH:
    return LLVMBuildFDiv(b, LLVMBuildFMul(b, x, relu6(c, LLVMBuildFAdd(b, x, fconst(x, 3), "")), ""),
                         fconst(x, 6), "");
  case OP_HARDSIGMOID:
    return LLVMBuildFDiv(b, relu6(c, LLVMBuildFAdd(b, x, fconst(x, 3), "")), fconst(x, 6), "");
  case OP_MISH:
    return LLVMBuildFMul(b, x, math_fn(c, MATH_TANH, math_fn(c, MATH_LOG1P, exp_f(c, x), NULL), NULL), "");
  case OP_NAN_TO_NUM: {
    LLVMValueRef r = sel(c, fcmp(c, LLVMRealUNO, x, x), fconst(x, fa[0]), x);
    r = sel(c, fcmp(c, LLVMRealOEQ, x, fconst(x, INFINITY)), fconst(x, fa[1]), r);
    return sel(c, fcmp(c, LLVMRealOEQ, x, fconst(x, -INFINITY)), fconst(x, fa[2]), r);
  }
  default: ICE("unary %s on a float dtype", op_name(op));
  }
}

static LLVMValueRef unary_i(Cg *c, Op op, DType dt, const double *fa, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef zero = LLVMConstInt(t, 0, 0);
  bool u = is_unsigned(dt);
  switch (op) {
  case OP_NEG: return LLVMBuildSub(c->b, zero, x, "");
  case OP_ABS:
    return u ? x : sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, x, zero, ""),
                       LLVMBuildSub(c->b, zero, x, ""), x);
  case OP_RELU:
    return u ? x : sel(c, LLVMBuildICmp(c->b, LLVMIntSGT, x, zero, ""), x, zero);
  case OP_FLOOR: case OP_CEIL: case OP_ROUND: case OP_TRUNC: case OP_NAN_TO_NUM: return x;
  case OP_HARDTANH: { /* bounds are in the dtype's range (sema) */
    LLVMValueRef lo = LLVMConstInt(t, (unsigned long long)(long long)fa[0], 1);
    LLVMValueRef hi = LLVMConstInt(t, (unsigned long long)(long long)fa[1], 1);
    LLVMValueRef r = sel(c, LLVMBuildICmp(c->b, u ? LLVMIntULT : LLVMIntSLT, x, lo, ""), lo, x);
    return sel(c, LLVMBuildICmp(c->b, u ? LLVMIntUGT : LLVMIntSGT, r, hi, ""), hi, r);
  }
  case OP_SIGN: {
    LLVMValueRef gt = LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, u ? LLVMIntUGT : LLVMIntSGT, x, zero, ""), t, "");
    if (u) return gt;
    LLVMValueRef lt = LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, zero, ""), t, "");
    return LLVMBuildSub(c->b, gt, lt, "");
  }
  case OP_BITNOT:
    return LLVMBuildXor(c->b, x, dt == DT_BOOL ? LLVMConstInt(t, 1, 0) : LLVMConstAllOnes(t), "");
  default: ICE("unary %s on an integer dtype", op_name(op));
  }
}

/* Python // and % of floats, as PyTorch computes them. */
static LLVMValueRef floordiv_f(Cg *c, LLVMValueRef a, LLVMValueRef b, bool mod) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef zero = fconst(a, 0), m = LLVMBuildFRem(B, a, b, "");
  LLVMValueRef adj = LLVMBuildAnd(B, fcmp(c, LLVMRealUNE, m, zero),
                                  LLVMBuildXor(B, fcmp(c, LLVMRealOLT, b, zero),
                                               fcmp(c, LLVMRealOLT, m, zero), ""), "");
  if (mod) return sel(c, adj, LLVMBuildFAdd(B, m, b, ""), m);
  LLVMValueRef q = LLVMBuildFDiv(B, a, b, "");
  LLVMValueRef div = LLVMBuildFDiv(B, LLVMBuildFSub(B, a, m, ""), b, "");
  div = sel(c, adj, LLVMBuildFSub(B, div, fconst(a, 1), ""), div);
  LLVMValueRef fl = unary_intr(c, "llvm.floor", div);
  LLVMValueRef up = fcmp(c, LLVMRealOGT, LLVMBuildFSub(B, div, fl, ""), fconst(a, 0.5));
  LLVMValueRef r = sel(c, up, LLVMBuildFAdd(B, fl, fconst(a, 1), ""), fl);
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef cs[2] = {zero, q};
  r = sel(c, fcmp(c, LLVMRealOEQ, div, zero), intrinsic(c, "llvm.copysign", &t, 1, cs, 2), r);
  return sel(c, fcmp(c, LLVMRealOEQ, b, zero), q, r);
}

/* PyTorch's integer pow: a private i64 function, exponentiation by
 * squaring unrolled over the 64 exponent bits. */
static LLVMValueRef powi_fn(Cg *c) {
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, "tdsl.powi");
  if (f) return f;
  LLVMTypeRef ps[2] = {c->i64, c->i64};
  f = LLVMAddFunction(c->mod, "tdsl.powi", LLVMFunctionType(c->i64, ps, 2, 0));
  LLVMSetLinkage(f, LLVMPrivateLinkage);
  LLVMBuilderRef saved = c->b;
  c->b = LLVMCreateBuilderInContext(c->ctx);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, f, "entry"));
  LLVMValueRef a = LLVMGetParam(f, 0), e = LLVMGetParam(f, 1), r = i64c(c, 1), x = a;
  for (int i = 0; i < 64; i++) {
    LLVMValueRef bit = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, e, i64c(c, i), ""), c->i1, "");
    r = sel(c, bit, LLVMBuildMul(c->b, r, x, ""), r);
    x = LLVMBuildMul(c->b, x, x, "");
  }
  LLVMValueRef odd = LLVMBuildTrunc(c->b, e, c->i1, "");
  LLVMValueRef neg = sel(c, LLVMBuildICmp(c->b, LLVMIntEQ, a, i64c(c, 1), ""), i64c(c, 1),
                         sel(c, LLVMBuildICmp(c->b, LLVMIntEQ, a, i64c(c, -1), ""),
                             sel(c, odd, i64c(c, -1), i64c(c, 1)), i64c(c, 0)));
  LLVMBuildRet(c->b, sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, e, i64c(c, 0), ""), neg, r));
  LLVMDisposeBuilder(c->b);
  c->b = saved;
  return f;
}

/* C's truncating % (fmod of integers); x % 0 and x % -1 give 0 (PyTorch
 * raises for the first; the second would overflow for the minimum). */
static LLVMValueRef c_rem(Cg *c, LLVMValueRef a, LLVMValueRef b, bool u) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef zero = LLVMConstInt(t, 0, 0);
  LLVMValueRef bad = LLVMBuildICmp(c->b, LLVMIntEQ, b, zero, "");
  if (!u) bad = LLVMBuildOr(c->b, bad, LLVMBuildICmp(c->b, LLVMIntEQ, b, LLVMConstAllOnes(t), ""), "");
  LLVMValueRef safe = sel(c, bad, LLVMConstInt(t, 1, 0), b);
  return sel(c, bad, zero, u ? LLVMBuildURem(c->b, a, safe, "") : LLVMBuildSRem(c->b, a, safe, ""));
}

/* hypot without overflow or underflow: f32 (and so f16/bf16) squares in
 * f64, where they are exact, and rounds once; f64 scales by the larger
 * magnitude.  An infinity wins over NaN (C99). */
static LLVMValueRef hypot_f(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef x = unary_intr(c, "llvm.fabs", a), y = unary_intr(c, "llvm.fabs", b), r;
  LLVMTypeRef t = LLVMTypeOf(a), el = LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t) : t;
  if (LLVMGetTypeKind(el) == LLVMFloatTypeKind) {
    LLVMTypeRef d = LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMVectorType(c->f64, LLVMGetVectorSize(t)) : c->f64;
    LLVMValueRef xd = LLVMBuildFPExt(B, x, d, ""), yd = LLVMBuildFPExt(B, y, d, "");
    LLVMValueRef s = LLVMBuildFAdd(B, LLVMBuildFMul(B, xd, xd, ""), LLVMBuildFMul(B, yd, yd, ""), "");
    r = LLVMBuildFPTrunc(B, unary_intr(c, "llvm.sqrt", s), t, "");
  } else {
    LLVMValueRef big = sel(c, fcmp(c, LLVMRealOGT, y, x), y, x), small = sel(c, fcmp(c, LLVMRealOGT, y, x), x, y);
    LLVMValueRef q = LLVMBuildFDiv(B, small, big, "");
    r = LLVMBuildFMul(B, big, unary_intr(c, "llvm.sqrt", LLVMBuildFAdd(B, fconst(a, 1), LLVMBuildFMul(B, q, q, ""), "")), "");
    r = sel(c, fcmp(c, LLVMRealOEQ, big, fconst(a, 0)), small, r); /* 0, or a NaN small */
  }
  LLVMValueRef inf = LLVMBuildOr(B, fcmp(c, LLVMRealOEQ, x, fconst(a, INFINITY)),
                                 fcmp(c, LLVMRealOEQ, y, fconst(a, INFINITY)), "");
  return sel(c, inf, fconst(a, INFINITY), r);
}

/* PyTorch's logaddexp: max + log1p(exp(-|a - b|)); equal infinities give
 * themselves. */
static LLVMValueRef logaddexp_f(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef m = sel(c, fcmp(c, LLVMRealOLT, a, b), b, a);
  LLVMValueRef d = LLVMBuildFNeg(B, unary_intr(c, "llvm.fabs", LLVMBuildFSub(B, a, b, "")), "");
  LLVMValueRef r = LLVMBuildFAdd(B, m, math_fn(c, MATH_LOG1P, exp_f(c, d), NULL), "");
  LLVMValueRef same_inf = LLVMBuildAnd(B, fcmp(c, LLVMRealOEQ, a, b),
                                       fcmp(c, LLVMRealOEQ, unary_intr(c, "llvm.fabs", a), fconst(a, INFINITY)), "");
  return sel(c, same_inf, a, r);
}

/* PyTorch's lerp: exact at both ends (weight 0 gives a, 1 gives b). */
static LLVMValueRef lerp_f(Cg *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef w) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef d = LLVMBuildFSub(B, b, a, "");
  LLVMValueRef lo = LLVMBuildFAdd(B, a, LLVMBuildFMul(B, w, d, ""), "");
  LLVMValueRef hi = LLVMBuildFSub(B, b, LLVMBuildFMul(B, d, LLVMBuildFSub(B, fconst(a, 1), w, ""), ""), "");
  return sel(c, fcmp(c, LLVMRealOLT, unary_intr(c, "llvm.fabs", w), fconst(a, 0.5)), lo, hi);
}

static LLVMValueRef binary_i(Cg *c, Op op, DType dt, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  bool u = is_unsigned(dt);
  LLVMTypeRef t = LLVMTypeOf(a);
  switch (op) {
  case OP_ADD: return LLVMBuildAdd(B, a, b, "");
  case OP_SUB: return LLVMBuildSub(B, a, b, "");
  case OP_MUL: return LLVMBuildMul(B, a, b, "");
  case OP_AND: return LLVMBuildAnd(B, a, b, "");
  case OP_OR: return LLVMBuildOr(B, a, b, "");
  case OP_XOR: return LLVMBuildXor(B, a, b, "");
  case OP_DIV: /* loop form only (pools): C division, divisor != 0 */
    return u ? LLVMBuildUDiv(B, a, b, "") : LLVMBuildSDiv(B, a, b, "");
  case OP_MAXIMUM:
  case OP_MINIMUM: {
    LLVMIntPredicate p = op == OP_MAXIMUM ? (u ? LLVMIntUGT : LLVMIntSGT) : (u ? LLVMIntULT : LLVMIntSLT);
    return sel(c, LLVMBuildICmp(B, p, a, b, ""), a, b);
  }
  case OP_FMOD: return c_rem(c, a, b, u);
  case OP_FLOORDIV:
  case OP_MOD:
    if (!u) return py_divmod(c, a, b, op == OP_MOD);
    {
      LLVMValueRef zero = LLVMConstInt(t, 0, 0);
      LLVMValueRef b0 = LLVMBuildICmp(B, LLVMIntEQ, b, zero, "");
      LLVMValueRef safe = sel(c, b0, LLVMConstInt(t, 1, 0), b);
      LLVMValueRef r = op == OP_MOD ? LLVMBuildURem(B, a, safe, "") : LLVMBuildUDiv(B, a, safe, "");
      return sel(c, b0, zero, r);
    }
  case OP_POW: {
    LLVMValueRef x[2] = {u ? LLVMBuildZExt(B, a, c->i64, "") : LLVMBuildSExt(B, a, c->i64, ""),
                         u ? LLVMBuildZExt(B, b, c->i64, "") : LLVMBuildSExt(B, b, c->i64, "")};
    if (t == c->i64) x[0] = a, x[1] = b;
    LLVMValueRef r = call(c, powi_fn(c), x, 2);
    return t == c->i64 ? r : LLVMBuildTrunc(B, r, t, "");
  }
  default: ICE("binary %s on an integer dtype", op_name(op));
  }
}

/* a ** b.  The constant exponents LLVM and PyTorch's CPU kernel compute
 * without pow: 1, 2 and -1 give exactly C's pow (one rounding of the exact
 * result, the same special values); 3 and -2 are PyTorch's own formulas
 * (x * x * x, 1 / (x * x)); 0.5 is sqrt with C's pow's special values
 * (pow(-0, 0.5) = +0, pow(-inf, 0.5) = +inf, where sqrt gives -0 and
 * NaN), -0.5 its reciprocal.  So -O0, the interpreter and -O2 agree to
 * the ulp.  Every other exponent goes through the math layer's pow. */
static LLVMValueRef pow_f(Cg *c, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  if (LLVMIsAConstantFP(b)) {
    LLVMBool lossy;
    double e = LLVMConstRealGetDouble(b, &lossy);
    LLVMValueRef one = fconst(a, 1);
    if (e == 1) return a;
    if (e == 2) return LLVMBuildFMul(B, a, a, "");
    if (e == 3) return LLVMBuildFMul(B, LLVMBuildFMul(B, a, a, ""), a, "");
    if (e == -1) return LLVMBuildFDiv(B, one, a, "");
    if (e == -2) return LLVMBuildFDiv(B, one, LLVMBuildFMul(B, a, a, ""), "");
    if (e == 0.5 || e == -0.5) {
      LLVMValueRef r = unary_intr(c, "llvm.fabs", unary_intr(c, "llvm.sqrt", a));
      LLVMValueRef ninf = LLVMBuildFCmp(B, LLVMRealOEQ, a, fconst(a, -INFINITY), "");
      r = LLVMBuildSelect(B, ninf, fconst(a, INFINITY), r, "");
      return e > 0 ? r : LLVMBuildFDiv(B, one, r, "");
    }
  }
  return math_fn(c, MATH_POW, a, b);
}

static LLVMValueRef binary_f(Cg *c, Op op, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  if (op == OP_POW) return pow_f(c, a, b);
  if (op_math[op] != MATH_NONE) return math_fn(c, op_math[op], a, b);
  switch (op) {
  case OP_ADD: return LLVMBuildFAdd(B, a, b, "");
  case OP_SUB: return LLVMBuildFSub(B, a, b, "");
  case OP_MUL: return LLVMBuildFMul(B, a, b, "");
  /* Correctly rounded at every level, as PyTorch divides: a multiply by
   * the reciprocal is not (round(150 / 60) would be 3).  LLVM still
   * turns a division by a constant power of two into the exact multiply. */
  case OP_DIV: return LLVMBuildFDiv(B, a, b, "");
  case OP_FLOORDIV: return floordiv_f(c, a, b, false);
  case OP_MOD: return floordiv_f(c, a, b, true);
  case OP_HYPOT: return hypot_f(c, a, b);
  case OP_FMOD: return LLVMBuildFRem(B, a, b, "");
  case OP_COPYSIGN: {
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef cs[2] = {a, b};
    return intrinsic(c, "llvm.copysign", &t, 1, cs, 2);
  }
  case OP_LOGADDEXP: return logaddexp_f(c, a, b);
  case OP_MAXIMUM:
  case OP_MINIMUM: {
    LLVMValueRef r = sel(c, fcmp(c, op == OP_MAXIMUM ? LLVMRealOGT : LLVMRealOLT, a, b), a, b);
    return sel(c, fcmp(c, LLVMRealUNO, a, b), fconst(a, NAN), r);
  }
  default: ICE("binary %s on a float dtype", op_name(op));
  }
}

static LLVMValueRef compare(Cg *c, Op op, DType dt, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef r;
  int i = op - OP_EQ; /* EQ NE LT LE GT GE */
  if (dtype_is_float(dt)) {
    static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                           LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    r = fcmp(c, fp[i], a, b);
  } else {
    static const LLVMIntPredicate sp[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT,
                                          LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
    static const LLVMIntPredicate up[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT,
                                          LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
    r = LLVMBuildICmp(c->b, is_unsigned(dt) ? up[i] : sp[i], a, b, "");
  }
  return LLVMBuildZExt(c->b, r, c->i8, "");
}

static LLVMValueRef eval(Cg *c, NestCtx *x, const LfExpr *e);

static LLVMValueRef eval_op(Cg *c, NestCtx *x, const LfExpr *e) {
  LLVMValueRef a[3];
  for (int j = 0; j < e->nargs; j++) a[j] = eval(c, x, e->args[j]);
  DType in = e->args[e->op == OP_WHERE ? 1 : 0]->dtype;
  bool isf = dtype_is_float(in);
  LLVMValueRef r;
  switch (op_kind(e->op)) {
  case IRK_UNARY:
    if (e->op == OP_ISNAN || e->op == OP_ISINF || e->op == OP_ISFINITE) {
      if (!isf) return ci(c->i8, e->op == OP_ISFINITE);
      LLVMValueRef ax = unary_intr(c, "llvm.fabs", a[0]);
      LLVMValueRef p = e->op == OP_ISNAN   ? fcmp(c, LLVMRealUNO, a[0], a[0])
                       : e->op == OP_ISINF ? fcmp(c, LLVMRealOEQ, ax, fconst(ax, INFINITY))
                                           : fcmp(c, LLVMRealOLT, ax, fconst(ax, INFINITY));
      return LLVMBuildZExt(c->b, p, c->i8, "");
    }
    if (e->op == OP_LOGICAL_NOT)
      return LLVMBuildZExt(c->b, isf ? fcmp(c, LLVMRealOEQ, a[0], fconst(a[0], 0))
                                     : LLVMBuildICmp(c->b, LLVMIntEQ, a[0], LLVMConstInt(LLVMTypeOf(a[0]), 0, 0), ""),
                           c->i8, "");
    r = isf ? unary_f(c, e->op, e->flags, e->fattr, a[0]) : unary_i(c, e->op, in, e->fattr, a[0]);
    break;
  case IRK_BINARY:
    r = isf ? binary_f(c, e->op, a[0], a[1]) : binary_i(c, e->op, in, a[0], a[1]);
    break;
  case IRK_COMPARE: return compare(c, e->op, in, a[0], a[1]);
  case IRK_TERNARY:
    if (e->op == OP_LERP) {
      r = lerp_f(c, a[0], a[1], e->nargs == 3 ? a[2] : fconst(a[0], e->fattr[0]));
      break;
    }
    return sel(c, LLVMBuildICmp(c->b, LLVMIntNE, a[0], ci(c->i8, 0), ""), a[1], a[2]);
  default: ICE("op %s in an elementwise expression", op_name(e->op));
  }
  if (e->dtype == DT_BOOL && !isf) r = to_bool(c, r);
  return convert(c, r, in, e->dtype);
}

static LLVMValueRef eval(Cg *c, NestCtx *x, const LfExpr *e) {
  switch (e->kind) {
  case LFE_LOAD:
    return load_el(c, address(c, x, &e->acc, c->lk->bufs[e->acc.buf].dtype,
                              x->n->rank + x->n->nred),
                   c->lk->bufs[e->acc.buf].dtype);
  case LFE_CONST:
    return e->dtype == DT_F64 ? LLVMConstReal(c->f64, e->value.f) : i64c(c, e->value.i);
  case LFE_SYM: return sym_val(c, e->sym);
  case LFE_ARANGE:
    return LLVMBuildFAdd(c->b, LLVMConstReal(c->f64, e->start),
                         LLVMBuildFMul(c->b, LLVMBuildSIToFP(c->b, x->iv[e->loop], c->f64, ""),
                                       LLVMConstReal(c->f64, e->step), ""), "");
  case LFE_CAST: return convert(c, eval(c, x, e->args[0]), e->args[0]->dtype, e->dtype);
  case LFE_OP: return eval_op(c, x, e);
  case LFE_INDEX: return x->iv[e->loop];
  case LFE_ACC: return x->acc;
  }
  ICE("bad loop-form expression");
}

/* ---- nests -------------------------------------------------------------- */

static DType acc_dtype(DType in) {
  return in == DT_F64 ? DT_F64 : dtype_is_float(in) ? DT_F32 : DT_I64;
}

/* Reduction loops' bounds at the current outer index: lo[l] and
 * x->ub[l] (a loop's own red_lo/red_hi replace 0 and red[l]). */
static void red_bounds(Cg *c, NestCtx *x, LLVMValueRef *lo) {
  const LfNest *n = x->n;
  for (int j = 0; j < n->nred; j++) {
    int l = n->rank + j;
    lo[l] = n->red_lo && n->red_lo[j] ? eval(c, x, n->red_lo[j]) : i64c(c, 0);
    if (n->red_hi && n->red_hi[j]) x->ub[l] = eval(c, x, n->red_hi[j]);
  }
}

/* Float accumulation steps the loop vectorizer can widen.  SUM/MEAN
 * (opt_level >= 1): the fadd may be reassociated within a block of the
 * cascade below (vector partial sums; a nest's reduction never spans
 * threads, so results do not depend on the thread count).
 * AMAX/AMIN (opt_level >= 2, where LLVM vectorizes loops; scalar, the
 * select form is cheaper): llvm.maximum/minimum, which propagate NaN as
 * PyTorch does (a row with a NaN reduces to NaN); they order -0 < +0,
 * where the select form keeps the first of equal values (the same
 * number). */
static LLVMValueRef fsum_step(Cg *c, LLVMValueRef a, LLVMValueRef v) {
  LLVMValueRef r = LLVMBuildFAdd(c->b, a, v, "");
  if (c->opt > 0) LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc);
  return r;
}

static LLVMValueRef fextreme_step(Cg *c, Op op, LLVMValueRef a, LLVMValueRef v) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef av[2] = {a, v};
  return intrinsic(c, op == OP_AMAX ? "llvm.maximum" : "llvm.minimum", &t, 1, av, 2);
}

/* ---- accurate float sums ----------------------------------------------------
 * A float SUM/MEAN over more than SUM_BLOCK elements is a cascade, at
 * every opt level: the innermost reduction loop runs in blocks of
 * SUM_BLOCK elements, each summed from zero by its own loop (vectorized
 * with reassociation at -O2), and the block sums enter a carry chain of
 * SUM_LEVELS accumulators where level k takes 2^SUM_FAN_LOG2 sums before
 * it is added into level k + 1 and cleared.  Every addition then adds
 * values of similar magnitude: the error bound grows with
 * SUM_BLOCK + 16 * log16(n) instead of n (a sum of 50M ones is exact
 * where a running f32 sum stops at 2^24), like PyTorch's cascade sum.
 * Level SUM_LEVELS - 1 holds blocks of SUM_BLOCK * 16^6 (8.6e11)
 * elements. */
#define SUM_BLOCK 512
#define SUM_FAN_LOG2 4
#define SUM_LEVELS 8

/* Whether n's reduction loops may exceed SUM_BLOCK elements. */
static bool long_reduction(const LfNest *n) {
  int64_t total = 1, e;
  for (int j = 0; j < n->nred; j++) {
    if (!sym_is_const(n->red[j], &e)) return true;
    total *= e;
    if (total > SUM_BLOCK) return true;
  }
  return false;
}

/* Adds block sum s into the cascade (levels lv, block count cnt). */
static void cascade_push(Cg *c, LLVMTypeRef t, LLVMValueRef lv, LLVMValueRef cnt,
                         LLVMValueRef s) {
  LLVMValueRef zero = i64c(c, 0), l0 = LLVMBuildGEP2(c->b, t, lv, &zero, 1, "");
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, t, l0, ""), s, ""), l0);
  LLVMValueRef k = i64c(c, 1);
  LLVMValueRef m = LLVMBuildAdd(c->b, LLVMBuildLoad2(c->b, c->i64, cnt, ""), k, "");
  LLVMBuildStore(c->b, m, cnt);
  /* carry: while k < SUM_LEVELS and m % 16 == 0: level k += level k-1 */
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), head = block(c, "carry"),
                    body = block(c, "carry_body"), done = block(c, "carried");
  LLVMBuildBr(c->b, head);
  LLVMPositionBuilderAtEnd(c->b, head);
  LLVMValueRef kp = LLVMBuildPhi(c->b, c->i64, "k"), mp = LLVMBuildPhi(c->b, c->i64, "m");
  LLVMAddIncoming(kp, &k, &pre, 1);
  LLVMAddIncoming(mp, &m, &pre, 1);
  LLVMValueRef low = LLVMBuildAnd(c->b, mp, i64c(c, (1 << SUM_FAN_LOG2) - 1), "");
  LLVMValueRef go = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntULT, kp, i64c(c, SUM_LEVELS), ""),
                                 LLVMBuildICmp(c->b, LLVMIntEQ, low, zero, ""), "");
  LLVMBuildCondBr(c->b, go, body, done);
  LLVMPositionBuilderAtEnd(c->b, body);
  LLVMValueRef km = LLVMBuildSub(c->b, kp, k, "");
  LLVMValueRef from = LLVMBuildGEP2(c->b, t, lv, &km, 1, ""), to = LLVMBuildGEP2(c->b, t, lv, &kp, 1, "");
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, t, to, ""),
                                     LLVMBuildLoad2(c->b, t, from, ""), ""), to);
  LLVMBuildStore(c->b, LLVMConstNull(t), from);
  LLVMValueRef kn = LLVMBuildAdd(c->b, kp, k, ""),
               mn = LLVMBuildLShr(c->b, mp, i64c(c, SUM_FAN_LOG2), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
  LLVMAddIncoming(kp, &kn, &latch, 1);
  LLVMAddIncoming(mp, &mn, &latch, 1);
  LLVMBuildBr(c->b, head);
  LLVMPositionBuilderAtEnd(c->b, done);
}

/* The cascade sum of n->value over the reduction loops (bounds lo and
 * x->ub), in the accumulator type t. */
static LLVMValueRef cascade_sum(Cg *c, NestCtx *x, LLVMTypeRef t, DType in, DType ad,
                                LLVMValueRef *lo) {
  const LfNest *n = x->n;
  int last = n->rank + n->nred - 1;
  LLVMValueRef lv = entry_alloca(c, t, i32c(c, SUM_LEVELS)), cnt = entry_alloca(c, c->i64, NULL),
               bs = entry_alloca(c, t, NULL);
  for (int k = 0; k < SUM_LEVELS; k++) {
    LLVMValueRef o = i64c(c, k);
    LLVMBuildStore(c->b, LLVMConstNull(t), LLVMBuildGEP2(c->b, t, lv, &o, 1, ""));
  }
  LLVMBuildStore(c->b, i64c(c, 0), cnt);
  for (int l = n->rank; l < last; l++) x->iv[l] = open_loop_from(c, lo[l], x->ub[l]);
  LLVMValueRef len = smin(c, LLVMBuildSub(c->b, x->ub[last], lo[last], ""), i64c(c, 0), true);
  LLVMValueRef nb = LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, len, i64c(c, SUM_BLOCK - 1), ""),
                                  i64c(c, SUM_BLOCK), "");
  LLVMValueRef b = open_loop(c, nb);
  LLVMValueRef b0 = LLVMBuildAdd(c->b, lo[last], LLVMBuildMul(c->b, b, i64c(c, SUM_BLOCK), ""), "");
  LLVMValueRef b1 = smin(c, LLVMBuildAdd(c->b, b0, i64c(c, SUM_BLOCK), ""), x->ub[last], false);
  LLVMBuildStore(c->b, LLVMConstNull(t), bs);
  x->iv[last] = open_loop_from(c, b0, b1);
  LLVMValueRef v = convert(c, eval(c, x, n->value), in, ad);
  LLVMBuildStore(c->b, fsum_step(c, LLVMBuildLoad2(c->b, t, bs, ""), v), bs);
  close_loop(c);
  cascade_push(c, t, lv, cnt, LLVMBuildLoad2(c->b, t, bs, ""));
  close_loop(c);
  for (int l = n->rank; l < last; l++) close_loop(c);
  LLVMValueRef o = i64c(c, 0), r = LLVMBuildLoad2(c->b, t, LLVMBuildGEP2(c->b, t, lv, &o, 1, ""), "");
  for (int k = 1; k < SUM_LEVELS; k++) { /* smallest first */
    o = i64c(c, k);
    r = LLVMBuildFAdd(c->b, r, LLVMBuildLoad2(c->b, t, LLVMBuildGEP2(c->b, t, lv, &o, 1, ""), ""), "");
  }
  return r;
}

/* The sequential reduction: integer sums, products, extremes and their
 * positions, and float sums of at most SUM_BLOCK elements. */
static LLVMValueRef plain_reduce(Cg *c, NestCtx *x, LLVMTypeRef t, DType in, DType ad,
                                 LLVMValueRef *lo) {
  const LfNest *n = x->n;
  Op op = n->reduce;
  bool isf = dtype_is_float(ad), mx = op == OP_AMAX || op == OP_ARGMAX;
  bool ext = mx || op == OP_AMIN || op == OP_ARGMIN;
  LLVMValueRef init = op == OP_PROD ? (isf ? LLVMConstReal(t, 1) : i64c(c, 1))
                      : !ext ? LLVMConstNull(t)
                      : isf ? LLVMConstReal(t, mx ? -INFINITY : INFINITY)
                      : i64c(c, mx ? INT64_MIN : INT64_MAX);
  LLVMValueRef acc = entry_alloca(c, t, NULL), arg = entry_alloca(c, c->i64, NULL),
               pos = entry_alloca(c, c->i64, NULL);
  LLVMBuildStore(c->b, init, acc);
  LLVMBuildStore(c->b, i64c(c, 0), arg);
  LLVMBuildStore(c->b, i64c(c, 0), pos);
  for (int l = n->rank; l < n->rank + n->nred; l++) x->iv[l] = open_loop_from(c, lo[l], x->ub[l]);
  LLVMValueRef v = convert(c, eval(c, x, n->value), in, ad);
  LLVMValueRef a = LLVMBuildLoad2(c->b, t, acc, ""), p = LLVMBuildLoad2(c->b, c->i64, pos, "");
  LLVMValueRef r;
  if (op == OP_SUM || op == OP_MEAN) r = isf ? fsum_step(c, a, v) : LLVMBuildAdd(c->b, a, v, "");
  else if (op == OP_PROD) r = isf ? LLVMBuildFMul(c->b, a, v, "") : LLVMBuildMul(c->b, a, v, "");
  else if (isf && c->opt >= 2 && (op == OP_AMAX || op == OP_AMIN)) r = fextreme_step(c, op, a, v);
  else {
    LLVMValueRef take;
    if (isf) {
      LLVMValueRef better = LLVMBuildOr(c->b, fcmp(c, LLVMRealUNO, v, v),
                                        fcmp(c, mx ? LLVMRealOGT : LLVMRealOLT, v, a), "");
      take = LLVMBuildAnd(c->b, fcmp(c, LLVMRealORD, a, a), better, "");
    } else {
      take = LLVMBuildICmp(c->b, mx ? LLVMIntSGT : LLVMIntSLT, v, a, "");
    }
    r = sel(c, take, v, a);
    LLVMBuildStore(c->b, sel(c, take, p, LLVMBuildLoad2(c->b, c->i64, arg, "")), arg);
  }
  LLVMBuildStore(c->b, r, acc);
  LLVMBuildStore(c->b, LLVMBuildAdd(c->b, p, i64c(c, 1), ""), pos);
  for (int l = 0; l < n->nred; l++) close_loop(c);
  if (op == OP_ARGMAX || op == OP_ARGMIN) return LLVMBuildLoad2(c->b, c->i64, arg, "");
  return LLVMBuildLoad2(c->b, t, acc, "");
}

/* The reduction's value for the current outer index. */
static LLVMValueRef emit_reduce(Cg *c, NestCtx *x) {
  const LfNest *n = x->n;
  Op op = n->reduce;
  DType in = n->value->dtype, ad = acc_dtype(in);
  LLVMTypeRef t = compute_type(c, ad);
  LLVMValueRef total = i64c(c, 1), lo[MAXL];
  red_bounds(c, x, lo);
  for (int l = n->rank; l < n->rank + n->nred; l++)
    total = LLVMBuildMul(c->b, total, smin(c, LLVMBuildSub(c->b, x->ub[l], lo[l], ""),
                                           i64c(c, 0), true), "");
  bool cascade = dtype_is_float(ad) && (op == OP_SUM || op == OP_MEAN) && long_reduction(n);
  LLVMValueRef r = cascade ? cascade_sum(c, x, t, in, ad, lo) : plain_reduce(c, x, t, in, ad, lo);
  if (op == OP_ARGMAX || op == OP_ARGMIN) return convert(c, r, DT_I64, n->dtype);
  if (op == OP_MEAN)
    r = LLVMBuildFDiv(c->b, r, LLVMBuildSIToFP(c->b, total, t, ""), "");
  if (n->post) {
    x->acc = r;
    return convert(c, eval(c, x, n->post), n->post->dtype, n->dtype);
  }
  return convert(c, r, ad, n->dtype);
}

/* ---- matmul and conv2d (gemm.c) ------------------------------------------ */

/* Run-time description of an access over its own dims (shape from IR). */
static GemmTensor gemm_tensor(Cg *c, const LfAccess *a, int rank, const Sym **shape, DType dt) {
  GemmTensor t = {.base = a->buf >= 0 ? c->base[a->buf] : LLVMConstNull(c->ptr),
                  .offset = sym_val(c, a->offset), .rank = rank, .dtype = dt};
  for (int d = 0; d < rank; d++) {
    t.shape[d] = sym_val(c, shape[d]);
    t.stride[d] = a->rt_strides
                      ? dl_stride(c, c->args[c->k->nparams + c->lk->bufs[a->buf].index], rank, d)
                      : sym_val(c, a->stride[d]);
  }
  return t;
}

/* The channels-last orientation of a conv nest's GEMM (gemm.h). */
static bool gemm_cl(const LfNest *n) {
  return n->reduce == OP_CONV2D && !n->cstore.rt_strides &&
         sym_is(n->cstore.stride[n->rank - 3], 1);
}

static void gemm_epilogue(Cg *c, const LfNest *n, GemmEmit *e);
static const GemmPrologue *gemm_prologue(Cg *c, const LfNest *n, int j);

/* The run-time operands (t), result and conv attributes of gemm nest n
 * at the builder's position. */
static void gemm_operands(Cg *c, const LfNest *n, GemmTensor *t, GemmTensor *out,
                          LLVMValueRef *attr) {
  const IrValue *v = ir_val(c->k, n->gemm);
  *out = gemm_tensor(c, &n->cstore, n->rank, n->shape, n->cdtype);
  for (int j = 0; j < n->nopnd; j++) {
    const IrValue *a = ir_val(c->k, v->args[j]);
    t[j] = gemm_tensor(c, &n->opnd[j], a->rank, a->shape, a->dtype); /* a buffer's dtype is its value's */
  }
  if (n->reduce == OP_CONV2D)
    for (int i = 0; i < 7; i++) attr[i] = sym_val(c, v->attrs[i]);
}

/* At the kernel's entry, with the scratch buffers: each GEMM's packing
 * memory (gemm.h), so that once the nests run nothing can fail and a
 * failing kernel has written no output (spec §7.2). */
static void setup_gemm_pools(Cg *c) {
  for (int i = 0; i < c->lk->nnests; i++) {
    const LfNest *n = &c->lk->nests[i];
    if (!c->gpool[i]) continue;
    GemmTensor t[3], out;
    LLVMValueRef attr[7], nt, bytes;
    gemm_operands(c, n, t, &out, attr);
    GemmEmit e = {.ctx = c->ctx, .mod = c->mod, .b = c->b, .fn = c->fn, .vec_bits = c->vec_bits};
    if (n->reduce == OP_MATMUL) bytes = cg_matmul_pool_bytes(&e, &t[0], &t[1], &out, &nt);
    else bytes = cg_conv2d_pool_bytes(&e, &t[0], &t[1], &out, attr, gemm_cl(n), &nt);
    LLVMTypeRef ps[2] = {c->i64, c->i64};
    LLVMValueRef a[2] = {bytes, i64c(c, 64)};
    LLVMValueRef p = call(c, fdecl(c, "tdsl_alloc", c->ptr, ps, 2, 0), a, 2);
    LLVMBuildStore(c->b, p, c->gpool[i]);
    check_rc(c, LLVMBuildSelect(c->b, LLVMBuildIsNull(c->b, p, ""), i32c(c, E_NOMEM), i32c(c, 0), ""));
    LLVMBuildStore(c->b, nt, p);
  }
}

static void emit_gemm_nest(Cg *c, const LfNest *n) {
  const IrValue *v = ir_val(c->k, n->gemm);
  GemmTensor t[3], out;
  LLVMValueRef attr[7], rc;
  gemm_operands(c, n, t, &out, attr);
  GemmEmit e = {.ctx = c->ctx, .mod = c->mod, .b = c->b, .fn = c->fn, .vec_bits = c->vec_bits};
  e.pool = LLVMBuildLoad2(c->b, c->ptr, c->gpool[n - c->lk->nests], "");
  if (n->post) gemm_epilogue(c, n, &e);
  for (int j = 0; j < 2; j++) e.pro[j] = n->pro[j] ? gemm_prologue(c, n, j) : NULL;
  if (n->reduce == OP_MATMUL)
    rc = cg_emit_matmul(&e, &t[0], &t[1], &out);
  else
    rc = cg_emit_conv2d(&e, &t[0], &t[1], (v->flags & IRF_BIAS) ? &t[2] : NULL, &out, attr,
                        gemm_cl(n));
  check_rc(c, rc);
}

/* ---- parallel nests (opt_level >= 1) --------------------------------------
 * A nest with outer loops becomes two private functions:
 *   K.nestI(i64 begin, i64 end, ptr noalias buf..., i64 sym..., i64 rtstride...)
 *     runs flattened outer iterations [begin, end): the first P outer loops
 *     (in memory order) form the parallel index, decomposed once per chunk
 *     and then stepped like an odometer; the rest run as plain loops, so
 *     the innermost loop is the nest's unit-stride store loop, free of
 *     div/mod.  Its buffer pointers are noalias: a nest writes only its
 *     store buffer, which no read of the nest touches (scratch is fresh,
 *     outputs were checked against inputs and each other at entry).  It is
 *     always-inlined into
 *   K.nestI.body(ptr ctx, i64 begin, i64 end), the tdsl_parallel_for body,
 *     which unpacks the context (buffer bases, symbol values, output
 *     strides) the kernel filled.
 * The grain keeps chunks at >= PAR_MIN_ELEMS elements of work so small
 * nests run serially; chunks split outer (output) iterations only, never a
 * reduction, so results do not depend on the thread count. */
#define PAR_MIN_ELEMS 32768

static void add_fn_attr(Cg *c, LLVMValueRef fn, unsigned idx, const char *name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(c->ctx, kind, 0));
}

/* The loop variable at depth i (outermost first). */
static int nest_loop_at(const LfNest *n, int i) { return n->order ? n->order[i] : i; }

/* Loops after collapsing: adjacent loops (outer a, inner b) whose every
 * access has stride[a] == stride[b] * max(extent[b], 1) run as one loop
 * of extent[a] * extent[b] on variable b (a's variable is 0): the same
 * addresses, one long unit-stride inner loop instead of short rows. */
typedef struct VLoops {
  int n, nouter;              /* loops; the first nouter are outer loops */
  int var[MAXL];              /* the loop variable that carries the index
                                 (VL_BLOCK: the tile loop's block index) */
  LLVMValueRef ub[MAXL];
  int tile_var;               /* >= 0: this outer variable runs innermost, */
  int tile;                   /*   over blocks of `tile` (plan_tile) */
  bool blocked;               /*   false: the whole extent in one block */
  LLVMValueRef tile_ub;
} VLoops;

#define VL_BLOCK (-2)
#define TILE 32

static const Sym *loop_extent(const LfNest *n, int l) {
  return l < n->rank ? n->shape[l] : n->red[l - n->rank];
}

static bool acc_collapses(Cg *c, const LfNest *n, const LfAccess *a, int oa, int ib) {
  if (a->lin_rank || a->rt_strides) return false;
  const Sym *so = a->stride[oa], *si = a->stride[ib];
  if (sym_is(so, 0) && sym_is(si, 0)) return true;
  /* Parameters carry strides like W (their semantic geometry), dense
   * stores max(W, 1): both are right, since an extent of 0 leaves the
   * collapsed loop (extent[a] * 0) without iterations. */
  SymTab *st = c->m->st;
  const Sym *eb = loop_extent(n, ib);
  return so == sym_mul(st, si, sym_max(st, eb, sym_const(st, 1))) || so == sym_mul(st, si, eb);
}

static bool expr_collapses(Cg *c, const LfNest *n, const LfExpr *e, int oa, int ib) {
  if (e->kind == LFE_ARANGE || e->kind == LFE_INDEX) return e->loop != oa && e->loop != ib;
  if (e->kind == LFE_LOAD) return acc_collapses(c, n, &e->acc, oa, ib);
  for (int j = 0; j < e->nargs; j++)
    if (!expr_collapses(c, n, e->args[j], oa, ib)) return false;
  return true;
}

/* Whether a nest's reduction-loop bounds and post expression (loops.h)
 * allow collapsing loops oa, ib: never a loop with its own bounds. */
static bool bounds_collapse(Cg *c, const LfNest *n, int oa, int ib) {
  for (int j = 0; j < n->nred && n->red_lo; j++) {
    if (!n->red_lo[j]) continue;
    if (n->rank + j == oa || n->rank + j == ib || !expr_collapses(c, n, n->red_lo[j], oa, ib) ||
        !expr_collapses(c, n, n->red_hi[j], oa, ib))
      return false;
  }
  return !n->post || expr_collapses(c, n, n->post, oa, ib);
}

static bool const_stride(const Sym *s, int64_t *v) { return sym_is_const(s, v); }

/* Whether some load of e reads along loop j with stride 1 but along the
 * innermost loop i with another non-zero stride (a transposing read). */
static bool transposing_load(const LfExpr *e, int j, int i) {
  if (e->kind == LFE_LOAD) {
    int64_t sj, si;
    if (e->acc.lin_rank || e->acc.rt_strides) return false;
    return const_stride(e->acc.stride[j], &sj) && sj == 1 &&
           !(const_stride(e->acc.stride[i], &si) && (si == 0 || si == 1));
  }
  for (int a = 0; a < e->nargs; a++)
    if (transposing_load(e->args[a], j, i)) return true;
  return false;
}

/* Transposes (a permute copy, NHWC -> NCHW preprocessing): the innermost
 * loop i stores with unit stride but a load is unit-stride along another
 * outer loop j.  Loop j then moves innermost, over tiles of TILE (a
 * constant extent <= TILE: all of it, fully unrolled by LLVM), so that
 * the reads and the writes of a tile stay in cache and a small j turns
 * the strided reads into full interleave groups the vectorizer handles. */
static void plan_tile(Cg *c, const LfNest *n, VLoops *v) {
  v->tile_var = -1;
  if (n->reduce != OP_COUNT || v->nouter < 2 || v->n != v->nouter || n->store.rt_strides ||
      n->store.lin_rank)
    return;
  int i = v->var[v->nouter - 1];
  int64_t ss;
  for (int k = 0; k < v->nouter - 1; k++) {
    int j = v->var[k];
    if (const_stride(n->store.stride[j], &ss) && ss == 1) continue;
    if (!transposing_load(n->value, j, i)) continue;
    int64_t ext;
    v->tile_var = j;
    v->tile_ub = v->ub[k];
    v->blocked = !(LLVMIsConstant(v->ub[k]) && (ext = LLVMConstIntGetSExtValue(v->ub[k])) <= TILE);
    v->tile = TILE;
    if (v->blocked) {
      v->var[k] = VL_BLOCK;
      v->ub[k] = LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, v->ub[k], i64c(c, TILE - 1), ""),
                               i64c(c, TILE), "");
    } else {
      for (int m = k; m + 1 < v->n; m++) v->var[m] = v->var[m + 1], v->ub[m] = v->ub[m + 1];
      v->n--, v->nouter--;
    }
    return;
  }
}

/* Collapses within the outer loops and within the reduction loops (the
 * store does not depend on the latter).  ARGMAX/ARGMIN count positions
 * linearly, so collapsing their loops keeps the same order. */
static void plan_vloops(Cg *c, const LfNest *n, NestCtx *x, VLoops *v) {
  v->n = 0;
  for (int part = 0; part < 2; part++) {
    int lo = part ? n->rank : 0, hi = part ? n->rank + n->nred : n->rank, first = v->n;
    for (int i = lo; i < hi; i++) {
      int l = part ? i : nest_loop_at(n, i);
      if (v->n > first) {
        int prev = v->var[v->n - 1];
        bool ok = expr_collapses(c, n, n->value, prev, l) &&
                  (part || acc_collapses(c, n, &n->store, prev, l)) &&
                  bounds_collapse(c, n, prev, l);
        if (ok) {
          x->iv[prev] = i64c(c, 0);
          v->var[v->n - 1] = l;
          v->ub[v->n - 1] = LLVMBuildMul(c->b, v->ub[v->n - 1], x->ub[l], "");
          if (part) { /* emit_reduce runs prev once and l over both */
            x->ub[l] = v->ub[v->n - 1];
            x->ub[prev] = i64c(c, 1);
          }
          continue;
        }
      }
      v->var[v->n] = l;
      v->ub[v->n++] = x->ub[l];
    }
    if (!part) v->nouter = v->n;
  }
  plan_tile(c, n, v);
}

/* Steps the odometer idx over virtual loops 0..p-1 by one. */
static void odometer_step(Cg *c, const VLoops *vl, LLVMValueRef *idx, int p) {
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

/* ---- transposing copies in 8 x 8 register blocks ----------------------------
 * A tiled nest (plan_tile) whose value is a plain load of its own dtype
 * is a transpose: along the innermost loop i the store is unit-stride and
 * the load strided; along the tile loop j the load is unit-stride.  It
 * runs as 8 x 8 blocks: eight vector loads along j (rows i0..i0+7),
 * a transpose in registers (three rounds of shuffles), eight vector
 * stores along i; the edges of i and of the tile go element by element. */
#define TB 8

/* Whether n, planned as vl with p parallel loops, takes the block path. */
static bool transpose_blocks(const LfNest *n, const VLoops *vl, int p) {
  if (vl->tile_var < 0 || p >= vl->nouter || vl->var[vl->nouter - 1] < 0) return false;
  const LfExpr *e = n->value;
  if (n->reduce != OP_COUNT || e->kind != LFE_LOAD || e->dtype != n->dtype || e->acc.lin_rank ||
      e->acc.rt_strides || n->store.rt_strides || n->store.lin_rank)
    return false;
  int i = vl->var[vl->nouter - 1], j = vl->tile_var;
  int64_t ext;
  if (!vl->blocked && (!LLVMIsConstant(vl->tile_ub) ||
                       (ext = LLVMConstIntGetSExtValue(vl->tile_ub)) < TB))
    return false;
  return sym_is(n->store.stride[i], 1) && sym_is(e->acc.stride[j], 1);
}

static LLVMValueRef shuffle8(Cg *c, LLVMValueRef a, LLVMValueRef b, const int *m) {
  LLVMValueRef mask[8];
  for (int k = 0; k < 8; k++) mask[k] = i32c(c, m[k]);
  return LLVMBuildShuffleVector(c->b, a, b, LLVMConstVector(mask, 8), "");
}

/* r[0..7] = the columns of the 8 x 8 block whose rows are r[0..7]. */
static void transpose8(Cg *c, LLVMValueRef *r) {
  static const int lo[8] = {0, 8, 1, 9, 4, 12, 5, 13}, hi[8] = {2, 10, 3, 11, 6, 14, 7, 15};
  static const int q0[8] = {0, 1, 8, 9, 4, 5, 12, 13}, q1[8] = {2, 3, 10, 11, 6, 7, 14, 15};
  static const int h0[8] = {0, 1, 2, 3, 8, 9, 10, 11}, h1[8] = {4, 5, 6, 7, 12, 13, 14, 15};
  LLVMValueRef t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = shuffle8(c, r[k], r[k + 1], lo);
    t[k + 1] = shuffle8(c, r[k], r[k + 1], hi);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = shuffle8(c, t[k], t[k + 2], q0);
    u[k + 1] = shuffle8(c, t[k], t[k + 2], q1);
    u[k + 2] = shuffle8(c, t[k + 1], t[k + 3], q0);
    u[k + 3] = shuffle8(c, t[k + 1], t[k + 3], q1);
  }
  for (int k = 0; k < 4; k++) {
    r[k] = shuffle8(c, u[k], u[k + 4], h0);
    r[k + 4] = shuffle8(c, u[k], u[k + 4], h1);
  }
}

/* One element at the current loop variables (the scalar edges). */
static void copy_element(Cg *c, NestCtx *x, const LfNest *n) {
  LLVMValueRef v = eval(c, x, n->value);
  store_el(c, v, address(c, x, &n->store, n->dtype, n->rank), n->dtype);
}

/* The innermost loop i over [0, iub) and the tile loop j over [t0, t1),
 * in blocks (transpose_blocks), the outer loop variables already set. */
static void emit_transpose_blocks(Cg *c, const LfNest *n, NestCtx *x, int i, int j,
                                  LLVMValueRef iub, LLVMValueRef t0, LLVMValueRef t1) {
  LLVMTypeRef et = storage_type(c, n->dtype), vt = LLVMVectorType(et, TB);
  unsigned align = (unsigned)dtype_size(n->dtype);
  x->iv[i] = x->iv[j] = i64c(c, 0);
  LLVMValueRef src = address(c, x, &n->value->acc, n->dtype, n->rank);
  LLVMValueRef dst = address(c, x, &n->store, n->dtype, n->rank);
  LLVMValueRef si = sym_val(c, n->value->acc.stride[i]), sj = sym_val(c, n->store.stride[j]);
  LLVMValueRef k8 = i64c(c, TB), ifull = LLVMBuildMul(c->b, LLVMBuildSDiv(c->b, iub, k8, ""), k8, "");
  LLVMValueRef jn = LLVMBuildSub(c->b, t1, t0, "");
  LLVMValueRef jfull = LLVMBuildAdd(c->b, t0, LLVMBuildMul(c->b, LLVMBuildSDiv(c->b, jn, k8, ""), k8, ""), "");
  LLVMValueRef i0 = LLVMBuildMul(c->b, open_loop(c, LLVMBuildSDiv(c->b, iub, k8, "")), k8, "");
  LLVMValueRef j0 = LLVMBuildAdd(c->b, t0, LLVMBuildMul(c->b, open_loop(c, LLVMBuildSDiv(c->b, jn, k8, "")), k8, ""), "");
  LLVMValueRef r[TB];
  for (int k = 0; k < TB; k++) {
    LLVMValueRef off = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, i0, i64c(c, k), ""), si, ""), j0, "");
    r[k] = LLVMBuildLoad2(c->b, vt, LLVMBuildGEP2(c->b, et, src, &off, 1, ""), "");
    LLVMSetAlignment(r[k], align);
  }
  transpose8(c, r);
  for (int k = 0; k < TB; k++) {
    LLVMValueRef off = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, j0, i64c(c, k), ""), sj, ""), i0, "");
    LLVMSetAlignment(LLVMBuildStore(c->b, r[k], LLVMBuildGEP2(c->b, et, dst, &off, 1, "")), align);
  }
  close_loop(c);
  /* the tile's last columns for these eight rows */
  x->iv[j] = open_loop_from(c, jfull, t1);
  x->iv[i] = open_loop_from(c, i0, LLVMBuildAdd(c->b, i0, k8, ""));
  copy_element(c, x, n);
  close_loop(c);
  close_loop(c);
  close_loop(c);
  /* the last rows */
  x->iv[i] = open_loop_from(c, ifull, iub);
  x->iv[j] = open_loop_from(c, t0, t1);
  copy_element(c, x, n);
  close_loop(c);
  close_loop(c);
}

/* Emits the loops and body of n for parallel iterations [lo, hi) of the
 * first p virtual loops. */
static void emit_nest_range(Cg *c, const LfNest *n, NestCtx *x, const VLoops *vl,
                            LLVMValueRef lo, LLVMValueRef hi, int p) {
  LLVMValueRef idx[MAXL], blk = NULL;
  if (p == 1) {
    LLVMValueRef iv = open_loop_from(c, lo, hi);
    if (vl->var[0] == VL_BLOCK) blk = iv;
    else x->iv[vl->var[0]] = iv;
  } else {
    LLVMValueRef rest = lo;
    for (int j = p - 1; j >= 0; j--) {
      idx[j] = entry_alloca(c, c->i64, NULL);
      LLVMValueRef ub = vl->ub[j];
      LLVMBuildStore(c->b, j ? LLVMBuildURem(c->b, rest, ub, "") : rest, idx[j]);
      if (j) rest = LLVMBuildUDiv(c->b, rest, ub, "");
    }
    open_loop_from(c, lo, hi);
    for (int j = 0; j < p; j++) {
      LLVMValueRef iv = LLVMBuildLoad2(c->b, c->i64, idx[j], "");
      if (vl->var[j] == VL_BLOCK) blk = iv;
      else x->iv[vl->var[j]] = iv;
    }
  }
  bool blocks = transpose_blocks(n, vl, p);
  int nopen = blocks ? vl->nouter - 1 : vl->nouter; /* blocks: i is theirs */
  for (int i = p; i < nopen; i++) {
    LLVMValueRef iv = open_loop(c, vl->ub[i]);
    if (vl->var[i] == VL_BLOCK) blk = iv;
    else x->iv[vl->var[i]] = iv;
  }
  LLVMValueRef t0 = i64c(c, 0), t1 = vl->tile_ub;
  if (vl->tile_var >= 0 && vl->blocked) {
    t0 = LLVMBuildMul(c->b, blk, i64c(c, vl->tile), "");
    t1 = smin(c, LLVMBuildAdd(c->b, t0, i64c(c, vl->tile), ""), vl->tile_ub, false);
  }
  if (blocks) {
    emit_transpose_blocks(c, n, x, vl->var[vl->nouter - 1], vl->tile_var,
                          vl->ub[vl->nouter - 1], t0, t1);
  } else {
    if (vl->tile_var >= 0) x->iv[vl->tile_var] = open_loop_from(c, t0, t1);
    LLVMValueRef v = n->reduce == OP_COUNT ? eval(c, x, n->value) : emit_reduce(c, x);
    store_el(c, v, address(c, x, &n->store, n->dtype, n->rank), n->dtype);
    if (vl->tile_var >= 0) close_loop(c);
  }
  for (int i = p; i < nopen; i++) close_loop(c);
  if (p > 1) odometer_step(c, vl, idx, p);
  close_loop(c);
}

typedef struct NestFn {
  LLVMValueRef impl, body;
  LLVMTypeRef ctxt; /* { [nb x ptr], [nv x i64] } */
  int nb, nv;
} NestFn;

/* The kernel's per-function state, swapped while a nest function is
 * emitted. */
typedef struct SavedFn {
  LLVMValueRef fn, *base, *env;
  LLVMBasicBlockRef entry, pos, start;
} SavedFn;

/* Creates K.nestI(i64 begin, i64 end, ptr noalias buf..., i64 value...)
 * with f->nv i64 values after the buffers (the symbols first), and
 * positions the builder inside it with the buffers and symbols bound. */
static void open_nest_fn(Cg *c, NestFn *f, SavedFn *s) {
  int np = 2 + f->nb + f->nv;
  LLVMTypeRef *ps = arena_alloc(c->m->arena, sizeof *ps * (size_t)np);
  ps[0] = ps[1] = c->i64;
  for (int i = 0; i < f->nb; i++) ps[2 + i] = c->ptr;
  for (int i = 0; i < f->nv; i++) ps[2 + f->nb + i] = c->i64;
  char name[600];
  snprintf(name, sizeof name, "%s.nest%d", c->k->name, c->nfns++);
  f->impl = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->vd, ps, (unsigned)np, 0));
  LLVMSetLinkage(f->impl, LLVMPrivateLinkage);
  add_fn_attr(c, f->impl, LLVMAttributeFunctionIndex, "alwaysinline");
  add_fn_attr(c, f->impl, LLVMAttributeFunctionIndex, "nounwind");
  for (int i = 0; i < f->nb; i++) add_fn_attr(c, f->impl, (unsigned)(3 + i), "noalias");
  *s = (SavedFn){c->fn, c->base, c->env, c->entry, LLVMGetInsertBlock(c->b), NULL};
  c->fn = f->impl;
  c->entry = block(c, "entry");
  s->start = block(c, "start");
  LLVMPositionBuilderAtEnd(c->b, s->start);
  c->base = arena_alloc(c->m->arena, sizeof *c->base * (size_t)(f->nb + 1));
  c->env = arena_alloc(c->m->arena, sizeof *c->env * (size_t)(c->k->nsyms + 1));
  for (int i = 0; i < f->nb; i++) c->base[i] = LLVMGetParam(f->impl, (unsigned)(2 + i));
  for (int i = 0; i < c->k->nsyms; i++) c->env[i] = LLVMGetParam(f->impl, (unsigned)(2 + f->nb + i));
}

/* Ends K.nestI, builds K.nestI.body(ptr ctx, i64 begin, i64 end) (the
 * tdsl_parallel_for body unpacking the context into K.nestI's
 * arguments) and restores the kernel's state. */
static void close_nest_fn(Cg *c, NestFn *f, const SavedFn *s) {
  LLVMBuildRetVoid(c->b);
  LLVMPositionBuilderAtEnd(c->b, c->entry);
  LLVMBuildBr(c->b, s->start);
  int np = 2 + f->nb + f->nv;
  LLVMTypeRef fs[2] = {LLVMArrayType2(c->ptr, (uint64_t)f->nb), LLVMArrayType2(c->i64, (uint64_t)f->nv)};
  f->ctxt = LLVMStructTypeInContext(c->ctx, fs, 2, 0);
  LLVMTypeRef bps[3] = {c->ptr, c->i64, c->i64};
  char name[600];
  snprintf(name, sizeof name, "%s.nest%d.body", c->k->name, c->nfns - 1);
  f->body = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->vd, bps, 3, 0));
  LLVMSetLinkage(f->body, LLVMPrivateLinkage);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, f->body, "entry"));
  LLVMValueRef *a = arena_alloc(c->m->arena, sizeof *a * (size_t)np), ctx = LLVMGetParam(f->body, 0);
  a[0] = LLVMGetParam(f->body, 1);
  a[1] = LLVMGetParam(f->body, 2);
  for (int i = 0; i < f->nb + f->nv; i++) {
    bool isb = i < f->nb;
    LLVMValueRef g[3] = {i32c(c, 0), i32c(c, isb ? 0 : 1), i64c(c, isb ? i : i - f->nb)};
    LLVMValueRef q = LLVMBuildGEP2(c->b, f->ctxt, ctx, g, 3, "");
    a[2 + i] = LLVMBuildLoad2(c->b, isb ? c->ptr : c->i64, q, "");
  }
  LLVMBuildCall2(c->b, LLVMGlobalGetValueType(f->impl), f->impl, a, (unsigned)np, "");
  LLVMBuildRetVoid(c->b);
  c->fn = s->fn, c->base = s->base, c->env = s->env, c->entry = s->entry;
  LLVMPositionBuilderAtEnd(c->b, s->pos);
}

/* Builds K.nestI (the loops) and K.nestI.body (the unpacking wrapper);
 * the values after the symbols are the output strides. */
static NestFn nest_functions(Cg *c, const LfNest *n, int nvo) {
  NestFn f = {.nb = c->lk->nbufs, .nv = c->k->nsyms + n->rank};
  SavedFn s;
  open_nest_fn(c, &f, &s);
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) {
    x.ub[l] = sym_val(c, n->shape[l]);
    x.rt_stride[l] = LLVMGetParam(f.impl, (unsigned)(2 + f.nb + c->k->nsyms + l));
  }
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = sym_val(c, n->red[l]);
  VLoops vl;
  plan_vloops(c, n, &x, &vl);
  if (vl.nouter != nvo) ICE("nest loops collapsed differently");
  emit_nest_range(c, n, &x, &vl, LLVMGetParam(f.impl, 0), LLVMGetParam(f.impl, 1),
                  nvo >= 2 ? nvo - 1 : 1);
  close_nest_fn(c, &f, &s);
  return f;
}

/* In the kernel: the context { [nb x ptr] buffer bases, [nsyms + rank x
 * i64] symbol values then n's output strides (0 for static ones) } of a
 * nest function of n. */
static LLVMValueRef fill_nest_ctx(Cg *c, const LfNest *n, LLVMTypeRef ctxt, int nb) {
  LLVMValueRef ctx = entry_alloca(c, ctxt, NULL);
  for (int i = 0; i < nb + c->k->nsyms + n->rank; i++) {
    bool isb = i < nb;
    int j = isb ? i : i - nb;
    LLVMValueRef v;
    if (isb) v = c->base[i] ? c->base[i] : LLVMConstNull(c->ptr);
    else if (j < c->k->nsyms) v = c->env[j];
    else if (n->store.rt_strides)
      v = dl_stride(c, c->args[c->k->nparams + c->lk->bufs[n->store.buf].index], n->rank,
                    j - c->k->nsyms);
    else v = i64c(c, 0);
    LLVMValueRef g[3] = {i32c(c, 0), i32c(c, isb ? 0 : 1), i64c(c, j)};
    LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, ctxt, ctx, g, 3, ""));
  }
  return ctx;
}

/* Fills the context in the kernel and calls tdsl_parallel_for. */
static void emit_nest_parallel(Cg *c, const LfNest *n) {
  NestCtx x = {.n = n};
  VLoops vl;
  for (int l = 0; l < n->rank; l++) x.ub[l] = sym_val(c, n->shape[l]);
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = sym_val(c, n->red[l]);
  plan_vloops(c, n, &x, &vl);
  int p = vl.nouter >= 2 ? vl.nouter - 1 : 1;
  NestFn f = nest_functions(c, n, vl.nouter);
  LLVMValueRef ctx = fill_nest_ctx(c, n, f.ctxt, f.nb);
  LLVMValueRef total = i64c(c, 1), inner = i64c(c, 1);
  for (int i = 0; i < vl.n; i++) {
    if (i < p) total = LLVMBuildMul(c->b, total, vl.ub[i], "");
    else inner = LLVMBuildMul(c->b, inner, vl.ub[i], "");
  }
  if (vl.tile_var >= 0) inner = LLVMBuildMul(c->b, inner, vl.blocked ? i64c(c, vl.tile) : vl.tile_ub, "");
  inner = smin(c, inner, i64c(c, 1), true);
  LLVMValueRef grain = smin(c, LLVMBuildSDiv(c->b, i64c(c, PAR_MIN_ELEMS), inner, ""),
                            i64c(c, 1), true);
  LLVMTypeRef ps[4] = {c->i64, c->i64, c->ptr, c->ptr};
  LLVMValueRef a[4] = {total, grain, f.body, ctx};
  call(c, fdecl(c, "tdsl_parallel_for", c->vd, ps, 4, 0), a, 4);
}

/* ---- row groups (opt_level >= 1; loops.h LfNest.group) -------------------
 * A group (a normalization's statistics nests and its final nest) runs as
 * one parallel loop over the flattened iterations of its `shared` outer
 * loops: for each shared index (a row), every nest's remaining outer
 * loops and reduction in turn, so the later nests find the row in cache.
 * Two private functions, as for single nests:
 *   K.nestI(i64 begin, i64 end, ptr noalias buf..., i64 sym...,
 *           i64 rtstride... (each nest's rank of them, in order))
 *     decomposes begin once and steps the shared index like an odometer;
 *     noalias holds as for single nests: each nest writes only its store
 *     buffer (a statistics buffer, which the later nests read through the
 *     same pointer, or the value's own buffer, which no nest reads).
 *     Always-inlined into
 *   K.nestI.body(ptr ctx, i64 begin, i64 end), the tdsl_parallel_for body.
 * Chunks split shared iterations only (>= PAR_MIN_ELEMS elements of work
 * of all nests per chunk); each row is reduced by one thread in a fixed
 * order, so results do not depend on the thread count. */

/* Elements of work per shared iteration: every nest's remaining loops. */
static LLVMValueRef group_row_work(Cg *c, const LfNest *g) {
  LLVMValueRef sum = i64c(c, 0);
  for (int k = 0; k < g->group; k++) {
    const LfNest *n = &g[k];
    LLVMValueRef w = i64c(c, 1);
    for (int l = g->shared; l < n->rank + n->nred; l++)
      w = LLVMBuildMul(c->b, w, sym_val(c, loop_extent(n, l)), "");
    sum = LLVMBuildAdd(c->b, sum, w, "");
  }
  return smin(c, sum, i64c(c, 1), true);
}

/* One nest of a group at the current shared index (x->iv[0..s-1] set). */
static void emit_group_member(Cg *c, NestCtx *x, int s) {
  const LfNest *n = x->n;
  for (int l = s; l < n->rank; l++) x->iv[l] = open_loop(c, x->ub[l]);
  LLVMValueRef v = n->reduce == OP_COUNT ? eval(c, x, n->value) : emit_reduce(c, x);
  store_el(c, v, address(c, x, &n->store, n->dtype, n->rank), n->dtype);
  for (int l = s; l < n->rank; l++) close_loop(c);
}

/* The loops of K.nestI for shared iterations [lo, hi); rt: the first
 * output-stride parameter. */
static void emit_group_range(Cg *c, const LfNest *g, LLVMValueRef lo, LLVMValueRef hi,
                             unsigned rt) {
  int s = g->shared;
  VLoops sh = {.n = s, .nouter = s};
  LLVMValueRef idx[MAXL], rest = lo;
  NestCtx *x = arena_alloc(c->m->arena, sizeof *x * (size_t)g->group);
  for (int k = 0; k < g->group; k++) {
    const LfNest *n = &g[k];
    x[k] = (NestCtx){.n = n};
    for (int l = 0; l < n->rank + n->nred; l++) x[k].ub[l] = sym_val(c, loop_extent(n, l));
    for (int l = 0; l < n->rank; l++) x[k].rt_stride[l] = LLVMGetParam(c->fn, rt++);
  }
  for (int j = s - 1; j >= 0; j--) {
    sh.ub[j] = x[0].ub[j];
    idx[j] = entry_alloca(c, c->i64, NULL);
    LLVMBuildStore(c->b, j ? LLVMBuildURem(c->b, rest, sh.ub[j], "") : rest, idx[j]);
    if (j) rest = LLVMBuildUDiv(c->b, rest, sh.ub[j], "");
  }
  open_loop_from(c, lo, hi);
  for (int j = 0; j < s; j++) {
    LLVMValueRef iv = LLVMBuildLoad2(c->b, c->i64, idx[j], "");
    for (int k = 0; k < g->group; k++) x[k].iv[j] = iv;
  }
  for (int k = 0; k < g->group; k++) emit_group_member(c, &x[k], s);
  odometer_step(c, &sh, idx, s);
  close_loop(c);
}

/* On targets with 512-bit vectors, lets the vectorizer use them in fn
 * (LLVM prefers 256 bits by default): a group's loops are compute-bound
 * on exp once their row is in cache. */
static void prefer_wide_vectors(Cg *c, LLVMValueRef fn) {
  if (c->vec_bits < 512) return;
  const char *keys[2] = {"prefer-vector-width", "min-legal-vector-width"};
  for (int i = 0; i < 2; i++)
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(c->ctx, keys[i], (unsigned)strlen(keys[i]),
                                                      "512", 3));
}

/* Builds K.nestI and K.nestI.body of group g (see above). */
static NestFn group_functions(Cg *c, const LfNest *g) {
  NestFn f = {.nb = c->lk->nbufs, .nv = c->k->nsyms};
  for (int k = 0; k < g->group; k++) f.nv += g[k].rank;
  SavedFn s;
  open_nest_fn(c, &f, &s);
  prefer_wide_vectors(c, f.impl);
  emit_group_range(c, g, LLVMGetParam(f.impl, 0), LLVMGetParam(f.impl, 1),
                   (unsigned)(2 + f.nb + c->k->nsyms));
  close_nest_fn(c, &f, &s);
  prefer_wide_vectors(c, f.body);
  return f;
}

/* Stores context field (part, j) of f. */
static void ctx_store(Cg *c, const NestFn *f, LLVMValueRef ctx, int part, int j, LLVMValueRef v) {
  LLVMValueRef gi[3] = {i32c(c, 0), i32c(c, part), i64c(c, j)};
  LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, f->ctxt, ctx, gi, 3, ""));
}

/* Fills group g's context in the kernel and calls tdsl_parallel_for. */
static void emit_group_parallel(Cg *c, const LfNest *g) {
  if (g->shared < 1 || g->shared > g->rank) ICE("row group sharing %d loops", g->shared);
  NestFn f = group_functions(c, g);
  LLVMValueRef ctx = entry_alloca(c, f.ctxt, NULL);
  for (int i = 0; i < f.nb; i++) ctx_store(c, &f, ctx, 0, i, c->base[i] ? c->base[i] : LLVMConstNull(c->ptr));
  for (int j = 0; j < c->k->nsyms; j++) ctx_store(c, &f, ctx, 1, j, c->env[j]);
  int j = c->k->nsyms;
  for (int k = 0; k < g->group; k++) {
    const LfNest *n = &g[k];
    for (int l = 0; l < n->rank; l++, j++) {
      LLVMValueRef v = i64c(c, 0);
      if (n->store.rt_strides)
        v = dl_stride(c, c->args[c->k->nparams + c->lk->bufs[n->store.buf].index], n->rank, l);
      ctx_store(c, &f, ctx, 1, j, v);
    }
  }
  LLVMValueRef total = i64c(c, 1);
  for (int l = 0; l < g->shared; l++) total = LLVMBuildMul(c->b, total, sym_val(c, g->shape[l]), "");
  LLVMValueRef grain = smin(c, LLVMBuildSDiv(c->b, i64c(c, PAR_MIN_ELEMS), group_row_work(c, g), ""),
                            i64c(c, 1), true);
  LLVMTypeRef ps[4] = {c->i64, c->i64, c->ptr, c->ptr};
  LLVMValueRef a[4] = {total, grain, f.body, ctx};
  call(c, fdecl(c, "tdsl_parallel_for", c->vd, ps, 4, 0), a, 4);
}

/* ---- GEMM epilogues (loops.h "Epilogues") ----------------------------------
 * The hook gemm.c calls on each finished block of C (gemm.h) is two
 * private functions, as for parallel nests:
 *   K.epiI(i64 bt, i64 i0, i64 i1, i64 j0, i64 j1, ptr noalias buf...,
 *          i64 sym..., i64 rtstride...)
 *     maps the block to output indices and runs `post` over it, LFE_ACC
 *     loaded through cstore, the value stored through store; the inner
 *     loop runs over C's columns, the output's unit-stride dim (N of a
 *     matmul, channels of a channels-last conv, the pixels of an NCHW
 *     conv: one loop over OH*OW when every access allows collapsing them,
 *     as plan_vloops would), so it vectorizes.  Always-inlined into
 *   K.epiI.body(ptr ctx, i64 bt, i64 i0, i64 i1, i64 j0, i64 j1), which
 *     unpacks the context the kernel filled (buffers, symbols, output
 *     strides). */

/* Output indices of C row i (row = true) or column j: sets x->iv. */
static void epi_index(Cg *c, const LfNest *n, NestCtx *x, LLVMValueRef bt, LLVMValueRef q,
                      bool row, bool collapse) {
  int R = n->rank;
  if (n->reduce == OP_MATMUL) {
    x->iv[row ? R - 2 : R - 1] = q;
    for (int d = R - 3; row && d >= 0; d--) { /* batch dims, row-major in bt */
      x->iv[d] = d ? LLVMBuildURem(c->b, bt, x->ub[d], "") : bt;
      if (d) bt = LLVMBuildUDiv(c->b, bt, x->ub[d], "");
    }
    return;
  }
  const IrValue *v = ir_val(c->k, n->gemm);
  LLVMValueRef groups = sym_val(c, v->attrs[6]);
  LLVMValueRef og = LLVMBuildSDiv(c->b, x->ub[R - 3], groups, "");
  LLVMValueRef gi = LLVMBuildSRem(c->b, bt, groups, "");
  if (row && R == 4) x->iv[0] = LLVMBuildSDiv(c->b, bt, groups, "");
  if (row != gemm_cl(n)) { /* a channel */
    x->iv[R - 3] = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, gi, og, ""), q, "");
  } else if (collapse) { /* a pixel, OH and OW as one loop */
    x->iv[R - 2] = i64c(c, 0);
    x->iv[R - 1] = q;
  } else {
    x->iv[R - 2] = LLVMBuildSDiv(c->b, q, x->ub[R - 1], "");
    x->iv[R - 1] = LLVMBuildSRem(c->b, q, x->ub[R - 1], "");
  }
}

/* The block loops of K.epiI; args: bt, i0, i1, j0, j1. */
static void epi_loops(Cg *c, const LfNest *n, NestCtx *x, LLVMValueRef *args) {
  int R = n->rank;
  bool collapse = n->reduce == OP_CONV2D && !gemm_cl(n) &&
                  acc_collapses(c, n, &n->store, R - 2, R - 1) &&
                  acc_collapses(c, n, &n->cstore, R - 2, R - 1) &&
                  expr_collapses(c, n, n->post, R - 2, R - 1);
  epi_index(c, n, x, args[0], open_loop_from(c, args[1], args[2]), true, collapse);
  epi_index(c, n, x, args[0], open_loop_from(c, args[3], args[4]), false, collapse);
  x->acc = load_el(c, address(c, x, &n->cstore, n->cdtype, R), n->cdtype);
  store_el(c, eval(c, x, n->post), address(c, x, &n->store, n->dtype, R), n->dtype);
  close_loop(c);
  close_loop(c);
}

/* Builds K.epiI and its wrapper; returns the wrapper and the context type. */
static LLVMValueRef epi_functions(Cg *c, const LfNest *n, LLVMTypeRef *ctxt) {
  int nb = c->lk->nbufs, nv = c->k->nsyms + n->rank, np = 5 + nb + nv;
  LLVMTypeRef *ps = arena_alloc(c->m->arena, sizeof *ps * (size_t)np);
  for (int i = 0; i < np; i++) ps[i] = i >= 5 && i < 5 + nb ? c->ptr : c->i64;
  char name[600];
  snprintf(name, sizeof name, "%s.epi%d", c->k->name, c->nfns++);
  LLVMValueRef impl = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->vd, ps, (unsigned)np, 0));
  LLVMSetLinkage(impl, LLVMPrivateLinkage);
  add_fn_attr(c, impl, LLVMAttributeFunctionIndex, "alwaysinline");
  add_fn_attr(c, impl, LLVMAttributeFunctionIndex, "nounwind");
  for (int i = 0; i < nb; i++) add_fn_attr(c, impl, (unsigned)(6 + i), "noalias");
  LLVMValueRef sfn = c->fn, *sbase = c->base, *senv = c->env;
  LLVMBasicBlockRef sentry = c->entry, spos = LLVMGetInsertBlock(c->b);
  c->fn = impl;
  c->entry = block(c, "entry");
  LLVMBasicBlockRef start = block(c, "start");
  LLVMPositionBuilderAtEnd(c->b, start);
  c->base = arena_alloc(c->m->arena, sizeof *c->base * (size_t)(nb + 1));
  c->env = arena_alloc(c->m->arena, sizeof *c->env * (size_t)(c->k->nsyms + 1));
  for (int i = 0; i < nb; i++) c->base[i] = LLVMGetParam(impl, (unsigned)(5 + i));
  for (int i = 0; i < c->k->nsyms; i++) c->env[i] = LLVMGetParam(impl, (unsigned)(5 + nb + i));
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) {
    x.ub[l] = sym_val(c, n->shape[l]);
    x.rt_stride[l] = LLVMGetParam(impl, (unsigned)(5 + nb + c->k->nsyms + l));
  }
  LLVMValueRef a5[5];
  for (int i = 0; i < 5; i++) a5[i] = LLVMGetParam(impl, (unsigned)i);
  epi_loops(c, n, &x, a5);
  LLVMBuildRetVoid(c->b);
  LLVMPositionBuilderAtEnd(c->b, c->entry);
  LLVMBuildBr(c->b, start);
  /* the wrapper */
  LLVMTypeRef fs[2] = {LLVMArrayType2(c->ptr, (uint64_t)nb), LLVMArrayType2(c->i64, (uint64_t)nv)};
  *ctxt = LLVMStructTypeInContext(c->ctx, fs, 2, 0);
  LLVMTypeRef bps[6] = {c->ptr, c->i64, c->i64, c->i64, c->i64, c->i64};
  snprintf(name, sizeof name, "%s.epi%d.body", c->k->name, c->nfns - 1);
  LLVMValueRef body = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->vd, bps, 6, 0));
  LLVMSetLinkage(body, LLVMPrivateLinkage);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, body, "entry"));
  LLVMValueRef *a = arena_alloc(c->m->arena, sizeof *a * (size_t)np), ctx = LLVMGetParam(body, 0);
  for (int i = 0; i < 5; i++) a[i] = LLVMGetParam(body, (unsigned)(1 + i));
  for (int i = 0; i < nb + nv; i++) {
    bool isb = i < nb;
    LLVMValueRef g[3] = {i32c(c, 0), i32c(c, isb ? 0 : 1), i64c(c, isb ? i : i - nb)};
    LLVMValueRef q = LLVMBuildGEP2(c->b, *ctxt, ctx, g, 3, "");
    a[5 + i] = LLVMBuildLoad2(c->b, isb ? c->ptr : c->i64, q, "");
  }
  LLVMBuildCall2(c->b, LLVMGlobalGetValueType(impl), impl, a, (unsigned)np, "");
  LLVMBuildRetVoid(c->b);
  c->fn = sfn, c->base = sbase, c->env = senv, c->entry = sentry;
  LLVMPositionBuilderAtEnd(c->b, spos);
  return body;
}

/* Builds the hook for gemm nest n and fills its context in the kernel. */
static void gemm_epilogue(Cg *c, const LfNest *n, GemmEmit *e) {
  LLVMTypeRef ctxt;
  LLVMValueRef body = epi_functions(c, n, &ctxt);
  int nb = c->lk->nbufs;
  LLVMValueRef ctx = fill_nest_ctx(c, n, ctxt, nb);
  e->epi_fn = body;
  e->epi_arg = ctx;
}

/* ---- GEMM prologues (loops.h "Prologues") -------------------------------
 * gemm.c's pack function for an operand with a prologue evaluates
 * LfNest.pro[j] per element through these callbacks (gemm.h
 * GemmPrologue), inlined into the pack loop: begin points the Cg at the
 * pack function and loads the buffer bases and symbol values from the
 * context the kernel filled ({[nb x ptr], [nsyms x i64]}, passed through
 * the GEMM's run-time context); elem maps the element's position to the
 * operand's dims and evaluates the expression; end restores the
 * kernel's state. */

typedef struct ProUser {
  Cg *c;
  const LfNest *n;
  int j;              /* the operand: 0 a / x, 1 b / w */
  LfNest dims;        /* rank: the operand's (eval's loop count) */
  LLVMTypeRef ctxt;
  GemmPrologue pro;
  LLVMBuilderRef sb;  /* the kernel's state while a pack function is built */
  LLVMValueRef sfn, *sbase, *senv;
  LLVMBasicBlockRef sentry;
} ProUser;

static void pro_begin(void *user, LLVMBuilderRef b, LLVMValueRef fn, LLVMValueRef arg) {
  ProUser *u = user;
  Cg *c = u->c;
  int nb = c->lk->nbufs;
  u->sb = c->b, u->sfn = c->fn, u->sbase = c->base, u->senv = c->env, u->sentry = c->entry;
  c->b = b, c->fn = fn, c->entry = LLVMGetEntryBasicBlock(fn);
  c->base = arena_alloc(c->m->arena, sizeof *c->base * (size_t)(nb + 1));
  c->env = arena_alloc(c->m->arena, sizeof *c->env * (size_t)(c->k->nsyms + 1));
  for (int i = 0; i < nb + c->k->nsyms; i++) {
    bool isb = i < nb;
    LLVMValueRef g[3] = {i32c(c, 0), i32c(c, isb ? 0 : 1), i64c(c, isb ? i : i - nb)};
    LLVMValueRef v = LLVMBuildLoad2(c->b, isb ? c->ptr : c->i64,
                                    LLVMBuildGEP2(c->b, u->ctxt, arg, g, 3, ""), "");
    if (isb) c->base[i] = v;
    else c->env[i - nb] = v;
  }
}

static void pro_end(void *user) {
  ProUser *u = user;
  Cg *c = u->c;
  c->b = u->sb, c->fn = u->sfn, c->base = u->sbase, c->env = u->senv, c->entry = u->sentry;
}

/* The operand's indices (x->iv over its dims) of position ix. */
static void pro_dims(Cg *c, const ProUser *u, const GemmIdx *ix, NestCtx *x) {
  const LfNest *n = u->n;
  int R = u->dims.rank;
  if (n->reduce == OP_MATMUL) { /* the operand's batch dims are the output's */
    LLVMValueRef bt = ix->bt;
    for (int d = R - 3; d >= 0; d--) {
      x->iv[d] = d ? LLVMBuildURem(c->b, bt, sym_val(c, n->shape[d]), "") : bt;
      if (d) bt = LLVMBuildUDiv(c->b, bt, sym_val(c, n->shape[d]), "");
    }
    x->iv[R - 2] = ix->i, x->iv[R - 1] = ix->j;
    return;
  }
  const IrValue *v = ir_val(c->k, n->gemm), *w = ir_val(c->k, v->args[1]);
  LLVMValueRef groups = sym_val(c, v->attrs[6]), gi = LLVMBuildURem(c->b, ix->bt, groups, "");
  if (u->j == 1) { /* the weight [O, C/groups, KH, KW] */
    LLVMValueRef og = LLVMBuildUDiv(c->b, sym_val(c, w->shape[0]), groups, "");
    x->iv[0] = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, gi, og, ""), ix->i, "");
    x->iv[1] = ix->ci, x->iv[2] = ix->ky, x->iv[3] = ix->kx;
    return;
  }
  if (R == 4) x->iv[0] = LLVMBuildUDiv(c->b, ix->bt, groups, "");
  x->iv[R - 3] = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, gi, sym_val(c, w->shape[1]), ""), ix->ci, "");
  x->iv[R - 2] = ix->y, x->iv[R - 1] = ix->x;
}

static LLVMValueRef pro_elem(void *user, const GemmIdx *ix, DType cd) {
  ProUser *u = user;
  Cg *c = u->c;
  NestCtx x = {.n = &u->dims};
  pro_dims(c, u, ix, &x);
  const LfExpr *e = u->n->pro[u->j];
  return convert(c, eval(c, &x, e), e->dtype, cd);
}

/* The prologue of operand j of gemm nest n, its context filled in the
 * kernel. */
static const GemmPrologue *gemm_prologue(Cg *c, const LfNest *n, int j) {
  ProUser *u = arena_alloc(c->m->arena, sizeof *u);
  memset(u, 0, sizeof *u);
  int nb = c->lk->nbufs, ns = c->k->nsyms;
  u->c = c, u->n = n, u->j = j;
  u->dims.rank = ir_val(c->k, ir_val(c->k, n->gemm)->args[j])->rank;
  LLVMTypeRef fs[2] = {LLVMArrayType2(c->ptr, (uint64_t)nb), LLVMArrayType2(c->i64, (uint64_t)ns)};
  u->ctxt = LLVMStructTypeInContext(c->ctx, fs, 2, 0);
  LLVMValueRef ctx = entry_alloca(c, u->ctxt, NULL);
  for (int i = 0; i < nb + ns; i++) {
    bool isb = i < nb;
    LLVMValueRef v = isb ? (c->base[i] ? c->base[i] : LLVMConstNull(c->ptr)) : c->env[i - nb];
    LLVMValueRef g[3] = {i32c(c, 0), i32c(c, isb ? 0 : 1), i64c(c, isb ? i : i - nb)};
    LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, u->ctxt, ctx, g, 3, ""));
  }
  u->pro = (GemmPrologue){pro_begin, pro_elem, pro_end, u, ctx};
  return &u->pro;
}

static void emit_nest(Cg *c, const LfNest *n) {
  if (n->reduce == OP_MATMUL || n->reduce == OP_CONV2D) {
    emit_gemm_nest(c, n);
    return;
  }
  if (c->opt > 0 && n->rank > 0) {
    emit_nest_parallel(c, n);
    return;
  }
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) x.ub[l] = sym_val(c, n->shape[l]);
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = sym_val(c, n->red[l]);
  if (n->store.rt_strides) {
    const LfBuf *b = &c->lk->bufs[n->store.buf];
    for (int l = 0; l < n->rank; l++)
      x.rt_stride[l] = dl_stride(c, c->args[c->k->nparams + b->index], n->rank, l);
  }
  for (int l = 0; l < n->rank; l++) x.iv[l] = open_loop(c, x.ub[l]);
  LLVMValueRef v = n->reduce == OP_COUNT ? eval(c, &x, n->value) : emit_reduce(c, &x);
  store_el(c, v, address(c, &x, &n->store, n->dtype, n->rank), n->dtype);
  for (int l = 0; l < n->rank; l++) close_loop(c);
}

/* ---- kernels ------------------------------------------------------------ */

static LLVMTypeRef scalar_arg_type(Cg *c, DType t) {
  if (t == DT_F16 || t == DT_BF16) return c->i16;
  return storage_type(c, t);
}

static void emit_kernel(Cg *c, const IrKernel *k, const LfKernel *lk) {
  int na = k->nparams + k->nresults;
  LLVMTypeRef *ps = arena_alloc(c->m->arena, sizeof *ps * (size_t)(na + 1));
  for (int i = 0; i < k->nparams; i++)
    ps[i] = k->params[i].is_tensor ? c->ptr : scalar_arg_type(c, k->params[i].dtype);
  for (int i = 0; i < k->nresults; i++) ps[k->nparams + i] = c->ptr;
  c->k = k;
  c->lk = lk;
  c->env = NULL;
  c->fn = LLVMAddFunction(c->mod, k->name, LLVMFunctionType(c->i32, ps, (unsigned)na, 0));
  c->args = arena_alloc(c->m->arena, sizeof *c->args * (size_t)(na + 1));
  for (int i = 0; i < na; i++) c->args[i] = LLVMGetParam(c->fn, (unsigned)i);
  c->entry = block(c, "entry");
  LLVMBasicBlockRef start = block(c, "start");
  c->fail = block(c, "fail");
  LLVMPositionBuilderAtEnd(c->b, c->fail);
  c->rcphi = LLVMBuildPhi(c->b, c->i32, "rc");
  LLVMPositionBuilderAtEnd(c->b, c->entry);
  c->base = arena_alloc(c->m->arena, sizeof *c->base * (size_t)(lk->nbufs + 1));
  c->slot = arena_alloc(c->m->arena, sizeof *c->slot * (size_t)(lk->nbufs + 1));
  for (int i = 0; i < lk->nbufs; i++)
    if (lk->bufs[i].kind == LFB_SCRATCH) {
      c->slot[i] = LLVMBuildAlloca(c->b, c->ptr, "scratch");
      LLVMBuildStore(c->b, LLVMConstNull(c->ptr), c->slot[i]);
    }
  c->gpool = arena_alloc(c->m->arena, sizeof *c->gpool * (size_t)(lk->nnests + 1));
  for (int i = 0; i < lk->nnests; i++) {
    c->gpool[i] = NULL;
    if (lk->nests[i].reduce == OP_MATMUL || lk->nests[i].reduce == OP_CONV2D) {
      c->gpool[i] = LLVMBuildAlloca(c->b, c->ptr, "gemm_pool");
      LLVMBuildStore(c->b, LLVMConstNull(c->ptr), c->gpool[i]);
    }
  }
  int ns = k->nsyms ? k->nsyms : 1;
  c->envp = LLVMBuildArrayAlloca(c->b, c->i64, i32c(c, ns), "env");
  c->boundp = LLVMBuildArrayAlloca(c->b, c->i32, i32c(c, ns), "bound");
  for (int s = 0; s < ns; s++) {
    LLVMValueRef o = i64c(c, s);
    LLVMBuildStore(c->b, i64c(c, 0), LLVMBuildGEP2(c->b, c->i64, c->envp, &o, 1, ""));
    LLVMBuildStore(c->b, i32c(c, 0), LLVMBuildGEP2(c->b, c->i32, c->boundp, &o, 1, ""));
  }
  LLVMBuildBr(c->b, start);
  LLVMPositionBuilderAtEnd(c->b, start);
  c->kname = str(c, k->name);
  emit_entry_checks(c);
  setup_buffers(c);
  setup_gemm_pools(c);
  for (int i = 0; i < lk->nnests; i++) {
    if (c->opt > 0 && lk->nests[i].group > 1) { /* a row group: its nests at once */
      emit_group_parallel(c, &lk->nests[i]);
      i += lk->nests[i].group - 1;
      continue;
    }
    emit_nest(c, &lk->nests[i]);
  }
  free_scratch(c);
  LLVMBuildRet(c->b, i32c(c, 0));
  LLVMPositionBuilderAtEnd(c->b, c->fail);
  free_scratch(c);
  LLVMBuildRet(c->b, c->rcphi);
}

/* ---- K_info ------------------------------------------------------------- */

static LLVMValueRef cstr(Cg *c, const char *s) {
  LLVMValueRef init = LLVMConstStringInContext(c->ctx, s, (unsigned)strlen(s), 0);
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), ".info.str");
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return g;
}

static LLVMValueRef const_array_global(Cg *c, LLVMTypeRef t, LLVMValueRef *v, int n,
                                       const char *name) {
  if (n == 0) return LLVMConstNull(c->ptr);
  LLVMValueRef init = LLVMConstArray2(t, v, (uint64_t)n);
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return g;
}

/* One tdsl_param_info {name, is_tensor, dtype, ndim, dims, layout}. */
static LLVMValueRef param_info(Cg *c, LLVMTypeRef pt, const char *name, bool tensor,
                               DType dt, int rank, const Sym **shape, int layout) {
  LLVMValueRef dims[TDSL_MAX_RANK];
  for (int d = 0; d < rank; d++) dims[d] = cstr(c, sym_str(c->m->arena, shape[d]));
  LLVMValueRef code = dl_dtype(c, dt);
  unsigned long long pk = LLVMConstIntGetZExtValue(code);
  LLVMValueRef dv[3] = {ci(c->i8, (long long)(pk & 255)), ci(c->i8, (long long)(pk >> 8 & 255)),
                        ci(c->i16, 1)};
  LLVMValueRef f[6] = {cstr(c, name), i32c(c, tensor), LLVMConstStructInContext(c->ctx, dv, 3, 0),
                       i32c(c, tensor ? rank : 0),
                       const_array_global(c, c->ptr, dims, tensor ? rank : 0, ".info.dims"),
                       i32c(c, tensor ? layout : 0)};
  return LLVMConstNamedStruct(pt, f, 6);
}

/* K_info's scratch_bytes and scratch_expr: the scratch blocks of the
 * kernel's loop form (one per plan-memory slot), as a number when
 * constant (else -1) and as text. */
static void info_scratch(Cg *c, LLVMValueRef *f) {
  const Sym *b = lf_scratch_total(c->m->st, c->lk);
  int64_t n;
  f[0] = i64c(c, sym_is_const(b, &n) ? n : -1);
  f[1] = cstr(c, sym_str(c->m->arena, b));
}

static void emit_info(Cg *c, const IrKernel *k) {
  LLVMTypeRef dlt[3] = {c->i8, c->i8, c->i16};
  LLVMTypeRef pf[6] = {c->ptr, c->i32, LLVMStructTypeInContext(c->ctx, dlt, 3, 0), c->i32,
                       c->ptr, c->i32};
  LLVMTypeRef pt = LLVMGetTypeByName2(c->ctx, "tdsl_param_info");
  if (!pt) {
    pt = LLVMStructCreateNamed(c->ctx, "tdsl_param_info");
    LLVMStructSetBody(pt, pf, 6, 0);
  }
  LLVMValueRef *p = arena_alloc(c->m->arena, sizeof *p * (size_t)(k->nparams + k->nresults + 1));
  for (int i = 0; i < k->nparams; i++) {
    const IrParam *q = &k->params[i];
    p[i] = param_info(c, pt, q->name, q->is_tensor, q->dtype, q->rank, q->shape, (int)q->layout);
  }
  for (int i = 0; i < k->nresults; i++) {
    char name[32];
    snprintf(name, sizeof name, "out%d", i);
    const IrResult *r = &k->results[i];
    p[k->nparams + i] = param_info(c, pt, name, true, r->dtype, r->rank, r->shape, (int)r->layout);
  }
  LLVMValueRef f[8] = {cstr(c, k->name), i32c(c, k->nparams),
                       const_array_global(c, pt, p, k->nparams, ".info.params"),
                       i32c(c, k->nresults),
                       const_array_global(c, pt, p + k->nparams, k->nresults, ".info.results"),
                       i32c(c, DL_CPU), NULL, NULL};
  info_scratch(c, f + 6);
  LLVMValueRef init = LLVMConstStructInContext(c->ctx, f, 8, 0);
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), ".info");
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  char name[512];
  snprintf(name, sizeof name, "%s_info", k->name);
  LLVMValueRef fn = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->ptr, NULL, 0, 0));
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
  LLVMBuildRet(c->b, g);
}

/* ---- module, target, output ---------------------------------------------- */

static void init_types(Cg *c) {
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

static LLVMTargetMachineRef target_machine(const CgOptions *o, char **triple) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  bool host = !strcmp(o->target, "host");
  *triple = host ? LLVMGetDefaultTargetTriple() : LLVMCreateMessage("x86_64-unknown-linux-gnu");
  char *cpu = host ? LLVMGetHostCPUName() : LLVMCreateMessage(o->target);
  char *feat = host ? LLVMGetHostCPUFeatures() : LLVMCreateMessage("");
  LLVMTargetRef t;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(*triple, &t, &err)) {
    fprintf(stderr, "tdslc: error: --target=%s: %s\n", o->target, err);
    LLVMDisposeMessage(err);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
    return NULL;
  }
  LLVMCodeGenOptLevel lv = o->opt_level == 0 ? LLVMCodeGenLevelNone
                         : o->opt_level == 1 ? LLVMCodeGenLevelLess
                         : o->opt_level == 2 ? LLVMCodeGenLevelDefault
                                             : LLVMCodeGenLevelAggressive;
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(t, *triple, cpu, feat, lv,
                                                    LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(feat);
  return tm;
}

/* o->path when set (one emit), else stem + ext. Malloc'd. */
static char *out_path(const CgOptions *o, const char *ext) {
  if (o->path) ext = "";
  const char *base = o->path ? o->path : o->stem;
  size_t len = strlen(base) + strlen(ext) + 1;
  char *path = malloc(len);
  if (!path) ICE("out of memory");
  snprintf(path, len, "%s%s", base, ext);
  return path;
}

static int write_file(const CgOptions *o, const char *ext, const char *data, size_t n) {
  if (o->to_stdout) return fwrite(data, 1, n, stdout) == n && !fflush(stdout) ? 0 : 1;
  char *path = out_path(o, ext);
  FILE *f = fopen(path, "wb");
  int bad = !f || fwrite(data, 1, n, f) != n;
  if (f && fclose(f)) bad = 1;
  if (bad) fprintf(stderr, "tdslc: error: cannot write '%s': %s\n", path, strerror(errno));
  free(path);
  return bad;
}

static int emit_machine(LLVMTargetMachineRef tm, LLVMModuleRef mod, const CgOptions *o,
                        LLVMCodeGenFileType ft, const char *ext) {
  LLVMMemoryBufferRef buf;
  char *err = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, ft, &err, &buf))
    ICE("LLVM code emission failed: %s", err);
  int s = write_file(o, ext, LLVMGetBufferStart(buf), LLVMGetBufferSize(buf));
  LLVMDisposeMemoryBuffer(buf);
  return s;
}

/* --time-passes: prints the milliseconds since *t0 as phase `name` and
 * restarts the clock (monotonic wall time). */
static void phase_ms(const CgOptions *o, const char *name, double *t0) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double t = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  if (o->time_passes && *t0 > 0) fprintf(stderr, "tdslc: %-12s %8.3f ms\n", name, t - *t0);
  *t0 = t;
}

static int optimize_and_write(LLVMModuleRef mod, const CgOptions *o) {
  double t = 0;
  phase_ms(o, "", &t);
  char *triple = NULL, *err = NULL;
  LLVMTargetMachineRef tm = target_machine(o, &triple);
  if (!tm) return 2;
  LLVMSetTarget(mod, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(mod, td);
  if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &err))
    ICE("generated LLVM IR is invalid: %s", err);
  LLVMDisposeMessage(err);
  char passes[32];
  snprintf(passes, sizeof passes, "default<O%d>", o->opt_level);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  phase_ms(o, "llvm-verify", &t);
  LLVMErrorRef e = LLVMRunPasses(mod, passes, tm, po);
  if (e) {
    char *msg = LLVMGetErrorMessage(e);
    ICE("LLVM passes failed: %s", msg);
  }
  LLVMDisposePassBuilderOptions(po);
  phase_ms(o, "llvm-opt", &t);
  int s = 0;
  if (o->emit & CG_LLVM) {
    char *ir = LLVMPrintModuleToString(mod);
    s |= write_file(o, ".ll", ir, strlen(ir));
    LLVMDisposeMessage(ir);
  }
  if (o->emit & CG_ASM) s |= emit_machine(tm, mod, o, LLVMAssemblyFile, ".s");
  if (o->emit & CG_OBJ) s |= emit_machine(tm, mod, o, LLVMObjectFile, ".o");
  phase_ms(o, "llvm-codegen", &t);
  LLVMDisposeTargetData(td);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(triple);
  return s;
}

int cg_emit(IrModule *m, const CgOptions *o) {
  if (!strncmp(o->target, "cuda", 4)) {
    fprintf(stderr, "tdslc: error: --target=%s: the CUDA backend is not "
            "available in this build yet\n", o->target);
    return 2;
  }
  double t = 0;
  phase_ms(o, "", &t);
  LfKernel **lks = arena_alloc(m->arena, sizeof *lks * (size_t)(m->nkernels + 1));
  for (int i = 0; i < m->nkernels; i++) lks[i] = lf_lower(m, m->kernels[i], o->opt_level);
  phase_ms(o, "lower", &t);
  if (o->emit & CG_HEADER) {
    int s;
    const Sym **scratch = arena_alloc(m->arena, sizeof *scratch * (size_t)(m->nkernels + 1));
    for (int i = 0; i < m->nkernels; i++) scratch[i] = lf_scratch_total(m->st, lks[i]);
    if (o->to_stdout) {
      s = cg_write_header(m, stdout, o->stem, scratch);
    } else {
      char *path = out_path(o, ".h");
      FILE *f = fopen(path, "w");
      s = f ? cg_write_header(m, f, o->stem, scratch) : -1;
      if (f && fclose(f)) s = -1;
      if (s) fprintf(stderr, "tdslc: error: cannot write '%s': %s\n", path, strerror(errno));
      free(path);
    }
    if (s) return 1;
  }
  if (!(o->emit & (CG_OBJ | CG_ASM | CG_LLVM))) return 0;
  Cg c = {.m = m, .vec_bits = cg_gemm_vec_bits(o->target), .opt = o->opt_level};
  c.ctx = LLVMContextCreate();
  c.mod = LLVMModuleCreateWithNameInContext(m->file ? m->file : "tdsl", c.ctx);
  c.b = LLVMCreateBuilderInContext(c.ctx);
  init_types(&c);
  for (int i = 0; i < m->nkernels; i++) {
    emit_kernel(&c, m->kernels[i], lks[i]);
    emit_info(&c, m->kernels[i]);
  }
  phase_ms(o, "llvm-build", &t);
  int s = optimize_and_write(c.mod, o);
  LLVMDisposeBuilder(c.b);
  LLVMDisposeModule(c.mod);
  LLVMContextDispose(c.ctx);
  return s;
}
