#!/usr/bin/env bash
# The image `make image` builds from deploy/Dockerfile, unchanged, runs in a container: the
# binary starts (every shared library it needs is in the runtime stage) as the image's user
# 65532, `--version` prints the version and `--help` the flags the Deployment passes. The
# container runs on the real node's containerd (in a namespace of its own, not the kubelet's).
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
grep -q '^taint-eviction-controller [0-9]' <<<"$version" || fail "unexpected --version output: $version"
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

ids=$(run_in_image id sh -c 'id -u; id -g') || fail "id failed in the image"
[ "$(tr '\n' ' ' <<<"$ids")" = "65532 65532 " ] || fail "the image runs as '$ids', expected 65532 65532 (USER in deploy/Dockerfile)"
log "the image's user is 65532:65532"

# Which image the Deployment runs (the fixture's choice): say so, so the log tells whether
# the in-cluster tests ran this very image.
dockerfile_id=$("$images" id "$IMAGE")
log "deploy/Dockerfile image id ${dockerfile_id:0:12}; the Deployment runs $TEC_CLUSTER_CONTROLLER_IMAGE"

echo "PASS: $TEST_NAME"
