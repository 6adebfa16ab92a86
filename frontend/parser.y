/* parser.y — the grammar of tdsl (spec §2-§4) as a pure bison parser.
 *
 * Needs: the reentrant flex scanner of lexer.l (tokens, locations, bracket
 * tracking and error-recovery skipping, all in the shared ParseState),
 * the arena for every node, Diag for messages.
 * Produces: the AST of ast.h through parse_program().
 *
 * Newlines are insignificant, so a statement ends where the next token
 * cannot continue it.  After a syntax error the parser resynchronises at
 * the next statement (a name or `return` first on its line, or `}`) or,
 * outside a kernel body, at the next `kernel`.  Nesting is bounded (brackets
 * by the scanner, expression depth here) so later recursive passes over
 * the tree cannot overflow the stack. */

%code requires {
#include <stdbool.h>
#include <stdint.h>

#include "ast.h"

#ifndef YY_TYPEDEF_YY_SCANNER_T /* as flex's lexer.h spells it */
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif

/* Maximum bracket nesting and expression-tree depth. */
enum { PARSE_MAX_NEST = 200 };

/* An expression with the depth of its tree (for the nesting limit). */
typedef struct ExprD {
  Expr *e;
  int depth;
  bool chained; /* a comparison whose left operand is a comparison */
} ExprD;

/* One name an assignment binds. */
typedef struct Target {
  const char *name;
  Loc loc;
} Target;

/* A call argument with the depth of its value's tree. */
typedef struct ArgD {
  Arg arg;
  int depth;
} ArgD;

/* A growable array in the arena, used for every list in the grammar. */
typedef struct Vec {
  void *v;
  int n, cap;
  int depth;  /* deepest element (expression lists) */
  bool kw;    /* argument lists: a keyword argument was seen */
  bool trail; /* ended with a trailing comma */
} Vec;

typedef struct OpenBracket {
  char ch; /* '(', '[' or '{' */
  Loc loc;
} OpenBracket;

enum { SKIP_NONE, SKIP_STMT, SKIP_HEADER, SKIP_KERNEL };

/* State shared by scanner (yyextra) and parser. */
typedef struct ParseState {
  Arena *a;
  Diag *d;
  const char *src;
  int line, col;    /* position of the next byte */
  bool bol;         /* no token yet on the current line */
  bool tok_bol;     /* the last token returned began its line */
  Loc last;         /* the last token returned (EOF is placed after it) */
  Loc prev;         /* the one before it */
  OpenBracket open[PARSE_MAX_NEST];
  int nopen;        /* brackets currently open */
  int open_before;  /* nopen before the last token was seen */
  int skip;         /* SKIP_*: discard tokens until a resync point */
  int pending[PARSE_MAX_NEST + 1]; /* synthetic tokens to return first */
  Loc pending_loc;
  int npending, ipending;
  bool hush;        /* an error the scanner reported explains the next
                       syntax errors: do not report them */
  bool dead;        /* give up: the scanner returns only end of file */
  long ntokens;     /* tokens returned so far */
  long hush_token;  /* do not report a syntax error at this token: it
                       follows a bad character already reported */
} ParseState;
}

%code provides {
int yylex(YYSTYPE *lval, YYLTYPE *lloc, yyscan_t scanner);
void lex_drop_stmt_brackets(ParseState *ps);
}

%code {
#include <stdio.h>
#include <string.h>

#include "lexer.h"

#define P ((ParseState *)yyget_extra(scanner))
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                       \
  do {                                                                    \
    if (N) {                                                              \
      (Cur) = YYRHSLOC(Rhs, 1);                                           \
    } else {                                                              \
      (Cur) = YYRHSLOC(Rhs, 0);                                           \
      (Cur).len = 0;                                                      \
    }                                                                     \
  } while (0)

static void yyerror(YYLTYPE *loc, yyscan_t scanner, AstProgram *prog,
                    const char *msg);
static void vec_push(ParseState *ps, Vec *v, const void *elem, size_t size);
static Vec vec_one(ParseState *ps, const void *elem, size_t size);
static ExprD mk_leaf(ParseState *ps, ExprKind k, Loc loc);
static ExprD mk_bin(ParseState *ps, BinOp op, Loc loc, ExprD l, ExprD r);
static ExprD mk_un(ParseState *ps, UnOp op, Loc loc, ExprD x);
static ExprD mk_call(ParseState *ps, ExprD recv, const char *name, Loc loc,
                     Vec args);
static ExprD mk_attr(ParseState *ps, ExprD recv, const char *name, Loc loc);
static ExprD mk_index(ParseState *ps, ExprD base, Vec items, Loc loc);
static ExprD mk_list(ParseState *ps, Vec items, Loc loc);
static ExprD mk_slice(ParseState *ps, ExprD start, ExprD stop, ExprD step,
                      Loc colon);
static void push_expr(ParseState *ps, Vec *v, ExprD x);
static void push_arg(ParseState *ps, Vec *v, ArgD arg);
static TypeSpec mk_type(ParseState *ps, const char *dtype, Loc loc,
                        bool tensor, Vec dims, int layout);
static int layout_lookup(ParseState *ps, const char *name, Loc loc);
static void check_dims(ParseState *ps, const TypeSpec *t, bool result);
static bool recover(ParseState *ps, int lookahead, int mode);
}

