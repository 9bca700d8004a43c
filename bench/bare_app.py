"""The bare-Flask references of the HTTP scenarios: the same queries as the app, nothing else.

No authentication, validation, audit, ORM or limiter: the distance between these views and the
app is what the app's own machinery costs. Each gunicorn worker keeps one database connection
for its whole life (opened on its first request, so after the fork), which is the fastest a
synchronous Flask view can go.

    DATABASE_URL=sqlite:////path/bench.db gunicorn -w 2 'bench.bare_app:create_app()'
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from typing import Any

from flask import Flask, Response, jsonify, render_template_string, request

LIST_PER_PAGE = 50

# The same columns and order as the app's list page, as plain as an HTML table gets.
LIST_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>DDIs</title></head><body>
<p>Showing {{ first }}-{{ first + rows|length - 1 }} of {{ "{:,}".format(total) }}</p>
<table><thead><tr><th>Dialcode</th><th>Number</th><th>Extension</th><th>Company</th></tr></thead>
<tbody>
{% for r in rows %}
<tr><td>{{ r[0] }}</td><td>{{ r[1] }}</td><td>{{ r[2] }}</td><td>{{ r[3] }}</td></tr>
{% endfor %}</tbody></table>
</body></html>
"""


class Database:
    """One DB-API connection per process, with the placeholder style hidden from the views."""

    def __init__(self, url: str):
        self.url = url
        self.postgres = url.startswith("postgresql")
        self._conn: Any = None

    def conn(self):
        if self._conn is None:
            if self.postgres:
                import psycopg

                # autocommit: reads need no transaction; the insert view opens its own.
                plain = self.url.replace("postgresql+psycopg://", "postgresql://", 1)
                self._conn = psycopg.connect(plain, autocommit=True)
            else:
                path = self.url.removeprefix("sqlite:///")
                # isolation_level=None: transactions are opened explicitly, as the app does.
                self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
                # The app's connection settings (webapp/database.py), so both do the same checks.
                self._conn.execute("PRAGMA busy_timeout=15000")
                self._conn.execute("PRAGMA foreign_keys=ON")
        return self._conn

    def sql(self, statement: str) -> str:
        """Statements are written with '?'; psycopg wants '%s'."""
        return statement.replace("?", "%s") if self.postgres else statement

    def all(self, statement: str, params: tuple) -> list[tuple]:
        cur = self.conn().cursor()
        cur.execute(self.sql(statement), params)
        rows = cur.fetchall()
        cur.close()
        return rows


def _page(db: Database, company: str, limit: int, offset: int) -> tuple[int, list[tuple]]:
    """What the app's read does: the total of the company's DDIs, then one page in key order."""
    total = db.all("SELECT count(*) FROM ddis WHERE company = ?", (company,))[0][0]
    rows = db.all(
        "SELECT dialcode, number, virt_exten, company FROM ddis WHERE company = ? "
        "ORDER BY dialcode, number LIMIT ? OFFSET ?",
        (company, limit, offset),
    )
    return total, rows


def create_app() -> Flask:
    """The reference app on DATABASE_URL (an SQLAlchemy URL, as the app takes)."""
    app = Flask(__name__)
    db = Database(os.environ["DATABASE_URL"])

    @app.post("/read")
    def read():
        body = request.get_json()
        limit, offset = int(body.get("limit", 1000)), int(body.get("offset", 0))
        total, rows = _page(db, body["scope"]["company"], limit, offset)
        fields = ("dialcode", "number", "virt_exten", "company")
        values = [dict(zip(fields, r, strict=True)) for r in rows]
        return jsonify(result="success", values=values, numrows=len(values), total=total)

    @app.get("/list")
    def list_page():
        page = max(1, int(request.args.get("page", "1")))
        total, rows = _page(db, request.args["company"], LIST_PER_PAGE, (page - 1) * LIST_PER_PAGE)
        html = render_template_string(
            LIST_TEMPLATE, rows=rows, total=total, first=(page - 1) * LIST_PER_PAGE + 1
        )
        return Response(html, mimetype="text/html")

    @app.post("/create")
    def create():
        """The rows and one open history interval each, in one transaction, by executemany."""
        rows = request.get_json()["values"]
        now: Any = datetime.now(UTC).replace(tzinfo=None)
        if not db.postgres:  # stored as text on SQLite, in SQLAlchemy's format
            now = now.strftime("%Y-%m-%d %H:%M:%S.%f")
        # number_reversed: the stored reversed number the app's number search seeks on.
        ddis = [
            (r["dialcode"], r["number"], r["number"][::-1], r["virt_exten"], r["company"])
            for r in rows
        ]
        history = [
            ("ddi", r["company"], f"{r['dialcode']}:{r['number']}", now, None, "live") for r in rows
        ]
        conn = db.conn()
        cur = conn.cursor()
        # SQLite: take the write lock up front, like the app's write_transaction.
        cur.execute("BEGIN" if db.postgres else "BEGIN IMMEDIATE")
        try:
            cur.executemany(
                db.sql(
                    "INSERT INTO ddis (dialcode, number, number_reversed, virt_exten, company) "
                    "VALUES (?, ?, ?, ?, ?)"
                ),
                ddis,
            )
            cur.executemany(
                db.sql(
                    "INSERT INTO history_intervals (kind, company, key, start_at, end_at, source) "
                    "VALUES (?, ?, ?, ?, ?, ?)"
                ),
                history,
            )
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        finally:
            cur.close()
        return jsonify(result="success", numrows=len(rows))

    return app
