"""Layer spans for torch runs: every ``nn.Module`` call recorded as a span while a profiler
records, so that perfkit can attribute ops to layers in a torch run the way Paddle's profiler
records its layers.

torch's profiler records ``nn.Module: Type_k`` spans only with ``with_stack=True``, whose Python
tracer slows every step many times over. perfkit records the same spans, named the same way
(``k`` counts the modules of one type in the order they are first called since the wrapper was
installed), from a wrapper around ``torch.nn.Module.__call__``, so no model needs a call of its
own.

Why a wrapper and not torch's global module hooks (``register_module_forward_pre_hook`` and
``register_module_forward_hook``): any global hook sends every module call down torch's hooked
call path, which costs 4 to 7 microseconds a call on the demo models, whether the profiler
records or not: 7 to 11% of a recorded step of ``perfkit demo``'s MLP. The wrapper costs one
Python call when the profiler does not record and one span when it does (within the noise of
that step; ``bench/bench_layer_spans.py``). torch expects ``Module.__call__`` to be wrapped:
``torch.fx``'s tracer wraps it, and ``torch.compile`` inlines a wrapped one (it only takes a
shortcut for the unwrapped one).

The wrapper is installed only while something asks for spans (a ``ModuleSpans`` that is
*armed*), and records only while a profiler records:

- ``perfkit_torch.on_trace_ready(...)`` (``layers=True``, the default) arms it when it is
  created, for its profiler's first cycle; at the end of each cycle it follows the profiler's
  schedule (``ModuleSpans.follow``): armed in the warm-up and recording steps, taken off in the
  steps the schedule skips and once the profiler has stopped;
- ``record_modules()`` arms it until its ``remove()`` (or the end of its ``with`` block), for
  code that profiles without perfkit's handler (the Kineto trace it writes then holds the
  spans, for ``perfkit report trace.json``).

A module call made while spans are armed and a profiler records is one span, from the call to
its return (or exception), hooks included. Under ``torch.compile`` the wrapper records nothing
(the compiled region is one span of its caller). It never raises into the model. When another
library wraps ``Module.__call__`` after perfkit, removing perfkit's wrapper would remove theirs:
perfkit's then stays, passing calls straight through.
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
#: Requests whose owner was collected while ``_lock`` was held (the garbage collector can run a
#: finalizer in the middle of ``_set``, in the thread holding it): the next ``_set`` disarms
#: them.
_collected: list[ModuleSpans] = []
#: ``Module.__call__`` as perfkit last found it when installing its wrapper (kept afterwards,
#: for calls already inside the wrapper and for a library that wrapped over it).
_original: Any = None
#: Whether the wrapper records (it may stay installed, passing calls through, when another
#: library wrapped ``Module.__call__`` over it).
_active = False
#: Span name of each module seen (by ``id``; dropped when the module is collected).
_names: dict[int, str] = {}
#: (span object, span name) of each module seen since the ordinals were last reset (by ``id``).
_spans: dict[int, tuple[Any, str]] = {}
_type_counts: dict[str, int] = {}
#: Modules (by ``id``) whose collection will drop their name.
_watched: set[int] = set()
#: The modules seen (by ``id``), weakly: what ``describe_modules`` describes.
_modules: dict[int, Any] = {}
#: Whether an armed ``ModuleSpans`` follows a schedule that says the profiler records now.
_expect_recording = False


def _torch_functions() -> tuple[Any, Any, Any]:
    """(profiler enabled?, compiling?, span context manager class) of the installed torch."""
    import torch

    enabled = torch._C._autograd._profiler_enabled
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
    span: Any = getattr(torch._C._profiler, "_RecordFunctionFast", None)
    if span is None:  # older torch: the Python context manager, slower, a user_annotation span
        span = _FreshSpans
    return enabled, compiling, span


class _FreshSpans:
    """Older torch's ``record_function`` in the form of ``_RecordFunctionFast``, reusable by
    one module's calls: a ``record_function`` of its own for each call, opened and closed in
    order (a module inside its own call opens a second one)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.open: list[Any] = []

    def __enter__(self) -> None:
        from torch.autograd import profiler

        span = profiler.record_function(self.name)
        span.__enter__()
        self.open.append(span)

    def __exit__(self, *exc: Any) -> None:
        self.open.pop().__exit__(None, None, None)


