# Shell functions for the scripts that start a server process and wait for it (sourced, not run).
#
#     source "$root/server/process-lib.sh"
#     some-server >"$log" 2>&1 &
#     stop_on_exit $!
#     wait_for_line my-script "$log" "server started" $! "$timeout"
#
# stop_on_exit PID: on the script's exit, send PID a TERM and wait for it; an INT or TERM to the
# script exits it with 130 or 143 (so the EXIT trap runs). One process per script.
# wait_for_line NAME LOG PATTERN PID TIMEOUT: return once LOG holds PATTERN (grep); exit 1 with
# the log on stderr, each message starting with NAME, when PID has exited or TIMEOUT seconds
# have passed first.

stop_on_exit() {
    _stopped_on_exit="$1"
    trap '_stop_process "$_stopped_on_exit"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

_stop_process() {
    if kill -0 "$1" 2>/dev/null; then
        kill -TERM "$1" 2>/dev/null || true
        wait "$1" 2>/dev/null || true
    fi
}

wait_for_line() {
    local name="$1" log="$2" pattern="$3" pid="$4" timeout="$5" start=$SECONDS
    until grep -q "$pattern" "$log" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "$name: the server exited while starting; log:" >&2
            cat "$log" >&2
            exit 1
        fi
        if ((SECONDS - start > timeout)); then
            echo "$name: the server did not start within ${timeout}s; log:" >&2
            cat "$log" >&2
            exit 1
        fi
        sleep 1
    done
}
