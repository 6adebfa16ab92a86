/* emu.c — a CPU stand-in for launching a tdslc CUDA device kernel (its
 * LLVM IR made x86-64 by to_host.py), for tests on machines without a
 * GPU: emu_launch runs the grid's blocks one after another (x fastest,
 * then y, then z), each block's 256 threads as fibers on the calling
 * thread (own stacks, switched by emu_swap below: no OS threads, no
 * signal masks), which a scheduler resumes in turn until all have
 * returned (in thread order, or backwards on every other launch).  barrier0 is a barrier over the block's running threads
 * (each waits, yielding, until all have arrived), a warp shuffle an
 * exchange through memory between two barriers over the warp's 32
 * threads, and mma.sync.aligned.m16n8k16.row.col.f32.{f16,
 * bf16}.{f16,bf16}.f32 the same: each lane leaves its fragments, then
 * computes its own elements of D from the whole warp's, placed as the
 * PTX ISA's "Matrix Fragments for mma.m16n8k16 with floating point
 * type" tables place them (emu_mma); div.approx.ftz.f32 a division.
 * A kernel that needs another intrinsic is refused by to_host.py.
 * Every kernel parameter is a pointer or an i64, so the kernel is called
 * with 512 uint64_t arguments (the System V ABI passes both alike; extra
 * ones are ignored).  x86-64 only.  Used by rows.c and mma.c (run.sh)
 * and, linked into each case's module, by gpu_exec --emu through
 * tests/unit/fake_libcuda.c (FAKE_CUDA_EMU). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

#define NT 256
#define STACK (128 * 1024) /* per thread: row groups keep rows in locals */
static int cur, ctaid[3]; /* the running thread; its block */
static int g_grid[3];
static uint32_t slots[NT];

/* ---- the threads: fibers -------------------------------------------------
 * emu_swap(from, to) saves the callee-saved registers on the current
 * stack, stores the stack pointer in *from and continues on `to`'s. */
void emu_swap(void **from, void *to);
__asm__(".text\n.p2align 4\n.type emu_swap,@function\nemu_swap:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n.size emu_swap, .-emu_swap\n");

static void *sched_sp, *fiber_sp[NT];
static unsigned char *stacks;
static int finished[NT], nfinished;

static void yield(void) { emu_swap(&fiber_sp[cur], sched_sp); }

/* Waits (yielding) until `count` threads have arrived; *gen counts the
 * barrier's rounds, *arrived the threads in this one. */
static void wait_all(unsigned *gen, unsigned *arrived, unsigned count) {
  unsigned g = *gen;
  if (++*arrived >= count) {
    *arrived = 0, ++*gen;
    return;
  }
  while (*gen == g) yield();
}

static unsigned bar_gen, bar_arrived, warp_gen[NT / 32], warp_arrived[NT / 32];
static void warp_barrier(int w) { wait_all(&warp_gen[w], &warp_arrived[w], 32); }

#define ASM(name) __asm__(name)
int emu_tid(void) ASM("emu.read.ptx.sreg.tid.x");
int emu_ntid(void) ASM("emu.read.ptx.sreg.ntid.x");
int emu_ctaid(void) ASM("emu.read.ptx.sreg.ctaid.x");
int emu_nctaid(void) ASM("emu.read.ptx.sreg.nctaid.x");
int emu_ctaid_y(void) ASM("emu.read.ptx.sreg.ctaid.y");
int emu_nctaid_y(void) ASM("emu.read.ptx.sreg.nctaid.y");
int emu_ctaid_z(void) ASM("emu.read.ptx.sreg.ctaid.z");
int emu_nctaid_z(void) ASM("emu.read.ptx.sreg.nctaid.z");
void emu_barrier0(void) ASM("emu.barrier0");
float emu_div_approx(float a, float b) ASM("emu.div.approx.ftz.f");
uint32_t emu_bfly(uint32_t mask, uint32_t v, int m, int clamp) ASM("emu.shfl.sync.bfly.i32");
uint32_t emu_down(uint32_t mask, uint32_t v, int d, int clamp) ASM("emu.shfl.sync.down.i32");

