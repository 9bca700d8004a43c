"""deploy/: the Procfile's processes run as written (the web server answers, the delivery
worker stays up, SIGTERM stops both cleanly), and the systemd units parse and name commands
that exist."""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import select

from webapp.config import MAX_WAITING_READS
from webapp.extensions import db
from webapp.models import Account, Webhook
from webapp.services.events import webhooks
from webapp.services.events.wait_slots import LOCK_FILE
from webapp.services.records import crud, kinds

from .factories import OPERATOR
from .test_delivery import running_receiver
from .waiting import wait_until

pytestmark = pytest.mark.slow  # real gunicorn and worker processes

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
VENV_BIN = Path(sys.executable).parent
# Where the units expect the checkout; the tests put this one there instead.
UNIT_CHECKOUT = "/srv/telephony-admin"


def procfile() -> dict[str, str]:
    """process name -> command, as honcho and foreman read deploy/Procfile."""
    found = {}
    for line in (DEPLOY / "Procfile").read_text().splitlines():
        if match := re.fullmatch(r"([A-Za-z0-9_-]+):\s*(.+)", line):
            found[match[1]] = match[2]
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture
def process_env(migrated, test_config, tmp_path) -> dict[str, str]:
    """The environment a Procfile runner gives its processes: the venv's commands first on
    PATH, the test's own database, an instance folder of the test's own."""
    # gunicorn.conf.py makes a metrics directory under /dev/shm unless given one, and only a
    # server that ran removes it (not `--check-config`): give it one that goes with tmp_path.
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    return {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": migrated,
        "INSTANCE_PATH": str(tmp_path / "instance"),
        # The test app's: the webhook secrets it made are sealed with a key derived from it.
        "SECRET_KEY": test_config["SECRET_KEY"],
        "PROMETHEUS_MULTIPROC_DIR": str(metrics),
        "WEBHOOK_ALLOW_NETWORKS": "127.0.0.0/8",  # where the test's receiver listens
    }


receiver = pytest.fixture(running_receiver, name="receiver")


def stop_cleanly(name: str, process: subprocess.Popen, log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"{name} still running 10 s after SIGTERM:\n{log.read_text()[-3000:]}")
    assert process.returncode == 0, f"{name} exited {process.returncode}:\n{log.read_text()}"
    assert "Traceback" not in log.read_text(), log.read_text()


