#!/usr/bin/env python3
"""docs/architecture.md's floor table against the module links.

The table (the code block whose first line starts with "floor  module") lists every module with
its floor, folder and direct dependencies; a row may continue on the next lines (their first
column is blank). This check reads the module manifest that CMake writes
(BUILD_DIR/house_modules.json) and fails, one line per finding, when a module is missing from the
table or listed but not built, when its dependencies differ from its headlab_module() links, or
when its floor is not one above its highest dependency (0 without any). The exit status is the
number of findings.

  check_floor_table.py --doc docs/architecture.md --manifest BUILD_DIR/house_modules.json
"""

import argparse
import json
import re
import sys

ROW = re.compile(r"^\s+(\d+)\s+(\w+)\s")


def read_table(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("floor  module"))
    header = lines[start]
    deps_at, third_at = header.index("direct dependencies"), header.index("third-party")
    rows = {}
    current = None
    for line in lines[start + 1:]:
        if line.startswith("```"):
            break
        cell = line[deps_at:third_at] if len(line) > deps_at else ""
        names = [d.strip() for d in cell.replace(",", " ").split() if d.strip()]
        m = ROW.match(line)
        if m:
            current = m.group(2)
            rows[current] = (int(m.group(1)), set(names))
        elif current:
            rows[current][1].update(names)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc", required=True)
    ap.add_argument("--manifest", required=True)
    args = ap.parse_args()
    modules = json.load(open(args.manifest, encoding="utf-8"))["modules"]
    deps = {m["name"]: set(m["depends"]) for m in modules}
    floors = {}

    def floor(name):
        if name not in floors:
            floors[name] = 1 + max((floor(d) for d in deps[name]), default=-1)
        return floors[name]

    table = read_table(args.doc)
    findings = []
    for name in deps:
        if name not in table:
            findings.append(f"{args.doc}: module {name} is not in the floor table")
            continue
        listed_floor, listed_deps = table[name]
        if listed_deps != deps[name]:
            findings.append(f"{args.doc}: {name} lists dependencies {sorted(listed_deps)} but "
                            f"CMakeLists.txt links {sorted(deps[name])}")
        if listed_floor != floor(name):
            findings.append(f"{args.doc}: {name} is on floor {listed_floor} but its dependencies "
                            f"put it on floor {floor(name)}")
    for name in table:
        if name not in deps:
            findings.append(f"{args.doc}: the floor table lists {name}, which is not a module")
    for f in findings:
        print(f)
    return min(len(findings), 100)


if __name__ == "__main__":
    sys.exit(main())
