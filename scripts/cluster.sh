#!/usr/bin/env bash
# A three-node MariaDB Galera cluster on this one host, for trying punctual on several database
# hosts and for `npm run test:cluster`. It runs on its own ports and in a temporary folder, with
# --no-defaults: the MariaDB server the host may run already, and its configuration, stay untouched.
#
#   scripts/cluster.sh up        start the three nodes (again: nothing to do); prints DATABASE_URL
#   scripts/cluster.sh down      stop them and remove their folder
#   scripts/cluster.sh status    each node's pid, wsrep state and cluster size; 1 unless all 3 are ready
#   scripts/cluster.sh url       the multi-host DATABASE_URL
#   scripts/cluster.sh kill N    kill -9 node N (1..3)
#   scripts/cluster.sh start N   start node N again; waits until it has rejoined (IST or SST)
#
# Settings (environment): CLUSTER_SQL_PORTS (33061,33062,33063), CLUSTER_GCOMM_PORTS
# (45671,45672,45673), CLUSTER_IST_PORTS (45681,45682,45683), CLUSTER_SST_PORTS
# (45691,45692,45693), CLUSTER_STATE (the state file, /tmp/punctual-cluster.state),
# CLUSTER_DATABASE (punctual, the database the printed URL names), CLUSTER_WAIT_S (120, a node's
# start or join), CLUSTER_SETTLE_S (60, the other nodes' return to Synced after a join).
set -euo pipefail

IFS=, read -r -a SQL_PORTS <<<"${CLUSTER_SQL_PORTS:-33061,33062,33063}"
IFS=, read -r -a GCOMM_PORTS <<<"${CLUSTER_GCOMM_PORTS:-45671,45672,45673}"
IFS=, read -r -a IST_PORTS <<<"${CLUSTER_IST_PORTS:-45681,45682,45683}"
IFS=, read -r -a SST_PORTS <<<"${CLUSTER_SST_PORTS:-45691,45692,45693}"
STATE=${CLUSTER_STATE:-/tmp/punctual-cluster.state}
DATABASE=${CLUSTER_DATABASE:-punctual}
WAIT_S=${CLUSTER_WAIT_S:-120}
SETTLE_S=${CLUSTER_SETTLE_S:-60}
NODES=3
RUN_AS=mysql

die() { echo "cluster: $*" >&2; exit 1; }

find_provider() {
  local p
  for p in /usr/lib/galera/libgalera_smm.so /usr/lib/galera-4/libgalera_smm.so /usr/lib/libgalera_smm.so \
    /usr/lib/x86_64-linux-gnu/galera/libgalera_smm.so /usr/lib64/galera-4/libgalera_smm.so; do
    [[ -f $p ]] && { echo "$p"; return; }
  done
  return 1
}

ensure_installed() {
  local missing=()
  command -v mariadbd >/dev/null || [[ -x /usr/sbin/mariadbd ]] || missing+=(mariadb-server)
  find_provider >/dev/null || missing+=(galera-4)
  command -v rsync >/dev/null || missing+=(rsync)
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "cluster: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null \
      || die "could not install ${missing[*]}"
  fi
  id "$RUN_AS" >/dev/null 2>&1 || die "the user $RUN_AS is missing"
}

mariadbd_bin() { command -v mariadbd || echo /usr/sbin/mariadbd; }

# The Galera ports as configured, before a shift.
BASE_GCOMM_PORTS=("${GCOMM_PORTS[@]}") BASE_IST_PORTS=("${IST_PORTS[@]}") BASE_SST_PORTS=("${SST_PORTS[@]}")
PORT_SHIFT=0
# The Galera ports PORT_SHIFT up from those configured (a cluster started again on other ports).
shift_ports() {
  local i
  for i in 0 1 2; do
    GCOMM_PORTS[i]=$((BASE_GCOMM_PORTS[i] + PORT_SHIFT))
    IST_PORTS[i]=$((BASE_IST_PORTS[i] + PORT_SHIFT))
    SST_PORTS[i]=$((BASE_SST_PORTS[i] + PORT_SHIFT))
  done
}

# The state file: DIR=<folder>, PORT_SHIFT=<n> and PID_<n>=<pid>.
load_state() {
  DIR=''
  PORT_SHIFT=0
  PID_1='' PID_2='' PID_3=''
  # shellcheck disable=SC1090
  [[ -f $STATE ]] && source "$STATE"
  shift_ports
  return 0
}
save_state() {
  { echo "DIR=$DIR"; echo "PORT_SHIFT=$PORT_SHIFT"; for n in 1 2 3; do local v="PID_$n"; echo "PID_$n=${!v}"; done; } >"$STATE.tmp"
  mv "$STATE.tmp" "$STATE"
}

alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }
node_pid() { local v="PID_$1"; echo "${!v}"; }
sock() { echo "$DIR/node$1/mysqld.sock"; }
# Root through the node's socket (the OS root user, unix_socket authentication).
sql() { local n=$1; shift; mariadb --no-defaults --socket="$(sock "$n")" --user=root -N -B -e "$*" 2>/dev/null; }
wsrep() { sql "$1" "SHOW GLOBAL STATUS LIKE '$2'" | awk '{print $2}'; }

cluster_address() {
  local a=() p
  for p in "${GCOMM_PORTS[@]}"; do a+=("127.0.0.1:$p"); done
  (IFS=,; echo "gcomm://${a[*]}")
}

url() {
  local a=() p
  for p in "${SQL_PORTS[@]}"; do a+=("127.0.0.1:$p"); done
  (IFS=,; echo "mysql://root@${a[*]}/$DATABASE")
}

# The options every start of node n shares (the server itself, and its position recovery).
node_options() {
  local n=$1 i=$(($1 - 1))
  local dir="$DIR/node$n"
  NODE_OPTIONS=(--no-defaults --user="$RUN_AS"
    --datadir="$dir/data" --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid"
    --port="${SQL_PORTS[$i]}" --bind-address=127.0.0.1
    --skip-name-resolve --performance-schema=OFF --skip-log-bin
    --innodb-buffer-pool-size=64M --innodb-log-file-size=48M --innodb-flush-log-at-trx-commit=2
    --max-connections=300
    --binlog-format=ROW --innodb-autoinc-lock-mode=2 --default-storage-engine=InnoDB
    --wsrep-on=ON --wsrep-provider="$(find_provider)"
    --wsrep-cluster-name=punctual-test --wsrep-cluster-address="$(cluster_address)"
    --wsrep-node-name="node$n" --wsrep-node-address=127.0.0.1
    --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:${GCOMM_PORTS[$i]};ist.recv_addr=127.0.0.1:${IST_PORTS[$i]};gcache.size=128M"
    --wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:${SST_PORTS[$i]}"
    --wsrep-slave-threads=2)
}

# A node killed with -9 leaves seqno -1 in grastate.dat: without its position it would need a
# full copy (SST), whose rsync donor holds a global read lock and can hang under load. Its
# position is in InnoDB; read it back (as galera_recovery does) so that it rejoins by IST. The
# recovering server has done its part once it prints the position, but it can hang on its way
# out (seen after the kill cut a table's DDL short), so it is stopped then; it listens on no port.
recovered_position() {
  local n=$1 dir="$DIR/node$1" log pid deadline=$((SECONDS + 60))
  [[ -f $dir/data/grastate.dat ]] && grep -q '^seqno: *-1' "$dir/data/grastate.dat" || return 0
  log="$dir/recover.log"
  : >"$log"
  chown "$RUN_AS:" "$log"
  node_options "$n"
  "$(mariadbd_bin)" "${NODE_OPTIONS[@]}" --skip-networking --log-error="$log" --wsrep-recover </dev/null >/dev/null 2>&1 &
  pid=$!
  while ((SECONDS < deadline)) && alive "$pid" && ! grep -aq 'WSREP: Recovered position:' "$log"; do sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  grep -a 'WSREP: Recovered position:' "$log" | tail -n 1 | sed 's/.*Recovered position: *//' || true
}

start_node() {
  local n=$1 bootstrap=${2:-} extra=() position
  local dir="$DIR/node$n"
  [[ $bootstrap == new ]] && extra+=(--wsrep-new-cluster)
  position=$(recovered_position "$n")
  [[ -n $position ]] && extra+=(--wsrep-start-position="$position")
  # A node that was killed (or its position's recovery) may have left a stale socket behind; its
  # state (grastate.dat) stays for IST.
  rm -f "$dir/mysqld.sock" "$dir/mysqld.sock.lock"
  node_options "$n"
  setsid "$(mariadbd_bin)" "${NODE_OPTIONS[@]}" --log-error="$dir/error.log" \
    "${extra[@]}" </dev/null >>"$dir/stdout.log" 2>&1 &
  printf -v "PID_$n" '%s' "$!"
  save_state
}

