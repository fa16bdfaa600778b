#!/bin/bash
# aarch64_test.sh — attnviz on Arm, run here under qemu (make test-aarch64).
# Cross-builds attnviz, tools/fwd_dump and the suites that test the products
# (test_gemm, test_kernels, test_model) for aarch64 into build-aarch64 with
# Debian's gcc-aarch64-linux-gnu and its arm64 libraries (multiarch), then
# under qemu-aarch64:
#   - the suites, one PASS/FAIL line per Check test; test_gemm must have run the
#     NEON kernel and the scalar chain, test_model must have compared NEON's
#     whole pass with the scalar chain's on every fixture;
#   - the same bits on both CPUs: fwd_dump's raw float32 attention and q/k on
#     every fixture, and attnviz's JSON (9 digits, --qk --hidden) on every
#     fixture the CLI can tokenize, against this machine's build, byte for
#     byte: every product, attention's q.k and probs.v included, is gemm.h's
#     chains, and the elementwise steps are plain IEEE operations in a fixed
#     order, so the two CPUs must agree in every bit (a difference fails, with
#     its size).
# Prints PASS/FAIL/SKIP lines (tests/e2e/lib.sh); tests/run_all.sh counts them.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
# counted too, for the closing line of make test-aarch64 and its exit code
np=0 nf=0 ns=0
pass() { echo "PASS $1"; np=$((np + 1)); }
fail() { echo "FAIL $1: $2"; nf=$((nf + 1)); }
skip() { echo "SKIP $1: $2"; ns=$((ns + 1)); }
finish() {
    echo "aarch64: $np passed, $nf failed, $ns skipped"
    [ "$nf" -eq 0 ]
    exit
}

AB=${AARCH64_B:-build-aarch64} # the aarch64 build folder
XB=${B:-build}                 # this machine's, for the reference outputs
TRIPLET=aarch64-linux-gnu
QEMU=${QEMU_AARCH64:-qemu-aarch64}
LIBDIR=/usr/lib/$TRIPLET
SUITES=(test_gemm test_kernels test_model)

if [ "$(uname -m)" = aarch64 ]; then
    skip "aarch64 build and qemu runs" "this machine is aarch64: make test runs the NEON kernel natively"
    finish
fi
missing=""
command -v $TRIPLET-gcc >/dev/null 2>&1 || missing="$missing gcc-aarch64-linux-gnu"
command -v "$QEMU" >/dev/null 2>&1 || missing="$missing qemu-user"
for pc in libcjson libutf8proc openblas zlib libmicrohttpd check libpng libjpeg; do
    [ -e "$LIBDIR/pkgconfig/$pc.pc" ] || missing="$missing $pc(arm64)"
done
[ -e "$LIBDIR/libonig.so.5" ] || [ -e "$LIBDIR/pkgconfig/oniguruma.pc" ] || missing="$missing libonig5:arm64"
if [ -n "$missing" ]; then
    skip "aarch64 build and qemu runs" "missing:$missing (tools/deps.sh aarch64 installs them)"
    finish
fi

# pkg-config answers for arm64: Debian's multiarch .pc files only.
mkdir -p "$AB/pkgconfig"
if [ ! -e "$LIBDIR/pkgconfig/oniguruma.pc" ]; then
    # Debian 12's libonig-dev is not Multi-Arch: same (its arm64 package would
    # replace the amd64 one): link the arm64 runtime (libonig5:arm64), with the
    # headers already installed, which are the same on every architecture.
    cat >"$AB/pkgconfig/oniguruma.pc.new" <<EOF
libdir=$LIBDIR
Name: oniguruma
Description: Oniguruma, arm64 runtime (libonig5:arm64) with the installed headers
Version: $(dpkg-query -W -f='${Version}' libonig5:arm64 2>/dev/null | sed 's/-.*//')
Libs: -L\${libdir} -l:libonig.so.5
Cflags:
EOF
    # rewritten only when it changes, so a warm build stays warm
    cmp -s "$AB/pkgconfig/oniguruma.pc.new" "$AB/pkgconfig/oniguruma.pc" ||
        mv "$AB/pkgconfig/oniguruma.pc.new" "$AB/pkgconfig/oniguruma.pc"
    rm -f "$AB/pkgconfig/oniguruma.pc.new"
fi

jobs=$(nproc 2>/dev/null || echo 2)
t0=$(date +%s)
if PKG_CONFIG_LIBDIR="$LIBDIR/pkgconfig:/usr/share/pkgconfig:$PWD/$AB/pkgconfig" PKG_CONFIG_PATH= \
    make --no-print-directory -j"$jobs" B="$AB" BIN="$AB/attnviz" CC=$TRIPLET-gcc HOSTCC="${HOSTCC:-cc}" \
    "$AB/attnviz" "$AB/fwd_dump" "${SUITES[@]/#/$AB/tests/}" >"$T/build.log" 2>&1; then
    pass "aarch64: cross-build of attnviz, fwd_dump and ${SUITES[*]} into $AB ($(($(date +%s) - t0)) s)"
