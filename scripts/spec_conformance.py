"""What scripts/conformance-mtp.py, conformance-eagle3.py and conformance-dflash.py share: the drafted tokens of
llama.cpp's llama-speculative-simple (from its debug log) and of specmoe's `speculate --steps
--json`, and their comparison step by step."""
import json
import os
import re
import subprocess
import sys

SPECMOE = os.environ.get("SPECMOE", "build-cpu/specmoe")
LLAMA_BIN = os.environ.get("LLAMA_BIN", "")
PROMPTS = ["Once upon a time", "def fib(n):", "The quick brown fox jumps over the lazy dog",
           "In 1492, Columbus", "import numpy as np", "Q: What is 2+2? A:"]
N_TOKENS = 48
DRAFT = [1, 2, 4, 5]


def llama_drafts(args, prompt, g):
    """Each step's drafted tokens of llama-speculative-simple ARGS (model, draft, --spec-type),
    greedy, F32 caches, flash attention off."""
    env = dict(os.environ, LC_ALL="C", LD_LIBRARY_PATH=LLAMA_BIN)
    cmd = [os.path.join(LLAMA_BIN, "llama-speculative-simple")] + args + [
           "-p", prompt, "-n", str(N_TOKENS), "--temp", "0", "--spec-draft-n-max", str(g), "--spec-draft-p-min", "0",
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


def specmoe_drafts(args, prompt, g):
    """Each step's drafted tokens of `specmoe speculate ARGS` (model, draft, --drafter), greedy, F32
    caches, the prompt as raw text."""
    cmd = [SPECMOE, "speculate"] + args + ["--temp", "0", "-p", prompt, "-n", str(N_TOKENS), "--draft-max", str(g),
           "--cache-type-k", "f32", "--cache-type-v", "f32", "--chat-template", "none", "--steps", "--json"]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return [s["drafted"] for s in json.loads(out)["steps"] if s["drafted"]]


def synth(preset, out_dir):
    path = os.path.join(out_dir, preset + ".gguf")
    subprocess.run([SPECMOE, "synth", "--preset", preset, "-o", path], check=True, capture_output=True)
    return path


def compare(label, llama_args, specmoe_args):
    """(equal, compared) drafted tokens over PROMPTS x DRAFT, printing each step that differs. The
    token budget cuts the last steps' drafts differently in the two tools: each step is compared
    over the shorter of its two drafts."""
    n = same = 0
    for prompt in PROMPTS:
        for g in DRAFT:
            ll, sm = llama_drafts(llama_args, prompt, g), specmoe_drafts(specmoe_args, prompt, g)
            if not ll or not sm:
                print(f"  {label} g={g} '{prompt}': llama.cpp drafted {len(ll)} times, specmoe {len(sm)}")
                n += 1
            for step, (a, b) in enumerate(zip(ll, sm)):
                k = min(len(a), len(b))
                n += k
                same += sum(x == y for x, y in zip(a[:k], b[:k]))
                if a[:k] != b[:k]:
                    print(f"  {label} g={g} '{prompt}' step {step + 1}: llama.cpp {a} specmoe {b}")
    print(f"{label}: {same} of {n} drafted tokens equal")
    return same, n


def main_pairs(cases, spec_type, drafter, default_out):
    """The main of a draft head's conformance script: synth (target, draft) presets `cases` written
    to OUT_DIR (argv[1], default `default_out`), or the TARGET DRAFT pair given as argv[1:3];
    llama.cpp's --spec-type `spec_type` against specmoe's --drafter `drafter`. Prints one line per
    pair and a total; exits 1 on any difference."""
    if not LLAMA_BIN:
        sys.exit("set LLAMA_BIN to llama.cpp's build/bin (llama-speculative-simple)")
    if len(sys.argv) == 3:
        pairs = [(sys.argv[1], sys.argv[2])]
    else:
        out_dir = sys.argv[1] if len(sys.argv) > 1 else default_out
        os.makedirs(out_dir, exist_ok=True)
        pairs = [(synth(t, out_dir), synth(d, out_dir)) for t, d in cases]
    total = equal = 0
    for model, draft in pairs:
        label = f"{os.path.basename(model)} with {os.path.basename(draft)}"
        same, n = compare(label, ["-m", model, "-md", draft, "--spec-type", spec_type],
                          ["-m", model, "-md", draft, "--drafter", drafter])
        total, equal = total + n, equal + same
    print(f"total: {equal} of {total} drafted tokens equal")
    sys.exit(0 if equal == total else 1)
