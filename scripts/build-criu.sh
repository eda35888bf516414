#!/usr/bin/env bash
# Builds CRIU, which saves and restores local_process sandboxes with their memory
# (src/isolation/host/criu.ts), into /usr/local/lib/agent-runner/criu/criu. Idempotent: a build of
# the same source and patches is kept.
#
# Debian 12's criu (3.17) does not start on recent kernels; Debian 13's 4.1.1 does, and its
# source builds on Debian 12. Its upstream tarball is taken from Debian's archive (checked
# against its SHA-256 here), with the project's patches (scripts/criu/, each says why), and
# built with Debian 12's libraries. Run as root by scripts/setup-host.sh; without it
# local_process sandboxes pause with their files only, and /v1/backends says so.
set -euo pipefail

version=4.1.1
tarball_sha256=f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe
url="http://deb.debian.org/debian/pool/main/c/criu/criu_${version}.orig.tar.xz"
prefix=/usr/local/lib/agent-runner/criu
here=$(cd "$(dirname "$0")" && pwd)

# What was built: the version and the patches, so a changed patch builds again.
stamp=$(cat <(echo "$version") "$here"/criu/*.patch | sha256sum | cut -d' ' -f1)
if [ -x "$prefix/criu" ] && [ "$(cat "$prefix/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "build-criu: CRIU $version present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "build-criu: CRIU $version is not built (run scripts/setup-host.sh as root)" >&2
  exit 1
fi

# Its build's libraries and tools; at run time it calls ip, iptables-save/-restore and tar.
packages=(make gcc pkg-config python3 libbsd-dev libcap-dev libnet1-dev libnftables-dev libnl-3-dev
  libprotobuf-c-dev libprotobuf-dev protobuf-c-compiler protobuf-compiler iproute2 iptables tar)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-criu: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "build-criu: building CRIU $version"
curl -fsSL --retry 3 -o "$work/criu.tar.xz" "$url"
echo "$tarball_sha256  $work/criu.tar.xz" | sha256sum --check --quiet
tar -xJf "$work/criu.tar.xz" -C "$work"
source="$work/criu-$version"
for patch in "$here"/criu/*.patch; do
  patch -s -p1 -d "$source" <"$patch"
done
make -s -C "$source" -j"$(nproc)" criu >"$work/make.log" 2>&1 || {
  tail -30 "$work/make.log" >&2
  exit 1
}
mkdir -p "$prefix"
install -m 0755 "$source/criu/criu" "$prefix/criu.new"
mv "$prefix/criu.new" "$prefix/criu"
echo "$stamp" >"$prefix/stamp"
echo "build-criu: CRIU $version at $prefix/criu"
