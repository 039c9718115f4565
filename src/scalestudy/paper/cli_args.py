"""The builder's command line, read as Hydra's apps read theirs: TARGET... OVERRIDE... and Hydra's flags.

    python -m scalestudy.paper [TARGET...] [OVERRIDE...] [--help] [--cfg job|hydra|all [--package P] [--resolve]]
                               [--info [all|config|defaults|defaults-tree|plugins|searchpath]]

A word with `=` is an override (Hydra's syntax), any other word a target (default `all`). `--help` lists the
targets (conf/figure, conf/table, conf/numbers), the config and the flags; `--cfg job` prints each target's
composed config and builds nothing; `--info` prints Hydra's account of each target's composition.
"""

from __future__ import annotations

import argparse

from omegaconf import OmegaConf

from ..config import CONF_DIR, groups_text, name_order

GROUPS = ("figure", "table", "numbers")  # what the builder makes: conf/<group>/<group>-N.yaml
ALIASES = {"figures": ["figure"], "tables": ["table"], "all": list(GROUPS)}
INFO = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def parse(argv: list[str]) -> argparse.Namespace:
    """The flags, `targets` (default ['all']) and `overrides`; argparse's usage and exit 2 for a bad flag."""
    parser = argparse.ArgumentParser(prog="python -m scalestudy.paper", add_help=False)
    parser.add_argument("words", nargs="*")
    parser.add_argument("--help", "-h", action="store_true")
    parser.add_argument("--cfg", "-c", choices=("job", "hydra", "all"))
    parser.add_argument("--package", "-p")
    parser.add_argument("--resolve", action="store_true")
    parser.add_argument("--info", "-i", nargs="?", const="all", choices=INFO)
    args = parser.parse_intermixed_args(argv)
    if args.cfg and args.info:
        parser.error("only one of --cfg and --info")
    args.targets, args.overrides = split_arguments(args.words)
    return args


def split_arguments(words: list[str]) -> tuple[list[str], list[str]]:
    """(the targets asked for, default `all`; the Hydra overrides): a word with `=` is an override."""
    return [a for a in words if "=" not in a] or ["all"], [a for a in words if "=" in a]


def known_targets() -> dict[str, list[str]]:
    """{group: its configs in number order}: the targets that exist."""
    return {g: sorted((p.stem for p in (CONF_DIR / g).glob("*.yaml")), key=name_order) for g in GROUPS}


def expand(targets: list[str]) -> list[tuple[str, str]]:
    """[('figure', 'figure-3'), ('table', 'table-1'), ...] in the order asked; an unknown name lists the known."""
    known = known_targets()
    out: list[tuple[str, str]] = []
    for target in targets:
        if target in ALIASES:
            out += [(g, name) for g in ALIASES[target] for name in known[g]]
            continue
        group = target.split("-", 1)[0]
        if target not in known.get(group, []):
            choices = ", ".join([n for g in GROUPS for n in known[g]] + list(ALIASES))
            raise LookupError(f"unknown target {target!r} (no conf/{group}/{target}.yaml): choose from {choices}")
        out.append((group, target))
    return out


def help_text(base_yaml: str) -> str:
    """What --help prints: the usage, the targets, the config (`base_yaml`: conf/paper.yaml composed) and the flags."""
    usage = __doc__.split("\n\n")[1].strip("\n")
    return "\n".join([
        "paper builder: figures, tables and the text's numbers from the MLflow store (python -m scalestudy.paper)",
        "", usage, "",
        "== Targets ==",
        "Each is a config of a group (conf/<group>/<target>.yaml); several may be named, `all` is the default",
        "", groups_text("paper"), "figures: every figure; tables: every table; all: everything", "",
        "== Config ==",
        "Override anything in the config (foo.bar=value), e.g. source=measured or figure.plot.median=false; values",
        "are typed (a boolean is true or false); each target adds its own config under its group's key (figure,",
        "table or numbers): TARGET --cfg job prints it",
        "", base_yaml.rstrip("\n"), "",
        "== Flags ==",
        "--help, -h                 this text",
        "--cfg, -c job|hydra|all    print each target's composed config, build nothing (--package P, --resolve)",
        "--info, -i [WHAT]          Hydra's information on each target's composition (all, config, defaults,",
        "                           defaults-tree, plugins, searchpath)",
        "--debug                    a traceback instead of the one-line error",
    ])  # fmt: skip


def base_config_yaml() -> str:
    from ..config import compose

    return OmegaConf.to_yaml(compose("paper"))
