/* split.c — one module's functions split into parts that compile on
 * threads (kernel.c), or with different pipelines: the functions joined
 * by direct calls, or by a writable global they share, stay in one part
 * (so nothing inlinable is cut and no global is duplicated); functions
 * marked light (cpu_mark_light: the GEMM's finished vector code and its
 * driver) get parts of their own, which go through the light pipeline
 * (machine.c), and a full function's direct call of a light one may
 * cross parts (it is not inlined then); parts are balanced by
 * instruction count (a light function's weighing less, a cold entry's
 * without loops less still: LIGHT_WEIGHT, COLD_WEIGHT).  A function that one part defines and another only takes the
 * address of (an outlined body handed to tdsl_parallel_for) becomes a
 * hidden global, named after the kernel so that two objects never clash.
 * The module is written as bitcode once; each part reads it lazily into
 * its own LLVMContext on its thread, its own bodies only.  Also
 * the cold mark (cpu_mark_cold: a kernel's entry, machine.c).
 * Needs: cpu.h, llvm-c's bitcode reader and writer.  Used by: kernel.c. */
#include <stdlib.h>
#include <string.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>

#include "cpu.h"

typedef struct Fns {
  LLVMValueRef *f;
  int n;
  int *parent;
  LLVMValueRef *glob; /* writable globals and the function first using each */
  int *gfn, ng;
} Fns;

static int find(int *p, int i) {
  while (p[i] != i) i = p[i] = p[p[i]];
  return i;
}

static void join(int *p, int a, int b) {
  a = find(p, a), b = find(p, b);
  if (a != b) p[a < b ? b : a] = a < b ? a : b;
}

static int index_of(const Fns *s, LLVMValueRef f) {
  for (int i = 0; i < s->n; i++)
    if (s->f[i] == f) return i;
  return -1;
}

/* Operand v of function i: joins i with a writable global's users and
 * returns the defined function v names (-1 if none); looks one level into
 * constant expressions. */
static int operand(Fns *s, int i, LLVMValueRef v, int depth) {
  if (LLVMIsAFunction(v)) return index_of(s, v);
  if (LLVMIsAGlobalVariable(v)) {
    if (LLVMIsGlobalConstant(v)) return -1;
    for (int g = 0; g < s->ng; g++)
      if (s->glob[g] == v) {
        join(s->parent, i, s->gfn[g]);
        return -1;
      }
    s->glob = realloc(s->glob, sizeof *s->glob * (size_t)(s->ng + 1));
    s->gfn = realloc(s->gfn, sizeof *s->gfn * (size_t)(s->ng + 1));
    if (!s->glob || !s->gfn) ICE("out of memory");
    s->glob[s->ng] = v, s->gfn[s->ng++] = i;
    return -1;
  }
  if (depth < 2 && LLVMIsAConstantExpr(v))
    for (int k = 0, n = LLVMGetNumOperands(v); k < n; k++) {
      int j = operand(s, i, LLVMGetOperand(v, (unsigned)k), depth + 1);
      if (j >= 0) join(s->parent, i, j); /* rare: keep together */
    }
  return -1;
}

/* The marks of light and cold functions: string attributes, which code
 * generation ignores. */
static const char light_attr[] = "tdsl-light", cold_attr[] = "tdsl-cold";

static void set_mark(LLVMValueRef fn, const char *a, unsigned n) {
  LLVMContextRef ctx = LLVMGetTypeContext(LLVMTypeOf(fn));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateStringAttribute(ctx, a, n, "", 0));
}

static bool has_mark(LLVMValueRef fn, const char *a, unsigned n) {
  return LLVMGetStringAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a, n) != NULL;
}

void cpu_mark_light(LLVMValueRef fn) { set_mark(fn, light_attr, sizeof light_attr - 1); }

void cpu_mark_full(LLVMValueRef fn) {
  LLVMRemoveStringAttributeAtIndex(fn, LLVMAttributeFunctionIndex, light_attr,
                                   sizeof light_attr - 1);
}

