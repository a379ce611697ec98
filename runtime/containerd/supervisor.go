// Package containerd runs containerd for nodekit: it generates containerd's config for the installed
// release (config version 2 for 1.x, 3 for 2.x), starts containerd as a supervised child with its own
// root, state and socket (never /run/containerd), waits until the CRI v1 endpoint answers, restarts it
// with backoff when it dies, and stops it cleanly. containerd's own output goes to a log file of its own
// (Config.LogFile, see logs.go), not into nodekit's log. With an existing endpoint it only connects. It also
// imports OCI image archives into containerd's k8s.io namespace (import.go) and writes registry host
// configs (hosts.go).
package containerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/nodekit/nodekit/images/bundled"
	"github.com/nodekit/nodekit/runtime/cri"
)

// DefaultCNIBinDirs are searched for CNI plugins when Config.CNIBinDirs is empty: Debian's
// containernetworking-plugins location first, then the upstream convention.
var DefaultCNIBinDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// Config describes the containerd nodekit uses. Either Endpoint is set (an existing runtime: nodekit
// only connects) or Dir is (a managed child).
type Config struct {
	// Endpoint names an existing CRI runtime, e.g. "unix:///run/containerd/containerd.sock". When set,
	// every other field except Logger, StartTimeout and ImagesDir is ignored.
	Endpoint string

	// Dir holds the managed containerd's generated config.toml and, unless overridden below, its root
	// (Dir/root), state (Dir/state), socket (Dir/containerd.sock) and registry hosts (Dir/certs.d).
	Dir string
	// Binary is the containerd executable; default "containerd" looked up in PATH. Its directory is
	// put first in the child's PATH so containerd finds the shim (containerd-shim-runc-v2) built with it.
	Binary string
	// Root, State and Address override containerd's --root, --state and socket path.
	Root, State, Address string
	// SandboxImage is the pod sandbox image; default bundled.Pause.
	SandboxImage string
	// CNIBinDirs are the CNI plugin directories (default: those of DefaultCNIBinDirs that exist).
	// containerd 1.x takes one directory: several are merged into Dir/cni-bin as symlinks, the first
	// directory winning for a plugin present in several.
	CNIBinDirs []string
	// CNIConfDir is the CNI config directory; default Dir/net.d (created if missing).
	CNIConfDir string
	// CgroupDriver is "cgroupfs" or "systemd"; empty means DetectCgroupDriver.
	CgroupDriver string
	// RestrictOOMScoreAdj overrides the capability check (HasCapSysResource); nil means detect.
	RestrictOOMScoreAdj *bool
	// RegistryConfigPath is the CRI registry hosts directory; default Dir/certs.d.
	RegistryConfigPath string
	// LogLevel is containerd's own log level (of the lines in LogFile); default "info".
	LogLevel string
	// LogFile receives the managed containerd's stdout and stderr, appended across restarts and never
	// rotated; default Dir/containerd.log. Its lines are not relayed to Logger.
	LogFile string
	// Logger receives the supervisor's events (started, ready, exited with the last lines of LogFile,
	// restarted, stopped); default slog.Default().
	Logger *slog.Logger
	// StartTimeout bounds the wait for the CRI endpoint after each start; default 60 s.
	StartTimeout time.Duration
	// StopTimeout is the grace period between SIGTERM and SIGKILL on Stop; default 10 s.
	StopTimeout time.Duration
	// RestartBackoff is the first delay before restarting a containerd that exited, doubling on each
	// quick exit up to MaxRestartBackoff and reset after a minute of uptime; defaults 1 s and 30 s.
	RestartBackoff, MaxRestartBackoff time.Duration
	// ImagesDir, when set, is imported into the k8s.io namespace by Start once the runtime answers
	// (Importer.ImportDir: every *.tar archive, the k3s airgap convention); a missing directory imports
	// nothing. The runtime behind an external Endpoint must be containerd for this.
	ImagesDir string
	// ImportProgress, if set, receives import progress (see Importer.ImportFile).
	ImportProgress func(ImportProgress)
}

// Supervisor owns one containerd: a managed child process or an external endpoint.
type Supervisor struct {
	cfg     Config
	params  ConfigParams // managed only
	version Version
	log     *slog.Logger

	mu       sync.Mutex
	imported []ImportedImage // by Start's import of ImagesDir
	client   *cri.Client
	proc     *process // current child; nil when none runs
	stopping bool
	stopCh   chan struct{}
	doneCh   chan struct{} // closed when the supervise loop ends
	spawnCh  chan spawnReq
}