%define api.pure full
%define api.token.prefix {T_}
%define parse.error custom
%define parse.lac full
%define api.location.type {Loc}
%locations
%param {yyscan_t scanner}
%parse-param {AstProgram *prog}
%initial-action { @$ = (Loc){1, 1, 0}; }

%union {
  const char *str;
  int64_t ival;
  double fval;
  int num;
  BinOp op;
  ExprD ex;
  Vec vec;
  ArgD arg;
  TypeSpec ty;
  AstParam param;
  Stmt stmt;
  AstKernel kern;
}

%token YYEOF 0 "end of file"
%token KERNEL "kernel" RETURN "return" TRUE "true" FALSE "false" NONE "None"
%token <str> NAME "name"
%token <ival> INT "integer"
%token <fval> FLOAT "float"
%token <str> STRING "string"
%token LP "(" RP ")" LB "[" RB "]" LC "{" RC "}" COMMA "," COLON ":"
%token DOT "." ARROW "->" ASSIGN "=" ELLIPSIS "..."
%token EQ "==" NE "!=" LT "<" LE "<=" GT ">" GE ">="
%token PLUS "+" MINUS "-" STAR "*" SLASH "/" DSLASH "//" PERCENT "%"
%token POW "**" AT "@" AMP "&" PIPE "|" CARET "^" TILDE "~"

%type <vec> kernels params params_opt results rtypes stmts rexprs exprs
%type <vec> exprs_tc args args_opt items items_tc targets
%type <kern> kernel
%type <param> param
%type <ty> type rtype
%type <num> layout_opt
%type <stmt> stmt
%type <op> cmpop mulop
%type <ex> expr cmp bor bxor band arith term unary power postfix atom
%type <ex> item slice sl_opt
%type <arg> arg

%start program

%%

program:
    kernels {
      prog->kernels = $1.v;
      prog->nkernels = $1.n;
      (void)yynerrs; /* bison counts; Diag is what we use */
    }
  ;

kernels:
    %empty { $$ = (Vec){0}; }
  | kernels kernel { $$ = $1; vec_push(P, &$$, &$2, sizeof(AstKernel)); }
  | kernels error {
      $$ = $1;
      if (!recover(P, yychar, SKIP_KERNEL)) yyclearin;
      yyerrok; /* the next token is `kernel` or the end: both fine here */
      if (P->d->nerrors >= P->d->max_errors) YYABORT;
    }
  ;

kernel:
    "kernel" NAME "(" params_opt ")" "->" results "{" stmts "}" {
      $$ = (AstKernel){.name = $2, .loc = @2,
                       .params = $4.v, .nparams = $4.n,
                       .results = $7.v, .nresults = $7.n,
                       .body = $9.v, .nbody = $9.n};
    }
  /* A broken header: skip to its body and still check the body. */
  | "kernel" error {
      if (!recover(P, yychar, SKIP_HEADER)) yyclearin;
      if (yychar != T_YYEOF) yyerrok; /* next: '{', or a synthetic one */
    }
    "{" stmts "}" {
      $$ = (AstKernel){.name = "?", .loc = @1, .body = $5.v, .nbody = $5.n};
    }
  ;

params_opt:
    %empty { $$ = (Vec){0}; }
  | params
  | params ","
  ;

params:
    param { $$ = vec_one(P, &$1, sizeof(AstParam)); }
  | params "," param { $$ = $1; vec_push(P, &$$, &$3, sizeof(AstParam)); }
  ;

param:
    NAME ":" type {
      check_dims(P, &$3, false);
      $$ = (AstParam){.name = $1, .type = $3, .loc = @1};
    }
  ;

results:
    rtype { $$ = vec_one(P, &$1, sizeof(TypeSpec)); }
  | "(" rtypes ")" { $$ = $2; }
  | "(" rtypes "," ")" { $$ = $2; }
  ;

rtypes:
    rtype { $$ = vec_one(P, &$1, sizeof(TypeSpec)); }
  | rtypes "," rtype { $$ = $1; vec_push(P, &$$, &$3, sizeof(TypeSpec)); }
  ;

