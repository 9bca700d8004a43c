"""A Python client generated from the served document by openapi-python-client (a pinned dev
dependency, run offline from the installed package) drives the live app: create, read, a
report by POST and by GET, an import, and an error answer, each parsed into the document's
named models (docs/api.md#the-openapi-document-and-restdocs).

The generator is told to treat the import's text/csv body as a file (`content_type_overrides`)
and to skip formatting the code it writes (`post_hooks`); with those, it must write every
operation without a warning.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the generator (about a second and a half)

GENERATOR = Path(sys.executable).parent / "openapi-python-client"
PACKAGE = "telephony_client"
CONFIG = """\
post_hooks: []
content_type_overrides:
  text/csv: application/octet-stream
"""


@pytest.fixture
def generated(live_server, tmp_path, monkeypatch):
    """The client package, generated into tmp_path and importable; forgotten afterwards."""
    assert GENERATOR.exists(), "openapi-python-client is not installed: pip install -e '.[dev]'"
    with urllib.request.urlopen(f"{live_server}/rest/openapi.json") as answer:
        document = json.load(answer)
    (tmp_path / "openapi.json").write_text(json.dumps(document))
    (tmp_path / "config.yaml").write_text(CONFIG)
    result = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(tmp_path / "openapi.json"),
            "--config",
            str(tmp_path / "config.yaml"),
            "--meta",
            "none",
            "--output-path",
            str(tmp_path / PACKAGE),
            "--fail-on-warning",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(PACKAGE)
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def test_the_generated_client_reads_well(generated, tmp_path):
    """A module per tag, a function per operationId, a model per named schema: nothing named
    after a position (`CreateBodyType0`)."""
    api = tmp_path / PACKAGE / "api"
    assert {p.name for p in api.iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        "records",
        "imports",
        "reports",
        "month_close",
        "events",
        "numbers",
        "meta",
    }
    assert "stock_numbers" in {p.stem for p in (api / "numbers").glob("*.py")}
    assert {p.stem for p in (api / "records").glob("*.py")} >= {
        "create_records",
        "read_records",
        "update_records",
        "link_ddi",
        "delete_records",
    }
    models = {p.stem for p in (tmp_path / PACKAGE / "models").glob("*.py")}
    assert {"ddi", "phone_user", "error", "ddi_count_entry", "ddi_count_report"} <= models
    assert not [m for m in models if re.search(r"type_\d|body|response_\d|_item$", m)]


def test_create_read_and_report_through_the_generated_client(generated, factory, live_server):
    from telephony_client import AuthenticatedClient
    from telephony_client.api.imports import import_ddis
    from telephony_client.api.records import create_records, read_records
    from telephony_client.api.reports import read_ddi_count, read_ddi_count_by_query
    from telephony_client.models import (
        CreateDdiRequest,
        CreatePhoneUserRequest,
        Ddi,
        DdiCountReport,
        DdiFilter,
        DdiRecord,
        Error,
        ImportResult,
        PhoneUser,
        ReadDdiRequest,
        ReadResult,
        ReportRequest,
        ReportScope,
        WriteResult,
    )
    from telephony_client.types import File

    factory.company("acme", "Acme Telecom Ltd")
    factory.company("globex")
    root = factory.account("root", system_admin=True)
    client = AuthenticatedClient(base_url=live_server, token=root.token)
    ddi = Ddi(dialcode="44", number="2071234567", virt_exten="100", company="acme")

    created = create_records.sync(client=client, body=CreateDdiRequest(type_="ddi", values=ddi))
    assert isinstance(created, WriteResult) and created.numrows == 1
    users = [PhoneUser(username=name, virt_exten="200", company="acme") for name in ("a", "b")]
    created = create_records.sync(
        client=client, body=CreatePhoneUserRequest(type_="user", values=users)
    )
    assert isinstance(created, WriteResult) and created.numrows == 2

    again = create_records.sync_detailed(
        client=client, body=CreateDdiRequest(type_="ddi", values=ddi)
    )
    assert again.status_code == 409
    assert isinstance(again.parsed, Error) and again.parsed.error.code == "conflict"

    read = read_records.sync(
        client=client, body=ReadDdiRequest(type_="ddi", scope=DdiFilter(company="acme"))
    )
    assert isinstance(read, ReadResult)
    # A read answers the four fields, never the number's description the create may give.
    answered = DdiRecord(dialcode="44", number="2071234567", virt_exten="100", company="acme")
    assert (read.values, read.numrows, read.total) == ([answered], 1, 1)

    csv = b"dialcode,number,virt_exten,company\n44,2071234567,100,globex\n33,100,7,acme\n"
    imported = import_ddis.sync(client=client, body=File(payload=csv, mime_type="text/csv"))
    assert isinstance(imported, ImportResult)
    assert (imported.created, imported.moved, imported.dry_run) == (1, 1, False)

    report = read_ddi_count.sync(
        client=client, body=ReportRequest(type_="cdr", scope=ReportScope(company=["acme"]))
    )
    assert isinstance(report, DdiCountReport)
    entry = report.values["acme"]
    assert entry.name == "Acme Telecom Ltd"
    today = datetime.now(UTC).date().isoformat()  # REPORT_TIMEZONE is UTC in the tests
    # The DDI moved to globex today and a new one came: acme's peak today is 1 (half-open
    # intervals: the moved one and the new one were not active at the same moment) or 2.
    assert entry.dates[today] >= 1
    assert entry.billable_ddi_days_for_month == sum(entry.dates.additional_properties.values())
    assert report.period.closed is False

    by_query = read_ddi_count_by_query.sync(client=client, company=["acme", "globex"])
    assert isinstance(by_query, DdiCountReport)
    assert sorted(by_query.values.additional_properties) == ["acme", "globex"]
    assert by_query.values["acme"].dates[today] == entry.dates[today]
