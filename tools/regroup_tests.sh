#!/bin/bash
# regroup_tests.sh — groups tests/ by kind, once, with `git mv`, and rewrites every reference to a
# moved path (issue 46: "tests/ grouped"). Run it at the repository root on a clean tree, then
# build, `make check`, tests/e2e/docs_test.sh, and commit the result as it stands:
#   tools/regroup_tests.sh && make -j2 && make check && git commit -qam "tests/ grouped"
#
# Where a top-level file of tests/ goes (first match wins; globs, so tests added meanwhile follow):
#   tests/unit/     test_*.c check_util.h lsan.supp       the Check suites and what they share
#   tests/e2e/      *_test.sh *_lib.sh lib.sh bad_inputs.sh tty.py docs_check.py docs_serve.sh
#                   serve_check.py openai_load.py tsan.supp   the end-to-end scripts and their helpers
#   tests/ref/      python_check.sh (the Python package against the reference venv)
#   tests/browser/  page_fixture.c (the synthetic pages the browser tests read)
#   stays           run_all.sh check.sh (the runners) and the folders browser/ data/ fuzz/ ref/ tokenizer/
# A top-level file no rule places stops the script before it moves anything; place it with
# REGROUP_PLACE="name=e2e other.py=unit newfolder=keep" (or add a rule below).
#
# What it rewrites, in every tracked text file (tests/data and the fuzz corpora aside): each moved
# path written from the root (`tests/cli_test.sh`, `./tests/lib.sh`, `$PWD/tests/tsan.supp`; not
# `build/tests/test_cli` nor `python/tests/...`), the globs `tests/test_*.c`, `tests/test_%.c`,
# `tests/*_test.sh` and the Makefile's `patsubst tests/%.c`, the same paths in pieces
# (`os.path.join(ROOT, "tests", "tty.py")`); in each moved file, its
# `$(dirname "$0")/..` paths and C `#include "..."` paths for the new depth. It then looks for
# anything it could not rewrite (a moved file's path left, `__file__` arithmetic in a moved Python
# file) and fails loudly, the tree as it left it (`git reset --hard` undoes it all). Files whose
# bytes key a cache (tools/*requirements*.txt: the reference venvs; the scripts a tests/ref wrapper
# hashes with ref_cache or sha256sum: their checkpoints) keep their wording, named in a note: a
# changed comment there would rebuild those caches on every machine.
set -euo pipefail
self=$(realpath "$0")
root=$(git rev-parse --show-toplevel)
cd "$root"
die() { echo "regroup_tests.sh: $*" >&2; exit 1; }
[ -d tests ] && [ -f tests/run_all.sh ] || die "run it in attnviz's repository (no tests/run_all.sh here)"
for d in unit e2e; do
    [ -z "$(git ls-files "tests/$d")" ] && [ ! -e "tests/$d" ] || die "tests/$d exists: tests/ is regrouped already (it runs once)"
done
git diff --quiet && git diff --cached --quiet || die "the tree has uncommitted changes: commit or stash them first"
[ -z "$(git ls-files --others --exclude-standard tests)" ] ||
    die "untracked files in tests/ would be left behind: $(git ls-files --others --exclude-standard tests | head -3 | tr '\n' ' ')"
command -v python3 >/dev/null || die "needs python3"

python3 - "$self" <<'PY'
import fnmatch, os, re, subprocess, sys

SELF = os.path.relpath(os.path.abspath(sys.argv[1]))
RULES = [  # (glob, folder); None: stays at tests/
    ("run_all.sh", None), ("check.sh", None),
    ("test_*.c", "unit"), ("check_util.h", "unit"), ("lsan.supp", "unit"),
    ("*_test.sh", "e2e"), ("*_lib.sh", "e2e"), ("lib.sh", "e2e"), ("bad_inputs.sh", "e2e"),
    ("tty.py", "e2e"), ("docs_check.py", "e2e"), ("docs_serve.sh", "e2e"), ("serve_check.py", "e2e"),
    ("openai_load.py", "e2e"), ("tsan.supp", "e2e"),
    ("python_check.sh", "ref"),
    ("page_fixture.c", "browser"),
]
KEEP_DIRS = {"browser", "data", "fuzz", "ref", "tokenizer"}
for item in os.environ.get("REGROUP_PLACE", "").split():
    name, _, folder = item.partition("=")
    if not name or folder not in {"unit", "e2e", "ref", "browser", "keep"}:
        sys.exit(f"regroup_tests.sh: REGROUP_PLACE item {item!r}: NAME=unit|e2e|ref|browser|keep")
    if folder == "keep":
        KEEP_DIRS.add(name)
    RULES.insert(0, (name, None if folder == "keep" else folder))


