"""Calendar-style monthly count tables: /reports/ddis, /reports/users (and .csv)."""

from flask import Blueprint
from flask_login import login_required

bp = Blueprint("reports", __name__, url_prefix="/reports")


@bp.get("/ddis")
@login_required
def ddis():
    return "todo", 501


@bp.get("/users")
@login_required
def users():
    return "todo", 501
