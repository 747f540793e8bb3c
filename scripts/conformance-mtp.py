#!/usr/bin/env python3
"""Multi-token-prediction drafting of specmoe against llama.cpp's draft-mtp, token for token.

For each synth model with a NextN/MTP block (qwen35-mtp-tiny, qwen35moe-mtp-tiny, glm4moe-mtp-tiny,
deepseek2-mtp-tiny: random weights in llama.cpp's layout, written by `specmoe synth`; and qwen35-tiny
drafted for by qwen35-mtp-only-tiny, the block in a file of its own as llama.cpp's --mtp export
writes it, given as -md), each prompt
and each draft length g, both tools decode greedily with the model drafting for itself through its
MTP block: llama.cpp's llama-speculative-simple --spec-type draft-mtp (its debug log lists each
drafted token), specmoe's `speculate --drafter mtp --steps --json`. Both draft at the same
positions from the same context (greedy: the verified output is the target's either way), so the
drafted tokens must agree one by one up to where the last steps are cut by the token budget, which
the two count differently (scripts/spec_conformance.py). Both run F32 KV caches; llama.cpp without flash attention (its CPU
flash-attention path rounds otherwise: it changed a draft at a distribution that was not tied,
and the contexts part after a first difference; with -fa off it agrees with specmoe everywhere).

    SPECMOE=build-cpu/specmoe LLAMA_BIN=/path/to/llama.cpp/build/bin scripts/conformance-mtp.py [OUT_DIR]

Prints one line per model and a total; exits 1 on any difference.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec_conformance as sc  # noqa: E402

# (target preset, block preset or None: the target's own block)
CASES = [("qwen35-mtp-tiny", None), ("qwen35moe-mtp-tiny", None), ("glm4moe-mtp-tiny", None),
         ("deepseek2-mtp-tiny", None), ("qwen35-tiny", "qwen35-mtp-only-tiny")]


def main():
    if not sc.LLAMA_BIN:
        sys.exit("set LLAMA_BIN to llama.cpp's build/bin (llama-speculative-simple)")
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/specmoe-conformance-mtp"
    os.makedirs(out_dir, exist_ok=True)
    total = equal = 0
    for preset, block_preset in CASES:
        model = sc.synth(preset, out_dir)
        block = ["-md", sc.synth(block_preset, out_dir)] if block_preset else []
        label = preset + (f" with {block_preset}" if block_preset else "")
        same, n = sc.compare(label, ["-m", model] + block + ["--spec-type", "draft-mtp"],
                             ["-m", model] + block + ["--drafter", "mtp"])
        total, equal = total + n, equal + same
    print(f"total: {equal} of {total} drafted tokens equal")
    sys.exit(0 if equal == total else 1)


if __name__ == "__main__":
    main()
