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
the two count differently. Both run F32 KV caches; llama.cpp without flash attention (its CPU
flash-attention path rounds otherwise: it changed a draft at a distribution that was not tied,
and the contexts part after a first difference; with -fa off it agrees with specmoe everywhere).

    SPECMOE=build-cpu/specmoe LLAMA_BIN=/path/to/llama.cpp/build/bin scripts/conformance-mtp.py [OUT_DIR]

Prints one line per model and a total; exits 1 on any difference.
"""
import json
import os
import re
import subprocess
import sys

SPECMOE = os.environ.get("SPECMOE", "build-cpu/specmoe")
LLAMA_BIN = os.environ.get("LLAMA_BIN", "")
# (target preset, block preset or None: the target's own block)
CASES = [("qwen35-mtp-tiny", None), ("qwen35moe-mtp-tiny", None), ("glm4moe-mtp-tiny", None),
         ("deepseek2-mtp-tiny", None), ("qwen35-tiny", "qwen35-mtp-only-tiny")]
PROMPTS = ["Once upon a time", "def fib(n):", "The quick brown fox jumps over the lazy dog",
           "In 1492, Columbus", "import numpy as np", "Q: What is 2+2? A:"]
N_TOKENS = 48
DRAFT = [1, 2, 4, 5]


def llama_drafts(model, block, prompt, g):
    env = dict(os.environ, LC_ALL="C", LD_LIBRARY_PATH=LLAMA_BIN)
    cmd = [os.path.join(LLAMA_BIN, "llama-speculative-simple"), "-m", model] + (["-md", block] if block else []) + [
           "--spec-type", "draft-mtp", "-p",
           prompt, "-n", str(N_TOKENS), "--temp", "0", "--spec-draft-n-max", str(g), "--spec-draft-p-min", "0",
           "-t", "2", "-lv", "5", "-fa", "off", "-ctk", "f32", "-ctv", "f32", "-ctkd", "f32", "-ctvd", "f32"]
    log = subprocess.run(cmd, capture_output=True, env=env, check=True).stderr.decode("latin1")
    steps = []
    for line in log.split("\n"):
        m = re.search(r"draft candidate +0, pos +(\d+): +(\d+) ", line)
        if m:
            pos, tok = int(m[1]), int(m[2])
            if pos == 0:
                steps.append([])
            steps[-1].append(tok)
    return steps


def specmoe_drafts(model, block, prompt, g):
    cmd = [SPECMOE, "speculate", "-m", model] + (["-md", block] if block else []) + [
           "--drafter", "mtp", "--temp", "0", "-p", prompt, "-n",
           str(N_TOKENS), "--draft-max", str(g), "--cache-type-k", "f32", "--cache-type-v", "f32", "--steps",
           "--json"]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return [s["drafted"] for s in json.loads(out)["steps"] if s["drafted"]]


def main():
    if not LLAMA_BIN:
        sys.exit("set LLAMA_BIN to llama.cpp's build/bin (llama-speculative-simple)")
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/specmoe-conformance-mtp"
    os.makedirs(out_dir, exist_ok=True)
    total = equal = 0
    for preset, block_preset in CASES:
        model = os.path.join(out_dir, preset + ".gguf")
        subprocess.run([SPECMOE, "synth", "--preset", preset, "-o", model], check=True, capture_output=True)
        block = None
        if block_preset:
            block = os.path.join(out_dir, block_preset + ".gguf")
            subprocess.run([SPECMOE, "synth", "--preset", block_preset, "-o", block], check=True, capture_output=True)
        label = preset + (f" with {block_preset}" if block_preset else "")
        n = same = 0
        for prompt in PROMPTS:
            for g in DRAFT:
                ll, sm = llama_drafts(model, block, prompt, g), specmoe_drafts(model, block, prompt, g)
                for step, (a, b) in enumerate(zip(ll, sm)):
                    k = min(len(a), len(b))  # the budget cuts the last steps' drafts differently
                    n += k
                    same += sum(x == y for x, y in zip(a[:k], b[:k]))
                    if a[:k] != b[:k]:
                        print(f"  {label} g={g} '{prompt}' step {step + 1}: llama.cpp {a} specmoe {b}")
        print(f"{label}: {same} of {n} drafted tokens equal")
        total, equal = total + n, equal + same
    print(f"total: {equal} of {total} drafted tokens equal")
    sys.exit(0 if equal == total else 1)


if __name__ == "__main__":
    main()
