"""perfkit adapter for PaddlePaddle.

The handler for ``paddle.profiler.Profiler(on_trace_ready=...)`` and the Paddle trace loaders
are not built yet; today this package only tells ``perfkit info`` whether paddle is installed.
"""

from __future__ import annotations
