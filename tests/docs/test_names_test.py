#!/usr/bin/env python3
"""Every Catch2 test case's name can be run by ctest on its own.

catch_discover_tests registers each case under its name, and ctest splits a name at ';' (a CMake
list): such a case runs as two tests that match nothing, and fails under one preset and not the
other. Usage: test_names_test.py SOURCE_DIR
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1]) / "tests"
case = re.compile(r'TEST_CASE\(((?:\s*"(?:[^"\\]|\\.)*")+)')
bad = []
for f in sorted(root.rglob("*.cpp")):
    if "node_modules" in f.parts:
        continue
    for m in case.finditer(f.read_text(encoding="utf-8")):
        name = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
        if ";" in name:
            bad.append(f"{f.relative_to(root.parent)}: {name[:100]}")
for b in bad:
    print(f"a test case name with ';' (ctest splits it in two): {b}")
sys.exit(1 if bad else 0)
