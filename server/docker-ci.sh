#!/usr/bin/env bash
# CI phase "container": build the project's image and run a named subset of the integration
# tests from .venv-thin against it, on a fresh Debian bookworm machine (root; apt, PyPI and
# Maven only: no Docker engine, no image registry needed).
#
#     server/docker-ci.sh [PYTEST_ARGS...]      (make test-container)
#
# 1. docker.io + debootstrap (apt), dockerd when no engine answers, the Python base and the
#    image (server/docker-lib.sh; see server/docker-image.sh).
# 2. The container, published on 127.0.0.1 at a port docker picks, with the data directory
#    mounted at the same absolute path inside and out (the server resolves table paths itself).
#    Readiness is the server's own log line: docker-proxy accepts TCP before Spark listens.
# 3. pytest with SPARK_REMOTE at it, in two test processes (pytest-xdist, a file's tests in one;
#    DELTA_TEST_WORKERS); conformance copies, --basetemp and TMPDIR under the data
#    directory, so every table a test writes is visible to the server.
# Always removes the container, stops dockerd if this script started it and removes the data
# directory if it made it. Exits with pytest's code. Prints each step's time ("== step: N s").
#
# Environment: DELTA_DATA_DIR (default: a fresh /tmp/delta-container-ci.*), DELTA_CONFORMANCE_DIR
# (default ../shared/conformance), PYTHON_IMAGE (default: the Debian-built stand-in),
# SPARK_DRIVER_MEMORY (default 2g), DELTA_CONNECT_START_TIMEOUT (seconds, default 300),
# DOCKER_CI_TESTS (test paths) and DOCKER_CI_SELECT (-k expression) to replace the subset.
set -euo pipefail
# shellcheck source=server/docker-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/docker-lib.sh"
root="$DOCKER_LIB_ROOT"
cd "$root"

# The subset: every conformance table and the server checks; of checkpoints, CDF and to_df the
# tests that cover each feature once, leaving out the slowest variations (the integration phase
# runs them all against the standalone server); of the replay properties, the deterministic
# tests that write their tables under tmp_path. The point here is the image and the data
# directory shared with the container: 196 of the 258 tests in these files (1 skipped).
default_tests=(
    tests/conformance
    tests/integration/test_server.py
    tests/integration/test_checkpoint.py
    tests/integration/test_cdf.py
    tests/integration/test_data.py
    tests/integration/test_replay_properties.py
)
left_out=(
    # test_checkpoint.py: more tables, v2 layouts, retries, updated snapshots
    test_random_delta_rs_tables
    test_v2_policy_table_gets_uuid_named_checkpoint
    test_v2_table_classic_named_v2_checkpoint
    test_cleanup_copies_a_uuid_named_checkpoint
    test_checkpoint_of_an_updated_snapshot
    test_failed_publish_and_mismatch_publish_nothing_visible
    # test_cdf.py: a long stream
    test_stream_batches_concatenate_to_load_cdf_and_resume_exactly
    # test_data.py: the golden and DV tables again (their snapshots are in tests/conformance)
    test_golden_table_reads_its_expected_contents
    test_row_counts_match_dv_aware_readers
    # test_replay_properties.py: the hypothesis searches and update chains
    test_dataframe_replay_equals_reference
    test_replay_from_checkpoint_equals_full_replay
    test_a_chain_of_updates
    test_update_matches_checkpoint_rows_by_file_key
    test_updates_missing_the_earlier_rows_are_counted_on_their_sums
    test_keys_folded_twice_before_a_state_query_are_not_lost
)
default_select="not ($(printf ' or %s' "${left_out[@]}" | cut -c 5-))"
read -r -a tests <<<"${DOCKER_CI_TESTS:-${default_tests[*]}}"
select="${DOCKER_CI_SELECT-$default_select}"
pytest_bin="$root/.venv-thin/bin/pytest"
conformance="${DELTA_CONFORMANCE_DIR:-$root/../shared/conformance}"
timeout="${DELTA_CONNECT_START_TIMEOUT:-300}"
container="delta-connect-ci-$$"
made_data_dir=""

[[ -x "$pytest_bin" ]] || { echo "docker-ci: $pytest_bin missing: make .venv-thin/.installed" >&2; exit 2; }
[[ -d "$conformance" ]] || { echo "docker-ci: no conformance tables at $conformance" >&2; exit 2; }

# shellcheck disable=SC2317,SC2329  # invoked by the EXIT trap
cleanup() {
    docker rm -f "$container" >/dev/null 2>&1 || true
    docker_stop_engine_if_started
    [[ -z "$made_data_dir" ]] || rm -rf "$made_data_dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

base="$(docker_python_base)"
docker_timed apt docker_install_packages
docker_timed dockerd docker_ensure_engine
if [[ "$base" == "$DOCKER_STANDIN_BASE" ]]; then
    docker_timed base-image docker_build_standin_base "$base"
fi
docker_timed image docker_build_project_image "$base"

if [[ -n "${DELTA_DATA_DIR:-}" ]]; then
    data="$(mkdir -p "$DELTA_DATA_DIR" && cd "$DELTA_DATA_DIR" && pwd)"
else
    data="$(mktemp -d /tmp/delta-container-ci.XXXXXX)"
    made_data_dir="$data"
fi

# shellcheck disable=SC2317,SC2329  # invoked through docker_timed
start_container() {
    docker run -d --name "$container" -p 127.0.0.1::15002 \
        -e SPARK_DRIVER_MEMORY="${SPARK_DRIVER_MEMORY:-2g}" \
        -v "$data:$data" "$DELTA_CONNECT_IMAGE" >/dev/null
    local start=$SECONDS
    until [[ "$(docker logs "$container" 2>&1)" == *'Spark Connect server started'* ]]; do
        if [[ "$(docker inspect -f '{{.State.Running}}' "$container")" != true ]]; then
            echo "docker-ci: the container exited while starting; its log:" >&2
            docker logs "$container" >&2 2>&1
            return 1
        fi
        if ((SECONDS - start > timeout)); then
            echo "docker-ci: the server did not start within ${timeout}s; its log:" >&2
            docker logs "$container" >&2 2>&1
            return 1
        fi
        sleep 1
    done
}
docker_timed server-ready start_container
address="$(docker port "$container" 15002/tcp)"
address="${address%%$'\n'*}"  # 127.0.0.1:PORT (published on that address only)
echo "docker-ci: $DELTA_CONNECT_IMAGE ready at $address, data directory $data"

rm -rf "$data/conformance" "$data/pytest" "$data/tmp"
cp -r "$conformance" "$data/conformance"
mkdir -p "$data/tmp"
run_tests() {
    TMPDIR="$data/tmp" DELTA_DATA_DIR="$data" DELTA_CONFORMANCE_DIR="$data/conformance" \
        SPARK_REMOTE="sc://$address" \
        "$pytest_bin" -m "integration and not embedded and not delta_spark" \
        -n "${DELTA_TEST_WORKERS:-2}" --dist loadfile \
        ${select:+-k "$select"} --basetemp="$data/pytest" -p no:cacheprovider "${tests[@]}" "$@"
}
start=$SECONDS
set +e
run_tests "$@"
status=$?
set -e
echo "== tests: $((SECONDS - start)) s"
if ((status != 0)); then
    echo "docker-ci: tests failed ($status); the server's last log lines:" >&2
    docker logs --tail 60 "$container" >&2 2>&1 || true
fi
echo "== docker-ci total: $SECONDS s"
exit "$status"
