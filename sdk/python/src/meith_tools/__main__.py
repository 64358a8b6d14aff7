"""``python3 -m meith_tools MODULE:CLASS [MODULE:CLASS ...]``: serve those plugins."""

from __future__ import annotations

import importlib
import sys

from .host import run_plugins


def load(spec: str):
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"meith_tools: {spec!r} is not MODULE:CLASS")
    module = importlib.import_module(module_name)
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise SystemExit(f"meith_tools: module {module_name!r} has no {attr!r}") from None
    return obj() if isinstance(obj, type) else obj


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print("usage: python3 -m meith_tools MODULE:CLASS [MODULE:CLASS ...]\n"
              "Serves the tool plugins as a meith tool host on stdin/stdout.", file=sys.stderr)
        return 0 if args else 2
    sys.path.insert(0, "")  # modules next to where meithd runs the host (its cwd)
    return run_plugins([load(a) for a in args])


if __name__ == "__main__":
    sys.exit(main())
