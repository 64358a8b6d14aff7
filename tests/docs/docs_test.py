#!/usr/bin/env python3
"""Docs that match the software (issue 28, item 8): every section reference and every meith
command in README.md and docs/*.md resolves.

  - a Markdown link to an anchor (`(#3-frames)`, `(protocol.md#14-grants-and-approvals)`) names
    a heading of the target file (GitHub's slug rule);
  - `protocol.md §N` / `docs/protocol.md §N`, and a bare `§N` inside docs/protocol.md, name a
    section `## N.` of docs/protocol.md;
  - `docs/protocol.md §N` in source comments, units and scripts names a section too;
  - every `meith WORD ...` command in a code block or inline code runs as `meith WORD --help`
    with exit status 0, and a second word that names a subcommand (`sources restart`) is one.

Usage: docs_test.py SOURCE_DIR MEITH_BINARY. Prints each problem; exit 1 when there is one.
"""
import re
import subprocess
import sys
from pathlib import Path

root = Path(sys.argv[1])
meith = sys.argv[2]
docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
problems = []


def slug(heading: str) -> str:
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)  # GitHub drops punctuation but keeps - and _
    return s.replace(" ", "-")


def anchors(path: Path) -> set:
    out, seen = set(), {}
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            out.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
    return out


protocol = root / "docs" / "protocol.md"
sections = set()
for line in protocol.read_text(encoding="utf-8").splitlines():
    m = re.match(r"^##\s+(\d+)\.", line)
    if m:
        sections.add(int(m.group(1)))

cache = {}
in_block = {}


def help_ok(words):
    key = tuple(words)
    if key not in cache:
        r = subprocess.run([meith, *words, "--help"], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "MEITH_NO_AUTOSTART": "1"})
        cache[key] = (r.returncode, r.stdout + r.stderr)
    return cache[key]


for doc in docs:
    text = doc.read_text(encoding="utf-8")
    rel = doc.relative_to(root)
    for n, line in enumerate(text.splitlines(), 1):
        where = f"{rel}:{n}"
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", line):
            path = doc if not target else (doc.parent / target)
            if not path.exists() or path.suffix != ".md":
                continue
            if anchor not in anchors(path):
                problems.append(f"{where}: link to #{anchor} in {path.relative_to(root)}: "
                                "no such heading")
        refs = re.findall(r"(?:docs/)?protocol\.md\s+§(\d+)", line)
        if doc == protocol:
            refs += re.findall(r"(?<![A-Z.]\w)(?<!PROTOCOL\.md )§(\d+)", line)
        for ref in refs:
            if int(ref) not in sections:
                problems.append(f"{where}: §{ref} of docs/protocol.md does not exist")
        # Commands: a code block's line that runs meith, or an inline code span starting with
        # it — not prose that names the project.
        spans = re.findall(r"`((?:build/bin/|\./)?meith\s[^`]*)`", line)
        if in_block.get(doc) and re.match(r"^\s*(?:\$\s+)?(?:build/bin/|\./)?meith\s", line):
            spans.append(line.strip().lstrip("$ "))
        for span in spans:
            m = re.match(r"(?:build/bin/|\./)?meith\s+([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?", span)
            if not m:
                continue
            word, second = m.group(1), m.group(2)
            status, out = help_ok([word])
            if status != 0:
                problems.append(f"{where}: `meith {word}` is not a command (meith {word} --help "
                                f"exits {status})")
            elif word in ("service", "policy") and second and \
                    second not in ("install", "uninstall", "status", "check"):
                problems.append(f"{where}: `meith {word} {second}`: no such subcommand")
        if line.startswith("```"):
            in_block[doc] = not in_block.get(doc, False)

# Section references elsewhere (source comments, units, scripts): `docs/protocol.md §N` names a
# section that exists.
other = []
for pattern in ("*.cpp", "*.hpp", "*.h", "*.py", "*.mjs", "*.sh", "*.toml", "*.service",
                "*.socket", "*.plist", "*.in", "*.txt"):
    other += [p for p in root.rglob(pattern)
              if not any(part in ("node_modules", ".git") or part.startswith("build")
                         for part in p.relative_to(root).parts)]
for path in sorted(set(other)):
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (UnicodeDecodeError, OSError):
        continue
    for n, line in enumerate(lines, 1):
        for ref in re.findall(r"protocol\.md\s+§(\d+)", line):
            if int(ref) not in sections:
                problems.append(f"{path.relative_to(root)}:{n}: §{ref} of docs/protocol.md does "
                                "not exist")

for p in problems:
    print(p)
print(f"{len(docs)} files checked, {len(problems)} problems")
sys.exit(1 if problems else 0)
