/* report_data.h — the optimization report's data, shared by its writers
 * (report.c: text and JSON; report_html.c: the HTML page) and by nothing
 * else: passes record through the functions of passes.h.
 *
 * A Report holds one section per kernel, in the order kernels were first
 * seen; a section holds its decisions in the order passes recorded them,
 * the time of each pass, and the totals the driver sets after lowering.
 * Everything lives in the report's arena. */
#ifndef TDSL_REPORT_DATA_H
#define TDSL_REPORT_DATA_H

#include "passes.h"

typedef struct Decision {
  const char *pass, *kind, *msg;
  Loc loc;           /* of the op the decision is about */
  int64_t bytes;     /* when sbytes is NULL */
  const Sym *sbytes; /* symbolic bytes, or NULL */
  const char *json;  /* more JSON members ("\"a\": 1, \"b\": 2"), or NULL */
} Decision;

typedef struct PassTime {
  const char *name;
  double ms;
  bool changed;
} PassTime;

typedef struct KReport {
  const char *name;
  Loc loc;
  Decision *dec;
  int ndec, deccap;
  PassTime *times;
  int ntimes, timecap;
  bool has_totals; /* false: the backend could not lower the kernel */
  const Sym *bytes_before, *bytes_after, *scratch;
  int nests_before, nests_after;
} KReport;

struct Report {
  Arena *a;
  const char *file, *target;
  const char *isa;  /* report_set_isa, or NULL */
  KReport *ks;
  int nks, kcap;
  int cur; /* the kernel decisions go to; -1 before report_kernel */
};

/* True when decision i is the first of its pass in kr: the writers list
 * decisions grouped by pass, passes in the order they first appear. */
bool report_first_of_pass(const KReport *kr, int i);
/* A size for people: "1.50 KB" when constant, "4*N bytes" when not, "?"
 * when unknown (NULL). */
void report_put_bytes(FILE *f, const Sym *s);
/* " (3.10x less)" / " (1.20x more)" when both totals are constant and
 * differ, else nothing. */
void report_put_ratio(FILE *f, const KReport *kr);

#endif
