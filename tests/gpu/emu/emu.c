/* emu.c — a CPU stand-in for launching a tdslc CUDA device kernel (its
 * LLVM IR made x86-64 by to_host.py), for tests on machines without a
 * GPU: emu_launch runs the grid's blocks one after another (x fastest,
 * then y, then z), each block's 256 threads as pthreads (a pool made
 * once per launch); barrier0 is a pthread barrier over the block, a warp
 * shuffle an exchange through memory between two barriers over the
 * warp's 32 threads, and mma.sync.aligned.m16n8k16.row.col.f32.{f16,
 * bf16}.{f16,bf16}.f32 the same: each lane leaves its fragments, then
 * computes its own elements of D from the whole warp's, placed as the
 * PTX ISA's "Matrix Fragments for mma.m16n8k16 with floating point
 * type" tables place them (emu_mma); div.approx.ftz.f32 a division.
 * A kernel that needs another
 * intrinsic is refused by to_host.py.  Every kernel parameter is a
 * pointer or an i64, so the kernel is called with 40 uint64_t arguments
 * (the System V ABI passes both alike; extra ones are ignored).  Used by
 * rows.c and mma.c (run.sh). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "emu.h"

#define NT 256
static __thread int t_tid, t_ctaid[3];
static int g_grid[3];
static pthread_barrier_t bar, wbar[NT / 32], done;
static uint32_t slots[NT];

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

int emu_tid(void) { return t_tid; }
int emu_ntid(void) { return NT; }
int emu_ctaid(void) { return t_ctaid[0]; }
int emu_nctaid(void) { return g_grid[0]; }
int emu_ctaid_y(void) { return t_ctaid[1]; }
int emu_nctaid_y(void) { return g_grid[1]; }
int emu_ctaid_z(void) { return t_ctaid[2]; }
int emu_nctaid_z(void) { return g_grid[2]; }
void emu_barrier0(void) { pthread_barrier_wait(&bar); }
/* div.approx.ftz.f32 (the math layer's reciprocal for tanh and sigmoid):
 * within 2 ulp on a GPU; the correctly rounded quotient here. */
float emu_div_approx(float a, float b) { return a / b; }

/* Lane `src`'s v (this lane's own when !in_range). */
static uint32_t exchange(uint32_t v, int src, int in_range) {
  int w = t_tid / 32;
  slots[t_tid] = v;
  pthread_barrier_wait(&wbar[w]);
  uint32_t r = in_range ? slots[w * 32 + src] : v;
  pthread_barrier_wait(&wbar[w]);
  return r;
}

uint32_t emu_bfly(uint32_t mask, uint32_t v, int m, int clamp) {
  (void)mask, (void)clamp;
  return exchange(v, (t_tid % 32) ^ m, 1);
}

uint32_t emu_down(uint32_t mask, uint32_t v, int d, int clamp) {
  (void)mask, (void)clamp;
  int l = t_tid % 32 + d;
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
static __thread int t_half;

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
  int w = t_tid / 32, lane = t_tid % 32;
  Frags *f = frags[t_half];
  t_half ^= 1;
  f[t_tid] = (Frags){{a0, a1, a2, a3}, {b0, b1}};
  pthread_barrier_wait(&wbar[w]);
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
typedef void (*Kernel)(A8, A8, A8, A8, A8);
static Kernel g_fn;
static uint64_t g_args[EMU_MAX_ARGS];

static void *worker(void *p) {
  t_tid = (int)(intptr_t)p;
  const uint64_t *a = g_args;
#define R8(i) a[i], a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5], a[i + 6], a[i + 7]
  for (int z = 0; z < g_grid[2]; z++)
    for (int y = 0; y < g_grid[1]; y++)
      for (int x = 0; x < g_grid[0]; x++) {
        t_ctaid[0] = x, t_ctaid[1] = y, t_ctaid[2] = z;
        g_fn(R8(0), R8(8), R8(16), R8(24), R8(32));
        pthread_barrier_wait(&done); /* the block's threads have all returned */
      }
  return NULL;
}

void emu_launch(void (*fn)(void), int grid, const uint64_t *args, int nargs) {
  emu_launch3(fn, (int[3]){grid, 1, 1}, args, nargs);
}

void emu_launch3(void (*fn)(void), const int grid[3], const uint64_t *args, int nargs) {
  g_fn = (Kernel)(void *)fn;
  memset(g_args, 0, sizeof g_args);
  memcpy(g_args, args, sizeof *args * (size_t)nargs);
  memcpy(g_grid, grid, sizeof g_grid);
  pthread_barrier_init(&bar, NULL, NT);
  pthread_barrier_init(&done, NULL, NT);
  for (int w = 0; w < NT / 32; w++) pthread_barrier_init(&wbar[w], NULL, 32);
  pthread_t th[NT];
  for (int t = 0; t < NT; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
  for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&bar);
  pthread_barrier_destroy(&done);
  for (int w = 0; w < NT / 32; w++) pthread_barrier_destroy(&wbar[w]);
}
