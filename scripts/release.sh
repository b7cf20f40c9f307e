#!/usr/bin/env bash
# scripts/release.sh: `make release`. Writes dist/<version>/ for the commit checked out
# (<version> from cmake/version.sh: `git describe --tags --match 'v*' --dirty`):
#   taint-eviction-controller-<version>.image.tar   the image from deploy/Dockerfile, a
#       docker-archive whose image is named taint-eviction-controller:<version> (`docker load`,
#       `podman load`, `ctr images import`)
#   taint-eviction-controller-<version>.yaml         `kubectl kustomize deploy/` with the image
#       set to taint-eviction-controller:<version> (checked: no `:latest` image)
#   taint-eviction-controller-<chart version>.tgz    the Helm chart, `helm package`d with that
#       version and appVersion, when charts/taint-eviction-controller exists and helm is here
#   taint-eviction-controller-<version>.sbom.cdx.json  CycloneDX SBOM of the image
#       (scripts/sbom.py): its Debian packages with versions and files, each binary's SHA-256,
#       the packages of the libraries it loads and the header-only libraries compiled in
#   SHA256SUMS                                       `sha256sum -c SHA256SUMS` checks them
# A work tree with changes is refused (its version ends in -dirty) unless
# TEC_RELEASE_ALLOW_DIRTY=1. Needs root (buildah, as deploy/local/images.sh), kubectl, python3.
#
# On a release tag (vX.Y.Z, no commits past it) deploy/ and the chart must already name the
# version: `scripts/release.sh set-version vX.Y.Z`, commit, tag, then `make release`.
#
# The pieces, alone (tests/release/release_test.sh runs them offline):
#   release.sh manifests VERSION OUT   the rendered manifests for VERSION into the file OUT
#   release.sh checksums DIR           DIR/SHA256SUMS for the files in DIR
#   release.sh set-version VERSION [ROOT]
#                                      VERSION (vX.Y.Z...) into deploy/kustomization.yaml's
#                                      images: entry and the
#                                      chart's version (without the v) and appVersion, then
#                                      deploy/ rendered again from the chart, in the
#                                      tree at ROOT (default: this repository)
#   release.sh deploy-version [ROOT]   the image tag deploy/kustomization.yaml names
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly REPO_ROOT
readonly NAME=taint-eviction-controller
readonly IMAGES="$REPO_ROOT/deploy/local/images.sh"

log() { echo "release: $*" >&2; }
die() { echo "release: error: $*" >&2; exit 1; }

valid_version() { [[ "$1" =~ ^v[0-9][A-Za-z0-9._-]{0,100}$ ]]; }

# manifests VERSION OUT: deploy/ rendered with the image taint-eviction-controller:VERSION.
manifests() {
  local version=$1 out=$2 overlay
  valid_version "$version" || die "'$version' is not a release version (v...)"
  command -v kubectl >/dev/null || die "kubectl is needed to render deploy/ (scripts/install-deps.sh)"
  # An overlay in a temporary directory, naming deploy/ by a relative path (kustomize takes no
  # absolute one).
  overlay=$(mktemp -d)
  cat >"$overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$overlay" "$REPO_ROOT/deploy")
images:
  - name: $NAME
    newTag: $version
EOF
  if ! kubectl kustomize "$overlay" >"$out.tmp" 2>"$overlay/err"; then
    local err
    err=$(head -c 500 "$overlay/err" | tr '\n' ' ')
    rm -rf "$overlay" "$out.tmp"
    die "kubectl kustomize deploy/ failed: $err"
  fi
  rm -rf "$overlay"
  local images
  images=$(sed -n 's/^[[:space:]-]*image:[[:space:]]*//p' "$out.tmp" | sort -u)
  if [ "$images" != "$NAME:$version" ]; then
    rm -f "$out.tmp"
    die "the rendered manifests name the images [$(tr '\n' ' ' <<<"$images")], not only $NAME:$version"
  fi
  mv -f "$out.tmp" "$out"
}

# deploy_version [ROOT]: the newTag of deploy/kustomization.yaml's images: entry for $NAME.
deploy_version() {
  local root=${1:-$REPO_ROOT}
  awk -v name="$NAME" '
    /^images:/ { in_images = 1; next }
    in_images && /^[^ ]/ { in_images = 0 }
    in_images && $1 == "-" && $2 == "name:" { mine = ($3 == name) }
    in_images && mine && $1 == "newTag:" { print $2; exit }
  ' "$root/deploy/kustomization.yaml"
}

# set_version VERSION [ROOT]: the release's version into deploy/ and the chart (see the top).
set_version() {
  local version=$1 root=${2:-$REPO_ROOT}
  valid_version "$version" || die "'$version' is not a release version (v...)"
  local kust="$root/deploy/kustomization.yaml" chart="$root/charts/$NAME/Chart.yaml"
  [ "$(grep -c "^    newTag: " "$kust")" = 1 ] || die "$kust: not one images: entry with a newTag"
  [ -f "$chart" ] || die "$chart: not found"
  sed -i -E "s|^(    newTag: ).*|\1$version|" "$kust"
  sed -i -E -e "s|^version: .*|version: ${version#v}|" -e "s|^appVersion: .*|appVersion: \"$version\"|" "$chart"
  # deploy/'s objects are the chart's rendering: its image is the new appVersion.
  "$REPO_ROOT/scripts/render-deploy.sh" "$root/deploy" "$root/charts/$NAME" || die "rendering deploy/ failed"
  [ "$(deploy_version "$root")" = "$version" ] || die "$kust: setting the tag failed"
  log "deploy/ and the chart name $NAME:$version"
}

