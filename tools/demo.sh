#!/usr/bin/env bash
# The speechkit demo: build the built-in speech corpus, train the speech recognition template on CPU (tokenizer,
# language model, then the acoustic model), transcribe the test set (a voice never heard in training) with
# CTC beam search and the LM, and print the word error rate.
#
#   tools/demo.sh                      # 5,700 utterances, then ~3 + ~9 minutes of training on 2 cores
#   tools/demo.sh --number_of_epochs 1 # any ASR train.py option or YAML override is passed on
#
# Environment: DATA (corpus folder, default data/SynthSpeech), OUT (results, default results/demo),
# JOBS (synthesis processes, default 2), SIZE (corpus size, default small), CORPUS_OPTIONS (more `speechkit
# corpus` flags, e.g. "--digit-share 0.2": templates/speech_recognition/README.md, "Real voices").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="$(realpath -m "${DATA:-$ROOT/data/SynthSpeech}")"
OUT="$(realpath -m "${OUT:-$ROOT/results/demo}")"
PYTHON="${PYTHON:-python}"

TEMPLATE="$ROOT/templates/speech_recognition"
TOKENIZER="$OUT/tokenizer/tokenizer.model"

echo "== 1/5 corpus: $DATA"
# shellcheck disable=SC2086  # CORPUS_OPTIONS holds several flags
"$PYTHON" -m speechkit corpus "$DATA" --size "${SIZE:-small}" --num-workers "${JOBS:-2}" ${CORPUS_OPTIONS:-}

echo "== 2/5 character tokenizer (templates/speech_recognition/Tokenizer) into $OUT/tokenizer"
(cd "$TEMPLATE/Tokenizer" && "$PYTHON" train.py hparams/tokenizer.yaml --data_folder "$DATA" \
    --output_folder "$OUT/tokenizer")

echo "== 3/5 language model on the training transcripts (templates/speech_recognition/LM) into $OUT/lm"
lm_start=$(date +%s)
(cd "$TEMPLATE/LM" && "$PYTHON" train.py hparams/lm.yaml --data_folder "$DATA" --output_folder "$OUT/lm" \
    --asr_model.tokenizer_file "$TOKENIZER" --noprogressbar)
lm_end=$(date +%s)

echo "== 4/5 acoustic model (templates/speech_recognition/ASR) into $OUT; test set with beam search + LM"
start=$(date +%s)
(cd "$TEMPLATE/ASR" && "$PYTHON" train.py hparams/train.yaml --data_folder "$DATA" --output_folder "$OUT" \
    --model.tokenizer_file "$TOKENIZER" --lm_checkpoint "$OUT/lm/lm.ckpt" --noprogressbar "$@")
end=$(date +%s)

echo "== 5/5 held-out voice: transcriptions and word error rate"
"$PYTHON" - "$OUT" "$DATA" "$((end - start))" "$((lm_end - lm_start))" <<'EOF'
import json, re, sys
from pathlib import Path

out, data, seconds, lm_seconds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
report = (out / "wer_test.txt").read_text().splitlines()
test = json.loads((data / "test.json").read_text())
voices = sorted({row["spk"] for row in test.values()})
log = (out / "train_log.txt").read_text().strip().splitlines()
epochs = [re.search(r"stage: train .*duration: ([\d.]+)s", line) for line in log]
epochs = [float(match.group(1)) for match in epochs if match]
trained = round(sum(epochs))
print(f"LM training took {lm_seconds // 60} min {lm_seconds % 60} s; acoustic model: {len(epochs)} epochs of "
      f"training in {trained // 60} min {trained % 60} s, {seconds // 60} min {seconds % 60} s with data "
      f"preparation and evaluation; last lines of {out}/train_log.txt:")
print("\n".join("  " + line for line in log[-3:]))
blocks = "\n".join(report).split("=" * 80)
examples = [b.strip() for b in blocks if re.match(r"\s*\S+, %WER", b)][-3:]  # the best-decoded last
print(f"\nexamples (reference / operations / hypothesis), from {out}/wer_test.txt:")
print("\n\n".join(examples))
print(f"\ntest set: {len(test)} utterances by voices {', '.join(voices)} (held out from training)")
print(report[0].replace("%WER", "WER").strip(), "   ", report[1].replace("%SER", "SER").strip())
EOF
