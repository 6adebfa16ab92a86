/* tdslc.c — the command line (spec §8).
 *
 *   tdslc FILE.tdsl [-o OUT] [--emit=LIST] [--target=T] [-O0..-O3]
 *         [--kernel=NAME]... [--report[=PATH]] [--report-format=text|json]
 *         [--dump-after=PASS] [--disable-pass=PASS]... [--time-passes]
 *         [--layout=nchw|nhwc|auto] [--costs=FILE]
 *   tdslc --calibrate[=quick] [-o FILE] [--target=T] [-O1..-O3]
 *   tdslc run FILE.tdsl --kernel=NAME [--input NAME=X]... [--output NAME=Y]...
 *   tdslc --version | --help
 *
 * Validates every option first (usage errors: one line, exit 2), then
 * reads the file, parses, checks and verifies it (program errors: exit 1
 * after the diagnostics; a verifier failure is an internal error, exit 3),
 * then either runs a kernel with the interpreter (run.c, on the
 * unoptimized IR: the interpreter is the oracle) or runs the pass
 * pipeline (passes.h; none at -O0) and writes the requested emits: `ir`
 * (the optimized IR), `loops` (the loop form, loops/print.c) and the
 * reports (text, JSON, HTML, the last with each kernel's loop form) here,
 * obj/header/llvm/asm through codegen.h, so through codegen.h and the
 * link step (link.c).  The passes weigh with the target's built-in cost
 * row, or with the row of a cost file (--costs=FILE, else the environment
 * variable TDSL_COSTS when its family is the target's; passes/
 * costs_file.c) that --calibrate (calibrate.c) measured on this machine.
 * Needs: the whole front end (ast.h), ir.h, run.h, link.h, passes/passes.h,
 * loops/loops.h (lf_lower and lf_print for the loop form, lf_stats for
 * the report's totals), codegen/codegen.h, calibrate.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../frontend/ast.h"
#include "../codegen/codegen.h"
#include "../ir/ir.h"
#include "../loops/loops.h"
#include "../passes/passes.h"
#include "calibrate.h"
#include "link.h"
#include "run.h"

#ifndef TDSL_VERSION
#define TDSL_VERSION "0.0.0-dev"
#endif

#define MAX_LIST 64 /* --kernel, --disable-pass, --input, --output each */

/* The emit kinds, in the order files are written. */
typedef enum Emit {
  EM_OBJ, EM_HEADER, EM_LLVM, EM_ASM, EM_PTX, EM_IR, EM_LOOPS, EM_REPORT,
  EM_REPORT_JSON, EM_REPORT_HTML, EM_SO, EM_COUNT
} Emit;

static const struct {
  const char *name;
  const char *ext;  /* appended to the output stem */
  bool textual;     /* may go to stdout with -o - */
  const char *missing; /* why it cannot be produced yet, or NULL */
} emits[EM_COUNT] = {
    {"obj", ".o", false, NULL},
    {"header", ".h", true, NULL},
    {"llvm", ".ll", true, NULL},
    {"asm", ".s", true, NULL},
    {"ptx", ".ptx", true, NULL},
    {"ir", ".ir", true, NULL},
    {"loops", ".loops", true, NULL},
    {"report", ".report.txt", true, NULL},
    {"report-json", ".report.json", true, NULL},
    {"report-html", ".report.html", true, NULL},
    {"so", ".so", false, NULL},
};

typedef struct Options {
  bool run;               /* `tdslc run` */
  const char *file;
  const char *out;        /* -o; NULL: derived from file */
  unsigned emit;          /* bit per Emit */
  const char *target;
  int opt_level;
  const char *kernels[MAX_LIST];
  int nkernels;
  const char *report_path; /* --report=PATH */
  bool report_json;
  const char *dump_after;
  const char *disabled[MAX_LIST];
  int ndisabled;
  bool time_passes;
  LayoutPolicy layout;    /* --layout */
  const char *costs;      /* --costs=FILE, or NULL */
  bool calibrate, calibrate_quick; /* --calibrate[=quick] */
  const char *inputs[MAX_LIST];
  int ninputs;
  const char *outputs[MAX_LIST];
  int noutputs;
  const char *compile_opt; /* first option seen that only compiling takes */
} Options;

