"""May a command write (and with ``--force`` replace) this output folder? Never at the cost of other work.

``speechkit export --output . --force`` once meant: delete the working directory, then write the model there.
:func:`check_model_output` refuses the working directory, a folder above it and the home folder, a folder
holding the command's inputs, and, even with ``--force``, any existing folder that is not a model folder
speechkit wrote (plain files only, with ``hyperparams.yaml`` and ``README.md``).

Example:
    >>> check_model_output(pathlib.Path("/tmp/never-there-model"), force=False, inputs=[])
"""
from __future__ import annotations

import pathlib
from collections.abc import Sequence

from speechkit.errors import SpeechkitError

#: The files every model folder speechkit writes holds, besides its weights.
MODEL_FOLDER_FILES = ("hyperparams.yaml", "README.md")


def check_model_output(output: pathlib.Path, force: bool, inputs: Sequence[pathlib.Path]) -> None:
    """Raise :class:`SpeechkitError` naming ``output`` when writing a model folder there could lose work.

    Args:
        output: the folder to write.
        force: the user's ``--force`` (replace an existing model folder).
        inputs: paths the command reads (checkpoints, a YAML, a source model folder).
    """
    output = pathlib.Path(output).expanduser().absolute()
    resolved, here = output.resolve(), pathlib.Path.cwd().resolve()
    if resolved == here or resolved in here.parents or resolved == pathlib.Path.home().resolve():
        raise SpeechkitError(f"--output {output}: is the working directory, a folder above it or the home "
                             "folder; name a new folder for the model (e.g. --output models/my-model)")
    for path in inputs:
        source = pathlib.Path(path).expanduser().resolve()
        if source == resolved or resolved in source.parents:
            raise SpeechkitError(f"--output {output}: holds the input {path}; name another folder")
    if not output.exists() and not output.is_symlink():
        return
    if not force:
        raise SpeechkitError(f"{output}: already exists (pass --force to replace it)")
    entries = list(output.iterdir()) if output.is_dir() and not output.is_symlink() else None
    looks_written = entries is not None and all((output / name).is_file() for name in MODEL_FOLDER_FILES) \
        and all(entry.is_file() and not entry.is_symlink() for entry in entries)
    if not looks_written:
        kinds = "not a folder" if entries is None else "holds folders or lacks hyperparams.yaml / README.md"
        raise SpeechkitError(f"--output {output}: --force replaces only a model folder speechkit export "
                             f"wrote, and this one is not ({kinds}); remove it yourself or name another "
                             "folder")
