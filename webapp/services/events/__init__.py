"""Change events: recorded by the change path in the change's transaction, ids in commit order
(journal.py), read by the API and the deliveries (feed.py), sent to webhooks (webhooks.py:
management; delivery.py: the worker) and counted for /metrics (backlog.py). Uses history/
for the audit of webhook changes."""
