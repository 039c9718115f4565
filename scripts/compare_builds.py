"""Compare two builds of the paper's figures and tables (two out_dir folders) made from the same store.

    python scripts/compare_builds.py BUILD_A BUILD_B

Every sidecar (figures/*.json, tables/*.json) and every table (.tex) must be equal, apart from the git commit
they carry. The declaration of the derive / table function is compared by the function it names, so a
config that moved from `fn: scaling` to `_target_: scalestudy.derive.scaling` counts as the same. Figures
(.pdf, .png) carry the commit in their metadata, so their plotted numbers are compared through the sidecars.
Exit 0 when the builds agree, 1 with the differences listed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

COMMIT = re.compile(r"\b[0-9a-f]{40}(-dirty)?\b|\bunknown\b")


def _function_names(value):
    """The declared function by its short name: {'_target_': 'a.b.scaling'} and {'fn': 'scaling'} agree."""
    if isinstance(value, dict):
        out = {k: _function_names(v) for k, v in value.items() if k not in ("_target_", "fn")}
        target = value.get("_target_") or value.get("fn")
        if target:
            out["function"] = str(target).rsplit(".", 1)[-1]
        return out
    if isinstance(value, list):
        return [_function_names(v) for v in value]
    return value


def normalised(path: Path):
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        data.pop("git_commit", None)
        return _function_names(data)
    return COMMIT.sub("<commit>", path.read_text())


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = (Path(p) for p in argv)
    names = sorted(
        {p.relative_to(a).as_posix() for p in a.rglob("*") if p.suffix in (".json", ".tex")}
        | {p.relative_to(b).as_posix() for p in b.rglob("*") if p.suffix in (".json", ".tex")}
    )
    differ = []
    for name in names:
        if not (a / name).exists() or not (b / name).exists():
            differ.append(f"{name}: only in {a if (a / name).exists() else b}")
        elif normalised(a / name) != normalised(b / name):
            differ.append(f"{name}: differs")
    for line in differ:
        print(line)
    print(f"{len(names) - len(differ)} of {len(names)} files agree (git commit aside)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
