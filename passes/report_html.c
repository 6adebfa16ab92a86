/* report_html.c — the optimization report as one self-contained HTML page
 * (spec §8, --emit=report-html).
 *
 * The page shows the source with every decision marked at its line:col
 * (coloured by pass; hovering shows the messages, clicking opens them
 * under the line), then per kernel the totals, the decisions grouped by
 * pass as the text report lists them, the pass times and the loop form.
 * Everything is in the page (inline CSS and script, no network), and
 * every byte that comes from the program or the report is escaped.  The
 * page reads fully without scripts; the script adds the hover text,
 * the pass filter and the click handling, and appends the element
 * #tdsl-script-ok when it ran without throwing (tests look for it).
 *
 * Needs: report_data.h (the data report.c collects), pass_table (the
 * colour of each pass).  Writes to the caller's FILE; allocates nothing
 * that outlives a call but temporary strings. */
#include <stdlib.h>
#include <string.h>

#include "report_data.h"

/* ---- escaping ------------------------------------------------------------ */

/* n bytes of s as HTML text or attribute value (quotes escaped too). */
static void html_n(FILE *f, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    switch (s[i]) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&#39;", f); break;
    case '\r': break; /* CRLF sources: the line break is '\n' */
    default: fputc(s[i], f);
    }
  }
}

static void html(FILE *f, const char *s) { html_n(f, s, strlen(s)); }

/* What put(f, ...) writes, escaped: sizes and loop forms are printed by
 * functions that write to a FILE. */
static void html_from(FILE *f, void (*put)(FILE *, const void *, const void *),
                      const void *a, const void *b) {
  char *buf = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&buf, &n);
  if (!m) ICE("out of memory");
  put(m, a, b);
  if (fclose(m)) ICE("out of memory");
  html_n(f, buf, n);
  free(buf);
}

/* ---- colours and ids ----------------------------------------------------- */

/* The colour class of a pass: its position in the pipeline, or the last
 * class for a pass outside the table. */
static int pass_class(const char *pass) {
  for (int i = 0; i < pass_count; i++)
    if (!strcmp(pass_table[i].name, pass)) return i;
  return pass_count;
}

/* Decision j of kernel i is element id "d<i>-<j>". */
static void dec_id(FILE *f, int i, int j) { fprintf(f, "d%d-%d", i, j); }

/* ---- the source with its marks ------------------------------------------- */

typedef struct Mark {
  int line, col;  /* 1-based; col in bytes */
  int len;        /* bytes to highlight, 0: the token at col */
  int ki, di;     /* kernel and decision of the first decision here */
} Mark;

static int mark_cmp(const void *pa, const void *pb) {
  const Mark *a = pa, *b = pb;
  if (a->line != b->line) return a->line < b->line ? -1 : 1;
  if (a->col != b->col) return a->col < b->col ? -1 : 1;
  if (a->ki != b->ki) return a->ki < b->ki ? -1 : 1;
  return (a->di > b->di) - (a->di < b->di);
}

/* Every decision's location, sorted by line, column, then report order;
 * decisions at the same line:col share one mark. */
static Mark *collect_marks(const Report *r, int *n) {
  int total = 0;
  for (int i = 0; i < r->nks; i++) total += r->ks[i].ndec;
  Mark *m = malloc(sizeof *m * (size_t)(total ? total : 1));
  if (!m) ICE("out of memory");
  *n = 0;
  for (int i = 0; i < r->nks; i++)
    for (int j = 0; j < r->ks[i].ndec; j++) {
      Loc l = r->ks[i].dec[j].loc;
      if (l.line > 0 && l.col > 0)
        m[(*n)++] = (Mark){l.line, l.col, l.len, i, j};
    }
  qsort(m, (size_t)*n, sizeof *m, mark_cmp);
  return m;
}

static bool same_place(const Mark *a, const Mark *b) {
  return a->line == b->line && a->col == b->col;
}

static bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

/* The bytes a mark at byte offset `at` of a line of n bytes highlights:
 * its Loc's length, else the identifier or the one character there, cut
 * at `limit` (the next mark) and extended to a whole UTF-8 character. */
