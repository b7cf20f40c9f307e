#!/usr/bin/env bash
# The pieces of `make release` that run offline in seconds (the full run builds the image: see
# docs/install.md#release):
# - cmake/version.sh on a scratch git repository: before any v* tag, on the tag, past it, dirty;
# - cmake/commit.cmake: the version and commit from the environment (the image's build), and
#   what it refuses to put in a C string;
# - scripts/release.sh manifests: deploy/ rendered names one image, taint-eviction-controller:V;
# - deploy/ itself (`kubectl kustomize deploy/`) names the chart's appVersion, never :latest;
#   scripts/release.sh set-version sets deploy/'s tag and the chart's versions (on a copy);
# - scripts/release.sh checksums: the SHA256SUMS format `sha256sum -c` reads, sorted;
# - deploy/Dockerfile and deploy/image-packages.lock: no remote frontend, every package pinned
#   from the lock, a FROM scratch runtime;
# - deploy/image-rootfs.sh on the host-built binary (TEC_BIN): no shell, apt or dpkg; the binary
#   runs in it (chroot, as root); scripts/sbom.py lists each package of the libraries it loads
#   with this host's version, and Boost, nlohmann-json and CLI11.
# Parts needing what is missing (the binary: the sanitizer presets; root; kubectl) are skipped
# with a message.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
readonly REPO_ROOT
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
expect_eq() {  # expect_eq WHAT GOT WANT
  if [ "$2" = "$3" ]; then ok "$1: $2"; else fail "$1: got '$2', want '$3'"; fi
}

# --- cmake/version.sh -------------------------------------------------------------------------
repo="$work/repo"
mkdir -p "$repo"
g() { git -C "$repo" -c user.name=t -c user.email=t@example.com "$@"; }
g init -q
echo one >"$repo/f"
g add f
g commit -q -m one
c1=$(g rev-parse --short=12 HEAD)
expect_eq "no tag" "$("$REPO_ROOT/cmake/version.sh" "$repo")" "v0.0.0-1-g$c1 $c1"
g tag -a -m "not a release" other-1
g tag -a -m v0.1.0 v0.1.0
expect_eq "on the tag" "$("$REPO_ROOT/cmake/version.sh" "$repo")" "v0.1.0 $c1"
echo two >"$repo/f"
expect_eq "dirty on the tag" "$("$REPO_ROOT/cmake/version.sh" "$repo")" "v0.1.0-dirty $c1-dirty"
g commit -q -am two
c2=$(g rev-parse --short=12 HEAD)
expect_eq "past the tag" "$("$REPO_ROOT/cmake/version.sh" "$repo")" "v0.1.0-1-g$c2 $c2"
echo untracked >"$repo/new"
expect_eq "an untracked file is not dirty" "$("$REPO_ROOT/cmake/version.sh" "$repo")" \
  "v0.1.0-1-g$c2 $c2"
if "$REPO_ROOT/cmake/version.sh" "$work/nowhere" >/dev/null 2>&1; then
  fail "version.sh outside a git work tree exits 0"
else
  ok "version.sh outside a git work tree fails"
fi

# --- cmake/commit.cmake -----------------------------------------------------------------------
gen() {  # gen VERSION COMMIT: the generated file's version and commit lines
  TEC_VERSION=$1 TEC_COMMIT=$2 cmake -DSRC="$work/nowhere" -DOUT="$work/commit.cpp" \
    -P "$REPO_ROOT/cmake/commit.cmake"
  grep -E '^const char\* const (version|commit) = ' "$work/commit.cpp" | tr '\n' ' '
}
expect_eq "commit.cmake from the environment" "$(gen v1.2.3-4-gabc abc)" \
  'const char* const version = "v1.2.3-4-gabc"; const char* const commit = "abc"; '
expect_eq "commit.cmake refuses a quote" "$(gen 'v1"; x' 'a"b')" \
  'const char* const version = "v0.0.0-unknown"; const char* const commit = "unknown"; '
expect_eq "commit.cmake outside git" "$(gen '' '')" \
  'const char* const version = "v0.0.0-unknown"; const char* const commit = "unknown"; '

# --- scripts/release.sh manifests ---------------------------------------------------------------
if command -v kubectl >/dev/null; then
  "$REPO_ROOT/scripts/release.sh" manifests v9.8.7 "$work/m.yaml"
  images=$(sed -n 's/^[[:space:]-]*image:[[:space:]]*//p' "$work/m.yaml" | sort -u)
  expect_eq "rendered manifests' images" "$images" "taint-eviction-controller:v9.8.7"
  if grep -n ':latest' "$work/m.yaml"; then fail "the rendered manifests say :latest"; fi
  grep -q '^kind: Deployment$' "$work/m.yaml" || fail "no Deployment in the rendered manifests"
  if "$REPO_ROOT/scripts/release.sh" manifests latest "$work/bad.yaml" 2>/dev/null; then
    fail "release.sh manifests accepts the version 'latest'"
  fi
else
  echo "skipped: release.sh manifests (no kubectl)"
fi

