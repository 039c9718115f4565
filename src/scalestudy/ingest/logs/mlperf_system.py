"""An MLPerf submission's system description, read beside its result logs: path -> (facts, warnings).

The standard layout (MLPerf Training v0.7 on; v0.6 Google) puts `<Submitter>/results/<system>/<benchmark>/result_N.txt`
beside `<Submitter>/systems/<system>.json`, a JSON object whose keys `accelerator_model_name`, `number_of_nodes`,
`accelerators_per_node` and `framework` describe the machine (the numbers are often strings: "8").

`read_system` never fails: a file that is not JSON (trailing commas, v0.7 Alibaba; `key: {json}` lines, v0.6
NVIDIA), that is not an object, whose key is spelled otherwise (`"number of nodes"`, v0.7 DellEMC) or whose value
is not usable (0 accelerators: a CPU-only system; an empty framework) gives a warning naming the file (and line)
and leaves that fact out: the log's own facts and the command's options decide. Nothing is guessed from a
malformed file. `read_system_any_shape` (below) reads all three shapes leniently, for the MLPerf corpus dataset.
"""

from __future__ import annotations

import ast
import json
import os
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
    there; else None. It is named as the log was (absolute, `..` folded, symbolic links kept: the warnings name
    the files in the caller's terms, whichever link led there); a log that is itself a link to another tree is
    looked for beside its target too."""
    for path in (Path(os.path.abspath(result)), result.resolve()):
        parts = path.parts
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


# ------------------------------------------------------------------------------------------------------------
# The MLPerf corpus's reader (experiments/reference/mlperf-training-resnet, ingest/mlperf_training.py): all three
# shapes, malformed files read leniently and said so. `read_system` above stays strict for the logs a user brings
# (nothing is taken from a malformed file there); a published dataset whose README documents each lenient
# reading uses this one.
#
# - `systems/<system>.json`: `number_of_nodes`, `accelerators_per_node`, `accelerator_model_name`, `framework`,
#   `accelerator_interconnect`, `host_networking`, `host_processors_per_node`;
# - v0.5 `entry.json` (v0.5; v0.6 Fujitsu and Alibaba): `nodes[0].num_nodes`, `nodes[0].num_accelerators`,
#   `nodes[0].accelerator`, `framework`, `interconnect`; for a TPU entry `num_accelerators` is the slice's
#   TensorCore count (2 per chip), not a count per node;
# - malformed: `key: {json}` lines whose `entry` value is a Python repr (v0.6 NVIDIA), trailing commas (v0.7
#   Alibaba), a key spelled `"number of nodes"` (v0.7 DellEMC).
#
# read_system_any_shape(path) -> (facts, warnings): facts hold `shape` (systems-json, entry-json, malformed),
# `nodes`, `accelerators_per_node`, `accelerators` (chips; None for a CPU-only system or a count the file does not
# give), `accelerators_basis`, `accelerator_model`, `framework`, `interconnect`, `division`, `host_processors`,
# `system_name`. A file no shape reads raises SchemaError naming it.

TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")
NO_ACCELERATOR_OR_ZERO = {*NO_ACCELERATOR, "0"}


def _whole(value: object) -> int | None:
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return int(number) if number.is_integer() and number >= 0 else None


def _lenient_loads(path: Path, text: str) -> tuple[dict, list[str]]:
    """The file's JSON object, strictly, else leniently (with a warning), else SchemaError."""
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            return data, []
    except ValueError as err:
        strict_error = f"line {err.lineno}: {err.msg}"
    else:
        raise SchemaError(f"{path}:1: a system description that is not a JSON object")
    try:
        data = json.loads(TRAILING_COMMA_RE.sub(r"\1", text))
        if isinstance(data, dict):
            return data, [f"{path.name}: not valid JSON ({strict_error}); read without its trailing commas"]
    except ValueError:
        pass
    lines = _key_json_lines(text)
    if lines:
        return lines, [f"{path.name}: not valid JSON ({strict_error}); read as 'key: {{json}}' lines"]
    raise SchemaError(f"{path}:{strict_error.split(':')[0].split()[-1]}: not valid JSON ({strict_error}), "
                      "nor key: {json} lines")  # fmt: skip


def _key_json_lines(text: str) -> dict:
    """v0.6 NVIDIA: `key: {"value": ..., "metadata": ...}` lines; `entry` holds a Python repr of a dict whose
    `nodes` is a repr again."""
    found: dict = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(": ")
        if not sep or not key.isidentifier():
            continue
        try:
            found[key] = json.loads(rest).get("value")
        except (ValueError, AttributeError):
            return {}
    entry = found.get("entry")
    if isinstance(entry, str):
        try:
            entry = ast.literal_eval(entry)
            if isinstance(entry.get("nodes"), str):
                entry["nodes"] = [ast.literal_eval(entry["nodes"])]
        except (ValueError, SyntaxError, AttributeError):
            return {}
        found.update(entry)
    return found


def read_system_any_shape(path: Path) -> tuple[dict, list[str]]:
    data, warnings = _lenient_loads(path, read_text(path))
    nodes_list = data.get("nodes")
    if isinstance(nodes_list, list) and nodes_list and isinstance(nodes_list[0], dict):
        return _entry_shape(path, data, nodes_list[0], warnings)
    facts: dict = {"shape": "systems-json" if not warnings else "malformed"}
    nodes = data.get("number_of_nodes")
    if nodes is None and "number of nodes" in data:
        nodes = data["number of nodes"]
        warnings.append(f"{path.name}: key 'number of nodes' read as number_of_nodes")
        facts["shape"] = "malformed"
    model = str(data.get("accelerator_model_name") or "").strip()
    facts.update(
        nodes=_whole(nodes),
        accelerators_per_node=_whole(data.get("accelerators_per_node")),
        accelerator_model=model,
        framework=str(data.get("framework") or "").strip(),
        interconnect="; ".join(
            f"{k}: {data[k]}" for k in ("accelerator_interconnect", "host_networking") if str(data.get(k) or "").strip()
        ),
        division=str(data.get("division") or data.get("divison") or "").strip(),
        host_processors=_whole(data.get("host_processors_per_node")),
        system_name=str(data.get("system_name") or "").strip(),
    )
    if facts["nodes"] is None:
        raise SchemaError(f"{path}:1: no number_of_nodes the file states as a whole number")
    per_node = facts["accelerators_per_node"]
    cpu_only = model.lower() in NO_ACCELERATOR_OR_ZERO or per_node == 0
    facts["accelerators"] = None if cpu_only or per_node is None else facts["nodes"] * per_node
    facts["accelerators_basis"] = "cpu only" if cpu_only else "number_of_nodes x accelerators_per_node"
    return facts, warnings


def _entry_shape(path: Path, data: dict, node: dict, warnings: list[str]) -> tuple[dict, list[str]]:
    """The v0.5 entry.json schema (also v0.6 Fujitsu and Alibaba, and inside v0.6 NVIDIA's malformed files)."""
    model = str(node.get("accelerator") or "").strip()
    nodes, per_node = _whole(node.get("num_nodes")), _whole(node.get("num_accelerators"))
    facts: dict = {
        "shape": "malformed" if warnings else "entry-json",
        "nodes": nodes,
        "accelerators_per_node": per_node,
        "accelerator_model": model,
        "framework": str(data.get("framework") or "").strip(),
        "interconnect": "; ".join(
            str(v) for v in (data.get("interconnect"), node.get("cpu_accel_interconnect")) if str(v or "").strip()
        ),
        "division": str(data.get("division") or "").strip(),
        "host_processors": None,
        "system_name": "",
    }
    if nodes is None:
        raise SchemaError(f"{path}:1: nodes[0].num_nodes is not a whole number")
    if "tpu" in model.lower():
        # v0.5 TPU entries count TensorCores for the whole slice (tpuv3-8 = 8 cores = 4 chips): chips = cores / 2
        facts["accelerators_per_node"] = None
        facts["accelerators"] = per_node // 2 if per_node else None
        facts["accelerators_basis"] = "entry.json TPU core count / 2 = chips"
    elif model.lower() in NO_ACCELERATOR_OR_ZERO or not per_node:
        facts["accelerators"], facts["accelerators_basis"] = None, "cpu only"
    else:
        facts["accelerators"] = nodes * per_node
        facts["accelerators_basis"] = "nodes[0].num_nodes x nodes[0].num_accelerators"
    return facts, warnings
