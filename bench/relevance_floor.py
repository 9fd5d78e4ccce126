#!/usr/bin/env python3
"""How similar are a question and the turns that answer it, against any other turn?

The measurement behind the default similarity floors of recall (docs/recall.md,
"Relevance and thresholds"). For each conversation of a shared evaluation set
(one user per conversation, every turn an episode, embedded by the file's
embedder) and each question with evidence turns (LoCoMo category 5, the
adversarial one, left out as in bm25_baseline.py), it takes the similarity of
the question to every turn (a vector recall with k = all turns and no floor):

  relevant pairs   the question and each of its evidence turns;
  other pairs      the question and every other turn of its conversation;
  unrelated pairs  the question and every turn of another conversation (the
                   next one in the file), where nothing should match.

and prints the distributions (percentiles) and, for each candidate floor, the
share of each kind of pair at or above it, the turn Recall@10 of vector and
hybrid recall with that floor (fill off), the hybrid hits per question, and
how many vector hits (k = 10) a question asked of the wrong conversation gets.

usage: python3 bench/relevance_floor.py [--data DIR] [--set locomo|realtalk]
                                        [--options "key=value&..."] [--floors 0.1,0.2]
                                        [--embedder MODULE_OR_FILE.py:FUNCTION]
--embedder measures your own model: FUNCTION(list[str]) -> vectors, registered with
Memory(embedder=...) (docs/recall.md, "Your own embedder"), to choose its min_similarity.
Needs the library (make build) and AGENTMEM_DATA_DIR or --data (default
/work/shared/data or ../shared/data).
"""

import argparse
import collections
import importlib
import importlib.util
import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import agentmem  # noqa: E402


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, int(round(p / 100 * (len(sorted_values) - 1)))))
    return sorted_values[i]


def data_dir(arg):
    for d in (arg, os.environ.get("AGENTMEM_DATA_DIR"), "/work/shared/data",
              str(Path(__file__).resolve().parents[2] / "shared" / "data")):
        if d and Path(d).is_dir():
            return Path(d)
    sys.exit("evaluation data not found: set AGENTMEM_DATA_DIR or pass --data")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data")
    ap.add_argument("--set", default="locomo")
    ap.add_argument("--options", default="", help="open options, e.g. embedder=NAME")
    ap.add_argument("--floors", default="0,0.05,0.1,0.15,0.2,0.25,0.3,0.35,0.4,0.5,0.6")
    ap.add_argument("--embedder", help="an embedding function, module:function or file.py:function")
    a = ap.parse_args()
    root = data_dir(a.data) / a.set
    options = dict(kv.split("=", 1) for kv in a.options.split("&") if kv)
    floors = [float(x) for x in a.floors.split(",")]

    turns = collections.defaultdict(list)
    for line in open(root / "episodes.jsonl"):
        e = json.loads(line)
        turns[e["conv_id"]].append(e)
    questions = [q for q in map(json.loads, open(root / "questions.jsonl"))
                 if q.get("category") != 5 and q["evidence_turn_ids"]]
    convs = list(turns)

    if a.embedder:
        where, _, name = a.embedder.rpartition(":")
        if where.endswith(".py"):
            spec = importlib.util.spec_from_file_location(Path(where).stem, where)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        options["embedder"] = getattr(module, name)
    mem = agentmem.Memory(":memory:", **options)
    ids = {}  # (conv, turn_id) -> episode id
    for conv in convs:
        with mem._handle.lock, mem.connection:
            for t in turns[conv]:
                ids[(conv, t["turn_id"])] = mem.remember_sync(conv, t["text"],
                                                              session_id=str(t["session"]))
    turn_of = {v: k[1] for k, v in ids.items()}
    space = json.loads(mem.export_sync(convs[0]).split("\n", 1)[0])
    print(f"# {a.set}: {len(questions)} questions, {sum(map(len, turns.values()))} turns, "
          f"embedder {space['embedder']} ({space['dim']}-d, {space['metric']})\n")

    relevant, other, unrelated = [], [], []
    per_question = []  # (question, evidence set, {turn_id: sim})
    for q in questions:
        conv = q["conv_id"]
        n = len(turns[conv])
        hits = mem.recall_scored_sync(conv, q["question"], k=n, mode="vector",
                                      min_similarity=-math.inf)
        sims = {turn_of[h.id]: h.vector_score for h in hits}
        ev = set(q["evidence_turn_ids"]) & set(sims)
        if not ev:
            continue
        for tid, s in sims.items():
            (relevant if tid in ev else other).append(s)
        wrong = convs[(convs.index(conv) + 1) % len(convs)]
        for h in mem.recall_scored_sync(wrong, q["question"], k=len(turns[wrong]), mode="vector",
                                        min_similarity=-math.inf):
            unrelated.append(h.vector_score)
        per_question.append((q, ev, sims))
    for v in (relevant, other, unrelated):
        v.sort()

    print("| pairs | n | p1 | p10 | p25 | p50 | p75 | p90 | p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, v in (("relevant (question, evidence turn)", relevant),
                    ("other turns of the conversation", other),
                    ("turns of another conversation", unrelated)):
        cells = " | ".join(f"{percentile(v, p):.3f}" for p in (1, 10, 25, 50, 75, 90, 99))
        print(f"| {name} | {len(v)} | {cells} |")

    def share_at_least(v, f):
        import bisect
        return 1 - bisect.bisect_left(v, f) / len(v) if v else float("nan")

    print("\n| floor | relevant >= | other >= | unrelated >= | vector R@10 | hybrid R@10 "
          "| hybrid hits / question | vector hits, question asked of another conversation |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = [("no floor, fill", None)] + [(f"{f:.2f}", f) for f in floors]
    for label, f in rows:
        vec_r = hyb_r = hyb_n = wrong_n = 0.0
        for q, ev, sims in per_question:
            conv = q["conv_id"]
            kw = {"fill": True} if f is None else {"min_similarity": f}
            vec = mem.recall_scored_sync(conv, q["question"], k=10, mode="vector", **kw)
            hyb = mem.recall_scored_sync(conv, q["question"], k=10, **kw)
            vec_r += len(ev & {turn_of[h.id] for h in vec}) / len(ev)
            hyb_r += len(ev & {turn_of[h.id] for h in hyb}) / len(ev)
            hyb_n += len(hyb)
            wrong = convs[(convs.index(conv) + 1) % len(convs)]
            wrong_n += len(mem.recall_scored_sync(wrong, q["question"], k=10, mode="vector", **kw))
        n = len(per_question)
        shares = ("-", "-", "-") if f is None else tuple(
            f"{share_at_least(v, f):.3f}" for v in (relevant, other, unrelated))
        print(f"| {label} | {' | '.join(shares)} | {vec_r / n:.3f} | {hyb_r / n:.3f} "
              f"| {hyb_n / n:.2f} | {wrong_n / n:.2f} |")
    mem.close()


if __name__ == "__main__":
    main()