# --- deploy/'s own image and scripts/release.sh set-version ------------------------------------
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$REPO_ROOT/charts/taint-eviction-controller/Chart.yaml")
expect_eq "deploy/kustomization.yaml's tag is the chart's appVersion" \
  "$("$REPO_ROOT/scripts/release.sh" deploy-version)" "$app_version"
if command -v kubectl >/dev/null; then
  images=$(kubectl kustomize "$REPO_ROOT/deploy" | sed -n 's/^[[:space:]-]*image:[[:space:]]*//p' | sort -u)
  expect_eq "kubectl kustomize deploy/ images" "$images" "taint-eviction-controller:$app_version"
fi
copy="$work/copy"
mkdir -p "$copy/charts"
cp -r "$REPO_ROOT/deploy" "$copy/deploy"
cp -r "$REPO_ROOT/charts/taint-eviction-controller" "$copy/charts/"
set_files="deploy/kustomization.yaml deploy/deployment.yaml charts/taint-eviction-controller/Chart.yaml"
before=$(cd "$REPO_ROOT" && sha256sum $set_files)
"$REPO_ROOT/scripts/release.sh" set-version v9.8.7-rc.1 "$copy" 2>/dev/null
expect_eq "set-version: deploy-version" "$("$REPO_ROOT/scripts/release.sh" deploy-version "$copy")" \
  "v9.8.7-rc.1"
expect_eq "set-version: deployment.yaml" "$(sed -n 's/^ *image: //p' "$copy/deploy/deployment.yaml")" \
  "taint-eviction-controller:v9.8.7-rc.1"
expect_eq "set-version: the chart" \
  "$(grep -E '^(version|appVersion):' "$copy/charts/taint-eviction-controller/Chart.yaml" | tr '\n' ' ')" \
  'version: 9.8.7-rc.1 appVersion: "v9.8.7-rc.1" '
if command -v kubectl >/dev/null; then
  images=$(kubectl kustomize "$copy/deploy" | sed -n 's/^[[:space:]-]*image:[[:space:]]*//p' | sort -u)
  expect_eq "set-version: kubectl kustomize" "$images" "taint-eviction-controller:v9.8.7-rc.1"
fi
if "$REPO_ROOT/scripts/release.sh" set-version latest "$copy" 2>/dev/null; then
  fail "release.sh set-version accepts 'latest'"
fi
expect_eq "the real tree is untouched" "$(cd "$REPO_ROOT" && sha256sum $set_files)" "$before"

# --- scripts/release.sh checksums ---------------------------------------------------------------
dist="$work/dist"
mkdir -p "$dist"
printf 'x' >"$dist/b.yaml"
printf 'y' >"$dist/a.tar"
printf 'stale' >"$dist/SHA256SUMS"
"$REPO_ROOT/scripts/release.sh" checksums "$dist"
expect_eq "SHA256SUMS names" "$(awk '{print $2}' "$dist/SHA256SUMS" | tr '\n' ' ')" "a.tar b.yaml "
if grep -Evq '^[0-9a-f]{64}  [^/]+$' "$dist/SHA256SUMS"; then
  fail "SHA256SUMS has a line not '<sha256>  <name>': $(cat "$dist/SHA256SUMS")"
fi
if (cd "$dist" && sha256sum --quiet -c SHA256SUMS); then
  ok "sha256sum -c SHA256SUMS"
else
  fail "sha256sum -c SHA256SUMS"
fi

# --- deploy/Dockerfile and the lock -------------------------------------------------------------
dockerfile="$REPO_ROOT/deploy/Dockerfile"
lock="$REPO_ROOT/deploy/image-packages.lock"
if grep -n '^# *syntax=' "$dockerfile"; then fail "deploy/Dockerfile names a remote frontend"; fi
bad=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$lock" | grep -Ev '^[a-z0-9][a-z0-9.+-]*=[0-9][A-Za-z0-9.+~:-]*$' || true)
if [ -z "$bad" ]; then
  ok "every line of the lock is NAME=VERSION"
else
  fail "lock lines not NAME=VERSION: $bad"
fi
dups=$(sed -e 's/#.*//' -e 's/=.*//' -e '/^[[:space:]]*$/d' "$lock" | sort | uniq -d)
[ -z "$dups" ] || fail "packages twice in the lock: $dups"
# The only install installs the lock; nothing else is named after `apt-get install`.
installs=$(grep -c 'apt-get install' "$dockerfile" || true)
expect_eq "apt-get installs in deploy/Dockerfile" "$installs" 1
if grep -A2 'apt-get install' "$dockerfile" \
  | grep -q "\$(sed -e 's/#.\*//' /src/deploy/image-packages.lock)"; then
  ok "deploy/Dockerfile installs the lock"
else
  fail "deploy/Dockerfile does not install the lock's packages"
fi
expect_eq "the runtime stage" "$(grep -E '^FROM .* AS runtime$' "$dockerfile")" "FROM scratch AS runtime"
for pkg in libboost1.81-dev nlohmann-json3-dev libcli11-dev ca-certificates; do
  grep -q "^$pkg=" "$lock" || fail "$pkg is not pinned in the lock"
