"""A SIF (Apptainer's image format) built without Apptainer: the root file system of a Docker image with the
/.singularity.d metadata `apptainer build` adds for a docker-daemon bootstrap, packed by mksquashfs, assembled by
siftool (Debian's squashfs-tools and siftool). It stands in for `apptainer build` where Apptainer cannot be
installed; scripts/container.sh sif (make sif) calls it there. Stdlib only.

    python scripts/sif.py build --image scalestudy:cpu [--definition Singularity.def] [--build-arg IMAGE=...] OUT.sif
    python scripts/sif.py build --rootfs DIR [--definition FILE] OUT.sif      (a directory as the image's root)

The SIF, as `apptainer build` lays it out (Apptainer 1.x, internal/pkg/build/assemblers/sif.go and metadata.go):
descriptor 1 the definition file as built (Def.FILE), 2 `inspect-metadata.json` (JSON.Generic: what `apptainer
inspect --all --json` prints: labels, definition, runscript, test, help, environment), 3 the root file system
(FS, Squashfs, primary System partition, the image's architecture), all in object group 1; the header's launch
line is Apptainer's. In the root file system, as Apptainer writes them: /.singularity.d/{Singularity, labels.json,
runscript, test, runscript.help, env/10-docker2singularity.sh (the image's ENV), env/90-environment.sh
(%environment), actions/{exec,run,shell,test}}, /.singularity.d/libs, and the top-level mount points.
Exit codes: 0 built, 1 a step failed, 2 a tool or the image is missing, or usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling parser, however this file is loaded
from singularity_def import PLACEHOLDER, Definition, DefinitionError, parse_definition

LAUNCH = b"#!/usr/bin/env run-singularity\n"  # the SIF header's first 32 bytes, as Apptainer writes them
SIF_ARCH = {"386": 1, "amd64": 2, "arm": 3, "arm64": 4, "ppc64": 5, "ppc64le": 6, "mips": 7, "mipsle": 8,
            "mips64": 9, "mips64le": 10, "s390x": 11, "riscv64": 12}  # fmt: skip  # siftool add --partarch
DOCKER = os.environ.get("DOCKER", "docker")  # scripts/container.sh passes Debian's /usr/bin/docker
TOOLS = {"mksquashfs": "squashfs-tools", "siftool": "siftool", DOCKER: "docker.io"}
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The action scripts every Apptainer image carries: source the environment scripts in order, then the command.
SOURCE_ENV = '#!/bin/sh\nfor script in /.singularity.d/env/*.sh; do\n    [ -f "$script" ] && . "$script"\ndone\n'
ACTIONS = {
    "exec": SOURCE_ENV + 'exec "$@"\n',
    "run": SOURCE_ENV + 'if [ -x /.singularity.d/runscript ]; then exec /.singularity.d/runscript "$@"; fi\n'
    'echo "No runscript in this image: running /bin/sh" >&2\nexec /bin/sh "$@"\n',
    "shell": SOURCE_ENV + 'if [ -x /bin/bash ]; then exec /bin/bash --norc "$@"; fi\nexec /bin/sh "$@"\n',
    "test": SOURCE_ENV + 'if [ -x /.singularity.d/test ]; then exec /.singularity.d/test "$@"; fi\n'
    'echo "No %test in this image" >&2\nexec /bin/sh -c true\n',
}
ENV_SCRIPTS = {
    "01-base.sh": "#!/bin/sh\n",
    "90-environment.sh": "#!/bin/sh\n# Custom environment shell code should follow\n\n",
    # the driver libraries `--nv` binds go to /.singularity.d/libs
    "99-base.sh": '#!/bin/sh\nLD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/.singularity.d/libs"\n'
    'PS1="Apptainer> "\nexport LD_LIBRARY_PATH PS1\n',
}
MOUNT_POINTS = ("dev", "proc", "sys", "tmp", "var/tmp", "home", "root", "etc", ".singularity.d/libs")
SYMLINKS = {".exec": "actions/exec", ".run": "actions/run", ".shell": "actions/shell", ".test": "actions/test",
            "environment": "env/90-environment.sh", "singularity": "runscript"}  # fmt: skip


class BuildError(Exception):
    """A step failed; `code` is the exit status (2: a tool or the image is missing)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def need_tools(names) -> None:
    for name in names:
        if shutil.which(name) is None:
            raise BuildError(f"no {name} here: install Debian's {TOOLS[name]}", 2)


