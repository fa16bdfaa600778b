#!/bin/bash
# libattnviz as a user gets it: `make install` into a temporary DESTDIR (library, soname links,
# header, attnviz.pc), examples/top_heads.c built against that copy through pkg-config and run,
# its output checked against the CLI's JSON of the same input (computed here, not stored); the
# exported symbols against abi/libattnviz.symbols and the header; the header alone in C and C++;
# `make uninstall`. Needs ./attnviz, build/libattnviz.so and the demo model (make).
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
BIN=./attnviz
PY=python3
VERSION=$(sed -n 's/^#define ATTNVIZ_VERSION "\(.*\)"/\1/p' src/base/version.h)
ABI=$(sed -n 's/^#define ATTNVIZ_ABI_VERSION \([0-9]*\)/\1/p' include/attnviz.h)
REAL=libattnviz.so.$ABI.${VERSION#*.}
D=$T/dest
LIB=$D/usr/local/lib
for f in "$BIN" build/libattnviz.so weights/demo/model.safetensors; do
    [ -e "$f" ] || { fail lib_prerequisites "$f is not built (make)"; exit 0; }
done

# --- install ---
if ! make --no-print-directory -s install DESTDIR="$D" PREFIX=/usr/local >"$T/install.log" 2>&1; then
    fail lib_install "make install: $(tail -n 5 "$T/install.log")"
    exit 0
fi
if [ -f "$LIB/$REAL" ] && [ "$(readlink "$LIB/libattnviz.so.$ABI")" = "$REAL" ] &&
    [ "$(readlink "$LIB/libattnviz.so")" = "libattnviz.so.$ABI" ] && [ -f "$D/usr/local/include/attnviz.h" ] &&
    [ -f "$LIB/pkgconfig/attnviz.pc" ] && [ -f "$D/usr/local/share/man/man1/attnviz.1" ] &&
    [ -s "$D/usr/local/share/bash-completion/completions/attnviz" ] && [ -s "$D/usr/local/share/zsh/site-functions/_attnviz" ] &&
    [ -s "$D/usr/local/share/fish/vendor_completions.d/attnviz.fish" ]; then
    pass lib_install_files
else
    fail lib_install_files "$(cd "$D" && find . | sort | tr '\n' ' ')"
fi
soname=$(readelf -d "$LIB/$REAL" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libattnviz.so.$ABI" ] && pass lib_soname || fail lib_soname "SONAME is '$soname', want libattnviz.so.$ABI"
# the server's library stays the CLI's: a library user does not need libmicrohttpd
if readelf -d "$LIB/$REAL" | grep -q 'NEEDED.*microhttpd'; then fail lib_needed "libattnviz needs libmicrohttpd"
else pass lib_needed_no_microhttpd; fi

export PKG_CONFIG_PATH=$LIB/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D
v=$(pkg-config --modversion attnviz 2>&1)
[ "$v" = "$VERSION" ] && pass lib_pkgconfig_version || fail lib_pkgconfig_version "pkg-config says '$v', want $VERSION"

# --- the example, built as a user would ---
if cc -std=c99 -Wall -Wextra -Werror -pedantic -o "$T/top_heads" examples/top_heads.c \
    $(pkg-config --cflags --libs attnviz) >"$T/cc.log" 2>&1; then
    pass lib_example_builds_with_pkgconfig
else
    fail lib_example_builds_with_pkgconfig "$(head -n 5 "$T/cc.log")"
    exit 0
fi
needed=$(readelf -d "$T/top_heads" | sed -n 's/.*(NEEDED).*\[\(libattnviz[^]]*\)\]/\1/p')
[ "$needed" = "libattnviz.so.$ABI" ] && pass lib_example_links_soname || fail lib_example_links_soname "NEEDED '$needed'"
# the installed copy, not build/'s: nothing else on the search path
resolved=$(LD_LIBRARY_PATH=$LIB ldd "$T/top_heads" | awk '/libattnviz/ {print $3}')
[ "$resolved" = "$LIB/libattnviz.so.$ABI" ] && pass lib_example_loads_installed_copy ||
    fail lib_example_loads_installed_copy "ldd resolves libattnviz to '$resolved'"

# What the example should print, from the CLI's JSON (9 digits: float32 exactly): per kept
# layer and head, the column with the largest sum of weights over the query rows, summed in
# row order in double as the example does, first maximum on ties.
expect() { # JSON -> expected lines
    $PY - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
toks, att = d["tokens"], d["attention"]
n = len(toks)
layers = d.get("layers") or list(range(len(att)))
heads = d.get("heads") or list(range(len(att[0])))
print(f"{d['model']['name'] if isinstance(d.get('model'), dict) else d['model']}: {n} tokens, {len(att)} layers x {len(att[0])} heads")
for li, L in enumerate(att):
    for hi, A in enumerate(L):
        best, best_w = 0, -1.0
        for j in range(n):
            w = 0.0
            for i in range(n):
                w += float(A[i][j])
            if w > best_w:
                best, best_w = j, w
        print(f"layer {layers[li]} head {heads[hi]}: {toks[best]} {best_w / n:.4f}")
PY
}
compare() { # NAME MODEL TEXT LAYERS(CLI form, or "") EXAMPLE_LAYERS...
    local name=$1 model=$2 text=$3 cli_layers=$4
    shift 4
    if ! "$BIN" --model "$model" --quiet --precision 9 --json "$T/$name.json" ${cli_layers:+--layers "$cli_layers"} "$text" \
        2>"$T/cli.err"; then
        fail "$name" "the CLI failed: $(cat "$T/cli.err")"
        return
    fi
    if ! expect "$T/$name.json" >"$T/$name.want" 2>"$T/py.err"; then fail "$name" "$(tail -n 3 "$T/py.err")"; return; fi
    if ! LD_LIBRARY_PATH=$LIB "$T/top_heads" "$model" "$text" "$@" >"$T/$name.got" 2>"$T/ex.err"; then
        fail "$name" "the example failed: $(cat "$T/ex.err")"
        return
    fi
    if cmp -s "$T/$name.want" "$T/$name.got"; then
        pass "$name ($(($(wc -l <"$T/$name.got") - 1)) heads)"
    else
        fail "$name" "differs from the CLI's JSON: $(diff "$T/$name.want" "$T/$name.got" | head -n 6 | tr '\n' '|')"
    fi
}
compare lib_example_demo_equals_cli weights/demo "time flies like an arrow" ""
"$BIN" --model weights/demo --quiet --precision 9 --layers 1 --json "$T/lib_example_layer_selection_src.json" \
    "time flies like an arrow"
compare lib_example_layer_selection_equals_cli weights/demo "the cat sat on the mat" "1" 1
compare lib_example_gpt2_fixture_equals_cli tests/data/small-gpt2 "Hello world, hello again" ""
compare lib_example_llama_fixture_equals_cli tests/data/small-llama "The cat sat on the mat" "0"  0
if g=$(tools/pymodel.sh smollm2 2>/dev/null) && [ -f "$g/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    compare lib_example_gguf_equals_cli "$g/SmolLM2-135M-Instruct.Q4_1.gguf" "The cat sat on the mat. The cat sat" "0,29" 29 0
else
    skip lib_example_gguf_equals_cli "no SmolLM2 GGUF from PyPI (tools/pymodel.sh smollm2)"
fi
sed -n 1,4p "$T/lib_example_demo_equals_cli.got" 2>/dev/null | sed 's/^/  example: /'

# --- the generation example against the CLI's --generate --json: the same ids, each token's
# probability (its logprob's exp) and its attention rows in every layer and head ---
if cc -std=c99 -Wall -Wextra -Werror -pedantic -o "$T/generate" examples/generate.c \
    $(pkg-config --cflags --libs attnviz) >"$T/cc.log" 2>&1; then
    pass lib_generate_example_builds_with_pkgconfig
else
    fail lib_generate_example_builds_with_pkgconfig "$(head -n 5 "$T/cc.log")"
fi
gen_compare() { # NAME MODEL N PROMPT
    local name=$1 model=$2 n=$3 prompt=$4
    if ! "$BIN" --model "$model" --quiet --precision 9 --generate "$n" --json "$T/$name.json" "$prompt" 2>"$T/cli.err"; then
        fail "$name" "the CLI failed: $(cat "$T/cli.err")"
        return
    fi
    if ! LD_LIBRARY_PATH=$LIB "$T/generate" "$model" "$n" "$prompt" rows >"$T/$name.got" 2>"$T/ex.err"; then
        fail "$name" "the example failed: $(cat "$T/ex.err")"
        return
    fi
    if out=$($PY - "$T/$name.json" "$T/$name.got" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
g = d["generation"]
steps, att = g["steps"], d["attention"]
L, H = len(att), len(att[0])
lines = [l.split(" ") for l in open(sys.argv[2]).read().splitlines()]
assert len(lines) == len(steps), f"{len(lines)} tokens, the CLI {len(steps)}"
worst_p = worst_a = 0.0
for s, l in zip(steps, lines):
    idx, pos, tid, lp = int(l[0]), int(l[1]), int(l[2]), float(l[3])
    assert (pos, tid) == (s["position"], s["id"]), f"token {idx}: position {pos} id {tid}, the CLI {s['position']} {s['id']}"
    worst_p = max(worst_p, abs(math.exp(lp) - s["prob"]))
    rows = [float(x) for x in l[-L * H * (pos + 1):]]
    for b in range(L * H):
        ref = att[b // H][b % H][pos][:pos + 1]
        worst_a = max(worst_a, max(abs(a - r) for a, r in zip(rows[b * (pos + 1):(b + 1) * (pos + 1)], ref)))
assert worst_p <= 1e-6 and worst_a <= 1e-6, f"prob {worst_p:.2e}, rows {worst_a:.2e}"
print(f"{len(steps)} tokens, {L} x {H} rows each: max |diff| prob {worst_p:.1e}, rows {worst_a:.1e}")
PY
    ); then pass "$name: $out"; else fail "$name" "$out"; fi
}
gen_compare lib_generate_llama_fixture_equals_cli tests/data/small-llama 12 "the cat sat"
gen_compare lib_generate_gpt2_fixture_equals_cli tests/data/small-gpt2 12 "Hello world"
if [ -n "${g:-}" ] && [ -f "$g/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    gen_compare lib_generate_gguf_equals_cli "$g/SmolLM2-135M-Instruct.Q4_1.gguf" 8 "The capital of France is"
else
    skip lib_generate_gguf_equals_cli "no SmolLM2 GGUF from PyPI (tools/pymodel.sh smollm2)"
fi

# bad input: one line, an error status, no crash
LD_LIBRARY_PATH=$LIB "$T/top_heads" "$T/no-such-model" "x" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q 'no-such-model' "$T/err"; then pass lib_example_missing_model
else fail lib_example_missing_model "exit $rc: $(cat "$T/err")"; fi
LD_LIBRARY_PATH=$LIB "$T/top_heads" weights/demo "x" 7 >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 2 ] && grep -q 'layers: 7 is out of range' "$T/err"; then pass lib_example_layer_out_of_range
else fail lib_example_layer_out_of_range "exit $rc: $(cat "$T/err")"; fi

# --- ABI: what the library exports is the committed list, and the header's ATTNVIZ_API names ---
nm -D --defined-only build/libattnviz.so | awk '{print $3}' | sort >"$T/built.symbols"
if diff -u abi/libattnviz.symbols "$T/built.symbols" >"$T/abi.diff"; then
    pass "lib_abi_symbols_match_committed_list ($(wc -l <"$T/built.symbols") symbols)"
else
    fail lib_abi_symbols_match_committed_list "$(grep '^[-+]attnviz\|^[-+][a-z_]' "$T/abi.diff" | head -n 8 | tr '\n' ' ')"
fi
nm -D --defined-only "$LIB/$REAL" | awk '{print $3}' | sort | cmp -s - "$T/built.symbols" &&
    pass lib_abi_installed_copy_same_symbols || fail lib_abi_installed_copy_same_symbols "the installed library differs"
tr '\n' ' ' <include/attnviz.h | grep -oE 'ATTNVIZ_API [^(]*\(' | grep -oE 'attnviz_[a-z_0-9]+ *\($' | tr -d ' (' |
    sort >"$T/header.symbols"
if cmp -s "$T/header.symbols" "$T/built.symbols"; then pass lib_abi_header_declares_every_export
else fail lib_abi_header_declares_every_export "$(diff "$T/header.symbols" "$T/built.symbols" | tr '\n' ' ')"; fi

# --- the header stands alone: no internal header, C99 and C++ ---
incs=$(grep -E '^\s*#\s*include' include/attnviz.h | tr -d ' ')
[ "$incs" = "#include<stddef.h>" ] && pass lib_header_includes_only_stddef || fail lib_header_includes_only_stddef "$incs"
printf '#include <attnviz.h>\nint main(void) { attnviz_error e; (void)e; return attnviz_model_open(0, 0, 0) != 0; }\n' >"$T/h.c"
check lib_header_compiles_c99_pedantic cc -std=c99 -Wall -Wextra -Werror -pedantic -I"$D/usr/local/include" -c -o "$T/h.o" "$T/h.c"
if command -v c++ >/dev/null 2>&1; then
    cp "$T/h.c" "$T/h.cc"
    check lib_header_compiles_cxx c++ -Wall -Wextra -Werror -I"$D/usr/local/include" -c -o "$T/hcc.o" "$T/h.cc"
else
    skip lib_header_compiles_cxx "no C++ compiler"
fi

# --- docs/c-library.md's two blocks, as written: its install into $HOME/.local (HOME a temporary
# folder, run in a folder of links to the repository's files so that what it builds stays there),
# then its C program against that install ---
doc=docs/c-library.md
readme_block() { # MARKER LANG: the fenced block of LANG that follows the line holding MARKER
    awk -v m="$1" -v l="$2" 'index($0, m) { on = 1; next } on && $0 == "```" l { inb = 1; next }
        inb && $0 == "```" { exit } inb { print }' "$doc"
}
R=$T/readme
mkdir -p "$R" "$T/home"
for f in * .[!.]*; do [ "$f" = .git ] || ln -s "$PWD/$f" "$R/$f"; done
readme_block "tests/e2e/lib_test.sh runs this block" sh >"$T/readme.sh"
readme_block "tests/e2e/lib_test.sh compiles and runs this block" c >"$R/readme.c"
if [ ! -s "$T/readme.sh" ] || [ ! -s "$R/readme.c" ]; then
    fail lib_readme_blocks "$doc: the sh or c block after a 'covered-by: tests/e2e/lib_test.sh' marker was not found"
else
    (cd "$R" && env -u PKG_CONFIG_PATH -u PKG_CONFIG_SYSROOT_DIR HOME="$T/home" bash -e "$T/readme.sh") >"$T/readme.out" 2>&1
    rc=$?
    # (make's own lines first, then the example's)
    sed -n '/^attnviz-demo: /,$p' "$T/readme.out" >"$T/readme.ex"
    if [ $rc -eq 0 ] && cmp -s "$T/readme.ex" "$T/lib_example_demo_equals_cli.want"; then
        pass lib_readme_install_and_example
    else
        fail lib_readme_install_and_example "exit $rc: $(diff "$T/lib_example_demo_equals_cli.want" "$T/readme.ex" | head -n 5 | tr '\n' '|') $(tail -n 3 "$T/readme.out")"
    fi
    # the output the page shows (its first plain ``` block) is the example's first lines
    shown=$(awk '/^```/ { if (!inb) { inb = 1; lang = substr($0, 4); next } if (lang == "") exit; inb = 0; next }
        inb && lang == "" && $0 != "..."' "$doc")
    [ -n "$shown" ] && [ "$shown" = "$(head -n "$(printf '%s\n' "$shown" | wc -l)" "$T/readme.ex")" ] &&
        pass lib_readme_shows_the_examples_output || fail lib_readme_shows_the_examples_output "$doc shows: $shown"
    want=$($PY -c "import json,sys; d=json.load(open(sys.argv[1])); a=d['attention'][0]
t=d['tokens']; import struct
print('1 x %d x %d x %d; %s -> %s: %.4f' % (len(a), len(t), len(t), t[2], t[1], a[0][2][1]))" "$T/lib_example_layer_selection_src.json" 2>&1)
    if (cd "$R" && env -u PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH="$T/home/.local/lib/pkgconfig" \
        sh -c 'cc -std=c99 -Wall -Wextra -Werror -o readme_c readme.c $(pkg-config --cflags --libs attnviz)' &&
        LD_LIBRARY_PATH="$T/home/.local/lib" ./readme_c) >"$T/readme_c.out" 2>&1 &&
        [ "$(cat "$T/readme_c.out")" = "$want" ] && [ -s "$R/attnviz.html" ]; then
        pass lib_readme_c_block
    else
        fail lib_readme_c_block "got '$(cat "$T/readme_c.out")', want '$want'"
    fi
fi

# --- uninstall removes what install put there ---
make --no-print-directory -s uninstall DESTDIR="$D" PREFIX=/usr/local >"$T/un.log" 2>&1
left=$(cd "$D" && find . -name 'libattnviz*' -o -name attnviz.h -o -name attnviz.pc -o -name attnviz -type f -o -name _attnviz \
    -o -name attnviz.fish -o -name attnviz.1)
[ -z "$left" ] && pass lib_uninstall || fail lib_uninstall "left: $left $(cat "$T/un.log")"
exit 0
