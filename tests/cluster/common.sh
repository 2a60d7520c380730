# tests/cluster/common.sh: shared helpers for the local-cluster scripts `up`
# and `down`. Sourced, never run. Every name it defines starts with `tc_`.

tc_die() {
    echo "torus-cluster: error: $*" >&2
    exit 1
}

tc_log() {
    [ "${TC_QUIET:-0}" = 1 ] || echo "torus-cluster: $*" >&2
}

# Names of kernel objects (netns, bridge, veth) are derived from the port base,
# which is unique per running cluster, so two clusters never collide and
# `down` can find exactly what `up` made. Interface names must stay <= 15 chars.
tc_names() {
    local id=$1
    TC_BRIDGE="tbr$id"
    TC_NS_PREFIX="torus$id-"
}

# tc_pid_alive FILE [MARK]: print the pid in FILE if that process is alive
# and, given MARK, its command line contains MARK (the cluster's base dir).
# The mark guards against a stale pid file whose pid now belongs to someone
# else: `down` must never signal a process that is not this cluster's.
tc_pid_alive() {
    local f=$1 mark=${2:-} pid
    [ -s "$f" ] || return 1
    pid=$(tr -dc '0-9' <"$f")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    if [ -n "$mark" ]; then
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$mark" || return 1
    fi
    echo "$pid"
}

# tc_stop_pids WAIT PID...: SIGTERM every pid, wait up to WAIT seconds for all
# of them to exit, then SIGKILL whatever is left.
tc_stop_pids() {
    local wait_s=$1 i p alive
    shift
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null
    for ((i = 0; i < wait_s * 10; i++)); do
        alive=0
        for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && return 0
        sleep 0.1
    done
    kill -KILL "$@" 2>/dev/null || true
}
