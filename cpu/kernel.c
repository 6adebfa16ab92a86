/* kernel.c — the CPU backend (backend.h cg_cpu_backend): each kernel K
 * becomes `i32 K(ptr..., scalars..., ptr...)` (scalars by value: SSA
 * values from the arguments on, never in memory) that
 *  1. runs the entry checks (codegen/entry.c), binding symbols into an env
 *     array; every failure branches to one exit that frees scratch and
 *     returns the code, before any output byte is written;
 *  2. answers a shape query (every output's data NULL) by writing shapes;
 *  3. allocates scratch and GEMM packing memory, runs the nests (serial
 *     loops here; parallel nests and row groups: parallel.c; long
 *     reductions to few outputs: reduce_split.c; matmul and conv2d:
 *     gemm_nest.c), frees scratch;
 * and `K_info` returns a constant tdsl_kernel_info.  --target=x86-64
 * emits every kernel once per ISA variant it carries (each level, and
 * the extension variants its products use), K dispatching (isa.c);
 * `K_isa` names the ISA.  The module then goes through the LLVM pipelines (the
 * full one, and the light one for the functions split.c puts apart) and
 * object/assembly emission (machine.c), on threads where it pays.
 * Needs: cpu.h.  Used by: codegen/codegen.c (the backend table). */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"

static void emit_nest_loops(Cg *c, const LfNest *n) {
  if (c->opt > 0 && n->rank > 0) {
    cpu_emit_nest_parallel(c, n);
    return;
  }
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = cg_sym_val(c, n->red[l]);
  if (n->store.rt_strides) {
    const LfBuf *b = &c->lk->bufs[n->store.buf];
    for (int l = 0; l < n->rank; l++)
      x.rt_stride[l] = cg_dl_stride(c, c->args[c->k->nparams + b->index], n->rank, l);
  }
  for (int l = 0; l < n->rank; l++) x.iv[l] = cg_open_loop(c, x.ub[l]);
  if (lf_is_scan(n)) {
    cpu_emit_scan(c, &x);
  } else {
    LLVMValueRef v = n->reduce == OP_COUNT ? cg_eval(c, &x, n->value) : cpu_emit_reduce(c, &x);
    cg_store_el(c, v, cg_address(c, &x, &n->store, n->dtype, n->rank), n->dtype);
  }
  for (int l = 0; l < n->rank; l++) cg_close_loop(c);
}

/* A nest; a long reduction to few outputs may split over threads
 * (reduce_split.c) where its loops would run it on one. */
static void emit_nest(Cg *c, const LfNest *n) {
  if (n->check) {
    cpu_emit_index_check(c, n);
    return;
  }
  if (n->reduce == OP_MATMUL || n->reduce == OP_CONV2D) {
    cpu_emit_gemm_nest(c, n);
    return;
  }
  LLVMBasicBlockRef join = NULL;
  if (c->opt > 0 && cpu_emit_reduce_split(c, n, &join)) return;
  emit_nest_loops(c, n);
  if (join) {
    LLVMBuildBr(c->b, join);
    LLVMPositionBuilderAtEnd(c->b, join);
  }
}

/* ---- kernels ------------------------------------------------------------ */

static void emit_kernel(Cg *c, const IrKernel *k, const LfKernel *lk) {
  cg_begin_kernel(c, k, lk, true);
  cpu_mark_cold(c->fn); /* optimized as before if a nest's loop stays inline */
  cg_emit_entry_checks(c);
  cg_setup_buffers(c);
  cpu_setup_gemm_pools(c);
  for (int i = 0; i < lk->nnests; i++) {
    if (c->opt > 0 && lk->nests[i].group > 1) { /* a row group: its nests at once */
      cpu_emit_group_parallel(c, &lk->nests[i]);
      i += lk->nests[i].group - 1;
      continue;
    }
    emit_nest(c, &lk->nests[i]);
  }
  cg_free_scratch(c);
  LLVMBuildRet(c->b, i32c(c, 0));
  LLVMPositionBuilderAtEnd(c->b, c->fail);
  cg_free_scratch(c);
  LLVMBuildRet(c->b, c->rcphi);
}

