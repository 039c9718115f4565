"""Third-party raw files: listed in a dataset's source.yaml, fetched into a cache and verified, never committed.

A dataset's `source.yaml` may list `raw_files`, each with the path the importer reads it at (relative to the
dataset), the origin URL at a pinned commit and the file's SHA-256:

    raw_files:
      - path: logs/1.err
        url: https://raw.githubusercontent.com/rodarima/sa/<commit>/proj/logs/1.err
        sha256: 5c63f5e4...

`fetch_raw_files` returns where each file lies in the cache, `<cache>/<dataset>/<path>`, taking it, in this order,
from the cache itself (when its SHA-256 matches), from a mirror (`SCALESTUDY_DATA_MIRROR=DIR`, laid out as
`DIR/<dataset>/<path>`: machines without internet, HPC nodes, CI) or from its URL (pooch). A file whose SHA-256
does not match, or that none of the three has, stops the import with one line naming the file, where it was
looked for and how to supply it. The cache is `SCALESTUDY_DATA_CACHE`, else ~/.cache/scalestudy
($XDG_CACHE_HOME/scalestudy where that is set); where it cannot be written, a verified mirror copy is read in place.
A download fails after SCALESTUDY_DOWNLOAD_TIMEOUT seconds without an answer (20 by default).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..schema import SchemaError

CACHE_ENV = "SCALESTUDY_DATA_CACHE"
MIRROR_ENV = "SCALESTUDY_DATA_MIRROR"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
TIMEOUT_ENV = "SCALESTUDY_DOWNLOAD_TIMEOUT"
DEFAULT_TIMEOUT_S = 20.0  # seconds without an answer (to connect, or between two reads) before a download fails


def download_timeout() -> float:
    """SCALESTUDY_DOWNLOAD_TIMEOUT (seconds, > 0), else 20: how long a download may go without an answer."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise SchemaError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds > 0")
    return value


@dataclass(frozen=True)
class RawFile:
    path: str  # relative to the dataset, as the importer reads it (logs/1.err)
    url: str  # origin at a pinned commit
    sha256: str
    where: str  # source.yaml:line, for error messages


def cache_dir() -> Path:
    """Where fetched files are kept: SCALESTUDY_DATA_CACHE, else the user's cache folder (~/.cache/scalestudy)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    import pooch

    return Path(pooch.os_cache("scalestudy"))


def make_cache_folder(folder: Path) -> None:
    """Make a folder of the cache, or SchemaError naming it, why and what to do (was "[Errno 20] Not a directory")."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SchemaError(
            f"cache folder {folder} cannot be made ({err.strerror or err}): set {CACHE_ENV} to a folder this user "
            f"can write (now {os.environ.get(CACHE_ENV) or 'unset: ' + str(cache_dir())}), or {MIRROR_ENV} to a "
            "folder holding the raw files"
        ) from None


def mirror_dir() -> Path | None:
    """SCALESTUDY_DATA_MIRROR, laid out as <mirror>/<dataset>/<path>; None when unset or empty."""
    value = os.environ.get(MIRROR_ENV, "").strip()
    return Path(value).expanduser() if value else None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def raw_files(source: dict, folder: Path) -> list[RawFile]:
    """The `raw_files` of a dataset's source.yaml, checked: a relative path inside the dataset (no '..', listed
    once), an http(s) URL and a 64-hex-digit SHA-256 each. A dataset without raw files gives []."""
    listed = source.get("raw_files")
    yaml_path = folder / "source.yaml"
    if listed is None:
        return []
    lines = _key_lines(yaml_path)
    if not isinstance(listed, list):
        raise SchemaError(f"{yaml_path}:{lines.get('raw_files', 1)}: raw_files is not a list of path, url, sha256")
    files: list[RawFile] = []
    seen: set[str] = set()
    for n, item in enumerate(listed):
        where = f"{yaml_path}:{lines.get(('path', n), lines.get('raw_files', 1))}"
        if not isinstance(item, dict) or set(item) != {"path", "url", "sha256"}:
            raise SchemaError(f"{where}: raw_files entry {n + 1} needs exactly the keys path, url and sha256")
        path, url, sha = (str(item[k]).strip() for k in ("path", "url", "sha256"))
        pure = PurePosixPath(path)
        if not path or pure.is_absolute() or ".." in pure.parts or path != pure.as_posix():
            raise SchemaError(f"{where}: raw file path {path!r} is not a plain relative path inside the dataset")
        if path in seen:
            raise SchemaError(f"{where}: raw file {path!r} is listed twice")
        if not url.startswith(("https://", "http://")):
            raise SchemaError(f"{where}: raw file {path!r}: url {url!r} is not an http(s) URL")
        if not SHA256_RE.match(sha.lower()):
            raise SchemaError(f"{where}: raw file {path!r}: sha256 {sha!r} is not 64 hexadecimal digits")
        seen.add(path)
        files.append(RawFile(path, url, sha.lower(), where))
    return files


def _key_lines(path: Path) -> dict:
    """Line numbers of the raw_files key and of each entry's `path:` in source.yaml (for error messages)."""
    lines: dict = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return lines
    entry = -1
    for number, line in enumerate(text, 1):
        if line.startswith("raw_files:"):
            lines["raw_files"] = number
        elif re.match(r"^\s*-\s*path:", line):
            entry += 1
            lines[("path", entry)] = number
    return lines


