"""Where the Hydra configs are, and composing them outside an app (the builder, tests, checks).

One rule for every entry point: $SCALESTUDY_CONF if set (the images set it), else ./conf when the working
directory is a checkout, else the conf/ beside the installed package (an editable install of this repository).
"""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import DictConfig


def conf_dir() -> Path:
    if os.environ.get("SCALESTUDY_CONF"):
        return Path(os.environ["SCALESTUDY_CONF"]).resolve()
    here = Path.cwd() / "conf"
    if (here / "train.yaml").is_file():
        return here.resolve()
    return (Path(__file__).resolve().parents[2] / "conf").resolve()


CONF_DIR = conf_dir()


def compose(config_name: str, overrides: list[str] | tuple[str, ...] = (), conf: Path | None = None) -> DictConfig:
    """Hydra's compose API on the configs (nothing runs); Hydra's errors name the override and the choices."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf or CONF_DIR), version_base="1.3", job_name=config_name):
            return hydra_compose(config_name, overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


# The functions a figure, table or number may name as `_target_` (a Hydra override can name any function of the
# package otherwise, e.g. one that writes files): those defined in the derived quantities, the paper builder's
# modules (drawing, tables, numbers) and the scaling model's report; public, and not one of the builder's own
# entry points (build_*, compute_*, main), which write files.
CALLABLE_MODULES = ("scalestudy.derive", "scalestudy.paper.*", "scalestudy.scaling.report")


def _callable_module(module: str) -> bool:
    return module in ("scalestudy.derive", "scalestudy.scaling.report") or (
        module.startswith("scalestudy.paper.") and module.count(".") == 2 and module != "scalestudy.paper.__main__"
    )


def check_targets(spec, where: str) -> None:
    """Every `_target_` in `spec` (nested ones too: Hydra calls those first) names a function a figure, table or
    number may use; else ValueError naming the config key and the target."""
    import importlib

    if isinstance(spec, dict):
        target = spec.get("_target_")
        if target is not None:
            module, _, name = str(target).rpartition(".")
            allowed = _callable_module(module) and not name.startswith(("_", "build_", "compute_", "main"))
            if allowed:
                found = getattr(importlib.import_module(module), name, None)
                allowed = callable(found) and getattr(found, "__module__", None) == module
            if not allowed:
                raise ValueError(
                    f"{where}: {target}: not a function a figure, table or number may call (_target_ may name "
                    f"the public functions of {', '.join(CALLABLE_MODULES)})"
                )
        for key, value in spec.items():
            check_targets(value, f"{where}.{key}" if key != "_target_" else where)
    elif isinstance(spec, (list, tuple)):
        for n, value in enumerate(spec):
            check_targets(value, f"{where}[{n}]")


def call(spec, *args, where: str, **kwargs):
    """Hydra's `call` of a declared function (`_target_` plus its arguments), lists passed as lists.

    An error of the function itself (ValueError, LookupError) comes through as it is; a target that does
    not exist or arguments that do not fit it become a ValueError naming `where` (the config key).
    """
    from hydra.errors import InstantiationException
    from hydra.utils import call as hydra_call

    if not isinstance(spec, dict) or "_target_" not in spec:
        raise ValueError(f"{where}: no _target_ (the function to call)")
    check_targets(spec, where)
    try:
        return hydra_call(spec, *args, _convert_="all", **kwargs)
    except InstantiationException as err:
        cause = err.__cause__
        if isinstance(cause, (ValueError, LookupError)):
            raise cause from None
        reason = repr(cause) if cause is not None else str(err).splitlines()[0]
        raise ValueError(f"{where}: {spec['_target_']}: {reason}") from err


def experiment_users(conf: Path | None = None) -> dict[str, list[str]]:
    """Which figures and tables draw runs of each MLflow experiment, read from their configs' `runs` filters:
    {"tf-benchmarks-2017": ["figure-3", "figure-4", "figure-7", "table-1"], ...}, figures first, in number order."""
    import yaml

    users: dict[str, list[str]] = {}
    for group in ("figure", "table"):
        paths = sorted((conf or CONF_DIR).joinpath(group).glob("*.yaml"), key=lambda p: name_order(p.stem))
        for path in paths:
            spec = yaml.safe_load(path.read_text()) or {}
            filters = [f for s in (spec.get("runs") or {}).values() for f in (s if isinstance(s, list) else [s])]
            for selection in filters:
                names = (selection or {}).get("experiment") or []
                for name in [names] if isinstance(names, str) else names:
                    users.setdefault(str(name), [])
                    if path.stem not in users[name]:
                        users[name].append(path.stem)
    return users


def name_order(name: str) -> tuple[str, int]:
    """Sort key of a config's name in number order: figure-2 before figure-10."""
    head, _, tail = name.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (name, 0)
