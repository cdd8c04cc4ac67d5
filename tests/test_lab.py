"""``memlab lab`` (issue 20, item 5): JupyterLab on the notebooks folder with memlab's
environment as the kernel. The command line is built by pure functions (checked here without a
server); the kernel spec is resolved by jupyter_client itself; the command runs a fake
``jupyterlab`` package in a real process (it prints what it was started with) and stops with the
``lab`` extra named when JupyterLab is missing. No real JupyterLab server is started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlab.cli import app
from memlab.errors import InvalidInput
from memlab.home import Home
from memlab.lab import (KERNEL_DISPLAY, LabUnavailable, check_installed, kernel_spec,
                        lab_argv, lab_command, missing_packages)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    monkeypatch.delenv("MEMLAB_HOME", raising=False)
    monkeypatch.chdir(root)
    return root


def test_the_argv_runs_this_python_rooted_at_the_project_on_its_notebooks(tmp_path):
    argv = lab_argv(python="/py/bin/python", root=tmp_path, open_dir="notebooks", port=8899,
                    no_browser=True, extra=["--ServerApp.ip=127.0.0.1"])
    assert argv == ["/py/bin/python", "-m", "jupyterlab", f"--ServerApp.root_dir={tmp_path}",
                    "--LabApp.default_url=/lab/tree/notebooks", "--port=8899", "--no-browser",
                    "--ServerApp.ip=127.0.0.1"]
    assert lab_argv(python="p", root=tmp_path, open_dir="") == \
        ["p", "-m", "jupyterlab", f"--ServerApp.root_dir={tmp_path}"]
    for bad in (0, 65536, True, "8888"):
        with pytest.raises(InvalidInput, match="port: a TCP port"):
            lab_argv(python="p", root=tmp_path, open_dir="", port=bad)


def test_the_command_of_a_home(project, tmp_path):
    home = Home(project, "pyproject.toml")
    cmd = lab_command(home=home, python="/py/bin/python", environ={"JUPYTER_PATH": "/a"})
    assert cmd.root == project and cmd.notebooks == project / "notebooks"
    assert cmd.argv[3:5] == [f"--ServerApp.root_dir={project}",
                             "--LabApp.default_url=/lab/tree/notebooks"]
    kernels = project / ".cache" / "memlab" / "jupyter"
    assert cmd.kernels == kernels
    assert cmd.env == {"JUPYTER_PATH": os.pathsep.join([str(kernels), "/a"])}
    spec = json.loads((kernels / "kernels" / "python3" / "kernel.json").read_text())
    assert spec == kernel_spec("/py/bin/python")
    assert spec["argv"][:3] == ["/py/bin/python", "-m", "ipykernel_launcher"]
    # notebooks outside the home: their parent is the root
    other = tmp_path / "elsewhere" / "nbs"
    other.mkdir(parents=True)
    cmd = lab_command(home=home, notebooks=other, python="p", environ={})
    assert cmd.root == other.parent and cmd.argv[4] == "--LabApp.default_url=/lab/tree/nbs"
    assert cmd.env == {"JUPYTER_PATH": str(kernels)}
    with pytest.raises(InvalidInput, match="notebooks: must be a folder"):
        lab_command(home=home, notebooks=tmp_path / "missing", python="p")
    (project / "notebooks").rmdir()
    with pytest.raises(InvalidInput, match="no notebooks folder in the memlab home"):
        lab_command(home=home, python="p")


def test_as_root_a_note_names_allow_root(project):
    home = Home(project, "pyproject.toml")
    root = lab_command(home=home, python="p", environ={}, euid=0)
    assert root.notes == ("note: running as root, which JupyterLab refuses unless told: "
                          "memlab lab -- --allow-root",)
    assert root.describe().splitlines()[-1] == root.notes[0]
    assert lab_command(home=home, python="p", environ={}, euid=0,
                       extra=["--allow-root"]).notes == ()
    assert lab_command(home=home, python="p", environ={}, euid=1000).notes == ()


def test_jupyter_finds_memlabs_kernel_before_any_other_python3(project, monkeypatch, tmp_path):
    """A user-wide python3 kernel of another Python (on JUPYTER_PATH after memlab's folder, as
    ~/.local/share/jupyter is) loses to memlab's: the notebooks run in memlab's environment."""
    from jupyter_client.kernelspec import KernelSpecManager

    theirs = tmp_path / "user" / "kernels" / "python3"
    theirs.mkdir(parents=True)
    (theirs / "kernel.json").write_text(json.dumps(
        {"argv": ["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
         "display_name": "Python 3", "language": "python"}), encoding="utf-8")
    cmd = lab_command(home=Home(project, "pyproject.toml"), python=sys.executable,
                      environ={"JUPYTER_PATH": str(tmp_path / "user")})
    monkeypatch.setenv("JUPYTER_PATH", cmd.env["JUPYTER_PATH"])
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.argv[0] == sys.executable and spec.display_name == KERNEL_DISPLAY
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "user"))            # without memlab's
    assert KernelSpecManager().get_kernel_spec("python3").argv[0] == "/usr/bin/python3"


def test_without_jupyterlab_the_command_names_the_extra(project, monkeypatch):
    monkeypatch.setitem(sys.modules, "jupyterlab", None)       # as if it were not installed
    assert "jupyterlab" in missing_packages()
    with pytest.raises(LabUnavailable, match=r"pip install 'memlab\[lab\]'"):
        check_installed()
    res = CliRunner().invoke(app, ["lab", "--no-browser"])
    assert res.exit_code == 2
    assert "memlab lab needs jupyterlab" in res.output and "memlab[lab]" in res.output
    dry = CliRunner().invoke(app, ["lab", "--dry-run", "--port", "8899"])
    assert dry.exit_code == 0
    assert f"-m jupyterlab --ServerApp.root_dir={project}" in dry.output
    assert "--port=8899" in dry.output and "not installed: jupyterlab" in dry.output


def test_the_command_starts_jupyterlab_with_memlabs_kernel_path(project, tmp_path):
    """A real process: ``memlab lab`` with a fake ``jupyterlab`` package first on the path, which
    prints the arguments and JUPYTER_PATH it was started with, then exits."""
    fake = tmp_path / "fake" / "jupyterlab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("", encoding="utf-8")
    (fake / "__main__.py").write_text(
        "import json, os, sys\n"
        "print(json.dumps({'argv': sys.argv[1:], 'exe': sys.executable,\n"
        "                  'path': os.environ['JUPYTER_PATH']}))\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), str(ROOT)])}
    env.pop("MEMLAB_HOME", None)
    env.pop("JUPYTER_PATH", None)
    out = subprocess.run([sys.executable, "-m", "memlab.cli", "lab", "--no-browser", "--port",
                          "8899", "--", "--ServerApp.ip=127.0.0.1"], cwd=project, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"JupyterLab on {project / 'notebooks'} (root {project})"
    assert ("--allow-root" in lines[3]) == (os.geteuid() == 0)      # the note, as root
    got = json.loads(lines[-1])
    assert got["argv"] == [f"--ServerApp.root_dir={project}",
                           "--LabApp.default_url=/lab/tree/notebooks", "--port=8899",
                           "--no-browser", "--ServerApp.ip=127.0.0.1"]
    assert got["path"] == str(project / ".cache" / "memlab" / "jupyter")
    assert Path(got["exe"]).resolve() == Path(sys.executable).resolve()


@pytest.mark.skipif(sys.modules.get("jupyterlab") is None and
                    __import__("importlib").util.find_spec("jupyterlab") is None,
                    reason="jupyterlab is not installed (the lab extra)")
def test_python_m_jupyterlab_is_jupyterlabs_entry_point():
    """With the extra installed: the module the argv runs is JupyterLab's (prints its version)."""
    out = subprocess.run([sys.executable, "-m", "jupyterlab", "--version"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip()[0].isdigit(), out.stderr
