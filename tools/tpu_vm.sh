#!/usr/bin/env bash
# Cloud TPU VM slices for tw_jax: thin wrappers around gcloud to create a slice, put the code on
# every worker, start the same command on all of them, read the logs, stop and delete.
# See usage() below, or run with --help. --dry-run prints the gcloud commands and runs nothing.
# The single-quoted remote commands below are expanded on the workers, not here:
# shellcheck disable=SC2016
set -euo pipefail

PROG=tpu_vm.sh
# The checkout this script belongs to: what `setup` copies when no --repo is given.
CHECKOUT="$(cd "$(dirname "$0")/.." && pwd)"

usage() {
  cat <<'EOF'
Usage: tools/tpu_vm.sh SUBCOMMAND [FLAGS] [--dry-run]

  create  --name N --zone Z --type TYPE [--spot | --preemptible] [--version RUNTIME]
          [--queued | --no-queued]
            TYPE e.g. v4-8, v5litepod-16, v5p-8, v6e-8. RUNTIME defaults by type: v2/v3/v4
            tpu-ubuntu2204-base, v5litepod v2-alpha-tpuv5-lite, v5p v2-alpha-tpuv5, v6e
            v2-alpha-tpuv6e. --spot makes a queued resource (ID N, node N) unless --no-queued;
            --queued --preemptible asks for the best-effort tier.
  setup   --name N --zone Z [--repo URL_OR_DIR] [--ref REF]
            On every worker: a fresh ~/tw_jax (git clone of URL at REF, or a copy of DIR:
            with a git checkout, the files git does not ignore), Python 3.11 if the image has
            an older python3, then `bash tools/setup.sh tpu`. Default --repo: this checkout.
  run     --name N --zone Z -- [VAR=VALUE ...] COMMAND [ARG ...]
            On every worker, in ~/tw_jax with its .venv on PATH, detached (nohup): output
            appended to ~/tw_jax_run.log, pid in ~/tw_jax_run.pid. Refused on a worker where
            the previous run is still alive.
  logs    --name N --zone Z [--worker K|all] [--follow]
            The last 200 lines of ~/tw_jax_run.log on worker K (default 0); --follow keeps going.
  stop    --name N --zone Z
            SIGTERM to the run on every worker (tw-jax saves a checkpoint and exits 0), then
            waits until it has exited.
  delete  --name N --zone Z [--queued]
            Deletes the node, or with --queued the queued resource and its node (gcloud asks).
  status  --name N --zone Z [--queued]
            gcloud's description of the node (or of the queued resource).

Every subcommand also takes --project P and --dry-run (print each gcloud command, shell-quoted,
one per line, and run nothing). Flags take their value as `--flag V` or `--flag=V`.
EOF
}

# A usage error: one line on stderr, exit 2.
die() {
  printf '%s: %s\n' "$PROG" "$1" >&2
  exit 2
}

# One word for a POSIX shell, the way Python's shlex.quote writes it: as is when it holds only
# safe characters, otherwise in single quotes (a ' inside becomes '"'"').
SAFE='abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-'
quote() {
  local sq="'" q="'\"'\"'"
  case $1 in
    '') printf "''" ;;
    *[!$SAFE]*) printf "'%s'" "${1//$sq/$q}" ;;
    *) printf '%s' "$1" ;;
  esac
}

# Words quoted and joined by spaces: one shell command line.
join_quoted() {
  local out="" word
  for word in "$@"; do out="${out:+$out }$(quote "$word")"; done
  printf '%s' "$out"
}

# Runs gcloud, or with --dry-run prints the command instead.
gcloud_() {
  if [ "$dry_run" = 1 ]; then
    printf '%s\n' "$(join_quoted gcloud "$@")"
  else
    gcloud "$@"
  fi
}

runtime_for_type() {
  case $1 in
    v2-* | v3-* | v4-*) echo tpu-ubuntu2204-base ;;
    v5litepod-*) echo v2-alpha-tpuv5-lite ;;
    v5p-*) echo v2-alpha-tpuv5 ;;
    v6e-*) echo v2-alpha-tpuv6e ;;
    *) return 1 ;;
  esac
}

# ---- remote commands (run by the login shell of each worker, in the ssh user's home) ----------
# Single-quoted: $, ~ and $(...) are the worker's. The names below are fixed: ~/tw_jax holds the
# checkout and its .venv, ~/tw_jax_run.log the run's output, ~/tw_jax_run.pid its pid.

