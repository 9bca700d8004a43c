"""The signed-in account's own page: /account/tokens."""

from flask import Blueprint
from flask_login import login_required

bp = Blueprint("account", __name__, url_prefix="/account")


@bp.get("/tokens")
@login_required
def tokens():
    return "todo", 501
