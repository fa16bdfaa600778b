#!/bin/bash
# house_figures.sh [DIR] — figures of the code's shape (issues 30 and 46, "House II" and "III"),
# rerunnable on any checkout (DIR, default this one), so a before and an after can be compared:
#   - the longest function in src/ (lines from its opening line to its closing brace)
#   - stderr writes outside main.c and the reporter (report.c): fprintf/fputs/fputc/... to stderr,
#     perror, isatty(stderr) and av_report calls (goal 0)
#   - files that name a model family outside the registry (families.h, arch.c) and the family
#     files (arch_*.c): a model_type string ("qwen3", 'gemma2', ...) or an ARCH_<FAMILY> constant,
#     in src/, include/ and templates/ (goal 0)
#   - stored-settings reads: accesses (X->NAME, X.NAME) of a struct member that points to a RunSpec
#     (settings stored as a pointer into someone else's, e.g. 631f9a4's Pipeline.o), in the files
#     that see that struct (goal 0; a Run's own RunSpec, held by value, is not one)
#   - library swaps: assignments to such a member in src/lib/ (goal 0)
#   - imports from engine/ into model/: #include lines in src/model/ naming a header of
#     src/engine/ (a header beside an engine source, or include/X.h of src/engine/X.c) (goal 0)
#   - headers in include/ (the public ones only: attnviz.h)
#   - `duplicates` pairs in src/ and templates/, when that tool is installed
# Each figure prints as one "name: value" line, details indented below it.
set -u
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || exit 2
mapfile -t C_FILES < <(find src -name '*.c' | sort)

# -- the longest function: a definition starts at column 0 with "name(...) {" on one line (this
# code base's style), and ends at the next "}" at column 0
awk '
    FNR == 1 { start = 0 }
    /^[A-Za-z_][A-Za-z0-9_ \*]*[ \*]\**[A-Za-z_][A-Za-z0-9_]*\(.*\) *\{ *$/ && !/^(if|for|while|switch|else)/ {
        start = FNR; name = $0; sub(/\(.*/, "", name); n = split(name, w, /[ \*]+/); name = w[n]; next
    }
    /^}/ && start { len = FNR - start + 1; print len "\t" FILENAME ":" start "\t" name; start = 0 }
' "${C_FILES[@]}" | sort -rn >/tmp/house_figures.$$
read -r len where name < <(head -1 /tmp/house_figures.$$)
echo "longest function: $len lines ($name, $where)"
head -5 /tmp/house_figures.$$ | tail -4 | awk -F'\t' '{printf "    next: %s lines (%s, %s)\n", $1, $3, $2}'
rm -f /tmp/house_figures.$$

# -- stderr writes outside main.c and the reporter
pat='(fprintf|fputs|fputc|fwrite|vfprintf|putc|fflush)[[:space:]]*\([^;]*\bstderr\b|\bperror[[:space:]]*\(|isatty[[:space:]]*\([^)]*stderr|\bav_report[[:space:]]*\('
hits=$(grep -nE "$pat" "${C_FILES[@]}" | grep -vE '^src/main\.c:|/report\.c:|^src/err\.c:[0-9]+:void av_report\(' || true)
echo "stderr writes outside main/the reporter: $(grep -c . <<<"$hits")"
[ -n "$hits" ] && awk -F: '{print $1}' <<<"$hits" | sort | uniq -c | awk '{printf "    %s: %s\n", $2, $1}'

# -- files naming a family outside the registry and the family files
fam='bert|roberta|distilbert|xlm-roberta|electra|gpt2|llama|mistral|qwen2|qwen3|gemma2|gemma3_text|gemma3|phi3'
named=$(grep -lE "[\"'](${fam})[\"']|\bARCH_(BERT|ROBERTA|DISTILBERT|XLM_ROBERTA|ELECTRA|GPT2|LLAMA|MISTRAL|QWEN2|QWEN3|GEMMA2|GEMMA3|PHI3)\b" \
    $(find src include templates -type f \( -name '*.c' -o -name '*.h' -o -name '*.js' \) | sort) 2>/dev/null |
    grep -vE '(^|/)(families\.h|arch\.c|arch_[a-z0-9]+\.c)$' || true)
echo "files naming a family outside the registry and arch/: $(grep -c . <<<"$named")"
[ -n "$named" ] && sed 's/^/    /' <<<"$named"

# -- settings stored as a pointer: members declared `[const] RunSpec *NAME;` in a struct, their
# accesses in the files that see the struct (the file declaring it, or including its header)
reads=0 swaps=0 detail=""
while IFS=: read -r file name; do
    hdr=$(basename "$file")
    users=$(grep -lE "#include \"$hdr\"" "${C_FILES[@]}" 2>/dev/null; [[ $file == *.c ]] && echo "$file")
    for f in $users; do
        n=$(grep -cP "(->|\.)$name\b(?!\s*\()" "$f")
        [ "$n" -gt 0 ] && reads=$((reads + n)) detail+="    $f: $n"$'\n'
        case $f in src/lib/*) swaps=$((swaps + $(grep -cP "(->|\.)$name\s*=[^=]" "$f"))) ;; esac
    done
done < <(grep -oP '^\s+(const\s+)?RunSpec\s*\*\s*\K\w+(?=;)' -r src include --include='*.h' --include='*.c' -H 2>/dev/null |
    sed 's/:\s*/:/' | sort -u)
echo "stored-settings reads: $reads"
[ -n "$detail" ] && printf '%s' "$detail"
echo "library swaps of stored settings: $swaps"

# -- imports from engine/ into model/: a header is engine's when it sits in src/engine/, or (the
# flat include/ of older checkouts) when src/engine/ has its .c
engine_h=$( (find src/engine -name '*.h' -printf '%f\n'; find src/engine -name '*.c' -printf '%f\n' | sed 's/\.c$/.h/') | sort -u)
imports=$(grep -nE '^#include "[^"]+"' $(find src/model -name '*.c' -o -name '*.h' | sort) 2>/dev/null |
    while IFS= read -r line; do
        h=${line#*#include \"}; h=${h%\"*}
        grep -qxF "$h" <<<"$engine_h" && echo "$line"
    done)
echo "imports from engine/ into model/: $(grep -c . <<<"$imports")"
[ -n "$imports" ] && sed 's/^/    /' <<<"$imports"

# -- the public headers: what include/ holds
hdrs=$(find include -maxdepth 1 -name '*.h' -printf '%f\n' 2>/dev/null | sort)
echo "headers in include/: $(grep -c . <<<"$hdrs")$([ "$(grep -c . <<<"$hdrs")" -le 3 ] && [ -n "$hdrs" ] && echo " ($(tr '\n' ' ' <<<"$hdrs" | sed 's/ $//'))")"

# -- duplicated code (the duplicates tool, when present)
if command -v duplicates >/dev/null; then
    for d in src templates; do
        echo "duplicates pairs in $d/: $(duplicates --repo "$d" --most 1 --seconds 60 2>/dev/null | head -1)"
    done
else
    echo "duplicates pairs: (the duplicates tool is not installed)"
fi
