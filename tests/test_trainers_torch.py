"""perfkit in the torch trainers: ``perfkit_torch.lightning.PerfkitProfiler`` in a real
``lightning.Trainer`` and ``perfkit_torch.transformers.PerfkitCallback`` in a real
``transformers.Trainer`` (with accelerate), on the CPU.

Each trains a small MLP for a few dozen optimizer steps and checks: one saved run per window;
the window's step count, a step being one optimizer step (gradient accumulation included); the
parameter total of the ``layers`` view (as ``perfkit report RUN --views layers`` reads it)
equal to the model's own count; and that a failure inside perfkit (a write that raises
``ENOSPC``; an unwritable folder, with the capabilities that let root write anywhere dropped)
leaves training running to its last step with one warning, and the profile kept on disk.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

import perfkit_core
from tests.trainer_checks import unprivileged

ROOT = Path(__file__).resolve().parents[1]
FEATURES, HIDDEN, CLASSES, BATCH = 16, 32, 4, 8


def _data(n: int) -> Any:
    import torch

    generator = torch.Generator().manual_seed(0)
    return torch.randn(n, FEATURES, generator=generator), torch.randint(
        0, CLASSES, (n,), generator=generator
    )


def _perfkit_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith("perfkit:")]


def _layers_total(run_dir: Path) -> float:
    """The parameter total ``perfkit report RUN --views layers`` reads from the saved run: its
    outermost layers' parameters with their children's (run through the command line)."""
    from perfkit_core.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["report", str(run_dir), "--views", "layers", "--format", "json"])
    assert code == 0
    rows = json.loads(out.getvalue())["tables"]["layers"]["rows"]
    return float(sum(r["params_with_children"] for r in rows if r["depth"] == 1 and r.get("path")))


def _model_calls_per_step(run_dir: Path) -> set[int]:
    """How many times each recorded step called the model (its layer span), as a set."""
    events = perfkit_core.load(run_dir).events
    calls = events[events["name"].astype(str) == "nn.Module: MLP_0"]
    return set(calls.groupby("step").size().tolist())


def _served(folder: Path) -> list[str]:
    """The runs ``perfkit serve folder`` lists, by id, each ready to open."""
    from perfkit_core.serve.catalog import Catalog

    entries = Catalog(folder).scan()
    assert all(e.status == "ready" for e in entries), entries
    return [e.id for e in entries]


def _steps(run_dir: Path) -> int:
    return len(perfkit_core.load(run_dir).summary("steps"))


# -- Lightning ---------------------------------------------------------------------------------


def _lightning_fit(
    tmp_path: Path,
    profiler: Any,
    *,
    max_steps: int,
    accumulate: int = 1,
    package: str = "lightning",
) -> tuple[Any, Any]:
    """Fit a small MLP with ``lightning.Trainer(profiler=profiler)`` (``package``: or
    ``pytorch_lightning``'s); (trainer, module)."""
    import importlib

    import torch

    lightning = importlib.import_module(package)
    loggers = "lightning.pytorch.loggers" if package == "lightning" else f"{package}.loggers"
    CSVLogger = importlib.import_module(loggers).CSVLogger

    class MLP(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES)
            )

        def forward(self, x: Any) -> Any:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    x, y = _data(BATCH * max_steps * accumulate)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    module = MLP()
    trainer = lightning.Trainer(
        max_steps=max_steps,
        accumulate_grad_batches=accumulate,
        accelerator="cpu",
        devices=1,
        logger=CSVLogger(tmp_path / "logs"),
        profiler=profiler,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(module, loader)
    return trainer, module


@pytest.mark.parametrize("accumulate", [1, 3])
def test_lightning_saves_one_run_of_the_window(tmp_path: Path, accumulate: int) -> None:
    pytest.importorskip("lightning")
    from perfkit_torch.lightning import PerfkitProfiler

    profiler = PerfkitProfiler(tmp_path / "runs", start_step=4, stop_step=9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer, module = _lightning_fit(tmp_path, profiler, max_steps=24, accumulate=accumulate)
    assert trainer.global_step == 24
    assert trainer.profiler is profiler
    assert not _perfkit_warnings(caught)
    runs = profiler.runs
    assert len(runs) == 1 and not profiler.failures
    run = runs[0]
    # named after the trainer's log folder, numbered by the last optimizer step recorded
    assert run.parent == tmp_path / "runs"
    assert run.name == "lightning_logs-version_0.step9"
    assert _steps(run) == 6  # optimizer steps 4 to 9
    # every micro-batch of a step is in it: one forward of the MLP per batch
    assert _model_calls_per_step(run) == {accumulate}
    assert _layers_total(run) == sum(p.numel() for p in module.parameters())
    # the summary Lightning prints at the end of fit is perfkit's headline of the run
    summary = profiler.summary()
    assert str(run) in summary and "Step time (mean)" in summary


def test_lightning_closure_counts_as_forward_backward_and_its_update(tmp_path: Path) -> None:
    """Lightning runs the forward and backward inside ``Optimizer.step`` (its closure): the
    optimizer phase is the step's update after the model's work, and the zero_grad inside it,
    recomputed here from the run's raw events; forward and backward are phases of their own."""
    pytest.importorskip("lightning")
    import numpy as np

    from perfkit_torch.lightning import PerfkitProfiler

    profiler = PerfkitProfiler(tmp_path / "runs", start_step=3, stop_step=6)
    _lightning_fit(tmp_path, profiler, max_steps=8)
    run = perfkit_core.load(profiler.runs[0])
    ev = run.events
    name = ev["name"].astype(str).to_numpy()
    kind = ev["kind"].astype(str).to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    parent = ev["parent"].to_numpy()

    def inside(row: int) -> np.ndarray:
        return np.flatnonzero((start >= start[row]) & (end <= end[row]) & (parent >= 0))

    steps = np.flatnonzero(kind == "step")
    expected = 0
    for closure in np.flatnonzero(name == "Optimizer.step#SGD.step"):
        rows = inside(closure)
        model = rows[
            (kind[rows] == "backward") | np.char.startswith(name[rows].astype(str), "nn.Module: ")
        ]
        assert len(model)  # the closure ran the model
        expected += end[closure] - end[model].max()
    expected += (end - start)[name == "Optimizer.zero_grad#SGD.zero_grad"].sum()
    phases = run.summary("model").set_index("name")
    assert phases.loc["optimizer", "per_step_ns"] * len(steps) == pytest.approx(
        expected, abs=len(steps)
    )
    assert phases.loc["forward", "per_step_ns"] > 0 and phases.loc["backward", "per_step_ns"] > 0
    share = phases.loc["optimizer", "per_step_ns"] / phases.loc["step", "per_step_ns"]
    assert share < 0.5
    for finding in run.advise():
        assert (
            finding.id != "optimizer" or finding.saving_ns < phases.loc["optimizer", "per_step_ns"]
        )


def test_lightning_runs_into_the_log_folder_by_default(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    from perfkit_torch.lightning import PerfkitProfiler

    profiler = PerfkitProfiler(start_step=2, stop_step=3)
    trainer, _ = _lightning_fit(tmp_path, profiler, max_steps=6)
    (run,) = profiler.runs
    assert run.parent == Path(trainer.log_dir)
    assert _steps(run) == 2
    # `perfkit serve logs` lists it among the trainer's logs: the one run there
    assert _served(tmp_path / "logs") == [run.relative_to(tmp_path / "logs").as_posix()]


def test_lightning_fit_ending_inside_the_window_keeps_what_it_recorded(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    from perfkit_torch.lightning import PerfkitProfiler

    profiler = PerfkitProfiler(tmp_path / "runs", start_step=5, stop_step=50)
    _lightning_fit(tmp_path, profiler, max_steps=8)
    (run,) = profiler.runs
    assert _steps(run) == 4  # steps 5 to 8, and no step after the last
    assert run.name == "lightning_logs-version_0.step8"


def test_pytorch_lightning_trainer_takes_its_own_profiler(tmp_path: Path) -> None:
    """``pytorch_lightning.Trainer`` (Lightning under its older package name) accepts only a
    profiler built on its own interface: ``perfkit_torch.pytorch_lightning.PerfkitProfiler``
    is that, and saves the same run."""
    pytest.importorskip("pytorch_lightning")
    import pytorch_lightning

    from perfkit_torch.pytorch_lightning import PerfkitProfiler

    profiler = PerfkitProfiler(tmp_path / "runs", (3, 6))
    assert isinstance(profiler, pytorch_lightning.profilers.Profiler)
    trainer, module = _lightning_fit(tmp_path, profiler, max_steps=10, package="pytorch_lightning")
    assert trainer.profiler is profiler
    (run,) = profiler.runs
    assert run.name == "lightning_logs-version_0.step6" and _steps(run) == 4
    assert _layers_total(run) == sum(p.numel() for p in module.parameters())
    assert str(run) in profiler.summary()
    # without the package: one line that says what to install
    code = (
        "import sys; sys.modules['pytorch_lightning'] = None\n"
        "import perfkit_torch.pytorch_lightning as pl\n"
        "try:\n"
        "    pl.PerfkitProfiler\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip().endswith("pip install pytorch-lightning")
    assert len(out.stdout.strip().splitlines()) == 1


_DDP_SCRIPT = """
import json
import sys
from pathlib import Path

import lightning
import torch
from lightning.pytorch.loggers import CSVLogger

from perfkit_torch.lightning import PerfkitProfiler


class MLP(lightning.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
        )

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    torch.set_num_threads(1)
    out = Path(sys.argv[1])
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(256, 16, generator=g), torch.randint(0, 4, (256,), generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    profiler = PerfkitProfiler(out / "runs", (3, 5))
    trainer = lightning.Trainer(
        max_steps=8, accelerator="cpu", devices=2, strategy="ddp",
        logger=CSVLogger(out / "logs"), profiler=profiler, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=out,
    )
    trainer.fit(MLP(), loader)
    runs = [str(r) for r in profiler.runs]
    said = {"rank": trainer.global_rank, "runs": runs}
    # One file per rank: the ranks share stdout, where their lines can interleave.
    (out / f"said-rank{trainer.global_rank}.json").write_text(json.dumps(said))
"""


def test_lightning_ddp_saves_a_run_per_rank(tmp_path: Path) -> None:
    """Two DDP processes on the CPU (gloo), as Lightning launches them: each rank saves its
    own run, named with its rank, which records that rank, the world size and the gradient
    all-reduce of each step."""
    pytest.importorskip("lightning")
    script = tmp_path / "fit_ddp.py"
    script.write_text(_DDP_SCRIPT)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    files = [tmp_path / "out" / f"said-rank{rank}.json" for rank in (0, 1)]
    assert all(f.is_file() for f in files), out.stderr[-3000:]
    said = [json.loads(f.read_text()) for f in files]
    assert [r["rank"] for r in said] == [0, 1]
    for rank, result in enumerate(said):
        (run_dir,) = (tmp_path / r for r in result["runs"])
        assert run_dir.name == f"lightning_logs-version_0-rank{rank}.step5"
        run = perfkit_core.load(run_dir)
        assert run.meta["rank"] == rank and run.meta["world_size"] == 2
        assert len(run.summary("steps")) == 3
        names = run.events["name"].astype(str)
        steps_with_allreduce = run.events.loc[names == "c10d::allreduce_", "step"].nunique()
        assert steps_with_allreduce == 3


# -- the HF Trainer ------------------------------------------------------------------------------


def _hf_train(
    tmp_path: Path, callback: Any, *, max_steps: int, accumulate: int = 1
) -> tuple[Any, Any]:
    """Train a small MLP with ``transformers.Trainer(callbacks=[callback])``; (trainer, model)."""
    import torch
    from transformers import Trainer, TrainingArguments

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES)
            )

        def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
            logits = self.net(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    x, y = _data(BATCH * max_steps * accumulate)
    data = [{"x": x[i], "labels": y[i]} for i in range(len(x))]
    args = TrainingArguments(
        output_dir=str(tmp_path / "hf_out"),
        max_steps=max_steps,
        per_device_train_batch_size=BATCH,
        gradient_accumulation_steps=accumulate,
        learning_rate=0.01,
        logging_strategy="no",
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    model = MLP()
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])
    trainer.train()
    return trainer, model


@pytest.mark.parametrize("accumulate", [1, 3])
def test_hf_trainer_saves_one_run_of_the_window(tmp_path: Path, accumulate: int) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from perfkit_torch.transformers import PerfkitCallback

    callback = PerfkitCallback(tmp_path / "runs", start_step=4, stop_step=9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer, model = _hf_train(tmp_path, callback, max_steps=24, accumulate=accumulate)
    assert trainer.state.global_step == 24
    assert not _perfkit_warnings(caught)
    runs = callback.runs
    assert len(runs) == 1 and not callback.failures
    run = runs[0]
    assert run.name == f"{tmp_path.name}-hf_out.step9"
    assert _steps(run) == 6
    assert _model_calls_per_step(run) == {accumulate}
    assert _layers_total(run) == sum(p.numel() for p in model.parameters())
    assert "Step time (mean)" in callback.headline()


def test_hf_trainer_runs_into_its_output_folder_by_default(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from perfkit_torch.transformers import PerfkitCallback

    callback = PerfkitCallback(start_step=2, stop_step=3)
    _hf_train(tmp_path, callback, max_steps=6)
    (run,) = callback.runs
    assert run.parent == tmp_path / "hf_out" / "perfkit"
    assert _steps(run) == 2
    assert _served(tmp_path / "hf_out") == ["perfkit/" + run.name]


# -- windows, as every integration names them ---------------------------------------------------


@pytest.mark.parametrize("trainer", ["lightning", "transformers"])
def test_several_windows_save_a_run_each(tmp_path: Path, trainer: str) -> None:
    """``profile_steps`` takes a list of windows, as the Paddle and Keras integrations' do: one
    run each, each of its own steps; a window the training ends inside keeps what it
    recorded, and the one after it is never started."""
    windows = [(2, 4), (7, 8), (11, 30), (40, 41)]
    if trainer == "lightning":
        pytest.importorskip("lightning")
        from perfkit_torch.lightning import PerfkitProfiler as Integration

        train = _lightning_fit
    else:
        pytest.importorskip("transformers")
        pytest.importorskip("accelerate")
        from perfkit_torch.transformers import PerfkitCallback as Integration

        train = _hf_train
    integration = Integration(tmp_path / "runs", windows)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(tmp_path, integration, max_steps=13)
    assert not _perfkit_warnings(caught) and not integration.failures
    runs = sorted(integration.runs, key=lambda r: int(r.name.rsplit("step", 1)[1]))
    assert [int(r.name.rsplit("step", 1)[1]) for r in runs] == [4, 8, 13]
    assert [_steps(r) for r in runs] == [3, 2, 3]
    if trainer == "lightning":
        # the summary at the end of fit heads every run
        assert all(str(r) in integration.summary() for r in runs)


def test_every_integration_takes_the_same_window_arguments() -> None:
    """One window named ``(start, stop)`` as ``profile_steps``, or ``start_step``/``stop_step``
    (MindSpore's names): the same windows; both at once is refused at construction, before
    any training."""
    from perfkit_core.capture import window_arguments

    assert window_arguments(None, None, None, (6, 15)) == [(6, 15)]
    assert window_arguments((4, 9), None, None, (6, 15)) == [(4, 9)]
    assert window_arguments(None, 4, 9, (6, 15)) == [(4, 9)]
    # one end given: the default's length from a start, the default's start before a stop
    assert window_arguments(None, 20, None, (6, 15)) == [(20, 29)]
    assert window_arguments(None, None, 12, (6, 15)) == [(6, 12)]
    assert window_arguments(None, None, 3, (6, 15)) == [(3, 3)]
    with pytest.raises(ValueError, match="one way"):
        window_arguments((4, 9), 4, None, (6, 15))
    with pytest.raises(ValueError, match="whole numbers"):
        window_arguments(None, 2.5, None, (6, 15))
    with pytest.raises(ValueError, match="need 1 <= start <= stop"):
        window_arguments(None, 0, 3, (6, 15))
    pytest.importorskip("lightning")
    from perfkit_torch.lightning import PerfkitProfiler

    assert PerfkitProfiler("runs", (4, 9)).window.windows == [(4, 9)]
    assert PerfkitProfiler("runs", start_step=4, stop_step=9).window.windows == [(4, 9)]
    assert PerfkitProfiler("runs").window.windows == [(6, 15)]
    with pytest.raises(ValueError, match="one way"):
        PerfkitProfiler("runs", (4, 9), stop_step=9)


# -- failures inside perfkit --------------------------------------------------------------------


def _integration(trainer: str, directory: Path) -> Any:
    if trainer == "lightning":
        pytest.importorskip("lightning")
        from perfkit_torch.lightning import PerfkitProfiler

        return PerfkitProfiler(directory, start_step=3, stop_step=5)
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from perfkit_torch.transformers import PerfkitCallback

    return PerfkitCallback(directory, start_step=3, stop_step=5)


@pytest.mark.parametrize("trainer", ["lightning", "transformers"])
def test_a_full_disk_leaves_training_running_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trainer: str
) -> None:
    integration = _integration(trainer, tmp_path / "runs")
    import perfkit_torch.handler

    def full(*args: Any, **kwargs: Any) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(perfkit_torch.handler, "claim_run_dir", full)
    train = _lightning_fit if trainer == "lightning" else _hf_train
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done, _ = train(tmp_path, integration, max_steps=12)
    assert (done.global_step if trainer == "lightning" else done.state.global_step) == 12
    found = _perfkit_warnings(caught)
    assert len(found) == 1 and "disk full" in found[0], found
    assert integration.runs == []
    ((kept, reason),) = integration.failures
    # the profile is not lost: the native trace is kept elsewhere, whole
    assert kept.is_file() and kept.stat().st_size > 0 and "disk full" in reason
    shutil.rmtree(kept.parent, ignore_errors=True)


UNWRITABLE_SCRIPT = """
import json, sys, warnings
from pathlib import Path
sys.path.insert(0, {root!r})
from tests import test_trainers_torch as t
from perfkit_torch.{module} import {name} as Integration

tmp = Path({tmp!r})
integration = Integration(str(tmp / "locked" / "runs"), start_step=3, stop_step=5)
train = t._lightning_fit if {name!r} == "PerfkitProfiler" else t._hf_train
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    done, _ = train(tmp, integration, max_steps=12)
steps = getattr(done, "global_step", None) or done.state.global_step
print("RESULT " + json.dumps({{
    "steps": steps,
    "warnings": t._perfkit_warnings(caught),
    "runs": [str(r) for r in integration.runs],
    "failures": [[str(p), r] for p, r in integration.failures],
}}))
"""


@pytest.mark.parametrize(
    ("trainer", "module", "name"),
    [
        ("lightning", "lightning", "PerfkitProfiler"),
        ("transformers", "transformers", "PerfkitCallback"),
    ],
)
def test_an_unwritable_folder_leaves_training_running_with_one_warning(
    tmp_path: Path, trainer: str, module: str, name: str
) -> None:
    _integration(trainer, tmp_path / "unused")  # skips when the trainer is missing
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    tmp_path.chmod(0o777)
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            UNWRITABLE_SCRIPT.format(root=str(ROOT), module=module, name=name, tmp=str(tmp_path))
        )
    )
    command = unprivileged([sys.executable, str(script)])
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, check=False)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    result = json.loads(lines[-1].split(" ", 1)[1])
    assert result["steps"] == 12
    assert len(result["warnings"]) == 1, result["warnings"]
    assert "cannot create a run folder" in result["warnings"][0]
    assert result["runs"] == []
    ((kept, _),) = result["failures"]
    assert Path(kept).is_file() and Path(kept).stat().st_size > 0
    assert not (locked / "runs").exists()
    shutil.rmtree(Path(kept).parent, ignore_errors=True)


def test_the_modules_import_without_the_trainers() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('lightning', 'transformers'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import perfkit_torch.lightning, perfkit_torch.transformers\n"
        "for module, name in ((perfkit_torch.lightning, 'PerfkitProfiler'),\n"
        "                     (perfkit_torch.transformers, 'PerfkitCallback')):\n"
        "    try:\n"
        "        getattr(module, name)\n"
        "    except ImportError as exc:\n"
        "        print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines == [
        "perfkit_torch.lightning.PerfkitProfiler needs Lightning, which is not installed: "
        "pip install lightning",
        "perfkit_torch.transformers.PerfkitCallback needs transformers, which is not installed: "
        "pip install transformers accelerate",
    ]
