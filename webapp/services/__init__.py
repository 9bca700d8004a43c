"""The service layer: plain functions that validate, authorize, write history and audit.

Both the JSON API (`webapp.rest`) and the pages call these, so every rule lives here once.
"""
