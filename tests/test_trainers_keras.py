"""``perfkit_xla.keras.PerfkitCallback`` in real Keras ``model.fit`` runs (TensorFlow backend,
tensorflow-cpu): one saved run per window, a step per optimizer step (the optimizer's gradient
accumulation included), the layers view's parameter total equal to Keras' own count, and
failures inside perfkit (a full disk, an unwritable folder) that leave training running with one
warning. Skipped where TensorFlow is not installed (tox's xla environment runs it).

Run as a script (``python tests/test_trainers_keras.py DIR``) it trains the same model with the
callback writing to DIR and prints what happened as one JSON line: the unwritable-folder case
runs it under dropped capabilities.
"""

from __future__ import annotations

import errno
import importlib.util
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

# Found, not imported: importing TensorFlow while tests are collected would import JAX with it
# (Keras does, where JAX is installed) before the JAX-only tests of the same session run.
if importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("keras") is None:
    pytest.skip("needs tensorflow and keras (tox's xla environment)", allow_module_level=True)

BATCH = 8
FEATURES, HIDDEN, CLASSES = 16, 32, 4


def _fit(
    directory: Path, *, windows: Any, batches: int, accumulate: int = 1, **options: Any
) -> dict[str, Any]:
    """Train a small MLP with Keras' ``model.fit`` for ``batches`` batches (one epoch) with the
    callback writing to ``directory``; what happened: the callback, the batches trained, Keras'
    parameter count, and perfkit's warnings."""
    import keras
    import numpy as np

    from perfkit_xla.keras import PerfkitCallback

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(HIDDEN, activation="relu"),
            keras.layers.Dense(CLASSES),
        ]
    )
    model.compile(
        keras.optimizers.Adam(
            1e-3, gradient_accumulation_steps=accumulate if accumulate > 1 else None
        ),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batches * BATCH, FEATURES)).astype("float32")
    y = rng.integers(0, CLASSES, batches * BATCH)

    class Count(keras.callbacks.Callback):  # type: ignore[misc]
        batches = 0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            Count.batches += 1

    callback = PerfkitCallback(directory, profile_batch=windows, **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(
            x,
            y,
            batch_size=BATCH,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[callback, Count()],
        )
        callback.wait()
    perfkit = [str(w.message) for w in caught if str(w.message).startswith("perfkit")]
    return {
        "callback": callback,
        "batches": Count.batches,
        "parameters": int(model.count_params()),
        "warnings": perfkit,
    }


def _batches_per_step(run: Any) -> dict[int, int]:
    """Calls of Keras' compiled train function per step of ``run`` (one a batch; Keras 3 names
    it ``multi_step_on_iterator``, or ``one_step_on_iterator`` / ``..._on_data``)."""
    ev = run.events
    names = ev["name"].astype(str)
    calls = ev[names.str.fullmatch(r"(one|multi)_step_on_(iterator|data)") & (ev["step"] >= 0)]
    return {int(k): int(v) for k, v in calls.groupby("step").size().items()}


def test_one_run_per_window_a_step_per_optimizer_step(tmp_path: Path) -> None:
    fit = _fit(tmp_path / "fit_logs", windows=[(3, 6), (10, 12)], batches=24)
    callback = fit["callback"]
    assert fit["batches"] == 24 and fit["warnings"] == []
    assert callback.failures == []
    runs = callback.runs
    # One run per window, named after the output folder and the window's last step; TensorFlow's
    # log folder is removed once the run is saved.
    assert [r.name for r in runs] == ["fit_logs.step6", "fit_logs.step12"]
    assert sorted(p.name for p in (tmp_path / "fit_logs").iterdir()) == sorted(r.name for r in runs)
    for run_dir, steps in zip(runs, ([3, 4, 5, 6], [10, 11, 12]), strict=True):
        assert sorted(p.name for p in run_dir.iterdir()) == ["events.parquet", "meta.json"]
        run = perfkit_core.load(run_dir)
        assert run.framework == "tensorflow"
        assert run.meta["steps"] == steps
        assert _batches_per_step(run) == dict.fromkeys(steps, 1)
    # The layers view reads Keras' own parameter count from the saved run.
    assert (
        layers_total(runs[0])
        == fit["parameters"]
        == (FEATURES + 1) * HIDDEN + (HIDDEN + 1) * CLASSES
    )


def test_gradient_accumulation_makes_a_step_of_its_batches(tmp_path: Path) -> None:
    fit = _fit(tmp_path / "acc", windows=(2, 4), batches=18, accumulate=3)
    callback = fit["callback"]
    assert fit["batches"] == 18 and callback.failures == []
    (run_dir,) = callback.runs
    run = perfkit_core.load(run_dir)
    assert run.meta["steps"] == [2, 3, 4]
    assert _batches_per_step(run) == dict.fromkeys([2, 3, 4], 3)  # three batches an update
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
        # TensorFlow's profile is kept, and reads as a run.
        assert kept.name == "xla_log" and list(kept.rglob("*.xplane.pb"))
        assert perfkit_core.load(kept).meta["steps"]


def test_unwritable_folder_under_dropped_capabilities(tmp_path: Path) -> None:
    report, spare = fit_into_locked_folder(__file__, tmp_path)
    assert report["batches"] == 12
    assert len(report["warnings"]) == 1 and "cannot create a run folder" in report["warnings"][0]
    assert report["runs"] == [] and len(report["failures"]) == 2
    # TensorFlow's profile is kept in the fallback folder under the temporary directory.
    for kept, _ in report["failures"]:
        assert Path(kept).is_relative_to(spare) and list(Path(kept).rglob("*.xplane.pb"))


def test_windows_take_every_integrations_names() -> None:
    """``profile_batch`` (Keras' name), ``profile_steps`` (the Paddle and torch integrations')
    and ``start_step``/``stop_step`` (MindSpore's) give the same windows; two at once are
    refused at construction."""
    from perfkit_xla.keras import PerfkitCallback

    assert PerfkitCallback("unused", "4,9").windows == [(4, 9)]
    assert PerfkitCallback("unused", profile_steps=[(4, 9), (12, 13)]).windows == [
        (4, 9),
        (12, 13),
    ]
    assert PerfkitCallback("unused", start_step=4, stop_step=9).windows == [(4, 9)]
    assert PerfkitCallback("unused").windows == [(3, 7)]
    with pytest.raises(ValueError, match="not both"):
        PerfkitCallback("unused", (4, 9), profile_steps=(4, 9))
    with pytest.raises(ValueError, match="one way"):
        PerfkitCallback("unused", (4, 9), stop_step=9)


def test_importable_without_tensorflow() -> None:
    code = (
        "import sys; sys.modules['tensorflow'] = None\n"
        "import perfkit_xla.keras\n"
        "try:\n"
        "    perfkit_xla.keras.PerfkitCallback\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "pip install tensorflow" in out.stdout and len(out.stdout.strip().splitlines()) == 1


if __name__ == "__main__":
    result = _fit(Path(sys.argv[1]), windows=[(3, 4), (7, 8)], batches=12)
    callback = result.pop("callback")
    result["runs"] = [str(p) for p in callback.runs]
    result["failures"] = [(str(p), reason) for p, reason in callback.failures]
    print(json.dumps(result))
