/* sym.h — symbolic integer expressions for sizes, strides and offsets.
 *
 * A Sym is an expression over size symbols (N, C, ...) and stride symbols
 * (the run-time strides of `strided` parameters), built from integer
 * literals with + - * // % min max.  Expressions are kept in a canonical
 * form (a sum of monomials with integer coefficients, sorted; `//`, `%`,
 * min and max are opaque atoms after constant folding and the exact
 * simplifications below) and hash-consed in a SymTab, so two Syms are
 * equal as polynomials exactly when their pointers are equal:
 * `C * H * W` and `H * (W * C)` give the same pointer.
 *
 * Simplifications: constants fold (Python floor semantics for // and %);
 * a // 1 = a; a % 1 = 0; (k*m) // k = m when k divides every coefficient
 * of the dividend; min/max of two constants fold; min(a, a) = a. */
#ifndef TDSL_SYM_H
#define TDSL_SYM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"

typedef struct Sym Sym;
typedef struct SymTab SymTab;

SymTab *sym_tab_new(Arena *a);

const Sym *sym_const(SymTab *t, int64_t v);
/* Variable number `id` (index into the kernel's symbol list); `name` is
 * used for printing only and must live in the arena. */
const Sym *sym_var(SymTab *t, int id, const char *name);
const Sym *sym_add(SymTab *t, const Sym *a, const Sym *b);
const Sym *sym_sub(SymTab *t, const Sym *a, const Sym *b);
const Sym *sym_mul(SymTab *t, const Sym *a, const Sym *b);
const Sym *sym_neg(SymTab *t, const Sym *a);
const Sym *sym_floordiv(SymTab *t, const Sym *a, const Sym *b);
const Sym *sym_mod(SymTab *t, const Sym *a, const Sym *b);
const Sym *sym_min(SymTab *t, const Sym *a, const Sym *b);
const Sym *sym_max(SymTab *t, const Sym *a, const Sym *b);
/* Product of n expressions (1 for n == 0). */
const Sym *sym_prod(SymTab *t, const Sym *const *v, int n);

/* True (and *v set) when the expression is a literal constant. */
bool sym_is_const(const Sym *s, int64_t *v);
/* True when the expression is exactly the constant c. */
bool sym_is(const Sym *s, int64_t c);
/* True for a single variable (and *id set). */
bool sym_is_var(const Sym *s, int *id);
/* Exact division: when every monomial of a is divisible by the monomial
 * b (a constant times a product of atoms), sets *q and returns true. */
bool sym_div_exact(SymTab *t, const Sym *a, const Sym *b, const Sym **q);

/* Equal lists (shapes, strides): same length, the same Sym at every
 * position; hash-consing makes that equality as polynomials. */
bool sym_list_equal(const Sym *const *a, int na, const Sym *const *b, int nb);

/* Evaluates with env[id] as the value of variable id.  Returns false on
 * division by zero or int64 overflow. */
bool sym_eval(const Sym *s, const int64_t *env, int64_t *out);

/* Largest variable id used + 1 (0 for a constant). */
int sym_max_var(const Sym *s);

/* Prints in the surface syntax, fully readable back by the IR reader:
 * `C*H*W`, `2*N + 1`, `N//2`, `min(N, 4)`, `-3`.  Products are written
 * with the coefficient first; sums in canonical order. */
void sym_print(FILE *f, const Sym *s);
char *sym_str(Arena *a, const Sym *s);

/* Read-only structure, for code generators (additive API).  sym_form
 * returns the expression's form and sets: *value for SYMF_CONST, *id for
 * SYMF_VAR, *a and *b for the binary forms, *value (the constant term)
 * and *nterms for SYMF_POLY (c0 + sum of terms, see sym_term).  Any
 * output pointer may be NULL. */
typedef enum SymForm {
  SYMF_CONST, SYMF_VAR, SYMF_FLOORDIV, SYMF_MOD, SYMF_MIN, SYMF_MAX,
  SYMF_ADD, SYMF_MUL, SYMF_POLY
} SymForm;
SymForm sym_form(const Sym *s, int64_t *value, int *id, const Sym **a,
                 const Sym **b, int *nterms);
/* Term i of a SYMF_POLY: coef * atoms[0] * ... * atoms[natoms-1]. */
void sym_term(const Sym *s, int i, int64_t *coef, int *natoms,
              const Sym *const **atoms);

/* Checked int64 arithmetic: *r = a + b / a * b, or false (and *r
 * unchanged) when the exact result leaves int64.  For the folding here and
 * for the verifier's and interpreter's address arithmetic. */
bool ir_add_ok(int64_t a, int64_t b, int64_t *r);
bool ir_mul_ok(int64_t a, int64_t b, int64_t *r);

#endif
