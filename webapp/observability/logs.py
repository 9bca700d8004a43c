"""One log format for the app, gunicorn and the delivery worker (docs/observe.md#logging).

Every line is one record: `time` (UTC, ISO 8601, milliseconds), `level`, `logger`, `message`,
then the record's own fields (an access line's method, path, ...), then `request_id` during a
request, and `exception` (the traceback, on the same line) when there is one. LOG_FORMAT
chooses how a line is written:

- `json`: one JSON object per line, `{"time": ..., "level": ..., ...}`;
- `text`: key=value pairs (logfmt); a value holding anything but printable ASCII, or a
  space, a quote, an `=` or a backslash, is written as a JSON string.

Either way a value can never break a line in two: a newline in a message is written `\\n`.

create_app installs the handler on the root logger (`configure`); gunicorn.conf.py installs the
same one for gunicorn's own loggers through `gunicorn_logconfig`, before any worker starts.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

from .context import current_request_id

ACCESS_LOGGER = "webapp.access"
# One encoder for every line: json.dumps with options builds a new one per call, which costs
# more than the encoding. UTF-8 kept as is; a value of another type written as its str().
_JSON = json.JSONEncoder(ensure_ascii=False, default=str)
# The attribute under which a record carries its own fields: extra={FIELDS: {...}}.
FIELDS = "fields"


class Handler(logging.StreamHandler):
    """A stream handler that always writes to the process's current sys.stderr (pytest's
    capture replaces it after the handler is made); its class marks the one handler
    `configure` installs, so a second app or a reload replaces it, never adds another."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass  # always sys.stderr, whatever logging's setup assigns


class Formatter(logging.Formatter):
    """A record as one line in `kind` ('json' or 'text'): module docstring."""

    def __init__(self, kind: str = "text") -> None:
        super().__init__()
        self.kind = kind

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "time": _time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        own = getattr(record, FIELDS, None)
        if own:
            fields.update(own)
        if "request_id" not in fields and (rid := current_request_id()) is not None:
            fields["request_id"] = rid
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            fields["exception"] = record.exc_text
        if self.kind == "json":
            return _JSON.encode(fields)
        return " ".join([f"{key}={_text_value(value)}" for key, value in fields.items()])


_second: tuple[int, str] = (-1, "")


def _time(created: float) -> str:
    """2026-11-24T08:20:00.123Z: the date part is made once a second (a line per request)."""
    global _second
    whole = int(created)
    if _second[0] != whole:
        _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{_second[1]}.{int((created - whole) * 1000):03d}Z"


# A value written bare: printable ASCII without a space, a quote, `=` or a backslash.
_BARE = re.compile(r"[!#-<>-\[\]-~]+")


def _text_value(value: Any) -> str:
    """A logfmt value: bare when it is a plain word, else quoted and escaped as JSON."""
    text = value if isinstance(value, str) else str(value)
    if _BARE.fullmatch(text):
        return text
    return _JSON.encode(text)


# An ANSI escape sequence (a colour, bold): Werkzeug styles its lines with them.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class QuietDevServer(logging.Filter):
    """The Werkzeug development server's lines (`flask run`, `make run`) as the app's:

    - its line per request is dropped: the app writes its own access line for every request
      (observability.finish_request). Werkzeug logs it as `'<client> - - [<date>] "%s" %s %s'`
      (the newline it is written with is stripped before it is logged);
    - the others (the address it serves on, errors) pass without the ANSI escape codes
      Werkzeug styles them with, which a log line would only show as text (`\\u001b[31m`);
    - its start message, several lines, becomes one: "Running on http://…" first, then its
      warning that it is a development server."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str):
            return True
        if record.msg.rstrip().endswith('"%s" %s %s'):
            return False
        message = _ANSI.sub("", record.getMessage())
        if "\n" in message and "* Running on" in message:  # the start message, not a traceback
            parts = [line.strip().removeprefix("* ") for line in message.splitlines()]
            parts = [part for part in parts if part]
            running = [part for part in parts if part.startswith("Running on")]
            message = "; ".join(running + [part for part in parts if part not in running])
        record.msg, record.args = message, None
        return True


def configure(level: str, kind: str) -> None:
    """Send every log record of the process, at `level` and above, through one Handler with
    the `kind` format (replacing the one a previous call, or gunicorn.conf.py, installed;
    handlers others added, such as pytest's, stay)."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if isinstance(h, Handler)), None)
    if handler is None:
        handler = Handler()
        root.addHandler(handler)
    handler.setFormatter(Formatter(kind))
    root.setLevel(level)
    werkzeug = logging.getLogger("werkzeug")
    if not any(isinstance(f, QuietDevServer) for f in werkzeug.filters):
        werkzeug.addFilter(QuietDevServer())


def gunicorn_logconfig(level: str, kind: str) -> dict[str, Any]:
    """gunicorn's `logconfig_dict`: its error log (start, stop, worker boots and exits, worker
    timeouts) goes through the app's Handler and format. gunicorn's access log stays off: the
    app writes one access line per request itself (observability.finish_request), the same
    under `flask run` and gunicorn."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"app": {"()": f"{__name__}.Formatter", "kind": kind}},
        "handlers": {"app": {"class": f"{__name__}.Handler", "formatter": "app"}},
        "root": {"level": level, "handlers": ["app"]},
        "loggers": {
            # No handlers of their own (dictConfig removes gunicorn's): the root's writes them.
            # No level either: gunicorn sets it from its `loglevel` (LOG_LEVEL in
            # gunicorn.conf.py, or --log-level), which this would override.
            "gunicorn.error": {"handlers": [], "propagate": True},
            "gunicorn.access": {"level": level, "handlers": [], "propagate": False},
        },
    }
