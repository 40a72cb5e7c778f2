// Package ovsdbmodels holds the OVSDB schemas this project is pinned to and
// the libovsdb models generated from them. It has no code of its own.
//
// Layout:
//
//   - schemas/: the pinned ovn-nb, ovn-sb and vswitch schemas, copied from
//     the Debian packages named in schemas/README.md.
//   - nbdb/, sbdb/, vswitchd/: the models for OVN_Northbound, OVN_Southbound
//     and Open_vSwitch, written by libovsdb's cmd/modelgen with -extended
//     (getters, DeepCopy, Equals). These are generated only: never edit them,
//     and keep hand-written helpers in other packages.
//   - generate.sh: rewrites the three packages from schemas/.
//
// The tests in this directory regenerate the models into a temporary
// directory and fail on any difference from the committed files, and check
// that each package's FullDatabaseModel validates against its schema.
package ovsdbmodels

//go:generate bash generate.sh