done

# --- deploy/image-rootfs.sh and scripts/sbom.py on the host binary -------------------------------
bin=${TEC_BIN:-}
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "skipped: image-rootfs.sh and sbom.py (TEC_BIN is not a built binary)"
else
  rootfs="$work/rootfs"
  "$REPO_ROOT/deploy/image-rootfs.sh" "$rootfs" "$bin"
  for f in bin/sh usr/bin/sh bin/bash usr/bin/apt-get usr/bin/dpkg usr/bin/apt; do
    if [ -e "$rootfs/$f" ] || [ -L "$rootfs/$f" ]; then fail "the root filesystem holds /$f"; fi
  done
  [ -s "$rootfs/etc/ssl/certs/ca-certificates.crt" ] || fail "no CA bundle in the root filesystem"
  grep -q '^nonroot:x:65532:65532:' "$rootfs/etc/passwd" || fail "no user 65532 in /etc/passwd"
  grep -q '^nonroot:x:65532:' "$rootfs/etc/group" || fail "no group 65532 in /etc/group"
  extra=$(cd "$rootfs" && find . -type f ! -path './usr/local/bin/*' ! -path './var/lib/dpkg/status.d/*' \
    ! -path './etc/passwd' ! -path './etc/group' ! -path './etc/ssl/certs/ca-certificates.crt' \
    ! -name '*.so*' | sort)
  if [ -z "$extra" ]; then
    ok "only binaries, libraries, CA bundle, passwd, group and dpkg records"
  else
    fail "other files in the root filesystem: $extra"
  fi
  if [ "$(id -u)" = 0 ]; then
    out=$(chroot --userspec=65532:65532 "$rootfs" "/usr/local/bin/$(basename "$bin")" --version) \
      || fail "the binary does not run in the root filesystem"
    if grep -Eq '^taint-eviction-controller v[0-9].* \(commit [0-9a-z.-]+, (gcc|clang) [0-9]' <<<"$out"; then
      ok "--version in the root filesystem: $out"
    else
      fail "unexpected --version: $out"
    fi
  else
    echo "skipped: running the binary in the root filesystem (chroot needs root)"
  fi
  python3 "$REPO_ROOT/scripts/sbom.py" --rootfs "$rootfs" --binary "/usr/local/bin/$(basename "$bin")" \
    --version v0.0.0-test --compiled-in-host -o "$work/sbom.json"
  # Every package that holds a library the binary loads (ldd on the host) is a component with
  # this host's version; the header-only ones are there with theirs.
  python3 - "$work/sbom.json" "$bin" <<'EOF' || failures=$((failures + 1))
import json, re, subprocess, sys
bom = json.load(open(sys.argv[1]))
assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.5", bom.get("bomFormat")
comps = {c["name"]: c for c in bom["components"]}
def host_version(pkg):
    return subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                          text=True, check=True).stdout
want = set()
for line in subprocess.run(["ldd", sys.argv[2]], capture_output=True, text=True).stdout.splitlines():
    m = re.search(r"(/\S+) \(0x", line)
    if not m:
        continue
    path = m.group(1)
    for q in (path, path[4:] if path.startswith("/usr") else "/usr" + path):
        r = subprocess.run(["dpkg-query", "-S", q], capture_output=True, text=True)
        if r.returncode == 0:
            want.add(r.stdout.split(":")[0])
            break
    else:
        sys.exit("FAIL: no package holds " + path)
bad = []
for pkg in sorted(want) + ["libboost1.81-dev", "nlohmann-json3-dev", "libcli11-dev"]:
    c = comps.get(pkg)
    if c is None:
        bad.append(pkg + " missing")
    elif c["version"] != host_version(pkg):
        bad.append("%s %s, host %s" % (pkg, c["version"], host_version(pkg)))
    elif not c["purl"].startswith("pkg:deb/debian/" + pkg + "@"):
        bad.append(pkg + " purl " + c["purl"])
app = [c for c in bom["components"] if c["type"] == "application"]
if len(app) != 1 or not re.fullmatch(r"[0-9a-f]{64}", app[0]["hashes"][0]["content"]):
    bad.append("the binary's component: %r" % app)
if bad:
    sys.exit("FAIL: sbom.py: " + "; ".join(bad))
print("ok: sbom.py lists %d packages (%s) with this host's versions" % (len(want), " ".join(sorted(want))))
EOF
  # The generator's errors are one line: a root filesystem it cannot read.
  err=$(python3 "$REPO_ROOT/scripts/sbom.py" --rootfs "$work/nowhere" --binary /x --version v1 \
    --compiled-in-host 2>&1 >/dev/null) && fail "sbom.py on a missing root filesystem exits 0"
  expect_eq "sbom.py error lines" "$(wc -l <<<"$err")" 1
fi

if [ "$failures" -gt 0 ]; then
  echo "FAIL: $failures check(s) failed"
  exit 1
fi
echo "PASS: release_test"