synced() { [[ $(wsrep "$1" wsrep_ready) == ON && $(wsrep "$1" wsrep_local_state_comment) == Synced ]]; }

# Waits until node n is synced and sees `size` nodes; 1 when it stopped or the wait ran out (its
# error log's tail on stderr).
wait_node() {
  local n=$1 size=$2 deadline=$((SECONDS + WAIT_S))
  while ((SECONDS < deadline)); do
    if ! alive "$(node_pid "$n")"; then
      tail -n 20 "$DIR/node$n/error.log" >&2
      echo "cluster: node $n stopped while starting" >&2
      return 1
    fi
    if synced "$n" && [[ $(wsrep "$n" wsrep_cluster_size) == "$size" ]]; then
      return 0
    fi
    sleep 0.5
  done
  tail -n 20 "$DIR/node$n/error.log" >&2
  echo "cluster: node $n did not reach cluster size $size within $WAIT_S s" >&2
  return 1
}

# Stops node n (kill -9), empties its data and starts it to join the nodes that run with a full
# copy (SST), as a new node would; waits until it has.
rejoin_from_copy() {
  local n=$1 pid
  pid=$(node_pid "$n")
  alive "$pid" && kill -9 "$pid" 2>/dev/null
  while alive "$pid"; do sleep 0.1; done
  # An SST's rsync daemon may outlive the node; it holds the SST port.
  pkill -9 -f "rsync --daemon.*$DIR/node$n/" 2>/dev/null || true
  find "$DIR/node$n/data" -mindepth 1 -delete
  start_node "$n"
  wait_node "$n" "$(($(running_nodes | wc -l)))"
}