bool cpu_is_light(LLVMValueRef fn) { return has_mark(fn, light_attr, sizeof light_attr - 1); }

void cpu_mark_cold(LLVMValueRef fn) { set_mark(fn, cold_attr, sizeof cold_attr - 1); }

bool cpu_is_cold(LLVMValueRef fn) { return has_mark(fn, cold_attr, sizeof cold_attr - 1); }

/* Block j of bbs[0..n) that t's successor e is (n if none). */
static int succ_index(LLVMValueRef t, unsigned e, LLVMBasicBlockRef *bbs, int n) {
  LLVMBasicBlockRef to = LLVMGetSuccessor(t, e);
  int j = 0;
  while (j < n && bbs[j] != to) j++;
  return j;
}

/* Whether f has no cycle among its blocks (no loop): Kahn's order over
 * the branches of at most 1024 blocks (more: treated as having one). */
static bool acyclic(LLVMValueRef f) {
  enum { MAXB = 1024 };
  LLVMBasicBlockRef bbs[MAXB];
  LLVMValueRef term[MAXB];
  int n = 0, indeg[MAXB] = {0}, ready[MAXB], nr = 0;
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb)) {
    if (n == MAXB) return false;
    term[n] = LLVMGetBasicBlockTerminator(bb);
    bbs[n++] = bb;
  }
  for (int i = 0; i < n; i++)
    for (unsigned e = 0, ne = term[i] ? LLVMGetNumSuccessors(term[i]) : 0; e < ne; e++) {
      int j = succ_index(term[i], e, bbs, n);
      if (j < n) indeg[j]++;
    }
  for (int i = 0; i < n; i++)
    if (!indeg[i]) ready[nr++] = i;
  for (int k = 0; k < nr; k++) /* blocks whose predecessors all came before */
    for (unsigned e = 0, ne = term[ready[k]] ? LLVMGetNumSuccessors(term[ready[k]]) : 0; e < ne; e++) {
      int j = succ_index(term[ready[k]], e, bbs, n);
      if (j < n && --indeg[j] == 0) ready[nr++] = j;
    }
  return nr == n;
}

bool cpu_is_cold_acyclic(LLVMValueRef fn) {
  return !LLVMIsDeclaration(fn) && cpu_is_cold(fn) && acyclic(fn);
}

/* References that may cross parts (addresses taken, a full function's
 * calls of a light one): from function a to function b. */
typedef struct Ref { int a, b; } Ref;

/* A light instruction's cost against a fully optimized one's: the light
 * pipeline and the smaller code it leaves took about 0.4 of the time per
 * emitted instruction on the GEMM helpers (examples/mlp.tdsl).  A cold
 * function without loops (cpu_is_cold_acyclic: a kernel's entry, code
 * generation at LLVM's lowest level) took about a quarter of a full
 * function's (mlp's entry: 15 ms for 784 instructions, its nests and
 * epilogues 0.07 ms per instruction). */
#define LIGHT_WEIGHT(n) ((n) * 2 / 5)
#define COLD_WEIGHT(n) ((n) / 4)