_enabled: Any = None
_compiling: Any = None
_Span: Any = None


def _span_name(module: Any) -> str:
    """``nn.Module: Type_k`` for ``module``, ``k`` counting modules of its type in the order
    they were first seen."""
    return _span_for(module)[1]


def _span_for(module: Any) -> tuple[Any, str]:
    """(the span object that records ``module``'s calls, its name ``nn.Module: Type_k``),
    made on the module's first call since the ordinals were reset, then reused: a call costs
    one dictionary look-up, no name is formatted and no span object allocated."""
    key = id(module)
    found = _spans.get(key)
    if found is not None:
        return found
    name = _names.get(key)
    if name is None:
        type_name = type(module).__name__
        k = _type_counts.get(type_name, 0)
        _type_counts[type_name] = k + 1
        name = f"{SPAN_PREFIX}{type_name}_{k}"
        _names[key] = name
        try:
            # Again after every reset: the wrapper's reinstall empties ``_modules``.
            _modules[key] = weakref.ref(module)
            if key not in _watched:
                weakref.finalize(module, _forget, key)
                _watched.add(key)
        except TypeError:  # not weak-referenceable: the name stays, only its ordinal matters
            pass
    found = (_Span(name), name)
    _spans[key] = found
    return found


def _forget(key: int) -> None:
    """Drop the name of a module that was collected (its ``id`` may be reused)."""
    _names.pop(key, None)
    _spans.pop(key, None)
    _modules.pop(key, None)
    _watched.discard(key)


def _reopen(module: Any, name: str) -> Any:
    """A fresh span for ``module``'s call, entered, when its own is open already: the module is
    inside its own call (recursion, or a call from another thread), or a profiler stopped
    inside its last call and left it open. The fresh one serves the module's next calls."""
    span = _Span(name)
    span.__enter__()
    _spans[id(module)] = (span, name)
    return span


