"""perfkit plugin for TensorFlow and JAX (the XLA profiler's XSpace). Imports neither framework
at import time, and reads profiles without them."""

from __future__ import annotations

import contextlib
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from perfkit_core.plugins import DEMO_TIMED_PER_PROFILED, TraceLoader, hookimpl, installed_version

#: Frameworks whose runs this plugin answers for (``run.framework``).
FRAMEWORKS = ("jax", "tensorflow", "xla")

#: The frameworks this adapter answers for: the hooks that take ``framework`` reach its
#: implementations only for these (``perfkit_core.plugins.framework_hook``).
PERFKIT_FRAMEWORKS = FRAMEWORKS
#: How the trace viewer's JSON (``<host>.trace.json.gz``) that the profilers write begins.
TRACE_VIEWER_MARKER = b'"highres-ticks"'


@hookimpl(tryfirst=True)
def perfkit_claim_trace(path: Path, head: bytes) -> TraceLoader | None:
    """Claim ``*.xplane.pb`` (XSpace) files, and the trace viewer's ``*.trace.json.gz`` the
    profilers write beside them (read through the ``.xplane.pb`` next to it). Asked before
    other adapters (``tryfirst``): that JSON is also a chrome trace."""
    name = path.name
    if name.endswith((".xplane.pb", ".xplane.pb.gz")):
        from perfkit_xla.xplane import load_xplane

        return load_xplane
    if TRACE_VIEWER_MARKER in head[:4096] and name.endswith((".trace.json.gz", ".trace.json")):
        return _load_trace_viewer_json
    return None


def _load_trace_viewer_json(path: Path) -> Any:
    from perfkit_core.events import TraceError
    from perfkit_xla.xplane import load_xplane, sibling_xplane

    xplane = sibling_xplane(path)
    if xplane is None:
        raise TraceError(
            path,
            "the trace viewer's data of a TensorFlow/JAX profile; perfkit reads the "
            f"{path.name.split('.trace.json')[0]}.xplane.pb the profiler writes beside it, "
            "which is not there",
        )
    return load_xplane(xplane)


@hookimpl
def perfkit_claim_folder(path: Path) -> TraceLoader | None:
    """Claim TensorFlow/JAX log folders: ``LOG_DIR`` (with ``plugins/profile/<run>/``) or a
    profile folder holding ``<host>.xplane.pb`` files."""
    from perfkit_xla.xplane import is_log_dir, load_log_dir

    return load_log_dir if is_log_dir(path) else None


@hookimpl
def perfkit_framework_info() -> dict[str, Any]:
    """Say whether JAX or TensorFlow is installed, and which versions, without importing them."""
    found = []
    jax = installed_version("jax")
    if jax:
        found.append(f"jax {jax}")
    tf = installed_version("tensorflow", "tensorflow-cpu", "tf-nightly")
    if tf:
        found.append(f"tensorflow {tf}")
    return {"framework": "xla", "installed": bool(found), "version": ", ".join(found) or None}


@hookimpl
def perfkit_demo(directory: Path, steps: int) -> list[Path] | None:
    """Profile the MLP training loop in JAX on the CPU, if jax is installed."""
    import importlib.util

    if importlib.util.find_spec("jax") is None:
        return None
    from perfkit_xla.demo import train_mlp

    runs, _ = train_mlp(
        Path(directory) / "jax", steps=steps, timed_steps=DEMO_TIMED_PER_PROFILED * steps
    )
    return runs


@hookimpl
def perfkit_profiler_recording(profiler: Any) -> bool | None:
    """Whether a ``perfkit_xla.profile`` window is recording (for ``step_timer``), when JAX or
    TensorFlow is imported and ``profiler`` is None or a ``perfkit_xla`` profile session."""
    if "jax" not in sys.modules and "tensorflow" not in sys.modules:
        return None
    if profiler is not None and not type(profiler).__module__.startswith("perfkit_xla"):
        return None
    from perfkit_xla.capture import recording_framework

    return recording_framework() is not None


@hookimpl
def perfkit_annotation(name: str) -> AbstractContextManager[Any] | None:
    """A ``jax.profiler.TraceAnnotation`` or ``tf.profiler.experimental.Trace`` span marked
    ``perfkit="user"``: the one of the framework a ``perfkit_xla.profile()`` window records,
    else of the framework the program imported, else None. With both imported and no window
    open (TensorFlow imports JAX whenever it is installed), both are opened: each framework's
    profiler records only its own."""
    from perfkit_xla.capture import recording_framework

    recording = recording_framework()
    wanted = [recording] if recording else [f for f in ("jax", "tensorflow") if f in sys.modules]
    spans: list[AbstractContextManager[Any]] = []
    if "jax" in wanted:
        import jax

        spans.append(jax.profiler.TraceAnnotation(name, perfkit="user"))
    if "tensorflow" in wanted:
        import tensorflow as tf

        spans.append(tf.profiler.experimental.Trace(name, perfkit="user"))
    if len(spans) < 2:
        return spans[0] if spans else None

    @contextlib.contextmanager
    def both() -> Any:
        with contextlib.ExitStack() as stack:
            for span in spans:
                stack.enter_context(span)
            yield

    return both()


@hookimpl
def perfkit_remedy(finding: Any, framework: str) -> str | None:
    """The JAX or TensorFlow code to change for a finding on such a run."""
    from perfkit_xla.remedies import remedy

    return remedy(finding, framework)


@hookimpl
def perfkit_op_family(name: str, framework: str) -> str | None:
    """Families of XLA and TensorFlow ops the core's tables do not know (collectives,
    fusions of elementwise ops, ...)."""
    from perfkit_xla.ops import family

    return family(name)


@hookimpl
def perfkit_canonical_op(name: str, framework: str) -> str | None:
    """Canonical ops of XLA ops (``dot.3`` -> ``matmul``, ``add_reduce_fusion`` -> ``sum``,
    ``ynn_fusion.2`` -> ``matmul``) and TensorFlow ops (``dense/MatMul:MatMul`` ->
    ``matmul``)."""
    from perfkit_xla.ops import canonical_op

    return canonical_op(name)


@hookimpl
def perfkit_op_cost(call: Any, framework: str) -> Any:
    """The FLOPs and bytes of a call of an XLA op (``perfkit_xla.opcosts``)."""
    from perfkit_xla.opcosts import op_cost

    return op_cost(call)