else
    fail "aarch64: cross-build" "$(tail -n 30 "$T/build.log")"
    finish
fi
if make --no-print-directory -j"$jobs" B="$XB" "$XB/fwd_dump" attnviz >"$T/build-x.log" 2>&1; then
    pass "aarch64: this machine's attnviz and fwd_dump for the reference outputs"
else
    fail "aarch64: this machine's build" "$(tail -n 30 "$T/build-x.log")"
    finish
fi

run() { "$QEMU" "$@"; } # the dynamic loader and libraries come from Debian's arm64 packages

out=$(run "$AB/attnviz" --version 2>&1)
if grep -qE '\(kernel neon; built with neon\|scalar; element-wise loops baseline\)$' <<<"$out"; then
    pass "aarch64: attnviz --version under qemu: $out"
else
    fail "aarch64: attnviz --version under qemu" "$out"
fi

# ---- the suites, one line per Check test (Check's TAP log)
for s in "${SUITES[@]}"; do
    echo "== $AB/tests/$s (qemu-aarch64)"
    rm -f "$T/$s.tap"
    # qemu is several times slower than the CPU the suites' timeouts are set for
    CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10} CK_TAP_LOG_FILE_NAME="$T/$s.tap" \
        run "$AB/tests/$s" >"$T/$s.log" 2>&1
    rc=$?
    cat "$T/$s.log"
    if ! grep -qE '^(not )?ok ' "$T/$s.tap" 2>/dev/null; then
        fail "aarch64 $s" "no Check results (exit $rc)"
        continue
    fi
    while read -r line; do
        num=$(sed -E 's/^(not )?ok ([0-9]+) .*/\2/' <<<"$line")
        name=$(sed -E 's/^(not )?ok [0-9]+ - [^:]*:[^:]*:([^:]*):.*/\2/' <<<"$line")
        if [ "${line#not }" != "$line" ]; then
            fail "aarch64 $s #$num $name" "${line#*: }"
        elif grep -q "^SKIP ${name}_fn:" "$T/$s.log"; then
            : # counted by its own SKIP line
        else
            pass "aarch64 $s #$num $name"
        fi
    done < <(grep -E '^(not )?ok ' "$T/$s.tap")
done
fn=every_kernel_gives_the_bits_of_the_fmaf_chain_fn
if grep -q "^INFO $fn: neon kernel" "$T/test_gemm.log" && grep -q "^INFO $fn: scalar kernel" "$T/test_gemm.log"; then
    pass "aarch64 test_gemm ran the neon kernel and the scalar chain"
else
    fail "aarch64 test_gemm ran the neon kernel and the scalar chain" "$(grep '^INFO' "$T/test_gemm.log")"
fi
fixtures=$(grep -o '"tests/data/small-[a-z0-9-]*"' <(sed -n '/FIXTURES\[\] = {/,/};/p' tests/unit/test_model.c) | wc -l)
fn=every_kernel_gives_the_whole_pass_of_the_scalar_chain_fn
compared=$(grep -c "^INFO $fn: .*equal to scalar bit for bit: neon\$" "$T/test_model.log")
if [ "$fixtures" -gt 0 ] && [ "$compared" -eq $((2 * fixtures)) ]; then
    pass "aarch64 test_model compared neon's whole pass with the scalar chain's: $fixtures fixtures x 2 sizes, equal bit for bit"
else
    fail "aarch64 test_model compared neon's whole pass with the scalar chain's" "$compared of $((2 * fixtures)) fixture runs"
fi

# ---- the same bits on both CPUs
# compare KIND A B: max |a - b| per part, "identical" when no number differs
compare() {
    python3 - "$@" <<'EOF'
import array, json, sys
kind, a, b = sys.argv[1:4]
worst = {}
if kind == "raw":  # float32 files
    x, y = array.array("f"), array.array("f")
    x.frombytes(open(a, "rb").read()), y.frombytes(open(b, "rb").read())
    if len(x) != len(y):
        sys.exit(f"{len(x)} floats vs {len(y)}")
    worst[sys.argv[4]] = max((abs(p - q) for p, q in zip(x, y) if p != q), default=0.0)
else:  # JSON: numbers may differ, nothing else
    def walk(p, q, key):
        if isinstance(p, dict) and isinstance(q, dict) and p.keys() == q.keys():
            for k in p:
                walk(p[k], q[k], key or k)
        elif isinstance(p, list) and isinstance(q, list) and len(p) == len(q):
            for u, v in zip(p, q):
                walk(u, v, key)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (p, q)):
            worst[key] = max(worst.get(key, 0.0), abs(p - q))
        elif p != q:
            sys.exit(f"{key}: {json.dumps(p)[:60]} vs {json.dumps(q)[:60]}")
    walk(json.load(open(a)), json.load(open(b)), "")
