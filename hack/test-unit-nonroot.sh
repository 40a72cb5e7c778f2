#!/usr/bin/env bash
# Runs `make test-unit` as an unprivileged user (default nobody), as a developer without root
# runs it: from this tree, which that user only reads, with its own HOME, Go build and module
# caches and $(OUT) under $OVNT_UNIT_DIR (default /var/tmp/ovnt-unit). The caches are kept:
# the first run compiles everything (the module cache's path is part of the build cache's
# keys), the next ones are warm. Run as root; the modules come from root's module cache,
# else from the proxy. Extra arguments go to make (e.g. TEST_UNIT_FLAGS=-v).
set -euo pipefail
cd "$(dirname "$0")/.."
user=${OVNT_UNIT_USER:-nobody}
dir=${OVNT_UNIT_DIR:-/var/tmp/ovnt-unit}
if [ "$(id -u)" != 0 ]; then
	echo "test-unit-nonroot: run as root (it switches to $user); as yourself, run make test-unit" >&2
	exit 1
fi
mkdir -p "$dir/home" "$dir/gocache" "$dir/gomodcache" "$dir/out"
GOMODCACHE=$dir/gomodcache GOPROXY="file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)" \
	GOFLAGS=-mod=readonly go mod download
chown -R "$user" "$dir"
exec runuser -u "$user" -- env -i PATH="$PATH" HOME="$dir/home" CI="${CI:-}" \
	GOCACHE="$dir/gocache" GOMODCACHE="$dir/gomodcache" GOPROXY=off GOFLAGS=-mod=readonly \
	GOTOOLCHAIN=local TMPDIR=/tmp make --no-print-directory test-unit OUT="$dir/out" "$@"
