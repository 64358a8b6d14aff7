#!/usr/bin/env python3
"""Every fuzz target of tests/fuzz/CMakeLists.txt is built by the `fuzz` build preset (which
names its targets: one left out is never built, and CI's fuzz stage fails on a missing binary),
has seeds in tests/fuzz/corpus/<target>/ and a row in tests/fuzz/README.md.
Usage: fuzz_targets_test.py SOURCE_DIR
"""
import json
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
fuzz = root / "tests" / "fuzz"
targets = re.findall(r"^meith_fuzz_target\((\w+)", (fuzz / "CMakeLists.txt").read_text(), re.M)
presets = json.loads((root / "CMakePresets.json").read_text())
built = next(p for p in presets["buildPresets"] if p["name"] == "fuzz")["targets"]
readme = (fuzz / "README.md").read_text()
bad = []
for t in targets:
    if t not in built:
        bad.append(f"{t}: not among the targets of the `fuzz` build preset (CMakePresets.json)")
    if not any((fuzz / "corpus" / t).glob("*")):
        bad.append(f"{t}: no seeds in tests/fuzz/corpus/{t}/")
    if f"| `{t}` |" not in readme:
        bad.append(f"{t}: no row in tests/fuzz/README.md")
for t in built:
    if t not in targets:
        bad.append(f"{t}: in the `fuzz` build preset but not a meith_fuzz_target")
for b in bad:
    print(b)
if not targets:
    print("no meith_fuzz_target found in tests/fuzz/CMakeLists.txt")
sys.exit(1 if bad or not targets else 0)
