#!/usr/bin/env bash
# GPU check (issue 3): train 12x512 (H=2, V=2000 BPE, T=128, B=512, bf16) for 200 steps on one
# GPU and print tokens/s and MFU, plus the same shape through `depthwidth bench train`.
# Under 5 minutes on one H100/H200. Usage:
#   experiments/gpu_check.sh [DATA]      DATA: a prepared BPE-2000 dir or a known corpus name
#                                        (default python_docs, found via $DEPTHWIDTH_DATA)
# Writes its result record under ${OUT:-/tmp/gpu_check}/runs/.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v depthwidth >/dev/null 2>&1; then dw=(depthwidth); else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"; dw=(python3 -m depthwidth.cli); fi
data="${1:-python_docs}"
out="${OUT:-/tmp/gpu_check}"
python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
"${dw[@]}" bench train --layers 12 --width 512 --heads 2 --vocab 2000 --seq-len 128 --batch 512 \
  --steps 20 --dtype bfloat16
"${dw[@]}" train --out "$out" --quiet \
  --set data.corpus="$data" --set data.tokenizer=bpe --set data.bpe_vocab_size=2000 \
  --set model.n_layer=12 --set model.d_model=512 --set model.n_head=2 --set model.seq_len=128 \
  --set train.batch_size=512 --set train.steps=200 --set train.warmup_steps=20 --set train.lr=1e-3 \
  --set train.compute_dtype=bfloat16 --set train.log_every=50 --set train.ckpt_every=1000 \
  --set train.test_sequences=2048 --set train.eval_batches=4
python3 - "$out" <<'PY'
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("runs/*/record.json")):
    r = json.loads(p.read_text())
    print(f"gpu_check: {r['run_id']} {r['status']} steps={r['steps']} test_loss={r['test_loss']:.4f} "
          f"tokens/s={r['tokens_per_s']:,.0f} MFU={r['mfu']:.3f} ({r['mfu_convention']}) "
          f"peak={r['peak_flops_per_s'] / 1e12:.0f} TFLOP/s measured, compile={r['compile_s']:.1f}s on {r['device']}")
PY
