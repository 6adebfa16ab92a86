/* symprove.c — normalizing and deciding size expressions under facts.
 *
 * Needs: sym.h (construction, sym_form/sym_term to read structure,
 * sym_eval for the generic comparison), an arena for facts.
 * Produces: the symprove.h API.
 *
 * Normal form (sym_simplify), built bottom-up from simplified children:
 *  - x // k and x % k for a constant k > 0: x % k is x - k*(x//k);
 *    P + e//m (a term e//m with coefficient 1, m > 0) is (m*P + e)//m and
 *    (y//m)//k is y//(m*k), so nested divisions merge into one; then each
 *    coefficient c of the dividend splits as k*(c//k) + c%k, the c//k
 *    parts leave the division, and what stays is divided by the gcd of
 *    its coefficients and k.  All of these are identities over the
 *    integers, so they hold at every assignment.  What stays is dropped
 *    when its interval lies within one multiple of k.
 *  - min(a, b) and max(a, b) fold when the interval of b - a is on one
 *    side of 0 under the facts.
 * Intervals: each variable's range from the facts, propagated through
 * + * // min max; an end that leaves int64 becomes infinite (outwards, so
 * intervals stay sound).  Intervals ignore correlation (H - min(H, 1) is
 * in [-1, +inf) for H >= 0), which the range split in decide() recovers:
 * an unresolved min/max of arguments whose difference is linear in one
 * variable v changes sides at one value t of v, so v's range is split
 * into [lo, t] and [t + 1, hi] and each half is decided anew. */
#include "symprove.h"

#include <string.h>

enum { MAX_SPLITS = 8, MAX_DIV_MERGES = 16, GEN_POINTS = 8, GEN_MAXVARS = 256 };

#define NINF INT64_MIN
#define PINF INT64_MAX

typedef struct Rng {
  int64_t lo, hi; /* NINF / PINF for no bound */
} Rng;

typedef struct P {
  SymTab *t;
  const SymFacts *f;
} P;

/* ---- checked and extended arithmetic ---------------------------------- */

/* Python floor division for b != 0 (INT64_MIN // -1 never reaches it:
 * callers divide by k > 0 or by coefficients of bounded relations). */
static int64_t fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  return q;
}

static int64_t fmod_pos(int64_t a, int64_t k) { return a - fdiv(a, k) * k; }

static int64_t gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t r = a % b;
    a = b;
    b = r;
  }
  return a < 0 ? -a : a;
}

static bool is_inf(int64_t v) { return v == NINF || v == PINF; }

/* a + b rounded outwards: up for an upper end, down for a lower one. */
static int64_t ext_add(int64_t a, int64_t b, bool up) {
  if (a == NINF || b == NINF) return up && (a == PINF || b == PINF) ? PINF : NINF;
  if (a == PINF || b == PINF) return PINF;
  int64_t r;
  return ir_add_ok(a, b, &r) ? r : up ? PINF : NINF;
}

static int64_t ext_mul(int64_t a, int64_t b, bool up) {
  if (a == 0 || b == 0) return 0; /* true values are finite */
  bool neg = (a < 0) != (b < 0);
  if (is_inf(a) || is_inf(b)) return neg ? NINF : PINF;
  int64_t r;
  return ir_mul_ok(a, b, &r) ? r : up ? PINF : NINF;
}

static Rng rng_add(Rng x, Rng y) {
  return (Rng){ext_add(x.lo, y.lo, false), ext_add(x.hi, y.hi, true)};
}

static Rng rng_mul(Rng x, Rng y) {
  int64_t e[4][2] = {{x.lo, y.lo}, {x.lo, y.hi}, {x.hi, y.lo}, {x.hi, y.hi}};
  Rng r = {PINF, NINF};
  for (int i = 0; i < 4; i++) {
    int64_t lo = ext_mul(e[i][0], e[i][1], false), hi = ext_mul(e[i][0], e[i][1], true);
    if (lo < r.lo) r.lo = lo;
    if (hi > r.hi) r.hi = hi;
  }
  return r;
}

static Rng rng_div(Rng x, int64_t k) {
  return (Rng){is_inf(x.lo) ? x.lo : fdiv(x.lo, k), is_inf(x.hi) ? x.hi : fdiv(x.hi, k)};
}

