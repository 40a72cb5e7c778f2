//go:build linux

package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/testenv"
)

// TestWrite reads back the archives as an importer does: manifest.json names the upstream
// tag, the config's diff_id is the layer's digest, and the layer holds the image's files.
func TestWrite(t *testing.T) {
	testenv.Require(t, "busybox")
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal(err)
	}
	// A base root filesystem of one file, as mmdebstrap's tar names them.
	var base bytes.Buffer
	tw := tar.NewWriter(&base)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/bash", Mode: 0o755, Size: 4})
	tw.Write([]byte("bash"))
	tw.Close()
	rootfs := filepath.Join(dir, "rootfs.tar")
	if err := os.WriteFile(rootfs, base.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := Write(dir, Sources{Pause: bin, Busybox: bb, Agnhost: bin, AgnhostRootfs: rootfs, CoreDNS: bin, Workload: bin,
		NginxRootfs: rootfs, RegressionIssue74839: bin})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		Pause:                                    {"pause"},
		Busybox:                                  {"bin/busybox", "bin/sh", "bin/wget", "etc/passwd", "tmp/"},
		Agnhost:                                  {"agnhost", "coredns", "./usr/bin/bash", "localhost.crt", "localhost.key"},
		CoreDNS:                                  {"coredns"},
		"docker.io/library/ovnt-workload:latest": {"ovnt-workload", "bin/test"},
		JessieDnsutils:                           {"./usr/bin/bash"},
		Nginx:                                    {"./usr/bin/bash"},
		RegressionIssue74839:                     {"regression-issue-74839"},
	}
	if len(paths) != len(want) {
		t.Fatalf("%d archives, want %d", len(paths), len(want))
	}
	for _, p := range paths {
		files := readTar(t, p)
		var manifest []struct {
			Config   string
			RepoTags []string
			Layers   []string
		}
		if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 || len(manifest[0].RepoTags) != 1 || len(manifest[0].Layers) == 0 {
			t.Fatalf("%s: manifest %s (%v)", p, files["manifest.json"], err)
		}
		m := manifest[0]
		var config struct {
			RootFS struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
		}
		if err := json.Unmarshal(files[m.Config], &config); err != nil {
			t.Fatal(err)
		}
		if len(config.RootFS.DiffIDs) != len(m.Layers) {
			t.Fatalf("%s: %d diff_ids for %d layers", m.RepoTags[0], len(config.RootFS.DiffIDs), len(m.Layers))
		}
		inLayer := map[string][]byte{}
		for i, l := range m.Layers {
			sum := sha256.Sum256(files[l])
			if config.RootFS.DiffIDs[i] != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Errorf("%s: diff_id %d is %s, the layer's digest sha256:%x", m.RepoTags[0], i, config.RootFS.DiffIDs[i], sum)
			}
			for name, b := range readTarBytes(t, files[l]) {
				inLayer[name] = b
			}
		}
		names, ok := want[m.RepoTags[0]]
		if !ok {
			t.Errorf("unexpected image %s", m.RepoTags[0])
			continue
		}
		for _, n := range names {
			if _, ok := inLayer[n]; !ok {
				t.Errorf("%s: no %s in its layer", m.RepoTags[0], n)
			}
		}
		if m.RepoTags[0] == Agnhost {
			// porter's TLS ports load this pair: it must be one, for 127.0.0.1.
			pair, err := tls.X509KeyPair(inLayer["localhost.crt"], inLayer["localhost.key"])
			if err != nil {
				t.Errorf("agnhost localhost.crt/key: %v", err)
			} else if cert, err := x509.ParseCertificate(pair.Certificate[0]); err != nil || cert.VerifyHostname("127.0.0.1") != nil {
				t.Errorf("agnhost localhost.crt is not for 127.0.0.1 (%v)", err)
			}
		}
	}
}

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return readTarBytes(t, data)
}

func readTarBytes(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = b
	}
}
