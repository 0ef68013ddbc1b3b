#!/bin/sh
# Regenerates testdata/crafted (hostile inputs for the bounds tests; see README.md).
# Needs python3, zstd, gcc, objcopy. Run from anywhere; writes only into this directory.
set -eu
cd "$(dirname "$0")"
python3 gen.py