/* ---- reading a Sym as c0 + sum of terms -------------------------------- */

static int nterms(const Sym *s, int64_t *c0) {
  int64_t v = 0;
  int n = 0;
  SymForm k = sym_form(s, &v, NULL, NULL, NULL, &n);
  *c0 = k == SYMF_CONST || k == SYMF_POLY ? v : 0;
  return k == SYMF_CONST ? 0 : k == SYMF_POLY ? n : 1;
}

/* Term i; *one holds the atom of a lone-atom Sym. */
static void term(const Sym *s, int i, int64_t *coef, int *natoms,
                 const Sym *const **atoms, const Sym **one) {
  if (sym_form(s, NULL, NULL, NULL, NULL, NULL) == SYMF_POLY) {
    sym_term(s, i, coef, natoms, atoms);
    return;
  }
  *one = s;
  *coef = 1;
  *natoms = 1;
  *atoms = one;
}

static const Sym *K(P *p, int64_t v) { return sym_const(p->t, v); }

/* x when s is c*x + c0 for one variable x (c != 0). */
static bool linear1(const Sym *s, int *id, int64_t *c, int64_t *c0) {
  int64_t coef;
  int natoms;
  const Sym *const *atoms, *one;
  if (nterms(s, c0) != 1) return false;
  term(s, 0, &coef, &natoms, &atoms, &one);
  if (natoms != 1 || !sym_is_var(atoms[0], id)) return false;
  *c = coef;
  return true;
}

/* e and m when s is c*(e//m) + c0 for a constant m > 0. */
static bool div_term(const Sym *s, const Sym **e, int64_t *m, int64_t *c,
                     int64_t *c0) {
  int64_t coef;
  int natoms;
  const Sym *const *atoms, *one, *b;
  if (nterms(s, c0) != 1) return false;
  term(s, 0, &coef, &natoms, &atoms, &one);
  if (natoms != 1 || sym_form(atoms[0], NULL, NULL, e, &b, NULL) != SYMF_FLOORDIV ||
      !sym_is_const(b, m) || *m <= 0)
    return false;
  *c = coef;
  return true;
}

/* ---- intervals --------------------------------------------------------- */

static Rng var_rng(const SymFacts *f, int id) {
  if (!f || id >= f->n) return (Rng){0, PINF};
  return (Rng){f->lo[id], f->hi[id]};
}

static Rng rng_of(const SymFacts *f, const Sym *s);

static Rng rng_poly(const SymFacts *f, const Sym *s) {
  int64_t c0, coef;
  int n = nterms(s, &c0), natoms;
  const Sym *const *atoms, *one;
  Rng r = {c0, c0};
  for (int i = 0; i < n; i++) {
    term(s, i, &coef, &natoms, &atoms, &one);
    Rng x = {coef, coef};
    for (int j = 0; j < natoms; j++) x = rng_mul(x, rng_of(f, atoms[j]));
    r = rng_add(r, x);
  }
  return r;
}

static Rng rng_of(const SymFacts *f, const Sym *s) {
  int64_t v = 0, k;
  int id = 0;
  const Sym *a = NULL, *b = NULL;
  Rng ra, rb, full = {NINF, PINF};
  switch (sym_form(s, &v, &id, &a, &b, NULL)) {
  case SYMF_CONST: return (Rng){v, v};
  case SYMF_VAR: return var_rng(f, id);
  case SYMF_POLY: return rng_poly(f, s);
  case SYMF_ADD: return rng_add(rng_of(f, a), rng_of(f, b));
  case SYMF_MUL: return rng_mul(rng_of(f, a), rng_of(f, b));
  case SYMF_MOD: return sym_is_const(b, &k) && k > 0 ? (Rng){0, k - 1} : full;
  case SYMF_FLOORDIV:
    ra = rng_of(f, a);
    if (sym_is_const(b, &k) && k > 0) return rng_div(ra, k);
    rb = rng_of(f, b);
    return ra.lo >= 0 && rb.lo >= 1 ? (Rng){0, ra.hi} : full;
  case SYMF_MIN:
  case SYMF_MAX: break;
  }
  ra = rng_of(f, a);
  rb = rng_of(f, b);
  if (sym_form(s, NULL, NULL, NULL, NULL, NULL) == SYMF_MIN)
    return (Rng){ra.lo < rb.lo ? ra.lo : rb.lo, ra.hi < rb.hi ? ra.hi : rb.hi};
  return (Rng){ra.lo > rb.lo ? ra.lo : rb.lo, ra.hi > rb.hi ? ra.hi : rb.hi};
}