int emu_tid(void) { return cur; }
int emu_ntid(void) { return NT; }
int emu_ctaid(void) { return ctaid[0]; }
int emu_nctaid(void) { return g_grid[0]; }
int emu_ctaid_y(void) { return ctaid[1]; }
int emu_nctaid_y(void) { return g_grid[1]; }
int emu_ctaid_z(void) { return ctaid[2]; }
int emu_nctaid_z(void) { return g_grid[2]; }
/* over the threads still running (one that has returned counts as arrived) */
void emu_barrier0(void) { wait_all(&bar_gen, &bar_arrived, (unsigned)(NT - nfinished)); }
/* div.approx.ftz.f32 (the math layer's reciprocal for tanh and sigmoid):
 * within 2 ulp on a GPU; the correctly rounded quotient here. */
float emu_div_approx(float a, float b) { return a / b; }

/* Lane `src`'s v (this lane's own when !in_range). */
static uint32_t exchange(uint32_t v, int src, int in_range) {
  int w = cur / 32;
  slots[cur] = v;
  warp_barrier(w);
  uint32_t r = in_range ? slots[w * 32 + src] : v;
  warp_barrier(w);
  return r;
}

uint32_t emu_bfly(uint32_t mask, uint32_t v, int m, int clamp) {
  (void)mask, (void)clamp;
  return exchange(v, (cur % 32) ^ m, 1);
}

uint32_t emu_down(uint32_t mask, uint32_t v, int d, int clamp) {
  (void)mask, (void)clamp;
  int l = cur % 32 + d;
  return exchange(v, l, l < 32);
}

/* ---- mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 ----
 * Per lane: A as four 32-bit registers holding a0..a7 (two 16-bit
 * elements each, the lower-numbered in the low half), B as two holding
 * b0..b3, C and D as four f32 c0..c3.  With groupID = lane >> 2 and
 * threadID_in_group = lane % 4 (the ISA's names), the ISA places
 *   A (16 x 16, row): ai at row groupID for i in {0, 1, 4, 5}, else
 *     groupID + 8; column threadID_in_group * 2 + (i & 1), plus 8 for
 *     i >= 4;
 *   B (16 x 8, col): bi at row threadID_in_group * 2 + (i & 1), plus 8
 *     for i >= 2; column groupID;
 *   C, D (16 x 8): ci at row groupID for i < 2, else groupID + 8;
 *     column threadID_in_group * 2 + (i & 1).
 * The functions below invert those tables (which lane and element hold
 * A[r][k], B[k][n]); D = A B + C with exact products summed in double and
 * rounded once to f32 (the hardware's order and rounding of the sum are
 * not specified; tests compare within tolerances). */
typedef struct Frags {
  uint32_t a[4], b[2];
} Frags;
static Frags frags[2][NT]; /* alternate mmas use alternate halves: one
                              barrier each (a lane that writes a half again
                              has passed the barrier every lane reaches
                              only after reading it) */
static int half[NT];

static double half_value(uint32_t reg, int hi, int bf16) {
  uint16_t h = (uint16_t)(hi ? reg >> 16 : reg & 0xffff);
  if (bf16) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  _Float16 x;
  memcpy(&x, &h, 2);
  return (double)x;
}

/* Element number i (a_i, b_i) as register i / 2, half i % 2. */
static double frag_el(const uint32_t *regs, int i, int bf16) { return half_value(regs[i / 2], i % 2, bf16); }

/* A[r][k] of warp w: the lane with groupID r % 8 and threadID_in_group
 * (k % 8) / 2; its element i = (k & 1) + 2 (r >= 8) + 4 (k >= 8). */
static double mma_a(const Frags *f, int w, int r, int k, int bf16) {
  int lane = (r % 8) * 4 + (k % 8) / 2, i = (k & 1) + 2 * (r >= 8) + 4 * (k >= 8);
  return frag_el(f[w * 32 + lane].a, i, bf16);
}

/* B[k][n]: the lane with groupID n, threadID_in_group (k % 8) / 2; its
 * element i = (k & 1) + 2 (k >= 8). */
static double mma_b(const Frags *f, int w, int k, int n, int bf16) {
  int lane = n * 4 + (k % 8) / 2, i = (k & 1) + 2 * (k >= 8);
  return frag_el(f[w * 32 + lane].b, i, bf16);
}

