"""``perfkit_paddle.hapi.PerfkitCallback`` in real ``paddle.Model.fit`` runs on the CPU: one
saved run per window, a step per optimizer step (gradient accumulation included), the layers
view's parameter total equal to Paddle's own count, and failures inside perfkit (a full disk,
an unwritable folder) that leave training running with one warning.

Run as a script (``python tests/test_trainers_paddle.py DIR``) it trains the same model with
the callback writing to DIR and prints what happened as one JSON line: the unwritable-folder
case runs it under dropped capabilities.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import perfkit_core
from tests.trainer_checks import ROOT, fit_into_locked_folder, layers_total

pytest.importorskip("paddle")

BATCH = 8
FEATURES, HIDDEN, CLASSES = 16, 32, 4


def _fit(
    directory: Path, *, windows: Any, batches: int, accumulate: int = 1, **options: Any
) -> dict[str, Any]:
    """Train a small MLP with ``paddle.Model.fit`` for ``batches`` batches (one epoch) with the
    callback writing to ``directory``; what happened: the callback, the batches trained, the
    network's parameter count (Paddle's), and perfkit's warnings."""
    import numpy as np
    import paddle

    from perfkit_paddle.hapi import PerfkitCallback

    paddle.seed(0)
    paddle.set_device("cpu")
    network = paddle.nn.Sequential(
        paddle.nn.Linear(FEATURES, HIDDEN), paddle.nn.ReLU(), paddle.nn.Linear(HIDDEN, CLASSES)
    )
    model = paddle.Model(network)
    model.prepare(
        paddle.optimizer.Adam(learning_rate=1e-3, parameters=network.parameters()),
        paddle.nn.CrossEntropyLoss(),
    )
    rng = np.random.default_rng(0)
    data = paddle.io.TensorDataset(
        [
            paddle.to_tensor(rng.standard_normal((batches * BATCH, FEATURES)).astype("float32")),
            paddle.to_tensor(rng.integers(0, CLASSES, (batches * BATCH, 1)).astype("int64")),
        ]
    )

    class Count(paddle.callbacks.Callback):  # type: ignore[misc]
        batches = 0

        def on_train_batch_end(self, step: int, logs: Any = None) -> None:
            Count.batches += 1

    callback = PerfkitCallback(directory, profile_steps=windows, **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(
            data,
            batch_size=BATCH,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[callback, Count()],
            accumulate_grad_batches=accumulate,
        )
        callback.wait()
    perfkit = [str(w.message) for w in caught if str(w.message).startswith("perfkit")]
    return {
        "callback": callback,
        "batches": Count.batches,
        "parameters": sum(int(p.size) for p in network.parameters()),
        "warnings": perfkit,
    }


def test_one_run_per_window_a_step_per_optimizer_step(tmp_path: Path) -> None:
    fit = _fit(tmp_path / "fit_logs", windows=[(3, 6), (10, 12)], batches=24)
    callback = fit["callback"]
    assert fit["batches"] == 24 and fit["warnings"] == []
    assert callback.failures == []
    runs = callback.runs
    # One run per window, named after the output folder and the window's last step.
    assert [r.name for r in runs] == ["fit_logs.step6", "fit_logs.step12"]
    assert sorted(p.name for p in (tmp_path / "fit_logs").iterdir()) == sorted(r.name for r in runs)
    for run_dir, steps in zip(runs, ([3, 4, 5, 6], [10, 11, 12]), strict=True):
        run = perfkit_core.load(run_dir)
        assert run.meta["steps"] == steps
        # Each step holds one optimizer update: one Adam op per parameter (4 weights and biases).
        per_step = _adam_calls(run)
        assert set(per_step) == set(steps) and set(per_step.values()) == {4}
    # The layers view reads Paddle's own parameter count from the saved run.
    assert (
        layers_total(runs[0])
        == fit["parameters"]
        == (FEATURES + 1) * HIDDEN + (HIDDEN + 1) * CLASSES
    )


def _adam_calls(run: Any) -> dict[int, int]:
    """Calls of Paddle's Adam kernel per step of ``run`` (its forward/backward ops are not
    named adam)."""
    ev = run.events
    adam = ev[(ev["kind"] == "operator") & ev["name"].astype(str).str.match(r"^adam_?\b|^adam_ ")]
    counts = adam[adam["step"] >= 0].groupby("step").size()
    return {int(k): int(v) for k, v in counts.items()}


def test_gradient_accumulation_makes_a_step_of_its_batches(tmp_path: Path) -> None:
    fit = _fit(tmp_path / "acc", windows=(2, 4), batches=18, accumulate=3)
    callback = fit["callback"]
    assert fit["batches"] == 18 and callback.failures == []
    (run_dir,) = callback.runs
    run = perfkit_core.load(run_dir)
    assert run.meta["steps"] == [2, 3, 4]
    assert set(_adam_calls(run).values()) == {4}  # one update a step
    # ... of three batches: three forward passes of the first Linear a step.
    ev = run.events
    forward = ev[(ev["name"].astype(str) == "Linear") & (ev["step"] >= 0)]
    counts = forward.groupby("step").size()
    assert {int(v) for v in counts.to_numpy()} == {3 * 2}  # two Linear layers
    assert layers_total(run_dir) == fit["parameters"]


def test_full_disk_warns_once_and_training_goes_on(tmp_path: Path, monkeypatch) -> None:
    from perfkit_core.events import Run

    def full(self: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Run, "save", full)
    fit = _fit(tmp_path / "full", windows=[(3, 4), (7, 8)], batches=12, background=False)
    callback = fit["callback"]
    assert fit["batches"] == 12
    assert len(fit["warnings"]) == 1 and "disk full" in fit["warnings"][0]
    assert callback.runs == []
    failures = callback.failures
    assert len(failures) == 2  # both windows, the second logged, not warned
    for kept, reason in failures:
        assert "disk full" in reason
        # Paddle's export is kept.
        assert kept.name == "trace.paddle_trace.pb" and kept.stat().st_size > 0


def test_unwritable_folder_under_dropped_capabilities(tmp_path: Path) -> None:
    report, spare = fit_into_locked_folder(__file__, tmp_path)
    assert report["batches"] == 12
    assert len(report["warnings"]) == 1 and "cannot create a run folder" in report["warnings"][0]
    assert report["runs"] == [] and len(report["failures"]) == 2
    # Paddle's export is kept in the fallback folder under the temporary directory.
    for kept, _ in report["failures"]:
        assert Path(kept).is_relative_to(spare) and Path(kept).stat().st_size > 0


def test_importable_without_paddle() -> None:
    code = (
        "import sys; sys.modules['paddle'] = None\n"
        "import perfkit_paddle.hapi\n"
        "try:\n"
        "    perfkit_paddle.hapi.PerfkitCallback\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "pip install paddlepaddle" in out.stdout and len(out.stdout.strip().splitlines()) == 1


def test_windows_are_checked() -> None:
    from perfkit_paddle.hapi import PerfkitCallback

    for bad in [(0, 3), (5, 4), [(2, 5), (4, 6)]]:
        with pytest.raises(ValueError, match="profile"):
            PerfkitCallback("unused", profile_steps=bad)
    # the other integrations' names for one window, and never both ways at once
    assert PerfkitCallback("unused", start_step=4, stop_step=9).windows == [(4, 9)]
    assert PerfkitCallback("unused").windows == [(3, 7)]
    with pytest.raises(ValueError, match="one way"):
        PerfkitCallback("unused", profile_steps=(4, 9), start_step=4)


if __name__ == "__main__":
    result = _fit(Path(sys.argv[1]), windows=[(3, 4), (7, 8)], batches=12)
    callback = result.pop("callback")
    result["runs"] = [str(p) for p in callback.runs]
    result["failures"] = [(str(p), reason) for p, reason in callback.failures]
    print(json.dumps(result))