static int usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("tdslc: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs(" (see tdslc --help)\n", stderr);
  va_end(ap);
  return 2;
}

static void print_help(void) {
  fputs(
      "usage: tdslc FILE.tdsl [options]       compile a tdsl file\n"
      "       tdslc run FILE.tdsl --kernel=NAME [--input NAME=X]... "
      "[--output NAME=Y]...\n"
      "       tdslc --calibrate[=quick] [-o FILE]   measure the cost model\n"
      "       tdslc --version | --help\n"
      "\n"
      "options:\n"
      "  -o OUT                 output path: with one emit, the file "
      "itself; with\n"
      "                         several, OUT's extension gives way to each "
      "emit's own\n"
      "                         (-o - writes one textual emit to stdout)\n"
      "  --emit=LIST            comma list of obj header llvm asm ptx ir "
      "loops\n"
      "                         report report-json report-html so (default "
      "obj,header);\n"
      "                         so: a shared library with the runtime "
      "linked in, made\n"
      "                         by the C compiler $CC (default cc)\n"
      "  --target=T             host x86-64 x86-64-v2 x86-64-v3 x86-64-v4 "
      "cuda cuda:sm_NN\n"
      "                         (cuda: sm_80 PTX; sm_NN: one of " TDSL_CUDA_SMS ")\n"
      "  -O0 -O1 -O2 -O3        optimization level (default -O2)\n"
      "  --kernel=NAME          only this kernel (repeatable); for run: "
      "the kernel\n"
      "  --report[=PATH]        write the optimization report\n"
      "  --report-format=F      text or json\n"
      "  --dump-after=PASS      print the IR after PASS to stderr\n"
      "  --disable-pass=PASS    skip PASS (repeatable)\n"
      "  --layout=L             conv/pool storage: nchw, nhwc or auto (default)\n"
      "  --costs=FILE           weigh the passes' choices with the cost file FILE\n"
      "                         (written by --calibrate; default: $TDSL_COSTS if it\n"
      "                         is for the target's family, else the built-in row)\n"
      "  --calibrate[=quick]    measure this machine's cost model and write it as\n"
      "                         a cost file to -o FILE (default stdout); quick:\n"
      "                         small problems, rough numbers\n"
      "  --time-passes          print the time of each phase to stderr\n"
      "  --input NAME=X         run: a parameter's .npy file or scalar value\n"
      "  --output NAME=Y        run: where result NAME (out0, out1, ...) "
      "goes\n"
      "\n"
      "exit status: 0 ok, 1 program or input errors (or a file that cannot "
      "be\n"
      "written or linked), 2 usage, 3 internal error\n",
      stdout);
}

/* ---- option values ---------------------------------------------------- */

static int parse_emit_list(Options *o, const char *list) {
  o->emit = 0;
  const char *p = list;
  for (;;) {
    size_t n = strcspn(p, ",");
    int e = 0;
    while (e < EM_COUNT &&
           !(strlen(emits[e].name) == n && !strncmp(emits[e].name, p, n)))
      e++;
    if (e == EM_COUNT)
      return usage_error("--emit: unknown kind '%.*s' (kinds: obj header "
                         "llvm asm ptx ir loops report report-json report-html so)", (int)n, p);
    o->emit |= 1u << e;
    if (!p[n]) return 0;
    p += n + 1;
  }
}

static bool valid_target(const char *t) {
  static const char *const names[] = {"host", "x86-64", "x86-64-v2",
                                      "x86-64-v3", "x86-64-v4", "cuda"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(t, names[i])) return true;
  if (strncmp(t, "cuda:", 5) != 0) return false;
  /* the processors LLVM 19's NVPTX backend knows */
  char list[] = TDSL_CUDA_SMS;
  for (char *save = NULL, *sm = strtok_r(list, " ", &save); sm; sm = strtok_r(NULL, " ", &save))
    if (!strcmp(t + 5, sm)) return true;
  return false;
}

