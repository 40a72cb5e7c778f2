#!/usr/bin/env bash
# Regenerates the libovsdb models from the pinned schemas in schemas/.
#
#   bash ovsdb-models/generate.sh [OUT_DIR]
#
# Writes OUT_DIR/nbdb, OUT_DIR/sbdb and OUT_DIR/vswitchd; OUT_DIR defaults to
# the directory holding this script, so a bare run refreshes the committed
# packages. Those package directories hold generated code only: their *.go
# files are replaced wholesale, because modelgen never deletes the file of a
# table that a newer schema dropped.
#
# The modelgen flags here must match generateInto in models_test.go.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Build from inside the module so that the libovsdb version pinned in go.mod
# is the one that generates.
(cd "$here" && go build -o "$tmp/modelgen" github.com/ovn-org/libovsdb/cmd/modelgen)

gen() {
	local pkg="$1" schema="$2"
	# Generate aside first so that a failure leaves the package untouched.
	"$tmp/modelgen" -extended -p "$pkg" -o "$tmp/$pkg" "$here/schemas/$schema"
	mkdir -p "$out/$pkg"
	rm -f "$out/$pkg"/*.go
	cp "$tmp/$pkg"/*.go "$out/$pkg/"
}

gen nbdb ovn-nb.ovsschema
gen sbdb ovn-sb.ovsschema
gen vswitchd vswitch.ovsschema
