#!/usr/bin/env python3
"""DFlash drafting of specmoe against llama.cpp's draft-dflash, token for token.

A synth llama target (`tiny`) and synth DFlash drafts for it (`dflash-tiny`: two Qwen3 layers
reading the target's layers 1 and 3, the target's embedding and head, blocks of 8, bidirectional;
`dflash-d2t-tiny`: one layer with 2 KV heads reading layers 0, 2 and 3, its own embedding and a
head over 160 of the 320 ids mapped through d2t, blocks of 5, causal), random weights in the layout
llama.cpp's converter writes, made by `specmoe synth`; or any TARGET DRAFT pair given. For each
prompt and draft length g both tools decode greedily with the draft filling a block from the
target's layer rows: llama.cpp's llama-speculative-simple --spec-type draft-dflash (its debug log
lists each drafted token), specmoe's `speculate --drafter dflash -md DRAFT --steps --json`. Both
draft at the same positions from the same context (greedy: the verified output is the target's
either way), so the drafted tokens must agree one by one (scripts/spec_conformance.py). F32 KV
caches, llama.cpp without flash attention (as scripts/conformance-eagle3.py). Draft lengths past a
draft's block size - 1 are clamped by both.

    SPECMOE=build-cpu/specmoe LLAMA_BIN=/path/to/llama.cpp/build/bin scripts/conformance-dflash.py [OUT_DIR | TARGET DRAFT]

Prints one line per draft and a total; exits 1 on any difference.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec_conformance as sc  # noqa: E402

if __name__ == "__main__":
    sc.main_pairs([("tiny", "dflash-tiny"), ("tiny", "dflash-d2t-tiny")],
                  "draft-dflash", "dflash", "/tmp/specmoe-conformance-dflash")
