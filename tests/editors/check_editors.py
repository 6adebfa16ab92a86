#!/usr/bin/env python3
"""check_editors.py SRCDIR — the editor support in editors/ knows the
language as the compiler does.

- The VS Code manifest and the TextMate grammar parse as JSON, the
  manifest points at the grammar, and every regex of the grammar compiles
  (Python's re is close enough to Oniguruma for these patterns).
- The names come from the compiler's own tables: every builtin of the
  op families' tables (sema_*_builtins[] in frontend/sema_*.c), every dtype of ir/dtype.h, every layout of
  frontend/parser.y, every keyword of frontend/lexer.l.  A small
  TextMate-style tokenizer runs the grammar over sample lines that use
  each of them, numbers, strings, comments and operators, and checks the
  scope each token gets.
- The Vim syntax file names every builtin, dtype and layout; when vim is
  installed, it highlights the same sample lines and the syntax group at
  each token is checked.
Exits 1 with the differences."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

src = sys.argv[1]
errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def read(*p):
    return open(os.path.join(src, *p), encoding="utf-8").read()


def compiler_names():
    builtins = set()
    for f in sorted(os.listdir(os.path.join(src, "frontend"))):
        if not re.match(r"sema_\w+\.c$", f):
            continue
        for table in re.findall(r"const Builtin sema_\w+_builtins\[\] = \{(.*?)\n\};",
                                read("frontend", f), re.S):
            builtins |= set(re.findall(r'\{"([a-z_0-9]+)",', table))
    builtins = sorted(builtins)
    dtypes = re.findall(r'X\(\w+, "(\w+)"', read("ir", "dtype.h"))
    parser = read("frontend", "parser.y")
    layouts = re.findall(r'"(\w+)"', parser[parser.index("layout_names[]"):].split(";")[0])
    lexer = read("frontend", "lexer.l")
    keywords = re.findall(r'^"([A-Za-z]+)"', lexer, re.M)
    keywords += re.findall(r'^"[A-Za-z]+"\|"([A-Za-z]+)"', lexer, re.M)
    check(len(builtins) > 50 and len(dtypes) == 10 and len(layouts) == 3 and
          "kernel" in keywords, "could not read the compiler's tables")
    return builtins, dtypes, layouts, keywords


# ---- TextMate ---------------------------------------------------------------

def load_grammar():
    d = os.path.join(src, "editors", "vscode")
    pkg = json.loads(read("editors", "vscode", "package.json"))
    langs = pkg["contributes"]["languages"]
    check(any(".tdsl" in l["extensions"] for l in langs), "no .tdsl language")
    for l in langs:
        if "configuration" in l:
            json.load(open(os.path.join(d, l["configuration"]), encoding="utf-8"))
    gr = pkg["contributes"]["grammars"][0]
    g = json.load(open(os.path.join(d, gr["path"]), encoding="utf-8"))
    check(g["scopeName"] == gr["scopeName"], "manifest and grammar scope differ")
    return g


def flatten(g, pats, out):
    """The grammar's match rules in the order TextMate tries them."""
    for p in pats:
        if "include" in p:
            flatten(g, [g["repository"][p["include"][1:]]], out)
        elif "patterns" in p:
            flatten(g, p["patterns"], out)
        else:
            check("begin" not in p, "begin/end rules are not checked here")
            out.append((re.compile(p["match"]), p))
    return out


def tokenize(rules, line):
    """The scope of each character of line: at each position the rule
    matching earliest wins, the first listed on a tie (TextMate's rule);
    unmatched text has scope ''."""
    scopes, pos = [""] * len(line), 0
    while pos < len(line):
        best = None
        for rx, p in rules:
            m = rx.search(line, pos)
            if m and m.end() > m.start() and (best is None or m.start() < best[0].start()):
                best = (m, p)
        if best is None:
            break
        m, p = best
        if "captures" in p:
            for i in range(1, (m.re.groups or 0) + 1):
                if m.group(i) is not None:
                    name = p["captures"].get(str(i), {}).get("name", "")
                    scopes[m.start(i):m.end(i)] = [name] * (m.end(i) - m.start(i))
        else:
            scopes[m.start():m.end()] = [p["name"]] * (m.end() - m.start())
        pos = m.end()
    return scopes


def locate(line, text):
    """The index of the first occurrence of text in line as a whole token
    (an identifier is not found inside a longer one)."""
    m = re.search(r"(?<![A-Za-z0-9_])" + re.escape(text) + r"(?![A-Za-z0-9_])", line)
    return m.start() if m else line.index(text)


def scope_of(scopes, line, text):
    """The scope text has, when all its characters share one, else None."""
    i = locate(line, text)
    got = set(scopes[i:i + len(text)])
    return got.pop() if len(got) == 1 else None


