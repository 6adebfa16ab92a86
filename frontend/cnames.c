/* cnames.c — which tdsl names would break the generated C (spec §3).
 *
 * A kernel K becomes the external functions K and K_info in the object
 * and the header; its parameters become the prototype's parameter names,
 * beside the results out0, out1, ...  The header includes <stdbool.h>,
 * <stdint.h> and <tdsl/runtime.h> (DLPack), and the object is linked with
 * the runtime library, libm, libc and pthreads.  A name is refused when it
 * is a C keyword (C17, and C23's, which the header's includes may define
 * as macros), a reserved identifier, a type or macro those headers
 * define, a name in the runtime's namespaces (tdsl_, TDSL_, rt_), or — for
 * kernels, which are external symbols — main or a C library function the
 * runtime or the generated code calls.
 * Needs: sema_internal.h.  Produces: a reason string or NULL. */
#include <stdbool.h>
#include <string.h>

#include "sema_internal.h"

static const char *const c_keywords[] = {
    "auto", "break", "case", "char", "const", "continue", "default", "do",
    "double", "else", "enum", "extern", "float", "for", "goto", "if",
    "inline", "int", "long", "register", "restrict", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "typedef", "union",
    "unsigned", "void", "volatile", "while",
    /* C23 keywords, macros in C17's headers */
    "alignas", "alignof", "bool", "constexpr", "false", "nullptr",
    "static_assert", "thread_local", "true", "typeof", "typeof_unqual",
    NULL};

/* Types and macros that the generated header's includes define. */
static const char *const header_names[] = {
    "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t",
    "int64_t", "uint64_t", "intptr_t", "uintptr_t", "size_t", "ptrdiff_t",
    "NULL", "offsetof", "DLTensor", "DLDevice", "DLDeviceType", "DLDataType",
    "DLDataTypeCode", "DLManagedTensor", "DLContext", NULL};

static const char *const header_prefixes[] = {"tdsl_", "TDSL_", "rt_",
                                              "kDL", "DLPACK_", NULL};

/* External functions the runtime and generated code call (libm names
 * also with their f and l forms); pthread_ names too. */
static const char *const libc_names[] = {
    "malloc", "calloc", "realloc", "free", "aligned_alloc",
    "posix_memalign", "memcpy", "memmove", "memset", "memcmp", "strcmp",
    "strlen", "strtol", "getenv", "sysconf", "printf", "fprintf",
    "snprintf", "vsnprintf", "abort", "exit", "atexit", NULL};

static const char *const libm_names[] = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sqrt",
    "cbrt", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh",
    "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "fmod",
    "remainder", "floor", "ceil", "trunc", "round", "rint", "nearbyint",
    "fabs", "fmin", "fmax", "fma", "hypot", "copysign", "lgamma", "tgamma",
    "ldexp", "frexp", "modf", NULL};

static bool in_list(const char *const *list, const char *name) {
  for (int i = 0; list[i]; i++)
    if (strcmp(list[i], name) == 0) return true;
  return false;
}

static bool has_prefix(const char *const *list, const char *name) {
  for (int i = 0; list[i]; i++)
    if (strncmp(list[i], name, strlen(list[i])) == 0) return true;
  return false;
}

/* name, or name without a trailing f or l, is a libm function. */
static bool is_libm(const char *name) {
  if (in_list(libm_names, name)) return true;
  size_t n = strlen(name);
  char base[32];
  if (n < 2 || n > sizeof base || (name[n - 1] != 'f' && name[n - 1] != 'l'))
    return false;
  memcpy(base, name, n - 1);
  base[n - 1] = '\0';
  return in_list(libm_names, base);
}

static const char *common_problem(const char *name) {
  if (in_list(c_keywords, name)) return "is a C keyword";
  if (name[0] == '_' && (name[1] == '_' || (name[1] >= 'A' && name[1] <= 'Z')))
    return "is reserved in C (a leading '__' or '_' and a capital)";
  if (in_list(header_names, name))
    return "is a type or macro of the generated header's includes";
  if (has_prefix(header_prefixes, name))
    return "uses a prefix reserved for the runtime and DLPack (tdsl_, "
           "TDSL_, rt_, kDL, DLPACK_)";
  return NULL;
}

const char *sema_kernel_name_problem(const char *name) {
  const char *why = common_problem(name);
  if (why) return why;
  if (name[0] == '_')
    return "is reserved in C for names with external linkage (a leading "
           "'_')";
  if (strcmp(name, "main") == 0) return "is the C program's entry point";
  if (strncmp(name, "pthread_", 8) == 0 || in_list(libc_names, name) ||
      is_libm(name))
    return "is a C library function that the program or the runtime "
           "links against";
  return NULL;
}

const char *sema_param_name_problem(const char *name) {
  const char *why = common_problem(name);
  if (why) return why;
  if (strncmp(name, "out", 3) == 0 && name[3]) {
    const char *p = name + 3;
    while (*p >= '0' && *p <= '9') p++;
    if (!*p) return "is the name the generated C gives a result (out0, out1, ...)";
  }
  return NULL;
}