/* ---- normal form ------------------------------------------------------- */

static const Sym *simp(P *p, const Sym *s);

/* The first term e//m (coefficient 1, degree 1, constant m > 0) of s. */
static const Sym *inner_div(const Sym *s, const Sym **e, int64_t *m) {
  int64_t c0, coef;
  int n = nterms(s, &c0), natoms;
  const Sym *const *atoms, *one, *b;
  for (int i = 0; i < n; i++) {
    term(s, i, &coef, &natoms, &atoms, &one);
    if (coef == 1 && natoms == 1 &&
        sym_form(atoms[0], NULL, NULL, e, &b, NULL) == SYMF_FLOORDIV &&
        sym_is_const(b, m) && *m > 0)
      return atoms[0];
  }
  return NULL;
}

/* x // k for a simplified x and a constant k > 0 (see the file header). */
static const Sym *div_const(P *p, const Sym *x, int64_t k, int merges) {
  if (k == 1) return x;
  const Sym *e, *atom;
  int64_t m, mk, c0, coef;
  if (merges < MAX_DIV_MERGES && (atom = inner_div(x, &e, &m)) && ir_mul_ok(m, k, &mk)) {
    const Sym *rest = sym_sub(p->t, x, atom);
    return div_const(p, sym_add(p->t, sym_mul(p->t, K(p, m), rest), e), mk, merges + 1);
  }
  int n = nterms(x, &c0), natoms;
  const Sym *const *atoms, *one;
  const Sym *q = K(p, fdiv(c0, k)), *r = K(p, fmod_pos(c0, k));
  int64_t g = gcd(k, fmod_pos(c0, k));
  for (int i = 0; i < n; i++) {
    term(x, i, &coef, &natoms, &atoms, &one);
    const Sym *mono = sym_prod(p->t, atoms, natoms);
    q = sym_add(p->t, q, sym_mul(p->t, K(p, fdiv(coef, k)), mono));
    r = sym_add(p->t, r, sym_mul(p->t, K(p, fmod_pos(coef, k)), mono));
    g = gcd(g, fmod_pos(coef, k));
  }
  Rng rr = rng_of(p->f, r);
  if (!is_inf(rr.lo) && !is_inf(rr.hi) && fdiv(rr.lo, k) == fdiv(rr.hi, k))
    return sym_add(p->t, q, K(p, fdiv(rr.lo, k)));
  const Sym *rg;
  if (g > 1 && sym_div_exact(p->t, r, K(p, g), &rg)) {
    r = rg;
    k /= g;
  }
  return sym_add(p->t, q, sym_floordiv(p->t, r, K(p, k)));
}

static const Sym *simp_minmax(P *p, const Sym *a, const Sym *b, bool is_min) {
  if (a == b) return a;
  Rng d = rng_of(p->f, sym_sub(p->t, b, a));
  if (d.lo >= 0) return is_min ? a : b; /* a <= b */
  if (d.hi <= 0) return is_min ? b : a;
  return is_min ? sym_min(p->t, a, b) : sym_max(p->t, a, b);
}

static const Sym *simp_poly(P *p, const Sym *s) {
  int64_t c0, coef;
  int n = nterms(s, &c0), natoms;
  const Sym *const *atoms, *one;
  const Sym *acc = K(p, c0);
  for (int i = 0; i < n; i++) {
    term(s, i, &coef, &natoms, &atoms, &one);
    const Sym *x = K(p, coef);
    for (int j = 0; j < natoms; j++) x = sym_mul(p->t, x, simp(p, atoms[j]));
    acc = sym_add(p->t, acc, x);
  }
  return acc;
}

