"""``speechkit data check``: its exit code, table and JSON report; the tokenizer's alphabet it checks the
text against."""
from __future__ import annotations

import json
from pathlib import Path

from speechkit.cli import main as speechkit_main
from tests.unit.data import check_data
from tests.unit.data.check_data import write

clean = check_data.clean  # a shared fixture: pytest finds it under this name


def test_command_exit_code_table_and_json(clean, tmp_path, capsys):
    assert speechkit_main(["data", "check", *clean.values(), "--sample-rate", "16000", "--no-progress"]) == 0
    assert "0 error(s)" in capsys.readouterr().out
    (tmp_path / "bad").mkdir()
    rows = json.loads(Path(clean["test"]).read_text())
    rows["u7"]["text"] = ""
    bad = write(tmp_path / "bad", {"test": rows})
    assert speechkit_main(["data", "check", bad["test"], "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["errors"] == 1 and report["findings"][0]["check"] == "empty transcript"
    assert speechkit_main(["data", "check", bad["test"]]) == 1
    table = capsys.readouterr().out
    assert "error  empty transcript  test   1      u7: the text is empty" in table
    assert table.rstrip().endswith("1 error(s), 0 warning(s): see docs/data.md#the-check-report")


def test_tokenizer_alphabet_from_a_sentencepiece_model(tmp_path, clean, capsys):
    from speechkit.commands.data_check import tokenizer_alphabet
    from speechkit.tokenizers import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer.train(["word word", "ward"] * 20, tmp_path / "tok", vocab_size=8,
                                             model_type="char", model_name="chars")
    model = str(tmp_path / "tok" / "chars.model")
    assert tokenizer_alphabet(model) == frozenset("word a")  # the word-start mark is a space
    assert tokenizer.vocab_size == 7  # unk and the characters w o r d a and the word start
    rows = json.loads(Path(clean["train"]).read_text())
    rows["u0"]["text"] = "wordy"
    path = tmp_path / "train-y.json"
    path.write_text(json.dumps(rows))
    assert speechkit_main(["data", "check", str(path), "--tokenizer", model, "--json"]) == 1
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["check"], f["id"], f["detail"]) for f in found] == [("outside alphabet", "u0", "'y' x1")]
