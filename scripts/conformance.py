#!/usr/bin/env python3
"""Conformance of specmoe with llama.cpp's own tools (the real-models issue, item 6).

For every real model of scripts/fetch-models.sh that is present and for synthetic models of the
new tensor types and architectures (`specmoe synth`, written to a scratch folder), on three texts
(prose, code, Chinese) and at ctx 128 and 512:

  * tokenization: `specmoe tokenize` against `llama-tokenize` on the text exactly as the perplexity
    tools see it (one trailing newline dropped, the vocabulary's BOS, special-token texts not
    parsed), and on a text of emoji, whitespace runs, CJK and code (as a chat prompt: special
    tokens parsed);
  * perplexity: `specmoe perplexity` against `llama-perplexity` over the same file and context,
    with llama.cpp's KV cache in f32 (`-ctk f32 -ctv f32 -fa off`: with flash attention on, as it
    is by default, llama.cpp casts an f32 cache to f16 before the attention; bound 0.3% for real
    models, 0.5% for random-weight synthetic ones) and in its default f16 (bound 1%, judged only when specmoe's own
    cache is f16 too: specmoe's f32 cache against llama.cpp's f16 is reported); the chunk counts of
    both sides must be equal;
  * with --greedy, greedy agreement with `llama-completion --temp 0` on several prompts (reported,
    not judged): the tokens specmoe generates before the first divergence from llama.cpp's text,
    and specmoe's top-2 logit margin at each divergence;
  * with --llama-spread, llama.cpp against itself: llama-perplexity --no-repack (the same
    arithmetic through its non-repacked kernels, another summation order) on the first text and
    context with the f32 cache. On quantized models the 8-bit activation quantization turns
    last-bit differences into different roundings of whole activation blocks, layer after layer,
    so a few hundred scored tokens move by tenths of a percent between two correct kernels;
    this column shows how far llama.cpp itself moves.
  * with --kld, the distributions themselves rather than their perplexity: llama-perplexity
    writes its log-probabilities (--kl-divergence-base, f32 cache) on the first text and context,
    and specmoe (`specmoe perplexity --kl-divergence`, f32 cache) and llama.cpp's non-repacked
    kernels (--no-repack) are each compared with them on the same tokens: mean and 99th-percentile
    KL divergence, the fraction of positions with the same argmax, the RMS change of the correct
    token's probability. specmoe's own file is read back by llama-perplexity too (the format
    both ways). Reported; a failure to read or write either file fails.

Prints a Markdown table (also written with -o FILE) and exits 1 when a bound is exceeded or the
chunk counts or tokens differ.

  usage: scripts/conformance.py [--quick] [--ctx 128 512] [--texts DIR] [--models NAME...]
                                [--synth PRESET...] [--files GGUF...] [--no-real] [--no-synth]
                                [--only-texts prose code zh] [--greedy] [--llama-spread]
                                [--kld] [--no-perplexity] [-o FILE.md] [--json FILE] [--cache FILE]
                                [-t THREADS]
Environment: LLAMA_BIN (default ~/.cache/specmoe-peer/llama.cpp/build/bin), SPECMOE_MODELS
(default ~/.cache/specmoe/models), SPECMOE (default build/specmoe).

The texts are made from files every Debian system has (or that the project's shared data holds),
so the figures can be re-made anywhere: prose = the first paragraphs of
/usr/share/common-licenses/Apache-2.0, code = the first HumanEval problems (prompt and canonical
solution) of ../shared/data/prompts/humaneval/HumanEval.jsonl.gz, Chinese = the message texts of
/usr/lib/systemd/catalog/systemd.zh_CN.catalog, and long prose (only with --only-texts long) = the
whole GPL-3, MPL-2.0 and GFDL-1.3 of /usr/share/common-licenses. --texts DIR keeps them there (and reuses them).
Both tools' heavy runs go under `nice -n 10` with -t THREADS (default 2): the 1.5B model's runs take
minutes.
"""
import argparse
import base64
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOME = os.path.expanduser("~")
LLAMA_BIN = os.environ.get("LLAMA_BIN", os.path.join(HOME, ".cache/specmoe-peer/llama.cpp/build/bin"))
MODELS_DIR = os.environ.get("SPECMOE_MODELS", os.path.join(HOME, ".cache/specmoe/models"))
SPECMOE = os.environ.get("SPECMOE", os.path.join(ROOT, "build/specmoe"))