rtype:
    type { $$ = $1; check_dims(P, &$$, true); }
  ;

type:
    NAME { $$ = mk_type(P, $1, @1, false, (Vec){0}, -1); }
  | NAME "[" "]" layout_opt { $$ = mk_type(P, $1, @1, true, (Vec){0}, $4); }
  | NAME "[" exprs_tc "]" layout_opt { $$ = mk_type(P, $1, @1, true, $3, $5); }
  ;

layout_opt:
    %empty { $$ = -1; }
  | NAME { $$ = layout_lookup(P, $1, @1); }
  ;

stmts:
    %empty { $$ = (Vec){0}; }
  | stmts stmt { $$ = $1; vec_push(P, &$$, &$2, sizeof(Stmt)); }
  | stmts error {
      $$ = $1;
      /* Report the next error at once, unless the lookahead stays and
       * might fail again here (end of file): that would loop. */
      if (!recover(P, yychar, SKIP_STMT)) {
        yyclearin;
        yyerrok;
      } else if (yychar == T_NAME || yychar == T_RETURN || yychar == T_RC) {
        yyerrok;
      }
      if (P->d->nerrors >= P->d->max_errors) YYABORT;
    }
  ;

stmt:
    targets "=" expr {
      Vec v = (Vec){0};
      push_expr(P, &v, $3);
      const Target *t = $1.v;
      const char **names = arena_alloc(P->a, sizeof *names * (size_t)$1.n);
      Loc *locs = arena_alloc(P->a, sizeof *locs * (size_t)$1.n);
      for (int i = 0; i < $1.n; i++) names[i] = t[i].name, locs[i] = t[i].loc;
      $$ = (Stmt){.kind = ST_ASSIGN, .name = names[0], .names = names,
                  .name_locs = locs, .ntargets = $1.n, .values = v.v,
                  .nvalues = 1, .loc = locs[0]};
    }
  | "return" rexprs {
      $$ = (Stmt){.kind = ST_RETURN, .values = $2.v, .nvalues = $2.n,
                  .loc = @1};
    }
  ;

/* `a, b, c = x.chunk(3)`: the targets of one assignment (Target). */
targets:
    NAME {
      Target t = {$1, @1};
      $$ = vec_one(P, &t, sizeof t);
    }
  | targets "," NAME {
      Target t = {$3, @3};
      $$ = $1;
      vec_push(P, &$$, &t, sizeof t);
    }
  ;

rexprs:
    expr { $$ = (Vec){0}; push_expr(P, &$$, $1); }
  | rexprs "," expr { $$ = $1; push_expr(P, &$$, $3); }
  ;

exprs:
    expr { $$ = (Vec){0}; push_expr(P, &$$, $1); }
  | exprs "," expr { $$ = $1; push_expr(P, &$$, $3); }
  ;

exprs_tc:
    exprs
  | exprs "," { $$ = $1; $$.trail = true; }
  ;

/* ---- expressions: one nonterminal per precedence level (spec §4) ---- */

expr:
    bor
  | cmp
  ;

/* Comparisons do not associate: `a < b < c` is reported, once per chain. */
cmp:
    bor cmpop bor { $$ = mk_bin(P, $2, @2, $1, $3); }
  | cmp cmpop bor {
      if (!$1.chained)
        diag_error(P->d, @2,
                   "comparisons cannot be chained; write (a %s b) & "
                   "(b %s c) or add parentheses",
                   binop_spelling($1.e->u.bin.op), binop_spelling($2));
      $$ = mk_bin(P, $2, @2, $1, $3);
      $$.chained = true;
    }
  ;

cmpop:
    "==" { $$ = BIN_EQ; }
  | "!=" { $$ = BIN_NE; }
  | "<"  { $$ = BIN_LT; }
  | "<=" { $$ = BIN_LE; }
  | ">"  { $$ = BIN_GT; }
  | ">=" { $$ = BIN_GE; }
  ;

bor:
    bxor
  | bor "|" bxor { $$ = mk_bin(P, BIN_OR, @2, $1, $3); }
  ;

bxor:
    band
  | bxor "^" band { $$ = mk_bin(P, BIN_XOR, @2, $1, $3); }
  ;

band:
    arith
  | band "&" arith { $$ = mk_bin(P, BIN_AND, @2, $1, $3); }
  ;

arith:
    term
  | arith "+" term { $$ = mk_bin(P, BIN_ADD, @2, $1, $3); }
  | arith "-" term { $$ = mk_bin(P, BIN_SUB, @2, $1, $3); }
  ;

