/* emu.h — emu.c's launch: kernel fn (a to_host.py module's function) over
 * `grid` blocks of 256 threads, its parameters (pointers and i64 values,
 * cuda.h's order) in args[0 .. nargs). */
#ifndef TDSL_TESTS_EMU_H
#define TDSL_TESTS_EMU_H
#include <stdint.h>
#define EMU_MAX_ARGS 40
void emu_launch(void (*fn)(void), int grid, const uint64_t *args, int nargs);
#endif
