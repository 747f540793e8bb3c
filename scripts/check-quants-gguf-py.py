#!/usr/bin/env python3
"""Checks kernels/cpu's dequantization of Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL and IQ4_XS (and the older
quantized types) bit for bit against the numpy dequantizers of the `gguf` Python package (gguf-py,
maintained in llama.cpp's repository), on random blocks, and checks that blocks written by
kernels/cpu's quantizers decode identically in gguf-py. Not part of ctest (the tests carry their
own plain reference decoder, tests/quant_reference.h); run it once after changing a format:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install gguf numpy
    /tmp/venv/bin/python scripts/check-quants-gguf-py.py [BUILD_DIR]

Zeros of the other sign are counted apart (Q4_0 writes q * d - 8 * d, which gives +0 where
ggml's (q - 8) * d gives -0 for a negative d; they compare equal). BUILD_DIR (default build) must
hold a built specmoe_kernels; scripts/quant_dump.cpp is compiled
against it into BUILD_DIR/quant_dump.
"""
import os
import subprocess
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))

# type: (block elements, block bytes, offsets of the fp16 fields)
TYPES = {
    "Q5_0": (Q.Q5_0, 32, 22, [0]),
    "Q5_1": (Q.Q5_1, 32, 24, [0, 2]),
    "Q2_K": (Q.Q2_K, 256, 84, [80, 82]),
    "Q3_K": (Q.Q3_K, 256, 110, [108]),
    "IQ4_NL": (Q.IQ4_NL, 32, 18, [0]),
    "IQ4_XS": (Q.IQ4_XS, 256, 136, [0]),
    "Q4_0": (Q.Q4_0, 32, 18, [0]),
    "Q4_1": (Q.Q4_1, 32, 20, [0, 2]),
    "Q8_0": (Q.Q8_0, 32, 34, [0]),
    "Q4_K": (Q.Q4_K, 256, 144, [0, 2]),
    "Q5_K": (Q.Q5_K, 256, 176, [0, 2]),
    "Q6_K": (Q.Q6_K, 256, 210, [208]),
}


def build_tool():
    exe = os.path.join(BUILD, "quant_dump")
    libs = [os.path.join(BUILD, "kernels", "libspecmoe_kernels.a"), os.path.join(BUILD, "base", "libspecmoe_base.a")]
    subprocess.run(["c++", "-std=c++20", "-O2", "-I", ROOT, os.path.join(ROOT, "scripts", "quant_dump.cpp"), *libs,
                    "-lfmt", "-pthread", "-o", exe], check=True)
    return exe


def run(exe, mode, name, n, data):
    return subprocess.run([exe, mode, name, str(n)], input=data, capture_output=True, check=True).stdout


def random_blocks(rng, nblocks, nbytes, half_offsets, full_range):
    b = rng.integers(0, 256, size=(nblocks, nbytes), dtype=np.uint8)
    for off in half_offsets:
        if full_range:
            # Any finite half: every exponent (subnormals included) and sign.
            h = rng.integers(0, 0x10000, size=nblocks, dtype=np.uint32).astype(np.uint16)
            h = np.where((h & 0x7C00) == 0x7C00, h & 0x83FF, h).astype(np.uint16)
        else:
            h = (rng.uniform(-1, 1, size=nblocks) * 0.05).astype(np.float16).view(np.uint16)
        b[:, off] = (h & 0xFF).astype(np.uint8)
        b[:, off + 1] = (h >> 8).astype(np.uint8)
    return b


def main():
    exe = build_tool()
    rng = np.random.default_rng(20261001)
    failures = 0
    for name, (qt, be, bb, halves) in TYPES.items():
        nblocks = 4096
        n = nblocks * be
        results = []
        for full_range in (False, True):
            blocks = random_blocks(rng, nblocks, bb, halves, full_range)
            ours = np.frombuffer(run(exe, "dequant", name, n, blocks.tobytes()), dtype=np.float32)
            ref = quants.dequantize(blocks.reshape(-1), qt).reshape(-1).astype(np.float32)
            bits = ours.view(np.uint32) != ref.view(np.uint32)
            signed_zero = int(np.count_nonzero(bits & (ours == 0) & (ref == 0)))
            results.append((int(np.count_nonzero(bits)) - signed_zero, signed_zero))
        # Blocks from our quantizer (rows with varied scales) decode the same in gguf-py.
        x = (rng.standard_normal(n) * np.repeat(10.0 ** rng.uniform(-2, 1, n // 32), 32)).astype(np.float32)
        blocks = np.frombuffer(run(exe, "quant", name, n, x.tobytes()), dtype=np.uint8)
        ours = np.frombuffer(run(exe, "dequant", name, n, blocks.tobytes()), dtype=np.float32)
        ref = quants.dequantize(blocks, qt).reshape(-1).astype(np.float32)
        qdiff = int(np.count_nonzero((ours.view(np.uint32) != ref.view(np.uint32)) & ~((ours == 0) & (ref == 0))))
        nmse = float(np.sum((ours.astype(np.float64) - x) ** 2) / np.sum(x.astype(np.float64) ** 2))
        ok = all(r[0] == 0 for r in results) and qdiff == 0
        failures += not ok
        zeros = sum(r[1] for r in results)
        note = f" (+{zeros} zeros of the other sign)" if zeros else ""
        print(f"{name:7s} {n} elements x 2 random-block sets: {results[0][0]} / {results[1][0]} bit differences{note} "
              f"(sane / any finite fp16 scales); own quantizer's blocks: {qdiff} differences, nMSE {nmse:.3g}  "
              f"{'OK' if ok else 'FAIL'}")
    print("all match bit for bit (up to the sign of zero where noted)" if failures == 0 else f"{failures} type(s) differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