static const Sym *simp(P *p, const Sym *s) {
  int64_t v = 0, k = 0;
  int id = 0;
  const Sym *a = NULL, *b = NULL;
  SymForm form = sym_form(s, &v, &id, &a, &b, NULL);
  if (form == SYMF_CONST) return s;
  if (form == SYMF_VAR) {
    Rng r = var_rng(p->f, id);
    return r.lo == r.hi ? K(p, r.lo) : s;
  }
  if (form == SYMF_POLY) return simp_poly(p, s);
  a = simp(p, a);
  b = simp(p, b);
  bool kpos = sym_is_const(b, &k) && k > 0;
  switch (form) {
  case SYMF_FLOORDIV: return kpos ? div_const(p, a, k, 0) : sym_floordiv(p->t, a, b);
  case SYMF_MOD:
    if (!kpos) return sym_mod(p->t, a, b);
    return sym_sub(p->t, a, sym_mul(p->t, b, div_const(p, a, k, 0)));
  case SYMF_MIN: return simp_minmax(p, a, b, true);
  case SYMF_MAX: return simp_minmax(p, a, b, false);
  case SYMF_ADD: return sym_add(p->t, a, b);
  default: return sym_mul(p->t, a, b);
  }
}

const Sym *sym_simplify(SymTab *t, const SymFacts *f, const Sym *s) {
  P p = {t, f};
  return simp(&p, s);
}

/* ---- facts ------------------------------------------------------------- */

SymFacts sym_facts_new(Arena *a, int nvars) {
  SymFacts f = {.n = nvars};
  f.lo = arena_alloc(a, sizeof *f.lo * (size_t)(nvars + 1));
  f.hi = arena_alloc(a, sizeof *f.hi * (size_t)(nvars + 1));
  for (int i = 0; i < nvars; i++) f.hi[i] = PINF;
  return f;
}

/* ceil(a / b) for b > 0. */
static int64_t cdiv(int64_t a, int64_t b) { return -fdiv(-a, b); }

/* Records d >= m where d bounds one variable (see sym_facts_add). */
static void bound_ge(SymFacts *f, const Sym *d, int64_t m, int depth) {
  int id;
  int64_t c, c0, rhs, k, q;
  const Sym *e;
  if (depth > 8 || m == NINF || m == PINF) return;
  if (linear1(d, &id, &c, &c0)) {
    /* c*v >= m - c0: v >= ceil((m - c0)/c) for c > 0, v <= floor(...) for c < 0. */
    if (id >= f->n || c0 == INT64_MIN || !ir_add_ok(m, -c0, &rhs) || rhs == INT64_MIN) return;
    if (c > 0 && cdiv(rhs, c) > f->lo[id]) f->lo[id] = cdiv(rhs, c);
    if (c < 0 && !(c == -1 && rhs == INT64_MIN) && fdiv(rhs, c) < f->hi[id])
      f->hi[id] = fdiv(rhs, c);
    return;
  }
  /* c*(e//k) + c0 >= m with c > 0: e//k >= q, i.e. e >= k*q. */
  if (div_term(d, &e, &k, &c, &c0) && c > 0 && c0 != INT64_MIN && ir_add_ok(m, -c0, &rhs) && rhs != INT64_MIN &&
      ir_mul_ok(k, cdiv(rhs, c), &q))
    bound_ge(f, e, q, depth + 1);
}

void sym_facts_add(SymTab *t, SymFacts *f, const Sym *lhs, SymRel rel,
                   const Sym *rhs) {
  const Sym *d = sym_simplify(t, f, sym_sub(t, rhs, lhs));
  bound_ge(f, d, rel == SYM_LT ? 1 : 0, 0);
  if (rel == SYM_EQ) bound_ge(f, sym_neg(t, d), 0, 0);
}

/* ---- deciding ---------------------------------------------------------- */

/* A variable and value t where an unresolved min/max in s changes sides:
 * its arguments differ by c*v + c0, whose sign is constant on v <= t and
 * on v >= t + 1 for t = floor(-c0 / c); only splits inside v's range. */
static bool find_split(P *p, const Sym *s, int *v, int64_t *t) {
  const Sym *a = NULL, *b = NULL;
  SymForm form = sym_form(s, NULL, NULL, &a, &b, NULL);
  if (form == SYMF_CONST || form == SYMF_VAR) return false;
  if (form == SYMF_POLY) {
    int64_t c0, coef;
    int n = nterms(s, &c0), natoms;
    const Sym *const *atoms, *one;
    for (int i = 0; i < n; i++) {
      term(s, i, &coef, &natoms, &atoms, &one);
      for (int j = 0; j < natoms; j++)
        if (find_split(p, atoms[j], v, t)) return true;
    }
    return false;
  }
  if (find_split(p, a, v, t) || find_split(p, b, v, t)) return true;
  if (form != SYMF_MIN && form != SYMF_MAX) return false;
  int64_t c, c0;
  if (!linear1(sym_sub(p->t, a, b), v, &c, &c0) || c0 == INT64_MIN || *v >= p->f->n)
    return false;
  *t = fdiv(-c0, c);
  Rng r = var_rng(p->f, *v);
  return r.lo <= *t && *t < r.hi;
}

