package imagetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// MaxArchive bounds what ReadArchive reads: the whole archive, and each
// layer once unpacked, are held in memory.
const MaxArchive = 512 << 20

// Image is the one image of an OCI archive (an OCI image layout in a tar,
// as `buildah push oci-archive:` and scripts/image.sh write it).
type Image struct {
	// Ref is the manifest's org.opencontainers.image.ref.name annotation in
	// the index: NAME:TAG.
	Ref string
	// ManifestDigest is the manifest's digest (sha256:…), the image's id
	// in a registry.
	ManifestDigest string
	// Config is the image configuration.
	Config ImageConfig
	// Files are the layers' entries by path without the leading slash,
	// later layers over earlier ones.
	Files map[string]File
}

// ImageConfig is the part of the OCI image configuration the tests read.
type ImageConfig struct {
	Created      string `json:"created"`
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User         string              `json:"User"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Env          []string            `json:"Env"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		WorkingDir   string              `json:"WorkingDir"`
		Labels       map[string]string   `json:"Labels"`
		StopSignal   string              `json:"StopSignal"`
	} `json:"config"`
}

// File is one entry of a layer.
type File struct {
	Mode     fs.FileMode
	UID, GID int
	Data     []byte // a regular file's contents
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
}

type index struct {
	Manifests []descriptor `json:"manifests"`
}

type manifest struct {
	Config descriptor   `json:"config"`
	Layers []descriptor `json:"layers"`
}

// ReadArchive reads the OCI archive at p, which must hold exactly one
// image, checking every blob against its digest and size.
func ReadArchive(p string) (Image, error) {
	f, err := os.Open(p)
	if err != nil {
		return Image{}, err
	}
	defer f.Close()
	entries, err := readTar(f, MaxArchive)
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w", p, err)
	}
	blob := func(d descriptor) ([]byte, error) {
		hexd, ok := strings.CutPrefix(d.Digest, "sha256:")
		if !ok {
			return nil, fmt.Errorf("digest %q: want sha256:", d.Digest)
		}
		b, ok := entries["blobs/sha256/"+hexd]
		if !ok {
			return nil, fmt.Errorf("blob %s is not in the archive", d.Digest)
		}
		if sum := sha256.Sum256(b.Data); hex.EncodeToString(sum[:]) != hexd {
			return nil, fmt.Errorf("blob %s does not match its digest", d.Digest)
		}
		if int64(len(b.Data)) != d.Size {
			return nil, fmt.Errorf("blob %s is %d bytes, its descriptor says %d", d.Digest, len(b.Data), d.Size)
		}
		return b.Data, nil
	}
	var idx index
	if err := decode(entries, "index.json", &idx); err != nil {
		return Image{}, err
	}
	if len(idx.Manifests) != 1 {
		return Image{}, fmt.Errorf("index.json lists %d manifests, want 1", len(idx.Manifests))
	}
	img := Image{Ref: idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"], ManifestDigest: idx.Manifests[0].Digest, Files: map[string]File{}}
	mb, err := blob(idx.Manifests[0])
	if err != nil {
		return Image{}, err
	}
	var m manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return Image{}, fmt.Errorf("manifest: %w", err)
	}
	cb, err := blob(m.Config)
	if err != nil {
		return Image{}, err
	}
	if err := json.Unmarshal(cb, &img.Config); err != nil {
		return Image{}, fmt.Errorf("image config: %w", err)
	}
	for _, l := range m.Layers {
		lb, err := blob(l)
		if err != nil {
			return Image{}, err
		}
		var r io.Reader = bytes.NewReader(lb)
		switch l.MediaType {
		case "application/vnd.oci.image.layer.v1.tar":
		case "application/vnd.oci.image.layer.v1.tar+gzip":
			if r, err = gzip.NewReader(r); err != nil {
				return Image{}, fmt.Errorf("layer %s: %w", l.Digest, err)
			}
		default:
			return Image{}, fmt.Errorf("layer %s: media type %q not read here", l.Digest, l.MediaType)
		}
		files, err := readTar(r, MaxArchive)
		if err != nil {
			return Image{}, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		for name, f := range files {
			img.Files[name] = f
		}
	}
	return img, nil
}

func decode(entries map[string]File, name string, v any) error {
	e, ok := entries[name]
	if !ok {
		return fmt.Errorf("%s is not in the archive", name)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// readTar reads every entry of a tar, refusing more than limit bytes of
// contents in all.
func readTar(r io.Reader, limit int64) (map[string]File, error) {
	out := map[string]File{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(path.Clean(strings.TrimPrefix(h.Name, "./")), "/")
		f := File{Mode: h.FileInfo().Mode(), UID: h.Uid, GID: h.Gid}
		if h.Typeflag == tar.TypeReg {
			if h.Size > limit {
				return nil, fmt.Errorf("%s: %d bytes is over the %d bytes left of MaxArchive", name, h.Size, limit)
			}
			limit -= h.Size
			if f.Data, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		out[name] = f
	}
}
