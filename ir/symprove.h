/* symprove.h — deciding relations between size expressions.
 *
 * A Sym's canonical form makes equal polynomials pointer-equal, but //, %,
 * min and max are opaque atoms there, so `(H - 1)//2 + 1` and
 * `(H + 1)//2`, or `S - min(S, 1)` and `min(S, max(S - 1, 0))`, are
 * different pointers though equal for every size S >= 0.  This module
 * decides such relations under facts: every variable is an integer in an
 * inclusive range [lo, hi], by default [0, +inf) since variables stand
 * for sizes and strides; a kernel's entry checks narrow the ranges (a
 * check `2 <= H` that held at entry makes H >= 2 a fact for everything
 * computed after).
 *
 * Soundness: SYM_YES only when the relation holds at every assignment
 * within the facts, SYM_NO only when it holds at none; anything else is
 * SYM_UNKNOWN (the caller checks at run time, as PyTorch would).  The
 * decision normalizes (constant-divisor floor division and modulo brought
 * to one canonical form, min/max folded where interval bounds order their
 * arguments) and splits a variable's range where an unresolved min/max
 * changes sides. */
#ifndef TDSL_SYMPROVE_H
#define TDSL_SYMPROVE_H

#include "sym.h"

/* Inclusive bounds per variable id; ids >= n are in [0, +inf).
 * SYM_INF (INT64_MAX) as hi means no upper bound. */
#define SYM_INF INT64_MAX
typedef struct SymFacts {
  int n;
  int64_t *lo, *hi;
} SymFacts;

typedef enum SymTruth { SYM_NO, SYM_YES, SYM_UNKNOWN } SymTruth;
typedef enum SymRel { SYM_EQ, SYM_LE, SYM_LT } SymRel;

/* Facts for variables 0..nvars-1, each in [0, +inf). */
SymFacts sym_facts_new(Arena *a, int nvars);
/* Narrows the facts by `lhs rel rhs`, taken to hold; only relations that
 * bound one variable (through + - * by constants and // by positive
 * constants) are used, others are ignored. */
void sym_facts_add(SymTab *t, SymFacts *f, const Sym *lhs, SymRel rel,
                   const Sym *rhs);

/* Equal value at every assignment within the facts: the normal form
 * described above, simplified under the facts. */
const Sym *sym_simplify(SymTab *t, const SymFacts *f, const Sym *s);

SymTruth sym_decide(SymTab *t, const SymFacts *f, const Sym *lhs, SymRel rel,
                    const Sym *rhs);

/* True when a and b differ at every one of a fixed set of generic
 * assignments (each variable >= 2 and >= its lower bound, different
 * variables different values): the two expressions are not the same size
 * written two ways, so a mismatch is a mistake to report at compile time
 * rather than a condition to check at run time.  A heuristic, used only
 * to choose between those two; never to accept a program. */
bool sym_differ_generically(const SymFacts *f, const Sym *a, const Sym *b);

#endif
