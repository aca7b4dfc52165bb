"""The local web UI: a JSON API over profiles plus the built front end (``static/``)."""

from .app import DEFAULT_PORT, Explorer, ExplorerServer, ServerError, new_token

__all__ = ["Explorer", "ExplorerServer", "ServerError", "DEFAULT_PORT", "new_token"]
