"""`flask webhooks …` and `flask events …` as a script runs them (docs/cli.md, docs/events.md):
the signing secret printed once, alone on the last line, and never again; a mistake is one
line on stderr, exit status 1, nothing written; pruning by age; a delivery run with nothing
to do; and the DDI import's events from the command line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import func, select, update
from standardwebhooks.webhooks import Webhook as Verifier
from standardwebhooks.webhooks import WebhookVerificationError

from webapp.access import Principal
from webapp.database import utcnow, write_transaction
from webapp.extensions import db
from webapp.models import Account, AuditEntry, Event, EventTxn, Webhook, WebhookAttempt
from webapp.services import sealing
from webapp.services.events import delivery, feed, webhooks

from .factories import ACME, GLOBEX, Factory
from .observability import ROOT, server_env, stop
from .test_delivery import Clock, running_receiver
from .waiting import wait_until

receiver = pytest.fixture(running_receiver, name="receiver")

pytestmark = pytest.mark.usefixtures("allow_loopback_webhooks")  # URL is on 127.0.0.1

URL = "http://127.0.0.1:9/hook"


@pytest.fixture
def companies(factory: Factory) -> Factory:
    factory.company(ACME)
    factory.company(GLOBEX)
    return factory


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def hooks() -> list[Webhook]:
    db.session.rollback()
    return list(db.session.scalars(select(Webhook).order_by(Webhook.id)))


def audited(action: str) -> int:
    db.session.rollback()
    return db.session.scalar(
        select(func.count()).select_from(AuditEntry).where(AuditEntry.action == action)
    )


def test_create_prints_the_secret_once_and_list_never_shows_it(companies, flask):
    empty = flask("webhooks", "list")
    assert empty.returncode == 0 and empty.stdout.strip() == "No webhook is registered."
    created = flask("webhooks", "create", URL, "--event", "ddi.created", "--company", ACME)
    assert created.returncode == 0, created.stderr
    assert created.stderr == ""
    lines = created.stdout.strip().splitlines()
    secret = lines[-1]
    assert secret.startswith("whsec_") and secret == secret.strip() and " " not in secret
    assert secret not in "\n".join(lines[:-1])
    [hook] = hooks()
    assert (
        hook.url,
        webhooks.signing_secrets(hook, utcnow()),
        hook.event_types,
        hook.companies,
    ) == (
        URL,
        [secret],
        "ddi.created",
        ACME,
    )
    assert str(hook.id) in created.stdout
    assert audited("webhook.create") == 1
    db.session.rollback()
    logged = db.session.scalars(select(AuditEntry.after)).all()
    assert secret not in repr(logged)

    listed = flask("webhooks", "list")
    assert listed.returncode == 0, listed.stderr
    assert "whsec_" not in listed.stdout + listed.stderr
    [line] = listed.stdout.strip().splitlines()
    assert line.split()[:2] == [str(hook.id), URL]
    assert "ddi.created" in line and ACME in line


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (("ftp://x",), "http"),
        ((URL, "--event", "ddi.moved"), "ddi.moved"),
        ((URL, "--company", "nope"), "nope"),
    ],
    ids=["not-http", "unknown-event", "unknown-company"],
)
def test_create_mistakes_are_one_line_and_write_nothing(companies, flask, args, word):
    assert_one_line_error(flask("webhooks", "create", *args), word)
    assert hooks() == []
    assert audited("webhook.create") == 0


def test_delete_a_webhook_and_an_unknown_one(companies, flask):
    gone = webhooks.create(Principal.cli(), URL)[0].id
    kept = webhooks.create(Principal.cli(), URL + "2")[0].id
    deleted = flask("webhooks", "delete", str(gone))
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == f"Deleted webhook {gone}."
    assert [h.id for h in hooks()] == [kept]
    assert audited("webhook.delete") == 1

    assert_one_line_error(flask("webhooks", "delete", str(gone)), str(gone))
    assert [h.id for h in hooks()] == [kept]
    assert audited("webhook.delete") == 1


def test_rotate_secret_prints_the_new_one_once_and_both_sign_for_24_hours(
    companies, flask, receiver
):
    """Through the command line and a real delivery: the receiver verifying with the new
    secret or the old one accepts during the 24 h, only with the new one after."""
    hook, old = webhooks.create(Principal.cli(), receiver.url("/h"))
    rotated = flask("webhooks", "rotate-secret", str(hook.id))
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stderr == ""
    lines = rotated.stdout.strip().splitlines()
    new = lines[-1]
    assert new.startswith("whsec_") and new != old and " " not in new
    assert lines[0].startswith(f"Rotated the secret of webhook {hook.id}; the previous one")
    assert "also signs until" in lines[0] and lines[0].endswith("New secret (shown once):")
    assert new not in "\n".join(lines[:-1]) and old not in rotated.stdout

    db.session.rollback()
    row = db.session.get(Webhook, hook.id)
    until = row.previous_secret_until
    assert until is not None and until.strftime("%Y-%m-%d %H:%M:%S UTC") in lines[0]
    clock = Clock(until - timedelta(seconds=1))
    worker = delivery.Worker(db.engine, clock=clock)
    try:
        companies.ddi("44", "1", ACME)
        worker.run_once()
        clock.to(until)
        companies.ddi("44", "2", ACME)
        worker.run_once()
    finally:
        worker.locks.close()
    during, after = receiver.seen()
    for secret in (new, old):
        assert Verifier(secret).verify(during.body, during.headers)["id"] == 1
    assert Verifier(new).verify(after.body, after.headers)["id"] == 2
    with pytest.raises(WebhookVerificationError):
        Verifier(old).verify(after.body, after.headers)

    assert audited("webhook.rotate-secret") == 1
    db.session.rollback()
    logged = db.session.scalars(
        select(AuditEntry).where(AuditEntry.action == "webhook.rotate-secret")
    ).one()
    assert logged.actor.startswith("cli:") and logged.target == f"webhook {hook.id}"
    assert "whsec_" not in repr((logged.before, logged.after, logged.detail))
    listed = flask("webhooks", "list")
    assert listed.returncode == 0 and "whsec_" not in listed.stdout + listed.stderr
    assert new not in listed.stdout and old not in listed.stdout


def test_rotate_secret_of_an_unknown_webhook_is_one_line(companies, flask):
    hook, _ = webhooks.create(Principal.cli(), URL)
    db.session.rollback()
    before = db.session.get(Webhook, hook.id).secret_sealed
    assert_one_line_error(
        flask("webhooks", "rotate-secret", str(hook.id + 1)), f"There is no webhook {hook.id + 1}."
    )
    assert_one_line_error(flask("webhooks", "rotate-secret", "abc"), "abc")
    db.session.rollback()
    assert db.session.get(Webhook, hook.id).secret_sealed == before
    assert audited("webhook.rotate-secret") == 0


def test_rekey_names_the_webhooks_and_accounts_no_key_opens(companies, factory, flask):
    """`flask webhooks rekey` re-seals the authenticator-app secrets too (services/sealing.py):
    an operator who drops an old key afterwards must not lock anyone out of their app."""
    readable, secret = webhooks.create(Principal.cli(), URL)
    lost, _ = webhooks.create(Principal.cli(), URL + "2")
    foreign = Fernet(Fernet.generate_key()).encrypt(b"whsec_x").decode()
    factory.account("alice")
    factory.account("bob")
    with write_transaction() as session:
        session.get(Webhook, lost.id).secret_sealed = foreign
        for account in session.scalars(select(Account)):
            kept = sealing.seal("JBSWY3DPEHPK3PXP") if account.username == "alice" else foreign
            account.totp_secret = kept
    done = flask("webhooks", "rekey")
    assert done.stdout.strip() == (
        "Re-encrypted 1 webhook secret and 1 authenticator-app secret with the first key."
    )
    assert_one_line_error(done, f"the secret of webhook {lost.id}: rotate it")
    assert "the authenticator-app secret of bob: reset their second factors" in done.stderr
    db.session.rollback()
    assert db.session.get(Webhook, lost.id).secret_sealed == foreign
    assert webhooks.signing_secrets(db.session.get(Webhook, readable.id), utcnow()) == [secret]
    totp = {a.username: a.totp_secret for a in db.session.scalars(select(Account))}
    assert sealing.unseal(totp["alice"] or "") == "JBSWY3DPEHPK3PXP" and totp["bob"] == foreign


def age(days: int, first_ids: list[int]) -> None:
    with write_transaction() as session:
        session.execute(
            update(EventTxn)
            .where(EventTxn.first_id.in_(first_ids))
            .values(at=utcnow() - timedelta(days=days))
        )


def event_ids() -> list[int]:
    db.session.rollback()
    values = feed.read(Principal.cli(), feed.Query(limit=1000)).values
    db.session.rollback()
    return [e["id"] for e in values]


def test_prune_keeps_90_days_by_default_and_refuses_a_bad_count(companies, flask):
    for number in ("1", "2", "3"):
        companies.ddi("44", number, ACME)
    age(91, [1])
    age(89, [2])
    for days, word in (("0", "0"), ("x", "x")):
        assert_one_line_error(flask("events", "prune", "--days", days), word)
    assert event_ids() == [1, 2, 3]

    pruned = flask("events", "prune")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.strip() == "Deleted 1 event older than 90 days."
    assert event_ids() == [2, 3]

    pruned = flask("events", "prune", "--days", "30")
    assert pruned.returncode == 0
    assert pruned.stdout.strip() == "Deleted 1 event older than 30 days."
    assert event_ids() == [3]

    pruned = flask("events", "prune", "--days", "1")
    assert pruned.stdout.strip() == "Deleted 0 events older than 1 day."
    assert event_ids() == [3]


def test_deliver_once_with_no_webhook_exits_0(companies, flask):
    companies.ddi("44", "1", ACME)
    result = flask("events", "deliver", "--once")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow  # a `flask events deliver` process until SIGTERM
def test_the_worker_logs_one_line_as_it_starts_and_one_as_it_stops(app, companies, tmp_path):
    """`flask events deliver` until SIGTERM (as systemd stops it): a line at start (the
    webhooks, its concurrency, its pid), one at stop (delivered of how many attempts), each
    count with its noun, and nothing on stdout."""
    webhooks.create(Principal.cli(), URL)  # a closed port: each attempt fails, and is retried
    webhooks.create(Principal.cli(), URL + "2", ["ddi.deleted"])  # nothing for this one
    companies.ddi("44", "1", ACME)
    env = server_env(
        app.config["SQLALCHEMY_DATABASE_URI"],
        tmp_path / "instance",
        LOG_FORMAT="json",
        LOG_LEVEL="INFO",
        WEBHOOK_ALLOW_NETWORKS="127.0.0.0/8",
        SECRET_KEY=app.config["SECRET_KEY"],  # the webhook secrets are sealed with it
    )
    log = tmp_path / "deliver.log"
    db.session.rollback()
    argv = [sys.executable, "-m", "flask", "--app", "app", "events", "deliver"]
    with open(log, "wb") as err:
        worker = subprocess.Popen(
            [*argv, "--concurrency", "3"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
    try:

        def attempted() -> bool:
            if worker.poll() is not None:
                raise AssertionError(f"the worker exited:\n{log.read_text()[-3000:]}")
            db.session.rollback()
            return db.session.scalar(select(func.count()).select_from(WebhookAttempt)) == 1

        wait_until(attempted, 60, "the worker's first attempt", details=log.read_text)
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=30)
    finally:
        stop(worker)
    assert worker.returncode == 0, log.read_text()
    assert out == b""
    said = [
        json.loads(line)
        for line in log.read_text().splitlines()
        if line.startswith("{") and '"logger": "webapp.services.events.delivery"' in line
    ]
    assert [(r["level"], r["message"]) for r in said] == [
        ("INFO", f"delivery worker started: 2 webhooks, concurrency 3, pid {worker.pid}"),
        ("INFO", "delivery worker stopped: 0 delivered of 1 attempt"),
    ]
    assert {k: said[0][k] for k in ("webhooks", "concurrency", "pid")} == {
        "webhooks": 2,
        "concurrency": 3,
        "pid": worker.pid,
    }
    assert (said[1]["delivered"], said[1]["attempts"]) == (0, 1)


def test_the_ddi_import_command_records_its_changes(companies, flask, tmp_path):
    companies.ddi("44", "1", ACME, "100")
    companies.ddi("44", "2", ACME, "100")
    path = tmp_path / "ddis.csv"
    path.write_text(
        "dialcode,number,virt_exten,company\n44,1,100,acme\n44,2,100,globex\n44,3,7,acme\n"
    )
    done = flask("ddis", "import", str(path))
    assert done.returncode == 0, done.stderr
    db.session.rollback()
    got = feed.read(Principal.cli(), feed.Query(after=2)).values
    assert sorted((e["type"], e["company"], e["key"]["number"]) for e in got) == [
        ("ddi.created", ACME, "3"),
        ("ddi.updated", GLOBEX, "2"),
    ]
    assert {e["actor"] for e in got} == {got[0]["actor"]} and got[0]["actor"].startswith("cli:")
    assert [e["id"] for e in got] == [3, 4]
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(Event)) == 4