def git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


tracked = git("ls-files", "-z").split("\0")
top = sorted({p.split("/")[1] for p in tracked if p.startswith("tests/") and p.count("/") >= 1})
moves, unplaced = {}, []
for name in top:
    path = "tests/" + name
    if any(p.startswith(path + "/") for p in tracked):  # a folder
        if name not in KEEP_DIRS:
            unplaced.append(path + "/ (a folder)")
        continue
    for pat, folder in RULES:
        if fnmatch.fnmatchcase(name, pat):
            if folder:
                moves[path] = f"tests/{folder}/{name}"
            break
    else:
        unplaced.append(path)
if unplaced:
    sys.exit("regroup_tests.sh: no rule places " + ", ".join(unplaced) +
             "; nothing moved. Place them with REGROUP_PLACE=\"NAME=unit|e2e|ref|browser|keep ...\" or a rule in "
             "tools/regroup_tests.sh")
if not moves:
    sys.exit("regroup_tests.sh: nothing to move")

# the moved paths as written in files, and the globs that stand for them
WRITTEN = dict(moves)
WRITTEN.update({"tests/test_*.c": "tests/unit/test_*.c", "tests/test_%.c": "tests/unit/test_%.c",
                "tests/*_test.sh": "tests/e2e/*_test.sh", "tests/test_NAME.c": "tests/unit/test_NAME.c",
                "tests/NAME_test.sh": "tests/e2e/NAME_test.sh"})
# a root-relative path: at a word's start, or after ./ ../ or a shell/Make variable ($PWD/, ${ROOT}/);
# never inside another folder's tests/ (build/tests/test_cli is the binary, python/tests/ the package's)
PATH_RE = re.compile(r"tests/(" + "|".join(re.escape(k[6:]) for k in sorted(WRITTEN, key=len, reverse=True)) +
                     r")(?![\w.*%-])( *)")
TOKEN_RE = re.compile(r"""[^\s"'`(=:,\[<>|;{@]*\Z""")
ROOTED = re.compile(r"^(?:(?:\.\.?/)*|\$\{?\w+\}?/)$")
OTHER = re.compile(r"^(?:build[\w-]*/|python/|B\)/|\$\(B\)/)$")


# the same path in pieces: os.path.join(ROOT, "tests", "test_model.c"), path.join(ROOT, 'tests', 'tty.py')
SPLIT_RE = re.compile(r"""(['"])tests\1(\s*,\s*)(['"])(""" + "|".join(re.escape(o[6:]) for o in sorted(moves, key=len, reverse=True)) +
                      r""")\3(?=\s*[,)])""")


def fix_split(m):
    folder = moves["tests/" + m.group(4)].split("/")[1]
    q1, sep, q2 = m.group(1), m.group(2), m.group(3)
    return f"{q1}tests{q1}{sep}{q2}{folder}{q2}{sep}{q2}{m.group(4)}{q2}"


def rooted(text, i):
    """Whether tests/ at i starts a root-relative path; None when it is another folder's tests/."""
    tok = TOKEN_RE.search(text[max(0, i - 60):i]).group(0)
    if ROOTED.match(tok):
        return True
    if OTHER.match(tok) or tok.endswith(("build/", "build-asan/", "python/")):
        return False
    return None


