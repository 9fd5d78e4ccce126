#!/usr/bin/env bash
# tests/replication/pg_run.sh -- runs a command against a throwaway PostgreSQL
# server (docs/replication.md, "The PostgreSQL test harness").
#
# Usage: tests/replication/pg_run.sh COMMAND [ARGS...]
#
# Creates a cluster in a new temporary directory (initdb: trust
# authentication, superuser `postgres`, no sync), starts it listening only on
# a Unix socket in that directory (no TCP port; fsync off), runs COMMAND with
#   PGHOST, PGPORT, PGUSER, PGDATABASE   for libpq's defaults, and
#   AGENTMEM_PG_URL                      postgresql://postgres@/postgres?host=DIR&port=PORT
# in its environment, then stops the server and removes the directory -- also
# when COMMAND fails or the script is interrupted (SIGINT, SIGTERM, SIGHUP).
# Exits with COMMAND's status, or 2 when no server could be started (its log
# is printed). Run as root (CI on a fresh Debian), the server runs as the
# unprivileged user `nobody`, as PostgreSQL requires; otherwise as the caller.
# The server binaries are PostgreSQL 15's (Debian's postgresql-15, which
# `make deps` installs), or those of AGENTMEM_PG_BIN.
set -uo pipefail
if [ $# -eq 0 ]; then
  echo "usage: $0 COMMAND [ARGS...]" >&2
  exit 2
fi

bin=${AGENTMEM_PG_BIN:-}
if [ -z "$bin" ]; then
  for v in 15 16 17; do
    if [ -x "/usr/lib/postgresql/$v/bin/initdb" ]; then
      bin=/usr/lib/postgresql/$v/bin
      break
    fi
  done
fi
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ] || [ ! -x "$bin/pg_ctl" ]; then
  echo "pg_run.sh: no PostgreSQL server found (install postgresql-15: make deps)" >&2
  exit 2
fi

# As root, initdb and postgres run as nobody, which must be able to reach
# the directory: under TMPDIR when it can, else under /tmp.
as_server() { "$@"; }
base=${TMPDIR:-/tmp}
if [ "$(id -u)" = 0 ]; then
  as_server() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
  as_server test -x "$base" -a -r "$base" || base=/tmp
fi
dir=$(mktemp -d "$base/agentmem-pg.XXXXXX") || exit 2
port=5432  # only names the socket file: the directory is this run's own

cleanup() {
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1
  fi
  rm -rf "$dir"
}
child=""
# A signal stops COMMAND too; the EXIT trap then stops the server.
on_signal() {
  [ -n "$child" ] && kill -TERM "$child" 2>/dev/null && wait "$child" 2>/dev/null
  exit "$1"
}
trap cleanup EXIT
trap 'on_signal 129' HUP
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

[ "$(id -u)" = 0 ] && chown 65534:65534 "$dir"
if ! as_server "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 \
     --locale=C >"$dir/initdb.log" 2>&1; then
  echo "pg_run.sh: initdb failed:" >&2
  cat "$dir/initdb.log" >&2
  exit 2
fi
if ! as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
     -o "-k $dir -p $port -c listen_addresses= -F -c shared_buffers=16MB -c max_connections=20" \
     start >/dev/null 2>&1; then
  echo "pg_run.sh: the server did not start:" >&2
  cat "$dir/server.log" >&2
  exit 2
fi

# $dir/restart stops the server at once (as a crash would) and starts it again.
as_prefix=""
[ "$(id -u)" = 0 ] && as_prefix="setpriv --reuid=65534 --regid=65534 --clear-groups --"
cat >"$dir/restart" <<EOF
#!/bin/sh
exec $as_prefix "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m immediate -w -t 60 restart >/dev/null
EOF
chmod 755 "$dir/restart"

export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
export AGENTMEM_PG_RESTART=$dir/restart
export AGENTMEM_PG_URL="postgresql://postgres@/postgres?host=$dir&port=$port"
# In the background, so that a signal reaches the trap while COMMAND runs.
"$@" &
child=$!
wait "$child"
exit $?
