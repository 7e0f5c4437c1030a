#!/usr/bin/env python3
"""Every code snippet of a document is compiled (or trained) by a test.

Each ```cpp, ```cmake or ```toml block of the document must follow a line
<!-- from PATH -->, naming a file of the repository that the build compiles or the tests run
(examples/, configs/ and the library's sources: never docs/), and appear in it verbatim. A line
that is exactly "// ..." (cpp) or "# ..." (cmake, toml) stands for omitted lines: the pieces
around it must appear in the file in that order. Shell blocks (```sh) and output are not
checked. Each problem is one line, "doc:line: ..."; the exit status is the number of problems.

  check_snippets.py --root SOURCE_DIR docs/extending.md
  check_snippets.py --self-test
"""

import argparse
import os
import re
import sys
import tempfile

CHECKED = {"cpp": "// ...", "cmake": "# ...", "toml": "# ..."}
FROM = re.compile(r"^<!-- from (\S+) -->$")
ALLOWED_ROOTS = ("examples/", "configs/", "core/", "autograd/", "layers/", "optim/", "train/",
                 "tests/")


def blocks(text):
    """(line number, language, body, preceding non-blank line) of every fenced block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        yield start + 1, m.group(1), "\n".join(lines[start + 1:j]), lines[k] if k >= 0 else ""
        i = j + 1


def check(root, doc):
    problems = []
    with open(os.path.join(root, doc), encoding="utf-8") as f:
        text = f.read()
    count = 0
    for line, lang, body, before in blocks(text):
        if lang not in CHECKED:
            continue
        count += 1
        where = f"{doc}:{line}"
        m = FROM.match(before.strip())
        if not m:
            problems.append(f"{where}: a ```{lang} block without '<!-- from PATH -->' before it")
            continue
        path = m.group(1)
        if not path.startswith(ALLOWED_ROOTS) or not os.path.isfile(os.path.join(root, path)):
            problems.append(f"{where}: '{path}' is not a compiled or tested file of the tree")
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            source = f.read()
        at = 0
        for piece in body.split("\n" + CHECKED[lang] + "\n"):
            found = source.find(piece, at)
            if found < 0:
                first = piece.strip().split("\n")[0]
                problems.append(f"{where}: not in {path} (verbatim, in order): {first!r}")
                break
            at = found + len(piece)
    if count == 0:
        problems.append(f"{doc}: no checked snippets at all")
    return problems


def self_test():
    files = {
        "examples/a.cpp": "int f() {\n  return 1;\n}\n\nint g() { return 2; }\n",
        "docs/d.md": "x\n<!-- from examples/a.cpp -->\n```cpp\nint f() {\n// ...\nint g() "
                     "{ return 2; }\n```\n\n```cpp\nint h();\n```\n<!-- from examples/a.cpp -->"
                     "\n```cpp\nint g() { return 3; }\n```\n",
    }
    with tempfile.TemporaryDirectory() as root:
        for path, body in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(body)
        problems = check(root, "docs/d.md")
    expected = ["docs/d.md:9: a ```cpp block without", "docs/d.md:13: not in examples/a.cpp"]
    ok = len(problems) == len(expected) and all(p.startswith(e) for p, e in zip(problems, expected))
    if not ok:
        print(f"self-test: expected {expected}, got {problems}", file=sys.stderr)
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root")
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("docs", nargs="*")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    problems = []
    for doc in args.docs:
        problems += check(args.root, doc)
    for p in problems:
        print(p)
    if not problems:
        print(f"docs: every checked snippet of {', '.join(args.docs)} is in a tested file")
    return min(len(problems), 100)


if __name__ == "__main__":
    sys.exit(main())
