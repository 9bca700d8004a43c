"""Billing counts: report periods (periods.py), the definition of a day's peak (day_peak.py),
the daily rollup and its sums kept by the change path (rollups.py, _rollup_sums.py), the
reports and their requests (reports.py, report_query.py), a day's drill-down (report_days.py)
and month close (month_close.py, closed_figures.py). Reads history/; writes only the rollup
(for the change path) and month closes."""
