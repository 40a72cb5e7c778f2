#!/usr/bin/env bash
# Builds the Linux image from images/linux/Dockerfile, as `docker build` would, on a machine
# with no Docker and no registry: Debian's buildah (rootful) builds it, and the Dockerfile's
# base image (debian:bookworm-slim) is made here once with mmdebstrap from Debian's archive
# and stored in buildah's image store under that name, so the Dockerfile stays unchanged.
#
# Writes $OUT_DIR/ovnt-linux.tar, a docker archive (`docker load`, `ctr images import`) of
# ghcr.io/ovn-transparent/ovnt-linux:latest, also tagged with $VERSION, and
# $OUT_DIR/ovnt-windows.tar, the Windows node's HostProcess image (images/windows/main.go).
#
# Caches: the base root filesystem in $OVNT_CACHE_DIR/images/debian-bookworm-slim.tar and
# buildah's store in $OVNT_CACHE_DIR/containers (its layer cache makes a rebuild after a
# code change cost only the COPY steps).
set -euo pipefail

cd "$(dirname "$0")/.."
cache=${OVNT_CACHE_DIR:-/var/cache/ovn-transparent}
out_dir=${OUT_DIR:-_output/images}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
repo=ghcr.io/ovn-transparent/ovnt-linux
base=docker.io/library/debian:bookworm-slim

if [ "$(id -u)" -ne 0 ]; then
	echo "build-images: buildah runs rootful here: run as root" >&2
	exit 1
fi
for p in buildah mmdebstrap; do
	if ! command -v "$p" >/dev/null; then
		echo "build-images: installing $p"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null
	fi
done
for f in _output/bin/ovnt-master _output/bin/ovnt-node _output/bin/ovnt-cni; do
	[ -x "$f" ] || { echo "build-images: $f missing: run make build first" >&2; exit 1; }
done

# One store for every buildah call below, in the cache rather than /var/lib/containers.
bh() { buildah --root "$cache/containers/storage" --runroot "$cache/containers/run" "$@"; }
mkdir -p "$cache/images" "$cache/containers" "$out_dir"
exec 9>"$cache/containers/build.lock"
flock 9

# The base: Debian 12 with apt (variant minbase, as the upstream slim image), documentation
# left out (excluding the manual pages and translations too makes a required package's
# configuration fail). Made once; about a minute.
rootfs=$cache/images/debian-bookworm-slim.tar
if [ ! -s "$rootfs" ]; then
	echo "build-images: making $base with mmdebstrap"
	mmdebstrap --quiet --format=tar --variant=minbase '--dpkgopt=path-exclude=/usr/share/doc/*' \
		bookworm "$rootfs.tmp"
	mv "$rootfs.tmp" "$rootfs"
fi
# Imported again when the tar is newer than the image (a remade cache).
if ! bh inspect --type image "$base" >/dev/null 2>&1 || [ "$rootfs" -nt "$cache/containers/base.stamp" ]; then
	echo "build-images: importing $rootfs as $base"
	ctr=$(bh from --pull=never -q scratch)
	bh add "$ctr" "$rootfs" /
	bh config --os linux --arch amd64 --cmd bash \
		--env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
	bh commit --rm -q "$ctr" "$base" >/dev/null
	touch "$cache/containers/base.stamp"
fi

# The Dockerfile's RUN apt-get needs the host's network; everything else is what docker
# build does. --pull=never: the base is the one made above, there is no registry.
echo "build-images: building $repo:$version"
bh bud --pull=never --network host --layers -q -f images/linux/Dockerfile \
	-t "$repo:latest" -t "$repo:$version" . >/dev/null
# Earlier builds' tags would keep their layers in the store: only latest and this version stay.
bh images --format '{{.Name}}:{{.Tag}}' | grep "^$repo:" | grep -v -e ":latest\$" -e ":$version\$" |
	xargs -r buildah --root "$cache/containers/storage" --runroot "$cache/containers/run" rmi -f >/dev/null || true
bh rmi --prune >/dev/null 2>&1 || true
rm -f "$out_dir/ovnt-linux.tar"
bh push -q "$repo:latest" "docker-archive:$out_dir/ovnt-linux.tar:$repo:latest"
echo "build-images: wrote $out_dir/ovnt-linux.tar ($repo:latest, $(du -m "$out_dir/ovnt-linux.tar" | cut -f1) MB)"

# The Windows image: a HostProcess image needs no Windows base layers, so it is written
# directly (images/windows/main.go), dated by the commit, from make build-windows' binaries.
for f in _output/bin/windows/ovnt-node.exe _output/bin/windows/ovnt-cni.exe; do
	[ -s "$f" ] || { echo "build-images: $f missing: run make build-windows first" >&2; exit 1; }
done
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s) \
	${GO:-go} run ./images/windows -out "$out_dir/ovnt-windows.tar" -tags "latest,$version"
echo "build-images: wrote $out_dir/ovnt-windows.tar (${repo%-linux}-windows:latest, $(du -m "$out_dir/ovnt-windows.tar" | cut -f1) MB)"
