"""The style sheets parse as written: an unclosed block would swallow every rule after it
into a media query (it once kept the top bar's search and the day drill-down's desktop rules
from ever applying above 640 px)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.database_independent

STATIC = Path(__file__).resolve().parent.parent / "static"


@pytest.mark.parametrize("sheet", sorted(STATIC.glob("*.css")), ids=lambda p: p.name)
def test_every_block_of_a_style_sheet_is_closed_where_it_opens(sheet: Path):
    text = re.sub(r"/\*.*?\*/", "", sheet.read_text(), flags=re.S)
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        depth += line.count("{") - line.count("}")
        assert depth >= 0, f"{sheet.name}:{number}: a '}}' closes nothing"
        # A rule opened inside an @media block is closed on its own line: a new top-level
        # comment or @media while inside one is the sign of a block never closed.
        if depth and line.startswith("@media"):
            assert depth == 1, f"{sheet.name}:{number}: @media inside an unclosed block"
    assert depth == 0, f"{sheet.name}: {depth} block(s) never closed"