term:
    unary
  | term mulop unary { $$ = mk_bin(P, $2, @2, $1, $3); }
  ;

mulop:
    "*"  { $$ = BIN_MUL; }
  | "/"  { $$ = BIN_DIV; }
  | "//" { $$ = BIN_FLOORDIV; }
  | "%"  { $$ = BIN_MOD; }
  | "@"  { $$ = BIN_MATMUL; }
  ;

unary:
    power
  | "-" unary { $$ = mk_un(P, UN_NEG, @1, $2); }
  | "~" unary { $$ = mk_un(P, UN_NOT, @1, $2); }
  ;

/* `**` binds tighter than a unary operator on its left and looser than
 * one on its right: -x**2 is -(x**2), 2**-1 is 2**(-1); right-assoc. */
power:
    postfix
  | postfix "**" unary { $$ = mk_bin(P, BIN_POW, @2, $1, $3); }
  ;

postfix:
    atom
  | postfix "." NAME { $$ = mk_attr(P, $1, $3, @3); }
  | postfix "." NAME "(" args_opt ")" { $$ = mk_call(P, $1, $3, @3, $5); }
  | postfix "[" items_tc "]" { $$ = mk_index(P, $1, $3, @2); }
  ;

atom:
    INT { $$ = mk_leaf(P, EX_INT, @1); $$.e->u.ival = $1; }
  | FLOAT { $$ = mk_leaf(P, EX_FLOAT, @1); $$.e->u.fval = $1; }
  | STRING { $$ = mk_leaf(P, EX_STR, @1); $$.e->u.str = $1; }
  | "true" { $$ = mk_leaf(P, EX_BOOL, @1); $$.e->u.bval = true; }
  | "false" { $$ = mk_leaf(P, EX_BOOL, @1); $$.e->u.bval = false; }
  | "None" { $$ = mk_leaf(P, EX_NONE, @1); }
  | NAME { $$ = mk_leaf(P, EX_NAME, @1); $$.e->u.str = $1; }
  | NAME "(" args_opt ")" {
      $$ = mk_call(P, (ExprD){0}, $1, @1, $3);
    }
  | "(" expr ")" { $$ = $2; }
  /* Python tuples `()`, `(a,)`, `(a, b)` are lists: `stride=(2, 2)`. */
  | "(" ")" { $$ = mk_list(P, (Vec){0}, @1); }
  | "(" exprs "," ")" { $$ = mk_list(P, $2, @1); }
  | "(" exprs "," expr ")" {
      Vec v = $2;
      push_expr(P, &v, $4);
      $$ = mk_list(P, v, @1);
    }
  | "[" "]" { $$ = mk_list(P, (Vec){0}, @1); }
  | "[" exprs_tc "]" { $$ = mk_list(P, $2, @1); }
  ;

args_opt:
    %empty { $$ = (Vec){0}; }
  | args
  | args "," { $$ = $1; $$.trail = true; }
  ;

args:
    arg { $$ = (Vec){0}; push_arg(P, &$$, $1); }
  | args "," arg { $$ = $1; push_arg(P, &$$, $3); }
  ;

arg:
    expr { $$ = (ArgD){{.value = $1.e, .loc = $1.e->loc}, $1.depth}; }
  | NAME "=" expr { $$ = (ArgD){{.kw = $1, .value = $3.e, .loc = @1}, $3.depth}; }
  ;

items_tc:
    items
  | items "," { $$ = $1; $$.trail = true; }
  ;

items:
    item { $$ = (Vec){0}; push_expr(P, &$$, $1); }
  | items "," item { $$ = $1; push_expr(P, &$$, $3); }
  ;

item:
    expr
  | slice
  | "..." { $$ = mk_leaf(P, EX_ELLIPSIS, @1); }
  ;

slice:
    sl_opt ":" sl_opt { $$ = mk_slice(P, $1, $3, (ExprD){0}, @2); }
  | sl_opt ":" sl_opt ":" sl_opt { $$ = mk_slice(P, $1, $3, $5, @2); }
  ;

sl_opt:
    %empty { $$ = (ExprD){0}; }
  | expr
  ;

%%

/* ---- nodes ---- */

static void vec_push(ParseState *ps, Vec *v, const void *elem, size_t size) {
  if (v->n == v->cap) v->v = arena_grow(ps->a, v->v, &v->cap, size);
  memcpy((char *)v->v + (size_t)v->n * size, elem, size);
  v->n++;
}

static Vec vec_one(ParseState *ps, const void *elem, size_t size) {
  Vec v = {0};
  vec_push(ps, &v, elem, size);
  return v;
}

