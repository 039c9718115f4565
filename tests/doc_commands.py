"""The commands the documentation shows (issue 40: every command in the docs runs as written), found and split
into simple commands the way a shell would read them. tests/doc_checks.py checks each; tests/test_doc_commands.py
runs those checks, one test per command.

Where commands are found, in README.md and docs/*.md:
- fenced code blocks marked bash, sh, shell or console (in a console block only the `$ ` lines are commands; the
  others are output), backslash-continued lines joined;
- inline code spans (`...`) that start like a command of the project: `make `, `python -m scalestudy`,
  `.venv/bin/python -m scalestudy`, `.venv-train/bin/python -m scalestudy` or `scalestudy ` (a console script).
Unmarked blocks (```) are diagrams, output and templates: they are not read.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHELL_FENCES = {"bash", "sh", "shell", "console"}
INLINE_PREFIXES = (
    "make ",
    "python -m scalestudy",
    ".venv/bin/python -m scalestudy",
    ".venv-train/bin/python -m scalestudy",
    "scalestudy ",
)
# What separates commands on a line (`a && b`, `a & b`, `a | b`); redirections and their file are dropped.
SEPARATORS = {"&&", "||", ";", "&", "|", "(", ")"}
REDIRECTIONS = {"<", ">", ">>", "<<", ">&", "&>"}  # as shlex gives them (`2>` is `2` then `>`)
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w-]*)")
# An inline code span: backticks, then text without a backtick, across line breaks but not a blank line.
SPAN = re.compile(r"(?<!`)`(?!`)((?:[^`\n]|\n(?!\s*\n))+?)`(?!`)")


@dataclass(frozen=True)
class DocCommand:
    """One command line of the docs: where it starts (file:line), its text as a shell reads it, and whether it is
    an inline code span (prose may name an entry point there: `python -m scalestudy.ingest logs`)."""

    where: str
    text: str
    inline: bool = False


@dataclass(frozen=True)
class SimpleCommand:
    """One simple command of a line: its `VAR=value` prefixes and its words (program first)."""

    where: str
    env: tuple[str, ...]
    words: tuple[str, ...]


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def documented_commands(files: list[Path] | None = None) -> list[DocCommand]:
    """Every command of the docs, in file order."""
    found: list[DocCommand] = []
    for path in files or doc_files():
        text = path.read_text()
        name = str(path.relative_to(REPO))
        found += fenced_commands(name, text) + inline_commands(name, text)
    return found


def fenced_commands(name: str, text: str) -> list[DocCommand]:
    """The command lines of the shell blocks of one markdown file."""
    commands: list[DocCommand] = []
    lines = text.splitlines()
    fence, language, indent, block = None, "", 0, []
    for number, line in enumerate(lines, 1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence, indent, language, block = opened.group(2), len(opened.group(1)), opened.group(3), []
        elif fence is not None and line.strip().startswith(fence):
            if language in SHELL_FENCES:
                commands += block_commands(name, block, console=language == "console")
            fence = None
        elif fence is not None:
            block.append((number, line[indent:] if line[:indent].isspace() else line.lstrip()))
    return commands


def block_commands(name: str, block: list[tuple[int, str]], console: bool) -> list[DocCommand]:
    """A shell block's commands: continuations joined, `$ ` prompts stripped (console: output lines skipped)."""
    commands: list[DocCommand] = []
    pending, start = "", 0
    for number, line in block:
        if pending:
            line = line.lstrip()  # a continuation's indent
        else:
            if console and not line.startswith("$ "):
                continue  # a console block's output
            line, start = line.removeprefix("$ "), number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text = pending + line
        pending = ""
        if text.strip() and not text.strip().startswith("#"):
            commands.append(DocCommand(f"{name}:{start}", text.strip()))
    if pending.strip():
        commands.append(DocCommand(f"{name}:{start}", pending.strip()))
    return commands


def inline_commands(name: str, text: str) -> list[DocCommand]:
    """The inline code spans that start like a project command, with the line each starts on."""
    commands = []
    prose = without_fenced_blocks(text)
    for span in SPAN.finditer(prose):
        code = " ".join(span.group(1).split())
        if code.startswith(INLINE_PREFIXES):
            commands.append(DocCommand(f"{name}:{prose.count(chr(10), 0, span.start()) + 1}", code, inline=True))
    return commands


def without_fenced_blocks(text: str) -> str:
    """The text with every fenced block's lines blanked (kept as empty lines, so line numbers stay)."""
    out, fence = [], None
    for line in text.splitlines():
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(2)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        else:
            out.append("" if fence else line)
            continue
        out.append("")
    return "\n".join(out)


def simple_commands(command: DocCommand) -> list[SimpleCommand]:
    """The simple commands of a line, as a POSIX shell splits it: quotes removed, `# comment` dropped, split at
    `&&`, `||`, `;`, `&`, `|`; redirections dropped with their file. A line the shell cannot read (an open quote)
    is a ValueError naming it."""
    lexer = shlex.shlex(command.text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as err:
        raise ValueError(f"{command.where}: the shell cannot read {command.text!r}: {err}") from None
    commands, words = [], []
    for token in [*tokens, ";"]:
        if token in SEPARATORS:
            if words:
                commands.append(simple_command(command.where, words))
            words = []
        else:
            words.append(token)
    return commands


def simple_command(where: str, words: list[str]) -> SimpleCommand:
    """Drop the redirections (`2>/dev/null`: the descriptor, the operator, the file); a `<` or `>` with no file
    after it (`<sweep dir>` written as a placeholder) is the shell's syntax error, a ValueError here."""
    kept: list[str] = []
    words = list(words)
    while words:
        word = words.pop(0)
        if word not in REDIRECTIONS:
            kept.append(word)
            continue
        if kept and kept[-1].isdigit():
            kept.pop()  # the descriptor of `2>`
        if not words or words[0] in REDIRECTIONS:
            raise ValueError(f"{where}: {word!r} redirects to nothing: a shell stops here (a <placeholder>?)")
        words.pop(0)
    env = []
    while kept and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", kept[0]):
        env.append(kept.pop(0))
    return SimpleCommand(where, tuple(env), tuple(kept))


def split_words(text: str) -> list[str]:
    """An argument holding several (ARGS='a=1 b=2'), split as make passes it on to the shell."""
    return shlex.split(text)
