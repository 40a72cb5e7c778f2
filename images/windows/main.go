// Command windows writes the Windows node image, a HostProcess container image, as an image
// archive, on any machine: no Windows host, no Docker, no registry. A HostProcess container
// runs its processes on the host, so the image needs no Windows base layers (nanoserver,
// servercore); what the Dockerfile beside this file takes from the HostProcess base image
// (mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image) is written
// here instead:
//
//   - layer 1, the base: the files Windows checks when containerd unpacks a first layer
//     (hcsshim's base layer processing): Files\Windows\System32\config\ DEFAULT, SAM,
//     SECURITY, SOFTWARE, SYSTEM, empty, as in the base image's first releases;
//   - layer 2: ovnt-node.exe and ovnt-cni.exe in Files\ovnt\ (the Dockerfile's COPY).
//
// Windows layers carry their files below Files/ (containerd hands them to hcsshim's layer
// writer), with their Windows attributes in the PAX record MSWINDOWS.fileattr. The image
// config says os windows, architecture amd64, no os.version (a HostProcess image runs on
// every Windows Server release), and the Dockerfile's entrypoint.
//
// The archive is an OCI image layout with a docker manifest.json beside it (what `docker
// save` writes): `ctr -n k8s.io images import` on a Windows node, `docker load`, or `skopeo
// copy oci-archive:... docker://...` to a registry take it.
//
// Windows Server 2025 checks that the base layer's registry files are valid hives: there,
// build from the current base image with docker buildx instead (docs/windows.md).
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Repository is the image's name in the manifests (images/manifests/50-node-windows.yaml).
const Repository = "ghcr.io/ovn-transparent/ovnt-windows"

// Entrypoint is the Dockerfile's ENTRYPOINT.
var Entrypoint = []string{"ovnt/ovnt-node.exe"}

// baseHives are the files of the base layer, below Files/Windows/System32/config.
var baseHives = []string{"DEFAULT", "SAM", "SECURITY", "SOFTWARE", "SYSTEM"}

// Windows file attributes (MSWINDOWS.fileattr).
const (
	attrDirectory = 0x10
	attrArchive   = 0x20
)

// Media types of the archive's blobs.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Options say what to build.
type Options struct {
	Node, CNI string   // the cross-compiled ovnt-node.exe and ovnt-cni.exe
	Tags      []string // e.g. "latest", a version
	Created   time.Time
}

func main() {
	var o Options
	out := flag.String("out", "_output/images/ovnt-windows.tar", "the archive to write")
	flag.StringVar(&o.Node, "node", "_output/bin/windows/ovnt-node.exe", "ovnt-node.exe")
	flag.StringVar(&o.CNI, "cni", "_output/bin/windows/ovnt-cni.exe", "ovnt-cni.exe")
	tags := flag.String("tags", "latest", "comma-separated tags of "+Repository)
	flag.Parse()
	o.Tags = strings.Split(*tags, ",")
	o.Created = time.Now().UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "images/windows: SOURCE_DATE_EPOCH %q: %v\n", s, err)
			os.Exit(1)
		}
		o.Created = time.Unix(sec, 0).UTC()
	}
	if err := Write(*out, o); err != nil {
		fmt.Fprintf(os.Stderr, "images/windows: %v\n", err)
		os.Exit(1)
	}
}

// entry is one entry of a layer: a directory when src and data are both empty and dir is
// set.
type entry struct {
	name string // below Files/, with slashes
	dir  bool
	src  string // a regular file's content from this path
}

