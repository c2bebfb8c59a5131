"""perfkit plugin for MindSpore. Imports no MindSpore at import time, and reads its profiler's
folders without it."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from perfkit_core.plugins import DEMO_TIMED_PER_PROFILED, TraceLoader, hookimpl, installed_version

FRAMEWORK = "mindspore"

#: The frameworks this adapter answers for: the hooks that take ``framework`` reach its
#: implementations only for these (``perfkit_core.plugins.framework_hook``).
PERFKIT_FRAMEWORKS = (FRAMEWORK,)
#: Distributions that ship the ``mindspore`` module (its CPU, GPU and Ascend builds).
DISTRIBUTIONS = ("mindspore", "mindspore-gpu", "mindspore-ascend", "mindspore-dev")


@hookimpl
def perfkit_claim_folder(path: Path) -> TraceLoader | None:
    """Claim MindSpore profiler folders: a ``<host>_<pid>_<time>_ascend_ms`` folder (CPU and
    Ascend), a folder holding one (the folder given to ``tensorboard_trace_handler``), or the GPU
    profiler's folder. Lists folders only."""
    from perfkit_mindspore.layout import find_layout

    if find_layout(path) is None:
        return None
    from perfkit_mindspore.loader import load_folder

    return load_folder


@hookimpl(tryfirst=True)
def perfkit_claim_trace(path: Path, head: bytes) -> TraceLoader | None:
    """Claim MindSpore's ``trace_view.json`` (read with the rest of its profile folder when it
    sits in one). Asked before other adapters (``tryfirst``): it is a chrome trace too."""
    from perfkit_mindspore.layout import is_trace_view

    if not is_trace_view(path, head):
        return None
    from perfkit_mindspore.loader import load_trace_view

    return load_trace_view


@hookimpl
def perfkit_framework_info() -> dict[str, Any]:
    """Say whether MindSpore is installed, and which version, without importing it."""
    version = installed_version(*DISTRIBUTIONS)
    return {"framework": FRAMEWORK, "installed": version is not None, "version": version}


@hookimpl
def perfkit_demo(directory: Path, steps: int) -> list[Path] | None:
    """Profile the MLP training loop in MindSpore on the CPU, if mindspore is installed."""
    import importlib.util

    try:
        if importlib.util.find_spec("mindspore") is None:
            return None
    except (ImportError, ValueError):
        return None
    from perfkit_mindspore.demo import train_mlp

    runs, _ = train_mlp(
        Path(directory) / FRAMEWORK, steps=steps, timed_steps=DEMO_TIMED_PER_PROFILED * steps
    )
    return runs


@hookimpl
def perfkit_annotation(name: str) -> AbstractContextManager[Any] | None:
    """A span recorded by perfkit on the host clock (MindSpore's CPU profiler records no user
    ranges), when the program imported mindspore."""
    if "mindspore" not in sys.modules:
        return None
    from perfkit_mindspore.record import span

    return span(name)


@hookimpl
def perfkit_profiler_recording(profiler: Any) -> bool | None:
    """Whether a perfkit capture of MindSpore is recording (for ``step_timer``), when mindspore
    is imported and ``profiler`` is MindSpore's or None: the schedule of the
    ``mindspore.profiler.profile`` given (its current action: waiting is not recording; warming
    up and recording are), else whether a ``ProfilerCallback`` has its window open."""
    if "mindspore" not in sys.modules:
        return None
    if profiler is not None and not type(profiler).__module__.startswith("mindspore"):
        return None
    from perfkit_mindspore.record import recording

    if profiler is not None:
        # the profile the timer was given: its schedule says, whatever a callback did before
        action = getattr(getattr(profiler, "current_action", None), "name", None)
        if isinstance(action, str):
            return action != "NONE"
    return recording()


@hookimpl
def perfkit_remedy(finding: Any, framework: str) -> str | None:
    """The MindSpore code to change for a finding on a MindSpore run."""
    from perfkit_mindspore.remedies import remedy

    return remedy(finding)


@hookimpl
def perfkit_op_family(name: str, framework: str) -> str | None:
    """Families of MindSpore operator types (``ApplyMomentum`` -> optimizer, ``GetNext`` ->
    data, ``Conv2DBackpropFilter`` -> conv, ...)."""
    from perfkit_mindspore.ops import family

    return family(name)


@hookimpl
def perfkit_canonical_op(name: str, framework: str) -> str | None:
    """Canonical ops of MindSpore operator types (``MatMul`` -> ``matmul``, ``BiasAddGrad`` ->
    ``add``, ``Conv2DBackpropInput`` -> ``conv``, ...)."""
    from perfkit_mindspore.ops import canonical_op

    return canonical_op(name)
