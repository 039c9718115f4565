"""Apptainer/Singularity definition files (Singularity.def), read and checked without a container engine.

- `parse_definition`: reads a definition file the way Apptainer splits it (header, then sections, a section being
  any line whose first word starts with %), and REJECTS an unknown or misspelled section (`%enviroment`) with
  file:line and the likely intended name: older Apptainer and SingularityCE silently ignore such a section, so the
  image would be built without it.
- `check_entry_points`: the `python -m MODULE` calls of %runscript and %test name modules that exist (ours under
  src/), and the Hydra overrides of `python -m scalestudy.train ...` compose with conf/train.yaml.

Used by scripts/recipe_checks.py (`python scripts/recipe_checks.py check`, scripts/container.sh check).
"""

from __future__ import annotations

import difflib
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

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
