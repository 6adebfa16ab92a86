/* emu.h — emu.c's launch: kernel fn (a to_host.py module's function) over
 * `grid` blocks of 256 threads, its parameters (pointers and i64 values,
 * cuda.h's order) in args[0 .. nargs), run on the calling thread before
 * it returns (one launch at a time per process); and its mma. */
#ifndef TDSL_TESTS_EMU_H
#define TDSL_TESTS_EMU_H
#include <stdint.h>
#define EMU_MAX_ARGS 512 /* 4 KiB of .u64 parameters: CUDA's usual limit */
void emu_launch(void (*fn)(void), int grid, const uint64_t *args, int nargs);
/* The same over a grid of grid[0] x grid[1] x grid[2] blocks. */
void emu_launch3(void (*fn)(void), const int grid[3], const uint64_t *args, int nargs);
/* A warp's mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32
 * (bf16: the operands' type): this lane's A (a0..a3) and B (b0, b1)
 * registers and C (c0..c3) in, its D into d[0..3]; every lane of the
 * warp calls it (to_host.py's wrapper of the NVVM intrinsics calls it). */
void emu_mma(int bf16, float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1,
             float c0, float c1, float c2, float c3);
#endif
