"""The doc-test markers of tests/helpers/doc_blocks.py: blocks and markers are read as the page says."""

from __future__ import annotations

import textwrap

import pytest

from tests.helpers.doc_blocks import command_lines, read_blocks

PAGE = textwrap.dedent('''\
    # A page

    <!-- doc-test: skip gpu: needs CUDA -->
    ```bash
    python train.py --device cuda
    ```

    Text between.

    <!-- doc-test: sub 3000 => 3 -->
    <!-- doc-test: skip-lines /srun/ slurm: needs an allocation -->
    ```bash
    speechkit mixtures a.json out --num-mixtures 3000 \\
        --seed 0   # a comment
    srun python x.py
    ```

    <!-- doc-test: setup
    import torch
    x = torch.zeros(2)
    -->
    ```python
    y = x + 1
    ```

    - a list item with a block:

      ```yaml
      a: 1
      ```

    ```
    output, not code
    ```
    ''')


def test_blocks_and_markers_are_read(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    gpu, mixtures, python, yaml, output = read_blocks(page)
    assert (gpu.line, gpu.lang, gpu.skip) == (4, "bash", "gpu: needs CUDA")
    assert mixtures.skip is None and mixtures.subs == [("3000", "3")]
    assert [why for _, why in mixtures.skip_lines] == ["slurm: needs an allocation"]
    assert mixtures.prepared(mixtures.code).startswith("speechkit mixtures a.json out --num-mixtures 3 ")
    assert command_lines(mixtures.code) == [
        "speechkit mixtures a.json out --num-mixtures 3000      --seed 0   # a comment", "srun python x.py"]
    assert python.setup == ["import torch\nx = torch.zeros(2)\n"] and python.code == "y = x + 1\n"
    assert (yaml.lang, yaml.code) == ("yaml", "a: 1\n")  # indented under a list item
    assert output.lang == "" and output.skip is None


@pytest.mark.parametrize("marker, message", [
    ("skip later: maybe", "CATEGORY one of gpu, network"),
    ("skip gpu", "CATEGORY one of"),
    ("skip-lines srun slurm: x", "needs /REGEX/"),
    ("sub a -> b", "needs 'OLD => NEW'"),
    ("unheard-of x", "unknown doc-test marker"),
])
def test_a_bad_marker_names_the_page_and_line(tmp_path, marker, message):
    page = tmp_path / "page.md"
    page.write_text(f"<!-- doc-test: {marker} -->\n```bash\necho hi\n```\n")
    with pytest.raises(ValueError, match=rf"page\.md:2: .*{message}"):
        read_blocks(page)


def test_a_substitution_that_no_longer_matches_is_an_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- doc-test: sub --size small => --size tiny -->\n```bash\nspeechkit corpus c\n```\n")
    [block] = read_blocks(page)
    with pytest.raises(ValueError, match=r"page\.md:2: doc-test sub: '--size small' is not in the block"):
        block.prepared(block.code)