static SymTruth decide_d(SymTab *t, const SymFacts *f, const Sym *d, bool eq,
                         int depth);

static SymTruth decide_half(SymTab *t, const SymFacts *f, const Sym *d, bool eq,
                            int depth, int v, int64_t lo, int64_t hi) {
  SymFacts g = *f;
  int64_t los[GEN_MAXVARS], his[GEN_MAXVARS];
  memcpy(los, f->lo, sizeof *los * (size_t)f->n);
  memcpy(his, f->hi, sizeof *his * (size_t)f->n);
  los[v] = lo;
  his[v] = hi;
  g.lo = los;
  g.hi = his;
  return decide_d(t, &g, sym_simplify(t, &g, d), eq, depth + 1);
}

/* d == 0 (eq) or d >= 0 (!eq) at every assignment within f. */
static SymTruth decide_d(SymTab *t, const SymFacts *f, const Sym *d, bool eq,
                         int depth) {
  Rng r = rng_of(f, d);
  if (eq && (r.lo > 0 || r.hi < 0)) return SYM_NO;
  if (eq && r.lo == 0 && r.hi == 0) return SYM_YES;
  if (!eq && r.lo >= 0) return SYM_YES;
  if (!eq && r.hi < 0) return SYM_NO;
  int v;
  int64_t at;
  P p = {t, f};
  if (depth >= MAX_SPLITS || f->n > GEN_MAXVARS || !find_split(&p, d, &v, &at))
    return SYM_UNKNOWN;
  SymTruth x = decide_half(t, f, d, eq, depth, v, f->lo[v], at);
  if (x == SYM_UNKNOWN) return x;
  SymTruth y = decide_half(t, f, d, eq, depth, v, at + 1, f->hi[v]);
  return x == y ? x : SYM_UNKNOWN;
}

SymTruth sym_decide(SymTab *t, const SymFacts *f, const Sym *lhs, SymRel rel,
                    const Sym *rhs) {
  if (lhs == rhs) return rel == SYM_LT ? SYM_NO : SYM_YES;
  const Sym *d = sym_sub(t, rhs, lhs);
  if (rel == SYM_LT) d = sym_sub(t, d, sym_const(t, 1));
  /* Splitting needs a range per variable of d: widen f to cover them. */
  int nv = sym_max_var(d);
  int64_t lo[GEN_MAXVARS + 1], hi[GEN_MAXVARS + 1];
  SymFacts g = {.n = nv, .lo = lo, .hi = hi};
  if (nv > GEN_MAXVARS) return SYM_UNKNOWN;
  for (int i = 0; i < nv; i++) {
    Rng r = var_rng(f, i);
    lo[i] = r.lo;
    hi[i] = r.hi;
  }
  return decide_d(t, &g, sym_simplify(t, &g, d), rel == SYM_EQ, 0);
}

/* ---- generic comparison ------------------------------------------------ */

bool sym_differ_generically(const SymFacts *f, const Sym *a, const Sym *b) {
  int nv = sym_max_var(a) > sym_max_var(b) ? sym_max_var(a) : sym_max_var(b);
  if (nv > GEN_MAXVARS) return false;
  int64_t env[GEN_MAXVARS + 1];
  int tried = 0;
  for (int pt = 0; pt < GEN_POINTS; pt++) {
    for (int i = 0; i < nv; i++) {
      Rng r = var_rng(f, i);
      int64_t base = r.lo > 2 && r.lo < (int64_t)1 << 40 ? r.lo : 2;
      env[i] = base + (pt * 37 + i * 40) % 61; /* distinct across variables */
      if (env[i] > r.hi) env[i] = r.hi;
    }
    int64_t x, y;
    if (!sym_eval(a, env, &x) || !sym_eval(b, env, &y)) continue;
    if (x == y) return false;
    tried++;
  }
  return tried > 0;
}
