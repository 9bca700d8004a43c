"""What happened: the history intervals every report is computed from (intervals.py, written
only by the change path) and the audit log (audit.py, with its paged reads in
audit_query.py). The bottom of the domains: uses nothing of them."""
