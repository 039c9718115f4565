"""python -m scalestudy.scaling COMMAND

predict [KEY=VALUE...]   the model's efficiency and throughput for a setting of your own, e.g.
                         predict model=vgg16 workers=512 device=P100 network=ethernet-25g fp16=true
                         (keys: conf/scaling/default.yaml `predict`; `predict help` lists them)
validate                 fit on the small-GPU-count points of each dataset, predict the held-out ones
sizes                    regenerate gradient_sizes.csv (training environment: TensorFlow and MXNet)
count keras|gluon        (internal) count one framework's models, print them as JSON
"""

from __future__ import annotations

import json
import sys

COMMANDS = ("predict", "validate", "sizes", "count")  # the first argument; predict and validate take KEY=VALUE


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "count":
        from .sizes import count_framework

        print(json.dumps(count_framework(rest[0])))
        return 0
    if command == "sizes":
        from pathlib import Path

        from .sizes import SIZES_FILE, generate

        out = Path(rest[rest.index("--out") + 1]) if "--out" in rest else SIZES_FILE
        rows = generate(out)
        print(f"{out}: {len(rows)} rows")
        return 0
    if command in COMMANDS[:2]:
        from .command_line import predict_command, validate_command

        return predict_command(rest) if command == "predict" else validate_command(rest)
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    from ..cli import entry, run

    sys.exit(run(entry(__spec__)))