static void push_expr(ParseState *ps, Vec *v, ExprD x) {
  vec_push(ps, v, &x.e, sizeof(Expr *));
  if (x.depth > v->depth) v->depth = x.depth;
}

/* Python's rules: keywords after positionals, each keyword once. */
static void push_arg(ParseState *ps, Vec *v, ArgD ad) {
  Arg arg = ad.arg;
  if (!arg.kw && v->kw)
    diag_error(ps->d, arg.value->loc,
               "positional argument follows keyword argument");
  for (int i = 0; arg.kw && i < v->n; i++) {
    const Arg *prev = &((Arg *)v->v)[i];
    if (prev->kw && strcmp(prev->kw, arg.kw) == 0)
      diag_error(ps->d, arg.loc, "keyword argument '%s' repeated", arg.kw);
  }
  if (arg.kw) v->kw = true;
  vec_push(ps, v, &arg, sizeof arg);
  if (ad.depth > v->depth) v->depth = ad.depth;
}

/* Every composite node goes through here: reports, once per offending
 * node, a tree deeper than PARSE_MAX_NEST. */
static ExprD with_depth(ParseState *ps, Expr *e, int child_depth) {
  if (child_depth == PARSE_MAX_NEST)
    diag_error(ps->d, e->loc,
               "expression nested too deeply (more than %d levels)",
               PARSE_MAX_NEST);
  return (ExprD){.e = e, .depth = child_depth + 1};
}

static Expr *new_expr(ParseState *ps, ExprKind k, Loc loc) {
  Expr *e = arena_alloc(ps->a, sizeof *e);
  e->kind = k;
  e->loc = loc;
  return e;
}

static ExprD mk_leaf(ParseState *ps, ExprKind k, Loc loc) {
  return (ExprD){.e = new_expr(ps, k, loc), .depth = 1};
}

static int max2(int a, int b) { return a > b ? a : b; }

static ExprD mk_bin(ParseState *ps, BinOp op, Loc loc, ExprD l, ExprD r) {
  Expr *e = new_expr(ps, EX_BINARY, loc);
  e->u.bin.op = op;
  e->u.bin.lhs = l.e;
  e->u.bin.rhs = r.e;
  return with_depth(ps, e, max2(l.depth, r.depth));
}

static ExprD mk_un(ParseState *ps, UnOp op, Loc loc, ExprD x) {
  Expr *e = new_expr(ps, EX_UNARY, loc);
  e->u.un.op = op;
  e->u.un.operand = x.e;
  return with_depth(ps, e, x.depth);
}

static ExprD mk_call(ParseState *ps, ExprD recv, const char *name, Loc loc,
                     Vec args) {
  Expr *e = new_expr(ps, EX_CALL, loc);
  e->u.call.recv = recv.e;
  e->u.call.name = name;
  e->u.call.args = args.v;
  e->u.call.nargs = args.n;
  return with_depth(ps, e, max2(recv.depth, args.depth));
}

static ExprD mk_attr(ParseState *ps, ExprD recv, const char *name, Loc loc) {
  Expr *e = new_expr(ps, EX_ATTR, loc);
  e->u.attr.recv = recv.e;
  e->u.attr.name = name;
  return with_depth(ps, e, recv.depth);
}

static ExprD mk_index(ParseState *ps, ExprD base, Vec items, Loc loc) {
  Expr *e = new_expr(ps, EX_INDEX, loc);
  e->u.index.base = base.e;
  e->u.index.items = items.v;
  e->u.index.nitems = items.n;
  return with_depth(ps, e, max2(base.depth, items.depth));
}

static ExprD mk_list(ParseState *ps, Vec items, Loc loc) {
  Expr *e = new_expr(ps, EX_LIST, loc);
  e->u.list.items = items.v;
  e->u.list.nitems = items.n;
  return with_depth(ps, e, items.depth);
}

/* Located at its start expression, or at the first ':' when omitted. */
static ExprD mk_slice(ParseState *ps, ExprD start, ExprD stop, ExprD step,
                      Loc colon) {
  Expr *e = new_expr(ps, EX_SLICE, start.e ? start.e->loc : colon);
  e->u.slice.start = start.e;
  e->u.slice.stop = stop.e;
  e->u.slice.step = step.e;
  int d = max2(start.depth, max2(stop.depth, step.depth));
  return with_depth(ps, e, d);
}

/* ---- types ---- */

static const char *const layout_names[] = {"contiguous", "channels_last",
                                           "strided"};

/* Returns the Layout, or -1 (after an error) for an unknown name. */
static int layout_lookup(ParseState *ps, const char *name, Loc loc) {
  for (int l = 0; l < 3; l++)
    if (strcmp(name, layout_names[l]) == 0) return l;
  diag_error(ps->d, loc,
             "unknown layout '%s'; expected contiguous, channels_last or "
             "strided",
             name);
  return -1;
}

