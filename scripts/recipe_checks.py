"""The container recipes (Dockerfile, Singularity.def), checked without a container engine.

- The definition file's own checks (sections Apptainer knows, entry points that exist and compose) are in
  scripts/singularity_def.py: `parse_definition`, `check_entry_points`.
- `check_recipes`: both recipes install from the same lock (requirements.lock, as the constraints of uv's
  install of the pyproject extras; no pinned version of a locked package written in a recipe) and the same
  base (the Singularity From: is the image the Dockerfile builds); `check_flavours`: the CPU and GPU
  flavours of the one Dockerfile (a system stage each, the extras they install declared, no `# syntax=` line
  that an offline build could not fetch, scripts/ldd-check.sh in the steps that build extensions).

    python scripts/recipe_checks.py check [--repo DIR]    (scripts/container.sh check)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from scalestudy.cli import run

# the sibling module, also where a test loads this file by its path (scripts/ is then not on sys.path)
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from singularity_def import DefinitionError, check_entry_points, parse_definition, python_module_calls

__all__ = ["DefinitionError", "check_entry_points", "check_recipes", "parse_definition", "python_module_calls"]

# The GPU build of a locked CPU package, as the GPU image installs it (its own pin in the lock too).
GPU_VARIANTS = {"tensorflow-cpu": "tensorflow"}


# --------------------------------------------------------------------------------------------
# The lock, and what the image installs from it


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(lock_text: str) -> dict[str, str]:
    """{normalised name: version} of a uv/pip-compile lock."""
    pins = {}
    for line in lock_text.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;#]+)", line)
        if match:
            pins[_norm(match[1])] = match[3]
    return pins


# --------------------------------------------------------------------------------------------
# The two recipes agree


def dockerfile_args(text: str) -> dict[str, str]:
    return {m[1]: m[2].strip().strip('"') for m in re.finditer(r"^ARG\s+(\w+)=(.*)$", text, re.M)}


def dockerfile_base(text: str) -> str:
    """The Dockerfile's first FROM image, with its ARG defaults filled in (digest dropped when empty)."""
    args = dockerfile_args(text)
    match = re.search(r"^FROM\s+(\S+)", text, re.M)
    if not match:
        raise ValueError("Dockerfile: no FROM")
    image = match[1]
    image = re.sub(r"\$\{(\w+):\+([^}]*)\}", lambda m: m[2] if args.get(m[1]) else "", image)
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m[1] or m[2], ""), image)


def dockerfile_stages(text: str) -> dict[str, str]:
    """{stage name: the image or stage it starts FROM} of a multi-stage Dockerfile (unnamed stages: their index)."""
    stages = {}
    for index, match in enumerate(re.finditer(r"^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", text, re.M | re.I)):
        stages[match[2] or str(index)] = match[1]
    return stages


def pyproject_extras(text: str) -> set[str]:
    import tomllib

    return set(tomllib.loads(text).get("project", {}).get("optional-dependencies", {}))


def check_flavours(dockerfile: str, extras: set[str]) -> list[str]:
    """The two flavours of the one Dockerfile: an offline-buildable recipe (no `# syntax=` line: BuildKit would
    fetch that frontend from a registry), a system stage per FLAVOUR, the CPU one on the CPU_BASE argument
    (debian:bookworm, or the same made locally), the extras it installs declared in pyproject.toml, and the
    ldd check in the build steps (CPU and GPU)."""
    problems = []
    if re.search(r"^#\s*syntax\s*=", dockerfile, re.M | re.I):
        problems.append("Dockerfile: a `# syntax=` line makes BuildKit pull its frontend image: offline builds fail")
    stages = dockerfile_stages(dockerfile)
    for flavour in ("cpu", "gpu"):
        if f"system-{flavour}" not in stages:
            problems.append(f"Dockerfile: no stage system-{flavour} (FROM ... AS system-{flavour})")
    if stages.get("system-cpu", "${CPU_BASE}") != "${CPU_BASE}":
        problems.append(f"Dockerfile: system-cpu starts FROM {stages['system-cpu']}, not the CPU_BASE argument")
    if not any(base == "system-${FLAVOUR}" for base in stages.values()):
        problems.append("Dockerfile: no stage starts FROM system-${FLAVOUR}: the flavour chooses nothing")
    commands = re.sub(r"\\\n", " ", dockerfile)
    for name in sorted(set(re.findall(r"--extra\s+\"?([\w-]+)\"?", commands)) - extras):
        problems.append(f"Dockerfile: --extra {name} is not an extra of pyproject.toml")
    for stage in ("deps", "mxnet-cuda11"):
        body = re.search(rf"^FROM\s+\S+\s+AS\s+{stage}\b(.*?)(?=^FROM\s|\Z)", dockerfile, re.M | re.S)
        runs = re.sub(r"^(COPY|ADD)\b.*$", "", body[1] if body else "", flags=re.M)  # a copy runs nothing
        if body and "ldd-check.sh" not in runs:
            problems.append(f"Dockerfile: stage {stage} builds extensions without scripts/ldd-check.sh on them")
    return problems


