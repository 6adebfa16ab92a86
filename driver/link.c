/* link.c — --emit=so: a shared library of a file's kernels with the
 * runtime linked in (spec §8), for dlopen() and the Python package.
 *
 * The object comes from codegen (always position-independent: the target
 * machine is created with LLVMRelocPIC).  Beside it this writes a small C
 * index of the kernels, so that a loader can enumerate them without the
 * header:
 *
 *   int tdsl_so_kernel_count(void);
 *   const tdsl_kernel_info *tdsl_so_kernel_info(int i);   (K_info() of kernel i)
 *
 * and runs the system C compiler ($CC, split at blanks; else `cc`):
 *
 *   cc -shared -fPIC -o OUT index.c OBJ -Wl,-Bsymbolic
 *      -Wl,--whole-archive libtdsl_runtime.a -Wl,--no-whole-archive -lm -lpthread -ldl
 *
 * The whole runtime goes in (tdsl_last_error, tdsl_set_num_threads … are
 * called by the loader, not by the kernels), bound to this library's own
 * copy (-Bsymbolic), so each library has its own error state and pool.
 * The runtime archive is $TDSL_RUNTIME_LIB, else found from the tdslc
 * executable (/proc/self/exe): BIN/../lib/libtdsl_runtime.a in an install
 * prefix (spec §10), BIN/runtime/libtdsl_runtime.a in the build tree.
 *
 * link_relocatable merges the objects of a build split across threads
 * (cpu/kernel.c) into one with `ld -r` (with $CC set, or when ld fails:
 * `$CC -r -nostdlib`), quietly: when that fails the backend builds the
 * object as one module.
 * Needs: POSIX (posix_spawnp, mkdtemp). */
#include "link.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MAX_ARGS 64

static char *dup_str(const char *s) {
  char *d = malloc(strlen(s) + 1);
  if (!d) {
    fputs("tdslc: error: out of memory\n", stderr);
    exit(3);
  }
  return strcpy(d, s);
}

static char *join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 1;
  char *s = malloc(n);
  if (!s) return dup_str(""); /* exits */
  snprintf(s, n, "%s%s", a, b);
  return s;
}

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *link_tempdir(void) {
  const char *tmp = getenv("TMPDIR");
  char *dir = join(tmp && *tmp ? tmp : "/tmp", "/tdslc.XXXXXX");
  if (!mkdtemp(dir)) {
    fprintf(stderr, "tdslc: error: cannot create a temporary directory "
            "'%s': %s\n", dir, strerror(errno));
    free(dir);
    return NULL;
  }
  return dir;
}

void link_remove_tempdir(const char *dir) {
  static const char *const files[] = {"/index.c", "/kernels.o"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char *p = join(dir, files[i]);
    unlink(p);
    free(p);
  }
  rmdir(dir);
}

/* The runtime archive, malloc'd, or NULL after a message. */
static char *find_runtime(void) {
  const char *env = getenv("TDSL_RUNTIME_LIB");
  if (env && *env) {
    if (is_file(env)) return dup_str(env);
    fprintf(stderr, "tdslc: error: --emit=so: TDSL_RUNTIME_LIB names '%s', "
            "which is not a file\n", env);
    return NULL;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    static const char *const rel[] = {"/../lib/libtdsl_runtime.a",
                                      "/runtime/libtdsl_runtime.a"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
      char *p = join(exe, rel[i]);
      if (is_file(p)) return p;
      free(p);
    }
  }
  fprintf(stderr, "tdslc: error: --emit=so: cannot find libtdsl_runtime.a "
          "(looked in lib/ beside tdslc's bin/ and in the build tree's "
          "runtime/); set TDSL_RUNTIME_LIB to its path\n");
  return NULL;
}

/* Writes DIR/index.c for the n kernels; returns its path or NULL. */
static char *write_index(const char *dir, const char *const *kernels, int n) {
  char *path = join(dir, "/index.c");
  FILE *f = fopen(path, "w");
  if (f) {
    fputs("/* Written by tdslc --emit=so: the library's kernels. */\n"
          "typedef struct tdsl_kernel_info tdsl_kernel_info;\n"
          "int tdsl_so_kernel_count(void);\n"
          "const tdsl_kernel_info *tdsl_so_kernel_info(int i);\n", f);
    for (int i = 0; i < n; i++)
      fprintf(f, "const tdsl_kernel_info *%s_info(void);\n", kernels[i]);
    fputs("static const tdsl_kernel_info *(*const infos[])(void) = {", f);
    for (int i = 0; i < n; i++) fprintf(f, "%s_info, ", kernels[i]);
    fprintf(f, "0};\n"
            "int tdsl_so_kernel_count(void) { return %d; }\n"
            "const tdsl_kernel_info *tdsl_so_kernel_info(int i) {\n"
            "  return i >= 0 && i < %d ? infos[i]() : 0;\n}\n", n, n);
  }
  if (!f || ferror(f) | fclose(f)) {
    fprintf(stderr, "tdslc: error: cannot write '%s': %s\n", path,
            strerror(errno));
    free(path);
    return NULL;
  }
  return path;
}

/* Runs argv; returns its exit status, or -1 after a message when it could
 * not be started or did not exit normally. */
