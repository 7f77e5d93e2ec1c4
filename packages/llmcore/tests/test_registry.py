"""The registry finds a method registered by a real (test) distribution on sys.path."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from llmcore.errors import RegistryError
from llmcore.registry import MethodInfo, discover, get_method


def _install_fake_dist(root, name="toy-method", value="toy_method:METHOD", body=None) -> None:
    mod = value.split(":")[0]
    (root / f"{mod}.py").write_text(
        body
        or textwrap.dedent(f"""
        from llmcore.registry import MethodInfo

        def run():
            return {{"score": 0.5}}

        METHOD = MethodInfo(name="{name}", paper="A Toy Paper (ICML 2026)",
                            summary="does toy things", demo="{mod}:run")
    """)
    )
    info = root / f"{mod}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {mod}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[llmcore.methods]\n{name} = {value}\n")


def test_discovers_registered_method(tmp_path, monkeypatch) -> None:
    _install_fake_dist(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    methods = discover()
    assert "toy-method" in methods
    info = get_method("toy-method")
    assert info.paper.startswith("A Toy Paper")
    assert info.load_demo()() == {"score": 0.5}


def test_cli_lists_and_runs_demo(tmp_path) -> None:
    _install_fake_dist(tmp_path)
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); from llmcore.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    out = subprocess.run([sys.executable, "-c", code, "list"], capture_output=True, text=True)
    assert out.returncode == 0 and "toy-method" in out.stdout and "A Toy Paper" in out.stdout
    out = subprocess.run(
        [sys.executable, "-c", code, "demo", "toy-method"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "score" in out.stdout and "0.5" in out.stdout
    out = subprocess.run(
        [sys.executable, "-c", code, "demo", "missing"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "no method named 'missing'" in out.stderr


def test_mismatched_name_is_an_error(tmp_path, monkeypatch) -> None:
    _install_fake_dist(
        tmp_path,
        name="other-name",
        value="toy_method2:METHOD",
        body=textwrap.dedent("""
        from llmcore.registry import MethodInfo
        METHOD = MethodInfo(name="toy-two", paper="P", summary="S", demo="toy_method2:run")
    """),
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError, match="must match"):
        discover()


def test_method_info_validation() -> None:
    with pytest.raises(RegistryError, match="lowercase"):
        MethodInfo(name="Bad_Name", paper="p", summary="s", demo="m:f")
    with pytest.raises(RegistryError, match="module:function"):
        MethodInfo(name="ok", paper="p", summary="s", demo="nocolon")
