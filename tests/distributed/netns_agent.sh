#!/bin/sh
# netns_agent.sh [--keep-env] HOST COMMAND...: Open MPI's launch agent in place of ssh for the multi-host tests
# (tests/distributed/fake_hosts.h). HOST is an address of a fake host; the command runs as ssh
# would run it (one shell line), inside that host: its network namespace, a UTS namespace with
# its own host name, and a mount namespace where its private directory is bound over the path
# every host shares (HEADLAB_FAKE_MOUNT), so no two hosts see each other's run directories. Like
# ssh it starts from a clean environment: only PATH, HOME and the agent's own table go on
# (--keep-env keeps the caller's: the tests start mpirun itself on the first host that way),
# and the OPENBLAS_* variables, as hosts whose login environment is the same (a setting such as
# OPENBLAS_CORETYPE on one host alone would be refused at start-up as another kernel choice),
# and the sanitizers' options of a sanitizer build's test run.
# HEADLAB_FAKE_HOSTS: "ADDRESS=NAMESPACE=HOSTNAME=DIRECTORY;..." (fake_hosts.cpp writes it).
set -eu
clean="env -i PATH=$PATH HOME=${HOME:-/root} $(env | grep -E '^(OPENBLAS_[A-Z0-9_]*|[AUL][BS]*SAN_OPTIONS)=[^ ]*$' | tr '\n' ' ')"
if [ "$1" = --keep-env ]; then
  clean=env
  shift
fi
host=$1
shift
entry=$(printf '%s\n' "$HEADLAB_FAKE_HOSTS" | tr ';' '\n' | grep "^$host=") || {
  echo "netns_agent.sh: no fake host '$host' in HEADLAB_FAKE_HOSTS" >&2
  exit 255
}
ns=$(echo "$entry" | cut -d= -f2)
name=$(echo "$entry" | cut -d= -f3)
dir=$(echo "$entry" | cut -d= -f4)
exec $clean HEADLAB_FAKE_HOSTS="$HEADLAB_FAKE_HOSTS" \
  HEADLAB_FAKE_MOUNT="$HEADLAB_FAKE_MOUNT" \
  ip netns exec "$ns" unshare --uts --mount --propagation private sh -c \
  'hostname "$1" && mount --bind "$2" "$3" && shift 3 && exec sh -c "$*"' \
  netns_agent "$name" "$dir" "$HEADLAB_FAKE_MOUNT" "$@"
