#!/usr/bin/env bash
# NIL detection on BC5CDR with the linker's candidate scores as probabilities (the default
# since issue 32) and as raw dot products: tune-nil on dev, scored on test, one at a time
set -euo pipefail
export OMP_NUM_THREADS=2
M=${MODEL:-training/bench4/knn_negatives-issue31/model-last}  # bc5cdr_linker.py --tag issue31
O=${OUT:-bench_runs/score_scale}
mkdir -p $O
for scores in probability raw; do
python -m spacy_arboel tune-nil $M corpus/bc5cdr/dev.spacy --test corpus/bc5cdr/test.spacy \
  --name $scores --output $O/nil_$scores.json --components.arbo_entity_linker.get_candidates.scores $scores
done
echo done
