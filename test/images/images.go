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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Upstream names of the images.
const (
	Pause   = "registry.k8s.io/pause:3.10.1"
	Busybox = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
	Agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.56"
	CoreDNS = "registry.k8s.io/coredns/coredns:v1.12.1"
	// JessieDnsutils is the upstream e2e suite's DNS prober image: bash and dig, here on
	// the agnhost image's Debian root filesystem.
	JessieDnsutils = "registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7"
	// Nginx is the upstream e2e suite's web server image: Debian's nginx serving its
	// default page on port 80.
	Nginx = "registry.k8s.io/e2e-test-images/nginx:1.14-4"
	// RegressionIssue74839 is the upstream e2e suite's "boom server": a TCP server on port
	// 9000 that sends each new connection's client an out-of-window segment from a raw
	// socket (conntrack test "should not be vulnerable to the invalid conntrack state bug").
	RegressionIssue74839 = "registry.k8s.io/e2e-test-images/regression-issue-74839:1.2"
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
	// AgnhostRootfs is a tar of the Debian root filesystem agnhost runs on
	// (harness.EnsureAgnhostRootfs); empty: none, agnhost alone.
	AgnhostRootfs string
	CoreDNS       string // github.com/coredns/coredns at the image's version, static
	// NginxRootfs is a tar of a Debian root filesystem with nginx (harness.EnsureNginxRootfs);
	// empty: no Nginx image.
	NginxRootfs string
	// Workload is test/cmd/ovnt-workload, static.
	Workload string
	// RegressionIssue74839 is k8s.io/kubernetes/test/images/regression-issue-74839 at the
	// cluster's release, static (harness.EnsureKubeTestImage); empty: no such image.
	RegressionIssue74839 string
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
	name string
	// base is a tar of a root filesystem, the image's first layer; files are a layer on it.
	base       string
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
	// agnhost porter serves TLS with ./localhost.crt and ./localhost.key by default (the
	// upstream image carries a pair at /); the upstream Proxy tests reach it so.
	crt, key, err := localhostCert()
	if err != nil {
		return nil, err
	}
	all := []image{
		{name: Pause, files: []file{{path: "pause", mode: 0o755, src: s.Pause}}, entrypoint: []string{"/pause"}},
		{name: Busybox, files: bb, cmd: []string{"sh"}},
		// As upstream: agnhost's subcommand is the pod's args, "pause" without any; a
		// Debian root filesystem carries the shell tools upstream's image has, and
		// /coredns, which some DNS tests run inside it.
		{name: Agnhost, base: s.AgnhostRootfs, files: []file{
			{path: "agnhost", mode: 0o755, src: s.Agnhost}, {path: "coredns", mode: 0o755, src: s.CoreDNS},
			{path: "localhost.crt", mode: 0o644, src: "inline:" + crt}, {path: "localhost.key", mode: 0o600, src: "inline:" + key}},
			entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}},
		{name: CoreDNS, files: []file{{path: "coredns", mode: 0o755, src: s.CoreDNS}}, entrypoint: []string{"/coredns"}},
		{name: "docker.io/library/" + Workload + ":latest", files: append(bb, file{path: "ovnt-workload", mode: 0o755, src: s.Workload}),
			entrypoint: []string{"/ovnt-workload"}},
	}
	if s.AgnhostRootfs != "" {
		all = append(all, image{name: JessieDnsutils, base: s.AgnhostRootfs, cmd: []string{"/bin/bash"}})
	}
	if s.NginxRootfs != "" {
		all = append(all, image{name: Nginx, base: s.NginxRootfs, entrypoint: []string{"/usr/sbin/nginx", "-g", "daemon off;"}})
	}
	if s.RegressionIssue74839 != "" {
		// The binary alone (upstream puts it on a Debian base, of which it uses nothing); the
		// pod spec adds NET_RAW for its raw socket.
		all = append(all, image{name: RegressionIssue74839,
			files:      []file{{path: "regression-issue-74839", mode: 0o755, src: s.RegressionIssue74839}},
			entrypoint: []string{"/regression-issue-74839"}})
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

// write writes img as a docker archive at path: its base root filesystem as a first layer
// when it has one, a layer of its files, their config, and manifest.json.
func (img image) write(path string) error {
	files, err := img.layer()
	if err != nil {
		return err
	}
	type layer struct {
		name string
		size int64
		src  func(io.Writer) error
	}
	var layers []layer
	var diffIDs []string
	add := func(sum []byte, size int64, src func(io.Writer) error) {
		id := hex.EncodeToString(sum)
		layers = append(layers, layer{name: id + "/layer.tar", size: size, src: src})
		diffIDs = append(diffIDs, "sha256:"+id)
	}
	if img.base != "" {
		sum, size, err := fileDigest(img.base)
		if err != nil {
			return err
		}
		add(sum, size, func(w io.Writer) error {
			f, err := os.Open(img.base)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		})
	}
	filesSum := sha256.Sum256(files)
	add(filesSum[:], int64(len(files)), func(w io.Writer) error { _, err := w.Write(files); return err })
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": img.entrypoint,
			"Cmd":        img.cmd,
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	var layerNames []string
	for _, l := range layers {
		layerNames = append(layerNames, l.name)
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{img.name}, "Layers": layerNames}})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	entries := []layer{{configName, int64(len(config)), func(w io.Writer) error { _, err := w.Write(config); return err }}}
	entries = append(entries, layers...)
	entries = append(entries, layer{"manifest.json", int64(len(manifest)), func(w io.Writer) error { _, err := w.Write(manifest); return err }})
	for _, e := range entries {
		if dir := filepath.Dir(e.name); dir != "." {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: e.size}); err != nil {
			return err
		}
		if err := e.src(tw); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// fileDigest is the SHA-256 and the size of a file.
func fileDigest(path string) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return h.Sum(nil), n, err
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

// localhostCert is a self-signed certificate for 127.0.0.1, ::1 and localhost, with its key,
// both PEM. Nothing verifies it: the API server's pod proxy does not check backends' names.
func localhostCert() (crt, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})), nil
}
