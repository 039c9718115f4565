"""Where a run's platform and device come from, and the tag that says so (`<param>_basis`).

A param is taken from the caller's option where given (the log's value kept in a `log_<param>` tag, as
`param` does), else from the log's own lines (`log:line N`), else from the name of the folder the log lies in:

- Lambda's tf_cnn_benchmarks folders name the machine: lambda-tensorflow-benchmark's benchmark.sh writes every
  log under `<CPU>-<GPU>.logs/`, the CPU's model number and nvidia-smi's GPU name with `_` for its blanks
  (`7662-GeForce_RTX_3090.logs`; renamed by hand for a software variant: `3990X-GeForce_RTX_3080_TF1_15.logs`).
  The nearest folder above the log named `<HOST>-<REST>.logs` gives the platform `<HOST>-<GPU>`: <GPU> is the
  longest start of <REST> (words split at `_`) that names the GPU the log's device lines name (compared as
  schema.canonical_device writes both); what follows it (`_TF1_15`, `_XLA_TF1_15`: the software, not the machine)
  is left out, so one machine's folders give one platform. Where the log names no GPU, or one that <REST> does
  not start with, the platform is the folder's whole name without `.logs`. The folder never gives the device: the
  log's lines or `--device` do.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...schema import canonical_device
from . import param

BENCHMARK_FOLDER_RE = re.compile(r"^(?P<host>[^-_.]+)-(?P<rest>.+)\.logs$")


def benchmark_folder(path: Path) -> Path | None:
    """The nearest folder above `path` named like Lambda's benchmark folders (`<HOST>-<REST>.logs`), or None."""
    return next((p for p in path.absolute().parents if BENCHMARK_FOLDER_RE.match(p.name)), None)


def gpu_words(rest: list[str], gpu_name: str | None) -> int:
    """How many of the folder's words (`GeForce`, `RTX`, `3080`, `TF1`, `15`) name the log's GPU: the longest
    start that canonical_device writes as it writes `gpu_name`; all of them where none does."""
    if not gpu_name:
        return len(rest)
    wanted = canonical_device(gpu_name)
    named = [k for k in range(1, len(rest) + 1) if canonical_device(" ".join(rest[:k])) == wanted]
    return max(named, default=len(rest))


def folder_platform(path: Path, gpu_name: str | None) -> tuple[str, str] | None:
    """(platform, its basis) from the name of the Lambda benchmark folder `path` lies in, or None (module doc)."""
    folder = benchmark_folder(path)
    if folder is None:
        return None
    m = BENCHMARK_FOLDER_RE.match(folder.name)
    rest = m["rest"].split("_")
    kept = gpu_words(rest, gpu_name)
    basis = f"folder name ({folder.name})"
    if kept < len(rest):
        basis += f", '_{'_'.join(rest[kept:])}' after the GPU's name left out"
    return f"{m['host']}-{'_'.join(rest[:kept])}", basis


def resolved(what: str, found: tuple[object, str] | None, given: object, option: str, where: str,
             tags: dict[str, str]) -> object:  # fmt: skip
    """A schema param as `param` resolves it (the option, else what the log or its folder says: `found`, a
    (value, basis) pair or None), with its basis in the tag `<what>_basis`."""
    value = param(what, found[0] if found else None, given, option, where, tags)
    tags[f"{what}_basis"] = f"given ({option})" if given not in (None, "") else found[1]  # type: ignore[index]
    return value
