/* sym.c — canonical, hash-consed symbolic integer expressions.
 *
 * Needs: arena.h (every node and temporary), diag.h (ICE).
 * Produces: the sym.h API.
 *
 * Canonical form.  A Sym is one of
 *   - a constant (SK_CONST);
 *   - an atom: a variable, or an opaque binary node whose children are
 *     canonical Syms: a//b, a%b, min(a,b), max(a,b), and XADD/XMUL, which
 *     hold a sum or product whose folding would overflow int64 (kept
 *     opaque so the value stays exact and sym_eval reports the overflow);
 *   - a polynomial (SK_POLY): c0 + sum of coef*monomial, where a monomial
 *     is a sorted multiset of atoms.  Terms are sorted by mono_cmp (higher
 *     degree first, then atom by atom), coefficients are non-zero, and a
 *     polynomial that is just a constant or just one atom is stored as
 *     that constant or atom.
 * Every node is interned in the SymTab, so structurally equal nodes are
 * the same pointer; since the form is canonical, equal polynomials are
 * pointer-equal.  sym_cmp is a total order that depends only on structure
 * (kinds, values, variable ids), never on addresses, so sorting and
 * printing are stable across runs.  Commutative opaque nodes (min, max,
 * XADD, XMUL) store their children in sym_cmp order.
 *
 * Overflow: folding never wraps and never ICEs.  A sum or product whose
 * coefficients would leave int64 becomes XADD/XMUL of its operands, so
 * canonicity (pointer equality) holds only for expressions whose folded
 * coefficients fit; values are always right.  sym_eval uses checked
 * arithmetic and fails if any intermediate step of the canonical form
 * overflows.  A // 0 and a % 0 stay opaque; sym_eval fails on them.
 * Printing writes INT64_MIN as `(-9223372036854775807 - 1)`, since the
 * literal 9223372036854775808 does not fit. */
#include "sym.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

/* Order of kinds in sym_cmp; constants last so `min(N, 4)` prints so. */
typedef enum SymKind {
  SK_VAR,
  SK_FLOORDIV,
  SK_MOD,
  SK_MIN,
  SK_MAX,
  SK_XADD, /* a + b left unfolded: folding overflowed int64 */
  SK_XMUL, /* a * b left unfolded: folding overflowed int64 */
  SK_POLY,
  SK_CONST
} SymKind;

typedef struct Term {
  int64_t coef;          /* non-zero in a canonical polynomial */
  int natoms;            /* 0 only for the constant term of a work list */
  const Sym *const *atoms; /* sorted by sym_cmp */
} Term;

struct Sym {
  SymKind kind;
  uint32_t hash;
  int maxvar; /* sym_max_var, cached */
  union {
    int64_t value;                             /* SK_CONST */
    struct { int id; const char *name; } var;  /* SK_VAR */
    struct { const Sym *a, *b; } op;           /* binary atoms */
    struct { int64_t c0; int nterms; const Term *terms; } poly; /* SK_POLY */
  } u;
};

struct SymTab {
  Arena *arena;
  const Sym **slots; /* open addressing, linear probing; cap a power of 2 */
  size_t cap, count;
};

/* ---- checked arithmetic (no UB, no compiler builtins) ---- */

bool ir_add_ok(int64_t a, int64_t b, int64_t *r) {
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return false;
  *r = a + b;
  return true;
}

bool ir_mul_ok(int64_t a, int64_t b, int64_t *r) {
  if (a == 0 || b == 0) {
    *r = 0;
    return true;
  }
  if ((a == -1 && b == INT64_MIN) || (b == -1 && a == INT64_MIN)) return false;
  if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
            : (b > 0 ? a < INT64_MIN / b : b < INT64_MAX / a))
    return false;
  *r = a * b;
  return true;
}

/* Python floor division; false on b == 0 or INT64_MIN // -1. */
static bool floordiv_ok(int64_t a, int64_t b, int64_t *r) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return false;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  *r = q;
  return true;
}