// process is one running containerd child.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed after Wait returns
	err     error         // Wait's result, set before exited closes
	started time.Time
	logFrom int64 // offset in the log file where this child's output starts
}

type spawnReq struct {
	reply chan spawnResult
}

type spawnResult struct {
	p   *process
	err error
}

// New validates cfg, fills in defaults and, for a managed containerd, detects its version
// (`containerd --version`), the cgroup driver and whether restrict_oom_score_adj is needed. It has no
// other side effects. Errors name the field at fault.
func New(ctx context.Context, cfg Config) (*Supervisor, error) {
	s := &Supervisor{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.cfg.StartTimeout <= 0 {
		s.cfg.StartTimeout = 60 * time.Second
	}
	if s.cfg.RestartBackoff <= 0 {
		s.cfg.RestartBackoff = time.Second
	}
	if s.cfg.MaxRestartBackoff <= 0 {
		s.cfg.MaxRestartBackoff = 30 * time.Second
	}
	if s.cfg.StopTimeout <= 0 {
		s.cfg.StopTimeout = 10 * time.Second
	}
	if cfg.Endpoint != "" {
		if _, err := cri.ParseEndpoint(cfg.Endpoint); err != nil {
			return nil, err
		}
		return s, nil
	}
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("containerd: Dir %q must be an absolute path (or set Endpoint to use an existing runtime)", cfg.Dir)
	}
	c := &s.cfg
	if c.Binary == "" {
		c.Binary = "containerd"
	}
	bin, err := exec.LookPath(c.Binary)
	if err != nil {
		return nil, fmt.Errorf("containerd: Binary %q: %w", c.Binary, err)
	}
	if c.Binary, err = filepath.Abs(bin); err != nil {
		return nil, err
	}
	if s.version, err = DetectVersion(ctx, c.Binary); err != nil {
		return nil, err
	}
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&c.Root, filepath.Join(c.Dir, "root"))
	def(&c.State, filepath.Join(c.Dir, "state"))
	def(&c.Address, SocketPath(c.Dir))
	def(&c.SandboxImage, bundled.Pause)
	def(&c.CNIConfDir, filepath.Join(c.Dir, "net.d"))
	def(&c.RegistryConfigPath, filepath.Join(c.Dir, "certs.d"))
	def(&c.LogFile, filepath.Join(c.Dir, "containerd.log"))
	def(&c.CgroupDriver, DetectCgroupDriver())
	// sockaddr_un.sun_path is 108 bytes; containerd also listens on Address+".ttrpc".
	if len(c.Address)+len(".ttrpc") >= 108 {
		return nil, fmt.Errorf("containerd: Address %q is too long for a unix socket (%d bytes, limit 101 with the .ttrpc suffix)", c.Address, len(c.Address))
	}
	if len(c.CNIBinDirs) == 0 {
		for _, d := range DefaultCNIBinDirs {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				c.CNIBinDirs = append(c.CNIBinDirs, d)
			}
		}
		if len(c.CNIBinDirs) == 0 {
			return nil, fmt.Errorf("containerd: CNIBinDirs is empty and none of %v exists (install containernetworking-plugins)", DefaultCNIBinDirs)
		}
	}
	restrict := false
	if c.RestrictOOMScoreAdj != nil {
		restrict = *c.RestrictOOMScoreAdj
	} else {
		has, err := HasCapSysResource()
		if err != nil {
			return nil, fmt.Errorf("containerd: checking CAP_SYS_RESOURCE: %w", err)
		}
		restrict = !has
	}
	binDirs := c.CNIBinDirs
	if s.version.ConfigVersion() == 2 && len(binDirs) > 1 {
		binDirs = []string{filepath.Join(c.Dir, "cni-bin")}
	}
	s.params = ConfigParams{
		Version: s.version, Root: c.Root, State: c.State, Address: c.Address,
		SandboxImage: c.SandboxImage, CNIBinDirs: binDirs, CNIConfDir: c.CNIConfDir,
		CgroupDriver: c.CgroupDriver, RestrictOOMScoreAdj: restrict,
		RegistryConfigPath: c.RegistryConfigPath, LogLevel: c.LogLevel,
	}
	if err := s.params.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// Config is the supervisor's configuration with defaults filled in (binary resolved to an absolute
// path). New(ctx, s.Config()) makes a supervisor for the same containerd, e.g. to start it again after
// Stop.
func (s *Supervisor) Config() Config { return s.cfg }

// Managed reports whether this supervisor runs containerd itself (false for an external Endpoint).
func (s *Supervisor) Managed() bool { return s.cfg.Endpoint == "" }

