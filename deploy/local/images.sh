#!/usr/bin/env bash
# deploy/local/images.sh — the container images a real local node needs, built on this machine
# (no container registry is reachable here: everything comes from Debian's packages and this
# repository). See `images.sh --help`.
#
# Images live in a buildah store under the cache
# (${XDG_CACHE_HOME:-$HOME/.cache}/taint-eviction-controller/images/), so the debootstrap base,
# the pause image and the Dockerfile's layers are built once per machine and reused.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd -P)
readonly SCRIPT_DIR REPO_ROOT
PROG=$(basename "$0")
readonly PROG
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"

readonly IMAGE_CACHE="$CACHE_ROOT/images"
readonly STORE="$IMAGE_CACHE/store"
readonly ARCHIVES="$IMAGE_CACHE/archives"
readonly DEBIAN_SUITE=bookworm
readonly DEBIAN_MIRROR="${TEC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
readonly BASE_IMAGE=docker.io/library/debian:$DEBIAN_SUITE
readonly BASE_SLIM_IMAGE=docker.io/library/debian:$DEBIAN_SUITE-slim
readonly PAUSE_IMAGE=localhost/tec-pause:3.4
readonly WORKLOAD_IMAGE=localhost/tec-workload:1
readonly PROJECT_REPO=localhost/taint-eviction-controller
readonly PREBUILT_IMAGE=localhost/taint-eviction-controller:prebuilt
# Bumped when the way an image is made changes, so the cached one is rebuilt.
readonly BASE_RECIPE=1 PAUSE_RECIPE=1 WORKLOAD_RECIPE=1
# The digest of the debootstrapped base, written when build_base commits it: deploy/Dockerfile's
# build stage is pinned to it (BUILD_BASE=...@sha256:...), and a store whose base has another
# digest (retagged, or rebuilt by an older images.sh) is refused until the base is rebuilt.
readonly BASE_DIGEST_FILE="$IMAGE_CACHE/debian-$DEBIAN_SUITE.digest"

