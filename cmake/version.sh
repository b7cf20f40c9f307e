#!/usr/bin/env bash
# cmake/version.sh [DIR]: prints "VERSION COMMIT" for the git work tree at DIR (default: this
# repository), the one rule for the build (cmake/commit.cmake), the image (deploy/local/images.sh
# passes both as build arguments: the image's build context has no .git) and scripts/release.sh.
#   VERSION: `git describe --tags --match 'v*' --dirty --abbrev=12`, e.g. v0.1.0 on the tag,
#            v0.1.0-3-g0123456789ab three commits past it, with "-dirty" when tracked files
#            differ from HEAD; before the first v* tag: v0.0.0-<commits>-g<commit>[-dirty].
#   COMMIT:  `git rev-parse --short=12 HEAD`, with "-dirty" as above.
# Exits 1 (and prints nothing) outside a git work tree.
set -euo pipefail
dir=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)}
g() { git -C "$dir" "$@"; }
commit=$(g rev-parse --short=12 HEAD 2>/dev/null) || exit 1
dirty=""
# Refresh the index first: a file touched but not changed is not dirty.
g update-index -q --refresh >/dev/null 2>&1 || true
g diff --quiet HEAD -- 2>/dev/null || dirty="-dirty"
if ! version=$(g describe --tags --match 'v*' --dirty --abbrev=12 2>/dev/null); then
  version="v0.0.0-$(g rev-list --count HEAD)-g$commit$dirty"
fi
echo "$version $commit$dirty"