static bool cpu_accepts(const char *target) { return strncmp(target, "cuda", 4) != 0; }

/* ---- modules, threads ---------------------------------------------------- */

/* One LLVM module of the object: kernels [k0, k1) at variants [v0, v1)
 * of the target's, and their entry points (K_info, K_isa, a multi-variant
 * K) when entry.  An object is one unit, or (split) one unit per variant
 * plus one for the entry points, or parts of units split by functions
 * (split.c): each in its own LLVMContext, optimized and compiled on its
 * own thread, the objects merged (CgOptions.merge_objects). */
typedef struct Unit {
  int k0, k1, v0, v1;
  bool entry;
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMMemoryBufferRef obj;
  int status;
  double ms[3]; /* thread CPU ms: reading a part, pass pipeline, codegen */
  /* A part of a module split by functions (split.c): the module's
   * bitcode and its functions' parts (shared by the parts; the first
   * part owns them); the thread reads its part into ctx/mod. */
  LLVMMemoryBufferRef bc;
  int *owner, part;
  CpuPart info; /* its pipeline (light or full) and cost */
} Unit;

typedef struct Units {
  Unit *u;
  int n;
  const CgOptions *o;
  atomic_int next;
} Units;

/* kmask[i]: the variants (bits over v) kernel i carries (isa.c). */
static void build_unit(IrModule *m, LfKernel **lks, const CgOptions *o, const CgIsa *const *v,
                       int nv, const unsigned *kmask, bool split, Unit *u) {
  Cg c = {.m = m, .opt = o->opt_level, .dl_device = DL_CPU,
          .target = lf_target_params(cg_cpu_backend.sched)};
  c.ctx = LLVMContextCreate();
  c.mod = LLVMModuleCreateWithNameInContext(m->file ? m->file : "tdsl", c.ctx);
  c.b = LLVMCreateBuilderInContext(c.ctx);
  cg_init_types(&c);
  for (int j = u->v0; j < u->v1; j++) { /* each variant's kernels (isa.c) */
    c.isa = v[j];
    c.vec_bits = v[j]->vec_bits;
    for (int i = u->k0; i < u->k1; i++)
      if (kmask[i] >> j & 1) emit_kernel(&c, m->kernels[i], lks[i]);
    if (nv > 1) cpu_isa_seal_variant(&c, split);
  }
  c.isa = cpu_isa_of_target(o->target);
  c.vec_bits = c.isa->vec_bits;
  for (int i = u->k0; u->entry && i < u->k1; i++) {
    const CgIsa *kv[CPU_ISA_MAX_VARIANTS];
    int nk = 0;
    for (int j = 0; j < nv; j++)
      if (kmask[i] >> j & 1) kv[nk++] = v[j];
    c.lk = lks[i];
    cg_emit_info(&c, m->kernels[i]);
    cpu_isa_emit_entry(&c, m->kernels[i], kv, nk);
  }
  LLVMDisposeBuilder(c.b);
  u->ctx = c.ctx;
  u->mod = c.mod;
}

static void dispose_unit(Unit *u) {
  if (u->obj) LLVMDisposeMemoryBuffer(u->obj);
  if (u->mod) LLVMDisposeModule(u->mod);
  if (u->ctx) LLVMContextDispose(u->ctx);
  if (u->bc && u->part == 0) {
    LLVMDisposeMemoryBuffer(u->bc);
    free(u->owner);
  }
  *u = (Unit){0};
}

/* Units [0, n): the parts' modules before the bitcode they were read
 * from (part 0's), which a module read lazily refers to. */
static void dispose_units(Unit *u, int n) {
  for (int i = 0; i < n; i++)
    if (!u[i].bc || u[i].part != 0) dispose_unit(&u[i]);
  for (int i = 0; i < n; i++) dispose_unit(&u[i]);
}

