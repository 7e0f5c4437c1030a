#!/usr/bin/env python3
"""The house check: every #include points down the house.

Reads the module manifest that CMake writes (build/house_modules.json, from the headlab_module()
calls of the root CMakeLists.txt) and every C++ file of every module's folders, plus the test
folders of the four lower modules (tests/<module>/ may use what <module> may use, and tests/).
A project include ("dir/file.h") must name an existing file of the same module or of a module
in the closure of its declared dependencies; in library code, a third-party include (<toml++/...>, <dnnl.hpp>,
<CLI/...>, ...) must belong to a package that the module links, or that a dependency links
PUBLIC. Each violation is one line, "file:line: ...", naming the header, its module and what the
including module may use; the exit status is the number of violations (capped at 100).

  check_includes.py --root SOURCE_DIR --manifest BUILD_DIR/house_modules.json
  check_includes.py --self-test      # the check itself catches a wrong-way include
"""

import argparse
import json
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')

# Third-party headers by the package (CMake target, or a word of a library path) that provides
# them. A header not listed here is a system or standard header and always allowed.
THIRD_PARTY = [
    (re.compile(r"^toml\+\+/"), "tomlplusplus"),
    (re.compile(r"^nlohmann/"), "nlohmann_json"),
    (re.compile(r"^fmt/"), "fmt"),
    (re.compile(r"^spdlog/"), "spdlog"),
    (re.compile(r"^CLI/"), "CLI11"),
    (re.compile(r"^(dnnl|oneapi/dnnl)"), "dnnl"),
    (re.compile(r"^cblas\.h$"), "openblas"),
    (re.compile(r"^omp\.h$"), "OpenMP"),
    (re.compile(r"^mpi\.h$"), "MPI"),
    (re.compile(r"^xxhash\.h$"), "xxhash"),
    (re.compile(r"^doctest/"), "doctest"),
]

LOWER_TEST_FOLDERS = ["core", "autograd", "layers", "optim"]


def package_of(header):
    for pattern, package in THIRD_PARTY:
        if pattern.search(header):
            return package
    return None


def provides(libs, package):
    return any(package.lower() in lib.lower() for lib in libs)


class House:
    def __init__(self, manifest):
        self.modules = {m["name"]: m for m in manifest["modules"]}
        self.order = [m["name"] for m in manifest["modules"]]
        self.folder_module = {}
        for m in manifest["modules"]:
            for d in m["dirs"]:
                self.folder_module[d] = m["name"]

    def closure(self, name):
        seen, todo = set(), list(self.modules[name]["depends"])
        while todo:
            dep = todo.pop()
            if dep not in seen:
                seen.add(dep)
                todo.extend(self.modules[dep]["depends"])
        return seen

    def module_of(self, path):
        return self.folder_module.get(os.path.dirname(path))

    def third_party_allowed(self, name):
        m = self.modules[name]
        libs = list(m["public"]) + list(m["private"])
        for dep in self.closure(name):
            libs += self.modules[dep]["public"]
        return libs


def sources(root, folder):
    full = os.path.join(root, folder)
    if not os.path.isdir(full):
        return []
    return sorted(os.path.join(folder, f) for f in os.listdir(full)
                  if f.endswith((".h", ".cpp", ".inc")))


def check_file(root, house, path, module, may_use, is_test, out):
    allowed_libs = house.third_party_allowed(module)
    with open(os.path.join(root, path), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            kind, header = match.groups()
            where = f"{path}:{number}"
            if kind == '"':
                if header.startswith("tests/"):
                    if not is_test:
                        out.append(f"{where}: includes the test header \"{header}\" outside tests/")
                    continue
                if "/" not in header:  # a file beside this one (examples, tests)
                    continue
                target = house.module_of(header)
                if target is None or not os.path.isfile(os.path.join(root, header)):
                    out.append(f"{where}: includes \"{header}\", which is no file of a module")
                elif target != module and target not in may_use:
                    uses = ", ".join(m for m in house.order if m in may_use) or "nothing"
                    up = house.order.index(target) > house.order.index(module)
                    out.append(f"{where}: includes \"{header}\" of module {target}, "
                               f"{'up the house' if up else 'sideways'}: module {module} "
                               f"may use {uses}")
            else:
                package = package_of(header)
                if package is None or is_test:  # a test binary links what its tests need
                    continue
                if not provides(allowed_libs, package):
                    out.append(f"{where}: includes <{header}> of {package}, which module "
                               f"{module} does not link")


def check(root, manifest):
    house = House(manifest)
    problems = []
    for name in house.order:
        may_use = house.closure(name)
        for folder in house.modules[name]["dirs"]:
            for path in sources(root, folder):
                check_file(root, house, path, name, may_use, False, problems)
    for name in LOWER_TEST_FOLDERS:
        if name in house.modules:
            may_use = house.closure(name)
            for path in sources(root, os.path.join("tests", name)):
                check_file(root, house, path, name, may_use, True, problems)
    return problems


def self_test():
    """A two-module house where the lower module includes the upper: the check must say so."""
    manifest = {"modules": [
        {"name": "core", "dirs": ["core"], "depends": [], "public": [], "private": []},
        {"name": "layers", "dirs": ["layers"], "depends": ["core"], "public": [], "private": []},
    ]}
    files = {
        "core/tensor.h": '#pragma once\n#include "layers/module.h"\n#include <toml++/toml.h>\n',
        "layers/module.h": '#pragma once\n#include "core/tensor.h"\n#include "core/gone.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        problems = check(root, manifest)
    expected = [
        'core/tensor.h:2: includes "layers/module.h" of module layers, up the house',
        "core/tensor.h:3: includes <toml++/toml.h> of tomlplusplus, which module core does not link",
        'layers/module.h:3: includes "core/gone.h", which is no file of a module',
    ]
    missing = [e for e in expected if not any(p.startswith(e) for p in problems)]
    for e in missing:
        print(f"self-test: the check did not report: {e}", file=sys.stderr)
    if len(problems) != len(expected):
        print(f"self-test: expected {len(expected)} problems, got {problems}", file=sys.stderr)
        return 1
    return 1 if missing else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root")
    parser.add_argument("--manifest")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.root or not args.manifest:
        parser.error("--root and --manifest are required (or --self-test)")
    with open(args.manifest, encoding="utf-8") as f:
        manifest = json.load(f)
    problems = check(args.root, manifest)
    for p in problems:
        print(p)
    if not problems:
        print(f"house: {len(manifest['modules'])} modules, every include points down")
    return min(len(problems), 100)


if __name__ == "__main__":
    sys.exit(main())