/* "fold-views, eliminate-copies, ..." from the pass table. */
static const char *pass_list(void) {
  static char buf[256];
  size_t n = 0;
  for (int i = 0; i < pass_count && n < sizeof buf; i++)
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i ? ", " : "",
                          pass_table[i].name);
  return buf;
}

static int push(const char **list, int *n, const char *v, const char *opt) {
  if (*n == MAX_LIST) return usage_error("too many %s options", opt);
  list[(*n)++] = v;
  return 0;
}

/* Applies one long option that takes a value. */
static int long_with_value(Options *o, const char *name, const char *v) {
  if (!strcmp(name, "emit")) return parse_emit_list(o, v);
  if (!strcmp(name, "target")) {
    if (!valid_target(v))
      return usage_error("--target: unknown target '%s' (host, x86-64, "
                         "x86-64-v2/v3/v4, cuda, or cuda:sm_NN with sm_NN one of: "
                         TDSL_CUDA_SMS ")", v);
    o->target = v;
    return 0;
  }
  if (!strcmp(name, "kernel")) return push(o->kernels, &o->nkernels, v, "--kernel");
  if (!strcmp(name, "input")) return push(o->inputs, &o->ninputs, v, "--input");
  if (!strcmp(name, "output")) return push(o->outputs, &o->noutputs, v, "--output");
  if (!strcmp(name, "report-format")) {
    if (strcmp(v, "text") && strcmp(v, "json"))
      return usage_error("--report-format: expected text or json, got '%s'", v);
    o->report_json = !strcmp(v, "json");
    return 0;
  }
  if (!strcmp(name, "costs")) {
    if (!*v) return usage_error("--costs needs a file name");
    o->costs = v;
    return 0;
  }
  if (!strcmp(name, "layout")) { /* choose-layout's policy */
    if (!strcmp(v, "auto")) o->layout = LAYOUT_POLICY_AUTO;
    else if (!strcmp(v, "nchw")) o->layout = LAYOUT_POLICY_NCHW;
    else if (!strcmp(v, "nhwc")) o->layout = LAYOUT_POLICY_NHWC;
    else return usage_error("--layout: expected nchw, nhwc or auto, got '%s'", v);
    return 0;
  }
  if (!pass_known(v))
    return usage_error("--%s: unknown pass '%s' (passes: %s)", name, v,
                       pass_list());
  if (!strcmp(name, "dump-after")) o->dump_after = v;
  else return push(o->disabled, &o->ndisabled, v, "--disable-pass");
  return 0;
}

static bool takes_value(const char *name) {
  static const char *const names[] = {"emit", "target", "kernel", "input",
                                      "output", "report-format",
                                      "dump-after", "disable-pass", "layout", "costs"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(name, names[i])) return true;
  return false;
}

/* --name, --name=value or --name value; *i advances past a used value. */
static int long_option(Options *o, int argc, char **argv, int *i) {
  const char *arg = argv[*i] + 2;
  char name[32];
  size_t n = strcspn(arg, "=");
  if (n >= sizeof name) return usage_error("unknown option '%s'", argv[*i]);
  memcpy(name, arg, n);
  name[n] = '\0';
  const char *v = arg[n] == '=' ? arg + n + 1 : NULL;
  if (strcmp(name, "kernel") && strcmp(name, "input") &&
      strcmp(name, "output") && !o->compile_opt)
    o->compile_opt = argv[*i];
  if (!strcmp(name, "report")) {
    o->report_path = v ? v : "";
    return 0;
  }
  if (!strcmp(name, "calibrate")) {
    if (v && strcmp(v, "quick"))
      return usage_error("--calibrate: expected nothing or =quick, got '%s'", v);
    o->calibrate = true;
    o->calibrate_quick = v != NULL;
    return 0;
  }
  if (!strcmp(name, "time-passes") && !v) {
    o->time_passes = true;
    return 0;
  }
  if (!takes_value(name)) return usage_error("unknown option '%s'", argv[*i]);
  if (!v) {
    if (*i + 1 >= argc) return usage_error("--%s needs a value", name);
    v = argv[++*i];
  }
  return long_with_value(o, name, v);
}

