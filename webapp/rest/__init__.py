"""The JSON API under /rest/: parse the body, call a service, wrap the answer.

Each module registers its routes on the one blueprint (blueprint.py) when imported here."""

from . import call, docs, errors, events, imports, meta, numbers, openapi, ops  # noqa: F401
from .blueprint import bp

__all__ = ["bp"]
