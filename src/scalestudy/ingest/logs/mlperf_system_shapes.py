"""MLPerf system descriptions in the three shapes the rounds wrote -> (facts, warnings).

- `systems/<system>.json` (v0.6 Google, v0.7 on): `number_of_nodes`, `accelerators_per_node`,
  `accelerator_model_name`, `framework`, `accelerator_interconnect`, `host_networking`, `host_processors_per_node`
  (strings, as submitters write them);
- v0.5 `entry.json` (v0.5; v0.6 Fujitsu and Alibaba): `nodes[0].num_nodes`, `nodes[0].num_accelerators`,
  `nodes[0].accelerator`, `framework`, `interconnect`; for a TPU entry `num_accelerators` is the slice's TensorCore
  count (2 per chip), not a count per node;
- malformed files, read leniently and said so in a warning: `key: {json}` lines whose `entry` value is a Python
  repr (v0.6 NVIDIA), trailing commas (v0.7 Alibaba), a key spelled `"number of nodes"` (v0.7 DellEMC).

`read_system(path) -> (facts, warnings)`: facts hold `shape`, `nodes`, `accelerators_per_node`, `accelerators`
(chips; None for a CPU-only system or a count the file does not give), `accelerator_model`, `framework`,
`interconnect` (accelerator interconnect and host networking, as stated), `division`, `host_processors`.
A file none of the shapes reads raises SchemaError naming it.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from ...schema import SchemaError
from .. import read_text

TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")
NO_ACCELERATOR = {"", "n/a", "na", "none", "0"}


def _int(value: object) -> int | None:
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return int(number) if number.is_integer() and number >= 0 else None


def _loads(path: Path, text: str) -> tuple[dict, list[str]]:
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
    lines = _key_lines(text)
    if lines:
        return lines, [f"{path.name}: not valid JSON ({strict_error}); read as 'key: {{json}}' lines"]
    raise SchemaError(f"{path}:{strict_error.split(':')[0].split()[-1]}: not valid JSON ({strict_error}), "
                      "nor key: {json} lines")  # fmt: skip


def _key_lines(text: str) -> dict:
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


def read_system(path: Path) -> tuple[dict, list[str]]:
    data, warnings = _loads(path, read_text(path))
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
        nodes=_int(nodes),
        accelerators_per_node=_int(data.get("accelerators_per_node")),
        accelerator_model=model,
        framework=str(data.get("framework") or "").strip(),
        interconnect="; ".join(
            f"{k}: {data[k]}" for k in ("accelerator_interconnect", "host_networking") if str(data.get(k) or "").strip()
        ),
        division=str(data.get("division") or data.get("divison") or "").strip(),
        host_processors=_int(data.get("host_processors_per_node")),
        system_name=str(data.get("system_name") or "").strip(),
    )
    if facts["nodes"] is None:
        raise SchemaError(f"{path}:1: no number_of_nodes the file states as a whole number")
    per_node = facts["accelerators_per_node"]
    cpu_only = model.lower() in NO_ACCELERATOR or per_node == 0
    facts["accelerators"] = None if cpu_only or per_node is None else facts["nodes"] * per_node
    facts["accelerators_basis"] = "cpu only" if cpu_only else "number_of_nodes x accelerators_per_node"
    return facts, warnings


def _entry_shape(path: Path, data: dict, node: dict, warnings: list[str]) -> tuple[dict, list[str]]:
    """The v0.5 entry.json schema (also v0.6 Fujitsu and Alibaba, and inside v0.6 NVIDIA's malformed files)."""
    model = str(node.get("accelerator") or "").strip()
    nodes, per_node = _int(node.get("num_nodes")), _int(node.get("num_accelerators"))
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
    elif model.lower() in NO_ACCELERATOR or not per_node:
        facts["accelerators"], facts["accelerators_basis"] = None, "cpu only"
    else:
        facts["accelerators"] = nodes * per_node
        facts["accelerators_basis"] = "nodes[0].num_nodes x nodes[0].num_accelerators"
    return facts, warnings