/* Python modulo (sign of the divisor); false on b == 0. */
static bool mod_ok(int64_t a, int64_t b, int64_t *r) {
  if (b == 0) return false;
  if (b == -1) {
    *r = 0; /* avoids INT64_MIN % -1, which C leaves undefined */
    return true;
  }
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  *r = m;
  return true;
}

/* ---- ordering ---- */

static int sym_cmp(const Sym *a, const Sym *b);

/* A variable is identified by its id and its name: ids are numbered per
 * kernel while one SymTab serves the whole module, so kernel b's `M` must
 * not collapse into kernel a's `N` of the same id. */
static const char *var_name(const Sym *s) {
  return s->u.var.name ? s->u.var.name : "";
}

static int cmp_i64(int64_t a, int64_t b) { return (a > b) - (a < b); }

/* Higher degree first, then atom by atom. */
static int mono_cmp(const Term *x, const Term *y) {
  if (x->natoms != y->natoms) return y->natoms - x->natoms;
  for (int i = 0; i < x->natoms; i++) {
    int c = sym_cmp(x->atoms[i], y->atoms[i]);
    if (c) return c;
  }
  return 0;
}

static int poly_cmp(const Sym *a, const Sym *b) {
  int n = a->u.poly.nterms < b->u.poly.nterms ? a->u.poly.nterms : b->u.poly.nterms;
  for (int i = 0; i < n; i++) {
    const Term *x = &a->u.poly.terms[i], *y = &b->u.poly.terms[i];
    int c = mono_cmp(x, y);
    if (!c) c = cmp_i64(x->coef, y->coef);
    if (c) return c;
  }
  if (a->u.poly.nterms != b->u.poly.nterms) return a->u.poly.nterms - b->u.poly.nterms;
  return cmp_i64(a->u.poly.c0, b->u.poly.c0);
}

static int sym_cmp(const Sym *a, const Sym *b) {
  if (a == b) return 0;
  if (a->kind != b->kind) return (int)a->kind - (int)b->kind;
  int c = 0;
  switch (a->kind) {
  case SK_CONST: c = cmp_i64(a->u.value, b->u.value); break;
  case SK_VAR:
    c = (a->u.var.id > b->u.var.id) - (a->u.var.id < b->u.var.id);
    if (!c) c = strcmp(var_name(a), var_name(b));
    break;
  case SK_POLY: c = poly_cmp(a, b); break;
  default:
    c = sym_cmp(a->u.op.a, b->u.op.a);
    if (!c) c = sym_cmp(a->u.op.b, b->u.op.b);
  }
  if (!c) ICE("two distinct Syms compare equal (hash-consing broken)");
  return c;
}

static int term_qcmp(const void *x, const void *y) { return mono_cmp(x, y); }

/* ---- hash-consing ---- */

static uint32_t mix(uint32_t h, uint64_t v) {
  h ^= (uint32_t)v + 0x9e3779b9u + (h << 6) + (h >> 2);
  h ^= (uint32_t)(v >> 32) + 0x9e3779b9u + (h << 6) + (h >> 2);
  return h;
}

static uint32_t node_hash(const Sym *s) {
  uint32_t h = mix(0x5bd1e995u, (uint64_t)s->kind);
  switch (s->kind) {
  case SK_CONST: return mix(h, (uint64_t)s->u.value);
  case SK_VAR:
    h = mix(h, (uint64_t)(int64_t)s->u.var.id);
    for (const char *p = var_name(s); *p; p++) h = mix(h, (unsigned char)*p);
    return h;
  case SK_POLY:
    h = mix(h, (uint64_t)s->u.poly.c0);
    for (int i = 0; i < s->u.poly.nterms; i++) {
      const Term *t = &s->u.poly.terms[i];
      h = mix(h, (uint64_t)t->coef);
      for (int j = 0; j < t->natoms; j++) h = mix(h, t->atoms[j]->hash);
    }
    return h;
  default: return mix(mix(h, s->u.op.a->hash), s->u.op.b->hash);
  }
}