static int short_option(Options *o, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  if (!o->compile_opt) o->compile_opt = a;
  if (a[1] == 'O') {
    if (a[2] < '0' || a[2] > '3' || a[3])
      return usage_error("bad optimization level '%s' (use -O0, -O1, -O2 "
                         "or -O3)", a);
    o->opt_level = a[2] - '0';
    return 0;
  }
  if (a[1] == 'o') {
    if (a[2]) o->out = a + 2;
    else if (*i + 1 < argc) o->out = argv[++*i];
    else return usage_error("-o needs a path");
    return 0;
  }
  return usage_error("unknown option '%s'", a);
}

/* Fills o from argv; returns 0 or the exit status to stop with (-1 for
 * --help/--version already handled: exit 0). */
static int parse_args(Options *o, int argc, char **argv) {
  int i = 1;
  if (argc > 1 && !strcmp(argv[1], "run")) {
    o->run = true;
    i = 2;
  }
  for (; i < argc; i++) {
    const char *a = argv[i];
    int s = 0;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      print_help();
      return -1;
    } else if (!strcmp(a, "--version")) {
      printf("tdslc %s\n", TDSL_VERSION);
      return -1;
    } else if (a[0] == '-' && a[1] == '-') {
      s = long_option(o, argc, argv, &i);
    } else if (a[0] == '-' && a[1]) {
      s = short_option(o, argc, argv, &i);
    } else if (o->file) {
      return usage_error("more than one input file ('%s' and '%s')", o->file,
                         a);
    } else {
      o->file = a;
    }
    if (s) return s;
  }
  return 0;
}

/* ---- consistency of the whole command --------------------------------- */

static int check_run_options(const Options *o) {
  if (o->compile_opt)
    return usage_error("'%s' cannot be used with tdslc run", o->compile_opt);
  if (o->nkernels != 1)
    return usage_error("tdslc run needs exactly one --kernel=NAME");
  return 0;
}

static int count_bits(unsigned v) {
  int n = 0;
  for (; v; v &= v - 1) n++;
  return n;
}

static int check_compile_options(Options *o) {
  if (o->ninputs || o->noutputs)
    return usage_error("--input and --output are only for tdslc run");
  if (!o->emit) o->emit = 1u << EM_OBJ | 1u << EM_HEADER;
  if (o->report_path)
    o->emit |= 1u << (o->report_json ? EM_REPORT_JSON : EM_REPORT);
  if (o->out && !strcmp(o->out, "-")) {
    if (count_bits(o->emit) != 1)
      return usage_error("-o - writes a single emit to stdout, but %d are "
                         "requested", count_bits(o->emit));
    for (int e = 0; e < EM_COUNT; e++)
      if ((o->emit >> e & 1) && !emits[e].textual)
        return usage_error("--emit=%s is binary and cannot go to stdout",
                           emits[e].name);
  }
  return 0;
}

/* ---- reading and checking the program --------------------------------- */