static size_t mark_len(const char *s, size_t n, size_t at, int len,
                       size_t limit) {
  size_t e = at + 1;
  if (len > 0) e = at + (size_t)len;
  else if (ident_char(s[at]))
    while (e < n && ident_char(s[e])) e++;
  if (e > limit) e = limit;
  if (e > n) e = n;
  while (e < n && ((unsigned char)s[e] & 0xC0) == 0x80) e++;
  return e - at;
}

/* The opening tag of the mark for marks[a..b) (one place). */
static void open_mark(FILE *f, const Report *r, const Mark *m, int a, int b) {
  fprintf(f, "<span class=\"mk p%d\" tabindex=\"0\" data-line=\"%d\" "
          "data-col=\"%d\" data-decs=\"", pass_class(r->ks[m[a].ki].dec[m[a].di].pass),
          m[a].line, m[a].col);
  for (int k = a; k < b; k++) {
    if (k > a) fputc(' ', f);
    dec_id(f, m[k].ki, m[k].di);
  }
  fputs("\">", f);
}

/* One source line (s, n bytes, no newline) with the marks m[*k..) that
 * are on it; advances *k past them.  A mark past the end of the line is
 * a "¶" at its end. */
static void put_line(FILE *f, const Report *r, const char *s, size_t n,
                     int line, const Mark *m, int nm, int *k) {
  size_t at = 0;
  while (*k < nm && m[*k].line == line) {
    int a = *k, b = a;
    while (b < nm && same_place(&m[a], &m[b])) b++;
    size_t c = (size_t)m[a].col - 1, limit = n;
    if (c > n) c = n;
    if (b < nm && m[b].line == line && (size_t)m[b].col - 1 < limit)
      limit = (size_t)m[b].col - 1;
    if (c < at) c = at; /* overlapping marks: this one starts later */
    html_n(f, s + at, c - at);
    open_mark(f, r, m, a, b);
    size_t len = c < n && c < limit ? mark_len(s, n, c, m[a].len, limit) : 0;
    if (len) html_n(f, s + c, len);
    else fputs("\xC2\xB6", f);
    fputs("</span>", f);
    at = c + len;
    *k = b;
  }
  html_n(f, s + at, n - at);
}

/* The hidden row under a line listing its decisions (opened by a click). */
static void put_notes(FILE *f, const Report *r, int line, const Mark *m,
                      int a, int b) {
  fprintf(f, "<tr class=\"notes\" id=\"N%d\" hidden><td></td><td>", line);
  for (int k = a; k < b; k++) {
    const Decision *d = &r->ks[m[k].ki].dec[m[k].di];
    fprintf(f, "<div class=\"note p%d\" data-dec=\"", pass_class(d->pass));
    dec_id(f, m[k].ki, m[k].di);
    fprintf(f, "\"><span class=\"at\">%d:%d</span> <b>", d->loc.line, d->loc.col);
    html(f, d->pass);
    fputs(": ", f);
    html(f, d->kind);
    fputs("</b>: ", f);
    html(f, d->msg);
    fputs("</div>", f);
  }
  fputs("</td></tr>\n", f);
}

static void put_source(FILE *f, const Report *r, const char *src) {
  int nm, k = 0;
  Mark *m = collect_marks(r, &nm);
  fputs("<section id=\"source\"><h2>Source</h2>\n<table class=\"src\">\n", f);
  int line = 1;
  for (const char *p = src; *p || p == src; line++) {
    size_t n = strcspn(p, "\n");
    int first = k;
    fprintf(f, "<tr id=\"L%d\"><td class=\"no\">%d</td><td class=\"code\">",
            line, line);
    put_line(f, r, p, n, line, m, nm, &k);
    fputs("</td></tr>\n", f);
    if (k > first) put_notes(f, r, line, m, first, k);
    p += n;
    if (!*p) break;
    p++;
  }
  fputs("</table>\n", f);
  if (k < nm) /* a location past the last line: a pass bug, but shown */
    put_notes(f, r, 0, m, k, nm);
  fputs("</section>\n", f);
  free(m);
}

/* ---- per kernel ---------------------------------------------------------- */

static void put_bytes(FILE *f, const void *s, const void *unused) {
  report_put_bytes(f, s);
}

static void put_ratio(FILE *f, const void *kr, const void *unused) {
  report_put_ratio(f, kr);
}

