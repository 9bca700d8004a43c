"""LEAD: drop this file (and its import in views/__init__.py) at merge. A stand-in for the TOTP
helper's second-step page (`auth.second_step`, GET /login/verify), only so that the passkeys
branch can sign in with a passkey end to end: it shows templates/auth/_passkey_step.html, as
the real page does."""

from __future__ import annotations

from flask import redirect, render_template_string, url_for

from . import signin_flow
from .auth import bp

_PAGE = """{% extends "base.html" %}
{% block title %}Second step{% endblock %}
{% block content %}<h1>Second step</h1>
{% include "auth/_passkey_step.html" ignore missing %}{% endblock %}"""


@bp.get("/login/verify")
def second_step():
    if signin_flow.pending() is None:
        return redirect(url_for("auth.login"))
    return render_template_string(_PAGE)
