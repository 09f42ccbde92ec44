package imagetest

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

const (
	// version and epoch are what the test builds with, to check the labels.
	version = "v0.0.0-imagetest"
	epoch   = 1700000000 // 2023-11-14T22:13:20Z
	// nonroot is the image's user.
	nonroot = "65532:65532"
	// caBundle is where Go's crypto/x509 looks first on Linux, in the
	// build machine and in the image.
	caBundle = "/etc/ssl/certs/ca-certificates.crt"
)

// TestImage builds the image with scripts/image.sh, checks the archive,
// then serves the seed fleet from inside it.
func TestImage(t *testing.T) {
	bah := testkit.Binary(t, buildah)
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	archive := filepath.Join(dir, "llmdiag-image.oci.tar")
	start := time.Now()
	build(t, repo, archive)
	t.Logf("scripts/image.sh: %s", time.Since(start).Round(time.Millisecond))

	t.Run("reproducible", func(t *testing.T) {
		again := filepath.Join(t.TempDir(), "again.oci.tar")
		build(t, repo, again)
		a, errA := os.ReadFile(archive)
		b, errB := os.ReadFile(again)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("two builds of the same tree differ (%d and %d bytes)", len(a), len(b))
		}
	})

	img, err := ReadArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(archive)
	if err != nil {
		t.Fatal(err)
	}
	var unpacked int
	for _, f := range img.Files {
		unpacked += len(f.Data)
	}
	t.Logf("llmdiag:%s %s: archive %d bytes, files %d bytes", version, img.ManifestDigest, fi.Size(), unpacked)

	t.Run("config", func(t *testing.T) { checkConfig(t, repo, img) })
	t.Run("files", func(t *testing.T) { checkFiles(t, img) })

	st := newStorage(t, bah, archive)
	t.Run("default command", func(t *testing.T) {
		// Without its mounts the default command fails, naming what is
		// missing, and not because a flag it gives is unknown.
		out, err := st.run(t, append(slices.Clone(img.Config.Config.Entrypoint), img.Config.Config.Cmd...)...)
		if err == nil {
			t.Fatalf("the default command started without its files:\n%s", out)
		}
		if strings.Contains(out, "flag provided but not defined") || !strings.Contains(out, "/etc/llmdiag/") {
			t.Errorf("want an error naming a missing file under /etc/llmdiag/, got:\n%s", out)
		}
		t.Logf("%s", out)
	})
	t.Run("serve", func(t *testing.T) { serveInImage(t, st) })
}

// buildah is the program that builds and runs the image.
var buildah = testkit.Program{Name: "buildah", Get: "apt-get install -y buildah"}

// build runs scripts/image.sh, as make image does, writing out.
func build(t *testing.T, repo, out string) {
	t.Helper()
	// A cold Go build cache compiles the whole binary (minutes on a busy
	// 2-core machine); a warm one only links it.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "scripts", "image.sh"))
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "OUT="+out, "VERSION="+version, "SOURCE_DATE_EPOCH="+strconv.Itoa(epoch), "TMPDIR="+t.TempDir())
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, b)
	}
	t.Logf("%s", bytes.TrimSpace(b))
}

func checkConfig(t *testing.T, repo string, img Image) {
	c := img.Config
	if img.Ref != "llmdiag:"+version {
		t.Errorf("ref name %q, want llmdiag:%s", img.Ref, version)
	}
	if c.OS != "linux" || c.Architecture == "" {
		t.Errorf("os/arch %s/%s, want linux/…", c.OS, c.Architecture)
	}
	if c.Config.User != nonroot {
		t.Errorf("user %q, want %s", c.Config.User, nonroot)
	}
	if !slices.Equal(c.Config.Entrypoint, []string{"/llmdiag"}) {
		t.Errorf("entrypoint %q, want [/llmdiag]", c.Config.Entrypoint)
	}
	if len(c.Config.Cmd) == 0 || c.Config.Cmd[0] != "serve" || !slices.Contains(c.Config.Cmd, "--listen=:8443") || !slices.Contains(c.Config.Cmd, "--health-listen=:8081") || !slices.Contains(c.Config.Cmd, "--metrics-listen=:9090") {
		t.Errorf("cmd %q, want serve --listen=:8443 --health-listen=:8081 --metrics-listen=:9090 …", c.Config.Cmd)
	}
	for _, p := range []string{"8443/tcp", "8081/tcp", "9090/tcp"} {
		if _, ok := c.Config.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed (%v)", p, c.Config.ExposedPorts)
		}
	}
	if len(c.Config.ExposedPorts) != 3 {
		t.Errorf("ports %v, want 8443/tcp, 8081/tcp and 9090/tcp", c.Config.ExposedPorts)
	}
	rev, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(epoch, 0).UTC().Format(time.RFC3339)
	want := map[string]string{
		"org.opencontainers.image.title":    "llmdiag",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": strings.TrimSpace(string(rev)),
		"org.opencontainers.image.source":   "https://github.com/llmdiag/llmdiag",
		"org.opencontainers.image.created":  created,
	}
	for k, v := range want {
		if got := c.Config.Labels[k]; got != v {
			t.Errorf("label %s = %q, want %q", k, got, v)
		}
	}
	if !strings.Contains(c.Config.Labels["org.opencontainers.image.description"], "LLM inference") {
		t.Errorf("description label %q", c.Config.Labels["org.opencontainers.image.description"])
	}
	if c.Created != created {
		t.Errorf("created %q, want %q (SOURCE_DATE_EPOCH)", c.Created, created)
	}
}

