#!/usr/bin/env bash
# the type rule on BC5CDR (issue 32): linking of the gold test mentions and coref, without
# and with label_types, one run at a time
set -euo pipefail
export OMP_NUM_THREADS=2
M=${MODEL:-training/bench4/knn_negatives-issue31/model-last}  # bc5cdr_linker.py --tag issue31
T=corpus/bc5cdr/test.spacy
RULE='{"Chemical": ["Chemical"], "Disease": ["Disease"]}'
L=components.arbo_entity_linker.get_candidates
O=${OUT:-bench_runs/type_rule}
mkdir -p $O
[ -f $O/linker_none.json ] || python -m spacy_arboel evaluate $M $T --no-encoder-rate --name no-rule --output $O/linker_none.json
[ -f $O/linker_restrict.json ] || python -m spacy_arboel evaluate $M $T --no-encoder-rate --name restrict --output $O/linker_restrict.json --$L.label_types "$RULE"
[ -f $O/linker_prefer.json ] || python -m spacy_arboel evaluate $M $T --no-encoder-rate --name prefer --output $O/linker_prefer.json --$L.label_types "$RULE" --$L.type_rule prefer
for k in 1; do
[ -f $O/coref_k${k}_none.json ] || python -m spacy_arboel evaluate-coref $M $T --output $O/coref_k${k}_none.json --components.arbo_coref.k $k
[ -f $O/coref_k${k}_restrict.json ] || python -m spacy_arboel evaluate-coref $M $T --output $O/coref_k${k}_restrict.json --components.arbo_coref.k $k --$L.label_types "$RULE"
done
[ -f $O/coref_tuned_none.json ] || python -m spacy_arboel evaluate-coref $M $T --output $O/coref_tuned_none.json --components.arbo_coref.k 1 --components.arbo_coref.threshold -16.6517
[ -f $O/coref_tuned_restrict.json ] || python -m spacy_arboel evaluate-coref $M $T --output $O/coref_tuned_restrict.json --components.arbo_coref.k 1 --components.arbo_coref.threshold -16.6517 --$L.label_types "$RULE"
# end to end with a ner's labels (run with E2E=1): a tok2vec ner (configs/ner.cfg, 3,000 steps,
# as BENCHMARKS' tok2vec row) and the linker assembled, without and with the rule
if [ "${E2E:-0}" = 1 ]; then
NER=${NER:-training/bench-ner-type}
[ -d $NER/model-best ] || python -m spacy train configs/ner.cfg --output $NER --training.max_steps 3000 \
  --training.eval_frequency 500 --paths.train corpus/bc5cdr/train.spacy --paths.dev corpus/bc5cdr/dev.spacy
python -m spacy assemble configs/assemble.cfg $NER/assembled --paths.ner $NER/model-best --paths.linker $M
python -m spacy_arboel evaluate-e2e $NER/assembled $T --output $O/e2e_none.json
python -m spacy_arboel evaluate-e2e $NER/assembled $T --output $O/e2e_restrict.json --$L.label_types "$RULE"
python -m spacy_arboel evaluate-e2e $NER/assembled $T --output $O/e2e_prefer.json --$L.label_types "$RULE" --$L.type_rule prefer
fi
echo done
