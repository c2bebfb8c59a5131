"""Layer spans for torch runs: every ``nn.Module`` call recorded as a span while a profiler
records, so that perfkit can attribute ops to layers in a torch run the way Paddle's profiler
records its layers.

torch's profiler records ``nn.Module: Type_k`` spans only with ``with_stack=True``, whose Python
tracer slows every step many times over. perfkit records the same spans, named the same way
(``k`` counts the modules of one type in the order they are first called since the hooks were
installed), from torch's global module hooks
(``torch.nn.modules.module.register_module_forward_pre_hook`` and
``register_module_forward_hook``), so no model needs a call of its own.

The hooks are installed only while something asks for spans (a ``ModuleSpans`` that is
*armed*), and record only while a profiler records. While they are installed, every module call
takes torch's hooked path, a few microseconds a call whether the profiler records or not (see
``bench/bench_layer_spans.py``), so the handler arms them only around its profiler's recording:

- ``perfkit_torch.on_trace_ready(...)`` (``layers=True``, the default) arms them when it is
  created, for its profiler's first cycle; at the end of each cycle it follows the profiler's
  schedule (``ModuleSpans.follow``): armed in the warm-up and recording steps, taken off in the
  steps the schedule skips and once the profiler has stopped;
- ``record_modules()`` arms them until its ``remove()`` (or the end of its ``with`` block),
  for code that profiles without perfkit's handler (the Kineto trace it writes then holds the
  spans, for ``perfkit report trace.json``).

A module call that starts while spans are armed and a profiler records is one span, from its
forward pre-hooks to its forward's return (or exception). Under ``torch.compile`` the hooks do
nothing (the compiled region is one span of its caller). The hooks never raise into the model.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

#: Prefix of a module span's name, as torch's own Python tracer names module calls.
SPAN_PREFIX = "nn.Module: "
#: Schedule actions (``torch.profiler.ProfilerAction`` names) in which spans stay armed.
_ARMED_ACTIONS = frozenset({"WARMUP", "RECORD", "RECORD_AND_SAVE", "DEVICE_STOPPED"})
#: Actions in which the profiler records: when it is found stopped in one, it was stopped.
_RECORDING_ACTIONS = frozenset({"RECORD", "RECORD_AND_SAVE"})

_lock = threading.Lock()
_armed: set[ModuleSpans] = set()
_handles: list[Any] = []
_local = threading.local()
#: Span name of each module seen (by ``id``; dropped when the module is collected).
_names: dict[int, str] = {}
_type_counts: dict[str, int] = {}
#: Modules (by ``id``) whose collection will drop their name.
_watched: set[int] = set()
#: Whether an armed ``ModuleSpans`` follows a schedule that says the profiler records now.
_expect_recording = False
#: Whether a span was opened since the hooks were installed: until one is, the post-hook has
#: nothing to look up.
_opened = False


def _torch_functions() -> tuple[Any, Any, Any]:
    """(profiler enabled?, compiling?, span context manager class) of the installed torch."""
    import torch

    enabled = torch._C._autograd._profiler_enabled
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
    span = getattr(torch._C._profiler, "_RecordFunctionFast", None)
    if span is None:  # older torch: the Python context manager, slower, a user_annotation span
        from torch.autograd.profiler import record_function as span
    return enabled, compiling, span


_enabled: Any = None
_compiling: Any = None
_Span: Any = None


def _span_name(module: Any) -> str:
    """``nn.Module: Type_k`` for ``module``, ``k`` counting modules of its type in the order
    they were first seen."""
    key = id(module)
    name = _names.get(key)
    if name is None:
        type_name = type(module).__name__
        k = _type_counts.get(type_name, 0)
        _type_counts[type_name] = k + 1
        name = f"{SPAN_PREFIX}{type_name}_{k}"
        _names[key] = name
        if key not in _watched:
            try:
                weakref.finalize(module, _forget, key)
                _watched.add(key)
            except (
                TypeError
            ):  # not weak-referenceable: its name stays (only the ordinal is at stake)
                pass
    return name


def _forget(key: int) -> None:
    """Drop the name of a module that was collected (its ``id`` may be reused)."""
    _names.pop(key, None)
    _watched.discard(key)


def _enter(module: Any, args: Any) -> None:
    """Global forward pre-hook: open the module's span when a profiler records."""
    global _opened
    try:
        if _compiling():
            return
        if not _enabled():
            if _expect_recording:
                _stopped()
            return
        span = _Span(_span_name(module))
        span.__enter__()
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        stack.append((module, span))
        _opened = True
    except Exception:  # a span is never worth a failed step
        return


