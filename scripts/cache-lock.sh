# Sourced by the install scripts: cache_lock NAME holds an exclusive lock on
# $CACHE/NAME.lock until the script exits, so two setups on one machine (two
# clones, CI beside a developer) never build into the same directory at once:
# the second waits for the first, then finds its result in the cache.
cache_lock() {
  mkdir -p "$CACHE"
  exec 9>"$CACHE/$1.lock"
  if ! flock -n 9; then
    echo "$1: another setup on this machine is installing it; waiting ..." >&2
    flock 9
  fi
}
