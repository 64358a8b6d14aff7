#!/usr/bin/env python3
"""The tree's one-way dependencies (docs/architecture.md, "Components"): a folder includes
headers of the folders on lower layers only, never of its own layer's neighbours or of one
above it; and each folder's code declares the namespace named after it. Usage:
layers_test.py SOURCE_DIR. Exit 1, naming each include or namespace out of place."""
import pathlib
import re
import sys

# Lowest first; a folder may include the folders of the layers before its own.
LAYERS = [
    ["platform", "protocol", "egress", "schema"],
    ["config"],
    ["permissions", "audit", "secrets"],
    ["sandbox", "remote"],
    ["process"],
    ["tools", "hooks"],
    ["approvals", "sources"],
    ["registry"],
    ["gateway"],
    ["daemon", "cli"],
]
# Folders whose code still says another folder's namespace, with where that is to be mended.
# Listed so that the check says when one is mended (then the line goes) or a new one appears.
NAMESPACE_EXCEPTIONS: dict[str, str] = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)
NAMESPACE = re.compile(r"^namespace\s+(meith(?:::[a-z_]+)*)\s*\{", re.M)


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    layer_of = {f: i for i, layer in enumerate(LAYERS) for f in layer}
    problems = []
    for folder, layer in layer_of.items():
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".cpp", ".hpp", ".in") or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            rel = path.relative_to(root)
            for m in INCLUDE.finditer(text):
                dep = m.group(1)
                if dep == folder or dep not in layer_of:
                    continue
                if layer_of[dep] >= layer:
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(
                        f"{rel}:{line}: {folder}/ includes {dep}/, which is "
                        + ("on its own layer" if layer_of[dep] == layer else "above it")
                        + " (docs/architecture.md, Components)")
            for m in NAMESPACE.finditer(text):
                ns = m.group(1)
                parts = ns.split("::")
                if len(parts) < 2:
                    continue
                want = f"meith::{folder}"
                allowed = {want, NAMESPACE_EXCEPTIONS.get(folder)}
                # A lower folder's namespace reopened here: a forward declaration of its type.
                below = layer_of.get(parts[1], len(LAYERS)) < layer
                if "::".join(parts[:2]) not in allowed and not below:
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{rel}:{line}: namespace {ns} in {folder}/ (want {want})")
    for folder, ns in NAMESPACE_EXCEPTIONS.items():
        uses = any(f"namespace {ns}" in p.read_text(encoding="utf-8", errors="replace")
                   for p in (root / folder).rglob("*.[ch]pp"))
        if not uses:
            problems.append(f"{folder}/ no longer says {ns}: drop it from NAMESPACE_EXCEPTIONS")
    for p in problems:
        print(p)
    print(f"{sum(len(l) for l in LAYERS)} folders checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
