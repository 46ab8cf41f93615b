#!/usr/bin/env bash
# Makes sure the brokers the delivery tests publish to answer: Redis (6379), RabbitMQ (5672) and
# NATS with JetStream (4222), on loopback, and PostgreSQL (5432) for the benchmark's peers when it
# is installed. Each one that does not answer is started with the machine's own packages, then
# waited for. Run by .ci/run before the tests and by the tests'
# global setup; a server that answers already is left alone (never restarted).
set -euo pipefail

answers() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

wait_for() {
  local name=$1 port=$2
  for _ in $(seq 1 60); do answers "$port" && return 0; sleep 1; done
  echo "$name did not start: nothing answers on 127.0.0.1:$port" >&2
  return 1
}

if ! answers 6379; then
  echo "Redis is not answering; starting it" >&2
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for Redis 6379
fi

if ! answers 5672; then
  echo "RabbitMQ is not answering; starting it" >&2
  rabbitmq-server -detached
  wait_for RabbitMQ 5672
fi

if ! answers 4222; then
  echo "NATS is not answering; starting it" >&2
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_for NATS 4222
fi

# PostgreSQL, for the benchmark's peers (graphile-worker and pg-boss: `npm run bench -- lateness`),
# when it is installed: a cluster that does not answer is started, and the bench's user and
# database are made when missing. The tests do not need it, so a machine without it is fine.
if command -v pg_lsclusters >/dev/null 2>&1; then
  if ! answers 5432; then
    echo "PostgreSQL is not answering; starting it" >&2
    pg_lsclusters --no-header | while read -r version cluster _; do
      pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" start || true
    done
    wait_for PostgreSQL 5432
  fi
  as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
  if [ "$(as_postgres psql -XtAc "SELECT 1 FROM pg_roles WHERE rolname = 'punctual_bench'")" != 1 ]; then
    as_postgres psql -Xqc "CREATE ROLE punctual_bench LOGIN PASSWORD 'punctual_bench'"
  fi
  if [ "$(as_postgres psql -XtAc "SELECT 1 FROM pg_database WHERE datname = 'punctual_bench'")" != 1 ]; then
    as_postgres psql -Xqc "CREATE DATABASE punctual_bench OWNER punctual_bench"
  fi
fi
