/* llvm_attr.h — function attributes, for every code generator (cpu/,
 * cuda/, the math layer); defined in llvm_util.c.  Apart from
 * llvm_util.h so that math.c, which has its own small builders, can use
 * them too.
 * Needs: llvm-c (LLVM 19). */
#ifndef TDSL_CODEGEN_LLVM_ATTR_H
#define TDSL_CODEGEN_LLVM_ATTR_H

#include <llvm-c/Core.h>

/* LLVM's enum attribute `name` ("noinline", "noalias") at idx of fn:
 * LLVMAttributeFunctionIndex, or 1 + a parameter's index. */
void cg_add_attr(LLVMContextRef ctx, LLVMValueRef fn, unsigned idx, const char *name);
/* The string attribute k="v" on function fn. */
void cg_add_str_attr(LLVMContextRef ctx, LLVMValueRef fn, const char *k, const char *v);
/* min-legal-vector-width and prefer-vector-width "512": keeps zmm
 * registers for fn's explicit 512-bit vectors. */
void cg_prefer_512(LLVMContextRef ctx, LLVMValueRef fn);

#endif
