/* arena.c — bump allocation in 64 KiB blocks (larger requests get a block
 * of their own); everything is released by arena_free(). */
#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

typedef struct Block {
  struct Block *next;
  size_t used, cap;
  _Alignas(16) unsigned char mem[];
} Block;

struct Arena {
  Block *head;
};

enum { BLOCK_SIZE = 64 * 1024 };

static Block *block_new(size_t cap) {
  Block *b = malloc(sizeof(Block) + cap);
  if (!b) ICE("out of memory allocating %zu bytes", cap);
  b->next = NULL;
  b->used = 0;
  b->cap = cap;
  return b;
}

Arena *arena_new(void) {
  Arena *a = malloc(sizeof *a);
  if (!a) ICE("out of memory");
  a->head = block_new(BLOCK_SIZE);
  return a;
}

void arena_free(Arena *a) {
  if (!a) return;
  for (Block *b = a->head, *n; b; b = n) {
    n = b->next;
    free(b);
  }
  free(a);
}

void *arena_alloc(Arena *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  Block *b = a->head;
  if (b->cap - b->used < size) {
    if (size > BLOCK_SIZE / 4) {
      /* A big request gets its own block behind the current one. */
      Block *big = block_new(size);
      big->next = b->next;
      b->next = big;
      big->used = size;
      memset(big->mem, 0, size);
      return big->mem;
    }
    b = block_new(BLOCK_SIZE);
    b->next = a->head;
    a->head = b;
  }
  void *p = b->mem + b->used;
  b->used += size;
  memset(p, 0, size);
  return p;
}

void *arena_dup(Arena *a, const void *p, size_t size) {
  void *q = arena_alloc(a, size);
  if (size) memcpy(q, p, size);
  return q;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *q = arena_alloc(a, n + 1);
  memcpy(q, s, n);
  q[n] = 0;
  return q;
}

char *arena_strdup(Arena *a, const char *s) {
  return arena_strndup(a, s, strlen(s));
}

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) ICE("bad format string");
  char *s = arena_alloc(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

void *arena_grow(Arena *a, void *p, int *cap, size_t elem) {
  int ncap = *cap ? *cap * 2 : 8;
  if (ncap < *cap) ICE("array too large");
  void *q = arena_alloc(a, (size_t)ncap * elem);
  if (p && *cap) memcpy(q, p, (size_t)*cap * elem);
  *cap = ncap;
  return q;
}