def _call(self: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.nn.Module.__call__`` while perfkit's wrapper is installed: the call, inside a span
    named after the module when a profiler records."""
    if not _active or _compiling():
        return _original(self, *args, **kwargs)
    try:
        if _enabled():
            span, name = _spans.get(id(self)) or _span_for(self)
            try:
                span.__enter__()
            except RuntimeError:
                span = _reopen(self, name)
        else:
            if _expect_recording:
                _stopped()
            span = None
    except Exception:  # a span is never worth a failed step
        span = None
    if span is None:
        return _original(self, *args, **kwargs)
    try:
        return _original(self, *args, **kwargs)
    finally:
        try:  # noqa: SIM105 (a context manager per call would cost more than the span)
            span.__exit__(None, None, None)
        except Exception:
            pass


def _install() -> None:
    """Install the wrapper around ``Module.__call__`` (under ``_lock``)."""
    global _enabled, _compiling, _Span, _original, _active
    if _active:
        return
    import torch

    _enabled, _compiling, _Span = _torch_functions()
    # Ordinals count from 0 again, so one model's spans are named alike in every cycle.
    _names.clear()
    _spans.clear()
    _modules.clear()
    _type_counts.clear()
    if torch.nn.Module.__call__ is not _call:
        _original = torch.nn.Module.__call__
        setattr(torch.nn.Module, "__call__", _call)  # noqa: B010 (typed the same with or without torch)
    _active = True


def _uninstall() -> None:
    """Remove the wrapper (under ``_lock``); one another library wrapped stays, passing calls
    through."""
    global _active
    if not _active:
        return
    _active = False
    import torch

    if torch.nn.Module.__call__ is _call:
        setattr(torch.nn.Module, "__call__", _original)  # noqa: B010


def _set(spans: ModuleSpans, armed: bool, recording: bool) -> None:
    """Arm or disarm ``spans``; install the wrapper while any request is armed, remove it when
    none is."""
    with _lock:
        _set_locked(spans, armed, recording)


def _set_locked(spans: ModuleSpans, armed: bool, recording: bool) -> None:
    """``_set`` with ``_lock`` held; also disarms the requests in ``_collected``."""
    global _expect_recording
    if armed and spans not in _armed:
        # A cycle begins: ordinals count from 0 again, so one model's spans are named alike
        # in every cycle, whatever other requests kept the wrapper installed meanwhile.
        _names.clear()
        _spans.clear()
        _type_counts.clear()
    spans.armed = armed
    spans.expect_recording = armed and recording
    if armed:
        _armed.add(spans)
    else:
        _armed.discard(spans)
    while _collected:
        gone = _collected.pop()
        gone.armed = gone.expect_recording = False
        _armed.discard(gone)
    _expect_recording = any([s.expect_recording for s in _armed])
    if _armed:
        _install()
    else:
        _uninstall()


def _release(spans: ModuleSpans) -> None:
    """Disarm ``spans`` for good from a finalizer: never waits for ``_lock`` (the thread the
    garbage collector runs in may hold it, inside ``_set``); when it is held, the next
    ``_set`` disarms them."""
    spans.removed = True
    if _lock.acquire(blocking=False):
        try:
            _set_locked(spans, False, False)
        finally:
            _lock.release()
    else:
        _collected.append(spans)


def _stopped() -> None:
    """A profiler a schedule said was recording has stopped: disarm what followed it."""
    for spans in list(_armed):
        if spans.expect_recording:
            spans.arm(False)


def _parameter(name: str, tensor: Any) -> dict[str, Any]:
    """One weight as a run records it (``parameter_entry``); trainable: ``requires_grad``."""
    from perfkit_core.events import parameter_entry

    dtype = str(tensor.dtype).replace("torch.", "")
    size = int(tensor.element_size())
    return parameter_entry(name, tensor.shape, dtype, size, bool(tensor.requires_grad))


def describe_modules() -> dict[str, Any] | None:
    """The modules whose calls were recorded as spans since the wrapper was installed, as a
    run's ``meta["model"]`` (``perfkit_core.views.layers.model_description``): per module, the
    span name that records its calls (``match``), its attribute path from the outermost recorded
    module (``hidden1``, ``blocks.0.fc``; empty for that module), its type and its own
    parameters (its own, and those of sub-modules that were never called, such as a module
    list's members, counted once when shared). None when no module was seen; never raises."""
    try:
        from perfkit_core.events import layer_entry

        with _lock:
            seen = {key: (ref(), _names.get(key)) for key, ref in list(_modules.items())}
        alive = {key: (m, name) for key, (m, name) in seen.items() if m is not None and name}
        if not alive:
            return None
        # A module's path: from the outermost seen module that holds it.
        inside: set[int] = set()
        for module, _ in alive.values():
            for sub in module.modules():
                if sub is not module and id(sub) in alive:
                    inside.add(id(sub))
        paths: dict[int, str] = {}
        for key, (module, _) in alive.items():
            if key in inside:
                continue
            for path, sub in module.named_modules(remove_duplicate=False):
                if id(sub) in alive and id(sub) not in paths:
                    paths[id(sub)] = path
        counted: set[int] = set()
        layers = []
        for key, (module, name) in alive.items():
            params: list[dict[str, Any]] = []
            stack: list[tuple[str, Any]] = [("", module)]
            while stack:
                prefix, current = stack.pop(0)
                for pname, tensor in current.named_parameters(recurse=False):
                    if tensor is None or id(tensor) in counted:
                        continue
                    counted.add(id(tensor))
                    params.append(_parameter(prefix + pname, tensor))
                for cname, child in current.named_children():
                    if id(child) not in alive:
                        stack.append((f"{prefix}{cname}.", child))
            layers.append(layer_entry(name, paths.get(key, ""), type(module).__name__, params))
        return {"match": "span", "layers": layers}
    except Exception:  # a description is never worth a lost profile
        return None


def installed() -> bool:
    """Whether perfkit's wrapper around ``Module.__call__`` records module spans now (when a
    profiler records)."""
    return _active


class ModuleSpans:
    """A request for module spans: while it is armed (``arm(True)``), every module call is
    recorded as a span whenever a profiler records. ``remove()`` (or leaving the ``with``
    block) disarms it for good. Any number may exist; the wrapper is installed while at least
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

    def release(self) -> None:
        """``remove()`` for a finalizer (when the object that armed this request is collected):
        never waits, so it cannot deadlock a thread the garbage collector interrupted inside
        perfkit's own bookkeeping."""
        _release(self)

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
