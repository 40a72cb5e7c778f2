//go:build linux

// Package images builds the container images the test cluster's pods run, offline: no
// registry is reachable from the machines the tests run on, so each image is assembled here
// from binaries built from the Go module proxy and Debian's packages, written as a docker
// archive (what `docker save` writes and `ctr images import` reads), and imported into every
// node's containerd under its upstream name, which no pod spec has to change.
package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Upstream names of the images.
const (
	Pause   = "registry.k8s.io/pause:3.10.1"
	Busybox = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
	Agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.56"
	CoreDNS = "registry.k8s.io/coredns/coredns:v1.12.1"
	// Workload is test/cmd/ovnt-workload, the end-to-end tests' server (see package probe),
	// by the name their pod specs use; containerd knows it as
	// docker.io/library/ovnt-workload:latest.
	Workload = "ovnt-workload"
)

// Sources are the files the images are made of.
type Sources struct {
	Pause   string // test/cmd/pause, static
	Busybox string // Debian's busybox-static: /bin/busybox
	Agnhost string // k8s.io/kubernetes/test/images/agnhost at the cluster's release, static
	CoreDNS string // github.com/coredns/coredns at the image's version, static
	// Workload is test/cmd/ovnt-workload, static.
	Workload string
}

// file is one entry of a layer.
type file struct {
	path string // without a leading slash
	mode int64  // permission bits; a directory when dir
	dir  bool
	link string // a symlink's target
	src  string // a regular file's content, from this path
}

// image is one image to write.
type image struct {
	name       string
	files      []file
	entrypoint []string
	cmd        []string
}

// Write writes every image as a docker archive into dir and returns the archives' paths.
func Write(dir string, s Sources) ([]string, error) {
	bb, err := busyboxFiles(s.Busybox)
	if err != nil {
		return nil, err
	}
	// Images append their own files to the busybox userland: each gets a copy.
	bb = slices.Clip(bb)
	all := []image{
		{name: Pause, files: []file{{path: "pause", mode: 0o755, src: s.Pause}}, entrypoint: []string{"/pause"}},
		{name: Busybox, files: bb, cmd: []string{"sh"}},
		// As upstream: agnhost's subcommand is the pod's args, "pause" without any; the
		// busybox userland stands in for the shell tools upstream's image carries.
		{name: Agnhost, files: append(bb, file{path: "agnhost", mode: 0o755, src: s.Agnhost}),
			entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}},
		{name: CoreDNS, files: []file{{path: "coredns", mode: 0o755, src: s.CoreDNS}}, entrypoint: []string{"/coredns"}},
		{name: "docker.io/library/" + Workload + ":latest", files: append(bb, file{path: "ovnt-workload", mode: 0o755, src: s.Workload}),
			entrypoint: []string{"/ovnt-workload"}},
	}
	var paths []string
	for _, img := range all {
		p := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(img.name)+".tar")
		if err := img.write(p); err != nil {
			return nil, fmt.Errorf("image %s: %w", img.name, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// busyboxFiles is a minimal userland: busybox with a link per applet in /bin, /bin/sh, and
// the directories programs expect.
func busyboxFiles(busybox string) ([]file, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w (install Debian's busybox-static)", busybox, err)
	}
	files := []file{
		{path: "bin", dir: true, mode: 0o755}, {path: "etc", dir: true, mode: 0o755},
		{path: "tmp", dir: true, mode: 0o1777}, {path: "root", dir: true, mode: 0o700},
		{path: "usr", dir: true, mode: 0o755}, {path: "usr/bin", link: "../bin"},
		{path: "bin/busybox", mode: 0o755, src: busybox},
		{path: "etc/passwd", mode: 0o644, src: "inline:root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"},
		{path: "etc/group", mode: 0o644, src: "inline:root:x:0:\nnogroup:x:65534:\n"},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			files = append(files, file{path: "bin/" + applet, link: "busybox"})
		}
	}
	return files, nil
}

// write writes img as a docker archive at path: one layer, its config, and manifest.json.
func (img image) write(path string) error {
	layer, err := img.layer()
	if err != nil {
		return err
	}
	diffID := sha256.Sum256(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": img.entrypoint,
			"Cmd":        img.cmd,
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{img.name}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer}, {"manifest.json", manifest}} {
		if dir := filepath.Dir(e.name); dir != "." {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// layer is the image's one layer: a tar of its files, sorted, with zero times so the same
// inputs give the same digest.
func (img image) layer() ([]byte, error) {
	files := append([]file(nil), img.files...)
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, Format: tar.FormatPAX}
		var data []byte
		switch {
		case f.dir:
			h.Typeflag, h.Name = tar.TypeDir, f.path+"/"
		case f.link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.link, 0o777
		case strings.HasPrefix(f.src, "inline:"):
			data = []byte(strings.TrimPrefix(f.src, "inline:"))
		default:
			var err error
			if data, err = os.ReadFile(f.src); err != nil {
				return nil, err
			}
		}
		if h.Typeflag == 0 {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, bytes.NewReader(data)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
