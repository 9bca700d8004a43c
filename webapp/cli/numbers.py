"""`flask numbers …`: the number inventory (docs/numbers.md)."""

from __future__ import annotations

from pathlib import Path

import click

from .common import Group, friendly, operator

numbers_cli = Group("numbers", help="The number inventory.")


@numbers_cli.command("stock")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--block",
    nargs=3,
    type=(str, str, int),
    metavar="DIALCODE FIRST COUNT",
    help="COUNT consecutive numbers from FIRST, each as wide as FIRST, instead of a file.",
)
@friendly
def numbers_stock(path: Path | None, block: tuple[str, str, int] | None) -> None:
    """Add numbers to the stock as available: a CSV of dialcode,number[,description] (checked
    whole first; one transaction), or --block DIALCODE FIRST COUNT."""
    from ..services.numbers import stock, stock_file

    if (path is None) == (block is None):
        raise click.ClickException("Give either PATH.csv or --block DIALCODE FIRST COUNT.")
    if block is not None:
        dialcode, first, count = block
        body = {"block": {"dialcode": dialcode, "first": first, "count": count}}
        stocked = stock.stock(operator(), body)
    else:
        assert path is not None
        if not path.is_file():
            raise click.ClickException(f"{path}: no such file.")
        try:
            stocked = stock_file.stock_file(operator(), path)
        except OSError as exc:
            raise click.ClickException(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    click.echo(f"stocked {stocked}")