static TypeSpec mk_type(ParseState *ps, const char *dtype, Loc loc,
                        bool tensor, Vec dims, int layout) {
  TypeSpec t = {.dtype = dtype_from_name(dtype), .is_tensor = tensor,
                .rank = dims.n, .dims = dims.v, .loc = loc};
  if (t.dtype == DT_NONE) {
    diag_error(ps->d, loc,
               "unknown dtype '%s'; expected one of bool, i8, u8, i16, i32, "
               "i64, f16, bf16, f32, f64",
               dtype);
    t.dtype = DT_F32;
  }
  t.layout_given = layout >= 0;
  t.layout = layout >= 0 ? (Layout)layout : LAYOUT_CONTIGUOUS;
  return t;
}

/* The first node of a dim that is not allowed: parameters take an integer
 * or a size-symbol name; results also + - * // of those (parenthesised
 * as the tree already is).  Depth is bounded by the nesting limit. */
static const Expr *bad_dim(const Expr *e, bool result, int depth) {
  if (depth > PARSE_MAX_NEST) return NULL; /* reported already */
  if (e->kind == EX_INT || e->kind == EX_NAME) return NULL;
  if (!result || e->kind != EX_BINARY) return e;
  BinOp op = e->u.bin.op;
  if (op != BIN_ADD && op != BIN_SUB && op != BIN_MUL && op != BIN_FLOORDIV)
    return e;
  const Expr *l = bad_dim(e->u.bin.lhs, result, depth + 1);
  return l ? l : bad_dim(e->u.bin.rhs, result, depth + 1);
}

static void check_dims(ParseState *ps, const TypeSpec *t, bool result) {
  for (int i = 0; i < t->rank; i++) {
    const Expr *bad = bad_dim(t->dims[i], result, 0);
    if (!bad) continue;
    if (!result && bad->kind == EX_BINARY)
      diag_error(ps->d, bad->loc,
                 "a parameter dim must be an integer or a size symbol; "
                 "expressions like 'N * 2' are allowed only in result types");
    else if (!result)
      diag_error(ps->d, bad->loc,
                 "a parameter dim must be an integer or a size symbol");
    else if (bad->kind == EX_BINARY)
      diag_error(ps->d, bad->loc,
                 "'%s' is not allowed in a result dim; use + - * // of "
                 "integers and size symbols",
                 binop_spelling(bad->u.bin.op));
    else
      diag_error(ps->d, bad->loc,
                 "a result dim must be an integer, a size symbol, or + - * "
                 "// of those");
  }
}

/* ---- errors ---- */

/* Called from an error rule with the lookahead that caused the error.
 * Returns true to keep it (it starts what the rule resynchronises to);
 * otherwise tells the scanner to discard tokens up to the next such
 * point, and the caller drops the lookahead. */
static bool recover(ParseState *ps, int la, int mode) {
  if (mode == SKIP_HEADER) {
    if (la == T_LC) { /* the header's brackets are abandoned */
      ps->open[0] = ps->open[ps->nopen - 1];
      ps->nopen = 1;
      return true;
    }
    if (la == T_YYEOF) return true;
    if (la == T_KERNEL) { /* an empty body, then this kernel */
      ps->npending = ps->ipending = 0;
      ps->pending[ps->npending++] = T_LC;
      ps->pending[ps->npending++] = T_RC;
      ps->pending[ps->npending++] = T_KERNEL;
      ps->pending_loc = ps->last;
      ps->nopen = 0;
      return false;
    }
    ps->skip = mode;
    return false;
  }
  if (la == T_YYEMPTY || la == T_YYEOF || la == T_KERNEL) return true;
  if (mode == SKIP_STMT && la == T_RC) return true;
  if (mode == SKIP_STMT && ps->tok_bol && (la == T_NAME || la == T_RETURN)) {
    lex_drop_stmt_brackets(ps);
    return true;
  }
  ps->skip = mode;
  return false;
}

/* Bison's own failures (the parser stack is bounded). */
static void yyerror(YYLTYPE *loc, yyscan_t scanner, AstProgram *prog,
                    const char *msg) {
  (void)prog;
  if (strcmp(msg, "memory exhausted") == 0)
    msg = "program nested too deeply for the parser";
  diag_error(P->d, *loc, "%s", msg);
}

/* A start of the line `loc` in the source, and the token text at loc. */
static const char *token_text(const ParseState *ps, Loc loc) {
  const char *p = ps->src;
  for (int l = 1; l < loc.line && p; l++) {
    p = strchr(p, '\n');
    if (p) p++;
  }
  if (!p || (int)strnlen(p, (size_t)loc.col) < loc.col) return NULL;
  return p + loc.col - 1;
}

