// Package cnitest builds the nodekit-cni executable for tests and benchmarks and runs plugins the way a
// runtime does (through libcni), so tests exercise the real binary rather than the handlers in-process.
package cnitest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nodekit/nodekit/cni/install"
)

var build struct {
	once sync.Once
	dir  string
	err  error
}

// BinDir returns a directory holding a freshly built nodekit-cni, built once per test binary (go build
// ./cmd/nodekit-cni from the module root) and reused by every later call. The directory lives for the
// rest of the process; tests that want it removed call Cleanup from TestMain.
func BinDir() (string, error) {
	build.once.Do(func() {
		build.dir, build.err = buildPlugin()
	})
	return build.dir, build.err
}

// Cleanup removes the built plugin's directory, if any.
func Cleanup() {
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
}

func buildPlugin() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "nodekit-cni-build-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(tmp, "build", "nodekit-cni")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go") // the toolchain that built this test binary
	}
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", out, "./cmd/nodekit-cni")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("go build ./cmd/nodekit-cni: %v\n%s", err, b)
	}
	binDir := filepath.Join(tmp, "bin")
	if _, err := install.Install(out, binDir); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return binDir, nil
}

func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cnitest: cannot locate the source tree")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..")), nil
}

// Runtime is the part of a container runtime that calls CNI: libcni over a list of bin dirs and a parsed
// conflist.
type Runtime struct {
	CNI  *libcni.CNIConfig
	List *libcni.NetworkConfigList
}

// NewRuntime parses conflist and searches binDirs for plugins; libcni caches ADD results in cacheDir.
func NewRuntime(conflist []byte, cacheDir string, binDirs ...string) (*Runtime, error) {
	l, err := libcni.ConfListFromBytes(conflist)
	if err != nil {
		return nil, err
	}
	return &Runtime{CNI: libcni.NewCNIConfigWithCacheDir(binDirs, cacheDir, nil), List: l}, nil
}

// Attachment names one pod interface: CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, plus capability args.
func Attachment(containerID, netnsPath, ifName string, capArgs map[string]interface{}) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: containerID, NetNS: netnsPath, IfName: ifName, CapabilityArgs: capArgs}
}

// Add, Del, Check and GC run the list as a runtime would. Plugins inherit the network namespace of the
// calling OS thread: call them inside ns.Do to act on a simulated node.
func (r *Runtime) Add(ctx context.Context, rt *libcni.RuntimeConf) (*current.Result, error) {
	res, err := r.CNI.AddNetworkList(ctx, r.List, rt)
	if err != nil {
		return nil, err
	}
	return current.GetResult(res)
}

// Del runs DEL over the list.
func (r *Runtime) Del(ctx context.Context, rt *libcni.RuntimeConf) error {
	return r.CNI.DelNetworkList(ctx, r.List, rt)
}

// Check runs CHECK over the list (the cached result of the ADD is its prevResult).
func (r *Runtime) Check(ctx context.Context, rt *libcni.RuntimeConf) error {
	return r.CNI.CheckNetworkList(ctx, r.List, rt)
}

// GC runs GC with the given valid attachments.
func (r *Runtime) GC(ctx context.Context, valid []*libcni.RuntimeConf) error {
	var v []types.GCAttachment
	for _, rt := range valid {
		v = append(v, types.GCAttachment{ContainerID: rt.ContainerID, IfName: rt.IfName})
	}
	return r.CNI.GCNetworkList(ctx, r.List, &libcni.GCArgs{ValidAttachments: v})
}

// DecodeError parses a plugin's stdout as a CNI error result (CNI spec 1.1.0 §"Error"): code, msg and
// details must be present as the spec requires.
func DecodeError(stdout []byte) (*types.Error, error) {
	var e types.Error
	if err := json.Unmarshal(stdout, &e); err != nil {
		return nil, err
	}
	if e.Code == 0 || e.Msg == "" {
		return nil, fmt.Errorf("not an error result: %s", stdout)
	}
	return &e, nil
}