REAL_MODELS = [
    "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf",
    "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf",
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-q4_k_m.gguf",
]
# One synthetic model per new tensor type (llama, dims 64 or 256) and per new architecture (F32).
SYNTH_PRESETS = [
    "tiny-q5_0", "tiny-q5_1", "tiny-iq4_nl", "tiny-256-q2_k", "tiny-256-q3_k", "tiny-256-iq4_xs",
    "qwen3-tiny", "qwen3-yarn-tiny", "gemma3-tiny", "llama3-tiny",
]
BOUND_F32_REAL = 0.003
BOUND_F32_SYNTH = 0.005
BOUND_F16 = 0.01

VARIED_TEXT = (
    "Hello, world! Emoji: \U0001F600\U0001F469\u200D\U0001F4BB\U0001F1FA\U0001F1F8 \u2764\uFE0F  end.\n"
    "Whitespace runs:\t\t tabs,    four spaces,\n\n\n three newlines,\r\n CRLF and trailing   \n"
    "\u4e2d\u6587\u6587\u672c\uff1a\u4eca\u5929\u5929\u6c14\u5f88\u597d\u3002 \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002 "
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8. \u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd \u0928\u092e\u0938\u094d\u0924\u0947\n"
    "def f(x):\n    return {'a': [1, 2.5e-3, 0x1F], \"b\": x ** 2}  # comment\n"
    "Numbers 1234567890 3.14159 -42 1,000,000; accents caf\u00e9 na\u00efve \u00c5ngstr\u00f6m \u00df.\n"
)


def die(msg):
    print(f"conformance: {msg}", file=sys.stderr)
    sys.exit(2)


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def file_key(path):
    st = os.stat(path)
    return f"{os.path.abspath(path)}:{st.st_size}:{int(st.st_mtime)}"


# --- texts -----------------------------------------------------------------------------------

def first_paragraphs(text, n_chars):
    out = ""
    for para in text.split("\n\n"):
        if len(out) >= n_chars:
            break
        out += para + "\n\n"
    return out.rstrip("\n") + "\n"


def make_texts(folder):
    """Writes prose.txt, code.txt, zh.txt and varied.txt into folder (kept when present)."""
    os.makedirs(folder, exist_ok=True)
    sources = {
        "prose": "/usr/share/common-licenses/Apache-2.0",
        "code": os.path.join(ROOT, "../shared/data/prompts/humaneval/HumanEval.jsonl.gz"),
        "zh": "/usr/lib/systemd/catalog/systemd.zh_CN.catalog",
        # ~16k tokens: the statistical spread of a perplexity ratio shrinks as 1/sqrt(scored tokens)
        "long": "/usr/share/common-licenses/GPL-3",
    }
    long_parts = ["/usr/share/common-licenses/" + n for n in ("GPL-3", "MPL-2.0", "GFDL-1.3")]
    texts = {}
    for name, src in sources.items():
        path = os.path.join(folder, name + ".txt")
        if not os.path.exists(path):
            if not os.path.exists(src):
                die(f"the {name} text is made from {src}, which is missing (or give --texts DIR holding {name}.txt)")
            if name == "long":
                missing = [f for f in long_parts if not os.path.exists(f)]
                if missing:
                    die(f"the long text is made from {', '.join(long_parts)}; {missing[0]} is missing")
                text = "".join(open(f, encoding="utf-8").read() for f in long_parts)
            elif name == "prose":
                text = first_paragraphs(open(src, encoding="utf-8").read(), 6500)
            elif name == "code":
                code = ""
                with gzip.open(src, "rt", encoding="utf-8") as f:
                    for line in f:
                        d = json.loads(line)
                        code += d["prompt"] + d["canonical_solution"] + "\n\n"
                text = first_paragraphs(code, 4500)
            else:
                keep = [l.rstrip("\n") for l in open(src, encoding="utf-8")
                        if not l.startswith("#") and not l.startswith("-- ")
                        and not re.match(r"^(Defined-By|Support|Documentation):", l)]
                text = re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip("\n") + "\n"
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        texts[name] = path
    varied = os.path.join(folder, "varied.txt")
    if not os.path.exists(varied):
        with open(varied, "w", encoding="utf-8", newline="") as f:
            f.write(VARIED_TEXT)
    return texts, varied


# --- running the tools -----------------------------------------------------------------------