def _exit(module: Any, args: Any, output: Any) -> None:
    """Global forward hook (also called when the forward raised): close the module's span."""
    if not _opened:
        return
    try:
        if _compiling():
            return
        stack = getattr(_local, "stack", None)
        if stack and stack[-1][0] is module:
            stack.pop()[1].__exit__(None, None, None)
    except Exception:
        return


def _install() -> None:
    """Install the global hooks (under ``_lock``)."""
    global _enabled, _compiling, _Span, _opened
    if _handles:
        return
    _opened = False
    from torch.nn.modules import module as torch_module

    _enabled, _compiling, _Span = _torch_functions()
    # Ordinals count from 0 again, so one model's spans are named alike in every cycle.
    _names.clear()
    _type_counts.clear()
    _handles.append(torch_module.register_module_forward_pre_hook(_enter))
    try:
        _handles.append(torch_module.register_module_forward_hook(_exit, always_call=True))
    except TypeError:  # torch before 2.1: no always_call; a forward that raises leaves its span
        _handles.append(torch_module.register_module_forward_hook(_exit))


def _uninstall() -> None:
    """Remove the global hooks (under ``_lock``)."""
    for handle in _handles:
        handle.remove()
    _handles.clear()


def _set(spans: ModuleSpans, armed: bool, recording: bool) -> None:
    """Arm or disarm ``spans``; install the hooks while any request is armed, remove them when
    none is."""
    global _expect_recording
    with _lock:
        spans.armed = armed
        spans.expect_recording = armed and recording
        if armed:
            _armed.add(spans)
        else:
            _armed.discard(spans)
        _expect_recording = any(s.expect_recording for s in _armed)
        if _armed:
            _install()
        else:
            _uninstall()


def _stopped() -> None:
    """A profiler a schedule said was recording has stopped: disarm what followed it."""
    for spans in list(_armed):
        if spans.expect_recording:
            spans.arm(False)


def hooks_installed() -> bool:
    """Whether the global module hooks are installed now."""
    return bool(_handles)


class ModuleSpans:
    """A request for module spans: while it is armed (``arm(True)``), every module call is
    recorded as a span whenever a profiler records. ``remove()`` (or leaving the ``with``
    block) disarms it for good. Any number may exist; the hooks are installed while at least
    one is armed."""

    def __init__(self) -> None:
        self.armed = False
        self.expect_recording = False
        self.removed = False

    def arm(self, on: bool, *, recording: bool = False) -> None:
        """Arm (``on``) or disarm this request; ``recording``: the followed schedule says the
        profiler records now (so finding it stopped disarms)."""
        _set(self, on and not self.removed, recording)

    def follow(self, prof: Any) -> None:
        """Stay armed only in the warm-up and recording steps of ``prof``'s schedule (a
        ``torch.profiler.profile``): wraps ``prof.schedule``, which the profiler calls at every
        step, and sets the state for the step the profiler is in. Does nothing to a profiler
        without a callable ``schedule``."""
        target = getattr(prof, "_prof", prof)  # a chained handler's stand-in
        schedule = getattr(target, "schedule", None)
        if not callable(schedule):
            return
        if getattr(schedule, "perfkit_module_spans", None) is not self:
            inner = schedule

            def tracked(step: int) -> Any:
                action = inner(step)
                self._follow_action(action)
                return action

            tracked.perfkit_module_spans = self  # type: ignore[attr-defined]
            try:
                target.schedule = tracked
            except Exception:
                return
        self._follow_action(getattr(target, "current_action", None))

    def _follow_action(self, action: Any) -> None:
        name = getattr(action, "name", None)
        if name is None:
            return
        try:
            self.arm(name in _ARMED_ACTIONS, recording=name in _RECORDING_ACTIONS)
        except Exception:
            return

    def remove(self) -> None:
        """Disarm for good."""
        self.removed = True
        self.arm(False)

    def __enter__(self) -> ModuleSpans:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def record_modules(*modules: Any) -> ModuleSpans:
    """Record every module call as a span (``nn.Module: Type_k``) whenever a profiler records,
    until ``remove()`` is called on the result (or its ``with`` block ends). Returns the armed
    ``ModuleSpans``.

    perfkit's torch handler does this on its own (``on_trace_ready(..., layers=True)``, the
    default); call this when profiling without it. Every module is recorded, so ``modules``
    are not needed; they are accepted so that code written for the per-model form of this
    function keeps working."""
    del modules
    spans = ModuleSpans()
    spans.arm(True)
    return spans
