#!/usr/bin/env bash
# The image `make image` builds from deploy/Dockerfile, unchanged, runs in a container: the
# binary starts (every shared library it needs is in the runtime stage), `--version` prints the
# version, commit and compiler and `--help` the flags the Deployment passes; containerd would
# run it as the image's user 65532. The image holds the binaries, their libraries, the CA
# bundle, passwd/group and dpkg records only: no shell (a `/bin/sh` run fails), no apt, no dpkg.
# The container runs on the real node's containerd (in a namespace of its own, not the
# kubelet's).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly IMAGE=localhost/taint-eviction-controller:latest
readonly CTR_NS=tec-image-test

images="$REPO_ROOT/deploy/local/images.sh"
t0=$(now_ms)
"$images" project || fail "images.sh project (make image) failed"
log "make image: $(($(now_ms) - t0)) ms (cached layers when the sources did not change)"
archive=$("$images" archive "$IMAGE") || fail "cannot export $IMAGE"

on_cleanup() {
  kctr -n "$CTR_NS" images rm "$IMAGE" >/dev/null 2>&1
  ctr --address "$TEC_CLUSTER_CONTAINERD_SOCK" namespaces rm "$CTR_NS" >/dev/null 2>&1
}
kctr -n "$CTR_NS" images import "$archive" >/dev/null || fail "ctr images import $archive failed"

# run_in_image NAME CMD...: runs CMD in a fresh container of IMAGE; prints its output.
# `ctr run` can lose the whole output of a process that exits at once (the FIFOs are read
# after the exit; containerd/containerd#770): a run that succeeds with no output is tried
# again, up to 5 times, and says so. Every command run here prints something.
run_in_image() {
  local name=$1 out attempt
  shift
  for attempt in 1 2 3 4 5; do
    out=$(kctr -n "$CTR_NS" run --rm --runc-root "$TEC_CLUSTER_DIR/node/runc" "$IMAGE" \
      "tec-image-test-$name-$$-$attempt" "$@") || { printf '%s' "$out"; return 1; }
    [ -n "$out" ] && { printf '%s\n' "$out"; return 0; }
    log "ctr run $name: exit 0 and no output (attempt $attempt; the ctr output race): again" >&2
  done
  return 1
}

version=$(run_in_image version /usr/local/bin/taint-eviction-controller --version) \
  || fail "taint-eviction-controller --version failed in the image: $version"
grep -Eq '^taint-eviction-controller v[0-9][^ ]* \(commit [^ ]+, (gcc|clang) [0-9]' <<<"$version" \
  || fail "unexpected --version output: $version"
# The version reaches the image through deploy/local/images.sh's TEC_VERSION build argument.
if described=$("$REPO_ROOT/cmake/version.sh" "$REPO_ROOT" 2>/dev/null); then
  grep -q "^taint-eviction-controller ${described%% *} " <<<"$version" \
    || fail "the image's --version is not ${described%% *}: $version"
fi
# The commit reaches the image through deploy/local/images.sh's TEC_COMMIT build argument.
if head=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --short=12 HEAD 2>/dev/null); then
  grep -q "(commit $head" <<<"$version" || fail "the image's --version names no commit $head: $version"
fi
log "--version in the image: $version"

help=$(run_in_image help /usr/local/bin/taint-eviction-controller --help) \
  || fail "taint-eviction-controller --help failed in the image"
for flag in --leader-elect --metrics-bind-address --health-probe-bind-address --kubeconfig; do
  grep -q -- "$flag" <<<"$help" || fail "--help in the image does not mention $flag"
done
log "--help in the image lists the flags deploy/deployment.yaml passes"

# The user: what containerd puts in the spec of a container of this image (the image's USER).
kctr -n "$CTR_NS" containers create "$IMAGE" "tec-image-test-user-$$" /usr/local/bin/taint-eviction-controller \
  >/dev/null || fail "ctr containers create failed"
user=$(kctr -n "$CTR_NS" containers info "tec-image-test-user-$$" | jq -c '.Spec.process.user | [.uid, .gid]')
kctr -n "$CTR_NS" containers rm "tec-image-test-user-$$" >/dev/null 2>&1
[ "$user" = "[65532,65532]" ] || fail "a container of the image runs as $user, expected [65532,65532] (USER in deploy/Dockerfile)"
log "the image's user is 65532:65532"

# No shell: a run of /bin/sh fails to start.
if out=$(kctr -n "$CTR_NS" run --rm --runc-root "$TEC_CLUSTER_DIR/node/runc" "$IMAGE" \
    "tec-image-test-sh-$$" /bin/sh -c 'echo shell' 2>&1); then
  fail "/bin/sh ran in the image: $out"
fi
kctr -n "$CTR_NS" containers rm "tec-image-test-sh-$$" >/dev/null 2>&1 || true
# The image's files: only what the runtime needs.
rootfs=$(mktemp -d)
"$images" rootfs "$IMAGE" "$rootfs/fs" || { rm -rf "$rootfs"; fail "cannot read the image's files"; }
for f in bin/sh usr/bin/sh bin/bash usr/bin/bash usr/bin/apt usr/bin/apt-get usr/bin/dpkg; do
  if [ -e "$rootfs/fs/$f" ] || [ -L "$rootfs/fs/$f" ]; then rm -rf "$rootfs"; fail "the image holds /$f"; fi
done
[ -s "$rootfs/fs/etc/ssl/certs/ca-certificates.crt" ] || { rm -rf "$rootfs"; fail "the image has no CA bundle"; }
extra=$(cd "$rootfs/fs" && find . -type f ! -path './usr/local/bin/*' ! -path './var/lib/dpkg/status.d/*' \
  ! -path ./etc/passwd ! -path ./etc/group ! -path ./etc/ssl/certs/ca-certificates.crt ! -name '*.so*' | sort)
files=$(cd "$rootfs/fs" && find . -type f | wc -l)
rm -rf "$rootfs"
[ -z "$extra" ] || fail "the image holds files beyond binaries, libraries, CA bundle, passwd/group and dpkg records: $extra"
log "no shell, apt or dpkg in the image; $files files: binaries, libraries, CA bundle, passwd/group, dpkg records"

# Which image the Deployment runs (the fixture's choice): say so, so the log tells whether
# the in-cluster tests ran this very image.
dockerfile_id=$("$images" id "$IMAGE")
log "deploy/Dockerfile image id ${dockerfile_id:0:12}; the Deployment runs $TEC_CLUSTER_CONTROLLER_IMAGE"

echo "PASS: $TEST_NAME"
