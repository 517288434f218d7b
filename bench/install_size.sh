#!/usr/bin/env bash
# Install size and time of exclust's core against exclust[all], each into a fresh venv from a wheel
# (pip's cache warm: run it twice and read the second run), and the import times in each:
# `import exclust` and the first `exclust.IMM` access (which imports the estimator and its kernels' modules).
# Usage: bash bench/install_size.sh [core|all ...]   (figures in bench/README.md, "Install")
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
WORK=$(mktemp -d "${TMPDIR:-/tmp}/exclust-install-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
python3 -m pip wheel --no-deps -q -w "$WORK/dist" "$SRC" 2> >(grep -v "^WARNING: Location '" >&2)
WHEEL=$(ls "$WORK"/dist/exclust-*.whl)
echo "load average at start: $(cat /proc/loadavg)"
for variant in "${@:-core all}"; do
  for v in $variant; do
    venv="$WORK/venv-$v"
    python3 -m venv "$venv"
    spec="$WHEEL"; [ "$v" = core ] || spec="${WHEEL}[$v]"
    start=$(date +%s.%N)
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$spec" 2> >(grep -v "^WARNING: Location '" >&2)
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    size=$(du -sm "$site" | cut -f1)
    count=$("$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | tail -n +3 | wc -l)
    (cd "$WORK" && "$venv/bin/python" - "$v" "$seconds" "$size" "$count" <<'PY'
import subprocess, sys, time
v, seconds, size, count = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
def timed(code):
    best = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        best.append(float(out))
    return min(best)
imp = timed("import time; t=time.perf_counter(); import exclust; print(time.perf_counter()-t)")
imm = timed("import time, exclust; t=time.perf_counter(); exclust.IMM; print(time.perf_counter()-t)")
print(f"{v:5s} install {seconds:6.0f} s, {size:>5s} MB in site-packages, {count:>3s} packages; "
      f"import exclust {imp * 1000:5.0f} ms, first exclust.IMM {imm * 1000:5.0f} ms (best of 3)")
PY
    )
  done
done
echo "load average at end: $(cat /proc/loadavg)"
