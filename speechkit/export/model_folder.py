"""Turn a trained recipe's best checkpoint into a model folder others fetch and load (``speechkit export``).

Example::

    speechkit export --checkpoints results/asr/save --hparams recipes/X/ASR/hparams/inference.yaml \\
        --min-key WER --output models/asr-ctc --map encoder=model:encoder. \\
        --file tokenizer=results/tok/t.model

The inference YAML (the model folder's future ``hyperparams.yaml``) declares the modules and a ``pretrainer``
whose ``paths`` name one file per loadable (``encoder: encoder.safetensors``). For every such file the command
takes, in order: a ``--file NAME=PATH`` given on the command line (copied), or the checkpoint's
``<ckpt>.ckpt`` where ``--map NAME=CKPT[:PREFIX]`` says which checkpoint file holds the loadable's tensors and
under which key prefix (default: ``NAME.ckpt``, no prefix). Weights are written as safetensors or with
torch.save following the declared file's suffix. The folder gets a model card ``README.md`` (metrics from the
checkpoint, files with sha256) and is written to a temporary folder renamed when complete. Finally the model
is loaded back from the folder (strictly) to prove that it is usable.

``--checkpoints`` is a checkpoints folder (the best checkpoint by ``--min-key``/``--max-key`` is taken, else
the newest) or one checkpoint folder: a run's ``CKPT+...``, or one written by ``speechkit
average-checkpoints``.

Only weights that something produced are exported: a checkpoint lists the modules that were frozen in
training and never loaded (``info.untrained``, see :mod:`speechkit.checkpoints.weights_origin`), and
taking a loadable from one of them is an error unless the inference YAML says that is meant::

    untrained_loadables: [lm]   # top-level key: these loadables may hold their initial weights
"""
from __future__ import annotations

import datetime
import hashlib
import logging
import pathlib
import re
import shutil

from speechkit.atomic_files import replacing_folder
from speechkit.errors import CheckpointError, SpeechkitError
from speechkit.output_folder import check_model_output

logger = logging.getLogger(__name__)


def export_model(checkpoints_dir, hparams_file, output, min_key=None, max_key=None, mapping=None, files=None,
                 name=None, description: str = "", force: bool = False, verify: bool = True,
                 run_hparams="auto") -> pathlib.Path:
    """Write a model folder from the best checkpoint (or the one checkpoint ``checkpoints_dir`` is); see the
    module docstring. ``run_hparams``: the training run's ``hyperparams.yaml`` whose sizes the inference YAML
    takes (``"auto"``: found above the checkpoints; None: keep the inference YAML's). Returns the folder."""
    from speechkit.checkpoints.selection import select_checkpoint
    from speechkit.experiment.hparams import standalone_hparams_text
    from speechkit.pretrained.pretrainer import declared_files

    output, hparams_file = pathlib.Path(output).expanduser().absolute(), pathlib.Path(hparams_file)
    mapping, files = dict(mapping or {}), dict(files or {})
    check_model_output(output, force, [pathlib.Path(checkpoints_dir), hparams_file])
    checkpoint = select_checkpoint(checkpoints_dir, min_key=min_key, max_key=max_key)
    # A recipe's inference YAML may extend the template's; the model folder's copy must stand on its own.
    text, sizes_note = _with_run_sizes(standalone_hparams_text(hparams_file), hparams_file, checkpoints_dir,
                                       run_hparams)
    declared = declared_files(text, str(hparams_file))
    if not declared:
        raise SpeechkitError(f"{hparams_file}: declares no pretrainer files; the model folder would hold no "
                             "weights")
    unknown = (set(mapping) | set(files)) - set(declared)
    if unknown:
        raise SpeechkitError(f"--map/--file name {sorted(unknown)}, which {hparams_file}'s pretrainer does "
                             f"not load (it loads {sorted(declared)})")
    _refuse_untrained(declared, mapping, files, checkpoint, text, hparams_file)
    with replacing_folder(output) as tmp:
        written = {}
        for loadable, spec in declared.items():
            if not isinstance(spec, str) or "/" in spec:
                logger.info("'%s' comes from %s: left as a reference", loadable, spec)
                continue
            written[spec] = _write_file(loadable, spec, checkpoint.path, mapping, files, tmp)
        (tmp / "hyperparams.yaml").write_text(text)
        given = (pathlib.Path(checkpoints_dir) / "meta.json").is_file()  # one checkpoint, not a folder
        selection = _selection(checkpoints_dir, checkpoint, min_key, max_key, given)
        (tmp / "README.md").write_text(_model_card(name or output.name, description, checkpoint, written,
                                                   hparams_file, selection, _usage(text),
                                                   _test_results(checkpoints_dir)) + sizes_note)
        if verify:
            _verify(tmp)
            _warn_if_remote_copies_need_trust(text, hparams_file)
    return output


