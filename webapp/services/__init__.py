"""The service layer: plain functions that validate, authorize and write, called alike by the
JSON API (`webapp.rest`), the pages (`webapp.views`) and the command line (`webapp.cli`), so
every rule lives here once. Each takes the acting `access.Principal` and asks it what it may
see and change.

One package per domain, layered (import-linter holds it, pyproject.toml):

    company_overview, companies, imports   what a page or a file needs across domains
    records                                DDIs and phone users: reads and writes
    changes                                the one change path every record write takes
    billing, events, identity              reports and month close; change events and
                                           webhooks; accounts, sign-in and API tokens
    history                                history intervals and the audit log
    fields, paging                         field formats; numbered admin pages

A module may use the ones below it, never those above.
"""
