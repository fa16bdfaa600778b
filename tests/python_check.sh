#!/bin/bash
# The Python package (python/): its pytest suite in the reference venv (tools/pyref.sh: torch,
# transformers, bertviz, nbclient), with the package from python/src and ./attnviz as the binary;
# then the executed example notebook's outputs in headless Chromium (tests/browser/notebook_check.mjs).
# One PASS/FAIL/SKIP line per test. ATTNVIZ_SHOT=FILE.png also saves the notebook screenshot.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh

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
"$PY" - "$T/py.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = "python: " + tc.get("classname", "").rsplit(".", 1)[-1] + "::" + tc.get("name")
    bad = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
    if bad is not None:
        print(f"FAIL {name}: {(bad.get('message') or '').splitlines()[0] if bad.get('message') else 'error'}")
    elif tc.find("skipped") is not None:
        print(f"SKIP {name}: {tc.find('skipped').get('message')}")
    else:
        print(f"PASS {name}")
PY
if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then
    tail -n 60 "$T/pytest.log"
fi
echo "python: pytest took $(($(date +%s) - start)) s"

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
