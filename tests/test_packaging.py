"""Packaging in a checkout: the `telephony-admin` console script (what `pip install -e .` put in
the venv) offers the commands of `flask --app app`; where the app finds its templates, static
files, migrations and instance folder. The built wheel itself, installed outside the checkout,
is checked by .ci/wheel-check."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import webapp
from webapp.config import ConfigError

# Console scripts without DATABASE_URL and the package's own paths: the same on both databases,
# so once per `make test`.
pytestmark = pytest.mark.database_independent

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "telephony-admin"


def command_names(help_text: str) -> list[str]:
    """The names under 'Commands:' in a Click --help."""
    lines = help_text.split("Commands:\n", 1)[1].splitlines()
    names = []
    for line in lines:
        if not line.startswith("  "):
            break
        if not line.startswith("   "):  # deeper indents continue a wrapped description
            names.append(line.split()[0])
    return names


@pytest.fixture
def run(tmp_path):
    """Run a command with a fresh instance folder; the CompletedProcess."""
    env = {
        **os.environ,
        "INSTANCE_PATH": str(tmp_path / "instance"),
        "SECRET_KEY": "packaging-test-secret-key",
    }
    env.pop("DATABASE_URL", None)  # the instance folder's SQLite file, never created by --help

    def run_command(*args: str, cwd: Path = ROOT, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, cwd=cwd, env={**env, **extra}, capture_output=True, text=True, timeout=60
        )

    return run_command


@pytest.mark.slow  # subprocesses
@pytest.mark.parametrize("group", [(), ("db",)], ids=["top", "db"])
def test_console_script_has_the_commands_of_flask_app(run, tmp_path, group):
    """Same command names as `flask --app app` (Flask's run/shell/routes, Flask-Migrate's db,
    the app's own groups), run from outside the checkout, where there is no app.py."""
    assert SCRIPT.is_file(), f"{SCRIPT} missing: run `.venv/bin/pip install -e .`"
    flask = run(sys.executable, "-m", "flask", "--app", "app", *group, "--help")
    ours = run(str(SCRIPT), *group, "--help", cwd=tmp_path)
    assert flask.returncode == 0, flask.stderr
    assert ours.returncode == 0, ours.stderr
    expected = command_names(flask.stdout)
    assert len(expected) >= (10 if not group else 5)
    assert command_names(ours.stdout) == expected


@pytest.mark.slow  # a subprocess
def test_console_script_version_is_the_apps(run, tmp_path):
    """`telephony-admin --version`: the package's name and version from its metadata, alone
    (not Flask's Python, Flask and Werkzeug versions)."""
    result = run(str(SCRIPT), "--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    version = importlib.metadata.version("telephony-admin")
    assert version == "0.1.0"  # pyproject.toml's; a release changes both
    assert result.stdout == f"telephony-admin {version}\n"
    assert result.stderr == ""


@pytest.mark.slow  # subprocesses
@pytest.mark.skipif(
    importlib.util.find_spec("dotenv") is not None,
    reason="python-dotenv is installed here: -e/--env-file works and is offered",
)
def test_console_script_does_not_offer_an_env_file_it_cannot_read(run, tmp_path):
    """Without python-dotenv (not a dependency) `-e/--env-file` could only fail: it is not in
    --help, and given anyway it is an unknown option, not a promise broken later."""
    helped = run(str(SCRIPT), "--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "--env-file" not in helped.stdout and "--version" in helped.stdout
    env_file = tmp_path / "settings.env"
    env_file.write_text("LOG_LEVEL=DEBUG\n")
    result = run(str(SCRIPT), "-e", str(env_file), "routes", cwd=tmp_path)
    assert result.returncode == 2
    assert "No such option '-e'" in result.stderr
    assert "python-dotenv" not in result.stderr


@pytest.mark.slow  # a subprocess
def test_console_script_bad_setting_is_one_line(run, tmp_path):
    result = run(
        str(SCRIPT),
        "companies",
        "create",
        "acme",
        "--name",
        "Acme",
        cwd=tmp_path,
        REPORT_TIMEZONE="Nowhere/City",
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "REPORT_TIMEZONE" in lines[0], result.stderr


def test_checkout_reads_the_top_level_directories():
    """In a checkout the package carries no copies: templates/, static/ and migrations/ are
    read where they are kept, at the top of the repo, and the instance folder is ./instance."""
    assert not webapp.INSTALLED
    assert webapp.ROOT == ROOT
    for name in ("templates", "static", "migrations"):
        assert (webapp.ROOT / name).is_dir()
    assert webapp.default_instance_path() == ROOT / "instance"


def test_installed_default_instance_is_per_user(monkeypatch, tmp_path):
    """An installed wheel (webapp.INSTALLED, set when the package holds its templates) keeps
    its instance folder in the user's data directory, never inside the package."""
    monkeypatch.setattr(webapp, "INSTALLED", True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert webapp.default_instance_path() == tmp_path / "home/.local/share/telephony-admin"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/data")  # invalid by the XDG spec: ignored
    assert webapp.default_instance_path() == tmp_path / "home/.local/share/telephony-admin"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert webapp.default_instance_path() == tmp_path / "data/telephony-admin"


def test_instance_folder_is_created_private(monkeypatch, tmp_path):
    monkeypatch.setenv("INSTANCE_PATH", str(tmp_path / "a" / "instance"))
    folder = webapp.instance_folder()
    assert folder.is_dir() and folder.stat().st_mode & 0o777 == 0o700
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("INSTANCE_PATH", str(tmp_path / "file" / "instance"))
    with pytest.raises(ConfigError, match=r"^INSTANCE_PATH: cannot create .*file/instance"):
        webapp.instance_folder()


@pytest.mark.parametrize(("mode", "tightened"), [(0o755, 0o700), (0o775, 0o700), (0o500, 0o500)])
def test_an_existing_instance_folder_is_tightened_never_loosened(
    monkeypatch, tmp_path, mode, tightened
):
    """A git checkout creates `instance/` 0755: the app takes the group's and others' access
    away at start, and leaves a folder an operator made tighter as it is."""
    folder = tmp_path / "instance"
    folder.mkdir()
    folder.chmod(mode)
    monkeypatch.setenv("INSTANCE_PATH", str(folder))
    assert webapp.instance_folder() == folder
    assert folder.stat().st_mode & 0o777 == tightened