/* Equality of one level; children are interned, so compared by address. */
static bool node_eq(const Sym *a, const Sym *b) {
  if (a->kind != b->kind || a->hash != b->hash) return false;
  switch (a->kind) {
  case SK_CONST: return a->u.value == b->u.value;
  case SK_VAR:
    return a->u.var.id == b->u.var.id && strcmp(var_name(a), var_name(b)) == 0;
  case SK_POLY:
    if (a->u.poly.c0 != b->u.poly.c0 || a->u.poly.nterms != b->u.poly.nterms) return false;
    for (int i = 0; i < a->u.poly.nterms; i++) {
      const Term *x = &a->u.poly.terms[i], *y = &b->u.poly.terms[i];
      if (x->coef != y->coef || x->natoms != y->natoms) return false;
      for (int j = 0; j < x->natoms; j++)
        if (x->atoms[j] != y->atoms[j]) return false;
    }
    return true;
  default: return a->u.op.a == b->u.op.a && a->u.op.b == b->u.op.b;
  }
}

static void tab_grow(SymTab *t) {
  size_t ncap = t->cap * 2;
  const Sym **ns = arena_alloc(t->arena, ncap * sizeof *ns);
  for (size_t i = 0; i < t->cap; i++) {
    const Sym *s = t->slots[i];
    if (!s) continue;
    size_t j = s->hash & (ncap - 1);
    while (ns[j]) j = (j + 1) & (ncap - 1);
    ns[j] = s;
  }
  t->slots = ns;
  t->cap = ncap;
}

static int node_maxvar(const Sym *s) {
  int m = 0;
  switch (s->kind) {
  case SK_CONST: return 0;
  case SK_VAR: return s->u.var.id + 1;
  case SK_POLY:
    for (int i = 0; i < s->u.poly.nterms; i++)
      for (int j = 0; j < s->u.poly.terms[i].natoms; j++)
        if (s->u.poly.terms[i].atoms[j]->maxvar > m) m = s->u.poly.terms[i].atoms[j]->maxvar;
    return m;
  default:
    m = s->u.op.a->maxvar;
    return s->u.op.b->maxvar > m ? s->u.op.b->maxvar : m;
  }
}

/* Copies a polynomial's term arrays into the arena (key may point into
 * temporaries). */
static void persist_terms(SymTab *t, Sym *s) {
  Term *terms = arena_dup(t->arena, s->u.poly.terms, (size_t)s->u.poly.nterms * sizeof *terms);
  for (int i = 0; i < s->u.poly.nterms; i++)
    terms[i].atoms = arena_dup(t->arena, terms[i].atoms,
                               (size_t)terms[i].natoms * sizeof *terms[i].atoms);
  s->u.poly.terms = terms;
}

/* Returns the interned node equal to *key, creating it if new. */
static const Sym *intern(SymTab *t, Sym key) {
  key.hash = node_hash(&key);
  size_t i = key.hash & (t->cap - 1);
  for (; t->slots[i]; i = (i + 1) & (t->cap - 1))
    if (node_eq(t->slots[i], &key)) return t->slots[i];
  Sym *s = arena_dup(t->arena, &key, sizeof key);
  if (s->kind == SK_POLY) persist_terms(t, s);
  s->maxvar = node_maxvar(s);
  t->slots[i] = s;
  if (++t->count * 4 > t->cap * 3) tab_grow(t);
  return s;
}

static const Sym *make_op(SymTab *t, SymKind k, const Sym *a, const Sym *b) {
  bool commutative = k == SK_MIN || k == SK_MAX || k == SK_XADD || k == SK_XMUL;
  if (commutative && sym_cmp(a, b) > 0) {
    const Sym *x = a;
    a = b;
    b = x;
  }
  Sym key = {.kind = k};
  key.u.op.a = a;
  key.u.op.b = b;
  return intern(t, key);
}

