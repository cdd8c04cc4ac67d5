"""``memlab lab``: JupyterLab on memlab's notebooks, with memlab's environment as the kernel.

What it runs: this interpreter (``sys.executable``, the environment memlab is installed in) with
``-m jupyterlab``, so the server and its kernels are memlab's environment, never another Python
found first on ``PATH``. The notebooks open with the kernel named ``python3``; a user-wide
``python3`` kernel spec of another Python would otherwise win, so memlab writes its own
``python3`` spec (this interpreter, display name ``Python 3 (memlab)``) under the memlab home's
``.cache/memlab/jupyter`` and puts that folder first on ``JUPYTER_PATH`` for the server.

The server's root is the project (the memlab home) and the file browser opens on its
``notebooks/`` folder (``--notebooks`` names another; its parent is then the root when the home
does not hold it). JupyterLab is not a dependency of memlab: it is the ``lab`` extra
(``pip install 'memlab[lab]'``); without it the command stops with that advice.

The pieces are pure functions (:func:`lab_argv`, :func:`kernel_spec`) so that tests check the
command without starting a server.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from memlab.errors import InvalidInput, MemlabError

__all__ = ["LAB_EXTRA", "REQUIRED", "LabCommand", "missing_packages", "kernel_spec",
           "write_kernel_spec", "lab_argv", "lab_command"]

#: the extra that installs what ``memlab lab`` needs
LAB_EXTRA = "lab"
#: module -> the package to install, for ``memlab lab``
REQUIRED = {"jupyterlab": "jupyterlab", "ipykernel": "ipykernel", "ipywidgets": "ipywidgets"}
#: the kernel spec's name (the notebooks' metadata names it) and what JupyterLab shows
KERNEL_NAME = "python3"
KERNEL_DISPLAY = "Python 3 (memlab)"


class LabUnavailable(MemlabError):
    """What ``memlab lab`` needs is not installed in memlab's environment."""


def _installed(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is not None      # None: import blocked (python -X, tests)
    return importlib.util.find_spec(module) is not None


def missing_packages() -> list[str]:
    """The packages of :data:`REQUIRED` this environment lacks, in that order."""
    return [pkg for mod, pkg in REQUIRED.items() if not _installed(mod)]


def check_installed() -> None:
    """:class:`LabUnavailable` naming the ``lab`` extra and the missing packages, if any."""
    missing = missing_packages()
    if missing:
        raise LabUnavailable(
            f"memlab lab needs {', '.join(missing)} in memlab's environment ({sys.executable}): "
            f"pip install 'memlab[{LAB_EXTRA}]' (from a checkout: pip install -e '.[{LAB_EXTRA}]'), "
            f"or pip install {' '.join(missing)}")


def kernel_spec(python: str | Path) -> dict:
    """The kernel spec (``kernel.json``) that runs notebooks with ``python``."""
    return {"argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": KERNEL_DISPLAY, "language": "python",
            "metadata": {"debugger": True}}


def write_kernel_spec(folder: Path, python: str | Path) -> Path:
    """Write :func:`kernel_spec` as ``<folder>/kernels/python3/kernel.json`` (``folder`` is
    what goes on ``JUPYTER_PATH``); return ``folder``. Rewritten only when it differs."""
    target = Path(folder) / "kernels" / KERNEL_NAME / "kernel.json"
    text = json.dumps(kernel_spec(python), indent=1) + "\n"
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return Path(folder)


def _check_port(port: int | None) -> None:
    if port is None:
        return
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidInput("port", "a TCP port, 1-65535", port)


def lab_argv(*, python: str | Path, root: Path, open_dir: str, port: int | None = None,
             no_browser: bool = False, extra: Sequence[str] = ()) -> list[str]:
    """The command line that starts JupyterLab: ``python -m jupyterlab`` rooted at ``root``, its
    file browser on ``open_dir`` (relative to ``root``, ``""`` for the root itself), then
    ``--port``, ``--no-browser`` and ``extra`` (passed to JupyterLab as given)."""
    _check_port(port)
    argv = [str(python), "-m", "jupyterlab", f"--ServerApp.root_dir={root}"]
    if open_dir:
        argv.append(f"--LabApp.default_url=/lab/tree/{Path(open_dir).as_posix()}")
    if port is not None:
        argv.append(f"--port={port}")
    if no_browser:
        argv.append("--no-browser")
    return argv + list(extra)


@dataclass(frozen=True)
class LabCommand:
    """What :func:`lab_command` decided: the argv, the environment changes, the root, the
    notebooks folder and the kernel spec folder."""

    argv: list[str]
    env: dict[str, str]
    root: Path
    notebooks: Path
    kernels: Path
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """Lines for the terminal: where JupyterLab opens and with which kernel, then notes."""
        return "\n".join([f"JupyterLab on {self.notebooks} (root {self.root})",
                          f"kernel: {KERNEL_DISPLAY}: {self.argv[0]} (spec in {self.kernels})",
                          f"run: {' '.join(self.argv)}", *self.notes])


def lab_command(*, home, notebooks: str | Path | None = None, port: int | None = None,
                no_browser: bool = False, extra: Sequence[str] = (),
                python: str | Path | None = None,
                environ: Mapping[str, str] | None = None, euid: int | None = None) -> LabCommand:
    """The JupyterLab command for a memlab home (:class:`memlab.home.Home`): the notebooks
    folder (default ``<home>/notebooks``; InvalidInput when it is not a folder), the root (the
    home when it holds the notebooks, else the notebooks' parent), the kernel spec folder
    (``<home>/.cache/memlab/jupyter``, written now) first on ``JUPYTER_PATH``. ``euid``: the
    user id (default this process's): as root, JupyterLab refuses to start without
    ``--allow-root``, and a note says so unless ``extra`` passes it."""
    nb = Path(notebooks).expanduser() if notebooks is not None else home.root / "notebooks"
    nb = (Path.cwd() / nb if not nb.is_absolute() else nb).resolve()
    if not nb.is_dir():
        why = ("no notebooks folder in the memlab home; pass --notebooks PATH"
               if notebooks is None else "must be a folder")
        raise InvalidInput("notebooks", why, str(nb))
    root = home.root.resolve()
    try:
        open_dir = nb.relative_to(root).as_posix()
    except ValueError:
        root, open_dir = nb.parent, nb.name
    py = Path(python) if python is not None else Path(sys.executable)
    kernels = write_kernel_spec(home.cache_dir / "jupyter", py)
    env = dict(os.environ if environ is None else environ)
    paths = [str(kernels), *[p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]]
    changes = {"JUPYTER_PATH": os.pathsep.join(dict.fromkeys(paths))}
    argv = lab_argv(python=py, root=root, open_dir="" if open_dir == "." else open_dir,
                    port=port, no_browser=no_browser, extra=extra)
    if euid is None:
        euid = os.geteuid() if hasattr(os, "geteuid") else -1
    notes = ()
    if euid == 0 and "--allow-root" not in extra:
        notes = ("note: running as root, which JupyterLab refuses unless told: "
                 "memlab lab -- --allow-root",)
    return LabCommand(argv, changes, root, nb, kernels, notes)