void emu_mma(int bf16, float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1,
             float c0, float c1, float c2, float c3) {
  int w = cur / 32, lane = cur % 32;
  Frags *f = frags[half[cur]];
  half[cur] ^= 1;
  f[cur] = (Frags){{a0, a1, a2, a3}, {b0, b1}};
  warp_barrier(w);
  int group = lane >> 2, tig = lane % 4;
  float c[4] = {c0, c1, c2, c3};
  for (int i = 0; i < 4; i++) {
    int r = group + 8 * (i >= 2), n = tig * 2 + (i & 1);
    double s = c[i];
    for (int k = 0; k < 16; k++) s += mma_a(f, w, r, k, bf16) * mma_b(f, w, k, n, bf16);
    d[i] = (float)s;
  }
}

#define A8 uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t
#define A32 A8, A8, A8, A8
#define A256 A32, A32, A32, A32, A32, A32, A32, A32
typedef void (*Kernel)(A256, A256); /* EMU_MAX_ARGS */
static Kernel g_fn;
static uint64_t g_args[EMU_MAX_ARGS];

/* A thread: the kernel, then back to the scheduler for good. */
static void fiber_main(void) {
  const uint64_t *a = g_args;
#define R8(i) a[i], a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5], a[i + 6], a[i + 7]
#define R32(i) R8(i), R8(i + 8), R8(i + 16), R8(i + 24)
#define R256(i) R32(i), R32(i + 32), R32(i + 64), R32(i + 96), R32(i + 128), R32(i + 160), R32(i + 192), R32(i + 224)
  g_fn(R256(0), R256(256));
  finished[cur] = 1, nfinished++;
  if (bar_arrived && bar_arrived >= (unsigned)(NT - nfinished)) /* the others wait for none now */
    bar_arrived = 0, bar_gen++;
  yield();
  abort(); /* never resumed */
}

/* One block: every thread starts at fiber_main and runs until it waits
 * or returns; the scheduler resumes the unfinished ones in turn, in
 * thread order, or backwards on every other launch (g_backwards), so
 * that a thread reading what another wrote without a barrier between
 * them sees the write in one order and misses it in the other. */
static int g_backwards;
static void run_block(void) {
  for (int t = 0; t < NT; t++) {
    /* fiber_main's address where emu_swap's ret finds it, six zero
     * registers below; after the ret the stack is as after a call */
    uint64_t *top = (uint64_t *)(stacks + (size_t)(t + 1) * STACK) - 2;
    void (*entry)(void) = fiber_main;
    memcpy(&top[0], &entry, sizeof entry);
    top[1] = 0;
    memset(top - 6, 0, 6 * sizeof *top);
    fiber_sp[t] = top - 6;
    finished[t] = 0, half[t] = 0;
  }
  nfinished = 0, bar_arrived = 0;
  memset(warp_arrived, 0, sizeof warp_arrived);
  while (nfinished < NT)
    for (int i = 0; i < NT; i++) {
      int t = g_backwards ? NT - 1 - i : i;
      if (!finished[t]) cur = t, emu_swap(&sched_sp, fiber_sp[t]);
    }
}

void emu_launch(void (*fn)(void), int grid, const uint64_t *args, int nargs) {
  emu_launch3(fn, (int[3]){grid, 1, 1}, args, nargs);
}

void emu_launch3(void (*fn)(void), const int grid[3], const uint64_t *args, int nargs) {
  g_fn = (Kernel)(void *)fn;
  memset(g_args, 0, sizeof g_args);
  memcpy(g_args, args, sizeof *args * (size_t)nargs);
  memcpy(g_grid, grid, sizeof g_grid);
  static unsigned launches;
  g_backwards = launches++ & 1;
  if (!stacks && !(stacks = aligned_alloc(64, (size_t)NT * STACK))) {
    fprintf(stderr, "emu: no memory for the threads' stacks\n");
    abort();
  }
  for (int z = 0; z < g_grid[2]; z++)
    for (int y = 0; y < g_grid[1]; y++)
      for (int x = 0; x < g_grid[0]; x++) ctaid[0] = x, ctaid[1] = y, ctaid[2] = z, run_block();
}
