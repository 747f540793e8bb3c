#!/usr/bin/env python3
"""EAGLE-3 drafting of specmoe against llama.cpp's draft-eagle3, token for token.

A synth llama target (`tiny`) and synth EAGLE-3 heads for it (`eagle3-tiny`: the target's embedding
and head, layers 1, 2, 3; `eagle3-d2t-tiny`: its own embedding and a head over 160 of the 320 ids
mapped through d2t, norm_before_fc, norm_before_residual, layers 0, 1, 3), random weights in the
layout llama.cpp's converter writes, made by `specmoe synth`; or any TARGET HEAD pair given. For
each prompt and draft length g both tools decode greedily with the head drafting from the target's
layer rows: llama.cpp's llama-speculative-simple --spec-type draft-eagle3 (its debug log lists each
drafted token), specmoe's `speculate --drafter eagle3 -md HEAD --steps --json`. Both draft at the
same positions from the same context (greedy: the verified output is the target's either way), so
the drafted tokens must agree one by one (scripts/spec_conformance.py). F32 KV caches, llama.cpp
without flash attention (as scripts/conformance-mtp.py).

    SPECMOE=build-cpu/specmoe LLAMA_BIN=/path/to/llama.cpp/build/bin scripts/conformance-eagle3.py [OUT_DIR | TARGET HEAD]

Prints one line per head and a total; exits 1 on any difference.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec_conformance as sc  # noqa: E402

if __name__ == "__main__":
    sc.main_pairs([("tiny", "eagle3-tiny"), ("tiny", "eagle3-d2t-tiny")],
                  "draft-eagle3", "eagle3", "/tmp/specmoe-conformance-eagle3")
