package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// readArchive returns the files of a tar archive by name.
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

// layerEntry is what a layer says of one of its files.
type layerEntry struct {
	Type     byte
	FileAttr string
	Content  string // the digest of a regular file's content
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// readLayer returns a gzipped layer's entries and the digest of its uncompressed tar.
func readLayer(t *testing.T, gz []byte) (map[string]layerEntry, string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]layerEntry{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return entries, sha(raw)
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		e := layerEntry{Type: h.Typeflag, FileAttr: h.PAXRecords["MSWINDOWS.fileattr"]}
		if h.Typeflag == tar.TypeReg {
			e.Content = sha(b)
		}
		entries[h.Name] = e
	}
}

// exe writes a stand-in for a Windows executable of n bytes (the "MZ" of a PE file, then
// random bytes, which gzip cannot shrink).
func exe(t *testing.T, name string, n int) (string, []byte) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	copy(b, "MZ")
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// TestWindowsImage writes the image and reads it back as a Windows node's containerd would
// (the OCI index, the manifest, the config, the layers) and as `docker load` would
// (manifest.json): every blob matches its digest, the platform is windows/amd64 without an
// os.version, the entrypoint is the Dockerfile's, the base layer holds exactly the five
// registry files and the second exactly the two executables below Files/, and the archive
// is no bigger than the executables and a few kilobytes.
func TestWindowsImage(t *testing.T) {
	node, nodeBytes := exe(t, "ovnt-node.exe", 300_000)
	cni, cniBytes := exe(t, "ovnt-cni.exe", 100_000)
	out := filepath.Join(t.TempDir(), "sub", "ovnt-windows.tar") // its folder is made
	created := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	if err := Write(out, Options{Node: node, CNI: cni, Tags: []string{"latest", "v1.2.3"}, Created: created}); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, out)
	blob := func(digest string) []byte {
		t.Helper()
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		if !ok {
			t.Fatalf("blob %s missing", digest)
		}
		if got := sha(b); got != digest {
			t.Fatalf("blob %s has digest %s", digest, got)
		}
		return b
	}
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout %q", files["oci-layout"])
	}

	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 2 {
		t.Fatalf("index: %d manifests, want one per tag", len(index.Manifests))
	}
	var names []string
	for i, m := range index.Manifests {
		if m.Digest != index.Manifests[0].Digest || m.MediaType != mediaManifest ||
			!reflect.DeepEqual(m.Platform, &platform{Architecture: "amd64", OS: "windows"}) {
			t.Errorf("index entry %d: %+v", i, m)
		}
		names = append(names, m.Annotations["io.containerd.image.name"])
	}
	wantNames := []string{Repository + ":latest", Repository + ":v1.2.3"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("image names %q, want %q", names, wantNames)
	}

	var manifest struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Architecture string
		OS           string
		OSVersion    *string `json:"os.version"`
		Created      string
		Config       struct{ Entrypoint, Cmd, Env []string }
		RootFS       struct {
			Type    string
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	if config.OS != "windows" || config.Architecture != "amd64" || config.OSVersion != nil || config.Created != "2026-11-29T00:00:00Z" {
		t.Errorf("config: os %q, architecture %q, os.version %v, created %q; want windows, amd64, none, the given time",
			config.OS, config.Architecture, config.OSVersion, config.Created)
	}
	if !reflect.DeepEqual(config.Config.Entrypoint, []string{"ovnt/ovnt-node.exe"}) || config.Config.Cmd != nil || config.Config.Env != nil {
		t.Errorf("config: entrypoint %q, cmd %q, env %q; want the Dockerfile's entrypoint alone", config.Config.Entrypoint, config.Config.Cmd, config.Config.Env)
	}

	dir := layerEntry{Type: tar.TypeDir, FileAttr: "16"}
	empty := layerEntry{Type: tar.TypeReg, FileAttr: "32", Content: sha(nil)}
	want := []map[string]layerEntry{{
		"Files/": dir, "Files/Windows/": dir, "Files/Windows/System32/": dir, "Files/Windows/System32/config/": dir,
		"Files/Windows/System32/config/DEFAULT": empty, "Files/Windows/System32/config/SAM": empty,
		"Files/Windows/System32/config/SECURITY": empty, "Files/Windows/System32/config/SOFTWARE": empty,
		"Files/Windows/System32/config/SYSTEM": empty,
	}, {
		"Files/": dir, "Files/ovnt/": dir,
		"Files/ovnt/ovnt-node.exe": {Type: tar.TypeReg, FileAttr: "32", Content: sha(nodeBytes)},
		"Files/ovnt/ovnt-cni.exe":  {Type: tar.TypeReg, FileAttr: "32", Content: sha(cniBytes)},
	}}
	if len(manifest.Layers) != len(want) || len(config.RootFS.DiffIDs) != len(want) || config.RootFS.Type != "layers" {
		t.Fatalf("%d layers, %d diff_ids (rootfs type %q), want %d", len(manifest.Layers), len(config.RootFS.DiffIDs), config.RootFS.Type, len(want))
	}
	var layerPaths []string
	for i, l := range manifest.Layers {
		if l.MediaType != mediaLayer {
			t.Errorf("layer %d: media type %s", i, l.MediaType)
		}
		entries, diffID := readLayer(t, blob(l.Digest))
		if diffID != config.RootFS.DiffIDs[i] {
			t.Errorf("layer %d: uncompressed digest %s, diff_id %s", i, diffID, config.RootFS.DiffIDs[i])
		}
		if !reflect.DeepEqual(entries, want[i]) {
			t.Errorf("layer %d:\n got %v\nwant %v", i, entries, want[i])
		}
		layerPaths = append(layerPaths, "blobs/sha256/"+strings.TrimPrefix(l.Digest, "sha256:"))
	}

	var docker []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &docker); err != nil {
		t.Fatal(err)
	}
	wantDocker := []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{"blobs/sha256/" + strings.TrimPrefix(manifest.Config.Digest, "sha256:"), wantNames, layerPaths}}
	if !reflect.DeepEqual(docker, wantDocker) {
		t.Errorf("manifest.json %+v, want %+v", docker, wantDocker)
	}

	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if limit := int64(len(nodeBytes)+len(cniBytes)) + 32<<10; fi.Size() > limit {
		t.Errorf("archive of %d bytes, want at most the executables and 32 KiB: %d", fi.Size(), limit)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}

// TestWindowsImageRefusesLinuxBinaries: a binary built for Linux (make build instead of
// make build-windows) is refused, naming it.
func TestWindowsImageRefusesLinuxBinaries(t *testing.T) {
	node, _ := exe(t, "ovnt-node.exe", 100)
	elf := filepath.Join(t.TempDir(), "ovnt-cni.exe")
	if err := os.WriteFile(elf, []byte("\x7fELF..."), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "w.tar")
	err := Write(out, Options{Node: node, CNI: elf, Tags: []string{"latest"}, Created: time.Now()})
	if err == nil || !strings.Contains(err.Error(), elf) {
		t.Fatalf("an ELF binary: err %v, want one naming %s", err, elf)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("an archive was written: %v", err)
	}
}