/* The whole file, NUL-terminated; NULL after a message. */
static char *read_source(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "tdslc: error: cannot read '%s': %s\n", path,
            strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf && (n += fread(buf + n, 1, cap - n, f)) == cap) {
    char *nb = realloc(buf, 2 * cap + 1);
    if (!nb) free(buf);
    buf = nb;
    cap *= 2;
  }
  int bad = !buf || ferror(f), saved = errno;
  fclose(f);
  if (bad) {
    fprintf(stderr, "tdslc: error: cannot read '%s': %s\n", path,
            buf ? strerror(saved) : "out of memory");
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  const char *nul = memchr(buf, '\0', n);
  if (nul) {
    fprintf(stderr, "%s: error: the file contains a NUL byte (at offset "
            "%zu); tdsl source must be text\n", path, (size_t)(nul - buf));
    free(buf);
    return NULL;
  }
  return buf;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void phase_time(const Options *o, const char *name, double *t0) {
  double t = now_ms();
  if (o->time_passes) fprintf(stderr, "tdslc: %-12s %8.3f ms\n", name, t - *t0);
  *t0 = t;
}

/* Parses, checks and verifies; NULL when the program had errors. */
static IrModule *front_end(const Options *o, Arena *a, const char *src) {
  Diag d;
  diag_init(&d, o->file, src, stderr);
  double t = now_ms();
  AstProgram *p = parse_program(a, &d, src);
  phase_time(o, "parse", &t);
  if (!p || d.nerrors) return NULL;
  IrModule *m = sema_program(a, &d, p, o->file);
  phase_time(o, "sema", &t);
  if (!m || d.nerrors) return NULL;
  int bad = ir_verify(m, stderr);
  phase_time(o, "verify", &t);
  if (bad)
    ICE("the IR verifier found %d problem%s after semantic analysis of %s",
        bad, bad == 1 ? "" : "s", o->file);
  return m;
}

/* ---- emitting ----------------------------------------------------------- */

/* m restricted to the --kernel names (all when none); NULL after an
 * error for an unknown name. */
static IrModule *select_kernels(const Options *o, IrModule *m) {
  if (!o->nkernels) return m;
  IrModule *sel = arena_dup(m->arena, m, sizeof *m);
  sel->kernels = arena_alloc(m->arena, sizeof *sel->kernels * (size_t)m->nkernels);
  sel->nkernels = 0;
  int bad = 0;
  for (int i = 0; i < o->nkernels; i++) {
    int k = 0;
    while (k < m->nkernels && strcmp(m->kernels[k]->name, o->kernels[i])) k++;
    if (k == m->nkernels) {
      fprintf(stderr, "tdslc: error: %s has no kernel named '%s'\n", o->file,
              o->kernels[i]);
      bad = 1;
    }
  }
  for (int k = 0; k < m->nkernels; k++)
    for (int i = 0; i < o->nkernels; i++)
      if (!strcmp(m->kernels[k]->name, o->kernels[i])) {
        sel->kernels[sel->nkernels++] = m->kernels[k];
        break;
      }
  return bad ? NULL : sel;
}

/* OUT without its extension, or the input's base name without .tdsl. */
static char *output_stem(const Options *o) {
  const char *src = o->out ? o->out : o->file;
  if (!o->out) {
    const char *slash = strrchr(src, '/');
    if (slash) src = slash + 1;
  }
  char *stem = malloc(strlen(src) + 1);
  if (!stem) ICE("out of memory");
  strcpy(stem, src);
  char *slash = strrchr(stem, '/'), *dot = strrchr(stem, '.');
  if (dot && dot > (slash ? slash + 1 : stem)) *dot = '\0';
  return stem;
}

/* With a single emit, -o names its file exactly (spec §8); otherwise
 * each emit goes to the stem plus its own extension. Malloc'd. */
static char *emit_path(const Options *o, const char *stem, Emit e) {
  bool exact = o->out && count_bits(o->emit) == 1;
  const char *ext = exact ? "" : emits[e].ext;
  size_t n = strlen(exact ? o->out : stem) + strlen(ext) + 1;
  char *path = malloc(n);
  if (!path) ICE("out of memory");
  snprintf(path, n, "%s%s", exact ? o->out : stem, ext);
  return path;
}

/* The loop form of every kernel of m at opt_level, one section each,
 * with the schedules the backend of `target` runs (cg_schedule_params). */
static void print_loops(FILE *f, IrModule *m, int opt_level, const char *target) {
  const LfTarget *t = cg_schedule_params(target);
  for (int i = 0; i < m->nkernels; i++) {
    if (i) fputc('\n', f);
    lf_print(f, m, lf_lower(m, m->kernels[i], opt_level), opt_level, t);
  }
}

/* --emit=ir (the IR) or --emit=loops (the loop form). */
static void print_text(FILE *f, const Options *o, IrModule *m, Emit e) {
  if (e == EM_LOOPS) print_loops(f, m, o->opt_level, o->target);
  else ir_print_module(f, m);
}

static int write_text(const Options *o, IrModule *m, const char *stem, Emit e) {
  if (o->out && !strcmp(o->out, "-")) {
    print_text(stdout, o, m, e);
    return fflush(stdout) ? 1 : 0;
  }
  char *path = emit_path(o, stem, e);
  FILE *f = fopen(path, "w");
  int status = 0;
  if (f) print_text(f, o, m, e);
  if (!f || ferror(f) | fclose(f)) {
    fprintf(stderr, "tdslc: error: cannot write '%s': %s\n", path,
            strerror(errno));
    status = 1;
  }
  free(path);
  return status;
}

/* ---- optimizing and the report ----------------------------------------- */

static bool wants_report(const Options *o) {
  return (o->emit >> EM_REPORT & 1) || (o->emit >> EM_REPORT_JSON & 1) ||
         (o->emit >> EM_REPORT_HTML & 1);
}

/* Runs the pass pipeline over m, decisions going to r.  When a report is
 * written, also estimates each kernel's traffic and loop nests at -O0
 * before the passes and at the chosen level after them.  costs: a cost
 * file's row, or NULL for the target's built-in one.  Returns 0, or 3
 * after an internal error. */
static int optimize(const Options *o, IrModule *m, Report *r, const PassCosts *costs) {
  size_t n = (size_t)m->nkernels + 1;
  int *nests0 = arena_alloc(m->arena, sizeof *nests0 * n);
  const Sym **bytes0 = arena_alloc(m->arena, sizeof *bytes0 * n), *scratch;
  bool totals = wants_report(o);
  for (int i = 0; totals && i < m->nkernels; i++)
    lf_stats(m, m->kernels[i], 0, &nests0[i], &bytes0[i], &scratch);
  PassOptions po = {.opt_level = o->opt_level, .layout = o->layout,
                    .disabled = o->disabled, .ndisabled = o->ndisabled,
                    .dump_after = o->dump_after, .dump = stderr,
                    .time_passes = o->time_passes, .target = o->target,
                    .costs = costs, .vec_bits = o->target ? cg_target_vec_bits(o->target) : 0};
  int status = pipeline_run(m, &po, r);
  for (int i = 0; !status && totals && i < m->nkernels; i++) {
    int nests1;
    const Sym *bytes1;
    lf_stats(m, m->kernels[i], o->opt_level, &nests1, &bytes1, &scratch);
    report_set_totals(r, m->kernels[i], bytes0[i], bytes1, nests0[i], nests1,
                      scratch);
  }
  return status;
}

/* The report's ISA variants (cg_isa_variants), and a codegen decision
 * at each product that an extension variant is built for. */
static void report_isa(Report *r, const IrModule *m, const char *target) {
  report_set_isa(r, cg_isa_variants(m, target));
  for (int i = 0; i < m->nkernels; i++) {
    const IrKernel *k = m->kernels[i];
    for (IrRef v = 0; v < k->nvalues; v++) {
      const char *why = cg_isa_use(k, v, target);
      if (!why) continue;
      report_kernel(r, k);
      report_decision(r, "codegen", "isa-variant", ir_val(k, v)->loc, 0,
                      "%s %s; the kernel picks one at its first call where the CPU has it",
                      op_name(ir_val(k, v)->op), why);
    }
  }
}

typedef struct HtmlCtx {
  IrModule *m;   /* the optimized kernels */
  int opt_level; /* what they are lowered at */
  const char *target; /* --target: whose schedules the page shows */
} HtmlCtx;

/* ReportLoopForm for report_write_html: the loop form of the kernel so
 * named, as --emit=loops prints it (the page gets it as text: passes/
 * knows nothing of the loop form). */
static void html_loop_form(FILE *f, const char *kernel, void *ctx) {
  const HtmlCtx *h = ctx;
  for (int i = 0; i < h->m->nkernels; i++)
    if (!strcmp(h->m->kernels[i]->name, kernel))
      lf_print(f, h->m, lf_lower(h->m, h->m->kernels[i], h->opt_level), h->opt_level,
               cg_schedule_params(h->target));
}

static void write_report_to(FILE *f, const Options *o, const Report *r, Emit e,
                            IrModule *m, const char *src) {
  HtmlCtx h = {m, o->opt_level, o->target};
  if (e == EM_REPORT_JSON) report_write_json(r, f);
  else if (e == EM_REPORT_HTML) report_write_html(r, src, html_loop_form, &h, f);
  else report_write_text(r, f);
}

/* Writes the text, JSON or HTML report: to stdout with -o -, to
 * --report=PATH when that names this format, else to STEM.report.txt /
 * .report.json / .report.html.  m: the optimized kernels, src: the
 * program text (for the HTML page). */
static int write_report(const Options *o, const Report *r, Emit e,
                        const char *stem, IrModule *m, const char *src) {
  bool json = e == EM_REPORT_JSON;
  if (o->out && !strcmp(o->out, "-")) {
    write_report_to(stdout, o, r, e, m, src);
    return fflush(stdout) ? 1 : 0;
  }
  char *path;
  if (o->report_path && o->report_path[0] && e != EM_REPORT_HTML &&
      json == o->report_json) {
    path = malloc(strlen(o->report_path) + 1);
    if (path) strcpy(path, o->report_path);
    if (!path) ICE("out of memory");
  } else {
    path = emit_path(o, stem, e);
  }
  FILE *f = fopen(path, "w");
  int status = 0;
  if (f) write_report_to(f, o, r, e, m, src);
  if (!f || ferror(f) | fclose(f)) {
    fprintf(stderr, "tdslc: error: cannot write '%s': %s\n", path,
            strerror(errno));
    status = 1;
  }
  free(path);
  return status;
}

/* --emit=so: the object (the one just written with --emit=obj, else a
 * temporary one) linked with the runtime by link.c. */
static int write_so(const Options *o, IrModule *m, const char *stem) {
  const char **names = arena_alloc(m->arena, sizeof *names * (size_t)(m->nkernels + 1));
  for (int i = 0; i < m->nkernels; i++) names[i] = m->kernels[i]->name;
  char *so = emit_path(o, stem, EM_SO), *dir = NULL, *obj;
  int status = 0;
  if (o->emit >> EM_OBJ & 1) {
    obj = emit_path(o, stem, EM_OBJ);
  } else {
    dir = link_tempdir();
    if (!dir) {
      free(so);
      return 1;
    }
    obj = malloc(strlen(dir) + sizeof "/kernels.o");
    if (!obj) ICE("out of memory");
    sprintf(obj, "%s/kernels.o", dir);
    CgOptions cg = {.target = o->target, .opt_level = o->opt_level,
                    .emit = CG_OBJ, .stem = stem, .path = obj,
                    .time_passes = o->time_passes, .merge_objects = link_relocatable};
    status = cg_emit(m, &cg);
  }
  if (!status) status = link_shared(obj, names, m->nkernels, so);
  if (dir) link_remove_tempdir(dir);
  free(dir);
  free(obj);
  free(so);
  return status;
}

static int emit_all(const Options *o, IrModule *m, const char *src, const PassCosts *costs) {
  for (int e = 0; e < EM_COUNT; e++)
    if ((o->emit >> e & 1) && emits[e].missing) {
      fprintf(stderr, "tdslc: error: --emit=%s: %s\n", emits[e].name,
              emits[e].missing);
      return 2;
    }
  IrModule *sel = select_kernels(o, m);
  if (!sel) return 1;
  /* Passes always get a report to write to; totals only when wanted. */
  Report *rep = report_new(m->arena, o->file, o->target);
  double t = now_ms();
  int status = optimize(o, sel, rep, costs);
  phase_time(o, "optimize", &t);
  if (status) return status;
  report_isa(rep, sel, o->target);
  char *stem = output_stem(o);
  for (int e = EM_IR; !status && e <= EM_LOOPS; e++)
    if (o->emit >> e & 1) status = write_text(o, sel, stem, (Emit)e);
  for (int e = EM_REPORT; !status && e <= EM_REPORT_HTML; e++)
    if (o->emit >> e & 1) status = write_report(o, rep, (Emit)e, stem, sel, src);
  bool exact = o->out && strcmp(o->out, "-") && count_bits(o->emit) == 1;
  CgOptions cg = {.target = o->target, .opt_level = o->opt_level,
                  .stem = stem, .path = exact ? o->out : NULL,
                  .to_stdout = o->out && !strcmp(o->out, "-"),
                  .time_passes = o->time_passes, .merge_objects = link_relocatable};
  cg.emit = (o->emit >> EM_OBJ & 1 ? CG_OBJ : 0) |
            (o->emit >> EM_ASM & 1 ? CG_ASM : 0) |
            (o->emit >> EM_LLVM & 1 ? CG_LLVM : 0) |
            (o->emit >> EM_PTX & 1 ? CG_PTX : 0) |
            (o->emit >> EM_HEADER & 1 ? CG_HEADER : 0);
  if (!status && cg.emit) status = cg_emit(sel, &cg);
  if (!status && (o->emit >> EM_SO & 1)) status = write_so(o, sel, stem);
  free(stem);
  return status;
}

/* The cost row the passes weigh with (*out): the file of --costs, else
 * that of TDSL_COSTS when it is for the target's family (a file for
 * another family is not used: the target's built-in row is), else NULL
 * (the built-in row).  Returns 0, or 1 after a message (an unreadable or
 * malformed file, or --costs for another family than the target's). */
static int load_costs(const Options *o, Arena *a, const PassCosts **out) {
  *out = NULL;
  const char *path = o->costs, *env = getenv("TDSL_COSTS");
  bool from_env = !path && env && *env;
  if (from_env) path = env;
  if (!path) return 0;
  PassCosts *pc = arena_alloc(a, sizeof *pc);
  if (!pass_costs_load(a, path, pc, stderr)) {
    if (from_env)
      fprintf(stderr, "tdslc: note: the environment variable TDSL_COSTS names '%s'\n", path);
    return 1;
  }
  const char *family = pass_costs_family(o->target);
  if (strcmp(pc->name, family)) {
    if (from_env) return 0;
    fprintf(stderr, "tdslc: error: --costs: '%s' holds costs for the %s family, but "
            "--target=%s is weighed with the %s family's\n", path, pc->name, o->target,
            family);
    return 1;
  }
  *out = pc;
  return 0;
}

static int compile_or_run(const Options *o) {
  Arena *a = arena_new();
  const PassCosts *costs = NULL;
  if (!o->run && load_costs(o, a, &costs)) {
    arena_free(a);
    return 1;
  }
  char *src = read_source(o->file);
  if (!src) {
    arena_free(a);
    return 1;
  }
  IrModule *m = front_end(o, a, src);
  int status = 1;
  if (m && o->run)
    status = tdsl_run(m, o->kernels[0], o->ninputs, o->inputs, o->noutputs,
                      o->outputs, stderr);
  else if (m)
    status = emit_all(o, m, src, costs);
  arena_free(a);
  free(src);
  return status;
}

/* tdslc --calibrate[=quick] [-o FILE] [--target=T] [-On]: only these. */
static int run_calibrate(const Options *o) {
  if (o->run) return usage_error("--calibrate cannot be used with tdslc run");
  if (o->file)
    return usage_error("--calibrate takes no input file (it compiles its own kernels), "
                       "got '%s'", o->file);
  if (o->emit || o->nkernels || o->report_path || o->dump_after || o->ndisabled ||
      o->costs || o->layout != LAYOUT_POLICY_AUTO || o->ninputs || o->noutputs)
    return usage_error("--calibrate takes only -o FILE, --target and -O1..-O3");
  if (strcmp(pass_costs_family(o->target), "cpu"))
    return usage_error("--calibrate measures the CPU: --target=%s is not a CPU target",
                       o->target);
  if (o->opt_level == 0)
    return usage_error("--calibrate measures optimized code: -O0 is not allowed");
  CalibrateOptions c = {.target = o->target, .opt_level = o->opt_level,
                        .quick = o->calibrate_quick, .out = o->out};
  return calibrate(&c);
}

int main(int argc, char **argv) {
  static Options o = {.opt_level = 2, .target = "host"};
  int s = parse_args(&o, argc, argv);
  if (s) return s < 0 ? 0 : s;
  if (o.calibrate) return run_calibrate(&o);
  if (!o.file) return usage_error(o.run ? "tdslc run needs a .tdsl file"
                                        : "no input file");
  s = o.run ? check_run_options(&o) : check_compile_options(&o);
  if (s) return s;
  return compile_or_run(&o);
}
