"""The sandbox contains hostile candidates: timeouts, OOM, segfaults, network, secrets, fork
bombs and compiler hangs (each a few seconds). Skips, with the reason, without containment."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from cuda_analyst.sandbox import SANDBOX_UID, SandboxLimits

pytestmark = pytest.mark.skipif(not shutil.which("gcc"), reason="no gcc on PATH")


@pytest.fixture(autouse=True)
def _clean_workdirs(sandbox, monkeypatch):
    """Remove the sandbox directories these tests create directly."""
    made = []
    orig = sandbox.workdir

    def workdir():
        d = orig()
        made.append(d)
        return d

    monkeypatch.setattr(sandbox, "workdir", workdir)
    yield
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def build(sandbox, src: str) -> Path:
    wd = sandbox.workdir()
    (wd / "prog.c").write_text(src)
    sandbox.give(wd / "prog.c")
    r = sandbox.run(
        ["gcc", "-O1", "prog.c", "-o", "prog"],
        cwd=wd,
        timeout=30,
        limits=SandboxLimits(address_space=None),
    )
    assert r.returncode == 0, r.stderr
    return wd


def survivors(wd: Path) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.readlink(p / "cwd").startswith(str(wd)):
                    out.append(int(p.name))
            except OSError:
                continue
    return out


def test_isolation_uid_drop_and_pid_namespace(contained_sandbox):
    sandbox = contained_sandbox
    wd = sandbox.workdir()
    r = sandbox.run(["/bin/sh", "-c", "id -u; echo $$"], cwd=wd, timeout=10)
    uid, pid = r.stdout.split()
    assert pid == "1"
    if os.geteuid() == 0:
        assert uid == str(SANDBOX_UID)
    assert r.isolation["pid_namespace"] and r.isolation["no_network"]


def test_fork_bomb_hits_process_limit_and_nothing_survives(contained_sandbox):
    sandbox = contained_sandbox
    if os.geteuid() == 0:
        assert sandbox.isolation.uid_drop, (
            "RLIMIT_NPROC does not bind root: the uid drop is required"
        )
    wd = build(
        sandbox,
        r"""#include <stdio.h>
#include <unistd.h>
int main(void) { int ok = 0, failed = 0;
  for (int i = 0; i < 256; i++) { pid_t p = fork(); if (p == 0) { sleep(30); _exit(0); } if (p < 0) { failed = 1; break; } ok++; }
  printf("%d %d\n", ok, failed); fflush(stdout); sleep(1); return 0; }
""",
    )
    r = sandbox.run(["./prog"], cwd=wd, timeout=20, limits=SandboxLimits(nproc=32))
    ok, failed = map(int, r.stdout.split())
    assert failed == 1 and ok < 32, r.stdout
    time.sleep(0.5)
    assert survivors(wd) == []


def test_network_and_secrets_are_unreachable(contained_sandbox):
    sandbox = contained_sandbox
    secret_dir = Path(tempfile.mkdtemp())
    secret = secret_dir / "secret.txt"
    secret.write_text("TOPSECRET")
    secret.chmod(0o600)
    secret_dir.chmod(0o755)
    os.environ["CUDA_ANALYST_TEST_SECRET"] = "TOPSECRET"
    try:
        wd = build(
            sandbox,
            f"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
int main(void) {{
  const char* e = getenv("CUDA_ANALYST_TEST_SECRET"); printf("env=%s\\n", e ? e : "none");
  FILE* f = fopen("{secret}", "r"); printf("file=%s\\n", f ? "open" : "denied");
  int s = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in a; memset(&a, 0, sizeof a);
  a.sin_family = AF_INET; a.sin_port = htons(80); inet_pton(AF_INET, "1.1.1.1", &a.sin_addr);
  printf("connect=%d\\n", s < 0 ? -2 : connect(s, (struct sockaddr*)&a, sizeof a)); return 0; }}
""",
        )
        r = sandbox.run(["./prog"], cwd=wd, timeout=10)
    finally:
        del os.environ["CUDA_ANALYST_TEST_SECRET"]
    assert "env=none" in r.stdout
    if os.geteuid() == 0:
        assert "file=denied" in r.stdout
    assert "connect=-1" in r.stdout or "connect=-2" in r.stdout
    assert "TOPSECRET" not in r.stdout


