#!/usr/bin/env bash
# Make (or keep) the virtual environment of a user who brings their own pyspark-client:
#
#     server/client-venv.sh LINE        (LINE: a Spark line such as 4.0 or 4.2)
#
# .venv-thinNN (NN: LINE without its dot): pyspark-client LINE installed FIRST, then this
# package as a user installs it (`pip install .`), then the test extra (`pip install -e
# '.[test]'`, no [client]); fails unless each pip install left that pyspark-client exactly as it
# was (server/check-own-pyspark.sh). Cached: made again only when pyproject.toml or the pin
# changes.
#
# Prerequisites: python3.11 (or $PYTHON), pip reaching PyPI.
set -euo pipefail

line="${1:?usage: server/client-venv.sh LINE (a Spark line such as 4.2)}"
if [[ ! "$line" =~ ^4\.[0-9]+$ ]]; then
    echo "client-venv: LINE must be a Spark 4 line such as 4.2, not $line" >&2
    exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3.11}"
venv="$root/.venv-thin${line/./}"
pin="pyspark-client==$line.*"
pip=(pip install --quiet --disable-pip-version-check)
stamp="$(printf '%s\n' "$pin" "$(sha256sum "$root/pyproject.toml" | cut -c1-16)")"

if [[ "$(cat "$venv/.installed" 2>/dev/null)" == "$stamp" ]]; then
    exit 0
fi
echo "client-venv: making $venv ($pin, then the package)"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/${pip[0]}" "${pip[@]:1}" "$pin"
# A user's own client first, then the package as a user installs it, then the test extra.
"$root/server/check-own-pyspark.sh" "$venv" "$root"
"$root/server/check-own-pyspark.sh" "$venv" -e "$root[test]"
echo "$stamp" > "$venv/.installed"
