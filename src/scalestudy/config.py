"""Where the Hydra configs are, and composing them outside an app (the builder, tests, checks).

One rule for every entry point: $SCALESTUDY_CONF if set (the images set it), else ./conf when the working
directory is a checkout, else the conf/ beside the installed package (an editable install of this repository).
"""

from __future__ import annotations

import dataclasses
import enum
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf


def conf_dir() -> Path:
    if os.environ.get("SCALESTUDY_CONF"):
        return Path(os.environ["SCALESTUDY_CONF"]).resolve()
    here = Path.cwd() / "conf"
    if (here / "train.yaml").is_file():
        return here.resolve()
    return (Path(__file__).resolve().parents[2] / "conf").resolve()


CONF_DIR = conf_dir()


def groups_text(config_name: str) -> str:
    """`group: option, option` per line for each config group the defaults list of conf/<config_name>.yaml
    chooses from (what its --help lists: train's groups are not the builder's, though both live in conf/)."""
    import yaml

    defaults = (yaml.safe_load((CONF_DIR / f"{config_name}.yaml").read_text()) or {}).get("defaults") or []
    groups = [str(next(iter(d))) for d in defaults if isinstance(d, dict)]
    groups = [g for g in groups if not g.startswith(("override ", "hydra/", "/"))]
    lines = []
    for group in sorted(g.removeprefix("optional ") for g in groups):
        options = sorted((p.stem for p in (CONF_DIR / group).glob("*.yaml")), key=name_order)
        lines.append(f"{group}: {', '.join(options)}")
    return "\n".join(lines)


OmegaConf.register_new_resolver("scalestudy_groups", groups_text, replace=True)  # train.yaml's hydra.help


@dataclass
class TrainConfig:
    """train.yaml's own keys, typed (the first entry of its defaults list, `train_schema`): `xla=flase` is
    refused instead of read as true, `workers=two` instead of failing in the job. The config groups (model,
    data, framework, cluster, tracking) and the mappings take their configs as they are; check_config judges the
    values of a setting that may not work (device, data_format, profile)."""

    workers: int = 1
    batch_per_worker: int = 32
    steps: int = 50
    epochs: int | None = None
    warmup_steps: int = 10
    min_measured_steps: int = 5
    data_format: str = "NHWC"
    mixed_precision: bool = False
    xla: bool = False
    fp16_allreduce: bool = False
    profile: str = "none"
    profile_steps: int = 3
    optimizer: dict[str, Any] = field(default_factory=dict)
    seed: int = 1337
    timeout_s: int = 1800
    device: str = "cpu"
    threads_per_rank: int | None = None
    platform: str | None = None
    study: str | None = None
    fault: dict[str, Any] = field(default_factory=dict)
    model: Any = None
    data: Any = None
    framework: Any = None
    cluster: Any = None
    tracking: Any = None


ConfigStore.instance().store(name="train_schema", node=TrainConfig)  # before any composition of train.yaml


def type_refusal(err: Exception, schema: type, where: str, value: object) -> str:
    """One line for a value a structured config refuses (OmegaConf's ValidationError or ConfigKeyError, whose
    `full_key` names it): `where: KEY=VALUE is not a boolean (allowed: true, false)`, `... is not one of the
    allowed values: a, b`, `... is not a number`, or `where: KEY: no such key (allowed: ...)`."""
    from omegaconf.errors import ConfigKeyError

    key = str(getattr(err, "full_key", "") or "")
    if isinstance(err, ConfigKeyError):
        parent = field_type(key.split(".")[:-1], schema) if "." in key else schema
        keys = ", ".join(f.name for f in dataclasses.fields(parent)) if dataclasses.is_dataclass(parent) else "?"
        return f"{where}: {key}: no such key (allowed: {keys})"
    wanted = field_type(key.split("."), schema) if key else None
    if wanted is None:
        return f"{where}: {key}: {str(getattr(err, 'msg', err)).splitlines()[0]}"
    if wanted is bool:
        said = "a boolean (allowed: true, false)"
    elif isinstance(wanted, type) and issubclass(wanted, enum.Enum):
        said = f"one of the allowed values: {', '.join(wanted.__members__)}"
    elif wanted in (int, float):
        said = "a whole number" if wanted is int else "a number"
    else:
        said = f"of type {getattr(wanted, '__name__', wanted)}"
    return f"{where}: {key}={value!r} is not {said}"


