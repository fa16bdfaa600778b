#!/bin/sh
# The Python that runs llama.cpp's legacy LLaVA converter (transformers 4 over tools/pyref.sh's):
# tools/pyvenv.sh pyllava.
#   tools/pyllava.sh [--check]
exec "$(dirname "$0")/pyvenv.sh" pyllava "$@"
