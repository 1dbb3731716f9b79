"""Data: corpora -> text splits -> tokenizers -> uint16 token files -> batches (docs/architecture.md).

numpy and tokenizers only, no jax; importing this package loads nothing.

    corpora    the known corpora (name, URL, licence, sha256), located and verified in $DEPTHWIDTH_DATA
               or, for tiny shakespeare, in the copy that ships in data/bundled/
    splits     reading text and cutting it into train/val/test at exact BPE pre-token boundaries
    tokenizer  byte-level BPE and char-level tokenizers; chunked, parallel encoding to uint16
    tokenfiles the token files: Prepared (open_prepared), get_batch (a pure function of seed and
               step), entropy baselines
    prepare    text -> prepared directory; the shared cache (prepared_dir_for a DataConfig);
               meta_for_record (meta.json as a run record keeps it)
    cli        ``depthwidth data prepare`` / ``depthwidth data info``
"""
