"""docs/getting-started.md lists every run option, with the default and help text of the code."""

from __future__ import annotations

from tests.docs.run_options_table import run_options_table
from tests.helpers.processes import REPO


def test_the_run_options_table_is_the_one_the_code_gives():
    page = (REPO / "docs" / "getting-started.md").read_text()
    start = page.index("| option | default | meaning |")
    end = page.index("\n\n", start) + 1
    assert page[start:end] == run_options_table(), (
        "docs/getting-started.md's run options table differs from RunOptions: replace it with the output of "
        "`python tests/docs/run_options_table.py`")
