"""Run untrusted (model-written) code in a contained subprocess.

Generated code never runs in the calling process. Each command runs with a wall-clock timeout
in a fresh temporary directory and a scrubbed environment. When the caller is root (CI), the
child is started under util-linux ``unshare --pid --fork --kill-child -n`` (own pid namespace,
so every descendant dies with it, and no network) and drops to an unprivileged uid/gid with
``setpriv`` (groups cleared), because ``RLIMIT_NPROC`` does not bind root. As a non-root user,
``unshare -r -n --pid --fork --kill-child`` gives the same namespaces. ``RLIMIT_NPROC``,
``RLIMIT_CPU``, ``RLIMIT_FSIZE`` and ``RLIMIT_CORE`` apply to every command; ``RLIMIT_AS``
(4 GiB by default) only to the process that runs the kernel, since compilers reserve large
virtual ranges. Without enforceable isolation the sandbox refuses to run unless the caller
opts out (``allow_unisolated=True``); every result records the isolation achieved.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuda_analyst.errors import IsolationError

SANDBOX_UID = 65534
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
GiB = 1 << 30


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed command."""

    address_space: int | None = 4 * GiB
    """``RLIMIT_AS`` in bytes for the kernel-running process (None: no limit, e.g. compilers)."""
    nproc: int = 256
    """``RLIMIT_NPROC`` of the sandbox uid (binds only after the uid drop)."""
    cpu_seconds: int = 120
    """``RLIMIT_CPU`` (a backstop behind the wall-clock timeout)."""
    file_size: int = 512 << 20
    """``RLIMIT_FSIZE`` in bytes."""