def fetch_raw_files(dataset: str, files: list[RawFile], mirror_folder: str | None = None) -> dict[str, Path]:
    """{path: file in the cache} for every raw file of `dataset`, each verified against its SHA-256 (see the
    module's docstring for where a file comes from). `mirror_folder` (source.yaml) is the mirror's folder for the
    dataset where it is not the dataset's name (the profiles of ../shared/reference/profiles); the cache's layout,
    <dataset>/<path>, is looked for in the mirror too. Raises SchemaError, one line, for a file that cannot be
    had."""
    cache = cache_dir() / dataset
    mirror = mirror_dir()
    folders = [*([mirror_folder] if mirror_folder else []), dataset]
    return {raw.path: _fetch_one(dataset, raw, cache, mirror, folders) for raw in files}


TRAINING_DATA = "datasets"  # the cache's (and the mirror's) folder of training data archives


def training_archives() -> dict[str, RawFile]:
    """{data set: its archive} for every conf/data/<name>.yaml that names one (`archive`: file, url, sha256)."""
    from omegaconf import OmegaConf

    from ..config import CONF_DIR

    found = {}
    for path in sorted((CONF_DIR / "data").glob("*.yaml")):
        archive = OmegaConf.load(path).get("archive")
        if archive:
            found[path.stem] = RawFile(str(archive.file), str(archive.url), str(archive.sha256), str(path))
    return found


def fetch_training_data(name: str) -> Path:
    """The archive of training data set `name` in the cache (<cache>/datasets/<file>), verified against the
    SHA-256 its config pins; from the cache, the mirror (<mirror>/datasets/<file>) or its URL, with progress."""
    archives = training_archives()
    if name not in archives:
        raise SchemaError(f"no archive to fetch for data={name}; data sets with one: {', '.join(archives)}")
    raw = archives[name]
    return _fetch_one(TRAINING_DATA, raw, cache_dir() / TRAINING_DATA, mirror_dir(), [TRAINING_DATA], progress=True)


def _fetch_one(
    dataset: str, raw: RawFile, cache: Path, mirror: Path | None, folders: list[str], progress: bool = False
) -> Path:
    target = cache / raw.path
    stale = ""
    if target.is_file():
        got = sha256_of(target)
        if got == raw.sha256:
            return target
        stale = f"; the cached copy {target} has SHA-256 {got[:12]}..., not {raw.sha256[:12]}..."
    how = (
        f"download {raw.url} to {target}, or set {MIRROR_ENV}=DIR with the file at DIR/{folders[0]}/{raw.path} "
        f"(its SHA-256 is pinned at {raw.where})"
    )
    copies = [mirror / folder / raw.path for folder in folders] if mirror is not None else []
    for copy in (c for c in copies if c.is_file()):
        got = sha256_of(copy)
        if got != raw.sha256:
            raise SchemaError(
                f"{copy}: SHA-256 {got[:12]}... is not the {raw.sha256[:12]}... that {raw.where} pins "
                f"(a corrupted or different file): replace it with {raw.url}"
            )
        try:
            _copy_into(copy, target)
        except OSError:  # a cache that cannot be written (a read-only home in a container): the verified copy
            return copy
        return target
    try:
        return _download(raw, target, progress)
    except _DownloadError as err:
        looked = f"not in the cache ({target})" + (
            f", nor in the mirror ({' or '.join(str(c) for c in copies)})"
            if mirror
            else f", no mirror ({MIRROR_ENV} unset)"
        )
        raise SchemaError(f"{dataset}/{raw.path}: {looked}, and {err}{stale}: {how}") from None


class _DownloadError(Exception):
    pass


def _copy_into(source: Path, target: Path) -> None:
    """Copy a verified file into the cache under a temporary name, then rename: never a half-written file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _download(raw: RawFile, target: Path, progress: bool = False) -> Path:
    """Fetch raw.url into the cache with pooch, which checks the SHA-256 and writes through a temporary file."""
    import pooch

    pooch.get_logger().setLevel("WARNING")  # our own line says what is fetched
    make_cache_folder(target.parent)
    print(f"fetching {raw.url} -> {target}", file=sys.stderr)
    timeout = download_timeout()
    downloader = pooch.HTTPDownloader(progressbar=progress, timeout=timeout)  # a bar for the large archives
    try:
        fetched = pooch.retrieve(
            raw.url, known_hash=f"sha256:{raw.sha256}", fname=target.name, path=target.parent, downloader=downloader
        )
    except ValueError as err:  # pooch: the downloaded file's hash does not match
        if "hash" in str(err).lower():
            raise _DownloadError(f"{raw.url} gave a file whose SHA-256 is not the one {raw.where} pins") from None
        raise _DownloadError(f"{raw.url} could not be fetched ({err})") from None
    except Exception as err:  # requests' connection, timeout and HTTP errors
        if "Timeout" in type(err).__name__:
            raise _DownloadError(
                f"{raw.url} did not answer within {timeout:g} s ({TIMEOUT_ENV} sets the wait)"
            ) from None
        status = getattr(getattr(err, "response", None), "status_code", None)  # an HTTP error: its status
        reason = f"HTTP {status}" if status else type(err).__name__  # requests' own text is a screenful
        raise _DownloadError(f"{raw.url} could not be fetched ({reason})") from None
    return Path(fetched)
