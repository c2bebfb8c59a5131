"""What the trainer integrations' tests (``test_trainers_*.py``) check the same way in every
framework: the parameter total the layers view reads from a saved run, and a training script
run where it cannot write its runs' folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The capabilities root writes into any folder with, which the unwritable-folder tests drop.
WRITE_ANYWHERE = "-dac_override,-dac_read_search"


def layers_total(run: Path) -> int:
    """The model's parameter total as ``perfkit report RUN --views layers`` gives it (the
    JSON form: the model's row, with its children)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfkit_core",
            "report",
            str(run),
            "--views",
            "layers",
            "--no-advice",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["tables"]["layers"]["rows"]
    return int(next(r for r in rows if r["depth"] == 1)["params_with_children"])


def unprivileged(command: list[str]) -> list[str]:
    """``command`` as it runs without root's capability to write into any folder (``setpriv``;
    as it is for another user); skips the test where ``setpriv`` is missing."""
    if os.geteuid() != 0:
        return command
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to drop the capabilities root writes with")
    return ["setpriv", f"--bounding-set={WRITE_ANYWHERE}", f"--inh-caps={WRITE_ANYWHERE}", *command]


def fit_into_locked_folder(test_file: str, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """(what ``test_file``'s ``__main__`` printed as its last line, a JSON record of its fit;
    the temporary folder it ran with) when run unprivileged with a runs' folder inside a
    read-only one."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    spare = tmp_path / "tmp"
    spare.mkdir()
    out = subprocess.run(
        unprivileged([sys.executable, str(Path(test_file).resolve()), str(locked / "runs")]),
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=600,
        # the script imports this module as ``tests.trainer_checks``
        env=dict(
            os.environ,
            TMPDIR=str(spare),
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        ),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), spare
