/* fuzz_frontend.c — libFuzzer target for the front end: any byte string
 * is parsed; a program that parses is checked by sema, and a module that
 * sema accepts is verified.  No input may crash, hang, leak or trip a
 * sanitizer.  Diagnostics go to /dev/null (opened once).
 * Build: cmake -DTDSL_FUZZ=ON with clang; seeds in tests/fuzz/corpus. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull) devnull = fopen("/dev/null", "w");
  if (!devnull) abort();
  char *src = malloc(size + 1);
  if (!src) return 0;
  memcpy(src, data, size);
  src[size] = 0;

  Arena *a = arena_new();
  Diag d;
  diag_init(&d, "fuzz.tdsl", src, devnull);
  AstProgram *p = parse_program(a, &d, src);
  if (p) {
    IrModule *m = sema_program(a, &d, p, "fuzz.tdsl");
    if (m && d.nerrors == 0 && ir_verify(m, devnull) != 0) abort();
  }
  arena_free(a);
  free(src);
  return 0;
}
