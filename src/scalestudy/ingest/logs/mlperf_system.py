"""An MLPerf submission's system description, read beside its result logs: path -> (facts, warnings).

The standard layout (MLPerf Training v0.7 on; v0.6 Google) puts `<Submitter>/results/<system>/<benchmark>/result_N.txt`
beside `<Submitter>/systems/<system>.json`, a JSON object whose keys `accelerator_model_name`, `number_of_nodes`,
`accelerators_per_node` and `framework` describe the machine (the numbers are often strings: "8").

`read_system` never fails: a file that is not JSON (trailing commas, v0.7 Alibaba; `key: {json}` lines, v0.6
NVIDIA), that is not an object, whose key is spelled otherwise (`"number of nodes"`, v0.7 DellEMC) or whose value
is not usable (0 accelerators: a CPU-only system; an empty framework) gives a warning naming the file (and line)
and leaves that fact out: the log's own facts and the command's options decide. Nothing is guessed from a
malformed file. Other shapes (v0.5 `entry.json`) are not read here yet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from ...schema import SchemaError
from .. import read_text

KEYS = ("accelerator_model_name", "number_of_nodes", "accelerators_per_node", "framework", "system_name")
# How system files name frameworks (MXNet, "MxNet", "NGC PyTorch 21.05", "tf2.0", "TensorFlow 1.15 Poplar SDK")
# -> the study's framework names.
FRAMEWORK_WORDS = {
    "mxnet": "mxnet",
    "pytorch": "pytorch",
    "tensorflow": "tensorflow",
    "tf": "tensorflow",
    "jax": "jax",
    "paddlepaddle": "paddle",
    "paddle": "paddle",
    "mindspore": "mindspore",
    "tinygrad": "tinygrad",
    "caffe": "caffe",
}
NO_ACCELERATOR = ("", "n/a", "na", "none")


def system_file(result: Path) -> Path | None:
    """`<Submitter>/systems/<system>.json` for `<Submitter>/results/<system>/<benchmark>/result_N.txt`, if it is
    there; else None."""
    parts = result.resolve().parts
    if len(parts) >= 5 and parts[-4] == "results":
        candidate = Path(*parts[:-4]) / "systems" / f"{parts[-3]}.json"
        if candidate.is_file():
            return candidate
    return None


def frameworks_named(text: str) -> list[str]:
    """The frameworks a system file's `framework` text names, in order, once each ('NGC MXNet 21.05 , NGC PyTorch
    21.05' -> ['mxnet', 'pytorch'])."""
    found: list[str] = []
    for word in re.split(r"[^a-z0-9]+|(?<=[a-z])(?=\d)", text.lower()):
        name = FRAMEWORK_WORDS.get(word)
        if name and name not in found:
            found.append(name)
    return found


def _line_of(lines: list[str], key: str) -> int:
    return next((n for n, text in enumerate(lines, start=1) if f'"{key}"' in text), 1)


def _spelling(key: str, system: dict) -> str | None:
    """A key of `system` that is `key` spelled otherwise ('number of nodes', 'Number-Of-Nodes'), or None."""
    folded = re.sub(r"[^a-z0-9]", "", key.lower())
    return next((k for k in system if k != key and re.sub(r"[^a-z0-9]", "", str(k).lower()) == folded), None)


def read_system(path: Path) -> tuple[dict[str, object], list[str]]:
    """The facts of one system file and the warnings its reading gave (one line each, naming the file).

    Facts (only those the file states in the schema's spelling and a usable form): `system` (the file's stem,
    the system's name in the layout), `system_name`, `accelerator` (as written: 'NVIDIA A100-SXM4-80GB (400W)'),
    `nodes`, `accelerators_per_node`, `accelerators` (their product), `frameworks` (list, see frameworks_named; may be
    empty), `framework_text`, and `lines`: {fact: its line in the file}."""
    facts: dict[str, object] = {"system": path.stem, "lines": {}}
    try:
        text = read_text(path)
    except SchemaError as err:
        return facts, [f"{err}: the system description is not read"]
    try:
        system = json.loads(text)
    except ValueError as err:
        where = f"{path}:{err.lineno}"  # type: ignore[attr-defined]
        trailing = re.search(r",\s*[}\]]", text)
        if trailing:
            where = f"{path}:{text.count(chr(10), 0, trailing.start()) + 1}"
            reason = "a trailing comma"
        else:
            reason = err.msg  # type: ignore[attr-defined]
        return facts, [f"{where}: the system description is not valid JSON ({reason}): none of its facts are used"]
    if not isinstance(system, dict):
        return facts, [f"{path}:1: the system description is not a JSON object: none of its facts are used"]
    lines = text.split("\n")
    found, warnings = system_facts(system, str(path), lambda key: _line_of(lines, key))
    return {**found, "system": path.stem}, warnings


def system_facts(system: dict, where: str, line_of: Callable[[str], int]) -> tuple[dict[str, object], list[str]]:
    """The facts of a system description already parsed (a file's, or the `:::SYSJSON {...}` line some v4.0 logs
    print): as read_system, without `system`; `where` names it in the warnings, `line_of(key)` gives a key's line."""
    facts: dict[str, object] = {"lines": {}}
    lines_of_facts: dict[str, int] = facts["lines"]  # type: ignore[assignment]
    warnings: list[str] = []
    for key in KEYS:
        if key not in system:
            other = _spelling(key, system)
            if other is not None:
                warnings.append(f"{where}:{line_of(other)}: the system description spells {key!r} as {other!r}: "
                                "not read")  # fmt: skip
            elif key != "system_name":
                warnings.append(f"{where}: the system description has no {key!r}")
            continue
        value, line = system[key], line_of(key)
        if key in ("number_of_nodes", "accelerators_per_node"):
            try:
                number = float(str(value).strip())
            except ValueError:
                number = 0.0
            if not number.is_integer() or number < 1:
                warnings.append(f"{where}:{line}: {key} {value!r} is not a whole number >= 1: not read")
                continue
            name = "nodes" if key == "number_of_nodes" else key
            facts[name], lines_of_facts[name] = int(number), line
        elif key == "accelerator_model_name":
            if str(value).strip().lower() in NO_ACCELERATOR:
                warnings.append(
                    f"{where}:{line}: accelerator_model_name {value!r}: no accelerator named (a CPU system?)"
                )
                continue
            facts["accelerator"], lines_of_facts["accelerator"] = str(value).strip(), line
        elif key == "framework":
            # 'NGC MLPerf v4.0', 'CUDA 12.0', '': no framework named (not a malformed file: the log may say it)
            facts["frameworks"], facts["framework_text"] = frameworks_named(str(value)), str(value)
            lines_of_facts["framework"] = line
        else:
            facts["system_name"] = str(value)
    if "nodes" in facts and "accelerators_per_node" in facts:
        facts["accelerators"] = facts["nodes"] * facts["accelerators_per_node"]  # type: ignore[operator]
    return facts, warnings
