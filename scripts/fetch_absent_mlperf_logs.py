"""Fetch the MLPerf logs the mirror lacks (source.yaml `absent_logs`) into the data cache, where the next
`python -m scalestudy.ingest mlperf-training-resnet` imports them.

    .venv/bin/python scripts/fetch_absent_mlperf_logs.py

Each log is downloaded from its URL at the round's pinned commit, checked against its git blob id (a file whose
id differs is not kept), and written under a temporary name, then renamed. Needs access to GitHub.
"""

from __future__ import annotations

import os
import sys
import tempfile
import urllib.request
from pathlib import Path

from scalestudy.ingest import read_source
from scalestudy.ingest.fetch import cache_dir
from scalestudy.ingest.mlperf_training import git_blob_sha1

FOLDER = Path(__file__).resolve().parents[1] / "experiments" / "reference" / "mlperf-training-resnet"


def main() -> int:
    failed = 0
    for entry in read_source(FOLDER).get("absent_logs") or []:
        target = cache_dir() / FOLDER.name / entry["log"]
        if target.is_file() and git_blob_sha1(target.read_bytes()) == entry["git_blob_sha1"]:
            print(f"have {target}")
            continue
        try:
            with urllib.request.urlopen(entry["url"], timeout=60) as response:
                data = response.read()
        except OSError as err:
            print(f"error: {entry['url']}: {err}", file=sys.stderr)
            failed += 1
            continue
        if git_blob_sha1(data) != entry["git_blob_sha1"]:
            print(f"error: {entry['url']}: not the git blob {entry['git_blob_sha1']}", file=sys.stderr)
            failed += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
        print(f"fetched {target}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
