// Package containerd is the shared test helper for everything that needs a real container runtime: it
// starts a private containerd managed by nodekit's runtime/containerd supervisor (own root, state and
// socket under a fresh temp dir), imports the bundled images (built once per test binary, see
// BuildImages), gives it a CNI network of its own (by default Debian's reference bridge + host-local
// plugins with a unique bridge name and /24), and removes all of it on cleanup: every pod through CRI,
// then containerd (by its PID), mounts under its dirs, its bridge and its directories.
//
// Set NODEKIT_CONTAINERD=/path/to/containerd to run another containerd (e.g. a 2.x build; put its
// directory first in PATH too so its shim is used).
//
//	rt := containerd.Start(t, containerd.Options{})
//	pod := rt.RunDemoPod(t, "web")
//	body := containerd.HTTPGet(t, "http://"+pod.IP+":8080/")
package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/runtime/containerd"
	"github.com/nodekit/nodekit/runtime/cri"
)

// EnvBinary names the environment variable selecting the containerd binary under test.
const EnvBinary = "NODEKIT_CONTAINERD"

// Options tune Start / New. The zero value gives a containerd with the default bridge network and
// every bundled image imported.
type Options struct {
	// Binary is the containerd executable; default $NODEKIT_CONTAINERD, else "containerd" from PATH.
	Binary string
	// CNIBinDirs are the CNI plugin directories; default /usr/lib/cni (and /opt/cni/bin if present).
	CNIBinDirs []string
	// CNIConfDir is the CNI config directory containerd watches; default <Dir>/net.d.
	CNIConfDir string
	// ConfList, if set, is written as <CNIConfDir>/10-nodekit-test.conflist instead of the default
	// bridge network. It may use the placeholders described on DefaultConfList; Runtime.Bridge and
	// Runtime.Subnet are set (and the bridge deleted on Close) when it uses them.
	ConfList []byte
	// NoNetwork writes no CNI config at all: the caller writes one into CNIConfDir later (containerd
	// reloads the directory when it changes). Pods fail to start until then.
	NoNetwork bool
	// RestartBackoff, if set, is the supervisor's delay before every restart of a killed containerd
	// (containerd.Config.RestartBackoff and MaxRestartBackoff; default 1 s doubling to 30 s): tests
	// killing it often set it small.
	RestartBackoff time.Duration
	// CgroupDriver is runc's cgroup driver, "cgroupfs" or "systemd"; default containerd.DetectCgroupDriver
	// (systemd on a cgroup v2 host under systemd, else cgroupfs).
	CgroupDriver string
	// SkipImport leaves the image store empty (no bundled images, not even the pause image).
	SkipImport bool
	// Logger receives the supervisor's log lines (containerd's own output goes to containerd.log in the
	// runtime's directory); default: errors only, on stderr.
	Logger *slog.Logger
}

// Runtime is a running private containerd.
type Runtime struct {
	// Supervisor is the nodekit supervisor running this containerd (Version, PID, Params...).
	Supervisor *containerd.Supervisor
	// CRI is the connected CRI client (RuntimeService: CRI.Runtime(), ImageService: CRI.Image()).
	CRI *cri.Client
	// Dir is the private directory holding config, root, state, socket, CNI config and pod logs.
	Dir string
	// CNIConfDir is the CNI config directory containerd loads its network from.
	CNIConfDir string
	// Bridge and Subnet describe the network ("nkt" + 8 hex chars, "10.213.N.0/24"); empty with
	// NoNetwork or a ConfList without the placeholders.
	Bridge, Subnet string
	// nodekitNetwork is set when the network is nodekit-cni's (NodekitConfList): Close then removes the
	// host-level rules nodekit-cni keeps per network (masquerade and hostPort chains), which outlive
	// the pods.
	nodekitNetwork bool
	// Images are the references imported at start.
	Images []string

	subnetLock *os.File
	ownerLock  *os.File // flock on <Dir>/.owner while this process owns Dir (see reapStale)
}

// Endpoint is the CRI endpoint, "unix:///…/containerd.sock".
func (r *Runtime) Endpoint() string { return r.Supervisor.Endpoint() }

// Address is containerd's socket path (for the containerd client, e.g. containerd.NewImporter).
func (r *Runtime) Address() string { return r.Supervisor.Address() }

// Start is New for a test: it fails t on error and registers Close with t.Cleanup (reporting cleanup
// errors through t.Errorf).
func Start(t testing.TB, opts Options) *Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a real containerd needs root")
	}
	r, err := New(opts)
	if err != nil {
		t.Fatalf("starting containerd: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("containerd cleanup: %v", err)
		}
	})
	return r
}

// New starts a private containerd (see the package doc). Close removes everything it made; on error
// New has already cleaned up.
func New(opts Options) (_ *Runtime, err error) {
	reapStale()
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	r := &Runtime{Dir: dir, CNIConfDir: opts.CNIConfDir}
	if r.ownerLock, err = lockOwner(dir, false); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.Close())
		}
	}()
	if r.CNIConfDir == "" {
		r.CNIConfDir = filepath.Join(dir, "net.d")
	}
	if err := os.MkdirAll(r.CNIConfDir, 0o755); err != nil {
		return nil, err
	}
	if err := r.writeNetwork(opts); err != nil {
		return nil, err
	}
	binary := opts.Binary
	if binary == "" {
		binary = os.Getenv(EnvBinary)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sup, err := containerd.New(ctx, containerd.Config{
		Dir: dir, Binary: binary, CNIBinDirs: opts.CNIBinDirs, CNIConfDir: r.CNIConfDir, CgroupDriver: opts.CgroupDriver,
		Logger: logger.With("containerd_dir", dir), StopTimeout: 10 * time.Second, RestartBackoff: opts.RestartBackoff, MaxRestartBackoff: opts.RestartBackoff,
	})
	if err != nil {
		return nil, err
	}
	r.Supervisor = sup
	if err := sup.Start(ctx); err != nil {
		return nil, err
	}
	r.CRI = sup.Client()
	if opts.SkipImport {
		return r, nil
	}
	imgDir, err := BuildImages()
	if err != nil {
		return nil, err
	}
	im, err := containerd.NewImporter(sup.Address())
	if err != nil {
		return nil, err
	}
	defer im.Close()
	imported, err := im.ImportDir(ctx, imgDir, nil)
	if err != nil {
		return nil, err
	}
	for _, img := range imported {
		r.Images = append(r.Images, img.Name)
	}
	return r, nil
}

