"""The page's DDI import in two steps: upload and preview, then confirm (docs/import.md).

The uploaded file waits in the database (models.ImportPreview), so the confirmation may reach
any worker. It is applied only while the plan is still the one the account was last shown
(its fingerprint); otherwise the account is shown the new plan and confirms again.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, update

from ...access import Principal
from ...database import utcnow, write_transaction
from ...errors import Invalid, NotFound, TooLarge
from ...extensions import db
from ...models import STOCK_PREVIEW, ImportPreview
from . import ddi_import

KEPT_FOR = timedelta(days=1)


@dataclass(frozen=True)
class Preview:
    id: str
    filename: str
    size: int
    plan: ddi_import.Plan


def create(principal: Principal, filename: str, data: bytes) -> Preview:
    """Check an uploaded file and keep it for its confirmation; return its plan.

    Guarantees: System-Admin only; a bad file raises FileRejected naming every problem with
    its line (ddi_import.plan), or TooLarge, and nothing is kept; previews older than a day
    are purged.
    """
    principal.require_system_admin("import DDIs")
    if principal.account_id is None:
        raise Invalid("Previews belong to a signed-in account.")
    if len(data) > ddi_import.MAX_BYTES:
        raise TooLarge(too_large_message())
    if not data:
        raise Invalid("The file is empty; its first line must be the header.", {"file": "empty"})
    plan = ddi_import.plan(principal, ddi_import.bytes_source(data))
    preview = Preview(secrets.token_hex(16), filename[:200] or "upload.csv", len(data), plan)
    with write_transaction() as session:
        session.execute(delete(ImportPreview).where(ImportPreview.created_at < utcnow() - KEPT_FOR))
        session.add(
            ImportPreview(
                id=preview.id,
                account_id=principal.account_id,
                filename=preview.filename,
                size=preview.size,
                content=data,
                fingerprint=plan.fingerprint,
            )
        )
    return preview


def too_large_message() -> str:
    """What the page and the API say of a file over ddi_import.MAX_BYTES."""
    return (
        f"The file is larger than {ddi_import.MAX_BYTES // (1024 * 1024)} MiB: split it, "
        "or import it with the command line (flask ddis import)."
    )


def _load(principal: Principal, preview_id: str) -> ImportPreview:
    principal.require_system_admin("import DDIs")
    row = db.session.get(ImportPreview, preview_id)
    if (
        row is None
        or row.fingerprint == STOCK_PREVIEW  # a file to stock, not to import
        or row.account_id != principal.account_id
        or row.created_at < (utcnow() - KEPT_FOR)
    ):
        raise NotFound("No such import preview: it was applied, it expired, or it is not yours.")
    return row


def refresh(principal: Principal, preview_id: str) -> Preview:
    """The preview's plan as of now, which becomes the one a confirmation must match."""
    row = _load(principal, preview_id)
    plan = ddi_import.plan(principal, ddi_import.bytes_source(row.content))
    _remember(preview_id, plan.fingerprint)
    return Preview(row.id, row.filename, row.size, plan)


def confirm(principal: Principal, preview_id: str) -> Preview:
    """Apply the preview's file if its plan is still the one last shown; then forget it.

    Guarantees: all or nothing (ddi_import.apply). If the plan changed since it was shown,
    raises Changed with the new plan (now the one to confirm) and writes no DDI.
    """
    row = _load(principal, preview_id)
    source = ddi_import.bytes_source(row.content)
    filename, size = row.filename, row.size
    try:
        plan = ddi_import.apply(principal, source, expected=row.fingerprint)
    except ddi_import.Stale as stale:
        _remember(preview_id, stale.plan.fingerprint)
        raise Changed(Preview(preview_id, filename, size, stale.plan)) from None
    with write_transaction() as session:
        session.execute(delete(ImportPreview).where(ImportPreview.id == preview_id))
    return Preview(preview_id, filename, size, plan)


def _remember(preview_id: str, fingerprint: str) -> None:
    with write_transaction() as session:
        session.execute(
            update(ImportPreview)
            .where(ImportPreview.id == preview_id)
            .values(fingerprint=fingerprint)
        )


class Changed(ddi_import.Stale):
    """The data changed since the preview was shown: `preview` holds the plan as of now."""

    def __init__(self, preview: Preview):
        super().__init__(preview.plan)
        self.preview = preview