class Cache:
    """Results of earlier runs by a key naming the binaries, model, text and settings."""

    def __init__(self, path):
        self.path = path
        self.data = {}
        if path and os.path.exists(path):
            with open(path) as f:
                self.data = json.load(f)

    def get(self, key):
        return self.data.get(key)

    def put(self, key, value):
        self.data[key] = value
        if self.path:
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)


def run(cmd, nice=False, timeout=3600):
    if nice:
        cmd = ["nice", "-n", "10"] + cmd
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def llama_tool(name):
    path = os.path.join(LLAMA_BIN, name)
    if not os.access(path, os.X_OK):
        die(f"no {name} in {LLAMA_BIN} (set LLAMA_BIN)")
    return path


# llama-perplexity's flags for each KV cache type. "f16" is its default (no flags: f16 cache, flash
# attention "auto", which is on for the CPU). "f32" needs flash attention off: with it on, llama.cpp
# casts an f32 K and V to f16 before the attention (llama-graph.cpp, build_attn_mha), so
# `-ctk f32 -ctv f32` alone gives the f16 figures to the last digit.
LLAMA_KV_FLAGS = {"f16": [], "f32": ["-ctk", "f32", "-ctv", "f32", "-fa", "off"]}


def llama_perplexity(model, text, ctx, kv, threads, extra=()):
    """(ppl, chunks) from llama-perplexity with the KV cache of LLAMA_KV_FLAGS[kv] (and extra flags)."""
    cmd = [llama_tool("llama-perplexity"), "-m", model, "-f", text, "-c", str(ctx), "-t", str(threads)]
    cmd += LLAMA_KV_FLAGS[kv] + list(extra)
    # llama.cpp's logger writes from a thread the process does not join at exit (common/log.cpp,
    # common_log_main), so the last lines (the last chunks and the final estimate) are sometimes
    # lost: run again when they are.
    for attempt in range(6):
        rc, out, err = run(cmd, nice=True)
        log = out + err
        m_chunks = re.search(r"calculating perplexity over (\d+) chunks", log)
        m_final = re.search(r"Final estimate: PPL = ([0-9.]+)", log)
        if rc == 0 and m_chunks and m_final:
            return float(m_final.group(1)), int(m_chunks.group(1))
        # The last running value is the final one when every chunk printed (a log line can be lost
        # at exit); otherwise run once more.
        running = re.findall(r"\[(\d+)\]([0-9.]+),", log)
        if rc == 0 and m_chunks and running and int(running[-1][0]) == int(m_chunks.group(1)):
            return float(running[-1][1]), int(m_chunks.group(1))
    raise RuntimeError(f"llama-perplexity failed ({' '.join(cmd)}):\n{log[-2000:]}")


def specmoe_kv_flags():
    """specmoe perplexity's KV cache choices: ["f32"] before --cache-type-k/v exist, else f32 and f16."""
    _, out, err = run([SPECMOE, "perplexity", "--help"])
    return ["f32", "f16"] if "--cache-type-k" in out + err else ["f32"]


def specmoe_perplexity(model, text, ctx, kv, threads, kv_flags):
    cmd = [SPECMOE, "perplexity", "-m", model, "-f", text, "-c", str(ctx), "-t", str(threads)]
    if len(kv_flags) > 1:
        cmd += ["--cache-type-k", kv, "--cache-type-v", kv]
    rc, out, err = run(cmd, nice=True)
    m = re.search(r"perplexity: ([0-9.]+)", out)
    c = re.search(r"(\d+) chunks of (\d+) tokens", err)
    if rc != 0 or not m or not c:
        raise RuntimeError(f"specmoe perplexity failed ({' '.join(cmd)}):\n{out[-1000:]}{err[-2000:]}")
    return float(m.group(1)), int(c.group(1))


