"""``profile(dir)``: profile a block of a JAX or TensorFlow program with the framework's own
profiler and save it as a perfkit run.

The framework writes its log folder (``<run folder>/xla_log/plugins/profile/<time>/``) as it
always does; when the block ends, the profile is read (``perfkit_xla.xplane``) and saved as a
perfkit run in the run folder. Nothing here raises into the training loop once the profiler has
started: a profile that cannot be converted is warned about once, and its log folder is kept.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfkit_core.capture import Failures, claim_run_dir, default_worker_name, handler_metadata

#: The framework's log folder inside a run folder, kept when ``keep_trace`` or on failure.
NATIVE_LOG_NAME = "xla_log"


def _framework(prefer: str | None) -> str:
    """``jax`` or ``tensorflow``: ``prefer`` if given, else the one the program imported, else
    the one installed. ValueError when the program imported both (TensorFlow's Keras imports
    JAX whenever it is installed, so which profiler the user means cannot be guessed);
    ImportError with one line when neither is installed."""
    if prefer in ("jax", "tensorflow"):
        return prefer
    imported = [name for name in ("jax", "tensorflow") if name in sys.modules]
    if len(imported) == 2:
        raise ValueError(
            "both jax and tensorflow are imported (TensorFlow imports JAX when it is "
            "installed): pass framework='jax' or framework='tensorflow' to perfkit_xla.profile"
        )
    if imported:
        return imported[0]
    for name in ("jax", "tensorflow"):
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            continue
    raise ImportError(
        "perfkit_xla.profile needs JAX or TensorFlow, neither is installed: "
        "pip install jax (or tensorflow), then profile"
    )


#: The framework whose profiler a ``profile()`` window is recording, while one is open:
#: ``annotate()`` opens that framework's annotation.
RECORDING: list[str] = []


def recording_framework() -> str | None:
    """``jax`` or ``tensorflow`` while a ``profile()`` window records, else None."""
    return RECORDING[-1] if RECORDING else None


def _start(framework: str, log_dir: Path) -> None:
    if framework == "jax":
        import jax

        jax.profiler.start_trace(str(log_dir))
    else:
        import tensorflow as tf

        tf.profiler.experimental.start(str(log_dir))


def _stop(framework: str) -> None:
    if framework == "jax":
        import jax

        jax.profiler.stop_trace()
    else:
        import tensorflow as tf

        tf.profiler.experimental.stop()


def _version(framework: str) -> str | None:
    module = sys.modules.get(framework)
    return getattr(module, "__version__", None) if module is not None else None


class ProfileSession:
    """One or more profiled windows saved as perfkit runs under ``dir_name``.

    ``runs`` lists the saved run folders, ``failures`` the (kept log folder, reason) of windows
    that were not saved. Use it through ``perfkit_xla.profile``; ``window()`` profiles one more
    block with the same settings.
    """

    def __init__(
        self,
        dir_name: str | os.PathLike[str] = "./perfkit_runs",
        *,
        worker_name: str | None = None,
        framework: str | None = None,
        keep_trace: bool = False,
        model: Any = None,
    ) -> None:
        self.dir_name = Path(dir_name)
        self.model = model
        self.worker_name = worker_name or default_worker_name()
        self.framework = _framework(framework)
        self.keep_trace = keep_trace
        self.runs: list[Path] = []
        self._failures = Failures()
        self._model_warned = False

    @property
    def failures(self) -> list[tuple[Path, str]]:
        """(native log folder kept, reason) for each window that was not saved."""
        return list(self._failures.items)

    @contextlib.contextmanager
    def window(self) -> Iterator[ProfileSession]:
        """Profile the block with the framework's profiler, then save it as a perfkit run."""
        run_dir = claim_run_dir(self.dir_name, self.worker_name, None)
        log_dir = run_dir / NATIVE_LOG_NAME
        try:
            log_dir.mkdir(parents=True, exist_ok=False)
            _start(self.framework, log_dir)
        except Exception as exc:
            # The program runs on, unprofiled: a profiler that does not start must not stop it.
            self._failures.record(None, run_dir, f"the profiler did not start: {exc}")
            yield self
            return
        RECORDING.append(self.framework)
        try:
            yield self
        finally:
            RECORDING.pop()
            self._finish(run_dir, log_dir)

    def _finish(self, run_dir: Path, log_dir: Path) -> None:
        try:
            _stop(self.framework)
        except Exception as exc:
            self._failures.record(None, run_dir, f"the profiler did not stop: {exc}")
            return
        try:
            from perfkit_xla.xplane import load_log_dir

            run = load_log_dir(log_dir)
            meta = handler_metadata(
                self.framework, _version(self.framework), None, self.worker_name
            )
            for key, value in meta.items():
                if key == "extra":
                    run.meta.setdefault("extra", {}).update(value)
                elif value is not None or key not in run.meta:
                    run.meta[key] = value
            steps = run.meta.get("steps") or []
            if steps:
                # Name the folder after the window's last step, as the other handlers do: the
                # claimed (empty) folder is replaced by this one, atomically.
                named = claim_run_dir(self.dir_name, self.worker_name, int(steps[-1]))
                run_dir.rename(named)
                run_dir, log_dir = named, named / NATIVE_LOG_NAME
            if not self.keep_trace:
                run.meta["source"] = None
            if self.model is not None:
                self._describe(run)
            run.save(run_dir)
            if not self.keep_trace:
                shutil.rmtree(log_dir, ignore_errors=True)
        except Exception as exc:
            self._failures.record(log_dir, run_dir, f"{type(exc).__name__}: {exc}")
            return
        self.runs.append(run_dir)

    def _describe(self, run: Any) -> None:
        """Record ``model``'s layers and parameters in ``run.meta["model"]``; a model that
        cannot be described is warned about once and the run is saved without it."""
        from perfkit_xla.model import describe_model

        try:
            run.meta["model"] = describe_model(self.model)
        except Exception as exc:
            if not self._model_warned:
                self._model_warned = True
                warnings.warn(
                    f"perfkit_xla: the model's parameters were not recorded "
                    f"({type(exc).__name__}: {exc}); the run is saved without them",
                    RuntimeWarning,
                    stacklevel=2,
                )


@contextlib.contextmanager
def profile(
    dir_name: str | os.PathLike[str] = "./perfkit_runs",
    *,
    worker_name: str | None = None,
    framework: str | None = None,
    keep_trace: bool = False,
    model: Any = None,
) -> Iterator[ProfileSession]:
    """Profile the block with JAX's (or TensorFlow's) own profiler and save a perfkit run.

    The run is saved in ``dir_name/<worker_name>.step<N>/`` (N: the last step the window
    recorded, from ``jax.profiler.StepTraceAnnotation`` or Keras' train steps; no suffix when
    it recorded none); the yielded session lists it in ``session.runs``. ``worker_name``
    defaults to ``<host>_<pid>``; ``framework`` (``"jax"`` or ``"tensorflow"``) defaults to the
    one the program imported. ``keep_trace=True`` keeps the framework's log folder in the run
    folder (``xla_log/``, which TensorBoard and xprof open); it is always kept when conversion
    fails, with a warning, and the training goes on. ``model`` (a Keras model, or a
    parameter tree such as Flax's ``variables["params"]``) records its layers and parameters
    in the run for the ``layers`` view (``perfkit_xla.describe_model``).
    """
    session = ProfileSession(
        dir_name,
        worker_name=worker_name,
        framework=framework,
        keep_trace=keep_trace,
        model=model,
    )
    with session.window():
        yield session
