#!/usr/bin/env bash
# deploy/local/lib.sh — what the scripts under deploy/local/ share: the Kubernetes version,
# the cache layout, logging, installing Debian packages on demand, and fetching Debian's
# `kubernetes` source package. Sourced, not run; the caller sets PROG first.
# shellcheck disable=SC2034 # the callers use the paths defined here

readonly K8S_VERSION=v1.20.2
readonly K8S_SRC_PACKAGE=kubernetes

CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/taint-eviction-controller"
K8S_CACHE="$CACHE_ROOT/kubernetes-$K8S_VERSION"
BIN_DIR="$K8S_CACHE/bin"
BUILD_WORK="$K8S_CACHE/work"
BUILD_LOG_DIR="$K8S_CACHE/logs"
BUILD_JOBS="${TEC_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# need_cmd CMD DEBIAN_PACKAGE: make sure CMD is on PATH, installing the package as root.
need_cmd() {
  local cmd=$1 pkg=$2
  command -v "$cmd" >/dev/null 2>&1 && return 0
  if is_root && command -v apt-get >/dev/null 2>&1; then
    log "installing $pkg (for $cmd)"
    apt_update_once
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$pkg" >&2 \
      || die "apt-get install $pkg failed"
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd still not found after installing $pkg"
  else
    die "'$cmd' not found; install the Debian package '$pkg' (scripts/install-deps.sh does)"
  fi
}

APT_UPDATED=0
apt_update_once() {
  [ "$APT_UPDATED" -eq 1 ] && return 0
  log "apt-get update"
  apt-get update -q >&2 || die "apt-get update failed"
  APT_UPDATED=1
}


# Is a deb-src entry configured anywhere?
have_deb_src() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    case "$f" in
      *.sources)
        # deb822: a stanza whose Types include deb-src.
        grep -Eiq '^Types:.*[[:space:]]deb-src([[:space:]]|$)' "$f" && return 0
        ;;
      *)
        grep -Eq '^[[:space:]]*deb-src[[:space:]]' "$f" && return 0
        ;;
    esac
  done
  return 1
}

# Add a deb-src twin of the configured Debian archive entry (deb822 or one-line format).
ensure_deb_src() {
  have_deb_src && return 0
  is_root || die "no deb-src entry in the apt sources and not root: add one for Debian's main archive (or run as root) to build kube-apiserver"
  local codename="" target=/etc/apt/sources.list.d/tec-deb-src.sources stanza=""
  if [ -r /etc/os-release ]; then
    # shellcheck disable=SC1091
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  fi
  [ -n "$codename" ] || codename=bookworm
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # First enabled 'deb' stanza whose Suites has the release codename itself (not -security).
    stanza=$(awk -v cn="$codename" '
      BEGIN { RS = "" }
      {
        n = split($0, lines, "\n"); types = ""; suites = ""; enabled = "yes"; out = ""; copying = 0
        for (i = 1; i <= n; i++) {
          line = lines[i]
          if (line ~ /^#/) continue
          if (line ~ /^[ \t]/) {   # continuation line (e.g. an inline Signed-By key)
            if (copying) out = out line "\n"
            continue
          }
          copying = 0
          if (match(line, /^[A-Za-z-]+:/)) {
            key = tolower(substr(line, 1, RLENGTH - 1)); val = substr(line, RLENGTH + 1)
            gsub(/^[ \t]+|[ \t]+$/, "", val)
            if (key == "types") types = val
            else if (key == "suites") suites = val
            else if (key == "enabled") enabled = tolower(val)
            if (key == "uris" || key == "suites" || key == "components" || key == "signed-by") {
              out = out substr(line, 1, RLENGTH) " " val "\n"; copying = 1
            }
          }
        }
        if (enabled != "no" && (" " types " ") ~ / deb / && (" " suites " ") ~ (" " cn " ")) {
          printf "Types: deb-src\n%s", out; exit
        }
      }' "$f")
    [ -n "$stanza" ] && break
  done
  if [ -n "$stanza" ]; then
    log "adding a deb-src entry: $target"
    { echo "# Added by taint-eviction-controller deploy/local/cluster.sh (kube-apiserver build)."
      printf '%s\n' "$stanza"; } >"$target"
  elif [ -f /etc/apt/sources.list ] && grep -Eq "^[[:space:]]*deb[[:space:]].*[[:space:]]${codename}[[:space:]]" /etc/apt/sources.list; then
    target=/etc/apt/sources.list.d/tec-deb-src.list
    log "adding a deb-src entry: $target"
    { echo "# Added by taint-eviction-controller deploy/local/cluster.sh (kube-apiserver build)."
      grep -E "^[[:space:]]*deb[[:space:]].*[[:space:]]${codename}[[:space:]]" /etc/apt/sources.list \
        | head -n1 | sed -E 's/^[[:space:]]*deb[[:space:]]/deb-src /'; } >"$target"
  else
    die "cannot find the Debian '$codename' entry in /etc/apt/sources.list(.d) to derive a deb-src entry from"
  fi
  APT_UPDATED=0
}

# Prints the unpacked source tree of Debian's kubernetes package, fetching it when needed.
fetch_kubernetes_source() {
  local src
  src=$(find "$BUILD_WORK" -mindepth 1 -maxdepth 1 -type d -name "${K8S_SRC_PACKAGE}-*" 2>/dev/null | head -n1)
  if [ -n "$src" ] && [ -f "$src/.tec-source-ok" ]; then
    printf '%s\n' "$src"
    return 0
  fi
  need_cmd dpkg-source dpkg-dev
  ensure_deb_src
  apt_update_once
  rm -rf "$BUILD_WORK"
  mkdir -p "$BUILD_WORK"
  log "fetching Debian source package '$K8S_SRC_PACKAGE' into $BUILD_WORK"
  (cd "$BUILD_WORK" && apt-get source -q "$K8S_SRC_PACKAGE") >&2 \
    || die "apt-get source $K8S_SRC_PACKAGE failed (is a deb-src entry configured and apt-get update done?)"
  src=$(find "$BUILD_WORK" -mindepth 1 -maxdepth 1 -type d -name "${K8S_SRC_PACKAGE}-*" | head -n1)
  if [ -z "$src" ] || [ ! -f "$src/debian/rules" ]; then
    die "unpacked source not found under $BUILD_WORK"
  fi
  # The tree must be Kubernetes $K8S_VERSION (the git-archive version stamp in hack/lib/version.sh).
  grep -q "tag: $K8S_VERSION'" "$src/hack/lib/version.sh" \
    || die "Debian's $K8S_SRC_PACKAGE source in $src is not Kubernetes $K8S_VERSION"
  touch "$src/.tec-source-ok"
  printf '%s\n' "$src"
}