def _with_run_sizes(text: str, hparams_file, checkpoints_dir, run_hparams) -> tuple:
    """The inference YAML with the training run's sizes (:mod:`speechkit.export.run_sizes`), and a
    model-card paragraph saying which changed."""
    from speechkit.export.run_sizes import adapt_sizes, find_run_hparams

    run_file = find_run_hparams(checkpoints_dir) if run_hparams == "auto" else run_hparams
    if run_file is None:
        return text, ""
    text, changed, ambiguous = adapt_sizes(text, pathlib.Path(run_file).read_text(), str(run_file))
    for key, values in ambiguous.items():
        logger.warning("%s: the run sets %s to several values %s; %s keeps %s's", run_file, key, values, key,
                       hparams_file)
    if not changed:
        return text, ""
    listed = ", ".join(f"{key} {old} -> {new}" for key, (old, new) in changed.items())
    logger.info("Sizes taken from the training run (%s): %s", run_file, listed)
    return text, f"\nSizes taken from the training run (`{run_file}`): {listed}.\n"


def _refuse_untrained(declared: dict, mapping: dict, files: dict, checkpoint, text: str,
                      hparams_file) -> None:
    """Raise when a loadable would take the initial weights of a module the checkpoint lists as untrained,
    unless the YAML's ``untrained_loadables`` names it."""
    untrained = set(checkpoint.info.get("untrained") or [])
    allowed = set(untrained_loadables(text, str(hparams_file)))
    for loadable, spec in declared.items():
        if loadable in files or loadable in allowed or not isinstance(spec, str) or "/" in spec:
            continue
        source = mapping.get(loadable, loadable).partition(":")[0]
        if source in untrained:
            raise CheckpointError(
                f"{checkpoint.path}: '{source}' was frozen and never trained or loaded in the run that wrote "
                f"this checkpoint (it holds its initial, random weights), yet {hparams_file} exports it as "
                f"loadable '{loadable}'. Export with an inference YAML that does not use it (an ASR model "
                "trained with --lm_weight 0: hparams/inference_no_lm.yaml), train or load it, or, if initial "
                f"weights are meant, say so in the YAML: untrained_loadables: [{loadable}]")


