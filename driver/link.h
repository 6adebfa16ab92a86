/* link.h — --emit=so: the link step (link.c). */
#ifndef TDSL_LINK_H
#define TDSL_LINK_H

/* Links the object obj, holding the n kernels named in kernels, with the
 * runtime library into the shared library out, through the system C
 * compiler.  Returns the exit status: 0, or 1 after a message on stderr
 * (no C compiler, no runtime library, or a failed link). */
int link_shared(const char *obj, const char *const *kernels, int n,
                const char *out);

/* A fresh temporary directory ("$TMPDIR/tdslc.XXXXXX"), malloc'd, or
 * NULL after a message. */
char *link_tempdir(void);

/* Removes dir and the files in it (not recursive). */
void link_remove_tempdir(const char *dir);

#endif
