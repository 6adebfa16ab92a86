/* ast.c — small helpers over the syntax tree of ast.h (the tree itself
 * is built by parser.y). */
#include "ast.h"

const char *binop_spelling(BinOp op) {
  switch (op) {
  case BIN_ADD: return "+";
  case BIN_SUB: return "-";
  case BIN_MUL: return "*";
  case BIN_DIV: return "/";
  case BIN_FLOORDIV: return "//";
  case BIN_MOD: return "%";
  case BIN_POW: return "**";
  case BIN_MATMUL: return "@";
  case BIN_AND: return "&";
  case BIN_OR: return "|";
  case BIN_XOR: return "^";
  case BIN_EQ: return "==";
  case BIN_NE: return "!=";
  case BIN_LT: return "<";
  case BIN_LE: return "<=";
  case BIN_GT: return ">";
  case BIN_GE: return ">=";
  }
  return "?";
}