def parse_kld(log):
    """KLD statistics from llama-perplexity's --kl-divergence summary or specmoe's key: value lines."""
    pats = {
        "ppl": [r"Mean PPL\(Q\)\s*:\s*([0-9.]+)", r"^ppl: ([0-9.]+)"],
        "ppl_base": [r"Mean PPL\(base\)\s*:\s*([0-9.]+)", r"^ppl_base: ([0-9.]+)"],
        "kld_mean": [r"Mean\s+KLD:\s*(-?[0-9.]+)", r"^kld_mean: (-?[0-9.]+)"],
        "kld_p99": [r"99\.0%\s+KLD:\s*(-?[0-9.]+)", r"^kld_p99: (-?[0-9.]+)"],
        "kld_max": [r"Maximum KLD:\s*(-?[0-9.]+)", r"^kld_max: (-?[0-9.]+)"],
        "p_diff_rms": [r"RMS Δp\s*:\s*([0-9.]+)", r"^p_diff_rms: ([0-9.]+)%"],
        "same_top": [r"Same top p:\s*([0-9.]+)", r"^same_top: ([0-9.]+)%"],
    }
    out = {}
    for key, alternatives in pats.items():
        for pat in alternatives:
            m = re.search(pat, log, re.M)
            if m:
                out[key] = float(m.group(1))
                break
    return out if len(out) == len(pats) else None


def llama_kld(model, text, ctx, threads, base, write, extra=()):
    """llama-perplexity writing (write=True) or comparing with the log-probability file `base`."""
    cmd = [llama_tool("llama-perplexity"), "-m", model, "-c", str(ctx), "-t", str(threads),
           "--kl-divergence-base", base] + LLAMA_KV_FLAGS["f32"] + list(extra)
    cmd += ["-f", text] if write else ["--kl-divergence"]
    for attempt in range(6):  # the logger can lose its last lines at exit (see llama_perplexity)
        rc, out, err = run(cmd, nice=True)
        if rc != 0:
            break
        if write and os.path.getsize(base) > 20:
            return None
        stats = parse_kld(out + err)
        if not write and stats:
            return stats
    raise RuntimeError(f"llama-perplexity failed ({' '.join(cmd)}):\n{(out + err)[-2000:]}")


def specmoe_kld(model, text, ctx, threads, base, write):
    cmd = [SPECMOE, "perplexity", "-m", model, "-t", str(threads), "--kl-divergence-base", base,
           "-ctk", "f32", "-ctv", "f32"]
    cmd += ["-f", text, "-c", str(ctx)] if write else ["--kl-divergence"]
    rc, out, err = run(cmd, nice=True)
    stats = None if write else parse_kld(out)
    if rc != 0 or (not write and not stats):
        raise RuntimeError(f"specmoe perplexity failed ({' '.join(cmd)}):\n{out[-1000:]}{err[-2000:]}")
    return stats


def kld_rows(label, path, text, ctx, threads, scratch, cache, mkey, tkey, spec_key, llama_key):
    """specmoe and llama.cpp --no-repack against llama.cpp's log-probabilities; specmoe's file read by llama.cpp."""
    key = f"kld|{spec_key}|{llama_key}|{mkey}|{tkey}|{ctx}"
    if cache.get(key) is None:
        base_l = os.path.join(scratch, "llama.kld")
        base_s = os.path.join(scratch, "specmoe.kld")
        llama_kld(path, text, ctx, threads, base_l, write=True)
        row = {"specmoe": specmoe_kld(path, text, ctx, threads, base_l, write=False),
               "llama_no_repack": llama_kld(path, text, ctx, threads, base_l, write=False, extra=["--no-repack"])}
        specmoe_kld(path, text, ctx, threads, base_s, write=True)
        row["llama_vs_specmoe_base"] = llama_kld(path, text, ctx, threads, base_s, write=False)
        for f in (base_l, base_s):
            os.remove(f)
        cache.put(key, row)
    row = dict(cache.get(key))
    row.update({"model": label, "ctx": ctx})
    return row


def llama_ids(model, path, plain):
    flags = ["--no-parse-special"] if plain else []
    # --no-escape: llama-tokenize turns a text's literal \n, \t, \' ... into the characters by
    # default (llama-perplexity reads the file as it is).
    rc, out, err = run([llama_tool("llama-tokenize"), "-m", model, "-f", path, "--ids", "--log-disable",
                        "--no-escape"] + flags)
    if rc != 0:
        raise RuntimeError(f"llama-tokenize failed on {path}: {err[-1000:]}")
    return [int(t) for t in out.strip().splitlines()[-1].strip("[]").replace(",", " ").split()]


def specmoe_ids(model, path, bos, special):
    cmd = [SPECMOE, "tokenize", "-m", model, "-f", path] + (["--bos"] if bos else []) + \
          (["--parse-special"] if special else [])
    rc, out, err = run(cmd)
    if rc != 0:
        raise RuntimeError(f"specmoe tokenize failed on {path}: {err[-1000:]}")
    return [int(t) for t in out.split()]


