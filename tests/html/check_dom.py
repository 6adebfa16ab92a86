#!/usr/bin/env python3
"""check_dom.py REPORT.txt PAGE.html PAGE.dom SOURCE.tdsl

Compares the HTML report as Chromium shows it after its scripts ran
(PAGE.dom, from --dump-dom) with the text report of the same compilation
(REPORT.txt) and with the source file:

- the script ran to its end (#tdsl-script-ok) and the page loads nothing
  from outside (one inline script, no src, links only within the page);
- the source listing shows the file's text exactly (so it was escaped);
- every decision of the text report is listed in its kernel's section
  (pass, kind, line:col, message), and nothing else is;
- every decision has exactly one mark in the source, at its line and
  column, whose hover text (set by the script) holds its message, and
  one note under its line;
- each kernel's totals and pass names match the text report, and its
  loop form is shown.
Exits 1 with the differences, 0 when the page shows what it should."""
import re
import sys
from collections import Counter
from html.parser import HTMLParser

VOID = {"meta", "input", "br", "img", "link", "hr", "col", "source", "wbr"}


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children = []  # Nodes and strings

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def classes(self):
        return self.attrs.get("class", "").split()

    def walk(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.walk()

    def find(self, tag=None, cls=None, **attrs):
        for n in self.walk():
            if tag and n.tag != tag:
                continue
            if cls and cls not in n.classes():
                continue
            if all(n.attrs.get(k) == v for k, v in attrs.items()):
                yield n

    def ancestor(self, tag):
        p = self.parent
        while p is not None and p.tag != tag:
            p = p.parent
        return p


class TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_endtag(self, tag):
        p = self.cur
        while p is not None and p.tag != tag:
            p = p.parent
        if p is not None:
            self.cur = p.parent

    def handle_data(self, data):
        self.cur.children.append(data)


errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def parse_text_report(path):
    """{kernel: {"decs": [(line, col, pass, kind, msg)], "bytes": (a, b),
    "nests": (a, b), "scratch": s, "passes": [names]}}"""
    kernels, cur, in_times = {}, None, False
    dec = re.compile(r"^    .*:(\d+):(\d+): ([a-z0-9-]+): ([a-z0-9-]+): (.*)$")
    for line in open(path, encoding="utf-8").read().splitlines():
        m = re.match(r"^kernel (\w+) \(", line)
        if m:
            cur = kernels[m.group(1)] = {"decs": [], "passes": []}
            in_times = False
            continue
        if cur is None:
            continue
        if line == "  pass times:":
            in_times = True
            continue
        if in_times and line.startswith("    "):
            cur["passes"].append(line.split()[0])
            continue
        m = dec.match(line)
        if m:
            cur["decs"].append((int(m.group(1)), int(m.group(2)), m.group(3),
                                m.group(4), m.group(5)))
            continue
        m = re.match(r"^  bytes moved:  (.*) -> (.*) \(-O0 -> as compiled\)$", line)
        if m:
            cur["bytes"] = (m.group(1), m.group(2))
        m = re.match(r"^  loop nests:   (\d+) -> (\d+)$", line)
        if m:
            cur["nests"] = (m.group(1), m.group(2))
        m = re.match(r"^  scratch:      (.*)$", line)
        if m:
            cur["scratch"] = m.group(1)
    return kernels


def check_self_contained(root, raw):
    scripts = list(root.find("script"))
    check(len(scripts) == 1, f"{len(scripts)} script elements, expected 1")
    for n in root.walk():
        check("src" not in n.attrs, f"<{n.tag} src=...> loads a resource")
        check(n.tag not in ("link", "img", "iframe", "object", "embed"),
              f"<{n.tag}> in the page")
        href = n.attrs.get("href")
        check(href is None or href.startswith("#"), f"link to {href!r}")
    check("url(" not in raw, "the style sheet loads a url()")
    check(list(root.find(id="tdsl-script-ok")),
          "no #tdsl-script-ok: the page's script did not run to its end")


def code_text(row, line_len):
    """The source text a listing row shows: a '¶' mark stands for a
    location past the end of the line and is not part of the text."""
    out = []
    for c in row.children:
        if isinstance(c, str):
            out.append(c)
        elif "mk" in c.classes() and c.text() == "\u00b6" and \
                int(c.attrs["data-col"]) > line_len:
            continue
        else:
            out.append(c.text())
    return "".join(out)


def check_source(root, source):
    lines = source.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for i, want in enumerate(lines, 1):
        rows = list(root.find("tr", id=f"L{i}"))
        check(len(rows) == 1, f"line {i}: {len(rows)} rows")
        if rows:
            code = next(rows[0].find("td", cls="code"))
            got = code_text(code, len(want.encode("utf-8")))
            check(got == want, f"line {i} shows {got!r}, the file has {want!r}")
    check(not list(root.find("tr", id=f"L{len(lines) + 1}")),
          "the listing has more lines than the file")


def page_decisions(root):
    """{kernel: [(line, col, pass, kind, msg, id)]} from the kernel sections."""
    out = {}
    for sec in root.find("section", cls="kernel"):
        name = next(next(sec.find("h2")).find("code")).text()
        decs = out[name] = []
        for li in sec.find("li", cls="dec"):
            a = li.attrs
            msg = next(li.find("span", cls="msg")).text()
            pk = next(li.find("span", cls="pk")).text()
            check(pk == f"{a['data-pass']}: {a['data-kind']}", f"{li.text()!r}: shows {pk!r}")
            at = next(li.find("a", cls="at")).text()
            check(at.endswith(f":{a['data-line']}:{a['data-col']}"), f"{li.text()!r}: at {at!r}")
            decs.append((int(a["data-line"]), int(a["data-col"]), a["data-pass"],
                         a["data-kind"], msg, a["id"]))
    return out


def check_marks(root, decs):
    """Each decision: one mark at its line:col with its message in the
    hover text; one note under its line."""
    by_id = {d[5]: d for ds in decs.values() for d in ds}
    seen = Counter()
    for mk in root.find("span", cls="mk"):
        ids = mk.attrs["data-decs"].split()
        line, col = int(mk.attrs["data-line"]), int(mk.attrs["data-col"])
        row = mk.ancestor("tr")
        check(row is not None and row.attrs.get("id") == f"L{line}",
              f"mark {line}:{col} is not on line {line}")
        check(mk.attrs.get("data-n") == str(len(ids)), f"mark {line}:{col}: no count")
        title = mk.attrs.get("title", "")
        want = "\n".join(f"{by_id[i][2]}: {by_id[i][3]}: {by_id[i][4]}"
                         for i in ids if i in by_id)
        check(title == want, f"mark {line}:{col}: hover text {title!r}, expected {want!r}")
        for i in ids:
            seen[i] += 1
            check(i in by_id and by_id[i][:2] == (line, col),
                  f"mark {line}:{col} names {i}, which is elsewhere or absent")
    notes = Counter(n.attrs["data-dec"] for n in root.find("div", cls="note"))
    for i, d in by_id.items():
        check(seen[i] == 1, f"decision {d[:4]} has {seen[i]} marks")
        check(notes[i] == 1, f"decision {d[:4]} has {notes[i]} notes")
        for n in root.find("div", cls="note", **{"data-dec": i}):
            check(d[4] in n.text(), f"note of {d[:4]} lacks its message")
            row = n.ancestor("tr")
            check(row is not None and row.attrs.get("id") == f"N{d[0]}",
                  f"note of {d[:4]} is not under line {d[0]}")


def cells(sec, header):
    for tr in sec.find("tr"):
        th = next(tr.find("th"), None)
        if th is not None and th.text() == header:
            return [td.text() for td in tr.find("td")]
    return []


def check_kernel(sec, name, want):
    if "bytes" in want:
        b = cells(sec, "bytes moved")
        check(len(b) == 2 and b[0] == want["bytes"][0] and
              b[1].startswith(want["bytes"][1]),
              f"{name}: bytes moved {b}, text report {want['bytes']}")
        n = cells(sec, "loop nests")
        check(n == list(want["nests"]), f"{name}: loop nests {n}, text {want['nests']}")
        s = cells(sec, "scratch")
        check(s == [want["scratch"]], f"{name}: scratch {s}, text {want['scratch']}")
    times = next((t for t in sec.find("table", cls="times")), None)
    got = [th.text() for th in times.find("th")] if times else []
    check(got == want["passes"], f"{name}: pass times {got}, text {want['passes']}")
    pre = [p.text() for d in sec.find("details", cls="loops") for p in d.find("pre")]
    check(len(pre) == 1 and name in pre[0], f"{name}: no loop form")


def main():
    txt, page, dom, src = sys.argv[1:5]
    want = parse_text_report(txt)
    raw = open(page, encoding="utf-8").read()
    tb = TreeBuilder()
    tb.feed(open(dom, encoding="utf-8").read())
    root = tb.root
    check_self_contained(root, raw)
    check_source(root, open(src, encoding="utf-8").read().replace("\r", ""))
    got = page_decisions(root)
    check(set(got) == set(want), f"kernels {sorted(got)}, text report {sorted(want)}")
    for k in want:
        g = Counter(d[:5] for d in got.get(k, []))
        w = Counter(want[k]["decs"])
        for d in (w - g).elements():
            errors.append(f"{k}: decision missing from the page: {d}")
        for d in (g - w).elements():
            errors.append(f"{k}: decision not in the text report: {d}")
    check_marks(root, got)
    for sec in root.find("section", cls="kernel"):
        name = next(next(sec.find("h2")).find("code")).text()
        if name in want:
            check_kernel(sec, name, want[name])
    ndec = sum(len(k["decs"]) for k in want.values())
    for e in errors:
        print("  " + e)
    if not errors:
        print(f"  {len(want)} kernels, {ndec} decisions shown")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