SymTab *sym_tab_new(Arena *a) {
  SymTab *t = arena_alloc(a, sizeof *t);
  t->arena = a;
  t->cap = 256;
  t->slots = arena_alloc(a, t->cap * sizeof *t->slots);
  return t;
}

const Sym *sym_const(SymTab *t, int64_t v) {
  Sym key = {.kind = SK_CONST};
  key.u.value = v;
  return intern(t, key);
}

const Sym *sym_var(SymTab *t, int id, const char *name) {
  if (id < 0) ICE("negative symbol id %d", id);
  Sym key = {.kind = SK_VAR};
  key.u.var.id = id;
  key.u.var.name = name; /* the first name given for an id is kept */
  return intern(t, key);
}

/* ---- polynomial work lists ---- */

/* A Sym seen as a list of terms; the constant is a term with no atoms. */
typedef struct View {
  Term one;           /* storage for a constant or a lone atom */
  const Sym *atom;    /* storage for one.atoms of a lone atom */
  const Term *terms;
  int n;
  int64_t c0;
} View;

static void view(const Sym *s, View *v) {
  v->c0 = 0;
  v->n = 0;
  v->terms = &v->one;
  if (s->kind == SK_CONST) {
    v->c0 = s->u.value;
  } else if (s->kind == SK_POLY) {
    v->terms = s->u.poly.terms;
    v->n = s->u.poly.nterms;
    v->c0 = s->u.poly.c0;
  } else {
    v->atom = s;
    v->one = (Term){.coef = 1, .natoms = 1, .atoms = &v->atom};
    v->n = 1;
  }
}

/* Appends the terms of v (its constant as an atom-less term) to w. */
static int append_terms(Term *w, int n, const View *v) {
  for (int i = 0; i < v->n; i++) w[n++] = v->terms[i];
  if (v->c0) w[n++] = (Term){.coef = v->c0};
  return n;
}

/* Sums a run of coefficients; the positive and negative parts are summed
 * apart so that whether it overflows does not depend on order. */
static bool sum_coefs(const Term *w, int n, int64_t *out) {
  int64_t pos = 0, neg = 0;
  for (int i = 0; i < n; i++) {
    if (!ir_add_ok(w[i].coef > 0 ? pos : neg, w[i].coef, w[i].coef > 0 ? &pos : &neg))
      return false;
  }
  *out = pos + neg;
  return true;
}

/* Builds the canonical Sym of a work list (any order, repeats allowed);
 * NULL when a coefficient overflows. */
static const Sym *normalize(SymTab *t, Term *w, int n) {
  qsort(w, (size_t)n, sizeof *w, term_qcmp);
  Term *out = arena_alloc(t->arena, (size_t)(n ? n : 1) * sizeof *out);
  int m = 0;
  int64_t c0 = 0;
  for (int i = 0, j; i < n; i = j) {
    for (j = i + 1; j < n && mono_cmp(&w[i], &w[j]) == 0; j++) {}
    int64_t c;
    if (!sum_coefs(w + i, j - i, &c)) return NULL;
    if (c == 0) continue;
    if (w[i].natoms == 0) c0 = c;
    else out[m++] = (Term){.coef = c, .natoms = w[i].natoms, .atoms = w[i].atoms};
  }
  if (m == 0) return sym_const(t, c0);
  if (m == 1 && c0 == 0 && out[0].coef == 1 && out[0].natoms == 1) return out[0].atoms[0];
  Sym key = {.kind = SK_POLY};
  key.u.poly.c0 = c0;
  key.u.poly.nterms = m;
  key.u.poly.terms = out;
  return intern(t, key);
}