def script_default(text: str, var: str) -> str | None:
    """VAR's default in a shell script written as VAR="${VAR:-default}"."""
    match = re.search(rf'^\s*{var}="?\$\{{{var}:-([^}}]+)\}}"?', text, re.M)
    return match[1] if match else None


def locked_versions_written(text: str, pins: dict[str, str], where: str) -> list[str]:
    """`pkg==version` of a locked package written in a recipe: a version written twice."""
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            continue
        for match in re.finditer(r"([A-Za-z0-9][A-Za-z0-9._-]*)==\d[\w.]*", line):
            if _norm(match[1]) in pins or _norm(match[1]) in {_norm(v) for v in GPU_VARIANTS.values()}:
                problems.append(f"{where}:{number}: {match[0]} written here; versions come from requirements.lock")
    return problems


def check_recipes(repo: Path) -> list[str]:
    """Problems with Dockerfile + Singularity.def + scripts/container.sh taken together (empty: consistent)."""
    problems: list[str] = []
    dockerfile = (repo / "Dockerfile").read_text()
    pins = lock_pins((repo / "requirements.lock").read_text())
    try:
        definition = parse_definition(repo / "Singularity.def")
    except DefinitionError as err:
        return [str(err)]
    script = (repo / "scripts" / "container.sh").read_text()

    # one lock: the Dockerfile copies it and installs from it; no recipe pins a locked package itself
    if not re.search(r"^COPY\b.*\brequirements\.lock\b", dockerfile, re.M):
        problems.append("Dockerfile: does not COPY requirements.lock")
    commands = re.sub(r"\\\n", " ", dockerfile)  # continued lines joined
    if not re.search(r"uv pip install\b[^\n]*-r pyproject\.toml[^\n]*-c requirements\.lock", commands):
        problems.append(
            "Dockerfile: does not install the pyproject extras with requirements.lock as constraints "
            "(uv pip install -r pyproject.toml --extra ... -c requirements.lock)"
        )
    if not re.search(r"horovod==\S*\bsed\b|sed[^\n]*\^horovod==", dockerfile):
        problems.append("Dockerfile: the Horovod version is not read from requirements.lock")
    problems += locked_versions_written(dockerfile, pins, "Dockerfile")
    problems += check_flavours(dockerfile, pyproject_extras((repo / "pyproject.toml").read_text()))
    problems += locked_versions_written(definition.path.read_text(), pins, str(definition.path))
    post = definition.section("post")
    if post is not None and re.search(r"\bpip3?(\.\d+)?\s+install\b", post.text()):
        problems.append(
            f"{definition.path}:{post.line}: %post installs Python packages: the image from the "
            "Dockerfile has them all, from the lock"
        )

    # one base: the Singularity image starts from the image the Dockerfile builds
    image = script_default(script, "IMAGE")
    if definition.bootstrap in ("docker-daemon", "docker-archive"):
        if image is None:
            problems.append('scripts/container.sh: no IMAGE="${IMAGE:-name:tag}" default to compare with')
        elif definition.base != image:
            problems.append(
                f"{definition.path}:{definition.header['from'][1]}: From: {definition.base} is not "
                f"the image scripts/container.sh builds from the Dockerfile ({image})"
            )
    elif definition.bootstrap == "docker":
        if definition.base != dockerfile_base(dockerfile):
            problems.append(
                f"{definition.path}: From: {definition.base} is not the Dockerfile's base {dockerfile_base(dockerfile)}"
            )
    else:
        problems.append(f"{definition.path}: Bootstrap: {definition.bootstrap} does not start from the Docker image")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/recipe_checks.py", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    chk = sub.add_parser("check", help="check Dockerfile, Singularity.def and their entry points")
    chk.add_argument("--repo", type=Path, default=Path("."))
    args = ap.parse_args(argv)
    repo = args.repo.resolve()
    try:
        definition = parse_definition(repo / "Singularity.def")
        problems = check_recipes(repo) + check_entry_points(definition, repo / "src", repo / "conf")
    except DefinitionError as err:
        problems = [str(err)]
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print("Dockerfile, Singularity.def and scripts/container.sh: consistent")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(run(main))