/* The spelling of a token kind for messages: 'kernel', '(', name, ... */
static const char *sym_spelling(yysymbol_kind_t k) {
  return yysymbol_name(k);
}

static bool sym_has_text(yysymbol_kind_t k) {
  return k == YYSYMBOL_NAME || k == YYSYMBOL_INT || k == YYSYMBOL_FLOAT ||
         k == YYSYMBOL_STRING;
}

/* "name 'foo'", "integer '42'", "'('", "end of file". */
static void describe_found(const ParseState *ps, yysymbol_kind_t k, Loc loc,
                           char *buf, size_t size) {
  const char *text = sym_has_text(k) ? token_text(ps, loc) : NULL;
  int len = loc.len > 40 ? 40 : loc.len;
  const char *more = loc.len > 40 ? "..." : "";
  if (k == YYSYMBOL_YYEOF)
    snprintf(buf, size, "end of file");
  else if (k == YYSYMBOL_STRING && text)
    snprintf(buf, size, "string %.*s%s", len, text, more);
  else if (text)
    snprintf(buf, size, "%s '%.*s%s'", sym_spelling(k), len, text, more);
  else
    snprintf(buf, size, "'%s'", sym_spelling(k));
}

static bool is_expr_start(yysymbol_kind_t k) {
  switch (k) {
  case YYSYMBOL_NAME: case YYSYMBOL_INT: case YYSYMBOL_FLOAT:
  case YYSYMBOL_STRING: case YYSYMBOL_TRUE: case YYSYMBOL_FALSE:
  case YYSYMBOL_NONE: case YYSYMBOL_LP: case YYSYMBOL_LB:
  case YYSYMBOL_MINUS: case YYSYMBOL_TILDE: case YYSYMBOL_ELLIPSIS:
  case YYSYMBOL_COLON:
    return true;
  default:
    return false;
  }
}

/* Tokens that continue a complete expression. */
static bool is_operator(yysymbol_kind_t k) {
  switch (k) {
  case YYSYMBOL_EQ: case YYSYMBOL_NE: case YYSYMBOL_LT: case YYSYMBOL_LE:
  case YYSYMBOL_GT: case YYSYMBOL_GE: case YYSYMBOL_PLUS:
  case YYSYMBOL_MINUS: case YYSYMBOL_STAR: case YYSYMBOL_SLASH:
  case YYSYMBOL_DSLASH: case YYSYMBOL_PERCENT: case YYSYMBOL_POW:
  case YYSYMBOL_AT: case YYSYMBOL_AMP: case YYSYMBOL_PIPE:
  case YYSYMBOL_CARET: case YYSYMBOL_DOT: case YYSYMBOL_LB: case YYSYMBOL_LP:
    return true;
  default:
    return false;
  }
}

static yysymbol_kind_t closer_of(char open) {
  return open == '(' ? YYSYMBOL_RP : open == '[' ? YYSYMBOL_RB : YYSYMBOL_RC;
}

static bool has(const yysymbol_kind_t *set, int n, yysymbol_kind_t k) {
  for (int i = 0; i < n; i++)
    if (set[i] == k) return true;
  return false;
}

/* "an expression", "':'", ... joined as "A, B or C" into buf; returns the
 * number of items (0: nothing useful to say). */
static int expected_list(const yysymbol_kind_t *set, int n, char *buf,
                         size_t size) {
  const char *item[8];
  int m = 0;
  bool expr = has(set, n, YYSYMBOL_INT), ops = false;
  if (expr) item[m++] = "an expression";
  for (int i = 0; i < n && m < 8; i++) {
    if (expr && is_expr_start(set[i])) continue;
    if (set[i] == YYSYMBOL_YYEOF && n > 1) continue;
    if (is_operator(set[i])) {
      ops = true;
      continue;
    }
    if (set[i] == YYSYMBOL_ASSIGN && n > 1 && !has(set, n, YYSYMBOL_COLON))
      continue; /* a keyword argument's '=' is rarely what was missing */
    item[m++] = sym_spelling(set[i]);
  }
  if (m == 0 && ops) item[m++] = "an operator";
  if (m == 0 || m > 4) return 0;
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < m && used < size; i++) {
    const char *sep = i == 0 ? "" : i == m - 1 ? " or " : ", ";
    if (strcmp(item[i], "name") == 0) item[i] = "a name";
    bool quote = strchr(item[i], ' ') == NULL; /* not a description */
    used += (size_t)snprintf(buf + used, size - used,
                             quote ? "%s'%s'" : "%s%s", sep, item[i]);
  }
  return m;
}

