"""The table of run options in docs/getting-started.md, written from ``speechkit.run_options.RunOptions``.

``python tests/docs/run_options_table.py`` prints it; tests/docs/test_run_options_table.py checks that the
page holds exactly this table, so an option added to the code without its line in the docs fails the tests.
"""

from __future__ import annotations

from speechkit.experiment.run_options import option_fields


def run_options_table() -> str:
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for field in option_fields():
        names = ", ".join(f"`{name}`" for name in (f"--{field.name}", *field.metadata.get("aliases", ())))
        rows.append(f"| {names} | {field.default} | {field.metadata['help']} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(run_options_table(), end="")