static void put_totals(FILE *f, const KReport *kr) {
  if (!kr->has_totals) {
    fputs("<p class=\"totals\">bytes moved, loop nests: not estimated (the "
          "backend cannot lower this kernel)</p>\n", f);
    return;
  }
  fputs("<table class=\"totals\"><tr><th></th><th>-O0</th><th>as compiled"
        "</th></tr>\n<tr><th>bytes moved</th><td>", f);
  html_from(f, put_bytes, kr->bytes_before, NULL);
  fputs("</td><td>", f);
  html_from(f, put_bytes, kr->bytes_after, NULL);
  html_from(f, put_ratio, kr, NULL);
  fprintf(f, "</td></tr>\n<tr><th>loop nests</th><td>%d</td><td>%d</td></tr>\n"
          "<tr><th>scratch</th><td colspan=\"2\">", kr->nests_before, kr->nests_after);
  html_from(f, put_bytes, kr->scratch, NULL);
  fputs("</td></tr></table>\n", f);
}

static void put_decision(FILE *f, const Report *r, int i, int j) {
  const Decision *d = &r->ks[i].dec[j];
  fprintf(f, "<li class=\"dec p%d\" id=\"", pass_class(d->pass));
  dec_id(f, i, j);
  fprintf(f, "\" data-line=\"%d\" data-col=\"%d\" data-pass=\"", d->loc.line,
          d->loc.col);
  html(f, d->pass);
  fputs("\" data-kind=\"", f);
  html(f, d->kind);
  fprintf(f, "\"><a class=\"at\" href=\"#L%d\" data-line=\"%d\">", d->loc.line,
          d->loc.line);
  html(f, r->file);
  fprintf(f, ":%d:%d</a>: <span class=\"pk\">", d->loc.line, d->loc.col);
  html(f, d->pass);
  fputs(": ", f);
  html(f, d->kind);
  fputs("</span>: <span class=\"msg\">", f);
  html(f, d->msg);
  fputs("</span></li>\n", f);
}

/* Decisions grouped by pass, passes in the order they first appear (as
 * the text report). */
static void put_decisions(FILE *f, const Report *r, int i) {
  const KReport *kr = &r->ks[i];
  fputs("<h3>Decisions</h3>\n", f);
  if (!kr->ndec) fputs("<p>No decisions recorded.</p>\n", f);
  for (int a = 0; a < kr->ndec; a++) {
    if (!report_first_of_pass(kr, a)) continue;
    fprintf(f, "<h4 class=\"p%d\">", pass_class(kr->dec[a].pass));
    html(f, kr->dec[a].pass);
    fputs("</h4>\n<ul class=\"decs\">\n", f);
    for (int b = a; b < kr->ndec; b++)
      if (!strcmp(kr->dec[b].pass, kr->dec[a].pass)) put_decision(f, r, i, b);
    fputs("</ul>\n", f);
  }
}

static void put_times(FILE *f, const KReport *kr) {
  fputs("<h3>Pass times</h3>\n", f);
  if (!kr->ntimes) {
    fputs("<p>No passes ran (-O0).</p>\n", f);
    return;
  }
  fputs("<table class=\"times\">\n", f);
  for (int j = 0; j < kr->ntimes; j++) {
    fprintf(f, "<tr><th class=\"p%d\">", pass_class(kr->times[j].name));
    html(f, kr->times[j].name);
    fprintf(f, "</th><td>%.3f ms</td><td>%s</td></tr>\n", kr->times[j].ms,
            kr->times[j].changed ? "changed the kernel" : "");
  }
  fputs("</table>\n", f);
}

typedef struct LoopCall {
  ReportLoopForm fn;
  void *ctx;
} LoopCall;

static void put_loops(FILE *f, const void *call, const void *kernel) {
  const LoopCall *c = call;
  c->fn(f, kernel, c->ctx);
}

static void put_kernel(FILE *f, const Report *r, int i, const LoopCall *lc) {
  const KReport *kr = &r->ks[i];
  fprintf(f, "<section class=\"kernel\" id=\"K%d\"><h2>kernel <code>", i);
  html(f, kr->name);
  fprintf(f, "</code> <a class=\"at\" href=\"#L%d\" data-line=\"%d\">", kr->loc.line,
          kr->loc.line);
  html(f, r->file);
  fprintf(f, ":%d:%d</a></h2>\n", kr->loc.line, kr->loc.col);
  put_totals(f, kr);
  put_decisions(f, r, i);
  put_times(f, kr);
  if (lc->fn) {
    fputs("<details class=\"loops\"><summary>Loop form</summary><pre>", f);
    html_from(f, put_loops, lc, kr->name);
    fputs("</pre></details>\n", f);
  }
  fputs("</section>\n", f);
}