static bool is_layout(const char *text, int len) {
  for (int l = 0; l < 3; l++)
    if ((int)strlen(layout_names[l]) == len &&
        strncmp(text, layout_names[l], (size_t)len) == 0)
      return true;
  return false;
}

/* The token before the lookahead starts a Python statement tdsl lacks. */
static bool prev_is_python(const ParseState *ps) {
  static const char *const words[] = {"if", "for", "while", "def", "else",
                                      "elif", "with", "import", "assert"};
  const char *t = ps->prev.len ? token_text(ps, ps->prev) : NULL;
  for (int i = 0; t && i < (int)(sizeof words / sizeof *words); i++)
    if ((int)strlen(words[i]) == ps->prev.len &&
        strncmp(t, words[i], (size_t)ps->prev.len) == 0)
      return true;
  return false;
}

static int yyreport_syntax_error(const yypcontext_t *ctx, yyscan_t scanner,
                                 AstProgram *prog) {
  (void)prog;
  ParseState *ps = P;
  if (ps->hush || ps->dead || ps->ntokens == ps->hush_token) return 0;
  yysymbol_kind_t tok = yypcontext_token(ctx);
  Loc loc = *yypcontext_location(ctx);
  yysymbol_kind_t set[YYNTOKENS];
  int n = yypcontext_expected_tokens(ctx, set, YYNTOKENS);
  if (n < 0) n = 0;
  /* after a statement's first name: `=`, or `,` for more targets; only
   * the `=` is worth suggesting */
  if (n == 2 && has(set, n, YYSYMBOL_ASSIGN) && has(set, n, YYSYMBOL_COMMA)) {
    set[0] = YYSYMBOL_ASSIGN;
    n = 1;
  }
  char found[96], want[160];
  describe_found(ps, tok, loc, found, sizeof found);
  const OpenBracket *ob =
      ps->open_before > 0 ? &ps->open[ps->open_before - 1] : NULL;
  const char *text = tok == YYSYMBOL_NAME ? token_text(ps, loc) : NULL;
  if (text && has(set, n, YYSYMBOL_LB) && is_layout(text, loc.len)) {
    diag_error(ps->d, loc,
               "a layout applies to tensors only: write the dims, as in "
               "f32[N, C, H, W] %.*s",
               loc.len, text);
  } else if (n == 1 && set[0] == YYSYMBOL_ASSIGN && prev_is_python(ps)) {
    diag_error(ps->d, ps->prev,
               "'%.*s' is not part of tdsl: a kernel body is a list of "
               "`name = expression` and one `return`",
               ps->prev.len, token_text(ps, ps->prev));
  } else if (ob && has(set, n, closer_of(ob->ch)) &&
      (ob->ch != '{' || tok == YYSYMBOL_YYEOF || tok == YYSYMBOL_KERNEL)) {
    diag_error(ps->d, loc, "expected '%s' to close the '%c' at %d:%d, found %s",
               sym_spelling(closer_of(ob->ch)), ob->ch, ob->loc.line,
               ob->loc.col, found);
    if (ob->loc.line != loc.line) diag_note(ps->d, ob->loc, "'%c' opened here",
                                            ob->ch);
  } else if (has(set, n, YYSYMBOL_RETURN)) {
    bool ops = false;
    for (int i = 0; i < n; i++) ops = ops || is_operator(set[i]);
    diag_error(ps->d, loc, "unexpected %s; expected %sa new statement%s",
               found, ops ? "an operator, " : "",
               has(set, n, YYSYMBOL_RC) ? " or '}'" : "");
  } else if (expected_list(set, n, want, sizeof want) > 0) {
    diag_error(ps->d, loc, "expected %s, found %s", want, found);
  } else {
    diag_error(ps->d, loc, "unexpected %s", found);
  }
  return 0;
}

/* ---- entry point ---- */

AstProgram *parse_program(Arena *a, Diag *d, const char *src) {
  ParseState ps = {.a = a, .d = d, .src = src, .line = 1, .col = 1,
                   .bol = true, .last = {1, 1, 0}, .hush_token = -1};
  AstProgram *prog = arena_alloc(a, sizeof *prog);
  int errors0 = d->nerrors;
  yyscan_t scanner;
  if (yylex_init_extra(&ps, &scanner) != 0) ICE("cannot start the scanner");
  YY_BUFFER_STATE buf = yy_scan_string(src, scanner);
  int rc = yyparse(scanner, prog);
  yy_delete_buffer(buf, scanner);
  yylex_destroy(scanner);
  if (rc != 0 || d->nerrors > errors0) return NULL;
  return prog;
}
