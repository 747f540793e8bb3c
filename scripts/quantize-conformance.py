#!/usr/bin/env python3
"""`specmoe quantize` against llama.cpp's `llama-quantize`, file for file.

Each case quantizes one model both ways (`--allow-requantize` always given, 2 threads) and
compares the two output files byte for byte: synthetic models (`specmoe synth`, written to a
scratch folder; F32 weights, and one K-quant synth requantized) covering the per-tensor rules
(output head in Q6_K or its Q8_0 fallback, tied heads, 8-expert attention in Q8_0, MoE routers and
1-D tensors copied, the type overrides, --pure, MXFP4_MOE's experts in MXFP4 and the rest Q8_0), and the real models of scripts/fetch-models.sh
that are present, to every type whose quantizer is ggml's (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q6_K,
F16, BF16). Exits 1 when a pair differs.

With --goldens FILE it also writes the synthetic cases with the FNV-1a 64 hash and size of
llama-quantize's file: tests/golden/quantize_llamacpp.json, which tests/unit/quantize_test.cpp
checks specmoe's output against without llama.cpp.

  usage: scripts/quantize-conformance.py [--no-real] [--goldens FILE]
Environment: LLAMA_BIN (default ~/.cache/specmoe-peer/llama.cpp/build/bin), SPECMOE_MODELS
(default ~/.cache/specmoe/models), SPECMOE (default build/specmoe).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_BIN = os.environ.get("LLAMA_BIN", os.path.expanduser("~/.cache/specmoe-peer/llama.cpp/build/bin"))
MODELS = os.environ.get("SPECMOE_MODELS", os.path.expanduser("~/.cache/specmoe/models"))
SPECMOE = os.environ.get("SPECMOE", os.path.join(ROOT, "build", "specmoe"))

# (synth preset, type, extra arguments)
SYNTH_CASES = [
    ("tiny-256", t, []) for t in ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q6_K", "F16", "BF16"]
] + [
    ("tiny-256", "Q4_0", ["--pure"]),
    ("tiny-256", "Q8_0", ["--output-tensor-type", "q4_0", "--token-embedding-type", "q5_1"]),
    ("tiny-256-q4_k", "Q4_0", []),
    ("tiny-256-q6_k", "Q5_1", []),
    ("tiny", "Q4_0", []),
    ("gemma3-tiny", "Q4_0", []),
    ("gemma3-tiny", "Q6_K", []),
    ("olmoe-tiny", "Q4_0", []),
    ("deepseek2-tiny", "Q5_0", []),
    ("qwen2moe-tiny", "Q4_1", []),
    ("qwen3moe-tiny", "Q8_0", []),
    ("phi3-tiny", "Q4_0", []),
    ("llama3-tiny", "Q5_1", []),
    ("gpt-oss-tiny", "MXFP4_MOE", []),
    ("moe-tiny", "MXFP4_MOE", []),
    ("qwen3moe-tiny", "MXFP4_MOE", ["--pure"]),
    ("tiny", "Q2_K", []),  # rows of 64: every tensor falls back to Q4_0 (ggml's quantizer)
]
REAL_MODELS = ["Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf", "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf",
               "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]
REAL_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q6_K", "F16", "BF16"]


def fnv1a64(path):
    h = 0xcbf29ce484222325
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            for b in chunk:
                h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")


def same_files(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def compare(model, qtype, extra, tmp, want_hash):
    ours, theirs = os.path.join(tmp, "specmoe.gguf"), os.path.join(tmp, "llama.gguf")
    run([SPECMOE, "quantize", "-q", "-t", "2", "--allow-requantize", *extra, model, ours, qtype])
    run([os.path.join(LLAMA_BIN, "llama-quantize"), "--allow-requantize", *extra, model, theirs, qtype, "2"])
    same = same_files(ours, theirs)
    size = os.path.getsize(theirs)
    golden = fnv1a64(theirs) if same and want_hash else None
    os.remove(ours)
    os.remove(theirs)
    return same, size, golden


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-real", action="store_true", help="synthetic models only")
    ap.add_argument("--goldens", help="write the synthetic cases' hashes of llama-quantize's files here")
    args = ap.parse_args()
    failed, goldens = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for preset, qtype, extra in SYNTH_CASES:
            path = os.path.join(tmp, preset + ".gguf")
            if not os.path.exists(path):
                run([SPECMOE, "synth", "--preset", preset, "-o", path])
            cases.append((preset, path, qtype, extra))
        if not args.no_real:
            for name in REAL_MODELS:
                path = os.path.join(MODELS, name)
                if os.path.exists(path):
                    cases += [(name, path, t, []) for t in REAL_TYPES]
                else:
                    print(f"skip {name}: not in {MODELS}")
        print("| model | type | options | bytes | specmoe = llama-quantize |")
        print("|---|---|---|---:|---|")
        synth = {c[0] for c in SYNTH_CASES}
        for label, path, qtype, extra in cases:
            same, size, golden = compare(path, qtype, extra, tmp, label in synth)
            failed += not same
            print(f"| {label} | {qtype} | {' '.join(extra)} | {size} | {'identical' if same else 'DIFFERENT'} |",
                  flush=True)
            if golden:
                goldens.append({"preset": label, "type": qtype, "args": extra, "bytes": size, "fnv1a64": golden})
    if args.goldens:
        with open(args.goldens, "w") as f:
            json.dump({"generated_by": "scripts/quantize-conformance.py (llama-quantize of llama.cpp 2026-10, "
                                       "llama-cpp-python 0.3.36's vendor/llama.cpp)",
                       "synth_seed": 1, "cases": goldens}, f, indent=1)
            f.write("\n")
    if failed:
        sys.exit(f"{failed} case(s) differ")


if __name__ == "__main__":
    main()