// DefaultConfList is the default network: Debian's reference bridge plugin with host-local IPAM (its
// state kept under the runtime dir). containerd's CRI plugin adds the loopback plugin by itself. The
// placeholders BRIDGE, SUBNET and IPAMDIR are replaced for each runtime (in Options.ConfList too).
const DefaultConfList = `{
  "cniVersion": "1.0.0",
  "name": "nodekit-test-BRIDGE",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "IPAMDIR"
      }
    }
  ]
}
`

// writeNetwork reserves a bridge name and subnet and writes the CNI config.
func (r *Runtime) writeNetwork(opts Options) error {
	if opts.NoNetwork {
		return nil
	}
	var b [4]byte
	rand.Read(b[:])
	bridge := "nkt" + hex.EncodeToString(b[:])
	subnet, lock, err := reserveSubnet()
	if err != nil {
		return err
	}
	r.subnetLock = lock
	s := string(opts.ConfList)
	if opts.ConfList == nil {
		s = DefaultConfList
	}
	if strings.Contains(s, "BRIDGE") {
		r.Bridge = bridge
	}
	r.nodekitNetwork = strings.Contains(s, nodekitNetworkPrefix+"BRIDGE")
	if strings.Contains(s, "SUBNET") {
		r.Subnet = subnet
	}
	s = strings.NewReplacer("BRIDGE", bridge, "SUBNET", subnet, "IPAMDIR", filepath.Join(r.Dir, "ipam")).Replace(s)
	var probe map[string]any
	if err := json.Unmarshal([]byte(s), &probe); err != nil {
		return fmt.Errorf("CNI conflist is not JSON: %w", err)
	}
	return os.WriteFile(filepath.Join(r.CNIConfDir, "10-nodekit-test.conflist"), []byte(s), 0o644)
}

// reserveSubnet picks a free 10.213.N.0/24: one no host interface uses, locked (flock on
// $TMPDIR/nodekit-subnets/10.213.N.lock) against concurrent test binaries until Close.
func reserveSubnet() (string, *os.File, error) {
	lockDir := filepath.Join(os.TempDir(), "nodekit-subnets")
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return "", nil, err
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return "", nil, err
	}
	start, _ := rand.Int(rand.Reader, big.NewInt(256))
	for i := 0; i < 256; i++ {
		n := (int(start.Int64()) + i) % 256
		_, ipnet, _ := net.ParseCIDR(fmt.Sprintf("10.213.%d.0/24", n))
		inUse := false
		for _, a := range addrs {
			if ipnet.Contains(a.IP) {
				inUse = true
			}
		}
		if inUse {
			continue
		}
		f, err := os.OpenFile(filepath.Join(lockDir, fmt.Sprintf("10.213.%d.lock", n)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return "", nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		return ipnet.String(), f, nil
	}
	return "", nil, errors.New("no free 10.213.N.0/24 subnet for the test network")
}

// Close removes everything: all pods and containers through CRI (which tears down their netns and
// veths), then containerd (SIGTERM to its PID, SIGKILL after 10 s), mounts left under its dir, the
// bridge, and the directory. It is safe to call twice; errors are joined.
func (r *Runtime) Close() error {
	var errs []error
	if r.Supervisor != nil {
		errs = append(errs, cleanupRuntime(r.Supervisor))
		r.Supervisor = nil
	}
	if r.Dir != "" {
		errs = append(errs, containerd.UnmountAll(r.Dir))
	}
	if r.Bridge != "" {
		if link, err := netlink.LinkByName(r.Bridge); err == nil {
			errs = append(errs, netlink.LinkDel(link))
		}
		if r.nodekitNetwork {
			errs = append(errs, teardownNodekitRules(nodekitNetworkPrefix+r.Bridge, r.Subnet))
		}
	}
	if r.ownerLock != nil {
		r.ownerLock.Close()
		r.ownerLock = nil
	}
	if r.subnetLock != nil {
		r.subnetLock.Close() // releases the flock
		r.subnetLock = nil
	}
	if r.Dir != "" {
		errs = append(errs, os.RemoveAll(r.Dir))
		r.Dir = ""
	}
	return errors.Join(errs...)
}

// cleanupRuntime removes every pod of sup's containerd and stops it. When that fails or shims of this
// containerd are still alive (it was down or restarting, or a test stopped it with pods running), it
// starts containerd once more on the same directories and cleans up through it, so no shim, container,
// netns or veth outlives the test.
func cleanupRuntime(sup *containerd.Supervisor) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := sup.Cleanup(ctx)
	if err == nil && !processMentions(sup.Config().Address) {
		return nil
	}
	again, nerr := containerd.New(ctx, sup.Config())
	if nerr != nil {
		return errors.Join(err, nerr)
	}
	if serr := again.Start(ctx); serr != nil {
		return errors.Join(err, serr, again.Stop(ctx))
	}
	return again.Cleanup(ctx)
}
