# sourced by the shell tests that run the real `vqserve serve` (serve_smoke, serve_drain,
# load_small): start it on 127.0.0.1 with any free ports, wait until it serves, stop it, and kill
# any server still running when the test exits.
#   source "${BASH_SOURCE%/*}/util/serve_helpers.sh"
#   SERVE_LABEL=serve_smoke                      # prefix of the messages below
#   serve_start "$bin/vqserve" "$log" 60 --kv-codecs fp16 || exit 1
#   ... "$SERVE_GRPC_PORT" "$SERVE_METRICS_PORT" ...
#   serve_stop TERM; rc=$?                       # the server's exit status
# a test that sets its own EXIT trap calls serve_cleanup from it.

SERVE_LABEL=${SERVE_LABEL:-vqserve}
SERVE_PIDS=()

# waits up to SECONDS until FILE matches PATTERN (grep); returns 1 when it does not, or when
# process PID (optional) has ended without FILE matching.
wait_for() {
  local file=$1 pattern=$2 limit=$3 pid=${4:-}
  for _ in $(seq 1 $((limit * 20))); do
    grep -q "$pattern" "$file" 2> /dev/null && return 0
    [ -n "$pid" ] && ! kill -0 "$pid" 2> /dev/null && { grep -q "$pattern" "$file" 2> /dev/null; return; }
    sleep 0.05
  done
  return 1
}

# serve_start VQSERVE LOG SECONDS [ARGS...]: runs `VQSERVE serve --host 127.0.0.1 --port 0
# --metrics-port 0 ARGS...` in the background (stdout and stderr to LOG) and waits up to SECONDS
# for its "serving" line. then sets SERVE_PID, SERVE_LINE (echoed), SERVE_GRPC_PORT and
# SERVE_METRICS_PORT and returns 0. a server that exits or does not serve in time: its log is
# printed, it is killed, and 1 is returned.
serve_start() {
  local vqserve=$1 log=$2 limit=$3
  shift 3
  "$vqserve" serve --host 127.0.0.1 --port 0 --metrics-port 0 "$@" > "$log" 2>&1 &
  SERVE_PID=$!
  SERVE_PIDS+=("$SERVE_PID")
  if ! wait_for "$log" "serving" "$limit" "$SERVE_PID"; then
    if kill -0 "$SERVE_PID" 2> /dev/null; then
      echo "$SERVE_LABEL: no 'serving' line in $limit s:"
      kill "$SERVE_PID" 2> /dev/null  # serve_cleanup kills it at exit if it is still running
    else
      echo "$SERVE_LABEL: the server exited:"
    fi
    cat "$log"
    return 1
  fi
  SERVE_LINE=$(grep -m1 "serving" "$log")
  echo "$SERVE_LINE"
  SERVE_GRPC_PORT=$(echo "$SERVE_LINE" | sed -E 's/.* on 127\.0\.0\.1:([0-9]+) .*/\1/')
  SERVE_METRICS_PORT=$(echo "$SERVE_LINE" | sed -E 's/.*metrics on 127\.0\.0\.1:([0-9]+)\/metrics.*/\1/')
}

# serve_stop [SIGNAL]: sends SIGNAL (default TERM) to the last started server and waits for it;
# returns its exit status.
serve_stop() {
  kill -"${1:-TERM}" "$SERVE_PID"
  wait "$SERVE_PID"
}

# kills (SIGKILL) every server this test started that is still its child (not yet waited for:
# a reaped pid may belong to another process by now).
serve_cleanup() {
  local job pid
  for job in $(jobs -p); do
    for pid in "${SERVE_PIDS[@]}"; do
      [ "$job" = "$pid" ] && kill -KILL "$pid" 2> /dev/null
    done
  done
  return 0
}
trap serve_cleanup EXIT