static int run(char *const *argv) {
  pid_t pid;
  int err = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
  if (err) {
    fprintf(stderr, "tdslc: error: --emit=so needs a C compiler to link: "
            "cannot run '%s': %s (set CC to name one)\n", argv[0],
            strerror(err));
    return -1;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      fprintf(stderr, "tdslc: error: waiting for '%s': %s\n", argv[0],
              strerror(errno));
      return -1;
    }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  fprintf(stderr, "tdslc: error: '%s' was killed by signal %d\n", argv[0],
          WTERMSIG(status));
  return -1;
}

int link_shared(const char *obj, const char *const *kernels, int n,
                const char *out) {
  char *rt = find_runtime();
  if (!rt) return 1;
  char *dir = link_tempdir();
  char *index = dir ? write_index(dir, kernels, n) : NULL;
  int status = 1;
  if (index) {
    const char *cc_env = getenv("CC");
    char *cc = dup_str(cc_env && *cc_env ? cc_env : "cc");
    char *argv[MAX_ARGS + 16];
    int argc = 0;
    for (char *w = strtok(cc, " \t"); w && argc < MAX_ARGS; w = strtok(NULL, " \t"))
      argv[argc++] = w;
    if (!argc) argv[argc++] = "cc";
    const char *rest[] = {"-shared", "-fPIC", "-o", out, index, obj,
                          "-Wl,-Bsymbolic", "-Wl,--whole-archive", rt,
                          "-Wl,--no-whole-archive", "-lm", "-lpthread",
                          "-ldl", NULL};
    for (int i = 0; rest[i]; i++) argv[argc++] = (char *)rest[i];
    argv[argc] = NULL;
    int rc = run(argv);
    if (rc > 0)
      fprintf(stderr, "tdslc: error: --emit=so: linking '%s' with '%s' "
              "failed (exit status %d)\n", out, argv[0], rc);
    status = rc == 0 ? 0 : 1;
    free(cc);
  }
  if (dir) link_remove_tempdir(dir);
  free(index);
  free(dir);
  free(rt);
  return status;
}

/* ---- relocatable merge ------------------------------------------------- */

/* Writes n bytes of data to path; 0 or -1. */
static int put_file(const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int bad = fwrite(data, 1, n, f) != n;
  return fclose(f) || bad ? -1 : 0;
}

/* Reads path into *out (malloc'd); 0 or -1. */
static int get_file(const char *path, char **out, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  long len = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
  char *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
  int bad = !buf || fseek(f, 0, SEEK_SET) || fread(buf, 1, (size_t)len, f) != (size_t)len;
  fclose(f);
  if (bad) {
    free(buf);
    return -1;
  }
  *out = buf;
  *n = (size_t)len;
  return 0;
}

/* Runs argv quietly (stdout and stderr to /dev/null); 0 when it ran and
 * exited 0. */
static int spawn_quiet(char **argv) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int st = 0;
  int status = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0;
  while (!status && waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) status = 1;
  posix_spawn_file_actions_destroy(&fa);
  return status || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

int link_relocatable(const char *const *data, const size_t *size, int n, char **out,
                     size_t *outsize) {
  const char *tmp = getenv("TMPDIR");
  char *dir = join(tmp && *tmp ? tmp : "/tmp", "/tdslc.XXXXXX");
  if (!mkdtemp(dir)) {
    free(dir);
    return 1;
  }
  const char *cc_env = getenv("CC");
  int own_cc = cc_env && *cc_env;
  char *cc = dup_str(own_cc ? cc_env : "cc");
  char **argv = malloc(sizeof *argv * (size_t)(MAX_ARGS + n + 8));
  char **paths = calloc((size_t)n + 1, sizeof *paths);
  char *merged = join(dir, "/merged.o");
  int status = argv && paths ? 0 : 1;
  for (int i = 0; !status && i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "/u%d.o", i);
    paths[i] = join(dir, name);
    status = put_file(paths[i], data[i], size[i]);
  }
  /* Quiet: a failure only means one module instead.  Without $CC, `ld -r`
   * first (the compiler driver would start two more processes to run
   * it), then `cc -r -nostdlib`. */
  for (int pass = own_cc; !status && pass < 2; pass++) {
    int argc = 0;
    if (pass == 0) {
      argv[argc++] = "ld";
    } else {
      for (char *w = strtok(cc, " \t"); w && argc < MAX_ARGS; w = strtok(NULL, " \t"))
        argv[argc++] = w;
      if (!argc) argv[argc++] = "cc";
      argv[argc++] = "-nostdlib";
    }
    argv[argc++] = "-r";
    argv[argc++] = "-o";
    argv[argc++] = merged;
    for (int i = 0; i < n; i++) argv[argc++] = paths[i];
    argv[argc] = NULL;
    if (!spawn_quiet(argv)) break;
    if (pass == 1) status = 1;
  }
  if (!status) status = get_file(merged, out, outsize) != 0;
  for (int i = 0; paths && i < n; i++)
    if (paths[i]) unlink(paths[i]), free(paths[i]);
  unlink(merged);
  rmdir(dir);
  free(merged);
  free(paths);
  free(argv);
  free(cc);
  free(dir);
  return status;
}
