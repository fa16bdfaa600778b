#!/bin/bash
# The Python package (python/): its pytest suite in the reference venv (tools/pyref.sh: torch,
# transformers, bertviz, nbclient), with the package from python/src and ./attnviz as the binary;
# then the engine (attnviz.Model over libattnviz) in a fresh venv without torch, from the wheel
# `python -m build` makes; then the executed example notebook's outputs in headless Chromium
# (tests/browser/notebook_check.mjs).
# One PASS/FAIL/SKIP line per test. ATTNVIZ_SHOT=FILE.png also saves the notebook screenshot.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh

if ! PY=$(tools/pyref.sh --check); then
    skip python_package "the reference Python is not built (tools/pyref.sh; make test builds it)"
    exit 0
fi
if [ ! -x ./attnviz ]; then
    fail python_package "./attnviz is not built (make attnviz)"
    exit 0
fi
export ATTNVIZ_BIN=$PWD/attnviz PYTHONPATH=$PWD/python/src PYTHONDONTWRITEBYTECODE=1
if d=$(tools/pymodel.sh all-MiniLM-L6-v2 2>/dev/null); then export ATTNVIZ_MINILM=$d; fi
export ATTNVIZ_NOTEBOOK_OUT=$T/notebook
start=$(date +%s)
"$PY" -m pytest -q -p no:cacheprovider -rfEs --junitxml="$T/py.xml" python/tests >"$T/pytest.log" 2>&1
rc=$?
[ -s "$T/py.xml" ] || { fail python_pytest "pytest wrote no report (exit $rc): $(tail -n 5 "$T/pytest.log")"; exit 0; }
# report XML [PREFIX]: one PASS/FAIL/SKIP line per test case of a JUnit report
report() {
"$PY" - "$1" "${2:-python: }" <<'PY'
import sys, xml.etree.ElementTree as ET
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = sys.argv[2] + tc.get("classname", "").rsplit(".", 1)[-1] + "::" + tc.get("name")
    bad = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
    if bad is not None:
        print(f"FAIL {name}: {(bad.get('message') or '').splitlines()[0] if bad.get('message') else 'error'}")
    elif tc.find("skipped") is not None:
        print(f"SKIP {name}: {tc.find('skipped').get('message')}")
    else:
        print(f"PASS {name}")
PY
}
report "$T/py.xml"
if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then
    tail -n 60 "$T/pytest.log"
fi
echo "python: pytest took $(($(date +%s) - start)) s"

# The engine without torch: a fresh venv (no system packages: Debian's python3-torch stays out)
# holding numpy, pytest and build from PyPI; the wheel `python -m build` makes (an sdist, then the
# wheel from it, compiling libattnviz from the sources the sdist carries) installed into it; the
# engine's tests run from outside the repository, with neither ATTNVIZ_BIN nor an attnviz on PATH
# (./attnviz, as ATTNVIZ_CLI, is only their reference).
V=$T/venv
t0=$(date +%s)
# not the checkout's package (python/src, exported above for the reference Python's run): pip would
# take it for the installed one
nv() { env -u PYTHONPATH -u ATTNVIZ_BIN -u ATTNVIZ_LIB "$@"; }
if ! nv python3 -m venv "$V" >"$T/venv.log" 2>&1 ||
    ! nv "$V/bin/pip" install -q --disable-pip-version-check numpy pytest build >>"$T/venv.log" 2>&1; then
    fail python_fresh_venv "could not make a venv with numpy, pytest and build: $(tail -n 3 "$T/venv.log")"
else
    t1=$(date +%s)
    if nv "$V/bin/python" -c 'import torch' >/dev/null 2>&1; then
        fail python_fresh_venv_has_no_torch "torch is importable in the fresh venv"
    else
        pass python_fresh_venv_has_no_torch
    fi
    if nv ATTNVIZ_JOBS=${ATTNVIZ_JOBS:-2} "$V/bin/python" -m build --outdir "$T/dist" python >"$T/build.log" 2>&1 &&
        nv "$V/bin/pip" install -q --disable-pip-version-check --no-deps "$T"/dist/attnviz-*.whl >>"$T/build.log" 2>&1 &&
        nv "$V/bin/python" -c 'import attnviz, os, sys; sys.exit(not os.path.isfile(attnviz.library_path()))' \
            >>"$T/build.log" 2>&1; then
        pass "python_wheel_builds_libattnviz ($(cd "$T/dist" && ls attnviz-*.whl))"
    else
        fail python_wheel_builds_libattnviz "$(tail -n 5 "$T/build.log")"
    fi
    t2=$(date +%s)
    # the venv's own bin first; no folder that holds an attnviz binary
    path=$V/bin
    IFS=: read -ra dirs <<<"$PATH"
    for d in "${dirs[@]}"; do [ -e "$d/attnviz" ] || path=$path:$d; done
    (cd "$T" && nv PATH="$path" ATTNVIZ_CLI="$OLDPWD/attnviz" \
        "$V/bin/python" -m pytest -q -p no:cacheprovider -rfEs --junitxml="$T/venv.xml" \
        "$OLDPWD/python/tests/test_engine.py" >"$T/venv-pytest.log" 2>&1)
    vrc=$?
    t3=$(date +%s)
    if [ -s "$T/venv.xml" ]; then report "$T/venv.xml" "python (fresh venv, no torch): "
    else fail python_fresh_venv_pytest "pytest wrote no report (exit $vrc): $(tail -n 5 "$T/venv-pytest.log")"; fi
    [ $vrc -ne 0 ] && tail -n 40 "$T/venv-pytest.log"
    echo "python: fresh venv: venv + pip $((t1 - t0)) s, python -m build $((t2 - t1)) s, tests $((t3 - t2)) s"
fi

if [ ! -f "$T/notebook/notebook.html" ]; then
    skip python_notebook_browser "the notebook did not run (see test_notebook above)"
elif [ ! -d node_modules/playwright-core ] || [ ! -x /usr/bin/chromium ]; then
    skip python_notebook_browser "needs node_modules (npm ci) and /usr/bin/chromium"
else
    node tests/browser/notebook_check.mjs "$T/notebook/notebook.html" ${ATTNVIZ_SHOT:+"$ATTNVIZ_SHOT"} >"$T/nb.log" 2>&1
    nrc=$?
    cat "$T/nb.log"
    if [ $nrc -ne 0 ] && ! grep -q '^FAIL ' "$T/nb.log"; then fail python_notebook_browser "notebook_check.mjs exited $nrc"; fi
fi
exit 0
