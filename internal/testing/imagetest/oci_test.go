package imagetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layout is an OCI layout in memory: path → contents.
type layout map[string][]byte

// blob adds b under its digest and returns the digest's hex.
func (l layout) blob(b []byte) string {
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	l["blobs/sha256/"+h] = b
	return h
}

func tarOf(t *testing.T, files layout) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// archive is a one-layer image; edit changes the layout before it is
// written.
func archive(t *testing.T, edit func(l layout, manifest, config, layer string)) string {
	t.Helper()
	l := layout{"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`)}
	layerTar := tarOf(t, layout{"llmdiag": []byte("binary")})
	layer := l.blob(layerTar)
	config := l.blob([]byte(`{"architecture":"amd64","os":"linux","config":{"User":"65532:65532","Entrypoint":["/llmdiag"]}}`))
	cfgSize := len(l["blobs/sha256/"+config])
	manifest := l.blob(fmt.Appendf(nil, `{"schemaVersion":2,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}`, config, cfgSize, layer, len(layerTar)))
	l["index.json"] = fmt.Appendf(nil, `{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"annotations":{"org.opencontainers.image.ref.name":"llmdiag:v1"}}]}`, manifest, len(l["blobs/sha256/"+manifest]))
	if edit != nil {
		edit(l, manifest, config, layer)
	}
	p := filepath.Join(t.TempDir(), "image.oci.tar")
	if err := os.WriteFile(p, tarOf(t, l), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadArchive(t *testing.T) {
	img, err := ReadArchive(archive(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != "llmdiag:v1" || img.Config.Config.User != "65532:65532" || string(img.Files["llmdiag"].Data) != "binary" {
		t.Errorf("read %+v", img)
	}
}

func TestReadArchiveRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(l layout, manifest, config, layer string)
		want string
	}{
		{"tampered layer", func(l layout, _, _, layer string) {
			l["blobs/sha256/"+layer] = tarOf(t, layout{"llmdiag": []byte("other!")})
		}, "does not match its digest"},
		{"missing config", func(l layout, _, config, _ string) {
			delete(l, "blobs/sha256/"+config)
		}, "is not in the archive"},
		{"no index", func(l layout, _, _, _ string) { delete(l, "index.json") }, "index.json is not in the archive"},
		{"two images", func(l layout, _, _, _ string) {
			l["index.json"] = []byte(`{"manifests":[{"digest":"sha256:00"},{"digest":"sha256:11"}]}`)
		}, "lists 2 manifests, want 1"},
		{"not sha256", func(l layout, _, _, _ string) {
			l["index.json"] = []byte(`{"manifests":[{"digest":"md5:00"}]}`)
		}, `digest "md5:00": want sha256:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadArchive(archive(t, tc.edit))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}