# Waits until every node that runs is synced. A node that stays out of sync (a donor whose state
# transfer hung keeps its read lock, and every write through it waits for good, while the
# cluster still counts it) is made to join again from a full copy.
settle() {
  local deadline=$((SECONDS + SETTLE_S)) n stuck
  while :; do
    stuck=()
    for n in $(running_nodes); do synced "$n" || stuck+=("$n"); done
    [[ ${#stuck[@]} -eq 0 ]] && return 0
    ((SECONDS < deadline)) || break
    sleep 0.5
  done
  for n in "${stuck[@]}"; do
    echo "cluster: node $n stayed $(wsrep "$n" wsrep_local_state_comment) for $SETTLE_S s; it joins again from a full copy" >&2
    rejoin_from_copy "$n" || return 1
  done
}

# Starts node n to join the nodes that run (`size` with it) and waits until it has, and until
# every node is synced again. A node killed under load sometimes cannot rejoin from its own
# state (a join that hangs or stops); then it joins again with a full copy.
join_node() {
  local n=$1 size=$2
  start_node "$n"
  if ! wait_node "$n" "$size"; then
    echo "cluster: node $n rejoins again from a full copy of the data" >&2
    rejoin_from_copy "$n" || return 1
  fi
  settle
}

all_up() {
  [[ -n $DIR && -d $DIR ]] || return 1
  local n
  for n in 1 2 3; do
    alive "$(node_pid "$n")" || return 1
    synced "$n" && [[ $(wsrep "$n" wsrep_cluster_size) == 3 ]] || return 1
  done
}

# Any node still running, to join from.
running_nodes() { local n; for n in 1 2 3; do alive "$(node_pid "$n")" && echo "$n"; done; return 0; }

# Three new nodes in a new folder: node 1 bootstraps, the others take their state from it (SST),
# one after the other. 1 when a joiner did not join (the nodes it started still run).
start_fresh() {
  [[ -n $DIR && -d $DIR ]] && rm -rf "$DIR"
  DIR=$(mktemp -d /tmp/punctual-cluster.XXXXXX)
  chmod 755 "$DIR"
  local n
  for n in 1 2 3; do
    mkdir -p "$DIR/node$n/data"
    chown -R "$RUN_AS:" "$DIR/node$n"
  done
  mariadb-install-db --no-defaults --user="$RUN_AS" --datadir="$DIR/node1/data" \
    --auth-root-authentication-method=socket --skip-test-db >"$DIR/node1/install.log" 2>&1 \
    || { cat "$DIR/node1/install.log" >&2; die "mariadb-install-db failed"; }
  PID_1='' PID_2='' PID_3=''
  save_state
  start_node 1 new
  wait_node 1 1 || die "node 1 did not start"
  sql 1 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
    CREATE DATABASE IF NOT EXISTS \`$DATABASE\` CHARACTER SET utf8mb4" || die "could not create the root user"
  join_node 2 2 && join_node 3 3
}

# Kills every node of the state's cluster and waits until they are gone.
stop_nodes() {
  local n pid
  for n in 1 2 3; do
    pid=$(node_pid "$n")
    alive "$pid" && kill -9 "$pid" 2>/dev/null || true
  done
  for n in 1 2 3; do
    pid=$(node_pid "$n")
    while alive "$pid"; do sleep 0.1; done
  done
  # An SST's rsync daemon may outlive its node; it holds the SST port.
  if [[ -n $DIR ]]; then pkill -9 -f "rsync --daemon.*$DIR/" 2>/dev/null || true; fi
}

cmd_up() {
  load_state
  if all_up; then
    url
    return
  fi
  ensure_installed
  local running
  running=$(running_nodes)
  if [[ -z $running ]]; then
    # Nothing runs: start afresh. Now and then a joiner's first state transfer fails at once, on
    # its retry too (the donor answers "No message of desired type"). The cluster's ports lie in
    # the kernel's range for outgoing connections, where a test run's closed connections linger:
    # the new cluster started again has its Galera ports 100 further up.
    if ! start_fresh; then
      echo "cluster: a joiner did not join; a new cluster starts once more, on other Galera ports" >&2
      stop_nodes
      PORT_SHIFT=100
      shift_ports
      start_fresh || die "the joiners did not join a new cluster, twice"
    fi
  else
    # Some nodes run: those out of sync join again, then the others start and rejoin.
    settle || die "a node out of sync did not rejoin"
    local n size
    size=$(running_nodes | wc -l)
    for n in 1 2 3; do
      alive "$(node_pid "$n")" && continue
      size=$((size + 1))
      join_node "$n" "$size" || die "node $n did not rejoin"
    done
  fi
  all_up || die "the cluster is not complete"
  url
}

cmd_down() {
  load_state
  stop_nodes
  # rsync daemons an SST left behind belong to the node folders.
  [[ -n $DIR && -d $DIR && $DIR == /tmp/punctual-cluster.* ]] && rm -rf "$DIR"
  rm -f "$STATE"
  echo "cluster: down"
}

cmd_status() {
  load_state
  [[ -n $DIR ]] || { echo "cluster: not running"; return 1; }
  echo "folder: $DIR"
  local n ok=0
  for n in 1 2 3; do
    local pid
    pid=$(node_pid "$n")
    if alive "$pid"; then
      local ready size state
      ready=$(wsrep "$n" wsrep_ready) size=$(wsrep "$n" wsrep_cluster_size) state=$(wsrep "$n" wsrep_local_state_comment)
      echo "node $n: pid $pid port ${SQL_PORTS[$((n - 1))]} ready=$ready size=$size state=$state"
      # A node out of sync (a donor) may hold every write through it.
      [[ $ready == ON && $size == 3 && $state == Synced ]] || ok=1
    else
      echo "node $n: down"
      ok=1
    fi
  done
  echo "DATABASE_URL=$(url)"
  return $ok
}

check_n() { [[ ${1:-} =~ ^[123]$ ]] || die "name a node: 1, 2 or 3"; }

cmd_kill() {
  check_n "${1:-}"
  load_state
  local pid
  pid=$(node_pid "$1")
  alive "$pid" || { echo "cluster: node $1 is not running"; return 0; }
  kill -9 "$pid"
  while alive "$pid"; do sleep 0.05; done
  echo "cluster: node $1 killed"
}

cmd_start() {
  check_n "${1:-}"
  load_state
  [[ -n $DIR && -d $DIR ]] || die "no cluster; run: scripts/cluster.sh up"
  alive "$(node_pid "$1")" && { echo "cluster: node $1 runs already"; return 0; }
  local running
  running=$(running_nodes)
  [[ -n $running ]] || die "no node runs to join; run: scripts/cluster.sh down && scripts/cluster.sh up"
  join_node "$1" $(($(echo "$running" | wc -l) + 1)) || die "node $1 did not rejoin"
  echo "cluster: node $1 rejoined"
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  url) url ;;
  kill) cmd_kill "${2:-}" ;;
  start) cmd_start "${2:-}" ;;
  *) die "usage: scripts/cluster.sh up|down|status|url|kill N|start N" ;;
esac
