#!/bin/sh
# The reference Python for images (Pillow over tools/pyref.sh's): tools/pyvenv.sh pyimg.
#   tools/pyimg.sh [--check]
exec "$(dirname "$0")/pyvenv.sh" pyimg "$@"