const Sym *sym_add(SymTab *t, const Sym *a, const Sym *b) {
  int64_t x, y, r;
  if (sym_is_const(a, &x) && sym_is_const(b, &y) && ir_add_ok(x, y, &r)) return sym_const(t, r);
  View va, vb;
  view(a, &va);
  view(b, &vb);
  Term *w = arena_alloc(t->arena, (size_t)(va.n + vb.n + 2) * sizeof *w);
  int n = append_terms(w, 0, &va);
  n = append_terms(w, n, &vb);
  const Sym *s = normalize(t, w, n);
  return s ? s : make_op(t, SK_XADD, a, b);
}

/* Product of two monomials: merge of two sorted atom lists. */
static bool term_mul(Arena *ar, const Term *x, const Term *y, Term *out) {
  if (!ir_mul_ok(x->coef, y->coef, &out->coef)) return false;
  int n = x->natoms + y->natoms, i = 0, j = 0, k = 0;
  const Sym **atoms = arena_alloc(ar, (size_t)(n ? n : 1) * sizeof *atoms);
  while (i < x->natoms || j < y->natoms) {
    if (j == y->natoms || (i < x->natoms && sym_cmp(x->atoms[i], y->atoms[j]) <= 0))
      atoms[k++] = x->atoms[i++];
    else
      atoms[k++] = y->atoms[j++];
  }
  out->natoms = n;
  out->atoms = atoms;
  return true;
}

const Sym *sym_mul(SymTab *t, const Sym *a, const Sym *b) {
  int64_t x, y, r;
  bool ca = sym_is_const(a, &x), cb = sym_is_const(b, &y);
  if (ca && cb && ir_mul_ok(x, y, &r)) return sym_const(t, r);
  if ((ca && x == 0) || (cb && y == 0)) return sym_const(t, 0);
  if (ca && x == 1) return b;
  if (cb && y == 1) return a;
  View va, vb;
  view(a, &va);
  view(b, &vb);
  Term *ta = arena_alloc(t->arena, (size_t)(va.n + 1) * sizeof *ta);
  Term *tb = arena_alloc(t->arena, (size_t)(vb.n + 1) * sizeof *tb);
  int na = append_terms(ta, 0, &va), nb = append_terms(tb, 0, &vb);
  Term *w = arena_alloc(t->arena, (size_t)(na * nb + 1) * sizeof *w);
  int n = 0;
  for (int i = 0; i < na; i++)
    for (int j = 0; j < nb; j++)
      if (!term_mul(t->arena, &ta[i], &tb[j], &w[n++])) return make_op(t, SK_XMUL, a, b);
  const Sym *s = normalize(t, w, n);
  return s ? s : make_op(t, SK_XMUL, a, b);
}

const Sym *sym_neg(SymTab *t, const Sym *a) { return sym_mul(t, a, sym_const(t, -1)); }

const Sym *sym_sub(SymTab *t, const Sym *a, const Sym *b) {
  if (a == b) return sym_const(t, 0);
  return sym_add(t, a, sym_neg(t, b));
}

const Sym *sym_prod(SymTab *t, const Sym *const *v, int n) {
  const Sym *p = sym_const(t, 1);
  for (int i = 0; i < n; i++) p = sym_mul(t, p, v[i]);
  return p;
}

/* ---- exact division ---- */

/* Removes the sub-multiset d from x's atoms into *out; false if absent. */
static bool term_div(Arena *ar, const Term *xp, const Term *d, int64_t k, Term *out) {
  const Term xv = *xp, *x = &xv; /* out may alias xp */
  if (d->natoms > x->natoms) return false;
  if (k == -1) {
    if (x->coef == INT64_MIN) return false;
    out->coef = -x->coef;
  } else {
    if (x->coef % k != 0) return false;
    out->coef = x->coef / k;
  }
  const Sym **atoms = arena_alloc(ar, (size_t)(x->natoms ? x->natoms : 1) * sizeof *atoms);
  int i = 0, j = 0, n = 0;
  for (; i < x->natoms; i++) {
    int c = j < d->natoms ? sym_cmp(x->atoms[i], d->atoms[j]) : -1;
    if (c > 0) return false; /* d->atoms[j] is not in x */
    if (c == 0) j++;
    else atoms[n++] = x->atoms[i];
  }
  if (j < d->natoms) return false;
  out->natoms = n;
  out->atoms = atoms;
  return true;
}