def run(*cmd: str, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        raise BuildError(f"{shlex.join(cmd[:3])} ... failed: {said[-1] if said else f'exit {proc.returncode}'}")
    return proc


# --------------------------------------------------------------------------------------------
# The definition file as built, and what it puts into the image


def definition_as_built(path: Path, build_args: dict[str, str]) -> tuple[str, Definition]:
    """(the text with its {{ NAME }} placeholders filled: build arguments over %arguments defaults, the parsed
    definition): `apptainer inspect --deffile` shows the definition that was built, so that text goes in."""
    text = path.read_text()
    values = {**parse_definition(path, text).arguments, **build_args}
    built = PLACEHOLDER.sub(lambda m: values.get(m[1], m[0]), text)
    return built, parse_definition(path, built)


def section_script(definition: Definition, name: str) -> str:
    section = definition.section(name)
    return section.text().strip("\n").rstrip() if section else ""


def script_file(definition: Definition, name: str) -> str | None:
    """A %runscript or %test as the file Apptainer writes: its own #! line, or /bin/sh with the section's
    arguments (`%runscript -c /bin/bash`)."""
    script = section_script(definition, name)
    if not script:
        return None
    shebang = "#!/bin/sh"
    if script.lstrip().startswith("#!"):
        shebang, _, script = script.lstrip().partition("\n")
    args = definition.section(name).args.split("#")[0].strip()
    return f"{shebang}{' ' + args if args else ''}\n\n{script}\n"


def definition_labels(definition: Definition) -> dict[str, str]:
    """%labels: one `KEY VALUE...` per line (blank and # lines skipped)."""
    labels = {}
    for line in filter(str.strip, section_script(definition, "labels").splitlines()):
        key, *value = line.split(None, 1)
        if not key.startswith("#"):
            labels[key] = value[0].strip() if value else ""
    return labels


def build_labels(definition: Definition, arch: str, now: float) -> dict[str, str]:
    """The labels Apptainer adds at build time (schema, date, header, architecture); no apptainer.version: this
    builder is not Apptainer, and says so in a label of its own."""
    stamp = time.localtime(now)
    labels = {
        "org.label-schema.schema-version": "1.0",
        "org.opencontainers.image.created": time.strftime("%Y-%m-%dT%H:%M:%S", stamp) + _offset(stamp),
        "org.label-schema.build-date": time.strftime("%A_%-d_%B_%Y_%-H:%-M:%-S_%Z", stamp),
        "org.label-schema.build-arch": arch,
        "org.opencontainers.image.architecture": arch,
        "org.scalestudy.sif.builder": "scripts/sif.py (squashfs-tools and siftool; not Apptainer)",
    }
    if section_script(definition, "help"):
        labels["org.label-schema.usage"] = "/.singularity.d/runscript.help"
        labels["org.label-schema.usage.apptainer.runscript.help"] = "/.singularity.d/runscript.help"
    for key, (value, _) in definition.header.items():
        labels[f"org.label-schema.usage.singularity.deffile.{key}"] = definition.resolve(value)
    return labels


def _offset(stamp: time.struct_time) -> str:
    minutes = stamp.tm_gmtoff // 60
    return "Z" if minutes == 0 else f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def merged_labels(image_labels: dict, definition: Definition, arch: str, now: float) -> dict[str, str]:
    """labels.json: the image's labels, then the build's (they win), then %labels where no label has that name
    yet (Apptainer keeps an existing label unless built with --force)."""
    labels = {**(image_labels or {}), **build_labels(definition, arch, now)}
    for key, value in definition_labels(definition).items():
        labels.setdefault(key, value)
    return labels


def docker_env_script(env: list[str]) -> str:
    """10-docker2singularity.sh: the image's ENV as exports that give way to the caller's value (PATH does
    not: the image's PATH is the container's)."""
    lines = ["#!/bin/sh"]
    for item in env or []:
        name, sep, value = item.partition("=")
        if not sep:
            lines.append(f'export {name}="${{{name}:-}}"')
        elif name == "PATH":
            lines.append(f"export PATH={shlex.quote(value)}")
        else:
            lines.append(f'export {name}="${{{name}:-{_double_quoted(value)}}}"')
    return "\n".join(lines) + "\n"


def _double_quoted(value: str) -> str:
    escaped = "".join("\\" + c if c in '\\"$`' else c for c in value)
    return f'"{escaped}"'


def oci_runscript(entrypoint: list[str] | None, cmd: list[str] | None) -> str:
    """The runscript of an image without %runscript: its ENTRYPOINT, then the arguments given, else its CMD."""
    entry, default = shlex.join(entrypoint or []), shlex.join(cmd or [])
    return (
        f'#!/bin/sh\nif [ $# -eq 0 ]; then set -- {default}; fi\n'
        + (f'exec {entry} "$@"\n' if entry else 'exec "$@"\n')
    )  # fmt: skip


def metadata_files(definition: Definition, text: str, config: dict, labels: dict[str, str]) -> dict[str, str]:
    """{path under /.singularity.d: text} of everything the build writes there."""
    files = {f"actions/{name}": body for name, body in ACTIONS.items()}
    files |= {f"env/{name}": body for name, body in ENV_SCRIPTS.items()}
    files["env/10-docker2singularity.sh"] = docker_env_script(config.get("Env"))
    environment = section_script(definition, "environment")
    if environment:
        files["env/90-environment.sh"] += "\n" + environment + "\n"
    files["runscript"] = script_file(definition, "runscript") or oci_runscript(
        config.get("Entrypoint"), config.get("Cmd")
    )
    test = script_file(definition, "test")
    if test:
        files["test"] = test
    help_text = section_script(definition, "help")
    if help_text:
        files["runscript.help"] = help_text + "\n"
    files["labels.json"] = json.dumps(labels, indent="\t", sort_keys=True)
    files["Singularity"] = text
    return files


def inspect_metadata(files: dict[str, str], labels: dict[str, str]) -> dict:
    """inspect-metadata.json, the SIF's JSON object: what `apptainer inspect --all --json` prints."""
    attributes = {
        "labels": labels,
        "deffile": files["Singularity"],
        "runscript": files["runscript"],
        "test": files.get("test", ""),
        "helpfile": files.get("runscript.help", ""),
        "environment": {f"/.singularity.d/{p}": t for p, t in files.items() if p.endswith("environment.sh")},
    }
    return {"data": {"attributes": {k: v for k, v in attributes.items() if v}}, "type": "container"}


# --------------------------------------------------------------------------------------------
# The root file system


def docker_config(image: str) -> tuple[dict, str]:
    """(the image's Config: Env, Labels, Entrypoint, Cmd; its architecture); BuildError(2) if there is none."""
    proc = subprocess.run([DOCKER, "image", "inspect", image], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"no Docker image {image} here (docker image inspect: {proc.stderr.strip()})", 2)
    found = json.loads(proc.stdout)[0]
    return found.get("Config") or {}, found.get("Architecture") or "amd64"


def export_rootfs(image: str, rootfs: Path) -> None:
    """The image's layers flattened, as a container of it sees them (docker create + export), unpacked with
    their owners when root (Apptainer keeps them when it builds as root)."""
    # never started: the command is there for an image without CMD, which docker create refuses
    cid = run(DOCKER, "create", image, "/bin/true").stdout.strip()
    try:
        export = subprocess.Popen([DOCKER, "export", cid], stdout=subprocess.PIPE)
        untar = subprocess.run(["tar", "-x", "-p", "--numeric-owner", "-C", str(rootfs)], stdin=export.stdout,
                               capture_output=True, text=True)  # fmt: skip
        export.stdout.close()
        if export.wait() != 0 or untar.returncode != 0:
            raise BuildError(f"docker export {image} | tar -x failed: {untar.stderr.strip()[-300:]}")
    finally:
        subprocess.run([DOCKER, "rm", "-f", cid], capture_output=True)
    dockerenv = rootfs / ".dockerenv"  # docker's marker of its own containers: not part of the image
    if dockerenv.is_file() and not dockerenv.stat().st_size:
        dockerenv.unlink()


def add_metadata(rootfs: Path, files: dict[str, str]) -> None:
    """The mount points, /.singularity.d's files (executable but the data) and its top-level links, and empty
    /etc/hosts and /etc/resolv.conf (the runtime binds the host's over them)."""
    for folder in MOUNT_POINTS:
        (rootfs / folder).mkdir(parents=True, exist_ok=True)
    meta = rootfs / ".singularity.d"
    for relative, text in files.items():
        path = meta / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.write_text(text)
        path.chmod(0o644 if relative in ("labels.json", "Singularity", "runscript.help") else 0o755)
    for name, target in SYMLINKS.items():
        if not (rootfs / name).is_symlink() and not (rootfs / name).exists():
            (rootfs / name).symlink_to(f".singularity.d/{target}")
    for name in ("hosts", "resolv.conf"):
        path = rootfs / "etc" / name
        path.unlink(missing_ok=True)
        path.write_text("")
        path.chmod(0o644)


def squash(rootfs: Path, squashfs: Path) -> None:
    """The root file system as squashfs, with Apptainer's flags (its gzip default; owners kept when root)."""
    flags = ["-noappend", "-no-progress"] + ([] if os.geteuid() == 0 else ["-all-root"])
    run("mksquashfs", str(rootfs), str(squashfs), *flags)


def assemble(out: Path, squashfs: Path, work: Path, deffile: str, metadata: dict, arch: str) -> None:
    """The SIF by siftool (descriptors in Apptainer's order, object group 1), renamed into place whole."""
    tmp = work / "image.sif"
    (work / "definition").write_text(deffile)
    (work / "inspect-metadata.json").write_text(json.dumps(metadata))
    run("siftool", "new", str(tmp))
    run("siftool", "add", "--datatype", "1", "--groupid", "1", str(tmp), str(work / "definition"))
    run("siftool", "add", "--datatype", "6", "--groupid", "1", "--filename", "inspect-metadata.json",
        str(tmp), str(work / "inspect-metadata.json"))  # fmt: skip
    run("siftool", "add", "--datatype", "4", "--parttype", "2", "--partfs", "1", "--partarch",
        str(SIF_ARCH[arch]), "--groupid", "1", str(tmp), str(squashfs))  # fmt: skip
    with open(tmp, "r+b") as sif:  # the launch line Apptainer writes (siftool leaves zeros)
        sif.write(LAUNCH.ljust(32, b"\0"))
    tmp.chmod(0o755)  # as Apptainer's: the launch line makes it executable
    os.replace(tmp, out)


def build(out: Path, definition_path: Path, build_args: dict[str, str], image: str | None = None,
          rootfs: Path | None = None) -> dict[str, float]:  # fmt: skip
    """Build `out`; {step: seconds} of its slow steps."""
    need_tools(["mksquashfs", "siftool"] + ([DOCKER] if image else []))
    text, definition = definition_as_built(definition_path, build_args)
    config, arch = docker_config(image) if image else ({}, "amd64")
    if arch not in SIF_ARCH:
        raise BuildError(f"architecture {arch}: SIF knows {', '.join(SIF_ARCH)}")
    labels = merged_labels(config.get("Labels"), definition, arch, time.time())
    files = metadata_files(definition, text, config, labels)
    out.parent.mkdir(parents=True, exist_ok=True)
    # beside the output: the same file system for the rename, and room for the unpacked image
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    steps, start = {}, time.monotonic()
    try:
        root = work / "rootfs"
        if image:
            root.mkdir(mode=0o755)
            export_rootfs(image, root)
        else:
            shutil.copytree(rootfs, root, symlinks=True)
        root.chmod(0o755)  # the image's / (the temporary folder above it is private)
        add_metadata(root, files)
        steps["root file system"], start = time.monotonic() - start, time.monotonic()
        squash(root, work / "rootfs.squashfs")
        steps["mksquashfs"], start = time.monotonic() - start, time.monotonic()
        assemble(out, work / "rootfs.squashfs", work, text, inspect_metadata(files, labels), arch)
        steps["siftool"] = time.monotonic() - start
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return steps


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python scripts/sif.py", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build OUT.sif from a Docker image (or a directory) and a definition file")
    source = b.add_mutually_exclusive_group(required=True)
    source.add_argument("--image", help="a local Docker image (docker-daemon bootstrap)")
    source.add_argument("--rootfs", type=Path, help="a directory to use as the image's root file system")
    b.add_argument("--definition", type=Path, default=Path("Singularity.def"))
    b.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE")
    b.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    if any("=" not in item for item in args.build_arg):
        ap.error("--build-arg takes NAME=VALUE")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    build_args = dict(item.split("=", 1) for item in args.build_arg)
    start = time.monotonic()
    try:
        steps = build(args.out, args.definition, build_args, image=args.image, rootfs=args.rootfs)
    except BuildError as err:
        print(f"sif.py: {err}", file=sys.stderr)
        return err.code
    except DefinitionError as err:
        print(f"sif.py: {err}", file=sys.stderr)
        return 1
    size, took = args.out.stat().st_size, ", ".join(f"{k} {v:.0f} s" for k, v in steps.items())
    print(f"built {args.out} ({size} bytes, {size / 1e9:.2f} GB) in {time.monotonic() - start:.0f} s ({took})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
