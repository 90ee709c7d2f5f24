# Sourced by the sittings (amx_sitting.sh, noamx_sitting.sh): `pause_pids NAME` checks every
# PID in PAUSE_PIDS (the other work on the machine), stops each (kill -STOP) for the timings
# and resumes them (kill -CONT) when the sitting ends, on an error or on Ctrl-C. NAME is the
# sitting's, for the error message. Exits 2 when a PID names no process.
pause_pids() {
  local p
  for p in ${PAUSE_PIDS:-}; do
    kill -0 "$p" || { echo "$1: PAUSE_PIDS: no process $p" >&2; exit 2; }
  done
  trap 'for p in ${PAUSE_PIDS:-}; do kill -CONT "$p" 2>/dev/null || true; done' EXIT
  trap 'exit 130' INT TERM
  for p in ${PAUSE_PIDS:-}; do kill -STOP "$p"; done
}