usage() {
  cat <<EOF
Usage: $PROG COMMAND [ARGS]

Builds container images locally with buildah (store: $STORE).

Commands:
  base              $BASE_IMAGE and $BASE_SLIM_IMAGE: a minbase debootstrap
                    of Debian $DEBIAN_SUITE from $DEBIAN_MIRROR (cached); its digest is
                    recorded in $BASE_DIGEST_FILE.
  pause             $PAUSE_IMAGE: Kubernetes' build/pause/linux/pause.c, static.
  workload          $WORKLOAD_IMAGE: Debian's busybox-static; by default a shell that
                    sleeps and exits 0 on SIGTERM.
  project [TAG]     $PROJECT_REPO:TAG (default latest) from deploy/Dockerfile,
                    unchanged (buildah bud, host network for apt, cached layers), with the
                    version, commit and base digest as build arguments. 'make image'.
  prebuilt BIN      $PREBUILT_IMAGE: the runtime stage of deploy/Dockerfile
                    with BIN (a taint-eviction-controller built on this host) in place of
                    the build stage's binary. Seconds instead of minutes.
  archive IMAGE     Print the path of a docker-archive of IMAGE (cached per image id), for
                    'ctr images import'.
  export IMAGE NAME OUT
                    A docker-archive of IMAGE at OUT, its image named NAME (make release).
  rootfs IMAGE DIR  IMAGE's files into the empty directory DIR (scripts/sbom.py reads them).
  id IMAGE          Print the image id of IMAGE.
  help              This text.

Environment: TEC_DEBIAN_MIRROR (default $DEBIAN_MIRROR), TEC_IMAGE_STORE_MAX_GB (the
store's size past which 'project' removes untagged images and so the layer cache; default 10),
TEC_IMAGE_NO_CCACHE (set: 'project' does not mount the host's ccache), XDG_CACHE_HOME.
EOF
}

bah() { buildah --root "$STORE/storage" --runroot "$STORE/run" --storage-driver overlay "$@"; }

have_image() { bah inspect --type image "$1" >/dev/null 2>&1; }

image_id() { bah inspect --type image --format '{{.FromImageID}}' "$1"; }

image_digest() { bah inspect --type image --format '{{.FromImageDigest}}' "$1"; }

# The label every locally made image carries with its recipe number.
recipe_of() { bah inspect --type image --format '{{index .ImageAnnotations "tec.recipe"}}' "$1" 2>/dev/null || true; }

# with_lock CMD...: one image build at a time per machine (they share the store).
with_lock() {
  mkdir -p "$IMAGE_CACHE"
  local fd
  exec {fd}>"$IMAGE_CACHE/.lock"
  if ! flock -n "$fd"; then
    log "another image build is running (lock $IMAGE_CACHE/.lock); waiting for it"
    flock -w 3600 "$fd" || die "timed out waiting for $IMAGE_CACHE/.lock"
  fi
  "$@"
  exec {fd}>&-
}

need_tools() {
  is_root || die "building images needs root (buildah with its own store, debootstrap)"
  need_cmd buildah buildah
  need_cmd flock util-linux
}

# commit_rootfs TAR IMAGE RECIPE [buildah config args...]: an image holding exactly TAR.
commit_rootfs() {
  local tar=$1 image=$2 recipe=$3 ctr
  shift 3
  ctr=$(bah from --pull=never scratch)
  if ! bah add "$ctr" "$tar" / >/dev/null \
    || ! bah config --annotation "tec.recipe=$recipe" "$@" "$ctr" \
    || ! bah commit --quiet --rm "$ctr" "$image" >/dev/null; then
    bah rm "$ctr" >/dev/null 2>&1 || true
    die "could not commit $image"
  fi
}

build_base() {
  if have_image "$BASE_IMAGE" && have_image "$BASE_SLIM_IMAGE" \
    && [ "$(recipe_of "$BASE_IMAGE")" = "$BASE_RECIPE" ]; then
    if [ ! -s "$BASE_DIGEST_FILE" ]; then
      # A base built before digests were recorded: recorded now, as the one in use.
      image_digest "$BASE_IMAGE" >"$BASE_DIGEST_FILE"
      log "recorded the digest of $BASE_IMAGE: $(cat "$BASE_DIGEST_FILE")"
    fi
    return 0
  fi
  local tar="$IMAGE_CACHE/debian-$DEBIAN_SUITE-minbase-r$BASE_RECIPE.tar"
  if [ ! -s "$tar" ]; then
    need_cmd debootstrap debootstrap
    local root="$IMAGE_CACHE/rootfs.tmp" start=$SECONDS
    rm -rf "$root"
    log "debootstrap --variant=minbase $DEBIAN_SUITE from $DEBIAN_MIRROR (about a minute)"
    debootstrap --variant=minbase "$DEBIAN_SUITE" "$root" "$DEBIAN_MIRROR" \
      >"$IMAGE_CACHE/debootstrap.log" 2>&1 \
      || { tail -n 20 "$IMAGE_CACHE/debootstrap.log" >&2; die "debootstrap failed (log: $IMAGE_CACHE/debootstrap.log)"; }
    # As in Debian's official image: the release, its updates and the security archive, as a
    # deb822 source; no package lists or caches in the image.
    rm -f "$root/etc/apt/sources.list"
    cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $DEBIAN_MIRROR
Suites: $DEBIAN_SUITE $DEBIAN_SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${DEBIAN_MIRROR%/debian}/debian-security
Suites: $DEBIAN_SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
      "$root"/var/log/* "$root"/tmp/*
    tar --numeric-owner --xattrs -C "$root" -cf "$tar.tmp" . || die "could not archive $root"
    mv -f "$tar.tmp" "$tar"
    rm -rf "$root"
    log "debootstrap done in $((SECONDS - start)) s; cached as $tar"
  fi
  commit_rootfs "$tar" "$BASE_IMAGE" "$BASE_RECIPE" --cmd '["bash"]' \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  bah tag "$BASE_IMAGE" "$BASE_SLIM_IMAGE"
  image_digest "$BASE_IMAGE" >"$BASE_DIGEST_FILE"
  log "built $BASE_IMAGE (also tagged $BASE_SLIM_IMAGE; digest $(cat "$BASE_DIGEST_FILE"))"
}

build_pause() {
  have_image "$PAUSE_IMAGE" && [ "$(recipe_of "$PAUSE_IMAGE")" = "$PAUSE_RECIPE" ] && return 0
  need_cmd gcc build-essential
  local src work
  src=$(fetch_kubernetes_source)
  [ -f "$src/build/pause/linux/pause.c" ] || die "no build/pause/linux/pause.c in $src"
  work=$(mktemp -d "$IMAGE_CACHE/pause.XXXXXX")
  # The flags of build/pause/Makefile.
  gcc -Os -Wall -Werror -static -DVERSION=v3.4-tec -o "$work/pause" "$src/build/pause/linux/pause.c" \
    || { rm -rf "$work"; die "could not compile pause.c (needs a static libc: libc6-dev)"; }
  tar --numeric-owner --owner=0 --group=0 -C "$work" -cf "$work/rootfs.tar" pause
  commit_rootfs "$work/rootfs.tar" "$PAUSE_IMAGE" "$PAUSE_RECIPE" --entrypoint '["/pause"]' \
    --user 65535:65535
  rm -rf "$work"
  log "built $PAUSE_IMAGE"
}

build_workload() {
  have_image "$WORKLOAD_IMAGE" && [ "$(recipe_of "$WORKLOAD_IMAGE")" = "$WORKLOAD_RECIPE" ] && return 0
  need_cmd busybox busybox-static
  local bb work applet
  bb=$(command -v busybox)
  dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' \
    || die "$bb is not from Debian's busybox-static (a static binary is needed in a scratch image)"
  work=$(mktemp -d "$IMAGE_CACHE/workload.XXXXXX")
  mkdir -p "$work/root/bin" "$work/root/tmp" "$work/root/etc"
  cp "$bb" "$work/root/bin/busybox"
  for applet in $("$bb" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$work/root/bin/$applet"
  done
  chmod 1777 "$work/root/tmp"
  printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$work/root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$work/root/etc/group"
  tar --numeric-owner --owner=0 --group=0 -C "$work/root" -cf "$work/rootfs.tar" .
  # PID 1 ignores SIGTERM unless it handles it: trap it, so a kubelet stops the pod at once.
  commit_rootfs "$work/rootfs.tar" "$WORKLOAD_IMAGE" "$WORKLOAD_RECIPE" \
    --env PATH=/bin --entrypoint '[]' \
    --cmd '["/bin/sh", "-c", "trap \"exit 0\" TERM INT; sleep 2147483647 & wait"]'
  rm -rf "$work"
  log "built $WORKLOAD_IMAGE"
}

# pinned_base: BASE_IMAGE by the digest recorded when it was built, after checking the store's
# image under that name still has it.
pinned_base() {
  local want have
  want=$(cat "$BASE_DIGEST_FILE" 2>/dev/null) || want=""
  [[ "$want" =~ ^sha256:[0-9a-f]{64}$ ]] || die "no digest recorded for $BASE_IMAGE in $BASE_DIGEST_FILE"
  have=$(image_digest "$BASE_IMAGE") || die "no $BASE_IMAGE in $STORE"
  [ "$have" = "$want" ] \
    || die "$BASE_IMAGE has digest $have, not the recorded $want: remove both (buildah rmi, rm $BASE_DIGEST_FILE) to rebuild it"
  echo "$BASE_IMAGE@$want"
}

build_project() {
  local tag=${1:-latest}
  [[ "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "'$tag' is not an image tag"
  local image="$PROJECT_REPO:$tag"
  build_base
  local base
  base=$(pinned_base)
  local start=$SECONDS logf="$IMAGE_CACHE/build-project.log"
  log "building $image from deploy/Dockerfile (cold: several minutes; log: $logf)"
  # --network host: the RUN apt-get steps reach the Debian mirror through the host. --layers:
  # unchanged steps (the apt-get layers, or everything when the sources did not change) are
  # reused from the store.
  # The host's compiler cache, mounted into the build stage's RUN steps (deploy/Dockerfile's
  # CCACHE_DIR): objects a host build made with the same compiler and flags (the default preset
  # builds the daemon with the Dockerfile's) are reused, so a `make test` does not compile the
  # daemon twice. The build itself is deploy/Dockerfile's, unchanged; without ccache on the
  # host, or with another compiler in the image, it compiles everything.
  local ccache_args=() ccache_dir=""
  if command -v ccache >/dev/null 2>&1 && [ -z "${TEC_IMAGE_NO_CCACHE:-}" ]; then
    ccache_dir=$(ccache -k cache_dir 2>/dev/null) || ccache_dir=""
  fi
  if [ -n "$ccache_dir" ] && mkdir -p "$ccache_dir"; then
    ccache_args=(--build-arg CCACHE_DIR=/ccache --volume "$ccache_dir:/ccache:rw")
  fi
  # The version and commit (cmake/version.sh: the build context has no .git) and the commit's
  # time as SOURCE_DATE_EPOCH (reproducible output).
  local described="" version="" commit="" epoch=""
  described=$("$REPO_ROOT/cmake/version.sh" "$REPO_ROOT" 2>/dev/null) || described=""
  read -r version commit <<<"$described" || true
  epoch=$(git -C "$REPO_ROOT" log -1 --format=%ct 2>/dev/null) || epoch=""
  if ! bah bud --pull=never --network host --layers --quiet "${ccache_args[@]}" \
      --build-arg "BUILD_BASE=$base" --build-arg "TEC_VERSION=$version" \
      --build-arg "TEC_COMMIT=$commit" --build-arg "SOURCE_DATE_EPOCH=$epoch" \
      -f "$REPO_ROOT/deploy/Dockerfile" -t "$image" "$REPO_ROOT" >"$logf" 2>&1; then
    tail -n 40 "$logf" >&2
    die "buildah bud deploy/Dockerfile failed (log: $logf)"
  fi
  log "built $image ($version) in $((SECONDS - start)) s (id $(image_id "$image" | cut -c1-12))"
  prune_store
}

# The layer cache grows by the build stage's layers (about 1 GB) whenever the sources change.
# Past TEC_IMAGE_STORE_MAX_GB (default 10) the untagged images go, and with them the cached
# layers: the next build of deploy/Dockerfile is a cold one.
prune_store() {
  local max_gb=${TEC_IMAGE_STORE_MAX_GB:-10} used_kb
  used_kb=$(du -sk "$STORE/storage" 2>/dev/null | cut -f1) || return 0
  [ "$used_kb" -gt $((max_gb * 1024 * 1024)) ] || return 0
  log "the image store holds $((used_kb / 1024 / 1024)) GB (more than TEC_IMAGE_STORE_MAX_GB=$max_gb): removing untagged images"
  bah rmi --prune >/dev/null 2>&1 || log "warning: buildah rmi --prune failed"
}

# The runtime stage of deploy/Dockerfile, taking its root filesystem from the build context
# instead of the build stage: the same user and entrypoint as `make image`, the same
# deploy/image-rootfs.sh, run on this host (bookworm too) instead of in the build stage.
runtime_stage() {
  awk '
    /^ARG DEBIAN_RELEASE/ && !seen_from { print; next }
    /^FROM .* AS runtime/ { on = 1; seen_from = 1 }
    /^FROM / && !/ AS runtime/ { seen_from = 1; on = 0 }
    on {
      if ($0 ~ /^COPY --from=build /) { sub(/--from=build [^ ]*\//, ""); copied = 1 }
      print
    }
    END { if (!copied) exit 1 }
  ' "$REPO_ROOT/deploy/Dockerfile"
}

build_prebuilt() {
  local bin=${1:-}
  [ -n "$bin" ] || die "usage: $PROG prebuilt PATH-TO-taint-eviction-controller"
  [ -x "$bin" ] || die "$bin is not an executable"
  build_base
  local work start=$SECONDS logf="$IMAGE_CACHE/build-prebuilt.log"
  work=$(mktemp -d "$IMAGE_CACHE/prebuilt.XXXXXX")
  runtime_stage >"$work/Dockerfile" || { rm -rf "$work"; die "no runtime stage with a 'COPY --from=build' in deploy/Dockerfile"; }
  # The kubectl plugin is built beside the daemon (make build); the Dockerfile copies both.
  local plugin
  plugin="$(dirname "$bin")/kubectl-taint_eviction"
  [ -x "$plugin" ] || { rm -rf "$work"; die "$plugin is not an executable (make build builds it beside $bin)"; }
  # As the Dockerfile's build stage does: no debug info in the image.
  mkdir -p "$work/bin"
  cp "$bin" "$work/bin/taint-eviction-controller"
  cp "$plugin" "$work/bin/kubectl-taint_eviction"
  strip --strip-debug --strip-unneeded "$work/bin/taint-eviction-controller" "$work/bin/kubectl-taint_eviction"
  "$REPO_ROOT/deploy/image-rootfs.sh" "$work/rootfs" "$work/bin/taint-eviction-controller" \
    "$work/bin/kubectl-taint_eviction" || { rm -rf "$work"; die "deploy/image-rootfs.sh failed"; }
  # As the Dockerfile's build stage checks: every library the binaries load is there.
  if ! chroot --userspec=65532:65532 "$work/rootfs" /usr/local/bin/taint-eviction-controller --version >/dev/null \
    || ! chroot --userspec=65532:65532 "$work/rootfs" /usr/local/bin/kubectl-taint_eviction --help >/dev/null; then
    rm -rf "$work"
    die "the binaries do not run in the image's root filesystem (deploy/image-rootfs.sh)"
  fi
  if ! bah bud --pull=never --network host --layers --quiet -f "$work/Dockerfile" \
      -t "$PREBUILT_IMAGE" "$work" >"$logf" 2>&1; then
    tail -n 40 "$logf" >&2
    rm -rf "$work"
    die "building $PREBUILT_IMAGE failed (log: $logf)"
  fi
  rm -rf "$work"
  log "built $PREBUILT_IMAGE from $bin in $((SECONDS - start)) s (id $(image_id "$PREBUILT_IMAGE" | cut -c1-12))"
}

# archive IMAGE: a docker-archive of IMAGE named IMAGE, kept per image id (older ones of the
# same image are removed).
archive() {
  local image=$1 id safe out
  have_image "$image" || die "no image $image in $STORE (build it first)"
  id=$(image_id "$image")
  safe=$(printf '%s' "$image" | tr -c 'A-Za-z0-9._-' '_')
  out="$ARCHIVES/$safe-${id:0:16}.tar"
  if [ ! -s "$out" ]; then
    mkdir -p "$ARCHIVES"
    rm -f "$ARCHIVES/$safe"-*.tar
    bah push --quiet "$image" "docker-archive:$out.tmp:$image" >/dev/null 2>&1 \
      || { rm -f "$out.tmp"; die "buildah push $image to a docker-archive failed"; }
    mv -f "$out.tmp" "$out"
  fi
  echo "$out"
}

# export IMAGE NAME OUT: a docker-archive of IMAGE at OUT whose image is named NAME.
export_archive() {
  local image=$1 name=$2 out=$3
  have_image "$image" || die "no image $image in $STORE (build it first)"
  rm -f "$out"
  bah push --quiet "$image" "docker-archive:$out:$name" >/dev/null \
    || { rm -f "$out"; die "buildah push $image to docker-archive:$out failed"; }
}

# rootfs IMAGE DIR: IMAGE's files, copied into the empty directory DIR.
export_rootfs() {
  local image=$1 dir=$2 ctr mnt rc=0
  have_image "$image" || die "no image $image in $STORE (build it first)"
  mkdir -p "$dir"
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
  ctr=$(bah from --pull=never "$image") || die "buildah from $image failed"
  if mnt=$(bah mount "$ctr"); then
    cp -a "$mnt/." "$dir/" || rc=1
    bah umount "$ctr" >/dev/null || true
  else
    rc=1
  fi
  bah rm "$ctr" >/dev/null 2>&1 || true
  [ "$rc" = 0 ] || die "could not copy the files of $image"
}

main() {
  local cmd=${1:-}
  [ $# -gt 0 ] && shift
  case "$cmd" in
    help | --help | -h) usage; return 0 ;;
    "") usage >&2; exit 2 ;;
  esac
  need_tools
  case "$cmd" in
    base) with_lock build_base ;;
    pause) with_lock build_pause ;;
    workload) with_lock build_workload ;;
    project) [ $# -le 1 ] || die "usage: $PROG project [TAG]"; with_lock build_project "$@" ;;
    prebuilt) with_lock build_prebuilt "$@" ;;
    archive) [ $# -eq 1 ] || die "usage: $PROG archive IMAGE"; with_lock archive "$1" ;;
    export) [ $# -eq 3 ] || die "usage: $PROG export IMAGE NAME OUT"; with_lock export_archive "$@" ;;
    rootfs) [ $# -eq 2 ] || die "usage: $PROG rootfs IMAGE DIR"; with_lock export_rootfs "$@" ;;
    id) [ $# -eq 1 ] || die "usage: $PROG id IMAGE"; image_id "$1" ;;
    *) die "unknown command '$cmd' (see '$PROG --help')" ;;
  esac
}

main "$@"
