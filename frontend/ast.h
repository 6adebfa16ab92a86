/* ast.h — the syntax tree made by the parser (parser.y) and consumed by
 * semantic analysis (sema.c).  Every node has a source location: for
 * operators the operator token, for calls and methods the name, for
 * everything else its first token. All nodes live in the arena. */
#ifndef TDSL_AST_H
#define TDSL_AST_H

#include <stdbool.h>
#include <stdint.h>

#include "../ir/arena.h"
#include "../ir/diag.h"
#include "../ir/dtype.h"
#include "../ir/ir.h"

typedef enum ExprKind {
  EX_INT,      /* ival */
  EX_FLOAT,    /* fval */
  EX_BOOL,     /* bval: true / false */
  EX_NONE,     /* None */
  EX_STR,      /* str: "tanh" (quotes removed) */
  EX_NAME,     /* str: an identifier (variables, symbols, dtypes, layouts) */
  EX_BINARY,   /* bin */
  EX_UNARY,    /* un: - or ~ */
  EX_CALL,     /* call: f(args) when recv == NULL, recv.f(args) otherwise */
  EX_ATTR,     /* attr: recv.T / recv.mT (any name; sema checks) */
  EX_INDEX,    /* index: base[items] */
  EX_LIST,     /* list: [a, b, c] */
  EX_SLICE,    /* slice: start:stop:step, each may be NULL; only in index */
  EX_ELLIPSIS  /* ...; only in index */
} ExprKind;

typedef enum BinOp {
  BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_FLOORDIV, BIN_MOD, BIN_POW,
  BIN_MATMUL, BIN_AND, BIN_OR, BIN_XOR,
  BIN_EQ, BIN_NE, BIN_LT, BIN_LE, BIN_GT, BIN_GE
} BinOp;
const char *binop_spelling(BinOp op); /* "+", "//", "@", ... */

typedef enum UnOp { UN_NEG, UN_NOT /* ~ */ } UnOp;

typedef struct Expr Expr;

typedef struct Arg {
  const char *kw; /* keyword name, NULL for positional */
  Expr *value;
  Loc loc;        /* of the keyword, or of the value */
} Arg;

struct Expr {
  ExprKind kind;
  Loc loc;
  union {
    int64_t ival;
    double fval;
    bool bval;
    const char *str;
    struct { BinOp op; Expr *lhs, *rhs; } bin;
    struct { UnOp op; Expr *operand; } un;
    struct { Expr *recv; const char *name; Arg *args; int nargs; } call;
    struct { Expr *recv; const char *name; } attr;
    struct { Expr *base; Expr **items; int nitems; } index;
    struct { Expr **items; int nitems; } list;
    struct { Expr *start, *stop, *step; } slice;
  } u;
};

/* A declared type: `f32`, `f32[]`, `f32[N, 3] channels_last`. */
typedef struct TypeSpec {
  DType dtype;
  bool is_tensor;
  int rank;
  Expr **dims;   /* EX_INT, EX_NAME, or + - * // of those (results only) */
  Layout layout; /* LAYOUT_CONTIGUOUS when not written */
  bool layout_given;
  Loc loc;       /* of the dtype name */
} TypeSpec;

typedef struct AstParam {
  const char *name;
  TypeSpec type;
  Loc loc; /* of the name */
} AstParam;

typedef enum StmtKind { ST_ASSIGN, ST_RETURN } StmtKind;
typedef struct Stmt {
  StmtKind kind;
  const char *name; /* ST_ASSIGN: the (first) target */
  const char **names; /* ST_ASSIGN: every target, `a, b = ...` (ntargets) */
  Loc *name_locs;
  int ntargets;       /* 1: `a = ...`; more: unpacks a list of values */
  Expr **values;    /* ST_ASSIGN: one; ST_RETURN: nvalues */
  int nvalues;
  Loc loc;          /* of the (first) target name / the `return` keyword */
} Stmt;

typedef struct AstKernel {
  const char *name;
  Loc loc; /* of the name */
  AstParam *params;
  int nparams;
  TypeSpec *results;
  int nresults;
  Stmt *body;
  int nbody;
} AstKernel;

typedef struct AstProgram {
  AstKernel *kernels;
  int nkernels;
} AstProgram;

/* parser.y: parses a whole file.  Syntax errors are reported through d
 * (`file:line:col: error: ...` with a caret; the parser recovers at
 * statement and kernel boundaries to report several).  Returns NULL when
 * any error was reported. Never crashes on any byte sequence. */
AstProgram *parse_program(Arena *a, Diag *d, const char *src);

/* sema.c: checks the program and builds the IR (one IrKernel per kernel).
 * Every error PyTorch would raise for the same program is reported
 * through d.  Returns NULL when any error was reported. */
IrModule *sema_program(Arena *a, Diag *d, const AstProgram *p,
                       const char *file);

#endif
