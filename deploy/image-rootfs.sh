#!/usr/bin/env bash
# deploy/image-rootfs.sh OUT BINARY...: the root filesystem of the image's runtime stage, in the
# empty directory OUT: each BINARY in /usr/local/bin, the shared libraries they load (their ldd
# closure, the dynamic loader included, each at the path the loader looks for it), the CA
# bundle (/etc/ssl/certs/ca-certificates.crt), /etc/passwd and /etc/group with the nonroot user
# and group 65532 (deploy/deployment.yaml's runAsUser), an empty /tmp, and nothing else: no
# shell, no apt, no dpkg. For scanners and scripts/sbom.py, each Debian package a file came
# from gets a /var/lib/dpkg/status.d/<package> stanza (its dpkg status: name, version,
# architecture, source) and a <package>.md5sums with the files of it the image holds, as
# Google's distroless images record theirs.
#
# Runs where the binaries were built and their libraries are installed by dpkg:
# deploy/Dockerfile's build stage, or this host (deploy/local/images.sh prebuilt). Needs bash,
# coreutils, ldd and dpkg-query.
set -euo pipefail

die() { echo "image-rootfs.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: image-rootfs.sh OUT BINARY..."
out=$1
shift
[ -d "$out" ] || mkdir -p "$out"
[ -z "$(ls -A "$out")" ] || die "$out is not empty"
out=$(cd "$out" && pwd -P)

declare -A owner_files=()  # package -> its files in the image, one per line
copied=()

# add_path PATH: PATH into OUT, at the same path; each symlink on the way copied as a symlink
# (libssl.so.3 -> libssl.so.3.0.x, /usr/lib64/ld-linux-x86-64.so.2 -> ../lib/...), the file
# at its end as a file.
add_path() {
  local p=$1 dir target
  while :; do
    dir=$(realpath "$(dirname "$p")")
    p="$dir/$(basename "$p")"
    mkdir -p "$out$dir"
    if [ -L "$p" ]; then
      [ -e "$out$p" ] || [ -L "$out$p" ] || cp -P "$p" "$out$p"
      target=$(readlink "$p")
      case "$target" in /*) p=$target ;; *) p="$dir/$target" ;; esac
    else
      [ -f "$p" ] || die "$p is not a file"
      [ -e "$out$p" ] || { cp "$p" "$out$p"; copied+=("$p"); }
      return 0
    fi
  done
}

# The usrmerge links (/lib -> usr/lib, /lib64 -> usr/lib64) as this system has them, so a path
# through them (the loader's /lib64/ld-linux-x86-64.so.2) resolves in the image too.
for d in /lib /lib64; do
  if [ -L "$d" ]; then
    ln -s "$(readlink "$d")" "$out$d"
  fi
done

mkdir -p "$out/usr/local/bin"
for bin in "$@"; do
  [ -x "$bin" ] || die "$bin is not an executable"
  cp "$bin" "$out/usr/local/bin/$(basename "$bin")"
  # `ldd` prints "name => /path (addr)" per library and "/path (addr)" for the loader; a
  # library it cannot find is "name => not found".
  libs=$(ldd "$bin") || die "ldd $bin failed"
  if grep -q 'not found' <<<"$libs"; then
    die "$bin needs a library this system does not have: $(grep 'not found' <<<"$libs" | tr -s ' \t' ' ')"
  fi
  while read -r path; do
    add_path "$path"
  done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$libs")
done

add_path /etc/ssl/certs/ca-certificates.crt
mkdir -p "$out/tmp"
chmod 1777 "$out/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' \
  >"$out/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$out/etc/group"

# The package dpkg says installed each copied file, asked once for all (a dpkg-query costs a
# read of the whole database). dpkg's database names the path the package ships, /lib/... or
# /usr/lib/... (usrmerge or not): both are asked; a path no package holds (the binaries) is
# left out.
queries=()
for f in "${copied[@]}"; do
  alt=${f#/usr}
  [ "$alt" != "$f" ] || alt="/usr$f"
  queries+=("$f" "$alt")
done
declare -A owner=()
while IFS= read -r line; do
  case "$line" in diversion* | *", "*) continue ;; esac
  owner[${line#*: }]=${line%%: *}
done < <(dpkg-query -S "${queries[@]}" 2>/dev/null || true)
for f in "${copied[@]}"; do
  alt=${f#/usr}
  [ "$alt" != "$f" ] || alt="/usr$f"
  case "$f" in
    /etc/ssl/certs/ca-certificates.crt) pkg=ca-certificates ;;  # made by update-ca-certificates
    *) pkg=${owner[$f]:-${owner[$alt]:-}} ;;
  esac
  [ -n "$pkg" ] || continue
  owner_files[$pkg]+="$f"$'\n'
done

mkdir -p "$out/var/lib/dpkg/status.d"
for pkg in "${!owner_files[@]}"; do
  name=${pkg%%:*}
  dpkg-query -W -f='Package: ${Package}\nVersion: ${Version}\nArchitecture: ${Architecture}\nSource: ${source:Package}\nSource-Version: ${source:Version}\n' \
    "$pkg" >"$out/var/lib/dpkg/status.d/$name"
  while read -r f; do
    [ -n "$f" ] || continue
    printf '%s  %s\n' "$(md5sum <"$f" | cut -d' ' -f1)" "${f#/}"
  done <<<"${owner_files[$pkg]}" | sort >"$out/var/lib/dpkg/status.d/$name.md5sums"
done