func checkFiles(t *testing.T, img Image) {
	var names []string
	for n := range img.Files {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"etc", "etc/group", "etc/passwd", "etc/ssl", "etc/ssl/certs", "etc/ssl/certs/ca-certificates.crt", "llmdiag"}
	if !slices.Equal(names, want) {
		t.Errorf("files %q, want %q", names, want)
	}
	for n, f := range img.Files {
		if f.UID != 0 || f.GID != 0 || f.Mode.Perm()&0o022 != 0 {
			t.Errorf("%s: owner %d:%d mode %s, want root-owned and not writable by others", n, f.UID, f.GID, f.Mode)
		}
	}
	host, err := os.ReadFile(caBundle)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img.Files[strings.TrimPrefix(caBundle, "/")].Data, host) {
		t.Errorf("%s differs from the build machine's", caBundle)
	}
	if !strings.Contains(string(img.Files["etc/passwd"].Data), ":65532:65532:") {
		t.Errorf("etc/passwd has no user 65532:\n%s", img.Files["etc/passwd"].Data)
	}

	bin := img.Files["llmdiag"].Data
	if img.Files["llmdiag"].Mode.Perm()&0o001 == 0 {
		t.Errorf("llmdiag mode %s: not executable by 65532", img.Files["llmdiag"].Mode)
	}
	ef, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("llmdiag is dynamically linked (%s): a scratch image has no loader", p.Type)
		}
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings CGO_ENABLED=%q -trimpath=%q, want 0 and true", settings["CGO_ENABLED"], settings["-trimpath"])
	}
	// -trimpath keeps -ldflags out of the build info: the version linked
	// in is looked for in the bytes here, and asked of the server in serve.
	if !bytes.Contains(bin, []byte(version)) {
		t.Errorf("the version %s is not linked into llmdiag", version)
	}
}

// storage is a buildah store in the test's temporary directory, with its
// own configuration, and a working container made from the archive.
type storage struct {
	bah, dir, ctr string
	env           []string
}

