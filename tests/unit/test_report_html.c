/* test_report_html.c — the HTML report writer (passes/report_html.c) on
 * a hand-made report: everything from the program and the report is
 * escaped, each decision is marked at its line:col (shared marks for one
 * place, a pilcrow past the end of a line), the loop form is shown, and
 * the page loads nothing from outside.  The browser test (report_html,
 * tests/html/) checks real pages as Chromium shows them. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static Arena *A;
static char *page;

static void loops(FILE *f, const char *kernel, void *ctx) {
  fprintf(f, "for i < N: <%s> & %s\n", kernel, (const char *)ctx);
}

/* The page for `src` with three decisions of kernel "k" at 2:5 (twice)
 * and 2:40 (past the end of line 2). */
static void write_page(const char *src) {
  Report *r = report_new(A, "a<b>.tdsl", "host");
  IrKernel k = {.name = "k", .loc = {1, 8, 1}};
  report_kernel(r, &k);
  report_decision(r, "fuse", "fused", (Loc){2, 5, 4}, 8,
                  "relu(...) at 2:5 <inside> \"the\" copy & 'more'");
  report_decision(r, "fold-views", "fold", (Loc){2, 5, 0}, 0, "second");
  report_decision(r, "plan-memory", "plan", (Loc){2, 40, 0}, 0, "past the end");
  size_t n;
  FILE *f = open_memstream(&page, &n);
  ck_assert_ptr_nonnull(f);
  report_write_html(r, src, loops, "</pre><script>", f);
  fclose(f);
}

static void setup(void) { A = arena_new(); page = NULL; }
static void teardown(void) { arena_free(A); free(page); }

#define HAS(s) ck_assert_msg(strstr(page, s) != NULL, "page lacks %s", s)
#define LACKS(s) ck_assert_msg(strstr(page, s) == NULL, "page has %s", s)

START_TEST(test_escapes_everything) {
  write_page("# </script><b>&amp;</b>\n  y.relu()\n");
  HAS("# &lt;/script&gt;&lt;b&gt;&amp;amp;&lt;/b&gt;");
  HAS("relu(...) at 2:5 &lt;inside&gt; &quot;the&quot; copy &amp; &#39;more&#39;");
  HAS("a&lt;b&gt;.tdsl:2:5</a>");
  HAS("for i &lt; N: &lt;k&gt; &amp; &lt;/pre&gt;&lt;script&gt;");
  LACKS("</script><b>");
  LACKS("<b>&amp;</b>");
  /* One script element: the page's own. */
  const char *s = strstr(page, "<script>");
  ck_assert_ptr_nonnull(s);
  ck_assert_ptr_null(strstr(s + 1, "<script"));
  LACKS("http://");
  LACKS("https://");
  LACKS(" src=");
}
END_TEST

START_TEST(test_marks) {
  write_page("kernel k() {\n  y.relu()\n}");
  /* Both decisions at 2:5 share one mark over "relu" (the Loc's length),
   * coloured as the first (fuse, the pipeline's 4th pass: p3). */
  HAS("<span class=\"mk p3\" tabindex=\"0\" data-line=\"2\" data-col=\"5\" "
      "data-decs=\"d0-0 d0-1\">relu</span>");
  /* Past the end of the line: a pilcrow at its end. */
  HAS("data-col=\"40\" data-decs=\"d0-2\">\xC2\xB6</span></td>");
  /* The notes under line 2 hold all three; the last line has no newline
   * and is still shown. */
  HAS("<tr class=\"notes\" id=\"N2\" hidden>");
  HAS("<tr id=\"L3\"><td class=\"no\">3</td><td class=\"code\">}</td></tr>");
  LACKS("id=\"L4\"");
}
END_TEST

static Suite *report_html_suite(void) {
  Suite *s = suite_create("report_html");
  TCase *tc = tcase_create("page");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_escapes_everything);
  tcase_add_test(tc, test_marks);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(report_html_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
