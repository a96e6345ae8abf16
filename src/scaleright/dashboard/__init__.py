"""``scaleright dashboard``: the web app over the Python API (``app.create_app``); needs the ``dashboard`` extra."""

__all__ = ["create_app"]


def create_app(**kwargs):  # type: ignore[no-untyped-def]
    """``scaleright.dashboard.app.create_app`` (imported here lazily: FastAPI loads only when a dashboard starts)."""
    from scaleright.dashboard.app import create_app as _create

    return _create(**kwargs)