int cpu_split_module(LLVMModuleRef mod, const char *kernel, int nparts, int min_insts,
                     int **owner_out, LLVMMemoryBufferRef *bc, CpuPart *parts) {
  Fns s = {0};
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f)) {
      s.f = realloc(s.f, sizeof *s.f * (size_t)(s.n + 1));
      if (!s.f) ICE("out of memory");
      s.f[s.n++] = f;
    }
  s.parent = malloc(sizeof *s.parent * (size_t)(s.n + 1));
  long *size = calloc((size_t)s.n + 1, sizeof *size);
  Ref *refs = NULL;
  int nrefs = 0;
  if (!s.parent || !size) ICE("out of memory");
  for (int i = 0; i < s.n; i++) s.parent[i] = i;
  long total = 0;
  for (int i = 0; i < s.n; i++)
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(s.f[i]); bb; bb = LLVMGetNextBasicBlock(bb))
      for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
        size[i]++, total++;
        bool is_call = LLVMIsACallInst(in) != NULL;
        LLVMValueRef callee = is_call ? LLVMGetCalledValue(in) : NULL;
        for (int k = 0, n = LLVMGetNumOperands(in); k < n; k++) {
          LLVMValueRef v = LLVMGetOperand(in, (unsigned)k);
          int j = operand(&s, i, v, 0);
          if (j < 0) continue;
          if (v == callee && cpu_is_light(s.f[i]) == cpu_is_light(s.f[j])) {
            join(s.parent, i, j); /* a full function's call of a light one may cross parts */
          } else {
            refs = realloc(refs, sizeof *refs * (size_t)(nrefs + 1));
            if (!refs) ICE("out of memory");
            refs[nrefs++] = (Ref){i, j};
          }
        }
      }
  for (int i = 0; i < s.n; i++)
    if (cpu_is_cold_acyclic(s.f[i])) size[i] = COLD_WEIGHT(size[i]);
  /* Components, each light when all its functions are; the two kinds
   * never share a part.  Per kind, largest first, each component to the
   * least loaded of that kind's parts. */
  int *owner = malloc(sizeof *owner * (size_t)(s.n + 1));
  long *comp = calloc((size_t)s.n + 1, sizeof *comp);
  bool *heavy = calloc((size_t)s.n + 1, sizeof *heavy);
  int *order = malloc(sizeof *order * (size_t)(s.n + 1)), ncomp = 0;
  if (!owner || !comp || !heavy || !order) ICE("out of memory");
  for (int i = 0; i < s.n; i++) {
    int r = find(s.parent, i);
    comp[r] += size[i];
    if (!cpu_is_light(s.f[i])) heavy[r] = true;
  }
  int nkind[2] = {0, 0}; /* components: full, light */
  for (int i = 0; i < s.n; i++)
    if (find(s.parent, i) == i) {
      order[ncomp++] = i;
      if (!heavy[i]) comp[i] = LIGHT_WEIGHT(comp[i]);
      nkind[!heavy[i]]++;
    }
  if (nparts > 32) nparts = 32;
  if (nparts < 1) nparts = 1;
  int first[2] = {0, 0}, nk[2]; /* each kind's parts: [first, first + nk) */
  for (int k = 0; k < 2; k++) {
    nk[k] = nkind[k] < nparts ? nkind[k] : nparts;
    if (total < min_insts && nk[k] > 1) nk[k] = 1;
  }
  first[1] = nk[0];
  int used = nk[0] + nk[1];
  for (int p = 0; p < used; p++) parts[p] = (CpuPart){.light = p >= first[1], .cost = 0};
  if (used < 2) parts[0] = (CpuPart){.light = nkind[0] == 0 && nkind[1] > 0, .cost = total};
  if (used >= 2) {
    for (int a = 0; a < ncomp; a++) /* sort by size, descending (few components) */
      for (int b = a + 1; b < ncomp; b++)
        if (comp[order[b]] > comp[order[a]]) {
          int t = order[a];
          order[a] = order[b], order[b] = t;
        }
    for (int a = 0; a < ncomp; a++) {
      int k = !heavy[order[a]], best = first[k];
      for (int p = first[k] + 1; p < first[k] + nk[k]; p++)
        if (parts[p].cost < parts[best].cost) best = p;
      parts[best].cost += comp[order[a]];
      owner[order[a]] = best;
    }
    for (int i = 0; i < s.n; i++) owner[i] = owner[find(s.parent, i)];
  }
  if (used >= 2) {
    for (int r = 0; r < nrefs; r++) {
      LLVMValueRef f = s.f[refs[r].b];
      if (owner[refs[r].a] == owner[refs[r].b] || LLVMGetLinkage(f) == LLVMExternalLinkage)
        continue;
      size_t len;
      const char *name = LLVMGetValueName2(f, &len);
      size_t kl = strlen(kernel);
      char *nn = malloc(len + kl + 2);
      if (!nn) ICE("out of memory");
      if (len > kl && !strncmp(name, kernel, kl) && name[kl] == '.')
        memcpy(nn, name, len), nn[len] = 0;
      else
        snprintf(nn, len + kl + 2, "%s.%.*s", kernel, (int)len, name);
      LLVMSetLinkage(f, LLVMExternalLinkage);
      LLVMSetVisibility(f, LLVMHiddenVisibility);
      LLVMSetValueName2(f, nn, strlen(nn));
      free(nn);
    }
    *bc = LLVMWriteBitcodeToMemoryBuffer(mod);
    *owner_out = owner;
  } else {
    free(owner);
    used = 0;
  }
  free(s.f), free(s.parent), free(s.glob), free(s.gfn);
  free(size), free(refs), free(comp), free(heavy), free(order);
  return used >= 2 ? used : 0;
}

