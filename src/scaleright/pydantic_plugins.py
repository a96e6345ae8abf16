"""scaleright builds its pydantic models without third-party pydantic plugins.

The first time pydantic builds a validator it looks for plugins: it reads the metadata of every installed
distribution for entry points of the group ``pydantic`` (about 3 ms with the ~140 distributions of a development
environment, more in a large one), at start-up of every command. scaleright's models need no plugin. Inside
``no_plugins`` pydantic is told ``PYDANTIC_DISABLE_PLUGINS=__all__``, so it neither looks nor applies one; the
caller's value is restored after, and a skipped search is not remembered as "no plugins": a notebook's own models,
built after, get its plugins as before. typer does the same around the TypeAdapters it builds for a command's
parameters (``typer._adapters.disabled_pydantic_plugins``).

The variable is the process's: a model another thread builds while the window is open gets no plugin either.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_plugins", "VAR"]

VAR = "PYDANTIC_DISABLE_PLUGINS"  # read by pydantic.plugin._loader.get_plugins on each validator it builds


_lock = threading.Lock()
_windows = 0  # windows open now
_callers: str | None = None  # the caller's PYDANTIC_DISABLE_PLUGINS while a window is open (None: unset)


@contextmanager
def no_plugins() -> Iterator[None]:
    """pydantic applies (and looks for) no plugin to the models built inside; ``PYDANTIC_DISABLE_PLUGINS`` is as
    it was when the last open window closes, also on an error. Nests, also across threads."""
    global _windows, _callers
    with _lock:
        if _windows == 0:
            _callers = os.environ.get(VAR)
        _windows += 1
        os.environ[VAR] = "__all__"
    try:
        yield
    finally:
        with _lock:
            _windows -= 1
            if _windows == 0:
                if _callers is None:
                    os.environ.pop(VAR, None)
                else:
                    os.environ[VAR] = _callers
