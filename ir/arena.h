/* arena.h — one bump allocator per compilation.
 *
 * Every AST node, symbolic expression, IR value and string made while
 * compiling one file comes from the same Arena and is freed at once by
 * arena_free(). Passes never free individual nodes.  All allocation goes
 * through arena_alloc(). */
#ifndef TDSL_ARENA_H
#define TDSL_ARENA_H

#include <stddef.h>

typedef struct Arena Arena;

Arena *arena_new(void);
void arena_free(Arena *a);
/* Zeroed, 16-byte aligned memory; never returns NULL (an exhausted heap is
 * an internal error, exit 3). */
void *arena_alloc(Arena *a, size_t size);
void *arena_dup(Arena *a, const void *p, size_t size);
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Growable arrays live in the arena too: doubles *cap and copies. */
void *arena_grow(Arena *a, void *p, int *cap, size_t elem);

#endif