bool sym_div_exact(SymTab *t, const Sym *a, const Sym *b, const Sym **q) {
  View va, vb;
  view(a, &va);
  view(b, &vb);
  /* b must be one monomial: a non-zero constant or coef*atoms. */
  const Term *d;
  Term dc = {.coef = vb.c0};
  if (vb.n == 0 && vb.c0 != 0) d = &dc;
  else if (vb.n == 1 && vb.c0 == 0) d = &vb.terms[0];
  else return false;
  Term *w = arena_alloc(t->arena, (size_t)(va.n + 1) * sizeof *w);
  int n = append_terms(w, 0, &va);
  for (int i = 0; i < n; i++)
    if (!term_div(t->arena, &w[i], d, d->coef, &w[i])) return false;
  const Sym *r = normalize(t, w, n);
  if (!r) return false; /* cannot happen: quotients are distinct and fit */
  *q = r;
  return true;
}

/* ---- // % min max ---- */

const Sym *sym_floordiv(SymTab *t, const Sym *a, const Sym *b) {
  int64_t x, y, r;
  bool ca = sym_is_const(a, &x), cb = sym_is_const(b, &y);
  if (ca && cb && floordiv_ok(x, y, &r)) return sym_const(t, r);
  if (cb && y == 1) return a;
  const Sym *q;
  /* (k*m) // k == m exactly; only for a constant k, since m*C // C
   * divides by zero when C == 0. */
  if (cb && y != 0 && sym_div_exact(t, a, b, &q)) return q;
  return make_op(t, SK_FLOORDIV, a, b);
}

const Sym *sym_mod(SymTab *t, const Sym *a, const Sym *b) {
  int64_t x, y, r;
  bool ca = sym_is_const(a, &x), cb = sym_is_const(b, &y);
  if (ca && cb && mod_ok(x, y, &r)) return sym_const(t, r);
  if (cb && (y == 1 || y == -1)) return sym_const(t, 0);
  const Sym *q;
  if (cb && y != 0 && sym_div_exact(t, a, b, &q)) return sym_const(t, 0);
  return make_op(t, SK_MOD, a, b);
}

const Sym *sym_min(SymTab *t, const Sym *a, const Sym *b) {
  int64_t x, y;
  if (sym_is_const(a, &x) && sym_is_const(b, &y)) return x <= y ? a : b;
  if (a == b) return a;
  return make_op(t, SK_MIN, a, b);
}

const Sym *sym_max(SymTab *t, const Sym *a, const Sym *b) {
  int64_t x, y;
  if (sym_is_const(a, &x) && sym_is_const(b, &y)) return x >= y ? a : b;
  if (a == b) return a;
  return make_op(t, SK_MAX, a, b);
}

/* ---- queries ---- */

bool sym_is_const(const Sym *s, int64_t *v) {
  if (s->kind != SK_CONST) return false;
  if (v) *v = s->u.value;
  return true;
}

bool sym_is(const Sym *s, int64_t c) { return s->kind == SK_CONST && s->u.value == c; }

bool sym_list_equal(const Sym *const *a, int na, const Sym *const *b, int nb) {
  if (na != nb) return false;
  for (int i = 0; i < na; i++)
    if (a[i] != b[i]) return false;
  return true;
}

bool sym_is_var(const Sym *s, int *id) {
  if (s->kind != SK_VAR) return false;
  if (id) *id = s->u.var.id;
  return true;
}

int sym_max_var(const Sym *s) { return s->maxvar; }