def untrained_loadables(yaml_text: str, where: str = "hyperparams.yaml") -> list:
    """The top-level ``untrained_loadables`` list of an inference YAML, read without building anything.

    Example:
        >>> untrained_loadables("untrained_loadables: [lm]\\nlm: !new:torch.nn.Identity\\n")
        ['lm']
    """
    import yaml

    try:
        root = yaml.compose(yaml_text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise SpeechkitError(f"{where}: not valid YAML ({error})") from None
    for key, value in root.value if isinstance(root, yaml.MappingNode) else []:
        if key.value == "untrained_loadables":
            if not isinstance(value, yaml.SequenceNode) or not all(
                    isinstance(item, yaml.ScalarNode) for item in value.value):
                line = value.start_mark.line + 1
                raise SpeechkitError(f"{where}, line {line}: untrained_loadables must be a list of loadable "
                                     "names")
            return [item.value for item in value.value]
    return []


def _write_file(loadable: str, filename: str, ckpt_path: pathlib.Path, mapping: dict, files: dict,
                out: pathlib.Path) -> pathlib.Path:
    from speechkit.pretrained.loading import load_weights, save_weights

    target = out / filename
    if loadable in files:
        source = pathlib.Path(files[loadable])
        if not source.is_file():
            raise SpeechkitError(f"--file {loadable}={source}: no such file")
        shutil.copyfile(source, target)
        return target
    ckpt_name, _, prefix = mapping.get(loadable, loadable).partition(":")
    source = ckpt_path / f"{ckpt_name}.ckpt"
    if not source.is_file():
        raise CheckpointError(f"{ckpt_path}: has no {ckpt_name}.ckpt for loadable '{loadable}' (use --map "
                              f"{loadable}=CKPT[:PREFIX] or --file {loadable}=PATH)")
    try:
        state = load_weights(source)
    except CheckpointError:
        if prefix or target.suffix == ".safetensors":
            raise
        shutil.copyfile(source, target)  # an object's own format (save_checkpoint), kept as it is
        return target
    if prefix:
        state = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        if not state:
            raise CheckpointError(f"{source}: no tensor key starts with '{prefix}' (for loadable "
                                  f"'{loadable}')")
    save_weights(state, target)
    return target


def _verify(folder: pathlib.Path) -> None:
    from speechkit.pretrained.interfaces import Pretrained

    try:
        Pretrained.from_hparams(str(folder))
    except SpeechkitError as error:
        raise SpeechkitError(f"the exported model does not load back: {error}") from None


def _warn_if_remote_copies_need_trust(text: str, hparams_file) -> None:
    """Say at export time when a copy on the Hub or a web server will need ``allow=`` or trust to load."""
    from speechkit.errors import UnsafeSourceError
    from speechkit.pretrained.safety.guard import check_yaml_is_safe

    try:
        check_yaml_is_safe(text, str(hparams_file))
    except UnsafeSourceError as error:
        logger.warning("Copies of this model fetched from a Hub repo or a URL will not load without "
                       "allow=[...] or trust_remote_code=True: %s", error)


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _usage(yaml_text: str) -> str:
    """The model card's usage lines for the interface the YAML declares."""
    if re.search(r"^interface:\s*SeparationModel\s*$", yaml_text, re.MULTILINE):
        return ('```python\nfrom speechkit.pretrained import SeparationModel\n'
                'model = SeparationModel.from_hparams("<this folder, Hub repo id or URL>")\n'
                'sources = model.separate_file("mixture.wav")  # (speakers, time)\n```\n\n'
                'or `speechkit separate <source> mixture.wav --out separated/`.')
    return ('```python\nfrom speechkit.pretrained import Pretrained\n'
            'model = Pretrained.from_hparams("<this folder, Hub repo id or URL>")\n'
            'print(model.transcribe_file("speech.flac"))\n```\n\n'
            'or `speechkit transcribe <source> speech.flac`.')


def _selection(checkpoints_dir, checkpoint, min_key, max_key, given: bool) -> str:
    """How the exported checkpoint was chosen, in the card's words: the key and the direction, among how many
    kept checkpoints, and which key the run kept them by (end-of-epoch checkpoints are kept by loss)."""
    averaged = checkpoint.info.get("averaged")
    if averaged:
        sources = ", ".join(f"`{pathlib.Path(p).name}`" for p in averaged.get("checkpoints", []))
        return f"the average of {len(averaged.get('checkpoints', []))} checkpoints: {sources}"
    if given:
        return "chosen by path"
    from speechkit.checkpoints import Checkpointer

    kept = Checkpointer(checkpoints_dir).list_checkpoints()
    if not (min_key or max_key):
        return f"the newest of {len(kept)} kept checkpoint(s)"
    key, direction = (min_key, "lowest") if min_key else (max_key, "highest")
    scored = [c for c in kept if key in c.meta]
    chosen = f"{direction} validation `{key}` among {len(scored)} kept checkpoint(s) that have it"
    if len(scored) == 1:
        chosen += (": the only one; the run chose which to keep (`ckpt_keep`) by validation loss, and by the "
                   "early-stopping key if one was watched, so it is not the best by this key of every epoch")
    return chosen


def _test_results(checkpoints_dir) -> tuple:
    """``(train_log path, {metric: value})`` of the run's last test stage, read from the ``train_log.txt``
    next to the checkpoints folder (``(None, {})`` when there is none)."""
    folder = pathlib.Path(checkpoints_dir)
    if (folder / "meta.json").is_file():
        folder = folder.parent
    for log in (folder.parent / "train_log.txt", folder / "train_log.txt"):
        if not log.is_file():
            continue
        try:
            lines = log.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return None, {}
        tests = [line for line in lines if " | " in line and "stage: test" in line.split(" | ")[:2]]
        if tests:
            fields = dict(part.split(": ", 1) for part in tests[-1].split(" | ") if ": " in part)
            return log, {k: v for k, v in fields.items() if k not in ("epoch", "stage", "duration", "lr")}
    return None, {}


def _model_card(name, description, checkpoint, written: dict, hparams_file, chosen: str, usage: str = "",
                test: tuple = (None, {})) -> str:
    metrics = "\n".join(f"| {k} | {v} |" for k, v in sorted(checkpoint.meta.items())) or "| (none) | |"
    file_rows = "\n".join(f"| {f} | {p.stat().st_size} | `{_sha256(p)}` |"
                          for f, p in sorted(written.items()))
    log, scores = test
    if scores:
        test_section = (f"Scored by the run on its test set (the last test stage of `{log.name}`):\n\n"
                        "| metric | value |\n| --- | --- |\n"
                        + "\n".join(f"| {k} | {v} |" for k, v in scores.items()))
    else:
        test_section = ("No test result found (no test stage in the run's `train_log.txt` next to the "
                        "checkpoints): the figures above are validation figures only.")
    when = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    epoch, step = checkpoint.info.get("epoch"), checkpoint.info.get("step")
    return f"""# {name}

{description or "A speech model exported from a speechkit recipe."}

## Usage

{usage or _usage("")} A copy from a Hub repo or a URL builds only the classes and functions on
speechkit's allowlist unless `trust_remote_code=True` is passed.

## Checkpoint

Exported on {when} from `{checkpoint.path.name}` ({chosen}), epoch {epoch}, step {step}, with
`{pathlib.Path(hparams_file).name}`.

Validation figures of that checkpoint:

| metric | value |
| --- | --- |
{metrics}

## Test set

{test_section}

## Files

| file | bytes | sha256 |
| --- | --- | --- |
{file_rows}
"""
