"""DDI and phone-user pages: /ddis, /users and their forms."""

from flask import Blueprint
from flask_login import login_required

bp = Blueprint("records", __name__)


@bp.get("/ddis")
@login_required
def ddis():
    return "todo", 501


@bp.get("/users")
@login_required
def users():
    return "todo", 501