def field_type(path: list[str], schema: type):
    """The type a structured config (a dataclass) gives the key at `path` (`X | None` as X), None where it names
    no field."""
    hints = typing.get_type_hints(schema)
    wanted = hints.get(path[0])
    if wanted is None:
        return None
    args = [a for a in typing.get_args(wanted) if a is not type(None)]
    optional = typing.get_origin(wanted) in (typing.Union, types.UnionType) and len(args) == 1
    wanted = args[0] if optional else wanted
    if len(path) == 1:
        return typing.get_origin(wanted) or wanted
    return field_type(path[1:], wanted) if dataclasses.is_dataclass(wanted) else None


def train_refusal(argv: list[str]) -> str | None:
    """The line refusing a value of train's command line that TrainConfig does not type (Hydra's own report is
    several lines and exit 1), or None: composed once as Hydra will (each job of a sweep), nothing runs."""
    from hydra._internal.utils import get_args_parser
    from hydra.errors import HydraException
    from omegaconf.errors import ConfigKeyError, ValidationError

    args, _ = get_args_parser().parse_known_args(argv)
    if args.help or args.hydra_help or args.info or args.shell_completion:
        return None
    try:
        sweep_jobs("train", args.overrides) if args.multirun else compose("train", args.overrides)
    except HydraException as err:
        cause = err.__cause__
        if isinstance(cause, (ValidationError, ConfigKeyError)):
            key = str(cause.full_key or "")
            value = next((o.split("=", 1)[1] for o in args.overrides if o.lstrip("+~").split("=")[0] == key), "?")
            return type_refusal(cause, TrainConfig, "configuration", value)
    return None


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


BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def sweep_jobs(
    config_name: str, overrides: list[str] | tuple[str, ...] = (), conf: Path | None = None
) -> list[tuple[list[str], DictConfig]]:
    """The jobs of a multirun (`-m`), each composed as Hydra's BasicSweeper and BasicLauncher would, nothing run:
    [(the job's overrides, its config, `hydra` included), ...].

    As in Hydra: the master config is composed in MULTIRUN mode; the sweep is its `hydra.sweeper.params` followed by
    the command line's task overrides, split by BasicSweeper.split_arguments (a command-line `workers=1,2,4`
    replaces the params' `workers`); each job is the master's hydra overrides plus its own, composed in RUN mode.
    Hydra's errors (a bad key, a missing choice) come through as they are."""
    from hydra import initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode
    from omegaconf import open_dict

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf or CONF_DIR), version_base="1.3", job_name=config_name):
            loader = GlobalHydra.instance().config_loader()
            master = loader.load_configuration(config_name, list(overrides), RunMode.MULTIRUN)
            if master.hydra.sweeper.get("_target_") != BASIC_SWEEPER:  # another sweeper makes other jobs
                raise ValueError(f"hydra.sweeper is {master.hydra.sweeper.get('_target_')}: only {BASIC_SWEEPER}")
            params = [f"{key}={value}" for key, value in (master.hydra.sweeper.params or {}).items()]
            parsed = OverridesParser.create(config_loader=loader).parse_overrides(
                params + list(master.hydra.overrides.task)
            )
            (batch,) = BasicSweeper.split_arguments(parsed, None)
            jobs = []
            for num, job_overrides in enumerate(batch):
                cfg = loader.load_sweep_config(master, job_overrides)
                with open_dict(cfg):  # what Hydra's BasicLauncher sets before the job runs
                    cfg.hydra.job.id = cfg.hydra.job.num = num
                jobs.append((job_overrides, cfg))
            return jobs
    finally:
        GlobalHydra.instance().clear()