@pytest.mark.usefixtures("allow_loopback_webhooks")
def test_procfile_processes_serve_and_stop_on_sigterm(process_env, tmp_path, factory, receiver):
    # A webhook with nothing to deliver yet, for the worker to show it is at work.
    factory.company("acme")
    hook_id = webhooks.create(OPERATOR, receiver.url("/h"))[0].id
    commands = procfile()
    assert set(commands) == {"web", "deliver"}
    port = free_port()
    # WEB_CONCURRENCY: as a platform sets it (gunicorn.conf.py); 2 workers boot fast here.
    env = {**process_env, "PORT": str(port), "WEB_CONCURRENCY": "2"}
    processes: dict[str, tuple[subprocess.Popen, Path]] = {}
    try:
        for name, command in commands.items():
            log = tmp_path / f"{name}.log"
            with log.open("w") as out:
                # As a Procfile runner does: the line through a shell, which `exec` replaces so
                # that the runner's signals reach the process itself.
                processes[name] = (
                    subprocess.Popen(
                        ["/bin/sh", "-c", f"exec {command}"],
                        cwd=ROOT,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    ),
                    log,
                )
        web, web_log = processes["web"]

        def web_answers() -> bool:
            assert web.poll() is None, f"web exited {web.returncode}:\n{web_log.read_text()}"
            try:
                return get(f"http://127.0.0.1:{port}/healthz") == 200
            except OSError:  # not listening yet
                return False

        wait_until(web_answers, 60, "/healthz", interval=0.2, details=web_log.read_text)
        assert get(f"http://127.0.0.1:{port}/login") == 200

        # A change now: the worker delivers its event and saves its progress, so it has
        # connected and is running its loop, past the point where a start-up failure or a
        # first pass's would have ended it.
        deliver, deliver_log = processes["deliver"]
        crud.create(
            OPERATOR,
            kinds.DDI,
            [{"dialcode": "44", "number": "2071234567", "virt_exten": "1", "company": "acme"}],
        )
        event_id = webhooks.newest_event()
        db.session.rollback()

        def delivered() -> bool:
            assert deliver.poll() is None, f"deliver exited:\n{deliver_log.read_text()}"
            cursor = db.session.scalar(select(Webhook.cursor).where(Webhook.id == hook_id))
            db.session.rollback()
            return cursor >= event_id

        wait_until(delivered, 30, "the worker to deliver an event", details=deliver_log.read_text)
        assert deliver.poll() is None, f"deliver exited:\n{deliver_log.read_text()}"
        for name, (process, log) in processes.items():
            stop_cleanly(name, process, log)
    finally:
        for process, _ in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def test_honcho_runs_the_procfile_as_docs_deploy_says(process_env, tmp_path):
    """`honcho -f deploy/Procfile -d . start` (docs/deploy.md, Process layout; honcho is in
    the prod extra): both processes start, the web one answers on $PORT, and SIGTERM to honcho
    stops both."""
    port = free_port()
    env = {**process_env, "PORT": str(port), "WEB_CONCURRENCY": "1"}
    log = tmp_path / "honcho.log"
    with log.open("w") as out:
        runner = subprocess.Popen(
            ["honcho", "-f", "deploy/Procfile", "-d", ".", "start"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:

        def web_answers() -> bool:
            assert runner.poll() is None, f"honcho exited {runner.returncode}:\n{log.read_text()}"
            try:
                return get(f"http://127.0.0.1:{port}/healthz") == 200
            except OSError:  # not listening yet
                return False

        wait_until(web_answers, 60, "/healthz", interval=0.2, details=log.read_text)
        # The worker's start line (webapp/services/events/delivery.py), through honcho.
        wait_until(
            lambda: re.search(r"deliver\.1\s+\|.*delivery worker started", log.read_text()),
            30,
            "the delivery worker's start line",
            details=log.read_text,
        )
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=40)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    text = log.read_text()
    assert "Traceback" not in text, text
    # Each process stopped gracefully on the SIGTERM honcho passed on: gunicorn's master shut
    # down, the worker said it stopped.
    assert re.search(r"web\.1\s+\|.*Shutting down: Master", text), text
    assert re.search(r"deliver\.1\s+\|.*delivery worker stopped", text), text
    with pytest.raises(OSError):
        get(f"http://127.0.0.1:{port}/healthz")


def units() -> list[Path]:
    return sorted((DEPLOY / "systemd").iterdir())


def unit_here(unit: Path, into: Path) -> Path:
    """A copy of the unit with the checkout it expects replaced by this one."""
    copy = into / unit.name
    copy.write_text(unit.read_text().replace(UNIT_CHECKOUT, str(ROOT)))
    return copy


def parsed(unit: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string(unit.read_text())
    return parser


@pytest.mark.database_independent  # the unit files alone
def test_systemd_units_parse(tmp_path):
    """Each unit as systemd reads it (systemd-analyze verify when there is one: unknown keys,
    missing executables); in any case the keys each kind of unit needs."""
    names = [u.name for u in units()]
    assert names == [
        "telephony-deliver.service",
        "telephony-prune.service",
        "telephony-prune.timer",
        "telephony-web.service",
    ]
    for unit in units():
        config = parsed(unit)
        assert config.get("Unit", "Description")
        if unit.suffix == ".timer":
            assert config.get("Timer", "OnCalendar") == "daily"
            assert config.get("Install", "WantedBy") == "timers.target"
            assert (unit.parent / f"{unit.stem}.service").is_file()
            continue
        assert config.get("Service", "ExecStart").startswith(f"{UNIT_CHECKOUT}/.venv/bin/")
        assert config.get("Service", "WorkingDirectory") == UNIT_CHECKOUT
        assert config.get("Service", "EnvironmentFile") == "/etc/telephony-admin.env"
        if unit.stem != "telephony-prune":  # the timer starts it; it is not enabled itself
            assert config.get("Install", "WantedBy") == "multi-user.target"

    verify = shutil.which("systemd-analyze")
    if verify is None:
        return
    copies = [unit_here(unit, tmp_path) for unit in units()]
    done = subprocess.run(
        [verify, "verify", "--man=no", *map(str, copies)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), (
        done.stdout + done.stderr
    )


def systemd_expanded(word: str, config: configparser.ConfigParser) -> str:
    """`${NAME}` in an ExecStart word as systemd expands it, from the unit's Environment= (the
    environment file is the operator's: its defaults are the unit's)."""
    defaults = dict(
        item.split("=", 1)
        for item in shlex.split(config.get("Service", "Environment", fallback=""))
    )
    return re.sub(r"\$\{(\w+)\}", lambda m: defaults[m[1]], word)


def test_systemd_units_name_commands_that_exist(process_env, tmp_path):
    """Each ExecStart, in this checkout: the program is there, and what it is asked to run
    exists (gunicorn loads the app it names; telephony-admin knows the command)."""
    for unit in units():
        if unit.suffix != ".service":
            continue
        config = parsed(unit_here(unit, tmp_path))
        argv = [
            systemd_expanded(word, config)
            for word in shlex.split(config.get("Service", "ExecStart"))
        ]
        program = Path(argv[0])
        assert program.is_file() and os.access(program, os.X_OK), f"{unit.name}: {program}"
        if program.name == "gunicorn":
            check = [*argv[:1], "--check-config", *argv[1:]]
        else:
            assert program.name == "telephony-admin", unit.name
            check = [*argv, "--help"]
        done = subprocess.run(
            check, cwd=ROOT, env=process_env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"{unit.name}: {done.stdout}{done.stderr}"


# --- long polls beside pages and probes ------------------------------------------------------


def held_slots(lock_file: Path, account: int) -> int:
    """How many of the account's waiting-read slots processes hold now (the record locks
    /proc/locks lists on the slot file, services/events/wait_slots.py): read, never taken."""
    if not lock_file.exists():
        return 0
    inode, first = lock_file.stat().st_ino, account * MAX_WAITING_READS
    mine = range(first, first + MAX_WAITING_READS)
    held = 0
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields or int(fields[5].rsplit(":", 1)[1]) != inode:
            continue
        start, end = int(fields[6]), int(fields[7])
        held += len(range(max(start, mine.start), min(end + 1, mine.stop)))
    return held


def post_read(base: str, token: str, body: dict) -> tuple[int, dict, dict]:
    """POST /rest/events/read over HTTP: status, headers, JSON body."""
    request = urllib.request.Request(
        f"{base}/rest/events/read",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.load(error)


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")
def test_long_polls_at_the_limit_leave_the_health_checks_fast(app, world, tmp_path):
    """gunicorn as docs/deploy.md runs it (gunicorn.conf.py, its default workers and threads,
    EVENTS_MAX_WAITING's default): one token's two waiting reads, and ten more refused at once
    (429, Retry-After) while fifty /healthz answer within 100 ms at the 95th percentile; the
    slots free again when the reads answer."""
    from .observability import gunicorn, server_env

    cadmin = world.cadmin
    crud.create(
        OPERATOR, kinds.DDI, {"dialcode": "44", "number": "1", "virt_exten": "1", "company": "acme"}
    )
    first = webhooks.newest_event()
    account = db.session.scalar(select(Account.id).where(Account.username == "cadmin"))
    db.session.rollback()
    env = server_env(
        app.config["SQLALCHEMY_DATABASE_URI"],
        tmp_path / "instance",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    for documented in ("WEB_CONCURRENCY", "GUNICORN_THREADS", "EVENTS_MAX_WAITING"):
        env.pop(documented, None)
    lock_file = tmp_path / "instance" / LOCK_FILE
    log = tmp_path / "gunicorn.log"
    with gunicorn(env, log) as server, ThreadPoolExecutor(12) as pool:
        wait = {"after": first, "wait": 8}
        waiting = [pool.submit(post_read, server.base, cadmin.token, wait) for _ in range(2)]
        wait_until(
            lambda: held_slots(lock_file, account) == 2,
            15,
            "two reads holding their slots",
            details=lambda: log.read_text()[-3000:],
        )
        refused, times = [], []
        for i in range(50):
            if i % 5 == 0:
                refused.append(pool.submit(post_read, server.base, cadmin.token, wait))
            began = time.monotonic()
            assert get(f"{server.base}/healthz") == 200
            times.append(time.monotonic() - began)
        answers = [future.result(timeout=15) for future in refused]
        assert not any(future.done() for future in waiting)  # still waiting
        crud.create(
            OPERATOR,
            kinds.DDI,
            {"dialcode": "44", "number": "2", "virt_exten": "1", "company": "acme"},
        )
        second = webhooks.newest_event()
        db.session.rollback()
        ended = [future.result(timeout=15) for future in waiting]
        wait_until(lambda: held_slots(lock_file, account) == 0, 5, "the slots to be freed")
        again = post_read(server.base, cadmin.token, {"after": second, "wait": 0.2})
    p95 = statistics.quantiles(times, n=20)[-1]
    assert p95 <= 0.1, sorted(times)
    for status, headers, body in answers:
        assert status == 429, (status, body)
        assert body["error"]["code"] == "rate_limited" and body["result"] == "error", body
        assert headers["Retry-After"] == "5", headers
    assert [(status, body["last"]) for status, _, body in ended] == [(200, second)] * 2
    assert (again[0], again[2]["last"]) == (200, second)
    assert "Traceback" not in log.read_text()
    assert "thread(s) per worker" not in log.read_text()  # the defaults fit (serving_warnings)