// layer writes a Windows layer of entries and returns it gzipped, with the digest of the
// uncompressed tar (the config's diff_id).
func layer(entries []entry, mtime time.Time) (gz []byte, diffID string, err error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, ModTime: mtime, Format: tar.FormatPAX,
			PAXRecords: map[string]string{"MSWINDOWS.fileattr": strconv.Itoa(attrArchive)}}
		var content []byte
		if e.dir {
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, strings.TrimSuffix(e.name, "/")+"/"
			h.PAXRecords["MSWINDOWS.fileattr"] = strconv.Itoa(attrDirectory)
		} else {
			h.Typeflag, h.Mode = tar.TypeReg, 0o755
			if e.src != "" {
				if content, err = os.ReadFile(e.src); err != nil {
					return nil, "", err
				}
			}
			h.Size = int64(len(content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(content); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw.Bytes())
	var z bytes.Buffer
	zw, err := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	if err != nil {
		return nil, "", err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return z.Bytes(), "sha256:" + hex.EncodeToString(sum[:]), nil
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Write writes the image archive to out (through a temporary file beside it).
func Write(out string, o Options) error {
	for _, p := range []string{o.Node, o.CNI} {
		if b, err := os.ReadFile(p); err != nil {
			return fmt.Errorf("%w (run make build-windows first)", err)
		} else if !bytes.HasPrefix(b, []byte("MZ")) {
			return fmt.Errorf("%s is not a Windows executable", p)
		}
	}
	if len(o.Tags) == 0 {
		return errors.New("no tag")
	}
	base := []entry{{name: "Files", dir: true}, {name: "Files/Windows", dir: true},
		{name: "Files/Windows/System32", dir: true}, {name: "Files/Windows/System32/config", dir: true}}
	for _, h := range baseHives {
		base = append(base, entry{name: "Files/Windows/System32/config/" + h})
	}
	app := []entry{{name: "Files", dir: true}, {name: "Files/ovnt", dir: true},
		{name: "Files/ovnt/ovnt-node.exe", src: o.Node}, {name: "Files/ovnt/ovnt-cni.exe", src: o.CNI}}
	blobs := map[string][]byte{}
	var layers []descriptor
	var diffIDs []string
	for _, l := range [][]entry{base, app} {
		gz, diffID, err := layer(l, o.Created)
		if err != nil {
			return err
		}
		d := digestOf(gz)
		blobs[d] = gz
		layers = append(layers, descriptor{MediaType: mediaLayer, Digest: d, Size: int64(len(gz))})
		diffIDs = append(diffIDs, diffID)
	}
	created := o.Created.Format(time.RFC3339)
	config, err := json.Marshal(map[string]any{
		"created":      created,
		"architecture": "amd64",
		"os":           "windows",
		"config":       map[string]any{"Entrypoint": Entrypoint},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": diffIDs},
		"history": []map[string]string{
			{"created": created, "created_by": "HostProcess base: Files\\Windows\\System32\\config (images/windows)"},
			{"created": created, "created_by": "COPY ovnt-node.exe ovnt-cni.exe /ovnt/"},
		},
	})
	if err != nil {
		return err
	}
	configDigest := digestOf(config)
	blobs[configDigest] = config
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        descriptor{MediaType: mediaConfig, Digest: configDigest, Size: int64(len(config))},
		"layers":        layers,
	})
	if err != nil {
		return err
	}
	manifestDigest := digestOf(manifest)
	blobs[manifestDigest] = manifest
	var entries []descriptor
	var repoTags []string
	for _, tag := range o.Tags {
		name := Repository + ":" + tag
		repoTags = append(repoTags, name)
		entries = append(entries, descriptor{MediaType: mediaManifest, Digest: manifestDigest, Size: int64(len(manifest)),
			Platform:    &platform{Architecture: "amd64", OS: "windows"},
			Annotations: map[string]string{"io.containerd.image.name": name, "org.opencontainers.image.ref.name": tag}})
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": entries})
	if err != nil {
		return err
	}
	blobPath := func(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }
	var layerPaths []string
	for _, l := range layers {
		layerPaths = append(layerPaths, blobPath(l.Digest))
	}
	docker, err := json.Marshal([]map[string]any{{"Config": blobPath(configDigest), "RepoTags": repoTags, "Layers": layerPaths}})
	if err != nil {
		return err
	}

	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: o.Created, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	files := []struct {
		name string
		b    []byte
	}{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index}, {"manifest.json", docker}}
	for _, d := range append(append([]string{}, layerPaths...), blobPath(configDigest), blobPath(manifestDigest)) {
		files = append(files, struct {
			name string
			b    []byte
		}{d, blobs["sha256:"+filepath.Base(d)]})
	}
	for _, fl := range files {
		if err := add(fl.name, fl.b); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