/* ---- the page ------------------------------------------------------------ */

/* Pass colours follow pass_table's order (p0 fold-views ... p4
 * plan-memory); p5 is any other pass. */
static const char css[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;"
    "padding:0 1em 3em;color:#1b1b1b;background:#fff}"
    "h1{font-size:1.4em;margin:.8em 0 .2em}h2{font-size:1.2em;margin:1.2em 0 .4em}"
    "h3{font-size:1em;margin:1em 0 .3em}h4{font-size:.95em;margin:.6em 0 .2em}"
    "code,pre,.src{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}"
    "h1 code,h2 code{font-size:.95em}h2 a.at{font-size:.8em;font-weight:400}"
    ".legend{display:flex;flex-wrap:wrap;gap:.4em;margin:.5em 0}"
    ".legend label{border-radius:3px;padding:.1em .5em;cursor:pointer}"
    ".legend button{margin-left:auto}"
    "table.src{border-collapse:collapse;width:100%;background:#fafafa;"
    "border:1px solid #ddd}"
    ".src td{padding:0 .6em;vertical-align:top;white-space:pre;tab-size:4}"
    ".src td.no{color:#999;text-align:right;user-select:none;width:3em;"
    "border-right:1px solid #ddd}"
    ".src tr:target td{background:#fff6c8}"
    ".notes td{white-space:normal;padding:.2em .6em .4em}"
    ".note{margin:.15em 0;padding:.15em .5em;border-left:4px solid;"
    "background:#fff;font-family:system-ui,sans-serif}"
    ".mk{border-radius:2px;cursor:pointer;padding:0 1px;position:relative}"
    ".mk[data-n]:not([data-n='1'])::after{content:attr(data-n);font-size:9px;"
    "vertical-align:super;margin-left:1px}"
    ".mk.flash{outline:2px solid #000}"
    "table.totals,table.times{border-collapse:collapse}"
    ".totals th,.totals td,.times th,.times td{border:1px solid #ddd;"
    "padding:.15em .6em;text-align:left}"
    "ul.decs{margin:.2em 0;padding-left:1.2em}"
    "li.dec{margin:.15em 0;border-left:4px solid;padding-left:.5em;list-style:none}"
    ".pk{font-weight:600}a.at{color:inherit}"
    "details.loops pre{background:#f4f4f4;border:1px solid #ddd;padding:.5em;"
    "overflow:auto;max-height:30em}"
    ".p0{--c:#1f77b4;--b:#d6e8f7}.p1{--c:#d62728;--b:#f9d9d9}"
    ".p2{--c:#9467bd;--b:#ebe1f4}.p3{--c:#2ca02c;--b:#d8f0d8}"
    ".p4{--c:#e08a00;--b:#fbe7c6}.p5{--c:#7f7f7f;--b:#e6e6e6}"
    ".mk,.legend label{background:var(--b);box-shadow:inset 0 -2px var(--c)}"
    ".note,li.dec{border-color:var(--c)}h4,.times th{color:var(--c)}"
    ".hide-p0 .mk.p0,.hide-p1 .mk.p1,.hide-p2 .mk.p2,.hide-p3 .mk.p3,"
    ".hide-p4 .mk.p4,.hide-p5 .mk.p5{background:none;box-shadow:none}"
    ".hide-p0 .p0.note,.hide-p1 .p1.note,.hide-p2 .p2.note,.hide-p3 .p3.note,"
    ".hide-p4 .p4.note,.hide-p5 .p5.note{display:none}";

/* Hover text and click handling for the marks, the pass filter, "open
 * all", and a link to a line (#L5) opening that line's notes.  Throws (and so never sets #tdsl-script-ok) when a mark names a
 * decision the page lacks. */
static const char script[] =
    "(function(){'use strict';\n"
    "var decs={};\n"
    "document.querySelectorAll('li.dec').forEach(function(li){decs[li.id]=li;});\n"
    "function notes(line){return document.getElementById('N'+line);}\n"
    "function open(line,on){var n=notes(line);if(n)n.hidden=on===undefined?!n.hidden:!on;}\n"
    "document.querySelectorAll('.mk').forEach(function(mk){\n"
    "  var ids=mk.dataset.decs.split(' '),text=[];\n"
    "  ids.forEach(function(id){var li=decs[id];\n"
    "    if(!li)throw new Error('mark at '+mk.dataset.line+':'+mk.dataset.col+' names no decision '+id);\n"
    "    text.push(li.dataset.pass+': '+li.dataset.kind+': '+li.querySelector('.msg').textContent);});\n"
    "  mk.title=text.join('\\n');mk.dataset.n=String(ids.length);\n"
    "  mk.addEventListener('click',function(){open(mk.dataset.line);});\n"
    "  mk.addEventListener('keydown',function(e){if(e.key==='Enter')open(mk.dataset.line);});\n"
    "});\n"
    "document.querySelectorAll('li.dec a.at').forEach(function(a){\n"
    "  a.addEventListener('click',function(){var li=a.parentNode;open(li.dataset.line,true);\n"
    "    document.querySelectorAll('.mk').forEach(function(mk){\n"
    "      var hit=mk.dataset.decs.split(' ').indexOf(li.id)>=0;mk.classList.toggle('flash',hit);});});\n"
    "});\n"
    "document.querySelectorAll('.legend input').forEach(function(cb){\n"
    "  cb.addEventListener('change',function(){document.body.classList.toggle('hide-'+cb.dataset.cls,!cb.checked);});\n"
    "});\n"
    "var all=document.getElementById('open-all');\n"
    "all.addEventListener('click',function(){var on=all.dataset.on!=='1';all.dataset.on=on?'1':'0';\n"
    "  all.textContent=on?'close all notes':'open all notes';\n"
    "  document.querySelectorAll('tr.notes').forEach(function(n){n.hidden=!on;});});\n"
    "function fromHash(){var m=/^#L([0-9]+)$/.exec(location.hash);if(m)open(m[1],true);}\n"
    "window.addEventListener('hashchange',fromHash);fromHash();\n"
    "var ok=document.createElement('div');ok.id='tdsl-script-ok';ok.hidden=true;\n"
    "document.body.appendChild(ok);\n"
    "})();\n";

/* One checkbox per pass that has decisions, in pipeline order. */
static void put_legend(FILE *f, const Report *r) {
  fputs("<div class=\"legend\">", f);
  for (int c = 0; c <= pass_count; c++) {
    int n = 0;
    const char *name = c < pass_count ? pass_table[c].name : "other passes";
    for (int i = 0; i < r->nks; i++)
      for (int j = 0; j < r->ks[i].ndec; j++)
        n += pass_class(r->ks[i].dec[j].pass) == c;
    if (!n) continue;
    fprintf(f, "<label class=\"p%d\"><input type=\"checkbox\" checked "
            "data-cls=\"p%d\"> %s (%d)</label>", c, c, name, n);
  }
  fputs("<button type=\"button\" id=\"open-all\">open all notes</button></div>\n", f);
}

static void put_head(FILE *f, const Report *r) {
  int n = 0;
  for (int i = 0; i < r->nks; i++) n += r->ks[i].ndec;
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width\">\n<title>", f);
  html(f, r->file);
  fprintf(f, " — tdsl optimization report</title>\n<style>%s</style>\n</head>\n"
          "<body>\n<h1>Optimization report for <code>", css);
  html(f, r->file);
  fputs("</code></h1>\n<p>target ", f);
  html(f, r->target);
  fprintf(f, " · %d kernel%s · %d decision%s · hover a mark for its "
          "decisions, click it to open them under the line</p>\n",
          r->nks, r->nks == 1 ? "" : "s", n, n == 1 ? "" : "s");
  put_legend(f, r);
}

void report_write_html(const Report *r, const char *source,
                       ReportLoopForm loop_form, void *ctx, FILE *f) {
  put_head(f, r);
  if (source) put_source(f, r, source);
  LoopCall lc = {loop_form, ctx};
  for (int i = 0; i < r->nks; i++) put_kernel(f, r, i, &lc);
  fprintf(f, "<script>\n%s</script>\n</body></html>\n", script);
}