# tw_jax needs Python 3.11+; Cloud TPU images (Ubuntu 22.04) have 3.10. apt waits for the lock
# that unattended-upgrades holds on a freshly booted VM instead of failing.
REMOTE_PYTHON='{ python3 -c "import sys; sys.exit(sys.version_info < (3, 11))" || python3.11 -c "import ensurepip" 2>/dev/null || { sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq python3.11 python3.11-venv; }; }'
REMOTE_INSTALL='cd tw_jax && bash tools/setup.sh tpu'
# A process that has exited but was not reaped yet (a zombie) is not alive.
REMOTE_ALIVE='alive() { kill -0 "$1" 2>/dev/null && ! grep -qs "^State:.*Z" "/proc/$1/status"; }'
REMOTE_GUARD='if alive "$(cat ~/tw_jax_run.pid 2>/dev/null)"; then echo "a tw-jax run (pid $(cat ~/tw_jax_run.pid)) is still running on $(hostname)" >&2; exit 1; fi'
REMOTE_STOP='pid=$(cat ~/tw_jax_run.pid 2>/dev/null) && alive "$pid" || { echo "no tw-jax run on $(hostname)"; exit 0; }; kill -TERM "$pid"; echo "SIGTERM sent to pid $pid on $(hostname)"; while alive "$pid"; do sleep 1; done; echo "pid $pid on $(hostname) has exited"'

# Starts the user's words detached. They follow `env --` so that leading VAR=VALUE words set
# variables even when quoted; nohup, env and the command share one pid (each execs the next):
# the pid recorded is the command's.
remote_run() {
  printf '%s' "$REMOTE_ALIVE; $REMOTE_GUARD; cd tw_jax || exit 1; "
  printf '%s' 'PATH="$PWD/.venv/bin:$PATH" nohup env -- '"$(join_quoted "$@")"' >> ~/tw_jax_run.log 2>&1 < /dev/null & '
  printf '%s' 'echo $! > ~/tw_jax_run.pid; echo "started pid $! on $(hostname), log ~/tw_jax_run.log"'
}

# ---- subcommands ------------------------------------------------------------------------------

cmd_create() {
  [ -n "$type" ] || die "create needs --type (e.g. v4-8, v5litepod-16)"
  if [ "$spot" = 1 ] && [ "$preemptible" = 1 ]; then die "--spot and --preemptible exclude each other"; fi
  if [ -z "$version" ]; then
    version="$(runtime_for_type "$type")" ||
      die "no default runtime for --type $type (known: v2-, v3-, v4-, v5litepod-, v5p-, v6e-); pass --version"
  fi
  if [ -z "$queued" ]; then queued="$spot"; fi
  if [ "$queued" = 1 ]; then
    local tier=()
    if [ "$spot" = 1 ]; then tier=(--spot); elif [ "$preemptible" = 1 ]; then tier=(--best-effort); fi
    gcloud_ compute tpus queued-resources create "$name" --node-id "$name" "${where[@]}" \
      --accelerator-type "$type" --runtime-version "$version" ${tier[@]+"${tier[@]}"}
  else
    local tier=()
    if [ "$spot" = 1 ]; then tier=(--spot); elif [ "$preemptible" = 1 ]; then tier=(--preemptible); fi
    gcloud_ compute tpus tpu-vm create "$name" "${where[@]}" \
      --accelerator-type "$type" --version "$version" ${tier[@]+"${tier[@]}"}
  fi
}

# Writes the files of the git checkout DIR that git does not ignore (tracked or not; deleted
# tracked files skipped) into STAGE: the code without .venv, data or build outputs.
stage_checkout() {
  local dir="$1" stage="$2"
  rm -rf "$stage" && mkdir -p "$stage"
  git -C "$dir" ls-files -z --cached --others --exclude-standard |
    (cd "$dir" && while IFS= read -r -d '' f; do if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi; done) |
    tar -C "$dir" --null -T - -cf - | tar -C "$stage" -xf -
}

cmd_setup() {
  local ssh=(compute tpus tpu-vm ssh "$name" "${where[@]}" --worker=all --command)
  if [ -z "$repo" ]; then repo="$CHECKOUT"; fi
  if [ ! -d "$repo" ]; then
    local clone
    clone="git clone --quiet $(quote "$repo") tw_jax"
    if [ -n "$ref" ]; then clone="$clone && git -C tw_jax checkout --quiet $(quote "$ref")"; fi
    gcloud_ "${ssh[@]}" "$REMOTE_PYTHON && rm -rf tw_jax && $clone && $REMOTE_INSTALL"
    return
  fi
  [ -z "$ref" ] || die "--ref needs a git URL as --repo; a folder is copied as it is"
  local source="$repo"
  if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # A fixed place per slice name (no mktemp) so that --dry-run prints what a real run uses.
    staging="${TMPDIR:-/tmp}/tw_jax_setup.$name"
    source="$staging/tw_jax"
    if [ "$dry_run" = 0 ]; then
      trap 'rm -rf "$staging"' EXIT
      stage_checkout "$repo" "$source"
    fi
  fi
  gcloud_ "${ssh[@]}" "rm -rf tw_jax"
  gcloud_ compute tpus tpu-vm scp --recurse "$source" "$name:tw_jax" "${where[@]}" --worker=all
  gcloud_ "${ssh[@]}" "$REMOTE_PYTHON && $REMOTE_INSTALL"
}

