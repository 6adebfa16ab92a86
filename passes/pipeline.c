/* pipeline.c — the pass table and the pass manager.
 *
 * Runs the passes of pass_table in order over each kernel of a module:
 * none at -O0, all others at -O1 and above except those named by
 * --disable-pass.  Each pass is timed (CLOCK_MONOTONIC) into the report,
 * and the IR verifier runs after it: a pass that leaves malformed IR is
 * an internal compiler error (the violations are printed, status 3).
 * --dump-after=PASS prints the kernel's IR at PASS's place in the
 * pipeline (whether or not it ran); --time-passes prints a table of
 * per-pass times to stderr after the last kernel.  Every pass gets the
 * cost model's row of PassOptions.target (costs.c), or PassOptions.costs
 * (a calibrated row, costs_file.c) when set, in PassCtx.costs.
 *
 * Needs: passes.h, ir.h.  Produces: a rewritten module and the report. */
#include <string.h>
#include <time.h>

#include "passes.h"

const PassInfo pass_table[] = {
    {"fold-views", pass_fold_views},
    {"eliminate-copies", pass_eliminate_copies},
    {"choose-layout", pass_choose_layout},
    {"fuse", pass_fuse},
    {"row-group", pass_row_group},
    {"plan-memory", pass_plan_memory},
};
const int pass_count = (int)(sizeof pass_table / sizeof pass_table[0]);

bool pass_known(const char *name) {
  for (int i = 0; i < pass_count; i++)
    if (!strcmp(pass_table[i].name, name)) return true;
  return false;
}

static bool pass_disabled(const PassOptions *o, const char *name) {
  for (int i = 0; i < o->ndisabled; i++)
    if (!strcmp(o->disabled[i], name)) return true;
  return false;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Per-pass totals over all kernels, for --time-passes. */
typedef struct PassTotals {
  double ms[16];
  int runs[16], changed[16];
} PassTotals;

static void print_times(const PassTotals *t) {
  double total = 0;
  fputs("tdslc: pass               time      runs  changed\n", stderr);
  for (int i = 0; i < pass_count; i++) {
    fprintf(stderr, "tdslc:   %-16s %8.3f ms %4d %6d\n", pass_table[i].name,
            t->ms[i], t->runs[i], t->changed[i]);
    total += t->ms[i];
  }
  fprintf(stderr, "tdslc:   %-16s %8.3f ms\n", "total", total);
}

/* Runs pass i over c->k; returns 0 or 3 when the verifier rejects it. */
static int run_one(PassCtx *c, int i, PassTotals *t) {
  const PassInfo *p = &pass_table[i];
  double t0 = now_ms();
  bool changed = p->run(c);
  double ms = now_ms() - t0;
  if (c->r) report_pass_time(c->r, p->name, ms, changed);
  t->ms[i] += ms;
  t->runs[i]++;
  t->changed[i] += changed;
  int bad = ir_verify(c->m, stderr);
  if (bad) {
    fprintf(stderr, "tdslc: internal compiler error: the IR verifier found "
            "%d problem%s after pass %s on kernel %s\n", bad,
            bad == 1 ? "" : "s", p->name, c->k->name);
    return 3;
  }
  return 0;
}

static int run_kernel(IrModule *m, IrKernel *k, const PassOptions *o,
                      Report *r, PassTotals *t) {
  PassCtx c = {.m = m, .k = k, .opt = o, .r = r, .costs = o->costs ? o->costs : pass_costs(o->target)};
  if (r) report_kernel(r, k);
  for (int i = 0; i < pass_count; i++) {
    const char *name = pass_table[i].name;
    if (o->opt_level > 0 && !pass_disabled(o, name)) {
      int s = run_one(&c, i, t);
      if (s) return s;
    }
    if (o->dump_after && !strcmp(o->dump_after, name)) {
      FILE *f = o->dump ? o->dump : stderr;
      ir_print_kernel(f, m, k);
      fflush(f);
    }
  }
  return 0;
}

int pipeline_run(IrModule *m, const PassOptions *o, Report *r) {
  PassTotals t;
  memset(&t, 0, sizeof t);
  IR_ASSERT(pass_count <= 16);
  for (int i = 0; i < m->nkernels; i++) {
    int s = run_kernel(m, m->kernels[i], o, r, &t);
    if (s) return s;
  }
  if (o->time_passes && o->opt_level > 0) print_times(&t);
  return 0;
}
