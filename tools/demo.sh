#!/usr/bin/env bash
# The speechkit demo: build the built-in speech corpus, train the speech recognition template on CPU,
# transcribe the test set (voices never heard in training) and print the word error rate.
#
#   tools/demo.sh                      # about 5,700 utterances, then ~10 minutes of training on 2 cores
#   tools/demo.sh --number_of_epochs 1 # any train.py option or YAML override is passed on
#
# Environment: DATA (corpus folder, default data/SynthSpeech), OUT (results, default results/demo),
# JOBS (synthesis processes, default 2), SIZE (corpus size, default small).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="$(realpath -m "${DATA:-$ROOT/data/SynthSpeech}")"
OUT="$(realpath -m "${OUT:-$ROOT/results/demo}")"
PYTHON="${PYTHON:-python}"

echo "== 1/3 corpus: $DATA"
"$PYTHON" -m speechkit corpus "$DATA" --size "${SIZE:-small}" --num-workers "${JOBS:-2}"

echo "== 2/3 training the ASR template (templates/speech_recognition/ASR) into $OUT"
start=$(date +%s)
cd "$ROOT/templates/speech_recognition/ASR"
"$PYTHON" train.py hparams/train.yaml --data_folder "$DATA" --output_folder "$OUT" \
    --model.tokenizer_file "$OUT/tokenizer/tokenizer.model" --noprogressbar "$@"
end=$(date +%s)

echo "== 3/3 held-out voices: transcriptions and word error rate"
"$PYTHON" - "$OUT" "$DATA" "$((end - start))" <<'EOF'
import json, re, sys
from pathlib import Path

out, data, seconds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
report = (out / "wer_test.txt").read_text().splitlines()
test = json.loads((data / "test.json").read_text())
voices = sorted({row["spk"] for row in test.values()})
log = (out / "train_log.txt").read_text().strip().splitlines()
print(f"training + evaluation took {seconds // 60} min {seconds % 60} s; last lines of {out}/train_log.txt:")
print("\n".join("  " + line for line in log[-3:]))
blocks = "\n".join(report).split("=" * 80)
examples = [b.strip() for b in blocks if re.match(r"\s*\S+, %WER", b)][-3:]  # the best-decoded last
print(f"\nexamples (reference / operations / hypothesis), from {out}/wer_test.txt:")
print("\n\n".join(examples))
print(f"\ntest set: {len(test)} utterances by voices {', '.join(voices)} (held out from training)")
print(report[0].replace("%WER", "WER").strip(), "   ", report[1].replace("%SER", "SER").strip())
EOF