cmd_run() {
  [ "${#command[@]}" -gt 0 ] || die "run needs the command after -- (e.g. -- tw-jax train --gin_file=...)"
  gcloud_ compute tpus tpu-vm ssh "$name" "${where[@]}" --worker=all --command "$(remote_run "${command[@]}")"
}

cmd_logs() {
  local tail="tail -n 200"
  if [ "$follow" = 1 ]; then tail="tail -n 200 -F"; fi
  gcloud_ compute tpus tpu-vm ssh "$name" "${where[@]}" "--worker=${worker:-0}" --command "$tail ~/tw_jax_run.log"
}

cmd_stop() {
  gcloud_ compute tpus tpu-vm ssh "$name" "${where[@]}" --worker=all --command "$REMOTE_ALIVE; $REMOTE_STOP"
}

cmd_delete() {
  if [ "$queued" = 1 ]; then
    gcloud_ compute tpus queued-resources delete "$name" "${where[@]}" --force
  else
    gcloud_ compute tpus tpu-vm delete "$name" "${where[@]}"
  fi
}

cmd_status() {
  if [ "$queued" = 1 ]; then
    gcloud_ compute tpus queued-resources describe "$name" "${where[@]}"
  else
    gcloud_ compute tpus tpu-vm describe "$name" "${where[@]}"
  fi
}

# ---- arguments --------------------------------------------------------------------------------

dry_run=0
if [ "${1:-}" = --dry-run ]; then dry_run=1 && shift; fi
case "${1:-}" in
  -h | --help) usage && exit 0 ;;
  '') die "missing subcommand (create, setup, run, logs, stop, delete, status; see --help)" ;;
esac
sub="$1"
shift
# The flags each subcommand takes (besides --name, --zone, --project, --dry-run, --help).
case "$sub" in
  create) allowed="type spot preemptible version queued no-queued" ;;
  setup) allowed="repo ref" ;;
  run | stop) allowed="" ;;
  logs) allowed="worker follow" ;;
  delete | status) allowed="queued" ;;
  *) die "unknown subcommand '$sub' (create, setup, run, logs, stop, delete, status; see --help)" ;;
esac

name="" zone="" project="" type="" version="" repo="" ref="" worker=""
spot=0 preemptible=0 follow=0 queued=""
command=()
while [ $# -gt 0 ]; do
  arg="$1"
  shift
  case "$arg" in
    --) command=("$@") && break ;;
    -h | --help) usage && exit 0 ;;
    --dry-run) dry_run=1 && continue ;;
    --*=*) flag="${arg%%=*}" value="${arg#*=}" has_value=1 ;;
    --*) flag="$arg" value="" has_value=0 ;;
    *) die "unexpected argument '$arg' (a command for run goes after --)" ;;
  esac
  flag="${flag#--}"
  case " name zone project $allowed " in
    *" $flag "*) ;;
    *) die "$sub does not take --$flag (see --help)" ;;
  esac
  case "$flag" in
    spot | preemptible | follow | queued | no-queued)
      [ "$has_value" = 0 ] || die "--$flag takes no value"
      case "$flag" in
        spot) spot=1 ;;
        preemptible) preemptible=1 ;;
        follow) follow=1 ;;
        queued) [ "$queued" != 0 ] || die "--queued and --no-queued exclude each other"; queued=1 ;;
        no-queued) [ "$queued" != 1 ] || die "--queued and --no-queued exclude each other"; queued=0 ;;
      esac
      ;;
    *)
      if [ "$has_value" = 0 ]; then
        # A next word that is a flag means the value is missing (no value here starts with --).
        case "${1:---}" in --*) die "--$flag needs a value" ;; esac
        value="$1"
        shift
      fi
      [ -n "$value" ] || die "--$flag needs a value"
      case "$flag" in
        name) name="$value" ;;
        zone) zone="$value" ;;
        project) project="$value" ;;
        type) type="$value" ;;
        version) version="$value" ;;
        repo) repo="$value" ;;
        ref) ref="$value" ;;
        worker) worker="$value" ;;
      esac
      ;;
  esac
done

if [ "$sub" != run ] && [ "${#command[@]}" -gt 0 ]; then die "$sub takes no command after --"; fi
[ -n "$name" ] || die "$sub needs --name"
[ -n "$zone" ] || die "$sub needs --zone"
# Cloud TPU node names: lower-case letters, digits and hyphens, starting with a letter.
case "$name" in
  [a-z]*[!a-z0-9-]* | [!a-z]* | *-) die "--name '$name' is not a TPU name (a-z, 0-9, -; starts with a letter)" ;;
esac
case "${worker:-0}" in
  all | [0-9] | [0-9][0-9] | [0-9][0-9][0-9]) ;;
  *) die "--worker is a worker number or all, not '$worker'" ;;
esac
where=(--zone "$zone")
if [ -n "$project" ]; then where+=(--project "$project"); fi

"cmd_$sub"
