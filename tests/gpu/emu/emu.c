/* emu.c — a CPU stand-in for launching a tdslc CUDA device kernel (its
 * LLVM IR made x86-64 by to_host.py), for tests on machines without a
 * GPU: emu_launch runs the grid's blocks one after another, each block's
 * 256 threads as pthreads (a pool made once per launch); barrier0 is a
 * pthread barrier over the block, a warp shuffle an exchange through
 * memory between two barriers over the warp's 32 threads.  A kernel that
 * needs another intrinsic is refused by to_host.py.  Every kernel
 * parameter is a pointer or an i64, so the kernel is called with 40
 * uint64_t arguments (the System V ABI passes both alike; extra ones are
 * ignored).  Used by rows.c (run.sh). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "emu.h"

#define NT 256
static __thread int t_tid, t_ctaid;
static int g_grid;
static pthread_barrier_t bar, wbar[NT / 32], done;
static uint32_t slots[NT];

#define ASM(name) __asm__(name)
int emu_tid(void) ASM("emu.read.ptx.sreg.tid.x");
int emu_ntid(void) ASM("emu.read.ptx.sreg.ntid.x");
int emu_ctaid(void) ASM("emu.read.ptx.sreg.ctaid.x");
int emu_nctaid(void) ASM("emu.read.ptx.sreg.nctaid.x");
void emu_barrier0(void) ASM("emu.barrier0");
uint32_t emu_bfly(uint32_t mask, uint32_t v, int m, int clamp) ASM("emu.shfl.sync.bfly.i32");
uint32_t emu_down(uint32_t mask, uint32_t v, int d, int clamp) ASM("emu.shfl.sync.down.i32");

int emu_tid(void) { return t_tid; }
int emu_ntid(void) { return NT; }
int emu_ctaid(void) { return t_ctaid; }
int emu_nctaid(void) { return g_grid; }
void emu_barrier0(void) { pthread_barrier_wait(&bar); }

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

#define A8 uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t
typedef void (*Kernel)(A8, A8, A8, A8, A8);
static Kernel g_fn;
static uint64_t g_args[EMU_MAX_ARGS];

static void *worker(void *p) {
  t_tid = (int)(intptr_t)p;
  const uint64_t *a = g_args;
#define R8(i) a[i], a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5], a[i + 6], a[i + 7]
  for (int b = 0; b < g_grid; b++) {
    t_ctaid = b;
    g_fn(R8(0), R8(8), R8(16), R8(24), R8(32));
    pthread_barrier_wait(&done); /* the block's threads have all returned */
  }
  return NULL;
}

void emu_launch(void (*fn)(void), int grid, const uint64_t *args, int nargs) {
  g_fn = (Kernel)(void *)fn;
  memset(g_args, 0, sizeof g_args);
  memcpy(g_args, args, sizeof *args * (size_t)nargs);
  g_grid = grid;
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