static void *compile_units(void *arg) {
  Units *us = arg;
  for (int i; (i = atomic_fetch_add(&us->next, 1)) < us->n;) {
    Unit *u = &us->u[i];
    if (u->bc) {
      double t = cpu_thread_ms();
      u->ctx = LLVMContextCreate();
      u->mod = cpu_split_part(u->ctx, u->bc, u->owner, u->part);
      u->ms[0] = cpu_thread_ms() - t;
    }
    u->status = cpu_compile_to_memory(u->mod, us->o, u->info.light, &u->obj, &u->ms[1]);
  }
  return NULL;
}

/* Splits each unit's module by functions (split.c): its light and full
 * functions apart, each kind into up to `parts` parts; returns the new
 * list (u freed; the largest parts first, as the threads take them) and
 * its length in *n. */
static Unit *split_functions(IrModule *m, Unit *u, int *n, int parts) {
  Unit *out = NULL;
  int no = 0;
  CpuPart info[64];
  for (int i = 0; i < *n; i++) {
    int *owner = NULL;
    LLVMMemoryBufferRef bc = NULL;
    int np = cpu_split_module(u[i].mod, m->kernels[u[i].k0]->name, parts, 400, &owner, &bc, info);
    out = realloc(out, sizeof *out * (size_t)(no + (np ? np : 1)));
    if (!out) ICE("out of memory");
    if (!np) {
      out[no] = u[i];
      out[no++].info = info[0];
      continue;
    }
    LLVMDisposeModule(u[i].mod);
    LLVMContextDispose(u[i].ctx);
    for (int p = 0; p < np; p++)
      out[no++] = (Unit){.bc = bc, .owner = owner, .part = p, .info = info[p]};
  }
  free(u);
  for (int a = 1; a < no; a++) /* by cost, descending (stable: few units) */
    for (int b = a; b > 0 && out[b].info.cost > out[b - 1].info.cost; b--) {
      Unit t = out[b];
      out[b] = out[b - 1], out[b - 1] = t;
    }
  *n = no;
  return out;
}

/* Threads for n units: $TDSL_JOBS when a positive number, else the
 * online cores; at most n. */
static int thread_count(int n) {
  const char *env = getenv("TDSL_JOBS");
  long t = env && atoi(env) > 0 ? atoi(env) : sysconf(_SC_NPROCESSORS_ONLN);
  return (int)(t < 1 ? 1 : t > n ? n : t);
}

/* The split build: compiles the units on threads, merges their objects
 * into one and writes it.  -1 when the merge failed (the caller builds
 * the object as one module instead), else cg_emit's status. */
static int compile_split(Unit *u, int n, const CgOptions *o, double *t) {
  Units us = {.u = u, .n = n, .o = o};
  atomic_init(&us.next, 0);
  int nt = thread_count(n);
  pthread_t th[64];
  int started = 0;
  for (; started < nt - 1 && started < 64; started++)
    if (pthread_create(&th[started], NULL, compile_units, &us)) break;
  compile_units(&us);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  int status = 0;
  for (int i = 0; i < n; i++) status |= u[i].status;
  cg_phase_ms(o, "llvm-threads", t); /* wall time; then each step's CPU time over the units */
  if (o->time_passes) { /* each module's read + llvm-opt + llvm-codegen, then the sums */
    static const char *const step[3] = {"read", "llvm-opt", "llvm-codegen"};
    double most = 0; /* the module that bounds the wall time on idle cores */
    for (int i = 0; i < n; i++)
      if (u[i].ms[0] + u[i].ms[1] + u[i].ms[2] > most) most = u[i].ms[0] + u[i].ms[1] + u[i].ms[2];
    fprintf(stderr, "tdslc:   %d modules on %d threads (largest %.3f ms), CPU time summed:\n", n,
            started + 1, most);
    for (int i = 0; i < n; i++)
      fprintf(stderr, "tdslc:   module %d (%s, cost %ld): %.3f + %.3f + %.3f ms\n", i,
              u[i].info.light ? "light" : "full", u[i].info.cost, u[i].ms[0], u[i].ms[1],
              u[i].ms[2]);
    for (int s = 0; s < 3; s++) {
      double sum = 0;
      for (int i = 0; i < n; i++) sum += u[i].ms[s];
      fprintf(stderr, "tdslc:   %-12s %8.3f ms\n", step[s], sum);
    }
  }
  if (status) return status;
  const char **data = malloc(sizeof *data * (size_t)n);
  size_t *size = malloc(sizeof *size * (size_t)n);
  if (!data || !size) ICE("out of memory");
  for (int i = 0; i < n; i++) {
    data[i] = LLVMGetBufferStart(u[i].obj);
    size[i] = LLVMGetBufferSize(u[i].obj);
  }
  char *merged = NULL;
  size_t msize = 0;
  int rc = o->merge_objects(data, size, n, &merged, &msize);
  free(data);
  free(size);
  if (rc) return -1;
  cg_phase_ms(o, "merge", t);
  status = cg_write_file(o, ".o", merged, msize);
  free(merged);
  cg_phase_ms(o, "write", t);
  return status;
}