func newStorage(t *testing.T, bah, archive string) *storage {
	t.Helper()
	dir := t.TempDir()
	s := &storage{bah: bah, dir: dir}
	conf := fmt.Sprintf("[storage]\ndriver = \"vfs\"\ngraphroot = %q\nrunroot = %q\n", filepath.Join(dir, "root"), filepath.Join(dir, "run"))
	files := map[string]string{
		"storage.conf":    conf,
		"registries.conf": "",
		"containers.conf": "",
		// Only the archive may be read: any registry is refused.
		"policy.json": `{"default":[{"type":"reject"}],"transports":{"oci-archive":{"":[{"type":"insecureAcceptAnything"}]},"containers-storage":{"":[{"type":"insecureAcceptAnything"}]}}}`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.env = append(os.Environ(),
		"CONTAINERS_STORAGE_CONF="+filepath.Join(dir, "storage.conf"),
		"CONTAINERS_REGISTRIES_CONF="+filepath.Join(dir, "registries.conf"),
		"CONTAINERS_CONF="+filepath.Join(dir, "containers.conf"),
		"STORAGE_DRIVER=vfs")
	out, err := s.buildah(t, "from", "--pull-never", "--signature-policy", filepath.Join(dir, "policy.json"), "--name", "llmdiag-imagetest", "oci-archive:"+archive)
	if err != nil {
		t.Fatalf("buildah from: %v\n%s", err, out)
	}
	s.ctr = "llmdiag-imagetest"
	t.Cleanup(func() {
		// Registered after TempDir, so it runs before the directory goes.
		if out, err := s.buildah(t, "rm", "--all"); err != nil {
			t.Errorf("buildah rm: %v\n%s", err, out)
		}
		if out, err := s.buildah(t, "rmi", "--all", "--force"); err != nil {
			t.Errorf("buildah rmi: %v\n%s", err, out)
		}
	})
	return s
}

// args are buildah's global flags and args.
func (s *storage) args(args ...string) []string {
	return append([]string{"--root", filepath.Join(s.dir, "root"), "--runroot", filepath.Join(s.dir, "run"), "--storage-driver", "vfs"}, args...)
}

// buildah runs one buildah command with a deadline.
func (s *storage) buildah(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bah, s.args(args...)...)
	cmd.Env = s.env
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// runArgs are buildah run's arguments for argv inside the container, with
// mounts as -v host:container:ro.
func (s *storage) runArgs(mounts []string, argv ...string) []string {
	a := []string{"run", "--isolation", "chroot"}
	for _, m := range mounts {
		a = append(a, "-v", m)
	}
	return s.args(append(append(a, s.ctr, "--"), argv...)...)
}

// run runs argv inside the image to its end.
func (s *storage) run(t *testing.T, argv ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bah, s.runArgs(nil, argv...)...)
	cmd.Env = s.env
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// serveInImage runs `llmdiag serve` in the image on the seed fleet and
// asks it through the Go client over gRPC, as a gRPC health probe does.
func serveInImage(t *testing.T, s *storage) {
	fleetDir := seedFleet(t)
	addr := testkit.FreeAddr(t)
	var out testkit.SyncBuffer
	cmd := exec.Command(s.bah, s.runArgs([]string{fleetDir + ":/etc/llmdiag/config:ro"},
		"/llmdiag", "serve", "--listen", addr, "--fleet", "/etc/llmdiag/config/fleet.yaml", "--interval", "1s")...)
	cmd.Env, cmd.Stdout, cmd.Stderr = s.env, &out, &out
	cmd.WaitDelay = 10 * time.Second
	proc, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Whatever happened, nothing is left running: the buildah
		// processes and the server, each by its pid.
		for _, pid := range descendants(proc.Pid()) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		proc.Stop(syscall.SIGKILL, 10*time.Second)
		if t.Failed() {
			t.Logf("buildah run output:\n%s", out.String())
		}
	}()

	c, err := client.New("http://"+addr, client.WithProtocol(client.ProtocolGRPC))
	if err != nil {
		t.Fatal(err)
	}
	var last string
	wait := testkit.Wait{For: 45 * time.Second, Every: 100 * time.Millisecond, Last: func() string { return last + "\n" + out.String() }}
	start := time.Now()
	wait.Until(t, "grpc.health.v1 SERVING from llmdiag serve in the image", func() bool {
		if proc.Exited() {
			t.Fatalf("buildah run exited: %v\n%s", proc.Err(), out.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := c.Health(ctx, "")
		last = fmt.Sprint(st, err)
		return err == nil && st == healthpb.HealthCheckResponse_SERVING
	})
	t.Logf("SERVING %s after buildah run", time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range resp.Msg.GetNodes() {
		ids = append(ids, n.GetId())
	}
	if len(ids) == 0 || !slices.Contains(ids, "deepseek-v4-0") {
		t.Errorf("ListNodes from the image: %q, want the seed fleet (deepseek-v4-0, …)", ids)
	}

	// The version linked in is the one the server gives in the MCP
	// handshake.
	if info := mcpInitialize(t, "http://"+addr+"/mcp"); !strings.Contains(info, `"version":"`+version+`"`) {
		t.Errorf("MCP initialize: want serverInfo version %s, got:\n%s", version, info)
	}

	// The server is the process named llmdiag under buildah run; it runs as
	// the image's user and stops on SIGTERM to its pid.
	var pid int
	for _, p := range descendants(proc.Pid()) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(comm)) == "llmdiag" {
			pid = p
		}
	}
	if pid == 0 {
		t.Fatalf("no llmdiag process under buildah run (pid %d)", proc.Pid())
	}
	if uid := procUID(t, pid); uid != "65532" {
		t.Errorf("llmdiag runs as uid %s, want 65532", uid)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("buildah run did not end within 30s of SIGTERM to llmdiag (pid %d)", pid)
	}
	if err := proc.Err(); err != nil {
		t.Errorf("buildah run: %v (want llmdiag to exit 0 on SIGTERM)", err)
	}
	if !strings.Contains(out.String(), "llmdiag stopped") {
		t.Errorf("no clean stop logged:\n%s", out.String())
	}
}

// seedFleet runs the simulator's seed fleet in this process, on loopback
// ports the server in the image reaches (buildah run with chroot isolation
// shares the host's network), and returns a directory holding its
// fleet.yaml.
func seedFleet(t *testing.T) string {
	t.Helper()
	_, path := simtest.Seed(t)
	return filepath.Dir(path)
}

// descendants lists the pids whose parent chain leads to pid (read from
// /proc), children before grandchildren.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// procUID is the real uid of pid, from /proc/PID/status.
func procUID(t *testing.T, pid int) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return ""
}

// mcpInitialize posts MCP's initialize to url and returns the answer.
func mcpInitialize(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"imagetest","version":"0"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("MCP initialize: %s\n%s", resp.Status, b)
	}
	return string(b)
}
