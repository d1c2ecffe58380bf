#!/usr/bin/env bash
# Check that installing delta_connect_py leaves an environment's own pyspark as it was:
#
#     server/check-own-pyspark.sh VENV PIP_INSTALL_ARGS...
#
# Records which distributions own the `pyspark` package in VENV (name and version, e.g.
# pyspark-client 4.0.4, or a platform's own pyspark), pyspark.__version__ and a digest of the
# pyspark/ folder's Python files; runs `VENV/bin/pip install PIP_INSTALL_ARGS...`; fails if any
# of these changed. Then checks that `import delta_connect_py` works there.
set -euo pipefail

venv="$(cd "$1" && pwd)"
shift

state() {
    "$venv/bin/python" - <<'EOF'
import hashlib
import importlib.metadata as metadata
import pathlib

import pyspark

owners = sorted(
    f"{dist.metadata['Name']}=={dist.version}"
    for dist in metadata.distributions()
    if any(str(file).startswith("pyspark/") for file in dist.files or ())
)
folder = pathlib.Path(pyspark.__file__).parent
digest = hashlib.sha256()
for path in sorted(folder.rglob("*.py")):
    digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
print("owners:", " ".join(owners))
print("pyspark.__version__:", pyspark.__version__)
print("pyspark/*.py sha256:", digest.hexdigest())
EOF
}

before="$(state)"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$@"
after="$(state)"
echo "check-own-pyspark: pip install $* in $venv"
echo "$after" | sed 's/^/  /'
if [[ "$before" != "$after" ]]; then
    echo "check-own-pyspark: pip install $* changed the environment's pyspark:" >&2
    diff <(echo "$before") <(echo "$after") >&2 || true
    exit 1
fi
# From a script file, as a program imports it: pyspark-client 4.2.0 exits when its Connect
# client is imported from `python -c` (pyspark.sql.connect takes that for a doctest run and looks
# for a SPARK_HOME, which a client-only install has not).
script="$(mktemp -t check-own-pyspark.XXXXXX.py)"
trap 'rm -f "$script"' EXIT
echo 'import delta_connect_py' > "$script"
(cd / && "$venv/bin/python" "$script")
