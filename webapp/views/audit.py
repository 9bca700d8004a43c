"""The audit log: /audit."""

from flask import Blueprint
from flask_login import login_required

bp = Blueprint("audit", __name__, url_prefix="/audit")


@bp.get("")
@login_required
def index():
    return "todo", 501
