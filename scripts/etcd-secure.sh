#!/usr/bin/env bash
# Turn on etcd's authentication for berth: one user and one role per process,
# each limited to the key ranges that process reads and writes, and a root user.
#
#   ETCDCTL_ENDPOINTS=https://m1:2379,https://m2:2379,https://m3:2379 \
#   ETCDCTL_CACERT=ca.crt ETCDCTL_CERT=client.crt ETCDCTL_KEY=client.key \
#   scripts/etcd-secure.sh PASSWORD_DIR
#
# etcdctl's own variables say where etcd is. Mutual TLS is etcd's to enforce:
# start every member with --client-cert-auth --trusted-ca-file=ca.crt
# --cert-file/--key-file, and give berth a client certificate WITHOUT a Common
# Name (with auth on, etcd's gateway takes a CN as the user name and skips the
# password). Each user's password is read from PASSWORD_DIR/<user> if that
# file exists, else generated there (mode 0600): give it to the process as
# BERTH_ETCD_USER=<user> and BERTH_ETCD_PASSWORD. Running it again creates
# nothing twice and adds grants a newer berth needs; to narrow a role, delete
# it (etcdctl role delete berth-<process>) and run the script again.
#
# The key layout is berth/store/keys.py's. Who may do what:
#   berth-scheduler      reads everything but secrets; writes Bindings, the moves
#                        its leader started (for the next), ledger
#                        records (and deletes those past retention), events
#   berth-propagator     reads everything but secrets, and the secrets of
#                        Clusters and Applications; writes statuses, ledger
#                        records, events; may write applications, their
#                        histories and rollout controls (etcd has no
#                        delete-only grant) and only deletes those it has
#                        cleaned up; cannot write Bindings
#                        (and the work of pull clusters, which it alone writes)
#   berth-metrics-cache  reads everything but secrets, and the secrets of
#                        metrics providers; writes metric values and events
#   berth-exporter       reads everything but secrets, and the secrets of
#                        Exports (the credentials of the APIs it writes to);
#                        writes what it made of each Export, and events
#   berth-inventory      reads everything but secrets, and the secrets of
#                        Inventories (the hubs' credentials); writes Clusters
#                        and their secrets only in the berth namespaces named
#                        by BERTH_INVENTORY_NAMESPACES (space-separated;
#                        default: inventory), what it made of each Inventory,
#                        and events
# (etcd grants by prefix, and a ledger key names its resource before its writer:
# the scheduler and the propagator may each write the whole ledger; each writes
# only keys that name it.)
#   berth-console        (the web console) reads everything but secrets; writes
#                        rollout controls (an operator's approve, pause, resume)
#   berth-admin          (bootstrap, apply, delete, cordon, upgrade, the CLI)
#                        reads everything; writes user resources, secrets,
#                        applications' histories and rollout controls only
# and each process its own leader-election key. Leases need no grant. No
# process reads a Project's or a Cloud's secrets (berth never calls OpenStack),
# and none but the propagator a pull cluster's work (/berth/v1/work/): each pull
# cluster's agent gets a user and role of its own, confined to its cluster's
# prefixes, from `berth cluster approve` (run as root; docs/agents.md).
# Passwords reach etcdctl on its standard input, never on a command line.
set -euo pipefail
if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit $(( $# == 1 ? 0 : 2 ))
fi
dir="$1"
mkdir -p "$dir"
chmod 0700 "$dir"
ctl() { "${ETCDCTL:-etcdctl}" "$@"; }

password() {  # the user's password: from its file, or a new one written there
  local file="$dir/$1"
  if [ ! -s "$file" ]; then
    (umask 077; openssl rand -hex 24 > "$file")
  fi
  cat "$file"
}

root_pw="$(password root)"
# Once authentication is on, etcdctl acts as root (the variable keeps the
# password off the command line, where other users could read it).
if ! ctl auth status >/dev/null 2>&1; then
  export ETCDCTL_USER="root:$root_pw"
  ctl auth status >/dev/null || { echo "etcd-secure: cannot act as root" >&2; exit 1; }
fi

add_user() {  # add_user NAME: its password goes on etcdctl's standard input, never
  # on a command line (where every local user could read it in the process list)
  password "$1" | ctl user add "$1" --interactive=false >/dev/null
}

user() {  # user NAME ROLE: create the user (once) and give it the role
  if ! ctl user get "$1" >/dev/null 2>&1; then
    add_user "$1"
  fi
  ctl user grant-role "$1" "$2" >/dev/null
}

role() {  # role NAME: create it once (grants are added; see above to narrow them)
  ctl role get "$1" >/dev/null 2>&1 || ctl role add "$1" >/dev/null
}

grant() {  # grant ROLE read|write|readwrite KEY [--prefix | END]
  if [ "${4:-}" = --prefix ]; then
    ctl role grant-permission "$1" "$2" "$3" --prefix=true >/dev/null
  else
    ctl role grant-permission "$1" "$2" "$3" ${4:+"$4"} >/dev/null
  fi
}

R=/berth/v1/
# Everything but secrets and pull clusters' work (which carries Secrets' data):
# [/berth/v1/, /berth/v1/secrets/), [/berth/v1/secrets0, /berth/v1/work/) and
# [/berth/v1/work0, /berth/v10), "0" being the byte after "/".
no_secrets() {
  ctl role revoke-permission "$1" "${R}secrets0" /berth/v10 >/dev/null 2>&1 || true
  grant "$1" read "$R" "${R}secrets/"
  grant "$1" read "${R}secrets0" "${R}work/"
  grant "$1" read "${R}work0" /berth/v10
}

role berth-scheduler
no_secrets berth-scheduler
grant berth-scheduler readwrite "${R}bindings/" --prefix
grant berth-scheduler readwrite "${R}leases/scheduler" --prefix
# what one leader hands the next (the moves it started lately: the pace's)
grant berth-scheduler readwrite "${R}scheduler/" --prefix
# its ledger records (and, its leader, retention's deletes) and its events
grant berth-scheduler readwrite "${R}ledger/" --prefix
grant berth-scheduler readwrite "${R}events/" --prefix

role berth-propagator
# Before this version the propagator read every secret: that grant goes.
ctl role revoke-permission berth-propagator "$R" --prefix=true >/dev/null 2>&1 || true
no_secrets berth-propagator
grant berth-propagator read "${R}secrets/clusters/" --prefix
grant berth-propagator read "${R}secrets/applications/" --prefix
grant berth-propagator readwrite "${R}status/" --prefix
# etcd has no delete-only permission: the propagator may write any application, and
# deletes one only once it has removed its objects (the write it makes there)
grant berth-propagator readwrite "${R}applications/" --prefix
# ... and with an application it deletes its history and rollout controls
grant berth-propagator readwrite "${R}history/applications/" --prefix
grant berth-propagator readwrite "${R}rollouts/applications/" --prefix
grant berth-propagator readwrite "${R}leases/propagator" --prefix
# pull clusters: it writes their work (and reads their agents' reports, registrations)
grant berth-propagator readwrite "${R}work/" --prefix
grant berth-propagator readwrite "${R}ledger/" --prefix
grant berth-propagator readwrite "${R}events/" --prefix

role berth-metrics-cache
no_secrets berth-metrics-cache
grant berth-metrics-cache read "${R}secrets/globalmetricsproviders/" --prefix
grant berth-metrics-cache read "${R}secrets/metricsproviders/" --prefix
grant berth-metrics-cache readwrite "${R}metricvalues/" --prefix
grant berth-metrics-cache readwrite "${R}leases/metrics-cache" --prefix
grant berth-metrics-cache readwrite "${R}events/" --prefix

role berth-exporter
no_secrets berth-exporter
grant berth-exporter read "${R}secrets/exports/" --prefix
grant berth-exporter readwrite "${R}exported/" --prefix
grant berth-exporter readwrite "${R}leases/exporter" --prefix
grant berth-exporter readwrite "${R}events/" --prefix

role berth-inventory
no_secrets berth-inventory
grant berth-inventory read "${R}secrets/inventories/" --prefix
for ns in ${BERTH_INVENTORY_NAMESPACES:-inventory}; do
  grant berth-inventory readwrite "${R}clusters/$ns/" --prefix
  grant berth-inventory readwrite "${R}secrets/clusters/$ns/" --prefix
done
grant berth-inventory readwrite "${R}status/inventories/" --prefix
grant berth-inventory readwrite "${R}leases/inventory" --prefix
grant berth-inventory readwrite "${R}events/" --prefix

role berth-console
# the web console: reads everything but secrets; writes an operator's rollout controls
no_secrets berth-console
grant berth-console readwrite "${R}rollouts/applications/" --prefix

role berth-admin
grant berth-admin read "$R" --prefix
for plural in globalmetricsproviders metricsproviders globalmetrics metrics globalclouds \
              clouds clusters applications projects magnumclusters globaloverrides overrides paces \
              priorityclasses exports inventories clustersets namespacepolicies \
              secrets history rollouts; do
  grant berth-admin readwrite "${R}$plural/" --prefix
done

for process in scheduler propagator metrics-cache exporter inventory console admin; do
  user "berth-$process" "berth-$process"
done

if [ -z "${ETCDCTL_USER:-}" ]; then
  if ! ctl user get root >/dev/null 2>&1; then
    add_user root
  fi
  ctl user grant-role root root >/dev/null
  ctl auth enable >/dev/null
  echo "etcd-secure: authentication enabled (root's password: $dir/root)" >&2
fi
echo "etcd-secure: users berth-scheduler, berth-propagator, berth-metrics-cache, berth-exporter," \
     "berth-inventory, berth-console," \
     "berth-admin;" \
     "passwords in $dir" >&2
