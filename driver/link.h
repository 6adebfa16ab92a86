/* link.h — --emit=so: the link step (link.c). */
#ifndef TDSL_LINK_H
#define TDSL_LINK_H

#include <stddef.h>

/* Links the object obj, holding the n kernels named in kernels, with the
 * runtime library into the shared library out, through the system C
 * compiler.  Returns the exit status: 0, or 1 after a message on stderr
 * (no C compiler, no runtime library, or a failed link). */
int link_shared(const char *obj, const char *const *kernels, int n,
                const char *out);

/* Merges n relocatable objects (data[i], size[i] bytes) into one with
 * the system C compiler (`$CC -r -nostdlib`); *out is malloc'd.  Returns
 * 0, or 1 without a message (codegen.h CgOptions.merge_objects). */
int link_relocatable(const char *const *data, const size_t *size, int n, char **out,
                     size_t *outsize);

/* A fresh temporary directory ("$TMPDIR/tdslc.XXXXXX"), malloc'd, or
 * NULL after a message. */
char *link_tempdir(void);

/* Removes dir and the files in it (not recursive). */
void link_remove_tempdir(const char *dir);

#endif