@dataclass
class SandboxResult:
    """Outcome of one sandboxed command."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    isolation: dict[str, object] = field(default_factory=dict)

    @property
    def signal(self) -> int | None:
        rc = self.returncode
        if rc is not None and rc < 0:
            return -rc
        if rc is not None and rc > 128:  # shells and unshare report 128 + signal
            return rc - 128
        return None


@dataclass(frozen=True)
class Isolation:
    """What containment this machine gives (probed once per process)."""

    uid_drop: bool
    pid_namespace: bool
    no_network: bool
    prefix: tuple[str, ...]
    reason: str = ""

    @property
    def contained(self) -> bool:
        return self.uid_drop and self.pid_namespace and self.no_network

    def describe(self) -> dict[str, object]:
        return {
            "uid_drop": self.uid_drop,
            "pid_namespace": self.pid_namespace,
            "no_network": self.no_network,
            "uid": SANDBOX_UID if self.uid_drop and os.geteuid() == 0 else os.geteuid(),
            "reason": self.reason,
        }


@functools.lru_cache(maxsize=1)
def probe_isolation() -> Isolation:
    """Find the strongest containment available: namespaces + uid drop (root) or user namespace."""
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    if unshare is None:
        return Isolation(False, False, False, (), "util-linux `unshare` not found")
    if os.geteuid() == 0:
        if setpriv is None:
            return Isolation(False, False, False, (), "running as root without `setpriv`")
        prefix = (
            unshare, "--pid", "--fork", "--kill-child", "-n",
            setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--",
        )  # fmt: skip
    else:
        prefix = (unshare, "-r", "-n", "--pid", "--fork", "--kill-child", "--")
    try:
        out = subprocess.run(
            [*prefix, "/bin/sh", "-c", "echo $$; id -u"],
            capture_output=True, text=True, timeout=10, env={"PATH": SAFE_PATH}, cwd="/",
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        return Isolation(False, False, False, (), f"namespace probe failed: {e}")
    if out.returncode != 0:
        return Isolation(False, False, False, (), f"unshare failed: {out.stderr.strip()[:200]}")
    pid, uid = [*out.stdout.split(), "", ""][:2]
    uid_ok = uid == str(SANDBOX_UID) if os.geteuid() == 0 else True
    return Isolation(uid_ok, pid == "1", True, prefix, "" if uid_ok and pid == "1" else out.stdout)


class Sandbox:
    """Runs commands contained; see the module docstring for the isolation and limits."""

    def __init__(self, *, allow_unisolated: bool = False) -> None:
        self.isolation = probe_isolation()
        self.allow_unisolated = allow_unisolated
        if not self.isolation.contained and not allow_unisolated:
            raise IsolationError(
                "cannot contain generated code here ("
                + (self.isolation.reason or "no namespaces")
                + "); install util-linux unshare/setpriv, or pass allow_unisolated=True "
                "(--allow-unisolated) to run with resource limits only"
            )

    def workdir(self) -> Path:
        """A fresh temporary directory owned by the sandbox uid (caller removes it)."""
        d = Path(tempfile.mkdtemp(prefix="cuda-analyst-"))
        if os.geteuid() == 0 and self.isolation.uid_drop:
            os.chown(d, SANDBOX_UID, SANDBOX_UID)
        return d

    def give(self, path: Path) -> None:
        """Make a file the caller wrote readable/writable by the sandbox uid."""
        if os.geteuid() == 0 and self.isolation.uid_drop:
            os.chown(path, SANDBOX_UID, SANDBOX_UID)

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        timeout: float,
        limits: SandboxLimits = SandboxLimits(),
        env: dict[str, str] | None = None,
        bind: tuple[str, str] | None = None,
    ) -> SandboxResult:
        """Run ``argv`` in ``cwd`` with the limits; never raises on the child's failure.

        ``bind=(src, dst)`` bind-mounts ``src`` on ``dst`` in a private mount namespace before
        the uid drop (root only), e.g. to expose an interpreter under a root-only home."""
        prefix = self.isolation.prefix if self.isolation.contained else ()
        if bind is not None and prefix and os.geteuid() == 0:
            k = prefix.index("-n") + 1
            setpriv = prefix[k:]
            script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
            prefix = (
                *prefix[:k],
                "-m",
                "--",
                "/bin/sh",
                "-c",
                script,
                "sh",
                bind[0],
                bind[1],
                *setpriv,
            )
        clean = {"PATH": SAFE_PATH, "HOME": str(cwd), "TMPDIR": str(cwd), "LANG": "C"}
        clean.update(env or {})

        def limit() -> None:
            os.setsid()
            for res, val in (
                (resource.RLIMIT_NPROC, limits.nproc),
                (resource.RLIMIT_CPU, limits.cpu_seconds),
                (resource.RLIMIT_FSIZE, limits.file_size),
                (resource.RLIMIT_CORE, 0),
            ):
                resource.setrlimit(res, (val, val))
            if limits.address_space is not None:
                resource.setrlimit(resource.RLIMIT_AS, (limits.address_space,) * 2)

        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [*prefix, *argv],
            cwd=cwd,
            env=clean,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=limit,
            close_fds=True,
        )
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, err = proc.communicate()
        iso = self.isolation.describe() if self.isolation.contained else {"contained": False}
        iso["limits"] = {
            "address_space": limits.address_space,
            "nproc": limits.nproc,
            "cpu_seconds": limits.cpu_seconds,
        }
        return SandboxResult(
            proc.returncode,
            out.decode(errors="replace")[-20000:],
            err.decode(errors="replace")[-20000:],
            timed_out,
            time.perf_counter() - t0,
            iso,
        )


def _traversable_by_others(path: Path) -> bool:
    for p in [path, *path.parents]:
        try:
            if not p.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def python_launch(
    sandbox: Sandbox, wd: Path
) -> tuple[list[str], dict[str, str], tuple[str, str] | None]:
    """How to start this interpreter (with its site-packages) as the sandbox uid: argv head,
    environment, and the bind mount needed when the interpreter lives under a root-only home."""
    import sys

    exe = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = Path(sys.base_prefix)
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {"PYTHONPATH": ":".join(site), "NUMBA_CACHE_DIR": str(wd), "PYTHONDONTWRITEBYTECODE": "1",
           "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}  # fmt: skip
    if (
        os.geteuid() == 0
        and sandbox.isolation.uid_drop
        and not _traversable_by_others(base / "bin")
    ):
        mnt = wd / "py"
        mnt.mkdir(exist_ok=True)
        return [str(mnt / "bin" / exe)], env, (str(base), str(mnt))
    return [str(base / "bin" / exe)], env, None


def _kill_group(pgid: int) -> None:
    # unshare --kill-child takes the whole pid namespace down when its child (pid 1) dies
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


@functools.lru_cache(maxsize=1)
def default_sandbox() -> Sandbox:
    """A process-wide contained sandbox (raises :class:`IsolationError` without containment)."""
    return Sandbox()