/* One module written whole: at -O1 and above its light functions are
 * optimized apart (split.c, machine.c), as in a split build, so that
 * the assembly and IR emits show the object's code. */
static int emit_whole(IrModule *m, Unit *u, const CgOptions *o) {
  int *owner = NULL;
  LLVMMemoryBufferRef bc = NULL;
  CpuPart info[2];
  int np = o->opt_level > 0 && m->nkernels > 0
               ? cpu_split_module(u->mod, m->kernels[0]->name, 1, INT_MAX, &owner, &bc, info)
               : 0;
  if (!np) return cpu_optimize_and_write(u->mod, o);
  int s = cpu_optimize_parts_and_write(bc, owner, info, np, o);
  LLVMDisposeMemoryBuffer(bc);
  free(owner);
  return s;
}

static int cpu_emit(IrModule *m, LfKernel **lks, const CgOptions *o) {
  double t = 0;
  cg_phase_ms(o, "", &t);
  cpu_init_llvm();
  const CgIsa *v[CPU_ISA_MAX_VARIANTS];
  unsigned *kmask = arena_alloc(m->arena, sizeof *kmask * (size_t)(m->nkernels + 1));
  int nv = cpu_isa_variants(o->target, m, v, kmask);
  int nk = m->nkernels;
  /* Split across threads (an object alone, a merger, cores): a unit per
   * variant with every kernel (their GEMM helpers stay shared) and one
   * for the entry points; then by functions while units are fewer than
   * threads. */
  int nt = thread_count(64);
  bool threads = o->merge_objects && (o->emit & CG_OBJ) && !(o->emit & (CG_ASM | CG_LLVM)) &&
                 nt > 1;
  bool split = threads && nv > 1;
  int n = split ? nv + 1 : 1;
  Unit *u = calloc((size_t)n, sizeof *u);
  if (!u) ICE("out of memory");
  if (!split) {
    u[0] = (Unit){.k0 = 0, .k1 = nk, .v0 = 0, .v1 = nv, .entry = true};
  } else {
    for (int l = 0; l < nv; l++) u[l] = (Unit){.k0 = 0, .k1 = nk, .v0 = l, .v1 = l + 1};
    u[nv] = (Unit){.k0 = 0, .k1 = nk, .entry = true};
  }
  for (int i = 0; i < n; i++) build_unit(m, lks, o, v, nv, kmask, split, &u[i]);
  cg_phase_ms(o, "llvm-build", &t);
  if (threads) { /* light functions apart; by functions while fewer modules than threads */
    u = split_functions(m, u, &n, (nt + n - 1) / n);
    split = n > 1;
    cg_phase_ms(o, "llvm-split", &t);
  }
  int s;
  if (split) {
    s = compile_split(u, n, o, &t);
    if (s < 0) { /* no merger: one module after all */
      dispose_units(u, n);
      u[0] = (Unit){.k0 = 0, .k1 = nk, .v0 = 0, .v1 = nv, .entry = true};
      n = 1;
      build_unit(m, lks, o, v, nv, kmask, false, &u[0]);
      split = false;
    }
  }
  if (!split) s = emit_whole(m, &u[0], o);
  dispose_units(u, n);
  free(u);
  return s;
}

const CgBackend cg_cpu_backend = {
    .name = "cpu", .accepts = cpu_accepts, .sched = "cpu", .emit = cpu_emit};