SymForm sym_form(const Sym *s, int64_t *value, int *id, const Sym **a,
                 const Sym **b, int *nterms) {
  static const SymForm forms[] = {
      [SK_VAR] = SYMF_VAR, [SK_FLOORDIV] = SYMF_FLOORDIV, [SK_MOD] = SYMF_MOD,
      [SK_MIN] = SYMF_MIN, [SK_MAX] = SYMF_MAX, [SK_XADD] = SYMF_ADD,
      [SK_XMUL] = SYMF_MUL, [SK_POLY] = SYMF_POLY, [SK_CONST] = SYMF_CONST};
  if (s->kind == SK_CONST && value) *value = s->u.value;
  if (s->kind == SK_VAR && id) *id = s->u.var.id;
  if (s->kind == SK_POLY) {
    if (value) *value = s->u.poly.c0;
    if (nterms) *nterms = s->u.poly.nterms;
  }
  if (s->kind != SK_CONST && s->kind != SK_VAR && s->kind != SK_POLY) {
    if (a) *a = s->u.op.a;
    if (b) *b = s->u.op.b;
  }
  return forms[s->kind];
}

void sym_term(const Sym *s, int i, int64_t *coef, int *natoms,
              const Sym *const **atoms) {
  if (s->kind != SK_POLY || i < 0 || i >= s->u.poly.nterms)
    ICE("sym_term: not a polynomial term");
  *coef = s->u.poly.terms[i].coef;
  *natoms = s->u.poly.terms[i].natoms;
  *atoms = s->u.poly.terms[i].atoms;
}

static bool eval_term(const Term *x, const int64_t *env, int64_t *out) {
  int64_t p = x->coef, v;
  for (int i = 0; i < x->natoms; i++)
    if (!sym_eval(x->atoms[i], env, &v) || !ir_mul_ok(p, v, &p)) return false;
  *out = p;
  return true;
}

bool sym_eval(const Sym *s, const int64_t *env, int64_t *out) {
  int64_t a, b;
  switch (s->kind) {
  case SK_CONST: *out = s->u.value; return true;
  case SK_VAR: *out = env[s->u.var.id]; return true;
  case SK_POLY: {
    int64_t acc = s->u.poly.c0, v;
    for (int i = 0; i < s->u.poly.nterms; i++)
      if (!eval_term(&s->u.poly.terms[i], env, &v) || !ir_add_ok(acc, v, &acc)) return false;
    *out = acc;
    return true;
  }
  default: break;
  }
  if (!sym_eval(s->u.op.a, env, &a) || !sym_eval(s->u.op.b, env, &b)) return false;
  switch (s->kind) {
  case SK_FLOORDIV: return floordiv_ok(a, b, out);
  case SK_MOD: return mod_ok(a, b, out);
  case SK_MIN: *out = a < b ? a : b; return true;
  case SK_MAX: *out = a > b ? a : b; return true;
  case SK_XADD: return ir_add_ok(a, b, out);
  case SK_XMUL: return ir_mul_ok(a, b, out);
  default: ICE("bad Sym kind %d", (int)s->kind);
  }
}

/* ---- printing ---- */

/* Where an expression is printed decides its parentheses. */
typedef enum Ctx {
  CTX_TOP,    /* anything goes: a whole expression, a call argument */
  CTX_LEFT,   /* left of // or %: sums need parentheses */
  CTX_STRICT, /* right of // or %, operand of * in XMUL: only atoms bare */
} Ctx;

/* INT64_MIN has no literal (9223372036854775808 overflows), so it is
 * written as an expression that folds back to it. */
static void print_int(FILE *f, int64_t v) {
  if (v == INT64_MIN) fprintf(f, "(-9223372036854775807 - 1)");
  else fprintf(f, "%" PRId64, v);
}

static void print_ctx(FILE *f, const Sym *s, Ctx ctx);