def _kernel(body: str) -> str:
    return (
        "#include <stdlib.h>\n#include <string.h>\nvoid kernel(const float* x, const float* y, float* out, int n) {\n"
        + body
        + "\n}\n"
    )


@pytest.fixture()
def fast_evaluator(sandbox):
    from cuda_analyst.backends import CBackend
    from cuda_analyst.evaluator import Evaluator
    from cuda_analyst.tasks import get_task

    return Evaluator(get_task("vector_add"), CBackend(sandbox=sandbox), timeouts=(3.0, 2.0))


def test_endless_loop_times_out(fast_evaluator):
    t0 = time.perf_counter()
    r = fast_evaluator.evaluate(_kernel("volatile int k = 1; while (k) {}"))
    assert r.status == "COMPILE" and r.error["reason"] == "Execution Timeout"
    assert time.perf_counter() - t0 < 10


def test_huge_allocation_is_out_of_memory(fast_evaluator):
    r = fast_evaluator.evaluate(
        _kernel(
            "volatile char* p = malloc((size_t)8 << 30);\n"
            "for (size_t i = 0; i < ((size_t)8 << 30); i += 4096) p[i] = 1;\nout[0] = p[4096];"
        )
    )
    assert r.status == "COMPILE" and r.error["reason"] == "Out of Memory"


def test_segfault_is_nonzero_exit(fast_evaluator):
    r = fast_evaluator.evaluate(_kernel("*(volatile int*)0 = 1;"))
    assert r.status == "COMPILE" and r.error["reason"] == "Execution Failure: Nonzero Exit"
    assert r.isolation.get("uid_drop") is not None


def test_compiler_hang_hits_compile_timeout(fast_evaluator):
    d = Path(tempfile.mkdtemp())
    d.chmod(0o755)
    fifo = d / "hang.h"
    os.mkfifo(fifo, 0o666)
    t0 = time.perf_counter()
    r = fast_evaluator.evaluate(f'#include "{fifo}"\n' + _kernel("out[0] = 0;"))
    assert r.status == "FAIL" and r.error["reason"] == "Compilation Timeout"
    assert time.perf_counter() - t0 < 15


def test_refuses_without_containment(monkeypatch):
    import cuda_analyst.sandbox as sb
    from cuda_analyst.errors import IsolationError

    monkeypatch.setattr(
        sb, "probe_isolation", lambda: sb.Isolation(False, False, False, (), "no unshare")
    )
    with pytest.raises(IsolationError, match="allow_unisolated"):
        sb.Sandbox()
    assert sb.Sandbox(allow_unisolated=True).isolation.contained is False


def test_nvcc_compile_only(sandbox):
    if not shutil.which("nvcc"):
        pytest.skip("nvcc not on PATH")
    from cuda_analyst.backends import CudaCompileOnlyBackend

    be = CudaCompileOnlyBackend(sandbox=sandbox)
    ok = be.compile(
        "__global__ void add(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += x[i]; }\n"
    )
    assert ok.ok, ok.log
    bad = be.compile("__global__ void add(float* y) { y[0] = }\n")
    assert not bad.ok and "error" in bad.log and bad.reason == "Compilation Error"
    _ = subprocess  # keep import for type checkers


def test_nvrtc_compile_only(sandbox):
    from cuda_analyst.backends import NvrtcCompileOnlyBackend, find_nvrtc

    if find_nvrtc() is None:
        pytest.skip("libnvrtc not found (nvidia-cuda-nvrtc wheel)")
    be = NvrtcCompileOnlyBackend(sandbox=sandbox)
    ok = be.compile(
        'extern "C" __global__ void add(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] += x[i]; }\n'
    )
    assert ok.ok, ok.log
    bad = be.compile("__global__ void add(float* y) { y[0] = }\n")
    assert not bad.ok and bad.reason == "Compilation Error" and "error" in bad.log
