#!/usr/bin/env bash
# Build the sdist and the wheel, install the wheel into a fresh thin virtual environment and run
# a smoke test with it against a test server:
#
#     server/wheel-smoke.sh
#
# 1. `python -m build` (the dev extra's `build`; a temporary environment with it otherwise)
#    writes the sdist and the wheel to a temporary folder;
# 2. the wheel must hold delta_connect_py/py.typed and nothing but the package and its metadata
#    (no tests, no examples);
# 3. `pip install WHEEL[client]` into a new virtual environment (python3.11: the same minor
#    version as the server's workers), no editable install;
# 4. server/wheel_smoke.py runs with that environment's Python from a temporary folder (nothing
#    of the repository on sys.path, PYTHONPATH unset) against server/with-local-server.sh, on a
#    copy of examples/sample_table: snapshot, state, all_files, to_df, history, and the
#    delta-connect command line (--version, describe).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python_for_venvs=python3.11
build_python="$root/.venv/bin/python"
work="$(mktemp -d -t delta-connect-wheel.XXXXXX)"
trap 'rm -rf "$work"' EXIT

say() { echo "wheel-smoke: $*"; }

if ! "$build_python" -m build --version >/dev/null 2>&1; then
    say "no 'build' in $build_python: a temporary environment with it"
    "$python_for_venvs" -m venv "$work/build-venv"
    "$work/build-venv/bin/pip" install --quiet --disable-pip-version-check build
    build_python="$work/build-venv/bin/python"
fi

say "building the sdist and the wheel"
# From a copy of the tracked files: the build leaves an .egg-info behind, and must see only what
# a clone has.
git -C "$root" ls-files -z | (cd "$root" && xargs -0 tar -cf - --no-recursion) | (
    mkdir -p "$work/source" && cd "$work/source" && tar -xf -
)
"$build_python" -m build --outdir "$work/dist" "$work/source" >"$work/build.log" 2>&1 || {
    cat "$work/build.log" >&2
    exit 1
}
wheel="$(ls "$work"/dist/*.whl)"
sdist="$(ls "$work"/dist/*.tar.gz)"
say "built $(basename "$sdist") and $(basename "$wheel")"

"$python_for_venvs" - "$wheel" <<'EOF'
import sys
import zipfile

names = zipfile.ZipFile(sys.argv[1]).namelist()
foreign = [n for n in names if not n.startswith("delta_connect_py")]
assert "delta_connect_py/py.typed" in names, "the wheel has no py.typed"
assert not foreign, f"the wheel holds more than the package: {foreign}"
assert not [n for n in names if "/tests/" in n or "test_" in n.rsplit("/", 1)[-1]], "tests in the wheel"
print(f"wheel-smoke: the wheel holds {len(names)} files: the package, its metadata and py.typed")
EOF

say "installing the wheel with [client] into a fresh environment"
"$python_for_venvs" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "${wheel}[client]"

cp -r "$root/examples/sample_table" "$work/sample_table"
cp "$root/server/wheel_smoke.py" "$work/wheel_smoke.py"
cd "$work"
"$root/server/with-local-server.sh" \
    env -u PYTHONPATH "$work/venv/bin/python" wheel_smoke.py "$work/sample_table" "$root"