def samples(builtins, dtypes, layouts):
    """(line, [(token, textmate scope prefix, vim group)])."""
    out = []
    for b in builtins:
        out.append((f"    y = x.{b}(dim=1) + {b}(x)",
                    [(b, "support.function", "tdslBuiltin"),
                     ("dim", "variable.parameter", "tdslKwarg"),
                     ("y", "", "")]))
    for d in dtypes:
        out.append((f"kernel k(x: {d}[N, 4]) -> {d}[N] {{",
                    [("kernel", "keyword", "tdslKeyword"),
                     ("k", "entity.name.function", "tdslKernelName"),
                     (d, "storage.type", "tdslType"), ("->", "keyword.operator", "tdslOperator")]))
    for l in layouts:
        out.append((f"kernel k(x: f32[N, 3, 4, 4] {l}) -> f32[N] {{",
                    [(l, "storage.modifier", "tdslLayout")]))
    out.append(("    return 1_000 + 2.5 * .5 - 1e-3 + 3. + 7 # two",
                [("return", "keyword.control", "tdslStatement"),
                 ("1_000", "constant.numeric.integer", "tdslNumber"),
                 ("2.5", "constant.numeric.float", "tdslFloat"),
                 (".5", "constant.numeric.float", "tdslFloat"),
                 ("1e-3", "constant.numeric.float", "tdslFloat"),
                 ("3.", "constant.numeric.float", "tdslFloat"),
                 ("7", "constant.numeric.integer", "tdslNumber"),
                 ("# two", "comment.line", "tdslComment")]))
    out.append(("    y = clamp(x, -inf, nan)",
                [("inf", "constant.language", "tdslConstant"),
                 ("nan", "constant.language", "tdslConstant")]))
    out.append(("    z = x[..., 1:] ** 2 // 3 @ w == True != False <= None",
                [("...", "keyword.operator", "tdslOperator"), ("**", "keyword.operator", "tdslOperator"),
                 ("//", "keyword.operator", "tdslOperator"), ("@", "keyword.operator", "tdslOperator"),
                 ("==", "keyword.operator", "tdslOperator"), ("True", "constant.language", "tdslConstant"),
                 ("False", "constant.language", "tdslConstant"), ("None", "constant.language", "tdslConstant"),
                 ("<=", "keyword.operator", "tdslOperator")]))
    out.append(("    q = pad(x, mode=\"same\", p='valid') & 1e | 0x1f ^ ~true",
                [('"same"', "string.quoted", "tdslString"), ("'valid'", "string.quoted", "tdslString"),
                 ("1e", "invalid", "tdslNumberError"), ("0x1f", "invalid", "tdslNumberError"),
                 ("&", "keyword.operator", "tdslOperator"), ("true", "constant.language", "tdslConstant")]))
    return out


def check_textmate(sample_lines):
    g = load_grammar()
    rules = flatten(g, g["patterns"], [])
    for line, want in sample_lines:
        scopes = tokenize(rules, line)
        for text, scope, _ in want:
            got = scope_of(scopes, line, text)
            ok = got == "" if scope == "" else (got or "").startswith(scope)
            check(ok, f"TextMate: {text!r} in {line!r}: scope {got!r}, expected {scope or 'none'}")


# ---- Vim --------------------------------------------------------------------

def check_vim_names(builtins, dtypes, layouts):
    syn = read("editors", "vim", "syntax", "tdsl.vim")
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", syn))
    for n in builtins + dtypes + layouts:
        check(n in words, f"Vim syntax lacks {n}")
    check("setfiletype tdsl" in read("editors", "vim", "ftdetect", "tdsl.vim"),
          "Vim ftdetect does not set the filetype")


def check_vim(sample_lines):
    vim = shutil.which("vim")
    if not vim:
        print("vim not found: skipping the Vim highlighting check")
        return
    with tempfile.TemporaryDirectory() as tmp:
        probes = []
        with open(os.path.join(tmp, "s.tdsl"), "w") as f:
            for n, (line, want) in enumerate(sample_lines, 1):
                f.write(line + "\n")
                for text, _, group in want:
                    probes.append((n, locate(line, text) + 1, text, group, line))
        with open(os.path.join(tmp, "probe.vim"), "w") as f:
            f.write("syntax on\nset syntax=tdsl\nlet out = []\n")
            for n, c, *_ in probes:
                f.write(f"call add(out, synIDattr(synID({n}, {c}, 1), 'name'))\n")
            f.write(f"call writefile(out, '{tmp}/out')\nqa!\n")
        rtp = os.path.join(src, "editors", "vim")
        subprocess.run([vim, "-N", "-u", "NONE", "-i", "NONE", "-es", "--cmd",
                        f"set rtp^={rtp}", "-S", os.path.join(tmp, "probe.vim"),
                        os.path.join(tmp, "s.tdsl")], timeout=60, check=False)
        got = open(os.path.join(tmp, "out")).read().split("\n")
        for (n, c, text, group, line), g in zip(probes, got):
            check(g == group, f"Vim: {text!r} in {line!r}: group {g!r}, expected {group!r}")


def main():
    builtins, dtypes, layouts, _ = compiler_names()
    lines = samples(builtins, dtypes, layouts)
    check_textmate(lines)
    check_vim_names(builtins, dtypes, layouts)
    check_vim(lines)
    for e in errors:
        print("  " + e)
    print(f"{len(errors)} problems" if errors else
          f"editors: {len(builtins)} builtins, {len(dtypes)} dtypes, {len(layouts)} layouts checked")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
