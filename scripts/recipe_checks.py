"""The container recipes (Dockerfile, Singularity.def), checked without a container engine.

- `parse_definition`: reads an Apptainer/Singularity definition file the way Apptainer splits it (header,
  then sections, a section being any line whose first word starts with %), and REJECTS an unknown or
  misspelled section (`%enviroment`) with file:line and the likely intended name: older Apptainer and
  SingularityCE silently ignore such a section, so the image would be built without it.
- `check_entry_points`: the `python -m MODULE` calls of %runscript and %test name modules that exist (ours
  under src/), and the Hydra overrides of `python -m scalestudy.train ...` compose with conf/train.yaml.
- `check_recipes`: both recipes install from the same lock (requirements.lock, as the constraints of uv's
  install of the pyproject extras; no pinned version of a locked package written in a recipe) and the same
  base (the Singularity From: is the image the Dockerfile builds); `check_flavours`: the CPU and GPU
  flavours of the one Dockerfile (a system stage each, the extras they install declared, no `# syntax=` line
  that an offline build could not fetch, scripts/ldd-check.sh in the steps that build extensions).

    python scripts/recipe_checks.py check [--repo DIR]    (scripts/container.sh check)
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from scalestudy.cli import run

# Apptainer's definition-file sections (pkg/build/types/parser/deffile.go) and header keywords.
SECTIONS = (
    "help",
    "setup",
    "files",
    "labels",
    "environment",
    "pre",
    "post",
    "runscript",
    "test",
    "startscript",
    "arguments",
)
APP_SECTIONS = ("appinstall", "applabels", "appfiles", "appenv", "apptest", "apphelp", "apprun", "appstart")
HEADERS = (
    "bootstrap",
    "from",
    "includecmd",
    "mirrorurl",
    "updateurl",
    "osversion",
    "include",
    "library",
    "registry",
    "namespace",
    "stage",
    "product",
    "user",
    "regcode",
    "productpgp",
    "registerurl",
    "modules",
    "otherurl",
    "fingerprints",
    "confurl",
    "setopt",
)
BOOTSTRAPS = (
    "docker",
    "docker-daemon",
    "docker-archive",
    "oci",
    "oci-archive",
    "localimage",
    "library",
    "oras",
    "shub",
    "scratch",
    "debootstrap",
    "yum",
    "zypper",
    "arch",
    "busybox",
)
PLACEHOLDER = re.compile(r"{{\s*(\w+)\s*}}")

# The GPU build of a locked CPU package, as the GPU image installs it (its own pin in the lock too).
GPU_VARIANTS = {"tensorflow-cpu": "tensorflow"}


class DefinitionError(ValueError):
    """A definition file Apptainer would reject or misread; the message starts with file:line."""


@dataclass
class Section:
    name: str  # lower case, without %
    args: str  # the rest of the section line (app name, %files from STAGE, %post -c /bin/bash)
    line: int  # where the section starts (1-based)
    body: list[tuple[int, str]] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(line for _, line in self.body)


@dataclass
class Definition:
    path: Path
    header: dict[str, tuple[str, int]]  # keyword (lower case) -> (value, line)
    sections: list[Section]
    arguments: dict[str, str]  # %arguments defaults

    def section(self, name: str) -> Section | None:
        found = [s for s in self.sections if s.name == name]
        if not found:
            return None
        merged = Section(name, found[0].args, found[0].line)
        for part in found:  # Apptainer appends repeated sections
            merged.body += part.body
        return merged

    def resolve(self, text: str, line: int = 0) -> str:
        """Text with its {{ NAME }} build arguments replaced by their %arguments defaults."""

        def sub(match):
            if match[1] not in self.arguments:
                raise DefinitionError(
                    f"{self.path}:{line}: build argument {{{{ {match[1]} }}}} has no default in %arguments"
                )
            return self.arguments[match[1]]

        return PLACEHOLDER.sub(sub, text)

    @property
    def bootstrap(self) -> str:
        return self.header.get("bootstrap", ("", 0))[0]

    @property
    def base(self) -> str:
        value, line = self.header.get("from", ("", 0))
        return self.resolve(value, line)


def _suggest(name: str) -> str:
    close = difflib.get_close_matches(name, SECTIONS + APP_SECTIONS, n=1, cutoff=0.6)
    return f" (did you mean %{close[0]}?)" if close else ""


def _open_section(first_word: str, raw: str, where: str, number: int) -> Section:
    """The section a line starting with %NAME opens; an unknown name, or an app section without its app, raises."""
    name = first_word[1:].lower()
    args = raw.strip()[len(first_word) :].strip()
    if name in APP_SECTIONS:
        if not args:
            raise DefinitionError(f"{where}: %{name} needs an app name")
    elif name not in SECTIONS:
        raise DefinitionError(
            f"{where}: unknown section {first_word!r}{_suggest(name)}; Apptainer knows "
            + ", ".join("%" + s for s in SECTIONS)
            + " and %app* (a line in a section whose first word "
            "starts with % also opens a section)"
        )
    return Section(name, args, number)


def _header_line(raw: str, where: str) -> tuple[str, str]:
    """(keyword as written, lower case; value) of a header line 'Keyword: value' (a keyword may end in digits)."""
    key, sep, value = raw.split("#", 1)[0].strip().partition(":")
    if not sep:
        raise DefinitionError(f"{where}: header line {raw.strip()!r} is not 'Keyword: value'")
    if re.sub(r"\d+$", "", key.strip().lower()) not in HEADERS:
        raise DefinitionError(f"{where}: unknown header keyword {key.strip()!r}")
    return key.strip().lower(), value.strip()


def _arguments(path: Path, sections: list[Section]) -> dict[str, str]:
    """The %arguments defaults (NAME=value lines; # comments and blank lines skipped)."""
    arguments: dict[str, str] = {}
    for sec in (s for s in sections if s.name == "arguments"):
        for number, raw in sec.body:
            line = raw.strip()
            if line and not line.startswith("#"):
                key, sep, value = line.partition("=")
                if not sep:
                    raise DefinitionError(f"{path}:{number}: %arguments line {line!r} is not NAME=value")
                arguments[key.strip()] = value.strip()
    return arguments


def parse_definition(path: str | Path, text: str | None = None) -> Definition:
    """Parse a definition file; unknown sections, header keywords or bootstrap agents raise DefinitionError."""
    path = Path(path)
    text = path.read_text() if text is None else text
    header: dict[str, tuple[str, int]] = {}
    sections: list[Section] = []
    current: Section | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        words = raw.split()
        if words and words[0].startswith("%"):
            current = _open_section(words[0], raw, f"{path}:{number}", number)
            sections.append(current)
        elif current is not None:
            current.body.append((number, raw))
        elif raw.split("#", 1)[0].strip():
            key, value = _header_line(raw, f"{path}:{number}")
            header[key] = (value, number)
    if "bootstrap" not in header:
        raise DefinitionError(f"{path}:1: no 'Bootstrap:' header")
    if header["bootstrap"][0] not in BOOTSTRAPS:
        value, line = header["bootstrap"]
        raise DefinitionError(f"{path}:{line}: unknown bootstrap agent {value!r}")
    definition = Definition(path, header, sections, _arguments(path, sections))
    for number, raw in enumerate(text.splitlines(), start=1):  # every placeholder has a default
        if PLACEHOLDER.search(raw):
            definition.resolve(raw, number)
    return definition


# --------------------------------------------------------------------------------------------
# Entry points of %runscript and %test


def _logical_lines(section: Section) -> list[tuple[int, str]]:
    """Shell lines of a section with backslash continuations joined, comments dropped."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in section.body:
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def python_module_calls(section: Section) -> list[tuple[int, str, list[str]]]:
    """(line, module, args) of every `python -m MODULE ARGS` in a section (python, python3, python3.11)."""
    calls = []
    for number, line in _logical_lines(section):
        for command in re.split(r"&&|\|\||;|\|", line):
            try:
                words = shlex.split(command, comments=True)
            except ValueError:
                continue
            for i, word in enumerate(words):
                if re.fullmatch(r"(\S*/)?python(3(\.\d+)?)?", word) and i + 2 < len(words) and words[i + 1] == "-m":
                    calls.append((number, words[i + 2], words[i + 3 :]))
                    break
    return calls


def module_exists(module: str, src: Path) -> bool:
    """Ours (scalestudy.*): a module or package under src/; anything else: importable here."""
    if module.split(".")[0] == "scalestudy":
        base = src.joinpath(*module.split("."))
        return base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def hydra_overrides(args: list[str]) -> list[str]:
    """The Hydra overrides among a command's arguments (shell expansions like "$@" are left out)."""
    return [a for a in args if "=" in a and not a.startswith("-") and "$" not in a]


def check_entry_points(definition: Definition, src: Path, conf: Path) -> list[str]:
    """Problems (file:line: ...) with the modules and Hydra overrides that %runscript and %test use."""
    problems = []
    for name in ("runscript", "test"):
        section = definition.section(name)
        if section is None:
            problems.append(f"{definition.path}: no %{name} section")
            continue
        calls = python_module_calls(section)
        if not calls:
            problems.append(f"{definition.path}:{section.line}: %{name} calls no `python -m MODULE`")
        for line, module, args in calls:
            where = f"{definition.path}:{line}"
            if not module_exists(module, src):
                problems.append(
                    f"{where}: %{name} runs python -m {module}, but no module {module} exists "
                    f"(looked under {src} and on this Python's path)"
                )
                continue
            if module == "scalestudy.train":
                overrides = hydra_overrides(args)
                if overrides:
                    problem = compose_problem(conf, overrides)
                    if problem:
                        problems.append(
                            f"{where}: %{name}: overrides {' '.join(overrides)} do not compose with "
                            f"{conf / 'train.yaml'}: {problem}"
                        )
    return problems


def compose_problem(conf: Path, overrides: list[str]) -> str | None:
    """None if conf/train.yaml composes with the overrides (Hydra's compose API; nothing runs), else why."""
    from omegaconf import OmegaConf

    from scalestudy.config import compose

    try:
        OmegaConf.to_container(compose("train", overrides, conf=conf.resolve()), resolve=True)  # and resolves
    except Exception as err:  # Hydra's errors name the override and the choices
        return f"{type(err).__name__}: {str(err).splitlines()[0]}"
    return None


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
