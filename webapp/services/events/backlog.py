"""The event backlog as metrics, read at each scrape (docs/observe.md, Metrics): how far
the newest event is and how far behind each webhook's delivery runs."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from ...errors import is_outage, outage_reason
from ...extensions import db
from ...models import Webhook
from . import journal

# The metrics logger: where an operator looks when a scrape lacks a part.
log = logging.getLogger("webapp.observability.metrics")


def metrics() -> Iterator[Metric]:
    """The newest event id and, per webhook, how many events it is behind: newest minus its
    cursor (an upper bound: events its filters leave out count too, until it passes them).
    Two small queries: the event counter's one row, and the webhooks' cursors. With the
    database unavailable, nothing (one log line): the other metrics matter most then."""
    try:
        newest = journal.newest()
        rows = db.session.execute(select(Webhook.id, Webhook.cursor, Webhook.head_attempts)).all()
    except SQLAlchemyError as exc:
        db.session.rollback()
        if not is_outage(exc):
            raise
        log.warning("metrics: the event backlog was not read: %s", outage_reason(exc))
        return
    db.session.rollback()  # end the read transaction
    yield GaugeMetricFamily(
        "telephony_events_newest_id", "The id of the newest change event committed.", newest
    )
    behind = GaugeMetricFamily(
        "telephony_webhook_backlog_events",
        "Events recorded after a webhook's cursor (newest event id minus its cursor).",
        labels=["webhook"],
    )
    retrying = GaugeMetricFamily(
        "telephony_webhook_retry_attempts",
        "Failed attempts so far at the event a webhook is retrying (0: not retrying).",
        labels=["webhook"],
    )
    for webhook_id, cursor, attempts in rows:
        behind.add_metric([str(webhook_id)], max(newest - cursor, 0))
        retrying.add_metric([str(webhook_id)], attempts or 0)
    yield behind
    yield retrying