// Endpoint is the CRI endpoint in unix:///path form.
func (s *Supervisor) Endpoint() string {
	if !s.Managed() {
		u, _ := cri.EndpointURL(s.cfg.Endpoint)
		return u
	}
	return "unix://" + s.cfg.Address
}

// Address is containerd's gRPC socket path, for the containerd client (image import).
func (s *Supervisor) Address() string {
	p, _ := cri.ParseEndpoint(s.Endpoint())
	return p
}

// Version is the managed containerd's version (zero for an external endpoint; ask CRI Version).
func (s *Supervisor) Version() Version { return s.version }

// Params is the resolved config the managed containerd runs with (zero for an external endpoint).
func (s *Supervisor) Params() ConfigParams { return s.params }

// ConfigPath is the generated config file of a managed containerd.
func (s *Supervisor) ConfigPath() string { return filepath.Join(s.cfg.Dir, "config.toml") }

// LogPath is the file the managed containerd's stdout and stderr are appended to ("" for an external
// endpoint).
func (s *Supervisor) LogPath() string { return s.cfg.LogFile }

// RegistryConfigPath is the directory of <host>/hosts.toml files the CRI plugin reads on every pull.
func (s *Supervisor) RegistryConfigPath() string { return s.cfg.RegistryConfigPath }

// Client is the CRI client connected by Start; nil before Start and after Stop. Do not Close it.
func (s *Supervisor) Client() *cri.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// PID is the managed containerd's current process ID, 0 when none runs.
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Start brings the runtime up and returns once its CRI endpoint answers Version (CRI v1) and the
// archives of Config.ImagesDir are imported. For an external endpoint it only connects, waiting up to
// StartTimeout. For a managed containerd it creates the directories, writes config.toml, starts
// containerd and from then on restarts it with exponential backoff (1 s doubling to 30 s, reset after
// a minute of uptime) whenever it exits, until Stop. If containerd exits before it answers, Start fails
// with its exit status and the last warning/error lines it wrote to LogFile. Start is called once; after
// an error, call Stop.
func (s *Supervisor) Start(ctx context.Context) error {
	if err := s.start(ctx); err != nil {
		return err
	}
	if s.cfg.ImagesDir == "" {
		return nil
	}
	im, err := NewImporter(s.Address())
	if err != nil {
		return err
	}
	defer im.Close()
	imgs, err := im.ImportDir(ctx, s.cfg.ImagesDir, s.cfg.ImportProgress)
	if err != nil {
		return err
	}
	for _, img := range imgs {
		s.log.Info("imported image", "image", img.Name, "digest", img.Digest, "file", img.File)
	}
	s.mu.Lock()
	s.imported = imgs
	s.mu.Unlock()
	return nil
}

// Imported returns the images Start imported from Config.ImagesDir (labelled pinned: the kubelet's image
// garbage collector keeps them); nil before Start or without an images directory.
func (s *Supervisor) Imported() []ImportedImage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.imported)
}

func (s *Supervisor) start(ctx context.Context) error {
	if !s.Managed() {
		c, err := s.waitReady(ctx, nil)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.client = c
		s.mu.Unlock()
		return nil
	}
	s.mu.Lock()
	if s.stopCh != nil {
		s.mu.Unlock()
		return fmt.Errorf("containerd: already started")
	}
	s.stopCh, s.doneCh, s.spawnCh = make(chan struct{}), make(chan struct{}), make(chan spawnReq)
	s.mu.Unlock()
	// failed ends the supervisor after a failed start, so Stop and Cleanup still return.
	failed := func(err error) error {
		close(s.spawnCh)
		s.mu.Lock()
		s.stopping, s.proc = true, nil
		s.mu.Unlock()
		close(s.doneCh)
		return err
	}
	if err := s.prepare(); err != nil {
		return failed(err)
	}
	go s.spawner()
	p, err := s.spawn()
	if err != nil {
		return failed(err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	c, err := s.waitReady(ctx, p)
	if err != nil {
		s.kill(p)
		return failed(err)
	}
	s.mu.Lock()
	s.client = c
	s.mu.Unlock()
	s.log.Info("containerd ready", "version", s.version.String(), "pid", p.cmd.Process.Pid, "endpoint", s.Endpoint(), "config", s.ConfigPath())
	go s.supervise(p)
	return nil
}

// prepare creates the directories, links CNI bin dirs for 1.x and writes config.toml.
func (s *Supervisor) prepare() error {
	for _, d := range []string{s.cfg.Dir, s.cfg.Root, s.cfg.State, filepath.Dir(s.cfg.Address), s.cfg.CNIConfDir, s.cfg.RegistryConfigPath} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("containerd: %w", err)
		}
	}
	if s.version.ConfigVersion() == 2 && len(s.cfg.CNIBinDirs) > 1 {
		if err := linkBinDirs(s.params.CNIBinDirs[0], s.cfg.CNIBinDirs); err != nil {
			return fmt.Errorf("containerd: merging CNIBinDirs: %w", err)
		}
	}
	data, err := RenderConfig(s.params)
	if err != nil {
		return err
	}
	return os.WriteFile(s.ConfigPath(), data, 0o644)
}

