#!/usr/bin/env bash
# Podman for the container tests (tests/deploy/test_container_*.py): no Docker engine and no image registry
# are needed.
#
#   scripts/containers.sh install          Debian's podman, runc, debootstrap and catatonit (the infra process of
#                                          `podman kube play`'s pods), where missing (podman-compose is
#                                          requirements-dev.txt's: Debian 12's 1.0.3 ignores --no-deps and
#                                          network_mode: host)
#   scripts/containers.sh base             install, then the base image the Dockerfile names, built once from
#                                          Debian's archive with debootstrap and kept in podman's store
#   scripts/containers.sh build TAG [DIR]  base, then the app's image from the Dockerfile of DIR (default: this
#                                          checkout), tagged TAG, in one layer over the base (vfs keeps each
#                                          layer whole); pip gets the CA bundle pip's own configuration names
#                                          (or PIP_CERT) as a build secret, never copied into the image
#   scripts/containers.sh build-agent TAG [DIR]
#                                          base, then the agent's image from agent/deploy/Dockerfile of DIR (default:
#                                          this checkout) over the same base, tagged TAG, in one layer
#   scripts/containers.sh podman ARGS      podman with the tests' settings and store (e.g. `podman images`)
#
# The settings are scripts/podman/{containers,storage}.conf: runc on cgroupfs, the vfs driver in a store of
# its own (/var/lib/fleetwatt/containers). The base image is rebuilt only when it is missing or its recipe
# (BASE_RECIPE below) changed; `scripts/containers.sh podman rmi debian:bookworm-slim` forces a rebuild.
set -euo pipefail
case "${1:-}" in build | build-agent) [ -z "${3:-}" ] || set -- "$1" "$2" "$(realpath "$3")" ;; esac
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="$PWD/scripts/podman/containers.conf"
export CONTAINERS_STORAGE_CONF="$PWD/scripts/podman/storage.conf"

BASE_IMAGE=docker.io/library/debian:bookworm-slim
# Bump when the recipe below changes: the cached image is rebuilt when its label differs.
BASE_RECIPE=3
# As in the official image, which sets no more than this in its config.
BASE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
MIRROR=${FLEETWATT_DEBIAN_MIRROR:-http://deb.debian.org/debian}

containers_install() {
  local pkgs=()
  command -v podman >/dev/null || pkgs+=(podman)
  command -v runc >/dev/null || pkgs+=(runc)
  command -v debootstrap >/dev/null || pkgs+=(debootstrap)
  command -v catatonit >/dev/null || pkgs+=(catatonit)
  [ ${#pkgs[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then echo "need root to apt-get install ${pkgs[*]}" >&2; exit 1; fi
  echo "installing ${pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
}

base_recipe_of() {
  podman image inspect --format '{{index .Labels "org.fleetwatt.base-recipe"}}' "$BASE_IMAGE" 2>/dev/null || true
}

# Debian bookworm, minbase (apt, dpkg, bash, coreutils), made the way Debian's official images are, and
# trimmed as their -slim variant is: no documentation, manual pages or locales, now or from later installs.
base_build() {
  if [ "$(base_recipe_of)" = "$BASE_RECIPE" ]; then return 0; fi
  if [ "$(id -u)" != 0 ]; then echo "need root to debootstrap the base image" >&2; exit 1; fi
  local root
  root=$(mktemp -d /var/tmp/fleetwatt-base.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  echo "building $BASE_IMAGE with debootstrap (once; kept in podman's store)"
  debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
  rm -f "$root.log"
  cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$root/etc/apt/apt.conf.d/slim"
  find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete 2>/dev/null || true
  rm -rf "$root"/usr/share/{man,info,locale,lintian}/* "$root"/var/cache/apt/*.bin \
    "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log "$root"/tmp/* "$root"/etc/machine-id
  find "$root/var/lib/apt/lists" -maxdepth 1 -type f -delete  # keeps partial/, which apt's sandbox needs
  chmod 0755 "$root"  # mktemp's 0700 would be the image's /, closed to every user but root
  podman rmi --force "$BASE_IMAGE" >/dev/null 2>&1 || true
  tar -C "$root" --numeric-owner -c . \
    | podman import --quiet --change "ENV PATH=$BASE_PATH" --change 'CMD ["bash"]' --change "LABEL org.fleetwatt.base-recipe=$BASE_RECIPE" - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
  trap - EXIT
  echo "built $BASE_IMAGE: $(podman image inspect --format '{{.Size}}' "$BASE_IMAGE") bytes"
}

# The CA bundle this machine's pip is told to trust (a TLS-inspecting proxy's, say): PIP_CERT, else pip's
# own configuration (`pip config list`: /etc/pip.conf and the like); none: pip's own bundle.
pip_cert() {
  if [ -n "${PIP_CERT:-}" ]; then echo "$PIP_CERT"; return; fi
  python3 -m pip config list 2>/dev/null | sed -n "s/^[^ ]*\.cert='\(.*\)'$/\1/p" | tail -1
}

# --layers=false: the steps are committed as one layer, so that vfs keeps the base and one copy of the
# image, not one copy per step; --force-rm: no build container is left behind, even when a step fails.
app_build() {
  local tag=$1 context=${2:-.} cert args=("${@:3}")
  cert=$(pip_cert)
  if [ -n "$cert" ] && [ -f "$cert" ]; then
    args+=(--secret "id=pip-ca,src=$cert")
  fi
  podman build --quiet --layers=false --force-rm --pull=never --network host "${args[@]}" --tag "$tag" "$context"
}

# The agent's image: agent/deploy/Dockerfile with agent/ as its context, as docs/deploy.md builds it.
agent_build() {
  local tag=$1 checkout=${2:-.}
  app_build "$tag" "$checkout/agent" --file "$checkout/agent/deploy/Dockerfile"
}

case "${1:-}" in
  install) containers_install ;;
  base) containers_install; base_build ;;
  build) [ -n "${2:-}" ] || { echo "usage: $0 build TAG [DIR]" >&2; exit 2; }
    containers_install; base_build; shift; app_build "$@" ;;
  build-agent) [ -n "${2:-}" ] || { echo "usage: $0 build-agent TAG [DIR]" >&2; exit 2; }
    containers_install; base_build; agent_build "$2" "${3:-.}" ;;
  podman) shift; exec podman "$@" ;;
  *) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
