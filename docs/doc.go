// Package docs holds no code: its tests check the documents of the repository against the
// code. The NB naming table of architecture.md must name exactly the rows the master builds,
// and every relative link, anchor and repository path in the *.md files, and every ../ path in
// a Go comment, must resolve inside the repository. A document that drifts from the code, or
// points at something outside the repository, fails `go test ./docs/`.
package docs
