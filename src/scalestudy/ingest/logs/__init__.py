"""Benchmark logs as the field writes them -> RunRecords: `python -m scalestudy.ingest logs PATH... --experiment NAME`.

Each format is one module with `sniff(lines) -> bool` (does this text look like mine?) and a pure
`parse(path, options) -> list[RunRecord]` that raises SchemaError naming file:line. `read_logs(paths, options)`
recognises each file by its content (FORMATS, in order: the first whose sniff accepts it), walks folders, and
returns every run of every file; nothing is written here (the CLI checks the records, then writes them as one
transaction, as for the published datasets).

What a log does not say (the platform, often the device or the framework) comes from `LogOptions`; a schema
param that neither the log nor the options give stops the import with the file:line of the run and the option
that supplies it. An option given by the caller overrides what the log says (the log's words stay in a tag).

A run's identity (its key) is its content: `sha256:<SHA-256 of the file's text>`, `#N` for the N-th run of a file
of several (a tf_cnn_benchmarks JSON folder: of the text of its benchmark.log and metric.log), never its name or
path. The text is what the parsers read (`log_text`): every line ended by \\n, without its trailing blanks, so a
CRLF copy, or a copy with trailing spaces, is the same run (a clean file's text is its bytes); the tag
`log_bytes_sha256` says which bytes were read. The same text found under two paths is one run
(`LogImport.duplicates`); the tags that only say where the file was found or which copy was read (LOCATION_TAGS)
are left out of the run's content hash, so the same log imported again from anywhere, with any line endings,
changes nothing. Runs keyed otherwise by an earlier importer (by the file's name, or by the SHA-256 of its bytes)
are taken over by their record on re-import (`LogImport.legacy_claim`). A reference dataset that reads its raw
logs with these parsers keys them by name (`LogOptions.key_prefix`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType

from ...schema import DESCRIPTION_TAG, RunRecord, SchemaError, canonical_device, canonical_model
from .. import published_tags, read_text

FORMAT_NAMES = {
    "mlperf": "MLPerf training result log (:::MLLOG lines)",
    "dllogger": "NVIDIA DLLogger JSON lines (DLLL {...})",
    "tf_cnn_json": "tf_cnn_benchmarks --benchmark_log_dir output (benchmark.log + metric.log)",
    "horovod_timeline": "Horovod timeline (HOROVOD_TIMELINE Chrome trace JSON)",
    "horovod_synthetic": "Horovod synthetic benchmark output (Total img/sec on N GPU(s))",
    "keras_mgpu": "Keras multi-GPU benchmark log of rossumai/keras-multi-gpu (Samples/sec)",
    "tf_cnn_text": "tf_cnn_benchmarks text output (total images/sec)",
}
# Files a folder may hold beside its logs: documentation, scripts, and MLPerf's system descriptions (read by the
# mlperf parser from beside the results, never as logs).
SKIPPED_SUFFIXES = {".md", ".rst", ".yaml", ".yml", ".csv", ".py", ".sh", ".png", ".pdf"}
# A `[1,0]<stdout>:` (Open MPI --tag-output) or `[0]:` / `0:` (other launchers) prefix on a line: (rank, rest).
RANK_PREFIX_RE = re.compile(r"^\s*\[(?:\d+,)?(?P<rank>\d+)\](?:<std(?:out|err)>)?:\s?(?P<rest>.*)$")
# The last line of a Python traceback: `module.SomeError: message` (also TensorFlow's `X (see above ...): msg`).
PY_ERROR_RE = re.compile(r"^(?P<text>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt)\b(?:[^:\n]*)?:.*)$")
KEY_PREFIX = "sha256:"
# store.write.Claim: (key, tags, metrics) of a stored run no record's key names -> the key of the record taking it over
Claim = Callable[[str, Mapping[str, str], Mapping[str, float]], "str | None"]
WARNING_TAG = "import_warning"  # what a parser warns about (a malformed file beside the log): printed by the command
# Tags that say where a log was found or which copy was read, not what it says: outside a content-keyed run's
# content hash.
LOCATION_TAGS = frozenset(
    {
        "log_file",
        "log_path",
        "log_bytes_sha256",
        "source_line",
        "source_lines",
        DESCRIPTION_TAG,
        "system_description",
        WARNING_TAG,
    }
)
# What a line may end with that is not part of a log's text: a CRLF file's \r, trailing blanks (ASCII only).
TRAILING_BLANKS = " \t\r\v\f"


@dataclass(frozen=True)
class LogOptions:
    """What the caller knows about the runs that the logs may not say.

    source: experiment and citation (and url), as a dataset's source.yaml gives them (ingest.read_source); with
    `folder` and `dataset_dir` in it, run descriptions name the file inside the dataset as the datasets' do.
    platform, device, framework, data: override (or supply) these schema params for every run. model: supplies the
    model of a Horovod timeline (which names none); a log that names its model keeps it, with a warning. workers:
    supplies the GPU count where the log does not state it (DLLogger, MLPerf, where it also wins over the log); a
    log that states it (tf_cnn_benchmarks, Horovod's synthetic benchmark, Keras multi-GPU) keeps its count, with a
    warning.
    """

    source: Mapping[str, str]
    platform: str | None = None
    device: str | None = None
    framework: str | None = None
    data: str | None = None
    model: str | None = None
    workers: int | None = None
    key_prefix: Mapping[Path, str] = field(default_factory=dict)  # file -> the name its runs' keys start with

    @property
    def experiment(self) -> str:
        return self.source["experiment"]


def user_source(experiment: str, citation: str | None = None, url: str = "") -> dict[str, str]:
    """The `source` of logs a user brings (not a reference dataset)."""
    return {"experiment": experiment, "citation": citation or f"benchmark logs imported into {experiment}", "url": url}


def run_tags(options: LogOptions, path: Path, line: int, lines: Mapping[str, int], fmt: str) -> dict[str, str]:
    """Tags of one run read from `path`: source, citation, source_line (the throughput's file:line) and
    source_lines (every number's line), the log format, and a description naming the file."""
    where = f"{path}:{line}"
    if "folder" in options.source:  # a reference dataset's raw log: described as the datasets describe theirs
        tags = published_tags(dict(options.source), where)
    else:
        tags = {
            "source": "yours",  # a user's logs: never taken for the study's published runs (paper/compare.py)
            "citation": options.source["citation"],
            "dataset": options.experiment,
            "source_url": options.source.get("url") or "",
            "source_line": f"{path.name}:{line}",
            DESCRIPTION_TAG: (
                f"Read from `{path.name}` line {line} ({FORMAT_NAMES[fmt]}) by "
                f"`python -m scalestudy.ingest logs`.\n\nSource: {options.source['citation']}"
            ),
        }
    tags["log_format"] = fmt
    tags["log_file"] = path.name
    # a line in another file (MLPerf's system description) is given as 'file:line'
    tags["source_lines"] = "; ".join(
        f"{name}: {n if isinstance(n, str) else f'{path.name}:{n}'}" for name, n in lines.items()
    )
    if not keyed_by_name(options, path):
        unit = path.parent if tf_cnn_json_dir(path.parent) else path
        tags["log_path"] = str(path)
        tags["log_sha256"] = content_digest(unit)
        tags["log_bytes_sha256"] = bytes_digest(unit)
    return tags


def keyed_by_name(options: LogOptions, path: Path) -> bool:
    """Whether the caller keys this file's runs by a name it gave (a reference dataset's raw log)."""
    return path in options.key_prefix or path.parent in options.key_prefix


def content_digest(path: Path) -> str:
    """SHA-256 of a log file's text (`log_text`: what its parsers read); of a tf_cnn_benchmarks JSON folder, of the
    text of its benchmark.log and metric.log."""
    return _digest(path, log_text)


def bytes_digest(path: Path) -> str:
    """SHA-256 of a log file's bytes as they are (of a tf_cnn_benchmarks JSON folder's two files): which copy."""
    return _digest(path, bytes)


def log_text(data: bytes) -> bytes:
    """A log's text as its parsers read it (`lines_of`): each line without its trailing blanks, ended by \\n."""
    lines = [line.rstrip(TRAILING_BLANKS.encode()) for line in data.split(b"\n")]
    if lines[-1] == b"":
        lines.pop()
    return b"".join(line + b"\n" for line in lines)


def _digest(path: Path, text: Callable[[bytes], bytes]) -> str:
    if path.is_dir():
        digest = hashlib.sha256()
        for name in ("benchmark.log", "metric.log"):
            data = text((path / name).read_bytes())
            digest.update(f"{name}\0{len(data)}\0".encode())
            digest.update(data)
        return digest.hexdigest()
    return hashlib.sha256(text(path.read_bytes())).hexdigest()


def run_key(options: LogOptions, path: Path, index: int | None = None) -> str:
    """A run's stable key: `sha256:<content_digest>` (or the name the caller gave for the file) and, for a file of
    several runs, its ordinal (#1, #2, ...)."""
    name = options.key_prefix.get(path) or KEY_PREFIX + content_digest(path)
    return name if index is None else f"{name}#{index}"


class LogRecord(RunRecord):
    """A content-keyed run of a log: its content hash leaves out where the file was found (LOCATION_TAGS)."""

    location_tags = LOCATION_TAGS

    def content_hash(self) -> str:
        kept = {k: v for k, v in self.tags.items() if k not in LOCATION_TAGS}
        return RunRecord.content_hash(replace(self, tags=kept))


def log_record(options: LogOptions, path: Path, index: int | None, *, params: dict, metrics: dict, tags: dict,
               where: str, status: str = "FINISHED", start_ms: int | None = None,
               end_ms: int | None = None) -> RunRecord:  # fmt: skip
    """One run of a log as the importers write it: keyed by `run_key`, in the caller's experiment."""
    kind = RunRecord if keyed_by_name(options, path) else LogRecord
    return kind(
        experiment=options.experiment,
        key=run_key(options, path, index),
        params=params,
        metrics=metrics,
        tags=tags,
        status=status,
        start_ms=start_ms,
        end_ms=end_ms,
        where=where,
    )


def param(what: str, from_log: object, given: object, option: str, where: str, tags: dict[str, str]) -> object:
    """A schema param: the caller's value if given (the log's value kept in a tag `log_<what>`), else the log's,
    else SchemaError naming the run's file:line and the option that supplies it."""
    if given not in (None, ""):
        if from_log not in (None, "") and str(from_log) != str(given):
            tags[f"log_{what}"] = str(from_log)
        return given
    if from_log in (None, ""):
        raise SchemaError(f"{where}: the log does not say the run's {what}: give it with {option}")
    return from_log


def device_name(name: str) -> str:
    """A GPU's name as the study writes devices: schema.canonical_device, the one table the harness uses too."""
    return canonical_device(name)


def strip_rank(text: str) -> tuple[int | None, str]:
    """(rank, line without its launcher prefix), or (None, line)."""
    m = RANK_PREFIX_RE.match(text)
    return (int(m["rank"]), m["rest"]) if m else (None, text)


def lines_of(path: Path) -> list[str]:
    """A text file's lines (UTF-8; a binary file fails naming file:line), without the final newline's empty line,
    each without its trailing blanks (a CRLF file's \\r): the lines of `log_text`, the text a log's key hashes."""
    lines = [line.rstrip(TRAILING_BLANKS) for line in read_text(path).split("\n")]
    if lines[-1] == "":
        lines.pop()
    return lines


def python_error(text: str) -> str | None:
    """The exception line of a Python traceback (`...Error: message`), or None."""
    m = PY_ERROR_RE.match(text.strip())
    return m["text"].strip() if m else None


def formats() -> dict[str, ModuleType]:
    """Format name -> its module, in the order they are tried (the most specific first)."""
    from . import dllogger, horovod_synthetic, horovod_timeline, keras_mgpu, mlperf, tf_cnn_json, tf_cnn_text

    modules = {
        "mlperf": mlperf,
        "dllogger": dllogger,
        "tf_cnn_json": tf_cnn_json,
        "horovod_timeline": horovod_timeline,
        "horovod_synthetic": horovod_synthetic,
        "keras_mgpu": keras_mgpu,
        "tf_cnn_text": tf_cnn_text,
    }
    assert list(modules) == list(FORMAT_NAMES)
    return modules


def detect(path: Path) -> str:
    """The format of one file, by its content; SchemaError if it is in none."""
    if tf_cnn_json_dir(path.parent) and path.name in ("benchmark.log", "metric.log", "eval.log"):
        return "tf_cnn_json"
    lines = lines_of(path)
    for name, module in formats().items():
        if module.sniff(lines):
            return name
    known = "; ".join(FORMAT_NAMES.values())
    raise SchemaError(f"{path}:1: not a log format this importer knows ({known})")


def tf_cnn_json_dir(folder: Path) -> bool:
    return (folder / "metric.log").is_file() and (folder / "benchmark.log").is_file()


def _files(paths: Iterable[Path]) -> list[tuple[Path, str | None]]:
    """The logs to read: (file, format if known from the layout). A folder is walked in name order; a
    tf_cnn_benchmarks log folder is one run; documentation, scripts and MLPerf system descriptions are skipped."""
    found: list[tuple[Path, str | None]] = []
    for path in paths:
        if not path.exists():
            raise SchemaError(f"{path}: no such file or folder")
        if path.is_file():
            found.append((path, "tf_cnn_json" if path.name == "metric.log" and tf_cnn_json_dir(path.parent) else None))
            continue
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            parts = item.relative_to(path).parts
            if any(part.startswith(".") for part in parts) or item.suffix.lower() in SKIPPED_SUFFIXES:
                continue
            if item.suffix == ".json" and item.parent.name == "systems":
                continue  # an MLPerf system description (read by the mlperf parser)
            if tf_cnn_json_dir(item.parent):
                if item.name == "metric.log":
                    found.append((item, "tf_cnn_json"))
                continue  # benchmark.log, eval.log: read with metric.log
            found.append((item, None))
    return found


@dataclass
class LogImport:
    """What read_logs found: the runs, in file order, and the files skipped as the same text as one read before."""

    records: list[RunRecord] = field(default_factory=list)
    duplicates: list[tuple[Path, Path]] = field(default_factory=list)  # (file skipped, the file it repeats)
    formats: dict[Path, str] = field(default_factory=dict)  # file read -> its format
    # bytes_digest -> content_digest of every file (or tf_cnn_benchmarks folder) read or skipped as a duplicate
    text_of_bytes: dict[str, str] = field(default_factory=dict)

    def legacy_claim(self) -> Claim:
        """store.write.Claim for the runs an earlier version of this importer keyed otherwise: by the SHA-256 of
        the file's bytes (`sha256:<bytes>#N`, a file whose bytes are not its text: CRLF, trailing blanks), taken
        over by the record of that file's text and run number (`bytes_key_claim`); by the file's name or its path
        inside the folder given (`name_claim`)."""
        by_name = self.name_claim()

        def claim(key: str, tags: Mapping[str, str], metrics: Mapping[str, float]) -> str | None:
            if key.startswith(KEY_PREFIX):
                return self.bytes_key_claim(key)
            return None if "log_sha256" in tags else by_name(key, tags, metrics)

        return claim

    def bytes_key_claim(self, key: str) -> str | None:
        """The key of the record that takes over a run keyed `sha256:<SHA-256 of its file's bytes>[#N]`: that of
        the text of the same bytes (read now, or skipped as a copy of a file read) and the same run number."""
        digest, hash_mark, number = key.removeprefix(KEY_PREFIX).partition("#")
        text = self.text_of_bytes.get(digest)
        ours = f"{KEY_PREFIX}{text}{hash_mark}{number}"
        return ours if text is not None and any(rec.key == ours for rec in self.records) else None

    def name_claim(self) -> Claim:
        """Claim for the runs keyed by the file's name or its path inside the folder given (`result_0.txt`,
        `training_results_v1.0/NVIDIA/results/x/resnet/result_0.txt`, `trace.txt#2`): such a run is taken over by
        the record of the same format, file name and run number whose numbers are its own (the same throughput;
        the same source line for a failed run), wherever the file lies now."""
        candidates: dict[tuple[str, str], list[RunRecord]] = {}
        for rec in self.records:
            path = Path(rec.tags.get("log_path", ""))
            name = path.parent.name if rec.tags.get("log_format") == "tf_cnn_json" else path.name
            number = rec.key.partition("#")[2]
            candidates.setdefault((rec.tags["log_format"], f"{name}#{number}" if number else name), []).append(rec)

        def claim(key: str, tags: Mapping[str, str], metrics: Mapping[str, float]) -> str | None:
            for rec in candidates.get((tags.get("log_format", ""), key.rpartition("/")[2]), []):
                mine, theirs = rec.metrics.get("throughput_total"), metrics.get("throughput_total")
                if mine is None and theirs is None:
                    same = rec.tags.get("source_line") == tags.get("source_line")
                else:
                    same = mine is not None and theirs is not None and abs(mine - theirs) <= 1e-9 * abs(mine)
                if same:
                    return rec.key
            return None

        return claim


def scan_logs(paths: Iterable[Path], options: LogOptions, progress: Callable | None = None) -> LogImport:
    """Every run of every log in `paths` (files or folders), in order; nothing written. A file whose text
    repeats a file read before (a republished copy, a CRLF copy) is not read again but listed in `duplicates`.
    `progress(files)` may wrap the list of files (a progress bar)."""
    found = LogImport()
    modules = formats()
    paths = list(paths)
    files = _files(paths)
    if not files:
        raise SchemaError(f"{', '.join(map(str, paths))}: no log file found")
    seen_paths: set[Path] = set()
    seen_digests: dict[str, Path] = {}
    for path, fmt in progress(files) if progress else files:
        fmt = fmt or detect(path)
        unit = path.parent if fmt == "tf_cnn_json" else path  # what a run's content is
        if unit.resolve() in seen_paths:
            continue  # the same file given twice (a folder and a file in it)
        seen_paths.add(unit.resolve())
        digest = content_digest(unit)
        found.text_of_bytes[bytes_digest(unit)] = digest
        if digest in seen_digests:
            found.duplicates.append((unit, seen_digests[digest]))
            continue
        seen_digests[digest] = unit
        parse: Callable[[Path, LogOptions], list[RunRecord]] = modules[fmt].parse
        runs = parse(path, options)
        if not runs:
            raise SchemaError(f"{path}:1: a {FORMAT_NAMES[fmt]} with no run in it")
        for run in runs:  # a log that states its GPU count (model) keeps it: say so, rather than drop the option unsaid
            if options.workers is not None and run.params["workers"] != options.workers:
                warn(run, f"{path}: --workers {options.workers} not used: the log says {run.params['workers']} GPUs")
            if options.model and run.params["model"] != canonical_model(options.model, "--model"):
                warn(run, f"{path}: --model {options.model} not used: the log says {run.params['model']}")
        found.records.extend(runs)
        found.formats[unit] = fmt
    return found


def warn(run: RunRecord, note: str) -> None:
    """Add `note` to the run's import warnings (printed by the command)."""
    run.tags[WARNING_TAG] = " | ".join(filter(None, [run.tags.get(WARNING_TAG), note]))


def read_logs(paths: Iterable[Path], options: LogOptions) -> list[RunRecord]:
    """Every run of every log in `paths` (files or folders), in order, a copy of the same text once; nothing written."""
    return scan_logs(paths, options).records


# A GPU's name as TensorFlow prints it: `name: Tesla M60` (TF 1.x, own line), `..., name: Tesla V100-SXM2-16GB, pci bus
# id: ...` (device creation), `name: Tesla V100 major: 7 minor: 0 ...` (TF 1.x one-line form).
GPU_NAME_RE = re.compile(r"\bname: (?P<name>[^,\n]+?)(?:,\s*pci bus id.*|\s+(?:major|computeCapability):.*)?\s*$")


def gpu_names(text: str) -> str | None:
    """The GPU name a TensorFlow device line gives, or None."""
    m = GPU_NAME_RE.search(text)
    if not m:
        return None
    name = m["name"].strip().rstrip(")")
    return name if name and not name.startswith(("/", "job:")) else None


def one_device(names: Mapping[str, int], path: Path, where: str) -> tuple[str | None, str | None]:
    """(device as the study writes it, the log's full name) from the GPU names a run's log lists, or (None, None);
    a log listing several kinds of GPU fails (give --device)."""
    kinds = {device_name(n): n for n in names}
    if len(kinds) > 1:
        listed = ", ".join(f"{n} ({path.name}:{line})" for n, line in names.items())
        raise SchemaError(f"{where}: the log lists several kinds of GPU ({listed}): give the run's with --device")
    if not kinds:
        return None, None
    short, full = next(iter(kinds.items()))
    return short, full