print(" ".join(f"{k} {v:.2g}" for k, v in sorted(worst.items()) if v > 0))
EOF
}

report() { # NAME IDENTICAL(0/1) DIFFSUMMARY
    local name=$1 same=$2 diffs=$3
    if [ "$same" -eq 1 ]; then
        pass "$name: byte-identical to this machine's build"
    else
        fail "$name" "differs from this machine's build (max |diff| $diffs): the kernels must agree bit for bit"
    fi
}

# fwd_dump: the raw float32 capture on every fixture, a few-token pass and a tiled one
# whether a fixture is an encoder-decoder (BART, Marian, T5): fwd_dump runs one stack
# of self-attention, so those are compared through attnviz's JSON below
encdec() { python3 -c "import json, sys; sys.exit(0 if json.load(open('$1/config.json')).get('model_type') in ('bart', 'marian', 't5', 'mt5') else 1)"; }
# whether a fixture is a vision encoder or a vision-language model: it reads an image,
# which fwd_dump does not take, so those are compared through attnviz's JSON below
vision() { python3 -c "import json, sys; sys.exit(0 if json.load(open('$1/config.json')).get('model_type') in ('vit', 'deit', 'dinov2', 'dinov2_with_registers', 'clip', 'siglip', 'llava', 'gemma3') else 1)"; }
picture=examples/images/cat-on-grey.png
for d in tests/data/small-*/; do
    d=${d%/}
    f=$(basename "$d")
    encdec "$d" && continue
    vision "$d" && continue
    for n in 7 61; do
        ids=$(python3 -c "import json; v = min(json.load(open('$d/config.json')).get('vocab_size', 40), 40)
print(*[(3 + 7 * i) % v for i in range($n)])")
        # shellcheck disable=SC2086 # ids: one argument each
        if ! "$XB/fwd_dump" "$d" "$T/x-$f-$n" $ids >"$T/x.json" 2>"$T/err"; then
            fail "aarch64 fwd_dump $f $n tokens" "this machine's: $(cat "$T/err")"
            continue
        fi
        # shellcheck disable=SC2086
        if ! run "$AB/fwd_dump" "$d" "$T/a-$f-$n" $ids >"$T/a.json" 2>"$T/err"; then
            fail "aarch64 fwd_dump $f $n tokens" "under qemu: $(cat "$T/err")"
            continue
        fi
        same=1 diffs=""
        for part in attn q k; do
            cmp -s "$T/x-$f-$n.$part" "$T/a-$f-$n.$part" && continue
            same=0
            diffs="$diffs $(compare raw "$T/x-$f-$n.$part" "$T/a-$f-$n.$part" "$part" 2>&1)"
        done
        report "aarch64 fwd_dump $f, $n tokens (attention, q, k as float32)" $same "${diffs# }"
    done
done

# attnviz's JSON on every fixture the CLI can tokenize (a short and a long text)
long="time flies like an arrow and fruit flies like a banana while the cat sat on the mat and the dog ran in the park"
for d in tests/data/small-*/; do
    d=${d%/}
    f=$(basename "$d")
    args=(--model "$d" --qk --hidden --precision 9 --quiet "time flies like an arrow" "$long")
    # an encoder-decoder: the source and the decoder's text; its three stacks (no --qk, --hidden)
    encdec "$d" && args=(--model "$d" --precision 9 --quiet "time flies like an arrow" --decoder-text "$long")
    # a vision model: the committed picture (and, for a vision-language model, a text that places it)
    if vision "$d"; then
        args=(--model "$d" --precision 9 --quiet --image "$picture")
        [ "$(python3 -c "import json; print(json.load(open('$d/config.json')).get('model_type'))")" = llava ] &&
            args+=("USER: <image> What is in the picture? ASSISTANT:")
    fi
    if ! ./attnviz "${args[@]}" --json "$T/x-$f.json" >/dev/null 2>"$T/err"; then
        grep -q 'no tokenizer' "$T/err" && continue # a fixture for the engine only: fwd_dump covered it
        fail "aarch64 attnviz JSON $f" "this machine's: $(cat "$T/err")"
        continue
    fi
    if ! run "$AB/attnviz" "${args[@]}" --json "$T/a-$f.json" >/dev/null 2>"$T/err"; then
        fail "aarch64 attnviz JSON $f" "under qemu: $(cat "$T/err")"
        continue
    fi
    if cmp -s "$T/x-$f.json" "$T/a-$f.json"; then
        report "aarch64 attnviz --json $f" 1 ""
    elif diffs=$(compare json "$T/x-$f.json" "$T/a-$f.json" 2>&1); then
        report "aarch64 attnviz --json $f" 0 "$diffs"
    else
        fail "aarch64 attnviz --json $f" "$diffs"
    fi
done
finish
