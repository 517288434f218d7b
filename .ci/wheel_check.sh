#!/usr/bin/env bash
# The wheel, tested clean: build exclust's wheel, install it WITHOUT extras into a fresh virtual
# environment outside the source tree, and use it there as a user would (.ci/wheel_check.py):
# import, an in-memory fit, `exclust explain` on a small Parquet folder through a LocalCluster with
# its report, the version; then install the [lake] extra and explain a Delta table.
# pip's cache (~/.cache/pip) is reused, so the venv's packages are not downloaded again each run.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/exclust-wheel-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "[wheel] building the wheel"
"$PYTHON" -m pip wheel --no-deps --no-build-isolation -q -w "$WORK/dist" "$SRC" 2>/dev/null \
    || "$PYTHON" -m pip wheel --no-deps -q -w "$WORK/dist" "$SRC"
WHEEL=$(ls "$WORK"/dist/exclust-*.whl)
echo "[wheel] $(basename "$WHEEL"): $(unzip -l "$WHEEL" | tail -1 | awk '{print $2}') files"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
# (grep drops pip's notes about unused local index folders of this machine.)
start=$(date +%s)
"$VPY" -m pip install -q --disable-pip-version-check "$WHEEL" 2> >(grep -v "^WARNING: Location '" >&2)
echo "[wheel] core installed in $(( $(date +%s) - start )) s"
cd "$WORK"  # outside the source tree: `import exclust` can only find the installed wheel
"$VPY" "$SRC/.ci/wheel_check.py" core "$SRC"
start=$(date +%s)
"$VPY" -m pip install -q --disable-pip-version-check "${WHEEL}[lake]" 2> >(grep -v "^WARNING: Location '" >&2)
echo "[wheel] [lake] installed in $(( $(date +%s) - start )) s"
"$VPY" "$SRC/.ci/wheel_check.py" lake "$SRC"
echo "[wheel] ok"
