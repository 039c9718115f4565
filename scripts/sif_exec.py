"""sif-exec: run a SIF (Apptainer's image format) the way `apptainer exec|run|test` does, where Apptainer is not
installed. It is NOT Apptainer: a stand-in for tests and rehearsals, built from Debian's squashfuse (or
squashfs-tools' unsquashfs) and bubblewrap. Stdlib only; called as scripts/sif-exec.

    sif-exec exec [--nv] [-B|--bind SRC[:DST[:ro]][,...]]... IMAGE CMD [ARGS...]
    sif-exec run  [--nv] [-B ...] IMAGE [ARGS...]        the image's runscript (%runscript)
    sif-exec test [--nv] [-B ...] IMAGE                  the image's %test

What it does, as Apptainer 1.1+ does unprivileged:
- finds the primary system partition (squashfs) in the SIF's descriptor table (the header and descriptors are a
  documented binary layout; read here with struct);
- mounts it read-only with squashfuse at its offset (`squashfuse_ll -o ro,offset=N`), one mount per call, like
  Apptainer's one per container: concurrent calls share nothing (auto_unmount, and the kernel's death signal,
  unmount it even when sif-exec is killed). Where FUSE is not usable (or SIF_EXEC_ROOTFS=extract), it
  extracts the partition once (`unsquashfs -o N`) into a cache keyed by the SIF's sha256 (SIF_EXEC_CACHE,
  default ~/.cache/sif-exec), under a lock: concurrent calls wait for the one extraction;
- runs the command under bubblewrap in the caller's network, PID and IPC namespaces: the image read-only as /
  (its top-level entries bound onto a read-only tmpfs, folders split open where a bind needs a mount point the
  image lacks: Apptainer's "underlay"), the host's /dev, /proc, /sys (read-only), /tmp, /var/tmp, $HOME and the
  current directory bound in, /etc/hosts and /etc/resolv.conf from the host, the --bind paths; then the image's
  /.singularity.d/actions/{exec,run,test}, which source /.singularity.d/env/*.sh in order and exec the command;
- the environment: the caller's, but PATH (the image's, else a default) and LD_LIBRARY_PATH;
  APPTAINERENV_X=v sets X=v; APPTAINER_CONTAINER and APPTAINER_NAME name the image, as Apptainer sets them.
--nv binds the NVIDIA driver's libraries that `ldconfig -p` lists into /.singularity.d/libs (the host's /dev
with its /dev/nvidia* is bound anyway) and says what it bound; untested here (no GPU).
Exit status: the command's (128+N when signal N ended it); 255 when sif-exec itself fails, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# The SIF global header and descriptor (github.com/apptainer/sif, pkg/sif: little-endian, packed)
HEADER = struct.Struct("<32s10s3s3s16s8q")  # launch, magic, version, arch, id, ctime, mtime, dfree, dtotal, ...
DESCRIPTOR = struct.Struct("<iBIIIqqqqqqq128s384s")  # type, used, id, group, link, offset, size, ..., name, extra
DATA_PARTITION, FS_SQUASHFS, PART_SYSTEM, PART_PRIMSYS = 0x4004, 1, 1, 2
ARCHES = ("386", "amd64", "arm", "arm64", "ppc64", "ppc64le", "mips", "mipsle", "mips64", "mips64le", "s390x",
          "riscv64")  # fmt: skip  # SIF's architecture codes "01" to "12"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NV_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1", "libnvidia-nvvm.so.4",
                "libcudadebugger.so.1", "libnvidia-opencl.so.1")  # fmt: skip  # Apptainer's nvliblist.conf, the core
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


class SifExecError(Exception):
    """sif-exec cannot run the command (exit 255, as Apptainer's own failures)."""


@dataclass(frozen=True)
class Partition:
    offset: int
    size: int
    fstype: int
    parttype: int
    arch: str


@dataclass(frozen=True)
class Bind:
    source: str
    dest: str
    read_only: bool = False


# --------------------------------------------------------------------------------------------
# The SIF


def partitions(sif: Path) -> list[Partition]:
    """Every partition descriptor of a SIF, in descriptor order."""
    with open(sif, "rb") as f:
        raw = f.read(HEADER.size)
        header = HEADER.unpack(raw) if len(raw) == HEADER.size else (None, None)
        if header[1] != b"SIF_MAGIC\0":
            raise SifExecError(f"{sif} is not a SIF (no SIF_MAGIC in its header)")
        total, desc_offset = header[8], header[9]
        f.seek(desc_offset)
        table = f.read(total * DESCRIPTOR.size)
    found = []
    for i in range(total):
        kind, used, *_, offset, size, _padded, _c, _m, _uid, _gid, _name, extra = DESCRIPTOR.unpack_from(
            table, i * DESCRIPTOR.size
        )
        if used and kind == DATA_PARTITION:
            fstype, parttype, arch = struct.unpack_from("<ii3s", extra)
            code = arch.rstrip(b"\0").decode()
            name = ARCHES[int(code) - 1] if code.isdigit() and 0 < int(code) <= len(ARCHES) else code
            found.append(Partition(offset, size, fstype, parttype, name))
    return found


def root_partition(sif: Path) -> Partition:
    """The partition Apptainer runs: the primary system partition (else the first system one), squashfs."""
    parts = partitions(sif)
    system = [p for p in parts if p.parttype == PART_PRIMSYS] + [p for p in parts if p.parttype == PART_SYSTEM]
    if not system:
        raise SifExecError(f"{sif} has no system partition")
    if system[0].fstype != FS_SQUASHFS:
        raise SifExecError(f"{sif}: its system partition is not squashfs (type {system[0].fstype}): not supported")
    return system[0]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# The image's root: a FUSE mount of its own, or the shared extraction


def _die_with_parent() -> None:
    """In a child, before exec: SIGKILL when sif-exec dies, however it dies (so no squashfuse outlives it)."""
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the prctl
        os._exit(1)


def runtime_dir() -> Path:
    """Where the mount points go: never under /tmp, which the container sees."""
    base = os.environ.get("XDG_RUNTIME_DIR") or ("/run" if os.geteuid() == 0 else tempfile.gettempdir())
    folder = Path(base) / f"sif-exec-{os.geteuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


@contextlib.contextmanager
def fuse_mounted(sif: Path, part: Partition):
    """The partition mounted read-only at a fresh mount point for this call, unmounted and removed after."""
    fuse = shutil.which("squashfuse_ll") or shutil.which("squashfuse")
    if not fuse or not os.path.exists("/dev/fuse"):
        raise SifExecError("no squashfuse or no /dev/fuse (Debian's squashfuse, fuse3)")
    folder = runtime_dir()
    remove_stale_mountpoints(folder)
    mountpoint = Path(tempfile.mkdtemp(prefix=f"root-{os.getpid()}-", dir=folder))
    options = f"ro,offset={part.offset},auto_unmount"  # auto_unmount: fusermount3 unmounts if squashfuse dies
    proc = subprocess.Popen([fuse, "-f", "-o", options, str(sif), str(mountpoint)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_die_with_parent)  # fmt: skip
    try:
        _wait_mounted(mountpoint, proc)
        yield mountpoint
    finally:
        _unmount(mountpoint, proc)


def remove_stale_mountpoints(folder: Path) -> None:
    """The empty mount points that calls killed with SIGKILL left (their squashfuse died with them and
    auto_unmount unmounted it): those whose process is gone."""
    for path in folder.glob("root-*-*"):
        pid = path.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and not os.path.ismount(path):
            with contextlib.suppress(OSError):
                path.rmdir()


def _wait_mounted(mountpoint: Path, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.ismount(mountpoint):
        if proc.poll() is not None:
            said = proc.stderr.read().decode(errors="replace").strip().splitlines()
            raise SifExecError(f"squashfuse exited ({said[-1] if said else proc.returncode})")
        if time.monotonic() > deadline:
            raise SifExecError(f"squashfuse did not mount within {timeout:.0f} s")
        time.sleep(0.005)


def _unmount(mountpoint: Path, proc: subprocess.Popen) -> None:
    proc.terminate()  # squashfuse unmounts on SIGTERM
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for _ in range(200):  # auto_unmount's watchdog may still be at it
        if not os.path.ismount(mountpoint):
            break
        time.sleep(0.01)
    else:
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
    with contextlib.suppress(OSError):
        mountpoint.rmdir()


def extracted(sif: Path, part: Partition) -> Path:
    """The partition unpacked once per SIF content into the cache (SIF_EXEC_CACHE, ~/.cache/sif-exec), kept
    for the next calls; the lock makes concurrent calls wait for one extraction, the rename makes it whole."""
    if not shutil.which("unsquashfs"):
        raise SifExecError("neither FUSE nor unsquashfs here: install Debian's squashfuse and fuse3, or squashfs-tools")
    cache = Path(os.environ.get("SIF_EXEC_CACHE") or Path.home() / ".cache" / "sif-exec")
    cache.mkdir(parents=True, exist_ok=True)
    digest = sha256(sif)
    target = cache / digest
    with open(cache / f"{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_dir():
            return target
        for stale in cache.glob(f"{digest}.partial-*"):  # a killed extraction's (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        partial = Path(tempfile.mkdtemp(prefix=f"{digest}.partial-", dir=cache))
        xattrs = [] if os.geteuid() == 0 else ["-user-xattrs"]
        proc = subprocess.run(["unsquashfs", "-o", str(part.offset), "-no-progress", *xattrs, "-d",
                               str(partial / "root"), str(sif)], capture_output=True, text=True)  # fmt: skip
        if proc.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise SifExecError(f"unsquashfs failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        os.rename(partial / "root", target)
        partial.rmdir()
    return target


@contextlib.contextmanager
def image_root(sif: Path, part: Partition):
    """The image's root folder: a FUSE mount (SIF_EXEC_ROOTFS=fuse, or by default where it works), else the
    extraction (SIF_EXEC_ROOTFS=extract, or where the mount fails, saying why)."""
    mode = os.environ.get("SIF_EXEC_ROOTFS", "")
    if mode not in ("", "fuse", "extract"):
        raise SifExecError(f"SIF_EXEC_ROOTFS={mode}: choose fuse or extract")
    with contextlib.ExitStack() as stack:
        root = None
        if mode != "extract":
            try:
                root = stack.enter_context(fuse_mounted(sif, part))
            except SifExecError as err:
                if mode == "fuse":
                    raise
                print(f"sif-exec: cannot mount {sif} with FUSE ({err}): extracting it instead", file=sys.stderr)
        yield root or extracted(sif, part)


# --------------------------------------------------------------------------------------------
# The sandbox


def parse_binds(specs: list[str]) -> list[Bind]:
    """-B SRC[:DST[:ro|rw]], several per option separated by commas, as Apptainer takes them."""
    binds = []
    for spec in (s for item in specs for s in item.split(",") if s):
        source, *rest = spec.split(":")
        dest, opts = (rest[0] if rest else ""), rest[1:]
        if len(opts) > 1 or opts not in ([], ["ro"], ["rw"]):
            raise SifExecError(f"--bind {spec}: expected SRC[:DST[:ro|rw]]")
        if not os.path.exists(source):
            raise SifExecError(f"--bind {spec}: no {source} on this machine")
        binds.append(Bind(os.path.abspath(source), dest or os.path.abspath(source), opts == ["ro"]))
    return binds


def default_binds(cwd: str, home: str) -> list[Bind]:
    """What Apptainer binds by default: /tmp, /var/tmp, $HOME, the current folder (unless / or inside one of
    those), /etc/hosts and /etc/resolv.conf."""
    binds = [Bind(p, p) for p in ("/tmp", "/var/tmp", home) if p not in ("", "/") and os.path.isdir(p)]
    if cwd != "/" and not any(cwd == b.dest or cwd.startswith(b.dest.rstrip("/") + "/") for b in binds):
        binds.append(Bind(cwd, cwd))
    return binds + [Bind(p, p, True) for p in ("/etc/hosts", "/etc/resolv.conf") if os.path.isfile(p)]


def nv_binds() -> list[Bind]:
    """--nv: the driver libraries ldconfig knows, into /.singularity.d/libs (on the image's LD_LIBRARY_PATH)."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    listed = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout if os.path.exists(ldconfig) else ""
    found = {}
    for line in listed.splitlines():
        name, _, path = line.strip().partition(" => ")
        name = name.split(" (")[0]
        if name in NV_LIBRARIES and "x86-64" in line and name not in found:
            found[name] = path
    binds = [Bind(path, f"/.singularity.d/libs/{name}", True) for name, path in found.items()]
    smi = shutil.which("nvidia-smi")
    binds += [Bind(smi, "/usr/bin/nvidia-smi", True)] if smi else []
    said = ", ".join(sorted(found) + (["nvidia-smi"] if smi else [])) or "none found (no NVIDIA driver here)"
    print(f"sif-exec: --nv: the host's /dev (with any /dev/nvidia*) is bound; driver files bound: {said}",
          file=sys.stderr)  # fmt: skip
    return binds


def missing_under(root: Path, dest: str) -> str | None:
    """When `dest` is not in the image: the deepest folder of the image on its way, where its mount point has to
    be made; None when it is there (or behind a link, which the sandbox resolves itself)."""
    path = "/"
    for part in Path(dest).parts[1:]:
        inside = os.path.join(path, part)
        full = str(root) + inside
        if os.path.islink(full) or (os.path.lexists(full) and not os.path.isdir(full)):
            return None
        if not os.path.lexists(full):
            return path
        path = inside
    return None


def underlay(root: Path, dests: list[str]) -> tuple[list[str], list[str]]:
    """(bwrap arguments that lay the image under a tmpfs /: each top-level entry bound read-only, and each folder
    that lacks a mount point made a tmpfs with its own entries bound back; the folders to make read-only after
    the binds). The image's root itself is never bound at /: bwrap could not make mount points in it."""
    split = {"/"} | {m for m in (missing_under(root, d) for d in dests) if m}
    args: list[str] = []
    for folder in sorted(split, key=lambda p: (p.count("/"), p)):
        if folder != "/":
            args += ["--tmpfs", folder]
        for entry in sorted(os.scandir(str(root) + folder), key=lambda e: e.name):
            dest = os.path.join(folder, entry.name)
            if entry.is_symlink():
                args += ["--symlink", os.readlink(entry.path), dest]
            else:
                args += ["--ro-bind", entry.path, dest]
    return args, sorted(split)


def sandbox_args(root: Path, binds: list[Bind], cwd: str) -> list[str]:
    """bwrap's arguments up to the command: the image read-only, the host's /dev, /proc and /sys, the binds."""
    # a bind inside another bind (a $HOME or current folder under /tmp) finds its mount point in that bind's
    # source: it must not split the image's folder open, which would then be made read-only over the bind
    dests = [b.dest for b in binds]
    outer = [d for d in dests if not any(d != o and d.startswith(o.rstrip("/") + "/") for o in dests)]
    lay, split = underlay(root, ["/dev", "/proc", "/sys", *outer])
    args = ["bwrap", "--die-with-parent", *lay, "--dev-bind", "/dev", "/dev", "--bind", "/proc", "/proc",
            "--ro-bind", "/sys", "/sys"]  # fmt: skip
    for bind in sorted(binds, key=lambda b: b.dest.count("/")):  # a folder before what is bound inside it
        args += ["--ro-bind" if bind.read_only else "--bind", bind.source, bind.dest]
    for folder in split:
        args += ["--remount-ro", folder]
    return args + ["--chdir", cwd if os.path.isdir(cwd) else "/"]


def container_env(environ: dict[str, str], sif: Path) -> dict[str, str]:
    """The caller's environment as Apptainer passes it: not PATH or LD_LIBRARY_PATH (the image's own env scripts
    set them), APPTAINERENV_X=v as X=v, and the image named."""
    prefixes = ("SINGULARITYENV_", "APPTAINERENV_")
    env = {k: v for k, v in environ.items() if k not in ("PATH", "LD_LIBRARY_PATH") and not k.startswith(prefixes)}
    env["PATH"] = DEFAULT_PATH
    for prefix in prefixes:
        env |= {k[len(prefix) :]: v for k, v in environ.items() if k.startswith(prefix) and len(k) > len(prefix)}
    for product in ("APPTAINER", "SINGULARITY"):
        env[f"{product}_CONTAINER"], env[f"{product}_NAME"] = str(sif), sif.name
    return env


def run_sandboxed(argv: list[str], env: dict[str, str]) -> int:
    """Run bwrap, pass the signals sif-exec gets to the command itself (bwrap's --info-fd names its pid), and
    return its exit status (128+N for a signal N, as a shell reports it)."""
    info_r, info_w = os.pipe()
    proc = subprocess.Popen([argv[0], "--info-fd", str(info_w), *argv[1:]], env=env, pass_fds=(info_w,))
    os.close(info_w)
    target = {"pid": proc.pid}

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            os.kill(target["pid"], signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    with os.fdopen(info_r) as info, contextlib.suppress(ValueError):
        target["pid"] = json.loads(info.read() or "{}").get("child-pid", proc.pid)
    code = proc.wait()
    return 128 - code if code < 0 else code


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="sif-exec", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="action", required=True)
    for action, what in (("exec", "a command"), ("run", "the image's runscript"), ("test", "the image's %test")):
        p = sub.add_parser(action, help=f"run {what} in the image")
        p.add_argument("--nv", action="store_true", help="bind the NVIDIA driver's libraries (Apptainer's --nv)")
        p.add_argument("-B", "--bind", action="append", default=[], metavar="SRC[:DST[:ro]]")
        p.add_argument("image", type=Path)
        if action == "exec":
            p.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD [ARGS...]")
        elif action == "run":
            p.add_argument("command", nargs=argparse.REMAINDER, metavar="ARGS")
    args = ap.parse_args(argv)
    if args.action == "exec" and not args.command:
        ap.error("exec: no command given")
    args.command = getattr(args, "command", [])
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if not args.image.is_file():
            raise SifExecError(f"no image {args.image}")
        if not shutil.which("bwrap"):
            raise SifExecError("no bwrap here: install Debian's bubblewrap")
        sif = args.image.resolve()
        cwd, home = os.getcwd(), os.environ.get("HOME", "")
        binds = default_binds(cwd, home) + parse_binds(args.bind) + (nv_binds() if args.nv else [])
        part = root_partition(sif)
        with image_root(sif, part) as root:
            action = f"/.singularity.d/actions/{args.action}"
            if not os.path.isfile(str(root) + action):
                raise SifExecError(f"{sif} has no {action}: not an image built by apptainer or scripts/sif.py")
            return run_sandboxed([*sandbox_args(root, binds, cwd), "--", action, *args.command],
                                 container_env(dict(os.environ), sif))  # fmt: skip
    except SifExecError as err:
        print(f"sif-exec: {err}", file=sys.stderr)
        return 255


if __name__ == "__main__":
    sys.exit(main())