def adds_bos(model, scratch):
    empty = os.path.join(scratch, "empty.txt")
    open(empty, "w").close()
    return llama_ids(model, empty, True) != []


def as_llama_reads(path, scratch):
    """The file as llama.cpp's -f hands it to llama-perplexity: one trailing newline dropped."""
    data = open(path, "rb").read()
    if data.endswith(b"\n"):
        data = data[:-1]
    out = os.path.join(scratch, os.path.basename(path) + ".stripped")
    with open(out, "wb") as f:
        f.write(data)
    return out


# --- greedy agreement ------------------------------------------------------------------------

def greedy_prompts():
    prompts = [
        "The history of the printing press begins",
        "Explain, step by step, why the sky is blue.",
        "def quicksort(arr):\n",
        "\u8bf7\u7528\u4e2d\u6587\u4ecb\u7ecd\u4e00\u4e0b\u5317\u4eac\u7684\u5386\u53f2\u3002",
    ]
    src = os.path.join(ROOT, "../shared/data/prompts/humaneval/HumanEval.jsonl.gz")
    if os.path.exists(src):
        with gzip.open(src, "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i in (2, 11, 23):
                    prompts.append(json.loads(line)["prompt"])
    src = os.path.join(ROOT, "../shared/data/prompts/mt_bench/question.jsonl")
    if os.path.exists(src):
        with open(src, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i in (0, 10, 40):
                    prompts.append(json.loads(line)["turns"][0])
    return prompts


def llama_greedy_text(model, prompt_file, n, threads, kv):
    cmd = [llama_tool("llama-completion"), "-m", model, "-f", prompt_file, "-n", str(n), "--temp", "0",
           "-no-cnv", "--no-display-prompt", "-t", str(threads), "-c", "2048"] + LLAMA_KV_FLAGS[kv]
    p = subprocess.run(["nice", "-n", "10"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"llama-completion failed: {p.stderr.decode('utf-8', 'replace')[-1500:]}")
    out = p.stdout
    # At an end of generation llama-completion prints " [end of text]" and newlines after the
    # text; otherwise it ends with "\n\n" (trailing bytes past specmoe's tokens are never compared).
    tail = out.rstrip(b"\n")
    if tail.endswith(b" [end of text]"):
        return tail[: -len(b" [end of text]")]
    return out[:-2] if out.endswith(b"\n\n") else out


def specmoe_greedy(model, prompt_file, n, threads, kv, kv_flags):
    cmd = [SPECMOE, "generate", "-m", model, "-f", prompt_file, "-n", str(n), "--temp", "0",
           "--chat-template", "none", "--json", "--top-logits", "2", "-t", str(threads), "-c", "2048"]
    if len(kv_flags) > 1:
        cmd += ["--cache-type-k", kv, "--cache-type-v", kv]
    rc, out, err = run(cmd, nice=True)
    if rc != 0:
        raise RuntimeError(f"specmoe generate failed: {err[-1500:]}")
    return json.loads(out)


def entry_bytes(e):
    """The exact bytes of a "piece" field of specmoe's JSON (set_text: base64 when not UTF-8)."""
    return base64.b64decode(e["piece_bytes_b64"]) if "piece_bytes_b64" in e else e["piece"].encode("utf-8")


def greedy_agreement(model, prompts, n, threads, scratch, kv, kv_flags):
    """Per prompt: specmoe's greedy tokens that agree with llama-completion's text before the first
    divergence, and at that divergence specmoe's top-2 logit margin and whether llama.cpp's
    continuation is specmoe's second choice. Both read the prompt with llama.cpp's -f (no trailing
    newline is written, so there is none to drop)."""
    rows = []
    for i, prompt in enumerate(prompts):
        pf = os.path.join(scratch, f"greedy_prompt_{i}.txt")
        with open(pf, "wb") as f:
            f.write(prompt.rstrip("\n").encode("utf-8"))
        ref = llama_greedy_text(model, pf, n, threads, kv)
        ours = specmoe_greedy(model, pf, n, threads, kv, kv_flags)
        steps = ours["top_logits"]
        n_tokens = len(ours["tokens"])  # steps has one more entry when an end-of-generation token ended it
        agreed, pos, margin, ref_second, compared = 0, 0, None, None, 0
        for k, step in enumerate(steps):
            ended = k >= n_tokens  # specmoe chose end of generation here
            if ended and pos >= len(ref):
                break  # both ended at the same place
            compared += 1
            piece = entry_bytes(step[0])
            if not ended and ref[pos: pos + len(piece)] == piece:
                agreed += 1
                pos += len(piece)
                continue
            margin = step[0]["logit"] - step[1]["logit"]
            second = entry_bytes(step[1])
            ref_second = len(second) > 0 and ref[pos: pos + len(second)] == second
            break
        rows.append({"prompt": i, "generated": n_tokens, "agreed": agreed, "margin": margin,
                     "ref_is_second": ref_second, "ref_bytes": len(ref)})
        print(f"  greedy {os.path.basename(model)} prompt {i}: {agreed}/{n_tokens} agree"
              + (f", margin {margin:.3f} ({'2nd' if ref_second else 'not 2nd'})" if margin is not None else ""),
              file=sys.stderr)
    return rows


# --- main ------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ctx", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--texts", help="folder for the texts (made there when missing; default: a temporary one)")
    ap.add_argument("--models", nargs="+", help="real model file names (default: all four that are present)")
    ap.add_argument("--synth", nargs="+", help=f"synth presets (default: {' '.join(SYNTH_PRESETS)})")
    ap.add_argument("--files", nargs="+", default=[],
                    help="more GGUF files, judged as real models (e.g. a real model requantized with llama-quantize)")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--no-synth", action="store_true")
    ap.add_argument("--only-texts", nargs="+", help="a subset of prose code zh long (long: ~16k tokens of "
                    "licence prose, ~7.7k scored at ctx 128, where the sampling spread of the perplexity ratio is "
                    "a third of prose's; not in the default set)")
    ap.add_argument("--quick", action="store_true", help="ctx 128 only, f32 KV only, prose only")
    ap.add_argument("--kv", nargs="+", choices=["f32", "f16"], default=["f32", "f16"],
                    help="the KV-cache types compared (default both; --quick: f32)")
    ap.add_argument("--greedy", action="store_true", help="also measure greedy agreement on the real models")
    ap.add_argument("--greedy-tokens", type=int, default=64)
    ap.add_argument("--llama-spread", action="store_true",
                    help="real models, f32 KV, first text and context: also run llama-perplexity --no-repack "
                         "(the same arithmetic in llama.cpp's other kernels) and report how far llama.cpp moves "
                         "from itself")
    ap.add_argument("--kld", action="store_true",
                    help="also compare the distributions (KL divergence) with llama.cpp's on the first text and context")
    ap.add_argument("--no-perplexity", action="store_true")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-o", "--output", help="write the Markdown table here too")
    ap.add_argument("--json", help="write every figure as JSON here")
    ap.add_argument("--cache", help="reuse results of earlier runs kept in this JSON file")
    args = ap.parse_args()
    if not os.access(SPECMOE, os.X_OK):
        die(f"no {SPECMOE} (build it: cmake --build build --target specmoe, or set SPECMOE)")
    for tool in ("llama-perplexity", "llama-tokenize", "llama-completion"):
        llama_tool(tool)

    scratch = tempfile.mkdtemp(prefix="specmoe-conformance-")
    texts, varied = make_texts(args.texts or os.path.join(scratch, "texts"))
    text_names = args.only_texts or (["prose"] if args.quick else ["prose", "code", "zh"])
    ctxs = [128] if args.quick else args.ctx
    cache = Cache(args.cache)
    spec_kvs = specmoe_kv_flags()
    # (specmoe KV, llama.cpp KV) pairs: like for like, plus specmoe's f32 against llama.cpp's
    # default f16 while specmoe has no f16 cache.
    kv_pairs = [("f32", "f32")] if "f32" in args.kv else []
    if not args.quick and "f16" in args.kv:
        kv_pairs += [("f16", "f16")] if "f16" in spec_kvs else [("f32", "f16")]

    models = []  # (label, path, synthetic)
    if not args.no_real:
        for name in args.models or REAL_MODELS:
            path = os.path.join(MODELS_DIR, name)
            if os.path.exists(path):
                models.append((name.replace(".gguf", ""), path, False))
            else:
                print(f"{name}: not found in {MODELS_DIR}, skipped (scripts/fetch-models.sh)", file=sys.stderr)
    for path in args.files:
        models.append((os.path.basename(path).replace(".gguf", ""), path, False))
    if not args.no_synth:
        for preset in args.synth or SYNTH_PRESETS:
            path = os.path.join(scratch, preset + ".gguf")
            rc, out, err = run([SPECMOE, "synth", "--preset", preset, "-o", path])
            if rc != 0:
                die(f"specmoe synth --preset {preset} failed: {err}")
            models.append(("synth " + preset, path, True))

    spec_key = file_key(SPECMOE)
    llama_key = file_key(os.path.join(LLAMA_BIN, "llama-perplexity"))
    failures = []
    tok_rows, ppl_rows, greedy_rows, kld_table = [], [], {}, []
    for label, path, synthetic in models:
        mkey = sha256_bytes(open(path, "rb").read()) if synthetic else file_key(path)
        bos = adds_bos(path, scratch)
        # Tokenization: each text as perplexity sees it, and the varied text as a chat prompt.
        for tname in text_names + ["varied"]:
            src = varied if tname == "varied" else as_llama_reads(texts[tname], scratch)
            special = tname == "varied"
            ref = llama_ids(path, src, plain=not special)
            ours = specmoe_ids(path, src, bos, special)
            ok = ref == ours
            tok_rows.append((label, tname, len(ref), ok))
            if not ok:
                first = next((i for i, (a, b) in enumerate(zip(ref, ours)) if a != b), min(len(ref), len(ours)))
                failures.append(f"{label} {tname}: tokens differ from llama-tokenize at {first}")
        for tname in ([] if args.no_perplexity else text_names):
            tkey = sha256_bytes(open(texts[tname], "rb").read())
            for ctx in ctxs:
                for skv, lkv in kv_pairs:
                    key_l = f"llama|{llama_key}|{mkey}|{tkey}|{ctx}|{' '.join(LLAMA_KV_FLAGS[lkv]) or 'default'}"
                    key_s = f"specmoe|{spec_key}|{mkey}|{tkey}|{ctx}|{skv}|{len(spec_kvs)}"
                    t0 = time.time()
                    if cache.get(key_l) is None:
                        cache.put(key_l, llama_perplexity(path, texts[tname], ctx, lkv, args.threads))
                    if cache.get(key_s) is None:
                        cache.put(key_s, specmoe_perplexity(path, texts[tname], ctx, skv, args.threads, spec_kvs))
                    spread = None
                    if args.llama_spread and not synthetic and lkv == "f32" and tname == text_names[0] \
                            and ctx == ctxs[0]:
                        key_n = key_l + "|--no-repack"
                        if cache.get(key_n) is None:
                            cache.put(key_n, llama_perplexity(path, texts[tname], ctx, lkv, args.threads, ["--no-repack"]))
                        spread = cache.get(key_n)[0]
                    (lp, lc), (sp, sc) = cache.get(key_l), cache.get(key_s)
                    rel = (sp - lp) / lp
                    like = skv == lkv
                    bound = (BOUND_F16 if lkv == "f16" else BOUND_F32_SYNTH if synthetic else BOUND_F32_REAL)
                    judged = like
                    ok = (abs(rel) <= bound or not judged) and sc == lc
                    ppl_rows.append({"model": label, "text": tname, "ctx": ctx, "kv_specmoe": skv,
                                     "kv_llama": lkv, "specmoe": sp, "llama": lp, "rel": rel,
                                     "chunks_specmoe": sc, "chunks_llama": lc, "bound": bound,
                                     "judged": judged, "ok": ok, "llama_no_repack": spread})
                    if not ok:
                        failures.append(f"{label} {tname} ctx {ctx} KV {skv}/{lkv}: specmoe {sp} ({sc} chunks), "
                                        f"llama.cpp {lp} ({lc} chunks), {rel * 100:+.3f}%")
                    print(f"  {label} {tname} ctx {ctx} KV {skv}/{lkv}: {sp:.4f} vs {lp:.4f} ({rel * 100:+.3f}%) "
                          f"chunks {sc}/{lc} [{time.time() - t0:.0f}s]", file=sys.stderr)
        if args.kld and text_names:
            tname = text_names[0]
            tkey = sha256_bytes(open(texts[tname], "rb").read())
            t0 = time.time()
            row = kld_rows(label, path, texts[tname], ctxs[0], args.threads, scratch, cache, mkey, tkey,
                           spec_key, llama_key)
            row["text"] = tname
            kld_table.append(row)
            print(f"  {label} {tname} ctx {ctxs[0]} KLD specmoe {row['specmoe']['kld_mean']:.6f}, "
                  f"llama.cpp --no-repack {row['llama_no_repack']['kld_mean']:.6f} [{time.time() - t0:.0f}s]",
                  file=sys.stderr)
        if args.greedy and not synthetic:
            greedy_rows[label] = greedy_agreement(path, greedy_prompts(), args.greedy_tokens, args.threads,
                                                  scratch, "f32", spec_kvs)

    lines = []
    if ppl_rows:
        lines += ["| model | text | ctx | KV specmoe / llama.cpp | specmoe ppl | llama.cpp ppl | difference | "
                  "chunks (specmoe / llama.cpp) | bound | llama.cpp --no-repack (vs llama.cpp) |",
                  "|---|---|---:|---|---:|---:|---:|---:|---|---:|"]
        for r in ppl_rows:
            if r["judged"]:
                bound = f"{r['bound'] * 100:g}%" + ("" if r["ok"] else " **FAIL**")
            else:  # specmoe's f32 cache against llama.cpp's f16: not like for like, shown against the bound
                within = abs(r["rel"]) <= r["bound"]
                bound = f"{r['bound'] * 100:g}% {'met' if within else 'missed'} (reported)" + \
                        ("" if r["chunks_specmoe"] == r["chunks_llama"] else " **FAIL** chunks")
            nr = r.get("llama_no_repack")
            spread = f"{nr:.4f} ({(nr - r['llama']) / r['llama'] * 100:+.3f}%)" if nr else ""
            lines.append(f"| {r['model']} | {r['text']} | {r['ctx']} | {r['kv_specmoe']} / {r['kv_llama']} | "
                         f"{r['specmoe']:.4f} | {r['llama']:.4f} | {r['rel'] * 100:+.3f}% | "
                         f"{r['chunks_specmoe']} / {r['chunks_llama']} | {bound} | {spread} |")
        lines.append("")
    if kld_table:
        lines += ["| model | text | ctx | against llama.cpp's log-probabilities (f32 KV) | mean KLD | 99% KLD | "
                  "same top | RMS Δp | PPL / PPL(base) |",
                  "|---|---|---:|---|---:|---:|---:|---:|---:|"]
        for r in kld_table:
            for who, name in (("specmoe", "specmoe"), ("llama_no_repack", "llama.cpp --no-repack"),
                              ("llama_vs_specmoe_base", "llama.cpp against specmoe's file")):
                k = r[who]
                lines.append(f"| {r['model']} | {r['text']} | {r['ctx']} | {name} | {k['kld_mean']:.6f} | "
                             f"{k['kld_p99']:.6f} | {k['same_top']:.2f}% | {k['p_diff_rms']:.3f}% | "
                             f"{k['ppl'] / k['ppl_base'] - 1:+.3%} |")
        lines.append("")
    if tok_rows:
        lines += ["| model | tokenization (tokens; texts as llama-perplexity reads them, varied as a chat prompt) |",
                  "|---|---|"]
        by_model = {}
        for label, tname, n, ok in tok_rows:
            by_model.setdefault(label, []).append(f"{tname} {n} {'identical' if ok else '**DIFFERENT**'}")
        for label, cells in by_model.items():
            lines.append(f"| {label} | {', '.join(cells)} |")
        lines.append("")
    if greedy_rows:
        lines += ["| model | prompts | tokens agreeing before the first divergence | agreement | "
                  "specmoe top-2 logit margin at divergences (llama.cpp's token is specmoe's 2nd) |",
                  "|---|---:|---:|---:|---|"]
        for label, rows in greedy_rows.items():
            agreed = sum(r["agreed"] for r in rows)
            total = sum(r["generated"] for r in rows)
            margins = ", ".join(f"{r['margin']:.3f}{'' if r['ref_is_second'] else ' (not 2nd)'}"
                                for r in rows if r["margin"] is not None) or "none"
            lines.append(f"| {label} | {len(rows)} | {agreed} / {total} | {agreed / max(total, 1) * 100:.1f}% | "
                         f"{margins} |")
        lines.append("")
    table = "\n".join(lines)
    print(table)
    if args.output:
        with open(args.output, "w") as f:
            f.write(table + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"perplexity": ppl_rows, "tokenization": tok_rows, "greedy": greedy_rows, "kld": kld_table}, f, indent=1)
    for msg in failures:
        print(f"FAIL {msg}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
