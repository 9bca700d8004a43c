"""`flask history …` and `flask ddis import` (docs/cli.md, docs/import.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..wording import counted
from .common import Group, friendly, operator

history_cli = Group("history", help="History intervals.")


@history_cli.command("import")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@friendly
def history_import(path: Path) -> None:
    """Backfill closed intervals from a CSV: kind,company,key,start,end (checked whole first)."""
    from ..services.imports.history_import import import_csv

    try:
        content = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise click.ClickException(f"{path}: no such file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"{path}: cannot be read as UTF-8 text ({exc}).") from None

    def progress(rows):
        if not sys.stderr.isatty():  # a script wants one line on error, not a bar's remains
            yield from rows
            return
        with click.progressbar(rows, label="Checking and importing", file=sys.stderr) as bar:
            yield from bar

    result = import_csv(operator(), content, source=path.name, progress=progress)
    written = counted(result.written, "interval")
    click.echo(f"Imported {written} from {path.name} ({result.skipped} already recorded).")
    for month in result.closed_months:
        click.echo(
            f"Warning: {month} is closed; its reports keep the figures stored at its close and "
            f"the change shows as an adjustment (flask billing status).",
            err=True,
        )


@history_cli.command("rollup")
@friendly
def history_rollup() -> None:
    """Rebuild the reports' daily rollup from the history, in REPORT_TIMEZONE."""
    from ..services.billing import rollups

    counts = rollups.build(operator())
    rows = ", ".join(counted(n, f"{kind} day row") for kind, n in counts.items())
    click.echo(f"Rebuilt the report rollup: {rows}.")


ddis_cli = Group("ddis", help="DDIs in bulk.")


@ddis_cli.command("import")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Check the file and count; write nothing.")
@friendly
def ddis_import(path: Path, dry_run: bool) -> None:
    """Bring DDIs to the states a CSV lists: dialcode,number,virt_exten,company (checked whole
    first; one transaction)."""
    from ..services.imports import ddi_import

    if not path.is_file():
        raise click.ClickException(f"{path}: no such file.")
    source = ddi_import.path_source(str(path))
    try:
        if dry_run:
            click.echo("dry run: " + ddi_import.plan(operator(), source).summary())
        else:
            click.echo(ddi_import.apply(operator(), source).summary())
    except OSError as exc:
        raise click.ClickException(f"{path}: cannot be read ({exc.strerror or exc}).") from None