/* Prints coef*atoms (coef already stripped of a sign printed as " - "). */
static void print_term(FILE *f, const Term *x, int64_t coef) {
  /* `C*N//2` would read as (C*N)//2 and `-N//2` as (-N)//2, so a // or %
   * atom is bracketed unless it stands alone. */
  bool alone = x->natoms == 1 && coef == 1;
  if (coef == -1) {
    fputc('-', f);
  } else if (coef != 1) {
    print_int(f, coef);
    fputc('*', f);
  }
  for (int i = 0; i < x->natoms; i++) {
    if (i) fputc('*', f);
    SymKind k = x->atoms[i]->kind;
    bool paren = !alone && (k == SK_FLOORDIV || k == SK_MOD);
    if (paren) fputc('(', f);
    print_ctx(f, x->atoms[i], CTX_TOP);
    if (paren) fputc(')', f);
  }
}

static void print_poly(FILE *f, const Sym *s) {
  for (int i = 0; i < s->u.poly.nterms; i++) {
    const Term *x = &s->u.poly.terms[i];
    int64_t c = x->coef;
    if (i && c < 0 && c != INT64_MIN) {
      fputs(" - ", f);
      c = -c;
    } else if (i) {
      fputs(" + ", f);
    }
    print_term(f, x, c);
  }
  int64_t c0 = s->u.poly.c0;
  if (c0 < 0 && c0 != INT64_MIN) fprintf(f, " - %" PRId64, -c0);
  else if (c0 != 0) {
    fputs(" + ", f);
    print_int(f, c0);
  }
}

static bool needs_parens(const Sym *s, Ctx ctx) {
  if (ctx == CTX_TOP) return false;
  switch (s->kind) {
  case SK_CONST: return s->u.value < 0 && s->u.value != INT64_MIN;
  case SK_POLY:
    if (ctx == CTX_STRICT || s->u.poly.c0 != 0 || s->u.poly.nterms > 1) return true;
    return false; /* a single product reads fine left of // */
  case SK_FLOORDIV:
  case SK_MOD: return ctx == CTX_STRICT;
  default: return false; /* variables, calls, XADD/XMUL (self-bracketed) */
  }
}

static void print_binop(FILE *f, const Sym *s, const char *op) {
  print_ctx(f, s->u.op.a, CTX_LEFT);
  fputs(op, f);
  print_ctx(f, s->u.op.b, CTX_STRICT);
}

static void print_ctx(FILE *f, const Sym *s, Ctx ctx) {
  bool paren = needs_parens(s, ctx);
  if (paren) fputc('(', f);
  switch (s->kind) {
  case SK_CONST: print_int(f, s->u.value); break;
  case SK_VAR: fputs(s->u.var.name ? s->u.var.name : "?", f); break;
  case SK_POLY: print_poly(f, s); break;
  case SK_FLOORDIV: print_binop(f, s, "//"); break;
  case SK_MOD: print_binop(f, s, "%"); break;
  case SK_MIN:
  case SK_MAX:
    fputs(s->kind == SK_MIN ? "min(" : "max(", f);
    print_ctx(f, s->u.op.a, CTX_TOP);
    fputs(", ", f);
    print_ctx(f, s->u.op.b, CTX_TOP);
    fputc(')', f);
    break;
  case SK_XADD:
  case SK_XMUL:
    /* Operands bracketed so reading back rebuilds exactly a OP b. */
    fputc('(', f);
    print_ctx(f, s->u.op.a, CTX_STRICT);
    fputs(s->kind == SK_XADD ? " + " : "*", f);
    print_ctx(f, s->u.op.b, CTX_STRICT);
    fputc(')', f);
    break;
  }
  if (paren) fputc(')', f);
}

void sym_print(FILE *f, const Sym *s) { print_ctx(f, s, CTX_TOP); }

char *sym_str(Arena *a, const Sym *s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) ICE("open_memstream failed");
  sym_print(f, s);
  if (fclose(f) != 0) ICE("open_memstream failed");
  char *r = arena_strndup(a, buf, len);
  free(buf);
  return r;
}