// linkBinDirs recreates dst holding a symlink to every file of srcs, the first source winning.
func linkBinDirs(dst string, srcs []string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, src := range srcs {
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			link := filepath.Join(dst, e.Name())
			if _, err := os.Lstat(link); err == nil {
				continue
			}
			if err := os.Symlink(filepath.Join(src, e.Name()), link); err != nil {
				return err
			}
		}
	}
	return nil
}

// spawner runs on one OS thread locked for the supervisor's lifetime and starts every containerd child
// from it: the child's parent-death signal (SIGTERM) is tied to the forking thread, so forking from
// a thread that may later exit (one locked by a netns helper, say) would kill containerd early.
func (s *Supervisor) spawner() {
	runtime.LockOSThread()
	// Never unlocked: the thread ends with the goroutine, after the last child is gone.
	for req := range s.spawnCh {
		p, err := s.startProcess()
		req.reply <- spawnResult{p, err}
	}
}

func (s *Supervisor) spawn() (*process, error) {
	reply := make(chan spawnResult, 1)
	s.spawnCh <- spawnReq{reply: reply}
	r := <-reply
	return r.p, r.err
}

func (s *Supervisor) startProcess() (*process, error) {
	cmd := exec.Command(s.cfg.Binary, "--config", s.ConfigPath(), "--root", s.cfg.Root, "--state", s.cfg.State, "--address", s.cfg.Address)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(s.cfg.Binary)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	// The file itself, not a pipe: containerd writes to it directly, so Wait never waits for a copy,
	// and a shim that inherited the descriptor may keep writing after containerd exits.
	logf, from, err := openLog(s.cfg.LogFile)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return nil, fmt.Errorf("containerd: start %s: %w", s.cfg.Binary, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), started: time.Now(), logFrom: from}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	s.log.Info("containerd started", "pid", cmd.Process.Pid, "binary", s.cfg.Binary, "version", s.version.String(), "log", s.cfg.LogFile)
	return p, nil
}

// waitReady dials the CRI endpoint until it answers Version, the process p (if any) exits, ctx ends or
// StartTimeout passes.
func (s *Supervisor) waitReady(ctx context.Context, p *process) (*cri.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	var exited <-chan struct{}
	if p != nil {
		exited = p.exited
	}
	var lastErr error
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := cri.Dial(dctx, s.Endpoint())
		dcancel()
		if err == nil {
			return c, nil
		}
		lastErr = err
		select {
		case <-exited:
			return nil, fmt.Errorf("containerd exited during start (%v): %s (log %s)", p.err, lastLogLines(s.cfg.LogFile, p.logFrom), s.cfg.LogFile)
		case <-ctx.Done():
			return nil, fmt.Errorf("containerd CRI endpoint %s not ready after %v: %w", s.Endpoint(), s.cfg.StartTimeout, lastErr)
		case <-time.After(delay):
		}
	}
}

// supervise waits for the child to exit and restarts it with backoff until Stop.
func (s *Supervisor) supervise(p *process) {
	defer close(s.doneCh)
	defer close(s.spawnCh)
	backoff := s.cfg.RestartBackoff
	for {
		select {
		case <-s.stopCh:
			return
		case <-p.exited:
		}
		uptime := time.Since(p.started)
		s.mu.Lock()
		s.proc = nil
		s.mu.Unlock()
		if uptime > time.Minute {
			backoff = s.cfg.RestartBackoff
		}
		s.log.Error("containerd exited; restarting", "pid", p.cmd.Process.Pid, "err", p.err, "uptime", uptime.Round(time.Millisecond), "backoff", backoff,
			"last_lines", lastLogLines(s.cfg.LogFile, p.logFrom), "log", s.cfg.LogFile)
		for {
			select {
			case <-s.stopCh:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, s.cfg.MaxRestartBackoff)
			np, err := s.spawn()
			if err != nil {
				s.log.Error("containerd restart failed", "err", err, "backoff", backoff)
				continue
			}
			p = np
			s.mu.Lock()
			s.proc = p
			s.mu.Unlock()
			go s.logReady(p)
			break
		}
	}
}

