"""System-Admin pages: /admin/companies, /admin/accounts."""

from flask import Blueprint
from flask_login import login_required

bp = Blueprint("admin", __name__, url_prefix="/admin")


@bp.get("/companies")
@login_required
def companies():
    return "todo", 501


@bp.get("/accounts")
@login_required
def accounts():
    return "todo", 501