# checksums DIR: DIR/SHA256SUMS, `sha256sum` lines ("<hex>  <name>") for every other file in
# DIR, sorted by name.
checksums() {
  local dir=$1
  [ -d "$dir" ] || die "$dir is not a directory"
  local sums
  sums=$(mktemp)
  (
    cd "$dir"
    find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort \
      | while IFS= read -r f; do sha256sum -- "$f"; done
  ) >"$sums" || { rm -f "$sums"; die "sha256sum failed in $dir"; }
  mv -f "$sums" "$dir/SHA256SUMS"
  chmod 644 "$dir/SHA256SUMS"
}

# chart VERSION OUT: charts/$NAME packaged into OUT (helm), or a message why not.
chart() {
  local version=$1 out=$2 dir="$REPO_ROOT/charts/$NAME"
  if [ ! -f "$dir/Chart.yaml" ]; then
    log "no Helm chart (charts/$NAME/Chart.yaml): skipped"
    return 0
  fi
  if ! command -v helm >/dev/null; then
    log "helm is not installed: the chart is not packaged (docs/install.md#release)"
    return 0
  fi
  # A chart version is SemVer 2 without the leading v; appVersion is the image tag.
  helm package "$dir" --version "${version#v}" --app-version "$version" -d "$out" >/dev/null \
    || die "helm package charts/$NAME failed"
  local rendered
  rendered=$(helm template "$NAME" "$out/$NAME-${version#v}.tgz" 2>/dev/null) \
    || die "helm template of the packaged chart failed"
  if grep -Eq "image:.*:latest" <<<"$rendered"; then
    die "the packaged chart renders a :latest image"
  fi
  grep -q "image:.*$NAME:$version" <<<"$rendered" \
    || log "warning: the packaged chart's default image is not $NAME:$version"
  log "chart: $NAME-${version#v}.tgz"
}

release() {
  [ "$(id -u)" = 0 ] || die "make release builds the image with buildah: run it as root"
  command -v python3 >/dev/null || die "python3 is needed (scripts/sbom.py)"
  local described version commit
  described=$("$REPO_ROOT/cmake/version.sh" "$REPO_ROOT") || die "not a git work tree: no version"
  read -r version commit <<<"$described"
  valid_version "$version" || die "cmake/version.sh printed '$described'"
  case "$version" in
    *-dirty)
      [ "${TEC_RELEASE_ALLOW_DIRTY:-}" = 1 ] \
        || die "the work tree has changes ($version): commit them, or TEC_RELEASE_ALLOW_DIRTY=1"
      ;;
  esac
  # A release tag's deploy/ and chart name it: `kubectl apply -k deploy/` at that tag installs
  # that version, not whatever "latest" means somewhere.
  if [[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] && [[ ! "$version" =~ -[0-9]+-g[0-9a-f]+ ]]; then
    local named
    named=$(deploy_version)
    [ "$named" = "$version" ] \
      || die "deploy/kustomization.yaml names $NAME:$named, not $version: run 'scripts/release.sh set-version $version', commit, and tag that commit"
  fi
  local out="$REPO_ROOT/dist/$version" start=$SECONDS
  log "$version (commit $commit) into dist/$version"
  rm -rf "$out"
  mkdir -p "$out"

  local image="localhost/$NAME:$version"
  "$IMAGES" project "$version" || die "building deploy/Dockerfile failed"
  "$IMAGES" export "$image" "$NAME:$version" "$out/$NAME-$version.image.tar"
  log "image: $NAME-$version.image.tar (id $("$IMAGES" id "$image" | cut -c1-12))"

  manifests "$version" "$out/$NAME-$version.yaml"
  log "manifests: $NAME-$version.yaml"

  chart "$version" "$out"

  local rootfs
  rootfs=$(mktemp -d)
  "$IMAGES" rootfs "$image" "$rootfs/fs" || { rm -rf "$rootfs"; die "cannot read the image's files"; }
  if ! SOURCE_DATE_EPOCH=$(git -C "$REPO_ROOT" log -1 --format=%ct) python3 "$REPO_ROOT/scripts/sbom.py" \
      --rootfs "$rootfs/fs" --binary /usr/local/bin/$NAME --binary /usr/local/bin/kubectl-taint_eviction \
      --version "$version" --compiled-in-lock "$REPO_ROOT/deploy/image-packages.lock" \
      -o "$out/$NAME-$version.sbom.cdx.json"; then
    rm -rf "$rootfs"
    die "scripts/sbom.py failed"
  fi
  rm -rf "$rootfs"
  log "SBOM: $NAME-$version.sbom.cdx.json"

  checksums "$out"
  log "done in $((SECONDS - start)) s: dist/$version/"
  (cd "$out" && ls -l) >&2
}

main() {
  case "${1:-}" in
    "") release ;;
    manifests) [ $# -eq 3 ] || die "usage: release.sh manifests VERSION OUT"; manifests "$2" "$3" ;;
    checksums) [ $# -eq 2 ] || die "usage: release.sh checksums DIR"; checksums "$2" ;;
    set-version)
      [ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: release.sh set-version VERSION [ROOT]"
      set_version "$2" "${3:-}"
      ;;
    deploy-version) [ $# -le 2 ] || die "usage: release.sh deploy-version [ROOT]"; deploy_version "${2:-}" ;;
    -h | --help | help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
    *) die "unknown command '$1' (release.sh --help)" ;;
  esac
}

main "$@"