def wants_sweep_configs(argv: list[str]) -> bool:
    """`-m ... --cfg job|hydra|all`: Hydra itself refuses --cfg with -m (its --cfg composes one run)."""
    from hydra._internal.utils import get_args_parser

    args, _ = get_args_parser().parse_known_args(argv)
    return bool(args.multirun and args.cfg)


def flags_conflict(argv: list[str]) -> str | None:
    """Why Hydra's flags in `argv` cannot go together (Hydra says it in a traceback), or None. `-m` with
    `--cfg` is not a conflict here: show_sweep_configs prints each job's config."""
    from hydra._internal.utils import get_args_parser

    args, _ = get_args_parser().parse_known_args(argv)
    commands = [args.run, args.multirun, bool(args.cfg), args.shell_completion, args.info is not None]
    if sum(commands) - (args.multirun and bool(args.cfg)) > 1:
        return "only one of --run, --multirun, --cfg, --info and --shell-completion (-m with --cfg job prints each job)"
    return None


def show_sweep_configs(config_name: str, argv: list[str]) -> int:
    """Print each job of the multirun `argv` asks for (`-m OVERRIDE... --cfg job|hydra|all [--package P]
    [--resolve]`), under a header line naming the job's overrides, as Hydra's --cfg prints one run; nothing runs,
    nothing is submitted. A bad override is a ValueError with Hydra's message."""
    from hydra._internal.utils import get_args_parser
    from hydra.core.hydra_config import HydraConfig
    from hydra.errors import HydraException

    args = get_args_parser().parse_args(argv)
    if args.config_path or args.config_dir:
        raise ValueError("-m with --cfg: --config-path and --config-dir are not supported here")
    try:
        jobs = sweep_jobs(args.config_name or config_name, args.overrides)
    except HydraException as err:
        raise ValueError(f"configuration: {err}") from None
    hydra_config = HydraConfig.instance()
    before = hydra_config.cfg
    try:
        for num, (job_overrides, cfg) in enumerate(jobs):
            hydra_config.set_config(cfg)  # ${hydra:...} resolves under --resolve, as in Hydra's --cfg
            print(f"# job {num} of {len(jobs)}: {' '.join(job_overrides)}")
            print(shown_config(cfg, args.cfg, args.package, args.resolve), end="")
    finally:
        hydra_config.cfg = before  # a caller in the same process (a test) sees no job of this sweep as its own
    return 0


def shown_config(cfg: DictConfig, cfg_type: str, package: str | None, resolve: bool) -> str:
    """What Hydra's `--cfg job|hydra|all [--package P] [--resolve]` prints of one composed config."""
    from hydra._internal.hydra import Hydra
    from omegaconf import OmegaConf, flag_override

    cfg = OmegaConf.create(cfg)  # a copy: the caller's config stays as it was
    for node in (cfg, cfg.get("hydra")) if "hydra" in cfg else (cfg,):
        OmegaConf.set_readonly(node, None)  # `hydra` is read-only (--resolve failed), as Hydra's --cfg does
    if resolve and cfg_type != "job":
        OmegaConf.resolve(cfg)  # `hydra` refers to the job's keys (its sweep's subdir names the model)
    if cfg_type == "job" and "hydra" in cfg:
        with flag_override(cfg, ["struct", "readonly"], [False, False]):
            del cfg["hydra"]
    elif cfg_type == "hydra":
        cfg = Hydra.get_sanitized_hydra_cfg(cfg)
    package = None if package == "_global_" else package
    node = cfg if package is None else OmegaConf.select(cfg, package)
    if node is None:
        raise LookupError(f"package {package!r} not found in the config")
    if not OmegaConf.is_config(node):
        return f"{node}\n"
    if resolve:
        OmegaConf.resolve(node)
    return ("" if package is None else f"# @package {package}\n") + OmegaConf.to_yaml(node)


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
