"""The local web UI's server: the built UI (shipped in ``static/``) and a JSON API over the profiles.

Binds 127.0.0.1 unless told otherwise; with a token, every request must carry it (the first page
load as ``?token=``, which sets a cookie). Files are served only from the shipped UI directory and
sources only as the profile's captured copies or from the source roots given on the command line:
a path that resolves anywhere else is refused.
"""

from __future__ import annotations

import errno
import hmac
import json
import mimetypes
import secrets
import sys
import threading
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import numpy as np

from ..errors import ExplorerError
from ..profile import Profile
from .data import ProfileData, compare

STATIC_DIR = Path(__file__).with_name("static")
DEFAULT_PORT = 3001
TOKEN_COOKIE = "neuron_explorer_token"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ServerError(ExplorerError):
    pass


class Explorer:
    """The profiles a server shows."""

    def __init__(self, profiles: list[Profile], source_roots: list[Path] | None = None):
        if not profiles:
            raise ServerError("no profiles to show")
        self.profiles = {str(i): ProfileData(str(i), p, list(source_roots or [])) for i, p in enumerate(profiles)}

    def get(self, pid: str) -> ProfileData:
        data = self.profiles.get(pid)
        if data is None:
            raise KeyError(f"no profile {pid!r}; this server shows {sorted(self.profiles)}")
        return data


def _json_default(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (bytes, Path)):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _number(query: dict, name: str, default=None, kind=float):
    if name not in query:
        return default
    try:
        return kind(query[name][0])
    except ValueError:
        raise ValueError(f"query parameter {name}={query[name][0]!r} is not a number") from None


def make_handler(explorer: Explorer, token: str | None):
    class Handler(BaseHTTPRequestHandler):
        server_version = "neuron-explorer"
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet: the terminal shows the URL, not every request
            pass

        # --- plumbing --------------------------------------------------------------------
        def _send(self, status: int, body: bytes, content_type: str, extra: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, obj, status: int = 200) -> None:
            self._send(status, json.dumps(obj, default=_json_default).encode(), "application/json")

        def _error(self, status: int, message: str) -> None:
            self._json({"error": message}, status)

        def _authorized(self, query: dict) -> tuple[bool, dict]:
            if token is None:
                return True, {}
            given = (query.get("token") or [None])[0]
            if given is not None and hmac.compare_digest(given, token):
                return True, {"Set-Cookie": f"{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"}
            header = self.headers.get("X-Explorer-Token")
            if header is not None and hmac.compare_digest(header, token):
                return True, {}
            cookie = SimpleCookie(self.headers.get("Cookie") or "")
            if TOKEN_COOKIE in cookie and hmac.compare_digest(cookie[TOKEN_COOKIE].value, token):
                return True, {}
            return False, {}

        def do_GET(self):
            url = urlparse(self.path)
            query = parse_qs(url.query)
            ok, cookie = self._authorized(query)
            if not ok:
                return self._error(HTTPStatus.FORBIDDEN, "this server needs its token: open the URL it printed (with ?token=...)")
            path = unquote(url.path)
            try:
                if path.startswith("/api/"):
                    return self._json(self._api(path[len("/api/"):].strip("/").split("/"), query))
                return self._static(path, cookie)
            except KeyError as err:
                return self._error(HTTPStatus.NOT_FOUND, str(err.args[0]) if err.args else "not found")
            except (ValueError, ExplorerError) as err:
                return self._error(HTTPStatus.BAD_REQUEST, str(err))
            except BrokenPipeError:
                return None
            except Exception as err:  # report, keep serving
                return self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(err).__name__}: {err}")

        def _static(self, path: str, cookie: dict):
            relative = path.lstrip("/") or "index.html"
            root = STATIC_DIR.resolve()
            target = (root / relative).resolve()
            if not target.is_relative_to(root):
                return self._error(HTTPStatus.FORBIDDEN, f"{path} is outside the UI directory")
            if not target.is_file():
                if "." in relative.rsplit("/", 1)[-1]:
                    return self._error(HTTPStatus.NOT_FOUND, f"no file {path}")
                target = root / "index.html"  # client-side routes
            if not target.is_file():
                return self._error(HTTPStatus.NOT_FOUND, "the UI is not built (packages/neuron-explorer/ui: npm run build)")
            ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            self._send(200, target.read_bytes(), ctype, cookie)

        # --- the API ---------------------------------------------------------------------
        def _api(self, parts: list[str], q: dict):
            if parts == ["profiles"]:
                return [p.describe() for p in explorer.profiles.values()]
            if parts[0] == "compare":
                return compare(explorer.get((q.get("a") or ["0"])[0]), explorer.get((q.get("b") or ["1"])[0]))
            if parts[0] != "p" or len(parts) < 3:
                raise KeyError(f"no API endpoint /api/{'/'.join(parts)}")
            data = explorer.get(parts[1])
            route, rest = parts[2], parts[3:]
            bins = int(_number(q, "bins", 800, int))
            if not 1 <= bins <= 5000:
                raise ValueError(f"bins={bins} must be between 1 and 5000")
            if route == "summary":
                return data.summary()
            if route == "device" and rest == ["tracks"]:
                return data.device_tracks_info()
            if route == "device" and rest == ["window"]:
                index = data.device
                start, end = _number(q, "start", index.start), _number(q, "end", index.end)
                if not end > start:
                    raise ValueError(f"window end {end} must be after its start {start}")
                return data.device_window(start, end, bins, (q.get("highlight") or [None])[0])
            if route == "instruction" and len(rest) == 1:
                return data.instruction(int(rest[0]))
            if route == "system":
                return data.system_window((q.get("clock") or ["device"])[0], _number(q, "start"), _number(q, "end"), bins)
            if route == "host" and not rest:
                return data.host_samples()
            if route == "execution" and len(rest) == 1:
                return data.execution(int(rest[0]))
            if route == "hierarchy" and not rest:
                return data.hierarchy()
            if route == "hierarchy" and len(rest) == 2 and rest[1] == "groups":
                return data.instruction_groups(int(rest[0]))
            if route == "hierarchy" and len(rest) == 2 and rest[1] == "range":
                return data.node_range(int(rest[0]))
            if route == "deps" and len(rest) == 2:
                if rest[0] == "launch":
                    return data.launch_dependencies(int(rest[1]))
                return data.dependencies(rest[0], int(rest[1]), int(_number(q, "depth", 4, int)))
            if route == "sources" and not rest:
                return data.sources()
            if route == "source" and len(rest) == 1:
                return data.source(int(rest[0]))
            raise KeyError(f"no API endpoint /api/{'/'.join(parts)}")

    return Handler


class ExplorerServer:
    """A running server (``serve_forever`` blocks; ``start`` runs it on a thread, for tests and notebooks)."""

    def __init__(self, explorer: Explorer, host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None):
        self.token = token
        try:
            self.httpd = ThreadingHTTPServer((host, port), make_handler(explorer, token))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise ServerError(f"port {port} on {host} is already in use: pass another with --port (or --port 0 "
                                  f"for any free port)") from None
            raise ServerError(f"cannot serve on {host}:{port}: {err.strerror or err}") from None
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/" + (f"?token={self.token}" if self.token else "")

    def start(self) -> ExplorerServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="neuron-explorer server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        try:
            self.httpd.serve_forever()
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
        finally:
            self.httpd.server_close()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join()


def new_token() -> str:
    return secrets.token_urlsafe(24)
