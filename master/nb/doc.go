// Package nb is how the master writes the OVN Northbound database: the ownership marks on
// every row it writes, and the diff that turns the rows one Kubernetes object wants into the
// changes that make the database say exactly that.
//
// A row's external_ids name the object it exists for (owner kind and key) and the part of
// that object it implements (role); owner.go declares every role. Diff compares the desired
// rows of one owner with the rows carrying its marks and returns a Plan, a value; Plan.Ops
// turns it into the operations of one transaction. Rows are matched by their marks, never by
// name, so a row edited by hand is corrected in place, duplicates are removed, and a row the
// owner no longer wants is deleted. tables.go describes every table the master writes.
//
// README.md explains the model (root and non-root tables, references, re-parenting) with a
// worked example.
package nb