// logReady logs when a restarted containerd answers CRI again (or that it did not within StartTimeout).
func (s *Supervisor) logReady(p *process) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.exited:
		case <-s.stopCh:
		}
		cancel()
	}()
	if c := s.Client(); c != nil {
		if err := s.awaitCRI(ctx, c); err != nil {
			if ctx.Err() == nil {
				s.log.Error("restarted containerd not ready", "pid", p.cmd.Process.Pid, "err", err)
			}
			return
		}
		s.log.Info("containerd ready again", "pid", p.cmd.Process.Pid, "endpoint", s.Endpoint())
	}
}

// awaitCRI polls c.Version every 100 ms until it answers, ctx ends or StartTimeout passes; it returns
// the last error in the latter cases.
func (s *Supervisor) awaitCRI(ctx context.Context, c *cri.Client) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	for {
		_, err := c.Version(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kill sends SIGTERM to p, then SIGKILL after StopTimeout, and waits for it. Only p's own PID is
// signalled: the shims it started keep running containers alive, as containerd intends.
func (s *Supervisor) kill(p *process) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		s.log.Info("containerd stopped", "pid", pid)
		return nil
	case <-time.After(s.cfg.StopTimeout):
	}
	s.log.Warn("containerd did not stop after SIGTERM; sending SIGKILL", "pid", pid, "timeout", s.cfg.StopTimeout)
	_ = p.cmd.Process.Kill()
	<-p.exited
	return nil
}

// Stop ends supervision and stops the managed containerd (SIGTERM, SIGKILL after StopTimeout), then
// closes the CRI client. Running containers keep running under their shims (containerd's design; a
// restarted containerd adopts them). For an external endpoint it only closes the client. Idempotent.
func (s *Supervisor) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
	if !s.Managed() || s.stopCh == nil || s.stopping {
		s.mu.Unlock()
		return nil
	}
	s.stopping = true
	close(s.stopCh)
	s.mu.Unlock()
	<-s.doneCh
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		return s.kill(p)
	}
	return nil
}

// Cleanup removes every pod sandbox and container through CRI (cri.Client.RemoveAll, which also tears
// down pod network namespaces), stops containerd, kills any shim of this containerd still running (by
// its -address, see Shims: an orphan containerd lost track of), and detaches any mount left under its
// root and state directories. It leaves the directories in place. It refuses to run against an external endpoint,
// whose pods are not nodekit's to delete.
//
// Shims are killed only after a containerd answered RemoveAll: when containerd is not running, the pods'
// network namespaces and IPs can only be released through it, so the shims are left for a Cleanup on a
// started Supervisor (as `nodekit down` does).
func (s *Supervisor) Cleanup(ctx context.Context) error {
	if !s.Managed() {
		return fmt.Errorf("containerd: refusing to remove every pod from external runtime %s", s.Endpoint())
	}
	var errs []error
	c := s.Client()
	if c != nil {
		// containerd may be restarting: give it StartTimeout to answer before removing pods.
		if err := s.awaitCRI(ctx, c); err != nil {
			errs = append(errs, err)
		}
		pods, ctrs, err := c.RemoveAll(ctx)
		s.log.Info("removed runtime objects", "pods", pods, "containers", ctrs)
		if err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.Stop(ctx))
	if c != nil {
		// Every pod is gone, so any shim of this containerd still alive is an orphan no containerd will stop.
		killed, err := killShims(s.cfg.Address, 5*time.Second)
		if len(killed) > 0 {
			s.log.Warn("killed orphaned shims", "pids", killed, "address", s.cfg.Address)
		}
		errs = append(errs, err)
	}
	for _, dir := range []string{s.cfg.State, s.cfg.Root} {
		if err := UnmountAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DirIn is the managed containerd's directory (Config.Dir) inside a nodekit data dir:
// <dataDir>/containerd. The agent's layout (agent.Config.Paths) and crictl's default endpoint use it.
func DirIn(dataDir string) string { return filepath.Join(dataDir, "containerd") }

// SocketPath is the gRPC socket of a managed containerd whose Config.Dir is dir: <dir>/containerd.sock
// (the CRI endpoint is "unix://" + SocketPath(dir)).
func SocketPath(dir string) string { return filepath.Join(dir, "containerd.sock") }