/* A declaration in f's place (f itself, unread, deleted): its type,
 * name, calling convention, visibility and attributes. */
static void declare_only(LLVMModuleRef mod, LLVMValueRef f) {
  LLVMValueRef d = LLVMAddFunction(mod, "", LLVMGlobalGetValueType(f));
  LLVMSetFunctionCallConv(d, LLVMGetFunctionCallConv(f));
  LLVMSetVisibility(d, LLVMGetVisibility(f));
  LLVMSetUnnamedAddress(d, LLVMGetUnnamedAddress(f));
  for (long k = -1, np = (long)LLVMCountParams(f); k <= np; k++) { /* function, return, params */
    LLVMAttributeIndex idx = k < 0 ? (LLVMAttributeIndex)LLVMAttributeFunctionIndex : (unsigned)k;
    LLVMAttributeRef at[64];
    unsigned na = LLVMGetAttributeCountAtIndex(f, idx);
    if (na > 64) ICE("a function with %u attributes", na);
    if (na) LLVMGetAttributesAtIndex(f, idx, at);
    for (unsigned a = 0; a < na; a++) LLVMAddAttributeAtIndex(d, idx, at[a]);
  }
  size_t len;
  const char *name = LLVMGetValueName2(f, &len);
  char *nm = malloc(len + 1);
  if (!nm) ICE("out of memory");
  memcpy(nm, name, len), nm[len] = 0;
  LLVMReplaceAllUsesWith(f, d);
  LLVMDeleteFunction(f);
  LLVMSetValueName2(d, nm, len);
  free(nm);
}

/* The module read lazily (the bodies stay unread until materialized,
 * which a function pass manager run does for each function of part):
 * each part reads its own bodies, not the whole module's. */
LLVMModuleRef cpu_split_part(LLVMContextRef ctx, LLVMMemoryBufferRef bc, const int *owner,
                             int part) {
  LLVMModuleRef mod;
  LLVMMemoryBufferRef ref = LLVMCreateMemoryBufferWithMemoryRange(
      LLVMGetBufferStart(bc), LLVMGetBufferSize(bc), "part", 0);
  if (LLVMGetBitcodeModuleInContext2(ctx, ref, &mod)) ICE("reading a module part back failed");
  LLVMPassManagerRef fpm = LLVMCreateFunctionPassManagerForModule(mod);
  LLVMInitializeFunctionPassManager(fpm);
  int i = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f) && owner[i++] == part) LLVMRunFunctionPassManager(fpm, f);
  LLVMFinalizeFunctionPassManager(fpm);
  LLVMDisposePassManager(fpm);
  i = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(mod), nx; f; f = nx) {
    nx = LLVMGetNextFunction(f);
    if (!LLVMIsDeclaration(f) && owner[i++] != part) declare_only(mod, f);
  }
  for (LLVMValueRef f = LLVMGetFirstFunction(mod), nx; f; f = nx) {
    nx = LLVMGetNextFunction(f);
    if (LLVMIsDeclaration(f) && !LLVMGetFirstUse(f)) LLVMDeleteFunction(f);
  }
  return mod;
}