def is_text(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (IsADirectoryError, FileNotFoundError):
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# 1. the moves
for old, new in moves.items():
    os.makedirs(os.path.dirname(new), exist_ok=True)
    git("mv", old, new)
print(f"regroup_tests.sh: moved {len(moves)} files: " +
      ", ".join(f"{sum(1 for n in moves.values() if n.startswith('tests/' + d + '/'))} to tests/{d}/"
                for d in ("unit", "e2e", "ref", "browser")))
loc = {os.path.normpath(o): os.path.normpath(n) for o, n in moves.items()}
problems = []

# 2. inside each moved file: paths relative to the file itself
DIRNAME = re.compile(r'(\$\(dirname "\$0"\))((?:/[^"\s)]*)?)')
INCLUDE = re.compile(r'^(\s*#\s*include\s+")([^"]+)(")', re.M)
for old, new in moves.items():
    text = is_text(new)
    if text is None:
        continue
    odir, ndir = os.path.dirname(old), os.path.dirname(new)

    def relocate(rel):
        target = os.path.normpath(os.path.join(odir, rel or "."))
        target = loc.get(target, target)
        return os.path.relpath(target, ndir)

    def fix_dirname(m):
        r = relocate(m.group(2)[1:])
        return m.group(1) + ("" if r == "." else "/" + r)

    def fix_include(m):
        if not os.path.exists(os.path.join(odir, m.group(2))) and os.path.normpath(os.path.join(odir, m.group(2))) not in loc:
            return m.group(0)  # found through -I, not beside the file
        return m.group(1) + relocate(m.group(2)) + m.group(3)

    out = DIRNAME.sub(fix_dirname, text)
    if new.endswith((".c", ".h")):
        out = INCLUDE.sub(fix_include, out)
    for pat, why in ((r"BASH_SOURCE", "BASH_SOURCE"), (r"__file__\S*\s*,\s*['\"]\.\.|parents\[|import\.meta", "a path from the file's own place")):
        for m in re.finditer(pat, out):
            problems.append(f"{new}:{out.count(chr(10), 0, m.start()) + 1}: {why}: rewrite it for tests/{ndir.split('/')[-1]}/ by hand")
    if out != text:
        with open(new, "w", encoding="utf-8") as f:
            f.write(out)

# 3. every tracked text file: the moved paths written from the root
files = [p for p in git("ls-files", "-z").split("\0") if p and p != SELF and not p.startswith("tests/data/")
         and not re.match(r"tests/fuzz/corpus_", p)]
# files whose bytes key a cache (the reference venvs, the checkpoints a reference check writes once):
# a changed comment there would rebuild the cache on every machine, so they keep their old wording
keyed = {p for p in files if fnmatch.fnmatch(os.path.basename(p), "*requirements*.txt")
         or p.endswith((".sha256", "SHA256SUMS"))}
for p in files:
    if p.endswith(".sh"):
        for line in (is_text(p) or "").splitlines():
            if "sha256sum" in line or re.match(r"\s*ref_cache\s", line):
                keyed.update(w for w in re.findall(r"[\w./-]+", line) if w in set(files))
changed = 0
left = []
for path in files:
    text = is_text(path)
    if text is None:
        continue
    if path in keyed:
        if PATH_RE.search(text) or SPLIT_RE.search(text):
            left.append(path)
        continue

    def fix(m):
        r = rooted(text, m.start())
        if r is None:
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{path}:{line}: {text[max(0, m.start() - 30):m.end()]!r}: not a root-relative path it knows")
        if not r:
            return m.group(0)
        new, sp = WRITTEN["tests/" + m.group(1)], m.group(2)
        grown = len(new) - len(m.group(0)) + len(sp)
        if len(sp) >= grown + 2:  # an aligned comment after it stays in its column
            sp = sp[:len(sp) - grown]
        return new + sp

    out = PATH_RE.sub(fix, text)
    out = SPLIT_RE.sub(fix_split, out)
    if os.path.basename(path) == "Makefile":
        out = out.replace("$(patsubst tests/%.c,", "$(patsubst tests/unit/%.c,")
    if path == "tests/run_all.sh":
        out = out.replace(" | tests/ref/python_check.sh)", ")")  # tests/ref/* has it now
    if path == "docs/testing.md":  # the layout section says "until tools/regroup_tests.sh runs"
        out = re.sub(r"<!-- before-regroup -->.*?<!-- /before-regroup -->\n?", "", out, flags=re.S)
    if out != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(out)
        changed += 1
print(f"regroup_tests.sh: rewrote the paths in {changed} files")
if left:
    print("regroup_tests.sh: left as written (their bytes key a cache; edit them when it is rebuilt anyway): " +
          ", ".join(left))

# 4. what is left: any moved file still named at its old place
for path in files:
    if path in keyed:
        continue
    text = is_text(path)
    if text is None:
        continue
    for m in PATH_RE.finditer(text):
        if rooted(text, m.start()):
            problems.append(f"{path}:{text.count(chr(10), 0, m.start()) + 1}: still {m.group(0)}")
    for m in SPLIT_RE.finditer(text):
        problems.append(f"{path}:{text.count(chr(10), 0, m.start()) + 1}: still {m.group(0)}")
if problems:
    print("regroup_tests.sh: left for a human (the moves are staged; `git reset --hard` undoes everything):",
          file=sys.stderr)
    for p in sorted(set(problems)):
        print("  " + p, file=sys.stderr)
    sys.exit(1)
PY
git add -u
echo "regroup_tests.sh: done; check with: make -j2 && make check && tests/e2e/docs_test.sh, then commit"
