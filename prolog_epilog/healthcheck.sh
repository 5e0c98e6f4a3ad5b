#!/bin/bash
# healthcheck HealthCheckProgram for slurm.conf; slurmd runs it as root. Written by `healthcheck slurm install-hooks`
# from the template shipped in the package (healthcheck/deploy/templates/healthcheck.sh): do not edit, re-install.
hook=slurm-check
# What follows is the same in the three hooks (healthcheck/deploy/templates/client.bash).
# With the node's agent up (healthcheck-agent.service: its pid file names a live process), this bash
# process hands the hook to it through its door, a FIFO beside its socket that only root can write:
# one request line naming this process (its pid and its start time) and a pipe it holds, into which a
# worker the agent forked ahead answers (see healthcheck/agent/door.py). No interpreter starts for a hook
# the agent takes. The door and the pid file must be root's, and the pid file's "PID START" must name a
# live agent that is not stopped (a pid reused by another process, or a stopped agent behind a full door,
# is passed over at once). Without the agent, or when it gives no answer within a second, the Python
# client below runs, its budget counted from this hook's start: it tries the agent's socket, then runs
# the hook in its own process. The door needs bash 5 ($EPOCHREALTIME, the hook's start in microseconds);
# an older bash goes straight to the Python client.
knock() {  # returns (the Python client runs) when the agent is not there or does not take the hook
  local LC_ALL=C apid astart me stat line pgid end now left rc acting=0  # C: "." in read's timeouts
  [[ -n $t0 && -n $door && -p $door && -O $door && -O "/run/healthcheck/agent.pid" ]] || return
  { read -r apid astart <"/run/healthcheck/agent.pid"; } 2>/dev/null && [[ $apid =~ ^[0-9]+$ && $astart =~ ^[0-9]+$ ]] || return
  { read -r stat <"/proc/$apid/stat"; } 2>/dev/null || return
  set -- ${stat##*) }  # the fields after the command: 1 the state, 20 the start time (field 22)
  [[ $1 == [RSD] && ${20} == "$astart" ]] || return
  { read -r stat <"/proc/$$/stat"; } 2>/dev/null || return
  set -- ${stat##*) }
  me=${20}
  { exec 3<> <(:); } 2>/dev/null || return
  { printf '2 %s 3 %s %s %s %s %s%s\n' "$$" "$t0" "$me" "$BASH" "$hook" "/etc/healthcheck/healthcheck.toml" "" 1<>"$door"; } 2>/dev/null \
    || { exec 3>&-; return; }
  IFS= read -r -t 1 -u 3 line
  set -- $line
  if [[ $1 == accepted && $2 =~ ^[0-9]+$ && $3 =~ ^[0-9]+$ ]]; then
    pgid=$3 end=$(( t0 + $2 + 500000 ))
    exec 4</proc/self/fd/3 3>&-  # the worker now holds the pipe's only write end: its exit ends the pipe
    while now=${EPOCHREALTIME//[!0-9]/}; (( now < end )); do
      printf -v left '%d.%06d' $(( (end - now) / 1000000 )) $(( (end - now) % 1000000 ))
      if IFS= read -r -t "$left" -u 4 line; then
        case $line in
          "log "*) printf '%s\n' "${line#log }" >&2 ;;
          "budget "*) [[ ${line#budget } =~ ^[0-9]+$ ]] && end=$(( t0 + ${line#budget } + 500000 )) ;;
          "acting "*) acting=${line#acting }; [[ $acting =~ ^[0-9]{1,3}$ ]] && (( acting < 256 )) || acting=1 ;;
          "done "*) rc=${line#done }; [[ $rc =~ ^[0-9]{1,3}$ ]] && (( rc < 256 )) || rc=0; exit "$rc" ;;
        esac
      elif (( $? <= 128 )); then  # end of the pipe: the worker ended without a verdict (killed, a bug of ours)
        line="it ended"
        break
      fi
      line="timed out"
    done
    [[ $line == "it ended" ]] || { line="timed out"; (( pgid > 1 )) && kill -9 -- "-$pgid" 2>/dev/null; }  # past the budget
    if (( acting )); then  # it had begun to drain the node: fail closed (Slurm requeues the job)
      printf 'healthcheck: %s\n' "the agent's worker gave no verdict ($line) after it began to drain the node; exit $acting" >&2
      exit "$acting"
    fi
    printf 'healthcheck: %s\n' "the agent's worker gave no verdict ($line); nothing judged" >&2
    exit 0
  fi
  exec 3>&-
  if [[ $1 == refused ]]; then
    printf 'healthcheck: %s\n' "agent not used, the hook runs here: agent refused: ${line#refused }" >&2
  else
    printf 'healthcheck: %s\n' "agent not used, the hook runs here: no answer at its door" >&2
  fi
}
set -f
t0=${EPOCHREALTIME//[!0-9]/}
door=/run/healthcheck/agent.door
knock
exec /opt/healthcheck/.venv/bin/python -IS -c '
import sys
sys.path.append("/opt/healthcheck/.venv/lib/python" + str(sys.version_info[0]) + "." + str(sys.version_info[1]) + "/site-packages")
try:
    from healthcheck.hook.client import run
except ImportError:
    import site
    site.main()
    from healthcheck.hook.client import run
run([sys.argv[1], "--config", "/etc/healthcheck/healthcheck.toml", "--agent", "/run/healthcheck/agent.sock"], *sys.argv[2:3])
' "$hook" "$t0"
